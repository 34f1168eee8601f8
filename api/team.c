/* Team, GPUPool and PriorityClass: decode, defaulting, validation. */
#include "api_internal.h"

#include <string.h>

static void decode_quota(struct api_errors *errs, const cJSON *arr, struct api_team *t)
{
    static const char *const fields[] = {"gpuType", "gpus", "borrowingLimit", "lendingLimit", NULL};
    const cJSON *q, *v;
    char p[API_ERR_PATH_MAX], fp[API_ERR_PATH_MAX];
    int i = 0;
    if (!api_expect_arr(errs, "spec.quota", arr))
        return;
    if (cJSON_GetArraySize(arr) > API_MAX_QUOTA) {
        api_errors_add(errs, "spec.quota", "at most %d entries, got %d", API_MAX_QUOTA,
                       cJSON_GetArraySize(arr));
        return;
    }
    cJSON_ArrayForEach(q, arr)
    {
        struct api_quota *o = &t->quota[t->nquota];
        int ok = 1;
        api_path_idx(p, sizeof p, "spec.quota", i++);
        if (!api_expect_obj(errs, p, q))
            continue;
        memset(o, 0, sizeof *o);
        o->borrowing_limit = -1;
        o->lending_limit = -1;
        api_check_fields(errs, p, q, fields);
        api_path(fp, sizeof fp, p, "gpuType");
        if (!(v = cJSON_GetObjectItemCaseSensitive(q, "gpuType"))) {
            api_errors_add(errs, fp, "required");
            ok = 0;
        } else if (!api_get_str(errs, fp, v, o->gpu_type, sizeof o->gpu_type)) {
            ok = 0;
        }
        api_path(fp, sizeof fp, p, "gpus");
        if (!(v = cJSON_GetObjectItemCaseSensitive(q, "gpus"))) {
            api_errors_add(errs, fp, "required");
            ok = 0;
        } else if (!api_get_int(errs, fp, v, 0, API_QUOTA_GPUS_MAX, &o->gpus)) {
            ok = 0;
        }
        api_path(fp, sizeof fp, p, "borrowingLimit");
        if ((v = cJSON_GetObjectItemCaseSensitive(q, "borrowingLimit")) &&
            !api_get_int(errs, fp, v, 0, API_QUOTA_GPUS_MAX, &o->borrowing_limit))
            ok = 0;
        api_path(fp, sizeof fp, p, "lendingLimit");
        if ((v = cJSON_GetObjectItemCaseSensitive(q, "lendingLimit")) &&
            !api_get_int(errs, fp, v, 0, API_QUOTA_GPUS_MAX, &o->lending_limit))
            ok = 0;
        if (ok)
            t->nquota++;
    }
}

static void decode_pod_policy(struct api_errors *errs, const cJSON *v, struct api_pod_policy *pp)
{
    static const char *const fields[] = {"allowHostNamespaces", "allowPrivileged",
                                         "allowCapabilities", "allowHostPath",
                                         "allowServiceAccounts", NULL};
    int *dst[] = {&pp->allow_host_namespaces, &pp->allow_privileged, &pp->allow_capabilities,
                  &pp->allow_host_path, &pp->allow_service_accounts};
    const cJSON *f;
    char p[API_ERR_PATH_MAX];
    size_t i;
    if (!api_expect_obj(errs, "spec.podPolicy", v))
        return;
    api_check_fields(errs, "spec.podPolicy", v, fields);
    for (i = 0; i < GQ_ARRAY_LEN(dst); i++)
        if ((f = cJSON_GetObjectItemCaseSensitive(v, fields[i]))) {
            api_path(p, sizeof p, "spec.podPolicy", fields[i]);
            api_get_bool(errs, p, f, dst[i]);
        }
}

static void decode_priority_classes(struct api_errors *errs, const cJSON *v, struct api_team *t)
{
    const cJSON *n;
    char p[API_ERR_PATH_MAX];
    int i = 0;
    if (!api_expect_arr(errs, "spec.priorityClasses", v))
        return;
    if (cJSON_GetArraySize(v) > API_MAX_PRIORITY_CLASSES) {
        api_errors_add(errs, "spec.priorityClasses", "at most %d entries, got %d",
                       API_MAX_PRIORITY_CLASSES, cJSON_GetArraySize(v));
        return;
    }
    cJSON_ArrayForEach(n, v)
    {
        api_path_idx(p, sizeof p, "spec.priorityClasses", i++);
        if (api_get_str(errs, p, n, t->priority_classes[t->npriority_classes],
                        sizeof t->priority_classes[0]))
            t->npriority_classes++;
    }
}

int api_team_decode(const cJSON *obj, struct api_team *out, struct api_errors *errs)
{
    static const char *const fields[] = {"namespaces", "cohort", "quota", "weight", "maxPriority",
                                         "priorityClasses", "podPolicy", NULL};
    const cJSON *spec, *v, *n;
    char p[API_ERR_PATH_MAX];
    int before = errs->n + errs->dropped, i = 0;

    memset(out, 0, sizeof *out);
    out->weight = 1;
    if (!(spec = api_decode_envelope(errs, obj, "Team", 1, fields, &out->meta)))
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "namespaces")) &&
        api_expect_arr(errs, "spec.namespaces", v)) {
        if (cJSON_GetArraySize(v) > API_MAX_NAMESPACES) {
            api_errors_add(errs, "spec.namespaces", "at most %d entries, got %d",
                           API_MAX_NAMESPACES, cJSON_GetArraySize(v));
        } else {
            cJSON_ArrayForEach(n, v)
            {
                api_path_idx(p, sizeof p, "spec.namespaces", i++);
                if (api_get_str(errs, p, n, out->namespaces[out->nnamespaces],
                                sizeof out->namespaces[0]))
                    out->nnamespaces++;
            }
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "cohort")))
        api_get_str(errs, "spec.cohort", v, out->cohort, sizeof out->cohort);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "quota")))
        decode_quota(errs, v, out);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "weight")))
        api_get_int(errs, "spec.weight", v, 1, API_WEIGHT_MAX, &out->weight);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "maxPriority")))
        out->has_max_priority = api_get_int(errs, "spec.maxPriority", v, API_PRIORITY_MIN,
                                            API_PRIORITY_MAX, &out->max_priority);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "priorityClasses")))
        decode_priority_classes(errs, v, out);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "podPolicy")))
        decode_pod_policy(errs, v, &out->pod_policy);
out:
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}

void api_team_default(struct api_team *team)
{
    int i;
    for (i = 0; i < team->nquota; i++) {
        if (!team->quota[i].gpu_type[0])
            gq_strlcpy(team->quota[i].gpu_type, "*", sizeof team->quota[i].gpu_type);
    }
}

int api_team_validate(const struct api_team *t, struct api_errors *errs)
{
    int before = errs->n + errs->dropped, i, j;
    char p[API_ERR_PATH_MAX], fp[API_ERR_PATH_MAX];
    if (t->meta.name[0]) {
        api_check_name(errs, "metadata.name", t->meta.name, 0);
        if (strlen(t->meta.name) > API_JOB_NAME_MAX)
            api_errors_add(errs, "metadata.name",
                           "must be at most %d characters (it is the gangq.io/team label value "
                           "of the Team's pods), got %zu",
                           API_JOB_NAME_MAX, strlen(t->meta.name));
    }
    if (t->has_max_priority && t->max_priority > API_PRIORITY_MAX)
        api_errors_add(errs, "spec.maxPriority", "must be at most %d, got %d", API_PRIORITY_MAX,
                       t->max_priority);
    for (i = 0; i < t->npriority_classes; i++) {
        api_path_idx(p, sizeof p, "spec.priorityClasses", i);
        if (!api_is_dns_subdomain(t->priority_classes[i])) {
            api_check_name(errs, p, t->priority_classes[i], 0);
            continue;
        }
        for (j = 0; j < i; j++)
            if (!strcmp(t->priority_classes[i], t->priority_classes[j])) {
                api_errors_add(errs, p, "duplicate \"%s\"", t->priority_classes[i]);
                break;
            }
    }
    for (i = 0; i < t->nnamespaces; i++) {
        api_path_idx(p, sizeof p, "spec.namespaces", i);
        if (!api_is_dns_label(t->namespaces[i])) {
            api_check_name(errs, p, t->namespaces[i], 1);
            continue;
        }
        for (j = 0; j < i; j++)
            if (!strcmp(t->namespaces[i], t->namespaces[j])) {
                api_errors_add(errs, p, "duplicate \"%s\"", t->namespaces[i]);
                break;
            }
    }
    if (t->cohort[0])
        api_check_name(errs, "spec.cohort", t->cohort, 0);
    if (t->weight < 1 || t->weight > API_WEIGHT_MAX)
        api_errors_add(errs, "spec.weight", "must be 1..%d, got %d", API_WEIGHT_MAX, t->weight);
    for (i = 0; i < t->nquota; i++) {
        const struct api_quota *q = &t->quota[i];
        api_path_idx(p, sizeof p, "spec.quota", i);
        api_path(fp, sizeof fp, p, "gpuType");
        if (strcmp(q->gpu_type, "*") && (!q->gpu_type[0] || !api_is_label_value(q->gpu_type)))
            api_errors_add(errs, fp, "must be a GPU product (e.g. NVIDIA-H100-80GB-HBM3) or \"*\", got \"%s\"",
                           q->gpu_type);
        for (j = 0; j < i; j++)
            if (!strcmp(q->gpu_type, t->quota[j].gpu_type)) {
                api_errors_add(errs, fp, "duplicate \"%s\"", q->gpu_type);
                break;
            }
        api_path(fp, sizeof fp, p, "gpus");
        if (q->gpus < 0 || q->gpus > API_QUOTA_GPUS_MAX)
            api_errors_add(errs, fp, "must be 0..%d, got %d", API_QUOTA_GPUS_MAX, q->gpus);
        api_path(fp, sizeof fp, p, "borrowingLimit");
        if (q->borrowing_limit < -1 || q->borrowing_limit > API_QUOTA_GPUS_MAX)
            api_errors_add(errs, fp, "must be 0..%d, got %d", API_QUOTA_GPUS_MAX,
                           q->borrowing_limit);
        else if (q->borrowing_limit >= 0 && !t->cohort[0])
            api_errors_add(errs, fp, "only meaningful with spec.cohort");
        api_path(fp, sizeof fp, p, "lendingLimit");
        if (q->lending_limit < -1 || q->lending_limit > API_QUOTA_GPUS_MAX)
            api_errors_add(errs, fp, "must be 0..%d, got %d", API_QUOTA_GPUS_MAX,
                           q->lending_limit);
        else if (q->lending_limit > q->gpus)
            api_errors_add(errs, fp, "must be at most gpus (%d), got %d", q->gpus,
                           q->lending_limit);
    }
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}

int32_t api_team_max_priority(const struct api_team *t)
{
    return t->has_max_priority ? t->max_priority : API_DEFAULT_MAX_PRIORITY;
}

int api_team_older(const struct api_team *a, const struct api_team *b)
{
    const char *ta = a->meta.creation_timestamp, *tb = b->meta.creation_timestamp;
    int c;
    /* RFC 3339 in UTC with whole seconds, as the API server writes it, sorts
     * as text; a Team without one (offline manifests) counts as the newest */
    if (!ta[0] != !tb[0])
        return ta[0] != '\0';
    c = strcmp(ta, tb);
    if (c)
        return c < 0;
    return strcmp(a->meta.name, b->meta.name) < 0;
}

static int team_lists(const struct api_team *t, const char *ns)
{
    int j;
    for (j = 0; j < t->nnamespaces; j++)
        if (!strcmp(t->namespaces[j], ns))
            return 1;
    return 0;
}

const struct api_team *api_namespace_team(const struct api_team *teams, size_t nteams,
                                          const char *ns)
{
    const struct api_team *best = NULL;
    size_t i;
    for (i = 0; i < nteams; i++)
        if (team_lists(&teams[i], ns) && (!best || api_team_older(&teams[i], best)))
            best = &teams[i];
    return best;
}

const struct api_team *api_team_conflict(const struct api_team *teams, size_t nteams,
                                         const struct api_team *t, int *ns_index)
{
    const struct api_team *owner;
    int j;
    for (j = 0; j < t->nnamespaces; j++) {
        owner = api_namespace_team(teams, nteams, t->namespaces[j]);
        if (owner && owner != t && strcmp(owner->meta.name, t->meta.name)) {
            if (ns_index)
                *ns_index = j;
            return owner;
        }
    }
    return NULL;
}

int api_gpupool_decode(const cJSON *obj, struct api_gpupool *out, struct api_errors *errs)
{
    static const char *const fields[] = {"nodeSelector", "classes", "protected", "reserveGPUs", NULL};
    const cJSON *spec, *v, *c;
    char p[API_ERR_PATH_MAX], buf[64];
    int before = errs->n + errs->dropped, i = 0;

    memset(out, 0, sizeof *out);
    if (!(spec = api_decode_envelope(errs, obj, "GPUPool", 1, fields, &out->meta)))
        goto out;
    v = cJSON_GetObjectItemCaseSensitive(spec, "nodeSelector");
    if (!v)
        api_errors_add(errs, "spec.nodeSelector", "required");
    else
        api_decode_selector(errs, "spec.nodeSelector", v, out->node_selector, &out->nselector);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "classes")) &&
        api_expect_arr(errs, "spec.classes", v)) {
        cJSON_ArrayForEach(c, v)
        {
            enum api_class cl;
            api_path_idx(p, sizeof p, "spec.classes", i++);
            if (!api_get_str(errs, p, c, buf, sizeof buf))
                continue;
            if (api_class_parse(buf, &cl)) {
                api_errors_add(errs, p, "unknown class \"%s\"; known: Inference, Batch, Training", buf);
                continue;
            }
            if (out->classes & (1u << cl)) {
                api_errors_add(errs, p, "duplicate \"%s\"", buf);
                continue;
            }
            out->classes |= 1u << cl;
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "protected")))
        api_get_bool(errs, "spec.protected", v, &out->protect);
    if ((v = cJSON_GetObjectItemCaseSensitive(spec, "reserveGPUs")))
        api_get_int(errs, "spec.reserveGPUs", v, 0, API_RESERVE_MAX, &out->reserve_gpus);
out:
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}

int api_gpupool_validate(const struct api_gpupool *pool, struct api_errors *errs)
{
    int before = errs->n + errs->dropped;
    if (pool->meta.name[0])
        api_check_name(errs, "metadata.name", pool->meta.name, 0);
    if (pool->nselector == 0 && api_errors_find(errs, "spec.nodeSelector") < 0)
        api_errors_add(errs, "spec.nodeSelector", "must select nodes with at least one label");
    if (pool->reserve_gpus < 0 || pool->reserve_gpus > API_RESERVE_MAX)
        api_errors_add(errs, "spec.reserveGPUs", "must be 0..%d, got %d", API_RESERVE_MAX,
                       pool->reserve_gpus);
    if (pool->protect && pool->classes == 0)
        api_errors_add(errs, "spec.classes", "a protected pool needs at least one home class");
    if (pool->reserve_gpus > 0 && pool->classes == 0)
        api_errors_add(errs, "spec.reserveGPUs", "reserves headroom for home classes; set spec.classes");
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}

int api_priorityclass_decode(const cJSON *obj, struct api_priorityclass *out,
                             struct api_errors *errs)
{
    const cJSON *v;
    struct api_meta m;
    int before = errs->n + errs->dropped;
    memset(out, 0, sizeof *out);
    memset(&m, 0, sizeof m);
    if (!api_check_head(errs, obj, "scheduling.k8s.io/v1", "PriorityClass"))
        goto out;
    api_decode_meta(errs, obj, &m);
    gq_strlcpy(out->name, m.name, sizeof out->name);
    v = cJSON_GetObjectItemCaseSensitive(obj, "value");
    if (!v)
        api_errors_add(errs, "value", "required");
    else if (api_get_int(errs, "value", v, API_PRIORITY_MIN, API_PRIORITY_MAX, &out->value) &&
             out->value > API_PRIORITY_MAX)
        api_errors_add(errs, "value", "must be at most %d, got %d", API_PRIORITY_MAX, out->value);
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "globalDefault")))
        api_get_bool(errs, "globalDefault", v, &out->global_default);
out:
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}
