/*
 * sim_run.h — the virtual-time simulation: a cluster, a job trace, the real
 * scheduling core (sched_cycle) and optionally the real store (a SQLite file
 * with jobs, decisions, usage history and audit entries).
 *
 * Semantics: time is integer seconds. Events at the same time are applied
 * together (node events, completions, suspends, resumes, stops, then
 * arrivals), then the core runs one cycle if anything changed and some job
 * waits. A preempted job keeps its capacity for the grace period, shown to the
 * core as terminating for its preemptor; then it stops, is requeued, and the
 * core runs again. With a grace of 0 the victims stop at once and the core
 * runs again at the same time (bounded). A job runs for `duration` seconds of admitted time; a
 * preempted, suspended or node-failed job loses its progress unless it
 * checkpoints. A non-gang job starts its clock with its first replica.
 * When jobs wait and some running job is still protected by the minimum
 * runtime, a wake-up is scheduled for when that protection ends.
 *
 * Ownership: sim_run fills a caller-embedded struct sim_result (arrays owned
 * by it; sim_result_release frees them, safe on a zeroed struct). Cluster and
 * trace are borrowed for the call.
 */
#ifndef GQ_SIM_RUN_H
#define GQ_SIM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "sim_model.h"

struct sim_opts {
    const char *db_path;   /* SQLite file for the store; NULL = no store */
    int64_t min_runtime_s; /* < 0: the core's default */
    int64_t until;         /* stop the clock here; 0 = until no event is left */
    int64_t grace_s;       /* a preempted job's pods take this long to stop (< 0: 30 s) */
    int progress;          /* progress line on stderr (callers pass isatty) */
    int64_t epoch_ms;      /* wall time of virtual t=0 for the store; 0 = 2026-01-01 */
};

/* State of the cluster right after the cycle(s) at time t. */
struct sim_sample {
    int64_t t;
    int64_t used_milli;  /* GPU milli held by running jobs */
    int64_t total_milli; /* GPU milli of ready nodes */
    int64_t free_milli;
    int64_t frag_milli;  /* free GPU milli the smallest waiting request cannot use */
    int32_t waiting;     /* jobs waiting (arrived, not running, not user-suspended) */
    int32_t running;
};

enum sim_final { SIM_F_NEVER_ARRIVED = 0, SIM_F_DONE, SIM_F_WAITING, SIM_F_RUNNING, SIM_F_SUSPENDED,
                 SIM_F_TIMED_OUT /* stopped at its maxRun (Failed) */ };

struct sim_job_out {
    int64_t first_start; /* -1 never ran */
    int64_t finish;      /* -1 not finished */
    int64_t waited;      /* seconds spent waiting (all spans, excluding user suspension) */
    int preemptions;
    int requeues;        /* node failures that requeued it */
    int64_t lost_gpu_s;  /* GPU-seconds of work lost to preemption/failure */
    int final;           /* enum sim_final */
    int timed_out;       /* its last run was stopped at its maxRun (Failed) */
    char reason[256];    /* the core's last explanation while it waited */
};

struct sim_result {
    struct sim_sample *samples;
    size_t nsamples, capsamples;
    struct sim_job_out *jobs; /* parallel to trace->jobs */
    size_t njobs;
    int64_t preemptions[SIM_NCLASS];  /* by victim class */
    int64_t lost_gpu_s[SIM_NCLASS];
    int64_t cycles;
    int64_t admits;
    int64_t node_failures;
    int64_t end_time;     /* virtual time of the last event */
    int64_t total_gpus;   /* GPUs in the cluster */
    double wall_s;        /* wall-clock seconds the run took */
};

int sim_run(const struct sim_cluster *c, const struct sim_trace *t, const struct sim_opts *o,
            struct sim_result *out, char *err, size_t errlen);
void sim_result_release(struct sim_result *r);

#endif
