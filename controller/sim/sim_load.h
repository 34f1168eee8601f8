/*
 * sim_load.h — loaders for the simulator's cluster file (YAML) and job trace
 * (YAML or CSV, chosen by the file extension), with errors of the form
 * "FILE:LINE: FIELD: message" (FIELD is a path such as jobs[3].duration).
 *
 * Cluster YAML (top-level keys):
 *   nodes:  - {name, count, gpus, gpuType, gpuMemoryGiB, cpu | cpuMilli,
 *              memoryGiB | memoryMiB, zone, block, rack, nodesPerRack, pool,
 *              labels: {k: v}, taints: [{key, value, effect}]}
 *           (count N makes name-0..name-N-1; with nodesPerRack R the rack label
 *           becomes <rack>-<i/R>)
 *   pools:  - {name, nodeSelector: {k: v} (default gangq.io/pool=<name>),
 *              classes: [Inference|Batch|Training], protected, reserveGPUs}
 *   teams:  - {name, cohort, weight, quota: [{gpuType, gpus, borrowingLimit, lendingLimit}]}
 * Trace YAML:
 *   jobs:   - {name, count, every, arrival, team, class, priority, preemptible, gang,
 *              replicas, gpus | shares, gpuTypes, minMemoryGiB, cpu, memoryGiB,
 *              topology: {required, preferred, spread}, pool, duration, checkpoint,
 *              suspendAt, resumeAt}
 *           (count N with every S makes N jobs name-0.. arriving S seconds apart;
 *            times are seconds or strings like "90s", "15m", "2h", "1d")
 *   events: - {time, type: nodeFail | nodeRecover, node}
 * Trace CSV: a header row naming columns (any order; only name, arrival,
 *   duration required): name,arrival,team,class,priority,replicas,gpus,shares,
 *   gpu_types (a|b),min_mem_gib,cpu,memory_gib,required,preferred,spread,pool,
 *   duration,checkpoint,preemptible,suspend_at,resume_at, and event,node for
 *   node failure rows (event = nodeFail | nodeRecover, time in arrival).
 *
 * Ownership: the loaders fill caller-embedded structs (released with
 * sim_cluster_release / sim_trace_release, also on failure).
 */
#ifndef GQ_SIM_LOAD_H
#define GQ_SIM_LOAD_H

#include <stddef.h>

#include "sim_model.h"

int sim_load_cluster(const char *path, struct sim_cluster *c, char *err, size_t errlen);
int sim_load_cluster_mem(const char *text, size_t len, const char *name, struct sim_cluster *c,
                         char *err, size_t errlen);
int sim_load_trace(const char *path, struct sim_trace *t, char *err, size_t errlen);
int sim_load_trace_mem(const char *text, size_t len, const char *name, int csv,
                       struct sim_trace *t, char *err, size_t errlen);
/* Cross-check a trace against its cluster: teams and event nodes must exist.
 * trace_name labels messages. */
int sim_check(const struct sim_cluster *c, const struct sim_trace *t, const char *trace_name,
              char *err, size_t errlen);

/* A duration ("90", "15m", "1h30m"; gq_parse_duration) -> whole seconds. GQ_EINVAL when malformed. */
int sim_parse_seconds(const char *s, int64_t *out);

#endif
