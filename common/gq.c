#include "gq.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

int gq_parse_duration(const char *s, double *seconds)
{
    double total = 0;
    int parts = 0;
    if (!s || !*s)
        return GQ_EINVAL;
    while (*s) {
        double v = 0, scale = 0.1, mul;
        const char *start = s;
        while (*s >= '0' && *s <= '9' && v < 1e15)
            v = v * 10 + (*s++ - '0');
        if (*s == '.') {
            s++;
            while (*s >= '0' && *s <= '9') {
                v += (*s++ - '0') * scale;
                scale /= 10;
            }
        }
        if (s == start || (s == start + 1 && *start == '.') || (*s >= '0' && *s <= '9'))
            return GQ_EINVAL;
        if (s[0] == 'm' && s[1] == 's') {
            mul = 0.001;
            s += 2;
        } else if (*s == 's' || *s == 'm' || *s == 'h' || *s == 'd') {
            mul = *s == 's' ? 1 : *s == 'm' ? 60 : *s == 'h' ? 3600 : 86400;
            s++;
        } else if (!*s && parts == 0) {
            mul = 1; /* a bare number is seconds, only on its own ("1m30" is refused) */
        } else {
            return GQ_EINVAL;
        }
        total += v * mul;
        if (total > 1e12)
            return GQ_EINVAL;
        parts++;
    }
    *seconds = total;
    return GQ_OK;
}

/* n digits at *p into *v; advances *p. */
static int digits(const char **p, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if ((*p)[i] < '0' || (*p)[i] > '9')
            return -1;
        x = x * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *v = x;
    return 0;
}

int gq_parse_rfc3339(const char *s, int lenient, double *wall)
{
    const char *p = s;
    struct tm tm = {0};
    int y, mo, d, h = 0, mi = 0, se = 0, oh = 0, om = 0, sign = 0;
    double frac = 0, scale = 0.1;
    time_t t;
    if (!s || digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
        digits(&p, 2, &d))
        return GQ_EINVAL;
    if (*p || !lenient) {
        if (*p != 'T' && !(lenient && (*p == 't' || *p == ' ')))
            return GQ_EINVAL;
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' ||
            digits(&p, 2, &se))
            return GQ_EINVAL;
        if (*p == '.') {
            p++;
            if (*p < '0' || *p > '9')
                return GQ_EINVAL;
            for (; *p >= '0' && *p <= '9'; p++) {
                frac += (*p - '0') * scale;
                scale /= 10;
            }
        }
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            sign = *p == '-' ? -1 : 1;
            p++;
            if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om))
                return GQ_EINVAL;
        } else {
            return GQ_EINVAL;
        }
        if (*p)
            return GQ_EINVAL;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || oh > 23 ||
        om > 59)
        return GQ_EINVAL;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    t = timegm(&tm);
    if (t == (time_t)-1)
        return GQ_EINVAL;
    *wall = (double)((int64_t)t - (int64_t)sign * (oh * 3600 + om * 60)) + frac;
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

struct sstr {
    size_t refs;
    char text[];
};

static struct sstr *sstr_of(const char *s)
{
    return (struct sstr *)(void *)((char *)(uintptr_t)s - offsetof(struct sstr, text));
}

char *gq_sstr_new(const char *s, size_t n)
{
    if (n > SIZE_MAX - sizeof(struct sstr) - 1)
        return NULL;
    struct sstr *b = malloc(sizeof(*b) + n + 1);
    if (!b)
        return NULL;
    b->refs = 1;
    if (n)
        memcpy(b->text, s, n);
    b->text[n] = '\0';
    return b->text;
}

const char *gq_sstr_ref(const char *s)
{
    if (s)
        sstr_of(s)->refs++;
    return s;
}

void gq_sstr_put(const char *s)
{
    if (!s)
        return;
    struct sstr *b = sstr_of(s);
    if (--b->refs == 0)
        free(b);
}

void gq_rate_init(struct gq_rate *b, double rate, double burst)
{
    b->rate = rate;
    b->burst = burst < 1 ? 1 : burst;
    b->tokens = b->burst;
    b->last_ms = 0;
}

int gq_rate_ready(struct gq_rate *b, int64_t now_ms)
{
    if (b->rate <= 0)
        return 1;
    if (b->last_ms && now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * b->rate / 1000.0;
        if (b->tokens > b->burst)
            b->tokens = b->burst;
    }
    if (!b->last_ms || now_ms > b->last_ms)
        b->last_ms = now_ms;
    return b->tokens >= 1;
}

int64_t gq_rate_wait_ms(struct gq_rate *b, int64_t now_ms)
{
    if (gq_rate_ready(b, now_ms))
        return 0;
    double ms = (1.0 - b->tokens) * 1000.0 / b->rate;
    int64_t w = (int64_t)ms;
    return w < ms || w < 1 ? w + 1 : w; /* rounded up, at least 1 */
}

int gq_rate_take(struct gq_rate *b, int64_t now_ms)
{
    if (!gq_rate_ready(b, now_ms))
        return 0;
    if (b->rate > 0)
        b->tokens -= 1;
    return 1;
}

void gq_ledger_init(struct gq_ledger *l, double cap, double debt_max)
{
    l->credit = 0;
    l->cap = cap > 0 ? cap : 0;
    l->debt_max = debt_max > 0 ? debt_max : 0;
}

void gq_ledger_credit(struct gq_ledger *l, double n)
{
    l->credit += n;
    if (l->credit > l->cap)
        l->credit = l->cap;
}

void gq_ledger_spend(struct gq_ledger *l, double n)
{
    l->credit -= n;
    if (l->credit < -l->debt_max)
        l->credit = -l->debt_max;
}

int gq_ledger_ready(const struct gq_ledger *l, struct gq_rate *floor, int64_t now_ms)
{
    return l->credit >= 1 || (floor && floor->rate > 0 && gq_rate_ready(floor, now_ms));
}

int gq_ledger_take(const struct gq_ledger *l, struct gq_rate *floor, int64_t now_ms)
{
    if (l->credit >= 1)
        return 1;
    return floor && floor->rate > 0 && gq_rate_take(floor, now_ms);
}

int64_t gq_ledger_wait_ms(const struct gq_ledger *l, struct gq_rate *floor, int64_t now_ms)
{
    if (l->credit >= 1)
        return 0;
    if (!floor || floor->rate <= 0)
        return INT64_MAX;
    return gq_rate_wait_ms(floor, now_ms);
}
