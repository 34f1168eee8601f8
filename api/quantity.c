#include "quantity.h"

#include <string.h>

#include "gq.h"

typedef unsigned __int128 u128;

#define U128_LIMIT (((u128)1) << 126)
#define MAX_DIGITS 36

int api_quantity_scaled(const char *s, int scale10, int64_t *out, char *err, size_t errlen)
{
    size_t i = 0, n;
    int neg = 0, nint = 0, nfrac = 0, sig = 0, bin = 0;
    long dexp = 0;
    int frac_digits = 0; /* fraction digits folded into the mantissa */
    int lost_nonzero = 0;
    u128 m = 0, v;
    const char *suf;

    if (!s) {
        gq_errf(err, errlen, "invalid quantity: missing");
        return GQ_EINVAL;
    }
    n = strlen(s);
    if (n == 0) {
        gq_errf(err, errlen, "invalid quantity \"\": empty");
        return GQ_EINVAL;
    }
    if (n > 64) {
        gq_errf(err, errlen, "invalid quantity \"%.20s...\": longer than 64 characters", s);
        return GQ_EINVAL;
    }
    if (s[i] == '+' || s[i] == '-') {
        neg = s[i] == '-';
        i++;
    }
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, nint++) {
        if (m == 0 && s[i] == '0')
            continue;
        if (sig >= MAX_DIGITS) {
            gq_errf(err, errlen, "quantity \"%s\" is too large", s);
            return GQ_EINVAL;
        }
        m = m * 10 + (unsigned)(s[i] - '0');
        sig++;
    }
    if (i < n && s[i] == '.') {
        i++;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, nfrac++) {
            if (sig >= MAX_DIGITS) {
                if (s[i] != '0')
                    lost_nonzero = 1;
                continue;
            }
            m = m * 10 + (unsigned)(s[i] - '0');
            frac_digits++;
            if (m)
                sig++;
        }
    }
    if (nint == 0 && nfrac == 0) {
        gq_errf(err, errlen, "invalid quantity \"%s\": must start with a number", s);
        return GQ_EINVAL;
    }
    suf = s + i;
    if (*suf == '\0') {
        dexp = 0;
    } else if (suf[1] == 'i' && suf[2] == '\0' && strchr("KMGTPE", suf[0])) {
        bin = 10 * (int)(strchr("KMGTPE", suf[0]) - "KMGTPE" + 1);
    } else if (suf[1] == '\0' && strchr("numkMGTPE", suf[0])) {
        static const int exps[] = {-9, -6, -3, 3, 6, 9, 12, 15, 18};
        dexp = exps[strchr("numkMGTPE", suf[0]) - "numkMGTPE"];
    } else if (suf[0] == 'e' || suf[0] == 'E') {
        int64_t e = 0;
        const char *p = suf + 1;
        if (*p == '\0' || gq_parse_i64(p, (size_t)-1, &e) || (*p != '-' && *p != '+' && (*p < '0' || *p > '9'))) {
            gq_errf(err, errlen, "invalid quantity \"%s\": unknown suffix \"%s\"", s, suf);
            return GQ_EINVAL;
        }
        if (e > 1000 || e < -1000) {
            if (e > 0 && (m != 0 || lost_nonzero)) {
                gq_errf(err, errlen, "quantity \"%s\" is too large", s);
                return GQ_EINVAL;
            }
            e = e > 0 ? 1000 : -1000;
        }
        dexp = (long)e;
    } else {
        gq_errf(err, errlen, "invalid quantity \"%s\": unknown suffix \"%s\"", s, suf);
        return GQ_EINVAL;
    }

    /* value = m * 10^(dexp + scale10 - frac_digits) * 2^bin, rounded up */
    dexp += scale10 - frac_digits;
    v = m;
    for (; bin > 0; bin--) {
        if (v >= U128_LIMIT)
            goto overflow;
        v <<= 1;
    }
    if (dexp >= 0) {
        for (; dexp > 0 && v; dexp--) {
            if (v >= U128_LIMIT / 10)
                goto overflow;
            v *= 10;
        }
        if (lost_nonzero && !neg)
            v += 1; /* ceiling of the dropped fraction */
    } else {
        int rem = lost_nonzero;
        for (; dexp < 0 && v; dexp++) {
            if (v % 10)
                rem = 1;
            v /= 10;
        }
        if ((rem || (dexp < 0 && m)) && !neg)
            v += 1; /* ceiling; for negatives truncation toward zero is the ceiling */
    }
    if (v > (u128)INT64_MAX + (neg ? 1u : 0u))
        goto overflow;
    if (neg) {
        *out = v == (u128)INT64_MAX + 1u ? INT64_MIN : -(int64_t)v;
    } else {
        *out = (int64_t)v;
    }
    return GQ_OK;
overflow:
    gq_errf(err, errlen, "quantity \"%s\" is too large", s);
    return GQ_EINVAL;
}

int api_quantity_milli(const char *s, int64_t *out, char *err, size_t errlen)
{
    return api_quantity_scaled(s, 3, out, err, errlen);
}

int api_quantity_value(const char *s, int64_t *out, char *err, size_t errlen)
{
    return api_quantity_scaled(s, 0, out, err, errlen);
}
