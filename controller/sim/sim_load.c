/* sim_load.c — cluster and trace loaders (YAML via common/yamljson, CSV via sim_csv). */
#include "sim_load.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>
#include <cJSON.h>

#include "api.h"
#include "gq.h"
#include "sim_csv.h"
#include "yamljson.h"

#define SIM_MAX_EXPAND 1000000 /* jobs or nodes made by `count` */

/* ---- source lines: a libyaml event walk run only when reporting an error ---- */

struct ypath {
    const char *key[6]; /* map key at depth i, or NULL for a sequence index */
    long idx[6];
    int n;
};

static int ywalk(yaml_parser_t *p, yaml_event_t *ev, const struct ypath *t, int d, int matching,
                 int *best)
{
    if (ev->type == YAML_MAPPING_START_EVENT) {
        for (;;) {
            yaml_event_t k, v;
            int km, kline, r;
            if (!yaml_parser_parse(p, &k))
                return -1;
            if (k.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&k);
                return 0;
            }
            kline = (int)k.start_mark.line + 1;
            km = matching && d < t->n && t->key[d] && k.type == YAML_SCALAR_EVENT &&
                 !strcmp((const char *)k.data.scalar.value, t->key[d]);
            r = ywalk(p, &k, t, 99, 0, best); /* a complex key: skip it */
            yaml_event_delete(&k);
            if (r)
                return r;
            if (km)
                *best = kline;
            if (km && d + 1 == t->n)
                return 1;
            if (!yaml_parser_parse(p, &v))
                return -1;
            r = ywalk(p, &v, t, d + 1, km, best);
            yaml_event_delete(&v);
            if (r)
                return r;
        }
    }
    if (ev->type == YAML_SEQUENCE_START_EVENT) {
        for (long i = 0;; i++) {
            yaml_event_t it;
            int im, r;
            if (!yaml_parser_parse(p, &it))
                return -1;
            if (it.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&it);
                return 0;
            }
            im = matching && d < t->n && !t->key[d] && t->idx[d] == i;
            if (im)
                *best = (int)it.start_mark.line + 1;
            if (im && d + 1 == t->n) {
                yaml_event_delete(&it);
                return 1;
            }
            r = ywalk(p, &it, t, d + 1, im, best);
            yaml_event_delete(&it);
            if (r)
                return r;
        }
    }
    return 0;
}

static int yaml_line(const char *data, size_t len, const struct ypath *t)
{
    yaml_parser_t p;
    yaml_event_t ev;
    int best = 0, done = 0;
    if (!yaml_parser_initialize(&p))
        return 0;
    yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
    while (!done) {
        if (!yaml_parser_parse(&p, &ev))
            break;
        if (ev.type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT) {
            done = 1; /* only the first document */
            ywalk(&p, &ev, t, 0, 1, &best);
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return best;
}

/* Start lines of every item of the top-level sequence `section`, in one pass.
 * *lines is malloc'ed (NULL and 0 when absent). */
static int yaml_item_lines(const char *data, size_t len, const char *section, int **lines, size_t *n)
{
    yaml_parser_t p;
    yaml_event_t ev;
    int depth = 0, in_sec = 0, want_key = 0, rc = GQ_OK;
    size_t cap = 0;
    *lines = NULL;
    *n = 0;
    if (!yaml_parser_initialize(&p))
        return GQ_ENOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
    for (;;) {
        if (!yaml_parser_parse(&p, &ev))
            break;
        int type = ev.type;
        int start = type == YAML_MAPPING_START_EVENT || type == YAML_SEQUENCE_START_EVENT;
        int end = type == YAML_MAPPING_END_EVENT || type == YAML_SEQUENCE_END_EVENT;
        if (type == YAML_STREAM_END_EVENT || type == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (depth == 2 && in_sec && (start || type == YAML_SCALAR_EVENT)) {
            if (*n == cap) {
                size_t ncap = cap ? cap * 2 : 256;
                int *nl = realloc(*lines, ncap * sizeof(int));
                if (!nl) {
                    rc = GQ_ENOMEM;
                    yaml_event_delete(&ev);
                    break;
                }
                *lines = nl;
                cap = ncap;
            }
            (*lines)[(*n)++] = (int)ev.start_mark.line + 1;
        }
        if (depth == 1 && type == YAML_SCALAR_EVENT) {
            if (want_key)
                in_sec = !strcmp((const char *)ev.data.scalar.value, section);
            else
                in_sec = 0;
            want_key = !want_key;
        } else if (start) {
            if (depth == 1 && type != YAML_SEQUENCE_START_EVENT)
                in_sec = 0;
            depth++;
            if (depth == 1)
                want_key = type == YAML_MAPPING_START_EVENT;
        } else if (end) {
            depth--;
            if (depth == 1) {
                want_key = 1;
                in_sec = 0;
            }
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* ---- loader context and typed getters ---- */

struct lctx {
    const char *name; /* file name for messages */
    const char *data;
    size_t len;
    char *err;
    size_t errlen;
    const char *section; /* "nodes", "jobs", ... */
    long index;
    const char *sub;     /* nested mapping ("topology"), or NULL */
    long sub_index;      /* index in a nested list ("quota"), or -1 */
    int *item_line;      /* start line of each item of the current section */
    size_t nitem_line;
};

static int item_line(const struct lctx *c)
{
    return c->index >= 0 && (size_t)c->index < c->nitem_line ? c->item_line[c->index] : 0;
}

static int set_section(struct lctx *c, const char *section)
{
    free(c->item_line);
    c->section = section;
    c->index = 0;
    return yaml_item_lines(c->data, c->len, section, &c->item_line, &c->nitem_line);
}

__attribute__((format(printf, 3, 4))) static int lfail(struct lctx *c, const char *key,
                                                        const char *fmt, ...)
{
    struct ypath t = {{0}, {0}, 0};
    char msg[256], field[160];
    va_list ap;
    int line;
    t.key[t.n++] = c->section;
    if (c->index >= 0) {
        t.key[t.n] = NULL;
        t.idx[t.n++] = c->index;
    }
    if (c->sub)
        t.key[t.n++] = c->sub;
    if (c->sub && c->sub_index >= 0) {
        t.key[t.n] = NULL;
        t.idx[t.n++] = c->sub_index;
    }
    if (key)
        t.key[t.n++] = key;
    line = yaml_line(c->data, c->len, &t);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char subi[24] = "";
    if (c->sub && c->sub_index >= 0)
        snprintf(subi, sizeof(subi), "[%ld]", c->sub_index);
    if (c->index >= 0)
        snprintf(field, sizeof(field), "%s[%ld]%s%s%s%s%s", c->section, c->index, c->sub ? "." : "",
                 c->sub ? c->sub : "", subi, key ? "." : "", key ? key : "");
    else
        snprintf(field, sizeof(field), "%s%s%s", c->section, key ? "." : "", key ? key : "");
    gq_errf(c->err, c->errlen, "%s:%d: %s: %s", c->name, line, field, msg);
    return GQ_EINVAL;
}

static int check_keys(struct lctx *c, const cJSON *obj, const char *const *allowed)
{
    const cJSON *it;
    if (!cJSON_IsObject(obj))
        return lfail(c, NULL, "must be a mapping");
    cJSON_ArrayForEach(it, obj)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (!strcmp(*a, it->string))
                ok = 1;
        if (!ok)
            return lfail(c, it->string, "unknown field");
    }
    return GQ_OK;
}

static int get_int(struct lctx *c, const cJSON *o, const char *k, int64_t def, int64_t lo, int64_t hi,
                   int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return GQ_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return lfail(c, k, "must be an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return GQ_OK;
}

static int get_intv(struct lctx *c, const cJSON *o, const char *k, int def, int lo, int hi, int *out)
{
    int64_t v = def;
    int rc = get_int(c, o, k, def, lo, hi, &v);
    if (!rc)
        *out = (int)v;
    return rc;
}

static int get_num(struct lctx *c, const cJSON *o, const char *k, double def, double lo, double hi,
                   double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return GQ_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return lfail(c, k, "must be a number in [%g, %g]", lo, hi);
    *out = v->valuedouble;
    return GQ_OK;
}

static int get_str(struct lctx *c, const cJSON *o, const char *k, int required, char *buf, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    char tmp[64];
    const char *s;
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return lfail(c, k, "required");
        return GQ_OK;
    }
    if (cJSON_IsString(v))
        s = v->valuestring;
    else if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble)) {
        snprintf(tmp, sizeof(tmp), "%lld", (long long)v->valuedouble);
        s = tmp;
    } else
        return lfail(c, k, "must be a string");
    if (!*s && required)
        return lfail(c, k, "must not be empty");
    if (gq_strlcpy(buf, s, len) >= len)
        return lfail(c, k, "longer than %zu characters", len - 1);
    return GQ_OK;
}

static int get_bool(struct lctx *c, const cJSON *o, const char *k, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return GQ_OK;
    }
    if (!cJSON_IsBool(v))
        return lfail(c, k, "must be true or false");
    *out = cJSON_IsTrue(v);
    return GQ_OK;
}

int sim_parse_seconds(const char *s, int64_t *out)
{
    double d;
    if (gq_parse_duration(s, &d))
        return GQ_EINVAL;
    *out = (int64_t)d; /* virtual time is whole seconds */
    return GQ_OK;
}

static int get_secs(struct lctx *c, const cJSON *o, const char *k, int64_t def, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return GQ_OK;
    }
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e12 &&
        v->valuedouble == floor(v->valuedouble)) {
        *out = (int64_t)v->valuedouble;
        return GQ_OK;
    }
    if (cJSON_IsString(v) && !sim_parse_seconds(v->valuestring, out))
        return GQ_OK;
    return lfail(c, k, "must be a time in seconds (e.g. 90, \"15m\", \"2h\")");
}

/* A {k: v} mapping of strings into kv pairs via a callback-free loop. */
static int get_map(struct lctx *c, const cJSON *o, const char *k, struct sim_kv *kv, int max, int *n)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, k), *it;
    if (!m || cJSON_IsNull(m))
        return GQ_OK;
    if (!cJSON_IsObject(m))
        return lfail(c, k, "must be a mapping of strings");
    cJSON_ArrayForEach(it, m)
    {
        if (*n >= max)
            return lfail(c, k, "more than %d entries", max);
        if (!cJSON_IsString(it))
            return lfail(c, k, "value of \"%s\" must be a string", it->string);
        gq_strlcpy(kv[*n].key, it->string, sizeof(kv[*n].key));
        gq_strlcpy(kv[*n].value, it->valuestring, sizeof(kv[*n].value));
        (*n)++;
    }
    return GQ_OK;
}

static const cJSON *get_list(struct lctx *c, const cJSON *root, const char *k, int *rc)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, k);
    *rc = GQ_OK;
    if (!l || cJSON_IsNull(l))
        return NULL;
    if (!cJSON_IsArray(l)) {
        c->section = k;
        c->index = -1;
        *rc = lfail(c, NULL, "must be a list");
        return NULL;
    }
    return l;
}

/* ---- cluster ---- */

static int load_node(struct lctx *c, const cJSON *o, struct sim_cluster *cl)
{
    static const char *const keys[] = {"name", "count", "gpus", "gpuType", "gpuMemoryGiB", "cpu",
                                       "cpuMilli", "memoryGiB", "memoryMiB", "zone", "block", "rack",
                                       "nodesPerRack", "pool", "labels", "taints", NULL};
    struct sim_node proto;
    int64_t count, per_rack, cpu, cpum, memg, memm;
    char rack[SIM_NAME_MAX] = "", zone[SIM_NAME_MAX] = "", block[SIM_NAME_MAX] = "",
         pool[SIM_NAME_MAX] = "";
    int rc;
    memset(&proto, 0, sizeof(proto));
    if ((rc = check_keys(c, o, keys)) || (rc = get_str(c, o, "name", 1, proto.name, 48)) ||
        (rc = get_int(c, o, "count", 1, 1, 100000, &count)) ||
        (rc = get_intv(c, o, "gpus", 0, 0, 64, &proto.gpus)) ||
        (rc = get_str(c, o, "gpuType", 0, proto.gpu_type, sizeof(proto.gpu_type))) ||
        (rc = get_intv(c, o, "gpuMemoryGiB", 0, 0, 4096, &proto.gpu_mem_gib)) ||
        (rc = get_int(c, o, "cpu", 0, 0, 100000, &cpu)) ||
        (rc = get_int(c, o, "cpuMilli", 0, 0, INT64_C(100000000), &cpum)) ||
        (rc = get_int(c, o, "memoryGiB", 0, 0, 1 << 24, &memg)) ||
        (rc = get_int(c, o, "memoryMiB", 0, 0, INT64_C(1) << 34, &memm)) ||
        (rc = get_str(c, o, "zone", 0, zone, sizeof(zone))) ||
        (rc = get_str(c, o, "block", 0, block, sizeof(block))) ||
        (rc = get_str(c, o, "rack", 0, rack, 48)) ||
        (rc = get_int(c, o, "nodesPerRack", 0, 0, 100000, &per_rack)) ||
        (rc = get_str(c, o, "pool", 0, pool, sizeof(pool))) ||
        (rc = get_map(c, o, "labels", proto.labels, SIM_MAX_LABELS - 5, &proto.nlabels)))
        return rc;
    if (proto.gpus > 0 && !proto.gpu_type[0])
        return lfail(c, "gpuType", "required when gpus > 0");
    if (per_rack && !rack[0])
        return lfail(c, "nodesPerRack", "needs rack (the rack name prefix)");
    proto.cpu_milli = cpum ? cpum : cpu * 1000;
    proto.mem_mib = memm ? memm : memg * 1024;
    if (proto.cpu_milli == 0)
        return lfail(c, "cpu", "required (cores) or cpuMilli");
    if (proto.mem_mib == 0)
        return lfail(c, "memoryGiB", "required (or memoryMiB)");
    const cJSON *tl = cJSON_GetObjectItemCaseSensitive(o, "taints"), *ti;
    if (tl && !cJSON_IsArray(tl))
        return lfail(c, "taints", "must be a list of {key, value, effect}");
    cJSON_ArrayForEach(ti, tl)
    {
        struct sim_taint *t;
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(ti, "key");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ti, "value");
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(ti, "effect");
        if (proto.ntaints >= SIM_MAX_TAINTS)
            return lfail(c, "taints", "more than %d taints", SIM_MAX_TAINTS);
        if (!cJSON_IsString(k) || (v && !cJSON_IsString(v)) || !cJSON_IsString(e))
            return lfail(c, "taints", "each taint needs string key and effect (value optional)");
        if (strcmp(e->valuestring, "NoSchedule") && strcmp(e->valuestring, "PreferNoSchedule") &&
            strcmp(e->valuestring, "NoExecute"))
            return lfail(c, "taints", "effect \"%s\" is not NoSchedule, PreferNoSchedule or NoExecute",
                         e->valuestring);
        t = &proto.taints[proto.ntaints++];
        gq_strlcpy(t->key, k->valuestring, sizeof(t->key));
        gq_strlcpy(t->value, v ? v->valuestring : "", sizeof(t->value));
        gq_strlcpy(t->effect, e->valuestring, sizeof(t->effect));
    }
    if (zone[0])
        sim_node_set_label(&proto, SIM_LABEL_ZONE, zone);
    if (block[0])
        sim_node_set_label(&proto, SIM_LABEL_BLOCK, block);
    if (pool[0])
        sim_node_set_label(&proto, SIM_LABEL_POOL, pool);
    if (rack[0] && !per_rack)
        sim_node_set_label(&proto, SIM_LABEL_RACK, rack);
    proto.line = item_line(c);
    for (int64_t i = 0; i < count; i++) {
        struct sim_node *n;
        if (cl->nnodes >= SIM_MAX_EXPAND)
            return lfail(c, "count", "more than %d nodes in all", SIM_MAX_EXPAND);
        n = sim_cluster_add_node(cl);
        if (!n)
            return GQ_ENOMEM;
        *n = proto;
        if (count > 1)
            snprintf(n->name, sizeof(n->name), "%.48s-%d", proto.name, (int)i);
        if (per_rack) {
            char r[SIM_NAME_MAX];
            snprintf(r, sizeof(r), "%.48s-%d", rack, (int)(i / per_rack));
            sim_node_set_label(n, SIM_LABEL_RACK, r);
        }
        if (sim_node_set_label(n, SIM_LABEL_HOST, n->name))
            return lfail(c, "labels", "too many labels");
    }
    return GQ_OK;
}

static int load_pool(struct lctx *c, const cJSON *o, struct sim_pool *p)
{
    static const char *const keys[] = {"name", "nodeSelector", "classes", "protected", "reserveGPUs", NULL};
    int rc;
    const cJSON *cls, *it;
    if ((rc = check_keys(c, o, keys)) || (rc = get_str(c, o, "name", 1, p->name, sizeof(p->name))) ||
        (rc = get_map(c, o, "nodeSelector", p->selector, 4, &p->nselector)) ||
        (rc = get_bool(c, o, "protected", 0, &p->protected_pool)) ||
        (rc = get_intv(c, o, "reserveGPUs", 0, 0, 1000000, &p->reserve_gpus)))
        return rc;
    if (p->nselector == 0) {
        gq_strlcpy(p->selector[0].key, SIM_LABEL_POOL, sizeof(p->selector[0].key));
        gq_strlcpy(p->selector[0].value, p->name, sizeof(p->selector[0].value));
        p->nselector = 1;
    }
    cls = cJSON_GetObjectItemCaseSensitive(o, "classes");
    if (cls && !cJSON_IsArray(cls))
        return lfail(c, "classes", "must be a list of Inference, Batch, Training");
    cJSON_ArrayForEach(it, cls)
    {
        int k = cJSON_IsString(it) ? sim_class_parse(it->valuestring) : -1;
        if (k < 0)
            return lfail(c, "classes", "\"%s\" is not Inference, Batch or Training",
                         cJSON_IsString(it) ? it->valuestring : "?");
        p->classes |= 1u << k;
    }
    return GQ_OK;
}

static int load_team(struct lctx *c, const cJSON *o, struct sim_team *t)
{
    static const char *const keys[] = {"name", "cohort", "weight", "quota", NULL};
    static const char *const qkeys[] = {"gpuType", "gpus", "borrowingLimit", "lendingLimit", NULL};
    int rc;
    const cJSON *q, *it;
    if ((rc = check_keys(c, o, keys)) || (rc = get_str(c, o, "name", 1, t->name, sizeof(t->name))) ||
        (rc = get_str(c, o, "cohort", 0, t->cohort, sizeof(t->cohort))) ||
        (rc = get_intv(c, o, "weight", 1, 1, 1000000, &t->weight)))
        return rc;
    q = cJSON_GetObjectItemCaseSensitive(o, "quota");
    if (q && !cJSON_IsArray(q))
        return lfail(c, "quota", "must be a list of {gpuType, gpus, borrowingLimit, lendingLimit}");
    cJSON_ArrayForEach(it, q)
    {
        struct sim_quota *qq;
        if (t->nquota >= SIM_MAX_QUOTAS)
            return lfail(c, "quota", "more than %d entries", SIM_MAX_QUOTAS);
        qq = &t->quota[t->nquota];
        c->sub = "quota";
        c->sub_index = t->nquota;
        if ((rc = check_keys(c, it, qkeys)) ||
            (rc = get_str(c, it, "gpuType", 0, qq->gpu_type, sizeof(qq->gpu_type))) ||
            (rc = get_intv(c, it, "gpus", 0, 0, 10000000, &qq->gpus)) ||
            (rc = get_intv(c, it, "borrowingLimit", -1, -1, 10000000, &qq->borrowing_limit)) ||
            (rc = get_intv(c, it, "lendingLimit", -1, -1, 10000000, &qq->lending_limit)))
            return rc;
        c->sub = NULL;
        c->sub_index = -1;
        if (!qq->gpu_type[0])
            gq_strlcpy(qq->gpu_type, "*", sizeof(qq->gpu_type));
        t->nquota++;
    }
    return GQ_OK;
}

static int cluster_from_json(struct lctx *c, const cJSON *root, struct sim_cluster *cl)
{
    static const char *const keys[] = {"nodes", "pools", "teams", NULL};
    const cJSON *l, *it;
    int rc;
    c->section = "cluster";
    c->index = -1;
    if (!cJSON_IsObject(root)) {
        gq_errf(c->err, c->errlen, "%s:1: the cluster file must be a mapping with nodes, pools, teams",
                c->name);
        return GQ_EINVAL;
    }
    {
        const cJSON *k;
        cJSON_ArrayForEach(k, root)
        {
            int ok = 0;
            for (const char *const *a = keys; *a; a++)
                ok |= !strcmp(*a, k->string);
            if (!ok) {
                c->section = k->string;
                return lfail(c, NULL, "unknown top-level field (expected nodes, pools, teams)");
            }
        }
    }
    l = get_list(c, root, "nodes", &rc);
    if (rc)
        return rc;
    if ((rc = set_section(c, "nodes")))
        return rc;
    cJSON_ArrayForEach(it, l)
    {
        if ((rc = load_node(c, it, cl)))
            return rc;
        c->index++;
    }
    if (cl->nnodes == 0) {
        gq_errf(c->err, c->errlen, "%s:1: nodes: the cluster has no nodes", c->name);
        return GQ_EINVAL;
    }
    l = get_list(c, root, "pools", &rc);
    if (rc)
        return rc;
    cl->npools = (size_t)cJSON_GetArraySize(l);
    if (cl->npools && !(cl->pools = calloc(cl->npools, sizeof(*cl->pools))))
        return GQ_ENOMEM;
    c->section = "pools";
    c->index = 0;
    cJSON_ArrayForEach(it, l)
    {
        if ((rc = load_pool(c, it, &cl->pools[c->index])))
            return rc;
        for (long j = 0; j < c->index; j++)
            if (!strcmp(cl->pools[j].name, cl->pools[c->index].name))
                return lfail(c, "name", "duplicate pool \"%s\"", cl->pools[j].name);
        c->index++;
    }
    l = get_list(c, root, "teams", &rc);
    if (rc)
        return rc;
    cl->nteams = (size_t)cJSON_GetArraySize(l);
    if (cl->nteams && !(cl->teams = calloc(cl->nteams, sizeof(*cl->teams))))
        return GQ_ENOMEM;
    c->section = "teams";
    c->index = 0;
    cJSON_ArrayForEach(it, l)
    {
        if ((rc = load_team(c, it, &cl->teams[c->index])))
            return rc;
        for (long j = 0; j < c->index; j++)
            if (!strcmp(cl->teams[j].name, cl->teams[c->index].name))
                return lfail(c, "name", "duplicate team \"%s\"", cl->teams[j].name);
        c->index++;
    }
    return GQ_OK;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_unique_nodes(const struct sim_cluster *cl, const char *name, char *err, size_t errlen)
{
    const char **names = malloc(cl->nnodes * sizeof(*names));
    int rc = GQ_OK;
    if (!names)
        return GQ_ENOMEM;
    for (size_t i = 0; i < cl->nnodes; i++)
        names[i] = cl->nodes[i].name;
    qsort(names, cl->nnodes, sizeof(*names), cmp_strp);
    for (size_t i = 1; i < cl->nnodes; i++) {
        if (!strcmp(names[i], names[i - 1])) {
            int line = 0;
            for (size_t j = 0; j < cl->nnodes; j++)
                if (!strcmp(cl->nodes[j].name, names[i]))
                    line = cl->nodes[j].line;
            gq_errf(err, errlen, "%s:%d: nodes: duplicate node name \"%s\"", name, line, names[i]);
            rc = GQ_EINVAL;
            break;
        }
    }
    free(names);
    return rc;
}

int sim_load_cluster_mem(const char *text, size_t len, const char *name, struct sim_cluster *cl,
                         char *err, size_t errlen)
{
    cJSON *root = NULL;
    struct lctx c = {name, text, len, err, errlen, "cluster", -1, NULL, -1, NULL, 0};
    int rc;
    memset(cl, 0, sizeof(*cl));
    rc = gq_yaml_parse_doc(text, len, name, &root, err, errlen);
    if (rc)
        goto out;
    rc = cluster_from_json(&c, root, cl);
    free(c.item_line);
    if (!rc)
        rc = check_unique_nodes(cl, name, err, errlen);
out:
    cJSON_Delete(root);
    if (rc)
        sim_cluster_release(cl);
    return rc;
}

int sim_load_cluster(const char *path, struct sim_cluster *cl, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    int rc = gq_read_file(path, GQ_YAML_MAX_BYTES, &data, &len, err, errlen);
    memset(cl, 0, sizeof(*cl));
    if (rc)
        return rc;
    rc = sim_load_cluster_mem(data, len, path, cl, err, errlen);
    free(data);
    return rc;
}

/* ---- trace ---- */

static int check_level(struct lctx *c, const char *k, const char *v)
{
    if (!*v || !strcmp(v, "node") || !strcmp(v, "rack") || !strcmp(v, "block") || !strcmp(v, "zone"))
        return GQ_OK;
    return lfail(c, k, "\"%s\" is not a topology level (node, rack, block, zone)", v);
}

static int finish_job(struct lctx *c, struct sim_job *j)
{
    if (j->gpus && j->shares)
        return lfail(c, "shares", "give gpus (whole GPUs) or shares (milli-GPU), not both");
    if (j->shares && j->replicas < 1)
        return lfail(c, "replicas", "must be >= 1");
    if (j->duration < 1)
        return lfail(c, "duration", "required, at least 1 second");
    if (j->max_run > API_MAX_RUN_MAX)
        return lfail(c, "maxRun", "at most %d seconds (a year), as spec.maxRunSeconds", API_MAX_RUN_MAX);
    if (j->resume_at >= 0 && j->suspend_at < 0)
        return lfail(c, "resumeAt", "needs suspendAt");
    if (j->resume_at >= 0 && j->resume_at <= j->suspend_at)
        return lfail(c, "resumeAt", "must be after suspendAt");
    return GQ_OK;
}

static int load_job(struct lctx *c, const cJSON *o, struct sim_trace *t)
{
    static const char *const keys[] = {"name", "count", "every", "arrival", "team", "class", "priority",
                                       "preemptible", "gang", "replicas", "gpus", "shares", "gpuTypes",
                                       "minMemoryGiB", "cpu", "memoryGiB", "topology", "pool",
                                       "duration", "maxRun", "checkpoint", "suspendAt", "resumeAt", NULL};
    static const char *const tkeys[] = {"required", "preferred", "spread", NULL};
    struct sim_job j;
    char cls[24] = "Batch";
    int64_t count, every;
    double cpu, mem;
    int rc;
    const cJSON *v;
    memset(&j, 0, sizeof(j));
    j.preemptible = j.gang = -1;
    j.suspend_at = j.resume_at = -1;
    if ((rc = check_keys(c, o, keys)) || (rc = get_str(c, o, "name", 1, j.name, 48)) ||
        (rc = get_int(c, o, "count", 1, 1, SIM_MAX_EXPAND, &count)) ||
        (rc = get_secs(c, o, "every", 0, &every)) || (rc = get_secs(c, o, "arrival", 0, &j.arrival)) ||
        (rc = get_str(c, o, "team", 0, j.team, sizeof(j.team))) ||
        (rc = get_str(c, o, "class", 0, cls, sizeof(cls))) ||
        (rc = get_intv(c, o, "priority", 0, -1000000000, 1000000000, &j.priority)) ||
        (rc = get_bool(c, o, "preemptible", -1, &j.preemptible)) ||
        (rc = get_bool(c, o, "gang", -1, &j.gang)) ||
        (rc = get_intv(c, o, "replicas", 1, 1, 100000, &j.replicas)) ||
        (rc = get_intv(c, o, "gpus", 0, 0, 64, &j.gpus)) ||
        (rc = get_intv(c, o, "shares", 0, 0, 999, &j.shares)) ||
        (rc = get_intv(c, o, "minMemoryGiB", 0, 0, 4096, &j.min_mem_gib)) ||
        (rc = get_num(c, o, "cpu", 0, 0, 100000, &cpu)) ||
        (rc = get_num(c, o, "memoryGiB", 0, 0, 1 << 24, &mem)) ||
        (rc = get_str(c, o, "pool", 0, j.pool, sizeof(j.pool))) ||
        (rc = get_secs(c, o, "duration", 0, &j.duration)) ||
        (rc = get_secs(c, o, "maxRun", 0, &j.max_run)) ||
        (rc = get_bool(c, o, "checkpoint", 0, &j.checkpoint)) ||
        (rc = get_secs(c, o, "suspendAt", -1, &j.suspend_at)) ||
        (rc = get_secs(c, o, "resumeAt", -1, &j.resume_at)))
        return rc;
    j.cls = sim_class_parse(cls);
    if (j.cls < 0)
        return lfail(c, "class", "\"%s\" is not Inference, Batch or Training", cls);
    j.cpu_milli = (int64_t)llround(cpu * 1000);
    j.mem_mib = (int64_t)llround(mem * 1024);
    v = cJSON_GetObjectItemCaseSensitive(o, "gpuTypes");
    if (cJSON_IsString(v)) {
        if (gq_strlcpy(j.types[0], v->valuestring, sizeof(j.types[0])) >= sizeof(j.types[0]))
            return lfail(c, "gpuTypes", "name too long");
        j.ntypes = 1;
    } else if (cJSON_IsArray(v)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, v)
        {
            if (!cJSON_IsString(it))
                return lfail(c, "gpuTypes", "must be a list of GPU product names");
            if (j.ntypes >= SIM_MAX_TYPES)
                return lfail(c, "gpuTypes", "more than %d types", SIM_MAX_TYPES);
            gq_strlcpy(j.types[j.ntypes++], it->valuestring, sizeof(j.types[0]));
        }
    } else if (v && !cJSON_IsNull(v))
        return lfail(c, "gpuTypes", "must be a list of GPU product names");
    v = cJSON_GetObjectItemCaseSensitive(o, "topology");
    if (v && !cJSON_IsNull(v)) {
        c->sub = "topology";
        if ((rc = check_keys(c, v, tkeys)) ||
            (rc = get_str(c, v, "required", 0, j.topo_required, sizeof(j.topo_required))) ||
            (rc = get_str(c, v, "preferred", 0, j.topo_preferred, sizeof(j.topo_preferred))) ||
            (rc = get_str(c, v, "spread", 0, j.topo_spread, sizeof(j.topo_spread))) ||
            (rc = check_level(c, "required", j.topo_required)) ||
            (rc = check_level(c, "preferred", j.topo_preferred)) ||
            (rc = check_level(c, "spread", j.topo_spread)))
            return rc;
        c->sub = NULL;
    }
    if ((rc = finish_job(c, &j)))
        return rc;
    j.line = item_line(c);
    for (int64_t i = 0; i < count; i++) {
        struct sim_job *nj;
        if (t->njobs >= SIM_MAX_EXPAND)
            return lfail(c, "count", "more than %d jobs in all", SIM_MAX_EXPAND);
        nj = sim_trace_add_job(t);
        if (!nj)
            return GQ_ENOMEM;
        *nj = j;
        if (count > 1) {
            snprintf(nj->name, sizeof(nj->name), "%.48s-%d", j.name, (int)i);
            nj->arrival = j.arrival + i * every;
            if (j.suspend_at >= 0)
                nj->suspend_at = j.suspend_at + i * every;
            if (j.resume_at >= 0)
                nj->resume_at = j.resume_at + i * every;
        }
    }
    return GQ_OK;
}

static int parse_event_kind(const char *s)
{
    if (!strcasecmp(s, "nodeFail"))
        return SIM_EV_NODE_FAIL;
    if (!strcasecmp(s, "nodeRecover"))
        return SIM_EV_NODE_RECOVER;
    return 0;
}

static int load_event(struct lctx *c, const cJSON *o, struct sim_trace *t)
{
    static const char *const keys[] = {"time", "type", "node", NULL};
    struct sim_event *e;
    char type[32] = "";
    int64_t time;
    char node[SIM_NAME_MAX];
    int rc;
    if ((rc = check_keys(c, o, keys)) || (rc = get_secs(c, o, "time", -1, &time)) ||
        (rc = get_str(c, o, "type", 1, type, sizeof(type))) ||
        (rc = get_str(c, o, "node", 1, node, sizeof(node))))
        return rc;
    if (time < 0)
        return lfail(c, "time", "required");
    if (!parse_event_kind(type))
        return lfail(c, "type", "\"%s\" is not nodeFail or nodeRecover", type);
    e = sim_trace_add_event(t);
    if (!e)
        return GQ_ENOMEM;
    e->time = time;
    e->kind = parse_event_kind(type);
    gq_strlcpy(e->node, node, sizeof(e->node));
    e->line = item_line(c);
    return GQ_OK;
}

static int trace_from_json(struct lctx *c, const cJSON *root, struct sim_trace *t)
{
    const cJSON *l, *it, *k;
    int rc;
    if (!cJSON_IsObject(root)) {
        gq_errf(c->err, c->errlen, "%s:1: the trace must be a mapping with jobs (and events)", c->name);
        return GQ_EINVAL;
    }
    cJSON_ArrayForEach(k, root)
    {
        if (strcmp(k->string, "jobs") && strcmp(k->string, "events")) {
            c->section = k->string;
            c->index = -1;
            return lfail(c, NULL, "unknown top-level field (expected jobs, events)");
        }
    }
    l = get_list(c, root, "jobs", &rc);
    if (rc)
        return rc;
    if ((rc = set_section(c, "jobs")))
        return rc;
    cJSON_ArrayForEach(it, l)
    {
        if ((rc = load_job(c, it, t)))
            return rc;
        c->index++;
    }
    l = get_list(c, root, "events", &rc);
    if (rc)
        return rc;
    if ((rc = set_section(c, "events")))
        return rc;
    cJSON_ArrayForEach(it, l)
    {
        if ((rc = load_event(c, it, t)))
            return rc;
        c->index++;
    }
    return GQ_OK;
}

/* CSV trace */
static int csv_str(struct sim_csv *s, int col, char *buf, size_t len, const char *field, char *err,
                   size_t errlen)
{
    const char *v = sim_csv_get(s, col);
    if (gq_strlcpy(buf, v, len) >= len) {
        gq_errf(err, errlen, "%s:%d: %s: longer than %zu characters", s->path, s->line, field, len - 1);
        return GQ_EINVAL;
    }
    return GQ_OK;
}

static int csv_num(struct sim_csv *s, int col, double def, double lo, double hi, double *out,
                   const char *field, char *err, size_t errlen)
{
    const char *v = sim_csv_get(s, col);
    char *end;
    if (!*v) {
        *out = def;
        return GQ_OK;
    }
    *out = strtod(v, &end);
    if (*end || !(*out >= lo && *out <= hi)) {
        gq_errf(err, errlen, "%s:%d: %s: \"%s\" is not a number in [%g, %g]", s->path, s->line, field, v,
                lo, hi);
        return GQ_EINVAL;
    }
    return GQ_OK;
}

static int csv_int(struct sim_csv *s, int col, int def, int lo, int hi, int *out, const char *field,
                   char *err, size_t errlen)
{
    double d;
    int rc = csv_num(s, col, def, lo, hi, &d, field, err, errlen);
    if (rc)
        return rc;
    if (d != floor(d)) {
        gq_errf(err, errlen, "%s:%d: %s: must be an integer", s->path, s->line, field);
        return GQ_EINVAL;
    }
    *out = (int)d;
    return GQ_OK;
}

static int csv_secs(struct sim_csv *s, int col, int64_t def, int64_t *out, const char *field, char *err,
                    size_t errlen)
{
    const char *v = sim_csv_get(s, col);
    if (!*v) {
        *out = def;
        return GQ_OK;
    }
    if (sim_parse_seconds(v, out)) {
        gq_errf(err, errlen, "%s:%d: %s: \"%s\" is not a time in seconds (e.g. 90, 15m, 2h)", s->path,
                s->line, field, v);
        return GQ_EINVAL;
    }
    return GQ_OK;
}

static int csv_bool(struct sim_csv *s, int col, int def, int *out, const char *field, char *err,
                    size_t errlen)
{
    const char *v = sim_csv_get(s, col);
    if (!*v)
        *out = def;
    else if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes"))
        *out = 1;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no"))
        *out = 0;
    else {
        gq_errf(err, errlen, "%s:%d: %s: \"%s\" is not true or false", s->path, s->line, field, v);
        return GQ_EINVAL;
    }
    return GQ_OK;
}

static int trace_from_csv(struct sim_csv *s, struct sim_trace *t, char *err, size_t errlen)
{
    static const char *const known[] = {"name", "arrival", "team", "class", "priority", "replicas", "gpus",
                                        "shares", "gpu_types", "min_mem_gib", "cpu", "memory_gib",
                                        "required", "preferred", "spread", "pool", "duration",
                                        "checkpoint", "preemptible", "gang", "suspend_at", "resume_at",
                                        "event", "node", "max_run", NULL};
    int col[32];
    int rc;
    for (size_t i = 0; i < s->nheader; i++) {
        int ok = 0;
        for (const char *const *k = known; *k; k++)
            ok |= !strcmp(*k, s->header[i]);
        if (!ok) {
            gq_errf(err, errlen, "%s:1: %s: unknown column", s->path, s->header[i]);
            return GQ_EINVAL;
        }
    }
    for (int i = 0; known[i]; i++)
        col[i] = sim_csv_col(s, known[i]);
    if (col[0] < 0 || col[1] < 0 || col[16] < 0) {
        gq_errf(err, errlen, "%s:1: header: needs at least the columns name, arrival, duration", s->path);
        return GQ_EINVAL;
    }
    while ((rc = sim_csv_next(s, err, errlen)) == 1) {
        const char *ev = sim_csv_get(s, col[22]);
        if (*ev) {
            struct sim_event *e;
            int kind = parse_event_kind(ev);
            int64_t tm;
            if (!kind) {
                gq_errf(err, errlen, "%s:%d: event: \"%s\" is not nodeFail or nodeRecover", s->path,
                        s->line, ev);
                return GQ_EINVAL;
            }
            if ((rc = csv_secs(s, col[1], -1, &tm, "arrival", err, errlen)))
                return rc;
            if (tm < 0 || !*sim_csv_get(s, col[23])) {
                gq_errf(err, errlen, "%s:%d: node: an event row needs arrival (its time) and node",
                        s->path, s->line);
                return GQ_EINVAL;
            }
            if (!(e = sim_trace_add_event(t)))
                return GQ_ENOMEM;
            e->time = tm;
            e->kind = kind;
            e->line = s->line;
            if ((rc = csv_str(s, col[23], e->node, sizeof(e->node), "node", err, errlen)))
                return rc;
            continue;
        }
        struct sim_job *j = sim_trace_add_job(t);
        char cls[24], types[SIM_MAX_TYPES * SIM_NAME_MAX];
        double cpu, mem;
        if (!j)
            return GQ_ENOMEM;
        j->line = s->line;
        if ((rc = csv_str(s, col[0], j->name, sizeof(j->name), "name", err, errlen)) ||
            (rc = csv_secs(s, col[1], -1, &j->arrival, "arrival", err, errlen)) ||
            (rc = csv_str(s, col[2], j->team, sizeof(j->team), "team", err, errlen)) ||
            (rc = csv_str(s, col[3], cls, sizeof(cls), "class", err, errlen)) ||
            (rc = csv_int(s, col[4], 0, -1000000000, 1000000000, &j->priority, "priority", err, errlen)) ||
            (rc = csv_int(s, col[5], 1, 1, 100000, &j->replicas, "replicas", err, errlen)) ||
            (rc = csv_int(s, col[6], 0, 0, 64, &j->gpus, "gpus", err, errlen)) ||
            (rc = csv_int(s, col[7], 0, 0, 999, &j->shares, "shares", err, errlen)) ||
            (rc = csv_str(s, col[8], types, sizeof(types), "gpu_types", err, errlen)) ||
            (rc = csv_int(s, col[9], 0, 0, 4096, &j->min_mem_gib, "min_mem_gib", err, errlen)) ||
            (rc = csv_num(s, col[10], 0, 0, 100000, &cpu, "cpu", err, errlen)) ||
            (rc = csv_num(s, col[11], 0, 0, 1 << 24, &mem, "memory_gib", err, errlen)) ||
            (rc = csv_str(s, col[12], j->topo_required, sizeof(j->topo_required), "required", err, errlen)) ||
            (rc = csv_str(s, col[13], j->topo_preferred, sizeof(j->topo_preferred), "preferred", err, errlen)) ||
            (rc = csv_str(s, col[14], j->topo_spread, sizeof(j->topo_spread), "spread", err, errlen)) ||
            (rc = csv_str(s, col[15], j->pool, sizeof(j->pool), "pool", err, errlen)) ||
            (rc = csv_secs(s, col[16], 0, &j->duration, "duration", err, errlen)) ||
            (rc = csv_bool(s, col[17], 0, &j->checkpoint, "checkpoint", err, errlen)) ||
            (rc = csv_bool(s, col[18], -1, &j->preemptible, "preemptible", err, errlen)) ||
            (rc = csv_bool(s, col[19], -1, &j->gang, "gang", err, errlen)) ||
            (rc = csv_secs(s, col[20], -1, &j->suspend_at, "suspend_at", err, errlen)) ||
            (rc = csv_secs(s, col[21], -1, &j->resume_at, "resume_at", err, errlen)) ||
            (rc = csv_secs(s, col[24], 0, &j->max_run, "max_run", err, errlen)))
            return rc;
        if (j->max_run > API_MAX_RUN_MAX) {
            gq_errf(err, errlen, "%s:%d: max_run: at most %d seconds (a year), as spec.maxRunSeconds", s->path,
                    s->line, API_MAX_RUN_MAX);
            return GQ_EINVAL;
        }
        if (!j->name[0] || j->arrival < 0) {
            gq_errf(err, errlen, "%s:%d: %s: required", s->path, s->line, !j->name[0] ? "name" : "arrival");
            return GQ_EINVAL;
        }
        j->cls = cls[0] ? sim_class_parse(cls) : SIM_CLASS_BATCH;
        if (j->cls < 0) {
            gq_errf(err, errlen, "%s:%d: class: \"%s\" is not Inference, Batch or Training", s->path,
                    s->line, cls);
            return GQ_EINVAL;
        }
        const char *levels[3] = {j->topo_required, j->topo_preferred, j->topo_spread};
        const char *lnames[3] = {"required", "preferred", "spread"};
        for (int i = 0; i < 3; i++) {
            const char *lv = levels[i];
            if (*lv && strcmp(lv, "node") && strcmp(lv, "rack") && strcmp(lv, "block") && strcmp(lv, "zone")) {
                gq_errf(err, errlen, "%s:%d: %s: \"%s\" is not a topology level (node, rack, block, zone)",
                        s->path, s->line, lnames[i], lv);
                return GQ_EINVAL;
            }
        }
        j->cpu_milli = (int64_t)llround(cpu * 1000);
        j->mem_mib = (int64_t)llround(mem * 1024);
        for (char *p = types; *p;) {
            char *bar = strchr(p, '|');
            size_t l = bar ? (size_t)(bar - p) : strlen(p);
            if (l) {
                if (j->ntypes >= SIM_MAX_TYPES || l >= SIM_NAME_MAX) {
                    gq_errf(err, errlen, "%s:%d: gpu_types: too many or too long", s->path, s->line);
                    return GQ_EINVAL;
                }
                memcpy(j->types[j->ntypes], p, l);
                j->types[j->ntypes++][l] = '\0';
            }
            p += l + (bar ? 1 : 0);
        }
        const char *bad = NULL;
        if (j->gpus && j->shares)
            bad = "shares: give gpus or shares, not both";
        else if (j->duration < 1)
            bad = "duration: required, at least 1 second";
        else if (j->resume_at >= 0 && (j->suspend_at < 0 || j->resume_at <= j->suspend_at))
            bad = "resume_at: needs an earlier suspend_at";
        if (bad) {
            gq_errf(err, errlen, "%s:%d: %s", s->path, s->line, bad);
            return GQ_EINVAL;
        }
    }
    return rc < 0 ? rc : GQ_OK;
}

int sim_load_trace_mem(const char *text, size_t len, const char *name, int csv, struct sim_trace *t,
                       char *err, size_t errlen)
{
    int rc;
    memset(t, 0, sizeof(*t));
    if (csv) {
        struct sim_csv s;
        rc = sim_csv_open_mem(&s, text, len, name, err, errlen);
        if (rc)
            return rc;
        rc = trace_from_csv(&s, t, err, errlen);
        sim_csv_release(&s);
    } else {
        cJSON *root = NULL;
        struct lctx c = {name, text, len, err, errlen, "jobs", -1, NULL, -1, NULL, 0};
        rc = gq_yaml_parse_doc(text, len, name, &root, err, errlen);
        if (!rc)
            rc = trace_from_json(&c, root, t);
        free(c.item_line);
        cJSON_Delete(root);
    }
    if (!rc)
        rc = sim_trace_sort(t);
    if (rc)
        sim_trace_release(t);
    return rc;
}

int sim_load_trace(const char *path, struct sim_trace *t, char *err, size_t errlen)
{
    size_t pl = strlen(path);
    int csv = pl > 4 && !strcasecmp(path + pl - 4, ".csv");
    char *data = NULL;
    size_t len = 0;
    int rc = gq_read_file(path, csv ? SIM_CSV_MAX_BYTES : GQ_YAML_MAX_BYTES, &data, &len, err, errlen);
    memset(t, 0, sizeof(*t));
    if (rc)
        return rc;
    rc = sim_load_trace_mem(data, len, path, csv, t, err, errlen);
    free(data);
    return rc;
}

int sim_check(const struct sim_cluster *c, const struct sim_trace *t, const char *trace_name, char *err,
              size_t errlen)
{
    for (size_t i = 0; i < t->njobs; i++) {
        const struct sim_job *j = &t->jobs[i];
        int found = c->nteams == 0 && !j->team[0];
        for (size_t k = 0; k < c->nteams && !found; k++)
            found = !strcmp(c->teams[k].name, j->team);
        if (!found) {
            gq_errf(err, errlen, "%s:%d: team: \"%s\" is not a team of the cluster file", trace_name,
                    j->line, j->team);
            return GQ_EINVAL;
        }
        if (j->pool[0]) {
            int pf = 0;
            for (size_t k = 0; k < c->npools && !pf; k++)
                pf = !strcmp(c->pools[k].name, j->pool);
            if (!pf) {
                gq_errf(err, errlen, "%s:%d: pool: \"%s\" is not a pool of the cluster file", trace_name,
                        j->line, j->pool);
                return GQ_EINVAL;
            }
        }
    }
    if (t->njobs > 1) {
        const char **names = malloc(t->njobs * sizeof(*names));
        int dup = -1;
        if (!names)
            return GQ_ENOMEM;
        for (size_t i = 0; i < t->njobs; i++)
            names[i] = t->jobs[i].name;
        qsort(names, t->njobs, sizeof(*names), cmp_strp);
        for (size_t i = 1; i < t->njobs && dup < 0; i++)
            if (!strcmp(names[i], names[i - 1]))
                dup = (int)i;
        if (dup >= 0) {
            for (size_t i = 0; i < t->njobs; i++)
                if (!strcmp(t->jobs[i].name, names[dup]))
                    gq_errf(err, errlen, "%s:%d: name: duplicate job name \"%s\"", trace_name,
                            t->jobs[i].line, names[dup]);
            free(names);
            return GQ_EINVAL;
        }
        free(names);
    }
    for (size_t i = 0; i < t->nevents; i++) {
        int found = 0;
        for (size_t k = 0; k < c->nnodes && !found; k++)
            found = !strcmp(c->nodes[k].name, t->events[i].node);
        if (!found) {
            gq_errf(err, errlen, "%s:%d: node: \"%s\" is not a node of the cluster file", trace_name,
                    t->events[i].line, t->events[i].node);
            return GQ_EINVAL;
        }
    }
    return GQ_OK;
}
