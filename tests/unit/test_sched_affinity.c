/* Table tests for the scheduling core's required node affinity (every
 * operator, OR of terms, AND of expressions, with nodeSelector and GPU type)
 * and for the "could not fit even an empty cluster" verdict of WAIT
 * decisions (unschedulable, unschedulable_msg). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gq.h"
#include "sched.h"

#define MAXN 16
#define MAXJ 8

struct fx {
    struct sched_config cfg;
    struct sched_node nodes[MAXN];
    struct sched_label labels[MAXN][6];
    char names[MAXN][16];
    int nn;
    struct sched_job jobs[MAXJ];
    struct sched_replica place[MAXJ][8];
    char ids[MAXJ][32];
    int nj;
    struct sched_result *res;
};

static void fx_init(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    sched_config_default(&f->cfg);
}

static void fx_done(struct fx *f)
{
    sched_result_free(f->res);
    f->res = NULL;
}

static int add_node(struct fx *f, int gpus, const char *product)
{
    int i = f->nn++;
    struct sched_node *n = &f->nodes[i];
    snprintf(f->names[i], sizeof(f->names[i]), "n%d", i);
    n->name = f->names[i];
    n->gpus = gpus;
    n->gpu_product = product;
    n->gpu_mem_mib = 81920;
    n->cpu_milli = 64000;
    n->mem_bytes = (int64_t)512 << 30;
    n->ready = 1;
    n->pool = -1;
    f->labels[i][0] = (struct sched_label){"kubernetes.io/hostname", f->names[i]};
    n->labels = f->labels[i];
    n->nlabels = 1;
    return i;
}

static void add_label(struct fx *f, int i, const char *key, const char *value)
{
    struct sched_node *n = &f->nodes[i];
    assert_true(n->nlabels < 6);
    f->labels[i][n->nlabels++] = (struct sched_label){key, value};
}

static int add_job(struct fx *f, const char *id, int gpus, int replicas)
{
    int j = f->nj++;
    struct sched_job *jb = &f->jobs[j];
    snprintf(f->ids[j], sizeof(f->ids[j]), "%s", id);
    jb->id = f->ids[j];
    jb->team = -1;
    jb->cls = SCHED_BATCH;
    jb->priority = 10;
    jb->preemptible = 1;
    jb->gang = 1;
    jb->replicas = replicas;
    jb->req.gpus = gpus;
    jb->req.cpu_milli = 1000;
    jb->req.mem_bytes = (int64_t)1 << 30;
    jb->topo_required = jb->topo_preferred = jb->topo_spread = -1;
    jb->pool = -1;
    jb->enqueue_time = 1000 + j;
    return j;
}

static void run_on(struct fx *f, int j, int node, uint32_t devs)
{
    struct sched_job *jb = &f->jobs[j];
    jb->state = SCHED_JOB_RUNNING;
    f->place[j][jb->nplaced].node = node;
    f->place[j][jb->nplaced].devs = devs;
    jb->nplaced++;
    jb->placement = f->place[j];
}

static int cycle(struct fx *f)
{
    struct sched_snapshot s = {0};
    s.config = &f->cfg;
    s.now = 100000;
    s.nodes = f->nodes;
    s.nnodes = f->nn;
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

/* ---- operators, terms and expressions ---- */

static const char *const V_A[] = {"a"};
static const char *const V_C[] = {"c"};
static const char *const V_AB[] = {"a", "b"};
static const char *const V_ABC[] = {"a", "b", "c"};
static const char *const V_3[] = {"3"};
static const char *const V_4[] = {"4"};
static const char *const V_5[] = {"5"};
static const char *const V_M1[] = {"-1"};
static const char *const V_N0[] = {"n0"};
static const char *const V_N23[] = {"n2", "n3"};

#define ZONE "topology.kubernetes.io/zone"
#define GEN "example.com/gen"
#define X(k, o, v) {k, 0, o, v, (int)(sizeof(v) / sizeof(v[0]))}
#define XN(k, o) {k, 0, o, NULL, 0}
#define F(o, v) {"metadata.name", 1, o, v, (int)(sizeof(v) / sizeof(v[0]))}

static const struct sched_match_expr E_IN_AB[] = {X(ZONE, SCHED_OP_IN, V_AB)};
static const struct sched_match_expr E_NOTIN_A[] = {X(ZONE, SCHED_OP_NOT_IN, V_A)};
static const struct sched_match_expr E_EXISTS[] = {XN(ZONE, SCHED_OP_EXISTS)};
static const struct sched_match_expr E_DNE[] = {XN(ZONE, SCHED_OP_DOES_NOT_EXIST)};
static const struct sched_match_expr E_GT3[] = {X(GEN, SCHED_OP_GT, V_3)};
static const struct sched_match_expr E_LT5[] = {X(GEN, SCHED_OP_LT, V_5)};
static const struct sched_match_expr E_GTM1[] = {X(GEN, SCHED_OP_GT, V_M1)};
static const struct sched_match_expr E_F_IN[] = {F(SCHED_OP_IN, V_N23)};
static const struct sched_match_expr E_F_NOTIN[] = {F(SCHED_OP_NOT_IN, V_N0)};
static const struct sched_match_expr E_AND[] = {X(ZONE, SCHED_OP_IN, V_ABC), X(GEN, SCHED_OP_GT, V_4)};
static const struct sched_match_expr E_AND_NONE[] = {X(ZONE, SCHED_OP_IN, V_A), X(GEN, SCHED_OP_GT, V_4)};
static const struct sched_match_expr E_IN_A[] = {X(ZONE, SCHED_OP_IN, V_A)};
static const struct sched_match_expr E_IN_C[] = {X(ZONE, SCHED_OP_IN, V_C)};

#define T1(e) {{e, (int)(sizeof(e) / sizeof(e[0]))}}

static const struct sched_affinity_term A_IN_AB[] = T1(E_IN_AB);
static const struct sched_affinity_term A_NOTIN_A[] = T1(E_NOTIN_A);
static const struct sched_affinity_term A_EXISTS[] = T1(E_EXISTS);
static const struct sched_affinity_term A_DNE[] = T1(E_DNE);
static const struct sched_affinity_term A_GT3[] = T1(E_GT3);
static const struct sched_affinity_term A_LT5[] = T1(E_LT5);
static const struct sched_affinity_term A_GTM1[] = T1(E_GTM1);
static const struct sched_affinity_term A_F_IN[] = T1(E_F_IN);
static const struct sched_affinity_term A_F_NOTIN[] = T1(E_F_NOTIN);
static const struct sched_affinity_term A_AND[] = T1(E_AND);
static const struct sched_affinity_term A_AND_NONE[] = T1(E_AND_NONE);
static const struct sched_affinity_term A_OR[] = {{E_IN_A, 1}, {E_DNE, 1}};
static const struct sched_affinity_term A_EMPTY[] = {{NULL, 0}};
static const struct sched_affinity_term A_EMPTY_OR_C[] = {{NULL, 0}, {E_IN_C, 1}};
static const struct sched_affinity_term A_IN_A[] = T1(E_IN_A);

struct aff_case {
    const char *name;
    const struct sched_affinity_term *aff;
    int naff;
    unsigned want; /* bit i: node i matches */
};

#define C(n, a, w) {n, a, (int)(sizeof(a) / sizeof(a[0])), w}

/* Nodes: n0 zone=a gen=3, n1 zone=b gen=5, n2 zone=c gen=x (not an
 * integer), n3 no zone, no gen. */
static const struct aff_case AFF_CASES[] = {
    C("In a,b", A_IN_AB, 0x3),
    C("NotIn a (absent label matches)", A_NOTIN_A, 0xE),
    C("Exists", A_EXISTS, 0x7),
    C("DoesNotExist", A_DNE, 0x8),
    C("Gt 3 (3 is not greater; x is no integer)", A_GT3, 0x2),
    C("Lt 5", A_LT5, 0x1),
    C("Gt -1", A_GTM1, 0x3),
    C("matchFields metadata.name In n2,n3", A_F_IN, 0xC),
    C("matchFields metadata.name NotIn n0", A_F_NOTIN, 0xE),
    C("AND: zone In a,b,c and gen Gt 4", A_AND, 0x2),
    C("AND matching no node", A_AND_NONE, 0x0),
    C("OR: zone In a, or no zone", A_OR, 0x9),
    C("empty term matches nothing", A_EMPTY, 0x0),
    C("empty term OR zone In c", A_EMPTY_OR_C, 0x4),
};

static void four_nodes(struct fx *f)
{
    for (int i = 0; i < 4; i++)
        add_node(f, 8, "H100");
    add_label(f, 0, ZONE, "a");
    add_label(f, 0, GEN, "3");
    add_label(f, 1, ZONE, "b");
    add_label(f, 1, GEN, "5");
    add_label(f, 2, ZONE, "c");
    add_label(f, 2, GEN, "x");
}

/* A gang of one 8-GPU replica per matching node lands exactly there; one
 * replica more waits, every other node counted as an affinity mismatch. */
static void test_affinity_operators(void **st)
{
    (void)st;
    for (size_t c = 0; c < sizeof(AFF_CASES) / sizeof(AFF_CASES[0]); c++) {
        const struct aff_case *ac = &AFF_CASES[c];
        struct fx f;
        fx_init(&f);
        four_nodes(&f);
        int nmatch = __builtin_popcount(ac->want);
        int j = add_job(&f, "x/aff", 8, nmatch > 0 ? nmatch : 1);
        f.jobs[j].affinity = ac->aff;
        f.jobs[j].naffinity = ac->naff;
        assert_int_equal(cycle(&f), 0);
        const struct sched_decision *a = dec(&f, j, SCHED_ADMIT);
        if (nmatch == 0) {
            if (a)
                fail_msg("%s: admitted although no node matches", ac->name);
        } else {
            if (!a)
                fail_msg("%s: waits: %s", ac->name, dec(&f, j, SCHED_WAIT)->message);
            unsigned got = 0;
            for (int r = 0; r < a->nrep; r++)
                got |= 1u << a->rep[r].node;
            if (got != ac->want)
                fail_msg("%s: placed on 0x%x, want 0x%x", ac->name, got, ac->want);
        }
        f.jobs[j].replicas = nmatch + 1;
        assert_int_equal(cycle(&f), 0);
        assert_null(dec(&f, j, SCHED_ADMIT));
        const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
        assert_non_null(w);
        char want[64];
        snprintf(want, sizeof want, ": %d node affinity mismatch", 4 - nmatch);
        if (!strstr(w->message, want))
            fail_msg("%s: message \"%s\" lacks \"%s\"", ac->name, w->message, want);
        /* more replicas than matching nodes can ever hold */
        assert_int_equal(w->unschedulable, 1);
        assert_non_null(w->unschedulable_msg);
        fx_done(&f);
    }
}

/* Affinity combines with nodeSelector and GPU types (all must hold); jobs of
 * one shape with different affinities do not share the fail cache. */
static void test_affinity_selector_type(void **st)
{
    (void)st;
    static const struct sched_label SEL_IB[] = {{"net.example.com/ib", "yes"}};
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100"); /* n0: ib, zone a: the only node all three accept */
    add_node(&f, 8, "A100"); /* n1: ib, zone a, wrong type */
    add_node(&f, 8, "H100"); /* n2: ib, zone b */
    add_node(&f, 8, "H100"); /* n3: zone a, no ib */
    add_label(&f, 0, "net.example.com/ib", "yes");
    add_label(&f, 1, "net.example.com/ib", "yes");
    add_label(&f, 2, "net.example.com/ib", "yes");
    add_label(&f, 0, ZONE, "a");
    add_label(&f, 1, ZONE, "a");
    add_label(&f, 2, ZONE, "b");
    add_label(&f, 3, ZONE, "a");
    int j = add_job(&f, "x/all", 8, 1);
    f.jobs[j].req.types[0] = "H100";
    f.jobs[j].req.ntypes = 1;
    f.jobs[j].node_selector = SEL_IB;
    f.jobs[j].nnode_selector = 1;
    f.jobs[j].affinity = A_IN_A;
    f.jobs[j].naffinity = 1;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *a = dec(&f, j, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, 0);
    /* two replicas: only n0 qualifies; each other node has its own reason */
    f.jobs[j].replicas = 2;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_string_equal(w->message, "1/4 nodes fit 2x8 GPUs: 1 node selector mismatch, "
                                    "1 node affinity mismatch, 1 wrong GPU type (need H100); "
                                    "only 1 of 2 replicas fit");
    assert_int_equal(w->unschedulable, 1);
    assert_string_equal(w->unschedulable_msg,
                        "needs 16 GPUs (2x8) of H100; the eligible nodes have 8 GPUs and fit 1 of 2 "
                        "replicas; 1 of 4 nodes eligible (1 node selector mismatch, 1 node affinity "
                        "mismatch, 1 wrong GPU type (need H100))");
    /* the node selector alone would allow n2: the affinity keeps it out */
    f.jobs[j].replicas = 1;
    int busy = add_job(&f, "x/busy", 8, 1);
    run_on(&f, busy, 0, 0xFF);
    assert_int_equal(cycle(&f), 0);
    w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_int_equal(w->unschedulable, 0); /* n0 fits once free */
    assert_null(w->unschedulable_msg);
    /* one cycle, same shape, one affinity matching nothing queued first: the
     * other (zone b) is still placed on n2 */
    f.jobs[j].affinity = A_AND_NONE;
    int other = add_job(&f, "x/zoneb", 8, 1);
    static const char *const V_B[] = {"b"};
    static const struct sched_match_expr E_IN_B[] = {X(ZONE, SCHED_OP_IN, V_B)};
    static const struct sched_affinity_term A_IN_B[] = {{E_IN_B, 1}};
    f.jobs[other].req = f.jobs[j].req;
    f.jobs[other].node_selector = SEL_IB;
    f.jobs[other].nnode_selector = 1;
    f.jobs[other].affinity = A_IN_B;
    f.jobs[other].naffinity = 1;
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, j, SCHED_WAIT));
    a = dec(&f, other, SCHED_ADMIT);
    assert_non_null(a);
    assert_int_equal(a->rep[0].node, 2);
    fx_done(&f);
}

/* Bad affinity in a snapshot is refused naming the job (the API layer
 * refuses it first). */
static void test_affinity_bad_input(void **st)
{
    (void)st;
    static const char *const V_NOT_INT[] = {"ten"};
    static const struct sched_match_expr E_BAD_GT[] = {X(GEN, SCHED_OP_GT, V_NOT_INT)};
    static const struct sched_affinity_term A_BAD_GT[] = T1(E_BAD_GT);
    static const struct sched_match_expr E_NOKEY[] = {XN(NULL, SCHED_OP_EXISTS)};
    static const struct sched_affinity_term A_NOKEY[] = T1(E_NOKEY);
    struct fx f;
    fx_init(&f);
    four_nodes(&f);
    int j = add_job(&f, "x/bad", 1, 1);
    f.jobs[j].affinity = A_BAD_GT;
    f.jobs[j].naffinity = 1;
    struct sched_snapshot s = {0};
    s.nodes = f.nodes;
    s.nnodes = f.nn;
    s.jobs = f.jobs;
    s.njobs = f.nj;
    char err[256] = "";
    struct sched_result *res = NULL;
    assert_int_equal(sched_cycle(NULL, &s, &res, err, sizeof err), GQ_EINVAL);
    assert_non_null(strstr(err, "x/bad"));
    assert_non_null(strstr(err, "Gt/Lt needs one integer"));
    f.jobs[j].affinity = A_NOKEY;
    assert_int_equal(sched_cycle(NULL, &s, &res, err, sizeof err), GQ_EINVAL);
    assert_non_null(strstr(err, "has no key"));
    f.jobs[j].affinity = NULL; /* naffinity 1 without terms */
    assert_int_equal(sched_cycle(NULL, &s, &res, err, sizeof err), GQ_EINVAL);
    assert_non_null(strstr(err, "bad node affinity"));
}

/* ---- could it ever fit? ---- */

struct never_case {
    const char *name;
    int gpus, replicas, gang;
    int level, spread; /* level / spread index (default config: 0 zone 1 block 2 rack 3 node), -1 */
    int64_t cpu;
    const char *type;
    int never;
    const char *msg; /* exact unschedulable_msg when never */
};

/* Cluster: n0..n3 8x H100 (racks r1 r1 r2 r2), n4 4x A100 (rack r3), n5
 * 8x H100 cordoned in rack r3, n6 8x H100 tainted (not tolerated), all
 * empty but n0, which is full (usage is ignored). */
static const struct never_case NEVER_CASES[] = {
    {"16 GPUs in one replica", 16, 1, 1, -1, -1, 1000, NULL, 1,
     "needs 16 GPUs; the largest eligible node has 8 GPUs and fits 0 of 1 replica; "
     "6 of 7 nodes eligible (1 taint not tolerated)"},
    {"2x8 H100 in one node", 8, 2, 1, 3, -1, 1000, "H100", 1,
     "needs 16 GPUs (2x8) of H100 in one node; the largest eligible node has 8 GPUs and fits 1 "
     "of 2 replicas; 5 of 7 nodes eligible (1 taint not tolerated, 1 wrong GPU type (need H100))"},
    {"3x8 in one rack", 8, 3, 1, 2, -1, 1000, "H100", 1,
     "needs 24 GPUs (3x8) of H100 in one rack; the largest eligible rack has 16 GPUs and fits "
     "2 of 3 replicas; 5 of 7 nodes eligible (1 taint not tolerated, 1 wrong GPU type (need H100))"},
    {"2x8 in one rack fits (a full node and a cordoned one count)", 8, 2, 1, 2, -1, 1000, "H100", 0, NULL},
    {"5x8 in the cluster fits", 8, 5, 1, -1, -1, 1000, "H100", 0, NULL},
    {"6x8 H100 over the cluster", 8, 6, 1, -1, -1, 1000, "H100", 1,
     "needs 48 GPUs (6x8) of H100; the eligible nodes have 40 GPUs and fit 5 of 6 replicas; "
     "5 of 7 nodes eligible (1 taint not tolerated, 1 wrong GPU type (need H100))"},
    {"non-gang 6x8 may run in part", 8, 6, 0, -1, -1, 1000, "H100", 0, NULL},
    {"4 spread over racks: 3 racks", 1, 4, 1, -1, 2, 1000, NULL, 1,
     "needs 4 GPUs (4x1) on distinct rack domains; the eligible nodes have 44 GPUs and fit 3 of 4 "
     "replicas; 6 of 7 nodes eligible (1 taint not tolerated)"},
    {"cpu beyond every node", 1, 1, 1, -1, -1, 65000, NULL, 1,
     "needs 1 GPU; the largest eligible node has 8 GPUs and fits 0 of 1 replica; "
     "6 of 7 nodes eligible (1 taint not tolerated)"},
    {"a type no node has", 1, 1, 1, -1, -1, 1000, "B200", 1,
     "needs 1 GPU of B200; no node is eligible (7 nodes: 6 wrong GPU type (need B200), "
     "1 taint not tolerated)"},
};

static void never_cluster(struct fx *f)
{
    static const struct sched_taint TAINT[] = {{"dedicated", "infra", SCHED_NO_SCHEDULE}};
    const char *racks[] = {"r1", "r1", "r2", "r2", "r3", "r3", "r3"};
    for (int i = 0; i < 7; i++) {
        add_node(f, i == 4 ? 4 : 8, i == 4 ? "A100" : "H100");
        add_label(f, i, "topology.gangq.io/rack", racks[i]);
    }
    f->nodes[5].unschedulable = 1;
    f->nodes[6].taints = TAINT;
    f->nodes[6].ntaints = 1;
    for (int d = 0; d < 8; d++)
        f->nodes[0].foreign_gpu_milli[d] = 1000;
}

static void test_never_fits(void **st)
{
    (void)st;
    for (size_t c = 0; c < sizeof(NEVER_CASES) / sizeof(NEVER_CASES[0]); c++) {
        const struct never_case *nc = &NEVER_CASES[c];
        struct fx f;
        fx_init(&f);
        f.cfg.preemption = 0;
        never_cluster(&f);
        int j = add_job(&f, "x/big", nc->gpus, nc->replicas);
        f.jobs[j].gang = nc->gang;
        f.jobs[j].topo_required = nc->level;
        f.jobs[j].topo_spread = nc->spread;
        f.jobs[j].req.cpu_milli = nc->cpu;
        if (nc->type) {
            f.jobs[j].req.types[0] = nc->type;
            f.jobs[j].req.ntypes = 1;
        }
        /* keep it waiting: a running job holds every other schedulable node */
        int hog = add_job(&f, "x/hog", 8, 1);
        run_on(&f, hog, 1, 0xFF);
        int hog2 = add_job(&f, "x/hog2", 8, 1);
        run_on(&f, hog2, 2, 0xFF);
        int hog3 = add_job(&f, "x/hog3", 8, 1);
        run_on(&f, hog3, 3, 0xFF);
        int hog4 = add_job(&f, "x/hog4", 4, 1);
        run_on(&f, hog4, 4, 0x0F);
        f.jobs[j].req.cpu_milli = nc->cpu;
        assert_int_equal(cycle(&f), 0);
        const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
        if (!w)
            fail_msg("%s: not waiting", nc->name);
        if (w->unschedulable != nc->never)
            fail_msg("%s: unschedulable %d, want %d (%s)", nc->name, w->unschedulable, nc->never,
                     w->unschedulable_msg ? w->unschedulable_msg : "-");
        if (nc->never && strcmp(w->unschedulable_msg, nc->msg))
            fail_msg("%s:\n got  \"%s\"\n want \"%s\"", nc->name, w->unschedulable_msg, nc->msg);
        if (!nc->never)
            assert_null(w->unschedulable_msg);
        /* running jobs and admissions never carry it */
        assert_int_equal(dec(&f, j, SCHED_ADMIT) == NULL, 1);
        fx_done(&f);
    }
}

/* The verdict follows the cluster: a node added to the rack makes the gang
 * fit (admitted), and quota is not the cluster's shape. */
static void test_never_fits_node_added(void **st)
{
    (void)st;
    struct fx f;
    fx_init(&f);
    add_node(&f, 8, "H100");
    add_node(&f, 8, "H100");
    add_label(&f, 0, "topology.gangq.io/rack", "r1");
    add_label(&f, 1, "topology.gangq.io/rack", "r1");
    int j = add_job(&f, "x/gang", 8, 3);
    f.jobs[j].topo_required = 2;
    assert_int_equal(cycle(&f), 0);
    const struct sched_decision *w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_int_equal(w->unschedulable, 1);
    assert_string_equal(w->unschedulable_msg,
                        "needs 24 GPUs (3x8) in one rack; the largest eligible rack has 16 GPUs and "
                        "fits 2 of 3 replicas; 2 of 2 nodes eligible");
    add_node(&f, 8, "H100");
    add_label(&f, 2, "topology.gangq.io/rack", "r1");
    assert_int_equal(cycle(&f), 0);
    assert_non_null(dec(&f, j, SCHED_ADMIT));
    /* a team without quota for it waits on quota, not on the cluster */
    struct sched_quota q = {"*", 0, 0, -1};
    struct sched_team t = {"t", NULL, 1, &q, 1, 0};
    struct sched_snapshot s = {0};
    s.config = &f.cfg;
    s.nodes = f.nodes;
    s.nnodes = f.nn;
    s.teams = &t;
    s.nteams = 1;
    f.jobs[j].team = 0;
    s.jobs = f.jobs;
    s.njobs = f.nj;
    char err[256];
    sched_result_free(f.res);
    f.res = NULL;
    assert_int_equal(sched_cycle(NULL, &s, &f.res, err, sizeof err), 0);
    w = dec(&f, j, SCHED_WAIT);
    assert_non_null(w);
    assert_int_equal(w->unschedulable, 0);
    fx_done(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_affinity_operators),
        cmocka_unit_test(test_affinity_selector_type),
        cmocka_unit_test(test_affinity_bad_input),
        cmocka_unit_test(test_never_fits),
        cmocka_unit_test(test_never_fits_node_added),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
