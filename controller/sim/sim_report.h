/*
 * sim_report.h — figures computed from a finished run (struct sim_result) and
 * the inputs: time-weighted GPU allocation and queue length (overall and per
 * time bucket), queueing delay by class and by team (mean, p50, p95, p99,
 * max; nearest-rank percentiles), fragmentation while jobs wait, preemptions
 * by victim class, and the jobs that never ran grouped by the core's
 * explanation. Rendered as a text table, a JSON document and an SVG plot.
 *
 * Invariant: every figure is derived from the samples and per-job outcomes
 * of the run; nothing is assumed.
 *
 * Ownership: sim_report_compute fills a caller-embedded struct sim_report that
 * owns its arrays (sim_report_release); it borrows nothing after returning.
 */
#ifndef GQ_SIM_REPORT_H
#define GQ_SIM_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim_model.h"
#include "sim_run.h"

#define SIM_REPORT_BUCKETS 12
#define SIM_REPORT_REASONS 8

struct sim_delay {
    int64_t n;
    double mean;
    int64_t p50, p95, p99, max;
};

struct sim_reason {
    char text[256];
    int64_t count;
    char example[SIM_NAME_MAX];
};

struct sim_report {
    int64_t jobs, done, running, waiting, suspended, never_arrived, never_ran;
    int64_t timed_out; /* stopped at their maxRun (Failed) */
    int64_t start, end;          /* time span the time-weighted figures cover */
    double alloc_mean_pct, alloc_peak_pct;
    double queue_mean;
    int64_t queue_max;
    double frag_mean_gpus;       /* while jobs wait */
    double frag_mean_pct_free;   /* of free GPUs, while jobs wait */
    int64_t bucket_start[SIM_REPORT_BUCKETS + 1];
    double bucket_alloc_pct[SIM_REPORT_BUCKETS];
    double bucket_queue[SIM_REPORT_BUCKETS];
    int nbuckets;
    struct sim_delay all, by_class[SIM_NCLASS];
    int64_t jobs_by_class[SIM_NCLASS];
    struct sim_delay *by_team;   /* parallel to cluster teams (+1: jobs without a team) */
    size_t nteams;
    int64_t preemptions[SIM_NCLASS];
    double lost_gpu_h[SIM_NCLASS];
    size_t top_preempted[3]; /* trace indices of the most preempted jobs */
    int ntop_preempted;
    struct sim_reason reasons[SIM_REPORT_REASONS];
    int nreasons;
    int64_t total_gpus;
};

/* Nearest-rank statistics of v[0..n) (sorted in place). */
void sim_delay_compute(int64_t *v, size_t n, struct sim_delay *out);

int sim_report_compute(const struct sim_cluster *c, const struct sim_trace *t,
                       const struct sim_result *res, struct sim_report *rep);
void sim_report_release(struct sim_report *rep);

/* Human-readable report. files (may be NULL) lists what was written. */
void sim_report_print(FILE *f, const struct sim_cluster *c, const struct sim_trace *t,
                      const struct sim_result *res, const struct sim_report *rep,
                      const char *cluster_path, const char *trace_path);
int sim_report_json(const char *path, const struct sim_cluster *c, const struct sim_result *res,
                    const struct sim_report *rep, char *err, size_t errlen);
int sim_report_svg(const char *path, const struct sim_result *res, const struct sim_report *rep,
                   const char *title, char *err, size_t errlen);

/* "45s", "12m30s", "3h05m", "2d04h" */
void sim_fmt_dur(char *buf, size_t len, int64_t s);

#endif
