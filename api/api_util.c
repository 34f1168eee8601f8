/* Shared decode helpers, errors, enums and configuration for api/. */
#include "api_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void api_errors_init(struct api_errors *errs)
{
    errs->n = 0;
    errs->dropped = 0;
}

void api_errors_add(struct api_errors *errs, const char *path, const char *fmt, ...)
{
    va_list ap;
    struct api_error *e;
    if (!errs)
        return;
    if (errs->n >= API_MAX_ERRORS) {
        errs->dropped++;
        return;
    }
    e = &errs->e[errs->n++];
    gq_strlcpy(e->path, path ? path : "", sizeof e->path);
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

void api_error_format(const struct api_errors *errs, int i, char *buf, size_t len)
{
    if (!buf || len == 0)
        return;
    if (i < 0 || i >= errs->n) {
        buf[0] = '\0';
        return;
    }
    if (errs->e[i].path[0])
        snprintf(buf, len, "%s: %s", errs->e[i].path, errs->e[i].msg);
    else
        snprintf(buf, len, "%s", errs->e[i].msg);
}

int api_errors_find(const struct api_errors *errs, const char *path)
{
    int i;
    for (i = 0; i < errs->n; i++)
        if (!strcmp(errs->e[i].path, path))
            return i;
    return -1;
}

static const char *const class_names[API_CLASS_COUNT] = {"", "Inference", "Batch", "Training"};

const char *api_class_name(enum api_class c)
{
    return (unsigned)c < API_CLASS_COUNT ? class_names[c] : "";
}

int api_class_parse(const char *s, enum api_class *out)
{
    int i;
    for (i = 1; i < API_CLASS_COUNT; i++)
        if (!strcmp(s, class_names[i])) {
            *out = (enum api_class)i;
            return GQ_OK;
        }
    return GQ_EINVAL;
}

static const char *const state_names[] = {"",          "Queued",    "Admitted", "Running",
                                          "Suspended", "Preempted", "Succeeded", "Failed"};

const char *api_state_name(enum api_state s)
{
    return (unsigned)s < GQ_ARRAY_LEN(state_names) ? state_names[s] : "";
}

int api_state_parse(const char *s, enum api_state *out)
{
    size_t i;
    for (i = 1; i < GQ_ARRAY_LEN(state_names); i++)
        if (!strcmp(s, state_names[i])) {
            *out = (enum api_state)i;
            return GQ_OK;
        }
    return GQ_EINVAL;
}

void api_config_default(struct api_config *cfg)
{
    static const char *const lv[] = {"zone", "block", "rack", "node"};
    static const char *const lb[] = {"topology.kubernetes.io/zone", "topology.gangq.io/block",
                                     "topology.gangq.io/rack", "kubernetes.io/hostname"};
    size_t i;
    memset(cfg, 0, sizeof *cfg);
    for (i = 0; i < GQ_ARRAY_LEN(lv); i++) {
        gq_strlcpy(cfg->levels[i], lv[i], sizeof cfg->levels[i]);
        gq_strlcpy(cfg->labels[i], lb[i], sizeof cfg->labels[i]);
    }
    cfg->nlevels = (int)GQ_ARRAY_LEN(lv);
}

int api_config_level(const struct api_config *cfg, const char *name)
{
    int i;
    for (i = 0; i < cfg->nlevels; i++)
        if (!strcmp(cfg->levels[i], name))
            return i;
    return -1;
}

void api_path(char *out, size_t len, const char *base, const char *field)
{
    if (base && base[0])
        snprintf(out, len, "%s.%s", base, field);
    else
        snprintf(out, len, "%s", field);
}

void api_path_idx(char *out, size_t len, const char *base, int i)
{
    snprintf(out, len, "%s[%d]", base, i);
}

const char *api_jtype(const cJSON *v)
{
    if (!v)
        return "nothing";
    if (cJSON_IsString(v))
        return "string";
    if (cJSON_IsNumber(v))
        return "number";
    if (cJSON_IsBool(v))
        return "boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "array";
    if (cJSON_IsObject(v))
        return "object";
    return "unknown";
}

void api_fmt_num(double d, char *buf, size_t len)
{
    if (isfinite(d) && d == floor(d) && fabs(d) < 1e15)
        snprintf(buf, len, "%.0f", d);
    else
        snprintf(buf, len, "%g", d);
}

int api_get_str(struct api_errors *errs, const char *path, const cJSON *v, char *dst, size_t dstlen)
{
    size_t n;
    if (!cJSON_IsString(v) || !v->valuestring) {
        api_errors_add(errs, path, "must be a string, got %s", api_jtype(v));
        return 0;
    }
    n = strlen(v->valuestring);
    if (n >= dstlen) {
        api_errors_add(errs, path, "must be at most %zu characters, got %zu", dstlen - 1, n);
        return 0;
    }
    memcpy(dst, v->valuestring, n + 1);
    return 1;
}

int api_get_int(struct api_errors *errs, const char *path, const cJSON *v, int64_t lo, int64_t hi,
                int32_t *out)
{
    double d;
    char num[64];
    if (!cJSON_IsNumber(v)) {
        api_errors_add(errs, path, "must be an integer, got %s", api_jtype(v));
        return 0;
    }
    d = v->valuedouble;
    api_fmt_num(d, num, sizeof num);
    if (!isfinite(d) || d != floor(d)) {
        api_errors_add(errs, path, "must be an integer, got %s", num);
        return 0;
    }
    if (d < (double)INT32_MIN || d > (double)INT32_MAX) {
        api_errors_add(errs, path, "must be %lld..%lld, got %s", (long long)lo, (long long)hi, num);
        return 0;
    }
    *out = (int32_t)d;
    return 1;
}

int api_get_bool(struct api_errors *errs, const char *path, const cJSON *v, int *out)
{
    if (!cJSON_IsBool(v)) {
        api_errors_add(errs, path, "must be a boolean, got %s", api_jtype(v));
        return 0;
    }
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 1;
}

int api_expect_obj(struct api_errors *errs, const char *path, const cJSON *v)
{
    if (!cJSON_IsObject(v)) {
        api_errors_add(errs, path, "must be an object, got %s", api_jtype(v));
        return 0;
    }
    return 1;
}

int api_expect_arr(struct api_errors *errs, const char *path, const cJSON *v)
{
    if (!cJSON_IsArray(v)) {
        api_errors_add(errs, path, "must be an array, got %s", api_jtype(v));
        return 0;
    }
    return 1;
}

void api_check_fields(struct api_errors *errs, const char *path, const cJSON *obj,
                      const char *const *allowed)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, obj)
    {
        const char *const *a;
        int ok = 0;
        for (a = allowed; *a; a++)
            if (c->string && !strcmp(c->string, *a)) {
                ok = 1;
                break;
            }
        if (!ok) {
            char p[API_ERR_PATH_MAX];
            api_path(p, sizeof p, path, c->string ? c->string : "?");
            api_errors_add(errs, p, "unknown field");
        }
    }
}

static int is_alnum_lower(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int api_is_dns_label(const char *s)
{
    size_t n = strlen(s), i;
    if (n == 0 || n > 63 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
        return 0;
    for (i = 0; i < n; i++)
        if (!is_alnum_lower(s[i]) && s[i] != '-')
            return 0;
    return 1;
}

int api_is_dns_subdomain(const char *s)
{
    size_t n = strlen(s), i;
    if (n == 0 || n > 253 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
        return 0;
    for (i = 0; i < n; i++) {
        if (!is_alnum_lower(s[i]) && s[i] != '-' && s[i] != '.')
            return 0;
        if (s[i] == '.' && (!is_alnum_lower(s[i - 1]) || !is_alnum_lower(s[i + 1])))
            return 0;
    }
    return 1;
}

static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Kubernetes label value: empty, or <=63 of [A-Za-z0-9._-] starting and ending alnum. */
int api_is_label_value(const char *s)
{
    size_t n = strlen(s), i;
    if (n == 0)
        return 1;
    if (n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return 0;
    for (i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return 0;
    return 1;
}

/* [prefix/]name: prefix a DNS subdomain, name a non-empty label value. */
int api_is_label_key(const char *s)
{
    const char *slash = strchr(s, '/');
    if (slash) {
        char pre[254];
        size_t pn = (size_t)(slash - s);
        if (pn == 0 || pn >= sizeof pre)
            return 0;
        memcpy(pre, s, pn);
        pre[pn] = '\0';
        if (!api_is_dns_subdomain(pre))
            return 0;
        s = slash + 1;
    }
    return s[0] != '\0' && api_is_label_value(s);
}

void api_check_name(struct api_errors *errs, const char *path, const char *s, int label)
{
    if (label ? api_is_dns_label(s) : api_is_dns_subdomain(s))
        return;
    api_errors_add(errs, path, "must be a lowercase DNS %s (a-z, 0-9, '-'%s), got \"%.64s\"",
                   label ? "label" : "name", label ? "" : ", '.'", s);
}

int api_check_head(struct api_errors *errs, const cJSON *obj, const char *apiversion,
                   const char *kind)
{
    const cJSON *v;
    char buf[API_NAME_MAX];
    if (!cJSON_IsObject(obj)) {
        api_errors_add(errs, "", "must be a JSON object, got %s", api_jtype(obj));
        return 0;
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "apiVersion");
    if (!v)
        api_errors_add(errs, "apiVersion", "required");
    else if (api_get_str(errs, "apiVersion", v, buf, sizeof buf) && strcmp(buf, apiversion))
        api_errors_add(errs, "apiVersion", "must be \"%s\", got \"%.64s\"", apiversion, buf);
    v = cJSON_GetObjectItemCaseSensitive(obj, "kind");
    if (!v)
        api_errors_add(errs, "kind", "required");
    else if (api_get_str(errs, "kind", v, buf, sizeof buf) && strcmp(buf, kind))
        api_errors_add(errs, "kind", "must be \"%s\", got \"%.64s\"", kind, buf);
    return 1;
}

void api_decode_meta(struct api_errors *errs, const cJSON *obj, struct api_meta *m)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata"), *v;
    if (!md) {
        api_errors_add(errs, "metadata", "required");
        return;
    }
    if (!api_expect_obj(errs, "metadata", md))
        return;
    v = cJSON_GetObjectItemCaseSensitive(md, "name");
    if (!v)
        api_errors_add(errs, "metadata.name", "required");
    else if (api_get_str(errs, "metadata.name", v, m->name, sizeof m->name))
        api_check_name(errs, "metadata.name", m->name, 0);
    v = cJSON_GetObjectItemCaseSensitive(md, "namespace");
    if (v && api_get_str(errs, "metadata.namespace", v, m->namespace, sizeof m->namespace))
        api_check_name(errs, "metadata.namespace", m->namespace, 1);
    v = cJSON_GetObjectItemCaseSensitive(md, "uid");
    if (cJSON_IsString(v))
        gq_strlcpy(m->uid, v->valuestring, sizeof m->uid);
    v = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
    if (cJSON_IsString(v))
        gq_strlcpy(m->resource_version, v->valuestring, sizeof m->resource_version);
    v = cJSON_GetObjectItemCaseSensitive(md, "generation");
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 &&
        v->valuedouble < 9e15)
        m->generation = (int64_t)v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(md, "creationTimestamp");
    if (cJSON_IsString(v))
        gq_strlcpy(m->creation_timestamp, v->valuestring, sizeof m->creation_timestamp);
    v = cJSON_GetObjectItemCaseSensitive(md, "deletionTimestamp");
    m->deleting = cJSON_IsString(v) && v->valuestring[0];
}

void api_decode_selector(struct api_errors *errs, const char *path, const cJSON *v,
                         struct api_kv *kv, int *n)
{
    const cJSON *c;
    char p[API_ERR_PATH_MAX];
    *n = 0;
    if (!api_expect_obj(errs, path, v))
        return;
    if (cJSON_GetArraySize(v) > API_MAX_SELECTOR) {
        api_errors_add(errs, path, "at most %d entries, got %d", API_MAX_SELECTOR,
                       cJSON_GetArraySize(v));
        return;
    }
    cJSON_ArrayForEach(c, v)
    {
        struct api_kv *e = &kv[*n];
        api_path(p, sizeof p, path, c->string ? c->string : "?");
        if (!c->string || strlen(c->string) >= sizeof e->key || !api_is_label_key(c->string)) {
            api_errors_add(errs, p, "invalid label key");
            continue;
        }
        if (!api_get_str(errs, p, c, e->value, sizeof e->value))
            continue;
        if (!api_is_label_value(e->value)) {
            api_errors_add(errs, p, "invalid label value \"%s\"", e->value);
            continue;
        }
        gq_strlcpy(e->key, c->string, sizeof e->key);
        (*n)++;
    }
}

int api_json_parse(const char *data, size_t len, cJSON **out, struct api_errors *errs)
{
    const char *end = NULL;
    cJSON *j;
    *out = NULL;
    j = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!j) {
        size_t off = end && end >= data ? (size_t)(end - data) : 0;
        api_errors_add(errs, "", "invalid JSON at byte %zu", off);
        return GQ_EPARSE;
    }
    *out = j;
    return GQ_OK;
}

const cJSON *api_decode_envelope(struct api_errors *errs, const cJSON *obj, const char *kind,
                                 int cluster_scoped, const char *const *spec_fields,
                                 struct api_meta *meta)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};
    const cJSON *spec;

    if (!api_check_head(errs, obj, API_GROUP_VERSION, kind))
        return NULL;
    api_check_fields(errs, "", obj, top);
    api_decode_meta(errs, obj, meta);
    if (cluster_scoped && meta->namespace[0])
        api_errors_add(errs, "metadata.namespace", "must be empty: %s is cluster-scoped", kind);
    spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    if (!spec) {
        api_errors_add(errs, "spec", "required");
        return NULL;
    }
    if (!api_expect_obj(errs, "spec", spec))
        return NULL;
    api_check_fields(errs, "spec", spec, spec_fields);
    return spec;
}
