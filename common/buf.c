#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gq_buf_init(struct gq_buf *b, size_t max)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void gq_buf_release(struct gq_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void gq_buf_reset(struct gq_buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

static int grow(struct gq_buf *b, size_t need)
{
    size_t ncap;
    char *np;
    if (need > b->max)
        return GQ_ELIMIT;
    if (need + 1 <= b->cap)
        return GQ_OK;
    ncap = b->cap ? b->cap : 64;
    while (ncap < need + 1)
        ncap *= 2;
    if (ncap > b->max + 1)
        ncap = b->max + 1;
    np = realloc(b->p, ncap);
    if (!np)
        return GQ_ENOMEM;
    b->p = np;
    b->cap = ncap;
    return GQ_OK;
}

int gq_buf_append(struct gq_buf *b, const void *data, size_t n)
{
    int rc;
    if (n > b->max || b->len > b->max - n)
        return GQ_ELIMIT;
    rc = grow(b, b->len + n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return GQ_OK;
}

int gq_buf_puts(struct gq_buf *b, const char *s)
{
    return gq_buf_append(b, s, strlen(s));
}

int gq_buf_printf(struct gq_buf *b, const char *fmt, ...)
{
    va_list ap, ap2;
    int n, rc;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return GQ_EINVAL;
    }
    if ((size_t)n > b->max || b->len > b->max - (size_t)n) {
        va_end(ap2);
        return GQ_ELIMIT;
    }
    rc = grow(b, b->len + (size_t)n);
    if (rc) {
        va_end(ap2);
        return rc;
    }
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
    return GQ_OK;
}

void gq_buf_consume(struct gq_buf *b, size_t n)
{
    if (n >= b->len) {
        gq_buf_reset(b);
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

char *gq_buf_detach(struct gq_buf *b)
{
    char *p = b->p;
    if (!p) {
        p = malloc(1);
        if (p)
            p[0] = '\0';
    }
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

int gq_buf_json_str(struct gq_buf *b, const char *s)
{
    int rc = gq_buf_append(b, "\"", 1);
    for (; !rc && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = gq_buf_append(b, e, 2);
        } else if (c < 0x20) {
            rc = gq_buf_printf(b, "\\u%04x", c);
        } else {
            rc = gq_buf_append(b, s, 1);
        }
    }
    if (!rc)
        rc = gq_buf_append(b, "\"", 1);
    return rc;
}
