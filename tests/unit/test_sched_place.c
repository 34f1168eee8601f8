/* test_sched_place.c — the keep-whole rule: a single-replica GPU request
 * without topology preference breaks a whole node (GPUs all free) only when no
 * node in use can take it, unless the shape distribution prices the break.
 * Through sched_cycle (shapes derived from the waiting queue, one job per
 * cycle as on a fresh controller) and through the one-task index
 * (sched_place_one, no shapes or small ones). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gq.h"
#include "sched.h"

#define GIB ((int64_t)1 << 30)
#define MAXN 4
#define MAXJ 8

struct cluster {
    struct sched_config cfg;
    struct sched_node nodes[MAXN];
    struct sched_label labels[MAXN][1];
    char names[MAXN][16];
    int nn;
    struct sched_job jobs[MAXJ];
    struct sched_replica place[MAXJ][4];
    char ids[MAXJ][16];
    int nj;
};

static void cluster_init(struct cluster *c, int nn, int gpus)
{
    memset(c, 0, sizeof(*c));
    sched_config_default(&c->cfg);
    c->nn = nn;
    for (int i = 0; i < nn; i++) {
        snprintf(c->names[i], sizeof(c->names[i]), "n%d", i);
        c->labels[i][0] = (struct sched_label){"kubernetes.io/hostname", c->names[i]};
        struct sched_node *n = &c->nodes[i];
        n->name = c->names[i];
        n->labels = c->labels[i];
        n->nlabels = 1;
        n->ready = 1;
        n->cpu_milli = 64000;
        n->mem_bytes = 256 * GIB;
        n->gpus = gpus;
        n->gpu_product = "A100";
        n->pool = -1;
    }
}

/* Submit a job (alone in the queue: the earlier ones already run) and run one
 * cycle; returns the job's index after asserting it was admitted. */
static int submit(struct cluster *c, int gpus, int replicas, int topo_node)
{
    assert_true(c->nj < MAXJ);
    int j = c->nj++;
    struct sched_job *jb = &c->jobs[j];
    memset(jb, 0, sizeof(*jb));
    snprintf(c->ids[j], sizeof(c->ids[j]), "j%d", j);
    jb->id = c->ids[j];
    jb->team = -1;
    jb->cls = SCHED_BATCH;
    jb->gang = 1;
    jb->replicas = replicas;
    jb->req.gpus = gpus;
    jb->req.cpu_milli = 1000;
    jb->req.mem_bytes = GIB;
    jb->topo_required = topo_node ? sched_config_level(&c->cfg, "node") : -1;
    jb->topo_preferred = -1;
    jb->topo_spread = -1;
    jb->pool = -1;
    jb->enqueue_time = j;
    jb->state = SCHED_JOB_WAITING;
    jb->terminating_for = -1;
    struct sched_snapshot s;
    memset(&s, 0, sizeof(s));
    s.config = &c->cfg;
    s.now = 100 + j;
    s.nodes = c->nodes;
    s.nnodes = c->nn;
    s.jobs = c->jobs;
    s.njobs = c->nj;
    struct sched_result *r = NULL;
    char err[256];
    assert_int_equal(sched_cycle(NULL, &s, &r, err, sizeof(err)), 0);
    int admitted = 0;
    for (int x = 0; x < r->n; x++) {
        const struct sched_decision *d = &r->d[x];
        if (d->kind != SCHED_ADMIT || d->job != j)
            continue;
        assert_int_equal(d->nrep, replicas);
        for (int p = 0; p < d->nrep; p++)
            c->place[j][p] = d->rep[p];
        admitted = 1;
    }
    sched_result_free(r);
    assert_true(admitted);
    jb->state = SCHED_JOB_RUNNING;
    jb->placement = c->place[j];
    jb->nplaced = replicas;
    jb->admitted_at = 100 + j;
    return j;
}

static int node_of(const struct cluster *c, int j, int rep)
{
    return c->place[j][rep].node;
}

/* Two empty 4-GPU nodes, a fresh controller: a 1-GPU job, then a 2-GPU job
 * share one node, so a 2 x 2-GPU gang that must sit on one node still fits. */
static void test_seed_example(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c, 2, 4);
    int a = submit(&c, 1, 1, 0);
    int b = submit(&c, 2, 1, 0);
    assert_int_equal(node_of(&c, b, 0), node_of(&c, a, 0));
    int g = submit(&c, 2, 2, 1);
    assert_int_not_equal(node_of(&c, g, 0), node_of(&c, a, 0));
    assert_int_equal(node_of(&c, g, 1), node_of(&c, g, 0));
}

/* Three empty 4-GPU nodes: 1, 2 and 1 GPUs fill one node; a 3-GPU job that no
 * node in use can take opens a second; the next 1-GPU job goes to that
 * second node's last GPU, not to the empty third, which then holds the
 * node-required 2 x 2 gang. */
static void test_three_nodes(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c, 3, 4);
    int a = submit(&c, 1, 1, 0);
    int b = submit(&c, 2, 1, 0);
    int d = submit(&c, 1, 1, 0);
    assert_int_equal(node_of(&c, b, 0), node_of(&c, a, 0));
    assert_int_equal(node_of(&c, d, 0), node_of(&c, a, 0));
    int e = submit(&c, 3, 1, 0);
    assert_int_not_equal(node_of(&c, e, 0), node_of(&c, a, 0));
    int f = submit(&c, 1, 1, 0);
    assert_int_equal(node_of(&c, f, 0), node_of(&c, e, 0));
    int g = submit(&c, 2, 2, 1);
    assert_int_not_equal(node_of(&c, g, 0), node_of(&c, a, 0));
    assert_int_not_equal(node_of(&c, g, 0), node_of(&c, e, 0));
    assert_int_equal(node_of(&c, g, 1), node_of(&c, g, 0));
}

/* The one-task index follows the same rule: without shapes, and with a shape
 * distribution of only 2-GPU tasks (under which FGD alone would rather open
 * the empty node than strand the used node's last GPU). */
static void index_seed(int with_shapes)
{
    struct cluster c;
    cluster_init(&c, 2, 4);
    char err[256];
    struct sched_index *ix = sched_index_new(&c.cfg, c.nodes, c.nn, err, sizeof(err));
    assert_non_null(ix);
    if (with_shapes) {
        struct sched_shape sh;
        memset(&sh, 0, sizeof(sh));
        sh.req.gpus = 2;
        sh.weight = 1;
        assert_int_equal(sched_index_set_shapes(ix, &sh, 1, err, sizeof(err)), 0);
    }
    struct sched_request r;
    struct sched_replica one, two, three;
    memset(&r, 0, sizeof(r));
    r.gpus = 1;
    r.cpu_milli = 1000;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &one), 0);
    r.gpus = 2;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &two), 0);
    assert_int_equal(two.node, one.node);
    /* the other node is still whole: a 4-GPU task fits there */
    r.gpus = 4;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &three), 0);
    assert_int_not_equal(three.node, one.node);
    sched_index_free(ix);
}

static void test_index_no_shapes(void **state)
{
    (void)state;
    index_seed(0);
}

static void test_index_small_shapes(void **state)
{
    (void)state;
    index_seed(1);
}

/* Node 0 (4 GPUs) has one in use, node 1 (2 GPUs) is whole; a 2-GPU task.
 * With 2-GPU tasks expected, taking node 1 whole is priced by the measure
 * (nothing would stay whole there, and node 0 would strand a GPU for them):
 * FGD's choice, the exact fit on node 1, stands. Without shapes the measure
 * is blind and the rule keeps node 1 whole. */
static int priced_probe(int with_shapes)
{
    struct cluster c;
    cluster_init(&c, 2, 4);
    c.nodes[0].foreign_gpu_milli[0] = 1000;
    c.nodes[1].gpus = 2;
    char err[256];
    struct sched_index *ix = sched_index_new(&c.cfg, c.nodes, c.nn, err, sizeof(err));
    assert_non_null(ix);
    if (with_shapes) {
        struct sched_shape sh;
        memset(&sh, 0, sizeof(sh));
        sh.req.gpus = 2;
        sh.weight = 1;
        assert_int_equal(sched_index_set_shapes(ix, &sh, 1, err, sizeof(err)), 0);
    }
    struct sched_request r;
    struct sched_replica rep;
    memset(&r, 0, sizeof(r));
    r.gpus = 2;
    r.cpu_milli = 1000;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &rep), 0);
    sched_index_free(ix);
    return rep.node;
}

static void test_index_priced_break(void **state)
{
    (void)state;
    assert_int_equal(priced_probe(1), 1);
    assert_int_equal(priced_probe(0), 0);
}

/* A CPU-only task breaks no GPU: the rule does not steer it. */
static void test_cpu_only_not_steered(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c, 2, 4);
    c.nodes[0].cpu_milli = 2000;
    char err[256];
    struct sched_index *ix = sched_index_new(&c.cfg, c.nodes, c.nn, err, sizeof(err));
    assert_non_null(ix);
    struct sched_shape sh;
    memset(&sh, 0, sizeof(sh));
    sh.req.gpus = 1;
    sh.req.cpu_milli = 1000;
    sh.weight = 1;
    assert_int_equal(sched_index_set_shapes(ix, &sh, 1, err, sizeof(err)), 0);
    struct sched_request r;
    struct sched_replica a, b;
    memset(&r, 0, sizeof(r));
    r.gpus = 1;
    r.cpu_milli = 1000;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &a), 0);
    assert_int_equal(a.node, 0); /* best fit: the node with less cpu */
    /* a CPU-only task that would take node 0's last cpu (stranding its three
     * free GPUs) goes to the whole node instead */
    memset(&r, 0, sizeof(r));
    r.cpu_milli = 1000;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &b), 0);
    assert_int_equal(b.node, 1);
    sched_index_free(ix);
}

/* Typed shapes keep their type: node 0 (A100) and node 1 (T4), two GPUs
 * each, both whole. Waiting: an untyped 1-GPU job, then a 2-GPU job that
 * accepts only A100. The untyped job's fragmentation on node 0 counts the
 * A100-only job (it needs node 0 whole); on node 1 that job could never run,
 * so the untyped job goes to node 1 and both are admitted in one cycle. */
static void test_typed_shape_cycle(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c, 2, 2);
    c.nodes[1].gpu_product = "T4";
    static const char *const a100 = "A100";
    for (int j = 0; j < 2; j++) {
        struct sched_job *jb = &c.jobs[j];
        snprintf(c.ids[j], sizeof(c.ids[j]), "j%d", j);
        jb->id = c.ids[j];
        jb->team = -1;
        jb->cls = SCHED_BATCH;
        jb->gang = 1;
        jb->replicas = 1;
        jb->req.gpus = j ? 2 : 1;
        jb->req.cpu_milli = 1000;
        jb->req.mem_bytes = GIB;
        if (j) {
            jb->req.types[0] = a100;
            jb->req.ntypes = 1;
        }
        jb->topo_required = jb->topo_preferred = jb->topo_spread = -1;
        jb->pool = -1;
        jb->enqueue_time = j;
        jb->terminating_for = -1;
    }
    c.nj = 2;
    struct sched_snapshot s;
    memset(&s, 0, sizeof(s));
    s.config = &c.cfg;
    s.now = 100;
    s.nodes = c.nodes;
    s.nnodes = c.nn;
    s.jobs = c.jobs;
    s.njobs = c.nj;
    struct sched_result *r = NULL;
    char err[256];
    assert_int_equal(sched_cycle(NULL, &s, &r, err, sizeof(err)), 0);
    int node[2] = {-1, -1};
    for (int x = 0; x < r->n; x++)
        if (r->d[x].kind == SCHED_ADMIT)
            node[r->d[x].job] = r->d[x].rep[0].node;
    sched_result_free(r);
    assert_int_equal(node[0], 1);
    assert_int_equal(node[1], 0);
}

/* The same through the index with the shapes given: a typed shape counts on
 * its model only, so the untyped 1-GPU task leaves the A100 node whole. */
static void test_typed_shape_index(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c, 2, 2);
    c.nodes[1].gpu_product = "T4";
    char err[256];
    struct sched_index *ix = sched_index_new(&c.cfg, c.nodes, c.nn, err, sizeof(err));
    assert_non_null(ix);
    struct sched_shape sh[2];
    memset(sh, 0, sizeof(sh));
    sh[0].req.gpus = 1;
    sh[0].weight = 1;
    sh[1].req.gpus = 2;
    sh[1].req.types[0] = "A100";
    sh[1].req.ntypes = 1;
    sh[1].weight = 1;
    assert_int_equal(sched_index_set_shapes(ix, sh, 2, err, sizeof(err)), 0);
    struct sched_request r;
    struct sched_replica rep;
    memset(&r, 0, sizeof(r));
    r.gpus = 1;
    r.cpu_milli = 1000;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &rep), 0);
    assert_int_equal(rep.node, 1);
    sched_index_free(ix);
}

/* Scarcity (gangq): node 0 is the only A100 node (2 of 8 GPUs), nodes 1-3
 * are T4. Typical tasks: 1-GPU untyped (weight 1), 1-GPU A100-only (1),
 * 1-GPU T4-only (2). FGD's popularity weights make an untyped 1-GPU task
 * take the A100 node (there it lowers the frequent T4-only shape's "cannot
 * run here" loss by more); weighted by the capacity each typed shape may use
 * (A100-only: 8/2, T4-only: 8/6), the A100 capacity the A100-only tasks need
 * counts for more and the task goes to a T4 node. The emulated FGD plugin
 * keeps the popularity weights. */
static int scarcity_probe(enum sched_policy pol)
{
    struct cluster c;
    cluster_init(&c, 4, 2);
    c.cfg.policy = pol;
    for (int i = 1; i < 4; i++)
        c.nodes[i].gpu_product = "T4";
    char err[256];
    struct sched_index *ix = sched_index_new(&c.cfg, c.nodes, c.nn, err, sizeof(err));
    assert_non_null(ix);
    struct sched_shape sh[3];
    memset(sh, 0, sizeof(sh));
    for (int i = 0; i < 3; i++)
        sh[i].req.gpus = 1;
    sh[0].weight = 1;
    sh[1].req.types[0] = "A100";
    sh[1].req.ntypes = 1;
    sh[1].weight = 1;
    sh[2].req.types[0] = "T4";
    sh[2].req.ntypes = 1;
    sh[2].weight = 2;
    assert_int_equal(sched_index_set_shapes(ix, sh, 3, err, sizeof(err)), 0);
    struct sched_request r;
    struct sched_replica rep;
    memset(&r, 0, sizeof(r));
    r.gpus = 1;
    r.cpu_milli = 1000;
    assert_int_equal(sched_place_one(ix, &r, NULL, 0, &rep), 0);
    sched_index_free(ix);
    return rep.node;
}

static void test_index_scarcity(void **state)
{
    (void)state;
    assert_int_not_equal(scarcity_probe(SCHED_POLICY_GANGQ), 0);
    assert_int_equal(scarcity_probe(SCHED_POLICY_FGD), 0);
}

/* Shapes of weight 0 are no shapes. Node 0 (4 GPUs) has one GPU partly in
 * use, node 1 (2 GPUs) is whole; a 2-GPU probe, alone in the queue, with the
 * shapes of each row. Given shapes of weight 0 only count as none: sched_cycle
 * derives its shapes from the queue (the probe itself, which prices breaking
 * node 1, so FGD's exact fit there stands) and the index, which has no
 * queue, has none (the rule keeps node 1 whole). A shape of weight 0 beside
 * one of weight > 0 prices nothing. */
struct shape_row {
    int32_t gpus[2];
    const char *type[2];
    double weight[2];
    int nsh;
    int cycle_node, index_node;
};

static const struct shape_row shape_rows[] = {
    {{0, 0}, {NULL, NULL}, {0, 0}, 0, 1, 0},       /* none: derived / blind */
    {{2, 0}, {"T4", NULL}, {0, 0}, 1, 1, 0},       /* weight 0 only: as none */
    {{2, 2}, {NULL, NULL}, {0, 0}, 2, 1, 0},       /* all weight 0: as none */
    {{2, 0}, {"T4", NULL}, {1, 0}, 1, 0, 0},       /* cannot run on A100 */
    {{2, 0}, {NULL, NULL}, {1, 0}, 1, 1, 1},       /* prices the break */
    {{2, 2}, {NULL, "T4"}, {0, 1}, 2, 0, 0},       /* the pricing one has weight 0 */
};

static void shape_row_cluster(struct cluster *c)
{
    cluster_init(c, 2, 4);
    c->nodes[0].foreign_gpu_milli[1] = 750;
    c->nodes[1].gpus = 2;
}

static void test_zero_weight_shapes(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(shape_rows) / sizeof(shape_rows[0]); t++) {
        const struct shape_row *row = &shape_rows[t];
        struct sched_shape sh[2];
        memset(sh, 0, sizeof(sh));
        for (int k = 0; k < row->nsh; k++) {
            sh[k].req.gpus = row->gpus[k];
            if (row->type[k]) {
                sh[k].req.types[0] = row->type[k];
                sh[k].req.ntypes = 1;
            }
            sh[k].req.cpu_milli = 1000;
            sh[k].weight = row->weight[k];
        }
        /* through sched_cycle */
        struct cluster c;
        shape_row_cluster(&c);
        struct sched_job *jb = &c.jobs[0];
        c.ids[0][0] = 'p';
        jb->id = c.ids[0];
        jb->team = -1;
        jb->cls = SCHED_BATCH;
        jb->gang = 1;
        jb->replicas = 1;
        jb->req.gpus = 2;
        jb->req.cpu_milli = 1000;
        jb->req.mem_bytes = GIB;
        jb->topo_required = jb->topo_preferred = jb->topo_spread = -1;
        jb->pool = -1;
        jb->terminating_for = -1;
        c.nj = 1;
        struct sched_snapshot s;
        memset(&s, 0, sizeof(s));
        s.config = &c.cfg;
        s.now = 100;
        s.nodes = c.nodes;
        s.nnodes = c.nn;
        s.jobs = c.jobs;
        s.njobs = c.nj;
        s.shapes = sh;
        s.nshapes = row->nsh;
        struct sched_result *r = NULL;
        char err[256];
        assert_int_equal(sched_cycle(NULL, &s, &r, err, sizeof(err)), 0);
        int node = -1;
        for (int x = 0; x < r->n; x++)
            if (r->d[x].kind == SCHED_ADMIT && r->d[x].job == 0)
                node = r->d[x].rep[0].node;
        sched_result_free(r);
        if (node != row->cycle_node)
            fail_msg("row %zu: sched_cycle placed the probe on node %d, want %d", t, node,
                     row->cycle_node);
        /* through the index */
        struct sched_index *ix = sched_index_new(&c.cfg, c.nodes, c.nn, err, sizeof(err));
        assert_non_null(ix);
        assert_int_equal(sched_index_set_shapes(ix, sh, row->nsh, err, sizeof(err)), 0);
        struct sched_replica rep;
        assert_int_equal(sched_place_one(ix, &jb->req, NULL, 0, &rep), 0);
        sched_index_free(ix);
        if (rep.node != row->index_node)
            fail_msg("row %zu: the index placed the probe on node %d, want %d", t, rep.node,
                     row->index_node);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_example),
        cmocka_unit_test(test_three_nodes),
        cmocka_unit_test(test_index_no_shapes),
        cmocka_unit_test(test_index_small_shapes),
        cmocka_unit_test(test_index_priced_break),
        cmocka_unit_test(test_cpu_only_not_steered),
        cmocka_unit_test(test_typed_shape_cycle),
        cmocka_unit_test(test_typed_shape_index),
        cmocka_unit_test(test_index_scarcity),
        cmocka_unit_test(test_zero_weight_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
