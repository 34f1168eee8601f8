/*
 * ctl_decide.c — the reconcile's schedule phase: the snapshot of observed
 * jobs, Teams and nodes built for the scheduling core (scheduler/sched.h),
 * one scheduling cycle, and each admission and preemption it decides applied
 * to the store (in the cycle's transaction) with its Event; waiting jobs'
 * explanations and positions kept on their memos.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_rc.h"

struct usage_map {
    struct rc_ctx *r;
    double *u;
};

static int usage_cb(void *ud, const char *team, double v)
{
    struct usage_map *m = ud;
    for (int i = 0; i < m->r->nteams; i++)
        if (!strcmp(m->r->teams[i].meta.name, team))
            m->u[i] = v;
    return 0;
}

/* A job that holds nothing (Queued, Preempted with no stopping pod) whose
 * earlier attempt may still run: a pod of it neither finished nor marked for
 * deletion (a delete refused with 409 because the pod changed leaves it so
 * until the cache shows what it became: Succeeded completes the job through
 * job_succeeded_meanwhile, anything else is deleted again as a stray), or a
 * pod it created that the cache does not show yet (asked of the API server
 * after CTL_MISSING_GRACE_MS). Such a job is not placed again: two attempts
 * would run at once, both possibly to completion. */
static int earlier_attempt_runs(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    int np = 0;
    if (!m)
        return 0;
    const cJSON **pods = rc_memo_pods(m, &np);
    rc_created_seen(m);
    if (m->pods.created_attempt) {
        if (r->now - m->pods.created_ms > CTL_MISSING_GRACE_MS && m->pods.created_pod) {
            ctl_pod_confirm(r->c, j->key, j->job->meta.namespace, m->pods.created_pod);
            m->pods.created_ms = r->now; /* asked again after another grace period */
        }
        return 1;
    }
    return np && ctl_pods_live(pods, np, j->job->meta.uid);
}

/* The class label of a job's metrics ("None" before defaulting). */
static const char *metric_class(const struct cj *j)
{
    enum api_class k = j->job->spec.class;
    return k > API_CLASS_NONE && k < API_CLASS_COUNT ? api_class_name(k) : "None";
}

/* gangq_admissions_total / gangq_preemptions_total{team,class} += 1 (a series
 * past the family's bound is refused and counted by the registry). */
static void metric_decision(struct rc_ctx *r, const char *family, const struct cj *j)
{
    struct gq_metric *h = NULL;
    const char *team = j->job->spec.team[0] ? j->job->spec.team : "none";
    if (r->c->metrics &&
        !gq_metrics_counter(r->c->metrics, family, "", (const char *[]){"team", team, "class", metric_class(j), NULL},
                            &h, NULL, 0))
        gq_metrics_inc(h);
}

static int decide_admit(struct rc_ctx *r, struct ctl_snap *s, const struct sched_decision *d)
{
    struct cj *j = &r->jobs[s->job_in[d->job]];
    int was = j->state;
    int partial = rc_holds(was);
    int rc = 0;
    (void)ctl_str_set(&j->memo->pods.gone_pod, NULL, 0); /* names of this admission's pods are new */
    ctl_memo_victims_clear(j->memo); /* the jobs preempted for it no longer wait for it */
    if (!partial) {
        ctl_placement_release(&j->pl);
        /* above any attempt whose pods may still exist (adopted, or a lost store) */
        /* ... and above the attempt its status records (a store older than the API server) */
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j->obj, "status"), "attempt");
        int64_t floor = cJSON_IsNumber(sa) && sa->valuedouble > 0 && sa->valuedouble < 1000000 ? (int64_t)sa->valuedouble : 0;
        j->pl.attempt = (int)GQ_MAX(GQ_MAX(j->row->attempts, rc_max_pod_attempt(j->memo)), floor) + 1;
    }
    if (d->domain && !partial)
        gq_strlcpy(j->pl.domain, d->domain, sizeof(j->pl.domain));
    struct act a;
    rc_act_begin(r, j, &a);
    if ((rc = apply_placement_add(&j->pl, s->snap.nodes, d->rep, d->nrep, partial)) ||
        (rc = rc_act_end(r, j, apply_admit(&a.x, &a.j, &j->pl, rc_pl_product(r, &j->pl), d->message))))
        return rc;
    j->admit_pending = 1;
    /* what this admission may write: its pods + 2 (the write budget, ctl_act.h) */
    ctl_act_write_credit(&r->c->act, (double)d->nrep + 2.0);
    r->c->m.admissions++;
    metric_decision(r, CTL_M_ADMISSIONS, j);
    if (!partial && j->pl.attempt == 1) {
        /* creation -> first admission (a requeued or preempted job's later
         * admissions would measure its run, not its wait) */
        enum api_class k = j->job->spec.class;
        double waited = (double)(r->now - rc_creation_ms(j, r->now)) / 1000.0;
        gq_metrics_observe(r->c->mh.admit_wait[k > API_CLASS_NONE && k < API_CLASS_COUNT ? k : 0],
                           waited > 0 ? waited : 0);
    }
    rc_event_add(r, j->obj, "Normal", "Admitted", "%s", d->message ? d->message : "admitted");
    LOGC(r->c, GQ_LOG_INFO, "job admitted", " job=%s replicas=%d domain=%s msg=\"%s\"", j->key,
         d->nrep, d->domain ? d->domain : "", d->message ? d->message : "");
    return 0;
}

static int decide_preempt(struct rc_ctx *r, struct ctl_snap *s, const struct sched_decision *d)
{
    struct cj *j = &r->jobs[s->job_in[d->job]];
    const char *by = d->for_job >= 0 ? s->jobs[d->for_job].id : "";
    const char *why = d->message ? d->message : "preempted";
    int rc;
    struct act a;
    rc_act_begin(r, j, &a);
    j->released = 1;
    if ((rc = rc_act_end(r, j, apply_preempt(&a.x, &a.j, by, why))))
        return rc;
    r->c->m.preemptions++;
    metric_decision(r, CTL_M_PREEMPTIONS, j);
    if (d->for_job >= 0 && (rc = ctl_memo_victim_add(r->jobs[s->job_in[d->for_job]].memo, j->key)))
        return rc;
    if (strstr(why, by))
        rc_event_add(r, j->obj, "Warning", "Preempted", "%s", why);
    else
        rc_event_add(r, j->obj, "Warning", "Preempted", "preempted to make room for %s: %s", by, why);
    LOGC(r->c, GQ_LOG_INFO, "job preempted", " job=%s by=%s reason=\"%s\"", j->key, by, why);
    return 0;
}

int rc_run_sched(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc = 0;
    /* the core's inputs, in arrays kept from the last reconcile */
    size_t nin = (size_t)r->njobs + 1;
    struct ctl_jobin *ins = c->ins_keep = rc_keep_reserve(c->ins_keep, &c->ins_keep_cap, nin, sizeof(*ins));
    int *ins_job = c->ins_job_keep = /* ins[k] is r->jobs[ins_job[k]] */
        rc_keep_reserve(c->ins_job_keep, &c->ins_job_keep_cap, nin, sizeof(*ins_job));
    if (ins && ins_job) {
        memset(ins, 0, nin * sizeof(*ins));
        memset(ins_job, 0, nin * sizeof(*ins_job));
    }
    double *usage = calloc((size_t)r->nteams + 1, sizeof(*usage));
    struct ctl_snap s;
    struct sched_result *res = NULL;
    memset(&s, 0, sizeof(s));
    s.keep = c->snap_keep; /* the last reconcile's arrays, reused */
    memset(&c->snap_keep, 0, sizeof(c->snap_keep));
    if (!ins || !usage || !ins_job) {
        rc = GQ_ENOMEM;
        goto out;
    }
    struct usage_map um = {r, usage};
    if ((rc = store_usage_decayed_all(c->st, r->now, c->cfg.usage_half_life_s, usage_cb, &um,
                                      r->err, sizeof(r->err))))
        goto out;
    int n = 0;
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        int st = j->state;
        if (i + GQ_PREFETCH_AHEAD < r->njobs) {
            /* rows and memos lie anywhere in the heap: fetch ahead the parts
             * read below */
            const struct cj *a = &r->jobs[i + GQ_PREFETCH_AHEAD];
            gq_prefetch(a->row, 1);
            if (a->memo) {
                gq_prefetch(&a->memo->wait, 1);
                gq_prefetch(&a->memo->victims, 1);
            }
        }
        /* a job that waits on a problem (unknown or deleted Team, pool, ...) is
         * not placed; one that holds GPUs stays in the snapshot whatever its
         * Team, pool or spec became: GPUs held by live pods are never offered
         * again (a missing Team gives it no quota, not free GPUs) */
        int stopping = j->row && st == STORE_PREEMPTED && j->term.n > 0;
        if (!j->row || (j->invalid_reason && !rc_holds(st) && !stopping))
            continue;
        if (st != STORE_QUEUED && st != STORE_PREEMPTED && !rc_holds(st))
            continue;
        if (!rc_holds(st) && !stopping && earlier_attempt_runs(r, j))
            continue; /* placed again only once its earlier attempt has stopped */
        ins[n] = (struct ctl_jobin){j->key, j->job, rc_holds(st) || stopping, j->row->enqueue_ms,
                                    j->row->admitted_ms, stopping ? &j->term : &j->pl,
                                    j->row->preempted_by, j->memo ? ctl_str(j->memo->wait.reserved) : NULL,
                                    stopping, stopping ? j->row->preempted_by : NULL,
                                    j->row->arrival, j->invalid_reason != NULL,
                                    j->memo ? (const char *const *)j->memo->victims.victims : NULL,
                                    j->memo ? j->memo->victims.nvictims : 0,
                                    rc_run_limit(j) /* 0 unless it holds */};
        ins_job[n] = i;
        n++;
    }
    /* map ins back to r->jobs: keep the index in a parallel array via key lookup */
    struct ctl_snapin in = {&c->scfg, r->now / 1000, r->nodes, r->nnodes,
                            r->foreign, r->nforeign, r->pools, r->npools, r->teams, r->nteams,
                            usage, ins, n, 1 /* r->jobs follow c->jobs_set's key order */,
                            r->nforeign_released};
    if ((rc = ctl_snap_build(&s, &in, r->err, sizeof(r->err))))
        goto out;
    /* s.job_in indexes ins[]; translate to r->jobs indices */
    for (int k = 0; k < s.snap.njobs; k++)
        s.job_in[k] = ins_job[s.job_in[k]];
    int64_t t0 = ctl_now_ms();
    if ((rc = sched_cycle(c->sched, &s.snap, &res, r->err, sizeof(r->err))))
        goto out;
    r->sched_ran = 1;
    if (res->due)
        rc_due(r, res->due * 1000, "min-runtime"); /* a minimum-runtime protection ends: decisions may change */
    c->m.cycles++;
    c->m.backfills += (uint64_t)res->stats.backfilled;
    c->m.last_cycle_ms = (double)(ctl_now_ms() - t0);
    gq_metrics_observe(c->mh.cycle_dur, c->m.last_cycle_ms / 1000.0);
    /* the decisions below say what is current: a job whose explanation
     * changes is examined in full (its status may change). waited[k]: the
     * snapshot's job k had a WAIT in this cycle; its memo is written by that
     * WAIT, a job without one has its wait cleared below (each memo touched
     * once: a reconcile's cost at 15,000 jobs is mostly cache misses) */
    unsigned char *waited = c->waited_keep =
        rc_keep_reserve(c->waited_keep, &c->waited_keep_cap, (size_t)s.snap.njobs + 1, 1);
    if (!waited) {
        rc = GQ_ENOMEM;
        goto out;
    }
    memset(waited, 0, (size_t)s.snap.njobs + 1);
    int gpos = 0; /* WAITs come in the core's admission order across Teams */
    for (int k = 0; k < res->n; k++) {
        const struct sched_decision *d = &res->d[k];
        struct cj *j = &r->jobs[s.job_in[d->job]];
        if (k + GQ_PREFETCH_AHEAD < res->n) { /* decisions come in the core's order, memos anywhere */
            const struct ctl_memo *am = r->jobs[s.job_in[res->d[k + GQ_PREFETCH_AHEAD].job]].memo;
            if (am)
                gq_prefetch(&am->wait, 1);
        }
        if (d->kind == SCHED_ADMIT)
            rc = decide_admit(r, &s, d);
        else if (d->kind == SCHED_PREEMPT)
            rc = decide_preempt(r, &s, d);
        else if (d->kind == SCHED_WAIT) {
            const char *msg = d->message ? d->message : "";
            if (!waited[d->job] && strcmp(ctl_str(j->memo->wait.wait_msg), msg)) {
                (void)ctl_str_set(&j->memo->wait.wait_msg, msg, SCHED_MSG_MAX);
                j->memo->wait.wait_msg_hash = j->memo->wait.wait_msg ? gq_hash_str(j->memo->wait.wait_msg) : 0;
                rc_job_touch_status(r, j);
            }
            waited[d->job] = 1;
            j->memo->wait.position = d->position;
            j->memo->wait.gposition = ++gpos;
            (void)ctl_str_set(&j->memo->wait.reserved, d->reserved, 256);
            const char *unsched = d->unschedulable && d->unschedulable_msg ? d->unschedulable_msg : "";
            if (strcmp(ctl_str(j->memo->wait.unsched_msg), unsched)) {
                (void)ctl_str_set(&j->memo->wait.unsched_msg, unsched, SCHED_MSG_MAX);
                rc_job_touch_status(r, j);
            }
        }
        if (rc)
            goto out;
    }
    for (int k = 0; k < s.snap.njobs; k++) {
        if (waited[k])
            continue;
        /* no WAIT this time: no explanation, position or reservation */
        struct cj *j = &r->jobs[s.job_in[k]];
        struct ctl_memo_wait *w = &j->memo->wait;
        if (w->wait_msg || w->unsched_msg)
            rc_job_touch_status(r, j);
        if (w->wait_msg)
            (void)ctl_str_set(&w->wait_msg, NULL, 0);
        w->wait_msg_hash = 0;
        if (w->unsched_msg)
            (void)ctl_str_set(&w->unsched_msg, NULL, 0);
        if (w->reserved)
            (void)ctl_str_set(&w->reserved, NULL, 0);
        w->position = 0;
        w->gposition = 0;
    }
out:
    sched_result_recycle(c->sched, res); /* its decision array serves the next cycle */
    c->snap_keep = s.keep; /* for the next reconcile (freed at stop) */
    free(usage); /* ins and ins_job are c's */
    return rc;
}

