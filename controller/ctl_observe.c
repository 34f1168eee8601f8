/*
 * ctl_observe.c — the reconcile's observe phase, one GPUJob at a time: its
 * decode (cached on its memo), validation and store row (a new job enqueued,
 * a changed spec requeued), recovery and adoption after a restart, dormancy
 * of finished jobs, the spec rules (suspend, resume, deletion) and the
 * lifecycle read from its pods (running, succeeded, failed, lost replicas).
 * A job nothing changed for is skipped (rc_job_prepare's clean path).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_rc.h"

int64_t rc_creation_ms(const struct cj *j, int64_t now)
{
    double w = 0;
    if (j->job->meta.creation_timestamp[0] && !kube_time_parse(j->job->meta.creation_timestamp, &w))
        return (int64_t)(w * 1000.0);
    return now;
}

/* --status-settle: when a status write of this job is held back, the time it
 * is due, else 0. A state is written once the job has been in it for the
 * settle interval (a new job's Queued: since its creation), and a job's status
 * at most once per interval, so a state it leaves sooner (Queued admitted at
 * once, Admitted whose pods run, Running that finished) is never written.
 * Succeeded, Failed and an invalid spec are written at once. */
int64_t rc_status_held(const struct rc_ctx *r, const struct cj *j)
{
    int64_t iv = (int64_t)(r->c->cfg.status_settle_s * 1000.0);
    struct ctl_memo *m = j->memo;
    if (iv <= 0 || !m || !j->decoded || j->state == STORE_SUCCEEDED || j->state == STORE_FAILED ||
        (j->invalid_reason && !j->failed_invalid))
        return 0;
    if (!m->status.state_since_ms) {
        /* first seen since start: a new job's wait counts from its creation */
        m->status.state_since_ms = j->state == STORE_QUEUED ? rc_creation_ms(j, r->now) : r->now;
        m->status.since_state = j->state;
    } else if (m->status.since_state != j->state) {
        m->status.state_since_ms = r->now;
        m->status.since_state = j->state;
    }
    int64_t due = 0;
    if (r->now >= m->status.state_since_ms && r->now - m->status.state_since_ms < iv)
        due = m->status.state_since_ms + iv;
    if (m->status.status_sent_ms && r->now >= m->status.status_sent_ms && r->now - m->status.status_sent_ms < iv &&
        m->status.status_sent_ms + iv > due)
        due = m->status.status_sent_ms + iv;
    return due;
}

void rc_settle_hold(struct rc_ctx *r, struct cj *j, int64_t due)
{
    j->memo->status.settle_due_ms = due;
    rc_due(r, due, "status-settle");
}

static int team_exists(struct rc_ctx *r, const char *name)
{
    return rc_team_of(r, name) != NULL;
}

static int pool_exists(struct rc_ctx *r, const char *name)
{
    for (int i = 0; i < r->npools; i++)
        if (!strcmp(r->pools[i].meta.name, name))
            return 1;
    return 0;
}

/* Highest gangq.io/attempt label among the job's pods (0 when none). */
int rc_max_pod_attempt(struct ctl_memo *m)
{
    int np = 0, best = 0;
    rc_memo_pods(m, &np);
    for (int i = 0; i < np; i++) {
        const char *a = m->pods.pf[i].attempt;
        int64_t v;
        if (a && !gq_parse_i64(a, (size_t)-1, &v) && v > best && v < 1000000)
            best = (int)v;
    }
    return best;
}

/* A job new to the store whose pods already run (the store was lost or is
 * another replica's): find the newest complete attempt, to adopt instead of
 * admitting the gang a second time. Its live pods and those that Succeeded
 * (a finished replica of that attempt; the lifecycle completes the job when all
 * did) make the placement; an attempt older than the one the status records is
 * not adopted (its pods are strays). Returns 1 with *pl filled when adoptable. */
static int adopt_scan(struct cj *j, int64_t status_attempt, struct ctl_placement *pl)
{
    int np = 0;
    const cJSON **pods = rc_memo_pods(j->memo, &np);
    int attempt = rc_max_pod_attempt(j->memo);
    if (!np || !attempt || attempt < status_attempt)
        return 0;
    pl->attempt = attempt;
    for (int i = 0; i < np; i++) {
        const cJSON *pod = pods[i];
        const char *a = ctl_obj_label(pod, CTL_LABEL_ATTEMPT), *rp = ctl_obj_label(pod, CTL_LABEL_REPLICA);
        const char *nn = ctl_obj_str(pod, "spec", "nodeName");
        const char *phase = ctl_obj_str(pod, "status", "phase");
        const cJSON *ref = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                                  cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "ownerReferences"), 0);
        const char *uid = ctl_obj_str(ref, "uid", NULL);
        int64_t av, rv;
        if (!a || !rp || !nn || !uid || strcmp(uid, j->job->meta.uid) || gq_parse_i64(a, (size_t)-1, &av) ||
            av != attempt || gq_parse_i64(rp, (size_t)-1, &rv) || (phase && !strcmp(phase, "Failed")) ||
            ctl_obj_str(pod, "metadata", "deletionTimestamp"))
            continue;
        struct ctl_podusage u;
        ctl_pod_usage(pod, &u);
        if (ctl_placement_add(pl, (int)rv, nn, u.devs))
            continue;
        /* keep the pod's own name: a re-placed replica carries a generation */
        char want[API_NAME_MAX + 32];
        const char *pn = ctl_obj_str(pod, "metadata", "name");
        struct ctl_prep *p = &pl->rep[ctl_placement_find(pl, (int)rv)];
        ctl_pod_name(j->job->meta.name, pl, p, want, sizeof(want));
        size_t wl = strlen(want);
        const char *g = pn && strlen(pn) > wl + 2 && !strncmp(pn, want, wl) && !strncmp(pn + wl, "-g", 2)
                            ? pn + wl : NULL;
        if (g) {
            int64_t gv;
            if (!gq_parse_i64(g + 2, (size_t)-1, &gv) && gv > 0 && gv < 1000000) {
                p->gen = (int)gv;
                if (p->gen > pl->reseq)
                    pl->reseq = p->gen;
            }
        }
    }
    int gang = j->job->spec.gang != API_FALSE;
    if (pl->n == 0 || (gang && pl->n != j->job->spec.replicas)) {
        ctl_placement_release(pl);
        ctl_placement_init(pl);
        return 0; /* incomplete: its pods are strays and get deleted */
    }
    return 1;
}

/* Arrival sequence of a job seen for the first time: its resourceVersion,
 * which until gangq writes its status is the revision that created it (etcd
 * revisions grow with every write, so they order a burst of creations that
 * share one creationTimestamp second); 0 when not a number. */
static int64_t first_sight_arrival(const struct cj *j)
{
    int64_t v;
    const char *rv = j->job->meta.resource_version;
    if (!rv[0] || gq_parse_i64(rv, (size_t)-1, &v) || v < 0)
        return 0;
    return v;
}

/* What a row new to the store is rebuilt from: the object's status (the
 * durable record of what gangq decided) and the job's pods. */
struct recovery {
    struct api_gpujob_status st;
    struct ctl_placement pl; /* adopted placement (when adopted) */
    struct gq_buf text;      /* its placement text */
    int adopted;
};

/* Fill the decision fields of sj (a row new to the store) from the status
 * and pods: arrival, enqueue time, attempts, retries, preemptions; a Succeeded
 * or Failed job stays rc_finished (for the generation its status records: a later
 * spec change is seen as one, j->gen_changed); an Admitted or Running one whose
 * pods run is adopted; a Preempted one stays Preempted. */
static int row_recover(struct rc_ctx *r, struct cj *j, struct store_job *sj, struct recovery *rec)
{
    struct api_errors e;
    api_errors_init(&e);
    /* a field that does not decode stays unknown (0); the others are used */
    ctl_job_status_decode(j->obj, &rec->st, &e);
    const struct api_gpujob_status *st = &rec->st;
    double w = 0;
    sj->arrival = st->arrival > 0 ? st->arrival : first_sight_arrival(j);
    if (st->enqueue_time[0] && !kube_time_parse(st->enqueue_time, &w) && w > 0)
        sj->enqueue_ms = (int64_t)(w * 1000.0);
    sj->attempts = st->attempt;
    sj->retries = st->retries;
    sj->preemptions = st->preemptions;
    if (st->last_preemption.present) {
        sj->preempted_by = st->last_preemption.by;
        sj->preempt_reason = st->last_preemption.reason;
        if (st->last_preemption.time[0] && !kube_time_parse(st->last_preemption.time, &w))
            sj->preempted_ms = (int64_t)(w * 1000.0);
    }
    if (st->state == API_STATE_SUCCEEDED || st->state == API_STATE_FAILED) {
        sj->state = st->state == API_STATE_SUCCEEDED ? STORE_SUCCEEDED : STORE_FAILED;
        sj->message = st->message;
        if (st->observed_generation > 0 && st->observed_generation != j->job->meta.generation)
            j->gen_changed = 1;
        return 0;
    }
    if (j->failed_invalid || j->job->spec.suspend)
        return 0; /* the spec rules decide; any pods are strays */
    if (st->state == API_STATE_PREEMPTED) {
        sj->state = STORE_PREEMPTED;
        sj->message = st->message;
    }
    int pod_attempt = rc_max_pod_attempt(j->memo);
    if (adopt_scan(j, st->attempt, &rec->pl)) {
        int rc = ctl_placement_format(&rec->pl, &rec->text);
        if (rc)
            return rc;
        rec->adopted = 1;
        sj->state = STORE_ADMITTED;
        sj->placement = rec->text.p;
        sj->attempts = rec->pl.attempt;
        sj->admitted_ms = r->now;
        if (st->admission.present && st->admission.time[0] && !kube_time_parse(st->admission.time, &w))
            sj->admitted_ms = (int64_t)(w * 1000.0);
        sj->message = "adopted from existing pods";
    } else if (pod_attempt > sj->attempts) {
        sj->attempts = pod_attempt; /* the next admission gets a new pod name */
    }
    return 0;
}

/* A store that is older than the API server (restored, or another replica's)
 * may hold a job as waiting or running that its status records as finished
 * for this very generation: the status wins (terminal states are final within a
 * generation), so it never runs again. */
static int status_finished_override(struct rc_ctx *r, struct cj *j)
{
    const char *ss = ctl_obj_str(j->obj, "status", "state");
    int s = j->state;
    if (!ss || (strcmp(ss, "Succeeded") && strcmp(ss, "Failed")) || s == STORE_SUCCEEDED ||
        s == STORE_FAILED || j->gen_changed || j->failed_invalid)
        return 0;
    struct api_gpujob_status st;
    struct api_errors e;
    api_errors_init(&e);
    ctl_job_status_decode(j->obj, &st, &e);
    if (st.observed_generation <= 0 || st.observed_generation != j->job->meta.generation)
        return 0;
    int to = st.state == API_STATE_SUCCEEDED ? STORE_SUCCEEDED : STORE_FAILED;
    int rc;
    struct act a;
    rc_act_begin(r, j, &a);
    if ((rc = apply_ledger_clear(&a.x, &a.j)) || (rc = rc_transition(r, j, to, "", st.message, NULL, NULL, 0)) ||
        (rc = rc_audit(r, "recover", j, j->key, store_state_name(s), store_state_name(to),
                       "the GPUJob status records it finished for this generation; the store did not")))
        return rc;
    LOGC(r->c, GQ_LOG_WARN, "store behind the API server: job finished per its status", " job=%s store=%s status=%s",
         j->key, store_state_name(s), store_state_name(to));
    return 0;
}

/* A store older than the API server may hold as waiting a job whose status
 * records a later admission (same generation, higher attempt) whose pods run:
 * adopt them, as for a lost row, instead of deleting them and admitting the
 * gang again. With a current store the status never records an attempt the
 * row does not know, so this never fires. */
static int status_running_adopt(struct rc_ctx *r, struct cj *j)
{
    const char *ss = ctl_obj_str(j->obj, "status", "state");
    if (!ss || (strcmp(ss, "Admitted") && strcmp(ss, "Running")) ||
        (j->state != STORE_QUEUED && j->state != STORE_PREEMPTED) || j->failed_invalid ||
        j->job->spec.suspend || j->gen_changed || rc_intent_first(r, j->key) < r->nintents)
        return 0;
    struct api_gpujob_status st;
    struct api_errors e;
    api_errors_init(&e);
    ctl_job_status_decode(j->obj, &st, &e);
    if (st.observed_generation <= 0 || st.observed_generation != j->job->meta.generation ||
        st.attempt <= j->row->attempts)
        return 0;
    struct ctl_placement pl;
    struct gq_buf b;
    int rc = 0, s = j->state;
    ctl_placement_init(&pl);
    gq_buf_init(&b, 1u << 20);
    if (!adopt_scan(j, st.attempt, &pl))
        goto out;
    if ((rc = ctl_placement_format(&pl, &b)) ||
        (rc = rc_transition(r, j, STORE_ADMITTED, b.p, "adopted from existing pods", NULL, NULL, 0)) ||
        (rc = rc_refresh(r, j, store_job_raise_attempts(r->c->st, j->key, pl.attempt, r->err, sizeof(r->err)))) ||
        (rc = rc_ledger_set(r, j)) ||
        (rc = rc_audit(r, "adopt", j, j->key, store_state_name(s), b.p,
                       "the GPUJob status records an admission the store did not")))
        goto out;
    j->row->attempts = GQ_MAX(j->row->attempts, pl.attempt);
    LOGC(r->c, GQ_LOG_WARN, "store behind the API server: adopted running pods", " job=%s store=%s attempt=%d",
         j->key, store_state_name(s), pl.attempt);
out:
    ctl_placement_release(&pl);
    gq_buf_release(&b);
    return rc;
}

/* The cache key of a GPUJob object's decode: what api_gpujob_decode reads
 * that can change under one uid. With the status subresource, the spec
 * changes only with metadata.generation, so a status write (new
 * resourceVersion) does not invalidate it; without a generation the
 * resourceVersion is the key. Name, namespace and creationTimestamp are
 * fixed for a uid; deletionTimestamp only appears. */
static void job_cache_key(const cJSON *obj, char *out, size_t len)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(md, "generation");
    const char *del = ctl_obj_str(md, "deletionTimestamp", NULL);
    if (cJSON_IsNumber(g) && g->valuedouble >= 1 && g->valuedouble < 9e15)
        snprintf(out, len, "g%lld%s", (long long)g->valuedouble, del ? "d" : "");
    else
        snprintf(out, len, "r%s%s", ctl_obj_str(md, "resourceVersion", NULL) ? ctl_obj_str(md, "resourceVersion", NULL) : "",
                 del ? "d" : "");
}

/* The job's decoded, defaulted and validated form, from the memo's cache
 * when the object (uid, job_cache_key) and the defaulting inputs (Teams,
 * PriorityClasses: r->lookup_sig) are those it was computed from. */
static int job_decode_cached(struct rc_ctx *r, struct cj *j, struct ctl_memo *m)
{
    const char *uid = ctl_obj_str(j->obj, "metadata", "uid");
    char ck[API_UID_MAX + 8];
    job_cache_key(j->obj, ck, sizeof(ck));
    if (m->decode.job_valid && uid && m->decode.job_lookup == r->lookup_sig && !strcmp(m->decode.job_uid, uid) &&
        !strcmp(m->decode.job_rv, ck)) {
        /* same spec: keep metadata.resourceVersion current (store upserts) */
        const char *rv = ctl_obj_str(j->obj, "metadata", "resourceVersion");
        gq_strlcpy(m->decode.job->meta.resource_version, rv ? rv : "", sizeof(m->decode.job->meta.resource_version));
        return 0;
    }
    struct api_gpujob nj;
    struct api_errors e;
    api_gpujob_init(&nj);
    api_errors_init(&e);
    int enomem = 0;
    cJSON *whole = ctl_job_expand(j->obj, &enomem); /* the cached spec is one string */
    if (enomem || api_gpujob_decode(whole ? whole : j->obj, &nj, &e) == GQ_ENOMEM) {
        cJSON_Delete(whole);
        api_gpujob_release(&nj);
        return GQ_ENOMEM;
    }
    cJSON_Delete(whole);
    struct api_lookup lk = {r->teams, (size_t)r->nteams, r->pcs, (size_t)r->npcs};
    if (api_gpujob_default(&nj, &lk)) {
        api_gpujob_release(&nj);
        return GQ_ENOMEM;
    }
    if (!e.n)
        api_gpujob_validate(&nj, &r->c->cfg.levels, &e);
    if (!m->decode.job && !(m->decode.job = malloc(sizeof(*m->decode.job)))) {
        api_gpujob_release(&nj);
        return GQ_ENOMEM;
    }
    if (m->decode.job_valid)
        api_gpujob_release(m->decode.job);
    *m->decode.job = nj; /* a move: nj's template and out-of-line parts now belong to the memo */
    m->decode.job_valid = 1;
    m->decode.job_lookup = r->lookup_sig;
    /* an object without uid is decoded again every time */
    gq_strlcpy(m->decode.job_uid, uid ? uid : "", sizeof(m->decode.job_uid));
    gq_strlcpy(m->decode.job_rv, uid ? ck : "", sizeof(m->decode.job_rv));
    m->decode.job_nerr = e.n;
    free(m->decode.job_err);
    m->decode.job_err = NULL;
    if (e.n) {
        char je[API_ERR_PATH_MAX + API_ERR_MSG_MAX + 4];
        api_error_format(&e, 0, je, sizeof(je));
        (void)ctl_str_set(&m->decode.job_err, je, sizeof(je)); /* no memory: the message says less */
    }
    m->decode.job_refusal = NULL;
    if (!e.n)
        m->decode.job_refusal = api_gpujob_tenancy(m->decode.job, &lk, &e);
    if (!m->decode.job_refusal) {
        /* the template copy is read by validation and the Team rules only
         * (pods are built from the object): kept for job_refused's message,
         * else dropped (a changed object or lookup decodes again) */
        cJSON_Delete(m->decode.job->template);
        m->decode.job->template = NULL;
    }
    return 0;
}

static int team_exists(struct rc_ctx *r, const char *name);

/* j->invalid_msg becomes the formatted text (at most API_MSG_MAX - 1
 * bytes; out of memory leaves none). Returns 1 when the text was cut. */
static int cj_invalid_msg(struct cj *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cj_invalid_msg(struct cj *j, const char *fmt, ...)
{
    char buf[API_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    (void)ctl_str_set(&j->invalid_msg, buf, sizeof(buf));
    return n >= (int)sizeof(buf);
}

/* The Team rules refuse the job (m->decode.job_refusal): reason and message into j.
 * They gate admission: a job holding GPUs under an existing team is not
 * stopped by them (a Team edit or a spec edit while it runs; defaulting caps
 * its priority at the Team's ceiling, and it stays charged to the Team it was
 * admitted under), but its status says so (Valid=False with the reason, the
 * message naming the field), as a waiting job's does: an edit is never
 * refused in silence. Such a job holds what it holds and grows no further. */
static int job_refused(struct rc_ctx *r, struct cj *j)
{
    const char *why = j->memo->decode.job_refusal;
    const struct store_job *row = rc_row_find(r, j->key);
    if (!why)
        return 0;
    int holds = row && rc_holds(row->state) && !strcmp(row->uid, j->job->meta.uid) &&
                team_exists(r, j->job->spec.team);
    struct api_lookup lk = {r->teams, (size_t)r->nteams, r->pcs, (size_t)r->npcs};
    struct api_errors e;
    char first[API_ERR_PATH_MAX + API_ERR_MSG_MAX + 4];
    api_errors_init(&e);
    api_gpujob_tenancy(j->job, &lk, &e);
    api_error_format(&e, 0, first, sizeof(first));
    j->invalid_reason = why;
    cj_invalid_msg(j, "%s%s%s", holds ? "edit refused, the job runs as admitted: " : "", first,
                   e.n > 1 ? " (and more)" : "");
    return 1;
}

/* j->pl from the row's placement text, parsed once per distinct text (the
 * memo keeps the last one, which j->pl borrows: no copy per job and
 * reconcile; a rule that changes j->pl copies it first, ctl_placement_add
 * and _remove; the memo's is replaced only here, once per reconcile and
 * job, and freed after the reconcile's last read of j->pl). */
static int placement_load(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    const char *t = j->row->placement ? j->row->placement : "";
    int same_row = m->pl.pl_text && m->pl.pl_row == j->row && m->pl.pl_row_gen == r->c->rows_gen;
    if (!same_row && (!m->pl.pl_text || strcmp(m->pl.pl_text, t))) {
        struct ctl_placement p;
        ctl_placement_init(&p);
        int rc = ctl_placement_parse(t, &p, r->err, sizeof(r->err));
        char *dup = rc ? NULL : strdup(t);
        if (rc || !dup) {
            ctl_placement_release(&p);
            return rc ? rc : GQ_ENOMEM;
        }
        free(m->pl.pl_text);
        ctl_placement_release(&m->pl.pl_cache);
        m->pl.pl_text = dup;
        m->pl.pl_cache = p;
    }
    m->pl.pl_row = j->row;
    m->pl.pl_row_gen = r->c->rows_gen;
    ctl_placement_borrow(&j->pl, &m->pl.pl_cache);
    return 0;
}

/* Decode (cached), default, validate; upsert the store row. */
static int job_prepare_full(struct rc_ctx *r, struct cj *j);

/* job_prepare_full, then the row it leaves kept on the memo (it may have
 * replaced the row the memo kept, which is then freed). */
static int job_look_again(struct rc_ctx *r, struct cj *j)
{
    int rc = job_prepare_full(r, j);
    if (!rc)
        rc_row_keep(r, j);
    return rc;
}

/* What the job's last full examination found (rc_job_prepare) into j. */
static void prep_found(struct cj *j, const struct ctl_memo *m)
{
    j->failed_invalid = m->decode.prep_failed_invalid;
    j->invalid_reason = m->decode.prep_invalid_reason;
    if (j->invalid_reason)
        (void)ctl_str_set(&j->invalid_msg, m->decode.prep_invalid_msg, API_MSG_MAX);
}

int rc_finished(int state)
{
    return state == STORE_SUCCEEDED || state == STORE_FAILED;
}

/* The job's status reports an invalid spec (ctl_status_lane_state): it waits
 * on one, or failed for one; not a job that holds GPUs or finished whatever
 * its Team or spec became since. */
int rc_reports_invalid(const struct cj *j)
{
    return j->invalid_reason && (j->failed_invalid || (!rc_holds(j->state) && !rc_finished(j->state)));
}

/* spec.maxRunSeconds in force for the admission a holding job runs (0:
 * none): the spec's at the first look at that admission; an edit may lower
 * it at once, not raise it before the next admission (a job that backfilled
 * a reserved node cannot stay there longer by a patch; Slurm's users, too,
 * may only lower a running job's time limit). */
int32_t rc_run_limit(struct cj *j)
{
    if (!j->decoded || !rc_holds(j->state) || !j->row || j->row->admitted_ms <= 0 || !j->memo)
        return 0;
    struct ctl_memo_run *m = &j->memo->run;
    int32_t spec = j->job->spec.max_run_s > 0 ? j->job->spec.max_run_s : 0;
    if (m->adm_ms != j->row->admitted_ms) {
        m->adm_ms = j->row->admitted_ms;
        m->limit_s = spec;
    } else if (spec > 0 && (m->limit_s == 0 || spec < m->limit_s)) {
        m->limit_s = spec;
    }
    return m->limit_s;
}

/* 1 when a holding job is past its maxRunSeconds (the lifecycle stops it);
 * before, its end is a due time, so a reconcile comes then however quiet
 * the cluster (a job not examined in full registers it this way too). */
static int max_run_due(struct rc_ctx *r, struct cj *j)
{
    int32_t lim = rc_run_limit(j);
    if (lim <= 0)
        return 0;
    int64_t end = j->row->admitted_ms + (int64_t)lim * 1000;
    if (r->now >= end)
        return 1;
    rc_due(r, end, "max-run");
    return 0;
}

/* A job not dirty: what its last full examination found, and its current
 * store row and placement (the scheduling core sees every job). */
static int job_prepare_clean(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    j->job = m->decode.job;
    j->decoded = 1;
    prep_found(j, m);
    /* A row kept since the job's last examination has its uid: a row is
     * kept (rc_row_keep) only once compared with the decode in force, the
     * decode changes only in a full examination, and rows are replaced,
     * never changed in place. One found among the rows is compared. */
    struct store_job *kept = rc_row_kept(r, m);
    j->row = kept ? kept : rc_row_find(r, j->key);
    if (!j->row || (j->row != kept && strcmp(j->row->uid, j->job->meta.uid)) ||
        j->row->generation != j->job->meta.generation)
        return job_look_again(r, j); /* the store moved on */
    rc_row_keep(r, j);
    j->old_gpus = j->row->gpus;
    j->state = j->row->state;
    if (max_run_due(r, j)) {
        /* past its maxRunSeconds: examined in full (the lifecycle stops it) */
        ctl_memo_dirty(m, r->c->reconciles);
        return job_look_again(r, j);
    }
    if (placement_load(r, j)) {
        ctl_placement_release(&j->pl);
        ctl_placement_init(&j->pl);
    }
    for (int p = rc_intent_first(r, j->key); p < r->nintents && !strcmp(r->iidx[p].key, j->key); p++)
        if (r->intents[r->iidx[p].i].kind == STORE_INTENT_ADMIT)
            j->admit_pending = 1;
    return 0;
}

/* The last pod created for m's job is in the cache (or gone): the cache
 * follows it from now on. */
void rc_created_seen(struct ctl_memo *m)
{
    if (m->pods.created_attempt &&
        (rc_max_pod_attempt(m) >= m->pods.created_attempt ||
         (m->pods.created_pod && !strcmp(ctl_str(m->pods.gone_pod), m->pods.created_pod)))) {
        m->pods.created_attempt = 0;
        (void)ctl_str_set(&m->pods.created_pod, NULL, 0);
    }
}

static int has_intent(struct rc_ctx *r, const char *key)
{
    return rc_intent_first(r, key) < r->nintents;
}

/* A finished job stays out of reconciles once nothing of it can change
 * without an event (called last in the report phase: nothing after it in
 * the reconcile reads the job's decode): Succeeded or Failed in the store, that status accepted
 * by the API server and not due again, every pod of it terminated and
 * nothing of it pending or in flight, and untouched by this reconcile. Its
 * decode, placement and last status text are freed (a woken job decodes
 * again; its first status is compared with what the object shows, so an
 * unchanged one is not written again). */
void rc_job_sleep(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    if (j->dormant || !m || !j->row || !rc_finished(j->state) || (j->invalid_reason && !j->failed_invalid) ||
        !m->decode.prepared || m->dirty_upto > r->c->reconciles || j->admit_pending || has_intent(r, j->key) ||
        j->ttl_delete || m->ttl.inflight)
        return;
    /* the API server holds the state: what it last accepted from us (if we
     * wrote since start) and what the cached object shows (else the watch
     * event of our write would wake the job) */
    const char *acc = j->state == STORE_SUCCEEDED ? "Succeeded" : "Failed";
    char ls[sizeof(m->status.status_state)]; /* what it was written as: "Failed/Invalid" for its spec */
    ctl_status_lane_state(acc, rc_reports_invalid(j), ls, sizeof(ls));
    if (!m->status.last_status || !m->status.status_sig || m->status.status_inflight ||
        m->status.settle_due_ms || (m->status.status_state[0] && strcmp(m->status.status_state, ls)))
        return;
    rc_created_seen(m);
    if (m->pods.rel_any || m->pods.stray_any || m->pods.confirm_inflight || m->pods.cleanup_inflight ||
        m->pods.created_attempt || m->wait.wait_msg)
        return;
    for (int k = 0; k < m->pods.npods; k++)
        if (!m->pods.pf[k].terminal)
            return;
    /* last, as the dearest: the cached object's state (member lookups) */
    const char *cached = ctl_obj_str(j->obj, "status", "state");
    if (!cached || strcmp(cached, acc))
        return;
    ctl_memo_sleep(m);
    j->job = &api_gpujob_zero; /* what it pointed to is gone */
    j->decoded = 0;
    j->dormant = 1;
}

/* spec.ttlSecondsAfterFinished of a finished job: due once its final status
 * is what the API server shows (the cached object's status.state, with the
 * completionTime the deletion counts from, and no status write of it in
 * flight or held), so whoever watches it sees how it ended before it goes.
 * Then, at completionTime + TTL, the job is marked for deletion (j->ttl_delete:
 * the act phase sends it, after the commit) with an audit entry; before, the
 * time is due (rc_due) and kept on the memo for a dormant job to wake at. A
 * delete in flight, or one that failed until its retry time, waits. */
int rc_job_ttl(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    /* the job's own fields first: most jobs are not finished, and their memo
     * is not read (a dormant job keeps m->ttl.at_ms: job_dormant_view) */
    if (j->dormant || !rc_finished(j->state) || !m)
        return 0;
    if (m->ttl.at_ms)
        m->ttl.at_ms = 0;
    if (!j->decoded || !j->job->spec.ttl_set || !j->job->meta.uid[0] || j->job->meta.deleting)
        return 0; /* deleting: deleted already (a finalizer holds it) */
    const char *acc = j->state == STORE_SUCCEEDED ? "Succeeded" : "Failed";
    const char *shown = ctl_obj_str(j->obj, "status", "state");
    const char *done = ctl_obj_str(j->obj, "status", "completionTime");
    double t;
    if (!shown || strcmp(shown, acc) || !done || gq_parse_rfc3339(done, 0, &t) || m->status.status_inflight ||
        m->status.settle_due_ms) {
        /* its final status is on its way: its echo asks for a reconcile
         * (ctl_main.c ttl_finish_shown), which may come before the write's
         * own answer; while a write is in flight or held, look again */
        if (m->status.status_inflight || m->status.settle_due_ms)
            rc_due(r, r->now + 1000, "finished-ttl-status");
        return 0;
    }
    int64_t at = (int64_t)(t * 1000.0) + (int64_t)j->job->spec.ttl_after_finished * 1000;
    m->ttl.at_ms = at;
    if (m->ttl.inflight)
        return 0; /* hook_job_deleted marks the job */
    if (r->now < at) {
        rc_due(r, at, "finished-ttl");
        return 0;
    }
    if (m->ttl.retry_ms > r->now) {
        rc_due(r, m->ttl.retry_ms, "finished-ttl-retry");
        return 0;
    }
    char ttl[32];
    snprintf(ttl, sizeof(ttl), "%ds", (int)j->job->spec.ttl_after_finished);
    int rc = rc_audit(r, "ttl-delete", j, j->key, acc, "deleted", ttl);
    if (!rc) {
        j->ttl_delete = 1;
        r->nttl_delete++;
    }
    return rc;
}

/* A dormant job in this reconcile: its store row and state only (no decode;
 * j->job stays the empty placeholder, j->decoded 0). Returns 0 when it must
 * wake instead: dirty (an event of it or its pods), a settle timer due, or
 * its row no longer the finished one it slept with. The row it slept with
 * is used as it is while the rows were not freed since (only examining the
 * job, which wakes it first, replaces its row): a dormant job costs no
 * lookup among the rows. */
static int job_dormant_view(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    /* its ttlSecondsAfterFinished wakes it when a delete may be sent: the
     * time has come, and no failed delete's wait runs (rc_job_ttl) */
    int64_t ttl_wake = m->ttl.at_ms ? GQ_MAX(m->ttl.at_ms, m->ttl.retry_ms) : 0;
    if (m->dirty_upto >= r->c->reconciles || m->status.settle_due_ms || has_intent(r, j->key) ||
        (ttl_wake && ttl_wake <= r->now))
        return 0; /* woken */
    struct store_job *row = rc_row_kept(r, m); /* the one it slept with */
    if (!row) {
        row = rc_row_find(r, j->key);
        if (!row || !rc_finished(row->state) || strcmp(row->uid, m->decode.job_uid))
            return 0;
    }
    j->row = row;
    rc_row_keep(r, j);
    j->state = row->state;
    j->dormant = 1;
    prep_found(j, m);
    if (ttl_wake)
        rc_due(r, ttl_wake, "finished-ttl");
    return 1;
}

/* Decode (cached), default, validate; upsert the store row. A job not dirty
 * in a reconcile that is not a full pass reuses its last examination; a
 * dormant one is only looked up (job_dormant_view). */
int rc_job_prepare(struct rc_ctx *r, struct cj *j)
{
    j->memo = j->ent && j->ent->memo ? j->ent->memo : ctl_memo_get(&r->c->memo, j->key, 1);
    if (!j->memo)
        return GQ_ENOMEM;
    if (j->ent)
        j->ent->memo = j->memo;
    ctl_memo_seen(&r->c->memo, j->memo, r->c->reconciles);
    if (j->memo->decode.dormant) {
        if (job_dormant_view(r, j))
            return 0;
        j->memo->decode.dormant = 0; /* woken: examined in full by this reconcile */
        r->c->m.jobs_woken++;
        ctl_memo_dirty(j->memo, r->c->reconciles);
    }
    if (!rc_job_dirty(r, j) && j->memo->decode.job_valid && j->memo->decode.job_lookup == r->lookup_sig) {
        r->c->m.jobs_reused++;
        return job_prepare_clean(r, j);
    }
    r->c->m.jobs_full++;
    j->looked = 1;
    int rc = job_look_again(r, j);
    if (!rc) {
        struct ctl_memo *m = j->memo;
        m->decode.prepared = 1;
        m->decode.prep_failed_invalid = j->failed_invalid;
        m->decode.prep_invalid_reason = j->invalid_reason;
        (void)ctl_str_set(&m->decode.prep_invalid_msg, j->invalid_reason ? ctl_str(j->invalid_msg) : "", API_MSG_MAX);
    }
    return rc;
}

static int job_prepare_full(struct rc_ctx *r, struct cj *j)
{
    int rc;
    j->memo->decode.prepared = 0;
    if ((rc = job_decode_cached(r, j, j->memo)))
        return rc;
    j->job = j->memo->decode.job;
    j->decoded = 1;
    if (j->memo->decode.job_nerr) {
        j->failed_invalid = 1;
        j->invalid_reason = "InvalidSpec";
        cj_invalid_msg(j, "invalid spec: %s%s", ctl_str(j->memo->decode.job_err),
                       j->memo->decode.job_nerr > 1 ? " (and more)" : "");
    } else if (job_refused(r, j)) {
        /* invalid_reason and invalid_msg set */
    } else if (j->job->spec.pool[0] && !pool_exists(r, j->job->spec.pool)) {
        j->invalid_reason = "UnknownPool";
        cj_invalid_msg(j, "GPUPool %s does not exist", j->job->spec.pool);
    }
    /* required node affinity is decoded by api and placed by the core like nodeSelector */

    const struct rteam *bad_team;
    if (j->invalid_reason && (!strcmp(j->invalid_reason, "NoTeam") || !strcmp(j->invalid_reason, "UnknownTeam")) &&
        (bad_team = rc_team_invalid_for(r, j->job))) {
        j->invalid_reason = "InvalidTeam";
        if (cj_invalid_msg(j, "Team %s is invalid and no earlier valid spec of it is known: %s",
                           bad_team->latest.meta.name, bad_team->bad))
            LOGC(r->c, GQ_LOG_DEBUG, "job message truncated", " job=%s", j->key);
    }

    j->row = rc_row_find(r, j->key);
    int fresh = !j->row;
    int changed_uid = j->row && strcmp(j->row->uid, j->job->meta.uid);
    j->gen_changed = !fresh && !changed_uid && j->row->generation != j->job->meta.generation;
    j->old_gpus = fresh || changed_uid ? -1 : j->row->gpus;
    int changed = fresh || changed_uid || j->row->generation != j->job->meta.generation ||
                  strcmp(j->row->team, j->job->spec.team) ||
                  j->row->priority != j->job->spec.effective_priority;
    if (changed) {
        struct store_job sj = {0};
        sj.key = j->key;
        sj.uid = j->job->meta.uid;
        sj.team = j->job->spec.team;
        sj.cls = api_class_name(j->job->spec.class);
        sj.priority = j->job->spec.effective_priority;
        sj.gpus = api_gpujob_gpus(j->job);
        sj.enqueue_ms = rc_creation_ms(j, r->now);
        sj.state = j->job->spec.suspend ? STORE_SUSPENDED : STORE_QUEUED;
        sj.placement = "";
        sj.message = "";
        sj.generation = j->job->meta.generation;
        sj.resource_version = j->job->meta.resource_version;
        struct recovery *rec = NULL;
        rc = 0;
        if (fresh || changed_uid) {
            if (!(rec = calloc(1, sizeof(*rec))))
                return GQ_ENOMEM;
            ctl_placement_init(&rec->pl);
            gq_buf_init(&rec->text, 1u << 20);
            rc = row_recover(r, j, &sj, rec);
        }
        if (!rc)
            rc = store_job_upsert(r->c->st, &sj, r->now, r->err, sizeof(r->err));
        if (!rc && rec && rec->adopted) {
            ctl_placement_release(&j->pl);
            j->pl = rec->pl; /* rc_ledger_set reads it; placement_load below sets it again */
            ctl_placement_init(&rec->pl);
            if (!(rc = rc_ledger_set(r, j)) &&
                !(rc = rc_audit(r, "adopt", j, j->key, "", rec->text.p, "pods found without a store row")))
                LOGC(r->c, GQ_LOG_WARN, "adopted running pods of a job unknown to the store",
                     " job=%s attempt=%d replicas=%d", j->key, j->pl.attempt, j->pl.n);
        } else if (!rc && rec && sj.state != STORE_QUEUED && sj.state != STORE_SUSPENDED) {
            LOGC(r->c, GQ_LOG_WARN, "job unknown to the store: state recovered from its status",
                 " job=%s state=%s attempts=%lld", j->key, store_state_name(sj.state), (long long)sj.attempts);
            rc = rc_audit(r, "recover", j, j->key, "", store_state_name(sj.state), "GPUJob status");
        }
        if (rec) {
            ctl_placement_release(&rec->pl);
            gq_buf_release(&rec->text);
            free(rec);
        }
        if (rc)
            return rc;
        struct store_job *cp = NULL;
        if ((rc = rc_row_read(r, j->key, &cp)))
            return rc;
        int replaced = 0;
        if (j->row) {
            struct store_job **at = bsearch(&j->row, r->rows, (size_t)r->nrows, sizeof(*r->rows), rc_row_cmp);
            if (at && *at == j->row) {
                free(*at);
                *at = cp;
                replaced = 1;
            }
        }
        j->row = cp;
        if (!replaced && (rc = rc_row_insert(r, cp))) {
            free(cp);
            j->row = NULL;
            return rc;
        }
        if (fresh || changed_uid) {
            LOGC(r->c, GQ_LOG_INFO, "job queued", " job=%s team=%s gpus=%d", j->key,
                 j->job->spec.team, (int)sj.gpus);
            if ((rc = rc_audit(r, "enqueue", j, j->key, "", "", "")))
                return rc;
        }
    }
    j->state = j->row->state;
    if ((rc = placement_load(r, j))) {
        LOGC(r->c, GQ_LOG_WARN, "bad placement in store, ignored", " job=%s err=\"%s\"", j->key, r->err);
        ctl_placement_release(&j->pl);
        rc = 0;
    }
    if (!fresh && !changed_uid &&
        ((rc = status_finished_override(r, j)) || (rc = status_running_adopt(r, j))))
        return rc;
    for (int p = rc_intent_first(r, j->key); p < r->nintents && !strcmp(r->iidx[p].key, j->key); p++)
        if (r->intents[r->iidx[p].i].kind == STORE_INTENT_ADMIT)
            j->admit_pending = 1;
    return 0;
}

int rc_job_spec_rules(struct rc_ctx *r, struct cj *j)
{
    int rc = 0;
    int s = j->state;
    if (s == STORE_FAILED && !j->failed_invalid && j->gen_changed &&
        !strncmp(j->row->message, "invalid spec:", 13)) {
        /* the user fixed the spec: queue it (it keeps its enqueue time) */
        if ((rc = rc_transition(r, j, j->job->spec.suspend ? STORE_SUSPENDED : STORE_QUEUED, "", "", NULL,
                                NULL, 0)) ||
            (rc = rc_audit(r, "revalidate", j, j->key, "Failed", store_state_name(j->state), "spec fixed")))
            return rc;
        rc_event_add(r, j->obj, "Normal", "Revalidated", "spec is valid now: queued");
        LOGC(r->c, GQ_LOG_INFO, "job revalidated", " job=%s", j->key);
        return 0;
    }
    if (s == STORE_SUCCEEDED || s == STORE_FAILED)
        return 0;
    struct act a;
    rc_act_begin(r, j, &a);
    if (j->failed_invalid) {
        j->released |= rc_holds(s);
        if ((rc = rc_act_end(r, j, apply_fail(&a.x, &a.j, ctl_str(j->invalid_msg), "invalid"))))
            return rc;
        rc_event_add(r, j->obj, "Warning", "Failed", "%s", ctl_str(j->invalid_msg));
        LOGC(r->c, GQ_LOG_WARN, "job failed: invalid", " job=%s msg=\"%s\"", j->key, ctl_str(j->invalid_msg));
        return 0;
    }
    if (rc_holds(s) && j->gen_changed && !j->job->spec.suspend &&
        (j->old_gpus != api_gpujob_gpus(j->job) ||
         (j->job->spec.gang != API_FALSE && j->pl.n != j->job->spec.replicas))) {
        /* the admitted shape no longer matches the spec: place it again */
        char msg[API_MSG_MAX];
        snprintf(msg, sizeof(msg), "spec changed while admitted (%lld -> %d GPUs, %d replicas): requeued",
                 (long long)j->old_gpus, (int)api_gpujob_gpus(j->job), (int)j->job->spec.replicas);
        j->released = 1;
        if ((rc = rc_act_end(r, j, apply_requeue_spec(&a.x, &a.j, msg))))
            return rc;
        rc_event_add(r, j->obj, "Normal", "Requeued", "%s", msg);
        LOGC(r->c, GQ_LOG_INFO, "job requeued: spec changed", " job=%s", j->key);
        return 0;
    }
    if (j->job->spec.suspend && s != STORE_SUSPENDED) {
        j->released |= rc_holds(s);
        if ((rc = rc_act_end(r, j, apply_suspend(&a.x, &a.j))))
            return rc;
        rc_event_add(r, j->obj, "Normal", "Suspended", "job suspended (spec.suspend=true)%s",
                     rc_holds(s) ? "; its pods are being deleted" : "");
        LOGC(r->c, GQ_LOG_INFO, "job suspended", " job=%s was=%s", j->key, store_state_name(s));
    } else if (!j->job->spec.suspend && s == STORE_SUSPENDED) {
        if ((rc = rc_act_end(r, j, apply_resume(&a.x, &a.j))))
            return rc;
        rc_event_add(r, j->obj, "Normal", "Resumed", "job resumed: queued at its original place");
        LOGC(r->c, GQ_LOG_INFO, "job resumed", " job=%s", j->key);
    }
    return 0;
}

static int requeue(struct rc_ctx *r, struct cj *j, const char *why)
{
    int rc, over = 0;
    char msg[API_MSG_MAX];
    struct act a;
    rc_act_begin(r, j, &a);
    j->released = 1;
    if ((rc = rc_act_end(r, j, apply_requeue(&a.x, &a.j, j->row->retries, r->c->cfg.max_retries, why, msg,
                                          sizeof(msg), &over))))
        return rc;
    if (over) {
        rc_event_add(r, j->obj, "Warning", "Failed", "%s", msg);
        LOGC(r->c, GQ_LOG_WARN, "job failed", " job=%s msg=\"%s\"", j->key, msg);
    } else {
        rc_event_add(r, j->obj, "Warning", "Requeued", "%s", msg);
        LOGC(r->c, GQ_LOG_WARN, "job requeued", " job=%s msg=\"%s\"", j->key, msg);
    }
    return 0;
}

/* The API server refused one of the job's pods: fail the job with its answer. */
int rc_job_create_refused(struct rc_ctx *r, struct cj *j)
{
    int rc = 0;
    char msg[API_MSG_MAX];
    if (!j->memo || !j->memo->pods.create_err || !rc_holds(j->state))
        return 0;
    snprintf(msg, sizeof(msg), "pod create refused by the API server: %s", j->memo->pods.create_err);
    (void)ctl_str_set(&j->memo->pods.create_err, NULL, 0);
    for (int p = rc_intent_first(r, j->key); p < r->nintents && !strcmp(r->iidx[p].key, j->key); p++) {
        const struct store_intent *in = &r->intents[r->iidx[p].i];
        if (in->kind == STORE_INTENT_ADMIT && !ctl_act_inflight(&r->c->act, in->id) &&
            (rc = store_intent_done(r->c->st, in->id, r->now, r->err, sizeof(r->err))))
            return rc;
    }
    j->admit_pending = 0;
    struct act a;
    rc_act_begin(r, j, &a);
    j->released = 1;
    if ((rc = rc_act_end(r, j, apply_fail(&a.x, &a.j, msg, "create-refused"))))
        return rc;
    rc_event_add(r, j->obj, "Warning", "Failed", "%s", msg);
    LOGC(r->c, GQ_LOG_WARN, "job failed: pod refused", " job=%s msg=\"%s\"", j->key, msg);
    return 0;
}

/* A job whose pods of one attempt all Succeeded is Succeeded, whatever was
 * decided meanwhile: a preemption, suspend or requeue decided on a view of
 * its pods that was not current yet, or a newer attempt admitted since. The
 * attempt a holding job runs now is left to rc_job_lifecycle's own rule. */
static int job_succeeded_meanwhile(struct rc_ctx *r, struct cj *j)
{
    int s = j->state, np = 0, rc;
    if (j->failed_invalid || !j->row ||
        (s != STORE_QUEUED && s != STORE_PREEMPTED && s != STORE_SUSPENDED && !rc_holds(s)))
        return 0;
    const cJSON **pods = rc_memo_pods(j->memo, &np);
    int ngone = j->memo->pods.gone_ok ? cJSON_GetArraySize(j->memo->pods.gone_ok) : 0;
    int a = 0;
    if (ngone) {
        /* the cached pods and those deleted while Succeeded */
        const cJSON **all = calloc((size_t)(np + ngone), sizeof(*all));
        if (!all)
            return GQ_ENOMEM;
        int n = 0;
        for (int i = 0; i < np; i++)
            all[n++] = pods[i];
        const cJSON *g;
        cJSON_ArrayForEach(g, j->memo->pods.gone_ok)
        {
            if (n < np + ngone)
                all[n++] = g;
        }
        a = ctl_pods_succeeded_attempt(all, n, j->job->meta.uid, j->job->spec.replicas);
        free(all);
    } else if (np) {
        a = ctl_pods_succeeded_attempt(pods, np, j->job->meta.uid, j->job->spec.replicas);
    }
    if (!a || (rc_holds(s) && a == j->pl.attempt))
        return 0;
    char msg[API_MSG_MAX];
    snprintf(msg, sizeof(msg), "every replica succeeded (attempt %d)", a);
    struct act ac;
    rc_act_begin(r, j, &ac);
    j->released |= rc_holds(s);
    if ((rc = rc_act_end(r, j, apply_succeed(&ac.x, &ac.j, msg, 1))))
        return rc;
    rc_event_add(r, j->obj, "Normal", "Succeeded", "%s; it was %s when that was seen", msg, store_state_name(s));
    LOGC(r->c, GQ_LOG_INFO, "job succeeded (its pods finished before what was decided meanwhile)",
         " job=%s was=%s attempt=%d", j->key, store_state_name(s), a);
    return 0;
}

/* Lifecycle of an admitted job from its pods. */
/* spec.maxRunSeconds of a job examined in full: past it, its pods are
 * deleted and it is Failed (reason DeadlineExceeded), like a Job past its
 * activeDeadlineSeconds; a job sure to end by a reservation's start may
 * backfill the reserved nodes (the core trusts the limit: this rule keeps
 * it). Returns 1 when it failed the job, 0 when not, < 0 on error. */
static int job_max_run(struct rc_ctx *r, struct cj *j)
{
    if (!max_run_due(r, j))
        return 0;
    char msg[API_MSG_MAX], at[API_TIME_MAX];
    ctl_time_format(j->row->admitted_ms, at, sizeof(at));
    int32_t lim = j->memo->run.limit_s; /* max_run_due took it */
    snprintf(msg, sizeof(msg), CTL_MAX_RUN_MSG " (%ds since its admission at %s): its pods are stopped",
             (int)lim, at);
    struct act a;
    rc_act_begin(r, j, &a);
    j->released = 1;
    int rc = rc_act_end(r, j, apply_fail(&a.x, &a.j, msg, "max-run"));
    if (rc)
        return rc;
    rc_event_add(r, j->obj, "Warning", "DeadlineExceeded", "%s", msg);
    r->c->m.jobs_deadline_exceeded++;
    LOGC(r->c, GQ_LOG_WARN, "job failed: past maxRunSeconds", " job=%s max_run_s=%d", j->key, (int)lim);
    return 1;
}

int rc_job_lifecycle(struct rc_ctx *r, struct cj *j)
{
    j->memo->pods.steady = 0;
    int rc0 = job_succeeded_meanwhile(r, j);
    if (rc0 || !rc_holds(j->state) || j->admit_pending || j->failed_invalid)
        return rc0;
    if ((rc0 = job_max_run(r, j)))
        return rc0 < 0 ? rc0 : 0;
    int unready = 0; /* a live pod on a node not Ready (lost once its grace ends) */
    int np = 0;
    const cJSON **pods = rc_memo_pods(j->memo, &np);
    int running = 0, succeeded = 0, missing = 0;
    int lost_rep[API_REPLICAS_MAX];
    int nlost = 0;
    char why[API_MSG_MAX] = "", confirm[API_NAME_MAX + 32] = "";
    for (int k = 0; k < j->pl.n; k++) {
        const struct ctl_prep *p = &j->pl.rep[k];
        char name[API_NAME_MAX + 32];
        ctl_pod_name(j->job->meta.name, &j->pl, p, name, sizeof(name));
        const cJSON *pod = NULL;
        const struct ctl_podfacts *f = NULL;
        for (int i = 0; i < np; i++) {
            const char *pn = j->memo->pods.pf[i].name;
            if (pn && !strcmp(pn, name)) {
                pod = pods[i];
                f = &j->memo->pods.pf[i];
                break;
            }
        }
        char w[API_MSG_MAX] = "";
        struct rnode *n;
        const char *ph = f ? f->phase : NULL;
        if (!pod) {
            /* gone only when the API server said so (delete event, GET 404);
             * absent from the cache for a while: ask it */
            missing++;
            if (!strcmp(ctl_str(j->memo->pods.gone_pod), name))
                snprintf(w, sizeof(w), "pod %s was deleted", name);
            else if (!confirm[0] && j->memo->pods.missing_since_ms &&
                     r->now - j->memo->pods.missing_since_ms > CTL_MISSING_GRACE_MS)
                gq_strlcpy(confirm, name, sizeof(confirm));
        } else if (ph && !strcmp(ph, "Failed")) {
            snprintf(w, sizeof(w), "pod %s failed", name);
        } else if (ph && !strcmp(ph, "Succeeded")) {
            succeeded++;
            continue;
        } else if (f->deletion) {
            snprintf(w, sizeof(w), "pod %s is being deleted", name);
        } else if (rc_node_lost_at(r, (n = rc_node_find(r, p->node)), p->node, w, sizeof(w))) {
            /* w set */
        } else {
            unready += !n->ni.ready;
            if (ph && !strcmp(ph, "Running"))
                running++;
        }
        if (w[0]) {
            lost_rep[nlost++] = p->replica;
            if (!why[0])
                gq_strlcpy(why, w, sizeof(why));
        }
    }
    if (missing && !j->memo->pods.missing_since_ms)
        j->memo->pods.missing_since_ms = r->now;
    if (!missing)
        j->memo->pods.missing_since_ms = 0;
    if (confirm[0] && !nlost)
        ctl_pod_confirm(r->c, j->key, j->job->meta.namespace, confirm);
    int rc = 0;
    if (nlost) {
        j->memo->pods.missing_since_ms = 0;
        if (j->job->spec.gang != API_FALSE)
            return requeue(r, j, why);
        /* non-gang: drop the lost replicas; the core re-places them */
        for (int i = 0; i < nlost; i++)
            if ((rc = ctl_placement_remove(&j->pl, lost_rep[i])))
                return rc;
        struct gq_buf b;
        gq_buf_init(&b, 1u << 20);
        if ((rc = ctl_placement_format(&j->pl, &b)))
            goto nb_out;
        if (j->pl.n == 0) {
            rc = requeue(r, j, why);
            goto nb_out;
        }
        struct act a;
        rc_act_begin(r, j, &a);
        if ((rc = rc_act_end(r, j, apply_replace_replica(&a.x, &a.j, &j->pl, rc_pl_product(r, &j->pl), why))))
            goto nb_out;
        rc_event_add(r, j->obj, "Warning", "ReplicaLost", "%s; it will be placed again", why);
        LOGC(r->c, GQ_LOG_WARN, "replica lost", " job=%s msg=\"%s\"", j->key, why);
    nb_out:
        gq_buf_release(&b);
        return rc;
    }
    int want = j->job->spec.replicas;
    if (succeeded == j->pl.n && j->pl.n == want && want > 0) {
        struct act a;
        rc_act_begin(r, j, &a);
        if ((rc = rc_act_end(r, j, apply_succeed(&a.x, &a.j, "every replica succeeded", 0))))
            return rc;
        rc_event_add(r, j->obj, "Normal", "Succeeded", "every replica succeeded");
        LOGC(r->c, GQ_LOG_INFO, "job succeeded", " job=%s", j->key);
        return 0;
    }
    if (j->state == STORE_ADMITTED && running + succeeded == j->pl.n && running > 0 &&
        (j->pl.n == want || j->job->spec.gang == API_FALSE)) {
        struct act a;
        rc_act_begin(r, j, &a);
        if ((rc = rc_act_end(r, j, apply_running(&a.x, &a.j))))
            return rc;
        LOGC(r->c, GQ_LOG_INFO, "job running", " job=%s", j->key);
        return 0; /* its row was written: examined again by the next reconcile */
    }
    j->memo->pods.steady = !missing && !unready;
    return 0;
}

