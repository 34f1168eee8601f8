#include "gq.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

const char *gq_strerror(int rc)
{
    switch (rc) {
    case GQ_OK: return "ok";
    case GQ_ENOMEM: return "out of memory";
    case GQ_EINVAL: return "invalid input";
    case GQ_EIO: return "I/O error";
    case GQ_ENOTFOUND: return "not found";
    case GQ_ECONFLICT: return "conflict";
    case GQ_ELIMIT: return "limit exceeded";
    case GQ_ECORRUPT: return "corrupt data";
    case GQ_EVERSION: return "unsupported version";
    case GQ_EBUSY: return "busy";
    case GQ_ETIMEOUT: return "timed out";
    case GQ_EHTTP: return "unexpected HTTP status";
    case GQ_EGONE: return "gone (resource version too old)";
    case GQ_EPARSE: return "parse error";
    case GQ_EFULL: return "disk full";
    default: return "unknown error";
    }
}

void gq_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int gq_parse_i64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0, lim;
    if (!s)
        return GQ_EINVAL;
    if (len == (size_t)-1)
        len = strlen(s);
    if (len == 0)
        return GQ_EINVAL;
    if (s[0] == '-' || s[0] == '+') {
        neg = s[0] == '-';
        i = 1;
        if (len == 1)
            return GQ_EINVAL;
    }
    lim = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    for (; i < len; i++) {
        unsigned d;
        if (s[i] < '0' || s[i] > '9')
            return GQ_EINVAL;
        d = (unsigned)(s[i] - '0');
        if (v > (lim - d) / 10)
            return GQ_EINVAL;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return GQ_OK;
}

size_t gq_strlcpy(char *dst, const char *src, size_t dstlen)
{
    size_t n = strlen(src);
    if (dstlen) {
        size_t c = n < dstlen - 1 ? n : dstlen - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return n;
}
