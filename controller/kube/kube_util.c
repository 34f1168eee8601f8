/* kube_util.c — line cutter, backoff, time formats, paths, watch event decoding. */
#include "kube.h"
#include "kube_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double kube_mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- lines */

void kube_lines_init(struct kube_lines *l, size_t max_line)
{
    /* +1: the buffer may hold a full max-length line and its '\n' is never stored */
    gq_buf_init(&l->b, max_line + 1);
    l->scanned = 0;
    l->max_line = max_line;
}

void kube_lines_release(struct kube_lines *l)
{
    gq_buf_release(&l->b);
    l->scanned = 0;
}

void kube_lines_reset(struct kube_lines *l)
{
    gq_buf_reset(&l->b);
    l->scanned = 0;
}

static int emit_line(const char *p, size_t n, kube_line_cb cb, void *ud)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (n == 0)
        return 0;
    return cb(p, n, ud);
}

int kube_lines_feed(struct kube_lines *l, const char *data, size_t len, kube_line_cb cb,
                    void *ud)
{
    int rc = 0;
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t take = nl ? (size_t)(nl - data) : len;
        if (l->b.len == 0 && nl) {
            /* Fast path: a whole line inside this chunk, no copy. */
            if (take > l->max_line) {
                kube_lines_reset(l);
                return GQ_ELIMIT;
            }
            rc = emit_line(data, take, cb, ud);
        } else {
            if (l->b.len + take > l->max_line) {
                kube_lines_reset(l);
                return GQ_ELIMIT;
            }
            rc = gq_buf_append(&l->b, data, take);
            if (rc) {
                kube_lines_reset(l);
                return rc;
            }
            if (!nl)
                return 0;
            rc = emit_line(l->b.p, l->b.len, cb, ud);
            gq_buf_reset(&l->b);
        }
        data += take + 1;
        len -= take + 1;
        if (rc)
            return rc;
    }
    return 0;
}

/* -------------------------------------------------------------- backoff */

double kube_rand01(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return (double)(x >> 11) / 9007199254740992.0; /* 2^53 */
}

void kube_backoff_init(struct kube_backoff *b, double base, double max, uint64_t seed)
{
    b->base = base > 0 ? base : 0.5;
    b->max = max >= b->base ? max : b->base;
    b->factor = 2.0;
    b->jitter = 0.5;
    b->cur = 0;
    b->rng = seed ? seed : 0x2545f4914f6cdd1dull;
}

double kube_backoff_next(struct kube_backoff *b, double retry_after)
{
    double d;
    b->cur = b->cur <= 0 ? b->base : b->cur * b->factor;
    if (b->cur > b->max)
        b->cur = b->max;
    d = b->cur * (1.0 + b->jitter * kube_rand01(&b->rng));
    if (d > b->max)
        d = b->max;
    if (retry_after >= 0 && d < retry_after)
        d = retry_after;
    return d;
}

void kube_backoff_reset(struct kube_backoff *b)
{
    b->cur = 0;
}

double kube_parse_retry_after(const char *v)
{
    int64_t n;
    size_t len;
    if (!v)
        return -1;
    while (*v == ' ' || *v == '\t')
        v++;
    len = strlen(v);
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\r' || v[len - 1] == '\n'))
        len--;
    if (gq_parse_i64(v, len, &n) != 0 || n < 0 || n > 86400)
        return -1;
    return (double)n;
}

/* ----------------------------------------------------------------- time */

int kube_time_format_micro(double wall, char *out, size_t outlen)
{
    struct tm tm;
    time_t sec = (time_t)floor(wall);
    long usec = (long)((wall - (double)sec) * 1e6 + 0.5);
    char base[32];
    if (usec >= 1000000) {
        sec++;
        usec -= 1000000;
    }
    if (!gmtime_r(&sec, &tm))
        return GQ_EINVAL;
    if (strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        return GQ_EINVAL;
    if ((size_t)snprintf(out, outlen, "%s.%06ldZ", base, usec) >= outlen)
        return GQ_ELIMIT;
    return GQ_OK;
}

int kube_time_parse(const char *s, double *wall)
{
    return gq_parse_rfc3339(s, 0, wall);
}

/* ----------------------------------------------------------------- paths */

static int name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 253)
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              (c >= 'A' && c <= 'Z') || c == '_' || c == ':'))
            return 0;
    }
    return 1;
}

int kube_path(char *out, size_t outlen, const char *prefix, const char *ns, const char *resource,
              const char *name, const char *sub)
{
    int n;
    if (!prefix || prefix[0] != '/' || !name_ok(resource) || (ns && !name_ok(ns)) ||
        (name && !name_ok(name)) || (sub && !name_ok(sub)))
        return GQ_EINVAL;
    n = snprintf(out, outlen, "%s%s%s/%s%s%s%s%s", prefix, ns ? "/namespaces/" : "", ns ? ns : "",
                 resource, name ? "/" : "", name ? name : "", sub ? "/" : "", sub ? sub : "");
    if (n < 0 || (size_t)n >= outlen)
        return GQ_ELIMIT;
    return GQ_OK;
}

int kube_url_escape(struct gq_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (; !rc && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            rc = gq_buf_append(b, s, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            rc = gq_buf_append(b, e, 3);
        }
    }
    return rc;
}

/* ----------------------------------------------------------- watch events */

const char *kube_event_type_name(enum kube_event_type t)
{
    switch (t) {
    case KUBE_EV_ADDED: return "ADDED";
    case KUBE_EV_MODIFIED: return "MODIFIED";
    case KUBE_EV_DELETED: return "DELETED";
    case KUBE_EV_BOOKMARK: return "BOOKMARK";
    case KUBE_EV_ERROR: return "ERROR";
    }
    return "?";
}

void kube_watch_event_release(struct kube_watch_event *ev)
{
    cJSON_Delete(ev->object);
    ev->object = NULL;
}

int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ev, char *err,
                           size_t errlen)
{
    cJSON *root = NULL, *obj;
    const cJSON *t, *rv;
    int rc = GQ_OK;
    memset(ev, 0, sizeof *ev);
    root = cJSON_ParseWithLength(line, len);
    if (!root || !cJSON_IsObject(root)) {
        gq_errf(err, errlen, "watch event: not a JSON object");
        rc = GQ_EPARSE;
        goto out;
    }
    t = cJSON_GetObjectItemCaseSensitive(root, "type");
    if (!cJSON_IsString(t)) {
        gq_errf(err, errlen, "watch event: missing field type");
        rc = GQ_EPARSE;
        goto out;
    }
    if (strcmp(t->valuestring, "ADDED") == 0)
        ev->type = KUBE_EV_ADDED;
    else if (strcmp(t->valuestring, "MODIFIED") == 0)
        ev->type = KUBE_EV_MODIFIED;
    else if (strcmp(t->valuestring, "DELETED") == 0)
        ev->type = KUBE_EV_DELETED;
    else if (strcmp(t->valuestring, "BOOKMARK") == 0)
        ev->type = KUBE_EV_BOOKMARK;
    else if (strcmp(t->valuestring, "ERROR") == 0)
        ev->type = KUBE_EV_ERROR;
    else {
        gq_errf(err, errlen, "watch event: unknown type %.40s", t->valuestring);
        rc = GQ_EPARSE;
        goto out;
    }
    obj = cJSON_DetachItemFromObjectCaseSensitive(root, "object");
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        gq_errf(err, errlen, "watch event %s: missing field object", t->valuestring);
        rc = GQ_EPARSE;
        goto out;
    }
    ev->object = obj;
    if (ev->type == KUBE_EV_ERROR) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        /* an HTTP status code; anything outside 0..999 (or not a number) is no code,
         * never a float-to-integer overflow */
        ev->code = cJSON_IsNumber(code) && code->valuedouble >= 0 && code->valuedouble < 1000
                       ? (long)code->valuedouble
                       : 0;
        goto out;
    }
    rv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                          "resourceVersion");
    if (cJSON_IsString(rv)) {
        if (gq_strlcpy(ev->resource_version, rv->valuestring, sizeof ev->resource_version) >=
            sizeof ev->resource_version) {
            gq_errf(err, errlen, "watch event: resourceVersion too long");
            rc = GQ_EPARSE;
            goto out;
        }
    } else if (ev->type == KUBE_EV_BOOKMARK) {
        gq_errf(err, errlen, "watch event BOOKMARK: missing field metadata.resourceVersion");
        rc = GQ_EPARSE;
        goto out;
    }
out:
    cJSON_Delete(root);
    if (rc)
        kube_watch_event_release(ev);
    return rc;
}
