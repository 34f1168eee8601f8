/*
 * sched_bench.c — `gangq bench sched [--json] [--nodes N] [--waiting M]
 * [--cycles K] [--seed S]`.
 *
 * Synthetic cluster: N nodes x 8 GPUs (default 10,000 = 80,000 GPUs), racks of
 * 8 nodes, zones of 125 racks, three GPU products (H100, A100, L40S) in equal
 * thirds; 8 teams in one cohort with "*" quota covering the cluster. Queue: M
 * waiting gangs (default 100,000), shape mix 1, 2, 4, 8 GPUs on one node and
 * 4x8 GPUs in one rack, each accepting one product (a fifth accept any),
 * priorities 0..3, distinct enqueue times. The cluster starts empty, which is
 * the costliest case: thousands of admissions before the queue is blocked.
 *
 * One full cycle is timed K times (default 3) with a reused context; the table
 * gives the median. --steady first runs one untimed cycle whose admissions
 * become running work, raises 1 % of the waiting jobs to priority 10 (so the
 * timed cycles plan preemptions), then times the busy cluster's cycle. bytes_per_job counts the job structs and id strings, the
 * core's scratch and the result, divided by the waiting jobs.
 * Targets (issue 3): cycle <= 200 ms, <= 2 KiB per waiting job.
 * This file prints; it is not part of the pure core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cmd.h"
#include "gq.h"
#include "sched.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int parse_pos(const char *flag, const char *v, int64_t *out)
{
    if (!v || gq_parse_i64(v, (size_t)-1, out) != 0 || *out <= 0 || *out > 10000000) {
        fprintf(stderr, "gangq bench sched: %s needs a positive integer\n", flag);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_sched(int argc, char **argv)
{
    int64_t nnodes = 10000, nwait = 100000, ncycles = 3, seed = 1;
    int json = 0, rc = 1, steady = 0;
    struct sched_replica *held = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--steady")) {
            steady = 1;
        } else if (!strcmp(argv[i], "--nodes")) {
            if (parse_pos("--nodes", i + 1 < argc ? argv[++i] : NULL, &nnodes))
                return 2;
        } else if (!strcmp(argv[i], "--waiting")) {
            if (parse_pos("--waiting", i + 1 < argc ? argv[++i] : NULL, &nwait))
                return 2;
        } else if (!strcmp(argv[i], "--cycles")) {
            if (parse_pos("--cycles", i + 1 < argc ? argv[++i] : NULL, &ncycles))
                return 2;
        } else if (!strcmp(argv[i], "--seed")) {
            if (parse_pos("--seed", i + 1 < argc ? argv[++i] : NULL, &seed))
                return 2;
        } else {
            fprintf(stderr, "usage: gangq bench sched [--json] [--nodes N] [--waiting M] "
                            "[--cycles K] [--seed S] [--steady]\n");
            return 2;
        }
    }
    static const char *const products[3] = {"H100", "A100", "L40S"};
    static const char *const teamnames[8] = {"ml", "cv", "nlp", "speech",
                                             "rec", "search", "ads", "infra"};
    int N = (int)nnodes, M = (int)nwait, K = (int)ncycles;
    struct sched_node *nodes = calloc((size_t)N, sizeof(*nodes));
    struct sched_label *labels = calloc((size_t)N * 3, sizeof(*labels));
    char *names = calloc((size_t)N, 72);
    struct sched_job *jobs = calloc((size_t)M, sizeof(*jobs));
    char *ids = calloc((size_t)M, 24);
    double *times = calloc((size_t)K * 2, sizeof(double));
    struct sched *ctx = sched_new();
    struct sched_result *res = NULL;
    if (!nodes || !labels || !names || !jobs || !ids || !times || !ctx) {
        fprintf(stderr, "gangq bench sched: out of memory\n");
        goto out;
    }
    for (int i = 0; i < N; i++) {
        char *nm = names + (size_t)i * 72;
        snprintf(nm, 24, "node-%05d", i);
        snprintf(nm + 24, 24, "rack-%04d", i / 8);
        snprintf(nm + 48, 24, "zone-%d", i / 1000);
        struct sched_label *l = labels + (size_t)i * 3;
        l[0] = (struct sched_label){"kubernetes.io/hostname", nm};
        l[1] = (struct sched_label){"topology.gangq.io/rack", nm + 24};
        l[2] = (struct sched_label){"topology.kubernetes.io/zone", nm + 48};
        struct sched_node *n = &nodes[i];
        n->name = nm;
        n->labels = l;
        n->nlabels = 3;
        n->ready = 1;
        n->pool = -1;
        n->gpus = 8;
        n->gpu_product = products[(i / 8) % 3]; /* whole racks share a product */
        n->gpu_mem_mib = 81920;
        n->cpu_milli = 192000;
        n->mem_bytes = (int64_t)2048 << 30;
    }
    struct sched_quota quota = {"*", nnodes * 8 / 8 + 1, -1, -1};
    struct sched_team teams[8];
    for (int t = 0; t < 8; t++)
        teams[t] = (struct sched_team){teamnames[t], "all", 1.0 + t % 3, &quota, 1,
                                       (double)(t * 3600)};
    uint64_t rs = (uint64_t)seed;
    int rack = 2; /* default levels: zone, block, rack, node */
    for (int j = 0; j < M; j++) {
        struct sched_job *jb = &jobs[j];
        char *id = ids + (size_t)j * 24;
        snprintf(id, 24, "%s/job-%06d", teamnames[j % 8], j);
        jb->id = id;
        jb->team = j % 8;
        int shape = (int)(rng_next(&rs) % 5);
        jb->cls = shape == 4 ? SCHED_TRAINING : SCHED_BATCH;
        jb->priority = (int32_t)(rng_next(&rs) % 4);
        jb->preemptible = 1;
        jb->gang = 1;
        jb->replicas = shape == 4 ? 4 : 1;
        jb->req.gpus = shape == 4 ? 8 : (1 << shape);
        jb->req.cpu_milli = 4000LL * jb->req.gpus;
        jb->req.mem_bytes = ((int64_t)32 << 30) * jb->req.gpus;
        if (rng_next(&rs) % 5) {
            jb->req.types[0] = products[rng_next(&rs) % 3];
            jb->req.ntypes = 1;
        }
        jb->topo_required = shape == 4 ? rack : -1;
        jb->topo_preferred = -1;
        jb->topo_spread = -1;
        jb->pool = -1;
        jb->enqueue_time = j;
    }
    struct sched_config cfg;
    sched_config_default(&cfg);
    struct sched_snapshot snap = {0};
    snap.config = &cfg;
    snap.now = M + 1;
    snap.nodes = nodes;
    snap.nnodes = N;
    snap.teams = teams;
    snap.nteams = 8;
    snap.jobs = jobs;
    snap.njobs = M;
    char err[256];
    int nrunning = 0;
    if (steady) {
        /* one untimed cycle; its admissions become running work (2 h old, so
         * preemptible), the rest keeps waiting: a busy cluster's cycle */
        if (sched_cycle(ctx, &snap, &res, err, sizeof(err))) {
            fprintf(stderr, "gangq bench sched: %s\n", err);
            goto out;
        }
        size_t nrep = 0;
        for (int i = 0; i < res->n; i++)
            if (res->d[i].kind == SCHED_ADMIT)
                nrep += (size_t)res->d[i].nrep;
        held = calloc(nrep + 1, sizeof(*held));
        if (!held) {
            fprintf(stderr, "gangq bench sched: out of memory\n");
            goto out;
        }
        size_t off = 0;
        for (int i = 0; i < res->n; i++) {
            const struct sched_decision *d = &res->d[i];
            if (d->kind != SCHED_ADMIT)
                continue;
            struct sched_job *jb = &jobs[d->job];
            memcpy(held + off, d->rep, (size_t)d->nrep * sizeof(*held));
            jb->state = SCHED_JOB_RUNNING;
            jb->placement = held + off;
            jb->nplaced = d->nrep;
            jb->admitted_at = snap.now - 7200;
            off += (size_t)d->nrep;
            nrunning++;
        }
        sched_result_free(res);
        res = NULL;
        /* urgent arrivals: 1 % of the waiting jobs now outrank everything */
        for (int j = 0; j < M; j += 100)
            if (jobs[j].state == SCHED_JOB_WAITING)
                jobs[j].priority = 10;
    }
    for (int k = 0; k < K; k++) {
        sched_result_free(res);
        res = NULL;
        double t0 = now_ms(), c0 = cpu_ms();
        int r = sched_cycle(ctx, &snap, &res, err, sizeof(err));
        times[k] = now_ms() - t0;
        times[K + k] = cpu_ms() - c0;
        if (r) {
            fprintf(stderr, "gangq bench sched: %s\n", err);
            goto out;
        }
    }
    qsort(times, (size_t)K, sizeof(double), cmp_double);
    qsort(times + K, (size_t)K, sizeof(double), cmp_double);
    double cycle_ms = times[K / 2];
    double cpu_cycle_ms = times[K + K / 2];
    size_t idbytes = 0;
    for (int j = 0; j < M; j++)
        idbytes += strlen(jobs[j].id) + 1;
    size_t total = (size_t)M * sizeof(struct sched_job) + idbytes + sched_mem_bytes(ctx) +
                   sched_result_bytes(res);
    int nwaiting = M - nrunning;
    double bytes_per_job = nwaiting ? (double)total / nwaiting : 0;
    int ndec = res->n;
    double dps = cycle_ms > 0 ? ndec / (cycle_ms / 1000.0) : 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t gpus_admitted = 0;
    for (int i = 0; i < res->n; i++)
        if (res->d[i].kind == SCHED_ADMIT)
            gpus_admitted += (int64_t)res->d[i].nrep * jobs[res->d[i].job].req.gpus;
    if (json) {
        printf("{\"nodes\":%d,\"gpus\":%lld,\"waiting\":%d,\"cycle_ms\":%.2f,"
               "\"cycle_cpu_ms\":%.2f,\"cycle_ms_min\":%.2f,\"cycle_ms_max\":%.2f,\"decisions\":%d,"
               "\"decisions_per_s\":%.0f,\"admitted\":%d,\"gpus_admitted\":%lld,"
               "\"bytes_per_job\":%.0f,\"maxrss_kb\":%ld,\"cycles\":%d,\"running\":%d,"
               "\"preempted\":%d}\n",
               N, (long long)N * 8, nwaiting, cycle_ms, cpu_cycle_ms, times[0], times[K - 1], ndec, dps,
               res->stats.admitted, (long long)gpus_admitted, bytes_per_job, ru.ru_maxrss, K,
               nrunning, res->stats.preempted);
    } else {
        printf("%-8s %-8s %-8s %-9s %-9s %-15s %-13s %-9s %-13s %-10s\n", "nodes", "gpus",
               "waiting", "cycle_ms", "cpu_ms", "decisions_per_s", "bytes_per_job", "admitted", "gpus_admitted",
               "maxrss_kb");
        printf("%-8d %-8lld %-8d %-9.1f %-9.1f %-15.0f %-13.0f %-9d %-13lld %-10ld\n", N,
               (long long)N * 8, nwaiting, cycle_ms, cpu_cycle_ms, dps, bytes_per_job, res->stats.admitted,
               (long long)gpus_admitted, ru.ru_maxrss);
        if (steady)
            printf("steady state: %d jobs already running, %d preemptions planned\n", nrunning,
                   res->stats.preempted);
        printf("(median of %d cycles, wall clock; cpu_ms is process CPU time: min %.1f ms, "
               "max %.1f ms wall; %d decisions; targets: "
               "cycle <= 200 ms, <= 2048 bytes/job)\n",
               K, times[0], times[K - 1], ndec);
    }
    rc = 0;
out:
    sched_result_free(res);
    sched_free(ctx);
    free(nodes);
    free(labels);
    free(names);
    free(jobs);
    free(ids);
    free(times);
    free(held);
    return rc;
}
