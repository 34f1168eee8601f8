/*
 * sim_cmd.c — `gangq simulate`: run a cluster file and a job trace through the
 * scheduling core on a virtual clock and print a report; or replay the openb
 * trace under the FGD protocol and compare with the published table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "gq.h"
#include "sim_fgd.h"
#include "sim_load.h"
#include "sim_openb.h"
#include "sim_report.h"
#include "sim_run.h"
#include "store.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gangq simulate CLUSTER.yaml JOBS.(yaml|csv) [--out DIR] [--db PATH] [--json [FILE.json]]\n"
            "                      [--seed N] [--until TIME] [--min-runtime TIME] [--grace TIME]\n"
            "       gangq simulate --openb WORKLOAD[,WORKLOAD...] --traces DIR [--seeds 42-51] [--json]\n"
            "                      [--policy gangq|fgd|bestfit|firstfit] [--typical-pct P]\n"
            "\n"
            "Runs the real scheduling core and store on a simulated cluster with a virtual clock\n"
            "and prints allocation, queueing delay, fragmentation, preemptions and the jobs that\n"
            "never ran (with the scheduler's explanation).\n"
            "  --out DIR     write DIR/report.json, DIR/report.svg and DIR/sim.db (replaced)\n"
            "  --db PATH     keep the run in this SQLite file (must not exist); query it with\n"
            "                `gangq audit --db PATH`\n"
            "  --json        print the JSON summary instead of the text report (FILE.json: write it)\n"
            "  --seed N      label of the run (the core is deterministic; traces carry no randomness)\n"
            "  --until TIME  stop the clock at TIME (seconds or 15m, 2h, 1d)\n"
            "  --min-runtime TIME  no preemption of work admitted less than TIME ago (core default 300 s)\n"
            "  --grace TIME  a preempted job's pods take TIME to stop, holding their GPUs (default 30 s)\n"
            "\n"
            "--openb replays the openb GPU trace (Weng et al., USENIX ATC 2023) one task at a time\n"
            "under the FGD protocol: WORKLOAD is one of the published workloads (default,\n"
            "multigpu20/30/40/50, gpushare40/60/80, gpuspec10/20/25, cpu050/100/200; \"all\" for\n"
            "the fourteen) or a path to an openb-format pod list; DIR (or $GANGQ_TRACES) is the\n"
            "csv folder of Alibaba's cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata),\n"
            "with fgd_unallocated_at_arrived100.csv, the paper's published means, beside it.\n"
            "The core is given the trace's task-shape distribution (every shape with its\n"
            "frequency; --typical-pct P keeps only FGD's \"typical pods\" covering P %% of tasks).\n");
}

static int mkdir_p(const char *dir)
{
    char tmp[1024];
    size_t n = gq_strlcpy(tmp, dir, sizeof(tmp));
    if (n >= sizeof(tmp))
        return GQ_ELIMIT;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST)
            return GQ_EIO;
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        return GQ_EIO;
    return GQ_OK;
}

static int join(char *out, size_t len, const char *dir, const char *file)
{
    int w = snprintf(out, len, "%s/%s", dir, file);
    return w < 0 || (size_t)w >= len ? GQ_ELIMIT : GQ_OK;
}

static int run_trace(const char *cpath, const char *tpath, const char *outdir, const char *db,
                     const char *json_file, int json_stdout, int64_t until, int64_t min_runtime,
                     int64_t grace, long long seed)
{
    struct sim_cluster c;
    struct sim_trace t;
    struct sim_result res;
    struct sim_report rep;
    struct sim_opts o;
    char err[512] = "", dbp[1100] = "", jp[1100] = "", sp[1100] = "";
    int rc, exitc = 1;
    memset(&c, 0, sizeof(c));
    memset(&t, 0, sizeof(t));
    memset(&res, 0, sizeof(res));
    memset(&rep, 0, sizeof(rep));
    if ((rc = sim_load_cluster(cpath, &c, err, sizeof(err))) ||
        (rc = sim_load_trace(tpath, &t, err, sizeof(err))) || (rc = sim_check(&c, &t, tpath, err, sizeof(err)))) {
        fprintf(stderr, "gangq simulate: %s\n", err);
        goto out;
    }
    if (outdir) {
        if (mkdir_p(outdir)) {
            fprintf(stderr, "gangq simulate: cannot create %s: %s\n", outdir, strerror(errno));
            goto out;
        }
        if (join(jp, sizeof(jp), outdir, "report.json") || join(sp, sizeof(sp), outdir, "report.svg") ||
            (!db && join(dbp, sizeof(dbp), outdir, "sim.db"))) {
            fprintf(stderr, "gangq simulate: --out path too long\n");
            goto out;
        }
        if (!db)
            store_remove_files(dbp); /* our own output from an earlier run */
    }
    if (db) {
        if (access(db, F_OK) == 0) {
            fprintf(stderr, "gangq simulate: %s exists; remove it or choose another --db path\n", db);
            goto out;
        }
        gq_strlcpy(dbp, db, sizeof(dbp));
    }
    if (json_file)
        gq_strlcpy(jp, json_file, sizeof(jp));
    memset(&o, 0, sizeof(o));
    o.db_path = dbp[0] ? dbp : NULL;
    o.min_runtime_s = min_runtime;
    o.grace_s = grace;
    o.until = until;
    o.progress = isatty(STDERR_FILENO);
    if ((rc = sim_run(&c, &t, &o, &res, err, sizeof(err)))) {
        fprintf(stderr, "gangq simulate: %s\n", err[0] ? err : gq_strerror(rc));
        goto out;
    }
    if ((rc = sim_report_compute(&c, &t, &res, &rep))) {
        fprintf(stderr, "gangq simulate: %s\n", gq_strerror(rc));
        goto out;
    }
    if (jp[0] && (rc = sim_report_json(jp, &c, &res, &rep, err, sizeof(err)))) {
        fprintf(stderr, "gangq simulate: %s\n", err);
        goto out;
    }
    if (sp[0]) {
        char title[600];
        snprintf(title, sizeof(title), "gangq simulate %.250s %.250s", cpath, tpath);
        if ((rc = sim_report_svg(sp, &res, &rep, title, err, sizeof(err)))) {
            fprintf(stderr, "gangq simulate: %s\n", err);
            goto out;
        }
    }
    if (json_stdout) {
        if ((rc = sim_report_json("/dev/stdout", &c, &res, &rep, err, sizeof(err)))) {
            fprintf(stderr, "gangq simulate: %s\n", err);
            goto out;
        }
    } else {
        sim_report_print(stdout, &c, &t, &res, &rep, cpath, tpath);
        if (seed >= 0)
            printf("\nseed %lld (the run is deterministic)\n", seed);
        if (jp[0] || sp[0] || dbp[0]) {
            printf("\nFILES");
            if (jp[0])
                printf("  %s", jp);
            if (sp[0])
                printf("  %s (allocation and queue over time)", sp);
            if (dbp[0])
                printf("\n       %s: the run's jobs, decisions and audit log; try `gangq audit --db %s`", dbp, dbp);
            printf("\n");
        }
    }
    exitc = 0;
out:
    sim_report_release(&rep);
    sim_result_release(&res);
    sim_trace_release(&t);
    sim_cluster_release(&c);
    return exitc;
}

static int parse_seeds(const char *s, long long *lo, long long *hi)
{
    const char *dash = strchr(s, '-');
    int64_t a, b;
    if (dash) {
        if (gq_parse_i64(s, (size_t)(dash - s), &a) || gq_parse_i64(dash + 1, (size_t)-1, &b))
            return GQ_EINVAL;
    } else {
        if (gq_parse_i64(s, (size_t)-1, &a))
            return GQ_EINVAL;
        b = a;
    }
    if (a < 0 || b < a || b - a > 1000)
        return GQ_EINVAL;
    *lo = a;
    *hi = b;
    return GQ_OK;
}

static int run_openb(const char *workloads, const char *traces, const char *seeds, int json,
                     enum sched_policy policy, const char *policy_name, double typical_pct)
{
    char dir[1024], nodes[1100], table[1100], list[1024];
    long long lo, hi;
    int exitc = 1;
    struct sim_openb o;
    if (parse_seeds(seeds, &lo, &hi)) {
        fprintf(stderr, "gangq simulate: --seeds: \"%s\" is not N or N-M (at most 1001 seeds)\n", seeds);
        return 2;
    }
    if (sim_openb_dir(traces, dir, sizeof(dir))) {
        if (dir[0])
            fprintf(stderr, "gangq simulate: --traces: %s is not a folder\n", dir);
        else
            fprintf(stderr, "gangq simulate: --openb needs the trace folder: --traces DIR or GANGQ_TRACES=DIR "
                            "(the csv folder of Alibaba's cluster-trace-gpu-v2023)\n");
        return 1;
    }
    if (join(nodes, sizeof(nodes), dir, "openb_node_list_gpu_node.csv") ||
        join(table, sizeof(table), dir, "fgd_unallocated_at_arrived100.csv") ||
        gq_strlcpy(list, workloads, sizeof(list)) >= sizeof(list))
        return 1;
    if (!strcmp(workloads, "all")) {
        size_t at = 0;
        for (int i = 0; i < SIM_OPENB_NWORKLOADS; i++) {
            int w = snprintf(list + at, sizeof(list) - at, "%s%s", i ? "," : "", sim_openb_workloads[i]);
            if (w < 0 || (size_t)w >= sizeof(list) - at)
                return 1;
            at += (size_t)w;
        }
    }
    if (!json) {
        printf("FGD replay (openb trace; Weng et al., \"Beware of Fragmentation: Scheduling GPU-Sharing\n"
               "Workloads with Fragmentation Gradient Descent\", USENIX ATC 2023)\n"
               "unallocated GPU %% at 100 %% arrived, mean +- sd over seeds %lld-%lld (lower is better);\n"
               "gangq policy: %s, shapes: %s; published figures from %s\n\n",
               lo, hi, policy_name, typical_pct > 0 && typical_pct < 100 ? "typical" : "all", table);
    }
    char *save = list;
    for (;;) {
        char *comma = strchr(save, ',');
        char *w = save;
        char path[1100], name[256], err[512] = "";
        struct sim_fgd_table_row row;
        double sum = 0, sum2 = 0, wall = 0;
        int n = 0, have_row;
        size_t tasks = 0, failed = 0;
        if (comma)
            *comma = '\0';
        memset(&o, 0, sizeof(o));
        if (sim_openb_resolve(dir, w, path, sizeof(path), name, sizeof(name)) ||
            sim_openb_load_nodes(&o, nodes, err, sizeof(err)) || sim_openb_load_pods(&o, path, err, sizeof(err))) {
            fprintf(stderr, "gangq simulate: %s\n", err[0] ? err : "bad workload path");
            sim_openb_release(&o);
            return 1;
        }
        for (long long s = lo; s <= hi; s++) {
            struct sim_fgd_run run;
            if (sim_fgd_replay(&o, (uint64_t)s, policy, typical_pct, &run, err, sizeof(err))) {
                fprintf(stderr, "gangq simulate: %s: seed %lld: %s\n", name, s, err);
                sim_openb_release(&o);
                return 1;
            }
            if (isnan(run.unalloc_pct)) {
                fprintf(stderr, "gangq simulate: %s: seed %lld: no event reached 100 %% arrived\n", name, s);
                continue;
            }
            sum += run.unalloc_pct;
            sum2 += run.unalloc_pct * run.unalloc_pct;
            wall += run.wall_s;
            tasks += run.tasks;
            failed += run.failed;
            n++;
        }
        double mean = n ? sum / n : NAN;
        double sd = n > 1 ? sqrt(fmax(0.0, (sum2 - sum * sum / n) / (n - 1))) : 0;
        have_row = sim_fgd_table_read(table, name, &row, err, sizeof(err)) == GQ_OK;
        if (json) {
            printf("{\"workload\":\"%s\",\"seeds\":\"%lld-%lld\",\"n_seeds\":%d,\"policy\":\"%s\","
                   "\"unallocated_pct_mean\":%.4f,\"unallocated_pct_sd\":%.4f,\"tasks_mean\":%.1f,"
                   "\"failed_mean\":%.1f,\"wall_s_per_seed\":%.3f",
                   name, lo, hi, n, policy_name, mean, sd, n ? (double)tasks / n : 0, n ? (double)failed / n : 0,
                   n ? wall / n : 0);
            if (have_row) {
                printf(",\"published\":{");
                for (int k = 0; k < row.npolicies; k++)
                    printf("%s\"%s\":{\"mean\":%.2f,\"sd\":%.2f}", k ? "," : "", row.policy[k], row.mean[k],
                           row.sd[k]);
                printf("}");
            }
            printf("}\n");
        } else {
            printf("%-28s  %-7s %5.2f +- %.2f  (%d seeds, %.0f tasks, %.0f failed per seed, %.2f s per seed)\n",
                   name, policy_name, mean, sd, n, n ? (double)tasks / n : 0, n ? (double)failed / n : 0, n ? wall / n : 0);
            if (have_row) {
                printf("%-28s ", "  published");
                for (int k = 0; k < row.npolicies; k++)
                    printf(" %s %.2f", row.policy[k], row.mean[k]);
                printf("\n");
                for (int k = 0; k < row.npolicies; k++)
                    if (!strcmp(row.policy[k], "FGD"))
                        printf("%-28s  %s %s FGD by %.2f points\n", "", policy_name,
                               mean <= row.mean[k] ? "at or below" : "ABOVE",
                               fabs(mean - row.mean[k]));
            } else {
                printf("  (no published row for %s)\n", name);
            }
        }
        fflush(stdout);
        sim_openb_release(&o);
        if (!comma)
            break;
        save = comma + 1;
    }
    exitc = 0;
    return exitc;
}

int cmd_simulate(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *out = NULL, *db = NULL, *json_file = NULL, *openb = NULL, *traces = NULL;
    const char *seeds = "42-51", *policy_name = "gangq";
    int npos = 0, json = 0;
    int64_t until = 0, min_runtime = -1, seed = -1, grace = -1;
    enum sched_policy policy = SCHED_POLICY_GANGQ;
    double typical_pct = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
            if (v && strlen(v) > 5 && !strcmp(v + strlen(v) - 5, ".json")) {
                json_file = v;
                i++;
            }
        } else if (!v && (!strcmp(a, "--out") || !strcmp(a, "--db") || !strcmp(a, "--seed") ||
                          !strcmp(a, "--seeds") || !strcmp(a, "--openb") || !strcmp(a, "--until") ||
                          !strcmp(a, "--traces") ||
                          !strcmp(a, "--min-runtime") || !strcmp(a, "--policy") || !strcmp(a, "--grace") ||
                          !strcmp(a, "--typical-pct"))) {
            fprintf(stderr, "gangq simulate: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--out")) {
            out = argv[++i];
        } else if (!strcmp(a, "--db")) {
            db = argv[++i];
        } else if (!strcmp(a, "--openb")) {
            openb = argv[++i];
        } else if (!strcmp(a, "--traces")) {
            traces = argv[++i];
        } else if (!strcmp(a, "--seeds")) {
            seeds = argv[++i];
        } else if (!strcmp(a, "--seed")) {
            if (gq_parse_i64(v, (size_t)-1, &seed) || seed < 0) {
                fprintf(stderr, "gangq simulate: --seed: \"%s\" is not a non-negative integer\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--until") || !strcmp(a, "--min-runtime") || !strcmp(a, "--grace")) {
            int64_t x;
            if (sim_parse_seconds(v, &x)) {
                fprintf(stderr, "gangq simulate: %s: \"%s\" is not a time (e.g. 90, 15m, 2h)\n", a, v);
                return 2;
            }
            if (!strcmp(a, "--until"))
                until = x;
            else if (!strcmp(a, "--grace"))
                grace = x;
            else
                min_runtime = x;
            i++;
        } else if (!strcmp(a, "--typical-pct")) {
            char *end;
            typical_pct = strtod(argv[++i], &end);
            if (*end || typical_pct < 0 || typical_pct > 100) {
                fprintf(stderr, "gangq simulate: --typical-pct: \"%s\" is not a percentage\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--policy")) {
            policy_name = argv[++i];
            if (!strcmp(policy_name, "gangq"))
                policy = SCHED_POLICY_GANGQ;
            else if (!strcmp(policy_name, "fgd"))
                policy = SCHED_POLICY_FGD;
            else if (!strcmp(policy_name, "bestfit"))
                policy = SCHED_POLICY_BESTFIT;
            else if (!strcmp(policy_name, "firstfit"))
                policy = SCHED_POLICY_FIRSTFIT;
            else {
                fprintf(stderr, "gangq simulate: --policy: \"%s\" is not gangq, fgd, bestfit or firstfit\n",
                        policy_name);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "gangq simulate: unknown option %s\n\n", a);
            usage(stderr);
            return 2;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "gangq simulate: unexpected argument \"%s\"\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (openb) {
        if (npos) {
            fprintf(stderr, "gangq simulate: --openb takes no CLUSTER/JOBS files\n");
            return 2;
        }
        return run_openb(openb, traces, seeds, json, policy, policy_name, typical_pct);
    }
    if (npos != 2) {
        usage(stderr);
        return 2;
    }
    return run_trace(pos[0], pos[1], out, db, json_file, json && !json_file, until, min_runtime, grace, seed);
}
