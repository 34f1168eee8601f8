/* Property test for the scheduling core: seeded random clusters and job
 * streams; after every cycle the decisions are applied and the invariants
 * checked — no node over capacity on any resource or device, no partial gang,
 * required topology and spread respected, node eligibility (ready, type,
 * memory, taints) respected, quota within nominal + borrowing limits, no
 * Inference preempted for a non-Inference job, victims preemptible (or borrowing) and past
 * the minimum runtime, and the same snapshot giving the same decisions.
 * A second property (test_keep_whole): a single-replica GPU request without
 * topology preference breaks a whole node only when no node in use can take
 * it or the shape distribution prices the break (sched_cycle and the index). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gq.h"
#include "sched.h"

#define PN 12
#define PJ 48
#define PR 6

static const char *const prods[3] = {"H100", "A100", "T4"};
static const char *const racks[4] = {"r0", "r1", "r2", "r3"};
static const char *const zones[2] = {"z0", "z1"};

struct world {
    struct sched_config cfg;
    struct sched_node nodes[PN];
    struct sched_label labels[PN][3];
    char names[PN][16];
    struct sched_taint taint;
    struct sched_toleration tol;
    int nn;
    struct sched_pool pools[2];
    int np;
    struct sched_team teams[3];
    struct sched_quota quota[3][2];
    int nt;
    struct sched_job jobs[PJ];
    struct sched_replica place[PJ][PR];
    char ids[PJ][16];
    int nj;
    int next_id;
    int64_t now;
};

static uint64_t rs;
static uint64_t rnd(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int rn(int n) { return (int)(rnd() % (uint64_t)n); }

static void make_world(struct world *w)
{
    memset(w, 0, sizeof(*w));
    sched_config_default(&w->cfg);
    w->cfg.min_runtime_s = rn(2) ? 0 : 600;
    w->cfg.policy = (enum sched_policy)rn(4);
    w->now = 10000;
    w->taint = (struct sched_taint){"dedicated", "x", SCHED_NO_SCHEDULE};
    w->tol = (struct sched_toleration){"dedicated", "x", 0, SCHED_NO_SCHEDULE};
    w->np = rn(3);
    for (int p = 0; p < w->np; p++) {
        w->pools[p].name = p ? "batch" : "inference";
        w->pools[p].home_classes = p ? (SCHED_CLASS_BIT(SCHED_BATCH) | SCHED_CLASS_BIT(SCHED_TRAINING))
                                     : SCHED_CLASS_BIT(SCHED_INFERENCE);
        w->pools[p].protected_pool = p == 0 && rn(2);
        w->pools[p].reserve_gpus = rn(3);
    }
    w->nn = 2 + rn(PN - 1);
    int ntypes = 1 + rn(3);
    for (int i = 0; i < w->nn; i++) {
        struct sched_node *n = &w->nodes[i];
        snprintf(w->names[i], sizeof(w->names[i]), "n%d", i);
        n->name = w->names[i];
        n->gpus = rn(5) ? (1 << rn(4)) : 0;
        n->gpu_product = n->gpus ? prods[rn(ntypes)] : NULL;
        n->gpu_mem_mib = rn(2) ? 81920 : 16384;
        n->cpu_milli = 4000 * (1 + rn(8));
        n->mem_bytes = (int64_t)(8 + rn(64)) << 30;
        n->ready = rn(12) != 0;
        n->unschedulable = rn(15) == 0;
        n->pool = w->np ? rn(w->np + 1) - 1 : -1;
        if (rn(8) == 0) {
            n->taints = &w->taint;
            n->ntaints = 1;
        }
        if (rn(4) == 0) {
            n->foreign_cpu_milli = 1000 * rn(4);
            for (int d = 0; d < n->gpus; d++)
                n->foreign_gpu_milli[d] = (uint16_t)(rn(4) == 0 ? 250 * rn(5) : 0);
        }
        int nl = 0;
        w->labels[i][nl++] = (struct sched_label){"kubernetes.io/hostname", w->names[i]};
        if (rn(6))
            w->labels[i][nl++] = (struct sched_label){"topology.gangq.io/rack", racks[rn(4)]};
        if (rn(6))
            w->labels[i][nl++] = (struct sched_label){"topology.kubernetes.io/zone", zones[rn(2)]};
        n->labels = w->labels[i];
        n->nlabels = nl;
    }
    w->nt = rn(4);
    for (int t = 0; t < w->nt; t++) {
        static const char *const tn[3] = {"a", "b", "c"};
        int nq = rn(3);
        for (int e = 0; e < nq; e++) {
            w->quota[t][e].gpu_type = e == 0 ? "*" : prods[rn(3)];
            w->quota[t][e].gpus = rn(20);
            w->quota[t][e].borrowing_limit = rn(3) ? -1 : rn(8);
            w->quota[t][e].lending_limit = rn(3) ? -1 : rn(8);
        }
        w->teams[t] = (struct sched_team){tn[t], rn(2) ? "co" : NULL, 1 + rn(3), w->quota[t],
                                          nq, (double)rn(100000)};
    }
}

/* node selectors drawn for some jobs (over the rack and zone labels) */
static const struct sched_label sel_z0[] = {{"topology.kubernetes.io/zone", "z0"}};
static const struct sched_label sel_r1[] = {{"topology.gangq.io/rack", "r1"}};
static const struct sched_label sel_z1r2[] = {{"topology.kubernetes.io/zone", "z1"},
                                              {"topology.gangq.io/rack", "r2"}};
static const struct { const struct sched_label *l; int n; } sels[3] = {
    {sel_z0, 1}, {sel_r1, 1}, {sel_z1r2, 2}};

static void add_jobs(struct world *w, int k)
{
    for (int x = 0; x < k && w->nj < PJ; x++) {
        int j = w->nj++;
        struct sched_job *jb = &w->jobs[j];
        memset(jb, 0, sizeof(*jb));
        snprintf(w->ids[j], sizeof(w->ids[j]), "j%d", w->next_id++);
        jb->id = w->ids[j];
        jb->team = w->nt ? rn(w->nt + 1) - 1 : -1;
        jb->cls = (enum sched_class)rn(3);
        jb->priority = rn(4) * 10;
        jb->preemptible = rn(4) != 0;
        jb->gang = jb->cls == SCHED_INFERENCE ? rn(3) == 0 : 1;
        jb->replicas = 1 + rn(PR);
        int kind = rn(6);
        if (kind == 0)
            jb->req.gpu_milli = 100 * (1 + rn(9));
        else if (kind != 1)
            jb->req.gpus = 1 << rn(4);
        jb->req.cpu_milli = 500 * (1 + rn(8));
        jb->req.mem_bytes = (int64_t)(1 + rn(8)) << 30;
        if (rn(3) == 0) {
            jb->req.types[0] = prods[rn(3)];
            jb->req.ntypes = 1;
            if (rn(2))
                jb->req.types[jb->req.ntypes++] = prods[rn(3)];
        }
        jb->req.min_gpu_mem_gib = rn(6) == 0 ? 40 : 0;
        if (rn(8) == 0) {
            jb->tols = &w->tol;
            jb->ntols = 1;
        }
        jb->topo_required = rn(3) == 0 ? 1 + rn(3) : -1; /* block, rack or node */
        jb->topo_preferred = rn(5) == 0 ? 2 : -1;
        jb->topo_spread = rn(6) == 0 ? 3 - rn(2) : -1;
        jb->pool = (w->np && rn(6) == 0) ? rn(w->np) : -1;
        jb->enqueue_time = w->now - rn(1000);
        jb->state = SCHED_JOB_WAITING;
        if (rn(5) == 0) {
            int q = rn(3);
            jb->node_selector = sels[q].l;
            jb->nnode_selector = sels[q].n;
        }
    }
}

static void snap_of(struct world *w, struct sched_snapshot *s)
{
    memset(s, 0, sizeof(*s));
    s->config = &w->cfg;
    s->now = w->now;
    s->nodes = w->nodes;
    s->nnodes = w->nn;
    s->pools = w->pools;
    s->npools = w->np;
    s->teams = w->teams;
    s->nteams = w->nt;
    s->jobs = w->jobs;
    s->njobs = w->nj;
}

static const char *label(const struct sched_node *n, const char *key)
{
    for (int i = 0; i < n->nlabels; i++)
        if (!strcmp(n->labels[i].key, key))
            return n->labels[i].value;
    return NULL;
}

/* same domain at level l (missing label: the node alone) */
static int same_dom(const struct world *w, int a, int b, int l)
{
    if (a == b)
        return 1;
    const char *x = label(&w->nodes[a], w->cfg.levels[l].label_key);
    const char *y = label(&w->nodes[b], w->cfg.levels[l].label_key);
    return x && y && !strcmp(x, y);
}

static int64_t milli_of(const struct sched_request *r)
{
    return r->gpus > 0 ? (int64_t)r->gpus * 1000 : r->gpu_milli;
}

static int fails;
#define CHECK(c, ...)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "seed %llu cycle %d: ", (unsigned long long)seed, cyc);     \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            fails++;                                                                   \
        }                                                                              \
    } while (0)

static void check_capacity(struct world *w, uint64_t seed, int cyc)
{
    for (int i = 0; i < w->nn; i++) {
        const struct sched_node *n = &w->nodes[i];
        int64_t cpu = n->foreign_cpu_milli, mem = n->foreign_mem_bytes;
        int dev[32];
        for (int d = 0; d < 32; d++)
            dev[d] = n->foreign_gpu_milli[d];
        for (int j = 0; j < w->nj; j++) {
            const struct sched_job *jb = &w->jobs[j];
            for (int p = 0; p < jb->nplaced; p++) {
                if (jb->placement[p].node != i)
                    continue;
                cpu += jb->req.cpu_milli;
                mem += jb->req.mem_bytes;
                for (int d = 0; d < 32; d++)
                    if (jb->placement[p].devs & (1u << d))
                        dev[d] += jb->req.gpus > 0 ? 1000 : jb->req.gpu_milli;
            }
        }
        CHECK(cpu <= n->cpu_milli || cpu == n->foreign_cpu_milli, "node %d cpu %lld > %lld", i,
              (long long)cpu, (long long)n->cpu_milli);
        CHECK(mem <= n->mem_bytes, "node %d memory over", i);
        for (int d = 0; d < 32; d++) {
            int foreign_over = n->foreign_gpu_milli[d] > 1000;
            CHECK(dev[d] <= 1000 || foreign_over, "node %d device %d at %d milli", i, d, dev[d]);
            CHECK(d < n->gpus || dev[d] == 0, "node %d device %d does not exist", i, d);
        }
    }
}

static void check_quota(struct world *w, uint64_t seed, int cyc)
{
    for (int t = 0; t < w->nt; t++) {
        const struct sched_team *tm = &w->teams[t];
        if (tm->nquota == 0)
            continue;
        int64_t used[2] = {0, 0};
        for (int j = 0; j < w->nj; j++) {
            const struct sched_job *jb = &w->jobs[j];
            if (jb->team != t)
                continue;
            for (int p = 0; p < jb->nplaced; p++) {
                if (milli_of(&jb->req) == 0)
                    continue;
                const char *prod = w->nodes[jb->placement[p].node].gpu_product;
                int e = -1;
                for (int q = 0; q < tm->nquota && e < 0; q++)
                    if (prod && !strcmp(tm->quota[q].gpu_type, prod))
                        e = q;
                if (e < 0)
                    for (int q = 0; q < tm->nquota && e < 0; q++)
                        if (!strcmp(tm->quota[q].gpu_type, "*"))
                            e = q;
                CHECK(e >= 0, "team %d uses %s without a quota entry", t, prod ? prod : "?");
                if (e >= 0)
                    used[e] += milli_of(&jb->req);
            }
        }
        for (int e = 0; e < tm->nquota; e++) {
            const struct sched_quota *q = &tm->quota[e];
            int64_t cap = q->gpus * 1000;
            if (q->borrowing_limit >= 0)
                CHECK(used[e] <= cap + q->borrowing_limit * 1000,
                      "team %d entry %d used %lld > nominal+borrowing limit", t, e,
                      (long long)used[e]);
            int64_t lend = 0;
            if (tm->cohort)
                for (int o = 0; o < w->nt; o++) {
                    if (o == t || !w->teams[o].cohort)
                        continue;
                    for (int f = 0; f < w->teams[o].nquota; f++) {
                        const struct sched_quota *oq = &w->teams[o].quota[f];
                        if (strcmp(oq->gpu_type, q->gpu_type))
                            continue;
                        lend += oq->lending_limit < 0 ? oq->gpus
                                                      : GQ_MIN(oq->gpus, oq->lending_limit);
                    }
                }
            CHECK(used[e] <= cap + lend * 1000, "team %d entry %d used %lld > nominal %lld + lendable %lld",
                  t, e, (long long)used[e], (long long)cap, (long long)lend * 1000);
        }
    }
}

/* fully idle devices in pool p on usable nodes (running jobs + foreign usage) */
static int pool_idle(const struct world *w, int p)
{
    int idle = 0;
    for (int i = 0; i < w->nn; i++) {
        const struct sched_node *n = &w->nodes[i];
        if (n->pool != p || !n->ready || n->unschedulable)
            continue;
        for (int d = 0; d < n->gpus; d++) {
            int used = n->foreign_gpu_milli[d];
            for (int j = 0; j < w->nj; j++)
                for (int r = 0; r < w->jobs[j].nplaced; r++)
                    if (w->jobs[j].placement[r].node == i &&
                        (w->jobs[j].placement[r].devs & (1u << d)))
                        used += 1;
            idle += used == 0;
        }
    }
    return idle;
}

static int stopping_for(const struct world *w, int j)
{
    for (int x = 0; x < w->nj; x++)
        if (w->jobs[x].terminating && w->jobs[x].state == SCHED_JOB_RUNNING &&
            w->jobs[x].terminating_for == j)
            return 1;
    return 0;
}

static int tolerated(const struct sched_node *n, const struct sched_job *jb)
{
    if (n->ntaints == 0)
        return 1;
    return jb->ntols > 0;
}

static void check_and_apply(struct world *w, struct sched_result *r, uint64_t seed, int cyc)
{
    int preempted[PJ] = {0};
    for (int x = 0; x < r->n; x++) {
        const struct sched_decision *d = &r->d[x];
        CHECK(d->job >= 0 && d->job < w->nj, "decision job out of range");
        if (d->kind != SCHED_PREEMPT)
            continue;
        const struct sched_job *v = &w->jobs[d->job], *f = &w->jobs[d->for_job];
        CHECK(v->state == SCHED_JOB_RUNNING && v->nplaced > 0, "victim %s not running", v->id);
        /* a non-preemptible job loses only what it borrows */
        CHECK(v->preemptible || (d->message && (strstr(d->message, "reclaiming quota lent to team") ||
                                                strstr(d->message, "borrowing protected pool"))),
              "victim %s not preemptible", v->id);
        CHECK(!v->terminating, "victim %s preempted again while stopping", v->id);
        CHECK(f->state != SCHED_JOB_WAITING || !stopping_for(w, d->for_job),
              "%s takes new victims while its victims are stopping", f->id);
        CHECK(!(v->cls == SCHED_INFERENCE && f->cls != SCHED_INFERENCE),
              "Inference %s preempted for non-Inference %s", v->id, f->id);
        CHECK(f->cls == SCHED_INFERENCE || w->now - v->admitted_at >= w->cfg.min_runtime_s,
              "victim %s younger than min runtime", v->id);
        CHECK(d->message && strstr(d->message, f->id), "victim reason lacks the preemptor");
        preempted[d->job] = 1;
    }
    for (int x = 0; x < r->n; x++) {
        const struct sched_decision *d = &r->d[x];
        if (d->kind == SCHED_WAIT) {
            CHECK(d->message && d->message[0], "wait without explanation");
            CHECK(d->position >= 1, "wait without position");
            continue;
        }
        if (d->kind != SCHED_ADMIT)
            continue;
        struct sched_job *jb = &w->jobs[d->job];
        int have = jb->state == SCHED_JOB_RUNNING ? jb->nplaced : 0;
        CHECK(!jb->gang || (have == 0 && d->nrep == jb->replicas), "partial gang %s: %d of %d",
              jb->id, d->nrep, jb->replicas);
        CHECK(have + d->nrep <= jb->replicas, "too many replicas for %s", jb->id);
        for (int p = 0; p < d->nrep; p++) {
            int ni = d->rep[p].node;
            const struct sched_node *n = &w->nodes[ni];
            CHECK(n->ready && !n->unschedulable, "%s on unusable node %d", jb->id, ni);
            CHECK(tolerated(n, jb), "%s on tainted node %d", jb->id, ni);
            for (int t = 0; t < jb->nnode_selector; t++) {
                const char *v = label(n, jb->node_selector[t].key);
                CHECK(v && !strcmp(v, jb->node_selector[t].value),
                      "%s on node %d that its node selector excludes", jb->id, ni);
            }
            int bits = __builtin_popcount(d->rep[p].devs);
            CHECK(jb->req.gpus > 0 ? bits == jb->req.gpus : bits == (jb->req.gpu_milli > 0),
                  "%s wrong device count", jb->id);
            if (milli_of(&jb->req) > 0 && jb->req.ntypes > 0) {
                int ok = 0;
                for (int t = 0; t < jb->req.ntypes; t++)
                    ok |= n->gpu_product && !strcmp(n->gpu_product, jb->req.types[t]);
                CHECK(ok, "%s on wrong product", jb->id);
            }
            if (milli_of(&jb->req) > 0 && jb->req.min_gpu_mem_gib)
                CHECK(n->gpu_mem_mib >= jb->req.min_gpu_mem_gib * 1024LL, "%s GPU memory", jb->id);
            if (w->np > 0 && jb->pool >= 0)
                CHECK(n->pool == jb->pool, "%s outside its pool", jb->id);
            if (w->np > 0 && jb->pool < 0 && n->pool >= 0) {
                const struct sched_pool *pl = &w->pools[n->pool];
                CHECK((pl->home_classes & SCHED_CLASS_BIT(jb->cls)) || pl->protected_pool,
                      "%s in a closed pool", jb->id);
            }
        }
        int all = have + d->nrep;
        struct sched_replica tmp[PR];
        for (int p = 0; p < have; p++)
            tmp[p] = jb->placement[p];
        for (int p = 0; p < d->nrep; p++)
            tmp[have + p] = d->rep[p];
        if (jb->topo_required >= 0)
            for (int p = 1; p < all; p++)
                CHECK(same_dom(w, tmp[0].node, tmp[p].node, jb->topo_required),
                      "%s breaks required level %d", jb->id, jb->topo_required);
        if (jb->topo_spread >= 0)
            for (int p = 0; p < all; p++)
                for (int q = p + 1; q < all; q++)
                    CHECK(!same_dom(w, tmp[p].node, tmp[q].node, jb->topo_spread),
                          "%s breaks spread level %d", jb->id, jb->topo_spread);
        /* apply */
        for (int p = 0; p < d->nrep && jb->nplaced < PR; p++)
            w->place[d->job][jb->nplaced++] = d->rep[p];
        jb->placement = w->place[d->job];
        if (jb->state != SCHED_JOB_RUNNING)
            jb->admitted_at = w->now;
        jb->state = SCHED_JOB_RUNNING;
        /* borrowing a protected pool leaves its reserve idle */
        for (int p = 0; p < d->nrep && milli_of(&jb->req) > 0; p++) {
            int pn = w->nodes[d->rep[p].node].pool;
            if (pn < 0 || jb->pool >= 0 || !w->pools[pn].protected_pool ||
                (w->pools[pn].home_classes & SCHED_CLASS_BIT(jb->cls)))
                continue;
            CHECK(pool_idle(w, pn) >= w->pools[pn].reserve_gpus,
                  "%s borrowed pool %d below its reserve", jb->id, pn);
        }
    }
    /* admissions happen while victims still run: capacity must hold now */
    check_capacity(w, seed, cyc);
    check_quota(w, seed, cyc);
    /* victims stopping since the last cycle are gone; new victims stop now
     * or keep terminating (holding capacity) for one more cycle */
    for (int j = 0; j < w->nj; j++)
        if (w->jobs[j].terminating && !preempted[j]) {
            w->jobs[j].terminating = 0;
            w->jobs[j].state = SCHED_JOB_WAITING;
            w->jobs[j].nplaced = 0;
        }
    for (int x = 0; x < r->n; x++) {
        const struct sched_decision *d = &r->d[x];
        if (d->kind != SCHED_PREEMPT)
            continue;
        struct sched_job *v = &w->jobs[d->job];
        if (rn(2)) {
            v->terminating = 1;
            v->terminating_for = d->for_job;
        } else {
            v->state = SCHED_JOB_WAITING;
            v->nplaced = 0;
        }
    }
}

static int same_result(const struct sched_result *a, const struct sched_result *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++) {
        const struct sched_decision *x = &a->d[i], *y = &b->d[i];
        if (x->kind != y->kind || x->job != y->job || x->for_job != y->for_job ||
            x->position != y->position || x->nrep != y->nrep || strcmp(x->message, y->message))
            return 0;
        for (int r = 0; r < x->nrep; r++)
            if (x->rep[r].node != y->rep[r].node || x->rep[r].devs != y->rep[r].devs)
                return 0;
    }
    return 1;
}

/* Backfill into a reserved node's spare never delays its job: one 8-GPU
 * node with random running work that has no run limit, a blocked job a
 * (the queue's first) that fits the node once enough of that work ends, and
 * random later jobs without limits. Whatever they are given on the node
 * (all of it reserved for a), for every subset R of the earlier work that
 * may still run when a would start without them (a fits beside R), a also
 * fits beside R and them: no end order of the node's work lets them hold a
 * back. Devices count whole; CPU and memory by their sums. */
static int fits_beside(const struct world *w, const struct sched_job *a, uint32_t rmask, int nrun,
                       const int *extra, int nextra)
{
    const struct sched_node *n = &w->nodes[0];
    int64_t cpu = 0, mem = 0;
    int dev = 0;
    for (int j = 0; j < nrun; j++)
        if (rmask & (1u << j)) {
            cpu += w->jobs[j].req.cpu_milli;
            mem += w->jobs[j].req.mem_bytes;
            dev += w->jobs[j].req.gpus;
        }
    for (int x = 0; x < nextra; x++) {
        cpu += w->jobs[extra[x]].req.cpu_milli;
        mem += w->jobs[extra[x]].req.mem_bytes;
        dev += w->jobs[extra[x]].req.gpus;
    }
    return cpu + a->req.cpu_milli <= n->cpu_milli && mem + a->req.mem_bytes <= n->mem_bytes &&
           dev + a->req.gpus <= n->gpus;
}

/* w's next job: id, one replica of a Batch gang at priority 10, no team,
 * pool or topology, waiting since enq. */
static struct sched_job *spare_job(struct world *w, const char *id, int gpus, int64_t cpu_milli,
                                   int64_t mem_bytes, int64_t enq)
{
    int j = w->nj++;
    struct sched_job *jb = &w->jobs[j];
    snprintf(w->ids[j], sizeof(w->ids[j]), "%s", id);
    jb->id = w->ids[j];
    jb->team = -1;
    jb->cls = SCHED_BATCH;
    jb->priority = 10;
    jb->preemptible = 1;
    jb->gang = 1;
    jb->replicas = 1;
    jb->req.gpus = gpus;
    jb->req.cpu_milli = cpu_milli;
    jb->req.mem_bytes = mem_bytes;
    jb->topo_required = jb->topo_preferred = jb->topo_spread = -1;
    jb->pool = -1;
    jb->enqueue_time = enq;
    jb->state = SCHED_JOB_WAITING;
    return jb;
}

static void test_backfill_spare_safe(void **st)
{
    (void)st;
    struct sched *ctx = sched_new();
    assert_non_null(ctx);
    static struct world w;
    int cases = 3000, admitted_spare = 0, cyc = 0;
    for (int c = 0; c < cases && fails < 20; c++) {
        uint64_t seed = 70000 + (uint64_t)c;
        rs = seed;
        memset(&w, 0, sizeof(w));
        sched_config_default(&w.cfg);
        w.cfg.preemption = 0;
        w.now = 10000;
        w.nn = 1;
        struct sched_node *n = &w.nodes[0];
        snprintf(w.names[0], sizeof(w.names[0]), "n0");
        n->name = w.names[0];
        n->gpus = 8;
        n->gpu_product = "H100";
        n->gpu_mem_mib = 81920;
        n->cpu_milli = 16000 + 4000 * rn(8);
        n->mem_bytes = (int64_t)(32 + rn(64)) << 30;
        n->ready = 1;
        n->pool = -1;
        w.labels[0][0] = (struct sched_label){"kubernetes.io/hostname", w.names[0]};
        n->labels = w.labels[0];
        n->nlabels = 1;
        /* running work on distinct devices, no limits */
        int nrun = 1 + rn(5), dev = 0;
        int64_t cpu = 0, mem = 0;
        char id[16];
        for (int j = 0; j < nrun; j++) {
            int g = rn(4);
            int64_t jc = 500 * (1 + rn(12)), jm = (int64_t)(1 + rn(12)) << 30;
            if (dev + g > n->gpus || cpu + jc > n->cpu_milli || mem + jm > n->mem_bytes)
                break;
            snprintf(id, sizeof(id), "r%d", j);
            struct sched_job *jb = spare_job(&w, id, g, jc, jm, w.now - 5000);
            jb->state = SCHED_JOB_RUNNING;
            jb->admitted_at = w.now - 100;
            w.place[w.nj - 1][0] = (struct sched_replica){0, g ? ((1u << g) - 1u) << dev : 0};
            jb->placement = w.place[w.nj - 1];
            jb->nplaced = 1;
            dev += g;
            cpu += jc;
            mem += jm;
        }
        nrun = w.nj;
        /* a: fits the node empty, not now */
        int ia = w.nj, ag = 1 + rn(8); /* drawn in this order: gpus, cpu, memory */
        int64_t ac = 500 * (1 + rn(2 * (int)(n->cpu_milli / 1000) - 1));
        int64_t am = (int64_t)(1 + rn((int)(n->mem_bytes >> 30))) << 30;
        const struct sched_job *a = spare_job(&w, "a", ag, ac, am, w.now - 1000);
        if (a->req.gpus + dev <= n->gpus && a->req.cpu_milli + cpu <= n->cpu_milli &&
            a->req.mem_bytes + mem <= n->mem_bytes)
            continue; /* fits now: nothing reserved */
        /* later jobs without limits */
        int nlater = 1 + rn(6);
        for (int x = 0; x < nlater; x++) {
            snprintf(id, sizeof(id), "s%d", x);
            int g = rn(4);
            int64_t jc = 500 * (1 + rn(8)), jm = (int64_t)(1 + rn(8)) << 30;
            spare_job(&w, id, g, jc, jm, w.now - 900 + x);
        }
        struct sched_snapshot snap;
        snap_of(&w, &snap);
        struct sched_result *r = NULL;
        char err[256];
        int rc = sched_cycle(ctx, &snap, &r, err, sizeof(err));
        CHECK(rc == 0, "cycle failed: %s", err);
        if (rc)
            continue;
        int extra[8], nextra = 0;
        for (int k = 0; k < r->n; k++) {
            const struct sched_decision *d = &r->d[k];
            CHECK(d->job != ia || d->kind != SCHED_ADMIT, "a admitted while it does not fit");
            if (d->kind == SCHED_ADMIT && d->job > ia && nextra < 8)
                extra[nextra++] = d->job;
        }
        admitted_spare += nextra;
        for (uint32_t m = 0; m < (1u << nrun); m++)
            if (fits_beside(&w, &w.jobs[ia], m, nrun, NULL, 0))
                CHECK(fits_beside(&w, &w.jobs[ia], m, nrun, extra, nextra),
                      "the jobs given a's spare would hold it back (running set 0x%x, %d of them)", m, nextra);
        sched_result_free(r);
    }
    sched_free(ctx);
    fprintf(stderr, "spare property: %d cases, %d later jobs admitted beside a reservation\n", cases,
            admitted_spare);
    assert_true(admitted_spare > cases / 4); /* the generator gives the rule work */
    assert_int_equal(fails, 0);
}

static void test_properties(void **st)
{
    (void)st;
    int cases = 3000, cycles = 6;
    const char *env = getenv("SCHED_PROP_CASES");
    int64_t v;
    if (env && gq_parse_i64(env, (size_t)-1, &v) == 0 && v > 0)
        cases = (int)v;
    struct sched *ctx = sched_new();
    assert_non_null(ctx);
    static struct world w;
    int admitted = 0, preempts = 0;
    for (int c = 0; c < cases && fails < 20; c++) {
        uint64_t seed = 1000 + (uint64_t)c;
        rs = seed;
        make_world(&w);
        add_jobs(&w, 4 + rn(16));
        for (int cyc = 0; cyc < cycles; cyc++) {
            struct sched_snapshot s;
            snap_of(&w, &s);
            struct sched_result *r = NULL, *r2 = NULL;
            char err[256];
            int rc = sched_cycle(ctx, &s, &r, err, sizeof(err));
            CHECK(rc == 0, "cycle failed: %s", err);
            if (rc)
                break;
            if (cyc == 0) {
                rc = sched_cycle(NULL, &s, &r2, err, sizeof(err));
                CHECK(rc == 0 && same_result(r, r2), "non-deterministic decisions");
                sched_result_free(r2);
            }
            admitted += r->stats.admitted;
            preempts += r->stats.preempted;
            check_and_apply(&w, r, seed, cyc);
            sched_result_free(r);
            /* time passes: some running jobs finish, new ones arrive */
            w.now += rn(900);
            for (int j = 0; j < w.nj; j++) {
                if (w.jobs[j].state == SCHED_JOB_RUNNING && !w.jobs[j].terminating && rn(4) == 0) {
                    /* keep terminating_for indices valid across the move */
                    for (int x = 0; x < w.nj; x++) {
                        if (w.jobs[x].terminating_for == j)
                            w.jobs[x].terminating_for = -1;
                    }
                    for (int x = 0; x < w.nj; x++) {
                        if (w.jobs[x].terminating_for == w.nj - 1)
                            w.jobs[x].terminating_for = j;
                    }
                    w.jobs[j] = w.jobs[w.nj - 1];
                    memcpy(w.place[j], w.place[w.nj - 1], sizeof(w.place[j]));
                    memcpy(w.ids[j], w.ids[w.nj - 1], sizeof(w.ids[j]));
                    w.jobs[j].id = w.ids[j];
                    if (w.jobs[j].nplaced)
                        w.jobs[j].placement = w.place[j];
                    w.nj--;
                    j--;
                }
            }
            add_jobs(&w, rn(6));
        }
    }
    sched_free(ctx);
    fprintf(stderr, "property test: %d cases, %d admissions, %d preemptions\n", cases, admitted,
            preempts);
    assert_true(admitted > cases); /* the generator produces real work */
    assert_true(preempts > 0);
    assert_int_equal(fails, 0);
}

/* Preemption histories: over random clusters and several cycles, victims
 * either keep terminating for a cycle (terminating_for) or stop at once and
 * wait with preempted_for naming their preemptor, and each preemptor carries
 * the victims preempted for it since it was last admitted
 * (preempted_victims), as the controller and the simulator pass them.
 * Invariants: no job is preempted twice for the same preemptor while that
 * preemptor waits, and no node is ever over-committed. */
#define PV 64
static char claim_pf[PJ][16]; /* preempted_for storage, moved with its job */
static char claim_pv[PJ][PV][16]; /* preempted_victims storage, moved with its job */
static const char *claim_pvp[PJ][PV];

/* p's victims: pointers into claim_pv[p] */
static void claim_pv_bind(struct world *w, int p)
{
    for (int k = 0; k < w->jobs[p].npreempted_victims; k++)
        claim_pvp[p][k] = claim_pv[p][k];
    w->jobs[p].preempted_victims = w->jobs[p].npreempted_victims ? claim_pvp[p] : NULL;
}

/* the caller's record of a PREEMPT: the victim joins its preemptor's list */
static void claim_pv_add(struct world *w, int p, const char *vid)
{
    struct sched_job *jb = &w->jobs[p];
    for (int k = 0; k < jb->npreempted_victims; k++)
        if (!strcmp(claim_pv[p][k], vid))
            return;
    if (jb->npreempted_victims < PV)
        gq_strlcpy(claim_pv[p][jb->npreempted_victims++], vid, sizeof(claim_pv[p][0]));
    claim_pv_bind(w, p);
}

static void claim_move(struct world *w, int to, int from)
{
    for (int x = 0; x < w->nj; x++) {
        if (w->jobs[x].terminating_for == to)
            w->jobs[x].terminating_for = -1;
    }
    for (int x = 0; x < w->nj; x++) {
        if (w->jobs[x].terminating_for == from)
            w->jobs[x].terminating_for = to;
    }
    w->jobs[to] = w->jobs[from];
    memcpy(w->place[to], w->place[from], sizeof(w->place[to]));
    memcpy(w->ids[to], w->ids[from], sizeof(w->ids[to]));
    memcpy(claim_pf[to], claim_pf[from], sizeof(claim_pf[to]));
    memcpy(claim_pv[to], claim_pv[from], sizeof(claim_pv[to]));
    w->jobs[to].id = w->ids[to];
    claim_pv_bind(w, to);
    if (w->jobs[to].preempted_for)
        w->jobs[to].preempted_for = claim_pf[to];
    if (w->jobs[to].nplaced)
        w->jobs[to].placement = w->place[to];
}

static void test_preemptor_claims(void **st)
{
    (void)st;
    fails = 0; /* each property counts its own violations */
    int cases = 2000, cycles = 10;
    const char *env = getenv("SCHED_PROP_CASES");
    int64_t v;
    if (env && gq_parse_i64(env, (size_t)-1, &v) == 0 && v > 0)
        cases = (int)v;
    struct sched *ctx = sched_new();
    assert_non_null(ctx);
    static struct world w;
    /* (victim, preemptor) pairs preempted while that preemptor waits */
    static struct { char v[16], p[16]; } pairs[4096];
    int npairs = 0, preempts = 0, admitted = 0;
    for (int c = 0; c < cases && fails < 20; c++) {
        uint64_t seed = 500000 + (uint64_t)c;
        rs = seed;
        make_world(&w);
        w.cfg.min_runtime_s = rn(3) ? 5 : 0;
        add_jobs(&w, 8 + rn(20));
        npairs = 0;
        for (int cyc = 0; cyc < cycles; cyc++) {
            struct sched_snapshot s;
            snap_of(&w, &s);
            struct sched_result *r = NULL;
            char err[256];
            int rc = sched_cycle(ctx, &s, &r, err, sizeof(err));
            CHECK(rc == 0, "cycle failed: %s", err);
            if (rc)
                break;
            int64_t tseed = -1; /* SCHED_PROP_TRACE=seed prints that case's decisions */
            const char *tr = getenv("SCHED_PROP_TRACE");
            if (tr && gq_parse_i64(tr, (size_t)-1, &tseed) == 0 && (uint64_t)tseed == seed)
                for (int x = 0; x < r->n; x++)
                    fprintf(stderr, "c%d %s %s%s%s: %s\n", cyc, sched_decision_name(r->d[x].kind),
                            w.ids[r->d[x].job], r->d[x].for_job >= 0 ? " for " : "",
                            r->d[x].for_job >= 0 ? w.ids[r->d[x].for_job] : "", r->d[x].message);
            for (int x = 0; x < r->n; x++) {
                const struct sched_decision *d = &r->d[x];
                if (d->kind == SCHED_PREEMPT) {
                    const char *vid = w.ids[d->job], *pid = w.ids[d->for_job];
                    for (int k = 0; k < npairs; k++)
                        CHECK(strcmp(pairs[k].v, vid) || strcmp(pairs[k].p, pid),
                              "%s preempted twice for %s while it waits", vid, pid);
                    if (npairs < 4096) {
                        gq_strlcpy(pairs[npairs].v, vid, sizeof(pairs[npairs].v));
                        gq_strlcpy(pairs[npairs].p, pid, sizeof(pairs[npairs].p));
                        npairs++;
                    }
                    claim_pv_add(&w, d->for_job, vid);
                    preempts++;
                } else if (d->kind == SCHED_ADMIT) {
                    /* placed: its pairs end */
                    const char *pid = w.ids[d->job];
                    for (int k = 0; k < npairs; k++)
                        if (!strcmp(pairs[k].p, pid))
                            pairs[k--] = pairs[--npairs];
                    admitted++;
                    struct sched_job *jb = &w.jobs[d->job];
                    jb->npreempted_victims = 0; /* admitted: its list ends */
                    jb->preempted_victims = NULL;
                    for (int p = 0; p < d->nrep && jb->nplaced < PR; p++)
                        w.place[d->job][jb->nplaced++] = d->rep[p];
                    jb->placement = w.place[d->job];
                    if (jb->state != SCHED_JOB_RUNNING)
                        jb->admitted_at = w.now;
                    jb->state = SCHED_JOB_RUNNING;
                }
            }
            /* admissions land while terminating victims still hold their GPUs */
            check_capacity(&w, seed, cyc);
            /* victims of the last cycle that were still terminating are gone */
            for (int j = 0; j < w.nj; j++)
                if (w.jobs[j].terminating) {
                    int p = w.jobs[j].terminating_for;
                    w.jobs[j].terminating = 0;
                    w.jobs[j].state = SCHED_JOB_WAITING;
                    w.jobs[j].nplaced = 0;
                    w.jobs[j].preempted_for = NULL;
                    if (p >= 0 && p < w.nj) {
                        gq_strlcpy(claim_pf[j], w.ids[p], sizeof(claim_pf[j]));
                        w.jobs[j].preempted_for = claim_pf[j];
                    }
                }
            for (int x = 0; x < r->n; x++) {
                const struct sched_decision *d = &r->d[x];
                if (d->kind != SCHED_PREEMPT)
                    continue;
                struct sched_job *vj = &w.jobs[d->job];
                if (rn(2)) {
                    vj->terminating = 1;
                    vj->terminating_for = d->for_job;
                } else {
                    vj->state = SCHED_JOB_WAITING;
                    vj->nplaced = 0;
                    gq_strlcpy(claim_pf[d->job], w.ids[d->for_job], sizeof(claim_pf[d->job]));
                    vj->preempted_for = claim_pf[d->job];
                }
            }
            sched_result_free(r);
            /* time passes, sometimes less than the minimum runtime */
            w.now += rn(3) ? 2 : rn(900);
            for (int j = 0; j < w.nj; j++) {
                if (w.jobs[j].state == SCHED_JOB_RUNNING && !w.jobs[j].terminating && rn(8) == 0) {
                    const char *gone = w.ids[j];
                    for (int k = 0; k < npairs; k++)
                        if (!strcmp(pairs[k].p, gone))
                            pairs[k--] = pairs[--npairs];
                    claim_move(&w, j, w.nj - 1);
                    w.nj--;
                    j--;
                }
            }
            add_jobs(&w, rn(4));
        }
    }
    sched_free(ctx);
    fprintf(stderr, "claims property: %d cases, %d admissions, %d preemptions\n", cases, admitted,
            preempts);
    assert_true(preempts > cases / 10);
    assert_int_equal(fails, 0);
}


/* ---- keep-whole property ----
 * Random clusters and histories (empty included), then one probe: a
 * single-replica GPU request without topology preference, alone in the queue.
 * Under the gangq policy, through sched_cycle and through the one-task index:
 * when the probe lands on a whole node (GPUs all free), no node in use could
 * have taken it, unless the shape distribution prices breaking that node (a
 * shape that may run there needs more GPUs than the probe leaves whole). */

/* GPU milli in use per device of node i (foreign + placed jobs) */
static void dev_use(const struct world *w, int i, int dev[SCHED_MAX_DEVICES], int64_t *cpu,
                    int64_t *mem)
{
    const struct sched_node *n = &w->nodes[i];
    *cpu = n->foreign_cpu_milli;
    *mem = n->foreign_mem_bytes;
    for (int d = 0; d < SCHED_MAX_DEVICES; d++)
        dev[d] = n->foreign_gpu_milli[d];
    for (int j = 0; j < w->nj; j++) {
        const struct sched_job *jb = &w->jobs[j];
        for (int p = 0; p < jb->nplaced; p++) {
            if (jb->placement[p].node != i)
                continue;
            *cpu += jb->req.cpu_milli;
            *mem += jb->req.mem_bytes;
            for (int d = 0; d < SCHED_MAX_DEVICES; d++)
                if (jb->placement[p].devs & (1u << d))
                    dev[d] += jb->req.gpus > 0 ? 1000 : jb->req.gpu_milli;
        }
    }
}

static int node_whole(const struct world *w, int i)
{
    int dev[SCHED_MAX_DEVICES];
    int64_t cpu, mem;
    if (w->nodes[i].gpus <= 0)
        return 0;
    dev_use(w, i, dev, &cpu, &mem);
    for (int d = 0; d < w->nodes[i].gpus; d++)
        if (dev[d] != 0)
            return 0;
    return 1;
}

/* type and GPU memory allow r on node i */
static int static_ok(const struct world *w, int i, const struct sched_request *r)
{
    const struct sched_node *n = &w->nodes[i];
    if (n->gpus <= 0)
        return 0;
    if (r->ntypes > 0) {
        int ok = 0;
        for (int t = 0; t < r->ntypes; t++)
            ok |= n->gpu_product && !strcmp(n->gpu_product, r->types[t]);
        if (!ok)
            return 0;
    }
    return !r->min_gpu_mem_gib || n->gpu_mem_mib >= r->min_gpu_mem_gib * 1024LL;
}

/* node i could take the probe now */
static int can_take(const struct world *w, int i, const struct sched_job *jb)
{
    const struct sched_node *n = &w->nodes[i];
    if (!n->ready || n->unschedulable || !tolerated(n, jb) || !static_ok(w, i, &jb->req))
        return 0;
    for (int t = 0; t < jb->nnode_selector; t++) {
        const char *v = label(n, jb->node_selector[t].key);
        if (!v || strcmp(v, jb->node_selector[t].value))
            return 0;
    }
    int dev[SCHED_MAX_DEVICES];
    int64_t cpu, mem;
    dev_use(w, i, dev, &cpu, &mem);
    if (n->cpu_milli - cpu < jb->req.cpu_milli || n->mem_bytes - mem < jb->req.mem_bytes)
        return 0;
    int free_dev = 0, share = 0;
    for (int d = 0; d < n->gpus; d++) {
        free_dev += dev[d] == 0;
        share |= 1000 - dev[d] >= jb->req.gpu_milli;
    }
    return jb->req.gpus > 0 ? free_dev >= jb->req.gpus : share;
}

/* the shape distribution prices breaking whole node i for the probe. A shape
 * of weight 0 is no shape; derive: none of weight > 0 given means shapes
 * derived from the queue (the probe alone), as sched_cycle does */
static int priced(const struct world *w, int i, const struct sched_job *probe,
                  const struct sched_shape *sh, int nsh, int derive)
{
    const struct sched_node *n = &w->nodes[i];
    int left = n->gpus - (probe->req.gpus > 0 ? probe->req.gpus : 1);
    struct sched_shape own = {probe->req, 1};
    int given = 0;
    for (int k = 0; k < nsh; k++)
        given |= sh[k].weight > 0;
    if (!given && derive) {
        sh = &own;
        nsh = 1;
    }
    for (int k = 0; k < nsh; k++) {
        int g = sh[k].req.gpus > 0 ? sh[k].req.gpus : (sh[k].req.gpu_milli > 0);
        if (sh[k].weight > 0 && g > left && g <= n->gpus && static_ok(w, i, &sh[k].req))
            return 1;
    }
    return 0;
}

static void check_whole(const struct world *w, int node, const struct sched_job *probe,
                        const struct sched_shape *sh, int nsh, int derive, const char *via,
                        uint64_t seed, int cyc)
{
    if (!node_whole(w, node) || priced(w, node, probe, sh, nsh, derive))
        return;
    for (int i = 0; i < w->nn; i++)
        CHECK(node_whole(w, i) || w->nodes[i].gpus == 0 || !can_take(w, i, probe),
              "%s: probe broke whole node %d while node %d in use could take it", via, node, i);
}

static void test_keep_whole(void **st)
{
    (void)st;
    fails = 0; /* each property counts its own violations */
    int cases = 2000;
    const char *env = getenv("SCHED_PROP_CASES");
    int64_t v;
    if (env && gq_parse_i64(env, (size_t)-1, &v) == 0 && v > 0)
        cases = (int)v;
    static struct world w;
    int on_whole = 0, in_use = 0;
    for (int c = 0; c < cases && fails < 20; c++) {
        uint64_t seed = 500000 + (uint64_t)c;
        int cyc = -1;
        rs = seed;
        make_world(&w);
        w.cfg.policy = SCHED_POLICY_GANGQ;
        w.cfg.preemption = 0;
        w.np = 0;
        for (int i = 0; i < w.nn; i++)
            w.nodes[i].pool = -1;
        /* history: none, or a few cycles of random work, some of it gone */
        int hist = rn(4) ? 1 + rn(3) : 0;
        if (hist)
            add_jobs(&w, 4 + rn(16));
        for (cyc = 0; cyc < hist; cyc++) {
            struct sched_snapshot s;
            snap_of(&w, &s);
            struct sched_result *r = NULL;
            char err[256];
            int rc = sched_cycle(NULL, &s, &r, err, sizeof(err));
            CHECK(rc == 0, "cycle failed: %s", err);
            if (rc)
                break;
            check_and_apply(&w, r, seed, cyc);
            sched_result_free(r);
            add_jobs(&w, rn(4));
        }
        /* keep only what runs (a partly placed job keeps its placed part) */
        int m = 0;
        for (int j = 0; j < w.nj; j++) {
            struct sched_job *jb = &w.jobs[j];
            if (jb->state != SCHED_JOB_RUNNING || jb->nplaced == 0 || rn(4) == 0)
                continue;
            jb->replicas = jb->nplaced;
            w.jobs[m] = *jb;
            memcpy(w.place[m], w.place[j], sizeof(w.place[m]));
            memcpy(w.ids[m], w.ids[j], sizeof(w.ids[m]));
            w.jobs[m].id = w.ids[m];
            w.jobs[m].placement = w.place[m];
            m++;
        }
        w.nj = m;
        /* the shape distribution: none (derived from the queue) or given */
        static const char *const one_type[1] = {"A100"};
        struct sched_shape sh[4];
        int nsh = rn(2) ? 0 : 1 + rn(4);
        memset(sh, 0, sizeof(sh));
        for (int k = 0; k < nsh; k++) {
            if (rn(4) == 0)
                sh[k].req.gpu_milli = 100 * (1 + rn(9));
            else
                sh[k].req.gpus = 1 << rn(4);
            sh[k].req.cpu_milli = 500 * (1 + rn(4));
            if (rn(3) == 0) {
                sh[k].req.types[0] = rn(2) ? one_type[0] : prods[rn(3)];
                sh[k].req.ntypes = 1;
            }
            sh[k].weight = rn(5) ? 1 + rn(4) : 0;
        }
        /* the probe */
        add_jobs(&w, 1);
        struct sched_job *pb = &w.jobs[w.nj - 1];
        pb->replicas = 1;
        pb->team = -1;
        pb->pool = -1;
        pb->topo_required = pb->topo_preferred = pb->topo_spread = -1;
        if (pb->req.gpus == 0 && pb->req.gpu_milli == 0)
            pb->req.gpus = 1 << rn(3);
        struct sched_snapshot s;
        snap_of(&w, &s);
        s.shapes = sh;
        s.nshapes = nsh;
        struct sched_result *r = NULL;
        char err[256];
        cyc = hist;
        int rc = sched_cycle(NULL, &s, &r, err, sizeof(err));
        CHECK(rc == 0, "probe cycle failed: %s", err);
        if (rc)
            continue;
        for (int x = 0; x < r->n; x++) {
            const struct sched_decision *d = &r->d[x];
            if (d->kind != SCHED_ADMIT || d->job != w.nj - 1 || d->nrep != 1)
                continue;
            int nd = d->rep[0].node;
            check_whole(&w, nd, pb, sh, nsh, 1, "sched_cycle", seed, cyc);
            if (node_whole(&w, nd))
                on_whole++;
            else
                in_use++;
        }
        sched_result_free(r);
        /* the same cluster and history through the one-task index */
        struct sched_index *ix = sched_index_new(&w.cfg, w.nodes, w.nn, err, sizeof(err));
        CHECK(ix != NULL, "index: %s", err);
        if (!ix)
            continue;
        for (int j = 0; j < w.nj - 1; j++)
            for (int p = 0; p < w.jobs[j].nplaced; p++)
                CHECK(sched_index_alloc(ix, &w.jobs[j].req, &w.jobs[j].placement[p]) == 0,
                      "index: history does not fit");
        /* the index has no queue: no shapes given means none at all */
        CHECK(sched_index_set_shapes(ix, sh, nsh, err, sizeof(err)) == 0, "index shapes: %s", err);
        /* the index knows no node selector: the probe without it */
        struct sched_job free_pb = *pb;
        free_pb.node_selector = NULL;
        free_pb.nnode_selector = 0;
        struct sched_replica rep;
        rc = sched_place_one(ix, &pb->req, pb->tols, pb->ntols, &rep);
        CHECK(rc == 0 || rc == GQ_ENOTFOUND, "index placement failed");
        if (rc == 0)
            check_whole(&w, rep.node, &free_pb, sh, nsh, 0, "index", seed, cyc);
        sched_index_free(ix);
    }
    fprintf(stderr, "keep-whole property: %d cases, probe on a whole node %d, on a node in use %d\n",
            cases, on_whole, in_use);
    assert_true(on_whole > 0 && in_use > 0); /* both outcomes occur */
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_properties),
        cmocka_unit_test(test_backfill_spare_safe),
        cmocka_unit_test(test_preemptor_claims),
        cmocka_unit_test(test_keep_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
