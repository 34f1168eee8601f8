/* Unit tests for the controller's pure conversions (controller/ctl_snapshot.c)
 * and its configuration parsing (controller/ctl_main.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctl.h"
#include "log.h"
#include "store.h"

static cJSON *J(const char *s)
{
    cJSON *o = cJSON_Parse(s);
    assert_non_null(o);
    return o;
}

/* ------------------------------------------------------------ placement */

static void test_placement_roundtrip(void **state)
{
    (void)state;
    struct ctl_placement p, q;
    ctl_placement_init(&p);
    ctl_placement_init(&q);
    p.attempt = 3;
    gq_strlcpy(p.domain, "rack-\"1\"", sizeof(p.domain));
    assert_int_equal(ctl_placement_add(&p, 2, "n2", 0x0F00u), 0);
    assert_int_equal(ctl_placement_add(&p, 0, "n1", 0xFFu), 0);
    assert_int_equal(ctl_placement_add(&p, 1, "n1", 0xFF00u), 0);
    assert_int_equal(ctl_placement_add(&p, 1, "nX", 1), GQ_EINVAL); /* duplicate replica */
    assert_int_equal(p.rep[0].replica, 0);                          /* kept sorted */
    assert_int_equal(p.rep[2].replica, 2);
    p.reseq = 4;
    p.rep[2].gen = 4; /* replica 2 was re-placed once */
    char name[300];
    ctl_pod_name("job", &p, &p.rep[0], name, sizeof(name));
    assert_string_equal(name, "job-3-0");
    ctl_pod_name("job", &p, &p.rep[2], name, sizeof(name));
    assert_string_equal(name, "job-3-2-g4");
    struct gq_buf b;
    gq_buf_init(&b, 4096);
    assert_int_equal(ctl_placement_format(&p, &b), 0);
    assert_int_equal(ctl_placement_parse(b.p, &q, NULL, 0), 0);
    assert_int_equal(q.attempt, 3);
    assert_string_equal(q.domain, "rack-\"1\"");
    assert_int_equal(q.n, 3);
    assert_string_equal(q.rep[1].node, "n1");
    assert_int_equal(q.rep[1].devs, 0xFF00u);
    assert_int_equal(q.rep[2].devs, 0x0F00u);
    assert_int_equal(q.reseq, 4);
    assert_int_equal(q.rep[2].gen, 4);
    assert_int_equal(q.rep[0].gen, 0);
    assert_int_equal(ctl_placement_find(&q, 2), 2);
    ctl_placement_remove(&q, 1);
    assert_int_equal(q.n, 2);
    assert_int_equal(ctl_placement_find(&q, 1), -1);
    assert_int_equal(q.rep[1].replica, 2);
    /* empty text = empty placement; garbage is refused */
    assert_int_equal(ctl_placement_parse("", &q, NULL, 0), 0);
    assert_int_equal(q.n, 0);
    char err[128];
    assert_int_equal(ctl_placement_parse("{\"attempt\":1}", &q, err, sizeof(err)), GQ_EPARSE);
    assert_int_equal(ctl_placement_parse("{\"attempt\":1,\"replicas\":[{\"i\":0,\"node\":\"a\",\"devs\":1},"
                                         "{\"i\":0,\"node\":\"b\",\"devs\":2}]}",
                                         &q, err, sizeof(err)),
                     GQ_EINVAL);
    assert_int_equal(ctl_placement_parse("not json", &q, err, sizeof(err)), GQ_EPARSE);
    gq_buf_release(&b);
    ctl_placement_release(&p);
    ctl_placement_release(&q);
}

/* ------------------------------------------------------------ nodes, pods */

static const char *NODE_A =
    "{\"metadata\":{\"name\":\"a\",\"labels\":{\"gangq.io/pool\":\"train\",\"zone\":\"z1\","
    "\"topology.gangq.io/rack\":\"r1\"}},"
    "\"spec\":{\"taints\":[{\"key\":\"gpu\",\"value\":\"yes\",\"effect\":\"NoSchedule\"},"
    "{\"key\":\"soft\",\"effect\":\"PreferNoSchedule\"}]},"
    "\"status\":{\"capacity\":{\"cpu\":\"96\",\"memory\":\"1Ti\",\"nvidia.com/gpu\":\"8\"},"
    "\"allocatable\":{\"cpu\":\"94500m\",\"memory\":\"1016Gi\",\"nvidia.com/gpu\":\"8\"},"
    "\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\"},"
    "{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}]}}";
static const char *NODE_B =
    "{\"metadata\":{\"name\":\"b\",\"labels\":{\"gangq.io/pool\":\"infer\"}},"
    "\"spec\":{\"unschedulable\":true},"
    "\"status\":{\"capacity\":{\"cpu\":\"8\",\"memory\":\"64Gi\",\"nvidia.com/gpu\":\"4\"},"
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}";
static const char *NODE_C = /* no labels, no GPUs, no conditions */
    "{\"metadata\":{\"name\":\"c\"},\"status\":{\"allocatable\":{\"cpu\":\"4\",\"memory\":\"8Gi\"}}}";

/* A borrowed placement reads the source's replicas with no copy; releasing
 * it frees nothing of the source; its first add or remove copies, so the
 * source never changes (ASan sees a double free or a write into the source's
 * memory). */
static void test_placement_borrow(void **state)
{
    (void)state;
    struct ctl_placement src, b;
    ctl_placement_init(&src);
    ctl_placement_init(&b);
    assert_int_equal(ctl_placement_add(&src, 0, "n0", 1), 0);
    assert_int_equal(ctl_placement_add(&src, 1, "n1", 2), 0);
    src.attempt = 2;
    ctl_placement_borrow(&b, &src);
    assert_true(b.borrowed);
    assert_ptr_equal(b.rep, src.rep);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.attempt, 2);
    ctl_placement_release(&b); /* frees nothing of src */
    assert_int_equal(b.n, 0);
    assert_string_equal(src.rep[1].node, "n1");
    /* remove: a copy first */
    ctl_placement_borrow(&b, &src);
    assert_int_equal(ctl_placement_remove(&b, 0), 0);
    assert_false(b.borrowed);
    assert_ptr_not_equal(b.rep, src.rep);
    assert_int_equal(b.n, 1);
    assert_string_equal(b.rep[0].node, "n1");
    assert_int_equal(src.n, 2);
    assert_string_equal(src.rep[0].node, "n0");
    /* add: a copy first, then the direct write a gang's re-placement makes */
    ctl_placement_borrow(&b, &src); /* releases b's own copy */
    assert_int_equal(ctl_placement_add(&b, 2, "n2", 4), 0);
    b.rep[ctl_placement_find(&b, 2)].gen = 1;
    assert_int_equal(b.n, 3);
    assert_int_equal(src.n, 2);
    assert_int_equal(ctl_placement_find(&src, 2), -1);
    /* remove of a replica it does not have: nothing, still borrowed */
    ctl_placement_borrow(&b, &src);
    assert_int_equal(ctl_placement_remove(&b, 7), 0);
    assert_true(b.borrowed);
    /* an empty source: nothing borrowed */
    struct ctl_placement empty;
    ctl_placement_init(&empty);
    ctl_placement_borrow(&b, &empty);
    assert_false(b.borrowed);
    assert_null(b.rep);
    ctl_placement_release(&b);
    ctl_placement_release(&src);
}

static void test_node_info(void **state)
{
    (void)state;
    cJSON *a = J(NODE_A), *b = J(NODE_B), *c = J(NODE_C);
    struct ctl_nodeinfo ni;
    ctl_node_info(a, &ni);
    assert_true(ni.ready);
    assert_false(ni.unschedulable);
    assert_int_equal(ni.cpu_milli, 94500);
    assert_int_equal(ni.mem_bytes, 1016LL << 30);
    assert_int_equal(ni.gpus, 8);
    assert_true(ni.ready_since > 1767000000.0);
    ctl_node_info(b, &ni); /* capacity used when allocatable is absent */
    assert_false(ni.ready);
    assert_true(ni.unschedulable);
    assert_int_equal(ni.cpu_milli, 8000);
    assert_int_equal(ni.gpus, 4);
    ctl_node_info(c, &ni);
    assert_false(ni.ready);
    assert_int_equal(ni.gpus, 0);
    assert_int_equal(ni.mem_bytes, 8LL << 30);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
}

static void test_pod_usage(void **state)
{
    (void)state;
    cJSON *p = J("{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gangq.io/gpu-devices\":\"0,3, 5\","
                 "\"gangq.io/gpu-milli\":\"250\"}},"
                 "\"spec\":{\"nodeName\":\"a\",\"containers\":["
                 "{\"name\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"},"
                 "\"limits\":{\"nvidia.com/gpu\":\"2\"}}},"
                 "{\"name\":\"y\",\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}}}],"
                 "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"requests\":{\"cpu\":\"3\"}}}]},"
                 "\"status\":{\"phase\":\"Running\"}}");
    struct ctl_podusage u;
    ctl_pod_usage(p, &u);
    assert_int_equal(u.cpu_milli, 3000);                   /* max(0.5+1, init 3) */
    assert_int_equal(u.mem_bytes, (1LL << 30) + (512LL << 20)); /* limit used as request */
    assert_int_equal(u.gpus, 2);
    assert_int_equal(u.gpu_milli, 250);
    assert_int_equal(u.devs, (1u << 0) | (1u << 3) | (1u << 5));
    assert_false(ctl_pod_terminal(p));
    cJSON *d = J("{\"status\":{\"phase\":\"Succeeded\"}}");
    assert_true(ctl_pod_terminal(d));
    cJSON_Delete(p);
    cJSON_Delete(d);
}

/* ------------------------------------------------------------ snapshot */

static void decode_job(const char *json, struct api_gpujob *job, const struct api_team *teams, int nteams)
{
    cJSON *o = J(json);
    struct api_errors e;
    api_errors_init(&e);
    api_gpujob_init(job);
    assert_int_equal(api_gpujob_decode(o, job, &e), 0);
    struct api_lookup lk = {teams, (size_t)nteams, NULL, 0};
    api_gpujob_default(job, &lk);
    assert_int_equal(api_gpujob_validate(job, NULL, &e), 0);
    cJSON_Delete(o);
}

static void decode_team(const char *json, struct api_team *t)
{
    cJSON *o = J(json);
    struct api_errors e;
    api_errors_init(&e);
    assert_int_equal(api_team_decode(o, t, &e), 0);
    api_team_default(t);
    cJSON_Delete(o);
}

static void decode_pool(const char *json, struct api_gpupool *p)
{
    cJSON *o = J(json);
    struct api_errors e;
    api_errors_init(&e);
    assert_int_equal(api_gpupool_decode(o, p, &e), 0);
    cJSON_Delete(o);
}

#define JOB_HEAD "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"metadata\":"

/* GPU annotations count only on gangq's own pods, and only as far as they agree
 * with the request: a pod any tenant creates with gangq's annotations copied
 * (one device, a 1/1000 share) while asking the kubelet for four GPUs counts
 * for four. */
static void test_foreign_annotations(void **state)
{
    (void)state;
    cJSON *na = J(NODE_A);
    /* not gangq's: requests 4, claims a share of device 0 */
    cJSON *x1 = J("{\"metadata\":{\"name\":\"x1\",\"annotations\":{\"gangq.io/gpu-milli\":\"1\","
                  "\"gangq.io/gpu-devices\":\"0\"}},\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\","
                  "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]}}");
    /* gangq's, released: requests 2, its annotation names 1 device: the request counts */
    cJSON *x2 = J("{\"metadata\":{\"name\":\"x2\",\"labels\":{\"gangq.io/job\":\"old\"},"
                  "\"annotations\":{\"gangq.io/gpu-devices\":\"7\"}},\"spec\":{\"nodeName\":\"a\","
                  "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}");
    /* gangq's, released: a share of device 6, no whole GPU requested: the annotation counts */
    cJSON *x3 = J("{\"metadata\":{\"name\":\"x3\",\"labels\":{\"gangq.io/job\":\"old2\"},"
                  "\"annotations\":{\"gangq.io/gpu-milli\":\"300\",\"gangq.io/gpu-devices\":\"6\"}},"
                  "\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\"}]}}");
    const cJSON *nodes[] = {na};
    const cJSON *foreign[] = {x1, x2, x3};
    struct sched_config cfg;
    sched_config_default(&cfg);
    struct ctl_snapin in = {&cfg, 1234, nodes, 1, foreign, 3, NULL, 0, NULL, 0, NULL, NULL, 0, 0, 2};
    struct ctl_snap s = {0};
    char err[256];
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
    const struct sched_node *a = &s.snap.nodes[0];
    uint16_t want[8] = {1000, 1000, 1000, 1000, 1000, 1000, 300, 0};
    for (int d = 0; d < 8; d++)
        assert_int_equal(a->foreign_gpu_milli[d], want[d]);
    ctl_snap_release(&s);
    cJSON_Delete(na);
    cJSON_Delete(x1);
    cJSON_Delete(x2);
    cJSON_Delete(x3);
}

static void test_snapshot_build(void **state)
{
    (void)state;
    cJSON *na = J(NODE_A), *nb = J(NODE_B), *nc = J(NODE_C);
    /* foreign: 3 GPUs + 2 cpu on a; a terminal pod (ignored); a pod on an unknown node */
    cJSON *f1 = J("{\"metadata\":{\"name\":\"f1\"},\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\","
                  "\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},\"limits\":{\"nvidia.com/gpu\":\"3\"}}}]},"
                  "\"status\":{\"phase\":\"Running\"}}");
    cJSON *f2 = J("{\"metadata\":{\"name\":\"f2\"},\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\","
                  "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]},\"status\":{\"phase\":\"Succeeded\"}}");
    cJSON *f3 = J("{\"metadata\":{\"name\":\"f3\"},\"spec\":{\"nodeName\":\"zz\",\"containers\":[{\"name\":\"c\","
                  "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}");
    /* a gangq pod of a job that no longer holds it: its annotated devices 6,7 */
    cJSON *f4 = J("{\"metadata\":{\"name\":\"f4\",\"labels\":{\"gangq.io/job\":\"old\"},"
                  "\"annotations\":{\"gangq.io/gpu-devices\":\"6,7\"}},\"spec\":{\"nodeName\":\"a\","
                  "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}");
    const cJSON *nodes[] = {na, nb, nc};
    const cJSON *foreign[] = {f1, f2, f3, f4};

    struct api_gpupool pools[2];
    decode_pool("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUPool\",\"metadata\":{\"name\":\"infer\"},"
                "\"spec\":{\"nodeSelector\":{\"gangq.io/pool\":\"infer\"},\"classes\":[\"Inference\"],"
                "\"protected\":true,\"reserveGPUs\":2}}",
                &pools[0]);
    decode_pool("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUPool\",\"metadata\":{\"name\":\"train\"},"
                "\"spec\":{\"nodeSelector\":{\"gangq.io/pool\":\"train\",\"zone\":\"z1\"},\"classes\":[\"Training\",\"Batch\"]}}",
                &pools[1]);
    struct api_team teams[2];
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t1\"},"
                "\"spec\":{\"namespaces\":[\"ns1\"],\"cohort\":\"c\",\"weight\":3,"
                "\"quota\":[{\"gpuType\":\"*\",\"gpus\":8,\"borrowingLimit\":2}]}}",
                &teams[0]);
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t2\"},"
                "\"spec\":{\"namespaces\":[\"ns2\"]}}",
                &teams[1]);
    struct api_gpujob jw, jr, jg;
    decode_job(JOB_HEAD "{\"name\":\"w\",\"namespace\":\"ns1\"},\"spec\":{\"class\":\"Training\",\"replicas\":2,"
               "\"priority\":7,\"gpu\":{\"count\":4,\"types\":[\"H100\"],\"minMemoryGiB\":40},"
               "\"topology\":{\"required\":\"rack\",\"preferred\":\"node\"},\"template\":{\"spec\":{"
               "\"nodeSelector\":{\"zone\":\"z1\",\"topology.gangq.io/rack\":\"r9\"},"
               "\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"
               "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}}]}}}}",
               &jw, teams, 2);
    decode_job(JOB_HEAD "{\"name\":\"r\",\"namespace\":\"ns2\"},\"spec\":{\"class\":\"Inference\",\"replicas\":3,"
               "\"pool\":\"infer\",\"gpu\":{\"shares\":500},\"template\":{\"spec\":{"
               "\"nodeSelector\":{\"gangq.io/pool\":\"infer\"},\"containers\":[{\"name\":\"c\"}]}}}}",
               &jr, teams, 2);
    decode_job(JOB_HEAD "{\"name\":\"g\",\"namespace\":\"ns2\"},\"spec\":{\"gpu\":{\"count\":1},"
               "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
               &jg, teams, 2);
    struct ctl_placement pr, pg;
    ctl_placement_init(&pr);
    ctl_placement_init(&pg);
    pr.attempt = 1;
    assert_int_equal(ctl_placement_add(&pr, 0, "b", 1u), 0);
    assert_int_equal(ctl_placement_add(&pr, 2, "gone-node", 1u), 0); /* node vanished: skipped */
    pg.attempt = 1;
    assert_int_equal(ctl_placement_add(&pg, 0, "gone-node", 1u), 0); /* nothing placed: left out */
    static const char *const wv[] = {"ns2/r", "ns3/x"}; /* preempted for ns1/w */
    struct ctl_jobin jobs[] = {
        {"ns1/w", &jw, 0, 5000, 0, NULL, "ns2/r", "r1", 0, NULL, 0, 0, wv, 2, 0},
        {"ns2/r", &jr, 1, 1000, 7000, &pr, "", "", 0, NULL, 0, 0, NULL, 0, 0},
        {"ns2/g", &jg, 1, 2000, 8000, &pg, NULL, NULL, 0, NULL, 0, 0, NULL, 0, 0},
    };
    double usage[2] = {3600.0, 0.0};
    struct sched_config cfg;
    sched_config_default(&cfg);
    struct ctl_snapin in = {&cfg, 1234, nodes, 3, foreign, 4, pools, 2, teams, 2, usage, jobs, 3, 0,
                            1 /* f4: released */};
    struct ctl_snap s = {0};
    char err[256];
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);

    assert_int_equal(s.snap.nnodes, 3);
    assert_int_equal(s.snap.now, 1234);
    const struct sched_node *a = &s.snap.nodes[0], *b = &s.snap.nodes[1], *c = &s.snap.nodes[2];
    assert_string_equal(a->name, "a");
    assert_int_equal(a->pool, 1); /* both selector labels match "train" */
    assert_int_equal(b->pool, 0);
    assert_int_equal(c->pool, -1); /* in no pool */
    assert_int_equal(a->nlabels, 3);
    assert_int_equal(a->ntaints, 2);
    assert_string_equal(a->taints[0].key, "gpu");
    assert_string_equal(a->taints[0].value, "yes");
    assert_int_equal(a->taints[0].effect, SCHED_NO_SCHEDULE);
    assert_int_equal(a->taints[1].effect, SCHED_PREFER_NO_SCHEDULE);
    assert_true(a->ready);
    assert_false(b->ready);
    assert_true(b->unschedulable);
    assert_int_equal(a->cpu_milli, 94500);
    assert_int_equal(a->gpus, 8);
    /* foreign usage: f1 on devices 0..2, f4 on 6,7; f2 (Succeeded) and f3 (unknown node) ignored */
    assert_int_equal(a->foreign_cpu_milli, 2000);
    assert_int_equal(a->foreign_mem_bytes, 4LL << 30);
    uint16_t want[8] = {1000, 1000, 1000, 0, 0, 0, 1000, 1000};
    for (int d = 0; d < 8; d++)
        assert_int_equal(a->foreign_gpu_milli[d], want[d]);
    /* of it, f4 (the released gangq pod: the last foreign one) is going: releasing */
    uint16_t rel[8] = {0, 0, 0, 0, 0, 0, 1000, 1000};
    for (int d = 0; d < 8; d++)
        assert_int_equal(a->releasing_gpu_milli[d], rel[d]);
    assert_int_equal(a->releasing_cpu_milli, 0);
    assert_int_equal(c->foreign_cpu_milli, 0);

    assert_int_equal(s.snap.npools, 2);
    assert_string_equal(s.snap.pools[0].name, "infer");
    assert_int_equal(s.snap.pools[0].home_classes, SCHED_CLASS_BIT(SCHED_INFERENCE));
    assert_true(s.snap.pools[0].protected_pool);
    assert_int_equal(s.snap.pools[0].reserve_gpus, 2);
    assert_int_equal(s.snap.pools[1].home_classes, SCHED_CLASS_BIT(SCHED_TRAINING) | SCHED_CLASS_BIT(SCHED_BATCH));

    assert_int_equal(s.snap.nteams, 2);
    assert_string_equal(s.snap.teams[0].cohort, "c");
    assert_true(s.snap.teams[0].weight == 3.0);
    assert_int_equal(s.snap.teams[0].nquota, 1);
    assert_int_equal(s.snap.teams[0].quota[0].gpus, 8);
    assert_int_equal(s.snap.teams[0].quota[0].borrowing_limit, 2);
    assert_true(s.snap.teams[0].usage_gpu_s == 3600.0);
    assert_int_equal(s.snap.teams[1].nquota, 0);

    /* jobs: g has no placed replica left and is left out */
    assert_int_equal(s.snap.njobs, 2);
    const struct sched_job *w = &s.snap.jobs[0], *r = &s.snap.jobs[1];
    assert_int_equal(s.job_in[0], 0);
    assert_int_equal(s.job_in[1], 1);
    assert_string_equal(w->id, "ns1/w");
    assert_int_equal(w->team, 0);
    assert_int_equal(w->cls, SCHED_TRAINING);
    assert_int_equal(w->priority, 7);
    assert_true(w->gang);
    assert_true(w->preemptible);
    assert_int_equal(w->replicas, 2);
    assert_int_equal(w->req.gpus, 4);
    assert_int_equal(w->req.ntypes, 1);
    assert_string_equal(w->req.types[0], "H100");
    assert_int_equal(w->req.min_gpu_mem_gib, 40);
    assert_int_equal(w->req.cpu_milli, 2000);
    assert_int_equal(w->req.mem_bytes, 1LL << 30);
    assert_int_equal(w->ntols, 1);
    assert_true(w->tols[0].exists);
    assert_int_equal(w->tols[0].effect, SCHED_NO_SCHEDULE);
    /* template nodeSelector terms, in order, each job its own */
    assert_int_equal(w->nnode_selector, 2);
    assert_string_equal(w->node_selector[0].key, "zone");
    assert_string_equal(w->node_selector[0].value, "z1");
    assert_string_equal(w->node_selector[1].key, "topology.gangq.io/rack");
    assert_string_equal(w->node_selector[1].value, "r9");
    assert_int_equal(w->topo_required, sched_config_level(&cfg, "rack"));
    assert_int_equal(w->topo_preferred, sched_config_level(&cfg, "node"));
    assert_int_equal(w->topo_spread, -1);
    assert_int_equal(w->pool, -1);
    assert_int_equal(w->enqueue_time, 1); /* its rank: after r (enqueued at 1000) */
    assert_int_equal(w->state, SCHED_JOB_WAITING);
    /* whom it was last preempted for ("" = none) */
    assert_string_equal(w->preempted_for, "ns2/r");
    assert_null(r->preempted_for);
    /* the jobs preempted for it while it waits */
    assert_int_equal(w->npreempted_victims, 2);
    assert_string_equal(w->preempted_victims[0], "ns2/r");
    assert_string_equal(w->preempted_victims[1], "ns3/x");
    assert_int_equal(r->npreempted_victims, 0);
    assert_null(r->preempted_victims);
    /* what its reservation held last cycle ("" = nothing) */
    assert_string_equal(w->reserved_domain, "r1");
    assert_null(r->reserved_domain);

    assert_int_equal(r->team, 1);
    assert_int_equal(r->cls, SCHED_INFERENCE);
    assert_false(r->gang);
    assert_false(r->preemptible);
    assert_int_equal(r->req.gpus, 0);
    assert_int_equal(r->req.gpu_milli, 500);
    assert_int_equal(r->pool, 0);
    assert_int_equal(r->nnode_selector, 1);
    assert_string_equal(r->node_selector[0].key, "gangq.io/pool");
    assert_string_equal(r->node_selector[0].value, "infer");
    assert_int_equal(r->state, SCHED_JOB_RUNNING);
    assert_int_equal(r->nplaced, 1); /* the replica on the vanished node is dropped */
    assert_int_equal(r->placement[0].node, 1);
    assert_int_equal(r->placement[0].devs, 1u);
    assert_int_equal(r->admitted_at, 7);
    assert_int_equal(s.gangq_milli[1], 500);
    assert_int_equal(ctl_snap_node(&s, "c"), 2);
    assert_int_equal(ctl_snap_node(&s, "nope"), -1);

    /* the snapshot is accepted by the core */
    struct sched_result *res = NULL;
    assert_int_equal(sched_cycle(NULL, &s.snap, &res, err, sizeof(err)), 0);
    /* w's selector (rack r9) excludes a, the only ready node: it waits and says so */
    const struct sched_decision *wd = NULL;
    for (int i = 0; i < res->n; i++)
        if (res->d[i].job == 0)
            wd = &res->d[i];
    assert_non_null(wd);
    assert_int_equal(wd->kind, SCHED_WAIT);
    assert_string_equal(wd->message,
                        "0/3 nodes fit 2x4 GPUs in one rack: 2 not ready, 1 node selector mismatch");
    sched_result_free(res);
    assert_int_equal(r->replicas, 3); /* a non-gang job: the core may place the missing ones */
    ctl_snap_release(&s);

    /* r waits on a problem (its Team was deleted): it keeps what it holds, and no more */
    jobs[1].hold_only = 1;
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
    assert_int_equal(s.snap.jobs[1].state, SCHED_JOB_RUNNING);
    assert_int_equal(s.snap.jobs[1].nplaced, 1);
    assert_int_equal(s.snap.jobs[1].replicas, 1);
    assert_int_equal(s.gangq_milli[1], 500); /* its GPU share still counted */
    ctl_snap_release(&s);
    ctl_placement_release(&pr);
    ctl_placement_release(&pg);
    api_gpujob_release(&jw);
    api_gpujob_release(&jr);
    api_gpujob_release(&jg);
    cJSON *all[] = {na, nb, nc, f1, f2, f3, f4};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cJSON_Delete(all[i]);
}

/* Released jobs whose pods still stop: RUNNING + terminating in the snapshot,
 * holding the devices of their stopping pods, making room for their preemptor
 * (its index while it waits), wanting no new replicas; the core neither
 * re-admits them nor books their devices for anyone else. */
static void test_snapshot_terminating(void **state)
{
    (void)state;
    cJSON *nt = J("{\"metadata\":{\"name\":\"t\"},\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":\"256Gi\","
                  "\"nvidia.com/gpu\":\"8\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    const cJSON *nodes[] = {nt};
    struct api_team team;
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t1\"},"
                "\"spec\":{\"namespaces\":[\"ns\"]}}",
                &team);
    struct api_gpujob jv, jp, jq;
    decode_job(JOB_HEAD "{\"name\":\"v\",\"namespace\":\"ns\"},\"spec\":{\"class\":\"Batch\",\"replicas\":2,"
               "\"gpu\":{\"count\":4},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
               &jv, &team, 1);
    decode_job(JOB_HEAD "{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"class\":\"Inference\",\"priority\":1000,"
               "\"gpu\":{\"count\":8},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
               &jp, &team, 1);
    decode_job(JOB_HEAD "{\"name\":\"q\",\"namespace\":\"ns\"},\"spec\":{\"class\":\"Inference\",\"replicas\":2,"
               "\"gpu\":{\"count\":1},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
               &jq, &team, 1);
    struct ctl_placement pv, pq;
    ctl_placement_init(&pv);
    ctl_placement_init(&pq);
    assert_int_equal(ctl_placement_add(&pv, 1, "t", 0x0Fu), 0); /* replica 0's pod already gone */
    assert_int_equal(ctl_placement_add(&pq, 0, "t", 0x10u), 0);
    struct ctl_jobin jobs[] = {
        {"ns/v", &jv, 1, 1000, 2000, &pv, NULL, NULL, 1, "ns/p", 0, 0, NULL, 0, 0},
        {"ns/p", &jp, 0, 3000, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, 0, 0},
        {"ns/q", &jq, 1, 1000, 2000, &pq, NULL, NULL, 1, "ns/gone", 0, 0, NULL, 0, 0},
    };
    struct sched_config cfg;
    sched_config_default(&cfg);
    cfg.min_runtime_s = 0;
    struct ctl_snapin in = {&cfg, 100, nodes, 1, NULL, 0, NULL, 0, &team, 1, NULL, jobs, 3, 0, 0};
    struct ctl_snap s = {0};
    char err[256];
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
    assert_int_equal(s.snap.njobs, 3);
    const struct sched_job *v = &s.snap.jobs[0], *p = &s.snap.jobs[1], *q = &s.snap.jobs[2];
    assert_int_equal(v->state, SCHED_JOB_RUNNING);
    assert_true(v->terminating);
    assert_int_equal(v->terminating_for, 1); /* p, waiting */
    assert_int_equal(v->nplaced, 1);
    assert_int_equal(v->replicas, 1);
    assert_int_equal(v->placement[0].devs, 0x0Fu);
    assert_int_equal(p->state, SCHED_JOB_WAITING);
    assert_false(p->terminating);
    assert_true(q->terminating);
    assert_int_equal(q->terminating_for, -1); /* its preemptor is not in the snapshot */
    assert_int_equal(q->replicas, 1);         /* a stopping non-gang job wants no new replica */

    struct sched_result *res = NULL;
    assert_int_equal(sched_cycle(NULL, &s.snap, &res, err, sizeof(err)), 0);
    int waits_p = 0;
    for (int i = 0; i < res->n; i++) {
        assert_int_not_equal(res->d[i].kind, SCHED_ADMIT);   /* 3 free GPUs: nothing fits p */
        assert_int_not_equal(res->d[i].kind, SCHED_PREEMPT); /* stopping jobs are no victims */
        if (res->d[i].kind == SCHED_WAIT && res->d[i].job == 1) {
            waits_p = 1;
            assert_non_null(strstr(res->d[i].message, "waiting for 1 preempted job to stop"));
        }
    }
    assert_true(waits_p);
    sched_result_free(res);

    /* the victim's pods are gone: p is admitted on all 8 devices */
    struct ctl_jobin later[] = {
        {"ns/v", &jv, 0, 1000, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, 0, 0},
        {"ns/p", &jp, 0, 3000, 0, NULL, NULL, NULL, 0, NULL, 0, 0, NULL, 0, 0},
    };
    struct ctl_snapin in2 = {&cfg, 101, nodes, 1, NULL, 0, NULL, 0, &team, 1, NULL, later, 2, 0, 0};
    /* built again without a release: the same memory, nothing of the last snapshot left */
    const void *jobs_mem = s.snap.jobs;
    assert_non_null(jobs_mem);
    assert_int_equal(ctl_snap_build(&s, &in2, err, sizeof(err)), 0);
    assert_ptr_equal(s.snap.jobs, jobs_mem);
    assert_int_equal(s.snap.njobs, 2);
    assert_int_equal(s.snap.now, 101);
    assert_int_equal(s.snap.jobs[0].state, SCHED_JOB_WAITING);
    assert_int_equal(s.snap.jobs[0].nplaced, 0);
    assert_false(s.snap.jobs[0].terminating);
    assert_int_equal(s.snap.jobs[0].replicas, 2);
    assert_int_equal(sched_cycle(NULL, &s.snap, &res, err, sizeof(err)), 0);
    assert_int_equal(res->d[0].kind, SCHED_ADMIT);
    assert_int_equal(res->d[0].job, 1);
    assert_int_equal(res->d[0].rep[0].devs, 0xFFu);
    sched_result_free(res);
    /* and again with the first input: what the first build gave */
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
    assert_int_equal(s.snap.njobs, 3);
    assert_int_equal(s.snap.now, 100);
    assert_true(s.snap.jobs[0].terminating);
    assert_int_equal(s.snap.jobs[0].terminating_for, 1);
    assert_int_equal(s.snap.jobs[0].nplaced, 1);
    assert_int_equal(s.snap.jobs[0].placement[0].devs, 0x0Fu);
    assert_int_equal(s.snap.jobs[1].state, SCHED_JOB_WAITING);
    assert_int_equal(s.snap.jobs[2].terminating_for, -1);

    ctl_snap_release(&s);
    ctl_placement_release(&pv);
    ctl_placement_release(&pq);
    api_gpujob_release(&jv);
    api_gpujob_release(&jp);
    api_gpujob_release(&jq);
    cJSON_Delete(nt);
}

/* The attempt whose pods finished a job: every replica of one attempt of this
 * job (owner uid) Succeeded, whatever else exists. */
static cJSON *pod_of(const char *uid, int attempt, int replica, const char *phase)
{
    char b[512];
    snprintf(b, sizeof(b),
             "{\"metadata\":{\"name\":\"j-%d-%d\",\"labels\":{\"gangq.io/job\":\"j\",\"gangq.io/attempt\":\"%d\","
             "\"gangq.io/replica\":\"%d\"},\"ownerReferences\":[{\"kind\":\"GPUJob\",\"uid\":\"%s\"}]},"
             "\"status\":{\"phase\":\"%s\"}}",
             attempt, replica, attempt, replica, uid, phase);
    return J(b);
}

static void test_pods_succeeded_attempt(void **state)
{
    (void)state;
    cJSON *p[8];
    p[0] = pod_of("u1", 1, 0, "Succeeded");
    p[1] = pod_of("u1", 1, 1, "Running");
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 2, "u1", 2), 0); /* replica 1 runs */
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 2, "u1", 1), 1);
    cJSON_Delete(p[1]);
    p[1] = pod_of("u1", 1, 1, "Succeeded");
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 2, "u1", 2), 1); /* done */
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 2, "u2", 2), 0); /* another job's pods */
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 2, NULL, 2), 1);  /* any owner */
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 2, "u1", 3), 0);  /* replica 2 missing */
    /* a newer attempt half done, an older one complete: the older finished the job */
    p[2] = pod_of("u1", 2, 0, "Succeeded");
    p[3] = pod_of("u1", 2, 1, "Failed");
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 4, "u1", 2), 1);
    /* two Succeeded pods of one replica do not make up for a missing one */
    cJSON_Delete(p[1]);
    p[1] = pod_of("u1", 1, 0, "Succeeded");
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 4, "u1", 2), 0);
    /* the newest complete attempt wins; no labels = no attempt */
    p[4] = pod_of("u1", 3, 0, "Succeeded");
    p[5] = pod_of("u1", 3, 1, "Succeeded");
    p[6] = J("{\"metadata\":{\"name\":\"x\"},\"status\":{\"phase\":\"Succeeded\"}}");
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 7, "u1", 2), 3);
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 7, "u1", 0), 0);
    assert_int_equal(ctl_pods_succeeded_attempt((const cJSON *const *)p, 0, "u1", 1), 0);
    for (int i = 0; i < 7; i++)
        cJSON_Delete(p[i]);
}

/* An earlier attempt may still run while one of its pods has neither
 * finished nor been marked for deletion: a Succeeded pod never counts as
 * running, nor does one being deleted, nor another job's. */
static void test_pods_live(void **state)
{
    (void)state;
    cJSON *p[4];
    p[0] = pod_of("u1", 1, 0, "Succeeded");
    p[1] = pod_of("u1", 1, 1, "Failed");
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 2, "u1"), 0);
    p[2] = pod_of("u1", 2, 0, "Running"); /* e.g. a delete refused with 409: it changed */
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 3, "u1"), 1);
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 3, "u2"), 0); /* another job's pod */
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 3, NULL), 1);
    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(p[2], "metadata"), "deletionTimestamp",
                            "2026-01-01T00:00:30Z");
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 3, "u1"), 0); /* being deleted */
    p[3] = pod_of("u1", 3, 0, "Pending");
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 4, "u1"), 1);
    cJSON_DeleteItemFromObjectCaseSensitive(p[3], "status"); /* no phase yet: not finished */
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 4, "u1"), 1);
    assert_int_equal(ctl_pods_live((const cJSON *const *)p, 0, "u1"), 0);
    for (int i = 0; i < 4; i++)
        cJSON_Delete(p[i]);
}

static void test_node_pool_none(void **state)
{
    (void)state;
    cJSON *n = J(NODE_C);
    assert_int_equal(ctl_node_pool(n, NULL, 0), -1);
    struct api_gpupool p;
    decode_pool("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUPool\",\"metadata\":{\"name\":\"all\"},"
                "\"spec\":{\"nodeSelector\":{},\"classes\":[\"Batch\"]}}",
                &p);
    assert_int_equal(ctl_node_pool(n, &p, 1), 0); /* an empty selector matches every node */
    cJSON_Delete(n);
}

/* A burst of jobs created within one second (equal creationTimestamp) is
 * admitted in the order it arrived (arrival = resourceVersion at first sight),
 * not in name order (job1, job10, job11, ... before job2). */
static void test_burst_arrival_order(void **state)
{
    (void)state;
    cJSON *na = J("{\"metadata\":{\"name\":\"a\",\"labels\":{\"kubernetes.io/hostname\":\"a\"}},"
                  "\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":\"256Gi\",\"nvidia.com/gpu\":\"4\"},"
                  "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    const cJSON *nodes[] = {na};
    struct api_team team;
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t\"},"
                "\"spec\":{\"namespaces\":[\"b\"]}}",
                &team);
    enum { N = 12 };
    struct api_gpujob jobs[N];
    struct ctl_jobin in_jobs[N];
    char keys[N][32];
    for (int i = 0; i < N; i++) {
        char js[512];
        snprintf(js, sizeof(js),
                 JOB_HEAD "{\"name\":\"job%d\",\"namespace\":\"b\"},\"spec\":{\"gpu\":{\"count\":1},"
                          "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
                 i + 1);
        decode_job(js, &jobs[i], &team, 1);
        snprintf(keys[i], sizeof(keys[i]), "b/job%d", i + 1);
    }
    /* listed in name order (as the informer hands them over), arrived job1..job12 */
    static const int by_name[N] = {0, 9, 10, 11, 1, 2, 3, 4, 5, 6, 7, 8};
    for (int k = 0; k < N; k++) {
        int i = by_name[k];
        in_jobs[k] = (struct ctl_jobin){keys[i], &jobs[i], 0, 1767225600000LL, 0, NULL, NULL, NULL, 0, NULL, 1000 + i, 0, NULL, 0, 0};
    }
    struct sched_config cfg;
    sched_config_default(&cfg);
    struct ctl_snapin in = {&cfg, 1767225601, nodes, 1, NULL, 0, NULL, 0, &team, 1, NULL, in_jobs, N, 0, 0};
    struct ctl_snap s = {0};
    char err[256];
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
    assert_int_equal(s.snap.njobs, N);
    for (int k = 0; k < N; k++)
        assert_int_equal(s.snap.jobs[k].enqueue_time, by_name[k]); /* rank = arrival order */
    struct sched *sc = sched_new();
    assert_non_null(sc);
    struct sched_result *res = NULL;
    assert_int_equal(sched_cycle(sc, &s.snap, &res, err, sizeof(err)), 0);
    char admitted[128] = "";
    for (int d = 0; d < res->n; d++)
        if (res->d[d].kind == SCHED_ADMIT) {
            size_t l = strlen(admitted);
            snprintf(admitted + l, sizeof(admitted) - l, "%s ", s.snap.jobs[res->d[d].job].id);
        }
    assert_string_equal(admitted, "b/job1 b/job2 b/job3 b/job4 ");
    sched_result_free(res);
    sched_free(sc);
    ctl_snap_release(&s);
    for (int i = 0; i < N; i++)
        api_gpujob_release(&jobs[i]);
    cJSON_Delete(na);
}

/* The arrival ranks follow (enqueue time, arrival, key) whatever order the
 * jobs are handed over in: in key order (the reconcile's, where the key's
 * place stands for the key) and shuffled (keys compared). Ties on the enqueue
 * time and on the arrival are broken by the key. */
static void test_arrival_ranks_order(void **state)
{
    (void)state;
    struct api_team team;
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t\"},"
                "\"spec\":{\"namespaces\":[\"b\"]}}",
                &team);
    enum { N = 41 };
    static struct api_gpujob jobs[N];
    struct ctl_jobin in_jobs[N];
    char keys[N][32];
    int64_t enq[N], arr[N];
    for (int i = 0; i < N; i++) {
        char js[512];
        snprintf(js, sizeof(js),
                 JOB_HEAD "{\"name\":\"job%03d\",\"namespace\":\"b\"},\"spec\":{\"gpu\":{\"count\":1},"
                          "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
                 i);
        decode_job(js, &jobs[i], &team, 1);
        snprintf(keys[i], sizeof(keys[i]), "b/job%03d", i); /* ascending with i */
        enq[i] = 1767225600000LL + 1000 * ((i * 7) % 4); /* four enqueue times */
        arr[i] = (i * 11) % 5;                           /* ties within them */
    }
    struct sched_config cfg;
    sched_config_default(&cfg);
    for (int shuffled = 0; shuffled < 2; shuffled++) {
        int order[N];
        for (int k = 0; k < N; k++)
            order[k] = shuffled ? (k * 17) % N : k; /* 17 and 41 coprime: a permutation */
        for (int k = 0; k < N; k++) {
            int i = order[k];
            in_jobs[k] = (struct ctl_jobin){keys[i], &jobs[i], 0, enq[i], 0, NULL, NULL, NULL, 0, NULL, arr[i], 0, NULL, 0, 0};
        }
        struct ctl_snapin in = {&cfg, 1767225609, NULL, 0, NULL, 0, NULL, 0, &team, 1, NULL, in_jobs, N, 0, 0};
        struct ctl_snap s = {0};
        char err[256];
        assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
        assert_int_equal(s.snap.njobs, N);
        for (int k = 0; k < N; k++) {
            int i = -1;
            for (int x = 0; x < N; x++)
                if (!strcmp(keys[x], s.snap.jobs[k].id))
                    i = x;
            assert_true(i >= 0);
            int rank = 0; /* jobs before i in (enqueue, arrival, key) order */
            for (int x = 0; x < N; x++)
                rank += enq[x] < enq[i] || (enq[x] == enq[i] && (arr[x] < arr[i] || (arr[x] == arr[i] && x < i)));
            assert_int_equal(s.snap.jobs[k].enqueue_time, rank);
        }
        ctl_snap_release(&s);
    }
    for (int i = 0; i < N; i++)
        api_gpujob_release(&jobs[i]);
}

/* ------------------------------------------------------------ status */

static const struct api_condition *cond(const struct api_gpujob_status *s, const char *type)
{
    for (int i = 0; i < s->nconditions; i++)
        if (!strcmp(s->conditions[i].type, type))
            return &s->conditions[i];
    return NULL;
}

/* A waiting job the core says could not fit an empty cluster: condition
 * Unschedulable=True with the core's figures; once it could, False (kept,
 * with a new transition time); never shown on a job that never had it. */
static void test_status_unschedulable(void **state)
{
    (void)state;
    struct api_team t;
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t1\"},"
                "\"spec\":{\"namespaces\":[\"ns1\"]}}",
                &t);
    struct api_gpujob job;
    decode_job(JOB_HEAD "{\"name\":\"big\",\"namespace\":\"ns1\"},\"spec\":{\"gpu\":{\"count\":16},"
               "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
               &job, &t, 1);
    const int64_t T0 = 1767225600000LL;
    const char *nodes[1];
    const char *why = "needs 16 GPUs; the largest eligible node has 8 GPUs and fits 0 of 1 replica; 2 of 2 nodes eligible";
    struct api_gpujob_status plain, u, u2, f, adm;
    struct ctl_jobview v = {STORE_QUEUED, "0/2 nodes fit 16 GPUs: 2 fewer than 16 free GPUs", 1, 0, "", "", 0, 0,
                            NULL, NULL, 0, 0, 0, 0, "Nodes", "", 0};
    ctl_status_compute(&job, NULL, &v, T0, nodes, 1, &plain);
    assert_null(cond(&plain, "Unschedulable"));
    v.unschedulable = why;
    ctl_status_compute(&job, &plain, &v, T0 + 1000, nodes, 1, &u);
    assert_non_null(cond(&u, "Unschedulable"));
    assert_string_equal(cond(&u, "Unschedulable")->status, "True");
    assert_string_equal(cond(&u, "Unschedulable")->reason, "ExceedsCluster");
    assert_string_equal(cond(&u, "Unschedulable")->message, why);
    assert_string_equal(cond(&u, "Unschedulable")->last_transition_time, "2026-01-01T00:00:01Z");
    assert_int_equal(u.state, API_STATE_QUEUED); /* it still waits */
    ctl_status_compute(&job, &u, &v, T0 + 5000, nodes, 1, &u2);
    assert_string_equal(cond(&u2, "Unschedulable")->last_transition_time, "2026-01-01T00:00:01Z");
    v.unschedulable = "";
    ctl_status_compute(&job, &u2, &v, T0 + 9000, nodes, 1, &f);
    assert_string_equal(cond(&f, "Unschedulable")->status, "False");
    assert_string_equal(cond(&f, "Unschedulable")->reason, "FitsCluster");
    assert_string_equal(cond(&f, "Unschedulable")->last_transition_time, "2026-01-01T00:00:09Z");
    /* admitted: a leftover text is not shown as True */
    v = (struct ctl_jobview){STORE_ADMITTED, "admitted", 0, 0, "", "", 0, T0, NULL, NULL, 1, 0, T0, 1, NULL, why, 0};
    ctl_status_compute(&job, &u2, &v, T0 + 9000, nodes, 1, &adm);
    assert_string_equal(cond(&adm, "Unschedulable")->status, "False");
    api_gpujob_release(&job);
}

static void test_status_compute(void **state)
{
    (void)state;
    struct api_team t;
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t1\"},"
                "\"spec\":{\"namespaces\":[\"ns1\"]}}",
                &t);
    struct api_gpujob job;
    decode_job(JOB_HEAD "{\"name\":\"w\",\"namespace\":\"ns1\"},\"spec\":{\"replicas\":2,\"priority\":5,"
               "\"gpu\":{\"count\":4},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
               &job, &t, 1);
    const int64_t T0 = 1767225600000LL; /* 2026-01-01T00:00:00Z */
    const char *nodes[4];
    struct api_gpujob_status q, a, r, r2, s;

    struct ctl_jobview v = {STORE_QUEUED, "0/3 nodes fit", 2, 0, "", "", 0, 0, NULL, NULL, 0, 0, 0, 0, "Nodes", NULL, 0};
    ctl_status_compute(&job, NULL, &v, T0, nodes, 4, &q);
    assert_string_equal(q.wait_reason, "Nodes");
    assert_int_equal(q.state, API_STATE_QUEUED);
    assert_int_equal(q.position, 2);
    assert_string_equal(q.message, "0/3 nodes fit");
    assert_string_equal(q.team, "t1");
    assert_int_equal(q.priority, 5);
    assert_int_equal(q.gpus, 8);
    assert_false(q.admission.present);
    assert_string_equal(cond(&q, "Admitted")->status, "False");
    assert_string_equal(cond(&q, "Admitted")->last_transition_time, "2026-01-01T00:00:00Z");
    assert_string_not_equal(cond(&q, "Admitted")->message, ""); /* never empty: the API server refuses it */
    assert_null(cond(&q, "Valid"));

    struct ctl_placement pl;
    ctl_placement_init(&pl);
    pl.attempt = 1;
    gq_strlcpy(pl.domain, "rack-1", sizeof(pl.domain));
    assert_int_equal(ctl_placement_add(&pl, 0, "n1", 0xF), 0);
    assert_int_equal(ctl_placement_add(&pl, 1, "n2", 0xF), 0);
    v = (struct ctl_jobview){STORE_ADMITTED, "admitted", 0, 0, "", "", 0, T0 + 1000, &pl, NULL, 1, 0, T0 - 500, 77, "Nodes", NULL, 0};
    ctl_status_compute(&job, &q, &v, T0 + 1000, nodes, 4, &a);
    assert_string_equal(a.wait_reason, ""); /* not waiting: encoded null */
    assert_int_equal(a.state, API_STATE_ADMITTED);
    assert_int_equal(a.position, 0);
    assert_true(a.admission.present);
    assert_string_equal(a.admission.domain, "rack-1");
    assert_string_equal(a.admission.time, "2026-01-01T00:00:01Z");
    assert_int_equal(a.admission.nnodes, 2);
    assert_string_equal(a.admission.nodes[1], "n2");
    assert_string_equal(a.admission.deadline, ""); /* no maxRunSeconds */
    assert_string_equal(cond(&a, "Admitted")->status, "True");
    assert_string_equal(cond(&a, "Admitted")->last_transition_time, "2026-01-01T00:00:01Z");
    assert_string_equal(cond(&a, "Running")->last_transition_time, "2026-01-01T00:00:00Z"); /* unchanged */
    assert_string_equal(a.start_time, "");
    /* what a lost store is rebuilt from */
    assert_int_equal(a.attempt, 1);
    assert_int_equal(a.retries, 0);
    assert_string_equal(a.enqueue_time, "2025-12-31T23:59:59Z");
    assert_int_equal(a.arrival, 77);
    assert_int_equal(a.observed_generation, job.meta.generation);

    v.state = STORE_RUNNING;
    v.run_limit_s = 3600; /* the deadline: admission + the limit in force */
    ctl_status_compute(&job, &a, &v, T0 + 5000, nodes, 4, &r);
    assert_string_equal(r.admission.deadline, "2026-01-01T01:00:01Z");
    v.run_limit_s = 0;
    ctl_status_compute(&job, &a, &v, T0 + 5000, nodes, 4, &r);
    assert_string_equal(r.start_time, "2026-01-01T00:00:05Z");
    ctl_status_compute(&job, &r, &v, T0 + 9000, nodes, 4, &r2); /* same again: identical */
    assert_string_equal(r2.start_time, "2026-01-01T00:00:05Z");
    assert_string_equal(cond(&r2, "Running")->last_transition_time, "2026-01-01T00:00:05Z");
    cJSON *e1 = api_gpujob_status_encode(&r), *e2 = api_gpujob_status_encode(&r2);
    char *s1 = cJSON_PrintUnformatted(e1), *s2 = cJSON_PrintUnformatted(e2);
    assert_string_equal(s1, s2); /* so no patch is sent for an unchanged status */
    free(s1);
    free(s2);
    cJSON_Delete(e1);
    cJSON_Delete(e2);

    v.state = STORE_SUCCEEDED;
    ctl_status_compute(&job, &r2, &v, T0 + 20000, nodes, 4, &s);
    assert_int_equal(s.state, API_STATE_SUCCEEDED);
    assert_string_equal(s.start_time, "2026-01-01T00:00:05Z");
    assert_string_equal(s.completion_time, "2026-01-01T00:00:20Z");
    assert_false(s.admission.present);
    assert_string_equal(cond(&s, "Succeeded")->status, "True");

    v = (struct ctl_jobview){STORE_PREEMPTED, "waiting", 1, 2, "ns/big", "lower priority", T0 + 3000, 0, NULL, NULL, 1, 0, 0, 0,
                             "Waiting", NULL, 0};
    ctl_status_compute(&job, &r2, &v, T0 + 4000, nodes, 4, &s);
    assert_int_equal(s.state, API_STATE_PREEMPTED);
    assert_int_equal(s.preemptions, 2);
    assert_true(s.last_preemption.present);
    assert_string_equal(s.last_preemption.by, "ns/big");
    assert_string_equal(s.last_preemption.reason, "lower priority");
    assert_string_equal(s.last_preemption.time, "2026-01-01T00:00:03Z");
    assert_string_equal(s.start_time, ""); /* requeued: no start time */
    assert_string_equal(cond(&s, "Preempted")->message, "lower priority");

    v = (struct ctl_jobview){STORE_QUEUED, "team x does not exist", 0, 0, "", "", 0, 0, NULL, "UnknownTeam", 0, 0, 0, 0,
                             "Invalid", NULL, 0};
    ctl_status_compute(&job, NULL, &v, T0, nodes, 4, &s);
    assert_string_equal(s.wait_reason, "Invalid");
    assert_string_equal(cond(&s, "Valid")->status, "False");
    assert_string_equal(cond(&s, "Valid")->reason, "UnknownTeam");
    assert_string_equal(cond(&s, "Valid")->message, "team x does not exist");

    ctl_placement_release(&pl);
    api_gpujob_release(&job);
}

/* ------------------------------------------------------------ waiting jobs */

static void test_wait_classify(void **state)
{
    (void)state;
    static const struct {
        const char *msg;
        int cls;
    } cases[] = {
        {"0/12 nodes fit 4 GPUs: 5 fewer than 4 free GPUs, 7 wrong GPU type (need H100)", CTL_WAIT_NODES},
        {"0/2 nodes fit: 2 fewer than 8 free GPUs", CTL_WAIT_NODES},
        {"1/2 nodes fit 4 GPUs: 1 reserved for a higher job", CTL_WAIT_NODES}, /* not its own reservation */
        {"0/2 nodes fit 4 GPUs: 2 fewer than 4 free GPUs; reserves node n1", CTL_WAIT_RESERVING},
        {"0/2 nodes fit 4 GPUs in one rack: 2 fewer than 4 free GPUs; reserves rack r2", CTL_WAIT_RESERVING},
        {"0/1 nodes fit 5 GPUs: 1 fewer than 5 free GPUs; team guest quota 0/0 GPUs used, needs 5", CTL_WAIT_QUOTA},
        {"1/2 nodes fit 4 GPUs: 1 reserved for a higher job; team g quota 6/8 GPUs used, needs 4", CTL_WAIT_QUOTA},
        {"team research has no quota for H100", CTL_WAIT_QUOTA},
        {"waiting for 2 preempted jobs to stop", CTL_WAIT_PREEMPTING},
        {"0/1 nodes fit 4 GPUs: 1 fewer than 4 free GPUs; the jobs it would preempt are protected by the "
         "minimum runtime (300s) until 2026-01-01T00:05:00Z",
         CTL_WAIT_MIN_RUNTIME},
        {"0/1 nodes fit 8 GPUs: 1 fewer than 8 free GPUs; team a quota 8/8 GPUs used, needs 8; the jobs it would "
         "preempt are protected by the minimum runtime (300s) until 2026-01-01T00:05:00Z; reserves node n0",
         CTL_WAIT_MIN_RUNTIME},
        /* a quota part mentioning claims of preemptors is still quota */
        {"team a quota 0/0 A100 used, 8 claimed by jobs waiting for preempted jobs, needs 8", CTL_WAIT_QUOTA},
        {"2 of 4 replicas admitted", CTL_WAIT_PARTIAL},
        {"waiting", CTL_WAIT_OTHER},
        {"", CTL_WAIT_NONE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = ctl_wait_classify(cases[i].msg, NULL);
        if (got != cases[i].cls)
            fail_msg("\"%s\": class %d, want %d", cases[i].msg, got, cases[i].cls);
    }
    assert_int_equal(ctl_wait_classify(NULL, NULL), CTL_WAIT_NONE);
    assert_int_equal(ctl_wait_classify("team x does not exist", "UnknownTeam"), CTL_WAIT_INVALID);
    assert_string_equal(ctl_wait_class_name(CTL_WAIT_QUOTA), "Quota");
    assert_string_equal(ctl_wait_class_name(CTL_WAIT_NONE), "");
    for (int c = 1; c < CTL_WAIT_NCLASSES; c++)
        assert_string_not_equal(ctl_wait_class_name(c), "");
    assert_int_equal(ctl_position_shown(3, 10), 3);
    assert_int_equal(ctl_position_shown(10, 10), 10);
    assert_int_equal(ctl_position_shown(11, 10), 0);
    assert_int_equal(ctl_position_shown(1, 0), 0);
    assert_int_equal(ctl_position_shown(0, 10), 0);
}

/* The encoded status of a waiting job from what was published (as the
 * controller's job_status builds it): equal text = no PATCH. */
static char *waiting_status(const struct api_gpujob *job, const struct ctl_waitpub *p, int state)
{
    const char *nodes[1];
    struct api_gpujob_status st;
    struct ctl_jobview v = {state, p->msg ? p->msg : "", p->position, 0, "", "", 0, 0, NULL, NULL, 0, 0, 0, 0,
                            ctl_wait_class_name(p->cls), NULL, 0};
    ctl_status_compute(job, NULL, &v, 1767225600000LL, nodes, 1, &st);
    cJSON *e = api_gpujob_status_encode(&st);
    assert_non_null(e);
    char *s = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    assert_non_null(s);
    return s;
}

/* Job ns1/w of one replica of gpus GPUs, of Team t1 (decoded into job). */
static void waiting_job(struct api_gpujob *job, int gpus)
{
    struct api_team t;
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t1\"},"
                "\"spec\":{\"namespaces\":[\"ns1\"]}}",
                &t);
    char json[512];
    snprintf(json, sizeof(json),
             JOB_HEAD "{\"name\":\"w\",\"namespace\":\"ns1\"},\"spec\":{\"replicas\":1,"
                      "\"gpu\":{\"count\":%d},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
             gpus);
    decode_job(json, job, &t, 1);
}

static void test_wait_publish(void **state)
{
    (void)state;
    struct api_gpujob job;
    waiting_job(&job, 4);
    const int64_t IV = 60000, T = 1000000;
    struct ctl_waitpub p;
    memset(&p, 0, sizeof(p));

    /* first sight: published at once, one Waiting Event */
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs", NULL,
                                      T, IV, 0),
                     1);
    assert_int_equal(p.cls, CTL_WAIT_NODES);
    assert_string_equal(p.msg, "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs");
    char *s0 = waiting_status(&job, &p, STORE_QUEUED);
    assert_non_null(strstr(s0, "\"waitReason\":\"Nodes\""));
    assert_non_null(strstr(s0, "\"position\":null")); /* nothing published yet */

    /* the queue moves: the figures change, the class does not; the exact
     * position changes every time but is not what the status shows */
    for (int k = 1; k <= 20; k++) {
        char m[128];
        snprintf(m, sizeof(m), "0/3 nodes fit 4 GPUs: %d fewer than 4 free GPUs", 3 - k % 3);
        assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, m, NULL, T + k * 1000, IV, 0), 0); /* no Event */
        char *sk = waiting_status(&job, &p, STORE_QUEUED);
        assert_string_equal(sk, s0); /* no status write */
        free(sk);
    }
    /* the detailed text is refreshed once the interval has passed */
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, "0/3 nodes fit 4 GPUs: 1 fewer than 4 free GPUs", NULL,
                                      T + IV, IV, 0),
                     0);
    assert_string_equal(p.msg, "0/3 nodes fit 4 GPUs: 1 fewer than 4 free GPUs");
    assert_int_equal(p.msg_ms, T + IV);
    char *s1 = waiting_status(&job, &p, STORE_QUEUED);
    assert_string_not_equal(s1, s0);
    /* and not again before another interval */
    ctl_wait_publish(&p, STORE_QUEUED, 1, "0/3 nodes fit 4 GPUs: 2 fewer than 4 free GPUs", NULL, T + IV + 5000, IV, 0);
    assert_string_equal(p.msg, "0/3 nodes fit 4 GPUs: 1 fewer than 4 free GPUs");

    /* the class changes: published at once, a new Event */
    const char *q = "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs; team t1 quota 8/8 GPUs used, needs 4";
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, q, NULL, T + IV + 6000, IV, 0), 1);
    assert_int_equal(p.cls, CTL_WAIT_QUOTA);
    assert_string_equal(p.msg, q);
    char *s2 = waiting_status(&job, &p, STORE_QUEUED);
    assert_non_null(strstr(s2, "\"waitReason\":\"Quota\""));
    /* back to a class already evented in this wait: status follows, no second Event */
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs", NULL,
                                      T + IV + 7000, IV, 0),
                     0);
    assert_int_equal(p.cls, CTL_WAIT_NODES);
    assert_string_equal(p.msg, "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs");

    /* a published position stays until the controller publishes again */
    p.position = ctl_position_shown(2, 10);
    char *s3 = waiting_status(&job, &p, STORE_QUEUED);
    assert_non_null(strstr(s3, "\"position\":2"));
    ctl_wait_publish(&p, STORE_QUEUED, 1, "0/3 nodes fit 4 GPUs: 2 fewer than 4 free GPUs", NULL, T + IV + 8000, IV, 0);
    assert_int_equal(p.position, 2);

    /* the state changes (admitted): cleared; the next wait starts afresh */
    assert_int_equal(ctl_wait_publish(&p, STORE_ADMITTED, 0, "admitted", NULL, T + IV + 9000, IV, 0), 0);
    assert_int_equal(p.position, 0);
    assert_int_equal(p.cls, CTL_WAIT_NONE);
    assert_null(p.msg); /* "" is no text */
    assert_int_equal(ctl_wait_publish(&p, STORE_PREEMPTED, 1, "waiting for 1 preempted job to stop", NULL,
                                      T + IV + 10000, IV, 0),
                     1);
    assert_int_equal(ctl_wait_publish(&p, STORE_PREEMPTED, 1, "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs", NULL,
                                      T + IV + 11000, IV, 0),
                     1); /* Nodes again, but in a new wait */
    /* Queued -> Preempted (a new waiting state) publishes at once */
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, "0/3 nodes fit 4 GPUs: 1 fewer than 4 free GPUs", NULL,
                                      T + IV + 12000, IV, 0),
                     1);
    assert_string_equal(p.msg, "0/3 nodes fit 4 GPUs: 1 fewer than 4 free GPUs");
    /* an invalid job: its own class, published at once */
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, "team x does not exist", "UnknownTeam", T + IV + 13000, IV, 0),
                     1);
    assert_int_equal(p.cls, CTL_WAIT_INVALID);
    assert_string_equal(p.msg, "team x does not exist");

    ctl_waitpub_release(&p);
    free(s0);
    free(s1);
    free(s2);
    free(s3);
    api_gpujob_release(&job);
}

/* A wait reason that flips between capacity classes as jobs come and go
 * (Nodes while the Team has quota left, Quota once admissions use it up) is
 * not rewritten each time: a class change is published once the new class
 * has been given for the settle time without a break; a problem, a
 * preemption under way and the way back from a problem at once. */
static void test_wait_publish_reason_settle(void **state)
{
    (void)state;
    struct api_gpujob job;
    waiting_job(&job, 5);
    const int64_t IV = 60000, SETTLE = 10000, T = 1000000;
    const char *nodes = "0/63 nodes fit 5 GPUs: 63 fewer than 5 free GPUs";
    char quota[160];
    struct ctl_waitpub p;
    memset(&p, 0, sizeof(p));
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, nodes, NULL, T, IV, SETTLE), 1);
    assert_int_equal(p.cls, CTL_WAIT_NODES);
    char *s0 = waiting_status(&job, &p, STORE_QUEUED);

    /* a second a flip, for two minutes: nothing published, no Event */
    for (int k = 1; k <= 120; k++) {
        snprintf(quota, sizeof(quota), "%s; team t1 quota %d/1008 GPUs used, needs 5", nodes, 1004 + k % 5);
        assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, k % 2 ? quota : nodes, NULL, T + k * 1000, IV, SETTLE),
                         0);
        assert_int_equal(p.cls, CTL_WAIT_NODES);
        char *sk = waiting_status(&job, &p, STORE_QUEUED);
        assert_string_equal(sk, s0);
        free(sk);
    }
    /* Quota for good (an admin cut the Team's quota): published once it has
     * held for the settle time, with its Event */
    const int64_t q0 = T + 121000;
    snprintf(quota, sizeof(quota), "%s; team t1 quota 1008/1008 GPUs used, needs 5", nodes);
    for (int64_t now = q0; now < q0 + SETTLE; now += 2500) {
        assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, quota, NULL, now, IV, SETTLE), 0);
        assert_int_equal(p.cls, CTL_WAIT_NODES);
        assert_int_equal(p.in_cls, CTL_WAIT_QUOTA);
        assert_int_equal(p.in_cls_ms, q0); /* what a due time for the change counts from */
    }
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, quota, NULL, q0 + SETTLE, IV, SETTLE), 1);
    assert_int_equal(p.cls, CTL_WAIT_QUOTA);
    assert_string_equal(p.msg, quota);
    char *s1 = waiting_status(&job, &p, STORE_QUEUED);
    assert_non_null(strstr(s1, "\"waitReason\":\"Quota\""));

    /* a problem is published at once, and so is the way back from it */
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, "team t1 does not exist", "UnknownTeam",
                                      q0 + SETTLE + 1000, IV, SETTLE),
                     1);
    assert_int_equal(p.cls, CTL_WAIT_INVALID);
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, nodes, NULL, q0 + SETTLE + 2000, IV, SETTLE), 0);
    assert_int_equal(p.cls, CTL_WAIT_NODES);
    /* a preemption under way: at once (a decision, not the queue moving) */
    assert_int_equal(ctl_wait_publish(&p, STORE_QUEUED, 1, "waiting for 2 preempted jobs to stop", NULL,
                                      q0 + SETTLE + 3000, IV, SETTLE),
                     1);
    assert_int_equal(p.cls, CTL_WAIT_PREEMPTING);
    /* a new wait (state changed) starts afresh: its first class at once */
    assert_int_equal(ctl_wait_publish(&p, STORE_PREEMPTED, 1, quota, NULL, q0 + SETTLE + 4000, IV, SETTLE), 1);
    assert_int_equal(p.cls, CTL_WAIT_QUOTA);
    assert_true(ctl_wait_class_at_once(CTL_WAIT_NONE, CTL_WAIT_QUOTA));
    assert_false(ctl_wait_class_at_once(CTL_WAIT_QUOTA, CTL_WAIT_RESERVING));
    assert_false(ctl_wait_class_at_once(CTL_WAIT_RESERVING, CTL_WAIT_MIN_RUNTIME));
    assert_true(ctl_wait_class_at_once(CTL_WAIT_NODES, CTL_WAIT_PARTIAL));
    assert_true(ctl_wait_class_at_once(CTL_WAIT_PREEMPTING, CTL_WAIT_QUOTA));
    assert_false(ctl_wait_class_at_once(CTL_WAIT_OTHER, CTL_WAIT_NODES));

    ctl_waitpub_release(&p);
    free(s0);
    free(s1);
    api_gpujob_release(&job);
}

/* A restarted controller adopts what a waiting job's status already shows:
 * the status it computes is byte-identical to the object's (no PATCH), and
 * no second Event is sent for the same wait. */
/* ctl_wait_publish keeps the class of the explanation it was last given:
 * it must follow the text (even in the same buffer) and the invalid reason
 * ("" is one, NULL none), never a stale class. */
static void test_wait_publish_class_kept(void **state)
{
    (void)state;
    struct ctl_waitpub p;
    memset(&p, 0, sizeof(p));
    char buf[160];
    const int64_t IV = 60000, T = 1000000;
    snprintf(buf, sizeof(buf), "team t1 quota 8/8 GPUs used, needs 4");
    for (int k = 0; k < 3; k++) {
        ctl_wait_publish(&p, STORE_QUEUED, 1, buf, NULL, T + k, IV, 0);
        assert_int_equal(p.cls, CTL_WAIT_QUOTA);
    }
    snprintf(buf, sizeof(buf), "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs"); /* same buffer, new text */
    ctl_wait_publish(&p, STORE_QUEUED, 1, buf, NULL, T + 10, IV, 0);
    assert_int_equal(p.cls, CTL_WAIT_NODES);
    ctl_wait_publish(&p, STORE_QUEUED, 1, buf, "", T + 11, IV, 0);
    assert_int_equal(p.cls, CTL_WAIT_INVALID);
    ctl_wait_publish(&p, STORE_QUEUED, 1, buf, NULL, T + 12, IV, 0);
    assert_int_equal(p.cls, CTL_WAIT_NODES);
    ctl_wait_publish(&p, STORE_QUEUED, 1, "", NULL, T + 13, IV, 0);
    assert_int_equal(p.cls, CTL_WAIT_NONE);
    ctl_wait_publish(&p, STORE_QUEUED, 1, NULL, NULL, T + 14, IV, 0);
    assert_int_equal(p.cls, CTL_WAIT_NONE);
    ctl_wait_publish(&p, STORE_QUEUED, 1, "waiting for 2 preempted jobs to stop", NULL, T + 15, IV, 0);
    assert_int_equal(p.cls, CTL_WAIT_PREEMPTING);
    /* every class as ctl_wait_classify gives it, through the kept class */
    static const char *const msgs[] = {"a; reserves rack r1 for it", "2/4 replicas admitted", "x; y 0/9 nodes fit",
                                       "team t quota 1/1 GPUs used", "something else", "reserves n1"};
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
            ctl_wait_publish(&p, STORE_QUEUED, 1, msgs[i], NULL, T + 100 + (int64_t)i, IV, 0);
            assert_int_equal(p.cls, ctl_wait_classify(msgs[i], NULL));
        }
    ctl_waitpub_release(&p);
}

static void test_wait_adopt(void **state)
{
    (void)state;
    struct api_team t;
    decode_team("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"t1\"},"
                "\"spec\":{\"namespaces\":[\"ns1\"]}}",
                &t);
    struct api_gpujob job;
    decode_job(JOB_HEAD "{\"name\":\"w\",\"namespace\":\"ns1\"},\"spec\":{\"replicas\":1,"
               "\"gpu\":{\"count\":4},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
               &job, &t, 1);
    const int64_t T = 1767225600000LL;
    const char *nodes[1];
    /* what the previous run wrote */
    struct ctl_waitpub p;
    memset(&p, 0, sizeof(p));
    ctl_wait_publish(&p, STORE_QUEUED, 1, "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs", NULL, T, 60000, 0);
    p.position = 4;
    struct ctl_jobview v = {STORE_QUEUED, p.msg, p.position, 0, "", "", 0, 0, NULL, NULL, 1, 0, T - 5000, 9,
                            ctl_wait_class_name(p.cls), NULL, 0};
    struct api_gpujob_status written, back, again;
    ctl_status_compute(&job, NULL, &v, T, nodes, 1, &written);
    cJSON *w = api_gpujob_status_encode(&written);
    char *wtxt = cJSON_PrintUnformatted(w);
    struct api_errors e;
    api_errors_init(&e);
    assert_int_equal(api_gpujob_status_decode(w, &back, &e), 0);

    /* the new run: the queue moved meanwhile (other figures), same class */
    struct ctl_waitpub q;
    memset(&q, 0, sizeof(q));
    const char *now_msg = "0/3 nodes fit 4 GPUs: 1 fewer than 4 free GPUs";
    assert_int_equal(ctl_wait_adopt(&q, &back, STORE_QUEUED, ctl_wait_classify(now_msg, NULL), T + 30000), 1);
    assert_int_equal(ctl_wait_publish(&q, STORE_QUEUED, 1, now_msg, NULL, T + 30000, 60000, 0), 0); /* no Event */
    assert_string_equal(q.msg, "0/3 nodes fit 4 GPUs: 3 fewer than 4 free GPUs");
    assert_int_equal(q.position, 4);
    v.message = q.msg;
    v.position = q.position;
    ctl_status_compute(&job, &back, &v, T + 30000, nodes, 1, &again);
    cJSON *a = api_gpujob_status_encode(&again), *bb = api_gpujob_status_encode(&back);
    char *atxt = cJSON_PrintUnformatted(a), *btxt = cJSON_PrintUnformatted(bb);
    assert_string_equal(atxt, wtxt); /* the same status ... */
    assert_string_equal(btxt, wtxt); /* ... as the object's, re-encoded: no PATCH */

    /* another class, another state or nothing shown: not adopted */
    ctl_waitpub_release(&q);
    memset(&q, 0, sizeof(q));
    assert_int_equal(ctl_wait_adopt(&q, &back, STORE_QUEUED, CTL_WAIT_QUOTA, T), 0);
    assert_int_equal(ctl_wait_adopt(&q, &back, STORE_PREEMPTED, CTL_WAIT_NODES, T), 0);
    assert_int_equal(ctl_wait_adopt(&q, &back, STORE_ADMITTED, CTL_WAIT_NODES, T), 0);
    assert_false(q.set);
    back.wait_reason[0] = 0;
    assert_int_equal(ctl_wait_adopt(&q, &back, STORE_QUEUED, CTL_WAIT_NODES, T), 0);

    ctl_waitpub_release(&p);
    free(wtxt);
    free(atxt);
    free(btxt);
    cJSON_Delete(w);
    cJSON_Delete(a);
    cJSON_Delete(bb);
    api_gpujob_release(&job);
}

/* The GPUJob pruner keeps the status whole as one string: a decode of the
 * pruned object equals one of the object as the API server sent it, state
 * and attempt stay readable without decoding, and the cached tree is smaller. */
static int tree_nodes(const cJSON *o)
{
    int n = 1;
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
        n += tree_nodes(c);
    return n;
}

/* The status of whole and of pruned (ctl_prune_gpujob) decode alike, without
 * errors; returns how many conditions. */
static int assert_status_alike(const cJSON *whole, const cJSON *pruned)
{
    struct api_gpujob_status sa, sp;
    struct api_errors e;
    api_errors_init(&e);
    assert_int_equal(ctl_job_status_decode(whole, &sa, &e), 0);
    assert_int_equal(ctl_job_status_decode(pruned, &sp, &e), 0);
    assert_int_equal(e.n, 0);
    cJSON *ea = api_gpujob_status_encode(&sa), *ep = api_gpujob_status_encode(&sp);
    char *ta = cJSON_PrintUnformatted(ea), *tp = cJSON_PrintUnformatted(ep);
    assert_non_null(ta);
    assert_non_null(tp);
    assert_string_equal(tp, ta);
    free(ta);
    free(tp);
    cJSON_Delete(ea);
    cJSON_Delete(ep);
    return sp.nconditions;
}

static void test_prune_gpujob(void **state)
{
    (void)state;
    static const char job[] =
        "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"metadata\":{\"name\":\"j\",\"namespace\":\"ns\","
        "\"uid\":\"u1\",\"generation\":2,\"managedFields\":[{\"manager\":\"kubectl\"}]},"
        "\"spec\":{\"class\":\"Batch\",\"gpu\":{\"count\":1},\"template\":{\"spec\":{\"containers\":[{\"name\":\"m\"}]}}},"
        "\"status\":{\"state\":\"Running\",\"attempt\":3,\"team\":\"t\",\"gpus\":1,\"message\":\"running\","
        "\"observedGeneration\":2,\"enqueueTime\":\"2026-12-01T00:00:00Z\",\"conditions\":["
        "{\"type\":\"Admitted\",\"status\":\"True\",\"reason\":\"Admitted\",\"message\":\"on n1\","
        "\"lastTransitionTime\":\"2026-12-01T00:00:01Z\"},"
        "{\"type\":\"Queued\",\"status\":\"False\",\"reason\":\"Admitted\",\"message\":\"x\","
        "\"lastTransitionTime\":\"2026-12-01T00:00:01Z\"}]}}";
    cJSON *a = cJSON_Parse(job), *p = cJSON_Parse(job);
    ctl_prune_gpujob(p);
    assert_string_equal(ctl_obj_str(p, "status", "state"), "Running");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "status"), "attempt")->valueint, 3);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "status"), "conditions"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "managedFields"));
    /* the spec is one string, read through ctl_job_spec / ctl_job_expand */
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "template"));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), CTL_SPEC_RAW)));
    assert_true(tree_nodes(p) < tree_nodes(a) - 20); /* 21 status nodes become 4, 8 spec nodes 2 */
    cJSON *tmp = NULL;
    const cJSON *spa = ctl_job_spec(a, &tmp);
    assert_null(tmp);
    assert_ptr_equal(spa, cJSON_GetObjectItem(a, "spec"));
    const cJSON *spp = ctl_job_spec(p, &tmp);
    assert_non_null(tmp);
    assert_ptr_equal(spp, tmp);
    char *sa_txt = cJSON_PrintUnformatted(spa), *sp_txt = cJSON_PrintUnformatted(spp);
    assert_string_equal(sp_txt, sa_txt);
    free(sa_txt);
    free(sp_txt);
    cJSON_Delete(tmp);
    int enomem = 1;
    assert_null(ctl_job_expand(a, &enomem)); /* not pruned: decoded as it is */
    assert_int_equal(enomem, 0);
    cJSON *whole = ctl_job_expand(p, &enomem);
    assert_non_null(whole);
    struct api_gpujob ja, jp;
    struct api_errors ea_err, ep_err;
    api_gpujob_init(&ja);
    api_gpujob_init(&jp);
    api_errors_init(&ea_err);
    api_errors_init(&ep_err);
    assert_int_equal(api_gpujob_decode(a, &ja, &ea_err), api_gpujob_decode(whole, &jp, &ep_err));
    assert_int_equal(ep_err.n, ea_err.n);
    assert_string_equal(jp.meta.uid, "u1");
    assert_int_equal(jp.meta.generation, 2);
    assert_int_equal(jp.spec.class, ja.spec.class);
    assert_int_equal(jp.spec.gpu.count, 1);
    assert_non_null(jp.template);
    api_gpujob_release(&ja);
    api_gpujob_release(&jp);
    cJSON_Delete(whole);
    assert_string_equal(ctl_obj_str(p, "metadata", "uid"), "u1"); /* the references freed nothing */
    struct api_gpujob_status sp;
    struct api_errors e;
    assert_int_equal(assert_status_alike(a, p), 2);
    /* pruning again changes nothing */
    char *once = cJSON_PrintUnformatted(p);
    ctl_prune_gpujob(p);
    char *twice = cJSON_PrintUnformatted(p);
    assert_string_equal(once, twice);
    /* a status that is not an object, or none: left alone; a raw text that
     * does not parse decodes as no status with an error */
    cJSON *q = cJSON_Parse("{\"metadata\":{\"name\":\"k\"},\"status\":\"odd\"}");
    ctl_prune_gpujob(q);
    assert_string_equal(cJSON_GetObjectItem(q, "status")->valuestring, "odd");
    cJSON *none = cJSON_Parse("{\"metadata\":{\"name\":\"k\"}}");
    ctl_prune_gpujob(none);
    assert_null(cJSON_GetObjectItem(none, "status"));
    cJSON *bad = cJSON_Parse("{\"status\":{\"" CTL_STATUS_RAW "\":\"{nope\",\"state\":\"Queued\"}}");
    api_errors_init(&e);
    assert_int_not_equal(ctl_job_status_decode(bad, &sp, &e), 0);
    assert_true(e.n > 0);
    assert_int_equal(sp.nconditions, 0);
    /* a raw spec that does not parse: the decoder says spec is not an object */
    cJSON *badspec = cJSON_Parse("{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\","
                                 "\"metadata\":{\"name\":\"k\",\"namespace\":\"n\"},"
                                 "\"spec\":{\"" CTL_SPEC_RAW "\":\"{nope\"}}");
    cJSON *bw = ctl_job_expand(badspec, &enomem);
    assert_non_null(bw);
    assert_null(ctl_job_spec(badspec, &tmp));
    assert_null(tmp);
    struct api_gpujob jb;
    api_gpujob_init(&jb);
    api_errors_init(&e);
    api_gpujob_decode(bw, &jb, &e);
    assert_true(e.n > 0);
    assert_string_equal(e.e[0].path, "spec");
    api_gpujob_release(&jb);
    cJSON_Delete(bw);
    cJSON_Delete(badspec);
    free(once);
    free(twice);
    cJSON_Delete(a);
    cJSON_Delete(p);
    cJSON_Delete(q);
    cJSON_Delete(none);
    cJSON_Delete(bad);
}

/* A cached job's status is kept deflated (the escaped stream after a 0x02
 * byte, a C string): far smaller than its JSON, and it decodes to exactly
 * what the whole object decodes to, whatever bytes the stream holds (0 and 1
 * escaped). A damaged text decodes as no status with an error, never a
 * crash. */
static void test_prune_gpujob_status_deflated(void **state)
{
    (void)state;
    int escaped = 0;
    unsigned seed = 12345;
    for (int i = 0; i < 300; i++) {
        char msg[256];
        size_t ml = (size_t)(i % 200) + 1;
        for (size_t k = 0; k < ml; k++) {
            seed = seed * 1103515245u + 12345u;
            msg[k] = (char)(' ' + (seed >> 16) % 94);
            if (msg[k] == '"' || msg[k] == '\\')
                msg[k] = 'x';
        }
        msg[ml] = '\0';
        char job[2048];
        snprintf(job, sizeof(job),
                 "{\"metadata\":{\"name\":\"j%d\",\"namespace\":\"ns\"},\"status\":{\"state\":\"Queued\","
                 "\"attempt\":%d,\"team\":\"t\",\"gpus\":%d,\"message\":\"%s\",\"position\":%d,"
                 "\"waitReason\":\"Quota\",\"conditions\":[{\"type\":\"Queued\",\"status\":\"True\","
                 "\"reason\":\"Quota\",\"message\":\"%s\",\"lastTransitionTime\":\"2026-12-0%dT00:00:%02dZ\"}]}}",
                 i, i % 7, i, msg, i * 37, msg, 1 + i % 9, i % 60);
        cJSON *a = cJSON_Parse(job), *p = cJSON_Parse(job);
        assert_non_null(a);
        ctl_prune_gpujob(p);
        const cJSON *raw = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "status"), CTL_STATUS_RAW);
        assert_true(cJSON_IsString(raw));
        char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(a, "status"));
        if (raw->valuestring[0] == '\x02') {
            assert_true(strlen(raw->valuestring) < strlen(json) / 2);
            escaped += strchr(raw->valuestring, '\x01') != NULL;
        } else {
            assert_string_equal(raw->valuestring, json); /* not worth deflating: kept as JSON */
        }
        struct api_gpujob_status sp;
        struct api_errors e;
        assert_int_equal(assert_status_alike(a, p), 1);
        /* the same status gives the same text (a status-only event compares them) */
        cJSON *p2 = cJSON_Parse(job);
        ctl_prune_gpujob(p2);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(p2, "status"), CTL_STATUS_RAW)->valuestring,
                            raw->valuestring);
        if (i == 150) {
            /* damaged: cut short, an escape byte that is none, a stray byte */
            size_t rl = strlen(raw->valuestring);
            assert_true(rl > 8);
            char cut[1024], badesc[] = "\x02\x01\x07" "abc";
            gq_strlcpy(cut, raw->valuestring, rl / 2 + 1);
            const char *bad[] = {cut, badesc, "\x02", "\x02\x01"};
            for (size_t b = 0; b < GQ_ARRAY_LEN(bad); b++) {
                cJSON *d = cJSON_CreateObject(), *dst = cJSON_AddObjectToObject(d, "status");
                cJSON_AddStringToObject(dst, CTL_STATUS_RAW, bad[b]);
                api_errors_init(&e);
                assert_int_not_equal(ctl_job_status_decode(d, &sp, &e), 0);
                assert_true(e.n > 0);
                assert_int_equal(sp.nconditions, 0);
                cJSON_Delete(d);
            }
        }
        free(json);
        cJSON_Delete(a);
        cJSON_Delete(p);
        cJSON_Delete(p2);
    }
    assert_true(escaped > 0); /* the escapes were exercised */
}

/* ------------------------------------------------------------ config */

static void test_config(void **state)
{
    (void)state;
    double d;
    assert_int_equal(gq_parse_duration("40s", &d), 0);
    assert_true(d == 40);
    assert_int_equal(gq_parse_duration("1h30m", &d), 0);
    assert_true(d == 5400);
    assert_int_equal(gq_parse_duration("250ms", &d), 0);
    assert_true(d > 0.2499 && d < 0.2501);
    assert_int_equal(gq_parse_duration("2", &d), 0);
    assert_true(d == 2);
    assert_int_equal(gq_parse_duration("", &d), GQ_EINVAL);
    assert_int_equal(gq_parse_duration("5x", &d), GQ_EINVAL);
    assert_int_equal(gq_parse_duration("-1s", &d), GQ_EINVAL);
    assert_int_equal(gq_parse_duration("1m30", &d), GQ_EINVAL);

    struct ctl_config c;
    char err[256];
    ctl_config_default(&c);
    assert_int_equal(c.levels.nlevels, 4);
    assert_true(c.leader_elect);
    assert_int_equal(c.max_retries, 3);
    assert_true(c.node_lost_grace_s == 40);
    assert_int_equal(ctl_config_set(&c, "level", "dc=example.com/dc", err, sizeof(err)), 0);
    assert_int_equal(ctl_config_set(&c, "level", "host=kubernetes.io/hostname", err, sizeof(err)), 0);
    assert_int_equal(c.levels.nlevels, 2); /* the first --level replaced the defaults */
    assert_string_equal(c.levels.levels[0], "dc");
    assert_string_equal(c.levels.labels[1], "kubernetes.io/hostname");
    assert_int_equal(ctl_config_set(&c, "level", "novalue", err, sizeof(err)), GQ_EINVAL);
    assert_int_equal(ctl_config_set(&c, "min-runtime", "10m", err, sizeof(err)), 0);
    assert_int_equal(c.min_runtime_s, 600);
    assert_int_equal(ctl_config_set(&c, "leader-elect", "false", err, sizeof(err)), 0);
    assert_false(c.leader_elect);
    assert_int_equal(ctl_config_set(&c, "leader-elect", "maybe", err, sizeof(err)), GQ_EINVAL);
    assert_int_equal(ctl_config_set(&c, "max-retries", "-2", err, sizeof(err)), GQ_EINVAL);
    assert_int_equal(ctl_config_set(&c, "log-level", "loud", err, sizeof(err)), GQ_EINVAL);
    assert_int_equal(c.position_head, 10);
    assert_true(c.position_interval_s == 5);
    assert_true(c.wait_message_interval_s == 60);
    assert_true(c.wait_reason_settle_s == 10);
    assert_int_equal(ctl_config_set(&c, "position-head", "3", err, sizeof(err)), 0);
    assert_int_equal(c.position_head, 3);
    assert_int_equal(ctl_config_set(&c, "position-head", "100000", err, sizeof(err)), GQ_EINVAL);
    assert_non_null(strstr(err, "position-head"));
    assert_int_equal(ctl_config_set(&c, "position-interval", "2s", err, sizeof(err)), 0);
    assert_true(c.position_interval_s == 2);
    assert_int_equal(ctl_config_set(&c, "wait-message-interval", "5m", err, sizeof(err)), 0);
    assert_true(c.wait_message_interval_s == 300);
    assert_int_equal(ctl_config_set(&c, "wait-message-interval", "soon", err, sizeof(err)), GQ_EINVAL);
    assert_int_equal(ctl_config_set(&c, "bogus", "1", err, sizeof(err)), GQ_EINVAL);
    assert_non_null(strstr(err, "bogus"));

    char path[] = "/tmp/gq-ctl-cfg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml = "db: /var/lib/gangq.db\nmin-runtime: 90s\nmax-retries: 5\nleader-elect: false\n"
                       "levels:\n- rack=topology.gangq.io/rack\n- {name: node, label: kubernetes.io/hostname}\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    ctl_config_default(&c);
    assert_int_equal(ctl_config_load_file(&c, path, err, sizeof(err)), 0);
    assert_string_equal(c.db, "/var/lib/gangq.db");
    assert_int_equal(c.min_runtime_s, 90);
    assert_int_equal(c.max_retries, 5);
    assert_false(c.leader_elect);
    assert_int_equal(c.levels.nlevels, 2);
    assert_string_equal(c.levels.levels[1], "node");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("max-retries: lots\n", f);
    fclose(f);
    assert_int_equal(ctl_config_load_file(&c, path, err, sizeof(err)), GQ_EINVAL);
    assert_non_null(strstr(err, "max-retries"));
    unlink(path);
}

/* The option table drives defaults, parsing and usage: every option has a
 * usage line, every default parses, and the defaults are the documented ones. */
static void test_config_table(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    ctl_config_usage(f);
    fclose(f);
    assert_non_null(text);
    for (size_t k = 0; k < ctl_noptions; k++) {
        char line[128];
        snprintf(line, sizeof(line), "\n  --%s%s", ctl_options[k].name, ctl_options[k].meta);
        assert_non_null(strstr(text, line));
        for (size_t j = 0; j < k; j++)
            assert_string_not_equal(ctl_options[j].name, ctl_options[k].name);
    }
    assert_non_null(strstr(text, "--max-retries N          failed-gang requeues before Failed (3)\n"));
    free(text);

    struct ctl_config c, d;
    char err[256];
    ctl_config_default(&c);
    for (size_t k = 0; k < ctl_noptions; k++)
        if (ctl_options[k].def) {
            memcpy(&d, &c, sizeof(d));
            assert_int_equal(ctl_config_set(&d, ctl_options[k].name, ctl_options[k].def, err, sizeof(err)), 0);
            assert_memory_equal(&d, &c, sizeof(c)); /* the default is the value in force */
        }
    assert_int_equal(c.log_level, GQ_LOG_INFO);
    assert_string_equal(c.lease_name, "gangq-controller");
    assert_int_equal(c.min_runtime_s, 300);
    assert_string_equal(c.gpu_product_label, "nvidia.com/gpu.product");
    assert_string_equal(c.gpu_memory_label, "nvidia.com/gpu.memory");
    assert_true(c.usage_half_life_s == 86400 && c.cycle_interval_s == 2 && c.max_grace_period_s == 30);
    assert_true(c.debounce_s == 0.05 && c.shutdown_wait_s == 5 && c.io_collect_interval_s == 0.02);
    assert_true(c.db_max_pages == 0 && !c.allow_http_token && c.pod_watch_delay_s == 0);
    assert_true(!c.db[0] && !c.listen[0] && !c.kubeconfig[0] && !c.lease_ns[0] && !c.levels_set);

    /* messages name the option and say what was expected */
    assert_int_equal(ctl_config_set(&c, "max-retries", "1001", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--max-retries: expected 0..1000, got \"1001\"");
    assert_int_equal(ctl_config_set(&c, "db-max-pages", "-1", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--db-max-pages: expected a page count, got \"-1\"");
    assert_int_equal(ctl_config_set(&c, "db-max-pages", "5000000000", err, sizeof(err)), 0);
    assert_true(c.db_max_pages == 5000000000LL);
    assert_int_equal(ctl_config_set(&c, "cycle-interval", "10ms", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--cycle-interval: expected a duration like 40s or 5m, got \"10ms\"");
    assert_int_equal(ctl_config_set(&c, "io-collect-interval", "0", err, sizeof(err)), 0);
    assert_true(c.io_collect_interval_s == 0);
    assert_int_equal(ctl_config_set(&c, "io-collect-interval", "1s", err, sizeof(err)), 0);
    assert_true(c.io_collect_interval_s == 1);
    assert_int_equal(ctl_config_set(&c, "io-collect-interval", "2s", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--io-collect-interval: expected a duration from 0 to 1s, got \"2s\"");
    assert_int_equal(ctl_config_set(&c, "min-runtime", "soon", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--min-runtime: expected a duration like 5m, got \"soon\"");
    assert_int_equal(ctl_config_set(&c, "insecure-allow-http-token", "perhaps", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--insecure-allow-http-token: expected true or false, got \"perhaps\"");
    assert_int_equal(ctl_config_set(&c, "log-level", "loud", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--log-level: expected debug|info|warn|error, got \"loud\"");
    assert_int_equal(ctl_config_set(&c, "config", "x.yaml", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "unknown option --config"); /* a file cannot name another file */
    assert_int_equal(ctl_config_set(&c, "db", NULL, err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--db needs a value");
    char big[CTL_PATH_MAX + 8];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    assert_int_equal(ctl_config_set(&c, "db", big, err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "--db: value too long");
}

/* Adaptive batching: the delay before the next reconcile keeps reconciles
 * within their share of the time and, while events stream in, at least the
 * batch window apart; cheap reconciles after a quiet spell only see the
 * debounce. Arguments: debounce, share, window, last start, last end, now. */
static void test_batch_delay(void **state)
{
    (void)state;
    static const struct {
        double debounce, window, start, end, now, want;
        int share;
        const char *why;
    } cases[] = {
        {0.05, 0, 99.99, 100.0, 100.0, 0.05, 50, "cheap: 10 ms at 50 % -> 10 ms after its end, below the debounce"},
        {0.05, 0, 99.7, 100.0, 100.0, 0.300, 50, "costly: 300 ms at 50 % -> 300 ms after its end"},
        {0.05, 0, 99.7, 100.0, 100.2, 0.100, 50, "part of that idle time already passed"},
        {0.05, 0, 9.8, 10.0, 10.0, 0.600, 25, "25 %: three times the cost"},
        {0.05, 0, 99.7, 100.0, 200.0, 0.05, 50, "long ago: the debounce"},
        {0.05, 0, 95.0, 100.0, 100.0, 0.05, 100, "100 %: the debounce"},
        {0.05, 0.15, 0.0, 0.0, 100.0, 0.05, 50, "no reconcile yet: the debounce"},
        {0.05, 0.15, 100.0, 100.005, 100.015, 0.135, 30, "streaming: until the window after the last start"},
        {0.05, 0, 100.0, 100.005, 100.015, 0.05, 30, "the window off: the debounce"},
        {0.05, 0.15, 100.0, 100.005, 100.5, 0.05, 30, "after a quiet spell: the debounce"},
        {0.05, 0.15, 100.0, 100.005, 100.14, 0.05, 30, "the window nearly over: never less than the debounce"},
        {0.05, 0.15, 100.0, 100.3, 100.3, 0.7, 30, "a costly reconcile: the share's delay is the longer"},
        {0.05, 0.15, 4000.0, 4000.3, 400.0, 0.05, 30, "the clock set back past the last end: the debounce"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double got = ctl_batch_delay(cases[i].debounce, cases[i].share, cases[i].window, cases[i].start,
                                     cases[i].end, cases[i].now);
        if (fabs(got - cases[i].want) > 1e-9)
            fail_msg("case %zu (%s): delay %.6f, want %.6f", i, cases[i].why, got, cases[i].want);
    }
    /* the options: the share 30 by default, 1..100; the window 150 ms, 0..1 s */
    struct ctl_config c;
    char err[256];
    ctl_config_default(&c);
    assert_int_equal(c.max_reconcile_share, 30);
    assert_int_equal(ctl_config_set(&c, "max-reconcile-share", "0", err, sizeof(err)), GQ_EINVAL);
    assert_non_null(strstr(err, "max-reconcile-share"));
    assert_int_equal(ctl_config_set(&c, "max-reconcile-share", "100", err, sizeof(err)), 0);
    assert_int_equal(c.max_reconcile_share, 100);
    assert_true(fabs(c.batch_window_s - 0.15) < 1e-9);
    assert_int_equal(ctl_config_set(&c, "batch-window", "0", err, sizeof(err)), 0);
    assert_true(c.batch_window_s == 0);
    assert_int_equal(ctl_config_set(&c, "batch-window", "2s", err, sizeof(err)), GQ_EINVAL);
    assert_non_null(strstr(err, "batch-window"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placement_roundtrip), cmocka_unit_test(test_placement_borrow),
        cmocka_unit_test(test_node_info),
        cmocka_unit_test(test_pod_usage),           cmocka_unit_test(test_snapshot_build),
        cmocka_unit_test(test_foreign_annotations),
        cmocka_unit_test(test_node_pool_none),      cmocka_unit_test(test_snapshot_terminating),
        cmocka_unit_test(test_pods_succeeded_attempt), cmocka_unit_test(test_pods_live), cmocka_unit_test(test_status_compute),
        cmocka_unit_test(test_status_unschedulable),
        cmocka_unit_test(test_burst_arrival_order),
        cmocka_unit_test(test_arrival_ranks_order),
        cmocka_unit_test(test_wait_classify),       cmocka_unit_test(test_wait_publish),
        cmocka_unit_test(test_wait_publish_reason_settle),
        cmocka_unit_test(test_wait_adopt),
        cmocka_unit_test(test_wait_publish_class_kept),
        cmocka_unit_test(test_prune_gpujob),
        cmocka_unit_test(test_prune_gpujob_status_deflated),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_config_table),
        cmocka_unit_test(test_batch_delay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
