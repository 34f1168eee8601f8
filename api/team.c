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

int api_team_decode(const cJSON *obj, struct api_team *out, struct api_errors *errs)
{
    static const char *const fields[] = {"namespaces", "cohort", "quota", "weight", NULL};
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
    if (t->meta.name[0])
        api_check_name(errs, "metadata.name", t->meta.name, 0);
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
