/*
 * apply.h — applying a decision to the store: the one path by which the
 * controller (the reconcile: ctl_observe.c, ctl_decide.c) and the simulator
 * (sim/sim_run.c) record what was decided about a job. Each call writes, for one job, the state transition,
 * its quota-ledger row, the intent the actuator acts on and the audit row,
 * always in the same shape: one rule per decision, whoever applies it.
 *
 * Rules kept here and nowhere else:
 *  - placement text: ctl_placement_format (JSON with attempt, domain, reseq,
 *    and per replica its index, node and devices), built from the core's
 *    replicas by apply_placement_add;
 *  - ledger: gpus = whole GPUs held (a share rounds up per job: 3 replicas of
 *    250 milli hold 1); gpu_type = the product of the first placed replica's
 *    node; borrowed: on each quota entry of the Team (exact gpuType, else
 *    "*"), the rows' borrowed GPUs add up to what the Team holds there above
 *    its nominal quota, borne by the rows set last (apply_borrowed, walking
 *    the Team's rows in the order they were set). Every set or clear of a
 *    row settles its Team's rows again (apply_ledger_settle; with a
 *    deferring context, once per Team before the commit), so a row's
 *    borrowed figure shrinks when earlier work of its Team goes;
 *  - audit rows: actor "gangq", old value = the state before, new value = the
 *    state after (admit and replace-replica: the placement text);
 *  - a job that holds GPUs (Admitted, Running) and gives them up has its
 *    ledger row cleared and an intent that deletes its pods.
 *
 * Not part of the scheduling core: it writes to the store. It reads no clock
 * (the caller's now_ms) and does no other I/O. Writes go into the caller's
 * open cycle transaction (or each commits on its own, as the store does).
 *
 * Errors: 0 or a negative enum gq_err from the store (or GQ_ENOMEM), with one
 * sentence in ctx->err. On error some of the call's writes may have been made:
 * the caller rolls the cycle back.
 *
 * Ownership: every pointer passed in is borrowed for the duration of the call
 * and nothing is kept; the store handle belongs to the caller. struct
 * ctl_placement owns its replicas (ctl_placement_release).
 */
#ifndef GQ_APPLY_H
#define GQ_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "ctl.h"
#include "sched.h"
#include "store.h"

/* Teams whose ledger rows are settled once, before the caller commits,
 * instead of at every set or clear of one of their rows: a reconcile that
 * admits or finishes k jobs of a Team reads the Team's rows once, not k
 * times. The result at commit is the same: a Team's settled figures depend
 * only on its rows and quota then. Owns its strings (apply_settle_release). */
struct apply_settle_set {
    char **team; /* sorted, distinct */
    size_t n, cap;
};

struct apply_ctx {
    struct store *st; /* borrowed, required */
    int64_t now_ms;   /* wall time of the decision (Unix ms) */
    int act_at_once;  /* no actuator (the simulator): intents are recorded done at once */
    char *err;        /* caller's buffer */
    size_t errlen;
    /* borrowed, may be NULL: apply_ledger_set and apply_ledger_clear add
     * their Team here and leave the settling to the caller, who calls
     * apply_ledger_settle for each Team in it before committing; NULL:
     * they settle at once */
    struct apply_settle_set *defer;
};

/* Add team to s (once). 0 or GQ_ENOMEM. */
int apply_settle_add(struct apply_settle_set *s, const char *team);
/* Forget every Team (the capacity is kept). */
void apply_settle_clear(struct apply_settle_set *s);
void apply_settle_release(struct apply_settle_set *s);

/* The quota in force of team, for apply_settle_flush: *nq entries, in buf
 * (API_MAX_QUOTA entries, the callee's to fill) or in storage of the
 * callee's that outlives the call; NULL with *nq 0 when it has none. */
typedef const struct sched_quota *(*apply_quota_fn)(void *ud, const char *team, struct sched_quota *buf,
                                                    int *nq);
/* Settle each Team in x->defer once (apply_ledger_settle, its quota from
 * quota_of) and empty the set: what the caller does before committing. */
int apply_settle_flush(const struct apply_ctx *x, apply_quota_fn quota_of, void *ud);

/* The job a decision is about (all borrowed). */
struct apply_job {
    const char *key;  /* "namespace/name" */
    const char *team; /* Team charged ("" none) */
    int state;        /* its store state before the decision (enum store_state) */
    int gpus;         /* whole GPUs per replica (0: a share or CPU-only) */
    int shares;       /* milli-GPU per replica when gpus == 0 (0: CPU-only) */
    const struct sched_quota *quota; /* its Team's quota in force; nquota 0: no limit */
    int nquota;
};

/* Admitted or Running: its placement holds GPUs. */
int apply_holds(int state);
/* Whole GPUs nrep replicas of j hold (the ledger's unit). */
int64_t apply_gpus(const struct apply_job *j, int nrep);
/* Index of the quota entry a GPU product is charged to: the entry naming it,
 * else the first "*" entry; -1 when none ("" = no product: only "*"). */
int apply_quota_entry(const struct sched_quota *q, int nq, const char *gpu_type);
/* Of `mine` GPUs added to `others` already held on an entry with `nominal`,
 * those above nominal: clamp(others + mine - nominal, 0, mine). A Team's
 * borrowed figure on an entry is apply_borrowed(nominal, 0, used). */
int64_t apply_borrowed(int64_t nominal, int64_t others, int64_t mine);

/* Add the core's replicas to pl, each under the lowest replica index not yet
 * placed, on nodes[rep[k].node].name. partial: pl already holds replicas of
 * this admission (a non-gang job gets more): the new ones get a generation
 * (++reseq) so their pods get new names. GQ_ENOMEM / GQ_EINVAL (name too long). */
int apply_placement_add(struct ctl_placement *pl, const struct sched_node *nodes,
                        const struct sched_replica *rep, int nrep, int partial);

/* One audit row by "gangq" (NULL strings are ""). */
int apply_audit(const struct apply_ctx *x, const char *action, const char *team, const char *key,
                const char *oldv, const char *newv, const char *reason);
/* Set j's ledger row for nrep replicas on gpu_type; clear it. Both settle
 * the Team's rows (j->quota), or add the Team to x->defer when set
 * (apply_ledger_changed). */
int apply_ledger_set(const struct apply_ctx *x, const struct apply_job *j, int nrep, const char *gpu_type);
int apply_ledger_clear(const struct apply_ctx *x, const struct apply_job *j);
/* Recompute the borrowed figure of every ledger row of team under quota
 * (nquota 0: no limit, nothing borrowed) and write those that changed: for a
 * row removed without apply_ledger_clear (store_job_delete), or a quota edit. */
int apply_ledger_settle(const struct apply_ctx *x, const char *team, const struct sched_quota *quota, int nquota);
/* A ledger row of team changed (set, cleared, or removed with its job):
 * settle the Team now, or add it to x->defer when set. */
int apply_ledger_changed(const struct apply_ctx *x, const char *team, const struct sched_quota *quota,
                         int nquota);

/* ---- decisions ---- */

/* ADMIT: pl (its replicas, attempt and domain) on gpu_type. A job not holding
 * becomes Admitted (attempts += 1 in the store); one holding keeps its state
 * (more replicas of a non-gang job). Message: the core's summary. Writes the
 * transition, ledger row, an admit intent (payload: the placement text) and
 * audit "admit". */
int apply_admit(const struct apply_ctx *x, const struct apply_job *j, const struct ctl_placement *pl,
                const char *gpu_type, const char *message);
/* Admitted -> Running (its pods run). No audit row. */
int apply_running(const struct apply_ctx *x, const struct apply_job *j);
/* A holding non-gang job lost replicas: pl is what it still holds. Keeps its
 * state; placement, message (why), ledger row and audit "replace-replica". */
int apply_replace_replica(const struct apply_ctx *x, const struct apply_job *j,
                          const struct ctl_placement *pl, const char *gpu_type, const char *why);
/* PREEMPT for job `by` (key, "" unknown): hold released (preempt intent,
 * payload by), Preempted with why, audit "preempt". */
int apply_preempt(const struct apply_ctx *x, const struct apply_job *j, const char *by, const char *why);
/* A holding gang lost a pod or node: released (delete intent "requeue"); with
 * retries (before this one) + 1 > max_retries (max_retries < 0: no limit) it
 * is Failed ("<why>; gave up after N retries"), else Queued with retries += 1
 * ("requeued (retry N of M): <why>", without " of M" when unlimited). The message is copied to msg (may be
 * NULL) and *failed (may be NULL) says which. */
int apply_requeue(const struct apply_ctx *x, const struct apply_job *j, int64_t retries, int max_retries,
                  const char *why, char *msg, size_t msglen, int *failed);
/* The spec changed under a holding job: released (delete intent "respec"),
 * Queued with msg, audit "requeue" (not a retry). */
int apply_requeue_spec(const struct apply_ctx *x, const struct apply_job *j, const char *msg);
/* spec.suspend=true: a holding job is released (suspend intent); Suspended. */
int apply_suspend(const struct apply_ctx *x, const struct apply_job *j);
/* spec.suspend=false on a Suspended job: Queued at its old place. */
int apply_resume(const struct apply_ctx *x, const struct apply_job *j);
/* Succeeded with msg. Ledger row cleared; delete_pods: a holding job's pods
 * are deleted (delete intent "succeeded": another attempt finished the job)
 * and its placement cleared; else its finished pods are left and the
 * placement kept. */
int apply_succeed(const struct apply_ctx *x, const struct apply_job *j, const char *msg, int delete_pods);
/* Failed with msg; a holding job is released (delete intent, payload). */
int apply_fail(const struct apply_ctx *x, const struct apply_job *j, const char *msg, const char *payload);

#endif
