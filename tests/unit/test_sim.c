/* Unit tests for controller/sim: loaders, openb protocol bookkeeping, the
 * virtual-time run on small hand-made clusters, and the report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <cJSON.h>

#include "gq.h"
#include "sim_csv.h"
#include "sim_load.h"
#include "sim_model.h"
#include "sim_fgd.h"
#include "sim_openb.h"
#include "sim_report.h"
#include "sim_run.h"
#include "store.h"

static const char CLUSTER[] =
    "nodes:\n"
    "  - name: h\n"
    "    count: 4\n"
    "    gpus: 8\n"
    "    gpuType: H100\n"
    "    gpuMemoryGiB: 80\n"
    "    cpu: 96\n"
    "    memoryGiB: 1024\n"
    "    rack: r\n"
    "    nodesPerRack: 2\n"
    "    zone: z1\n"
    "    pool: training\n"
    "pools:\n"
    "  - name: training\n"
    "    classes: [Training]\n"
    "teams:\n"
    "  - name: a\n"
    "    cohort: ml\n"
    "    quota: [{gpuType: H100, gpus: 16, borrowingLimit: 8}]\n";

static void test_load_cluster(void **st)
{
    (void)st;
    struct sim_cluster c;
    char err[256] = "";
    assert_int_equal(sim_load_cluster_mem(CLUSTER, strlen(CLUSTER), "c.yaml", &c, err, sizeof(err)), 0);
    assert_int_equal(c.nnodes, 4);
    assert_string_equal(c.nodes[3].name, "h-3");
    assert_string_equal(sim_node_label(&c.nodes[0], SIM_LABEL_RACK), "r-0");
    assert_string_equal(sim_node_label(&c.nodes[3], SIM_LABEL_RACK), "r-1");
    assert_string_equal(sim_node_label(&c.nodes[2], SIM_LABEL_HOST), "h-2");
    assert_string_equal(sim_node_label(&c.nodes[2], SIM_LABEL_POOL), "training");
    assert_int_equal(c.nodes[0].cpu_milli, 96000);
    assert_int_equal(c.nodes[0].mem_mib, 1024 * 1024);
    assert_int_equal(c.npools, 1);
    assert_int_equal(c.pools[0].classes, 1u << SIM_CLASS_TRAINING);
    assert_string_equal(c.pools[0].selector[0].key, SIM_LABEL_POOL);
    assert_int_equal(c.nteams, 1);
    assert_int_equal(c.teams[0].quota[0].gpus, 16);
    assert_int_equal(c.teams[0].quota[0].borrowing_limit, 8);
    assert_int_equal(c.teams[0].quota[0].lending_limit, -1);
    sim_cluster_release(&c);
}

static void expect_cluster_err(const char *text, const char *want)
{
    struct sim_cluster c;
    char err[256] = "";
    assert_int_not_equal(sim_load_cluster_mem(text, strlen(text), "c.yaml", &c, err, sizeof(err)), 0);
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
    assert_null(c.nodes);
}

static void test_cluster_errors(void **st)
{
    (void)st;
    expect_cluster_err("nodes:\n  - name: a\n    gpus: 8\n    cpu: 4\n    memoryGiB: 8\n",
                       "c.yaml:2: nodes[0].gpuType: required when gpus > 0");
    expect_cluster_err("nodes:\n  - name: a\n    cpu: 4\n    memoryGiB: 8\n    gpuz: 3\n",
                       "c.yaml:5: nodes[0].gpuz: unknown field");
    expect_cluster_err("nodes:\n  - name: a\n    cpu: 4\n    memoryGiB: 8\n"
                       "  - name: b\n    cpu: -4\n    memoryGiB: 8\n",
                       "c.yaml:6: nodes[1].cpu: must be an integer in [0, 100000]");
    expect_cluster_err("nodes:\n  - name: a\n    cpu: 4\n    memoryGiB: 8\n"
                       "  - name: a\n    cpu: 4\n    memoryGiB: 8\n",
                       "duplicate node name \"a\"");
    expect_cluster_err("nodes:\n  - name: a\n    cpu: 4\n    memoryGiB: 8\n"
                       "teams:\n  - name: t\n    quota:\n      - gpus: x\n",
                       "c.yaml:8: teams[0].quota[0].gpus: must be an integer");
    expect_cluster_err("nodes: [\n", "c.yaml:");
}

static void expect_trace_err(const char *text, int csv, const char *want)
{
    struct sim_trace t;
    char err[256] = "";
    assert_int_not_equal(sim_load_trace_mem(text, strlen(text), csv ? "t.csv" : "t.yaml", csv, &t, err,
                                            sizeof(err)),
                         0);
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
}

static void test_load_trace(void **st)
{
    (void)st;
    struct sim_trace t;
    char err[256] = "";
    const char *y = "jobs:\n"
                    "  - name: late\n    arrival: 2h\n    duration: 30m\n    gpus: 2\n    team: a\n"
                    "  - name: inf\n    count: 3\n    every: 60\n    class: Inference\n"
                    "    shares: 250\n    duration: 100\n    team: a\n"
                    "    topology: {required: rack}\n"
                    "events:\n  - {time: 50, type: nodeFail, node: h-1}\n";
    assert_int_equal(sim_load_trace_mem(y, strlen(y), "t.yaml", 0, &t, err, sizeof(err)), 0);
    assert_int_equal(t.njobs, 4);
    /* sorted by arrival: inf-0 (0), inf-1 (60), inf-2 (120), late (7200) */
    assert_string_equal(t.jobs[0].name, "inf-0");
    assert_int_equal(t.jobs[2].arrival, 120);
    assert_string_equal(t.jobs[3].name, "late");
    assert_int_equal(t.jobs[3].arrival, 7200);
    assert_int_equal(t.jobs[3].duration, 1800);
    assert_int_equal(t.jobs[3].cls, SIM_CLASS_BATCH);
    assert_int_equal(t.jobs[0].cls, SIM_CLASS_INFERENCE);
    assert_int_equal(t.jobs[0].shares, 250);
    assert_string_equal(t.jobs[0].topo_required, "rack");
    assert_int_equal(t.nevents, 1);
    assert_int_equal(t.events[0].kind, SIM_EV_NODE_FAIL);
    assert_int_equal(sim_job_gpu_milli(&t.jobs[3]), 2000);
    assert_int_equal(t.jobs[3].line, 2); /* source lines survive the sort */
    assert_int_equal(t.jobs[0].line, 7);
    assert_int_equal(t.events[0].line, 16);
    sim_trace_release(&t);

    const char *csv = "name,arrival,team,class,replicas,gpus,gpu_types,duration,required,checkpoint\n"
                      "b,10,a,Training,4,8,H100|A100,1h,rack,true\n"
                      "# a comment\n"
                      "a,5,a,,1,1,,60,,\n";
    assert_int_equal(sim_load_trace_mem(csv, strlen(csv), "t.csv", 1, &t, err, sizeof(err)), 0);
    assert_int_equal(t.njobs, 2);
    assert_string_equal(t.jobs[0].name, "a");
    assert_int_equal(t.jobs[0].cls, SIM_CLASS_BATCH);
    assert_int_equal(t.jobs[1].replicas, 4);
    assert_int_equal(t.jobs[1].ntypes, 2);
    assert_string_equal(t.jobs[1].types[1], "A100");
    assert_int_equal(t.jobs[1].duration, 3600);
    assert_int_equal(t.jobs[1].checkpoint, 1);
    assert_int_equal(t.jobs[1].line, 2);
    sim_trace_release(&t);
}

static void test_trace_errors(void **st)
{
    (void)st;
    expect_trace_err("jobs:\n  - name: a\n    gpus: 1\n", 0, "t.yaml:2: jobs[0].duration: required");
    expect_trace_err("jobs:\n  - name: a\n    duration: 5\n  - name: b\n    duration: 5\n    class: Trainin\n",
                     0, "t.yaml:6: jobs[1].class: \"Trainin\" is not Inference, Batch or Training");
    expect_trace_err("jobs:\n  - name: a\n    duration: 5\n    topology:\n      required: rak\n", 0,
                     "t.yaml:5: jobs[0].topology.required: \"rak\" is not a topology level");
    expect_trace_err("jobs:\n  - name: a\n    duration: 5\n    gpus: 1\n    shares: 500\n", 0,
                     "jobs[0].shares: give gpus");
    expect_trace_err("jobs:\n  - name: a\n    duration: soon\n", 0, "t.yaml:3: jobs[0].duration: must be a time");
    expect_trace_err("jobs:\n  - name: a\n    duration: 5\n    maxRun: 400d\n", 0,
                     "jobs[0].maxRun: at most 31536000 seconds");
    expect_trace_err("jobs:\n  - name: a\n    duration: 5\n    maxRun: -3\n", 0, "jobs[0].maxRun: must be a time");
    expect_trace_err("name,arrival,duration\nx,1,5\ny,2,abc\n", 1, "t.csv:3: duration: \"abc\" is not a time");
    expect_trace_err("name,arrival,duration,gpuz\n", 1, "t.csv:1: gpuz: unknown column");
    expect_trace_err("name,arrival,duration,gpus\nx,1,5,1.5\n", 1, "t.csv:2: gpus: must be an integer");
}

static void test_check(void **st)
{
    (void)st;
    struct sim_cluster c;
    struct sim_trace t;
    char err[256] = "";
    const char *y = "jobs:\n  - name: a\n    duration: 5\n    team: a\n"
                    "  - name: b\n    duration: 5\n    team: nobody\n";
    assert_int_equal(sim_load_cluster_mem(CLUSTER, strlen(CLUSTER), "c.yaml", &c, err, sizeof(err)), 0);
    assert_int_equal(sim_load_trace_mem(y, strlen(y), "t.yaml", 0, &t, err, sizeof(err)), 0);
    assert_int_equal(sim_check(&c, &t, "t.yaml", err, sizeof(err)), GQ_EINVAL);
    assert_string_equal(err, "t.yaml:5: team: \"nobody\" is not a team of the cluster file");
    sim_trace_release(&t);
    y = "jobs:\n  - name: a\n    duration: 5\n    team: a\n  - name: a\n    duration: 5\n    team: a\n";
    assert_int_equal(sim_load_trace_mem(y, strlen(y), "t.yaml", 0, &t, err, sizeof(err)), 0);
    assert_int_equal(sim_check(&c, &t, "t.yaml", err, sizeof(err)), GQ_EINVAL);
    assert_non_null(strstr(err, "duplicate job name \"a\""));
    sim_trace_release(&t);
    sim_cluster_release(&c);
}

static void test_seconds(void **st)
{
    (void)st;
    int64_t v;
    assert_int_equal(sim_parse_seconds("90", &v), 0);
    assert_int_equal(v, 90);
    assert_int_equal(sim_parse_seconds("15m", &v), 0);
    assert_int_equal(v, 900);
    assert_int_equal(sim_parse_seconds("1d", &v), 0);
    assert_int_equal(v, 86400);
    assert_int_equal(sim_parse_seconds("h", &v), GQ_EINVAL);
    assert_int_equal(sim_parse_seconds("-5", &v), GQ_EINVAL);
}

/* ---- openb ---- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_openb_workload(void **st)
{
    (void)st;
    struct sim_openb o;
    char err[256] = "";
    char dir[] = "/tmp/gq_sim_test_XXXXXX", np[128], pp[128];
    assert_non_null(mkdtemp(dir));
    snprintf(np, sizeof(np), "%s/nodes.csv", dir);
    snprintf(pp, sizeof(pp), "%s/pods.csv", dir);
    /* 2 nodes x 2 GPUs, 10 cores: 4000 GPU milli, 20000 cpu milli */
    write_file(np, "sn,cpu_milli,memory_mib,gpu,model\nn0,10000,1000,2,T4\nn1,10000,1000,2,T4\n");
    /* 4 pods: 3 x 1000 GPU milli + one CPU pod; totals 3000 milli GPU, 4000 cpu */
    write_file(pp, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,1000\np1,1000,10,1,1000\n"
                   "p2,1000,10,1,1000\np3,1000,10,0,0\n");
    memset(&o, 0, sizeof(o));
    assert_int_equal(sim_openb_load_nodes(&o, np, err, sizeof(err)), 0);
    assert_int_equal(sim_openb_load_pods(&o, pp, err, sizeof(err)), 0);
    assert_int_equal(o.node_gpu_milli, 4000);
    assert_int_equal(o.pod_gpu_milli, 3000);
    size_t *ord, n, ninf;
    /* ratio 3: want ceil(12)-4 = 8 inflation draws; the GPU total allows only
     * one more GPU pod, so it stops at the first draw of a second GPU pod. */
    assert_int_equal(sim_openb_workload(&o, 42, 3.0, &ord, &n, &ninf), 0);
    assert_true(ninf < 8);
    int64_t g = 0, c = 0;
    int seen[4] = {0};
    for (size_t i = 0; i < n; i++) {
        g += sim_openb_pod_gpu_milli(&o.pods[ord[i]]);
        c += o.pods[ord[i]].cpu_milli;
        if (i < 4)
            seen[ord[i]]++;
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(seen[i], 1); /* the first n are a permutation */
    assert_true(g <= 4000);
    assert_true(c <= 20000);
    /* the draw that stopped it would have exceeded: at most one GPU pod added */
    size_t gpu_inf = 0;
    for (size_t i = 4; i < n; i++)
        gpu_inf += o.pods[ord[i]].num_gpu > 0;
    assert_true(gpu_inf <= 1);
    /* deterministic per seed */
    size_t *ord2, n2, ninf2;
    assert_int_equal(sim_openb_workload(&o, 42, 3.0, &ord2, &n2, &ninf2), 0);
    assert_int_equal(n, n2);
    assert_memory_equal(ord, ord2, n * sizeof(*ord));
    free(ord);
    free(ord2);

    /* workload tuning (the published runs' -tune): ratio 1.3 of 4000 = 5200
     * GPU milli; the trace has 3000, so draws are appended until the next
     * would overshoot: the GPU total ends in (5200 - 1000, 5200]. */
    size_t nadd = 0, nrem = 0;
    assert_int_equal(sim_openb_workload_tune(&o, 42, 1.3, &ord, &n, &nadd, &nrem), 0);
    assert_int_equal(nrem, 0);
    assert_int_equal(n, 4 + nadd);
    assert_true(nadd >= 2);
    g = 0;
    memset(seen, 0, sizeof(seen));
    for (size_t i = 0; i < n; i++) {
        g += sim_openb_pod_gpu_milli(&o.pods[ord[i]]);
        if (i < 4)
            seen[ord[i]]++;
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(seen[i], 1); /* the trace first, shuffled */
    assert_true(g > 4200 && g <= 5200);
    free(ord);
    /* ratio 0.5: 2000 milli; the 3000 of the trace is cut down by removing
     * random pods (CPU-only ones may go too) until it fits, order kept */
    assert_int_equal(sim_openb_workload_tune(&o, 7, 0.5, &ord, &n, &nadd, &nrem), 0);
    assert_int_equal(nadd, 0);
    assert_int_equal(n + nrem, 4);
    g = 0;
    for (size_t i = 0; i < n; i++)
        g += sim_openb_pod_gpu_milli(&o.pods[ord[i]]);
    assert_true(g <= 2000 && g >= 1000);
    free(ord);
    sim_openb_release(&o);
    /* bad pod row */
    write_file(pp, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,2,500\n");
    memset(&o, 0, sizeof(o));
    assert_int_equal(sim_openb_load_pods(&o, pp, err, sizeof(err)), GQ_EPARSE);
    assert_non_null(strstr(err, "pods.csv:2: num_gpu/gpu_milli"));
    sim_openb_release(&o);
    unlink(np);
    unlink(pp);
    rmdir(dir);
}

static void test_openb_bin(void **st)
{
    (void)st;
    /* total 1000 milli (one GPU): events at arrived 10%, 10%, 30% with used 5%, 10%, 20% */
    int64_t arr[] = {100, 100, 300};
    int64_t used[] = {50, 100, 200};
    double a[SIM_OPENB_BINS];
    int have[SIM_OPENB_BINS];
    sim_openb_bin(arr, used, 3, 1000, a, have);
    assert_true(have[10]);
    assert_true(a[10] > 7.49 && a[10] < 7.51); /* mean of 5 and 10 */
    assert_true(have[30]);
    assert_true(a[30] > 19.99 && a[30] < 20.01);
    assert_true(have[11]); /* window [10,12] falls back to bin 10 */
    assert_true(a[11] > 7.49 && a[11] < 7.51);
    assert_false(have[20]);
    assert_true(have[29] && a[29] > 19.99); /* window [28,30] */
    assert_false(have[100]);
}

static void test_fgd_table(void **st)
{
    (void)st;
    char dir[] = "/tmp/gq_sim_test_XXXXXX", p[128], err[256];
    struct sim_fgd_table_row row;
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof(p), "%s/t.csv", dir);
    write_file(p, "workload,01-Random_mean,01-Random_sd,06-FGD_mean,06-FGD_sd,n_seeds\n"
                  "w1,13.70,0.31,4.77,0.10,10\nw2,1,2,3,4,10\n");
    assert_int_equal(sim_fgd_table_read(p, "w2", &row, err, sizeof(err)), 0);
    assert_int_equal(row.npolicies, 2);
    assert_string_equal(row.policy[0], "Random");
    assert_string_equal(row.policy[1], "FGD");
    assert_true(row.mean[1] == 3.0 && row.sd[1] == 4.0);
    assert_int_equal(sim_fgd_table_read(p, "w3", &row, err, sizeof(err)), GQ_ENOTFOUND);
    unlink(p);
    rmdir(dir);
}

/* ---- the virtual-time run on hand-made clusters ---- */

static const char ONE_NODE[] = "nodes:\n  - {name: n0, gpus: 8, gpuType: H100, cpu: 64, memoryGiB: 512}\n"
                               "teams:\n  - {name: t}\n";

struct runfix {
    struct sim_cluster c;
    struct sim_trace t;
    struct sim_result r;
    struct sim_report rep;
};

/* Check, run and report the cluster and trace f holds (loaded from trace_name). */
static void run_loaded(struct runfix *f, const struct sim_opts *o, const char *trace_name)
{
    char err[512] = "";
    if (sim_check(&f->c, &f->t, trace_name, err, sizeof(err)))
        fail_msg("check: %s", err);
    if (sim_run(&f->c, &f->t, o, &f->r, err, sizeof(err)))
        fail_msg("run: %s", err);
    assert_int_equal(sim_report_compute(&f->c, &f->t, &f->r, &f->rep), 0);
}

static void run_grace(struct runfix *f, const char *cluster, const char *trace, int64_t min_runtime,
                      const char *db, int64_t grace)
{
    char err[512] = "";
    struct sim_opts o;
    memset(f, 0, sizeof(*f));
    memset(&o, 0, sizeof(o));
    o.min_runtime_s = min_runtime;
    o.db_path = db;
    o.grace_s = grace;
    if (sim_load_cluster_mem(cluster, strlen(cluster), "c.yaml", &f->c, err, sizeof(err)))
        fail_msg("cluster: %s", err);
    if (sim_load_trace_mem(trace, strlen(trace), "t.yaml", 0, &f->t, err, sizeof(err)))
        fail_msg("trace: %s", err);
    run_loaded(f, &o, "t.yaml");
}

/* Victims stop at once (grace 0) unless a test says otherwise. */
static void run_text(struct runfix *f, const char *cluster, const char *trace, int64_t min_runtime,
                     const char *db)
{
    run_grace(f, cluster, trace, min_runtime, db, 0);
}

static void run_release(struct runfix *f)
{
    sim_report_release(&f->rep);
    sim_result_release(&f->r);
    sim_trace_release(&f->t);
    sim_cluster_release(&f->c);
}

static const struct sim_job_out *out_of(const struct runfix *f, const char *name)
{
    for (size_t i = 0; i < f->t.njobs; i++)
        if (!strcmp(f->t.jobs[i].name, name))
            return &f->r.jobs[i];
    fail_msg("no job %s", name);
    return NULL;
}

static void test_run_fifo(void **st)
{
    (void)st;
    struct runfix f;
    /* A fills the node 0-100; B (earlier) runs before C at 100; C waits until B ends. */
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: A, team: t, gpus: 8, duration: 100}\n"
             "  - {name: B, team: t, gpus: 8, duration: 50, arrival: 10}\n"
             "  - {name: C, team: t, gpus: 4, duration: 30, arrival: 20}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "A")->first_start, 0);
    assert_int_equal(out_of(&f, "A")->finish, 100);
    assert_int_equal(out_of(&f, "B")->first_start, 100);
    assert_int_equal(out_of(&f, "B")->finish, 150);
    assert_int_equal(out_of(&f, "C")->first_start, 150);
    assert_int_equal(out_of(&f, "C")->finish, 180);
    assert_int_equal(out_of(&f, "C")->waited, 130);
    assert_int_equal(f.r.end_time, 180);
    /* delays 0, 90, 130 */
    assert_int_equal(f.rep.all.n, 3);
    assert_true(fabs(f.rep.all.mean - 220.0 / 3) < 1e-9);
    assert_int_equal(f.rep.all.p50, 90);
    assert_int_equal(f.rep.all.p95, 130);
    assert_int_equal(f.rep.by_class[SIM_CLASS_BATCH].max, 130);
    assert_int_equal(f.rep.by_team[0].n, 3);
    /* allocation: 100 % for 150 s, 50 % for 30 s, over 180 s */
    assert_true(fabs(f.rep.alloc_mean_pct - 100.0 * 165 / 180) < 1e-9);
    assert_true(fabs(f.rep.alloc_peak_pct - 100.0) < 1e-9);
    /* waiting: 1 job for 10 s, 2 for 80 s, 1 for 50 s */
    assert_true(fabs(f.rep.queue_mean - 220.0 / 180) < 1e-9);
    assert_int_equal(f.rep.queue_max, 2);
    /* fragmentation while C waits alone (150..150: none) and while B,C wait with 0 free: 0 */
    assert_int_equal(f.rep.done, 3);
    assert_int_equal(f.rep.never_ran, 0);
    run_release(&f);

    /* Change the trace: C runs 60 s. Finish 210; allocation (150 + 60*0.5)/210. */
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: A, team: t, gpus: 8, duration: 100}\n"
             "  - {name: B, team: t, gpus: 8, duration: 50, arrival: 10}\n"
             "  - {name: C, team: t, gpus: 4, duration: 60, arrival: 20}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "C")->finish, 210);
    assert_true(fabs(f.rep.alloc_mean_pct - 100.0 * 180 / 210) < 1e-9);
    assert_true(fabs(f.rep.queue_mean - 220.0 / 210) < 1e-9);
    run_release(&f);
}

/* Jobs arriving in the same second run in the order the trace lists them
 * (as the controller orders a burst of creates by etcd revision), not by
 * name: "job10" after "job9", and the 8-GPU "b" before the 4-GPU "a"
 * listed after it. */
static void test_run_same_second_order(void **st)
{
    (void)st;
    struct runfix f;
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: job9, team: t, gpus: 8, duration: 10}\n"
             "  - {name: job10, team: t, gpus: 8, duration: 10}\n"
             "  - {name: b, team: t, gpus: 8, duration: 10, arrival: 5}\n"
             "  - {name: a, team: t, gpus: 4, duration: 10, arrival: 5}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "job9")->first_start, 0);
    assert_int_equal(out_of(&f, "job10")->first_start, 10);
    assert_int_equal(out_of(&f, "b")->first_start, 20);
    assert_int_equal(out_of(&f, "a")->first_start, 30);
    run_release(&f);
}

/* knavigator's HPC backfill test on one 8-GPU node: b1 holds 4 GPUs 0-90;
 * a (6 GPUs, from 10) reserves the node and starts at 90, not later; b2 (4
 * GPUs for 90 s, from 30) would hold it to 120: it waits; c (4 GPUs for 30 s,
 * from 50) ends by 90: it backfills. Without limits c waits for a too. A job
 * needing longer than its maxRun is stopped then, Failed. */
static void test_run_backfill_max_run(void **st)
{
    (void)st;
    struct runfix f;
    static const char trace[] =
        "jobs:\n"
        "  - {name: b1, team: t, gpus: 4, duration: 90, maxRun: 90}\n"
        "  - {name: a, team: t, gpus: 6, duration: 60, maxRun: 60, arrival: 10}\n"
        "  - {name: b2, team: t, gpus: 4, duration: 90, maxRun: 90, arrival: 30}\n"
        "  - {name: c, team: t, gpus: 4, duration: 30, maxRun: 30, arrival: 50}\n";
    run_text(&f, ONE_NODE, trace, -1, NULL);
    assert_int_equal(out_of(&f, "a")->first_start, 90);
    assert_int_equal(out_of(&f, "c")->first_start, 50);
    assert_int_equal(out_of(&f, "c")->finish, 80);
    assert_int_equal(out_of(&f, "b2")->first_start, 150);
    assert_int_equal(f.rep.done, 4);
    assert_int_equal(f.rep.timed_out, 0);
    run_release(&f);

    /* the same jobs in one burst: c backfills in the very cycle that admits
     * b1 (b1's end is known from its limit), not at the next event */
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: b1, team: t, gpus: 4, duration: 90, maxRun: 90}\n"
             "  - {name: a, team: t, gpus: 6, duration: 60, maxRun: 60}\n"
             "  - {name: c, team: t, gpus: 4, duration: 30, maxRun: 30}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "c")->first_start, 0);
    assert_int_equal(out_of(&f, "a")->first_start, 90);
    run_release(&f);

    /* no limits: none may backfill by time, and no 4-GPU job fits in the 2
     * GPUs a never needs on the reserved node */
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: b1, team: t, gpus: 4, duration: 90}\n"
             "  - {name: a, team: t, gpus: 6, duration: 60, arrival: 10}\n"
             "  - {name: b2, team: t, gpus: 4, duration: 90, arrival: 30}\n"
             "  - {name: c, team: t, gpus: 4, duration: 30, arrival: 50}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "a")->first_start, 90);
    assert_int_equal(out_of(&f, "c")->first_start, 150);
    run_release(&f);

    /* x needs 100 s but may run 40: stopped at 40, Failed; y starts then */
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: x, team: t, gpus: 8, duration: 100, maxRun: 40}\n"
             "  - {name: y, team: t, gpus: 8, duration: 10, arrival: 1}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "x")->finish, 40);
    assert_int_equal(out_of(&f, "x")->final, SIM_F_TIMED_OUT);
    assert_int_equal(out_of(&f, "y")->first_start, 40);
    assert_int_equal(f.rep.timed_out, 1);
    assert_int_equal(f.rep.done, 1);
    run_release(&f);
}

/* One file-based run (the repository's example inputs; tests run from the
 * repository root). */
static void run_files(struct runfix *f, const char *cluster, const char *trace)
{
    char err[512] = "";
    struct sim_opts o;
    memset(f, 0, sizeof(*f));
    memset(&o, 0, sizeof(o));
    o.min_runtime_s = -1;
    if (sim_load_cluster(cluster, &f->c, err, sizeof(err)))
        fail_msg("cluster: %s", err);
    if (sim_load_trace(trace, &f->t, err, sizeof(err)))
        fail_msg("trace: %s", err);
    run_loaded(f, &o, trace);
}

/* knavigator's test2-backfill-performance burst (examples/sim/backfill):
 * 20 jobs A (60 CPUs, 240 s), 80 B (30 CPUs, 60 s), 240 C (10 CPUs, 20 s) on
 * 10 nodes of 100 CPUs. With the CPUs alone binding, the work fills the
 * cluster for exactly 480 s, which both runs reach: the node reserved for
 * the first blocked A takes, from the very cycle that admitted the first
 * A's, B and C jobs that end before it is free (run limits) or that fit in
 * the 40 CPUs that A never needs there (without limits). The example's own
 * memory (a node holds no A, B and C at once) puts the floor near 533 s. */
static void test_run_knavigator_backfill(void **st)
{
    (void)st;
    struct runfix f;
    char trace[1024];
    for (int lim = 0; lim < 2; lim++) {
        snprintf(trace, sizeof(trace),
                 "jobs:\n"
                 "  - {name: a, team: t, cpu: 60, memoryGiB: 1, duration: 240, count: 20, every: 0%s}\n"
                 "  - {name: b, team: t, cpu: 30, memoryGiB: 1, duration: 60, count: 80, every: 0%s}\n"
                 "  - {name: c, team: t, cpu: 10, memoryGiB: 1, duration: 20, count: 240, every: 0%s}\n",
                 lim ? ", maxRun: 240" : "", lim ? ", maxRun: 60" : "", lim ? ", maxRun: 20" : "");
        run_text(&f,
                 "nodes:\n  - {name: n, count: 10, gpus: 0, cpu: 100, memoryGiB: 1000}\n"
                 "teams:\n  - {name: t}\n",
                 trace, -1, NULL);
        assert_int_equal(f.rep.done, 340);
        assert_int_equal(f.rep.timed_out, 0);
        assert_int_equal(f.r.end_time, 480);
        run_release(&f);
    }
    int64_t end[2];
    for (int lim = 0; lim < 2; lim++) {
        run_files(&f, "examples/sim/backfill/cluster.yaml",
                  lim ? "examples/sim/backfill/trace-limits.yaml" : "examples/sim/backfill/trace.yaml");
        assert_int_equal(f.rep.done, 340);
        assert_int_equal(f.rep.timed_out, 0);
        end[lim] = f.r.end_time;
        run_release(&f);
    }
    assert_true(end[0] <= 540);
    assert_true(end[1] <= end[0]);
}

static void test_run_fragmentation(void **st)
{
    (void)st;
    struct runfix f;
    /* A holds 6 of 8 GPUs 0-100; B needs 4 and waits 10..100 while 2 GPUs are free
     * and unusable for it: fragmentation 2 GPUs = 100 % of the free GPUs. */
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: A, team: t, gpus: 6, duration: 100}\n"
             "  - {name: B, team: t, gpus: 4, duration: 10, arrival: 10}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "B")->first_start, 100);
    assert_true(fabs(f.rep.frag_mean_gpus - 2.0) < 1e-9);
    assert_true(fabs(f.rep.frag_mean_pct_free - 100.0) < 1e-9);
    run_release(&f);
}

static void test_run_preemption(void **st)
{
    (void)st;
    struct runfix f;
#define PRE_TRACE(extra)                                                                      \
    "jobs:\n"                                                                                  \
    "  - {name: L, team: t, class: Batch, priority: 10, gpus: 8, duration: 100" extra "}\n"     \
    "  - {name: H, team: t, class: Training, priority: 100, gpus: 8, duration: 50, arrival: 30}\n"
    char buf[512];
    /* no checkpoint: L loses 30 s of work (240 GPU-s), restarts at 80, ends at 180 */
    snprintf(buf, sizeof(buf), "%s", PRE_TRACE(""));
    run_text(&f, ONE_NODE, buf, 0, NULL);
    assert_int_equal(out_of(&f, "H")->first_start, 30);
    assert_int_equal(out_of(&f, "H")->finish, 80);
    assert_int_equal(out_of(&f, "L")->first_start, 0);
    assert_int_equal(out_of(&f, "L")->preemptions, 1);
    assert_int_equal(out_of(&f, "L")->finish, 180);
    assert_int_equal(out_of(&f, "L")->waited, 50);
    assert_int_equal(out_of(&f, "L")->lost_gpu_s, 240);
    assert_int_equal(f.rep.preemptions[SIM_CLASS_BATCH], 1);
    assert_int_equal(f.rep.preemptions[SIM_CLASS_TRAINING], 0);
    assert_true(fabs(f.rep.lost_gpu_h[SIM_CLASS_BATCH] - 240.0 / 3600) < 1e-9);
    assert_int_equal(f.rep.ntop_preempted, 1);
    assert_string_equal(f.t.jobs[f.rep.top_preempted[0]].name, "L");
    run_release(&f);
    /* checkpointing: L keeps 30 s, ends at 80 + 70 = 150, nothing lost */
    snprintf(buf, sizeof(buf), "%s", PRE_TRACE(", checkpoint: true"));
    run_text(&f, ONE_NODE, buf, 0, NULL);
    assert_int_equal(out_of(&f, "L")->finish, 150);
    assert_int_equal(out_of(&f, "L")->lost_gpu_s, 0);
    run_release(&f);
    /* a 30 s grace period: L keeps the node until 60 (shown to the core as
     * terminating for H), H runs 60-110, L restarts at 110 and ends at 210
     * having lost 60 s x 8 GPUs */
    snprintf(buf, sizeof(buf), "%s", PRE_TRACE(""));
    run_grace(&f, ONE_NODE, buf, 0, NULL, 30);
    assert_int_equal(out_of(&f, "H")->first_start, 60);
    assert_int_equal(out_of(&f, "H")->finish, 110);
    assert_int_equal(out_of(&f, "L")->preemptions, 1);
    assert_int_equal(out_of(&f, "L")->finish, 210);
    assert_int_equal(out_of(&f, "L")->waited, 50);
    assert_int_equal(out_of(&f, "L")->lost_gpu_s, 480);
    run_release(&f);
    /* minimum runtime 60 s protects L until t=60: H starts at 60, ends 110; L restarts at 110 */
    snprintf(buf, sizeof(buf), "%s", PRE_TRACE(""));
    run_text(&f, ONE_NODE, buf, 60, NULL);
    assert_int_equal(out_of(&f, "H")->first_start, 60);
    assert_int_equal(out_of(&f, "L")->finish, 210);
    run_release(&f);
}

static void test_run_never_runs(void **st)
{
    (void)st;
    struct runfix f;
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: ok, team: t, gpus: 2, duration: 10}\n"
             "  - {name: huge, team: t, gpus: 16, duration: 10, topology: {required: node}}\n",
             -1, NULL);
    const struct sim_job_out *o = out_of(&f, "huge");
    assert_int_equal(o->first_start, -1);
    assert_int_equal(o->final, SIM_F_WAITING);
    assert_true(strlen(o->reason) > 0);
    assert_int_equal(f.rep.never_ran, 1);
    assert_int_equal(f.rep.nreasons, 1);
    assert_string_equal(f.rep.reasons[0].text, o->reason);
    assert_string_equal(f.rep.reasons[0].example, "huge");
    assert_int_equal(out_of(&f, "ok")->finish, 10);
    run_release(&f);
}

static void test_run_suspend_and_node_failure(void **st)
{
    (void)st;
    struct runfix f;
    /* suspended at 40, resumed at 60: without checkpoint it restarts, ends at 160 */
    run_text(&f, ONE_NODE,
             "jobs:\n  - {name: J, team: t, gpus: 8, duration: 100, suspendAt: 40, resumeAt: 60}\n", -1, NULL);
    assert_int_equal(out_of(&f, "J")->finish, 160);
    assert_int_equal(out_of(&f, "J")->waited, 0); /* suspension is not waiting */
    run_release(&f);
    run_text(&f, ONE_NODE,
             "jobs:\n  - {name: J, team: t, gpus: 8, duration: 100, checkpoint: true, suspendAt: 40,"
             " resumeAt: 60}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "J")->finish, 120);
    run_release(&f);
    /* the node fails at 50 and comes back at 70: the gang is requeued and restarts */
    run_text(&f, ONE_NODE,
             "jobs:\n  - {name: J, team: t, gpus: 8, duration: 100}\n"
             "events:\n  - {time: 50, type: nodeFail, node: n0}\n  - {time: 70, type: nodeRecover, node: n0}\n",
             -1, NULL);
    assert_int_equal(out_of(&f, "J")->requeues, 1);
    assert_int_equal(out_of(&f, "J")->finish, 170);
    assert_int_equal(out_of(&f, "J")->waited, 20);
    assert_int_equal(f.r.node_failures, 1);
    /* while the node is down the cluster has no GPUs: allocation counts ready GPUs only */
    run_release(&f);
}

static int count_audit(void *ctx, const struct store_audit *a)
{
    int *n = ctx;
    if (!strcmp(a->action, "admit"))
        n[0]++;
    if (!strcmp(a->action, "preempt"))
        n[1]++;
    return 0;
}

static void test_run_store(void **st)
{
    (void)st;
    struct runfix f;
    char dir[] = "/tmp/gq_sim_db_XXXXXX", db[128], err[256];
    struct store *s = NULL;
    struct store_job *j = NULL;
    int n[2] = {0, 0};
    assert_non_null(mkdtemp(dir));
    snprintf(db, sizeof(db), "%s/sim.db", dir);
    run_grace(&f, ONE_NODE,
              "jobs:\n"
              "  - {name: L, team: t, class: Batch, priority: 10, gpus: 8, duration: 100}\n"
              "  - {name: H, team: t, class: Training, priority: 100, gpus: 8, duration: 50, arrival: 30}\n",
              0, db, -1);
    run_release(&f);
    struct store_opts so = {0, 0, 1};
    assert_int_equal(store_open(db, &so, &s, err, sizeof(err)), 0);
    struct store_audit_filter flt = {NULL, NULL, 0, 0};
    assert_int_equal(store_audit_query(s, &flt, count_audit, n, err, sizeof(err)), 0);
    assert_int_equal(n[0], 3); /* L, H, L again */
    assert_int_equal(n[1], 1);
    assert_int_equal(store_job_get(s, "sim/L", &j, err, sizeof(err)), 0);
    assert_int_equal(j->state, STORE_SUCCEEDED);
    assert_int_equal(j->preemptions, 1);
    assert_int_equal(j->attempts, 2);
    assert_string_equal(j->preempted_by, "sim/H");
    store_job_free(j);
    store_close(s);
    store_remove_files(db);
    rmdir(dir);
}

static void test_report_files(void **st)
{
    (void)st;
    struct runfix f;
    char dir[] = "/tmp/gq_sim_rep_XXXXXX", jp[128], sp[128], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(jp, sizeof(jp), "%s/r.json", dir);
    snprintf(sp, sizeof(sp), "%s/r.svg", dir);
    run_text(&f, ONE_NODE,
             "jobs:\n"
             "  - {name: A, team: t, gpus: 8, duration: 100}\n"
             "  - {name: B, team: t, gpus: 8, duration: 50, arrival: 10}\n",
             -1, NULL);
    assert_int_equal(sim_report_json(jp, &f.c, &f.r, &f.rep, err, sizeof(err)), 0);
    assert_int_equal(sim_report_svg(sp, &f.r, &f.rep, "t<est>", err, sizeof(err)), 0);
    FILE *fp = fopen(jp, "r");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    cJSON *all = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "queueing_delay"), "all");
    assert_int_equal((int)cJSON_GetObjectItem(all, "p95_s")->valuedouble, 90); /* delays 0 and 90 */
    assert_int_equal((int)cJSON_GetObjectItem(all, "p50_s")->valuedouble, 0);
    double mean = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "allocation"), "mean_pct")->valuedouble;
    assert_true(fabs(mean - 100.0) < 1e-9); /* the node is full 0..150 */
    assert_int_equal((int)cJSON_GetObjectItem(cJSON_GetObjectItem(root, "jobs"), "finished")->valuedouble, 2);
    cJSON_Delete(root);
    fp = fopen(sp, "r");
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    assert_non_null(strstr(buf, "<svg"));
    assert_non_null(strstr(buf, "t&lt;est&gt;"));
    assert_non_null(strstr(buf, "<polyline"));
    run_release(&f);
    unlink(jp);
    unlink(sp);
    rmdir(dir);
}

static void test_delay_stats(void **st)
{
    (void)st;
    int64_t v[] = {5, 1, 4, 2, 3, 10, 9, 8, 7, 6};
    struct sim_delay d;
    sim_delay_compute(v, 10, &d);
    assert_int_equal(d.n, 10);
    assert_true(fabs(d.mean - 5.5) < 1e-12);
    assert_int_equal(d.p50, 5);
    assert_int_equal(d.p95, 10);
    assert_int_equal(d.p99, 10);
    assert_int_equal(d.max, 10);
    sim_delay_compute(v, 0, &d);
    assert_int_equal(d.n, 0);
}

static void test_fgd_replay_small(void **st)
{
    (void)st;
    struct sim_openb o;
    struct sim_fgd_run run;
    char err[256] = "";
    char dir[] = "/tmp/gq_sim_fgd_XXXXXX", np[128], pp[128];
    assert_non_null(mkdtemp(dir));
    snprintf(np, sizeof(np), "%s/nodes.csv", dir);
    snprintf(pp, sizeof(pp), "%s/pods.csv", dir);
    /* one node, 2 GPUs; three 1-GPU tasks. GPU requests (3000) exceed 1.3 x
     * the cluster (2600), so workload tuning removes one task and adds none;
     * the two left both fit. */
    write_file(np, "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,8192,2,T4\n");
    write_file(pp, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,1000\np1,1000,10,1,1000\n"
                   "p2,1000,10,1,1000\n");
    memset(&o, 0, sizeof(o));
    assert_int_equal(sim_openb_load_nodes(&o, np, err, sizeof(err)), 0);
    assert_int_equal(sim_openb_load_pods(&o, pp, err, sizeof(err)), 0);
    assert_int_equal(sim_fgd_replay(&o, 42, SCHED_POLICY_GANGQ, 0, &run, err, sizeof(err)), 0);
    assert_int_equal(run.tasks, 2);
    assert_int_equal(run.inflated, 0);
    assert_int_equal(run.removed, 1);
    assert_int_equal(run.placed, 2);
    assert_int_equal(run.failed, 0);
    /* events: arrived 50 % used 50 %, arrived 100 % used 100 % */
    assert_true(run.have[50] && fabs(run.alloc[50] - 50.0) < 1e-9);
    assert_true(run.have[100] && fabs(run.alloc[100] - 100.0) < 1e-9);
    assert_true(fabs(run.unalloc_pct - 0.0) < 1e-9);
    sim_openb_release(&o);

    /* shares: two 600-milli tasks cannot share one GPU; on a 1-GPU node the
     * second fails: arrived 1200 of 1000, used 600 (tuning: 1200 + 600 would
     * pass 1300, so nothing is added). */
    write_file(np, "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,8192,1,T4\n");
    write_file(pp, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,600\np1,1000,10,1,600\n");
    memset(&o, 0, sizeof(o));
    assert_int_equal(sim_openb_load_nodes(&o, np, err, sizeof(err)), 0);
    assert_int_equal(sim_openb_load_pods(&o, pp, err, sizeof(err)), 0);
    assert_int_equal(sim_fgd_replay(&o, 7, SCHED_POLICY_GANGQ, 0, &run, err, sizeof(err)), 0);
    assert_int_equal(run.placed, 1);
    assert_int_equal(run.failed, 1);
    assert_true(run.have[60] && fabs(run.alloc[60] - 60.0) < 1e-9);
    assert_true(run.have[120] && fabs(run.alloc[120] - 60.0) < 1e-9);
    assert_false(run.have[100]);
    assert_true(isnan(run.unalloc_pct));
    sim_openb_release(&o);
    unlink(np);
    unlink(pp);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_cluster), cmocka_unit_test(test_cluster_errors),
        cmocka_unit_test(test_load_trace),   cmocka_unit_test(test_trace_errors),
        cmocka_unit_test(test_check),        cmocka_unit_test(test_seconds),
        cmocka_unit_test(test_openb_workload), cmocka_unit_test(test_openb_bin),
        cmocka_unit_test(test_fgd_table),
        cmocka_unit_test(test_delay_stats),
        cmocka_unit_test(test_run_fifo),
        cmocka_unit_test(test_run_same_second_order),
        cmocka_unit_test(test_run_backfill_max_run),
        cmocka_unit_test(test_run_knavigator_backfill),
        cmocka_unit_test(test_run_fragmentation),
        cmocka_unit_test(test_run_preemption),
        cmocka_unit_test(test_run_never_runs),
        cmocka_unit_test(test_run_suspend_and_node_failure),
        cmocka_unit_test(test_run_store),
        cmocka_unit_test(test_report_files),
        cmocka_unit_test(test_fgd_replay_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
