/*
 * ctl_cycle.c — one reconcile: GPUJobs decoded and validated, the store
 * upserted, suspend/resume and deletions handled, lifecycle from pod phases,
 * one scheduling cycle, every decision written in one store transaction
 * (state, ledger, intent, audit), then (after the commit) the actuator, the
 * status patches and the Events. The phases are listed above phase_gather;
 * this file runs them in order and holds what spans them (released and stray
 * pods, usage, the rc_ctx's release). Each phase's work is in a file of its
 * own (ctl_rc.h lists them: ctl_gather.c, ctl_observe.c, ctl_decide.c,
 * ctl_report.c, and ctl_rc.c for the helpers they share).
 *
 * Called by the loop (ctl_main.c) and never calling back into it:
 * ctl_reconcile returns a struct ctl_rc_result (committed, the error that
 * stopped it, when a held status write is due) and the loop acts on it
 * (readiness, the settle timer). Below it: the memo table (ctl_memo.c; a job
 * the reconcile changes is marked dirty on its memo, ctl_rc.c job_touch), the
 * actuator's requests (ctl_wire.c, ctl_act.c), the pure helpers
 * (ctl_snapshot.c, apply.c) and the clock (ctl_clock.c).
 *
 * What it keeps across reconciles is on each object's memo, by part:
 * decode (the decoded GPUJob and the last full examination: rc_job_prepare),
 * wait (rc_run_sched's explanations and positions, rc_waiting_publish's pub),
 * pods (missing, released and stray pods), status (rc_job_status,
 * counted_status, --status-settle), pl (placement_load) and victims
 * (rc_run_sched); and on struct gq_ctl the committed store rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_rc.h"

/* ------------------------------------------------------------ reconcile */

/* A released pod of a Preempted job, on a live node and not past its
 * deletion deadline by CTL_DRAIN_SLACK_S, that holds what its job was placed
 * with: recorded in j->term (the job stays in the snapshot, terminating for
 * its preemptor). Returns 0 when the pod does not qualify. */
static int pod_stopping(struct rc_ctx *r, struct cj *j, const cJSON *pod, const struct ctl_podfacts *f)
{
    int64_t rv;
    char w[256];
    double dw = 0;
    if (!j || !j->row || j->state != STORE_PREEMPTED || j->invalid_reason || !f->replica ||
        gq_parse_i64(f->replica, (size_t)-1, &rv) || rv < 0 || rv >= API_REPLICAS_MAX ||
        j->term.n >= j->job->spec.replicas || rc_node_lost(r, f->node, w, sizeof(w)))
        return 0;
    if (f->deletion && !kube_time_parse(f->deletion, &dw) && (double)r->now / 1000.0 > dw + CTL_DRAIN_SLACK_S)
        return 0;
    struct ctl_podusage u;
    ctl_pod_usage(pod, &u);
    const struct api_gpu *g = &j->job->spec.gpu;
    int devs = !g->present ? 0 : g->count ? g->count : 1;
    const struct rnode *n = rc_node_find(r, f->node); /* have_ni: rc_node_lost parsed it */
    if (__builtin_popcount(u.devs) != devs || (n->ni.gpus < 32 && (u.devs >> n->ni.gpus)))
        return 0; /* not what the job's replicas hold: counted as foreign usage */
    return !ctl_placement_add(&j->term, (int)rv, f->node, u.devs);
}

/* The pods of memo m are looked at by this reconcile: a full pass, an event
 * of the job or its pods, or a write of its row (job_touch) since the last
 * look. Whether a pod is held depends only on those. */
static int memo_pods_dirty(const struct rc_ctx *r, const struct ctl_memo *m)
{
    return r->full || m->dirty_upto >= r->c->reconciles;
}

/* Gangq pods no placement rc_holds (released by a preemption, suspend, requeue
 * or deletion, or left by an old attempt) that still run or stop. A
 * Preempted job's stopping pods keep it in the snapshot as terminating for
 * its preemptor (pod_stopping); every other such pod is foreign usage on its
 * node. Either way their devices are booked for no one else until the pods
 * are gone, and nothing else waits for them. */
static int released_pods(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc;
    for (size_t b = 0; b < c->memo.nb; b++)
        for (struct ctl_memo *m = c->memo.b[b]; m; m = m->next) {
            int np = 0;
            const cJSON **pods = rc_memo_pods(m, &np);
            if (!np || (!m->pods.rel_any && !memo_pods_dirty(r, m)))
                continue; /* no released pod last time, and nothing changed since */
            struct cj *j = rc_job_find(r, m->key);
            m->pods.rel_any = 0;
            for (int k = 0; k < np; k++) {
                const struct ctl_podfacts *f = &m->pods.pf[k];
                if (f->terminal || !f->node || !f->node[0] || rc_pod_held(j, f))
                    continue;
                m->pods.rel_any = 1;
                r->nreleased++;
                if (!pod_stopping(r, j, pods[k], f)) {
                    if ((rc = rc_push_ptr(&r->foreign, &r->nforeign, &r->capforeign, pods[k])))
                        return rc;
                    r->nforeign_released++;
                }
            }
        }
    return 0;
}

/* Delete gangq pods no job rc_holds (old attempts, lost replicas, deleted jobs)
 * unless a pending intent of that job is already deleting them. */
static void cleanup_strays(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    for (size_t b = 0; b < c->memo.nb; b++)
        for (struct ctl_memo *m = c->memo.b[b]; m; m = m->next) {
            int np = 0;
            const cJSON **pods = rc_memo_pods(m, &np);
            if (!np || (!m->pods.stray_any && !memo_pods_dirty(r, m)))
                continue; /* no stray pod last time, and nothing changed since */
            m->pods.stray_any = 1; /* until a look below finds none */
            if (m->pods.cleanup_inflight)
                continue; /* its end asks for a reconcile */
            if (rc_intent_first(r, m->key) < r->nintents)
                continue; /* a pending intent of this job is already acting on its pods */
            struct cj *j = rc_job_find(r, m->key);
            if (j && j->released)
                continue; /* the intent written in this reconcile deletes them */
            /* a delete the pod watch has not shown yet is not repeated at
             * once; a job with no stray pod has nothing to wait for (a
             * finished one goes dormant now, not a retry period later) */
            int recent = m->pods.cleanup_done_ms && r->now - m->pods.cleanup_done_ms < CTL_STRAY_RETRY_MS;
            m->pods.stray_any = 0;
            for (int k = 0; k < np; k++) {
                const cJSON *pod = pods[k];
                const struct ctl_podfacts *f = &m->pods.pf[k];
                if (f->terminal || f->deletion || rc_pod_held(j, f))
                    continue;
                m->pods.stray_any = 1;
                if (recent) {
                    rc_due(r, m->pods.cleanup_done_ms + CTL_STRAY_RETRY_MS, "stray-retry");
                    break;
                }
                const char *nn = f->node;
                char w[256];
                long grace = (nn && nn[0] && rc_node_lost(r, nn, w, sizeof(w))) ? 0 : -1;
                LOGC(c, GQ_LOG_INFO, "deleting stray pod", " job=%s pod=%s", m->key, f->name);
                ctl_pod_delete(c, pod, grace, m->key);
            }
        }
}

static void account_usage(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    if (!c->last_usage_ms || r->now < c->last_usage_ms) {
        c->last_usage_ms = r->now;
        return;
    }
    if (r->now - c->last_usage_ms < 1000)
        return; /* integrated over a second or more: usage between is what this pass sees */
    double dt = (double)(r->now - c->last_usage_ms) / 1000.0;
    double *g = calloc((size_t)r->nteams + 1, sizeof(*g));
    if (!g)
        return; /* integrated over a longer span next time */
    /* one pass over the jobs (a job's Team found among the Teams in force) */
    const char *last = NULL;
    int lt = -1;
    for (int i = 0; i < r->njobs; i++) {
        const struct cj *j = &r->jobs[i];
        if (!rc_holds(j->state))
            continue;
        if (!last || strcmp(last, j->job->spec.team)) {
            const struct api_team *tm = rc_team_of(r, j->job->spec.team);
            last = j->job->spec.team;
            lt = tm ? (int)(tm - r->teams) : -1;
        }
        if (lt >= 0)
            g[lt] += rc_job_gpus_placed(r, j);
    }
    for (int t = 0; t < r->nteams; t++)
        if (g[t] > 0 && store_usage_add(c->st, r->teams[t].meta.name, r->now, g[t] * dt, r->err,
                                        sizeof(r->err))) {
            free(g);
            return;
        }
    free(g);
    c->last_usage_ms = r->now;
}

static void rc_release(struct rc_ctx *r)
{
    for (int i = 0; i < r->njobs; i++) {
        ctl_placement_release(&r->jobs[i].pl);
        ctl_placement_release(&r->jobs[i].term);
        free(r->jobs[i].invalid_msg);
    }
    free(r->iidx);
    free(r->nix);
    apply_settle_release(&r->settle);
    if (r->rows)
        r->c->rows_gen++; /* not handed back (a failed reconcile): freed below */
    for (int i = 0; i < r->nrows; i++)
        free(r->rows[i]);
    for (int i = 0; i < r->nintents; i++)
        free((char *)r->intents[i].job_key);
    free(r->intents);
    free(r->rows);
    /* the job array, for the next reconcile (freed at stop) */
    free(r->c->jobs_keep);
    r->c->jobs_keep = r->jobs;
    r->c->jobs_keep_cap = r->jobs ? r->capjobs : 0;
    /* r->teams and r->tinfo are c->team_keep's */
    free(r->pools);
    free(r->pcs);
    free(r->nodes);
    free(r->foreign);
    free(r->ev);
}

/* ------------------------------------------------------------ phases
 *
 * One reconcile is a fixed sequence of named phases, each timed on the
 * monotonic clock into gangq_reconcile_phase_duration_seconds{phase}, and
 * the controller thread's CPU time in it into
 * gangq_reconcile_phase_cpu_seconds_total{phase} (the wall time of a phase
 * also counts waits: the store's fsync, other processes on the cores):
 *   gather   finish acts that completed, read the informer caches, the store
 *            rows and the pending intents into r;
 *   observe  open the cycle's store transaction and bring every store row in
 *            line with what the cluster shows (prepare, spec rules, deleted
 *            jobs, lifecycle), account usage, prune;
 *   schedule book released pods and run the scheduling core on the snapshot,
 *            applying its decisions to the store rows;
 *   commit   commit the transaction (nothing reaches the cluster before);
 *   act      Events, waiting messages, the intents, stray pods;
 *   report   status of GPUJobs, Teams and GPUPools, memo aging, job gauges.
 * A phase that fails stops the sequence; its duration is still observed. */

const char *const ctl_phase_names[CTL_NPHASES] = {"gather", "observe", "schedule", "commit", "act", "report"};

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts))
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Elapsed: interval iv_ms has passed since t_ms at now (less a tenth: a timer
 * firing a little early must not put off what is due by a whole interval;
 * a clock stepped back counts as passed). */
static int elapsed(int64_t now, int64_t t_ms, int64_t iv_ms)
{
    return now - t_ms >= iv_ms - iv_ms / 10 || now < t_ms;
}

/* The periodic resync examines a job in state st (its memo m): one past
 * waiting whose last look did not find it steady (rc_job_lifecycle: every
 * placed pod seen, none failed, stopping or on a node not Ready), or a
 * Preempted one whose pods still run or stop (their deletion deadline).
 * Nothing else of a job changes by time alone. */
static int resync_wants(int st, struct ctl_memo *m)
{
    if (!m || st == STORE_QUEUED || st == STORE_SUSPENDED || rc_finished(st))
        return 0;
    if (rc_holds(st))
        return !m->pods.steady;
    int np = 0;
    (void)rc_memo_pods(m, &np);
    for (int k = 0; k < np; k++)
        if (!m->pods.pf[k].terminal)
            return 1;
    return 0;
}

static int phase_gather(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc;
    r->now = ctl_now_ms();
    c->reconciles++;
    /* one store transaction from here to the commit phase; the intents acted
     * on since the last reconcile are marked done in it, before the pending
     * ones are read */
    if ((rc = store_begin_cycle(c->st, r->err, sizeof(r->err))))
        return rc;
    r->in_txn = 1;
    if ((rc = ctl_act_write_done(&c->act, r->now, &r->done_marks, r->err, sizeof(r->err))))
        return rc;
    /* a full pass: asked for (a Team, pool, class or node changed, an
     * index rebuilt), the first one, or none for --full-resync-interval */
    int64_t fiv = (int64_t)(c->cfg.full_resync_interval_s * 1000.0);
    int64_t iv = (int64_t)(c->cfg.cycle_interval_s * 1000.0);
    r->full = c->full_next || !c->restart_done || !c->last_full_ms || elapsed(r->now, c->last_full_ms, fiv);
    if (r->full) {
        c->full_next = 0;
        c->last_full_ms = c->last_resync_ms = r->now;
        c->m.reconciles_full++;
    } else if (elapsed(r->now, c->last_resync_ms, iv)) {
        /* the periodic resync: a job that waits changes only by events (its
         * own, its Team's, pools', classes', nodes': those make a full pass)
         * and the scheduling core sees it every reconcile; what time alone
         * changes (a missing pod's or a lost node's grace, a stopping pod's
         * deadline, a pod create to ask about again) belongs to jobs past
         * waiting (resync_wants), examined again here: an idle resync
         * examines none */
        c->last_resync_ms = r->now;
        for (int i = 0; i < c->nrows; i++) {
            int st = c->rows[i]->state;
            if (st == STORE_QUEUED || st == STORE_SUSPENDED || rc_finished(st))
                continue;
            struct ctl_memo *m = ctl_memo_get(&c->memo, c->rows[i]->key, 0);
            if (resync_wants(st, m))
                ctl_memo_dirty(m, c->reconciles);
        }
    }
    return rc_gather(r);
}

/* Row has no GPUJob in this reconcile. Called for rows in key order with
 * *k starting at 0: rows and jobs are both sorted by key, so one merge walk
 * answers for every row. */
static int row_gone(const struct rc_ctx *r, int *k, const struct store_job *row)
{
    int cmp = 1;
    while (*k < r->njobs && (cmp = strcmp(r->jobs[*k].key, row->key)) < 0)
        (*k)++;
    return *k >= r->njobs || cmp != 0;
}

/* rc_job_prepare of job i reads its memo (up to its decode), the decode the
 * memo keeps and the store row it kept, all anywhere in the heap: a clean
 * job's look is mostly waiting for them, so they are fetched ahead. */
static void observe_prefetch(const struct rc_ctx *r, int i)
{
    if (i + GQ_PREFETCH_AHEAD < r->njobs) {
        const struct ctl_objent *e = r->jobs[i + GQ_PREFETCH_AHEAD].ent;
        gq_prefetch(e ? e->memo : NULL, offsetof(struct ctl_memo, decode) + sizeof(struct ctl_memo_decode));
    }
    if (i + GQ_PREFETCH_AHEAD / 2 < r->njobs) {
        const struct ctl_objent *e = r->jobs[i + GQ_PREFETCH_AHEAD / 2].ent;
        const struct ctl_memo *m = e ? e->memo : NULL;
        if (m && m->decode.job) {
            gq_prefetch(m->decode.job->meta.uid, 1);
            gq_prefetch(&m->decode.job->meta.generation, 1);
        }
        if (m)
            gq_prefetch(m->decode.row, 1);
    }
}

static int phase_observe(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc;
    if (!c->restart_done) {
        LOGC(c, GQ_LOG_INFO, "first reconcile: finishing intents left by a previous run",
             " pending=%d store_jobs=%d", r->nintents, r->nrows);
        c->restart_done = 1;
    }
    for (int i = 0; i < r->njobs; i++) {
        observe_prefetch(r, i);
        if ((rc = rc_job_prepare(r, &r->jobs[i])))
            return rc;
    }
    /* the GPUs held since the last accounting, before this reconcile's spec
     * rules and lifecycle change them: what the last committed reconcile
     * left held all along (through a quiet stretch too: nothing changed) */
    account_usage(r);
    /* the spec rules of the jobs examined in full (a job's spec changes only
     * with an event of it, which makes it dirty) */
    for (int i = 0; i < r->njobs; i++)
        if (r->jobs[i].looked && (rc = rc_job_spec_rules(r, &r->jobs[i])))
            return rc;
    /* store rows whose GPUJob is gone: deleted, then dropped from rows[].
     * Rows kept from the last committed reconcile each had a GPUJob then, and
     * a row is only ever added for a GPUJob present: unless a GPUJob was
     * deleted since (or the rows were read from the store, or this is a full
     * pass) every row still has one, and the walk, which reads every row,
     * is skipped. */
    int ngone = 0;
    int walk = r->full || r->rows_read || r->jobs_deleted != c->jobs_deleted_walked;
    for (int i = 0, k = 0; walk && i < r->nrows; i++) {
        struct store_job *row = r->rows[i];
        if (!row_gone(r, &k, row))
            continue;
        ngone++;
        struct store_audit a = {0, r->now, "gangq", "delete", row->team, row->key,
                                store_state_name(row->state), "", "GPUJob deleted"};
        struct apply_ctx x = rc_actx(r);
        struct sched_quota q[API_MAX_QUOTA];
        int nq = rc_team_quota(rc_team_of(r, row->team), q);
        if ((rc = rc_intent(r, STORE_INTENT_DELETE, row->key, "gone")) ||
            (rc = store_job_delete(c->st, row->key, r->err, sizeof(r->err))) ||
            (rc = apply_ledger_changed(&x, row->team, q, nq)) ||
            (rc = store_audit_add(c->st, &a, r->err, sizeof(r->err))))
            return rc;
        LOGC(c, GQ_LOG_INFO, "job deleted: released", " job=%s was=%s", row->key,
             store_state_name(row->state));
    }
    if (ngone) {
        int kept = 0;
        for (int i = 0, k = 0; i < r->nrows; i++) {
            if (row_gone(r, &k, r->rows[i]))
                free(r->rows[i]);
            else
                r->rows[kept++] = r->rows[i];
        }
        r->nrows = kept;
    }
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        if ((rc_job_dirty(r, j) && ((rc = rc_job_create_refused(r, j)) || (rc = rc_job_lifecycle(r, j)))) ||
            (rc = rc_job_ttl(r, j)))
            return rc;
    }
    if (r->now - c->last_prune_ms > CTL_PRUNE_INTERVAL_MS) {
        /* housekeeping: done intents after a day, usage older than ten half-lives,
         * audit entries past --audit-retention (a bounded batch: a long backlog
         * goes over the following reconciles, not in one transaction) */
        int pruned = 0;
        if ((rc = store_intents_prune(c->st, r->now - 86400000LL, r->err, sizeof(r->err))) ||
            (rc = store_usage_prune(c->st, r->now - (int64_t)(c->cfg.usage_half_life_s * 10000.0), r->err,
                                    sizeof(r->err))) ||
            (c->cfg.audit_retention_s > 0 &&
             (rc = store_audit_prune(c->st, r->now - (int64_t)(c->cfg.audit_retention_s * 1000.0),
                                     CTL_AUDIT_PRUNE_BATCH, &pruned, r->err, sizeof(r->err)))))
            return rc;
        c->last_prune_ms = r->now;
        if (pruned) {
            c->m.audit_pruned += (uint64_t)pruned;
            LOGC(c, GQ_LOG_INFO, "audit entries past retention deleted", " deleted=%d retention_s=%.0f", pruned,
                 c->cfg.audit_retention_s);
        }
        if (pruned >= CTL_AUDIT_PRUNE_BATCH) {
            /* more left: a reconcile a second from now goes on */
            c->last_prune_ms = r->now - CTL_PRUNE_INTERVAL_MS;
            rc_due(r, r->now + 1000, "audit-prune");
        }
    }
    for (int i = 0; i < r->njobs; i++)
        if (r->jobs[i].invalid_reason && !r->jobs[i].failed_invalid) {
            (void)ctl_str_set(&r->jobs[i].memo->wait.wait_msg, ctl_str(r->jobs[i].invalid_msg), SCHED_MSG_MAX);
            r->jobs[i].memo->wait.position = 0;
        }
    return 0;
}

static int phase_schedule(struct rc_ctx *r)
{
    int rc = released_pods(r);
    return rc ? rc : rc_run_sched(r);
}

/* The quota in force of a Team of this reconcile (apply_quota_fn). */
static const struct sched_quota *team_quota(void *ud, const char *team, struct sched_quota *buf, int *nq)
{
    *nq = rc_team_quota(rc_team_of(ud, team), buf);
    return buf;
}

static int phase_commit(struct rc_ctx *r)
{
    /* the ledger rows of every Team whose rows changed, settled once each */
    struct apply_ctx x = rc_actx(r);
    int rc = apply_settle_flush(&x, team_quota, r);
    if (rc)
        return rc; /* rolled back by ctl_reconcile */
    r->in_txn = 0;
    rc = store_commit_cycle(r->c->st, r->err, sizeof(r->err));
    if (!rc) {
        r->committed = 1;
        r->c->jobs_deleted_walked = r->jobs_deleted; /* rows of those deleted are gone */
        ctl_act_done_committed(&r->c->act, r->done_marks);
    }
    return rc;
}

static int phase_act(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    for (int i = 0; i < r->nev; i++)
        ctl_act_event(&c->act, r->ev[i].obj, r->ev[i].type, r->ev[i].reason, r->ev[i].msg);
    rc_waiting_publish(r);
    ctl_act_intents(&c->act);
    cleanup_strays(r);
    for (int i = 0; r->nttl_delete && i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        if (j->ttl_delete && ctl_job_delete(c, j->key, j->job->meta.namespace, j->job->meta.name, j->job->meta.uid))
            rc_due(r, j->memo->ttl.retry_ms, "finished-ttl-retry");
    }
    return 0;
}

static int phase_report(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        if (rc_job_status_due(r, j))
            rc_job_status(r, j);
    }
    if (r->full || r->pub_epoch)
        rc_team_pool_status(r);
    else
        rc_team_pool_seen(r);
    ctl_memo_drop_unseen(&c->memo, c->reconciles, &c->jobs_set);
    /* last: a job put to sleep no longer has the decode the steps above read */
    for (int i = 0; i < r->njobs; i++)
        rc_job_sleep(r, &r->jobs[i]);
    memset(c->m.jobs_by_state, 0, sizeof(c->m.jobs_by_state));
    c->m.jobs_dormant = 0;
    for (int i = 0; i < r->njobs; i++) {
        if (r->jobs[i].row && r->jobs[i].state >= 0 && r->jobs[i].state < STORE_NSTATES)
            c->m.jobs_by_state[r->jobs[i].state]++;
        if (r->jobs[i].row && !r->jobs[i].dormant)
            r->resync_jobs += resync_wants(r->jobs[i].state, r->jobs[i].memo);
        if (r->jobs[i].memo && r->jobs[i].memo->decode.dormant)
            c->m.jobs_dormant++;
    }
    return 0;
}

static int (*const phase_fns[CTL_NPHASES])(struct rc_ctx *r) = {
    phase_gather, phase_observe, phase_schedule, phase_commit, phase_act, phase_report};

/* A quiet reconcile: nothing it reads changed since the last committed one
 * began (c->inputs: informer events but status echoes, the actuator's
 * outcomes, a due timer), no full pass is due (--full-resync-interval, the
 * first after leading, one asked for), no periodic resync with a job to
 * examine (--cycle-interval: only jobs that are not steady have a grace or
 * deadline time alone ends), and nothing time alone changes is due yet
 * (c->due_ms). Its phases would find what the last one found and write
 * nothing: it is skipped. Fair-share order, which drifts with decayed usage
 * while nothing happens, is computed again by the next reconcile that runs
 * (an event, a due time, at the latest the next full pass). */
static int rc_quiet(const struct gq_ctl *c, int64_t now)
{
    int64_t fiv = (int64_t)(c->cfg.full_resync_interval_s * 1000.0);
    int64_t iv = (int64_t)(c->cfg.cycle_interval_s * 1000.0);
    return c->quiet_ok && c->inputs == c->inputs_seen && !c->full_next && c->restart_done && !c->index_stale &&
           c->last_full_ms && !elapsed(now, c->last_full_ms, fiv) &&
           !(c->resync_jobs && elapsed(now, c->last_resync_ms, iv)) && !(c->due_ms && now >= c->due_ms);
}

struct ctl_rc_result ctl_reconcile(struct gq_ctl *c)
{
    struct ctl_rc_result res = {0};
    if (rc_quiet(c, ctl_now_ms())) {
        c->m.reconciles_quiet++;
        res.quiet = 1;
        return res;
    }
    uint64_t inputs = c->inputs; /* what comes in from here on makes the next one run */
    c->quiet_ok = 0;
    struct rc_ctx *r = calloc(1, sizeof(*r));
    if (!r)
        return res; /* did not run: nothing for the loop to act on */
    r->c = c;
    int rc = 0;
    for (int p = 0; p < CTL_NPHASES && !rc; p++) {
        int64_t t0 = clock_ns(CLOCK_MONOTONIC), u0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        rc = phase_fns[p](r);
        int64_t dt = clock_ns(CLOCK_MONOTONIC) - t0, du = clock_ns(CLOCK_THREAD_CPUTIME_ID) - u0;
        c->m.phase_ns[p] += (uint64_t)(dt > 0 ? dt : 0);
        gq_metrics_observe(c->mh.phase_dur[p], (double)dt / 1e9);
        gq_metrics_add(c->mh.phase_cpu[p], (double)du / 1e9);
    }
    if (rc) {
        if (r->in_txn)
            store_rollback_cycle(c->st);
        rc_team_keep_forget(c); /* the valid Team specs it saved are not in the store */
        c->m.store_errors++;
        LOGC(c, GQ_LOG_ERROR, "reconcile failed: nothing acted on, retrying next cycle",
             " err=\"%s\" rc=%s", r->err, gq_strerror(rc));
        res.rc = rc;
        gq_strlcpy(res.err, r->err, sizeof(res.err));
    } else {
        /* the rows, as committed, start the next reconcile */
        ctl_rows_release(c);
        c->rows = r->rows;
        c->nrows = r->nrows;
        c->caprows = r->caprows;
        r->rows = NULL;
        r->nrows = r->caprows = 0;
        res.due_ms = r->due_next;
        if (r->committed && !r->marked_next) {
            c->quiet_ok = 1;
            c->inputs_seen = inputs;
            c->due_ms = r->due_next;
            c->resync_jobs = r->resync_jobs;
        }
        int64_t dt = ctl_now_ms() - r->now;
        c->m.cycle_us_total += (uint64_t)dt * 1000;
        gq_log(c->cfg.log_level, GQ_LOG_DEBUG, "ctl", "reconcile",
               " n=%lld jobs=%d nodes=%d released_pods=%d sched=%d ms=%lld marked_next=%d due_in_ms=%lld due=%s",
               (long long)c->reconciles, r->njobs, r->nnodes, r->nreleased, r->sched_ran, (long long)dt,
               r->marked_next, (long long)(r->due_next ? r->due_next - r->now : -1),
               r->due_why ? r->due_why : "none");
    }
    res.committed = r->committed;
    rc_release(r);
    free(r);
    return res;
}

void ctl_rows_release(struct gq_ctl *c)
{
    if (c->rows)
        c->rows_gen++; /* row pointers kept on memos (rc_row_keep) are stale */
    for (int i = 0; i < c->nrows; i++)
        free(c->rows[i]);
    free(c->rows);
    c->rows = NULL;
    c->nrows = c->caprows = 0;
}

/* ------------------------------------------------------------ pod events */

void ctl_pod_deleted(struct gq_ctl *c, const cJSON *pod)
{
    const char *job = ctl_obj_label(pod, CTL_LABEL_JOB);
    const char *ns = ctl_obj_str(pod, "metadata", "namespace");
    const char *name = ctl_obj_str(pod, "metadata", "name");
    char key[CTL_KEY_MAX];
    if (!job || !ns || !name)
        return;
    snprintf(key, sizeof(key), "%s/%s", ns, job);
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (!m)
        return;
    (void)ctl_str_set(&m->pods.gone_pod, name, API_NAME_MAX + 32);
    const char *phase = ctl_obj_str(pod, "status", "phase");
    if (!phase || strcmp(phase, "Succeeded"))
        return;
    if (!m->pods.gone_ok && !(m->pods.gone_ok = cJSON_CreateArray()))
        return;
    if (cJSON_GetArraySize(m->pods.gone_ok) >= CTL_GONE_OK_MAX)
        cJSON_DeleteItemFromArray(m->pods.gone_ok, 0); /* the oldest */
    cJSON *cp = cJSON_Duplicate(pod, 1);
    if (cp)
        cJSON_AddItemToArray(m->pods.gone_ok, cp);
}

/* ------------------------------------------------------------ quota edits */

void ctl_team_changed(struct gq_ctl *c, const cJSON *old_obj, const cJSON *new_obj)
{
    char *o = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(old_obj, "spec"));
    char *n = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(new_obj, "spec"));
    if (o && n && strcmp(o, n)) {
        const char *name = ctl_obj_str(new_obj, "metadata", "name");
        char actor[API_NAME_MAX] = "unknown";
        const cJSON *mf = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(new_obj, "metadata"), "managedFields");
        const cJSON *last = NULL, *e;
        double lt = -1;
        /* the actor is the field manager that last wrote spec fields: a name the
         * client chooses (kubectl --field-manager), not an authenticated user;
         * who made the request is in the API server's audit log */
        cJSON_ArrayForEach(e, mf)
        {
            const char *t = ctl_obj_str(e, "time", NULL);
            double w = 0;
            if (!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "fieldsV1"), "f:spec"))
                continue; /* status writes (gangq's own) and metadata-only entries */
            if (t)
                kube_time_parse(t, &w);
            if (w >= lt) {
                lt = w;
                last = e;
            }
        }
        const char *mgr = last ? ctl_obj_str(last, "manager", NULL) : NULL;
        if (mgr)
            snprintf(actor, sizeof(actor), "manager:%s", mgr);
        if (c->leading) {
            char err[256];
            struct store_audit a = {0, ctl_now_ms(), actor, "quota-edit", name ? name : "", "",
                                    o, n, "Team spec changed"};
            if (store_audit_add(c->st, &a, err, sizeof(err)))
                LOGC(c, GQ_LOG_ERROR, "audit write failed", " err=\"%s\"", err);
        }
        LOGC(c, GQ_LOG_INFO, "team spec changed", " team=%s actor=%s recorded=%d", name ? name : "",
             actor, c->leading);
    }
    free(o);
    free(n);
}
