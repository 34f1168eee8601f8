/*
 * ctl_act.c — the actuator: acts on committed store intents (create the
 * gang's pods bound to their nodes; delete pods for preempt / suspend /
 * requeue / deletion), patches status subresources only when they changed,
 * and creates Events. Every request is asynchronous; an intent is marked done
 * only when all its requests succeeded (409 AlreadyExists on create and 404
 * on delete count as done), otherwise it stays pending and is retried by a
 * later reconcile.
 *
 * A multi-replica job also gets its headless Service, and every pod its
 * rendezvous (hostname, subdomain, environment: ctl.h "rendezvous"); the
 * Service's requests are outside the intents and never fail one.
 *
 * Lanes (kube.h "Request priorities"): pod creates and deletes and status
 * patches that change status.state are critical; other status patches and
 * Events are low (cosmetic: bounded, coalesced per object, dropped first).
 *
 * The interface (ctl_act.h) is the whole of what it sees of the controller:
 * requests through struct ctl_act_kube, lookups in the GPUJob and pod caches,
 * the store's rows and intents, and hooks for what happened.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "ctl_act.h"
#include "log.h"
#include "store.h"

#define LOGA(a, lvl, msg, ...) gq_log((a)->log_level, lvl, "act", msg, __VA_ARGS__)

/* ------------------------------------------------------------ requests */

static int k_create(void *k, enum kube_prio prio, const char *coll, const cJSON *obj, kube_response_cb cb,
                    void *ud)
{
    /* the actuator reads a create's status, never the object it returns */
    struct kube_req_opts ro = {prio, NULL, 0, 1};
    return kube_create_ex(k, &ro, coll, obj, cb, ud);
}

static int k_delete_rv(void *k, enum kube_prio prio, const char *path, long grace_s, const char *uid,
                       const char *rv, kube_response_cb cb, void *ud)
{
    return kube_delete_rv_p(k, prio, path, grace_s, uid, rv, cb, ud);
}

static int k_get(void *k, const char *path, kube_response_cb cb, void *ud)
{
    return kube_get(k, path, cb, ud);
}

static int k_patch_status(void *k, enum kube_prio prio, const char *path, const char *json,
                          kube_response_cb cb, void *ud)
{
    return kube_patch_status_sstr(k, prio, path, json, cb, ud);
}

static int k_event(void *k, enum kube_prio prio, const struct kube_objref *ref, const char *type,
                   const char *reason, const char *msg, const char *instance, kube_response_cb cb, void *ud)
{
    return kube_event_create_p(k, prio, ref, type, reason, msg, instance, cb, ud);
}

static size_t k_drop_queued(void *k, enum kube_prio prio)
{
    return kube_client_drop_queued(k, prio);
}

static int k_set_rank(void *k, int rank)
{
    return kube_client_set_rank(k, rank);
}

static int k_status_would_refuse(void *k, enum kube_prio prio, const char *path)
{
    return kube_patch_status_would_refuse(k, prio, path);
}

const struct ctl_act_kube ctl_act_kube_client = {k_create, k_delete_rv, k_get, k_patch_status, k_event,
                                                 k_drop_queued, k_set_rank, k_status_would_refuse};

/* The rank of the requests sent from now on (ctl_act.h); returns the one before. */
static int act_rank(struct ctl_act *a, int rank)
{
    return a->kube->set_rank ? a->kube->set_rank(a->kube_ctx, rank) : 0;
}
/* Ranks: deletes free capacity, so they go first; pod creates by their job's
 * priority (int32); within the normal lane a finished state passes the
 * others and a report of an invalid spec lets them pass. */
#define ACT_RANK_DELETE INT_MAX
#define ACT_RANK_FINISHED 1
#define ACT_RANK_INVALID (-1)

/* ------------------------------------------------------------ intents */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ctl_act_init(struct ctl_act *a, const struct ctl_act_kube *kube, void *kube_ctx,
                  const struct kube_cache *jobs, const struct kube_cache *pods,
                  const struct ctl_act_hooks *hooks, int log_level, double max_grace_s,
                  const char *identity)
{
    memset(a, 0, sizeof(*a));
    a->kube = kube;
    a->kube_ctx = kube_ctx;
    a->jobs = jobs;
    a->pods = pods;
    a->hooks = *hooks;
    a->log_level = log_level;
    a->max_grace_s = max_grace_s;
    gq_strlcpy(a->identity, identity ? identity : "", sizeof(a->identity));
    gq_ledger_init(&a->writes, CTL_WRITE_CREDIT_CAP, CTL_WRITE_DEBT_MAX);
    gq_rate_init(&a->floor_events, CTL_WRITE_FLOOR_QPS, 1);
    gq_rate_init(&a->floor_status, CTL_WRITE_FLOOR_QPS, 1);
}

void ctl_act_write_credit(struct ctl_act *a, double n)
{
    gq_ledger_credit(&a->writes, n);
}

/* The actuator's writes: each one the client takes is spent from the write
 * budget (a status patch that ends without being sent is refunded:
 * status_cb). Every write goes through these, so none goes unaccounted. */
static int act_sent(struct ctl_act *a, int rc)
{
    if (!rc)
        gq_ledger_spend(&a->writes, 1);
    return rc;
}

static int act_create(struct ctl_act *a, const char *coll, const cJSON *obj, kube_response_cb cb, void *ud)
{
    return act_sent(a, a->kube->create(a->kube_ctx, KUBE_PRIO_CRITICAL, coll, obj, cb, ud));
}

static int act_delete_obj(struct ctl_act *a, enum kube_prio prio, const char *path, long grace_s, const char *uid,
                          const char *rv, kube_response_cb cb, void *ud)
{
    return act_sent(a, a->kube->delete_rv(a->kube_ctx, prio, path, grace_s, uid, rv, cb, ud));
}

int ctl_act_narrate_take(struct ctl_act *a, int64_t now_ms)
{
    return gq_ledger_take(&a->writes, &a->floor_status, now_ms);
}

int64_t ctl_act_narrate_wait_ms(struct ctl_act *a, int64_t now_ms)
{
    return gq_ledger_wait_ms(&a->writes, &a->floor_status, now_ms);
}

void ctl_act_event_budget(struct ctl_act *a, int qps, int burst)
{
    gq_rate_init(&a->events, qps, burst);
    a->ns_qps = qps / 4.0;
    a->ns_burst = burst / 4.0; /* gq_rate_init makes it at least 1 */
}

#define CTL_EVNS_MAX 65536 /* namespaces with a budget of their own; more share the total */

/* Double the namespace table (rehashing); nothing when it is at its cap or
 * out of memory (known namespaces keep their budgets, new ones share the total). */
static void evns_grow(struct ctl_act *a)
{
    size_t cap = a->capevns ? a->capevns * 2 : 64;
    struct ctl_ev_ns *t = cap <= CTL_EVNS_MAX * 2 ? calloc(cap, sizeof(*t)) : NULL;
    if (!t)
        return;
    for (size_t i = 0; i < a->capevns; i++) {
        if (!a->evns[i].ns)
            continue;
        size_t h = (size_t)gq_hash_str(a->evns[i].ns) & (cap - 1);
        while (t[h].ns)
            h = (h + 1) & (cap - 1);
        t[h] = a->evns[i];
    }
    free(a->evns);
    a->evns = t;
    a->capevns = cap;
}

/* The budget of namespace ns, created on first use; NULL when there is none
 * (no limit, cluster-scoped, out of memory, or the table full). */
static struct gq_rate *ns_budget(struct ctl_act *a, const char *ns)
{
    if (a->events.rate <= 0 || !ns || !ns[0])
        return NULL;
    int full = (a->nevns + 1) * 2 > a->capevns;
    if (full) {
        evns_grow(a);
        full = (a->nevns + 1) * 2 > a->capevns;
    }
    if (!a->capevns)
        return NULL;
    size_t h = (size_t)gq_hash_str(ns) & (a->capevns - 1);
    while (a->evns[h].ns) {
        if (!strcmp(a->evns[h].ns, ns))
            return &a->evns[h].b;
        h = (h + 1) & (a->capevns - 1);
    }
    if (full || !(a->evns[h].ns = strdup(ns)))
        return NULL;
    gq_rate_init(&a->evns[h].b, a->ns_qps, a->ns_burst);
    a->nevns++;
    return &a->evns[h].b;
}

void ctl_act_release(struct ctl_act *a)
{
    free(a->inflight);
    free(a->done);
    for (size_t i = 0; i < a->capevns; i++)
        free(a->evns[i].ns);
    free(a->evns);
    a->evns = NULL;
    a->nevns = a->capevns = 0;
    a->inflight = a->done = NULL;
    a->ninflight = a->capinflight = a->ndone = a->capdone = 0;
}

struct op {
    struct ctl_act *a;
    int64_t intent_id; /* 0: not an intent (stray cleanup) */
    int outstanding;
    int failed;
    int armed;         /* all requests issued */
    char key[CTL_KEY_MAX];
};

/* a->inflight is kept sorted: lookups are O(log n) (the reconcile asks for
 * every pending intent). Position of id, or where it would go. */
static size_t inflight_pos(const struct ctl_act *a, int64_t id)
{
    size_t lo = 0, hi = a->ninflight;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->inflight[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int ctl_act_inflight(const struct ctl_act *a, int64_t id)
{
    size_t p = inflight_pos(a, id);
    return p < a->ninflight && a->inflight[p] == id;
}

static int inflight_add(struct ctl_act *a, int64_t id)
{
    if (a->ninflight == a->capinflight) {
        size_t cap = a->capinflight ? a->capinflight * 2 : 32;
        int64_t *n = realloc(a->inflight, cap * sizeof(*n));
        if (!n)
            return GQ_ENOMEM;
        a->inflight = n;
        a->capinflight = cap;
    }
    size_t p = inflight_pos(a, id);
    memmove(&a->inflight[p + 1], &a->inflight[p], (a->ninflight - p) * sizeof(int64_t));
    a->inflight[p] = id;
    a->ninflight++;
    return 0;
}

static void inflight_del(struct ctl_act *a, int64_t id)
{
    size_t p = inflight_pos(a, id);
    if (p < a->ninflight && a->inflight[p] == id) {
        memmove(&a->inflight[p], &a->inflight[p + 1], (a->ninflight - p - 1) * sizeof(int64_t));
        a->ninflight--;
    }
}

static int done_add(struct ctl_act *a, int64_t id)
{
    if (a->ndone == a->capdone) {
        size_t cap = a->capdone ? a->capdone * 2 : 64;
        int64_t *n = realloc(a->done, cap * sizeof(*n));
        if (!n)
            return GQ_ENOMEM;
        a->done = n;
        a->capdone = cap;
    }
    a->done[a->ndone++] = id;
    return 0;
}

void ctl_act_flush_done(struct ctl_act *a)
{
    char err[256];
    if (!a->ndone || !a->st || store_in_cycle(a->st))
        return;
    int rc = store_begin_cycle(a->st, err, sizeof(err));
    for (size_t i = 0; !rc && i < a->ndone; i++) {
        rc = store_intent_done(a->st, a->done[i], wall_ms(), err, sizeof(err));
        if (rc == GQ_ENOTFOUND)
            rc = 0; /* no longer pending */
    }
    if (rc) {
        if (store_in_cycle(a->st))
            store_rollback_cycle(a->st);
    } else {
        /* not synced: a mark lost with the power has its intent done again */
        rc = store_commit_cycle_lazy(a->st, err, sizeof(err));
    }
    if (rc) {
        a->store_errors++;
        LOGA(a, GQ_LOG_ERROR, "intents done not recorded; retried next cycle", " n=%zu err=\"%s\"",
             a->ndone, err);
        return;
    }
    LOGA(a, GQ_LOG_DEBUG, "intents done", " n=%zu", a->ndone);
    for (size_t i = 0; i < a->ndone; i++)
        inflight_del(a, a->done[i]);
    a->ndone = 0;
}

int ctl_act_write_done(struct ctl_act *a, int64_t now_ms, size_t *n, char *err, size_t errlen)
{
    *n = 0;
    if (!a->st)
        return GQ_OK;
    for (size_t i = 0; i < a->ndone; i++) {
        int rc = store_intent_done(a->st, a->done[i], now_ms, err, errlen);
        if (rc && rc != GQ_ENOTFOUND) /* not found: no longer pending */
            return rc;
    }
    *n = a->ndone;
    return GQ_OK;
}

void ctl_act_done_committed(struct ctl_act *a, size_t n)
{
    if (n > a->ndone)
        n = a->ndone;
    if (!n)
        return; /* a->done may be NULL: memmove must not see it */
    for (size_t i = 0; i < n; i++)
        inflight_del(a, a->done[i]);
    memmove(a->done, a->done + n, (a->ndone - n) * sizeof(*a->done));
    a->ndone -= n;
    LOGA(a, GQ_LOG_DEBUG, "intents done", " n=%zu", n);
}

/* Called when a request ends or when all were issued. */
static void op_settle(struct op *o)
{
    if (!o->armed || o->outstanding > 0)
        return;
    struct ctl_act *a = o->a;
    if (o->intent_id && !o->failed && !done_add(a, o->intent_id)) {
        /* recorded (and left in flight) by ctl_act_flush_done */
        LOGA(a, GQ_LOG_DEBUG, "intent acted on", " id=%lld job=%s", (long long)o->intent_id, o->key);
    } else if (o->intent_id) {
        if (!o->failed) {
            char err[256];
            if (!a->st || store_intent_done(a->st, o->intent_id, wall_ms(), err, sizeof(err))) {
                if (!a->st)
                    gq_strlcpy(err, "store not open", sizeof(err));
                a->store_errors++;
                LOGA(a, GQ_LOG_ERROR, "intent done not recorded", " id=%lld err=\"%s\"",
                     (long long)o->intent_id, err);
            } else {
                LOGA(a, GQ_LOG_DEBUG, "intent done", " id=%lld job=%s", (long long)o->intent_id, o->key);
            }
        }
        inflight_del(a, o->intent_id);
    }
    if (a->hooks.settled)
        a->hooks.settled(a->hooks.ctx, o->intent_id, o->key, !o->failed);
    free(o);
}

static void create_cb(const struct kube_response *resp, void *ud)
{
    struct op *o = ud;
    o->outstanding--;
    if (resp->rc != GQ_OK && resp->rc != GQ_ECONFLICT) {
        o->failed = 1;
        /* refused for what the pod is (400 bad request, 403 forbidden, 422
         * invalid): retrying cannot help; the next reconcile fails the job */
        if (resp->status == 400 || resp->status == 403 || resp->status == 422) {
            if (o->a->hooks.pod_create_refused)
                o->a->hooks.pod_create_refused(o->a->hooks.ctx, o->key, resp->errmsg);
        }
        LOGA(o->a, GQ_LOG_WARN, "pod create failed; will retry", " job=%s status=%ld err=\"%s\"",
             o->key, resp->status, resp->errmsg);
    }
    op_settle(o);
}

static void delete_cb(const struct kube_response *resp, void *ud)
{
    struct op *o = ud;
    o->outstanding--;
    /* 404: already gone; 409: a precondition failed = a different pod now, or
     * the pod changed since we saw it (it may have finished): not deleted,
     * looked at again by a later reconcile with its current state */
    if (resp->rc != GQ_OK && resp->rc != GQ_ENOTFOUND && resp->rc != GQ_ECONFLICT) {
        o->failed = 1;
        LOGA(o->a, GQ_LOG_WARN, "pod delete failed; will retry", " job=%s status=%ld err=\"%s\"",
             o->key, resp->status, resp->errmsg);
    }
    op_settle(o);
}

/* The grace period of a delete: grace when >= 0 (0 for a lost node), else
 * the pod's own (Kubernetes default 30 s), never above --max-grace-period, so
 * a template cannot keep its GPUs past a preemption or suspend. */
static long grace_cap(const struct ctl_act *a)
{
    double d = a->max_grace_s;
    return d >= 0 && d < 1e9 ? (long)d : 1000000000L;
}

static long delete_grace(const struct ctl_act *a, const cJSON *pod, long grace)
{
    long cap = grace_cap(a);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                      "terminationGracePeriodSeconds");
    if (grace < 0)
        grace = cJSON_IsNumber(g) && g->valuedouble >= 0 && g->valuedouble < 1e15 ? (long)g->valuedouble : 30;
    return grace < cap ? grace : cap;
}

static void op_delete(struct op *o, const cJSON *pod, long grace)
{
    const char *ns = ctl_obj_str(pod, "metadata", "namespace");
    const char *name = ctl_obj_str(pod, "metadata", "name");
    const char *uid = ctl_obj_str(pod, "metadata", "uid");
    const char *rv = ctl_obj_str(pod, "metadata", "resourceVersion");
    char path[CTL_PATH_MAX];
    if (!ns || !name || kube_path(path, sizeof(path), "/api/v1", ns, "pods", name, NULL)) {
        o->failed = 1;
        return;
    }
    o->outstanding++;
    /* only the pod as we saw it: one that finished meanwhile (Succeeded) is kept */
    struct ctl_act *a = o->a;
    int was = act_rank(a, ACT_RANK_DELETE);
    if (act_delete_obj(a, KUBE_PRIO_CRITICAL, path, delete_grace(a, pod, grace), uid, rv, delete_cb, o)) {
        o->outstanding--;
        o->failed = 1;
    }
    (void)act_rank(a, was);
}

void ctl_act_delete_pod(struct ctl_act *a, const cJSON *pod, long grace, const char *key)
{
    struct op *o = calloc(1, sizeof(*o));
    if (!o) {
        if (a->hooks.settled)
            a->hooks.settled(a->hooks.ctx, 0, key ? key : "", 0);
        return;
    }
    o->a = a;
    if (key)
        gq_strlcpy(o->key, key, sizeof(o->key));
    op_delete(o, pod, grace);
    o->armed = 1;
    op_settle(o);
}

/* A finished GPUJob's delete (ctl_act_delete_job). */
struct jdel_op {
    struct ctl_act *a;
    char key[CTL_KEY_MAX];
};

static void jdel_cb(const struct kube_response *resp, void *ud)
{
    struct jdel_op *o = ud;
    struct ctl_act *a = o->a;
    if (ctl_act_job_delete_done(resp->rc))
        LOGA(a, GQ_LOG_INFO, "finished GPUJob deleted (ttlSecondsAfterFinished)", " job=%s status=%ld", o->key,
             resp->status);
    else
        LOGA(a, GQ_LOG_WARN, "finished GPUJob not deleted: tried again later", " job=%s status=%ld err=\"%s\"",
             o->key, resp->status, resp->errmsg);
    if (a->hooks.job_deleted)
        a->hooks.job_deleted(a->hooks.ctx, o->key, resp->rc);
    free(o);
}

int ctl_act_delete_job(struct ctl_act *a, const char *key, const char *ns, const char *name, const char *uid)
{
    char path[CTL_PATH_MAX];
    if (!key || !uid || !uid[0] || kube_path(path, sizeof(path), "/apis/" API_GROUP_VERSION, ns, "gpujobs", name, NULL))
        return GQ_EINVAL;
    struct jdel_op *o = calloc(1, sizeof(*o));
    if (!o)
        return GQ_ENOMEM;
    o->a = a;
    gq_strlcpy(o->key, key, sizeof(o->key));
    int rc = a->kube->delete_rv(a->kube_ctx, KUBE_PRIO_LOW, path, -1, uid, NULL, jdel_cb, o);
    if (rc)
        free(o);
    return rc;
}

/* A pod absent from the cache: only the API server says whether it is gone. */
struct confirm_op {
    struct ctl_act *a;
    char key[CTL_KEY_MAX];
    char name[API_NAME_MAX + 32];
};

static void confirm_cb(const struct kube_response *resp, void *ud)
{
    struct confirm_op *o = ud;
    struct ctl_act *a = o->a;
    if (resp->rc == GQ_ENOTFOUND)
        LOGA(a, GQ_LOG_WARN, "pod absent from the cache is gone (GET 404)", " job=%s pod=%s", o->key, o->name);
    else if (resp->rc == GQ_OK)
        LOGA(a, GQ_LOG_INFO, "pod absent from the cache exists (GET 200): the pod watch lags", " job=%s pod=%s",
             o->key, o->name);
    else
        LOGA(a, GQ_LOG_WARN, "pod absent from the cache: GET failed; asking again later",
             " job=%s pod=%s status=%ld err=\"%s\"", o->key, o->name, resp->status, resp->errmsg);
    if (a->hooks.pod_confirmed)
        a->hooks.pod_confirmed(a->hooks.ctx, o->key, o->name, resp->rc);
    free(o);
}

int ctl_act_confirm_pod(struct ctl_act *a, const char *key, const char *ns, const char *name)
{
    char path[CTL_PATH_MAX];
    int rc = kube_path(path, sizeof(path), "/api/v1", ns, "pods", name, NULL);
    if (rc)
        return rc;
    struct confirm_op *o = calloc(1, sizeof(*o));
    if (!o)
        return GQ_ENOMEM;
    o->a = a;
    gq_strlcpy(o->key, key, sizeof(o->key));
    gq_strlcpy(o->name, name, sizeof(o->name));
    if ((rc = a->kube->get(a->kube_ctx, path, confirm_cb, o))) {
        free(o);
        return rc;
    }
    return 0;
}

/* ------------------------------------------------------------ rendezvous */

const char *const ctl_rdv_vars[CTL_RDV_NVARS] = {
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK", "GANGQ_REPLICA_INDEX",
    "GANGQ_REPLICA_COUNT", "GANGQ_MASTER_ADDR", "GANGQ_MASTER_PORT", "GANGQ_JOB_NAME",
};

#define RDV_LABEL_MAX 63

int ctl_rdv_dns_ok(const char *job, int replicas, char *why, size_t whylen)
{
    size_t n = job ? strlen(job) : 0;
    char last[24];
    if (!why || !whylen) {
        why = last; /* scratch: the reason is not wanted */
        whylen = sizeof(last);
    }
    why[0] = 0;
    if (!n || n > RDV_LABEL_MAX) {
        snprintf(why, whylen, "the job name is %zu characters; a Service name is 1-%d", n, RDV_LABEL_MAX);
        return 0;
    }
    if (job[0] < 'a' || job[0] > 'z' || job[n - 1] == '-') {
        snprintf(why, whylen, "the job name is not a DNS-1035 label (a Service name starts with a "
                              "lowercase letter and ends with a letter or digit)");
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = job[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) {
            snprintf(why, whylen, "the job name is not a DNS-1035 label ('%c' at %zu; a Service name "
                                  "holds lowercase letters, digits and '-')", ch, i);
            return 0;
        }
    }
    if (replicas <= 1)
        return 1; /* the Service name only */
    int len = snprintf(last, sizeof(last), "-%d", replicas - 1);
    if (len < 0 || n + (size_t)len > RDV_LABEL_MAX) {
        snprintf(why, whylen, "the hostname of the last replica (\"<job>%s\") would be %zu characters, "
                              "over %d", last, n + (size_t)(len > 0 ? len : 0), RDV_LABEL_MAX);
        return 0;
    }
    return 1;
}

/* spec.masterPort of a GPUJob spec (CTL_RDV_PORT_DEFAULT when absent or out of range). */
static int spec_port(const cJSON *spec)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec, "masterPort");
    if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 65535)
        return (int)v->valuedouble;
    return CTL_RDV_PORT_DEFAULT;
}

int ctl_rdv_port(const cJSON *job)
{
    cJSON *tmp;
    int port = spec_port(ctl_job_spec(job, &tmp));
    cJSON_Delete(tmp);
    return port;
}

/* Append {name, value} to env unless an entry already has that name. */
static int env_add(cJSON *env, const char *name, const char *value)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, env)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(n) && n->valuestring && !strcmp(n->valuestring, name))
            return 0; /* the template's own */
    }
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "name", name) || !cJSON_AddStringToObject(o, "value", value) ||
        !cJSON_AddItemToArray(env, o)) {
        cJSON_Delete(o);
        return GQ_ENOMEM;
    }
    return 0;
}

static int env_add_all(cJSON *containers, const char *const *vals)
{
    cJSON *ct;
    if (!cJSON_IsArray(containers))
        return 0;
    cJSON_ArrayForEach(ct, containers)
    {
        if (!cJSON_IsObject(ct))
            continue;
        cJSON *env = cJSON_GetObjectItemCaseSensitive(ct, "env");
        if (!env || cJSON_IsNull(env)) {
            cJSON_DeleteItemFromObjectCaseSensitive(ct, "env");
            if (!(env = cJSON_AddArrayToObject(ct, "env")))
                return GQ_ENOMEM;
        }
        if (!cJSON_IsArray(env))
            continue; /* not a pod's env: the API server answers for it */
        for (int i = 0; i < CTL_RDV_NVARS; i++)
            if (vals[i] && env_add(env, ctl_rdv_vars[i], vals[i]))
                return GQ_ENOMEM;
    }
    return 0;
}

int ctl_rdv_apply(cJSON *pspec, const char *ns, const char *job, int replica, int replicas, int port)
{
    char master[RDV_LABEL_MAX * 2 + API_NS_MAX + 16], host[RDV_LABEL_MAX + 1];
    char sport[16], sworld[16], srank[16];
    int dns = replicas > 1 && ctl_rdv_dns_ok(job, replicas, NULL, 0);
    if (replicas > 1 && dns) {
        snprintf(host, sizeof(host), "%s-%d", job, replica);
        snprintf(master, sizeof(master), "%s-0.%s.%s.svc", job, job, ns ? ns : "default");
        if (ctl_obj_set_str(pspec, "hostname", host) || ctl_obj_set_str(pspec, "subdomain", job))
            return GQ_ENOMEM;
    } else {
        gq_strlcpy(master, "localhost", sizeof(master));
    }
    snprintf(sport, sizeof(sport), "%d", port);
    snprintf(sworld, sizeof(sworld), "%d", replicas > 0 ? replicas : 1);
    snprintf(srank, sizeof(srank), "%d", replica);
    const char *maddr = replicas > 1 && !dns ? NULL : master; /* no stable name to give */
    const char *vals[CTL_RDV_NVARS] = {maddr, sport, sworld, srank, srank, srank, sworld, maddr, sport, job};
    int rc = env_add_all(cJSON_GetObjectItemCaseSensitive(pspec, "containers"), vals);
    if (!rc)
        rc = env_add_all(cJSON_GetObjectItemCaseSensitive(pspec, "initContainers"), vals);
    return rc;
}

/* spec.replicas of a GPUJob spec (1 when absent or not a number). */
static int spec_replicas(const cJSON *spec)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec, "replicas");
    if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= API_REPLICAS_MAX)
        return (int)v->valuedouble;
    return 1;
}

/* spec.replicas of a GPUJob object, pruned or not. */
static int job_replicas(const cJSON *job)
{
    cJSON *tmp;
    int n = spec_replicas(ctl_job_spec(job, &tmp));
    cJSON_Delete(tmp);
    return n;
}

/* An ownerReferences array naming the GPUJob as controller. Caller owns. */
static cJSON *owner_refs(const char *name, const char *uid)
{
    cJSON *refs = cJSON_CreateArray(), *ref = cJSON_CreateObject();
    if (!refs || !ref || !cJSON_AddItemToArray(refs, ref)) {
        cJSON_Delete(refs);
        cJSON_Delete(ref);
        return NULL;
    }
    if (ctl_obj_set_str(ref, "apiVersion", API_GROUP_VERSION) ||
        ctl_obj_set_str(ref, "kind", "GPUJob") ||
        ctl_obj_set_str(ref, "name", name) || ctl_obj_set_str(ref, "uid", uid ? uid : "") ||
        !cJSON_AddTrueToObject(ref, "controller") || !cJSON_AddTrueToObject(ref, "blockOwnerDeletion")) {
        cJSON_Delete(refs);
        return NULL;
    }
    return refs;
}

cJSON *ctl_rdv_service(const char *ns, const char *job, const char *uid)
{
    cJSON *svc = cJSON_CreateObject();
    cJSON *meta = svc ? cJSON_AddObjectToObject(svc, "metadata") : NULL;
    cJSON *labels = meta ? cJSON_AddObjectToObject(meta, "labels") : NULL;
    cJSON *spec = svc ? cJSON_AddObjectToObject(svc, "spec") : NULL;
    cJSON *sel = spec ? cJSON_AddObjectToObject(spec, "selector") : NULL;
    cJSON *refs = owner_refs(job, uid);
    int ok = svc && meta && labels && spec && sel && refs &&
             !ctl_obj_set_str(svc, "apiVersion", "v1") &&
             !ctl_obj_set_str(svc, "kind", "Service") && !ctl_obj_set_str(meta, "name", job) &&
             !ctl_obj_set_str(meta, "namespace", ns) && !ctl_obj_set_str(labels, CTL_LABEL_JOB, job) &&
             !ctl_obj_set_str(spec, "clusterIP", "None") && !ctl_obj_set_str(sel, CTL_LABEL_JOB, job) &&
             cJSON_AddTrueToObject(spec, "publishNotReadyAddresses");
    if (ok && !cJSON_AddItemToObject(meta, "ownerReferences", refs))
        ok = 0;
    else if (ok)
        refs = NULL;
    cJSON_Delete(refs);
    if (!ok) {
        cJSON_Delete(svc);
        return NULL;
    }
    return svc;
}

/* Build the pod for one replica from the template made gangq's
 * (api_pod_template_sanitize: no gangq.io/ labels or annotations of the
 * user's, no finalizers, grace capped at max_grace_s). Caller owns the result. */
static cJSON *build_pod(const cJSON *job, const struct store_job *row, const struct ctl_placement *pl,
                        const struct ctl_prep *p, int64_t max_grace_s)
{
    const char *ns = ctl_obj_str(job, "metadata", "namespace");
    const char *name = ctl_obj_str(job, "metadata", "name");
    const char *uid = ctl_obj_str(job, "metadata", "uid");
    cJSON *spec_tmp;
    const cJSON *spec = ctl_job_spec(job, &spec_tmp);
    if (!spec && cJSON_GetObjectItemCaseSensitive(job, "spec"))
        return NULL; /* the kept spec did not parse (out of memory): not a pod without it */
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(spec, "template");
    const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(spec, "gpu");
    int count = 0, shares = 0;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(gpu, "count")) && cJSON_IsNumber(v))
        count = v->valueint;
    if ((v = cJSON_GetObjectItemCaseSensitive(gpu, "shares")) && cJSON_IsNumber(v))
        shares = v->valueint;
    char podname[API_NAME_MAX + 32], buf[64];
    ctl_pod_name(name, pl, p, podname, sizeof(podname));

    cJSON *pod = cJSON_CreateObject();
    cJSON *t = tpl ? cJSON_Duplicate(tpl, 1) : cJSON_CreateObject();
    int ok = pod && t && !api_pod_template_sanitize(t, max_grace_s);
    cJSON *meta = NULL, *pspec = NULL, *labels = NULL, *ann = NULL;
    if (ok) {
        meta = ctl_obj_child(t, "metadata");
        pspec = ctl_obj_child(t, "spec");
        ok = meta && pspec;
    }
    if (ok) {
        labels = ctl_obj_child(meta, "labels");
        ann = ctl_obj_child(meta, "annotations");
        ok = labels && ann;
    }
    if (ok) {
        ok = !ctl_obj_set_str(pod, "apiVersion", "v1") && !ctl_obj_set_str(pod, "kind", "Pod") &&
             !ctl_obj_set_str(meta, "name", podname) && !ctl_obj_set_str(meta, "namespace", ns);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "generateName");
        ok = ok && !ctl_obj_set_str(labels, CTL_LABEL_JOB, name) &&
             !ctl_obj_set_str(labels, CTL_LABEL_TEAM, row->team);
        snprintf(buf, sizeof(buf), "%d", p->replica);
        ok = ok && !ctl_obj_set_str(labels, CTL_LABEL_REPLICA, buf);
        snprintf(buf, sizeof(buf), "%d", pl->attempt);
        ok = ok && !ctl_obj_set_str(labels, CTL_LABEL_ATTEMPT, buf);
        if (ok && p->devs) {
            char devs[160] = "";
            size_t off = 0;
            for (int d = 0; d < 32 && off < sizeof(devs) - 4; d++)
                if (p->devs & (1u << (unsigned)d))
                    off += (size_t)snprintf(devs + off, sizeof(devs) - off, "%s%d", off ? "," : "", d);
            ok = !ctl_obj_set_str(ann, CTL_ANN_GPU_DEVICES, devs);
        }
        if (ok && shares && !count) {
            snprintf(buf, sizeof(buf), "%d", shares);
            ok = !ctl_obj_set_str(ann, CTL_ANN_GPU_MILLI, buf);
        }
    }
    if (ok) {
        cJSON *refs = owner_refs(name, uid);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
        if (!refs || !cJSON_AddItemToObject(meta, "ownerReferences", refs)) {
            cJSON_Delete(refs);
            ok = 0;
        }
    }
    if (ok) {
        ok = !ctl_obj_set_str(pspec, "nodeName", p->node) &&
             !ctl_rdv_apply(pspec, ns, name, p->replica, spec_replicas(spec), spec_port(spec));
        cJSON *cs = cJSON_GetObjectItemCaseSensitive(pspec, "containers");
        cJSON *c0 = cJSON_GetArrayItem(cs, 0);
        if (ok && c0 && count > 0) {
            cJSON *res = ctl_obj_child(c0, "resources");
            cJSON *req = res ? ctl_obj_child(res, "requests") : NULL;
            cJSON *lim = res ? ctl_obj_child(res, "limits") : NULL;
            snprintf(buf, sizeof(buf), "%d", count);
            ok = req && lim && !ctl_obj_set_str(req, CTL_GPU_RESOURCE, buf) &&
                 !ctl_obj_set_str(lim, CTL_GPU_RESOURCE, buf);
        }
    }
    if (ok) {
        if (!cJSON_AddItemToObject(pod, "metadata", cJSON_DetachItemFromObjectCaseSensitive(t, "metadata")) ||
            !cJSON_AddItemToObject(pod, "spec", cJSON_DetachItemFromObjectCaseSensitive(t, "spec")))
            ok = 0;
    }
    cJSON_Delete(t);
    cJSON_Delete(spec_tmp);
    if (!ok) {
        cJSON_Delete(pod);
        return NULL;
    }
    return pod;
}

static const cJSON *find_pod(struct ctl_act *a, const char *ns, const char *name)
{
    return kube_cache_get(a->pods, ns, name);
}

struct pod_list {
    const char *ns, *job;
    const cJSON **v;
    int n, cap;
};

static int pods_of_cb(const cJSON *o, void *ud)
{
    struct pod_list *l = ud;
    const char *ns = ctl_obj_str(o, "metadata", "namespace");
    const char *jb = ctl_obj_label(o, CTL_LABEL_JOB);
    if (!ns || !jb || strcmp(ns, l->ns) || strcmp(jb, l->job))
        return 0;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        const cJSON **v = realloc(l->v, (size_t)cap * sizeof(*v));
        if (!v)
            return GQ_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = o;
    return 0;
}

/* ------------------------------------------------------------ headless Service */

/* The Service of a multi-replica job (ctl_rdv_service) is kept in step with
 * the job outside the intents: its requests never hold an intent pending (a
 * failure is logged and Evented, never fatal to the job, and the pods are
 * created regardless; the next admission tries again). Created (critical
 * lane, just before the pods) at every admission, a 409 AlreadyExists looked
 * at with a GET; deleted when the job is gone (its DELETE intent finds no
 * store row: one GET per deleted job). A finished job keeps it, like its
 * finished pods, until the GPUJob is deleted; its ownerReference lets the
 * garbage collector delete it too. Only a Service whose controller
 * ownerReference names a GPUJob of the job's name is ever deleted (uid
 * precondition); one owned by an earlier GPUJob of the same name is replaced;
 * any other Service of that name is left alone (Warning ServiceConflict). At
 * most two creates per chain of requests. */
struct svc_op {
    struct ctl_act *a;
    int creates; /* creates sent */
    char key[CTL_KEY_MAX];
    char ns[API_NS_MAX], name[API_NAME_MAX];
    char path[CTL_PATH_MAX], coll[CTL_PATH_MAX];
};

static void svc_post(struct svc_op *o);
static void svc_get(struct svc_op *o);

static void svc_event(struct svc_op *o, const char *type, const char *reason, const char *msg)
{
    const cJSON *job = kube_cache_get(o->a->jobs, o->ns, o->name);
    if (job)
        ctl_act_event(o->a, job, type, reason, msg);
}

/* Whether the job should have its Service now: its GPUJob exists (in the
 * cache) with more than one replica and a usable name. uid receives its uid. */
static int svc_wanted(struct svc_op *o, char *uid, size_t uidlen)
{
    const cJSON *job = kube_cache_get(o->a->jobs, o->ns, o->name);
    const char *u = ctl_obj_str(job, "metadata", "uid");
    uid[0] = 0;
    int n = job ? job_replicas(job) : 0;
    if (!u || n < 2 || !ctl_rdv_dns_ok(o->name, n, NULL, 0))
        return 0;
    gq_strlcpy(uid, u, uidlen);
    return 1;
}

static void svc_post_cb(const struct kube_response *resp, void *ud)
{
    struct svc_op *o = ud;
    char msg[1024];
    if (resp->rc == GQ_OK) {
        LOGA(o->a, GQ_LOG_INFO, "headless service created", " job=%s service=%s", o->key, o->name);
    } else if (resp->rc == GQ_ECONFLICT) {
        svc_get(o); /* exists: whose? */
        return;
    } else {
        LOGA(o->a, GQ_LOG_WARN, "headless service not created; replicas may not resolve each other",
             " job=%s status=%ld err=\"%s\"", o->key, resp->status, resp->errmsg);
        snprintf(msg, sizeof(msg), "headless Service %s not created (HTTP %ld: %s); replica hostnames "
                 "will not resolve until the job is admitted again", o->name, resp->status, resp->errmsg);
        svc_event(o, "Warning", "ServiceFailed", msg);
    }
    free(o);
}

static void svc_delete_cb(const struct kube_response *resp, void *ud)
{
    struct svc_op *o = ud;
    char uid[API_UID_MAX];
    if (resp->rc == GQ_OK || resp->rc == GQ_ENOTFOUND) {
        LOGA(o->a, GQ_LOG_INFO, "headless service deleted", " job=%s service=%s", o->key, o->name);
        if (o->creates < 2 && svc_wanted(o, uid, sizeof(uid))) {
            svc_post(o); /* it was an earlier GPUJob's */
            return;
        }
    } else if (resp->rc != GQ_ECONFLICT) { /* 409: it changed since the GET; left as it is */
        LOGA(o->a, GQ_LOG_WARN, "headless service not deleted", " job=%s status=%ld err=\"%s\"", o->key,
             resp->status, resp->errmsg);
    }
    free(o);
}

static void svc_get_cb(const struct kube_response *resp, void *ud)
{
    struct svc_op *o = ud;
    char uid[API_UID_MAX], msg[1024];
    int want = svc_wanted(o, uid, sizeof(uid));
    if (resp->rc == GQ_ENOTFOUND) {
        if (want && o->creates < 2) {
            svc_post(o);
            return;
        }
    } else if (resp->rc != GQ_OK) {
        LOGA(o->a, GQ_LOG_WARN, "headless service: GET failed", " job=%s status=%ld err=\"%s\"", o->key,
             resp->status, resp->errmsg);
    } else {
        cJSON *svc = kube_response_json(resp);
        const cJSON *refs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(svc, "metadata"),
                                                             "ownerReferences");
        const cJSON *ref, *owner = NULL;
        cJSON_ArrayForEach(ref, refs)
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller")))
                owner = ref;
        const char *av = ctl_obj_str(owner, "apiVersion", NULL), *kind = ctl_obj_str(owner, "kind", NULL);
        const char *oname = ctl_obj_str(owner, "name", NULL), *ouid = ctl_obj_str(owner, "uid", NULL);
        int ours = av && kind && oname && ouid && !strncmp(av, "gangq.io/", 9) && !strcmp(kind, "GPUJob") &&
                   !strcmp(oname, o->name);
        const char *suid = ctl_obj_str(svc, "metadata", "uid");
        if (!ours) {
            if (want) {
                LOGA(o->a, GQ_LOG_WARN, "a service of the job's name exists and is not the job's; left as it is",
                     " job=%s service=%s", o->key, o->name);
                snprintf(msg, sizeof(msg), "Service %s exists and is not owned by this GPUJob; it is left "
                         "as it is and replica hostnames resolve only if it selects %s=%s", o->name,
                         CTL_LABEL_JOB, o->name);
                svc_event(o, "Warning", "ServiceConflict", msg);
            } else {
                LOGA(o->a, GQ_LOG_INFO, "a service of the job's name is not the job's; not deleted",
                     " job=%s service=%s", o->key, o->name);
            }
        } else if (!(want && !strcmp(ouid, uid)) && suid) {
            if (!act_delete_obj(o->a, KUBE_PRIO_NORMAL, o->path, -1, suid, NULL, svc_delete_cb, o)) {
                cJSON_Delete(svc);
                return;
            }
        }
        cJSON_Delete(svc);
    }
    free(o);
}

static void svc_get(struct svc_op *o)
{
    if (o->a->kube->get(o->a->kube_ctx, o->path, svc_get_cb, o))
        free(o);
}

static void svc_post(struct svc_op *o)
{
    const cJSON *job = kube_cache_get(o->a->jobs, o->ns, o->name);
    cJSON *svc = job ? ctl_rdv_service(o->ns, o->name, ctl_obj_str(job, "metadata", "uid")) : NULL;
    o->creates++;
    if (!svc || act_create(o->a, o->coll, svc, svc_post_cb, o))
        free(o);
    cJSON_Delete(svc);
}

static struct svc_op *svc_op_new(struct ctl_act *a, const char *key, const char *ns, const char *name)
{
    struct svc_op *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->a = a;
    gq_strlcpy(o->key, key, sizeof(o->key));
    gq_strlcpy(o->ns, ns, sizeof(o->ns));
    gq_strlcpy(o->name, name, sizeof(o->name));
    if (kube_path(o->coll, sizeof(o->coll), "/api/v1", ns, "services", NULL, NULL) ||
        kube_path(o->path, sizeof(o->path), "/api/v1", ns, "services", name, NULL)) {
        free(o);
        return NULL;
    }
    return o;
}

/* Admission of a job: its Service, when it has more than one replica. */
static void svc_admit(struct ctl_act *a, const cJSON *job, const char *key, const char *ns, const char *name)
{
    char why[256], msg[1024];
    int n = job_replicas(job);
    if (n < 2)
        return;
    if (!ctl_rdv_dns_ok(name, n, why, sizeof(why))) {
        LOGA(a, GQ_LOG_WARN, "no headless service or replica hostnames", " job=%s why=\"%s\"", key, why);
        snprintf(msg, sizeof(msg), "no headless Service, replica hostnames or MASTER_ADDR: %s; the "
                 "replicas get RANK and WORLD_SIZE only", why);
        ctl_act_event(a, job, "Warning", "NoRendezvousService", msg);
        return;
    }
    struct svc_op *o = svc_op_new(a, key, ns, name);
    if (o)
        svc_post(o);
}

/* The job is gone: its Service, if it is the job's, is deleted (after a GET:
 * only ours, and not one a newer GPUJob of the name holds). */
static void svc_release(struct ctl_act *a, const char *key, const char *ns, const char *name)
{
    struct svc_op *o;
    if (!ctl_rdv_dns_ok(name, 1, NULL, 0) || !(o = svc_op_new(a, key, ns, name)))
        return;
    svc_get(o);
}

/* ADMIT: create the placed replicas' pods that do not exist yet. */
static void act_admit(struct ctl_act *a, struct op *o, const char *ns, const char *name)
{
    char err[256];
    struct store_job *row = NULL;
    struct ctl_placement pl;
    ctl_placement_init(&pl);
    if (store_job_get(a->st, o->key, &row, err, sizeof(err)))
        goto out; /* job gone: nothing to create (its DELETE intent cleans up) */
    if (row->state != STORE_ADMITTED && row->state != STORE_RUNNING)
        goto out; /* stale admission: superseded by a later decision */
    const cJSON *job = kube_cache_get(a->jobs, ns, name);
    if (!job) {
        o->failed = 1; /* the next reconcile deletes the row and rolls back */
        goto out;
    }
    const char *uid = ctl_obj_str(job, "metadata", "uid");
    if (!uid || strcmp(uid, row->uid)) {
        o->failed = 1;
        goto out;
    }
    if (ctl_placement_parse(row->placement, &pl, err, sizeof(err))) {
        LOGA(a, GQ_LOG_ERROR, "bad placement", " job=%s err=\"%s\"", o->key, err);
        goto out;
    }
    char coll[CTL_PATH_MAX];
    if (kube_path(coll, sizeof(coll), "/api/v1", ns, "pods", NULL, NULL)) {
        o->failed = 1;
        goto out;
    }
    /* a gang's creates wait in line by its priority: under a loaded API
     * server what the scheduler admitted first for its priority starts first */
    int was = act_rank(a, row->priority < INT_MIN ? INT_MIN : row->priority > INT_MAX ? INT_MAX : (int)row->priority);
    svc_admit(a, job, o->key, ns, name); /* before the pods, never holding them back */
    for (int k = 0; k < pl.n; k++) {
        char podname[API_NAME_MAX + 32];
        ctl_pod_name(name, &pl, &pl.rep[k], podname, sizeof(podname));
        if (find_pod(a, ns, podname))
            continue;
        cJSON *pod = build_pod(job, row, &pl, &pl.rep[k], grace_cap(a));
        if (!pod) {
            o->failed = 1;
            continue;
        }
        o->outstanding++;
        if (act_create(a, coll, pod, create_cb, o)) {
            o->outstanding--;
            o->failed = 1;
        } else {
            LOGA(a, GQ_LOG_INFO, "creating pod", " job=%s pod=%s node=%s", o->key, podname,
                 pl.rep[k].node);
            if (a->hooks.pod_create_sent) /* it may run before the pod watch shows it */
                a->hooks.pod_create_sent(a->hooks.ctx, o->key, pl.attempt, podname);
        }
        cJSON_Delete(pod);
    }
    (void)act_rank(a, was);
out:
    ctl_placement_release(&pl);
    store_job_free(row);
}

/* PREEMPT/SUSPEND/DELETE: delete the job's pods that its placement does not hold. */
static void act_delete(struct ctl_act *a, struct op *o, int kind, const char *ns, const char *name)
{
    char err[256];
    struct store_job *row = NULL;
    struct ctl_placement pl;
    ctl_placement_init(&pl);
    if (store_job_get(a->st, o->key, &row, err, sizeof(err)))
        row = NULL;
    if (row && (row->state == STORE_ADMITTED || row->state == STORE_RUNNING))
        ctl_placement_parse(row->placement, &pl, err, sizeof(err));
    /* the job is gone (its row too): its headless Service goes as well */
    if (kind == STORE_INTENT_DELETE && !row)
        svc_release(a, o->key, ns, name);
    struct pod_list l = {ns, name, NULL, 0, 0};
    int np = 0;
    const cJSON *const *pods = a->hooks.job_pods ? a->hooks.job_pods(a->hooks.ctx, o->key, &np) : NULL;
    if (!pods) {
        kube_cache_foreach(a->pods, pods_of_cb, &l);
        pods = l.v;
        np = l.n;
    }
    for (int i = 0; i < np; i++) {
        const cJSON *pod = pods[i];
        if (ctl_pod_terminal(pod) && row)
            continue; /* finished pods of a live job stay for inspection */
        const char *pn = ctl_obj_str(pod, "metadata", "name");
        int held = 0;
        for (int k = 0; pn && k < pl.n; k++) {
            char want[API_NAME_MAX + 32];
            ctl_pod_name(name, &pl, &pl.rep[k], want, sizeof(want));
            held |= !strcmp(want, pn);
        }
        if (held)
            continue; /* held by a newer admission */
        if (ctl_obj_str(pod, "metadata", "deletionTimestamp"))
            continue;
        LOGA(a, GQ_LOG_INFO, "deleting pod", " job=%s pod=%s", o->key, ctl_obj_str(pod, "metadata", "name"));
        op_delete(o, pod, -1);
    }
    free(l.v);
    ctl_placement_release(&pl);
    store_job_free(row);
}

struct pend {
    int64_t id;
    int kind;
    char key[CTL_KEY_MAX];
};
struct pend_list {
    struct pend *v;
    int n, cap;
};

static int pend_cb(void *ud, const struct store_intent *in)
{
    struct pend_list *l = ud;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        struct pend *v = realloc(l->v, (size_t)cap * sizeof(*v));
        if (!v)
            return GQ_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].id = in->id;
    l->v[l->n].kind = in->kind;
    gq_strlcpy(l->v[l->n].key, in->job_key, sizeof(l->v[l->n].key));
    l->n++;
    return 0;
}

void ctl_act_intents(struct ctl_act *a)
{
    char err[256];
    struct pend_list l = {0};
    if (!a->st)
        return;
    if (store_intents_pending(a->st, pend_cb, &l, err, sizeof(err))) {
        a->store_errors++;
        LOGA(a, GQ_LOG_ERROR, "reading intents failed", " err=\"%s\"", err);
        free(l.v);
        return;
    }
    for (int i = 0; i < l.n; i++) {
        struct pend *p = &l.v[i];
        if (ctl_act_inflight(a, p->id))
            continue;
        char ns[API_NS_MAX], name[API_NAME_MAX];
        const char *slash = strchr(p->key, '/');
        if (!slash || (size_t)(slash - p->key) >= sizeof(ns))
            continue;
        memcpy(ns, p->key, (size_t)(slash - p->key));
        ns[slash - p->key] = 0;
        gq_strlcpy(name, slash + 1, sizeof(name));
        struct op *o = calloc(1, sizeof(*o));
        if (!o || inflight_add(a, p->id)) {
            free(o);
            break;
        }
        o->a = a;
        o->intent_id = p->id;
        gq_strlcpy(o->key, p->key, sizeof(o->key));
        if (p->kind == STORE_INTENT_ADMIT)
            act_admit(a, o, ns, name);
        else if (p->kind == STORE_INTENT_PREEMPT || p->kind == STORE_INTENT_SUSPEND ||
                 p->kind == STORE_INTENT_DELETE)
            act_delete(a, o, p->kind, ns, name);
        o->armed = 1;
        op_settle(o);
    }
    free(l.v);
}

/* ------------------------------------------------------------ status, events */

/* One per status patch waiting or in flight (thousands wait under load):
 * key and path live in buf, sized to them. */
struct status_op {
    struct ctl_act *a;
    const char *key;   /* in buf */
    const char *path;  /* in buf */
    uint64_t gen;      /* the caller's number */
    int transition;    /* changes the lane state */
    char state[32];    /* the caller's lane state: status.state, "/Invalid" appended for an invalid
                        * spec ("" = none; the longest is "Preempted/Invalid") */
    char buf[];        /* key NUL path NUL */
};

static void reread_cb(const struct kube_response *resp, void *ud)
{
    struct ctl_act *a = ud;
    (void)resp; /* the informer delivers the fresh object; reconcile from it */
    if (a->hooks.mark_dirty)
        a->hooks.mark_dirty(a->hooks.ctx);
}

static void status_cb(const struct kube_response *resp, void *ud)
{
    struct status_op *s = ud;
    struct ctl_act *a = s->a;
    struct ctl_act_status_end e = {s->key, s->path, s->gen, s->transition, s->state,
                                   resp->rc, resp->status, resp->not_sent};
    if (resp->not_sent)
        gq_ledger_credit(&a->writes, 1); /* superseded or dropped: never written */
    if (a->hooks.status_end && a->hooks.status_end(a->hooks.ctx, &e)) {
        if (resp->rc == GQ_ECONFLICT && a->kube->get(a->kube_ctx, s->path, reread_cb, a) && a->hooks.mark_dirty)
            a->hooks.mark_dirty(a->hooks.ctx);
        if (resp->rc != GQ_OK && resp->rc != GQ_ENOTFOUND && !resp->not_sent)
            LOGA(a, GQ_LOG_WARN, "status patch failed", " obj=%s status=%ld err=\"%s\"", s->key, resp->status,
                 resp->errmsg);
    }
    free(s);
}

/* The lane of a status patch: state changes normal, the rest low. */
static enum kube_prio status_lane(int transition)
{
    return transition ? KUBE_PRIO_NORMAL : KUBE_PRIO_LOW;
}

int ctl_act_status_would_refuse(const struct ctl_act *a, const char *path, int transition)
{
    return a->kube && a->kube->status_would_refuse &&
           a->kube->status_would_refuse(a->kube_ctx, status_lane(transition), path);
}

int ctl_act_patch_status(struct ctl_act *a, const char *key, const char *path, const char *json,
                         int transition, const char *state, uint64_t gen)
{
    size_t kl = strlen(key), pl = strlen(path);
    if (kl > CTL_KEY_MAX || pl >= CTL_PATH_MAX)
        return GQ_EINVAL;
    struct status_op *s = calloc(1, sizeof(*s) + kl + pl + 2);
    int rc;
    if (!s)
        return GQ_ENOMEM;
    s->a = a;
    memcpy(s->buf, key, kl + 1);
    memcpy(s->buf + kl + 1, path, pl + 1);
    s->key = s->buf;
    s->path = s->buf + kl + 1;
    gq_strlcpy(s->state, state ? state : "", sizeof(s->state));
    s->gen = gen;
    s->transition = transition;
    /* state changes in the normal lane, a finished one (its quota is free
     * already) first; the rest low. Pod writes (critical) never wait for
     * statuses: a Succeeded status written before the next gang's pods would
     * keep that gang's quota held with no pod running. */
    enum kube_prio prio = status_lane(transition);
    int fin = transition && (!strcmp(s->state, "Succeeded") || !strcmp(s->state, "Failed"));
    size_t sl = strlen(s->state), il = strlen(CTL_ACT_STATE_INVALID);
    int invalid = sl > il && !strcmp(s->state + sl - il, CTL_ACT_STATE_INVALID);
    int was = act_rank(a, fin ? ACT_RANK_FINISHED : invalid ? ACT_RANK_INVALID : 0);
    rc = act_sent(a, a->kube->patch_status(a->kube_ctx, prio, path, json, status_cb, s));
    (void)act_rank(a, was);
    if (rc) {
        free(s);
        return rc;
    }
    return 0;
}

void ctl_act_stop(struct ctl_act *a)
{
    if (!a->kube || !a->kube_ctx)
        return;
    size_t n = a->kube->drop_queued(a->kube_ctx, KUBE_PRIO_LOW);
    if (n)
        LOGA(a, GQ_LOG_INFO, "shutdown: cosmetic writes dropped (status is written again by the next leader)",
             " dropped=%zu", n);
}

void ctl_act_event(struct ctl_act *a, const cJSON *obj, const char *type, const char *reason,
                   const char *msg)
{
    struct kube_objref ref = {API_GROUP_VERSION,
                              ctl_obj_str(obj, "kind", NULL) ? ctl_obj_str(obj, "kind", NULL) : "GPUJob",
                              ctl_obj_str(obj, "metadata", "namespace"),
                              ctl_obj_str(obj, "metadata", "name"),
                              ctl_obj_str(obj, "metadata", "uid"),
                              ctl_obj_str(obj, "metadata", "resourceVersion")};
    if (!ref.name)
        return;
    /* a Normal Event past the budget, the total's or its namespace's, is
     * not sent: what it would say is in the object's status; a Warning
     * always goes. A Normal Event that narrates what a decision did
     * (Admitted, Succeeded, ...) is also paid from the write budget; a
     * job's Waiting Event (one per wait reason: it says why the job waits,
     * what its user looks for) is not, or a job that waits while nothing is
     * admitted would never get one */
    if (strcmp(type, "Warning")) {
        int64_t now = wall_ms();
        struct gq_rate *nb = ns_budget(a, ref.namespace_);
        int paid = strcmp(reason, "Waiting") != 0;
        if (!gq_rate_ready(&a->events, now) || (nb && !gq_rate_ready(nb, now)) ||
            (paid && !gq_ledger_ready(&a->writes, &a->floor_events, now))) {
            a->events_throttled++;
            return;
        }
        (void)gq_rate_take(&a->events, now);
        if (nb)
            (void)gq_rate_take(nb, now);
        if (paid)
            (void)gq_ledger_take(&a->writes, &a->floor_events, now);
    }
    if (act_sent(a, a->kube->event(a->kube_ctx, KUBE_PRIO_LOW, &ref, type, reason, msg, a->identity, NULL, NULL))) {
        a->events_failed++;
        LOGA(a, GQ_LOG_WARN, "event not sent", " obj=%s reason=%s", ref.name, reason);
        return;
    }
    a->events_sent++;
}
