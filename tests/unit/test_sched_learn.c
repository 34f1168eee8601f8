/* test_sched_learn.c — the placement index learns the memory of shapes given
 * without it, so the FGD measure sees a node whose memory strands its GPUs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gq.h"
#include "sched.h"

#define GIB ((int64_t)1 << 30)

/* W takes the warm-up tasks (no taint); A and B are tainted, so only the
 * probe reaches them. A's memory after the probe (0.5 GiB) is below the
 * learnt memory of the shape (1.3 x 1 GiB): the probe there strands A's GPU. */
static struct sched_index *setup(void)
{
    static const struct sched_taint taint = {"dedicated", "probe", SCHED_NO_SCHEDULE};
    struct sched_node nodes[3];
    memset(nodes, 0, sizeof(nodes));
    const char *names[3] = {"w", "a", "b"};
    for (int i = 0; i < 3; i++) {
        nodes[i].name = names[i];
        nodes[i].ready = 1;
        nodes[i].gpus = 1;
        nodes[i].gpu_product = "T4";
        nodes[i].pool = -1;
    }
    nodes[0].cpu_milli = 256;
    nodes[0].mem_bytes = 1000 * GIB;
    nodes[1].cpu_milli = 100;
    nodes[1].mem_bytes = 2 * GIB + GIB / 2;
    nodes[2].cpu_milli = 100;
    nodes[2].mem_bytes = 100 * GIB;
    nodes[1].taints = nodes[2].taints = &taint;
    nodes[1].ntaints = nodes[2].ntaints = 1;
    char err[256];
    struct sched_index *ix = sched_index_new(NULL, nodes, 3, err, sizeof(err));
    assert_non_null(ix);
    struct sched_shape sh;
    memset(&sh, 0, sizeof(sh));
    sh.req.gpu_milli = 1;
    sh.req.cpu_milli = 1;
    sh.weight = 1;
    assert_int_equal(sched_index_set_shapes(ix, &sh, 1, err, sizeof(err)), 0);
    return ix;
}

static void warm_up(struct sched_index *ix, int n)
{
    struct sched_request r;
    memset(&r, 0, sizeof(r));
    r.gpu_milli = 1;
    r.cpu_milli = 1;
    r.mem_bytes = GIB;
    for (int i = 0; i < n; i++) {
        struct sched_replica rep;
        assert_int_equal(sched_place_one(ix, &r, NULL, 0, &rep), 0);
        assert_int_equal(rep.node, 0);
    }
}

static int probe(struct sched_index *ix)
{
    static const struct sched_toleration tol = {"dedicated", NULL, 1, SCHED_EFFECT_ANY};
    struct sched_request r;
    struct sched_replica rep;
    memset(&r, 0, sizeof(r));
    r.cpu_milli = 1;
    r.mem_bytes = 2 * GIB;
    assert_int_equal(sched_place_one(ix, &r, &tol, 1, &rep), 0);
    return rep.node;
}

/* Not yet learnt (fewer than 256 observations): the shape asks no memory, A
 * and B tie and the lower index wins. */
static void test_before_learning(void **state)
{
    (void)state;
    struct sched_index *ix = setup();
    warm_up(ix, 255);
    assert_int_equal(probe(ix), 1);
    sched_index_free(ix);
}

/* Learnt: the probe on A would leave too little memory for the shape, so it
 * goes to B. */
static void test_after_learning(void **state)
{
    (void)state;
    struct sched_index *ix = setup();
    warm_up(ix, 256);
    assert_int_equal(probe(ix), 2);
    double frag = -1;
    sched_index_totals(ix, NULL, NULL, &frag);
    /* W's GPU is still there (744 milli) but W has no cpu left: all of it is
     * fragment; A and B keep their whole GPU usable. */
    assert_true(frag > 743.5 && frag < 744.5);
    sched_index_free(ix);
}

/* A shape that states its memory is never changed by learning. */
static void test_given_memory_kept(void **state)
{
    (void)state;
    struct sched_index *ix = setup();
    struct sched_shape sh;
    char err[128];
    memset(&sh, 0, sizeof(sh));
    sh.req.gpu_milli = 1;
    sh.req.cpu_milli = 1;
    sh.req.mem_bytes = 1; /* one byte: never strands */
    sh.weight = 1;
    assert_int_equal(sched_index_set_shapes(ix, &sh, 1, err, sizeof(err)), 0);
    warm_up(ix, 256);
    assert_int_equal(probe(ix), 1);
    sched_index_free(ix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_learning),
        cmocka_unit_test(test_after_learning),
        cmocka_unit_test(test_given_memory_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
