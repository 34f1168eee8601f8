/*
 * ctl_report.c — the reconcile's report phase (after the commit): each job's
 * status computed and patched when it differs from the last one written
 * (held back by --status-settle and --status-refresh-qps), Team and GPUPool
 * statuses (usage per quota entry, pending head), the published waits of
 * waiting jobs (ctl_wait_publish) and the /queue view (ctl_queue_render).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_rc.h"

/* A job's status signature: everything ctl_status_compute reads besides
 * prev and the clock, hashed (a string is its length, then its bytes). The
 * status of a job whose inputs equal those of its last written status (prev
 * = that status) is that status again. */
static uint64_t sig_int(uint64_t h, int64_t v)
{
    return gq_hash_bytes(h, &v, sizeof(v));
}

static uint64_t sig_str(uint64_t h, const char *s)
{
    if (!s)
        return sig_int(h, -1); /* NULL differs from "" */
    size_t n = strlen(s);
    return gq_hash_bytes(sig_int(h, (int64_t)n), s, n);
}

/* The signature of j's status inputs v (never 0); urgent: without the
 * position and the message text (what a refresh may change alone); urgent
 * 2: nor the capacity wait reason (the job's is one), which a refresh may
 * change too for a job beyond the head of its queue (rc_job_status). */
static uint64_t status_sig(const struct cj *j, const struct ctl_jobview *v, int urgent)
{
    uint64_t h = GQ_HASH_SEED;
    const int64_t n[] = {v->state, urgent ? 0 : v->position, v->preemptions, v->preempted_ms, v->admitted_ms,
                         j->job->spec.effective_priority, api_gpujob_gpus(j->job), v->attempts,
                         v->retries, v->enqueue_ms, v->arrival, j->job->meta.generation, j->pl.n,
                         v->run_limit_s};
    for (size_t i = 0; i < GQ_ARRAY_LEN(n); i++)
        h = sig_int(h, n[i]);
    const char *t[] = {j->job->spec.team, v->invalid_reason, urgent == 2 ? "capacity" : v->wait_reason, j->pl.domain,
                       urgent ? "" : v->message, v->preempted_by, v->preempt_reason, v->unschedulable};
    for (size_t i = 0; i < GQ_ARRAY_LEN(t); i++)
        h = sig_str(h, t[i]);
    for (int i = 0; i < j->pl.n; i++)
        h = sig_str(h, j->pl.rep[i].node);
    return h ? h : 1;
}

/* The story of a wait in a job's conditions: while it waits, Admitted=False
 * and Queued=True carry its wait reason (status.waitReason: Quota, Nodes,
 * ...; the state's name before the core explained it) and explanation, so
 * they follow each change of reason; once admitted (or finished, suspended)
 * Queued is False with the state's name. Transition times from prev when the
 * status stays. */
static void wait_conditions(struct api_gpujob_status *out, const struct api_gpujob_status *prev, int state,
                            int64_t now_ms)
{
    int waiting = state == STORE_QUEUED || state == STORE_PREEMPTED;
    const char *reason = waiting && out->wait_reason[0] ? out->wait_reason : store_state_name(state);
    char now[API_TIME_MAX];
    ctl_time_format(now_ms, now, sizeof(now));
    for (int i = 0; waiting && i < out->nconditions; i++)
        if (!strcmp(out->conditions[i].type, "Admitted")) {
            gq_strlcpy(out->conditions[i].reason, reason, sizeof(out->conditions[i].reason));
            if (out->message[0])
                gq_strlcpy(out->conditions[i].message, out->message, sizeof(out->conditions[i].message));
        }
    if (out->nconditions >= API_MAX_CONDITIONS)
        return;
    struct api_condition *c = &out->conditions[out->nconditions++];
    memset(c, 0, sizeof(*c));
    gq_strlcpy(c->type, "Queued", sizeof(c->type));
    gq_strlcpy(c->status, waiting ? "True" : "False", sizeof(c->status));
    gq_strlcpy(c->reason, reason, sizeof(c->reason));
    /* never empty: the 1.20 API server reads "" as null and refuses it */
    gq_strlcpy(c->message, waiting && out->message[0] ? out->message : reason, sizeof(c->message));
    gq_strlcpy(c->last_transition_time, now, sizeof(c->last_transition_time));
    for (int i = 0; prev && i < prev->nconditions; i++)
        if (!strcmp(prev->conditions[i].type, "Queued") && !strcmp(prev->conditions[i].status, c->status) &&
            prev->conditions[i].last_transition_time[0])
            gq_strlcpy(c->last_transition_time, prev->conditions[i].last_transition_time,
                       sizeof(c->last_transition_time));
}

void rc_job_status(struct rc_ctx *r, struct cj *j)
{
    if (!j->decoded || !j->row)
        return;
    const char *msg = j->row->message;
    int waiting = j->state == STORE_QUEUED || j->state == STORE_PREEMPTED;
    const struct ctl_waitpub *pub = &j->memo->wait.pub;
    if (waiting && pub->set && pub->msg)
        msg = pub->msg; /* what ctl_wait_publish let through (rc_waiting_publish) */
    else if (j->invalid_reason && !j->failed_invalid)
        msg = ctl_str(j->invalid_msg);
    else if ((waiting || rc_holds(j->state)) && j->memo->wait.wait_msg)
        msg = j->memo->wait.wait_msg;
    const char *reason = NULL;
    if (waiting)
        reason = ctl_wait_class_name(pub->set ? pub->cls : CTL_WAIT_NONE);
    struct ctl_jobview v = {j->state, msg, waiting ? pub->position : 0, j->row->preemptions,
                            j->row->preempted_by, j->row->preempt_reason, j->row->preempted_ms,
                            j->row->admitted_ms, &j->pl, j->invalid_reason, j->row->attempts,
                            j->row->retries, j->row->enqueue_ms, j->row->arrival, reason,
                            waiting && !j->invalid_reason ? ctl_str(j->memo->wait.unsched_msg) : NULL,
                            rc_run_limit(j) /* 0 unless it holds */};
    uint64_t sig = status_sig(j, &v, 0);
    if (j->memo->status.last_status && j->memo->status.status_sig == sig) {
        j->memo->status.settle_due_ms = 0; /* what is written is still right */
        return;
    }
    int64_t due = rc_status_held(r, j);
    if (due) {
        rc_settle_hold(r, j, due); /* written then, unless replaced or unchanged by then */
        return;
    }
    j->memo->status.settle_due_ms = 0;
    /* a rc_refresh (only the position or the message text changed since the
     * status last written): within --status-refresh-qps, else offered again
     * by the next reconcile. Beyond the head of its Team's queue (no position
     * shown), a change between capacity reasons is a refresh too: when a
     * Team's quota frees or fills, every job of its queue may change reason
     * at once, and that is narration the write budget pays for, not a
     * decision (the head's change is written at once, --wait-reason-settle
     * after it holds) */
    int tail = waiting && !ctl_position_shown(j->memo->wait.position, r->c->cfg.position_head) &&
               ctl_wait_class_capacity(pub->cls);
    uint64_t usig = status_sig(j, &v, tail ? 2 : 1);
    int refresh = j->memo->status.last_status && j->memo->status.urgent_sig == usig;
    /* a refresh narrates: it waits for a token of --status-refresh-qps and
     * for the write budget (ctl_act.h), whichever comes later */
    int64_t wait = refresh ? gq_rate_wait_ms(&r->c->refresh, r->now) : 0;
    if (refresh && !wait)
        wait = ctl_act_narrate_wait_ms(&r->c->act, r->now);
    if (wait) {
        r->c->m.refresh_held++;
        if (j->memo->status_upto <= r->c->reconciles)
            j->memo->status_upto = r->c->reconciles + 1; /* its status only, not a full look */
        /* and a reconcile when the next token is there (the settle timer);
         * credit comes with a decision, which makes a reconcile anyway */
        if (wait < INT64_MAX / 2)
            rc_due(r, r->now + wait, "status-refresh");
        return;
    }
    char path[CTL_PATH_MAX];
    if (kube_path(path, sizeof(path), "/apis/gangq.io/v1alpha1", j->job->meta.namespace, "gpujobs",
                  j->job->meta.name, NULL))
        return;
    /* a status that changes no state goes in the low lane; while that is
     * full it would be refused: not built now, offered again later as a
     * refused one is (building it is most of a waiting job's report cost) */
    if (ctl_status_would_refuse(r->c, j->key, path, store_state_name(j->state), rc_reports_invalid(j))) {
        r->c->m.status_deferred++;
        return;
    }
    struct api_gpujob_status prev, out;
    struct api_errors e;
    api_errors_init(&e);
    memset(&prev, 0, sizeof(prev));
    if (j->memo->status.last_status) {
        cJSON *o = cJSON_Parse(j->memo->status.last_status);
        if (o)
            api_gpujob_status_decode(o, &prev, &e);
        cJSON_Delete(o);
    } else {
        ctl_job_status_decode(j->obj, &prev, &e);
    }
    const char **nodes = calloc((size_t)j->pl.n + 1, sizeof(*nodes));
    if (!nodes)
        return;
    ctl_status_compute(j->job, &prev, &v, r->now, nodes, j->pl.n, &out);
    wait_conditions(&out, &prev, j->state, r->now);
    cJSON *patch = api_gpujob_status_encode(&out);
    free(nodes);
    if (!patch)
        return;
    if (!j->memo->status.last_status && !e.n && !e.dropped) {
        /* first status since start: the object may already show it (after a
         * restart); then it is what was last written */
        cJSON *cur = api_gpujob_status_encode(&prev);
        char *a = cur ? cJSON_PrintUnformatted(cur) : NULL, *b = a ? cJSON_PrintUnformatted(patch) : NULL;
        if (a && b && !strcmp(a, b))
            j->memo->status.last_status = gq_sstr_new(a, strlen(a)); /* NULL (no memory): written again */
        free(a);
        free(b);
        cJSON_Delete(cur);
    }
    const char *before = j->memo->status.last_status;
    if (refresh)
        (void)ctl_act_narrate_take(&r->c->act, r->now); /* ready: checked above */
    int taken = !ctl_status_write(r->c, j->key, path, patch, rc_reports_invalid(j));
    if (j->memo->status.last_status != before)
        j->memo->status.status_sent_ms = r->now; /* a patch went out (or waits in line) */
    cJSON_Delete(patch);
    /* taken: last_status holds the status of these inputs (written, in
     * flight or already equal; a failed patch clears last_status, so it is
     * computed again); not taken (a full low lane): computed and offered
     * again later */
    j->memo->status.status_sig = taken && j->memo->status.last_status ? sig : 0;
    j->memo->status.urgent_sig = taken && j->memo->status.last_status ? usig : 0;
    if (taken && refresh && j->memo->status.last_status != before) {
        (void)gq_rate_take(&r->c->refresh, r->now);
        r->c->m.refresh_sent++;
    }
}

/* The Team's Valid condition: False with the latest edit's problem and what
 * is in force instead (InvalidSpec); else False while an older Team owns a
 * namespace the spec in force lists (NamespaceConflict: older, its namespace
 * ns); else True. Never an empty message (the API server stores "" in a
 * map-list entry as null and refuses it). Its transition time comes from prev. */
static void team_valid_condition(const struct rteam *ti, const struct api_team *older, const char *ns,
                                 const struct api_team_status *prev, const char *now,
                                 struct api_condition *c)
{
    memset(c, 0, sizeof(*c));
    gq_strlcpy(c->type, "Valid", sizeof(c->type));
    gq_strlcpy(c->status, ti->bad[0] || older ? "False" : "True", sizeof(c->status));
    gq_strlcpy(c->reason, ti->bad[0] ? "InvalidSpec" : older ? "NamespaceConflict" : "Valid",
               sizeof(c->reason));
    if (!ti->bad[0] && older)
        snprintf(c->message, sizeof(c->message),
                 "namespace %s belongs to Team %.100s (the older one): this Team's claim on it is "
                 "ignored and work there stays with that Team",
                 ns, older->meta.name);
    else if (!ti->bad[0])
        gq_strlcpy(c->message, "spec is valid and every namespace it lists is this Team's",
                   sizeof(c->message));
    else if (ti->idx >= 0)
        snprintf(c->message, sizeof(c->message), "generation %lld is invalid, generation %lld stays in force: %.300s",
                 (long long)ti->gen, (long long)ti->gen_in_force, ti->bad);
    else
        snprintf(c->message, sizeof(c->message),
                 "generation %lld is invalid and no earlier valid spec is known (its jobs wait): %.300s",
                 (long long)ti->gen, ti->bad);
    for (int i = 0; prev && i < prev->nconditions; i++)
        if (!strcmp(prev->conditions[i].type, "Valid") && !strcmp(prev->conditions[i].status, c->status) &&
            prev->conditions[i].last_transition_time[0]) {
            gq_strlcpy(c->last_transition_time, prev->conditions[i].last_transition_time,
                       sizeof(c->last_transition_time));
            return;
        }
    gq_strlcpy(c->last_transition_time, now, sizeof(c->last_transition_time));
}

/* Team and pool statuses hold counters that move with every admission:
 * written at once when nothing was written yet or what is urgent changed (a
 * Team's Valid condition and generation in force), else with the positions
 * (r->pub_epoch), at most every --position-interval. The memo's status_sig
 * holds the hash of the urgent text last written. */
static void counted_status(struct rc_ctx *r, const char *key, const char *path, cJSON *patch,
                           const char *urgent)
{
    struct ctl_memo *m = ctl_memo_get(&r->c->memo, key, 1);
    if (!m || m->status.status_inflight) {
        rc_due(r, r->now + 1000, "status-inflight"); /* in flight: computed again by a reconcile a second later */
        return;
    }
    uint64_t sig = gq_hash_str(urgent);
    sig = sig ? sig : 1;
    if (!r->pub_epoch && m->status.last_status && m->status.status_sig == sig)
        return;
    if (ctl_status_write(r->c, key, path, patch, 0))
        return; /* not taken: offered again by the next computation */
    m->status.status_sig = sig;
}

/* ---- a Team's GPUs per quota entry, by the core's rules (sched_quota.c):
 * a replica on a node of product P is charged to the Team's first entry for
 * P, else to its first "*" entry, else to none (the core never places it
 * there); a share counts its milli-GPUs. A Team without quota is unlimited:
 * its rows are the products it uses, without a nominal. */
#define CTL_TEAM_TYPES (API_MAX_QUOTA + 8)

struct ttype {
    char type[API_LABEL_VAL_MAX];
    int has_nominal;
    int64_t nominal_milli;
    int64_t used_milli;
};

/* Milli-GPUs of one replica of j (0 for a CPU-only job). */
static int64_t job_rep_milli(const struct cj *j)
{
    const struct api_gpu *g = &j->job->spec.gpu;
    if (!g->present)
        return 0;
    return g->count ? (int64_t)g->count * 1000 : (int64_t)g->shares;
}

/* Group the jobs by the Team in force they name: tjobs holds job indices, the
 * jobs of r->tinfo[k] (when it has a spec in force) are tjobs[tstart[k] ..
 * tstart[k+1]). Both owned by the caller (free). GQ_ENOMEM. */
static int team_buckets(struct rc_ctx *r, int **tjobs, int **tstart)
{
    size_t nb = 1;
    while (nb < (size_t)r->ntinfo * 2 + 2)
        nb <<= 1;
    int *slot = malloc(nb * sizeof(*slot));
    int *tk = malloc(((size_t)r->njobs + 1) * sizeof(*tk));
    int *start = calloc((size_t)r->ntinfo + 2, sizeof(*start));
    int *out = malloc(((size_t)r->njobs + 1) * sizeof(*out));
    if (!slot || !tk || !start || !out) {
        free(slot);
        free(tk);
        free(start);
        free(out);
        return GQ_ENOMEM;
    }
    for (size_t b = 0; b < nb; b++)
        slot[b] = -1;
    for (int k = 0; k < r->ntinfo; k++) {
        const struct rteam *ti = &r->tinfo[k];
        if (ti->idx < 0)
            continue;
        size_t b = (size_t)gq_hash_str(r->teams[ti->idx].meta.name) & (nb - 1);
        while (slot[b] >= 0)
            b = (b + 1) & (nb - 1);
        slot[b] = k;
    }
    for (int i = 0; i < r->njobs; i++) {
        const char *team = r->jobs[i].job->spec.team;
        tk[i] = -1;
        for (size_t b = (size_t)gq_hash_str(team) & (nb - 1); slot[b] >= 0; b = (b + 1) & (nb - 1))
            if (!strcmp(r->teams[r->tinfo[slot[b]].idx].meta.name, team)) {
                tk[i] = slot[b];
                break;
            }
        if (tk[i] >= 0)
            start[tk[i] + 1]++;
    }
    for (int k = 0; k < r->ntinfo; k++)
        start[k + 1] += start[k];
    int *fill = calloc((size_t)r->ntinfo + 1, sizeof(*fill));
    if (!fill) {
        free(slot);
        free(tk);
        free(start);
        free(out);
        return GQ_ENOMEM;
    }
    for (int i = 0; i < r->njobs; i++)
        if (tk[i] >= 0)
            out[start[tk[i]] + fill[tk[i]]++] = i;
    free(fill);
    free(slot);
    free(tk);
    *tjobs = out;
    *tstart = start;
    return 0;
}

/* Fill tt (CTL_TEAM_TYPES rows) for Team tm; returns the row count. */
static int team_types(struct rc_ctx *r, const struct api_team *tm, const int *jobs, int njobs, struct ttype *tt)
{
    int n = 0;
    struct sched_quota q[API_MAX_QUOTA];
    int nq = rc_team_quota(tm, q);
    for (int e = 0; e < tm->nquota && n < CTL_TEAM_TYPES; e++, n++) {
        memset(&tt[n], 0, sizeof(tt[n]));
        gq_strlcpy(tt[n].type, tm->quota[e].gpu_type, sizeof(tt[n].type));
        tt[n].has_nominal = 1;
        tt[n].nominal_milli = (int64_t)tm->quota[e].gpus * 1000;
    }
    for (int jx = 0; jx < njobs; jx++) {
        const struct cj *j = &r->jobs[jobs[jx]];
        int64_t per = j->row && rc_holds(j->state) ? job_rep_milli(j) : 0;
        if (!per)
            continue;
        for (int k = 0; k < j->pl.n; k++) {
            const char *prod = rc_node_product(r, j->pl.rep[k].node);
            int e = -1;
            if (tm->nquota) {
                e = apply_quota_entry(q, nq, prod);
            } else {
                const char *t = prod[0] ? prod : "*";
                for (int x = 0; x < n && e < 0; x++)
                    if (!strcmp(tt[x].type, t))
                        e = x;
                if (e < 0 && n < CTL_TEAM_TYPES) {
                    e = n++;
                    memset(&tt[e], 0, sizeof(tt[e]));
                    gq_strlcpy(tt[e].type, t, sizeof(tt[e].type));
                }
            }
            if (e >= 0)
                tt[e].used_milli += per;
        }
    }
    return n;
}

static int64_t ttype_borrowed(const struct ttype *t)
{
    return t->has_nominal ? apply_borrowed(t->nominal_milli, 0, t->used_milli) : 0;
}

/* Set a gauge of an object-labelled family (declared in ctl_main.c). */
static void obj_gauge(struct rc_ctx *r, const char *family, const char *const *labels, double v)
{
    struct gq_metric *h = NULL;
    if (r->c->metrics && !gq_metrics_gauge(r->c->metrics, family, "", labels, &h, NULL, 0))
        gq_metrics_set(h, v);
}

/* The exact figures of a Team's status, over what api_team_status_encode
 * wrote: used and borrowed as GPU numbers (shares exact; borrowed the sum
 * over GPU types), gpuTypes [{gpuType, nominal, used, borrowed}],
 * borrowedByType ("A100:6,*:0.5", nonzero only; null when none) and each pendingHead entry's
 * globalPosition (gpos, parallel to it; 0 = none). The gauges follow. */
static void team_status_exact(struct rc_ctx *r, cJSON *patch, const char *name, const struct ttype *tt, int nt,
                              int64_t used_milli, int64_t pend_jobs, int64_t pend_milli, const int *gpos)
{
    cJSON *st = cJSON_GetObjectItemCaseSensitive(patch, "status");
    char by[1024] = "", num[64];
    size_t bl = 0;
    int64_t borrowed = 0;
    if (!st)
        return;
    cJSON *arr = cJSON_CreateArray();
    for (int t = 0; arr && t < nt; t++) {
        int64_t b = ttype_borrowed(&tt[t]);
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            break;
        }
        cJSON_AddStringToObject(o, "gpuType", tt[t].type);
        if (tt[t].has_nominal)
            cJSON_AddNumberToObject(o, "nominal", (double)tt[t].nominal_milli / 1000.0);
        cJSON_AddNumberToObject(o, "used", (double)tt[t].used_milli / 1000.0);
        cJSON_AddNumberToObject(o, "borrowed", (double)b / 1000.0);
        borrowed += b;
        if (b > 0) {
            snprintf(num, sizeof(num), "%.15g", (double)b / 1000.0);
            int w = snprintf(by + bl, sizeof(by) - bl, "%s%s:%s", bl ? "," : "", tt[t].type, num);
            if (w > 0 && (size_t)w < sizeof(by) - bl)
                bl += (size_t)w;
            else
                by[bl] = 0; /* a row that does not fit is left out */
        }
        if (name[0]) {
            const char *lb[] = {"team", name, "gpu_type", tt[t].type, NULL};
            if (tt[t].has_nominal)
                obj_gauge(r, CTL_M_TEAM_QUOTA, lb, (double)tt[t].nominal_milli / 1000.0);
            obj_gauge(r, CTL_M_TEAM_USED, lb, (double)tt[t].used_milli / 1000.0);
            obj_gauge(r, CTL_M_TEAM_BORROWED, lb, (double)b / 1000.0);
        }
    }
    if (arr) {
        cJSON_DeleteItemFromObjectCaseSensitive(st, "gpuTypes");
        cJSON_AddItemToObject(st, "gpuTypes", arr);
    }
    cJSON_ReplaceItemInObjectCaseSensitive(st, "used", cJSON_CreateNumber((double)used_milli / 1000.0));
    cJSON_ReplaceItemInObjectCaseSensitive(st, "borrowed", cJSON_CreateNumber((double)borrowed / 1000.0));
    /* none: null (the merge patch removes it; the 1.20 API server reads "" as null) */
    cJSON_AddItemToObject(st, "borrowedByType", by[0] ? cJSON_CreateString(by) : cJSON_CreateNull());
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(st, "pendingHead");
    cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, ph)
    {
        if (i < API_MAX_PENDING_HEAD && gpos[i] > 0)
            cJSON_AddNumberToObject(e, "globalPosition", gpos[i]);
        i++;
    }
    if (name[0]) {
        const char *lb[] = {"team", name, NULL};
        obj_gauge(r, CTL_M_TEAM_PENDING_JOBS, lb, (double)pend_jobs);
        obj_gauge(r, CTL_M_TEAM_PENDING_GPUS, lb, (double)pend_milli / 1000.0);
    }
}

/* The name of a Team of this reconcile: its spec in force, else its latest. */
static const char *rteam_name(const struct rc_ctx *r, const struct rteam *ti)
{
    return ti->idx >= 0 ? r->teams[ti->idx].meta.name : ti->latest.meta.name;
}

/* The memo of a Team or pool ("team:N", "pool:N", into key[keylen]),
 * created when asked, kept by this reconcile (seen). NULL: none, or no memory. */
static struct ctl_memo *obj_memo(struct rc_ctx *r, const char *kind, const char *name, int create, char *key,
                                 size_t keylen)
{
    snprintf(key, keylen, "%s:%s", kind, name);
    struct ctl_memo *m = ctl_memo_get(&r->c->memo, key, create);
    if (m)
        ctl_memo_seen(&r->c->memo, m, r->c->reconciles);
    return m;
}

void rc_team_pool_status(struct rc_ctx *r)
{
    char key[API_NAME_MAX + 8], path[CTL_PATH_MAX], now[API_TIME_MAX];
    ctl_time_format(r->now, now, sizeof(now));
    /* object-labelled gauges: recomputed whole (a deleted Team's series go) */
    static const char *const objg[] = {CTL_M_TEAM_QUOTA, CTL_M_TEAM_USED, CTL_M_TEAM_BORROWED,
                                       CTL_M_TEAM_PENDING_JOBS, CTL_M_TEAM_PENDING_GPUS, CTL_M_POOL_GPUS,
                                       CTL_M_POOL_ALLOCATED, CTL_M_POOL_PENDING_JOBS};
    for (size_t g = 0; g < sizeof(objg) / sizeof(objg[0]); g++)
        gq_metrics_clear(r->c->metrics, objg[g]);
    /* the jobs of each Team in force, in one pass (not a pass per Team) */
    int *tjobs = NULL, *tstart = NULL;
    if (team_buckets(r, &tjobs, &tstart)) {
        LOGC(r->c, GQ_LOG_WARN, "out of memory for Team status: not written this reconcile", NULL);
        return;
    }
    for (int k = 0; k < r->ntinfo; k++) {
        const struct rteam *ti = &r->tinfo[k];
        const struct api_team *tm = ti->idx >= 0 ? &r->teams[ti->idx] : NULL;
        const char *name = rteam_name(r, ti);
        struct api_team_status st;
        struct ttype tt[CTL_TEAM_TYPES];
        int gpos[API_MAX_PENDING_HEAD] = {0}, gph[API_MAX_PENDING_HEAD] = {0};
        int64_t used_milli = 0, pend_milli = 0;
        const int *mine = tjobs + tstart[k];
        int nmine = tm ? tstart[k + 1] - tstart[k] : 0;
        int nt = tm ? team_types(r, tm, mine, nmine, tt) : 0;
        memset(&st, 0, sizeof(st));
        for (int q = 0; tm && q < tm->nquota; q++)
            st.quota += tm->quota[q].gpus;
        for (int x = 0; x < nmine; x++) {
            const struct cj *j = &r->jobs[mine[x]];
            if (!j->row)
                continue;
            if (rc_holds(j->state)) {
                st.running++;
                st.used += rc_job_gpus_placed(r, j);
                used_milli += job_rep_milli(j) * j->pl.n;
            } else if (j->state == STORE_QUEUED || j->state == STORE_PREEMPTED) {
                st.pending++;
                pend_milli += job_rep_milli(j) * j->job->spec.replicas;
                /* the head of its queue as last published (rc_waiting_publish) */
                int pos = j->memo ? j->memo->wait.pub.position : 0;
                if (pos > 0 && pos <= API_MAX_PENDING_HEAD && !st.pending_head[pos - 1].position) {
                    struct api_team_pending *e = &st.pending_head[pos - 1];
                    gq_strlcpy(e->name, j->job->meta.name, sizeof(e->name));
                    gq_strlcpy(e->namespace, j->job->meta.namespace, sizeof(e->namespace));
                    e->position = pos;
                    e->gpus = api_gpujob_gpus(j->job);
                    gph[pos - 1] = j->memo->wait.gposition;
                }
            }
        }
        /* in position order, without gaps (a published head member may have
         * left the queue since) */
        for (int q = 0; q < API_MAX_PENDING_HEAD; q++)
            if (st.pending_head[q].position) {
                gpos[st.npending_head] = gph[q];
                st.pending_head[st.npending_head++] = st.pending_head[q];
            }
        st.borrowed = (int32_t)apply_borrowed(st.quota, 0, st.used);
        st.observed_generation = ti->idx >= 0 ? ti->gen_in_force : 0;
        if (!name[0])
            continue;
        struct ctl_memo *m = obj_memo(r, "team", name, 1, key, sizeof(key));
        struct api_team_status prev;
        struct api_errors e;
        api_errors_init(&e);
        cJSON *lo = m && m->status.last_status ? cJSON_Parse(m->status.last_status) : NULL;
        api_team_status_decode(lo ? lo : ti->obj, &prev, &e);
        cJSON_Delete(lo);
        int nsi = -1;
        const struct api_team *older = tm ? api_team_conflict(r->teams, (size_t)r->nteams, tm, &nsi) : NULL;
        st.nconditions = 1;
        team_valid_condition(ti, older, older ? tm->namespaces[nsi] : "", &prev, now, &st.conditions[0]);
        if (!ti->bad[0] && older && ti->obj) {
            /* a Warning Event when the conflict starts or changes */
            const struct api_condition *pc = NULL;
            for (int c = 0; c < prev.nconditions; c++)
                if (!strcmp(prev.conditions[c].type, "Valid"))
                    pc = &prev.conditions[c];
            if (!(pc && !strcmp(pc->status, "False") && !strcmp(pc->message, st.conditions[0].message))) {
                ctl_act_event(&r->c->act, ti->obj, "Warning", "NamespaceConflict", st.conditions[0].message);
                LOGC(r->c, GQ_LOG_WARN, "team claims a namespace an older team owns",
                     " team=%s namespace=%s owner=%s", name, tm->namespaces[nsi], older->meta.name);
            }
        }
        if (ti->bad[0] && m && m->invalid_reported_gen != ti->gen) {
            /* once per invalid generation (and once more after a restart) */
            m->invalid_reported_gen = ti->gen;
            ctl_act_event(&r->c->act, ti->obj, "Warning", "InvalidSpec", st.conditions[0].message);
            struct store_audit a = {0, r->now, "gangq", "team-invalid", name, "", "", "",
                                    st.conditions[0].message};
            if (store_audit_add(r->c->st, &a, r->err, sizeof(r->err)))
                LOGC(r->c, GQ_LOG_ERROR, "audit write failed", " err=\"%s\"", r->err);
            LOGC(r->c, GQ_LOG_WARN, "team spec invalid", " team=%s msg=\"%s\"", name, st.conditions[0].message);
        } else if (!ti->bad[0] && m) {
            m->invalid_reported_gen = 0;
        }
        cJSON *p = api_team_status_encode(&st);
        if (p)
            team_status_exact(r, p, name, tt, nt, used_milli, st.pending, pend_milli, gpos);
        char urgent[API_MSG_MAX + 256];
        snprintf(urgent, sizeof(urgent), "%lld|%s|%s|%s", (long long)st.observed_generation,
                 st.conditions[0].status, st.conditions[0].reason, st.conditions[0].message);
        if (p && !kube_path(path, sizeof(path), "/apis/gangq.io/v1alpha1", NULL, "teams", name, NULL))
            counted_status(r, key, path, p, urgent);
        cJSON_Delete(p);
    }
    free(tjobs);
    free(tstart);
    /* devices held and foreign GPUs per node (by r->nix index), in one pass */
    uint32_t *nused = r->npools ? calloc((size_t)r->nnix + 1, sizeof(*nused)) : NULL;
    int *nforeign = r->npools ? calloc((size_t)r->nnix + 1, sizeof(*nforeign)) : NULL;
    if (r->npools && (!nused || !nforeign)) {
        free(nused);
        free(nforeign);
        LOGC(r->c, GQ_LOG_WARN, "out of memory for GPUPool status: not written this reconcile", NULL);
        return;
    }
    for (int i = 0; r->npools && i < r->njobs; i++) {
        const struct cj *j = &r->jobs[i];
        const struct ctl_placement *jp = rc_holds(j->state) ? &j->pl : &j->term;
        for (int k = 0; k < jp->n; k++) {
            struct rnode *rn = rc_node_find(r, jp->rep[k].node);
            if (rn)
                nused[rn - r->nix] |= jp->rep[k].devs;
        }
    }
    for (int f = 0; r->npools && f < r->nforeign; f++) {
        const char *nn = ctl_obj_str(r->foreign[f], "spec", "nodeName");
        struct rnode *rn = nn ? rc_node_find(r, nn) : NULL;
        if (rn) {
            struct ctl_podusage u;
            ctl_pod_usage(r->foreign[f], &u);
            nforeign[rn - r->nix] += u.gpus;
        }
    }
    for (int pi = 0; pi < r->npools; pi++) {
        const struct api_gpupool *pl = &r->pools[pi];
        struct api_gpupool_status st = {0};
        for (int n = 0; n < r->nnodes; n++) {
            if (ctl_node_pool(r->nodes[n], r->pools, r->npools) != pi)
                continue;
            struct ctl_nodeinfo ni;
            ctl_node_info(r->nodes[n], &ni);
            const char *name = ctl_obj_str(r->nodes[n], "metadata", "name");
            struct rnode *rn = name ? rc_node_find(r, name) : NULL;
            uint32_t used = rn ? nused[rn - r->nix] : 0;
            int fgpus = rn ? nforeign[rn - r->nix] : 0;
            int alloc = __builtin_popcount(used) + fgpus;
            if (alloc > ni.gpus)
                alloc = ni.gpus;
            st.gpus += ni.gpus;
            st.allocated += alloc;
            if (ni.ready && !ni.unschedulable && ni.gpus - alloc > st.largest_free)
                st.largest_free = ni.gpus - alloc;
        }
        st.free = st.gpus - st.allocated;
        for (int i = 0; i < r->njobs; i++) {
            const struct cj *j = &r->jobs[i];
            if (!j->row || (j->state != STORE_QUEUED && j->state != STORE_PREEMPTED))
                continue;
            if (j->job->spec.pool[0] ? !strcmp(j->job->spec.pool, pl->meta.name)
                                    : (pl->classes & (1u << (unsigned)j->job->spec.class)) != 0)
                st.pending++;
        }
        cJSON *p = api_gpupool_status_encode(&st);
        const char *plb[] = {"pool", pl->meta.name, NULL};
        obj_gauge(r, CTL_M_POOL_GPUS, plb, st.gpus);
        obj_gauge(r, CTL_M_POOL_ALLOCATED, plb, st.allocated);
        obj_gauge(r, CTL_M_POOL_PENDING_JOBS, plb, st.pending);
        obj_memo(r, "pool", pl->meta.name, 1, key, sizeof(key));
        if (p && !kube_path(path, sizeof(path), "/apis/gangq.io/v1alpha1", NULL, "gpupools",
                            pl->meta.name, NULL))
            counted_status(r, key, path, p, "");
        cJSON_Delete(p);
    }
    free(nused);
    free(nforeign);
}

/* Between full passes and publication epochs, Team and GPUPool statuses and
 * gauges are not recomputed (what they show is written at most every
 * --position-interval anyway; a Team, pool or node change makes the next
 * reconcile a full pass): their memos are only kept. */
void rc_team_pool_seen(struct rc_ctx *r)
{
    char key[API_NAME_MAX + 8];
    for (int k = 0; k < r->ntinfo; k++) {
        const char *name = rteam_name(r, &r->tinfo[k]);
        if (name[0])
            obj_memo(r, "team", name, 0, key, sizeof(key));
    }
    for (int pi = 0; pi < r->npools; pi++)
        obj_memo(r, "pool", r->pools[pi].meta.name, 0, key, sizeof(key));
}

/* ------------------------------------------------------------ waiting jobs */

/* p is what ctl_wait_publish leaves for a job in state that does not wait:
 * set, that state, nothing else. */
static int pub_cleared(const struct ctl_waitpub *p, int state)
{
    return p->set && p->state == state && !p->cls && !p->msg && !p->msg_ms && !p->evented && !p->position &&
           !p->in_sig && !p->in_cls && !p->pub_sig;
}

/* What the statuses of waiting jobs show (API writes follow decisions, not
 * queue moves): each job's explanation goes through ctl_wait_publish (its
 * status is rewritten when its state or wait class changes, the detailed
 * text at most every --wait-message-interval), with one Waiting Event per
 * class per wait; positions are published for the first --position-head jobs
 * of each Team queue at most every --position-interval (the others show
 * none), from a reconcile that scheduled. */
void rc_waiting_publish(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int64_t pos_iv = (int64_t)(c->cfg.position_interval_s * 1000.0);
    int64_t msg_iv = (int64_t)(c->cfg.wait_message_interval_s * 1000.0);
    int64_t cls_iv = (int64_t)(c->cfg.wait_reason_settle_s * 1000.0);
    int epoch = r->sched_ran && (!c->pos_pub_ms || r->now - c->pos_pub_ms >= pos_iv);
    if (epoch)
        c->pos_pub_ms = r->now;
    else if (r->sched_ran)
        rc_due(r, c->pos_pub_ms + pos_iv, "position-epoch"); /* what this schedule changed is published then */
    r->pub_epoch = epoch;
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        struct ctl_memo *m = j->memo;
        if (!m || !j->row || j->dormant)
            continue;
        int waiting = j->state == STORE_QUEUED || j->state == STORE_PREEMPTED;
        if (!waiting && pub_cleared(&m->wait.pub, j->state) && !(m->wait.wait_msg && !rc_holds(j->state)))
            continue; /* not waiting, and nothing of a wait left to clear (most jobs, most reconciles) */
        const char *inv = j->invalid_reason && !j->failed_invalid ? j->invalid_reason : NULL;
        const char *msg = inv ? ctl_str(j->invalid_msg) : m->wait.wait_msg ? m->wait.wait_msg : j->row->message;
        /* first sight since start: what the object already shows of an
         * unchanged wait is not written again */
        if (waiting && !m->wait.pub.set)
            (void)ctl_wait_adopt_shown(&m->wait.pub, j->obj, j->state, msg, inv, r->now);
        struct ctl_waitpub was = m->wait.pub;
        /* an Event speaks for the core's explanation or a problem, not a
         * stored message awaiting the next schedule; a wait the status does
         * not show yet (--status-settle) is neither published nor evented */
        int64_t held = rc_status_held(r, j);
        if (held)
            rc_due(r, held, "status-settle"); /* published once its status shows the wait */
        /* the explanation's hash is kept with it (hashing 15,000 unchanged
         * texts every reconcile was a measurable share of it) */
        uint64_t mh = !waiting                             ? 0
                      : msg && msg == m->wait.wait_msg ? m->wait.wait_msg_hash
                                                         : gq_hash_str(msg ? msg : "");
        if (!held && ctl_wait_publish_hashed(&m->wait.pub, j->state, waiting, msg, mh, inv, r->now, msg_iv, cls_iv) &&
            j->obj && (inv || m->wait.wait_msg)) {
            /* one per wait reason per wait: the message names the reason its
             * conditions now carry */
            char emsg[SCHED_MSG_MAX + 64];
            snprintf(emsg, sizeof(emsg), "%s: %s", ctl_wait_class_name(m->wait.pub.cls), msg ? msg : "");
            ctl_act_event(&c->act, j->obj, inv ? "Warning" : "Normal", "Waiting", emsg);
        }
        if (!held && waiting && m->wait.pub.in_cls != m->wait.pub.cls)
            rc_due(r, m->wait.pub.in_cls_ms + cls_iv, "wait-reason"); /* published then if it holds */
        else if (!held && m->wait.pub.pub_sig != m->wait.pub.in_sig)
            rc_due(r, m->wait.pub.msg_ms + msg_iv, "wait-message"); /* the new text is published then */
        if (waiting && epoch)
            m->wait.pub.position = inv ? 0 : ctl_position_shown(m->wait.position, c->cfg.position_head);
        if (!waiting && !rc_holds(j->state) && m->wait.wait_msg) {
            (void)ctl_str_set(&m->wait.wait_msg, NULL, 0);
            m->wait.wait_msg_hash = 0;
            rc_job_touch_status(r, j);
        }
        if (was.set != m->wait.pub.set || was.state != m->wait.pub.state || was.cls != m->wait.pub.cls ||
            was.msg_ms != m->wait.pub.msg_ms || was.position != m->wait.pub.position)
            rc_job_touch_status(r, j); /* what its status shows changed: written in this reconcile */
    }
}

struct qrow {
    const struct ctl_memo *m;
    const char *team;
};

static int qrow_cmp(const void *a, const void *b)
{
    const struct qrow *x = a, *y = b;
    int c = strcmp(x->team, y->team);
    return c ? c : (x->m->wait.position > y->m->wait.position) - (x->m->wait.position < y->m->wait.position);
}

int ctl_queue_render(const struct gq_ctl *c, const char *team, struct gq_buf *out)
{
    size_t n = 0;
    struct qrow *rows = calloc(c->memo.n + 1, sizeof(*rows));
    cJSON *root = cJSON_CreateObject(), *arr = root ? cJSON_AddArrayToObject(root, "jobs") : NULL;
    int rc = GQ_ENOMEM;
    if (!rows || !arr)
        goto out;
    for (size_t b = 0; b < c->memo.nb; b++)
        for (const struct ctl_memo *m = c->memo.b[b]; m; m = m->next) {
            int waiting =
                m->wait.pub.set && (m->wait.pub.state == STORE_QUEUED || m->wait.pub.state == STORE_PREEMPTED);
            if (!waiting || m->wait.position <= 0 || !m->decode.job_valid || n >= c->memo.n)
                continue;
            if (team && team[0] && strcmp(team, m->decode.job->spec.team))
                continue;
            rows[n++] = (struct qrow){m, m->decode.job->spec.team};
        }
    qsort(rows, n, sizeof(*rows), qrow_cmp);
    for (size_t i = 0; i < n; i++) {
        const struct ctl_memo *m = rows[i].m;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            goto out;
        }
        if (!cJSON_AddStringToObject(o, "team", rows[i].team) ||
            !cJSON_AddStringToObject(o, "namespace", m->decode.job->meta.namespace) ||
            !cJSON_AddStringToObject(o, "name", m->decode.job->meta.name) ||
            !cJSON_AddNumberToObject(o, "position", m->wait.position) ||
            !cJSON_AddStringToObject(o, "state", store_state_name(m->wait.pub.state)) ||
            /* the live explanation's class (the status may still show an
             * older one: --wait-reason-settle) */
            !cJSON_AddStringToObject(o, "waitReason",
                                     ctl_wait_class_name(m->wait.pub.in_sig ? m->wait.pub.in_cls : m->wait.pub.cls)) ||
            !cJSON_AddStringToObject(o, "message", ctl_str(m->wait.wait_msg)))
            goto out;
    }
    char *txt = cJSON_PrintUnformatted(root);
    if (!txt)
        goto out;
    rc = gq_buf_puts(out, txt) || gq_buf_puts(out, "\n") ? GQ_ENOMEM : 0;
    free(txt);
out:
    cJSON_Delete(root);
    free(rows);
    return rc;
}

