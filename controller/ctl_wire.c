/*
 * ctl_wire.c — the controller's side of the actuator (ctl_act.h): the hooks
 * through which the actuator's outcomes reach the memo table and the
 * reconcile loop, and the requests that consult a memo before they reach the
 * actuator (a status write only when it changed, one pod GET at a time, a
 * stray pod delete counted on its job's memo).
 *
 * Memos are looked up again by key in every hook: a memo may be dropped while
 * a request for it is in flight (ctl_int.h).
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_int.h"

void ctl_wake(struct gq_ctl *c)
{
    c->inputs++; /* the next reconcile is not quiet (ctl_cycle.c rc_quiet) */
    if (c->wake)
        c->wake(c);
}

/* The job of key is examined in full by the next reconcile, which the loop
 * is asked for. */
static void mark_key(struct gq_ctl *c, const char *key)
{
    ctl_memo_mark(&c->memo, key, c->reconciles + 1);
    ctl_wake(c);
}

static void hook_settled(void *ctx, int64_t intent_id, const char *key, int ok)
{
    struct gq_ctl *c = ctx;
    /* ctl_pod_delete's deletes ended, or an intent was acted on (a failed
     * one stays pending: the next reconcile acts again): until the pod watch
     * shows what they did (a lagging watch still shows the pods as they
     * were), the stray cleanup does not delete those pods again */
    struct ctl_memo *m = key[0] && (!intent_id || ok) ? ctl_memo_get(&c->memo, key, 0) : NULL;
    if (m) {
        if (!intent_id && m->pods.cleanup_inflight > 0)
            m->pods.cleanup_inflight--;
        m->pods.cleanup_done_ms = ctl_now_ms();
    }
    mark_key(c, key);
}

static void hook_pod_create_sent(void *ctx, const char *key, int attempt, const char *pod)
{
    struct gq_ctl *c = ctx;
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (m) {
        m->pods.created_attempt = attempt;
        (void)ctl_str_set(&m->pods.created_pod, pod, API_NAME_MAX + 32);
        m->pods.created_ms = ctl_now_ms();
    }
}

static void hook_pod_create_refused(void *ctx, const char *key, const char *msg)
{
    struct gq_ctl *c = ctx;
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (m)
        (void)ctl_str_set(&m->pods.create_err, msg && msg[0] ? msg : "refused", 256);
}

static void hook_pod_confirmed(void *ctx, const char *key, const char *pod, int rc)
{
    struct gq_ctl *c = ctx;
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (m) {
        m->pods.confirm_inflight = 0;
        if (rc == GQ_ENOTFOUND)
            (void)ctl_str_set(&m->pods.gone_pod, pod, API_NAME_MAX + 32);
        else
            m->pods.missing_since_ms = ctl_now_ms(); /* ask again after another grace period */
    }
    mark_key(c, key);
}

static int hook_status_end(void *ctx, const struct ctl_act_status_end *e)
{
    struct gq_ctl *c = ctx;
    struct ctl_memo *m = ctl_memo_get(&c->memo, e->key, 0);
    if (!m)
        return 0;
    if (e->transition && m->status.status_inflight > 0)
        m->status.status_inflight--;
    if (e->rc == GQ_OK) {
        if (e->state[0])
            gq_strlcpy(m->status.status_state, e->state, sizeof(m->status.status_state));
    } else if (e->not_sent == KUBE_NOT_SENT_SUPERSEDED) {
        /* a newer status of the object replaced it before it was sent */
    } else if (e->gen == m->status.status_gen) {
        /* the latest write failed or was dropped (low lane full): the next
         * reconcile computes the status again and writes it. 409: from
         * fresh state; 404: the object is gone. Never a blind retry. */
        gq_sstr_put(m->status.last_status);
        m->status.last_status = NULL;
        /* computed and written again: at once after an error; after a drop
         * (the low lane is full) with the next full pass, not the next
         * reconcile, or drops and rewrites feed each other */
        if (e->not_sent != KUBE_NOT_SENT_DROPPED)
            mark_key(c, e->key);
    }
    return 1;
}

/* How long after a delete ended the next may go: CTL_TTL_RETRY_MS, doubled
 * for each failure in a row past the first, at most CTL_TTL_RETRY_MAX_MS. */
static int64_t ttl_wait_ms(int fails)
{
    int64_t wait = CTL_TTL_RETRY_MS;
    for (int k = 1; k < fails && wait < CTL_TTL_RETRY_MAX_MS; k++)
        wait *= 2;
    return wait < CTL_TTL_RETRY_MAX_MS ? wait : CTL_TTL_RETRY_MAX_MS;
}

static void hook_job_deleted(void *ctx, const char *key, int rc)
{
    struct gq_ctl *c = ctx;
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (m) {
        m->ttl.inflight = 0;
        /* done: not sent again for a while, as the watch may still show the
         * object (or a finalizer holds it: its deletionTimestamp stops
         * rc_job_ttl once seen); failed: tried again later, the wait doubling */
        int done = ctl_act_job_delete_done(rc);
        m->ttl.fails = done ? 0 : m->ttl.fails + 1;
        m->ttl.retry_ms = ctl_now_ms() + ttl_wait_ms(m->ttl.fails);
        if (done)
            c->m.jobs_ttl_deleted++;
    }
    mark_key(c, key); /* a failure: tried again (not before retry_ms); done: the DELETED event follows */
}

static void hook_mark_dirty(void *ctx)
{
    ctl_wake(ctx);
}

/* The job's pods as the pod informer's events index them (ctl_index_pod). */
static const cJSON *const *hook_job_pods(void *ctx, const char *key, int *n)
{
    static const cJSON *const none[1] = {NULL};
    struct gq_ctl *c = ctx;
    *n = 0;
    if (c->index_stale)
        return NULL; /* the index missed an event: the actuator walks the cache */
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (!m || !m->pods.npods)
        return none; /* memos with pods are never dropped: it has none */
    *n = m->pods.npods;
    return m->pods.pods;
}

void ctl_act_wire(struct gq_ctl *c, void (*wake)(struct gq_ctl *c), const struct ctl_act_kube *kube,
                  void *kube_ctx)
{
    c->wake = wake;
    const struct ctl_act_hooks hooks = {c, hook_settled, hook_pod_create_sent, hook_pod_create_refused,
                                        hook_pod_confirmed, hook_status_end, hook_mark_dirty,
                                        hook_job_pods, hook_job_deleted};
    ctl_act_init(&c->act, kube, kube_ctx, c->cache[INF_JOBS],
                 c->cache[INF_PODS], &hooks, c->cfg.log_level, c->cfg.max_grace_period_s,
                 c->identity);
    c->act.st = c->st;
    ctl_act_event_budget(&c->act, c->cfg.event_qps, c->cfg.event_burst);
    gq_rate_init(&c->refresh, c->cfg.refresh_qps, c->cfg.refresh_burst);
}

void ctl_pod_delete(struct gq_ctl *c, const cJSON *pod, long grace, const char *key)
{
    struct ctl_memo *m = key ? ctl_memo_get(&c->memo, key, 0) : NULL;
    if (m)
        m->pods.cleanup_inflight++; /* until hook_settled */
    ctl_act_delete_pod(&c->act, pod, grace, key);
}

int ctl_job_delete(struct gq_ctl *c, const char *key, const char *ns, const char *name, const char *uid)
{
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (!m)
        return GQ_ENOTFOUND;
    if (m->ttl.inflight)
        return GQ_OK;
    int rc = ctl_act_delete_job(&c->act, key, ns, name, uid);
    if (!rc)
        m->ttl.inflight = 1; /* until hook_job_deleted */
    else
        m->ttl.retry_ms = ctl_now_ms() + ttl_wait_ms(m->ttl.fails);
    return rc;
}

void ctl_pod_confirm(struct gq_ctl *c, const char *key, const char *ns, const char *name)
{
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (!m || m->pods.confirm_inflight)
        return;
    if (!ctl_act_confirm_pod(&c->act, key, ns, name))
        m->pods.confirm_inflight = 1; /* until hook_pod_confirmed */
}

void ctl_status_lane_state(const char *state, int invalid, char *out, size_t len)
{
    snprintf(out, len, "%s%s", state ? state : "", state && invalid ? CTL_ACT_STATE_INVALID : "");
}

/* The lane state (ctl_status_lane_state) the object has as far as we know: what the API
 * server last accepted from us, else (no write yet, e.g. after a restart)
 * the cached GPUJob's status; 0 when unknown. */
static int known_state(struct gq_ctl *c, const struct ctl_memo *m, const char *memo_key, char *out, size_t len)
{
    char ns[API_NS_MAX], name[API_NAME_MAX];
    const char *slash = strchr(memo_key, '/');
    if (m->status.status_state[0]) {
        gq_strlcpy(out, m->status.status_state, len);
        return 1;
    }
    if (!slash || (size_t)(slash - memo_key) >= sizeof(ns) || strlen(slash + 1) >= sizeof(name))
        return 0;
    memcpy(ns, memo_key, (size_t)(slash - memo_key));
    ns[slash - memo_key] = 0;
    gq_strlcpy(name, slash + 1, sizeof(name));
    const cJSON *obj = kube_cache_get(c->cache[INF_JOBS], ns, name);
    const char *state = ctl_obj_str(obj, "status", "state");
    if (!state)
        return 0;
    const char *wr = ctl_obj_str(obj, "status", "waitReason");
    ctl_status_lane_state(state, wr && !strcmp(wr, ctl_wait_class_name(CTL_WAIT_INVALID)), out, len);
    return 1;
}

/* A patch changes the lane state when the object (or our last write) shows
 * another one. */
static int is_transition(struct gq_ctl *c, const struct ctl_memo *m, const char *memo_key, const char *state)
{
    char known[sizeof(m->status.status_state)];
    return !known_state(c, m, memo_key, known, sizeof(known)) || strcmp(known, state) != 0;
}

int ctl_status_would_refuse(struct gq_ctl *c, const char *memo_key, const char *path, const char *state,
                            int invalid)
{
    /* the lane first: it is full rarely, and asking costs no lookup of the job */
    if (!ctl_act_status_would_refuse(&c->act, path, 0))
        return 0;
    const struct ctl_memo *m = ctl_memo_get(&c->memo, memo_key, 0);
    char ls[sizeof(m->status.status_state)];
    ctl_status_lane_state(state, invalid, ls, sizeof(ls));
    return m && !is_transition(c, m, memo_key, ls);
}

int ctl_status_write(struct gq_ctl *c, const char *memo_key, const char *path, cJSON *patch, int invalid)
{
    struct ctl_memo *m = ctl_memo_get(&c->memo, memo_key, 1);
    if (!m)
        return GQ_ENOMEM;
    /* A write still waiting in the client's line is replaced by this one
     * (coalesced by path, in its place, at the higher priority); one on the
     * wire is followed by it. So a finished job's status never waits for its
     * older transitions to be written first. */
    char *printed = cJSON_PrintUnformatted(patch);
    if (!printed)
        return GQ_ENOMEM;
    if (m->status.last_status && !strcmp(m->status.last_status, printed)) {
        free(printed);
        return GQ_OK;
    }
    /* one copy, shared: the memo's last status and the request's body */
    char *json = gq_sstr_new(printed, strlen(printed));
    free(printed);
    if (!json)
        return GQ_ENOMEM;
    char state[32] = "";
    int transition = 0;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "status"), "state");
    if (cJSON_IsString(st) && st->valuestring) {
        ctl_status_lane_state(st->valuestring, invalid, state, sizeof(state));
        transition = is_transition(c, m, memo_key, state);
    }
    uint64_t gen = m->status.status_gen + 1;
    int rc = ctl_act_patch_status(&c->act, memo_key, path, json, transition, state, gen);
    if (rc) {
        gq_sstr_put(json);
        return rc;
    }
    m->status.status_gen = gen;
    gq_sstr_put(m->status.last_status);
    m->status.last_status = json;
    if (transition)
        m->status.status_inflight++; /* until hook_status_end */
    return GQ_OK;
}
