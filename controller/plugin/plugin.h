/*
 * plugin.h — `kubectl gangq`: the queue, a job's wait explanation, team and pool usage,
 * suspend/resume/drain-team, from the user's kubeconfig.
 *
 * Layers:
 *   plugin_render.c — pure functions: API objects (cJSON) -> rows, queue order and
 *                     positions, quota arithmetic, node free GPUs, tables, YAML. No I/O,
 *                     no clock (the caller passes `now`). Unit-tested (tests/unit/test_plugin.c).
 *   plugin_fetch.c  — synchronous GET/LIST/PATCH over controller/kube's async client
 *                     (a private libev loop run until the one request ends) and the
 *                     error texts for 403/404.
 *   plugin_main.c   — the CLI (cmd_kubectl_gangq).
 *
 * Ownership: cJSON objects passed in are borrowed for the call. Structs filled here
 * hold copies (bounded char arrays); nothing returned points into the cJSON.
 * Arrays returned through `**out` are heap blocks owned by the caller (free()).
 */
#ifndef GQ_PLUGIN_H
#define GQ_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "buf.h"

#define PL_NS_MAX 64
#define PL_NAME_MAX 254
#define PL_MSG_MAX 1024
#define PL_GPU_LABEL "nvidia.com/gpu.product"
#define PL_GPU_RESOURCE "nvidia.com/gpu"

/* ---------------------------------------------------------------- jobs */

struct pl_job {
    char ns[PL_NS_MAX];
    char name[PL_NAME_MAX];
    char team[PL_NAME_MAX];     /* status.team ("" when not yet known) */
    char cls[16];               /* spec.class ("Batch" default) */
    char state[16];             /* status.state ("" before the controller saw it) */
    char reason[64];            /* status.waitReason */
    char message[PL_MSG_MAX];   /* status.message */
    char gpus[48];              /* "8 (2x4)", "500m", "2x500m", "-" */
    char types[256];            /* spec.gpu.types joined by ",", "" = any */
    int replicas;
    int count;                  /* spec.gpu.count (0 when shares or CPU-only) */
    int shares;                 /* spec.gpu.shares, milli-GPU */
    int64_t need_milli;         /* replicas x (count*1000 or shares) */
    int suspend;                /* spec.suspend */
    int priority;               /* status.priority, else spec.priority, else 0 */
    double created;             /* metadata.creationTimestamp (epoch s), 0 unknown */
    double enqueued;            /* status.enqueueTime, else created */
    int64_t arrival;            /* status.arrival, -1 absent */
    int position;               /* status.position published, -1 absent */
    int gpos;                   /* status.globalPosition published, -1 absent */
    /* set by pl_queue_order */
    int team_pos;               /* published or estimated team position (1-based) */
    int team_pos_est;           /* 1: estimated (beyond the published head) */
};

/* Decode one GPUJob. Missing fields take the defaults above. GQ_EINVAL when
 * metadata.name is absent. */
int pl_job_from_json(const cJSON *obj, struct pl_job *out);
/* Waiting: state "" (new), Queued or Preempted, and not suspended. */
int pl_job_waiting(const struct pl_job *j);
/* Finished: Succeeded or Failed. */
int pl_job_finished(const struct pl_job *j);

/* Fill position/gpos (when the job's own status lacks them) from Teams'
 * status.pendingHead items [{name, namespace, position, globalPosition}], and
 * team (when "") from the Team whose spec.namespaces lists the namespace (the
 * oldest by creationTimestamp, then name). teams may be NULL. */
void pl_jobs_apply_teams(struct pl_job *jobs, int n, const cJSON *teams);

/* Sort into admission order: published global positions first (ascending); then the
 * rest by priority desc, enqueue (or creation) time, arrival, namespace/name.
 * Then number each team's jobs: a published position is kept, the others get the
 * previous one + 1 marked estimated. */
void pl_queue_order(struct pl_job *jobs, int n);

/* Human age: "42s", "5m", "3h", "2d" ("-" when t is 0). */
void pl_age(double now, double t, char *out, size_t len);

/* ---------------------------------------------------------------- tables */

/* A text table like kubectl's: columns padded to the widest cell, 3 spaces apart,
 * the last column not padded. Cells are copied. */
struct pl_table {
    int ncol;
    int nrows;   /* header included */
    int cap;
    char **cells; /* nrows * ncol, owned */
};
int pl_table_init(struct pl_table *t, int ncol, const char *const *header);
int pl_table_add(struct pl_table *t, const char *const *cells);
int pl_table_render(const struct pl_table *t, const char *indent, struct gq_buf *out);
void pl_table_release(struct pl_table *t);

/* The queue table (columns POS TEAM-POS TEAM NAMESPACE/NAME GPUS CLASS AGE
 * WAIT-REASON MESSAGE) of the jobs in the order given. */
int pl_render_queue(const struct pl_job *jobs, int n, double now, struct gq_buf *out);
/* The same as JSON (caller owns the array). */
cJSON *pl_queue_json(const struct pl_job *jobs, int n, double now);

/* ---------------------------------------------------------------- quota */

/* One Team quota entry (spec.quota[i]) with what it uses. Milli-GPUs. */
struct pl_qentry {
    char team[PL_NAME_MAX];
    char cohort[PL_NAME_MAX];   /* "" = none (the entry lends and borrows nothing) */
    char type[64];              /* gpuType, "*" for any */
    int64_t nominal;
    int64_t borrow_limit;       /* -1 = unlimited */
    int64_t lend_limit;         /* -1 = the whole nominal */
    int64_t used;
    int used_known;             /* 1: status.gpuTypes or pods gave `used` */
};

/* The arithmetic the controller uses (sched_quota.c): entries of one cohort and one
 * gpuType form a group; each lends min(lendingLimit, nominal) and may borrow what the
 * group lends and does not use itself, up to its borrowingLimit. */
struct pl_quota {
    int64_t nominal, used;
    int64_t borrowed;           /* max(0, used - nominal) */
    int64_t may_borrow;         /* borrowable now in the cohort (0 without a cohort) */
    int64_t available;          /* nominal - used + may_borrow, at least 0 */
    int64_t cohort_lendable;    /* the group's lendable sum (other teams' and its own) */
};
/* Compute for entries[idx] among all entries (every team's). */
void pl_quota_compute(const struct pl_qentry *entries, int n, int idx, struct pl_quota *out);

/* The quota entries of every Team in `teams` (caller frees *out). used comes from
 * status.gpuTypes[{gpuType, used}] when the Team publishes it; else from the pods
 * (see pl_pods_charge) when nodes/pods are given; else used_known = 0. */
struct pl_nodeinfo;
int pl_qentries_build(const cJSON *teams, const struct pl_nodeinfo *nodes, int nnodes,
                      const cJSON *pods, struct pl_qentry **out, int *nout);

/* ---------------------------------------------------------------- nodes */

struct pl_nodeinfo {
    char name[PL_NAME_MAX];
    char type[64];              /* nvidia.com/gpu.product label, "" none */
    int64_t alloc;              /* allocatable nvidia.com/gpu, milli */
    int64_t used;               /* gangq pods' GPUs on it, milli */
    int pods;                   /* gangq pods on it */
    int unschedulable;          /* spec.unschedulable */
};
/* A pod's GPUs in milli: nvidia.com/gpu requests of its containers x 1000, else the
 * gangq.io/gpu-milli annotation; 0 for finished pods (Succeeded/Failed). */
int64_t pl_pod_gpu_milli(const cJSON *pod);
/* Nodes with their gangq pods' usage (caller frees *out). pods may be NULL. */
int pl_nodes_build(const cJSON *nodes, const cJSON *pods, struct pl_nodeinfo **out, int *nout);
/* Sort nodes for "closest to fitting" a job needing `per_replica` milli on each of
 * its nodes: nodes of the job's types (types "" = any GPU node) first, by free desc,
 * then name. Returns how many qualify (they come first). */
int pl_nodes_closest(struct pl_nodeinfo *nodes, int n, const char *types);

/* ---------------------------------------------------------------- output */

/* YAML (block style, strings double-quoted) of a cJSON tree. */
int pl_yaml_emit(const cJSON *v, struct gq_buf *out);
/* Milli-GPU as text: "8", "0.5", "12.25". */
void pl_fmt_milli(int64_t m, char *out, size_t len);

/* ---------------------------------------------------------------- fetch */

struct pl_client;
/* Loads the kubeconfig (path NULL = $KUBECONFIG, else ~/.kube/config), context
 * (NULL = current) and creates the client. err says what failed. */
struct pl_client *pl_client_new(const char *kubeconfig, const char *context, char *err,
                                size_t errlen);
void pl_client_free(struct pl_client *pc);
/* The context's namespace ("default"). */
const char *pl_client_namespace(const struct pl_client *pc);
/* Ask run loops to stop (from a signal watcher): the request in progress ends with
 * GQ_EIO and "interrupted". */
void pl_client_interrupt(struct pl_client *pc);
int pl_client_interrupted(const struct pl_client *pc);
/* Run the loop for `seconds` (or until interrupted). */
void pl_client_sleep(struct pl_client *pc, double seconds);

/* One request. method "GET" or "PATCH" (merge patch; body required). On success
 * *out (may be NULL) gets the parsed body (caller owns). On failure err gets a
 * sentence for the user: 403 names the verb and resource, 404 names the object. */
struct pl_what {
    const char *verb;      /* "get", "list", "patch" */
    const char *resource;  /* "gpujobs.gangq.io", "nodes" */
    const char *ns;        /* NULL cluster-scoped / all namespaces */
    const char *name;      /* NULL for a list */
};
int pl_request(struct pl_client *pc, const char *method, const char *path, const cJSON *body,
               const struct pl_what *w, cJSON **out, long *status, char *err, size_t errlen);
/* LIST all pages of a collection path (query may hold labelSelector); *items owns the
 * concatenated items. */
int pl_list(struct pl_client *pc, const char *path, const char *label_selector,
            const struct pl_what *w, cJSON **items, long *status, char *err, size_t errlen);
/* GQ_ENOTFOUND with "gangq CRDs not installed (gpujobs.gangq.io not found)" when the
 * API server does not serve gangq.io/v1alpha1 gpujobs. */
int pl_check_crds(struct pl_client *pc, char *err, size_t errlen);

/* The error text for an HTTP failure: 403 names the verb, resource and namespace, 404
 * of a named object "gpujob NS/NAME not found" (plugin_render.c, pure). */
void pl_http_error_text(long status, const char *body, const struct pl_what *w, char *err,
                        size_t errlen);

#endif
