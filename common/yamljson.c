#include "yamljson.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "gq.h"

struct yctx {
    yaml_parser_t p;
    const char *name;
    char *err;
    size_t errlen;
};

static void yerr_at(struct yctx *c, yaml_mark_t m, const char *what, const char *extra)
{
    gq_errf(c->err, c->errlen, "%s:%zu:%zu: %s%s", c->name, m.line + 1, m.column + 1, what,
            extra ? extra : "");
}

static int next(struct yctx *c, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&c->p, ev)) {
        const char *prob = c->p.problem ? c->p.problem : "syntax error";
        if (c->p.error == YAML_MEMORY_ERROR) {
            gq_errf(c->err, c->errlen, "%s: out of memory", c->name);
            return GQ_ENOMEM;
        }
        if (c->p.context) {
            char extra[256];
            snprintf(extra, sizeof extra, " (%s at line %zu)", c->p.context,
                     c->p.context_mark.line + 1);
            yerr_at(c, c->p.problem_mark, prob, extra);
        } else {
            yerr_at(c, c->p.problem_mark, prob, NULL);
        }
        return GQ_EPARSE;
    }
    return GQ_OK;
}

static int is_digits(const char *s, size_t n, const char *set)
{
    size_t i;
    if (n == 0)
        return 0;
    for (i = 0; i < n; i++)
        if (!strchr(set, s[i]) || s[i] == '\0')
            return 0;
    return 1;
}

/* YAML 1.2 core float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static int is_float(const char *s, size_t n)
{
    size_t i = 0, d1 = 0, d2 = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        i++;
        d1++;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
            d2++;
        }
        if (d1 == 0 && d2 == 0)
            return 0;
    } else if (d1 == 0) {
        return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t de = 0;
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
            de++;
        }
        if (de == 0)
            return 0;
    }
    return i == n;
}

static double parse_radix(const char *s, size_t n, int radix)
{
    double v = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        int d;
        char ch = s[i];
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            d = ch - 'a' + 10;
        else
            d = ch - 'A' + 10;
        v = v * radix + d;
    }
    return v;
}

/* Resolve a plain scalar to a cJSON value per the YAML 1.2 core schema. */
static cJSON *resolve_plain(const char *s, size_t n)
{
    if (n == 0 || (n == 1 && s[0] == '~') ||
        (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4))))
        return cJSON_CreateNull();
    if (n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4)))
        return cJSON_CreateTrue();
    if (n == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5)))
        return cJSON_CreateFalse();
    if (n > 2 && s[0] == '0' && s[1] == 'x' && is_digits(s + 2, n - 2, "0123456789abcdefABCDEF"))
        return cJSON_CreateNumber(parse_radix(s + 2, n - 2, 16));
    if (n > 2 && s[0] == '0' && s[1] == 'o' && is_digits(s + 2, n - 2, "01234567"))
        return cJSON_CreateNumber(parse_radix(s + 2, n - 2, 8));
    if (is_float(s, n)) {
        char tmp[128];
        if (n < sizeof tmp) {
            memcpy(tmp, s, n);
            tmp[n] = '\0';
            return cJSON_CreateNumber(strtod(tmp, NULL));
        }
        /* absurdly long numeral: keep it as text rather than lose it */
        return NULL;
    }
    {
        size_t o = (s[0] == '-' || s[0] == '+') ? 1 : 0;
        if (n == o + 4 && s[o] == '.' &&
            (!memcmp(s + o + 1, "inf", 3) || !memcmp(s + o + 1, "Inf", 3) ||
             !memcmp(s + o + 1, "INF", 3)))
            return cJSON_CreateNumber(s[0] == '-' ? -HUGE_VAL : HUGE_VAL);
    }
    if (n == 4 && (!memcmp(s, ".nan", 4) || !memcmp(s, ".NaN", 4) || !memcmp(s, ".NAN", 4)))
        return cJSON_CreateNumber(NAN);
    return NULL; /* a string */
}

static int scalar_to_json(struct yctx *c, yaml_event_t *ev, cJSON **out)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    cJSON *v = NULL;
    if (memchr(s, '\0', n)) {
        yerr_at(c, ev->start_mark, "scalar contains a NUL character", NULL);
        return GQ_EPARSE;
    }
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        !(tag && (!strcmp(tag, YAML_STR_TAG) || !strcmp(tag, "!")))) {
        v = resolve_plain(s, n);
        if (v) {
            *out = v;
            return GQ_OK;
        }
    }
    v = cJSON_CreateString(s);
    if (!v) {
        gq_errf(c->err, c->errlen, "%s: out of memory", c->name);
        return GQ_ENOMEM;
    }
    *out = v;
    return GQ_OK;
}

static const char *anchor_of(yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_SCALAR_EVENT: return (const char *)ev->data.scalar.anchor;
    case YAML_SEQUENCE_START_EVENT: return (const char *)ev->data.sequence_start.anchor;
    case YAML_MAPPING_START_EVENT: return (const char *)ev->data.mapping_start.anchor;
    default: return NULL;
    }
}

/* Convert the node that starts with *ev (consumed here). */
static int parse_node(struct yctx *c, yaml_event_t *ev, int depth, cJSON **out)
{
    int rc = GQ_OK;
    cJSON *node = NULL;
    yaml_event_t kev, vev;
    *out = NULL;
    if (ev->type == YAML_ALIAS_EVENT || anchor_of(ev)) {
        yerr_at(c, ev->start_mark, "anchors and aliases are not supported", NULL);
        rc = GQ_EPARSE;
        goto out;
    }
    if (ev->type == YAML_SCALAR_EVENT) {
        rc = scalar_to_json(c, ev, &node);
        goto out;
    }
    if (ev->type != YAML_SEQUENCE_START_EVENT && ev->type != YAML_MAPPING_START_EVENT) {
        yerr_at(c, ev->start_mark, "unexpected YAML event", NULL);
        rc = GQ_EPARSE;
        goto out;
    }
    if (depth >= GQ_YAML_MAX_DEPTH) {
        char extra[64];
        snprintf(extra, sizeof extra, " %d", GQ_YAML_MAX_DEPTH);
        yerr_at(c, ev->start_mark, "nesting deeper than", extra);
        rc = GQ_ELIMIT;
        goto out;
    }
    node = ev->type == YAML_SEQUENCE_START_EVENT ? cJSON_CreateArray() : cJSON_CreateObject();
    if (!node) {
        rc = GQ_ENOMEM;
        goto out;
    }
    if (ev->type == YAML_SEQUENCE_START_EVENT) {
        for (;;) {
            cJSON *child = NULL;
            rc = next(c, &vev);
            if (rc)
                goto out;
            if (vev.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&vev);
                break;
            }
            rc = parse_node(c, &vev, depth + 1, &child);
            if (rc)
                goto out;
            if (!cJSON_AddItemToArray(node, child)) {
                cJSON_Delete(child);
                rc = GQ_ENOMEM;
                goto out;
            }
        }
    } else {
        for (;;) {
            cJSON *child = NULL;
            char *key = NULL;
            rc = next(c, &kev);
            if (rc)
                goto out;
            if (kev.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&kev);
                break;
            }
            if (kev.type != YAML_SCALAR_EVENT || anchor_of(&kev)) {
                yerr_at(c, kev.start_mark,
                        kev.type == YAML_SCALAR_EVENT || kev.type == YAML_ALIAS_EVENT
                            ? "anchors and aliases are not supported"
                            : "mapping keys must be scalars",
                        NULL);
                yaml_event_delete(&kev);
                rc = GQ_EPARSE;
                goto out;
            }
            if (memchr(kev.data.scalar.value, '\0', kev.data.scalar.length)) {
                yerr_at(c, kev.start_mark, "key contains a NUL character", NULL);
                yaml_event_delete(&kev);
                rc = GQ_EPARSE;
                goto out;
            }
            key = (char *)kev.data.scalar.value;
            if (cJSON_GetObjectItemCaseSensitive(node, key)) {
                char extra[96];
                snprintf(extra, sizeof extra, " \"%.80s\"", key);
                yerr_at(c, kev.start_mark, "duplicate mapping key", extra);
                yaml_event_delete(&kev);
                rc = GQ_EPARSE;
                goto out;
            }
            rc = next(c, &vev);
            if (rc) {
                yaml_event_delete(&kev);
                goto out;
            }
            rc = parse_node(c, &vev, depth + 1, &child);
            if (rc) {
                yaml_event_delete(&kev);
                goto out;
            }
            if (!cJSON_AddItemToObject(node, key, child)) {
                cJSON_Delete(child);
                yaml_event_delete(&kev);
                rc = GQ_ENOMEM;
                goto out;
            }
            yaml_event_delete(&kev);
        }
    }
out:
    yaml_event_delete(ev);
    if (rc) {
        cJSON_Delete(node);
        if (rc == GQ_ENOMEM && c->err && c->err[0] == '\0')
            gq_errf(c->err, c->errlen, "%s: out of memory", c->name);
        return rc;
    }
    *out = node;
    return GQ_OK;
}

int gq_yaml_parse_stream_lines(const char *data, size_t len, const char *name,
                               cJSON **out, int *lines, size_t maxlines,
                               char *err, size_t errlen)
{
    struct yctx c;
    yaml_event_t ev;
    cJSON *docs = NULL;
    int rc = GQ_OK, ndocs = 0;

    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    c.name = name ? name : "<input>";
    c.err = err;
    c.errlen = errlen;
    if (len > GQ_YAML_MAX_BYTES) {
        gq_errf(err, errlen, "%s: larger than %u bytes", c.name, GQ_YAML_MAX_BYTES);
        return GQ_ELIMIT;
    }
    if (!yaml_parser_initialize(&c.p)) {
        gq_errf(err, errlen, "%s: out of memory", c.name);
        return GQ_ENOMEM;
    }
    yaml_parser_set_input_string(&c.p, (const unsigned char *)data, len);
    docs = cJSON_CreateArray();
    if (!docs) {
        rc = GQ_ENOMEM;
        goto out;
    }
    for (;;) {
        rc = next(&c, &ev);
        if (rc)
            goto out;
        if (ev.type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (ev.type == YAML_STREAM_START_EVENT || ev.type == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        if (ev.type == YAML_DOCUMENT_START_EVENT) {
            cJSON *root = NULL;
            yaml_mark_t m = ev.start_mark;
            yaml_event_delete(&ev);
            if (ndocs >= GQ_YAML_MAX_DOCS) {
                yerr_at(&c, m, "too many documents", NULL);
                rc = GQ_ELIMIT;
                goto out;
            }
            rc = next(&c, &ev);
            if (rc)
                goto out;
            if (lines && (size_t)ndocs < maxlines)
                lines[ndocs] = (int)ev.start_mark.line + 1;
            rc = parse_node(&c, &ev, 0, &root);
            if (rc)
                goto out;
            if (!cJSON_AddItemToArray(docs, root)) {
                cJSON_Delete(root);
                rc = GQ_ENOMEM;
                goto out;
            }
            ndocs++;
            continue;
        }
        yerr_at(&c, ev.start_mark, "unexpected YAML event", NULL);
        yaml_event_delete(&ev);
        rc = GQ_EPARSE;
        goto out;
    }
out:
    yaml_parser_delete(&c.p);
    if (rc) {
        if (rc == GQ_ENOMEM && err && errlen && err[0] == '\0')
            gq_errf(err, errlen, "%s: out of memory", c.name);
        cJSON_Delete(docs);
        return rc;
    }
    *out = docs;
    return GQ_OK;
}

int gq_yaml_parse_stream(const char *data, size_t len, const char *name, cJSON **out,
                         char *err, size_t errlen)
{
    return gq_yaml_parse_stream_lines(data, len, name, out, NULL, 0, err, errlen);
}

int gq_yaml_parse_doc(const char *data, size_t len, const char *name, cJSON **out,
                      char *err, size_t errlen)
{
    cJSON *docs = NULL, *doc;
    int rc = gq_yaml_parse_stream(data, len, name, &docs, err, errlen);
    *out = NULL;
    if (rc)
        return rc;
    if (cJSON_GetArraySize(docs) > 1) {
        gq_errf(err, errlen, "%s: expected one YAML document, found %d",
                name ? name : "<input>", cJSON_GetArraySize(docs));
        cJSON_Delete(docs);
        return GQ_EPARSE;
    }
    if (cJSON_GetArraySize(docs) == 0) {
        cJSON_Delete(docs);
        *out = cJSON_CreateNull();
        return *out ? GQ_OK : GQ_ENOMEM;
    }
    doc = cJSON_DetachItemFromArray(docs, 0);
    cJSON_Delete(docs);
    *out = doc;
    return GQ_OK;
}

int gq_read_file(const char *path, size_t max, char **data, size_t *len,
                 char *err, size_t errlen)
{
    FILE *f = NULL;
    char *p = NULL;
    size_t n = 0, cap = 0;
    int rc = GQ_OK;

    *data = NULL;
    *len = 0;
    f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        gq_errf(err, errlen, "%s: %s", path, strerror(e));
        return e == ENOENT ? GQ_ENOTFOUND : GQ_EIO;
    }
    for (;;) {
        size_t got;
        if (n + 1 >= cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            char *np;
            if (ncap > max + 2)
                ncap = max + 2; /* one byte past max detects an oversized file */
            if (ncap <= n + 1) {
                gq_errf(err, errlen, "%s: larger than %zu bytes", path, max);
                rc = GQ_ELIMIT;
                goto out;
            }
            np = realloc(p, ncap + 1);
            if (!np) {
                gq_errf(err, errlen, "%s: out of memory", path);
                rc = GQ_ENOMEM;
                goto out;
            }
            p = np;
            cap = ncap;
        }
        got = fread(p + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                gq_errf(err, errlen, "%s: read error", path);
                rc = GQ_EIO;
                goto out;
            }
            break;
        }
        if (n > max) {
            gq_errf(err, errlen, "%s: larger than %zu bytes", path, max);
            rc = GQ_ELIMIT;
            goto out;
        }
    }
    p[n] = '\0';
out:
    fclose(f);
    if (rc) {
        free(p);
        return rc;
    }
    if (!p) {
        p = malloc(1);
        if (!p)
            return GQ_ENOMEM;
        p[0] = '\0';
    }
    *data = p;
    *len = n;
    return GQ_OK;
}

int gq_yaml_load_file_lines(const char *path, cJSON **out, int *lines, size_t maxlines, char *err,
                            size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    int rc;
    *out = NULL;
    rc = gq_read_file(path, GQ_YAML_MAX_BYTES, &data, &len, err, errlen);
    if (rc)
        return rc;
    rc = gq_yaml_parse_stream_lines(data, len, path, out, lines, maxlines, err, errlen);
    free(data);
    return rc;
}

int gq_yaml_load_file(const char *path, cJSON **out, char *err, size_t errlen)
{
    return gq_yaml_load_file_lines(path, out, NULL, 0, err, errlen);
}
