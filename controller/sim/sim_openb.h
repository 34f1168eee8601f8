/*
 * sim_openb.h — the openb trace (Alibaba cluster-trace-gpu-v2023, as used by
 * Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
 * Fragmentation Gradient Descent", USENIX ATC 2023) and the replay protocol's
 * bookkeeping: loading node and pod lists, building the seeded workload
 * (shuffle + inflation with early stop), binning allocation by arrived %, and
 * reading the published comparison table.
 *
 * Nothing here places a task: placement is the scheduling core's job (see
 * sim_fgd.c). Data is read from the shared traces folder at run time, never
 * copied into the repository.
 *
 * Ownership: struct sim_openb is embedded (sim_openb_release frees its
 * arrays). sim_openb_workload returns a heap array the caller frees.
 */
#ifndef GQ_SIM_OPENB_H
#define GQ_SIM_OPENB_H

#include <stddef.h>
#include <stdint.h>

struct sim_openb_node {
    char name[40];
    int64_t cpu_milli;
    int64_t mem_mib;
    int gpus;
    char model[24];
};

struct sim_openb_pod {
    char name[48];
    int64_t cpu_milli;
    int64_t mem_mib;
    int num_gpu;   /* 0..8 */
    int gpu_milli; /* per GPU: < 1000 is a share of one GPU (num_gpu = 1) */
    char spec[96]; /* acceptable GPU models separated by '|', "" = any */
};

struct sim_openb {
    struct sim_openb_node *nodes;
    size_t nnodes;
    struct sim_openb_pod *pods;
    size_t npods;
    int64_t node_cpu_milli, node_gpu_milli; /* cluster totals */
    int64_t pod_cpu_milli, pod_gpu_milli;   /* workload totals */
};

/* Deterministic PRNG (xoshiro256** seeded through splitmix64). Embedded. */
struct sim_rng {
    uint64_t s[4];
};
void sim_rng_seed(struct sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(struct sim_rng *r);
/* Uniform in [0, n), n > 0, without modulo bias. */
uint64_t sim_rng_below(struct sim_rng *r, uint64_t n);

/* Resolve the traces folder: given (--traces), else $GANGQ_TRACES; nothing
 * else is guessed. Writes the folder path into out (borrowed input). Returns
 * GQ_ENOTFOUND when neither is set or it is not a folder. */
int sim_openb_dir(const char *given, char *out, size_t outlen);
/* The published workloads, in the paper's table order. */
#define SIM_OPENB_NWORKLOADS 14
extern const char *const sim_openb_workloads[SIM_OPENB_NWORKLOADS];

/* A name of sim_openb_workloads -> <dir>/openb_pod_list_<w>.csv; any
 * other string is taken as a path. name_out gets the workload's short name
 * (file stem, e.g. "openb_pod_list_default"). */
int sim_openb_resolve(const char *dir, const char *workload, char *path, size_t pathlen,
                      char *name_out, size_t namelen);

int sim_openb_load_nodes(struct sim_openb *o, const char *path, char *err, size_t errlen);
int sim_openb_load_pods(struct sim_openb *o, const char *path, char *err, size_t errlen);
void sim_openb_release(struct sim_openb *o);

/* GPU milli a pod requests in total (num_gpu x gpu_milli). */
int64_t sim_openb_pod_gpu_milli(const struct sim_openb_pod *p);

/* The replay order, as indices into o->pods: the trace's pods in a seeded
 * shuffled order, then ceil(n*ratio)-n inflation pods drawn uniformly with
 * replacement, stopping at the first draw that would take total requested CPU
 * or GPU above the cluster's total. *order is malloc'ed; *ninflated gets the
 * number of inflation pods actually added. */
int sim_openb_workload(const struct sim_openb *o, uint64_t seed, double ratio, size_t **order,
                       size_t *norder, size_t *ninflated);

/* The replay order of the published experiments (simulator.go with
 * "-tune 1.3 -tuneseed S --shuffle-pod=true", workload inflation off): the
 * trace's pods in a seeded shuffled order, then "workload tuning" to ratio x
 * the cluster's GPU capacity. When the trace requests more GPU than that,
 * pods drawn uniformly at random are removed (tuneDownPods) until it does not;
 * otherwise pods drawn uniformly with replacement from the trace are appended
 * (tuneUpPods) until the next draw's per-GPU milli would take the total above
 * the target (the original compares the per-GPU milli, not num_gpu x milli,
 * and so may overshoot by a multi-GPU task; kept for fidelity). *order is
 * malloc'ed; *nadded / *nremoved count the tuned pods. */
int sim_openb_workload_tune(const struct sim_openb *o, uint64_t seed, double ratio, size_t **order,
                            size_t *norder, size_t *nadded, size_t *nremoved);

/* Bin a run per merge_alloc_discrete.py: arrived% = round(arrived/total*100)
 * (ties to even), alloc% = used/total*100 rounded to 2 decimals; bin X is the
 * mean alloc% of events whose arrived% is X, or if none, of events with
 * arrived% in [X-1, X+1]. have[X] = 0 when no event qualifies. */
#define SIM_OPENB_BINS 131
void sim_openb_bin(const int64_t *arrived, const int64_t *used, size_t n, int64_t total_milli,
                   double alloc[SIM_OPENB_BINS], int have[SIM_OPENB_BINS]);

/* The published table (fgd_unallocated_at_arrived100.csv). */
#define SIM_FGD_MAX_POLICIES 8
struct sim_fgd_table_row {
    char workload[64];
    int npolicies;
    char policy[SIM_FGD_MAX_POLICIES][32];
    double mean[SIM_FGD_MAX_POLICIES];
    double sd[SIM_FGD_MAX_POLICIES];
};
/* Find the row for workload (file stem); GQ_ENOTFOUND when absent. */
int sim_fgd_table_read(const char *path, const char *workload, struct sim_fgd_table_row *row,
                       char *err, size_t errlen);

#endif
