/* GPUJob: decode, defaulting, validation, GPU count. */
#include "api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "quantity.h"

/* Where the decoders gather the optional parts before they are copied out,
 * sized, into the job: the bounded arrays of the required node affinity. */
struct aff_scratch {
    int nterms, nexprs, nvalues;
    struct api_node_term terms[API_MAX_AFFINITY_TERMS];
    struct api_node_expr exprs[API_MAX_AFFINITY_EXPRS];
    char values[API_MAX_AFFINITY_VALUES][API_LABEL_VAL_MAX];
};

/* A heap copy of the n items of size sz at src into *out; *out = NULL when n
 * is 0. 0 or GQ_ENOMEM. */
static int dup_items(const void *src, int n, size_t sz, void **out)
{
    *out = NULL;
    if (n <= 0)
        return GQ_OK;
    *out = malloc((size_t)n * sz);
    if (!*out)
        return GQ_ENOMEM;
    memcpy(*out, src, (size_t)n * sz);
    return GQ_OK;
}

static size_t align_up(size_t off, size_t a)
{
    return (off + a - 1) / a * a;
}

/* One block: the header, then terms, exprs and values (copied from the
 * given arrays); NULL on allocation failure. nterms >= 1. */
static struct api_node_affinity *affinity_make(int nterms, const struct api_node_term *terms,
                                               int nexprs, const struct api_node_expr *exprs,
                                               int nvalues, const void *values)
{
    size_t ot = align_up(sizeof(struct api_node_affinity), _Alignof(struct api_node_term));
    size_t ox = align_up(ot + (size_t)nterms * sizeof *terms, _Alignof(struct api_node_expr));
    size_t ov = ox + (size_t)nexprs * sizeof *exprs;
    size_t total = ov + (size_t)nvalues * API_LABEL_VAL_MAX;
    struct api_node_affinity *na = malloc(total);
    char *base = (char *)na;
    if (!na)
        return NULL;
    na->nterms = nterms;
    na->nexprs = nexprs;
    na->nvalues = nvalues;
    na->terms = (struct api_node_term *)(void *)(base + ot);
    na->exprs = nexprs > 0 ? (struct api_node_expr *)(void *)(base + ox) : NULL;
    na->values = nvalues > 0 ? (char (*)[API_LABEL_VAL_MAX])(void *)(base + ov) : NULL;
    memcpy(na->terms, terms, (size_t)nterms * sizeof *terms);
    if (nexprs > 0)
        memcpy(na->exprs, exprs, (size_t)nexprs * sizeof *exprs);
    if (nvalues > 0)
        memcpy(na->values, values, (size_t)nvalues * API_LABEL_VAL_MAX);
    return na;
}

/* The spec's names: "" (this, never freed) when absent, else owned. */
static const char name_none[] = "";

static void name_free(const char **slot)
{
    if (*slot && *slot != name_none)
        free((char *)*slot);
    *slot = name_none;
}

/* *slot = a copy of v ("" when v is NULL or empty); GQ_ENOMEM leaves *slot. */
static int name_set(const char **slot, const char *v)
{
    char *c = NULL;
    if (v && v[0] && !(c = strdup(v)))
        return GQ_ENOMEM;
    name_free(slot);
    if (c)
        *slot = c;
    return GQ_OK;
}

const struct api_gpujob api_gpujob_zero = {
    .spec = {.team = name_none, .priority_class_name = name_none, .pool = name_none, .team_requested = name_none}};

static void names_none(struct api_gpujob_spec *sp)
{
    sp->team = sp->priority_class_name = sp->pool = sp->team_requested = name_none;
}

static void names_free(struct api_gpujob_spec *sp)
{
    name_free(&sp->team);
    name_free(&sp->priority_class_name);
    name_free(&sp->pool);
    name_free(&sp->team_requested);
}

void api_gpujob_init(struct api_gpujob *job)
{
    memset(job, 0, sizeof *job);
    names_none(&job->spec);
    job->spec.replicas = 1;
    job->spec.preemptible = API_UNSET;
    job->spec.gang = API_UNSET;
}

void api_gpujob_release(struct api_gpujob *job)
{
    if (!job)
        return;
    cJSON_Delete(job->template);
    job->template = NULL;
    free(job->spec.gpu.types);
    job->spec.gpu.types = NULL;
    job->spec.gpu.ntypes = 0;
    free(job->spec.node_selector);
    job->spec.node_selector = NULL;
    job->spec.nselector = 0;
    free(job->spec.tolerations);
    job->spec.tolerations = NULL;
    job->spec.ntolerations = 0;
    free(job->spec.node_affinity); /* one block */
    job->spec.node_affinity = NULL;
    names_free(&job->spec);
}

struct api_gpujob *api_gpujob_new(void)
{
    struct api_gpujob *j = malloc(sizeof *j);
    if (j)
        api_gpujob_init(j);
    return j;
}

void api_gpujob_free(struct api_gpujob *job)
{
    if (!job)
        return;
    api_gpujob_release(job);
    free(job);
}

int api_gpujob_copy(struct api_gpujob *dst, const struct api_gpujob *src)
{
    const struct api_gpujob_spec *ss = &src->spec;
    const struct api_node_affinity *na = ss->node_affinity;
    struct api_gpujob t;
    void *p;
    if (dst == src)
        return GQ_OK;
    /* t: src's values, owning nothing yet; then its own copy of each part */
    t = *src;
    t.template = NULL;
    t.spec.gpu.types = NULL;
    t.spec.node_selector = NULL;
    t.spec.tolerations = NULL;
    t.spec.node_affinity = NULL;
    names_none(&t.spec);
    if (name_set(&t.spec.team, ss->team) || name_set(&t.spec.priority_class_name, ss->priority_class_name) ||
        name_set(&t.spec.pool, ss->pool) || name_set(&t.spec.team_requested, ss->team_requested))
        goto nomem;
    if (src->template && !(t.template = cJSON_Duplicate(src->template, 1)))
        goto nomem;
    if (dup_items(ss->gpu.types, ss->gpu.ntypes, sizeof *ss->gpu.types, &p))
        goto nomem;
    t.spec.gpu.types = p;
    if (dup_items(ss->node_selector, ss->nselector, sizeof *ss->node_selector, &p))
        goto nomem;
    t.spec.node_selector = p;
    if (dup_items(ss->tolerations, ss->ntolerations, sizeof *ss->tolerations, &p))
        goto nomem;
    t.spec.tolerations = p;
    if (na && !(t.spec.node_affinity = affinity_make(na->nterms, na->terms, na->nexprs, na->exprs,
                                                     na->nvalues, na->values)))
        goto nomem;
    api_gpujob_release(dst);
    *dst = t; /* a move: dst owns t's parts */
    return GQ_OK;
nomem:
    api_gpujob_release(&t); /* only what was copied above */
    return GQ_ENOMEM;
}

/* A quantity given as a JSON string or number, scaled (3 = milli, 0 = units). */
static int get_quantity(struct api_errors *errs, const char *path, const cJSON *v, int scale,
                        int64_t *out)
{
    char buf[80], msg[200];
    const char *s;
    if (cJSON_IsString(v)) {
        s = v->valuestring;
    } else if (cJSON_IsNumber(v)) {
        snprintf(buf, sizeof buf, "%.15g", v->valuedouble);
        s = buf;
    } else {
        api_errors_add(errs, path, "must be a quantity (string or number), got %s", api_jtype(v));
        return 0;
    }
    if (api_quantity_scaled(s, scale, out, msg, sizeof msg)) {
        api_errors_add(errs, path, "%s", msg);
        return 0;
    }
    if (*out < 0) {
        api_errors_add(errs, path, "must not be negative, got \"%s\"", s);
        return 0;
    }
    return 1;
}

/* GPU device resources a template may not ask for itself: the GPUs of a job
 * are spec.gpu, which gangq books on devices, charges to the Team and sets on
 * the pods it creates. A device asked for in the template besides would go to
 * the kubelet unbooked and uncharged (a tenant taking GPUs beyond its quota,
 * from devices gangq hands to other jobs). */
static int gpu_device_resource(const char *name)
{
    static const char *const exact[] = {"nvidia.com/gpu", "amd.com/gpu"};
    static const char *const prefix[] = {"nvidia.com/gpu.", "nvidia.com/mig-", "gpu.intel.com/"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(name, exact[i]))
            return 1;
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (!strncmp(name, prefix[i], strlen(prefix[i])))
            return 1;
    return 0;
}

/* Requests of one container: requests, else limits (as Kubernetes defaults them). */
static void container_requests(struct api_errors *errs, const char *path, const cJSON *c,
                               int64_t *cpu, int64_t *mem)
{
    static const char *const names[] = {"cpu", "memory"};
    const cJSON *res, *req, *lim;
    char p[API_ERR_PATH_MAX], q[API_ERR_PATH_MAX];
    int k;
    *cpu = *mem = 0;
    if (!api_expect_obj(errs, path, c))
        return;
    res = cJSON_GetObjectItemCaseSensitive(c, "resources");
    if (!res)
        return;
    api_path(p, sizeof p, path, "resources");
    if (!api_expect_obj(errs, p, res))
        return;
    req = cJSON_GetObjectItemCaseSensitive(res, "requests");
    lim = cJSON_GetObjectItemCaseSensitive(res, "limits");
    api_path(q, sizeof q, p, "requests");
    if (req && !api_expect_obj(errs, q, req))
        req = NULL;
    api_path(q, sizeof q, p, "limits");
    if (lim && !api_expect_obj(errs, q, lim))
        lim = NULL;
    for (int w = 0; w < 2; w++) {
        const cJSON *r;
        const cJSON *rl = w ? lim : req;
        cJSON_ArrayForEach(r, rl)
        {
            if (!r->string || !gpu_device_resource(r->string))
                continue;
            char fp[API_ERR_PATH_MAX], wp[API_ERR_PATH_MAX];
            api_path(wp, sizeof wp, p, w ? "limits" : "requests");
            int n = snprintf(fp, sizeof fp, "%s[\"%s\"]", wp, r->string); /* the name has dots */
            if (n < 0 || (size_t)n >= sizeof fp) /* cut short: still names the container */
                api_path(fp, sizeof fp, wp, r->string);
            api_errors_add(errs, fp, "GPUs are asked for with spec.gpu (gangq books them and sets "
                                     "them on the pods it creates), not in the template");
        }
    }
    for (k = 0; k < 2; k++) {
        const cJSON *v = req ? cJSON_GetObjectItemCaseSensitive(req, names[k]) : NULL;
        const char *which = "requests";
        char fp[API_ERR_PATH_MAX], wp[API_ERR_PATH_MAX];
        int64_t val = 0;
        if (!v && lim) {
            v = cJSON_GetObjectItemCaseSensitive(lim, names[k]);
            which = "limits";
        }
        if (!v)
            continue;
        api_path(wp, sizeof wp, p, which);
        api_path(fp, sizeof fp, wp, names[k]);
        if (get_quantity(errs, fp, v, k == 0 ? 3 : 0, &val))
            *(k == 0 ? cpu : mem) = val;
    }
}

/* Into tols[0 .. *n) (room for API_MAX_TOLERATIONS). */
static void decode_tolerations(struct api_errors *errs, const char *path, const cJSON *arr,
                               struct api_toleration *tols, int *n)
{
    static const char *const fields[] = {"key", "operator", "value", "effect", "tolerationSeconds", NULL};
    const cJSON *t;
    int i = 0;
    char p[API_ERR_PATH_MAX], fp[API_ERR_PATH_MAX];
    if (!api_expect_arr(errs, path, arr))
        return;
    if (cJSON_GetArraySize(arr) > API_MAX_TOLERATIONS) {
        api_errors_add(errs, path, "at most %d entries, got %d", API_MAX_TOLERATIONS,
                       cJSON_GetArraySize(arr));
        return;
    }
    cJSON_ArrayForEach(t, arr)
    {
        struct api_toleration *o = &tols[*n];
        const cJSON *v;
        int ok = 1;
        api_path_idx(p, sizeof p, path, i++);
        if (!api_expect_obj(errs, p, t))
            continue;
        memset(o, 0, sizeof *o);
        api_check_fields(errs, p, t, fields);
        gq_strlcpy(o->op, "Equal", sizeof o->op);
        if ((v = cJSON_GetObjectItemCaseSensitive(t, "key"))) {
            api_path(fp, sizeof fp, p, "key");
            if (!api_get_str(errs, fp, v, o->key, sizeof o->key))
                ok = 0;
            else if (o->key[0] && !api_is_label_key(o->key)) {
                api_errors_add(errs, fp, "invalid label key \"%s\"", o->key);
                ok = 0;
            }
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(t, "operator"))) {
            api_path(fp, sizeof fp, p, "operator");
            if (!api_get_str(errs, fp, v, o->op, sizeof o->op)) {
                ok = 0;
            } else if (strcmp(o->op, "Equal") && strcmp(o->op, "Exists")) {
                api_errors_add(errs, fp, "unknown operator \"%s\"; known: Equal, Exists", o->op);
                ok = 0;
            }
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(t, "value"))) {
            api_path(fp, sizeof fp, p, "value");
            if (!api_get_str(errs, fp, v, o->value, sizeof o->value))
                ok = 0;
            else if (!strcmp(o->op, "Exists") && o->value[0]) {
                api_errors_add(errs, fp, "must be empty when operator is Exists");
                ok = 0;
            }
        }
        if (!o->key[0] && strcmp(o->op, "Exists")) {
            api_path(fp, sizeof fp, p, "operator");
            api_errors_add(errs, fp, "must be Exists when key is empty");
            ok = 0;
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(t, "effect"))) {
            api_path(fp, sizeof fp, p, "effect");
            if (!api_get_str(errs, fp, v, o->effect, sizeof o->effect)) {
                ok = 0;
            } else if (o->effect[0] && strcmp(o->effect, "NoSchedule") &&
                       strcmp(o->effect, "PreferNoSchedule") && strcmp(o->effect, "NoExecute")) {
                api_errors_add(errs, fp,
                               "unknown effect \"%s\"; known: NoSchedule, PreferNoSchedule, NoExecute",
                               o->effect);
                ok = 0;
            }
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(t, "tolerationSeconds"))) {
            int32_t secs = 0;
            api_path(fp, sizeof fp, p, "tolerationSeconds");
            if (api_get_int(errs, fp, v, INT32_MIN, INT32_MAX, &secs)) {
                o->has_seconds = 1;
                o->seconds = secs;
            } else {
                ok = 0;
            }
        }
        if (ok)
            (*n)++;
    }
}

static const char *const node_ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", NULL};

/* A whole decimal int64, as Kubernetes reads Gt/Lt operands (strconv.ParseInt). */
static int is_int64(const char *s)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (!*p || strlen(p) > 19)
        return 0;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return 0;
    if (strlen(p) == 19) /* 9223372036854775807 (or ...808 negative) at most */
        return strcmp(p, s[0] == '-' ? "9223372036854775808" : "9223372036854775807") <= 0;
    return 1;
}

/* One matchExpressions / matchFields entry at path p into the affinity. */
static void decode_node_expr(struct api_errors *errs, const char *p, const cJSON *x, int field,
                             struct aff_scratch *na)
{
    static const char *const fields[] = {"key", "operator", "values", NULL};
    char fp[API_ERR_PATH_MAX], vp[API_ERR_PATH_MAX], op[16] = "";
    const cJSON *v, *val;
    int ok = 1, opi = -1, nvals = 0, i = 0;
    if (!api_expect_obj(errs, p, x))
        return;
    if (na->nexprs >= API_MAX_AFFINITY_EXPRS) {
        api_errors_add(errs, p, "at most %d expressions in all terms together", API_MAX_AFFINITY_EXPRS);
        return;
    }
    struct api_node_expr *e = &na->exprs[na->nexprs];
    memset(e, 0, sizeof *e);
    e->field = field;
    api_check_fields(errs, p, x, fields);
    api_path(fp, sizeof fp, p, "key");
    if (!(v = cJSON_GetObjectItemCaseSensitive(x, "key"))) {
        api_errors_add(errs, fp, "required");
        ok = 0;
    } else if (!api_get_str(errs, fp, v, e->key, sizeof e->key)) {
        ok = 0;
    } else if (field ? strcmp(e->key, "metadata.name") != 0 : !api_is_label_key(e->key)) {
        if (field)
            api_errors_add(errs, fp, "unknown field \"%s\"; known: metadata.name", e->key);
        else
            api_errors_add(errs, fp, "invalid label key \"%s\"", e->key);
        ok = 0;
    }
    api_path(fp, sizeof fp, p, "operator");
    if (!(v = cJSON_GetObjectItemCaseSensitive(x, "operator"))) {
        api_errors_add(errs, fp, "required");
        ok = 0;
    } else if (!api_get_str(errs, fp, v, op, sizeof op)) {
        ok = 0;
    } else {
        for (int k = 0; node_ops[k]; k++)
            if (!strcmp(op, node_ops[k]))
                opi = k;
        if (opi < 0 || (field && opi != API_OP_IN && opi != API_OP_NOT_IN)) {
            api_errors_add(errs, fp, "unknown operator \"%s\"; known: %s", op,
                           field ? "In, NotIn" : "In, NotIn, Exists, DoesNotExist, Gt, Lt");
            ok = 0;
        }
    }
    api_path(vp, sizeof vp, p, "values");
    if ((v = cJSON_GetObjectItemCaseSensitive(x, "values")) && !cJSON_IsNull(v)) {
        if (!api_expect_arr(errs, vp, v))
            return;
        nvals = cJSON_GetArraySize(v);
        if (na->nvalues + nvals > API_MAX_AFFINITY_VALUES) {
            api_errors_add(errs, vp, "at most %d values in all expressions together",
                           API_MAX_AFFINITY_VALUES);
            return;
        }
        cJSON_ArrayForEach(val, v)
        {
            api_path_idx(fp, sizeof fp, vp, i);
            if (!api_get_str(errs, fp, val, na->values[na->nvalues + i], sizeof na->values[0]))
                ok = 0;
            else if ((opi == API_OP_GT || opi == API_OP_LT) && !is_int64(na->values[na->nvalues + i])) {
                api_errors_add(errs, fp, "must be an integer for operator %s, got \"%s\"", op,
                               na->values[na->nvalues + i]);
                ok = 0;
            }
            i++;
        }
    }
    if (opi < 0)
        return;
    if ((opi == API_OP_IN || opi == API_OP_NOT_IN) && nvals == 0) {
        api_errors_add(errs, vp, "required (at least one value) for operator %s", op);
        ok = 0;
    } else if ((opi == API_OP_EXISTS || opi == API_OP_DOES_NOT_EXIST) && nvals > 0) {
        api_errors_add(errs, vp, "must be empty for operator %s", op);
        ok = 0;
    } else if ((opi == API_OP_GT || opi == API_OP_LT) && nvals != 1) {
        api_errors_add(errs, vp, "must hold exactly one integer for operator %s, got %d values", op,
                       nvals);
        ok = 0;
    }
    if (!ok)
        return;
    e->op = (enum api_node_op)opi;
    e->v0 = na->nvalues;
    e->nvalues = nvals;
    na->nvalues += nvals;
    na->nexprs++;
}

/* spec.template.spec.affinity: the required node affinity terms (the rest is
 * accepted and left to the pod). */
static void decode_affinity(struct api_errors *errs, const cJSON *aff, struct aff_scratch *na)
{
    static const char *const req_fields[] = {"nodeSelectorTerms", NULL};
    static const char *const term_fields[] = {"matchExpressions", "matchFields", NULL};
    static const char *const path =
        "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
    char tp[API_ERR_PATH_MAX], p[API_ERR_PATH_MAX], xp[API_ERR_PATH_MAX];
    const cJSON *nodeaff, *req, *terms, *t;
    memset(na, 0, sizeof *na);
    if (!api_expect_obj(errs, "spec.template.spec.affinity", aff))
        return;
    nodeaff = cJSON_GetObjectItemCaseSensitive(aff, "nodeAffinity");
    if (!nodeaff || cJSON_IsNull(nodeaff))
        return;
    if (!api_expect_obj(errs, "spec.template.spec.affinity.nodeAffinity", nodeaff))
        return;
    req = cJSON_GetObjectItemCaseSensitive(nodeaff, "requiredDuringSchedulingIgnoredDuringExecution");
    if (!req || cJSON_IsNull(req))
        return;
    if (!api_expect_obj(errs, path, req))
        return;
    api_check_fields(errs, path, req, req_fields);
    api_path(tp, sizeof tp, path, "nodeSelectorTerms");
    terms = cJSON_GetObjectItemCaseSensitive(req, "nodeSelectorTerms");
    if (!terms) {
        api_errors_add(errs, tp, "required");
        return;
    }
    if (!api_expect_arr(errs, tp, terms))
        return;
    if (cJSON_GetArraySize(terms) == 0) {
        api_errors_add(errs, tp, "must have at least one term");
        return;
    }
    if (cJSON_GetArraySize(terms) > API_MAX_AFFINITY_TERMS) {
        api_errors_add(errs, tp, "at most %d entries, got %d", API_MAX_AFFINITY_TERMS,
                       cJSON_GetArraySize(terms));
        return;
    }
    int i = 0;
    cJSON_ArrayForEach(t, terms)
    {
        api_path_idx(p, sizeof p, tp, i++);
        if (!api_expect_obj(errs, p, t))
            continue;
        api_check_fields(errs, p, t, term_fields);
        int x0 = na->nexprs;
        for (int f = 0; f < 2; f++) {
            const char *name = term_fields[f];
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(t, name), *x;
            if (!arr || cJSON_IsNull(arr))
                continue;
            api_path(xp, sizeof xp, p, name);
            if (!api_expect_arr(errs, xp, arr))
                continue;
            int k = 0;
            cJSON_ArrayForEach(x, arr)
            {
                char ep[API_ERR_PATH_MAX];
                api_path_idx(ep, sizeof ep, xp, k++);
                decode_node_expr(errs, ep, x, f, na);
            }
        }
        /* a term without expressions matches no node (as in Kubernetes) */
        na->terms[na->nterms].x0 = x0;
        na->terms[na->nterms].nexprs = na->nexprs - x0;
        na->nterms++;
    }
}

/* 0 or GQ_ENOMEM (what sp gained is freed by api_gpujob_release). */
static int decode_template(struct api_errors *errs, const cJSON *tpl, struct api_gpujob_spec *sp)
{
    const cJSON *ps, *cs, *c, *v;
    int64_t sum_cpu = 0, sum_mem = 0, init_cpu = 0, init_mem = 0;
    char p[API_ERR_PATH_MAX];
    int i, k;
    struct api_kv sel[API_MAX_SELECTOR];
    struct api_toleration tols[API_MAX_TOLERATIONS];
    struct aff_scratch aff;
    int nsel = 0, ntols = 0;
    void *part;

    aff.nterms = 0;
    if (!api_expect_obj(errs, "spec.template", tpl))
        return GQ_OK;
    ps = cJSON_GetObjectItemCaseSensitive(tpl, "spec");
    if (!ps) {
        api_errors_add(errs, "spec.template.spec", "required");
        return GQ_OK;
    }
    if (!api_expect_obj(errs, "spec.template.spec", ps))
        return GQ_OK;
    for (k = 0; k < 2; k++) {
        const char *arr = k == 0 ? "containers" : "initContainers";
        char base[API_ERR_PATH_MAX];
        snprintf(base, sizeof base, "spec.template.spec.%s", arr);
        cs = cJSON_GetObjectItemCaseSensitive(ps, arr);
        if (!cs) {
            if (k == 0)
                api_errors_add(errs, base, "required");
            continue;
        }
        if (!api_expect_arr(errs, base, cs))
            continue;
        if (k == 0 && cJSON_GetArraySize(cs) == 0)
            api_errors_add(errs, base, "must have at least one container");
        i = 0;
        cJSON_ArrayForEach(c, cs)
        {
            int64_t cpu = 0, mem = 0;
            api_path_idx(p, sizeof p, base, i++);
            container_requests(errs, p, c, &cpu, &mem);
            if (k == 0) {
                if (__builtin_add_overflow(sum_cpu, cpu, &sum_cpu) ||
                    __builtin_add_overflow(sum_mem, mem, &sum_mem)) {
                    api_errors_add(errs, base, "total requests overflow");
                    sum_cpu = sum_mem = 0;
                    break;
                }
            } else {
                init_cpu = GQ_MAX(init_cpu, cpu);
                init_mem = GQ_MAX(init_mem, mem);
            }
        }
    }
    sp->cpu_milli = GQ_MAX(sum_cpu, init_cpu);
    sp->memory_bytes = GQ_MAX(sum_mem, init_mem);
    if ((v = cJSON_GetObjectItemCaseSensitive(ps, "nodeSelector")))
        api_decode_selector(errs, "spec.template.spec.nodeSelector", v, sel, &nsel);
    if ((v = cJSON_GetObjectItemCaseSensitive(ps, "tolerations")))
        decode_tolerations(errs, "spec.template.spec.tolerations", v, tols, &ntols);
    if ((v = cJSON_GetObjectItemCaseSensitive(ps, "affinity")) && !cJSON_IsNull(v))
        decode_affinity(errs, v, &aff);
    /* out of line, sized to what was decoded */
    if (dup_items(sel, nsel, sizeof sel[0], &part))
        return GQ_ENOMEM;
    sp->node_selector = part;
    sp->nselector = nsel;
    if (dup_items(tols, ntols, sizeof tols[0], &part))
        return GQ_ENOMEM;
    sp->tolerations = part;
    sp->ntolerations = ntols;
    if (aff.nterms > 0 &&
        !(sp->node_affinity = affinity_make(aff.nterms, aff.terms, aff.nexprs, aff.exprs,
                                            aff.nvalues, aff.values)))
        return GQ_ENOMEM;
    return GQ_OK;
}

/* 0 or GQ_ENOMEM (gpu->types is freed by api_gpujob_release). */
static int decode_gpu(struct api_errors *errs, const cJSON *g, struct api_gpu *gpu)
{
    static const char *const fields[] = {"count", "shares", "types", "minMemoryGiB", NULL};
    const cJSON *v, *t;
    char p[API_ERR_PATH_MAX];
    char types[API_MAX_GPU_TYPES][API_LABEL_VAL_MAX];
    int i = 0, n = 0;
    void *mem;
    if (!api_expect_obj(errs, "spec.gpu", g))
        return GQ_OK;
    gpu->present = 1;
    api_check_fields(errs, "spec.gpu", g, fields);
    if ((v = cJSON_GetObjectItemCaseSensitive(g, "count")))
        gpu->has_count = api_get_int(errs, "spec.gpu.count", v, 1, API_GPU_COUNT_MAX, &gpu->count);
    if ((v = cJSON_GetObjectItemCaseSensitive(g, "shares")))
        gpu->has_shares =
            api_get_int(errs, "spec.gpu.shares", v, 1, API_GPU_SHARES_MAX, &gpu->shares);
    if ((v = cJSON_GetObjectItemCaseSensitive(g, "minMemoryGiB")))
        api_get_int(errs, "spec.gpu.minMemoryGiB", v, 0, API_MIN_MEMORY_GIB_MAX,
                    &gpu->min_memory_gib);
    if ((v = cJSON_GetObjectItemCaseSensitive(g, "types")) &&
        api_expect_arr(errs, "spec.gpu.types", v)) {
        if (cJSON_GetArraySize(v) > API_MAX_GPU_TYPES) {
            api_errors_add(errs, "spec.gpu.types", "at most %d entries, got %d",
                           API_MAX_GPU_TYPES, cJSON_GetArraySize(v));
            return GQ_OK;
        }
        cJSON_ArrayForEach(t, v)
        {
            api_path_idx(p, sizeof p, "spec.gpu.types", i++);
            if (api_get_str(errs, p, t, types[n], sizeof types[0]))
                n++;
        }
        if (dup_items(types, n, sizeof types[0], &mem))
            return GQ_ENOMEM;
        gpu->types = mem;
        gpu->ntypes = n;
    }
    return GQ_OK;
}

static void decode_topology(struct api_errors *errs, const cJSON *t, struct api_topology *tp)
{
    static const char *const fields[] = {"required", "preferred", "spread", NULL};
    const cJSON *v;
    if (!api_expect_obj(errs, "spec.topology", t))
        return;
    api_check_fields(errs, "spec.topology", t, fields);
    if ((v = cJSON_GetObjectItemCaseSensitive(t, "required")))
        api_get_str(errs, "spec.topology.required", v, tp->required, sizeof tp->required);
    if ((v = cJSON_GetObjectItemCaseSensitive(t, "preferred")))
        api_get_str(errs, "spec.topology.preferred", v, tp->preferred, sizeof tp->preferred);
    if ((v = cJSON_GetObjectItemCaseSensitive(t, "spread")))
        api_get_str(errs, "spec.topology.spread", v, tp->spread, sizeof tp->spread);
}

int api_gpujob_decode(const cJSON *obj, struct api_gpujob *out, struct api_errors *errs)
{
    static const char *const fields[] = {"team", "class", "priorityClassName", "priority",
                                         "preemptible", "replicas", "gang", "gpu", "topology",
                                         "pool", "suspend", "masterPort", "ttlSecondsAfterFinished",
                                         "maxRunSeconds", "template", NULL};
    const cJSON *spec, *v;
    struct api_gpujob_spec *sp;
    int before = errs->n + errs->dropped;
    char buf[64], name[API_NAME_MAX];
    int b;

    api_gpujob_release(out);
    api_gpujob_init(out);
    sp = &out->spec;
    if (!(spec = api_decode_envelope(errs, obj, "GPUJob", 0, fields, &out->meta)))
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "team")) && api_get_str(errs, "spec.team", v, name, sizeof name) &&
        (name_set(&sp->team, name) || name_set(&sp->team_requested, name)))
        goto nomem;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "class")) &&
        api_get_str(errs, "spec.class", v, buf, sizeof buf) && api_class_parse(buf, &sp->class))
        api_errors_add(errs, "spec.class", "unknown class \"%s\"; known: Inference, Batch, Training",
                       buf);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "priorityClassName")) &&
        api_get_str(errs, "spec.priorityClassName", v, name, sizeof name) && name_set(&sp->priority_class_name, name))
        goto nomem;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "priority")))
        sp->priority_set = api_get_int(errs, "spec.priority", v, API_PRIORITY_MIN,
                                       API_PRIORITY_MAX, &sp->priority);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "preemptible")) &&
        api_get_bool(errs, "spec.preemptible", v, &b))
        sp->preemptible = b ? API_TRUE : API_FALSE;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "gang")) &&
        api_get_bool(errs, "spec.gang", v, &b))
        sp->gang = b ? API_TRUE : API_FALSE;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "replicas")))
        api_get_int(errs, "spec.replicas", v, 1, API_REPLICAS_MAX, &sp->replicas);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "suspend")))
        api_get_bool(errs, "spec.suspend", v, &sp->suspend);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "masterPort")) &&
        api_get_int(errs, "spec.masterPort", v, 1, 65535, &sp->master_port) &&
        (sp->master_port < 1 || sp->master_port > 65535)) {
        api_errors_add(errs, "spec.masterPort", "must be 1..65535, got %d", sp->master_port);
        sp->master_port = 0; /* 0 = not given */
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "ttlSecondsAfterFinished")) &&
        (sp->ttl_set = api_get_int(errs, "spec.ttlSecondsAfterFinished", v, 0, API_TTL_MAX,
                                   &sp->ttl_after_finished)) &&
        (sp->ttl_after_finished < 0 || sp->ttl_after_finished > API_TTL_MAX)) {
        api_errors_add(errs, "spec.ttlSecondsAfterFinished", "must be 0..%d (seconds), got %d", API_TTL_MAX,
                       sp->ttl_after_finished);
        sp->ttl_set = 0; /* refused: the job is invalid, and never deleted for it */
        sp->ttl_after_finished = 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "maxRunSeconds")) &&
        api_get_int(errs, "spec.maxRunSeconds", v, 1, API_MAX_RUN_MAX, &sp->max_run_s) &&
        (sp->max_run_s < 1 || sp->max_run_s > API_MAX_RUN_MAX)) {
        api_errors_add(errs, "spec.maxRunSeconds", "must be 1..%d (seconds), got %d", API_MAX_RUN_MAX,
                       sp->max_run_s);
        sp->max_run_s = 0; /* refused: the job is invalid */
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "pool")) && api_get_str(errs, "spec.pool", v, name, sizeof name) &&
        name_set(&sp->pool, name))
        goto nomem;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "gpu")) && decode_gpu(errs, v, &sp->gpu))
        goto nomem;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "topology")))
        decode_topology(errs, v, &sp->topology);
    v = cJSON_GetObjectItemCaseSensitive(spec, "template");
    if (!v) {
        api_errors_add(errs, "spec.template", "required");
    } else {
        if (decode_template(errs, v, sp))
            goto nomem;
        if (cJSON_IsObject(v)) {
            out->template = cJSON_Duplicate(v, 1);
            if (!out->template)
                goto nomem;
        }
    }
out:
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
nomem: /* no half-built job: what was allocated goes, out is as initialised */
    api_gpujob_release(out);
    api_gpujob_init(out);
    return GQ_ENOMEM;
}

int api_gpujob_default(struct api_gpujob *job, const struct api_lookup *lk)
{
    struct api_gpujob_spec *sp = &job->spec;
    const struct api_team *owner;
    size_t i;
    int rc = GQ_OK;
    if (!job->meta.namespace[0])
        gq_strlcpy(job->meta.namespace, "default", sizeof job->meta.namespace);
    if (sp->class == API_CLASS_NONE)
        sp->class = API_CLASS_BATCH;
    if (sp->gang == API_UNSET)
        sp->gang = sp->class == API_CLASS_INFERENCE ? API_FALSE : API_TRUE;
    if (sp->preemptible == API_UNSET)
        sp->preemptible = sp->class == API_CLASS_INFERENCE ? API_FALSE : API_TRUE;
    /* the namespace's Team, whatever spec.team says (a different spec.team is
     * refused by api_gpujob_tenancy, never charged) */
    owner = lk ? api_namespace_team(lk->teams, lk->nteams, job->meta.namespace) : NULL;
    if (owner && strcmp(sp->team, owner->meta.name))
        rc = name_set(&sp->team, owner->meta.name);
    sp->priority_class_found = 0;
    sp->effective_priority = 0;
    if (sp->priority_set) {
        sp->effective_priority = sp->priority;
    } else if (lk) {
        for (i = 0; i < lk->npcs; i++) {
            if (sp->priority_class_name[0] ? !strcmp(lk->pcs[i].name, sp->priority_class_name)
                                           : lk->pcs[i].global_default) {
                sp->effective_priority = lk->pcs[i].value;
                sp->priority_class_found = sp->priority_class_name[0] != '\0';
                break;
            }
        }
    }
    if (owner && sp->effective_priority > api_team_max_priority(owner))
        sp->effective_priority = api_team_max_priority(owner);
    return rc;
}

static void check_level(struct api_errors *errs, const struct api_config *cfg, const char *path,
                        const char *lvl, int *idx)
{
    char known[API_MAX_LEVELS * (API_LEVEL_MAX + 2)];
    size_t off = 0;
    int i;
    *idx = -1;
    if (!lvl[0])
        return;
    *idx = api_config_level(cfg, lvl);
    if (*idx >= 0)
        return;
    known[0] = '\0';
    for (i = 0; i < cfg->nlevels && off < sizeof known; i++) {
        int w = snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "", cfg->levels[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    api_errors_add(errs, path, "unknown level \"%s\"; known: %s", lvl, known);
}

int api_gpujob_validate(const struct api_gpujob *job, const struct api_config *cfg,
                        struct api_errors *errs)
{
    const struct api_gpujob_spec *sp = &job->spec;
    const struct api_gpu *g = &sp->gpu;
    struct api_config defcfg;
    int before = errs->n + errs->dropped;
    int req, pref, spr, i, j;
    char p[API_ERR_PATH_MAX];

    if (!cfg) {
        api_config_default(&defcfg);
        cfg = &defcfg;
    }
    if (job->meta.name[0]) {
        api_check_name(errs, "metadata.name", job->meta.name, 0);
        if (strlen(job->meta.name) > API_JOB_NAME_MAX)
            api_errors_add(errs, "metadata.name",
                           "must be at most %d characters (it is the gangq.io/job label value "
                           "of the job's pods, named <name>-<attempt>-<replica>), got %zu",
                           API_JOB_NAME_MAX, strlen(job->meta.name));
    }
    if (sp->team[0])
        api_check_name(errs, "spec.team", sp->team, 0);
    if (sp->pool[0])
        api_check_name(errs, "spec.pool", sp->pool, 0);
    if (sp->priority_class_name[0])
        api_check_name(errs, "spec.priorityClassName", sp->priority_class_name, 0);
    if (sp->priority_set && sp->priority_class_name[0])
        api_errors_add(errs, "spec.priority", "set priority or priorityClassName, not both");
    if (sp->priority_set && sp->priority > API_PRIORITY_MAX)
        api_errors_add(errs, "spec.priority", "must be at most %d, got %d", API_PRIORITY_MAX,
                       sp->priority);
    if (sp->replicas < 1 || sp->replicas > API_REPLICAS_MAX)
        api_errors_add(errs, "spec.replicas", "must be 1..%d, got %d", API_REPLICAS_MAX,
                       sp->replicas);
    if (g->present) {
        if (g->has_count && g->has_shares) {
            api_errors_add(errs, "spec.gpu", "set count or shares, not both");
        } else if (!g->has_count && !g->has_shares) {
            api_errors_add(errs, "spec.gpu", "set count or shares");
        } else if (g->has_count && (g->count < 1 || g->count > API_GPU_COUNT_MAX)) {
            api_errors_add(errs, "spec.gpu.count", "must be 1..%d, got %d", API_GPU_COUNT_MAX,
                           g->count);
        } else if (g->has_shares && (g->shares < 1 || g->shares > API_GPU_SHARES_MAX)) {
            api_errors_add(errs, "spec.gpu.shares", "must be 1..%d, got %d", API_GPU_SHARES_MAX,
                           g->shares);
        }
        if (g->min_memory_gib < 0 || g->min_memory_gib > API_MIN_MEMORY_GIB_MAX)
            api_errors_add(errs, "spec.gpu.minMemoryGiB", "must be 0..%d, got %d",
                           API_MIN_MEMORY_GIB_MAX, g->min_memory_gib);
        for (i = 0; i < g->ntypes; i++) {
            api_path_idx(p, sizeof p, "spec.gpu.types", i);
            if (!g->types[i][0] || !api_is_label_value(g->types[i])) {
                api_errors_add(errs, p, "must be a GPU product label value (e.g. NVIDIA-H100-80GB-HBM3), got \"%s\"",
                               g->types[i]);
                continue;
            }
            for (j = 0; j < i; j++)
                if (!strcmp(g->types[i], g->types[j])) {
                    api_errors_add(errs, p, "duplicate \"%s\"", g->types[i]);
                    break;
                }
        }
    } else if (sp->cpu_milli == 0 && sp->memory_bytes == 0 && job->template) {
        api_errors_add(errs, "spec.template.spec.containers",
                       "a job without spec.gpu must request cpu or memory");
    }
    check_level(errs, cfg, "spec.topology.required", sp->topology.required, &req);
    check_level(errs, cfg, "spec.topology.preferred", sp->topology.preferred, &pref);
    check_level(errs, cfg, "spec.topology.spread", sp->topology.spread, &spr);
    if (req >= 0 && pref >= 0 && pref < req)
        api_errors_add(errs, "spec.topology.preferred",
                       "level \"%s\" is wider than required level \"%s\"", sp->topology.preferred,
                       sp->topology.required);
    if (req >= 0 && spr >= 0 && spr <= req)
        api_errors_add(errs, "spec.topology.spread",
                       "level \"%s\" must be narrower than required level \"%s\"",
                       sp->topology.spread, sp->topology.required);
    if (spr >= 0 && pref >= 0 && pref >= spr)
        api_errors_add(errs, "spec.topology.preferred",
                       "level \"%s\" packs replicas that spread level \"%s\" keeps apart",
                       sp->topology.preferred, sp->topology.spread);
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}

int32_t api_gpujob_gpus(const struct api_gpujob *job)
{
    const struct api_gpujob_spec *sp = &job->spec;
    int64_t r = sp->replicas > 0 ? sp->replicas : 0;
    if (!sp->gpu.present)
        return 0;
    if (sp->gpu.has_shares && !sp->gpu.has_count)
        return (int32_t)((r * (sp->gpu.shares > 0 ? sp->gpu.shares : 0) + 999) / 1000);
    return (int32_t)GQ_MIN(r * (sp->gpu.count > 0 ? sp->gpu.count : 0), INT32_MAX);
}

/* ---- tenancy ---------------------------------------------------------- */

static const struct api_team *lookup_team(const struct api_lookup *lk, const char *name)
{
    size_t i;
    for (i = 0; lk && i < lk->nteams; i++)
        if (!strcmp(lk->teams[i].meta.name, name))
            return &lk->teams[i];
    return NULL;
}

static const struct api_priorityclass *lookup_pc(const struct api_lookup *lk, const char *name)
{
    size_t i;
    for (i = 0; lk && i < lk->npcs; i++)
        if (!strcmp(lk->pcs[i].name, name))
            return &lk->pcs[i];
    return NULL;
}

static void refuse(const char **reason, const char *r)
{
    if (!*reason)
        *reason = r;
}

/* A PriorityClass named at path: known, listed by the Team (when it lists any)
 * and within its ceiling. */
static void check_class(const struct api_lookup *lk, const struct api_team *t, const char *path,
                        const char *name, struct api_errors *errs, const char **reason)
{
    const struct api_priorityclass *pc = lookup_pc(lk, name);
    int i, listed = t->npriority_classes == 0;
    for (i = 0; i < t->npriority_classes && !listed; i++)
        listed = !strcmp(t->priority_classes[i], name);
    if (!pc) {
        api_errors_add(errs, path, "PriorityClass %s does not exist", name);
        refuse(reason, "UnknownPriorityClass");
    } else if (!listed) {
        api_errors_add(errs, path, "PriorityClass %s is not one Team %s allows (spec.priorityClasses)",
                       name, t->meta.name);
        refuse(reason, "PriorityClassNotAllowed");
    } else if (pc->value > api_team_max_priority(t)) {
        api_errors_add(errs, path, "PriorityClass %s has value %d, above Team %s's maxPriority %d",
                       name, pc->value, t->meta.name, api_team_max_priority(t));
        refuse(reason, "PriorityAboveCeiling");
    }
}

static void policy_refuse(struct api_errors *errs, const char **reason, const char *path,
                          const char *what, const struct api_team *t, const char *flag)
{
    api_errors_add(errs, path, "%s not allowed for Team %s (spec.podPolicy.%s)", what,
                   t->meta.name, flag);
    refuse(reason, "PodPolicy");
}

/* The pod template against the Team's podPolicy. */
static void check_pod_policy(const cJSON *tpl, const struct api_team *t, struct api_errors *errs,
                             const char **reason)
{
    static const char *const hostns[] = {"hostNetwork", "hostPID", "hostIPC"};
    static const char *const lists[] = {"containers", "initContainers", "ephemeralContainers"};
    const struct api_pod_policy *pp = &t->pod_policy;
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(tpl, "spec"), *arr, *c, *v;
    char p[API_ERR_PATH_MAX], base[API_ERR_PATH_MAX];
    size_t k;
    int i;
    if (!cJSON_IsObject(ps))
        return;
    for (k = 0; k < GQ_ARRAY_LEN(hostns) && !pp->allow_host_namespaces; k++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ps, hostns[k]))) {
            api_path(p, sizeof p, "spec.template.spec", hostns[k]);
            policy_refuse(errs, reason, p, "host namespaces are", t, "allowHostNamespaces");
        }
    for (k = 0; k < GQ_ARRAY_LEN(lists); k++) {
        api_path(base, sizeof base, "spec.template.spec", lists[k]);
        i = 0;
        arr = cJSON_GetObjectItemCaseSensitive(ps, lists[k]);
        if (!cJSON_IsArray(arr))
            continue;
        cJSON_ArrayForEach(c, arr)
        {
            const cJSON *sc = cJSON_GetObjectItemCaseSensitive(c, "securityContext");
            const cJSON *add = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(sc, "capabilities"), "add");
            char cp[API_ERR_PATH_MAX];
            api_path_idx(cp, sizeof cp, base, i++);
            if (!pp->allow_privileged && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "privileged"))) {
                api_path(p, sizeof p, cp, "securityContext.privileged");
                policy_refuse(errs, reason, p, "privileged containers are", t, "allowPrivileged");
            }
            if (!pp->allow_capabilities && cJSON_IsArray(add) && cJSON_GetArraySize(add) > 0) {
                api_path(p, sizeof p, cp, "securityContext.capabilities.add");
                policy_refuse(errs, reason, p, "added capabilities are", t, "allowCapabilities");
            }
        }
    }
    arr = cJSON_GetObjectItemCaseSensitive(ps, "volumes");
    i = 0;
    if (!cJSON_IsArray(arr))
        arr = NULL;
    cJSON_ArrayForEach(c, arr)
    {
        api_path_idx(base, sizeof base, "spec.template.spec.volumes", i++);
        if (!pp->allow_host_path && cJSON_GetObjectItemCaseSensitive(c, "hostPath")) {
            api_path(p, sizeof p, base, "hostPath");
            policy_refuse(errs, reason, p, "hostPath volumes are", t, "allowHostPath");
        }
    }
    for (k = 0; k < 2 && !pp->allow_service_accounts; k++) {
        const char *f = k == 0 ? "serviceAccountName" : "serviceAccount";
        v = cJSON_GetObjectItemCaseSensitive(ps, f);
        if (cJSON_IsString(v) && v->valuestring[0] && strcmp(v->valuestring, "default")) {
            char what[API_NAME_MAX + 64];
            snprintf(what, sizeof what, "service account \"%.200s\" is", v->valuestring);
            api_path(p, sizeof p, "spec.template.spec", f);
            policy_refuse(errs, reason, p, what, t, "allowServiceAccounts");
        }
    }
}

const char *api_gpujob_tenancy(const struct api_gpujob *job, const struct api_lookup *lk,
                               struct api_errors *errs)
{
    const struct api_gpujob_spec *sp = &job->spec;
    const char *ns = job->meta.namespace[0] ? job->meta.namespace : "default";
    const struct api_team *owner = lk ? api_namespace_team(lk->teams, lk->nteams, ns) : NULL;
    const char *reason = NULL;
    const cJSON *v;
    if (!owner) {
        if (!sp->team_requested[0]) {
            api_errors_add(errs, "metadata.namespace",
                           "no Team lists namespace %s and spec.team is not set", ns);
            return "NoTeam";
        }
        if (!lookup_team(lk, sp->team_requested)) {
            api_errors_add(errs, "spec.team", "team %s does not exist", sp->team_requested);
            return "UnknownTeam";
        }
        api_errors_add(errs, "spec.team",
                       "Team %s does not list namespace %s (no Team does): a job is charged to "
                       "its namespace's Team",
                       sp->team_requested, ns);
        return "WrongTeam";
    }
    if (sp->team_requested[0] && strcmp(sp->team_requested, owner->meta.name)) {
        api_errors_add(errs, "spec.team",
                       "namespace %s belongs to Team %s: spec.team must be %s or unset, got %s", ns,
                       owner->meta.name, owner->meta.name, sp->team_requested);
        refuse(&reason, "WrongTeam");
    }
    if (sp->priority_set && sp->priority > api_team_max_priority(owner)) {
        api_errors_add(errs, "spec.priority", "must be at most %d (Team %s's maxPriority), got %d",
                       api_team_max_priority(owner), owner->meta.name, sp->priority);
        refuse(&reason, "PriorityAboveCeiling");
    }
    if (sp->priority_class_name[0])
        check_class(lk, owner, "spec.priorityClassName", sp->priority_class_name, errs, &reason);
    v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job->template, "spec"),
                                         "priorityClassName");
    if (cJSON_IsString(v) && v->valuestring[0])
        check_class(lk, owner, "spec.template.spec.priorityClassName", v->valuestring, errs, &reason);
    if (job->template)
        check_pod_policy(job->template, owner, errs, &reason);
    return reason;
}

/* ---- the pod template made gangq's ------------------------------------- */

int api_is_gangq_key(const char *key)
{
    static const char dom[] = "gangq.io";
    const size_t dl = sizeof dom - 1;
    const char *slash = key ? strchr(key, '/') : NULL;
    size_t n;
    if (!slash)
        return 0;
    n = (size_t)(slash - key);
    if (n == dl)
        return !strncasecmp(key, dom, dl);
    return n > dl && key[n - dl - 1] == '.' && !strncasecmp(key + n - dl, dom, dl);
}

static void strip_gangq_keys(cJSON *map)
{
    cJSON *e = map ? map->child : NULL, *next;
    for (; e; e = next) {
        next = e->next;
        if (e->string && api_is_gangq_key(e->string))
            cJSON_Delete(cJSON_DetachItemViaPointer(map, e));
    }
}

int api_pod_template_sanitize(cJSON *tpl, int64_t max_grace_s)
{
    cJSON *md, *ps, *g;
    if (!cJSON_IsObject(tpl))
        return GQ_EINVAL;
    md = cJSON_GetObjectItemCaseSensitive(tpl, "metadata");
    if (cJSON_IsObject(md)) {
        cJSON *l = cJSON_GetObjectItemCaseSensitive(md, "labels");
        cJSON *a = cJSON_GetObjectItemCaseSensitive(md, "annotations");
        strip_gangq_keys(cJSON_IsObject(l) ? l : NULL);
        strip_gangq_keys(cJSON_IsObject(a) ? a : NULL);
        cJSON_DeleteItemFromObjectCaseSensitive(md, "finalizers");
    }
    ps = cJSON_GetObjectItemCaseSensitive(tpl, "spec");
    if (!cJSON_IsObject(ps) || max_grace_s < 0)
        return GQ_OK;
    g = cJSON_GetObjectItemCaseSensitive(ps, "terminationGracePeriodSeconds");
    if (g && !(cJSON_IsNumber(g) && g->valuedouble <= (double)max_grace_s))
        cJSON_DeleteItemFromObjectCaseSensitive(ps, "terminationGracePeriodSeconds");
    else if (g || max_grace_s >= 30)
        return GQ_OK; /* within the cap, or the Kubernetes default (30 s) is */
    return cJSON_AddNumberToObject(ps, "terminationGracePeriodSeconds", (double)max_grace_s)
               ? GQ_OK
               : GQ_ENOMEM;
}
