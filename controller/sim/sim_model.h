/*
 * sim_model.h — the simulator's input model: a cluster (nodes, pools, teams)
 * and a job trace (jobs and cluster events), as loaded from the user's files.
 *
 * These are plain value types with fixed-size strings; they describe *what the
 * user asked to simulate* and know nothing of the scheduling core. sim_run.c
 * translates them into the core's snapshot types. Invariants after a
 * successful load (sim_load.c): every node has a unique name; counts are
 * non-negative; every job has replicas >= 1, exactly one of gpus/shares set
 * (or neither, a CPU-only job), duration >= 1 and arrival >= 0; jobs are sorted
 * by (arrival, file order); events are sorted by time.
 *
 * Ownership: struct sim_cluster and struct sim_trace own their arrays; release
 * them with sim_cluster_release / sim_trace_release (safe on a zeroed struct).
 */
#ifndef GQ_SIM_MODEL_H
#define GQ_SIM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define SIM_NAME_MAX 64
#define SIM_MAX_LABELS 12
#define SIM_MAX_TAINTS 6
#define SIM_MAX_TYPES 6
#define SIM_MAX_QUOTAS 6

enum sim_class { SIM_CLASS_INFERENCE = 0, SIM_CLASS_BATCH = 1, SIM_CLASS_TRAINING = 2, SIM_NCLASS = 3 };

const char *sim_class_name(int cls);
/* "Inference"/"Batch"/"Training" (case-insensitive); -1 when unknown. */
int sim_class_parse(const char *s);

struct sim_kv {
    char key[SIM_NAME_MAX];
    char value[SIM_NAME_MAX];
};

struct sim_taint {
    char key[SIM_NAME_MAX];
    char value[SIM_NAME_MAX];
    char effect[24]; /* NoSchedule | PreferNoSchedule | NoExecute */
};

struct sim_node {
    char name[SIM_NAME_MAX];
    char gpu_type[SIM_NAME_MAX]; /* "" for a CPU-only node */
    int gpus;
    int gpu_mem_gib;
    int64_t cpu_milli;
    int64_t mem_mib;
    struct sim_kv labels[SIM_MAX_LABELS]; /* includes hostname, rack, zone, pool */
    int nlabels;
    struct sim_taint taints[SIM_MAX_TAINTS];
    int ntaints;
    int line; /* source line, 0 if generated */
};

struct sim_pool {
    char name[SIM_NAME_MAX];
    struct sim_kv selector[4];
    int nselector;
    unsigned classes;   /* bit (1u << SIM_CLASS_x) per home class */
    int protected_pool; /* bool */
    int reserve_gpus;
};

struct sim_quota {
    char gpu_type[SIM_NAME_MAX]; /* "*" = any */
    int gpus;
    int borrowing_limit; /* -1 = unlimited */
    int lending_limit;   /* -1 = unlimited */
};

struct sim_team {
    char name[SIM_NAME_MAX];
    char cohort[SIM_NAME_MAX];
    int weight;
    struct sim_quota quota[SIM_MAX_QUOTAS];
    int nquota;
};

struct sim_cluster {
    struct sim_node *nodes;
    size_t nnodes, capnodes;
    struct sim_pool *pools;
    size_t npools;
    struct sim_team *teams;
    size_t nteams;
};

struct sim_job {
    char name[SIM_NAME_MAX];
    char team[SIM_NAME_MAX];
    char pool[SIM_NAME_MAX];
    int cls;            /* enum sim_class */
    int priority;
    int preemptible;    /* -1 default by class, 0/1 */
    int gang;           /* -1 default by class, 0/1 */
    int replicas;
    int gpus;           /* whole GPUs per replica (0 if shares or CPU-only) */
    int shares;         /* milli-GPU per replica, 1..999 (0 if whole) */
    char types[SIM_MAX_TYPES][SIM_NAME_MAX];
    int ntypes;
    int min_mem_gib;
    int64_t cpu_milli;  /* per replica */
    int64_t mem_mib;    /* per replica */
    char topo_required[16];  /* "" | node | rack | block | zone */
    char topo_preferred[16];
    char topo_spread[16];
    int64_t arrival;    /* seconds of virtual time */
    int64_t duration;   /* seconds of running needed to finish */
    int64_t max_run;    /* maxRun: the longest one admission may run (0 none); a job
                         * that needs longer is stopped then, Failed (spec.maxRunSeconds) */
    int checkpoint;     /* bool: keeps progress across preemption */
    int64_t suspend_at; /* -1 none: user sets spec.suspend=true */
    int64_t resume_at;  /* -1 none */
    int line;
};

enum sim_event_kind { SIM_EV_NODE_FAIL = 1, SIM_EV_NODE_RECOVER = 2 };

struct sim_event {
    int64_t time;
    int kind;
    char node[SIM_NAME_MAX];
    int line;
};

struct sim_trace {
    struct sim_job *jobs;
    size_t njobs, capjobs;
    struct sim_event *events;
    size_t nevents, capevents;
};

void sim_cluster_release(struct sim_cluster *c);
void sim_trace_release(struct sim_trace *t);

/* Append a zeroed element; returns NULL on allocation failure. */
struct sim_node *sim_cluster_add_node(struct sim_cluster *c);
struct sim_job *sim_trace_add_job(struct sim_trace *t);
struct sim_event *sim_trace_add_event(struct sim_trace *t);

/* Set label key=value on a node (replaces an existing key). GQ_ELIMIT when full. */
int sim_node_set_label(struct sim_node *n, const char *key, const char *value);
/* Value of label key, or NULL. */
const char *sim_node_label(const struct sim_node *n, const char *key);

/* Sort jobs by (arrival, original order) and events by time, stably. */
int sim_trace_sort(struct sim_trace *t);

/* Total GPU milli of one job (replicas x (gpus*1000 or shares)). */
int64_t sim_job_gpu_milli(const struct sim_job *j);

/* Well-known label keys (the design's default topology levels). */
#define SIM_LABEL_HOST "kubernetes.io/hostname"
#define SIM_LABEL_ZONE "topology.kubernetes.io/zone"
#define SIM_LABEL_BLOCK "topology.gangq.io/block"
#define SIM_LABEL_RACK "topology.gangq.io/rack"
#define SIM_LABEL_POOL "gangq.io/pool"

#endif
