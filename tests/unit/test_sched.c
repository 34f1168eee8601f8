/* Table tests for the scheduling core: every rule of issue 3, asserting the
 * decisions and the explanation text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gq.h"
#include "sched.h"

#define MAXN 192
#define MAXJ 64

struct fx {
    struct sched_config cfg;
    struct sched_node nodes[MAXN];
    struct sched_label labels[MAXN][3];
    char names[MAXN][16];
    char racks[MAXN][16];
    int nn;
    struct sched_pool pools[4];
    int np;
    struct sched_team teams[4];
    struct sched_quota quotas[4][4];
    int nt;
    struct sched_job jobs[MAXJ];
    struct sched_replica place[MAXJ][8];
    char ids[MAXJ][32];
    const char *pv[MAXJ][8]; /* preempted_victims storage */
    int nj;
    int64_t now;
    struct sched_result *res;
};

static void fx_init(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    sched_config_default(&f->cfg);
    f->now = 100000;
}

static int add_node(struct fx *f, int gpus, const char *product, int64_t cpu_milli, const char *rack)
{
    int i = f->nn++;
    struct sched_node *n = &f->nodes[i];
    snprintf(f->names[i], sizeof(f->names[i]), "n%d", i);
    n->name = f->names[i];
    n->gpus = gpus;
    n->gpu_product = product;
    n->gpu_mem_mib = 81920;
    n->cpu_milli = cpu_milli;
    n->mem_bytes = (int64_t)512 << 30;
    n->ready = 1;
    n->pool = -1;
    int nl = 0;
    f->labels[i][nl++] = (struct sched_label){"kubernetes.io/hostname", f->names[i]};
    if (rack) {
        gq_strlcpy(f->racks[i], rack, sizeof(f->racks[i]));
        f->labels[i][nl++] = (struct sched_label){"topology.gangq.io/rack", f->racks[i]};
    }
    n->labels = f->labels[i];
    n->nlabels = nl;
    return i;
}

static int add_job(struct fx *f, const char *id, int gpus, int replicas, enum sched_class cls,
                   int prio)
{
    int j = f->nj++;
    struct sched_job *jb = &f->jobs[j];
    snprintf(f->ids[j], sizeof(f->ids[j]), "%s", id);
    jb->id = f->ids[j];
    jb->team = -1;
    jb->cls = cls;
    jb->priority = prio;
    jb->preemptible = cls != SCHED_INFERENCE;
    jb->gang = cls != SCHED_INFERENCE;
    jb->replicas = replicas;
    jb->req.gpus = gpus;
    jb->req.cpu_milli = 1000;
    jb->req.mem_bytes = (int64_t)1 << 30;
    jb->topo_required = jb->topo_preferred = jb->topo_spread = -1;
    jb->pool = -1;
    jb->enqueue_time = 1000 + j;
    return j;
}

/* Team f->nt (returned) with one quota entry of gpus of type, no borrowing or
 * lending limit, weight 1. */
static int add_team(struct fx *f, const char *name, const char *cohort, const char *type, int gpus)
{
    int t = f->nt++;
    f->quotas[t][0] = (struct sched_quota){type, gpus, -1, -1};
    f->teams[t] = (struct sched_team){name, cohort, 1, f->quotas[t], 1, 0};
    return t;
}

/* A single-replica job of team t. */
static int add_team_job(struct fx *f, const char *id, int gpus, enum sched_class cls, int prio, int t)
{
    int j = add_job(f, id, gpus, 1, cls, prio);
    f->jobs[j].team = t;
    return j;
}

/* Mark job j running with replica r on node at devs. */
static void run_on(struct fx *f, int j, int node, uint32_t devs)
{
    struct sched_job *jb = &f->jobs[j];
    jb->state = SCHED_JOB_RUNNING;
    f->place[j][jb->nplaced].node = node;
    f->place[j][jb->nplaced].devs = devs;
    jb->nplaced++;
    jb->placement = f->place[j];
    jb->admitted_at = 0;
}

static int cycle(struct fx *f)
{
    struct sched_snapshot s = {0};
    s.config = &f->cfg;
    s.now = f->now;
    s.nodes = f->nodes;
    s.nnodes = f->nn;
    s.pools = f->pools;
    s.npools = f->np;
    s.teams = f->teams;
    s.nteams = f->nt;
    s.jobs = f->jobs;
    s.njobs = f->nj;
    sched_result_free(f->res);
    f->res = NULL;
    char err[256] = "";
    int rc = sched_cycle(NULL, &s, &f->res, err, sizeof(err));
    if (rc)
        fprintf(stderr, "sched_cycle: %s\n", err);
    return rc;
}

static const struct sched_decision *dec(const struct fx *f, int j, enum sched_decision_kind k)
{
    for (int i = 0; i < f->res->n; i++)
        if (f->res->d[i].job == j && f->res->d[i].kind == k)
            return &f->res->d[i];
    return NULL;
}

static int count_kind(const struct fx *f, enum sched_decision_kind k)
{
    int c = 0;
    for (int i = 0; i < f->res->n; i++)
        c += f->res->d[i].kind == k;
    return c;
}

static int count_kind_r(const struct sched_result *r, enum sched_decision_kind k)
{
    int c = 0;
    for (int i = 0; i < r->n; i++)
        c += r->d[i].kind == k;
    return c;
}

static void fx_done(struct fx *f)
{
    sched_result_free(f->res);
    f->res = NULL;
}

/* seed: a 4-GPU node with 1+2 used cannot take a 2-GPU job */
static void test_used_1_2_no_room_for_2(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 4, "H100", 64000, NULL);
    int a = add_job(&f, "ml/a", 1, 1, SCHED_BATCH, 10);
    int b = add_job(&f, "ml/b", 2, 1, SCHED_BATCH, 10);
    run_on(&f, a, 0, 0x1);
    run_on(&f, b, 0, 0x6);
    int c = add_job(&f, "ml/c", 2, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, c, SCHED_ADMIT));
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    const struct sched_decision *w = dec(&f, c, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/1 nodes fit 2 GPUs: 1 fewer than 2 free GPUs; reserves node n0");
    assert_int_equal(w->position, 1);
    /* a 1-GPU job still fits on the last device */
    /* a 1-GPU job of higher priority still fits on the last device (at equal
     * priority the blocked head c would hold the node: see test_no_starvation) */
    int d = add_job(&f, "ml/d", 1, 1, SCHED_BATCH, 20);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *ad = dec(&f, d, SCHED_ADMIT);
    assert_non_null(ad);
    assert_int_equal(ad->rep[0].node, 0);
    assert_int_equal(ad->rep[0].devs, 0x8);
    fx_done(&f);
}

/* seed: free 1+1+1+2 across nodes cannot take 3 GPUs on one node; 2 go to the 2-free node */
static void test_scattered_free(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    for (int i = 0; i < 4; i++)
        add_node(&f, 4, "H100", 64000, NULL);
    /* foreign usage leaves 1,1,1,2 free */
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < 3; d++)
            f.nodes[i].foreign_gpu_milli[d] = 1000;
    f.nodes[3].foreign_gpu_milli[0] = f.nodes[3].foreign_gpu_milli[1] = 1000;
    int j3 = add_job(&f, "ml/three", 3, 1, SCHED_BATCH, 10);
    int g22 = add_job(&f, "ml/two-by-two", 2, 2, SCHED_BATCH, 10);
    f.jobs[g22].topo_required = sched_config_level(&f.cfg, "node");
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, j3, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/4 nodes fit 3 GPUs: 4 fewer than 3 free GPUs");
    w = dec(&f, g22, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message,
                        "1/4 nodes fit 2x2 GPUs in one node: 3 fewer than 2 free GPUs; "
                        "no node holds 2 replicas");
    assert_int_equal(count_kind(&f, SCHED_ADMIT), 0);
    int two = add_job(&f, "ml/two", 2, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, two, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, 3);
    assert_int_equal(a->rep[0].devs, 0xC);
    fx_done(&f);
}

/* seed: a type A job is refused on type B nodes */
static void test_wrong_type(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "A100", 64000, NULL);
    add_node(&f, 8, "A100", 64000, NULL);
    int j = add_job(&f, "ml/h", 1, 1, SCHED_BATCH, 10);
    f.jobs[j].req.types[0] = "H100";
    f.jobs[j].req.types[1] = "H200";
    f.jobs[j].req.ntypes = 2;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/2 nodes fit 1 GPU: 2 wrong GPU type (need H100|H200)");
    /* the same job accepting A100 too is admitted */
    f.jobs[j].req.types[1] = "A100";
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, j, SCHED_ADMIT));
    /* GPU memory requirement */
    f.jobs[j].req.min_gpu_mem_gib = 141;
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/2 nodes fit 1 GPU: 2 less than 141 GiB GPU memory");
    fx_done(&f);
}

/* seed: GPU free but CPU full */
static void test_cpu_full(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    f.nodes[0].foreign_cpu_milli = 63500;
    int j = add_job(&f, "ml/a", 1, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/1 nodes fit 1 GPU: 1 insufficient cpu");
    fx_done(&f);
}

/* seed: a 4-worker gang with 3 GPUs free stays whole and waiting */
static void test_gang_all_or_nothing(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    for (int i = 0; i < 3; i++)
        add_node(&f, 1, "H100", 64000, NULL);
    int g = add_job(&f, "ml/gang", 1, 4, SCHED_TRAINING, 10);
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, g, SCHED_ADMIT));
    const struct sched_decision *w = dec(&f, g, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "3/3 nodes fit 4x1 GPU; only 3 of 4 replicas fit");
    /* a non-gang (Inference) job of 4 replicas is admitted partially, spread */
    int inf = add_job(&f, "ml/serve", 1, 4, SCHED_INFERENCE, 10);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, inf, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->nrep, 3);
    assert_true(a->rep[0].node != a->rep[1].node && a->rep[1].node != a->rep[2].node &&
                a->rep[0].node != a->rep[2].node);
    w = dec(&f, inf, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "3 of 4 replicas admitted");
    fx_done(&f);
}

/* seed: production inference preempts an experiment, never the reverse */
static void test_inference_preempts_experiment(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    int exp = add_job(&f, "research/exp", 8, 1, SCHED_BATCH, 10);
    run_on(&f, exp, 0, 0xFF);
    int prod = add_job(&f, "prod/serve", 4, 1, SCHED_INFERENCE, 1000);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *p = dec(&f, exp, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, prod);
    assert_string_equal(p->message,
                        "preempted to make room for prod/serve (Inference, priority 1000): "
                        "lower priority 10");
    const struct sched_decision *w = dec(&f, prod, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "waiting for 1 preempted job to stop");
    assert_null(dec(&f, prod, SCHED_ADMIT));

    /* reverse: the inference job runs (even marked preemptible), the experiment waits */
    fx_done(&f);
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    prod = add_job(&f, "prod/serve", 8, 1, SCHED_INFERENCE, 5);
    f.jobs[prod].preemptible = 1;
    run_on(&f, prod, 0, 0xFF);
    exp = add_job(&f, "research/exp", 4, 1, SCHED_BATCH, 1000);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    w = dec(&f, exp, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/1 nodes fit 4 GPUs: 1 fewer than 4 free GPUs; reserves node n0");
    fx_done(&f);
}

/* seed: a batch job borrowing idle inference-pool GPUs is reclaimed first */
static void test_protected_pool_borrow_reclaim(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.pools[0] = (struct sched_pool){"inference", SCHED_CLASS_BIT(SCHED_INFERENCE), 1, 0};
    f.pools[1] = (struct sched_pool){"batch", SCHED_CLASS_BIT(SCHED_BATCH) |
                                                  SCHED_CLASS_BIT(SCHED_TRAINING), 0, 0};
    f.np = 2;
    int ni = add_node(&f, 8, "H100", 64000, NULL);
    int nb = add_node(&f, 8, "H100", 64000, NULL);
    f.nodes[ni].pool = 0;
    f.nodes[nb].pool = 1;
    /* batch pool busy with a training job of higher priority than the inference job */
    int tr = add_job(&f, "ml/train", 8, 1, SCHED_TRAINING, 500);
    run_on(&f, tr, nb, 0xFF);
    int bj = add_job(&f, "ml/batch", 8, 1, SCHED_BATCH, 100);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, bj, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, ni); /* borrowed the idle inference pool */
    run_on(&f, bj, ni, a->rep[0].devs);
    /* inference work of LOWER priority arrives: the borrower is still the first victim */
    int inf = add_job(&f, "prod/serve", 2, 1, SCHED_INFERENCE, 50);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *p = dec(&f, bj, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, inf);
    assert_string_equal(p->message,
                        "preempted to make room for prod/serve (Inference, priority 50): "
                        "borrowing protected pool GPUs its home class needs");
    assert_null(dec(&f, tr, SCHED_PREEMPT));

    /* with reserveGPUs covering the pool, batch cannot borrow at all */
    fx_done(&f);
    fx_init(&f);
    f.pools[0] = (struct sched_pool){"inference", SCHED_CLASS_BIT(SCHED_INFERENCE), 1, 8};
    f.np = 1;
    ni = add_node(&f, 8, "H100", 64000, NULL);
    f.nodes[ni].pool = 0;
    bj = add_job(&f, "ml/batch", 1, 1, SCHED_BATCH, 100);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, bj, SCHED_WAIT);
    assert_non_null(w);
    /* ... and reserves none of it: it yields the pool to its home class */
    assert_string_equal(w->message, "0/1 nodes fit 1 GPU: 1 in protected pool inference");
    /* naming the pool changes nothing: a class it is not home to borrows */
    f.jobs[bj].pool = 0;
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, bj, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/1 nodes fit 1 GPU: 1 in protected pool inference");
    f.jobs[bj].pool = -1;
    /* and a non-protected pool of another class is closed */
    f.pools[0].protected_pool = 0;
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, bj, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/1 nodes fit 1 GPU: 1 in pools not open to class Batch");
    fx_done(&f);
}

/* topology: required rack, best-fit rack, spread, preferred */
static void test_topology(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    for (int i = 0; i < 2; i++)
        add_node(&f, 8, "H100", 64000, "r1");
    for (int i = 0; i < 3; i++)
        add_node(&f, 8, "H100", 64000, "r2");
    int busy = add_job(&f, "x/busy", 8, 1, SCHED_BATCH, 10);
    run_on(&f, busy, 0, 0xFF);
    int rack = sched_config_level(&f.cfg, "rack");
    int g = add_job(&f, "ml/g", 8, 2, SCHED_TRAINING, 10);
    f.jobs[g].topo_required = rack;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_string_equal(a->domain, "r2");
    assert_string_equal(a->message, "admitted 2 replicas in rack r2");
    assert_true(a->rep[0].node >= 2 && a->rep[1].node >= 2 && a->rep[0].node != a->rep[1].node);
    /* 3x8 in one rack: r2 has 3 nodes free minus nothing -> fits; 4x8 does not */
    f.jobs[g].replicas = 4;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, g, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message,
                        "4/5 nodes fit 4x8 GPUs in one rack: 1 fewer than 8 free GPUs; "
                        "no rack holds 4 replicas");
    /* best-fit rack: a 1x8 job with required rack goes to the fuller rack r1 */
    f.jobs[g].replicas = 1;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_string_equal(a->domain, "r1");
    assert_int_equal(a->rep[0].node, 1);
    /* spread over racks: 2 replicas of 1 GPU on distinct racks */
    f.jobs[g].topo_required = -1;
    f.jobs[g].topo_spread = rack;
    f.jobs[g].replicas = 2;
    f.jobs[g].req.gpus = 1;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    int r0 = a->rep[0].node < 2, r1 = a->rep[1].node < 2;
    assert_true(r0 != r1);
    /* 3 replicas cannot spread over 2 racks */
    f.jobs[g].replicas = 3;
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, g, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message,
                        "4/5 nodes fit 3x1 GPU: 1 fewer than 1 free GPU; fewer than 3 distinct "
                        "rack domains fit; reserves nodes n1,n2,n3");
    /* preferred rack packs both replicas into one rack */
    f.jobs[g].topo_spread = -1;
    f.jobs[g].topo_preferred = rack;
    f.jobs[g].replicas = 2;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_true((a->rep[0].node < 2) == (a->rep[1].node < 2));
    fx_done(&f);
}

/* a node missing the rack label is its own rack */
static void test_missing_label_own_domain(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 4, "H100", 64000, NULL);
    add_node(&f, 4, "H100", 64000, NULL);
    int g = add_job(&f, "ml/g", 4, 2, SCHED_TRAINING, 10);
    f.jobs[g].topo_required = sched_config_level(&f.cfg, "rack");
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, g, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "2/2 nodes fit 2x4 GPUs in one rack; no rack holds 2 replicas");
    fx_done(&f);
}

/* taints and tolerations; not-ready and unschedulable nodes */
static void test_taints_and_node_state(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    struct sched_taint t = {"gpu", "reserved", SCHED_NO_SCHEDULE};
    struct sched_taint soft = {"soft", NULL, SCHED_PREFER_NO_SCHEDULE};
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    f.nodes[0].taints = &t;
    f.nodes[0].ntaints = 1;
    f.nodes[1].ready = 0;
    f.nodes[2].unschedulable = 1;
    f.nodes[3].taints = &soft;
    f.nodes[3].ntaints = 1;
    f.nodes[3].foreign_gpu_milli[0] = 1000;
    int j = add_job(&f, "ml/a", 8, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/4 nodes fit 8 GPUs: 1 not ready, 1 unschedulable, "
                                    "1 taint not tolerated, 1 fewer than 8 free GPUs");
    struct sched_toleration tol = {"gpu", "reserved", 0, SCHED_NO_SCHEDULE};
    f.jobs[j].tols = &tol;
    f.jobs[j].ntols = 1;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, j, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, 0);
    fx_done(&f);
}

/* quota: nominal, cohort borrowing, borrowing limit, explanation */
static void test_quota(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    for (int i = 0; i < 4; i++)
        add_node(&f, 8, "H100", 64000, NULL);
    f.quotas[0][0] = (struct sched_quota){"H100", 16, 0, -1};
    f.teams[0] = (struct sched_team){"ml", NULL, 1, f.quotas[0], 1, 0};
    f.nt = 1;
    int r = add_job(&f, "ml/run", 4, 3, SCHED_TRAINING, 10);
    f.jobs[r].team = 0;
    run_on(&f, r, 0, 0x0F);
    run_on(&f, r, 0, 0xF0);
    run_on(&f, r, 1, 0x0F);
    int j = add_job(&f, "ml/big", 8, 1, SCHED_TRAINING, 10);
    f.jobs[j].team = 0;
    f.jobs[j].req.types[0] = "H100";
    f.jobs[j].req.ntypes = 1;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message,
                        "2/4 nodes fit 8 GPUs: 2 fewer than 8 free GPUs; team ml quota 12/16 "
                        "H100 used, needs 8");
    /* a job of any type in a Team whose quota names types only: the entry it
     * waits on is described, not "no quota" */
    f.jobs[j].req.ntypes = 0;
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message,
                        "2/4 nodes fit 8 GPUs: 2 fewer than 8 free GPUs; team ml quota 12/16 "
                        "H100 used, needs 8");
    f.jobs[j].req.ntypes = 1;
    /* a cohort peer with idle nominal lends it */
    f.teams[0].cohort = "research";
    f.quotas[0][0].borrowing_limit = -1;
    f.quotas[1][0] = (struct sched_quota){"H100", 16, -1, -1};
    f.teams[1] = (struct sched_team){"cv", "research", 1, f.quotas[1], 1, 0};
    f.nt = 2;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, j, SCHED_ADMIT));
    /* lending limit 2 is not enough for 8 - 4 = 4 borrowed */
    f.quotas[1][0].lending_limit = 2;
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message,
                        "2/4 nodes fit 8 GPUs: 2 fewer than 8 free GPUs; team ml quota 12/16 "
                        "H100 used (may borrow 2), needs 8");
    /* a team without a matching entry cannot use that product */
    f.quotas[1][0].gpu_type = "A100";
    f.jobs[j].team = 1;
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message,
                        "2/4 nodes fit 8 GPUs: 2 fewer than 8 free GPUs; team cv has no quota "
                        "for H100");
    fx_done(&f);
}

/* queue order: priority first, then fair share across teams, then enqueue time */
static void test_queue_order_fair_share(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    f.teams[0] = (struct sched_team){"heavy", NULL, 1, NULL, 0, 360000}; /* 100 GPU-hours */
    f.teams[1] = (struct sched_team){"light", NULL, 1, NULL, 0, 0};
    f.nt = 2;
    int h = add_job(&f, "heavy/a", 8, 1, SCHED_BATCH, 10);
    f.jobs[h].team = 0;
    int l = add_job(&f, "light/a", 8, 1, SCHED_BATCH, 10);
    f.jobs[l].team = 1;
    f.jobs[l].enqueue_time = 5000; /* later, but its team used less */
    f.cfg.preemption = 0;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, l, SCHED_ADMIT));
    assert_non_null(dec(&f, h, SCHED_WAIT));
    /* priority beats fair share */
    f.jobs[h].priority = 11;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, h, SCHED_ADMIT));
    assert_non_null(dec(&f, l, SCHED_WAIT));
    /* positions inside a team queue */
    int h2 = add_job(&f, "heavy/b", 8, 1, SCHED_BATCH, 10);
    f.jobs[h2].team = 0;
    int h3 = add_job(&f, "heavy/c", 8, 1, SCHED_BATCH, 10);
    f.jobs[h3].team = 0;
    f.jobs[h3].enqueue_time = 1; /* earliest */
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(dec(&f, h3, SCHED_WAIT)->position, 1);
    assert_int_equal(dec(&f, h2, SCHED_WAIT)->position, 2);
    fx_done(&f);
}

/* preemption: Batch before Training, drop unneeded victims, min runtime */
static void test_preemption_choice(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    int tr = add_job(&f, "x/train", 4, 1, SCHED_TRAINING, 1);
    run_on(&f, tr, 0, 0x0F);
    int b1 = add_job(&f, "x/batch1", 2, 1, SCHED_BATCH, 5);
    run_on(&f, b1, 0, 0x30);
    int b2 = add_job(&f, "x/batch2", 2, 1, SCHED_BATCH, 5);
    run_on(&f, b2, 0, 0xC0);
    f.jobs[b2].admitted_at = 50; /* shorter running than batch1 */
    int hi = add_job(&f, "x/urgent", 2, 1, SCHED_TRAINING, 100);
    assert_int_equal(cycle(&f), 0);
    /* one 2-GPU batch victim is enough: the shortest running one */
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    assert_non_null(dec(&f, b2, SCHED_PREEMPT));
    /* needs 6: both batch jobs and not the training job... 8 needs all three */
    f.jobs[hi].req.gpus = 4;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 2);
    assert_non_null(dec(&f, b1, SCHED_PREEMPT));
    assert_non_null(dec(&f, b2, SCHED_PREEMPT));
    assert_null(dec(&f, tr, SCHED_PREEMPT));
    /* victims younger than min runtime are spared */
    f.jobs[b1].admitted_at = f.now - 10;
    f.jobs[b2].admitted_at = f.now - 10;
    f.jobs[tr].admitted_at = f.now - 10;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_string_equal(dec(&f, hi, SCHED_WAIT)->message,
                        "0/1 nodes fit 4 GPUs: 1 fewer than 4 free GPUs; the jobs it would preempt "
                        "are protected by the minimum runtime (300s) until 1970-01-02T03:51:30Z; reserves node n0");
    assert_int_equal(dec(&f, hi, SCHED_WAIT)->until, f.now + 290);
    /* non-preemptible and equal priority are never victims */
    f.jobs[b1].admitted_at = f.jobs[b2].admitted_at = f.jobs[tr].admitted_at = 0;
    f.jobs[b1].preemptible = f.jobs[b2].preemptible = 0;
    f.jobs[tr].priority = 100;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    fx_done(&f);
}

/* A gang that must sit in one rack: the victims are chosen per rack, and the
 * cheapest set wins. Rack ra holds one 8-GPU batch job on one node and a free
 * node; rack rb two 8-GPU batch jobs, a little younger. The cost order over
 * the whole cluster (shortest running first) would take both of rb (16 GPUs
 * stopped); one job of ra (8 GPUs, less work lost) frees a rack. */
static void test_preempt_cheapest_domain(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, "ra");
    add_node(&f, 8, "H100", 64000, "ra");
    add_node(&f, 8, "H100", 64000, "rb");
    add_node(&f, 8, "H100", 64000, "rb");
    int a = add_job(&f, "x/lo1", 8, 1, SCHED_BATCH, 10);
    run_on(&f, a, 0, 0xFF);
    f.jobs[a].admitted_at = f.now - 1800;
    int b1 = add_job(&f, "x/lo2", 8, 1, SCHED_BATCH, 10);
    run_on(&f, b1, 2, 0xFF);
    f.jobs[b1].admitted_at = f.now - 1740;
    int b2 = add_job(&f, "x/lo3", 8, 1, SCHED_BATCH, 10);
    run_on(&f, b2, 3, 0xFF);
    f.jobs[b2].admitted_at = f.now - 1680;
    int g = add_job(&f, "x/gang", 8, 2, SCHED_TRAINING, 900);
    f.jobs[g].topo_required = sched_config_level(&f.cfg, "rack");
    /* the free node takes one replica: fill it so the gang must preempt */
    int o = add_job(&f, "x/other", 8, 1, SCHED_INFERENCE, 1000);
    run_on(&f, o, 1, 0xFF);
    assert_int_equal(cycle(&f), 0);
    /* rack ra is half inference (never a victim for Training): rack rb it is,
     * both its jobs */
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 2);
    assert_non_null(dec(&f, b1, SCHED_PREEMPT));
    assert_non_null(dec(&f, b2, SCHED_PREEMPT));
    /* with node n1 free, one victim in ra is enough and cheaper than two in rb */
    f.jobs[o].state = SCHED_JOB_WAITING;
    f.jobs[o].nplaced = 0;
    f.jobs[o].priority = 1; /* waits behind the gang, out of its way */
    f.jobs[o].req.gpus = 16;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    assert_non_null(dec(&f, a, SCHED_PREEMPT));
    /* unless the ra job is of a dearer tier: a higher priority costs more than
     * any amount of lower-priority work */
    f.jobs[a].priority = 20;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 2);
    assert_non_null(dec(&f, b1, SCHED_PREEMPT));
    assert_non_null(dec(&f, b2, SCHED_PREEMPT));
    /* equal tiers: the work lost decides, not the count: lo1 running 10 h loses
     * more than two jobs of half an hour */
    f.jobs[a].priority = 10;
    f.jobs[a].admitted_at = f.now - 36000;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 2);
    assert_null(dec(&f, a, SCHED_PREEMPT));
    fx_done(&f);
}

/* Reclaim takes the borrower, not a lower-priority job another team runs
 * within its nominal: that team would reclaim from the same borrower next,
 * two evictions for one. Teams r, b, p in one cohort on 16 GPUs: p runs 8
 * within its nominal of 8 at priority 10, b (nominal 0) borrows r's 8 at
 * priority 500, and r (nominal 8, none used) asks for 8 at priority 100. */
static void test_reclaim_before_lower_priority(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    int r = add_team(&f, "r", "co", "*", 8), b = add_team(&f, "b", "co", "*", 0),
        pt = add_team(&f, "p", "co", "*", 8);
    int pj = add_team_job(&f, "p/job", 8, SCHED_BATCH, 10, pt);
    run_on(&f, pj, 0, 0xFF);
    int bj = add_team_job(&f, "b/job", 8, SCHED_BATCH, 500, b);
    run_on(&f, bj, 1, 0xFF);
    f.jobs[bj].admitted_at = 60;
    int rj = add_team_job(&f, "r/job", 8, SCHED_BATCH, 100, r);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    const struct sched_decision *p = dec(&f, bj, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, rj);
    assert_string_equal(p->message, "preempted to make room for r/job (Batch, priority 100): "
                                    "reclaiming quota lent to team b");
    fx_done(&f);
}

/* spec.preemptible false protects a job within its Team's quota, not what it
 * borrows: a lender reclaims its quota from a non-preemptible borrower (else
 * opting out would keep another Team's guaranteed GPUs), while a
 * non-preemptible job within its nominal stays even for a higher priority. */
static void test_reclaim_non_preemptible(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    int ta = add_team(&f, "a", "co", "*", 8), tb = add_team(&f, "b", "co", "*", 8);
    int a1 = add_team_job(&f, "a/own", 8, SCHED_BATCH, 0, ta);
    f.jobs[a1].preemptible = 0;
    run_on(&f, a1, 0, 0xFF);
    int a2 = add_team_job(&f, "a/borrowed", 8, SCHED_BATCH, 0, ta);
    f.jobs[a2].preemptible = 0;
    run_on(&f, a2, 1, 0xFF);
    f.jobs[a2].admitted_at = 10; /* a holds 16 of its 8: one job borrows b's 8 */
    int b = add_team_job(&f, "b/job", 8, SCHED_BATCH, 500, tb);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    const struct sched_decision *p = dec(&f, a2, SCHED_PREEMPT);
    assert_non_null(p);
    assert_string_equal(p->message, "preempted to make room for b/job (Batch, priority 500): "
                                    "reclaiming quota lent to team a");
    /* within its nominal, a non-preemptible job is not a victim, even of a
     * higher priority of its own Team */
    f.jobs[a2].state = SCHED_JOB_WAITING;
    f.jobs[a2].nplaced = 0;
    f.jobs[b].team = ta;
    f.jobs[b].replicas = 2; /* 2 x 8: needs a/own's node too */
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    fx_done(&f);
}

/* GPUs being released (a suspended or deleted job's pods stopping, a
 * victim's whose job left) are not preempted for again: a preemptor that fits
 * once they are gone waits for them. Two 4-GPU nodes: n0's GPUs held by
 * stopping pods, n1 running a batch job; an Inference job of 4 GPUs. */
static void test_no_preempt_for_released(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 4, "H100", 64000, NULL);
    add_node(&f, 4, "H100", 64000, NULL);
    for (int d = 0; d < 4; d++)
        f.nodes[0].foreign_gpu_milli[d] = f.nodes[0].releasing_gpu_milli[d] = 1000;
    int w = add_job(&f, "x/w", 4, 1, SCHED_BATCH, 10);
    run_on(&f, w, 1, 0x0F);
    int p = add_job(&f, "x/pre", 4, 1, SCHED_INFERENCE, 1000);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    const struct sched_decision *d = dec(&f, p, SCHED_WAIT);
    assert_non_null(d);
    assert_non_null(strstr(d->message, "fits once stopping pods release their GPUs"));
    /* the same GPUs held by pods that are not stopping: w is the victim */
    for (int k = 0; k < 4; k++)
        f.nodes[0].releasing_gpu_milli[k] = 0;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    assert_non_null(dec(&f, w, SCHED_PREEMPT));
    fx_done(&f);
}

/* GPU shares: shares of one device add up to <= 1000 */
static void test_shares(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 2, "T4", 64000, NULL);
    int a = add_job(&f, "s/a", 0, 1, SCHED_BATCH, 10);
    f.jobs[a].req.gpu_milli = 600;
    int b = add_job(&f, "s/b", 0, 1, SCHED_BATCH, 10);
    f.jobs[b].req.gpu_milli = 400;
    int c = add_job(&f, "s/c", 0, 1, SCHED_BATCH, 10);
    f.jobs[c].req.gpu_milli = 700;
    int d = add_job(&f, "s/d", 0, 1, SCHED_BATCH, 10);
    f.jobs[d].req.gpu_milli = 500;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *da = dec(&f, a, SCHED_ADMIT), *db = dec(&f, b, SCHED_ADMIT);
    const struct sched_decision *dc = dec(&f, c, SCHED_ADMIT);
    assert_non_null(da);
    assert_non_null(db);
    assert_non_null(dc);
    /* 600 + 400 fill one device, 700 goes to the other, 500 no longer fits */
    assert_int_equal(da->rep[0].devs, db->rep[0].devs);
    assert_true(dc->rep[0].devs != da->rep[0].devs);
    const struct sched_decision *w = dec(&f, d, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/1 nodes fit 500m GPU: 1 no GPU with 500m free; reserves node n0");
    fx_done(&f);
}

/* no starvation: a stream of 1-GPU jobs cannot starve an 8-GPU gang */
static void test_no_starvation(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    f.cfg.preemption = 0;
    /* 1-GPU jobs fill both nodes but one device */
    int small[16], ns = 0;
    for (int i = 0; i < 15; i++) {
        char id[32];
        snprintf(id, sizeof(id), "s/%d", i);
        small[ns] = add_job(&f, id, 1, 1, SCHED_BATCH, 10);
        f.jobs[small[ns]].enqueue_time = i;
        run_on(&f, small[ns], i / 8, 1u << (i % 8));
        ns++;
    }
    int g = add_job(&f, "big/gang", 8, 1, SCHED_TRAINING, 10);
    f.jobs[g].enqueue_time = 100;
    int admitted_at_cycle = -1;
    for (int cyc = 0; cyc < 40 && admitted_at_cycle < 0; cyc++) {
        /* the oldest running small job finishes; a fresh one arrives */
        int oldest = -1;
        for (int x = 0; x < f.nj; x++)
            if (x != g && f.jobs[x].state == SCHED_JOB_RUNNING && f.jobs[x].nplaced > 0 &&
                (oldest < 0 || f.jobs[x].enqueue_time < f.jobs[oldest].enqueue_time))
                oldest = x;
        if (oldest >= 0) {
            f.jobs[oldest].nplaced = 0; /* finished: no longer holds capacity */
            f.jobs[oldest].replicas = 1;
            f.jobs[oldest].state = SCHED_JOB_RUNNING;
            f.jobs[oldest].gang = 1;
        }
        if (f.nj < MAXJ) {
            char id[32];
            snprintf(id, sizeof(id), "s/new%d", cyc);
            int n = add_job(&f, id, 1, 1, SCHED_BATCH, 10);
            f.jobs[n].enqueue_time = 200 + cyc;
        }
        assert_int_equal(cycle(&f), 0);
        for (int i = 0; i < f.res->n; i++) {
            const struct sched_decision *d = &f.res->d[i];
            if (d->kind != SCHED_ADMIT)
                continue;
            if (d->job == g) {
                admitted_at_cycle = cyc;
                break;
            }
            run_on(&f, d->job, d->rep[0].node, d->rep[0].devs);
        }
    }
    assert_true(admitted_at_cycle >= 0);
    assert_true(admitted_at_cycle <= 9);
    fx_done(&f);
}

/* determinism: the same snapshot gives byte-identical decisions */
static void test_determinism(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    for (int i = 0; i < 12; i++)
        add_node(&f, 8, i % 3 ? "H100" : "A100", 64000, i < 6 ? "r1" : "r2");
    for (int i = 0; i < 30; i++) {
        char id[32];
        snprintf(id, sizeof(id), "t/j%02d", i);
        int j = add_job(&f, id, 1 << (i % 4), 1 + i % 3, i % 5 ? SCHED_BATCH : SCHED_INFERENCE,
                        i % 7);
        f.jobs[j].enqueue_time = 1000 - i % 4;
    }
    assert_int_equal(cycle(&f), 0);
    struct sched_result *first = f.res;
    f.res = NULL;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(first->n, f.res->n);
    for (int i = 0; i < first->n; i++) {
        const struct sched_decision *a = &first->d[i], *b = &f.res->d[i];
        assert_int_equal(a->kind, b->kind);
        assert_int_equal(a->job, b->job);
        assert_int_equal(a->position, b->position);
        assert_string_equal(a->message, b->message);
        assert_int_equal(a->nrep, b->nrep);
        for (int r = 0; r < a->nrep; r++) {
            assert_int_equal(a->rep[r].node, b->rep[r].node);
            assert_int_equal(a->rep[r].devs, b->rep[r].devs);
        }
    }
    /* on one scratch, a recycled result's decision array serves the next
     * cycle: the same decisions, and the scratch holds the array between */
    struct sched *ctx = sched_new();
    assert_non_null(ctx);
    struct sched_snapshot s = {.config = &f.cfg, .now = f.now, .nodes = f.nodes, .nnodes = f.nn,
                               .jobs = f.jobs, .njobs = f.nj};
    char err[256];
    struct sched_result *r1 = NULL, *r2 = NULL;
    assert_int_equal(sched_cycle(ctx, &s, &r1, err, sizeof(err)), 0);
    const struct sched_decision *d1 = r1->d;
    size_t before = sched_mem_bytes(ctx);
    sched_result_recycle(ctx, r1);
    assert_true(sched_mem_bytes(ctx) >= before + (size_t)f.nj * sizeof(struct sched_decision));
    assert_int_equal(sched_cycle(ctx, &s, &r2, err, sizeof(err)), 0);
    assert_ptr_equal(r2->d, d1);
    assert_int_equal(r2->n, first->n);
    for (int i = 0; i < first->n; i++) {
        assert_int_equal(first->d[i].kind, r2->d[i].kind);
        assert_int_equal(first->d[i].job, r2->d[i].job);
        assert_string_equal(first->d[i].message, r2->d[i].message);
    }
    sched_result_recycle(ctx, r2);
    sched_result_recycle(NULL, NULL);
    sched_free(ctx); /* frees the array it keeps */
    sched_result_free(first);
    fx_done(&f);
}

static void test_bad_input(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    int j = add_job(&f, "x/bad", 1, 1, SCHED_BATCH, 1);
    f.jobs[j].team = 3;
    struct sched_snapshot s = {0};
    s.config = &f.cfg;
    s.nodes = f.nodes;
    s.nnodes = f.nn;
    s.jobs = f.jobs;
    s.njobs = f.nj;
    struct sched_result *r = NULL;
    char err[256] = "";
    assert_int_equal(sched_cycle(NULL, &s, &r, err, sizeof(err)), GQ_EINVAL);
    assert_null(r);
    assert_string_equal(err, "job x/bad: team index 3 out of range");
    f.jobs[j].team = -1;
    f.jobs[j].req.gpu_milli = 1500;
    f.jobs[j].req.gpus = 0;
    assert_int_equal(sched_cycle(NULL, &s, &r, err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "job x/bad: bad request (gpus 0)");
}

/* single-task index: FGD places shares to keep whole GPUs for whole-GPU shapes */
static void test_index_fgd(void **st)
{
    (void)st;
    struct sched_node nodes[2];
    memset(nodes, 0, sizeof(nodes));
    for (int i = 0; i < 2; i++) {
        nodes[i].name = i ? "b" : "a";
        nodes[i].gpus = 2;
        nodes[i].gpu_product = "V100";
        nodes[i].cpu_milli = 64000;
        nodes[i].mem_bytes = (int64_t)256 << 30;
        nodes[i].ready = 1;
        nodes[i].pool = -1;
    }
    /* node a: one device half used */
    nodes[0].foreign_gpu_milli[0] = 500;
    struct sched_config cfg;
    sched_config_default(&cfg);
    char err[128];
    struct sched_index *ix = sched_index_new(&cfg, nodes, 2, err, sizeof(err));
    assert_non_null(ix);
    struct sched_shape sh[2];
    memset(sh, 0, sizeof(sh));
    sh[0].req.gpu_milli = 500;
    sh[0].weight = 1;
    sh[1].req.gpus = 2;
    sh[1].weight = 1;
    assert_int_equal(sched_index_set_shapes(ix, sh, 2, err, sizeof(err)), 0);
    struct sched_request rq;
    memset(&rq, 0, sizeof(rq));
    rq.gpu_milli = 500;
    struct sched_replica out;
    /* the share goes onto the half-used device: node b keeps 2 whole GPUs */
    assert_int_equal(sched_place_one(ix, &rq, NULL, 0, &out), 0);
    assert_int_equal(out.node, 0);
    assert_int_equal(out.devs, 0x1);
    rq.gpu_milli = 0;
    rq.gpus = 2;
    assert_int_equal(sched_place_one(ix, &rq, NULL, 0, &out), 0);
    assert_int_equal(out.node, 1);
    assert_int_equal(out.devs, 0x3);
    assert_int_equal(sched_place_one(ix, &rq, NULL, 0, &out), GQ_ENOTFOUND);
    int64_t alloc, total;
    double frag;
    sched_index_totals(ix, &alloc, &total, &frag);
    assert_int_equal(alloc, 3000);
    assert_int_equal(total, 4000);
    assert_int_equal(sched_index_release(ix, &rq, &(struct sched_replica){1, 0x3}), 0);
    sched_index_totals(ix, &alloc, NULL, NULL);
    assert_int_equal(alloc, 1000);
    sched_index_free(ix);
}


/* reservation: the blocked head holds the node closest to fitting; others backfill elsewhere */
static void test_reservation_backfill(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    int r0 = add_job(&f, "x/r0", 2, 1, SCHED_BATCH, 10);
    run_on(&f, r0, 0, 0x03); /* node 0: 6 free */
    int r1 = add_job(&f, "x/r1", 4, 1, SCHED_BATCH, 10);
    run_on(&f, r1, 1, 0x0F); /* node 1: 4 free */
    int big = add_job(&f, "x/big", 8, 1, SCHED_TRAINING, 10);
    int s1 = add_job(&f, "x/s1", 2, 1, SCHED_BATCH, 10);
    int s2 = add_job(&f, "x/s2", 4, 1, SCHED_BATCH, 10);
    int s3 = add_job(&f, "x/s3", 1, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, big, SCHED_WAIT)->message,
                        "0/2 nodes fit 8 GPUs: 2 fewer than 8 free GPUs; reserves node n0");
    /* node 0 (6 free) is reserved for big: s1 and s2 go to node 1 */
    const struct sched_decision *a1 = dec(&f, s1, SCHED_ADMIT);
    assert_non_null(a1);
    assert_int_equal(a1->rep[0].node, 1);
    assert_null(dec(&f, s2, SCHED_ADMIT)); /* node 1 has 2 left after s1 */
    assert_string_equal(dec(&f, s2, SCHED_WAIT)->message,
                        "0/2 nodes fit 4 GPUs: 1 reserved for a higher job, 1 fewer than 4 free GPUs");
    const struct sched_decision *a3 = dec(&f, s3, SCHED_ADMIT);
    assert_non_null(a3);
    assert_int_equal(a3->rep[0].node, 1);
    /* without reservations the small jobs would take node 0 */
    f.cfg.max_reservations = 0;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, s2, SCHED_ADMIT));
    assert_int_equal(dec(&f, s2, SCHED_ADMIT)->rep[0].node, 0);
    fx_done(&f);
}

/* Backfill with run limits (knavigator's HPC backfill test on GPUs): b1
 * holds 4 of node 0's 8 GPUs until now + 60 (its maxRunSeconds). The head a
 * (6 GPUs) reserves node 0 and could start there at now + 60. A later job
 * with a limit ending by then backfills the 4 free GPUs (c: 30 s); one
 * ending later (b2: 90 s) or with no limit (d) waits: either would delay a. */
static void test_backfill_run_limits(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 8, "H100", 64000, NULL);
    int b1 = add_job(&f, "x/b1", 4, 1, SCHED_BATCH, 10);
    run_on(&f, b1, 0, 0x0F);
    f.jobs[b1].admitted_at = f.now - 30;
    f.jobs[b1].max_run_s = 90; /* ends by now + 60 */
    int a = add_job(&f, "x/a", 6, 1, SCHED_BATCH, 10);
    int b2 = add_job(&f, "x/b2", 4, 1, SCHED_BATCH, 10);
    f.jobs[b2].max_run_s = 90;
    int c = add_job(&f, "x/c", 4, 1, SCHED_BATCH, 10);
    f.jobs[c].max_run_s = 60;
    int d = add_job(&f, "x/d", 4, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    /* a's wait says by when the node is free for it: now + 60 */
    assert_string_equal(dec(&f, a, SCHED_WAIT)->message,
                        "0/1 nodes fit 6 GPUs: 1 fewer than 6 free GPUs; reserves node n0, free by "
                        "1970-01-02T03:47:40Z at the latest (the maxRunSeconds of the jobs there)");
    assert_null(dec(&f, b2, SCHED_ADMIT));
    assert_string_equal(dec(&f, b2, SCHED_WAIT)->message,
                        "0/1 nodes fit 4 GPUs: 1 reserved for a higher job its maxRunSeconds could delay");
    const struct sched_decision *ac = dec(&f, c, SCHED_ADMIT);
    assert_non_null(ac);
    assert_int_equal(ac->rep[0].node, 0);
    assert_string_equal(ac->message, "admitted 1 replica; backfill on nodes reserved for x/a: ends within "
                                     "its maxRunSeconds (60s), before that job could start");
    assert_int_equal(f.res->stats.backfilled, 1);
    assert_null(dec(&f, d, SCHED_ADMIT));

    /* a limit one second longer than the time left: it would delay a */
    f.jobs[c].max_run_s = 61;
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, c, SCHED_ADMIT));

    /* b1 without a limit: nobody can say when a starts, no backfill */
    f.jobs[c].max_run_s = 1;
    f.jobs[b1].max_run_s = 0;
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, c, SCHED_ADMIT));
    assert_string_equal(dec(&f, c, SCHED_WAIT)->message,
                        "0/1 nodes fit 4 GPUs: 1 reserved for a higher job its maxRunSeconds could delay");
    assert_string_equal(dec(&f, d, SCHED_WAIT)->message, "0/1 nodes fit 4 GPUs: 1 reserved for a higher job");

    /* b1 past its limit (being stopped): a starts as soon as it is gone */
    f.jobs[b1].max_run_s = 10;
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, c, SCHED_ADMIT));

    /* b1 gone, its pod still stopping (foreign usage that is releasing): a
     * still reserves the node, which is its at once: nothing backfills */
    f.jobs[b1].state = SCHED_JOB_WAITING;
    f.jobs[b1].nplaced = 0;
    f.jobs[b1].req.gpus = 16; /* out of the way: fits no node, reserves none */
    for (int k = 0; k < 4; k++)
        f.nodes[0].foreign_gpu_milli[k] = f.nodes[0].releasing_gpu_milli[k] = 1000;
    f.jobs[c].max_run_s = 30;
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, a, SCHED_WAIT)->message,
                        "0/1 nodes fit 6 GPUs: 1 fewer than 6 free GPUs; reserves node n0");
    assert_null(dec(&f, c, SCHED_ADMIT));
    assert_null(dec(&f, d, SCHED_ADMIT));
    /* the same usage by a pod that stays: the node cannot hold a, no reservation */
    memset(f.nodes[0].releasing_gpu_milli, 0, sizeof(f.nodes[0].releasing_gpu_milli));
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, a, SCHED_WAIT)->message, "0/1 nodes fit 6 GPUs: 1 fewer than 6 free GPUs");
    assert_non_null(dec(&f, b2, SCHED_ADMIT)); /* the next in the queue that fits */
    fx_done(&f);
}

/* backfill counts the jobs admitted earlier in the same cycle: they run from
 * now and end by now + their maxRunSeconds (an event-driven simulator runs
 * no other cycle before they end) */
static void test_backfill_same_cycle(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 8, "H100", 64000, NULL);
    int b1 = add_job(&f, "x/b1", 4, 1, SCHED_BATCH, 10);
    f.jobs[b1].max_run_s = 90; /* admitted now: ends by now + 90 */
    int a = add_job(&f, "x/a", 6, 1, SCHED_BATCH, 10);
    int c = add_job(&f, "x/c", 2, 1, SCHED_BATCH, 10);
    f.jobs[c].max_run_s = 90;
    int d = add_job(&f, "x/d", 2, 1, SCHED_BATCH, 10);
    /* c and d ask 2 GPUs more than the node's 2 that a never needs (its
     * spare: test_backfill_spare) */
    f.jobs[c].req.gpus = f.jobs[d].req.gpus = 4;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, b1, SCHED_ADMIT));
    assert_string_equal(dec(&f, a, SCHED_WAIT)->message,
                        "0/1 nodes fit 6 GPUs: 1 fewer than 6 free GPUs; reserves node n0, free by "
                        "1970-01-02T03:48:10Z at the latest (the maxRunSeconds of the jobs there)");
    const struct sched_decision *ac = dec(&f, c, SCHED_ADMIT);
    assert_non_null(ac);
    assert_string_equal(ac->message, "admitted 1 replica; backfill on nodes reserved for x/a: ends within "
                                     "its maxRunSeconds (90s), before that job could start");
    assert_null(dec(&f, d, SCHED_ADMIT)); /* no limit: it could delay a */
    /* a limit past b1's end would delay a */
    f.jobs[c].max_run_s = 91;
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, c, SCHED_ADMIT));
    /* one well within b1's end backfills */
    f.jobs[c].max_run_s = 60;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, c, SCHED_ADMIT));
    fx_done(&f);
}

/* Without run limits a reserved node still offers what its job never needs
 * there, whatever of the node's work is still running when it starts: on an
 * 8-GPU node where b1 (4 GPUs, no limit) runs and a needs 6, the 2 GPUs a
 * leaves take a 2-GPU job, once; with m (1 GPU) also running, a may start
 * while m still runs (b1 gone), so only 1 GPU is spare. */
static void test_backfill_spare(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 8, "H100", 64000, NULL);
    int b1 = add_job(&f, "x/b1", 4, 1, SCHED_BATCH, 10);
    run_on(&f, b1, 0, 0x0F);
    int a = add_job(&f, "x/a", 6, 1, SCHED_BATCH, 10);
    int s1 = add_job(&f, "x/s1", 2, 1, SCHED_BATCH, 10);
    int s2 = add_job(&f, "x/s2", 2, 1, SCHED_BATCH, 10);
    int cpu = add_job(&f, "x/etl", 0, 1, SCHED_BATCH, 10);
    f.jobs[cpu].req.cpu_milli = 4000;
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, a, SCHED_WAIT)->message,
                        "0/1 nodes fit 6 GPUs: 1 fewer than 6 free GPUs; reserves node n0");
    const struct sched_decision *as = dec(&f, s1, SCHED_ADMIT);
    assert_non_null(as);
    assert_string_equal(as->message, "admitted 1 replica; backfill on nodes reserved for x/a: in capacity "
                                     "that job does not need there");
    assert_null(dec(&f, s2, SCHED_ADMIT)); /* the spare is gone */
    assert_string_equal(dec(&f, s2, SCHED_WAIT)->message, "0/1 nodes fit 2 GPUs: 1 reserved for a higher job");
    assert_non_null(dec(&f, cpu, SCHED_ADMIT)); /* CPUs a does not need */
    assert_int_equal(f.res->stats.backfilled, 2);

    /* s1 and the CPU job running: nothing more is spare */
    run_on(&f, s1, 0, 0x30);
    f.jobs[s1].admitted_at = f.now;
    run_on(&f, cpu, 0, 0);
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, s2, SCHED_ADMIT));
    assert_non_null(dec(&f, a, SCHED_WAIT));

    /* instead of s1, m (1 GPU) ran there before: a may start beside it */
    f.jobs[s1].state = SCHED_JOB_WAITING;
    f.jobs[s1].nplaced = 0;
    f.jobs[s1].req.gpus = 16; /* out of the way */
    f.jobs[cpu].state = SCHED_JOB_WAITING;
    f.jobs[cpu].nplaced = 0;
    f.jobs[cpu].req.gpus = 16;
    int m = add_job(&f, "x/m", 1, 1, SCHED_BATCH, 10);
    run_on(&f, m, 0, 0x10);
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, s2, SCHED_ADMIT)); /* 2 GPUs: a could not start beside m and s2 */
    int s3 = add_job(&f, "x/s3", 1, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, s2, SCHED_ADMIT));
    assert_non_null(dec(&f, s3, SCHED_ADMIT)); /* 1 GPU: a starts beside m and s3 */
    fx_done(&f);
}

/* cohort: a team reclaims the quota it lent, even from a higher-priority borrower */
static void test_reclaim_lent_quota(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    f.quotas[0][0] = (struct sched_quota){"*", 8, -1, -1};
    f.quotas[1][0] = (struct sched_quota){"*", 0, -1, -1};
    f.teams[0] = (struct sched_team){"owner", "co", 1, f.quotas[0], 1, 0};
    f.teams[1] = (struct sched_team){"guest", "co", 1, f.quotas[1], 1, 0};
    f.nt = 2;
    int g = add_job(&f, "guest/run", 8, 1, SCHED_BATCH, 50);
    f.jobs[g].team = 1;
    run_on(&f, g, 0, 0xFF);
    int o = add_job(&f, "owner/job", 4, 1, SCHED_BATCH, 10);
    f.jobs[o].team = 0;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *p = dec(&f, g, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, o);
    assert_string_equal(p->message, "preempted to make room for owner/job (Batch, priority 10): "
                                    "reclaiming quota lent to team guest");
    /* a guest job cannot borrow beyond what the owner lends */
    f.jobs[g].state = SCHED_JOB_WAITING;
    f.jobs[g].nplaced = 0;
    f.quotas[0][0].lending_limit = 4;
    f.jobs[o].state = SCHED_JOB_RUNNING; /* owner holds 4 (within its guarantee) */
    f.jobs[o].placement = f.place[o];
    f.place[o][0] = (struct sched_replica){0, 0x0F};
    f.jobs[o].nplaced = 1;
    f.jobs[g].req.gpus = 4;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, g, SCHED_ADMIT)); /* borrows the 4 lendable */
    f.jobs[g].req.gpus = 5;
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, g, SCHED_WAIT)->message,
                        "0/1 nodes fit 5 GPUs: 1 fewer than 5 free GPUs; team guest quota 0/0 "
                        "GPUs used (may borrow 4), needs 5");
    fx_done(&f);
}

/* a non-gang job with a required level keeps its replicas in one domain */
static void test_nongang_required_domain(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 1, "H100", 64000, "r1");
    add_node(&f, 1, "H100", 64000, "r2");
    add_node(&f, 1, "H100", 64000, "r2");
    int inf = add_job(&f, "prod/serve", 1, 3, SCHED_INFERENCE, 100);
    f.jobs[inf].topo_required = sched_config_level(&f.cfg, "rack");
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, inf, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->nrep, 2);
    assert_string_equal(a->domain, "r2");
    assert_true(a->rep[0].node >= 1 && a->rep[1].node >= 1);
    assert_string_equal(dec(&f, inf, SCHED_WAIT)->message, "2 of 3 replicas admitted");
    /* running with 2 replicas in r2: the third is not placed in r1 */
    run_on(&f, inf, a->rep[0].node, a->rep[0].devs);
    run_on(&f, inf, a->rep[1].node, a->rep[1].devs);
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, inf, SCHED_ADMIT));
    fx_done(&f);
}

/* the single-task index honours node state, taints and the policies */
static void test_index_policies(void **st)
{
    (void)st;
    struct sched_node nodes[3];
    memset(nodes, 0, sizeof(nodes));
    struct sched_taint t = {"dedicated", "x", SCHED_NO_EXECUTE};
    for (int i = 0; i < 3; i++) {
        nodes[i].name = "n";
        nodes[i].gpus = 4;
        nodes[i].gpu_product = "T4";
        nodes[i].cpu_milli = 32000;
        nodes[i].mem_bytes = (int64_t)64 << 30;
        nodes[i].ready = 1;
        nodes[i].pool = -1;
    }
    nodes[0].ready = 0;
    nodes[1].foreign_gpu_milli[0] = 1000;
    nodes[1].foreign_gpu_milli[1] = 1000;
    nodes[2].taints = &t;
    nodes[2].ntaints = 1;
    struct sched_config cfg;
    sched_config_default(&cfg);
    cfg.policy = SCHED_POLICY_BESTFIT;
    char err[128];
    struct sched_index *ix = sched_index_new(&cfg, nodes, 3, err, sizeof(err));
    assert_non_null(ix);
    struct sched_request rq;
    memset(&rq, 0, sizeof(rq));
    rq.gpus = 2;
    rq.cpu_milli = 1000;
    struct sched_replica out;
    /* node 0 not ready, node 2 tainted: only node 1 */
    assert_int_equal(sched_place_one(ix, &rq, NULL, 0, &out), 0);
    assert_int_equal(out.node, 1);
    assert_int_equal(out.devs, 0xC);
    assert_int_equal(sched_place_one(ix, &rq, NULL, 0, &out), GQ_ENOTFOUND);
    struct sched_toleration tol = {"dedicated", NULL, 1, SCHED_EFFECT_ANY};
    assert_int_equal(sched_place_one(ix, &rq, &tol, 1, &out), 0);
    assert_int_equal(out.node, 2);
    /* wrong type */
    rq.types[0] = "A100";
    rq.ntypes = 1;
    assert_int_equal(sched_place_one(ix, &rq, &tol, 1, &out), GQ_ENOTFOUND);
    /* bad request */
    rq.ntypes = 0;
    rq.gpu_milli = 500;
    assert_int_equal(sched_place_one(ix, &rq, NULL, 0, &out), GQ_EINVAL);
    sched_index_free(ix);
}


/* the bounded search window never hides the one rack that fits */
static void test_window_finds_late_rack(void **st)
{
    (void)st;
    static struct fx f;
    fx_init(&f);
    char rk[48][16];
    for (int r = 0; r < 40; r++) {
        snprintf(rk[r], sizeof(rk[r]), "r%02d", r);
        for (int k = 0; k < 4; k++) {
            int i = add_node(&f, 1, "H100", 64000, rk[r]);
            if (r < 39 && k >= 2)
                f.nodes[i].foreign_gpu_milli[0] = 1000; /* 2 free per rack, last rack 4 */
        }
    }
    int g = add_job(&f, "ml/g", 1, 3, SCHED_TRAINING, 10);
    f.jobs[g].topo_required = sched_config_level(&f.cfg, "rack");
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_string_equal(a->domain, "r39");
    fx_done(&f);
}


/* a victim still stopping is not preempted again and no second victim is taken */
static void test_stopping_victims(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    int e1 = add_job(&f, "research/exp", 8, 1, SCHED_BATCH, 10);
    run_on(&f, e1, 0, 0xFF);
    int e2 = add_job(&f, "research/exp2", 8, 1, SCHED_BATCH, 10);
    run_on(&f, e2, 1, 0xFF);
    int prod = add_job(&f, "prod/serve", 4, 1, SCHED_INFERENCE, 1000);
    int low = add_job(&f, "x/low", 1, 1, SCHED_BATCH, 1);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    const struct sched_decision *p = dec(&f, e1, SCHED_PREEMPT);
    assert_non_null(p);
    /* the caller stops e1; its pods are still terminating at the next cycle */
    f.jobs[e1].terminating = 1;
    f.jobs[e1].terminating_for = prod;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_string_equal(dec(&f, prod, SCHED_WAIT)->message, "waiting for 1 preempted job to stop");
    assert_null(dec(&f, low, SCHED_ADMIT));
    /* e1 is gone: prod is admitted on its node */
    f.jobs[e1].terminating = 0;
    f.jobs[e1].state = SCHED_JOB_WAITING;
    f.jobs[e1].nplaced = 0;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, prod, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, 0);
    /* e1, back in the queue ahead of low, now holds node 0's remaining GPUs */
    assert_non_null(dec(&f, e1, SCHED_WAIT));
    assert_string_equal(dec(&f, low, SCHED_WAIT)->message,
                        "0/2 nodes fit 1 GPU: 1 reserved for a higher job, 1 fewer than 1 free GPU");
    fx_done(&f);
}


/* victims that turn out unnecessary are dropped from the set */
static void test_drop_unneeded_victims(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    int a = add_job(&f, "x/batch", 1, 1, SCHED_BATCH, 1);
    run_on(&f, a, 0, 0x01);
    int t = add_job(&f, "x/train", 6, 1, SCHED_TRAINING, 1);
    run_on(&f, t, 0, 0x7E);
    int j = add_job(&f, "x/urgent", 7, 1, SCHED_TRAINING, 100);
    assert_int_equal(cycle(&f), 0);
    /* Batch is tried first but only the training job frees enough: batch stays */
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    const struct sched_decision *p = dec(&f, t, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, j);
    assert_null(dec(&f, a, SCHED_PREEMPT));
    fx_done(&f);
}

/* The reclaim loop the simulator found (one 8xA100 node, teams a and b with 4
 * each in one cohort): b/y reclaims its quota from a/x, which borrows it. Once
 * x has stopped, y (within nominal) is admitted before x (which must borrow),
 * x waits on quota, and x never preempts y back. */
static void test_reclaim_no_loop(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "A100", 64000, NULL);
    f.quotas[0][0] = (struct sched_quota){"A100", 4, -1, -1};
    f.quotas[1][0] = (struct sched_quota){"A100", 4, -1, -1};
    f.teams[0] = (struct sched_team){"a", "c", 1, f.quotas[0], 1, 0};
    f.teams[1] = (struct sched_team){"b", "c", 1, f.quotas[1], 1, 0};
    f.nt = 2;
    int x = add_job(&f, "a/x", 8, 1, SCHED_TRAINING, 900);
    f.jobs[x].team = 0;
    f.jobs[x].req.types[0] = "A100";
    f.jobs[x].req.ntypes = 1;
    run_on(&f, x, 0, 0xFF);
    int y = add_job(&f, "b/y", 4, 1, SCHED_BATCH, 100);
    f.jobs[y].team = 1;
    /* cycle 1: y plans the preemption of x */
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    const struct sched_decision *p = dec(&f, x, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, y);
    assert_string_equal(p->message, "preempted to make room for b/y (Batch, priority 100): "
                                    "reclaiming quota lent to team a");
    assert_string_equal(dec(&f, y, SCHED_WAIT)->message, "waiting for 1 preempted job to stop");
    /* cycle 2: x is terminating */
    f.jobs[x].terminating = 1;
    f.jobs[x].terminating_for = y;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_int_equal(count_kind(&f, SCHED_ADMIT), 0);
    assert_string_equal(dec(&f, y, SCHED_WAIT)->message, "waiting for 1 preempted job to stop");
    /* cycle 3: x is gone and waits again (priority 900 > 100): y is admitted
     * first because it fits within b's nominal quota and x must borrow */
    f.jobs[x].terminating = 0;
    f.jobs[x].terminating_for = -1;
    f.jobs[x].state = SCHED_JOB_WAITING;
    f.jobs[x].nplaced = 0;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    const struct sched_decision *a = dec(&f, y, SCHED_ADMIT);
    assert_non_null(a);
    assert_null(dec(&f, x, SCHED_ADMIT));
    assert_string_equal(dec(&f, x, SCHED_WAIT)->message,
                        "0/1 nodes fit 8 GPUs: 1 fewer than 8 free GPUs; "
                        "team a quota 0/4 A100 used, needs 8");
    assert_int_equal(f.res->d[0].job, y); /* y's ADMIT is the first decision */
    /* cycle 4: y runs past the minimum runtime; x (borrowing) may not take it
     * back from b's nominal quota, whatever its priority */
    f.jobs[y].state = SCHED_JOB_RUNNING;
    f.place[y][0] = a->rep[0];
    f.jobs[y].placement = f.place[y];
    f.jobs[y].nplaced = 1;
    f.jobs[y].admitted_at = f.now;
    f.now += 3600;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_int_equal(count_kind(&f, SCHED_ADMIT), 0);
    assert_string_equal(dec(&f, x, SCHED_WAIT)->message,
                        "0/1 nodes fit 8 GPUs: 1 fewer than 8 free GPUs; "
                        "team a quota 0/4 A100 used, needs 8");
    fx_done(&f);
}

/* A preemptor waiting for its victims holds a claim on its quota: a borrower
 * (even of higher priority) is not admitted into it, in the cycle that plans
 * the preemption nor while the victims stop; once they are gone the preemptor
 * is admitted, and the borrower gets what is left. */
static void test_claim_blocks_borrower(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "A100", 64000, NULL);
    add_node(&f, 4, "A100", 64000, NULL);
    int ta = add_team(&f, "a", "c", "A100", 4), tb = add_team(&f, "b", "c", "A100", 8),
        tg = add_team(&f, "g", "c", "A100", 0);
    int x = add_team_job(&f, "a/x", 8, SCHED_TRAINING, 500, ta);
    run_on(&f, x, 0, 0xFF);
    int y = add_team_job(&f, "b/y", 8, SCHED_BATCH, 100, tb);
    int w = add_team_job(&f, "g/w", 4, SCHED_BATCH, 950, tg);
    f.jobs[w].req.types[0] = "A100";
    f.jobs[w].req.ntypes = 1;
    /* cycle 1: y (within nominal) goes before w (borrowing) and claims 8 */
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, x, SCHED_PREEMPT));
    assert_int_equal(dec(&f, x, SCHED_PREEMPT)->for_job, y);
    assert_null(dec(&f, w, SCHED_ADMIT));
    const char *claim_msg = "1/2 nodes fit 4 GPUs: 1 reserved for a higher job; team g quota "
                            "0/0 A100 used, 8 claimed by jobs waiting for preempted jobs, "
                            "needs 4";
    assert_string_equal(dec(&f, w, SCHED_WAIT)->message, claim_msg);
    /* cycle 2: x stops; the claim holds */
    f.jobs[x].terminating = 1;
    f.jobs[x].terminating_for = y;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_int_equal(count_kind(&f, SCHED_ADMIT), 0);
    assert_string_equal(dec(&f, y, SCHED_WAIT)->message, "waiting for 1 preempted job to stop");
    assert_string_equal(dec(&f, w, SCHED_WAIT)->message, claim_msg);
    /* cycle 3: x gone: y admitted on n0, w borrows the 4 left on n1, x waits */
    f.jobs[x].terminating = 0;
    f.jobs[x].state = SCHED_JOB_WAITING;
    f.jobs[x].nplaced = 0;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *ay = dec(&f, y, SCHED_ADMIT);
    assert_non_null(ay);
    assert_int_equal(ay->rep[0].node, 0);
    const struct sched_decision *aw = dec(&f, w, SCHED_ADMIT);
    assert_non_null(aw);
    assert_int_equal(aw->rep[0].node, 1);
    assert_non_null(dec(&f, x, SCHED_WAIT));
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    fx_done(&f);
}

/* ---- pod nodeSelector ---- */

static void add_label(struct fx *f, int i, const char *key, const char *value)
{
    struct sched_node *n = &f->nodes[i];
    assert_true(n->nlabels < 3);
    f->labels[i][n->nlabels++] = (struct sched_label){key, value};
}

static const struct sched_label SEL_IB[] = {{"net.example.com/ib", "yes"}};
static const struct sched_label SEL_NO[] = {{"net.example.com/ib", "no"}};
static const struct sched_label SEL_NONE[] = {{"net.example.com/ib", "maybe"}};
static const struct sched_label SEL_IB_R2[] = {{"net.example.com/ib", "yes"},
                                               {"topology.gangq.io/rack", "r2"}};

/* a selector that matches only some nodes places there, even against best fit;
 * one that matches none waits with the mismatch count; the fail cache keeps
 * jobs of one shape but different selectors apart */
static void test_node_selector_places(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    for (int i = 0; i < 4; i++)
        add_node(&f, 8, "H100", 64000, NULL);
    add_label(&f, 1, "net.example.com/ib", "yes");
    add_label(&f, 3, "net.example.com/ib", "yes");
    add_label(&f, 2, "net.example.com/ib", "no");
    int busy = add_job(&f, "x/busy", 4, 1, SCHED_BATCH, 10);
    run_on(&f, busy, 0, 0x0F); /* node 0: 4 free, the best fit for 4 GPUs */
    int plain = add_job(&f, "x/plain", 4, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(dec(&f, plain, SCHED_ADMIT)->rep[0].node, 0);
    /* the same job with a selector goes to a matching node */
    f.jobs[plain].node_selector = SEL_IB;
    f.jobs[plain].nnode_selector = 1;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, plain, SCHED_ADMIT);
    assert_non_null(a);
    assert_true(a->rep[0].node == 1 || a->rep[0].node == 3);
    /* a gang of 2x8 with the selector takes exactly nodes 1 and 3 */
    f.jobs[plain].req.gpus = 8;
    f.jobs[plain].replicas = 2;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, plain, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->nrep, 2);
    assert_true((a->rep[0].node == 1 && a->rep[1].node == 3) ||
                (a->rep[0].node == 3 && a->rep[1].node == 1));
    /* 3x8 cannot fit on the two matching nodes: whole gang waits */
    f.jobs[plain].replicas = 3;
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, plain, SCHED_ADMIT));
    assert_string_equal(dec(&f, plain, SCHED_WAIT)->message,
                        "2/4 nodes fit 3x8 GPUs: 2 node selector mismatch; "
                        "only 2 of 3 replicas fit");
    /* the value must be equal, not just the key present: ib=no is node 2 */
    f.jobs[plain].replicas = 1;
    f.jobs[plain].node_selector = SEL_NO;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(dec(&f, plain, SCHED_ADMIT)->rep[0].node, 2);
    /* a selector no node matches: every node is a mismatch (label absent or
     * another value), whatever its free capacity */
    f.jobs[plain].node_selector = SEL_NONE;
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, plain, SCHED_ADMIT));
    assert_string_equal(dec(&f, plain, SCHED_WAIT)->message,
                        "0/4 nodes fit 8 GPUs: 4 node selector mismatch");
    f.jobs[plain].node_selector = SEL_IB_R2; /* second term: no rack label */
    f.jobs[plain].nnode_selector = 2;
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, plain, SCHED_WAIT)->message,
                        "0/4 nodes fit 8 GPUs: 4 node selector mismatch");
    /* same shape, different selectors, one cycle: the failing one does not
     * poison the fail cache for the others (earlier in queue order) */
    f.jobs[plain].node_selector = SEL_NONE;
    f.jobs[plain].nnode_selector = 1;
    int other = add_job(&f, "x/other", 8, 1, SCHED_BATCH, 10);
    int ib = add_job(&f, "x/ib", 8, 1, SCHED_BATCH, 10);
    f.jobs[ib].node_selector = SEL_IB;
    f.jobs[ib].nnode_selector = 1;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, plain, SCHED_WAIT));
    assert_non_null(dec(&f, other, SCHED_ADMIT));
    a = dec(&f, ib, SCHED_ADMIT);
    assert_non_null(a);
    assert_true(a->rep[0].node == 1 || a->rep[0].node == 3);
    assert_true(dec(&f, other, SCHED_ADMIT)->rep[0].node != a->rep[0].node);
    fx_done(&f);
}

/* a gang with a required rack whose selector leaves too few nodes in every
 * rack stays whole and waits, although each rack has enough free nodes */
static void test_node_selector_gang_rack(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.preemption = 0;
    for (int i = 0; i < 6; i++)
        add_node(&f, 8, "H100", 64000, i < 3 ? "r1" : "r2");
    add_label(&f, 0, "net.example.com/ib", "yes");
    add_label(&f, 1, "net.example.com/ib", "yes");
    add_label(&f, 3, "net.example.com/ib", "yes");
    add_label(&f, 4, "net.example.com/ib", "yes");
    int rack = sched_config_level(&f.cfg, "rack");
    int g = add_job(&f, "ml/g", 8, 3, SCHED_TRAINING, 10);
    f.jobs[g].topo_required = rack;
    f.jobs[g].node_selector = SEL_IB;
    f.jobs[g].nnode_selector = 1;
    int small = add_job(&f, "ml/small", 8, 1, SCHED_BATCH, 1);
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, g, SCHED_ADMIT));
    assert_string_equal(dec(&f, g, SCHED_WAIT)->message,
                        "4/6 nodes fit 3x8 GPUs in one rack: 2 node selector mismatch; "
                        "no rack holds 3 replicas");
    /* the reservation of the blocked head covers only matching nodes: the
     * selector-free backfill still lands somewhere (a mismatching node is
     * never reserved for g) */
    const struct sched_decision *a = dec(&f, small, SCHED_ADMIT);
    assert_non_null(a);
    /* without the selector the gang fits in one rack */
    f.jobs[g].nnode_selector = 0;
    f.jobs[g].node_selector = NULL;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->nrep, 3);
    /* two matching nodes per rack: a 2-replica gang fits in a rack, on them */
    f.jobs[g].node_selector = SEL_IB;
    f.jobs[g].nnode_selector = 1;
    f.jobs[g].replicas = 2;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    for (int r = 0; r < 2; r++)
        assert_true(a->rep[r].node != 2 && a->rep[r].node != 5);
    fx_done(&f);
}

/* a selector reserves only matching nodes for a blocked head */
static void test_node_selector_reservation(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    add_label(&f, 1, "net.example.com/ib", "yes");
    int r0 = add_job(&f, "x/r0", 2, 1, SCHED_BATCH, 10);
    run_on(&f, r0, 0, 0x03); /* node 0: 6 free (closest to fitting 8 without selector) */
    int r1 = add_job(&f, "x/r1", 4, 1, SCHED_BATCH, 10);
    run_on(&f, r1, 1, 0x0F); /* node 1: 4 free */
    int big = add_job(&f, "x/big", 8, 1, SCHED_TRAINING, 10);
    f.jobs[big].node_selector = SEL_IB;
    f.jobs[big].nnode_selector = 1;
    int s2 = add_job(&f, "x/s2", 4, 1, SCHED_BATCH, 10);
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, big, SCHED_WAIT)->message,
                        "0/2 nodes fit 8 GPUs: 1 node selector mismatch, 1 fewer than 8 free GPUs; reserves node n1");
    /* node 1 is reserved for big, node 0 is free for s2 (it would be reserved
     * without the selector, see test_reservation_backfill) */
    const struct sched_decision *a = dec(&f, s2, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, 0);
    fx_done(&f);
}

/* preemption only considers victims on nodes the selector matches */
static void test_node_selector_preempt(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    add_node(&f, 8, "H100", 64000, NULL);
    add_label(&f, 1, "net.example.com/ib", "yes");
    int v0 = add_job(&f, "x/v0", 8, 1, SCHED_BATCH, 1);
    run_on(&f, v0, 0, 0xFF);
    int v1 = add_job(&f, "x/v1", 8, 1, SCHED_BATCH, 5);
    run_on(&f, v1, 1, 0xFF);
    int hi = add_job(&f, "x/hi", 8, 1, SCHED_TRAINING, 100);
    assert_int_equal(cycle(&f), 0);
    /* without a selector the lowest-priority victim goes */
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    assert_non_null(dec(&f, v0, SCHED_PREEMPT));
    f.jobs[hi].node_selector = SEL_IB;
    f.jobs[hi].nnode_selector = 1;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    const struct sched_decision *p = dec(&f, v1, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, hi);
    assert_null(dec(&f, v0, SCHED_PREEMPT));
    /* a selector no node matches preempts nothing */
    f.jobs[hi].node_selector = SEL_NONE;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_string_equal(dec(&f, hi, SCHED_WAIT)->message,
                        "0/2 nodes fit 8 GPUs: 2 node selector mismatch");
    /* a malformed selector is refused */
    f.jobs[hi].node_selector = NULL;
    assert_int_equal(cycle(&f), GQ_EINVAL);
    fx_done(&f);
}

/* The minimum runtime never holds back an Inference preemptor; a Training
 * preemptor held back by it says until when the victims are protected. */
static void test_min_runtime_inference(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.now = 1764565200; /* 2025-12-01T05:00:00Z */
    add_node(&f, 8, "H100", 64000, NULL);
    int b = add_job(&f, "research/batch", 8, 1, SCHED_BATCH, 10);
    run_on(&f, b, 0, 0xFF);
    f.jobs[b].admitted_at = f.now - 60; /* admitted a minute ago, min runtime 300 s */
    int prod = add_job(&f, "prod/serve", 4, 1, SCHED_INFERENCE, 1000);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *p = dec(&f, b, SCHED_PREEMPT);
    assert_non_null(p);
    assert_int_equal(p->for_job, prod);
    assert_string_equal(p->message, "preempted to make room for prod/serve (Inference, priority 1000): "
                                    "lower priority 10");
    assert_string_equal(dec(&f, prod, SCHED_WAIT)->message, "waiting for 1 preempted job to stop");
    assert_int_equal(dec(&f, prod, SCHED_WAIT)->until, 0);

    /* a Training preemptor waits for the minimum runtime and says until when */
    f.jobs[prod].cls = SCHED_TRAINING;
    f.jobs[prod].gang = 1;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    const struct sched_decision *w = dec(&f, prod, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "0/1 nodes fit 4 GPUs: 1 fewer than 4 free GPUs; the jobs it would "
                                    "preempt are protected by the minimum runtime (300s) until "
                                    "2025-12-01T05:04:00Z; reserves node n0");
    assert_int_equal(w->until, f.now + 240);
    /* past the minimum runtime it preempts, and nothing is said of it */
    f.now += 240;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, b, SCHED_PREEMPT));
    assert_int_equal(dec(&f, prod, SCHED_WAIT)->until, 0);
    /* a job that could not preempt anyway (equal priority) says nothing of the runtime */
    f.now -= 240;
    f.jobs[prod].priority = 10;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_string_equal(dec(&f, prod, SCHED_WAIT)->message, "0/1 nodes fit 4 GPUs: 1 fewer than 4 free GPUs; reserves node n0");
    fx_done(&f);
}

/* A recycled decision array far larger than the next cycle needs (more than
 * four times) is given back, not kept resident after a burst. */
static void test_recycle_shrinks(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, NULL);
    for (int i = 0; i < 60; i++) {
        char id[32];
        snprintf(id, sizeof(id), "t/j%02d", i);
        add_job(&f, id, 1, 1, SCHED_BATCH, 1);
    }
    struct sched *ctx = sched_new();
    assert_non_null(ctx);
    struct sched_snapshot s = {.config = &f.cfg, .now = f.now, .nodes = f.nodes, .nnodes = f.nn,
                               .jobs = f.jobs, .njobs = f.nj};
    char err[256];
    struct sched_result *r = NULL;
    size_t empty = sched_mem_bytes(ctx);
    assert_int_equal(sched_cycle(ctx, &s, &r, err, sizeof(err)), 0);
    size_t used = sched_mem_bytes(ctx);
    sched_result_recycle(ctx, r);
    size_t kept = sched_mem_bytes(ctx);
    assert_true(kept >= used + 60 * sizeof(struct sched_decision)); /* 76 kept */
    /* 50 jobs: the kept array serves (76 <= 4 x 66) */
    s.njobs = 50;
    assert_int_equal(sched_cycle(ctx, &s, &r, err, sizeof(err)), 0);
    assert_int_equal(count_kind_r(r, SCHED_ADMIT), 8);
    sched_result_recycle(ctx, r);
    assert_int_equal(sched_mem_bytes(ctx), kept);
    /* one job: 76 > 4 x 17, given back; the small one is kept instead */
    s.njobs = 1;
    assert_int_equal(sched_cycle(ctx, &s, &r, err, sizeof(err)), 0);
    assert_int_equal(r->n, 1);
    sched_result_recycle(ctx, r);
    assert_true(sched_mem_bytes(ctx) < kept);
    assert_true(sched_mem_bytes(ctx) >= empty);
    sched_free(ctx);
    fx_done(&f);
}

/* A queue of identical blocked jobs costs one preemption plan, not one each:
 * a plan that found nothing answers the next job of the same team, priority,
 * class and request while the cycle's state stands, with the same decision
 * and the same "protected until". A job preempted for a waiting one (its own
 * exclusions) plans for itself; so does every job once the state changed. */
static void test_preempt_plan_remembered(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.now = 1764565200;
    f.cfg.max_reservations = 0; /* no reservation changes the state between them */
    add_node(&f, 8, "H100", 64000, NULL);
    for (int i = 0; i < 8; i++) {
        char id[32];
        snprintf(id, sizeof(id), "t/small-%d", i);
        int b = add_job(&f, id, 1, 1, SCHED_BATCH, 10);
        run_on(&f, b, 0, 1u << i);
        f.jobs[b].admitted_at = f.now - 60; /* protected 240 s more (300 s) */
    }
    int w0 = f.nj;
    for (int i = 0; i < 5; i++) {
        char id[32];
        snprintf(id, sizeof(id), "t/train-%d", i);
        add_job(&f, id, 8, 1, SCHED_TRAINING, 100);
    }
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    for (int i = 0; i < 5; i++) {
        const struct sched_decision *w = dec(&f, w0 + i, SCHED_WAIT);
        assert_non_null(w);
        assert_int_equal(w->until, f.now + 240);
        assert_non_null(strstr(w->message, "protected by the minimum runtime (300s) until 2025-12-01T05:04:00Z"));
    }
    assert_int_equal(f.res->stats.preempt_plans, 1);
    assert_int_equal(f.res->stats.preempt_remembered, 4);

    /* one of them was preempted for another waiting job: both plan for
     * themselves (the victim's exclusions, the preemptor's claim), the first
     * plain one plans and answers the other two */
    f.jobs[w0 + 2].preempted_for = "t/train-0";
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(f.res->stats.preempt_plans, 3);
    assert_int_equal(f.res->stats.preempt_remembered, 2);
    assert_int_equal(dec(&f, w0 + 2, SCHED_WAIT)->until, f.now + 240);
    f.jobs[w0 + 2].preempted_for = NULL;

    /* past the protection the first preempts: its victims are chosen, the
     * state changed, and the next plans anew (and finds the node taken) */
    f.now += 240;
    assert_int_equal(cycle(&f), 0);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 8);
    assert_int_equal(dec(&f, w0, SCHED_WAIT)->until, 0);
    assert_int_equal(f.res->stats.preempt_plans, 2);
    assert_int_equal(f.res->stats.preempt_remembered, 3);
    fx_done(&f);
}

/* GPU memory from real nvidia.com/gpu.memory label values (MiB) against
 * minMemoryGiB as cards are sold: a node qualifies when it reports at least
 * 93 % of the asked MiB (ECC and driver reserve): A100 40GB 40960, A100 80GB
 * 81920, H100 80GB 81559, L40S 48GB 46068, L4 24GB 23034. */
static void test_gpu_memory_labels(void **st)
{
    (void)st;
    static const struct { const char *product, *mib; } cards[] = {
        {"NVIDIA-A100-SXM4-40GB", "40960"}, {"NVIDIA-A100-SXM4-80GB", "81920"},
        {"NVIDIA-H100-80GB-HBM3", "81559"}, {"NVIDIA-L40S", "46068"}, {"NVIDIA-L4", "23034"}};
    static const struct { int gib; const char *admitted_on; } cases[] = {
        {80, "NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3"},
        {86, "NVIDIA-A100-SXM4-80GB"}, /* 86 GiB x 93 % = 81899 MiB: above the H100's 81559 */
        {89, ""},
        {48, "NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3 NVIDIA-L40S"},
        {50, "NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3"},
        {40, "NVIDIA-A100-SXM4-40GB NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3 NVIDIA-L40S"},
        {43, "NVIDIA-A100-SXM4-40GB NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3 NVIDIA-L40S"},
        {44, "NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3 NVIDIA-L40S"},
        {24, "NVIDIA-A100-SXM4-40GB NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3 NVIDIA-L40S NVIDIA-L4"},
        {25, "NVIDIA-A100-SXM4-40GB NVIDIA-A100-SXM4-80GB NVIDIA-H100-80GB-HBM3 NVIDIA-L40S"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct fx f;
        fx_init(&f);
        for (int i = 0; i < 5; i++) {
            int n = add_node(&f, 1, cards[i].product, 64000, NULL);
            f.nodes[n].gpu_mem_mib = 0; /* read the label, as GFD writes it */
            f.labels[n][f.nodes[n].nlabels++] = (struct sched_label){"nvidia.com/gpu.memory", cards[i].mib};
        }
        /* one 1-GPU job per card: each is admitted only where the memory suffices */
        for (int i = 0; i < 5; i++) {
            char id[32];
            snprintf(id, sizeof(id), "ml/j%d", i);
            int j = add_job(&f, id, 1, 1, SCHED_BATCH, 10);
            f.jobs[j].req.min_gpu_mem_gib = cases[c].gib;
        }
        assert_int_equal(cycle(&f), 0);
        char got[256] = "";
        int len = 0;
        for (int i = 0; i < 5; i++) {
            int on = 0;
            for (int j = 0; j < f.nj; j++) {
                const struct sched_decision *a = dec(&f, j, SCHED_ADMIT);
                if (a && a->rep[0].node == i)
                    on = 1;
            }
            if (on)
                len += snprintf(got + len, sizeof(got) - (size_t)len, "%s%s", len ? " " : "", cards[i].product);
        }
        if (strcmp(got, cases[c].admitted_on) != 0)
            fprintf(stderr, "min %d GiB: admitted on '%s'\n", cases[c].gib, got);
        assert_string_equal(got, cases[c].admitted_on);
        fx_done(&f);
    }
}

/* The admission names the domain the replicas actually share: with a
 * preferred rack that no rack can hold, replicas spread over racks and no
 * rack is named; packed into one rack, that rack is. */
static void test_admit_domain_shared(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100", 64000, "r1");
    add_node(&f, 8, "H100", 64000, "r1");
    add_node(&f, 8, "H100", 64000, "r2");
    add_node(&f, 8, "H100", 64000, "r2");
    int rack = sched_config_level(&f.cfg, "rack");
    int g = add_job(&f, "ml/g", 8, 3, SCHED_TRAINING, 10);
    f.jobs[g].topo_preferred = rack;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->nrep, 3);
    assert_null(a->domain);
    assert_string_equal(a->message, "admitted 3 replicas");
    /* two replicas fit one rack: it is named */
    f.jobs[g].replicas = 2;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(f.racks[a->rep[0].node][1], f.racks[a->rep[1].node][1]);
    assert_string_equal(a->domain, f.racks[a->rep[0].node]);
    char want[64];
    snprintf(want, sizeof(want), "admitted 2 replicas in rack %s", f.racks[a->rep[0].node]);
    assert_string_equal(a->message, want);
    /* a required rack with one replica names the rack, not the node */
    f.jobs[g].topo_preferred = -1;
    f.jobs[g].topo_required = rack;
    f.jobs[g].replicas = 1;
    assert_int_equal(cycle(&f), 0);
    a = dec(&f, g, SCHED_ADMIT);
    assert_non_null(a);
    assert_string_equal(a->domain, f.racks[a->rep[0].node]);
    fx_done(&f);
}

/* A 12-node network topology (datacenter / spine / block, as NVIDIA's
 * knavigator benchmark labels it), 5 nodes cordoned. `preferred: block`
 * means the tightest block that fits, else the tightest spine, else the
 * datacenter. Free nodes: sw11 {n2,n3}, sw12 {n4}, sw13 {n5,n7,n8}, sw14 {n9};
 * spine sw21 = sw11+sw12 (3 free), sw22 = sw13+sw14 (4 free). */
static void test_preferred_topology(void **st)
{
    (void)st;
    static const struct { const char *spine, *block; int cordoned; } layout[12] = {
        {"sw21", "sw11", 1}, {"sw21", "sw11", 0}, {"sw21", "sw11", 0}, {"sw21", "sw12", 0},
        {"sw22", "sw13", 0}, {"sw22", "sw13", 1}, {"sw22", "sw13", 0}, {"sw22", "sw13", 0},
        {"sw22", "sw14", 0}, {"sw23", "sw15", 1}, {"sw23", "sw15", 1}, {"sw23", "sw15", 1}};
    static struct sched_label lab[12][4];
    static char names[12][16];
    struct fx f;
    fx_init(&f);
    f.cfg.nlevels = 4;
    f.cfg.levels[0] = (struct sched_level){"datacenter", "network.topology.nvidia.com/datacenter"};
    f.cfg.levels[1] = (struct sched_level){"spine", "network.topology.nvidia.com/spine"};
    f.cfg.levels[2] = (struct sched_level){"block", "network.topology.nvidia.com/block"};
    f.cfg.levels[3] = (struct sched_level){"node", "kubernetes.io/hostname"};
    for (int i = 0; i < 12; i++) {
        int n = add_node(&f, 8, "H100", 64000, NULL);
        snprintf(names[i], sizeof(names[i]), "n%d", i + 1);
        f.nodes[n].name = names[i];
        lab[i][0] = (struct sched_label){"network.topology.nvidia.com/datacenter", "dc1"};
        lab[i][1] = (struct sched_label){"network.topology.nvidia.com/spine", layout[i].spine};
        lab[i][2] = (struct sched_label){"network.topology.nvidia.com/block", layout[i].block};
        lab[i][3] = (struct sched_label){"kubernetes.io/hostname", names[i]};
        f.nodes[n].labels = lab[i];
        f.nodes[n].nlabels = 4;
        f.nodes[n].unschedulable = layout[i].cordoned;
    }
    int block = sched_config_level(&f.cfg, "block");
    int spine = sched_config_level(&f.cfg, "spine");
    static const struct { int replicas, level; const char *nodes, *msg; } cases[] = {
        /* the one block with 3 free nodes */
        {3, 2, "n5 n7 n8", "admitted 3 replicas in block sw13"},
        /* 2 replicas: the tightest block that fits is sw11 (2 free), not sw13 */
        {2, 2, "n2 n3", "admitted 2 replicas in block sw11"},
        /* 1 replica: a block with one free node */
        {1, 2, "n4", "admitted 1 replica in block sw12"},
        /* 4 replicas: no block holds them; the tightest spine that does, sw22 */
        {4, 2, "n5 n7 n8 n9", "admitted 4 replicas in spine sw22"},
        /* 5: no spine holds them; the datacenter does, and the replicas still
         * fill one spine before the other */
        {5, 2, "*", "admitted 5 replicas in datacenter dc1"},
        /* required spine alone: the tightest spine that holds 3, sw21 */
        {3, -1, "n2 n3 n4", "admitted 3 replicas in spine sw21"},
        /* required spine and preferred block: the spine whose block holds all 3 */
        {3, -2, "n5 n7 n8", "admitted 3 replicas in block sw13"},
    };
    int g = add_job(&f, "ml/gang", 8, 3, SCHED_TRAINING, 10);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        f.jobs[g].replicas = cases[c].replicas;
        f.jobs[g].topo_preferred = cases[c].level == 2 ? block : -1;
        f.jobs[g].topo_required = cases[c].level < 0 ? spine : -1;
        if (cases[c].level == -2)
            f.jobs[g].topo_preferred = block;
        assert_int_equal(cycle(&f), 0);
        const struct sched_decision *a = dec(&f, g, SCHED_ADMIT);
        assert_non_null(a);
        /* nodes in index order */
        int on[12] = {0};
        for (int y = 0; y < a->nrep; y++)
            on[a->rep[y].node] = 1;
        char got[64] = "";
        int len = 0;
        for (int i = 0; i < 12; i++)
            if (on[i])
                len += snprintf(got + len, sizeof(got) - (size_t)len, "%s%s", len ? " " : "", names[i]);
        if (strcmp(cases[c].nodes, "*") == 0) {
            /* all of sw22's 4 free nodes plus one of sw21 */
            assert_true(on[4] && on[6] && on[7] && on[8]);
        } else {
            assert_string_equal(got, cases[c].nodes);
        }
        assert_string_equal(a->message, cases[c].msg);
    }
    fx_done(&f);
}

/* Apply a cycle's decisions the way the controller does: an ADMIT runs the
 * job from now and ends its list of victims; a PREEMPT stops the victim at
 * once (its pods are gone by the next cycle), records whom it was preempted
 * for and adds it to the preemptor's victims. pairs[v][p] counts the
 * preemptions of job v for job p. */
static void apply_cycle(struct fx *f, int pairs[MAXJ][MAXJ])
{
    for (int i = 0; i < f->res->n; i++) {
        const struct sched_decision *d = &f->res->d[i];
        struct sched_job *jb = &f->jobs[d->job];
        if (d->kind == SCHED_ADMIT) {
            jb->npreempted_victims = 0;
            jb->preempted_victims = NULL;
            jb->state = SCHED_JOB_RUNNING;
            for (int y = 0; y < d->nrep; y++)
                f->place[d->job][jb->nplaced++] = d->rep[y];
            jb->placement = f->place[d->job];
            jb->admitted_at = f->now;
        } else if (d->kind == SCHED_PREEMPT) {
            jb->state = SCHED_JOB_WAITING;
            jb->nplaced = 0;
            jb->preempted_for = f->jobs[d->for_job].id;
            pairs[d->job][d->for_job]++;
            struct sched_job *P = &f->jobs[d->for_job];
            if (P->npreempted_victims < 8)
                f->pv[d->for_job][P->npreempted_victims++] = jb->id;
            P->preempted_victims = f->pv[d->for_job];
        }
    }
}

/* A job that finished: it holds nothing and wants nothing. */
static void finish(struct fx *f, int j)
{
    f->jobs[j].state = SCHED_JOB_RUNNING;
    f->jobs[j].nplaced = 0;
}

/* A preemptor that gave its claim up must not preempt its victim again while
 * it waits, even after the victim was preempted for another job since (so
 * that its preempted_for no longer names the first preemptor). p (8 GPUs)
 * preempts v (4 GPUs) on n0; a higher-priority h takes half of n0, so p's
 * claim is given up and v is re-admitted beside h; q preempts v, is admitted
 * and finishes; v is re-admitted; h finishes. n0 now holds v and 4 free GPUs:
 * p could fit by preempting v once more, but it preempted v already and
 * still waits, so it waits. The same cycle without p's victim list does
 * preempt v for p again (the rule's only memory is that list). */
static void test_preemptor_gave_up_claim(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.min_runtime_s = 0;
    f.cfg.max_reservations = 0; /* a blocked head's reservation would keep v off n0 */
    add_node(&f, 8, "H100", 64000, NULL); /* n0 */
    add_node(&f, 8, "H100", 64000, NULL); /* n1: x, not preemptible */
    int x = add_job(&f, "o/x", 8, 1, SCHED_BATCH, 10);
    f.jobs[x].preemptible = 0;
    run_on(&f, x, 1, 0xFF);
    int v = add_job(&f, "b/v", 4, 1, SCHED_BATCH, 10);
    run_on(&f, v, 0, 0x0F);
    int p = add_job(&f, "a/p", 8, 1, SCHED_TRAINING, 50);
    static int pairs[MAXJ][MAXJ];
    memset(pairs, 0, sizeof(pairs));

    assert_int_equal(cycle(&f), 0); /* c0: v preempted for p */
    const struct sched_decision *d = dec(&f, v, SCHED_PREEMPT);
    assert_non_null(d);
    assert_int_equal(d->for_job, p);
    apply_cycle(&f, pairs);
    int h = add_job(&f, "h/h", 4, 1, SCHED_TRAINING, 100);

    assert_int_equal(cycle(&f), 0); /* c1: h takes half of p's claimed n0 */
    assert_non_null(dec(&f, h, SCHED_ADMIT));
    assert_non_null(dec(&f, p, SCHED_WAIT));
    d = dec(&f, v, SCHED_WAIT);
    assert_non_null(d);
    assert_non_null(strstr(d->message, "held for a preempting job"));
    apply_cycle(&f, pairs);

    assert_int_equal(cycle(&f), 0); /* c2: p no longer fits: claim given up, v runs */
    assert_non_null(dec(&f, v, SCHED_ADMIT));
    assert_non_null(dec(&f, p, SCHED_WAIT));
    apply_cycle(&f, pairs);
    int q = add_job(&f, "q/q", 4, 1, SCHED_TRAINING, 60);

    assert_int_equal(cycle(&f), 0); /* c3: v preempted for q */
    d = dec(&f, v, SCHED_PREEMPT);
    assert_non_null(d);
    assert_int_equal(d->for_job, q);
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
    apply_cycle(&f, pairs);
    assert_string_equal(f.jobs[v].preempted_for, "q/q");

    assert_int_equal(cycle(&f), 0); /* c4: q placed */
    assert_non_null(dec(&f, q, SCHED_ADMIT));
    apply_cycle(&f, pairs);
    finish(&f, q);

    assert_int_equal(cycle(&f), 0); /* c5: v re-admitted beside h */
    assert_non_null(dec(&f, v, SCHED_ADMIT));
    apply_cycle(&f, pairs);
    finish(&f, h);

    assert_int_equal(cycle(&f), 0); /* c6: p waits, v keeps running */
    assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
    assert_non_null(dec(&f, p, SCHED_WAIT));
    apply_cycle(&f, pairs);
    for (int j = 0; j < f.nj; j++)
        for (int k = 0; k < f.nj; k++)
            assert_true(pairs[j][k] <= 1);

    /* without the list (a caller that forgets it) p takes v a second time */
    f.jobs[p].npreempted_victims = 0;
    assert_int_equal(cycle(&f), 0);
    d = dec(&f, v, SCHED_PREEMPT);
    assert_non_null(d);
    assert_int_equal(d->for_job, p);
    /* a count without ids is refused */
    f.jobs[p].npreempted_victims = 1;
    f.jobs[p].preempted_victims = NULL;
    assert_int_not_equal(cycle(&f), 0);
    fx_done(&f);
}

/* A rack-required 2x8 gang of a borrowing team preempts a lower-priority
 * borrower of another team in the same cohort. The victim also fits within
 * its own team's nominal quota on another GPU type, so once stopped it goes
 * ahead of the preemptor in the queue (within-nominal heads first), and it
 * takes any H100 node. Without the preemptor's claim it was re-admitted onto
 * the GPUs it had freed and preempted again every minimum runtime. With the
 * claim the preemptor is admitted at the next cycle, and no job is ever
 * preempted twice for it. */
static void test_preemptor_claim_livelock(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.min_runtime_s = 5;
    int rack = sched_config_level(&f.cfg, "rack");
    add_node(&f, 8, "H100", 64000, "r1"); /* n0: the victim */
    add_node(&f, 8, "H100", 64000, "r1"); /* n1: free */
    add_node(&f, 8, "H100", 64000, "r2"); /* n2, n3: the lender's own work */
    add_node(&f, 8, "H100", 64000, "r2");
    add_node(&f, 8, "A100", 64000, "r3"); /* n4: full */
    /* cohort c: a borrows for its gang, b borrows H100 (but has A100 room),
     * l lends H100, d owns the A100 */
    f.quotas[0][0] = (struct sched_quota){"H100", 8, -1, -1};
    f.quotas[1][0] = (struct sched_quota){"H100", 0, -1, -1};
    f.quotas[1][1] = (struct sched_quota){"A100", 8, -1, -1};
    f.quotas[2][0] = (struct sched_quota){"H100", 32, -1, -1};
    f.quotas[3][0] = (struct sched_quota){"A100", 8, -1, -1};
    f.teams[0] = (struct sched_team){"a", "c", 1, f.quotas[0], 1, 50000};
    f.teams[1] = (struct sched_team){"b", "c", 1, f.quotas[1], 2, 0};
    f.teams[2] = (struct sched_team){"l", "c", 1, f.quotas[2], 1, 0};
    f.teams[3] = (struct sched_team){"d", "c", 1, f.quotas[3], 1, 0};
    f.nt = 4;
    int v = add_job(&f, "b/v", 8, 1, SCHED_BATCH, 10);
    f.jobs[v].team = 1;
    f.jobs[v].req.types[0] = "H100";
    f.jobs[v].req.types[1] = "A100";
    f.jobs[v].req.ntypes = 2;
    run_on(&f, v, 0, 0xFF);
    for (int k = 0; k < 2; k++) {
        int l = add_job(&f, k ? "l/w2" : "l/w1", 8, 1, SCHED_BATCH, 10);
        f.jobs[l].team = 2;
        run_on(&f, l, 2 + k, 0xFF);
    }
    int d = add_job(&f, "d/w", 8, 1, SCHED_BATCH, 10);
    f.jobs[d].team = 3;
    run_on(&f, d, 4, 0xFF);
    int p = add_job(&f, "a/gang", 8, 2, SCHED_TRAINING, 100);
    f.jobs[p].team = 0;
    f.jobs[p].req.types[0] = "H100";
    f.jobs[p].req.ntypes = 1;
    f.jobs[p].topo_required = rack;
    static int pairs[MAXJ][MAXJ];
    memset(pairs, 0, sizeof(pairs));
    int admitted_at_cycle = -1;
    for (int c = 0; c < 30 && admitted_at_cycle < 0; c++) {
        assert_int_equal(cycle(&f), 0);
        if (c == 0) {
            const struct sched_decision *pr = dec(&f, v, SCHED_PREEMPT);
            assert_non_null(pr);
            assert_int_equal(pr->for_job, p);
            assert_int_equal(count_kind(&f, SCHED_PREEMPT), 1);
            assert_string_equal(dec(&f, p, SCHED_WAIT)->message, "waiting for 1 preempted job to stop");
        }
        if (c == 1) {
            /* the victim, ahead of the preemptor in the queue, stays off the
             * claimed rack and says why */
            assert_non_null(dec(&f, p, SCHED_ADMIT));
            const struct sched_decision *w = dec(&f, v, SCHED_WAIT);
            assert_non_null(w);
            assert_string_equal(w->message, "0/5 nodes fit 8 GPUs: 3 fewer than 8 free GPUs, "
                                            "2 held for a preempting job; reserves node n2");
        }
        if (dec(&f, p, SCHED_ADMIT))
            admitted_at_cycle = c;
        apply_cycle(&f, pairs);
        for (int x = 0; x < f.nj; x++)
            assert_true(pairs[x][p] <= 1);
        f.now += 2;
    }
    assert_int_equal(admitted_at_cycle, 1);
    assert_int_equal(f.place[p][0].node / 2, 0); /* rack r1: n0 and n1 */
    assert_int_equal(f.place[p][1].node / 2, 0);
    fx_done(&f);
}

/* A protected pool takes other classes only when nothing else fits, and
 * never past its reserve. The inference pool's half-used node is the best
 * fit for small jobs, yet batch and CPU-only work goes to the batch pool
 * while it has room (28 free GPUs). */
static void test_protected_pool_last_resort(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.pools[0] = (struct sched_pool){"inference", SCHED_CLASS_BIT(SCHED_INFERENCE), 1, 2};
    f.pools[1] = (struct sched_pool){"batch", SCHED_CLASS_BIT(SCHED_BATCH) |
                                                  SCHED_CLASS_BIT(SCHED_TRAINING), 0, 0};
    f.np = 2;
    for (int i = 0; i < 2; i++)
        f.nodes[add_node(&f, 8, "H100", 64000, NULL)].pool = 0; /* n0, n1 */
    for (int i = 0; i < 4; i++)
        f.nodes[add_node(&f, 8, "H100", 64000, NULL)].pool = 1; /* n2..n5 */
    int serve = add_job(&f, "prod/serve", 6, 1, SCHED_INFERENCE, 1000);
    run_on(&f, serve, 0, 0x3F);
    int busy = add_job(&f, "ml/busy", 4, 1, SCHED_BATCH, 10);
    run_on(&f, busy, 2, 0x0F);
    int b[5], cpu[2];
    for (int k = 0; k < 5; k++) {
        char id[32];
        snprintf(id, sizeof(id), "ml/small%d", k);
        b[k] = add_job(&f, id, 1, 1, SCHED_BATCH, 10);
    }
    for (int k = 0; k < 2; k++) {
        cpu[k] = add_job(&f, k ? "ml/etl1" : "ml/etl0", 0, 1, SCHED_BATCH, 10);
        f.jobs[cpu[k]].req.cpu_milli = 4000;
    }
    assert_int_equal(cycle(&f), 0);
    for (int k = 0; k < 5; k++) {
        const struct sched_decision *a = dec(&f, b[k], SCHED_ADMIT);
        assert_non_null(a);
        assert_true(a->rep[0].node >= 2);
    }
    for (int k = 0; k < 2; k++) {
        const struct sched_decision *a = dec(&f, cpu[k], SCHED_ADMIT);
        assert_non_null(a);
        assert_true(a->rep[0].node >= 2);
    }
    /* the batch pool full: a 1-GPU batch job borrows the inference pool, an
     * 8-GPU one would leave it fewer than its 2 reserved idle GPUs */
    fx_done(&f);
    fx_init(&f);
    f.pools[0] = (struct sched_pool){"inference", SCHED_CLASS_BIT(SCHED_INFERENCE), 1, 2};
    f.pools[1] = (struct sched_pool){"batch", SCHED_CLASS_BIT(SCHED_BATCH) |
                                                  SCHED_CLASS_BIT(SCHED_TRAINING), 0, 0};
    f.np = 2;
    for (int i = 0; i < 2; i++)
        f.nodes[add_node(&f, 8, "H100", 64000, NULL)].pool = 0;
    for (int i = 0; i < 4; i++)
        f.nodes[add_node(&f, 8, "H100", 64000, NULL)].pool = 1;
    serve = add_job(&f, "prod/serve", 6, 1, SCHED_INFERENCE, 1000);
    run_on(&f, serve, 0, 0x3F);
    for (int i = 2; i < 6; i++) {
        char id[32];
        snprintf(id, sizeof(id), "ml/fill%d", i);
        int fj = add_job(&f, id, 8, 1, SCHED_BATCH, 10);
        f.jobs[fj].req.cpu_milli = 64000; /* its whole node */
        run_on(&f, fj, i, 0xFF);
    }
    int one = add_job(&f, "ml/one", 1, 1, SCHED_BATCH, 10);
    int eight = add_job(&f, "ml/eight", 8, 1, SCHED_BATCH, 5);
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, one, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, 0); /* best fit inside the pool it borrows */
    /* 1 + 8 idle devices left in the pool, 2 reserved: 7 to lend, not 8 */
    assert_null(dec(&f, eight, SCHED_ADMIT));
    assert_string_equal(dec(&f, eight, SCHED_WAIT)->message,
                        "0/6 nodes fit 8 GPUs: 5 fewer than 8 free GPUs, 1 in protected pool inference; reserves node n2");
    /* (a node of its own pool: it reserves none of a protected pool it would borrow) */
    /* a CPU-only job borrows it too while the reserve holds */
    int etl = add_job(&f, "ml/etl", 0, 1, SCHED_BATCH, 1);
    f.jobs[etl].req.cpu_milli = 4000;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, etl, SCHED_ADMIT));
    /* with the reserve at what is idle, neither may borrow */
    f.pools[0].reserve_gpus = 10;
    assert_int_equal(cycle(&f), 0);
    assert_null(dec(&f, etl, SCHED_ADMIT));
    assert_null(dec(&f, one, SCHED_ADMIT));
    assert_string_equal(dec(&f, etl, SCHED_WAIT)->message,
                        "0/6 nodes fit 4000m cpu: 4 insufficient cpu, 2 in protected pool inference");
    fx_done(&f);
}

/* A reservation keeps its node until another is strictly closer to fitting.
 * Two full 4-GPU nodes of 1-GPU fillers; a 4-GPU job waits; fillers end one
 * at a time on alternating nodes (n1 first) while 1-GPU jobs of lower
 * priority keep arriving. The reservation stays on n1 through every tie, the
 * small jobs fill n0, and the 4-GPU job is admitted on n1 in the cycle its
 * last original filler ends. */
static void test_reservation_sticky(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 4, "H100", 64000, NULL);
    add_node(&f, 4, "H100", 64000, NULL);
    int fill[2][4];
    for (int n = 0; n < 2; n++)
        for (int d = 0; d < 4; d++) {
            char id[32];
            snprintf(id, sizeof(id), "x/fill%d%d", n, d);
            fill[n][d] = add_job(&f, id, 1, 1, SCHED_BATCH, 10);
            run_on(&f, fill[n][d], n, 1u << d);
        }
    int big = add_job(&f, "x/big", 4, 1, SCHED_TRAINING, 10);
    char held[64] = "";
    int admitted = -1;
    for (int ev = 0; ev < 8 && admitted < 0; ev++) {
        int node = ev % 2 == 0 ? 1 : 0;
        int fj = fill[node][ev / 2];
        f.jobs[fj].nplaced = 0; /* ended: holds nothing */
        char id[32];
        snprintf(id, sizeof(id), "x/small%d", ev);
        add_job(&f, id, 1, 1, SCHED_BATCH, 1);
        f.jobs[big].reserved_domain = held[0] ? held : NULL;
        assert_int_equal(cycle(&f), 0);
        const struct sched_decision *a = dec(&f, big, SCHED_ADMIT);
        if (a) {
            admitted = ev;
            assert_int_equal(a->rep[0].node, 1);
            break;
        }
        const struct sched_decision *w = dec(&f, big, SCHED_WAIT);
        assert_non_null(w);
        assert_non_null(w->reserved);
        assert_string_equal(w->reserved, "n1"); /* never moves on a tie */
        assert_non_null(strstr(w->message, "; reserves node n1"));
        gq_strlcpy(held, w->reserved, sizeof(held));
        for (int i = 0; i < f.res->n; i++) {
            const struct sched_decision *d = &f.res->d[i];
            if (d->kind == SCHED_ADMIT) {
                assert_int_equal(d->rep[0].node, 0); /* backfill stays off n1 */
                run_on(&f, d->job, d->rep[0].node, d->rep[0].devs);
            }
        }
    }
    assert_int_equal(admitted, 6); /* n1's fourth filler ends at event 6 */
    /* another node strictly closer takes the reservation over */
    fx_done(&f);
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 4, "H100", 64000, NULL);
    add_node(&f, 4, "H100", 64000, NULL);
    run_on(&f, add_job(&f, "x/a", 3, 1, SCHED_BATCH, 10), 0, 0x7); /* n0: 1 free */
    run_on(&f, add_job(&f, "x/b", 2, 1, SCHED_BATCH, 10), 1, 0x3); /* n1: 2 free */
    big = add_job(&f, "x/big", 4, 1, SCHED_TRAINING, 10);
    f.jobs[big].reserved_domain = "n0";
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, big, SCHED_WAIT)->reserved, "n1");
    assert_string_equal(dec(&f, big, SCHED_WAIT)->message,
                        "0/2 nodes fit 4 GPUs: 2 fewer than 4 free GPUs; reserves node n1");
    /* with a required level the domain is named at that level */
    fx_done(&f);
    fx_init(&f);
    f.cfg.preemption = 0;
    add_node(&f, 4, "H100", 64000, "r1");
    add_node(&f, 4, "H100", 64000, "r2");
    run_on(&f, add_job(&f, "x/a", 2, 1, SCHED_BATCH, 10), 0, 0x3);
    run_on(&f, add_job(&f, "x/b", 2, 1, SCHED_BATCH, 10), 1, 0x3);
    big = add_job(&f, "x/big", 4, 1, SCHED_TRAINING, 10);
    f.jobs[big].topo_required = sched_config_level(&f.cfg, "rack");
    f.jobs[big].reserved_domain = "r2";
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, big, SCHED_WAIT)->reserved, "r2"); /* a tie keeps r2 */
    assert_string_equal(dec(&f, big, SCHED_WAIT)->message,
                        "0/2 nodes fit 4 GPUs in one rack: 2 fewer than 4 free GPUs; reserves rack r2");
    f.jobs[big].reserved_domain = NULL;
    assert_int_equal(cycle(&f), 0);
    assert_string_equal(dec(&f, big, SCHED_WAIT)->reserved, "r1");
    fx_done(&f);
}

/* Reclaiming lent quota is per GPU type: a job of a team that borrows A100
 * but runs on H100 within its own H100 quota borrows nothing the preemptor's
 * team lends, and an equal-priority preemptor may not take it; the same job
 * borrowing H100 may be reclaimed. */
static void test_reclaim_per_type(void **st)
{
    (void)st;
    for (int borrowing = 0; borrowing < 2; borrowing++) {
        struct fx f;
        fx_init(&f);
        add_node(&f, 8, "H100", 64000, NULL);
        add_node(&f, 8, "A100", 64000, NULL);
        f.quotas[0][0] = (struct sched_quota){"H100", 8, -1, -1};
        f.quotas[1][0] = (struct sched_quota){"H100", borrowing ? 0 : 8, -1, -1};
        f.quotas[1][1] = (struct sched_quota){"A100", 0, -1, -1};
        f.quotas[2][0] = (struct sched_quota){"A100", 8, -1, -1};
        f.teams[0] = (struct sched_team){"a", "c", 1, f.quotas[0], 1, 0};
        f.teams[1] = (struct sched_team){"b", "c", 1, f.quotas[1], 2, 0};
        f.teams[2] = (struct sched_team){"l", "c", 1, f.quotas[2], 1, 0};
        f.nt = 3;
        int v = add_job(&f, "b/v", 8, 1, SCHED_BATCH, 10);
        f.jobs[v].team = 1;
        run_on(&f, v, 0, 0xFF);
        int wj = add_job(&f, "b/w", 8, 1, SCHED_BATCH, 10); /* b borrows A100 */
        f.jobs[wj].team = 1;
        run_on(&f, wj, 1, 0xFF);
        int p = add_job(&f, "a/p", 8, 1, SCHED_BATCH, 10);
        f.jobs[p].team = 0;
        f.jobs[p].req.types[0] = "H100";
        f.jobs[p].req.ntypes = 1;
        assert_int_equal(cycle(&f), 0);
        if (borrowing) {
            const struct sched_decision *d = dec(&f, v, SCHED_PREEMPT);
            assert_non_null(d);
            assert_string_equal(d->message, "preempted to make room for a/p (Batch, priority 10): "
                                            "reclaiming quota lent to team b");
        } else {
            assert_int_equal(count_kind(&f, SCHED_PREEMPT), 0);
            assert_string_equal(dec(&f, p, SCHED_WAIT)->message,
                                "0/2 nodes fit 8 GPUs: 1 wrong GPU type (need H100), 1 fewer than 8 "
                                "free GPUs; reserves node n0");
        }
        fx_done(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_used_1_2_no_room_for_2),
        cmocka_unit_test(test_scattered_free),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_cpu_full),
        cmocka_unit_test(test_gang_all_or_nothing),
        cmocka_unit_test(test_inference_preempts_experiment),
        cmocka_unit_test(test_protected_pool_borrow_reclaim),
        cmocka_unit_test(test_topology),
        cmocka_unit_test(test_missing_label_own_domain),
        cmocka_unit_test(test_taints_and_node_state),
        cmocka_unit_test(test_quota),
        cmocka_unit_test(test_queue_order_fair_share),
        cmocka_unit_test(test_preemption_choice),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_no_starvation),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_index_fgd),
        cmocka_unit_test(test_reservation_backfill),
        cmocka_unit_test(test_backfill_run_limits),
        cmocka_unit_test(test_backfill_same_cycle),
        cmocka_unit_test(test_backfill_spare),
        cmocka_unit_test(test_reclaim_lent_quota),
        cmocka_unit_test(test_nongang_required_domain),
        cmocka_unit_test(test_index_policies),
        cmocka_unit_test(test_window_finds_late_rack),
        cmocka_unit_test(test_stopping_victims),
        cmocka_unit_test(test_drop_unneeded_victims),
        cmocka_unit_test(test_reclaim_no_loop),
        cmocka_unit_test(test_claim_blocks_borrower),
        cmocka_unit_test(test_node_selector_places),
        cmocka_unit_test(test_node_selector_gang_rack),
        cmocka_unit_test(test_node_selector_reservation),
        cmocka_unit_test(test_node_selector_preempt),
        cmocka_unit_test(test_min_runtime_inference),
        cmocka_unit_test(test_preempt_plan_remembered),
        cmocka_unit_test(test_recycle_shrinks),
        cmocka_unit_test(test_gpu_memory_labels),
        cmocka_unit_test(test_admit_domain_shared),
        cmocka_unit_test(test_preferred_topology),
        cmocka_unit_test(test_preemptor_claim_livelock),
        cmocka_unit_test(test_preemptor_gave_up_claim),
        cmocka_unit_test(test_protected_pool_last_resort),
        cmocka_unit_test(test_reservation_sticky),
        cmocka_unit_test(test_reclaim_per_type),
        cmocka_unit_test(test_preempt_cheapest_domain),
        cmocka_unit_test(test_reclaim_before_lower_priority),
        cmocka_unit_test(test_reclaim_non_preemptible),
        cmocka_unit_test(test_no_preempt_for_released),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
