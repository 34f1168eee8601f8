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

/* The plain decoder: a hostile object is an error here (the informer uses
 * kube_watch_event_parse_ex and skips it instead). */
int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ev, char *err,
                           size_t errlen)
{
    struct kube_skipped skip;
    int rc = kube_watch_event_parse_ex(line, len, NULL, ev, &skip, err, errlen);
    if (rc == GQ_OK && !ev->object)
        return GQ_EPARSE; /* err already says which object and why */
    return rc;
}

/* ------------------------------------------------------- raw JSON scan */

/*
 * A scanner over JSON text that finds where a value ends without building it:
 * string- and escape-aware bracket counting with an explicit depth counter (no
 * recursion, no allocation), so an object too deep or too large for cJSON can
 * still be measured, cut out of its List and named. It checks structure only;
 * cJSON parses (and validates) every range it hands out. Whitespace is every
 * byte <= 32, as cJSON skips it.
 */

static size_t sk_ws(const char *p, size_t n, size_t i)
{
    while (i < n && (unsigned char)p[i] <= 32)
        i++;
    return i;
}

/* End (exclusive) of the string at p[i] == '"'; 0 if unterminated. */
static size_t sk_string(const char *p, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if ((unsigned char)p[i] < 0x20)
            return 0; /* a raw control character (a NUL too) is no JSON string
                       * (RFC 8259 section 7); the API server escapes them */
        if (p[i] == '\\')
            i++;
        else if (p[i] == '"')
            return i + 1;
    }
    return 0;
}

/* End (exclusive) of the value at p[i]; 0 when malformed or truncated.
 * *maxdepth (may be NULL) gets the deepest nesting of objects/arrays. */
static size_t sk_value(const char *p, size_t n, size_t i, size_t *maxdepth)
{
    size_t depth = 0, md = 0, s = i;
    if (maxdepth)
        *maxdepth = 0;
    if (i >= n)
        return 0;
    if (p[i] == '"')
        return sk_string(p, n, i);
    if (p[i] != '{' && p[i] != '[') {
        while (i < n && (unsigned char)p[i] > 32 && p[i] != ',' && p[i] != '}' && p[i] != ']' &&
               p[i] != ':' && p[i] != '"' && p[i] != '{' && p[i] != '[')
            i++;
        return i > s ? i : 0;
    }
    while (i < n) {
        char ch = p[i];
        if (ch == '"') {
            i = sk_string(p, n, i);
            if (!i)
                return 0;
            continue;
        }
        if (ch == '{' || ch == '[') {
            if (++depth > md)
                md = depth;
        } else if (ch == '}' || ch == ']') {
            if (--depth == 0) {
                if (maxdepth)
                    *maxdepth = md;
                return i + 1;
            }
        }
        i++;
    }
    return 0;
}

static void sk_str(const char *p, size_t vs, size_t ve, char *out, size_t outlen);

/* A key written with escapes ("it\u0065ms") that decodes to key. */
static int key_escaped_eq(const char *p, size_t ks, size_t ke, const char *key)
{
    char k[64];
    if (!memchr(p + ks, '\\', ke - ks))
        return 0;
    sk_str(p, ks, ke, k, sizeof k);
    return strcmp(k, key) == 0;
}

/* Find member `key` (escaped keys decoded, as cJSON does) of the
 * object at p[i] == '{'. 0 found (value range in *vs, *ve), 1 absent, -1
 * malformed. The first of duplicate keys wins, as in cJSON. cs, ce may be
 * NULL; else [*cs, *ce) is what to cut so the object stays JSON without the
 * member: its key and value with the comma after it, or, for the last of
 * several, the comma before it. */
static int sk_member_span(const char *p, size_t n, size_t i, const char *key, size_t *vs, size_t *ve,
                          size_t *cs, size_t *ce)
{
    size_t kl = strlen(key), prev = 0; /* end of the previous member's value; 0 = none */
    if (i >= n || p[i] != '{')
        return -1;
    i = sk_ws(p, n, i + 1);
    if (i < n && p[i] == '}')
        return 1;
    for (;;) {
        size_t ks = i, ke, v, end;
        if (i >= n || p[i] != '"' || !(ke = sk_string(p, n, i)))
            return -1;
        i = sk_ws(p, n, ke);
        if (i >= n || p[i] != ':')
            return -1;
        v = sk_ws(p, n, i + 1);
        if (!(end = sk_value(p, n, v, NULL)))
            return -1;
        i = sk_ws(p, n, end);
        if ((ke - ks - 2 == kl && memcmp(p + ks + 1, key, kl) == 0) || key_escaped_eq(p, ks, ke, key)) {
            *vs = v;
            *ve = end;
            if (cs && ce) {
                int comma = i < n && p[i] == ',';
                *cs = comma || !prev ? ks : prev;
                *ce = comma ? sk_ws(p, n, i + 1) : end;
            }
            return 0;
        }
        if (i < n && p[i] == ',') {
            prev = end;
            i = sk_ws(p, n, i + 1);
            continue;
        }
        return i < n && p[i] == '}' ? 1 : -1;
    }
}

static int sk_member(const char *p, size_t n, size_t i, const char *key, size_t *vs, size_t *ve)
{
    return sk_member_span(p, n, i, key, vs, ve, NULL, NULL);
}

/* The object p[0..n) parsed without its metadata.managedFields; NULL when it
 * has none (or out of memory: the caller parses it whole). */
static cJSON *parse_without_managed(const char *p, size_t n)
{
    size_t s = sk_ws(p, n, 0), vs, ve, mvs, mve, cs, ce;
    if (sk_member(p, n, s, "metadata", &vs, &ve) != 0 || p[vs] != '{' ||
        sk_member_span(p, ve, vs, "managedFields", &mvs, &mve, &cs, &ce) != 0)
        return NULL;
    char *t = malloc(n - (ce - cs) + 1);
    if (!t)
        return NULL;
    memcpy(t, p, cs);
    memcpy(t + cs, p + ce, n - ce);
    cJSON *o = cJSON_ParseWithLength(t, n - (ce - cs));
    free(t);
    return o;
}

/* Copy the JSON string value p[vs..ve) (decoded) into out; "" otherwise. */
static void sk_str(const char *p, size_t vs, size_t ve, char *out, size_t outlen)
{
    cJSON *s;
    out[0] = '\0';
    if (ve <= vs || p[vs] != '"' || ve - vs > 1024)
        return;
    s = cJSON_ParseWithLength(p + vs, ve - vs);
    if (cJSON_IsString(s) && strlen(s->valuestring) < outlen)
        gq_strlcpy(out, s->valuestring, outlen);
    cJSON_Delete(s);
}

/* The string member key of the object at p[i], into out ("" when absent). */
static void sk_member_str(const char *p, size_t n, size_t i, const char *key, char *out,
                          size_t outlen)
{
    size_t vs, ve;
    out[0] = '\0';
    if (sk_member(p, n, i, key, &vs, &ve) == 0)
        sk_str(p, vs, ve, out, outlen);
}

const char *kube_skip_reason_name(enum kube_skip_reason r)
{
    switch (r) {
    case KUBE_SKIP_TOO_LARGE: return "too_large";
    case KUBE_SKIP_TOO_DEEP: return "too_deep";
    case KUBE_SKIP_INVALID: return "invalid";
    }
    return "invalid";
}

int kube_object_scan(const char *p, size_t n, struct kube_skipped *out)
{
    size_t i = sk_ws(p, n, 0), vs, ve;
    memset(out, 0, sizeof *out);
    out->bytes = n;
    if (!sk_value(p, n, i, &out->depth) || p[i] != '{') {
        out->depth = 0;
        return GQ_ENOTFOUND;
    }
    sk_member_str(p, n, i, "kind", out->kind, sizeof out->kind);
    if (sk_member(p, n, i, "metadata", &vs, &ve) == 0 && p[vs] == '{') {
        sk_member_str(p, ve, vs, "name", out->name, sizeof out->name);
        sk_member_str(p, ve, vs, "namespace", out->namespace_, sizeof out->namespace_);
        sk_member_str(p, ve, vs, "uid", out->uid, sizeof out->uid);
        sk_member_str(p, ve, vs, "resourceVersion", out->resource_version,
                      sizeof out->resource_version);
    }
    if (sk_member(p, n, i, "status", &vs, &ve) == 0 && p[vs] == '{')
        sk_member_str(p, ve, vs, "state", out->state, sizeof out->state);
    return out->name[0] ? GQ_OK : GQ_ENOTFOUND;
}

/*
 * Decode one object's text p[0..n) unless it is hostile. Returns the object
 * (caller owns) or NULL with *s filled (reason, detail, scanned fields).
 */
static cJSON *take_object(const char *p, size_t n, const struct kube_parse_opts *po, enum kube_event_type type,
                          struct kube_skipped *s)
{
    cJSON *o = NULL;
    size_t depth = 0, max_object = po ? po->max_object : 0;
    enum kube_skip_reason why;
    char key[600];
    if (!(max_object && n > max_object))
        sk_value(p, n, sk_ws(p, n, 0), &depth);
    if (max_object && n > max_object) {
        why = KUBE_SKIP_TOO_LARGE;
    } else if (depth >= CJSON_NESTING_LIMIT) {
        why = KUBE_SKIP_TOO_DEEP;
    } else {
        o = po && po->drop_managed_fields ? parse_without_managed(p, n) : NULL;
        if (!o)
            o = cJSON_ParseWithLength(p, n);
        if (cJSON_IsObject(o) && kube_object_key(o, key, sizeof key) == GQ_OK)
            return o;
        cJSON_Delete(o);
        why = KUBE_SKIP_INVALID;
    }
    kube_object_scan(p, n, s);
    s->reason = why;
    s->type = type;
    if (why == KUBE_SKIP_TOO_LARGE)
        snprintf(s->detail, sizeof s->detail, "%zu bytes of JSON (limit %zu)", n, max_object);
    else if (why == KUBE_SKIP_TOO_DEEP)
        snprintf(s->detail, sizeof s->detail, "nested %zu levels deep (limit %d)", s->depth,
                 CJSON_NESTING_LIMIT - 1);
    else
        snprintf(s->detail, sizeof s->detail, "%s", s->name[0] ? "not decodable as JSON"
                                                               : "not a named JSON object");
    return NULL;
}

int kube_list_page_parse(const char *body, size_t len, const struct kube_parse_opts *po, cJSON **items,
                         cJSON **metadata, kube_skip_cb on_skip, void *ud, char *err,
                         size_t errlen)
{
    size_t i = sk_ws(body, len, 0), end, vs, ve;
    int r;
    *items = *metadata = NULL;
    if (i >= len || body[i] != '{' || !(end = sk_value(body, len, i, NULL)) ||
        sk_ws(body, len, end) != len) {
        gq_errf(err, errlen, "list: response is not a JSON object");
        return GQ_EPARSE;
    }
    r = sk_member(body, len, i, "metadata", &vs, &ve);
    if (r < 0) {
        gq_errf(err, errlen, "list: malformed JSON");
        return GQ_EPARSE;
    }
    if (r == 0) {
        *metadata = cJSON_ParseWithLength(body + vs, ve - vs);
        if (!cJSON_IsObject(*metadata)) {
            cJSON_Delete(*metadata);
            *metadata = NULL;
            gq_errf(err, errlen, "list: metadata is not an object");
            return GQ_EPARSE;
        }
    }
    if (!(*items = cJSON_CreateArray()))
        goto nomem;
    r = sk_member(body, len, i, "items", &vs, &ve);
    if (r == 1 || (r == 0 && ve - vs == 4 && memcmp(body + vs, "null", 4) == 0))
        return GQ_OK;
    if (r < 0 || body[vs] != '[') {
        gq_errf(err, errlen, "list: items is not an array");
        goto fail;
    }
    for (i = sk_ws(body, ve, vs + 1); i < ve && body[i] != ']';) {
        struct kube_skipped s;
        cJSON *o;
        if (!(end = sk_value(body, ve, i, NULL))) {
            gq_errf(err, errlen, "list: malformed items");
            goto fail;
        }
        o = take_object(body + i, end - i, po, KUBE_EV_ADDED, &s);
        if (o) {
            if (!cJSON_AddItemToArray(*items, o)) {
                cJSON_Delete(o);
                goto nomem;
            }
        } else if (on_skip) {
            on_skip(&s, ud);
        }
        i = sk_ws(body, ve, end);
        if (i < ve && body[i] == ',')
            i = sk_ws(body, ve, i + 1);
        else if (i >= ve || body[i] != ']') {
            gq_errf(err, errlen, "list: malformed items");
            goto fail;
        }
    }
    return GQ_OK;
nomem:
    gq_errf(err, errlen, "list: out of memory");
    cJSON_Delete(*items);
    cJSON_Delete(*metadata);
    *items = *metadata = NULL;
    return GQ_ENOMEM;
fail:
    cJSON_Delete(*items);
    cJSON_Delete(*metadata);
    *items = *metadata = NULL;
    return GQ_EPARSE;
}

int kube_watch_event_parse_ex(const char *line, size_t len, const struct kube_parse_opts *po,
                              struct kube_watch_event *ev, struct kube_skipped *skip,
                              char *err, size_t errlen)
{
    size_t i = sk_ws(line, len, 0), end, vs, ve;
    char type[16];
    cJSON *obj;
    const cJSON *rv;
    memset(ev, 0, sizeof *ev);
    memset(skip, 0, sizeof *skip);
    if (i >= len || line[i] != '{' || !(end = sk_value(line, len, i, NULL)) ||
        sk_ws(line, len, end) != len) {
        gq_errf(err, errlen, "watch event: not a JSON object");
        return GQ_EPARSE;
    }
    if (sk_member(line, len, i, "type", &vs, &ve) != 0 || line[vs] != '"') {
        gq_errf(err, errlen, "watch event: missing field type");
        return GQ_EPARSE;
    }
    sk_str(line, vs, ve, type, sizeof type);
    if (strcmp(type, "ADDED") == 0)
        ev->type = KUBE_EV_ADDED;
    else if (strcmp(type, "MODIFIED") == 0)
        ev->type = KUBE_EV_MODIFIED;
    else if (strcmp(type, "DELETED") == 0)
        ev->type = KUBE_EV_DELETED;
    else if (strcmp(type, "BOOKMARK") == 0)
        ev->type = KUBE_EV_BOOKMARK;
    else if (strcmp(type, "ERROR") == 0)
        ev->type = KUBE_EV_ERROR;
    else {
        gq_errf(err, errlen, "watch event: unknown type %.40s", type[0] ? type : "(not a short string)");
        return GQ_EPARSE;
    }
    if (sk_member(line, len, i, "object", &vs, &ve) != 0 || line[vs] != '{') {
        gq_errf(err, errlen, "watch event %s: missing field object", type);
        return GQ_EPARSE;
    }
    if (ev->type == KUBE_EV_BOOKMARK || ev->type == KUBE_EV_ERROR) {
        obj = cJSON_ParseWithLength(line + vs, ve - vs);
        if (!cJSON_IsObject(obj)) {
            cJSON_Delete(obj);
            gq_errf(err, errlen, "watch event %s: object is not a JSON object", type);
            return GQ_EPARSE;
        }
    } else {
        obj = take_object(line + vs, ve - vs, po, ev->type, skip);
        if (!obj) {
            if (gq_strlcpy(ev->resource_version, skip->resource_version,
                           sizeof ev->resource_version) >= sizeof ev->resource_version)
                ev->resource_version[0] = '\0';
            gq_errf(err, errlen, "watch event %s: object %s%s%s skipped: %s", type,
                    skip->namespace_, skip->namespace_[0] ? "/" : "",
                    skip->name[0] ? skip->name : "(unnamed)", skip->detail);
            return GQ_OK;
        }
    }
    ev->object = obj;
    if (ev->type == KUBE_EV_ERROR) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        /* an HTTP status code; anything outside 0..999 (or not a number) is no code,
         * never a float-to-integer overflow */
        ev->code = cJSON_IsNumber(code) && code->valuedouble >= 0 && code->valuedouble < 1000
                       ? (long)code->valuedouble
                       : 0;
        return GQ_OK;
    }
    rv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                          "resourceVersion");
    if (cJSON_IsString(rv)) {
        if (gq_strlcpy(ev->resource_version, rv->valuestring, sizeof ev->resource_version) >=
            sizeof ev->resource_version) {
            gq_errf(err, errlen, "watch event: resourceVersion too long");
            kube_watch_event_release(ev);
            return GQ_EPARSE;
        }
    } else if (ev->type == KUBE_EV_BOOKMARK) {
        gq_errf(err, errlen, "watch event BOOKMARK: missing field metadata.resourceVersion");
        kube_watch_event_release(ev);
        return GQ_EPARSE;
    }
    return GQ_OK;
}

/* ---------------------------------------------------------------- prune */

/* Open addressing, linear probing, load at most one half. */
static struct {
    char **slot;
    size_t cap, n;
} intern_tab;

/* The slot of s in slot[cap]: where it is, or the empty one it goes to. */
static size_t intern_probe(char *const *slot, size_t cap, const char *s)
{
    size_t i = (size_t)gq_hash_str(s) & (cap - 1);
    while (slot[i] && strcmp(slot[i], s))
        i = (i + 1) & (cap - 1);
    return i;
}

const char *kube_intern(const char *s)
{
    size_t len = strlen(s);
    if (len > 63)
        return NULL;
    if (intern_tab.n < KUBE_INTERN_MAX && 2 * (intern_tab.n + 1) > intern_tab.cap) {
        /* room for one more at load <= 1/2 (the first call allocates) */
        size_t ncap = intern_tab.cap ? intern_tab.cap * 2 : 1024;
        char **ns = calloc(ncap, sizeof(char *));
        if (!ns)
            return NULL;
        for (size_t k = 0; k < intern_tab.cap; k++)
            if (intern_tab.slot[k])
                ns[intern_probe(ns, ncap, intern_tab.slot[k])] = intern_tab.slot[k];
        free(intern_tab.slot);
        intern_tab.slot = ns;
        intern_tab.cap = ncap;
    }
    size_t i = intern_probe(intern_tab.slot, intern_tab.cap, s);
    if (intern_tab.slot[i])
        return intern_tab.slot[i];
    if (intern_tab.n >= KUBE_INTERN_MAX)
        return NULL;
    char *c = malloc(len + 1);
    if (!c)
        return NULL;
    memcpy(c, s, len + 1);
    intern_tab.slot[i] = c;
    intern_tab.n++;
    return c;
}

void kube_intern_names(cJSON *o)
{
    for (cJSON *c = o ? o->child : NULL; c; c = c->next) {
        if (c->string && !(c->type & cJSON_StringIsConst)) {
            const char *k = kube_intern(c->string);
            if (k) {
                cJSON_free(c->string);
                c->string = (char *)k;
                c->type |= cJSON_StringIsConst;
            }
        }
        if (c->child)
            kube_intern_names(c);
    }
}

static void prune_common(cJSON *obj)
{
    cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(md, "managedFields");
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(md, "annotations"),
                                            "kubectl.kubernetes.io/last-applied-configuration");
}

void kube_prune_common(cJSON *obj)
{
    prune_common(obj);
    kube_intern_names(obj);
}

/* Delete every member of o whose name is not in keep (NULL-terminated). */
static void keep_only(cJSON *o, const char *const *keep)
{
    cJSON *c, *next;
    if (!cJSON_IsObject(o))
        return;
    for (c = o->child; c; c = next) {
        int k = 0;
        next = c->next;
        while (keep[k] && (!c->string || strcmp(keep[k], c->string) != 0))
            k++;
        if (!keep[k])
            cJSON_Delete(cJSON_DetachItemViaPointer(o, c));
    }
}

/* Delete every member of o whose name does not start with prefix. */
static void keep_prefix(cJSON *o, const char *prefix)
{
    cJSON *c, *next;
    size_t pl = strlen(prefix);
    if (!cJSON_IsObject(o))
        return;
    for (c = o->child; c; c = next) {
        next = c->next;
        if (!c->string || strncmp(c->string, prefix, pl) != 0)
            cJSON_Delete(cJSON_DetachItemViaPointer(o, c));
    }
}

void kube_prune_pod(cJSON *obj)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};
    static const char *const meta[] = {"name", "namespace", "uid", "resourceVersion", "deletionTimestamp",
                                       "deletionGracePeriodSeconds", "labels", "annotations",
                                       "ownerReferences", NULL};
    static const char *const ref[] = {"uid", NULL};
    static const char *const spec[] = {"nodeName", "overhead", "containers", "initContainers",
                                       NULL};
    static const char *const ctr[] = {"name", "resources", NULL};
    static const char *const status[] = {"phase", "reason", NULL};
    cJSON *sp, *c;
    if (!cJSON_IsObject(obj))
        return;
    cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    keep_only(obj, top);
    keep_only(md, meta);
    keep_prefix(cJSON_GetObjectItemCaseSensitive(md, "labels"), "gangq.io/");
    keep_prefix(cJSON_GetObjectItemCaseSensitive(md, "annotations"), "gangq.io/");
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(md, "ownerReferences"))
        keep_only(c, ref); /* an owner is matched by uid */
    sp = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    keep_only(sp, spec);
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(sp, "containers"))
        keep_only(c, ctr);
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(sp, "initContainers"))
        keep_only(c, ctr);
    keep_only(cJSON_GetObjectItemCaseSensitive(obj, "status"), status);
    const char *ph = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "status"), "phase"));
    if (ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"))) {
        /* a terminated pod holds no resources: its requests are never read */
        cJSON_DeleteItemFromObjectCaseSensitive(sp, "containers");
        cJSON_DeleteItemFromObjectCaseSensitive(sp, "initContainers");
        cJSON_DeleteItemFromObjectCaseSensitive(sp, "overhead");
    }
    kube_intern_names(obj);
}

void kube_prune_node(cJSON *obj)
{
    prune_common(obj);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "status"),
                                            "images");
    kube_intern_names(obj);
}

/* ---------------------------------------------------------------- pack */

/* Nodes below o and the bytes of their value strings; -1 when a member name
 * is not interned (it would live in the block, and a cJSON_Duplicate copy
 * keeps a const name's pointer) or a node is a reference. */
static int pack_measure(const cJSON *o, size_t *nodes, size_t *bytes)
{
    for (const cJSON *c = o->child; c; c = c->next) {
        if ((c->string && !(c->type & cJSON_StringIsConst)) || (c->type & cJSON_IsReference))
            return -1;
        (*nodes)++;
        if (c->valuestring)
            *bytes += strlen(c->valuestring) + 1;
        if (c->child && pack_measure(c, nodes, bytes))
            return -1;
    }
    return 0;
}

/* Copy o's children below dst (already a copy of o) from the block's next
 * free node and string byte. cJSON's lists: next ends at NULL, the first
 * child's prev is the last child. */
static void pack_copy(const cJSON *o, cJSON *dst, cJSON **node, char **str)
{
    cJSON *first = NULL, *prev = NULL;
    for (const cJSON *c = o->child; c; c = c->next) {
        cJSON *n = (*node)++;
        *n = *c;
        n->next = n->child = NULL;
        n->prev = prev;
        if (c->valuestring) {
            size_t l = strlen(c->valuestring) + 1;
            memcpy(*str, c->valuestring, l);
            n->valuestring = *str;
            *str += l;
        }
        if (prev)
            prev->next = n;
        else
            first = n;
        prev = n;
        if (c->child)
            pack_copy(c, n, node, str);
    }
    dst->child = first;
    if (first)
        first->prev = prev;
}

cJSON *kube_pack(cJSON *obj)
{
    size_t nodes = 1, bytes = 0;
    if (!cJSON_IsObject(obj) || obj->string || kube_packed(obj) || pack_measure(obj, &nodes, &bytes))
        return obj;
    if (nodes > SIZE_MAX / sizeof(cJSON) / 2)
        return obj;
    cJSON *blk = malloc(nodes * sizeof(cJSON) + bytes);
    if (!blk)
        return obj;
    cJSON *node = blk + 1;
    char *str = (char *)(blk + nodes);
    *blk = *obj;
    blk->next = blk->prev = NULL;
    pack_copy(obj, blk, &node, &str);
    /* cJSON_Delete(blk) must free the block alone: not its children (a
     * reference's are not freed) and not a name (a const one is not) */
    blk->type |= cJSON_IsReference | cJSON_StringIsConst;
    cJSON_Delete(obj);
    return blk;
}

int kube_packed(const cJSON *obj)
{
    return obj && (obj->type & cJSON_IsReference) && (obj->type & cJSON_StringIsConst) && cJSON_IsObject(obj);
}

/* ---------------------------------------------------------------- arena */

#define ARENA_CHUNK_MIN ((size_t)64 * 1024)
#define ARENA_KEEP_MAX ((size_t)1024 * 1024) /* a bigger chunk is freed at the next begin */

struct achunk {
    struct achunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

static _Thread_local struct achunk *ar_head; /* newest first */
static _Thread_local int ar_active;
static int ar_hooked;

int kube_arena_owns(const void *p)
{
    const unsigned char *q = p;
    for (const struct achunk *c = ar_head; c; c = c->next)
        if (q >= c->data && q < c->data + c->cap)
            return 1;
    return 0;
}

static void *ar_malloc(size_t n)
{
    if (!ar_active)
        return malloc(n);
    if (n > SIZE_MAX / 2)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    if (!ar_head || ar_head->cap - ar_head->used < n) {
        size_t cap = ar_head ? ar_head->cap * 2 : ARENA_CHUNK_MIN;
        if (cap < n)
            cap = n;
        struct achunk *c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = ar_head;
        ar_head = c;
    }
    void *p = ar_head->data + ar_head->used;
    ar_head->used += n;
    return p;
}

static void ar_free(void *p)
{
    if (p && !kube_arena_owns(p))
        free(p);
}

int kube_arena_begin(void)
{
    if (ar_active)
        return 0;
    if (!ar_hooked) {
        cJSON_Hooks h = {ar_malloc, ar_free};
        cJSON_InitHooks(&h);
        ar_hooked = 1;
    }
    /* nothing of the last use is alive: keep one chunk (the newest, the
     * largest) unless it is larger than worth keeping */
    if (ar_head) {
        for (struct achunk *c = ar_head->next, *nx; c; c = nx) {
            nx = c->next;
            free(c);
        }
        ar_head->next = NULL;
        if (ar_head->cap > ARENA_KEEP_MAX) {
            free(ar_head);
            ar_head = NULL;
        } else {
            ar_head->used = 0;
        }
    }
    ar_active = 1;
    return 1;
}

void kube_arena_end(void)
{
    ar_active = 0;
}

/* 1 when o or one of its later siblings, or anything below them, lies in
 * the arena. */
static int list_in_arena(const cJSON *o)
{
    for (; o; o = o->next) {
        if (kube_arena_owns(o) || (o->string && kube_arena_owns(o->string)) ||
            (o->valuestring && kube_arena_owns(o->valuestring)) || list_in_arena(o->child))
            return 1;
    }
    return 0;
}

int kube_arena_holds(const cJSON *obj)
{
    return obj && (kube_arena_owns(obj) || (obj->string && kube_arena_owns(obj->string)) ||
                   (obj->valuestring && kube_arena_owns(obj->valuestring)) || list_in_arena(obj->child));
}

cJSON *kube_arena_settle(cJSON *obj)
{
    if (!obj || !ar_head)
        return obj;
    if (kube_packed(obj) ? !kube_arena_owns(obj) : !kube_arena_holds(obj))
        return obj; /* one heap block, or a tree wholly on the heap */
    int was = ar_active;
    ar_active = 0; /* the copy comes from the heap */
    cJSON *out = cJSON_Duplicate(obj, 1);
    cJSON_Delete(obj);
    ar_active = was;
    return out;
}

cJSON *kube_keep_object(cJSON *obj, void (*prune)(cJSON *obj))
{
    if (obj && prune)
        prune(obj);
    return kube_arena_settle(kube_pack(obj));
}
