/* Status encode (merge-patch bodies) and GPUJob status decode. */
#include "api_internal.h"

#include <string.h>

/* Add key: string, or null when empty (a merge patch then clears the field). */
static int add_str_or_null(cJSON *o, const char *k, const char *s)
{
    cJSON *v = s && s[0] ? cJSON_CreateString(s) : cJSON_CreateNull();
    if (!v)
        return 0;
    if (!cJSON_AddItemToObject(o, k, v)) {
        cJSON_Delete(v);
        return 0;
    }
    return 1;
}

static int add_num(cJSON *o, const char *k, double d)
{
    return cJSON_AddNumberToObject(o, k, d) != NULL;
}

/* Wrap st in {"status": st}; frees st on failure. */
static cJSON *wrap(cJSON *st)
{
    cJSON *root;
    if (!st)
        return NULL;
    root = cJSON_CreateObject();
    if (!root || !cJSON_AddItemToObject(root, "status", st)) {
        cJSON_Delete(root);
        cJSON_Delete(st);
        return NULL;
    }
    return root;
}

/* "conditions": [...] (every entry, so a merge patch replaces the list). */
static int add_conditions(cJSON *st, const struct api_condition *conds, int n)
{
    cJSON *arr = cJSON_AddArrayToObject(st, "conditions"), *c;
    int i, ok = arr != NULL;
    for (i = 0; arr && i < n && i < API_MAX_CONDITIONS; i++) {
        const struct api_condition *cd = &conds[i];
        c = cJSON_CreateObject();
        if (!c || !cJSON_AddItemToArray(arr, c)) {
            cJSON_Delete(c);
            return 0;
        }
        ok &= cJSON_AddStringToObject(c, "type", cd->type) != NULL;
        ok &= cJSON_AddStringToObject(c, "status", cd->status[0] ? cd->status : "Unknown") != NULL;
        ok &= cJSON_AddStringToObject(c, "reason", cd->reason) != NULL;
        ok &= cJSON_AddStringToObject(c, "message", cd->message) != NULL;
        ok &= add_str_or_null(c, "lastTransitionTime", cd->last_transition_time);
    }
    return ok;
}

cJSON *api_gpujob_status_encode(const struct api_gpujob_status *s)
{
    cJSON *st = cJSON_CreateObject(), *a = NULL, *arr;
    int i, ok = 1;
    if (!st)
        return NULL;
    ok &= add_str_or_null(st, "state", api_state_name(s->state));
    if (s->position > 0)
        ok &= add_num(st, "position", s->position);
    else
        ok &= cJSON_AddNullToObject(st, "position") != NULL;
    ok &= add_str_or_null(st, "message", s->message);
    ok &= add_str_or_null(st, "team", s->team);
    ok &= add_num(st, "priority", s->priority);
    ok &= add_num(st, "gpus", s->gpus);
    if (s->admission.present) {
        a = cJSON_AddObjectToObject(st, "admission");
        ok &= a != NULL;
        if (a) {
            ok &= add_str_or_null(a, "time", s->admission.time);
            ok &= add_str_or_null(a, "domain", s->admission.domain);
            arr = cJSON_AddArrayToObject(a, "nodes");
            ok &= arr != NULL;
            for (i = 0; arr && i < s->admission.nnodes && s->admission.nodes; i++) {
                cJSON *n = cJSON_CreateString(s->admission.nodes[i] ? s->admission.nodes[i] : "");
                if (!n || !cJSON_AddItemToArray(arr, n)) {
                    cJSON_Delete(n);
                    ok = 0;
                    break;
                }
            }
        }
    } else {
        ok &= cJSON_AddNullToObject(st, "admission") != NULL;
    }
    ok &= add_num(st, "preemptions", s->preemptions);
    if (s->last_preemption.present) {
        cJSON *lp = cJSON_AddObjectToObject(st, "lastPreemption");
        ok &= lp != NULL;
        if (lp) {
            ok &= add_str_or_null(lp, "by", s->last_preemption.by);
            ok &= add_str_or_null(lp, "reason", s->last_preemption.reason);
            ok &= add_str_or_null(lp, "time", s->last_preemption.time);
        }
    }
    ok &= add_conditions(st, s->conditions, s->nconditions);
    ok &= add_str_or_null(st, "startTime", s->start_time);
    ok &= add_str_or_null(st, "completionTime", s->completion_time);
    if (!ok) {
        cJSON_Delete(st);
        return NULL;
    }
    return wrap(st);
}

cJSON *api_team_status_encode(const struct api_team_status *s)
{
    cJSON *st = cJSON_CreateObject();
    int ok = st != NULL;
    if (!st)
        return NULL;
    ok &= add_num(st, "quota", s->quota);
    ok &= add_num(st, "used", s->used);
    ok &= add_num(st, "borrowed", s->borrowed);
    ok &= add_num(st, "pending", s->pending);
    ok &= add_num(st, "running", s->running);
    ok &= add_conditions(st, s->conditions, s->nconditions);
    if (!ok) {
        cJSON_Delete(st);
        return NULL;
    }
    return wrap(st);
}

cJSON *api_gpupool_status_encode(const struct api_gpupool_status *s)
{
    cJSON *st = cJSON_CreateObject();
    int ok = st != NULL;
    if (!st)
        return NULL;
    ok &= add_num(st, "gpus", s->gpus);
    ok &= add_num(st, "allocated", s->allocated);
    ok &= add_num(st, "free", s->free);
    ok &= add_num(st, "largestFree", s->largest_free);
    ok &= add_num(st, "pending", s->pending);
    if (!ok) {
        cJSON_Delete(st);
        return NULL;
    }
    return wrap(st);
}

static void opt_str(struct api_errors *errs, const cJSON *o, const char *k, const char *path,
                    char *dst, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (v && !cJSON_IsNull(v))
        api_get_str(errs, path, v, dst, len);
}

int api_gpujob_status_decode(const cJSON *obj, struct api_gpujob_status *out,
                             struct api_errors *errs)
{
    const cJSON *st, *v, *c;
    char buf[32], p[API_ERR_PATH_MAX], fp[API_ERR_PATH_MAX];
    int before = errs->n + errs->dropped, i = 0;
    memset(out, 0, sizeof *out);
    st = cJSON_GetObjectItemCaseSensitive(obj, "status");
    if (!st || cJSON_IsNull(st))
        return GQ_OK;
    if (!api_expect_obj(errs, "status", st))
        goto out;
    v = cJSON_GetObjectItemCaseSensitive(st, "state");
    if (v && !cJSON_IsNull(v) && api_get_str(errs, "status.state", v, buf, sizeof buf) &&
        api_state_parse(buf, &out->state))
        api_errors_add(errs, "status.state", "unknown state \"%s\"", buf);
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "position")) && !cJSON_IsNull(v))
        api_get_int(errs, "status.position", v, 0, INT32_MAX, &out->position);
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "priority")) && !cJSON_IsNull(v))
        api_get_int(errs, "status.priority", v, INT32_MIN, INT32_MAX, &out->priority);
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "gpus")) && !cJSON_IsNull(v))
        api_get_int(errs, "status.gpus", v, 0, INT32_MAX, &out->gpus);
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "preemptions")) && !cJSON_IsNull(v))
        api_get_int(errs, "status.preemptions", v, 0, INT32_MAX, &out->preemptions);
    opt_str(errs, st, "message", "status.message", out->message, sizeof out->message);
    opt_str(errs, st, "team", "status.team", out->team, sizeof out->team);
    opt_str(errs, st, "startTime", "status.startTime", out->start_time, sizeof out->start_time);
    opt_str(errs, st, "completionTime", "status.completionTime", out->completion_time,
            sizeof out->completion_time);
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "admission")) && !cJSON_IsNull(v) &&
        api_expect_obj(errs, "status.admission", v)) {
        out->admission.present = 1;
        opt_str(errs, v, "time", "status.admission.time", out->admission.time,
                sizeof out->admission.time);
        opt_str(errs, v, "domain", "status.admission.domain", out->admission.domain,
                sizeof out->admission.domain);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "lastPreemption")) && !cJSON_IsNull(v) &&
        api_expect_obj(errs, "status.lastPreemption", v)) {
        out->last_preemption.present = 1;
        opt_str(errs, v, "by", "status.lastPreemption.by", out->last_preemption.by,
                sizeof out->last_preemption.by);
        opt_str(errs, v, "reason", "status.lastPreemption.reason", out->last_preemption.reason,
                sizeof out->last_preemption.reason);
        opt_str(errs, v, "time", "status.lastPreemption.time", out->last_preemption.time,
                sizeof out->last_preemption.time);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "conditions")) && !cJSON_IsNull(v) &&
        api_expect_arr(errs, "status.conditions", v)) {
        cJSON_ArrayForEach(c, v)
        {
            struct api_condition *cd;
            api_path_idx(p, sizeof p, "status.conditions", i++);
            if (out->nconditions >= API_MAX_CONDITIONS) {
                api_errors_add(errs, "status.conditions", "at most %d entries", API_MAX_CONDITIONS);
                break;
            }
            if (!api_expect_obj(errs, p, c))
                continue;
            cd = &out->conditions[out->nconditions++];
            api_path(fp, sizeof fp, p, "type");
            opt_str(errs, c, "type", fp, cd->type, sizeof cd->type);
            api_path(fp, sizeof fp, p, "status");
            opt_str(errs, c, "status", fp, cd->status, sizeof cd->status);
            api_path(fp, sizeof fp, p, "reason");
            opt_str(errs, c, "reason", fp, cd->reason, sizeof cd->reason);
            api_path(fp, sizeof fp, p, "message");
            opt_str(errs, c, "message", fp, cd->message, sizeof cd->message);
            api_path(fp, sizeof fp, p, "lastTransitionTime");
            opt_str(errs, c, "lastTransitionTime", fp, cd->last_transition_time,
                    sizeof cd->last_transition_time);
        }
    }
out:
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}
