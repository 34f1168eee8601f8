/* Status encode (merge-patch bodies) and GPUJob status decode. */
#include "api_internal.h"

#include <stddef.h>
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

/* Add key: a positive integer, or null when 0 (or beyond 15 digits, which
 * cJSON would print with an exponent the API server refuses for an integer). */
static int add_num_or_null(cJSON *o, const char *k, int64_t v)
{
    if (v > 0 && v < 1000000000000000LL)
        return add_num(o, k, (double)v);
    return cJSON_AddNullToObject(o, k) != NULL;
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
            ok &= add_str_or_null(a, "deadline", s->admission.deadline);
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
    ok &= add_num_or_null(st, "observedGeneration", s->observed_generation);
    ok &= add_num(st, "attempt", s->attempt);
    ok &= add_num(st, "retries", s->retries);
    ok &= add_str_or_null(st, "enqueueTime", s->enqueue_time);
    ok &= add_num_or_null(st, "arrival", s->arrival);
    ok &= add_str_or_null(st, "waitReason", s->wait_reason);
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
    ok &= add_num_or_null(st, "observedGeneration", s->observed_generation);
    ok &= add_conditions(st, s->conditions, s->nconditions);
    cJSON *ph = cJSON_AddArrayToObject(st, "pendingHead");
    ok &= ph != NULL;
    for (int i = 0; ph && i < s->npending_head && i < API_MAX_PENDING_HEAD; i++) {
        const struct api_team_pending *e = &s->pending_head[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(ph, o)) {
            cJSON_Delete(o);
            ok = 0;
            break;
        }
        ok &= cJSON_AddStringToObject(o, "name", e->name) != NULL;
        ok &= cJSON_AddStringToObject(o, "namespace", e->namespace) != NULL;
        ok &= add_num(o, "position", e->position);
        ok &= add_num(o, "gpus", e->gpus);
    }
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

/* A non-negative integer that a double holds exactly (< 2^53); null or absent
 * leaves *out unchanged. */
static void get_i64(struct api_errors *errs, const cJSON *o, const char *k, const char *path,
                    int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v))
        return;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0) ||
        v->valuedouble != (double)(int64_t)v->valuedouble) {
        api_errors_add(errs, path, "must be a non-negative integer");
        return;
    }
    *out = (int64_t)v->valuedouble;
}

static void decode_conditions(struct api_errors *errs, const cJSON *st, struct api_condition *cs,
                              int *n)
{
    const cJSON *v, *c;
    char p[API_ERR_PATH_MAX], fp[API_ERR_PATH_MAX];
    int i = 0;
    if (!(v = cJSON_GetObjectItemCaseSensitive(st, "conditions")) || cJSON_IsNull(v) ||
        !api_expect_arr(errs, "status.conditions", v))
        return;
    cJSON_ArrayForEach(c, v)
    {
        struct api_condition *cd;
        api_path_idx(p, sizeof p, "status.conditions", i++);
        if (*n >= API_MAX_CONDITIONS) {
            api_errors_add(errs, "status.conditions", "at most %d entries", API_MAX_CONDITIONS);
            break;
        }
        if (!api_expect_obj(errs, p, c))
            continue;
        cd = &cs[(*n)++];
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

int api_gpujob_status_decode(const cJSON *obj, struct api_gpujob_status *out,
                             struct api_errors *errs)
{
    const cJSON *st, *v;
    char buf[32];
    int before = errs->n + errs->dropped;
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
        opt_str(errs, v, "deadline", "status.admission.deadline", out->admission.deadline,
                sizeof out->admission.deadline);
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
    decode_conditions(errs, st, out->conditions, &out->nconditions);
    get_i64(errs, st, "observedGeneration", "status.observedGeneration", &out->observed_generation);
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "attempt")) && !cJSON_IsNull(v))
        api_get_int(errs, "status.attempt", v, 0, INT32_MAX, &out->attempt);
    if ((v = cJSON_GetObjectItemCaseSensitive(st, "retries")) && !cJSON_IsNull(v))
        api_get_int(errs, "status.retries", v, 0, INT32_MAX, &out->retries);
    opt_str(errs, st, "enqueueTime", "status.enqueueTime", out->enqueue_time, sizeof out->enqueue_time);
    opt_str(errs, st, "waitReason", "status.waitReason", out->wait_reason, sizeof out->wait_reason);
    get_i64(errs, st, "arrival", "status.arrival", &out->arrival);
out:
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}

int api_team_status_decode(const cJSON *obj, struct api_team_status *out, struct api_errors *errs)
{
    const cJSON *st, *v;
    int before = errs->n + errs->dropped;
    memset(out, 0, sizeof *out);
    st = cJSON_GetObjectItemCaseSensitive(obj, "status");
    if (!st || cJSON_IsNull(st))
        return GQ_OK;
    if (!api_expect_obj(errs, "status", st))
        goto out;
    static const struct { const char *k, *path; size_t off; } nums[] = {
        {"quota", "status.quota", offsetof(struct api_team_status, quota)},
        {"used", "status.used", offsetof(struct api_team_status, used)},
        {"borrowed", "status.borrowed", offsetof(struct api_team_status, borrowed)},
        {"pending", "status.pending", offsetof(struct api_team_status, pending)},
        {"running", "status.running", offsetof(struct api_team_status, running)},
    };
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
        if ((v = cJSON_GetObjectItemCaseSensitive(st, nums[k].k)) && !cJSON_IsNull(v))
            api_get_int(errs, nums[k].path, v, 0, INT32_MAX, (int32_t *)((char *)out + nums[k].off));
    get_i64(errs, st, "observedGeneration", "status.observedGeneration", &out->observed_generation);
    decode_conditions(errs, st, out->conditions, &out->nconditions);
out:
    return errs->n + errs->dropped > before ? GQ_EINVAL : GQ_OK;
}
