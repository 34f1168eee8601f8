/*
 * ctl_act.h — the actuator's interface: what ctl_act.c needs and what it
 * tells back, and nothing else of the controller.
 *
 * Role: act on committed store intents (create a gang's pods bound to their
 * nodes and its headless Service; delete pods for preempt / suspend / requeue
 * / deletion), delete stray pods, ask the API server about a pod absent from
 * the cache, send status patches and Events. It owns the in-flight and done
 * intent sets; it does not know struct gq_ctl, the memo table, the reconcile
 * or the loop. What an outcome means to the controller (a job examined again,
 * a refused create failing the job, a pod recorded as gone, a status written
 * again) is the controller's, told through struct ctl_act_hooks.
 *
 * Invariants:
 * - An intent is in the in-flight set from the moment it is acted on until
 *   its requests end: a failure (or a store error) removes it, so a later
 *   ctl_act_intents acts on it again; success puts it in the done set too
 *   (still in flight: never acted on twice) until its done mark commits in
 *   the store (the next reconcile's transaction: ctl_act_write_done, then
 *   ctl_act_done_committed; at stop ctl_act_flush_done). Both sets are
 *   bounded by the pending intents.
 * - Every op ends with exactly one hooks.settled call; every request's
 *   callback runs from the loop, never inside the call that sent it (the
 *   kube client's rule; a test's struct ctl_act_kube must keep it).
 * - Requests of an op never hold a pointer into the caches: objects are
 *   looked up again when a callback runs.
 *
 * Ownership: the controller owns the struct ctl_act (embedded) and fills it
 * with ctl_act_init before the first call; ctl_act_release frees the sets.
 * kube, kube_ctx, jobs, pods, st and hooks.ctx are borrowed and must outlive
 * every request in flight (st may be NULL until the store is opened: then no
 * intent is read or marked). Strings passed to hooks are valid for the call
 * only. Objects passed in (pods, patches, GPUJobs) are borrowed for the call.
 */
#ifndef GQ_CTL_ACT_H
#define GQ_CTL_ACT_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "kube.h"

struct store;

/* The requests the actuator sends, as kube.h's writers with a priority
 * (kube_create_p, kube_delete_rv_p, kube_get, kube_patch_status_p,
 * kube_event_create_p, kube_client_drop_queued, kube_client_set_rank) on the
 * context k. Within a lane the actuator ranks what it sends: pod deletes
 * first (they free capacity), then a gang's pod creates (and Service) by the
 * job's priority; a finished state before the other state changes. Each
 * returns 0 when the request was queued (cb then runs exactly once, later),
 * else an error (cb never runs). */
struct ctl_act_kube {
    int (*create)(void *k, enum kube_prio prio, const char *collection_path, const cJSON *obj,
                  kube_response_cb cb, void *ud);
    int (*delete_rv)(void *k, enum kube_prio prio, const char *path, long grace_s, const char *uid,
                     const char *rv, kube_response_cb cb, void *ud);
    int (*get)(void *k, const char *path, kube_response_cb cb, void *ud);
    /* json: the patch printed, a gq_sstr_new text (kube_patch_status_sstr:
     * the request holds a reference until it ends) */
    int (*patch_status)(void *k, enum kube_prio prio, const char *path, const char *json,
                        kube_response_cb cb, void *ud);
    int (*event)(void *k, enum kube_prio prio, const struct kube_objref *ref, const char *type,
                 const char *reason, const char *msg, const char *instance, kube_response_cb cb,
                 void *ud);
    size_t (*drop_queued)(void *k, enum kube_prio prio);
    /* kube_client_set_rank (NULL: requests keep their lane's arrival order) */
    int (*set_rank)(void *k, int rank);
    /* kube_patch_status_would_refuse (NULL: never) */
    int (*status_would_refuse)(void *k, enum kube_prio prio, const char *path);
};
/* kube.h's functions; k is a struct kube_client *. */
extern const struct ctl_act_kube ctl_act_kube_client;

/* The end of a status patch (ctl_act_patch_status), as sent. */
struct ctl_act_status_end {
    const char *key;     /* the memo key it was sent for */
    const char *path;    /* the status subresource */
    uint64_t gen;        /* the caller's number for it */
    int transition;      /* it changes the lane state (normal lane) */
    const char *state;   /* the caller's lane state as given ("" = none) */
    int rc;              /* struct kube_response's rc, status and not_sent */
    long status;
    int not_sent;
};

/* What the actuator tells the controller. Every hook is called from a
 * request callback or from the call that acted, never from the controller's
 * own call into a hook; key is a job key "namespace/name" ("" = none). */
struct ctl_act_hooks {
    void *ctx;
    /* An op ended: intent_id > 0 acted on (ok: every request succeeded, the
     * intent is in the done set) or not (ok 0: it left the in-flight set and
     * is retried by a later ctl_act_intents); intent_id 0: the deletes of one
     * ctl_act_delete_pod for key ended. */
    void (*settled)(void *ctx, int64_t intent_id, const char *key, int ok);
    /* A create of pod (of the admission numbered attempt) was queued: it may
     * run before the pod watch shows it. */
    void (*pod_create_sent)(void *ctx, const char *key, int attempt, const char *pod);
    /* The API server refused a pod of key for what it is (400, 403, 422):
     * retrying cannot help. msg is its answer. */
    void (*pod_create_refused)(void *ctx, const char *key, const char *msg);
    /* The answer to ctl_act_confirm_pod: rc GQ_ENOTFOUND = pod is gone; GQ_OK
     * = it exists (the watch lags); else the GET failed. */
    void (*pod_confirmed)(void *ctx, const char *key, const char *pod, int rc);
    /* A status patch ended (sent or not). Returns 1 when the controller
     * still knows the object (the actuator then logs a failure and, on a 409,
     * asks the API server for the object again), 0 when it forgot it. */
    int (*status_end)(void *ctx, const struct ctl_act_status_end *e);
    /* Reconcile again soon: a fresh object is on its way through a watch. */
    void (*mark_dirty)(void *ctx);
    /* The pods of key ("ns/job": namespace ns, label gangq.io/job) in the pod
     * cache, *n of them (borrowed; valid until the next informer event), or
     * NULL: the actuator then finds them by walking the pod cache. May be
     * NULL itself (same). */
    const cJSON *const *(*job_pods)(void *ctx, const char *key, int *n);
    /* The answer to ctl_act_delete_job for key: GQ_OK, GQ_ENOTFOUND (gone
     * already) or GQ_ECONFLICT (another object of that name now: the one
     * asked for is gone) mean done; anything else failed (a dropped request
     * too). May be NULL. */
    void (*job_deleted)(void *ctx, const char *key, int rc);
};

struct ctl_act {
    /* requests (borrowed) */
    const struct ctl_act_kube *kube;
    void *kube_ctx;
    /* informer caches of GPUJobs and pods (borrowed): lookups only */
    const struct kube_cache *jobs, *pods;
    struct store *st;         /* borrowed; NULL until opened */
    struct ctl_act_hooks hooks;
    /* configuration (copied) */
    int log_level;
    double max_grace_s;       /* delete grace cap (< 0 or huge: none) */
    char identity[128];       /* Events' reporting instance */
    /* the Normal Events' budget (ctl_act_event): all of them, and each
     * namespace's at most a quarter of it (an open-addressed table by
     * namespace, strings owned; NULL until the first Event) */
    struct gq_rate events;
    double ns_qps, ns_burst;
    struct ctl_ev_ns {
        char *ns;
        struct gq_rate b;
    } *evns;
    size_t nevns, capevns;
    /* the write budget (gq_ledger): each admission credits its pods + 2
     * (ctl_act_write_credit), every write sent spends one; Normal Events and
     * status refreshes go out on it (ctl_act_narrate_take) */
    struct gq_ledger writes;
    struct gq_rate floor_events, floor_status; /* narration with no credit: each kind its own */
    /* counters, read by the controller's metrics */
    uint64_t store_errors;
    uint64_t events_sent, events_throttled, events_failed;
    /* intents being acted on (sorted) and those acted on, not yet marked done
     * in the store (also in flight) */
    int64_t *inflight;
    size_t ninflight, capinflight;
    int64_t *done;
    size_t ndone, capdone;
};

/* Zero a and set what it needs (copies identity; the rest borrowed). */
void ctl_act_init(struct ctl_act *a, const struct ctl_act_kube *kube, void *kube_ctx,
                  const struct kube_cache *jobs, const struct kube_cache *pods,
                  const struct ctl_act_hooks *hooks, int log_level, double max_grace_s,
                  const char *identity);
/* Normal Events: at most burst at once, then qps per second (0: no limit);
 * one namespace's at most a quarter of both (so a tenant's flood of jobs
 * leaves the other namespaces most of the budget). */
void ctl_act_event_budget(struct ctl_act *a, int qps, int burst);
/* Free the sets (requests in flight must have ended). */
void ctl_act_release(struct ctl_act *a);

/*
 * The write budget. API writes are a resource counted per admission: at
 * most its pods + 2 in steady state. Each admission credits that much
 * (ctl_act_write_credit), each write the actuator sends spends one (pods,
 * Services, deletes, status patches, Events; a status patch superseded or
 * dropped before it was sent is refunded). The writes that only narrate,
 * Normal Events of what a decision did (Admitted, Succeeded, ...) and status
 * rewrites of a queue position or a message's text,
 * go out while the credit holds one, else at CTL_WRITE_FLOOR_QPS (Events and
 * refreshes each; a refresh must not wait behind Events for the floor), so their
 * number follows decisions, not the size of the queue or the time it waits;
 * their own budgets (--event-qps, --status-refresh-qps) still apply. State
 * changes, pods, deletes, Warning Events and a job's Waiting Event (one per
 * wait reason: why it waits) never wait for it. The credit
 * stops at CTL_WRITE_CREDIT_CAP; a debt (writes the decisions have not paid
 * for yet: the Queued statuses of a queue filling up) at CTL_WRITE_DEBT_MAX.
 */
#define CTL_WRITE_CREDIT_CAP 100.0
#define CTL_WRITE_DEBT_MAX 1000.0
#define CTL_WRITE_FLOOR_QPS 1.0
/* An admission of pods pods: the budget grows by pods + 2. */
void ctl_act_write_credit(struct ctl_act *a, double n);
/* A status refresh (it narrates) goes out at now_ms: 1 when the budget lets
 * it (the floor's token taken when the credit holds none), else 0. Called
 * before its write is sent (which spends). */
int ctl_act_narrate_take(struct ctl_act *a, int64_t now_ms);
/* Milliseconds until ctl_act_narrate_take would let one out on the floor
 * (0: now; INT64_MAX: only a decision's credit will). */
int64_t ctl_act_narrate_wait_ms(struct ctl_act *a, int64_t now_ms);

/* Intent id id is being acted on (or was, and is not marked done yet). */
int ctl_act_inflight(const struct ctl_act *a, int64_t id);
/* Mark the acted-on intents done in one store transaction (kept for the next
 * call when it fails; nothing while a store transaction is open). Used where
 * no reconcile follows (at stop); a reconcile writes them in its own
 * transaction with the two calls below. */
void ctl_act_flush_done(struct ctl_act *a);
/* Write the done marks of the intents acted on so far inside the store
 * transaction the caller has open; *n is how many were written. They stay in
 * the in-flight set (never acted on twice) until ctl_act_done_committed(a, *n)
 * after that transaction commits; after a rollback they are simply written
 * again by the next call. Returns a GQ_ error code (err filled). */
int ctl_act_write_done(struct ctl_act *a, int64_t now_ms, size_t *n, char *err, size_t errlen);
/* The transaction holding the first n done marks committed: drop them. */
void ctl_act_done_committed(struct ctl_act *a, size_t n);
/* Act on every pending intent of the store not already in flight. */
void ctl_act_intents(struct ctl_act *a);
/* Shutdown: drop the cosmetic writes still waiting (counted); transitions,
 * pod creates and deletes keep draining within the shutdown wait. */
void ctl_act_stop(struct ctl_act *a);
/* Delete one pod as cached (uid and resourceVersion preconditions); grace <
 * 0 = the pod's own, never above max_grace_s. Ends with settled(0, key). */
void ctl_act_delete_pod(struct ctl_act *a, const cJSON *pod, long grace, const char *key);
/* Delete the GPUJob ns/name whose metadata.uid is uid (a precondition:
 * never another object of that name), its pods with it (propagation
 * Background), in the low lane (housekeeping: a finished job's
 * ttlSecondsAfterFinished). Returns 0 when sent (hooks.job_deleted for key
 * runs later, once), else an error (it does not run). */
int ctl_act_delete_job(struct ctl_act *a, const char *key, const char *ns, const char *name, const char *uid);
/* The answer rc to ctl_act_delete_job means the object of that uid is gone
 * (deleted, already gone, or another object holds the name). */
static inline int ctl_act_job_delete_done(int rc)
{
    return rc == GQ_OK || rc == GQ_ENOTFOUND || rc == GQ_ECONFLICT;
}
/* Ask the API server for a pod absent from the cache (GET); the answer goes
 * to pod_confirmed. 0 when sent, else an error (no hook call). */
int ctl_act_confirm_pod(struct ctl_act *a, const char *key, const char *ns, const char *name);
/* The suffix of a lane state that reports an invalid spec ("Queued/Invalid",
 * "Failed/Invalid"; ctl_status_lane_state in ctl_wire.c). */
#define CTL_ACT_STATE_INVALID "/Invalid"

/* Patch a status subresource with json (the merge patch printed, a
 * gq_sstr_new text: the request takes a reference, the caller keeps its
 * own): a transition in the normal lane (to Succeeded
 * or Failed ranked ahead of the others), any other patch in the low one
 * (coalesced by path). state: the caller's lane state, status.state or
 * more (at most 31 bytes kept; "" none): one that ends in
 * CTL_ACT_STATE_INVALID reports an invalid spec and is ranked after the
 * other state changes, so a tenant's flood of invalid jobs never delays
 * other jobs' transitions;
 * gen: the caller's number, echoed in status_end. A 409 of a known object
 * asks the API server for it again (GET, then mark_dirty). 0 when queued,
 * else an error (no hook call). */
int ctl_act_patch_status(struct ctl_act *a, const char *key, const char *path, const char *json,
                         int transition, const char *state, uint64_t gen);
/* 1 when a status patch of path that is (not) a transition would be refused
 * now (its lane full: ctl_act_patch_status would fail with GQ_EBUSY), so the
 * caller need not build it yet; else 0. */
int ctl_act_status_would_refuse(const struct ctl_act *a, const char *path, int transition);
/* An Event about obj (kind from the object, GPUJob by default), low lane. */
void ctl_act_event(struct ctl_act *a, const cJSON *obj, const char *type, const char *reason,
                   const char *msg);

#endif
