/* sim_run.c — virtual-time event loop around the scheduling core and the store. */
#include "sim_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply.h"
#include "gq.h"
#include "sched.h"
#include "store.h"

#define SIM_EPOCH_MS INT64_C(1767225600000) /* 2026-01-01T00:00:00Z */
#define SIM_STORE_BATCH 256                 /* virtual cycles per store transaction */
#define SIM_MAX_REPEAT 4                    /* cycles at one instant after preemptions */
#define SIM_HALF_LIFE_S 86400.0             /* fair-share usage half-life */

/* ---- dynamic events (min-heap on time, kind, seq) ---- */

enum ev_kind { EV_COMPLETE = 1, EV_SUSPEND = 2, EV_RESUME = 3, EV_STOPPED = 4, EV_WAKE = 5 };

struct ev {
    int64_t t;
    int kind;
    uint32_t gen;
    int64_t seq;
    size_t job;
};

struct heap {
    struct ev *a;
    size_t n, cap;
    int64_t seq;
};

static int ev_less(const struct ev *x, const struct ev *y)
{
    if (x->t != y->t)
        return x->t < y->t;
    if (x->kind != y->kind)
        return x->kind < y->kind;
    return x->seq < y->seq;
}

static int heap_push(struct heap *h, int64_t t, int kind, size_t job, uint32_t gen)
{
    if (h->n == h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 256;
        struct ev *na = realloc(h->a, ncap * sizeof(*na));
        if (!na)
            return GQ_ENOMEM;
        h->a = na;
        h->cap = ncap;
    }
    size_t i = h->n++;
    h->a[i] = (struct ev){t, kind, gen, h->seq++, job};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&h->a[i], &h->a[p]))
            break;
        struct ev tmp = h->a[i];
        h->a[i] = h->a[p];
        h->a[p] = tmp;
        i = p;
    }
    return GQ_OK;
}

static struct ev heap_pop(struct heap *h)
{
    struct ev top = h->a[0];
    h->a[0] = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && ev_less(&h->a[l], &h->a[m]))
            m = l;
        if (r < h->n && ev_less(&h->a[r], &h->a[m]))
            m = r;
        if (m == i)
            break;
        struct ev tmp = h->a[i];
        h->a[i] = h->a[m];
        h->a[m] = tmp;
        i = m;
    }
    return top;
}

/* ---- run state ---- */

enum rstate { R_PENDING = 0, R_WAITING, R_RUNNING, R_SUSPENDED, R_DONE };

struct rjob {
    struct sched_job sj;
    struct sched_replica *rep; /* capacity replicas */
    int nrep;
    int state;
    int suspend_requested; /* suspend arrived before the job did */
    int64_t remaining;
    int64_t run_start;
    int64_t wait_since;
    uint32_t gen;
    long active_pos; /* index in active[] or -1 */
    long term_for;   /* terminating: trace index of its preemptor, else -1 */
    const char **pv; /* keys of the jobs preempted for it since its last admission (sj.preempted_victims) */
    int cappv;
    char reserved[64]; /* what its reservation held last cycle (sj.reserved_domain) */
    char key[SIM_NAME_MAX + 8];
    /* what the store records (with a store): its state, and the placement of
     * its current admission (owned), in the controller's format */
    int sstate;
    int attempts;
    struct ctl_placement pl;
};

struct nstate {
    uint16_t used[SCHED_MAX_DEVICES];
    int64_t cpu, mem;
};

struct run {
    const struct sim_cluster *c;
    const struct sim_trace *t;
    const struct sim_opts *o;
    struct sim_result *res;
    char *err;
    size_t errlen;
    struct sched_config cfg;
    struct sched *sched;
    struct store *st;
    int in_txn, txn_cycles;
    struct apply_settle_set settle; /* Teams whose ledger rows are settled at the commit */
    /* core views */
    struct sched_node *nodes;
    struct sched_label *labels;
    struct sched_taint *taints;
    struct sched_pool *pools;
    struct sched_team *teams;
    struct sched_quota *quotas;
    struct nstate *ns;
    struct rjob *jobs;
    size_t *active;
    size_t nactive;
    struct sched_job *snapjobs;
    size_t *snapmap;
    int *snapidx;    /* trace index -> snapshot index of this cycle (-1 absent) */
    int64_t grace;
    struct heap h;
    int64_t wake_at; /* pending wake time or -1 */
    double *team_gpus; /* GPUs held per team (usage accounting) */
    int64_t usage_last_t;
    int64_t now;
    int64_t ndone;
    char msg[512];
};

static int64_t ms(const struct run *r, int64_t t)
{
    return (r->o->epoch_ms ? r->o->epoch_ms : SIM_EPOCH_MS) + t * 1000;
}

static int64_t job_milli_per_replica(const struct sched_job *j)
{
    return j->req.gpus > 0 ? (int64_t)j->req.gpus * 1000 : j->req.gpu_milli;
}

/* ---- store helpers (no-ops without a store) ---- */

static int st_txn(struct run *r)
{
    if (!r->st || r->in_txn)
        return GQ_OK;
    int rc = store_begin_cycle(r->st, r->err, r->errlen);
    if (!rc)
        r->in_txn = 1;
    return rc;
}

/* The quota of a team of the cluster (apply_quota_fn). */
static const struct sched_quota *team_quota(void *ud, const char *team, struct sched_quota *buf, int *nq)
{
    const struct run *r = ud;
    (void)buf;
    for (size_t k = 0; k < r->c->nteams; k++)
        if (r->teams[k].name && !strcmp(r->teams[k].name, team)) {
            *nq = r->teams[k].nquota;
            return r->teams[k].quota;
        }
    *nq = 0;
    return NULL;
}

static int st_commit(struct run *r)
{
    if (!r->st || !r->in_txn)
        return GQ_OK;
    /* the ledger rows of the Teams whose rows changed, settled once each, as
     * the controller's reconcile does (apply.h, struct apply_settle_set) */
    struct apply_ctx x = {r->st, ms(r, r->now), 1, r->err, r->errlen, &r->settle};
    int rc = apply_settle_flush(&x, team_quota, r);
    if (rc)
        return rc;
    r->in_txn = 0;
    r->txn_cycles = 0;
    return store_commit_cycle(r->st, r->err, r->errlen);
}

/* The store writes of a decision about j go through controller/apply.h, as
 * the controller's do (there is no actuator: intents are recorded done).
 * Returns 0 without a store (nothing to write), else 1 with x and a set. */
static int st_apply(struct run *r, const struct rjob *j, struct apply_ctx *x, struct apply_job *a)
{
    if (!r->st)
        return 0;
    const struct sim_job *s = &r->t->jobs[j - r->jobs];
    const struct sched_team *tm = j->sj.team >= 0 ? &r->teams[j->sj.team] : NULL;
    *x = (struct apply_ctx){r->st, ms(r, r->now), 1, r->err, r->errlen, &r->settle};
    *a = (struct apply_job){j->key, s->team, j->sstate, s->gpus, s->gpus > 0 ? 0 : s->shares,
                            tm ? tm->quota : NULL, tm ? tm->nquota : 0};
    return 1;
}

/* The product of the node of the job's first placed replica ("" none): the
 * GPU type its ledger row is charged to. */
static const char *st_product(const struct run *r, const struct rjob *j)
{
    if (!j->pl.n)
        return "";
    for (int k = 0; k < j->nrep; k++) {
        const struct sched_node *n = &r->nodes[j->rep[k].node];
        if (!strcmp(n->name, j->pl.rep[0].node))
            return n->gpu_product ? n->gpu_product : "";
    }
    return "";
}

/* ---- capacity bookkeeping (the simulator's own check of the core) ---- */

static int node_apply(struct run *r, const struct sched_job *j, const struct sched_replica *p, int sign)
{
    struct nstate *n;
    if (p->node < 0 || p->node >= (int32_t)r->c->nnodes) {
        gq_errf(r->err, r->errlen, "core placed %s on node index %d (out of range)", j->id, p->node);
        return GQ_ECORRUPT;
    }
    n = &r->ns[p->node];
    int64_t per = j->req.gpus > 0 ? 1000 : j->req.gpu_milli;
    for (int d = 0; d < SCHED_MAX_DEVICES; d++) {
        if (!(p->devs & (1u << d)))
            continue;
        int64_t v = n->used[d] + sign * per;
        if (d >= r->nodes[p->node].gpus || v < 0 || v > 1000) {
            gq_errf(r->err, r->errlen, "core over-allocated GPU %d of node %s for %s", d,
                    r->nodes[p->node].name, j->id);
            return GQ_ECORRUPT;
        }
        n->used[d] = (uint16_t)v;
    }
    n->cpu += sign * j->req.cpu_milli;
    n->mem += sign * j->req.mem_bytes;
    if (n->cpu > r->nodes[p->node].cpu_milli || n->mem > r->nodes[p->node].mem_bytes) {
        gq_errf(r->err, r->errlen, "core over-allocated cpu/memory of node %s for %s",
                r->nodes[p->node].name, j->id);
        return GQ_ECORRUPT;
    }
    return GQ_OK;
}

static void active_add(struct run *r, size_t i)
{
    if (r->jobs[i].active_pos >= 0)
        return;
    r->jobs[i].active_pos = (long)r->nactive;
    r->active[r->nactive++] = i;
}

static void active_del(struct run *r, size_t i)
{
    long p = r->jobs[i].active_pos;
    if (p < 0)
        return;
    size_t last = r->active[--r->nactive];
    r->active[p] = last;
    r->jobs[last].active_pos = p;
    r->jobs[i].active_pos = -1;
}

/* Release every replica (or only those on node `only`, -1 = all). */
static int release(struct run *r, struct rjob *j, int only)
{
    int keep = 0, rc;
    for (int k = 0; k < j->nrep; k++) {
        if (only >= 0 && j->rep[k].node != only) {
            j->rep[keep++] = j->rep[k];
            continue;
        }
        if ((rc = node_apply(r, &j->sj, &j->rep[k], -1)))
            return rc;
        if (j->sj.team >= 0)
            r->team_gpus[j->sj.team] -= (double)job_milli_per_replica(&j->sj) / 1000.0;
    }
    j->nrep = keep;
    j->sj.nplaced = keep;
    return GQ_OK;
}

/* A running job stops (preempted, suspended, node failure): progress is lost
 * unless it checkpoints. Returns lost GPU-seconds. */
static int64_t stop_running(struct run *r, struct rjob *j, const struct sim_job *sj)
{
    int64_t ran = r->now - j->run_start;
    int64_t lost = 0;
    int64_t gpu_milli = sim_job_gpu_milli(sj);
    if (sj->checkpoint) {
        j->remaining -= ran;
        if (j->remaining < 1)
            j->remaining = 1;
    } else {
        lost = ran * gpu_milli / 1000;
        j->remaining = sj->duration;
    }
    j->gen++; /* cancels the pending completion */
    return lost;
}

static void to_waiting(struct run *r, size_t i)
{
    struct rjob *j = &r->jobs[i];
    j->state = R_WAITING;
    j->sj.state = SCHED_JOB_WAITING;
    j->sj.nplaced = 0;
    j->nrep = 0;
    j->wait_since = r->now;
    active_add(r, i);
}

static void stop_waiting(struct run *r, size_t i)
{
    struct rjob *j = &r->jobs[i];
    r->res->jobs[i].waited += r->now - j->wait_since;
}

/* ---- building the core's view ---- */

static int build_core_view(struct run *r)
{
    const struct sim_cluster *c = r->c;
    size_t nl = 0, nt = 0, nq = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        nl += (size_t)c->nodes[i].nlabels;
        nt += (size_t)c->nodes[i].ntaints;
    }
    for (size_t i = 0; i < c->nteams; i++)
        nq += (size_t)c->teams[i].nquota;
    r->nodes = calloc(c->nnodes, sizeof(*r->nodes));
    r->ns = calloc(c->nnodes, sizeof(*r->ns));
    r->labels = calloc(nl + 1, sizeof(*r->labels));
    r->taints = calloc(nt + 1, sizeof(*r->taints));
    r->pools = calloc(c->npools + 1, sizeof(*r->pools));
    r->teams = calloc(c->nteams + 1, sizeof(*r->teams));
    r->quotas = calloc(nq + 1, sizeof(*r->quotas));
    r->team_gpus = calloc(c->nteams + 1, sizeof(*r->team_gpus));
    if (!r->nodes || !r->ns || !r->labels || !r->taints || !r->pools || !r->teams || !r->quotas ||
        !r->team_gpus)
        return GQ_ENOMEM;
    nl = nt = nq = 0;
    for (size_t i = 0; i < c->npools; i++) {
        r->pools[i].name = c->pools[i].name;
        r->pools[i].home_classes = c->pools[i].classes;
        r->pools[i].protected_pool = c->pools[i].protected_pool;
        r->pools[i].reserve_gpus = c->pools[i].reserve_gpus;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        const struct sim_node *sn = &c->nodes[i];
        struct sched_node *n = &r->nodes[i];
        if (sn->gpus > SCHED_MAX_DEVICES) {
            gq_errf(r->err, r->errlen, "node %s: %d GPUs, the core handles at most %d", sn->name,
                    sn->gpus, SCHED_MAX_DEVICES);
            return GQ_EINVAL;
        }
        n->name = sn->name;
        n->labels = &r->labels[nl];
        for (int k = 0; k < sn->nlabels; k++)
            r->labels[nl++] = (struct sched_label){sn->labels[k].key, sn->labels[k].value};
        n->nlabels = sn->nlabels;
        n->taints = &r->taints[nt];
        for (int k = 0; k < sn->ntaints; k++) {
            const struct sim_taint *st = &sn->taints[k];
            r->taints[nt++] = (struct sched_taint){
                st->key, st->value,
                !strcmp(st->effect, "NoExecute")          ? SCHED_NO_EXECUTE
                : !strcmp(st->effect, "PreferNoSchedule") ? SCHED_PREFER_NO_SCHEDULE
                                                          : SCHED_NO_SCHEDULE};
        }
        n->ntaints = sn->ntaints;
        n->ready = 1;
        n->cpu_milli = sn->cpu_milli;
        n->mem_bytes = sn->mem_mib * 1048576;
        n->gpus = sn->gpus;
        n->gpu_product = sn->gpu_type[0] ? sn->gpu_type : NULL;
        n->gpu_mem_mib = (int64_t)sn->gpu_mem_gib * 1024;
        n->pool = -1;
        for (size_t p = 0; p < c->npools && n->pool < 0; p++) {
            int ok = 1;
            for (int s = 0; s < c->pools[p].nselector && ok; s++) {
                const char *v = sim_node_label(sn, c->pools[p].selector[s].key);
                ok = v && !strcmp(v, c->pools[p].selector[s].value);
            }
            if (ok)
                n->pool = (int)p;
        }
        r->res->total_gpus += sn->gpus;
    }
    for (size_t i = 0; i < c->nteams; i++) {
        const struct sim_team *st = &c->teams[i];
        r->teams[i].name = st->name;
        r->teams[i].cohort = st->cohort;
        r->teams[i].weight = st->weight;
        r->teams[i].quota = &r->quotas[nq];
        r->teams[i].nquota = st->nquota;
        for (int k = 0; k < st->nquota; k++)
            r->quotas[nq++] = (struct sched_quota){st->quota[k].gpu_type, st->quota[k].gpus,
                                                   st->quota[k].borrowing_limit,
                                                   st->quota[k].lending_limit};
    }
    return GQ_OK;
}

static int level_of(const struct run *r, const char *name)
{
    return name[0] ? sched_config_level(&r->cfg, name) : -1;
}

static int build_jobs(struct run *r)
{
    const struct sim_trace *t = r->t;
    r->jobs = calloc(t->njobs + 1, sizeof(*r->jobs));
    r->active = calloc(t->njobs + 1, sizeof(*r->active));
    r->snapjobs = calloc(t->njobs + 1, sizeof(*r->snapjobs));
    r->snapmap = calloc(t->njobs + 1, sizeof(*r->snapmap));
    r->snapidx = malloc((t->njobs + 1) * sizeof(*r->snapidx));
    if (!r->jobs || !r->active || !r->snapjobs || !r->snapmap || !r->snapidx)
        return GQ_ENOMEM;
    for (size_t i = 0; i < t->njobs; i++) {
        const struct sim_job *s = &t->jobs[i];
        struct rjob *j = &r->jobs[i];
        struct sched_job *q = &j->sj;
        snprintf(j->key, sizeof(j->key), "sim/%s", s->name);
        j->rep = calloc((size_t)s->replicas, sizeof(*j->rep));
        if (!j->rep)
            return GQ_ENOMEM;
        j->active_pos = -1;
        j->term_for = -1;
        r->snapidx[i] = -1;
        j->remaining = s->duration;
        q->id = j->key;
        q->team = -1;
        for (size_t k = 0; k < r->c->nteams; k++)
            if (!strcmp(r->c->teams[k].name, s->team))
                q->team = (int)k;
        q->cls = (enum sched_class)s->cls;
        q->priority = s->priority;
        q->preemptible = s->preemptible >= 0 ? s->preemptible : s->cls != SIM_CLASS_INFERENCE;
        q->gang = s->gang >= 0 ? s->gang : s->cls != SIM_CLASS_INFERENCE;
        q->replicas = s->replicas;
        q->req.gpus = s->gpus;
        q->req.gpu_milli = s->shares;
        for (int k = 0; k < s->ntypes && k < SCHED_MAX_TYPES; k++)
            q->req.types[k] = s->types[k];
        q->req.ntypes = s->ntypes < SCHED_MAX_TYPES ? s->ntypes : SCHED_MAX_TYPES;
        q->req.min_gpu_mem_gib = s->min_mem_gib;
        q->req.cpu_milli = s->cpu_milli;
        q->req.mem_bytes = s->mem_mib * 1048576;
        q->topo_required = level_of(r, s->topo_required);
        q->topo_preferred = level_of(r, s->topo_preferred);
        q->topo_spread = level_of(r, s->topo_spread);
        q->pool = -1;
        for (size_t k = 0; k < r->c->npools; k++)
            if (!strcmp(r->c->pools[k].name, s->pool))
                q->pool = (int)k;
        /* its rank in arrival order (the trace is sorted stably by arrival, so
         * jobs arriving in one second keep their order in the file), as the
         * controller ranks its jobs by (creation, etcd revision): the core
         * orders equal priorities by it, then by name */
        q->enqueue_time = (int64_t)i;
        q->max_run_s = s->max_run;
        q->state = SCHED_JOB_WAITING;
        q->placement = j->rep;
        q->nplaced = 0;
        r->res->jobs[i].first_start = -1;
        r->res->jobs[i].finish = -1;
    }
    return GQ_OK;
}

/* ---- events ---- */

static int stop_victim(struct run *r, size_t i);

static int on_arrival(struct run *r, size_t i)
{
    struct rjob *j = &r->jobs[i];
    const struct sim_job *s = &r->t->jobs[i];
    int rc;
    if (r->st) {
        struct store_job sj = {0};
        sj.key = j->key;
        sj.uid = "";
        sj.team = s->team;
        sj.cls = sim_class_name(s->cls);
        sj.priority = s->priority;
        sj.gpus = (int64_t)s->replicas * s->gpus;
        sj.enqueue_ms = ms(r, s->arrival);
        sj.arrival = (int64_t)i + 1; /* the trace's order within one arrival time */
        sj.state = j->suspend_requested ? STORE_SUSPENDED : STORE_QUEUED;
        sj.placement = "";
        sj.message = "";
        sj.preempted_by = "";
        sj.preempt_reason = "";
        sj.resource_version = "";
        if ((rc = store_job_upsert(r->st, &sj, ms(r, r->now), r->err, r->errlen)))
            return rc;
    }
    j->sstate = j->suspend_requested ? STORE_SUSPENDED : STORE_QUEUED;
    if (j->suspend_requested) {
        j->state = R_SUSPENDED;
        r->res->jobs[i].final = SIM_F_SUSPENDED;
        return GQ_OK;
    }
    to_waiting(r, i);
    return GQ_OK;
}

/* The job's time is up: its work done, or its maxRun over first (stopped,
 * Failed, as the controller's lifecycle does it: CTL_MAX_RUN_MSG). */
static int on_complete(struct run *r, size_t i)
{
    struct rjob *j = &r->jobs[i];
    int rc, timed_out = r->now - j->run_start < j->remaining;
    if ((rc = release(r, j, -1)))
        return rc;
    j->state = R_DONE;
    j->sj.state = SCHED_JOB_WAITING;
    active_del(r, i);
    r->res->jobs[i].finish = r->now;
    r->res->jobs[i].timed_out = timed_out;
    r->ndone++;
    struct apply_ctx x;
    struct apply_job a;
    if (timed_out) {
        char msg[160];
        snprintf(msg, sizeof(msg), CTL_MAX_RUN_MSG " (%llds since its admission): its pods are stopped",
                 (long long)j->sj.max_run_s);
        if (st_apply(r, j, &x, &a) && (rc = apply_fail(&x, &a, msg, "max-run")))
            return rc;
        j->sstate = STORE_FAILED;
        return GQ_OK;
    }
    if (st_apply(r, j, &x, &a) && (rc = apply_succeed(&x, &a, "every replica succeeded", 0)))
        return rc;
    j->sstate = STORE_SUCCEEDED;
    return GQ_OK;
}

static int on_suspend(struct run *r, size_t i)
{
    struct rjob *j = &r->jobs[i];
    const struct sim_job *s = &r->t->jobs[i];
    int rc;
    if (j->state == R_PENDING) {
        j->suspend_requested = 1;
        return GQ_OK;
    }
    if (j->state == R_DONE || j->state == R_SUSPENDED)
        return GQ_OK;
    if (j->state == R_RUNNING && j->sj.terminating) {
        if ((rc = stop_victim(r, i)))
            return rc;
        stop_waiting(r, i);
    } else if (j->state == R_RUNNING) {
        int64_t lost = stop_running(r, j, s);
        r->res->jobs[i].lost_gpu_s += lost;
        if ((rc = release(r, j, -1)))
            return rc;
    } else {
        stop_waiting(r, i);
    }
    j->state = R_SUSPENDED;
    j->sj.state = SCHED_JOB_WAITING;
    j->sj.nplaced = 0;
    active_del(r, i);
    struct apply_ctx x;
    struct apply_job a;
    if (st_apply(r, j, &x, &a) && (rc = apply_suspend(&x, &a)))
        return rc;
    j->sstate = STORE_SUSPENDED;
    return GQ_OK;
}

static int on_resume(struct run *r, size_t i)
{
    struct rjob *j = &r->jobs[i];
    int rc;
    if (j->state == R_PENDING) {
        j->suspend_requested = 0;
        return GQ_OK;
    }
    if (j->state != R_SUSPENDED)
        return GQ_OK;
    to_waiting(r, i);
    struct apply_ctx x;
    struct apply_job a;
    if (st_apply(r, j, &x, &a) && (rc = apply_resume(&x, &a)))
        return rc;
    j->sstate = STORE_QUEUED;
    return GQ_OK;
}

static int on_node(struct run *r, const struct sim_event *e)
{
    int idx = -1, rc;
    for (size_t k = 0; k < r->c->nnodes && idx < 0; k++)
        if (!strcmp(r->c->nodes[k].name, e->node))
            idx = (int)k;
    if (idx < 0)
        return GQ_OK; /* sim_check rejects this earlier */
    if (e->kind == SIM_EV_NODE_RECOVER) {
        r->nodes[idx].ready = 1;
        return GQ_OK;
    }
    if (!r->nodes[idx].ready)
        return GQ_OK;
    r->nodes[idx].ready = 0;
    r->res->node_failures++;
    for (size_t a = 0; a < r->nactive; a++) {
        size_t i = r->active[a];
        struct rjob *j = &r->jobs[i];
        const struct sim_job *s = &r->t->jobs[i];
        int hit = 0;
        if (j->state != R_RUNNING)
            continue;
        for (int k = 0; k < j->nrep; k++)
            hit |= j->rep[k].node == idx;
        if (!hit)
            continue;
        snprintf(r->msg, sizeof(r->msg), "node %s failed", e->node);
        if (j->sj.terminating) { /* it was stopping anyway */
            if ((rc = stop_victim(r, i)))
                return rc;
            continue;
        }
        struct apply_ctx ax;
        struct apply_job aj;
        if (!j->sj.gang) {
            /* a lost inference replica is re-placed; the job keeps serving */
            if ((rc = release(r, j, idx)))
                return rc;
            for (int k = j->pl.n - 1; k >= 0; k--)
                if (!strcmp(j->pl.rep[k].node, e->node))
                    (void)ctl_placement_remove(&j->pl, j->pl.rep[k].replica); /* owned: cannot fail */
            if (st_apply(r, j, &ax, &aj) &&
                (rc = apply_replace_replica(&ax, &aj, &j->pl, st_product(r, j), r->msg)))
                return rc;
            continue;
        }
        r->res->jobs[i].lost_gpu_s += stop_running(r, j, s);
        if ((rc = release(r, j, -1)))
            return rc;
        to_waiting(r, i);
        /* the simulated cluster retries a failed gang without limit */
        if (st_apply(r, j, &ax, &aj) &&
            (rc = apply_requeue(&ax, &aj, r->res->jobs[i].requeues, -1, r->msg, NULL, 0, NULL)))
            return rc;
        r->res->jobs[i].requeues++;
        j->sstate = STORE_QUEUED;
    }
    return GQ_OK;
}

/* ---- a scheduling cycle ---- */

static int on_admit(struct run *r, const struct sched_decision *d)
{
    size_t i = r->snapmap[d->job];
    struct rjob *j = &r->jobs[i];
    const struct sim_job *s = &r->t->jobs[i];
    int rc, was_waiting = j->state == R_WAITING;
    if (j->nrep + d->nrep > s->replicas) {
        gq_errf(r->err, r->errlen, "core admitted %d replicas of %s, which has %d (already %d placed)",
                d->nrep, j->key, s->replicas, j->nrep);
        return GQ_ECORRUPT;
    }
    for (int k = 0; k < d->nrep; k++) {
        if ((rc = node_apply(r, &j->sj, &d->rep[k], +1)))
            return rc;
        j->rep[j->nrep++] = d->rep[k];
        if (j->sj.team >= 0)
            r->team_gpus[j->sj.team] += (double)job_milli_per_replica(&j->sj) / 1000.0;
    }
    j->sj.nplaced = j->nrep;
    j->sj.npreempted_victims = 0; /* admitted: the victims it took no longer wait for it */
    r->res->admits++;
    if (was_waiting) {
        stop_waiting(r, i);
        j->state = R_RUNNING;
        j->sj.state = SCHED_JOB_RUNNING;
        j->sj.admitted_at = r->now;
        j->run_start = r->now;
        j->gen++;
        if (r->res->jobs[i].first_start < 0)
            r->res->jobs[i].first_start = r->now;
        r->res->jobs[i].reason[0] = '\0';
        /* a job that needs longer than its maxRun is stopped then (on_complete) */
        int64_t run = j->sj.max_run_s > 0 ? GQ_MIN(j->remaining, j->sj.max_run_s) : j->remaining;
        if ((rc = heap_push(&r->h, r->now + run, EV_COMPLETE, i, j->gen)))
            return rc;
    }
    /* the store's record: the controller's placement text and rules; no
     * pods to wait for, so an admitted job runs at once */
    if (was_waiting) {
        ctl_placement_release(&j->pl);
        j->pl.attempt = ++j->attempts;
        if (d->domain)
            gq_strlcpy(j->pl.domain, d->domain, sizeof(j->pl.domain));
    }
    if ((rc = apply_placement_add(&j->pl, r->nodes, d->rep, d->nrep, !was_waiting)))
        return rc;
    struct apply_ctx x;
    struct apply_job a;
    if (st_apply(r, j, &x, &a)) {
        if ((rc = apply_admit(&x, &a, &j->pl, st_product(r, j), d->message)))
            return rc;
        a.state = apply_holds(a.state) ? a.state : STORE_ADMITTED;
        if (a.state == STORE_ADMITTED && (rc = apply_running(&x, &a)))
            return rc;
    }
    j->sstate = STORE_RUNNING;
    return GQ_OK;
}

/* A preempted job's pods have stopped: it frees its capacity and requeues. */
static int stop_victim(struct run *r, size_t i)
{
    struct rjob *j = &r->jobs[i];
    const struct sim_job *s = &r->t->jobs[i];
    int rc;
    int64_t lost = stop_running(r, j, s);
    r->res->jobs[i].lost_gpu_s += lost;
    r->res->lost_gpu_s[s->cls] += lost;
    j->sj.terminating = 0;
    j->sj.terminating_for = -1;
    /* the core keeps it off what its preemptor claimed while that one waits */
    j->sj.preempted_for = j->term_for >= 0 ? r->jobs[j->term_for].key : NULL;
    j->term_for = -1;
    if ((rc = release(r, j, -1)))
        return rc;
    to_waiting(r, i); /* its ledger row went with the preemption (apply_preempt) */
    return GQ_OK;
}

static int on_preempt(struct run *r, const struct sched_decision *d)
{
    size_t i = r->snapmap[d->job];
    struct rjob *j = &r->jobs[i];
    const struct sim_job *s = &r->t->jobs[i];
    const char *by = d->for_job >= 0 ? r->snapjobs[d->for_job].id : "";
    int rc;
    if (j->state != R_RUNNING || j->sj.terminating) {
        gq_errf(r->err, r->errlen, "core preempted %s, which is not running (or already stopping)", j->key);
        return GQ_ECORRUPT;
    }
    r->res->jobs[i].preemptions++;
    r->res->preemptions[s->cls]++;
    struct apply_ctx x;
    struct apply_job a;
    if (st_apply(r, j, &x, &a) && (rc = apply_preempt(&x, &a, by, d->message)))
        return rc;
    j->sstate = STORE_PREEMPTED;
    j->term_for = d->for_job >= 0 ? (long)r->snapmap[d->for_job] : -1;
    if (j->term_for >= 0) { /* the preemptor never takes it again while it waits */
        struct rjob *p = &r->jobs[j->term_for];
        if (p->sj.npreempted_victims == p->cappv) {
            int cap = p->cappv ? 2 * p->cappv : 4;
            const char **nv = realloc(p->pv, (size_t)cap * sizeof(*nv));
            if (!nv)
                return GQ_ENOMEM;
            p->pv = nv;
            p->cappv = cap;
        }
        p->pv[p->sj.npreempted_victims++] = j->key;
        p->sj.preempted_victims = p->pv;
    }
    if (r->grace <= 0)
        return stop_victim(r, i);
    /* its pods terminate for the grace period, holding their capacity */
    j->sj.terminating = 1;
    j->gen++; /* the pending completion no longer applies */
    return heap_push(&r->h, r->now + r->grace, EV_STOPPED, i, j->gen);
}

static void usage_advance(struct run *r)
{
    /* usage history into the store, one bucket write per team per cycle */
    int64_t dt = r->now - r->usage_last_t;
    if (dt <= 0)
        return;
    for (size_t k = 0; k < r->c->nteams; k++) {
        double gs = r->team_gpus[k] * (double)dt;
        if (r->st && gs > 0)
            store_usage_add(r->st, r->c->teams[k].name, ms(r, r->usage_last_t), gs, r->err, r->errlen);
        if (!r->st) /* no store: keep the decayed figure in memory */
            r->teams[k].usage_gpu_s =
                r->teams[k].usage_gpu_s * pow(0.5, (double)dt / SIM_HALF_LIFE_S) + gs;
    }
    r->usage_last_t = r->now;
}

static int usage_cb(void *ctx, const char *team, double v)
{
    struct run *r = ctx;
    for (size_t k = 0; k < r->c->nteams; k++)
        if (!strcmp(r->c->teams[k].name, team))
            r->teams[k].usage_gpu_s = v;
    return 0;
}

static int usage_refresh(struct run *r)
{
    /* fair share reads decayed usage back from the store each cycle, as the
     * controller's reconcile does (ctl_decide.c) */
    if (!r->st)
        return GQ_OK;
    return store_usage_decayed_all(r->st, ms(r, r->now), SIM_HALF_LIFE_S, usage_cb, r, r->err, r->errlen);
}

static int cycle(struct run *r, int *preempted)
{
    struct sched_snapshot snap;
    struct sched_result *res = NULL;
    int rc, n = 0;
    *preempted = 0;
    if ((rc = usage_refresh(r))) /* usage advanced to now by the event loop */
        return rc;
    for (size_t a = 0; a < r->nactive; a++) {
        size_t i = r->active[a];
        r->snapjobs[n] = r->jobs[i].sj;
        r->snapmap[n] = i;
        r->snapidx[i] = n;
        n++;
    }
    for (int k = 0; k < n; k++) {
        const struct rjob *j = &r->jobs[r->snapmap[k]];
        if (!j->sj.terminating)
            continue;
        long f = j->term_for;
        /* the preemptor, if it still waits */
        r->snapjobs[k].terminating_for =
            f >= 0 && r->jobs[f].state == R_WAITING && r->jobs[f].active_pos >= 0 ? r->snapidx[f] : -1;
    }
    memset(&snap, 0, sizeof(snap));
    snap.config = &r->cfg;
    snap.now = r->now;
    snap.nodes = r->nodes;
    snap.nnodes = (int)r->c->nnodes;
    snap.pools = r->pools;
    snap.npools = (int)r->c->npools;
    snap.teams = r->teams;
    snap.nteams = (int)r->c->nteams;
    snap.jobs = r->snapjobs;
    snap.njobs = n;
    rc = sched_cycle(r->sched, &snap, &res, r->err, r->errlen);
    if (rc)
        return rc;
    r->res->cycles++;
    /* preemptions first (they free capacity), then admissions, then explanations */
    for (int k = 0; k < res->n && !rc; k++)
        if (res->d[k].kind == SCHED_PREEMPT) {
            rc = on_preempt(r, &res->d[k]);
            (*preempted)++;
        }
    for (int k = 0; k < res->n && !rc; k++)
        if (res->d[k].kind == SCHED_ADMIT)
            rc = on_admit(r, &res->d[k]);
    for (int k = 0; k < n; k++) { /* a reservation is what this cycle's WAITs say */
        r->jobs[r->snapmap[k]].reserved[0] = 0;
        r->jobs[r->snapmap[k]].sj.reserved_domain = NULL;
    }
    for (int k = 0; k < res->n && !rc; k++)
        if (res->d[k].kind == SCHED_WAIT && res->d[k].message) {
            size_t i = r->snapmap[res->d[k].job];
            gq_strlcpy(r->res->jobs[i].reason, res->d[k].message, sizeof(r->res->jobs[i].reason));
            if (res->d[k].reserved) {
                gq_strlcpy(r->jobs[i].reserved, res->d[k].reserved, sizeof(r->jobs[i].reserved));
                r->jobs[i].sj.reserved_domain = r->jobs[i].reserved;
            }
        }
    sched_result_recycle(r->sched, res);
    for (int k = 0; k < n; k++)
        r->snapidx[r->snapmap[k]] = -1;
    return rc;
}

/* ---- samples ---- */

static int sample(struct run *r)
{
    struct sim_result *res = r->res;
    struct sim_sample s = {r->now, 0, 0, 0, 0, 0, 0};
    int64_t need = 0; /* smallest per-replica GPU request among waiting jobs */
    for (size_t a = 0; a < r->nactive; a++) {
        const struct rjob *j = &r->jobs[r->active[a]];
        if (j->state == R_RUNNING)
            s.running++;
        if (j->state == R_WAITING) {
            s.waiting++;
            int64_t per = job_milli_per_replica(&j->sj);
            if (per > 0 && (need == 0 || per < need))
                need = per;
        }
    }
    for (size_t k = 0; k < r->c->nnodes; k++) {
        const struct sched_node *n = &r->nodes[k];
        int64_t used = 0, freem = 0, usable = 0, whole = 0;
        if (!n->ready)
            continue;
        for (int d = 0; d < n->gpus; d++) {
            used += r->ns[k].used[d];
            freem += 1000 - r->ns[k].used[d];
            if (r->ns[k].used[d] == 0)
                whole++;
            if (need > 0 && need < 1000)
                usable += (1000 - r->ns[k].used[d]) / need * need;
        }
        if (need >= 1000)
            usable = whole / (need / 1000) * need;
        s.used_milli += used;
        s.total_milli += (int64_t)n->gpus * 1000;
        s.free_milli += freem;
        if (need > 0)
            s.frag_milli += freem - usable;
    }
    if (res->nsamples && res->samples[res->nsamples - 1].t == s.t) {
        res->samples[res->nsamples - 1] = s;
        return GQ_OK;
    }
    if (res->nsamples == res->capsamples) {
        size_t ncap = res->capsamples ? res->capsamples * 2 : 1024;
        struct sim_sample *ns = realloc(res->samples, ncap * sizeof(*ns));
        if (!ns)
            return GQ_ENOMEM;
        res->samples = ns;
        res->capsamples = ncap;
    }
    res->samples[res->nsamples++] = s;
    return GQ_OK;
}

static void progress(struct run *r, struct timespec *last, int final)
{
    struct timespec now;
    if (!r->o->progress)
        return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double dt = (double)(now.tv_sec - last->tv_sec) + (double)(now.tv_nsec - last->tv_nsec) / 1e9;
    if (final) {
        if (last->tv_sec != 0)
            fprintf(stderr, "\r%-78s\r", "");
        return;
    }
    if (dt < 0.25)
        return;
    if (last->tv_sec == 0) { /* first call: only start after one second of wall time */
        *last = now;
        return;
    }
    *last = now;
    fprintf(stderr, "\rsimulating: t=%lldh%02lldm  jobs done %lld/%zu  active %zu   ",
            (long long)(r->now / 3600), (long long)(r->now % 3600 / 60), (long long)r->ndone, r->t->njobs,
            r->nactive);
}

int sim_run(const struct sim_cluster *c, const struct sim_trace *t, const struct sim_opts *o,
            struct sim_result *out, char *err, size_t errlen)
{
    struct run r;
    struct timespec t0, t1, plast = {0, 0};
    size_t next_job = 0, next_ev = 0;
    int64_t last = 0; /* time of the last event that changed something */
    int rc;
    memset(&r, 0, sizeof(r));
    memset(out, 0, sizeof(*out));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r.c = c;
    r.t = t;
    r.o = o;
    r.res = out;
    r.err = err;
    r.errlen = errlen;
    r.wake_at = -1;
    sched_config_default(&r.cfg);
    r.grace = o->grace_s >= 0 ? o->grace_s : 30;
    if (o->min_runtime_s >= 0)
        r.cfg.min_runtime_s = o->min_runtime_s;
    out->jobs = calloc(t->njobs + 1, sizeof(*out->jobs));
    out->njobs = t->njobs;
    if (!out->jobs) {
        rc = GQ_ENOMEM;
        goto done;
    }
    if ((rc = build_core_view(&r)) || (rc = build_jobs(&r)))
        goto done;
    r.sched = sched_new();
    if (!r.sched) {
        rc = GQ_ENOMEM;
        goto done;
    }
    if (o->db_path) {
        struct store_opts so = {3600, 0, 0};
        if ((rc = store_open(o->db_path, &so, &r.st, err, errlen)))
            goto done;
    }
    for (size_t i = 0; i < t->njobs; i++) {
        if (t->jobs[i].suspend_at >= 0 && (rc = heap_push(&r.h, t->jobs[i].suspend_at, EV_SUSPEND, i, 0)))
            goto done;
        if (t->jobs[i].resume_at >= 0 && (rc = heap_push(&r.h, t->jobs[i].resume_at, EV_RESUME, i, 0)))
            goto done;
    }
    for (;;) {
        int64_t now = INT64_MAX;
        int changed = 0, wake = 0;
        if (r.h.n)
            now = r.h.a[0].t;
        if (next_job < t->njobs && t->jobs[next_job].arrival < now)
            now = t->jobs[next_job].arrival;
        if (next_ev < t->nevents && t->events[next_ev].time < now)
            now = t->events[next_ev].time;
        if (now == INT64_MAX || (o->until > 0 && now > o->until))
            break;
        r.now = now;
        if ((rc = st_txn(&r)))
            goto done;
        /* usage up to now, at the holdings of the interval ending now: before
         * this instant's completions and admissions change them */
        usage_advance(&r);
        /* node events, then completions/suspends/resumes/wakes, then arrivals */
        while (next_ev < t->nevents && t->events[next_ev].time == now) {
            if ((rc = on_node(&r, &t->events[next_ev++])))
                goto done;
            changed = 1;
        }
        while (r.h.n && r.h.a[0].t == now) {
            struct ev e = heap_pop(&r.h);
            struct rjob *j = &r.jobs[e.job];
            if (e.kind == EV_COMPLETE) {
                if (j->state != R_RUNNING || e.gen != j->gen)
                    continue; /* stale: the run it ended was preempted */
                rc = on_complete(&r, e.job);
            } else if (e.kind == EV_SUSPEND) {
                rc = on_suspend(&r, e.job);
            } else if (e.kind == EV_RESUME) {
                rc = on_resume(&r, e.job);
            } else if (e.kind == EV_STOPPED) {
                if (!j->sj.terminating || e.gen != j->gen)
                    continue; /* already stopped (node failure, suspend) */
                rc = stop_victim(&r, e.job);
            } else if (e.kind == EV_WAKE) {
                if (r.wake_at == now)
                    r.wake_at = -1;
                wake = 1;
                continue;
            }
            if (rc)
                goto done;
            changed = 1;
        }
        while (next_job < t->njobs && t->jobs[next_job].arrival == now) {
            if ((rc = on_arrival(&r, next_job++)))
                goto done;
            changed = 1;
        }
        if (changed || (wake && r.nactive)) {
            int unsatisfied = 0;
            last = now;
            for (size_t a = 0; a < r.nactive && !unsatisfied; a++) {
                const struct rjob *j = &r.jobs[r.active[a]];
                unsatisfied = j->state == R_WAITING || j->nrep < j->sj.replicas;
            }
            for (int rep = 0; unsatisfied && rep < SIM_MAX_REPEAT; rep++) {
                int pre = 0;
                if ((rc = cycle(&r, &pre)))
                    goto done;
                if (!pre)
                    break;
            }
            if ((rc = sample(&r)))
                goto done;
            /* wake-up when a running job's minimum-runtime protection ends */
            if (out->samples[out->nsamples - 1].waiting > 0) {
                int64_t w = INT64_MAX;
                int32_t top = INT32_MIN;
                for (size_t a = 0; a < r.nactive; a++) {
                    const struct rjob *j = &r.jobs[r.active[a]];
                    if (j->state == R_WAITING && j->sj.priority > top)
                        top = j->sj.priority;
                }
                for (size_t a = 0; a < r.nactive; a++) {
                    const struct rjob *j = &r.jobs[r.active[a]];
                    int64_t end = j->sj.admitted_at + r.cfg.min_runtime_s;
                    if (j->state == R_RUNNING && !j->sj.terminating && j->sj.preemptible && j->sj.priority < top &&
                        end > now &&
                        end < w)
                        w = end;
                }
                if (w != INT64_MAX && (r.wake_at < 0 || w < r.wake_at)) {
                    r.wake_at = w;
                    if ((rc = heap_push(&r.h, w, EV_WAKE, 0, 0)))
                        goto done;
                }
            }
        }
        if (++r.txn_cycles >= SIM_STORE_BATCH && (rc = st_commit(&r)))
            goto done;
        progress(&r, &plast, 0);
    }
    out->end_time = last;
    /* final states; explanations of jobs that never ran go to the store */
    for (size_t i = 0; i < t->njobs; i++) {
        struct rjob *j = &r.jobs[i];
        struct sim_job_out *jo = &out->jobs[i];
        switch (j->state) {
        case R_PENDING: jo->final = SIM_F_NEVER_ARRIVED; break;
        case R_DONE: jo->final = jo->timed_out ? SIM_F_TIMED_OUT : SIM_F_DONE; break;
        case R_RUNNING: jo->final = SIM_F_RUNNING; break;
        case R_SUSPENDED: jo->final = SIM_F_SUSPENDED; break;
        default:
            jo->final = SIM_F_WAITING;
            stop_waiting(&r, i);
            if (r.st) { /* its last explanation; the state stays (Queued or Preempted) */
                struct store_transition tr = {j->sstate, NULL, jo->reason, NULL, NULL, 0};
                if ((rc = store_job_transition(r.st, j->key, &tr, ms(&r, r.now), err, errlen)))
                    goto done;
            }
            break;
        }
    }
    if ((rc = st_commit(&r)))
        goto done;
done:
    progress(&r, &plast, 1);
    if (rc && r.in_txn)
        store_rollback_cycle(r.st);
    store_close(r.st);
    apply_settle_release(&r.settle);
    sched_free(r.sched);
    if (r.jobs)
        for (size_t i = 0; i < t->njobs; i++) {
            free(r.jobs[i].rep);
            free(r.jobs[i].pv);
            ctl_placement_release(&r.jobs[i].pl);
        }
    free(r.jobs);
    free(r.active);
    free(r.snapjobs);
    free(r.snapmap);
    free(r.snapidx);
    free(r.nodes);
    free(r.ns);
    free(r.labels);
    free(r.taints);
    free(r.pools);
    free(r.teams);
    free(r.quotas);
    free(r.team_gpus);
    free(r.h.a);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (rc)
        sim_result_release(out);
    return rc;
}

void sim_result_release(struct sim_result *r)
{
    if (!r)
        return;
    free(r->samples);
    free(r->jobs);
    memset(r, 0, sizeof(*r));
}
