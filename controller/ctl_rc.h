/*
 * ctl_rc.h — the reconcile's own declarations, shared by its files and by no
 * other part of the controller (they include ctl_int.h, not this):
 *   ctl_cycle.c    ctl_reconcile: the named phases in order, the rc_ctx's release
 *   ctl_gather.c   gather: the caches, store rows and intents read into an rc_ctx
 *   ctl_observe.c  observe: each job decoded, validated, stored, its lifecycle
 *   ctl_decide.c   schedule: the snapshot, one core cycle, its decisions applied
 *   ctl_report.c   report: job, Team and pool statuses, published waits
 *   ctl_rc.c       helpers the phases share (rows, intents, rules, nodes)
 * One struct rc_ctx lives for one reconcile (ctl_cycle.c ctl_reconcile) on
 * the caller's stack; its arrays are owned by it and freed by rc_release,
 * except those lent from struct gq_ctl for reuse (jobs_keep, team_keep).
 * Objects (cJSON) are borrowed from the informer caches, which no event
 * changes during a reconcile. Each function's contract is at its definition.
 */
#ifndef GQ_CTL_RC_H
#define GQ_CTL_RC_H

#include <stddef.h>
#include <stdint.h>

#include "apply.h"
#include "ctl_int.h"

#define LOGC(c, lvl, msg, ...) gq_log((c)->cfg.log_level, lvl, "ctl", msg, __VA_ARGS__)

/* A GPUJob of this reconcile. */
struct cj {
    const cJSON *obj;
    const char *key;            /* "ns/name" (borrowed from c->jobs_set: no event runs
                                 * during a reconcile) */
    const struct api_gpujob *job; /* decoded+defaulted: the memo's cache (borrowed) */
    int decoded;                /* decode gave a usable spec */
    int gen_changed;            /* metadata.generation differs from the store's */
    int64_t old_gpus;           /* store's GPUs before this reconcile's upsert (-1 new) */
    int failed_invalid;         /* decode/validate errors: Failed */
    const char *invalid_reason; /* condition reason (static text) */
    char *invalid_msg;          /* owned (rc_release; cj_invalid_msg), NULL = "" */
    struct store_job *row;      /* heap copy (free) */
    struct ctl_placement pl;
    struct ctl_memo *memo;
    int state;                  /* current store state, updated as we write */
    int admit_pending;          /* an ADMIT intent is pending */
    int released;               /* gave up its hold in this reconcile (an intent deletes its pods) */
    struct ctl_placement term;  /* Preempted, pods still stopping: the replicas they hold */
    struct ctl_objent *ent;     /* its entry in c->jobs_set (the memo hint; no event runs
                                 * during a reconcile) */
    int dormant;                /* finished and settled: skipped by this reconcile (rc_job_sleep) */
    int looked;                 /* examined in full by this reconcile's rc_job_prepare */
    int ttl_delete;             /* its ttlSecondsAfterFinished passed: deleted in the act phase */
};

/* An intent by job key (index into rc_ctx.intents). */
struct ikey {
    const char *key;
    int i;
};

/* A node of this reconcile by name; its info parsed on first use. */
struct rnode {
    const char *name;
    const cJSON *obj;
    int have_ni;
    struct ctl_nodeinfo ni;
};

/* A Team object of this reconcile: the spec in force (its latest spec when
 * valid, else the last valid one the store kept) and the latest edit's problem. */
struct rteam {
    const cJSON *obj;
    int idx;                 /* index into rc_ctx.teams of the spec in force, -1 none */
    int64_t gen_in_force;    /* metadata.generation of that spec */
    int64_t gen;             /* the object's metadata.generation */
    char bad[API_MSG_MAX];   /* first problem of the latest spec ("" valid) */
    struct api_team latest;  /* the latest spec as decoded (namespaces, for job messages) */
};

struct pend_event {
    const cJSON *obj;
    const char *type, *reason;
    char msg[SCHED_MSG_MAX + 128];
};

struct rc_ctx {
    struct gq_ctl *c;
    int64_t now;
    char err[512];
    struct api_team *teams;       /* the spec in force of each usable Team */
    int nteams;
    struct apply_settle_set settle; /* Teams whose ledger rows are settled before the commit */
    struct rteam *tinfo;          /* every Team object of this reconcile */
    int ntinfo;
    struct api_priorityclass *pcs;
    int npcs;
    struct api_gpupool *pools;
    int npools;
    const cJSON **nodes;
    int nnodes;
    struct rnode *nix;            /* named nodes sorted by name (nnix entries) */
    int nnix;
    const cJSON **foreign;
    int nforeign, capforeign;
    struct cj *jobs;
    int njobs;
    size_t capjobs;               /* entries allocated in jobs */
    struct store_job **rows;
    int nrows, caprows;
    int row_hint;                 /* index of the row rc_row_find found last */
    int team_hint;                /* rc_team_of's last answer (ctl_team_find) */
    int intent_hint;              /* rc_intent_first's last answer (an iidx position) */
    struct store_intent *intents; /* strings owned (strdup'd job_key) */
    int nintents, capintents;
    struct ikey *iidx;            /* intents sorted by job_key (nintents entries) */
    uint64_t lookup_sig;          /* Teams + PriorityClasses seen (defaulting inputs) */
    struct pend_event *ev;
    int nev, capev;
    int nreleased;                /* released gangq pods still running or stopping */
    int nforeign_released;        /* of them, those counted as foreign usage (the last of r->foreign) */
    int sched_ran;
    int in_txn;                   /* the cycle's store transaction is open */
    int committed;                /* the cycle's store transaction committed */
    size_t done_marks;            /* intent done marks written in the transaction */
    int pub_epoch;                /* positions, pendingHead and counters are published now */
    int full;                     /* every job is examined in full (else only dirty ones) */
    int rows_read;                /* the rows came from the store, not the last reconcile */
    uint64_t jobs_deleted;        /* c->jobs_deleted when gathered */
    /* the earliest time (wall clock, ms) at which time alone changes what
     * this reconcile decided or published (rc_due): a status write held back
     * by --status-settle or --status-refresh-qps, a wait message held by
     * --wait-message-interval, positions due at the next epoch, a stray
     * pod's delete to retry, the end of a minimum-runtime protection while
     * jobs wait (0 = none). Until then, with no input, a reconcile is quiet. */
    int64_t due_next;
    const char *due_why;          /* static: what is due at due_next (rc_due) */
    int resync_jobs;              /* jobs the periodic resync examines (not steady) */
    int nttl_delete;              /* jobs with ttl_delete set (rc_job_ttl) */
    int marked_next;              /* a job is marked for the next reconcile (a row written,
                                   * an intent): that one is not quiet */
};

/* One decision rule applied to j: rc_act_begin takes j as it is now (its
 * Team's quota included), the apply_* call writes, rc_act_end makes the
 * reconcile follow the store. A rule that releases a hold writes an intent
 * that deletes the pods: the caller sets j->released.
 *   struct act a;
 *   rc_act_begin(r, j, &a);
 *   rc = rc_act_end(r, j, apply_suspend(&a.x, &a.j));  */
struct act {
    struct apply_ctx x;
    struct sched_quota q[API_MAX_QUOTA];
    struct apply_job j; /* j.quota points into q */
};

/* ctl_rc.c (shared helpers) */
struct store_job *rc_row_copy(const struct store_job *j);
int rc_intents_index(struct rc_ctx *r);
int rc_intent_first(struct rc_ctx *r, const char *key);
uint64_t rc_obj_sig(const cJSON *o);
int rc_row_cmp(const void *a, const void *b);
struct store_job *rc_row_find(struct rc_ctx *r, const char *key);
int rc_rows_reserve(struct rc_ctx *r);
int rc_row_insert(struct rc_ctx *r, struct store_job *row);
int rc_row_read(struct rc_ctx *r, const char *key, struct store_job **out);
void rc_row_keep(const struct rc_ctx *r, struct cj *j);
struct store_job *rc_row_kept(const struct rc_ctx *r, const struct ctl_memo *m);
int rc_push_ptr(const cJSON ***arr, int *n, int *cap, const cJSON *o);
void rc_event_add(struct rc_ctx *r, const cJSON *obj, const char *type, const char *reason,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
struct apply_ctx rc_actx(struct rc_ctx *r);
const struct api_team *rc_team_of(struct rc_ctx *r, const char *name);
int rc_team_quota(const struct api_team *tm, struct sched_quota *q);
int rc_audit(struct rc_ctx *r, const char *action, const struct cj *j, const char *key,
             const char *oldv, const char *newv, const char *reason);
void rc_job_touch_status(struct rc_ctx *r, struct cj *j);
int rc_job_dirty(const struct rc_ctx *r, const struct cj *j);
int rc_job_status_due(const struct rc_ctx *r, const struct cj *j);
int rc_refresh(struct rc_ctx *r, struct cj *j, int rc);
int rc_transition(struct rc_ctx *r, struct cj *j, int state, const char *placement,
                  const char *message, const char *by, const char *why, int bump);
void rc_act_begin(struct rc_ctx *r, const struct cj *j, struct act *a);
int rc_act_end(struct rc_ctx *r, struct cj *j, int rc);
int rc_holds(int state);
int rc_job_gpus_placed(struct rc_ctx *r, const struct cj *j);
int rc_nodes_index(struct rc_ctx *r);
struct rnode *rc_node_find(struct rc_ctx *r, const char *name);
const char *rc_node_product(struct rc_ctx *r, const char *node);
const char *rc_pl_product(struct rc_ctx *r, const struct ctl_placement *pl);
int rc_ledger_set(struct rc_ctx *r, struct cj *j);
int rc_intent(struct rc_ctx *r, int kind, const char *key, const char *payload);
int rc_pod_held(const struct cj *j, const struct ctl_podfacts *f);
int rc_node_lost_at(struct rc_ctx *r, struct rnode *n, const char *name, char *why, size_t len);
int rc_node_lost(struct rc_ctx *r, const char *name, char *why, size_t len);
struct cj *rc_job_find(struct rc_ctx *r, const char *key);
const cJSON **rc_memo_pods(struct ctl_memo *m, int *n);
void *rc_keep_reserve(void *p, size_t *cap, size_t n, size_t size);

/* ctl_gather.c (gather) */
void rc_team_keep_forget(struct gq_ctl *c);
const struct rteam *rc_team_invalid_for(const struct rc_ctx *r, const struct api_gpujob *job);
int rc_gather(struct rc_ctx *r);

/* ctl_observe.c (observe: one job at a time) */
int64_t rc_creation_ms(const struct cj *j, int64_t now);
int64_t rc_status_held(const struct rc_ctx *r, const struct cj *j);
void rc_settle_hold(struct rc_ctx *r, struct cj *j, int64_t due);
/* Time alone changes something at when (wall clock, ms; ignored unless
 * after r->now): r->due_next is the earliest such time, r->due_why (static
 * text, the debug log's) what is due then. */
void rc_due(struct rc_ctx *r, int64_t when, const char *why);
int rc_max_pod_attempt(struct ctl_memo *m);
int rc_finished(int state);
int rc_reports_invalid(const struct cj *j);
void rc_created_seen(struct ctl_memo *m);
void rc_job_sleep(struct rc_ctx *r, struct cj *j);
int rc_job_prepare(struct rc_ctx *r, struct cj *j);
int rc_job_spec_rules(struct rc_ctx *r, struct cj *j);
int rc_job_create_refused(struct rc_ctx *r, struct cj *j);
int rc_job_lifecycle(struct rc_ctx *r, struct cj *j);
int rc_job_ttl(struct rc_ctx *r, struct cj *j);
int32_t rc_run_limit(struct cj *j);

/* ctl_decide.c (schedule) */
int rc_run_sched(struct rc_ctx *r);

/* ctl_report.c (report) */
void rc_job_status(struct rc_ctx *r, struct cj *j);
void rc_team_pool_status(struct rc_ctx *r);
void rc_team_pool_seen(struct rc_ctx *r);
void rc_waiting_publish(struct rc_ctx *r);

#endif
