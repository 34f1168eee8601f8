/*
 * api.h — the gangq.io/v1alpha1 API: GPUJob, Team, GPUPool (and the
 * scheduling.k8s.io/v1 PriorityClass value gangq resolves).
 *
 * Role: turn Kubernetes JSON objects (cJSON trees) into plain C structs
 * (decode), fill defaults, validate with every problem reported at its field
 * path, and encode status for status patches. No I/O, no clock, no globals.
 *
 * Invariants:
 *  - Strings are fixed-size, NUL-terminated arrays; decode refuses values that
 *    do not fit (with a field error) rather than truncating silently.
 *  - Decode never stops at the first problem: it records every problem in a
 *    struct api_errors (bounded, API_MAX_ERRORS; the rest are counted in
 *    `dropped`) and fills what it can. A decode with errs->n == 0 followed by
 *    api_*_validate with errs->n == 0 is a well-formed object.
 *  - Unknown fields in spec are errors (the API server prunes them, so this
 *    only fires for hand-written manifests — `gangq validate`); unknown fields
 *    in metadata are ignored; `status` is ignored by the spec decoders.
 *  - Tri-state booleans (api_bool) are API_UNSET until api_gpujob_default.
 *
 * Ownership: struct api_gpujob owns `template` (a cJSON copy of
 * spec.template, may be NULL) and the optional parts of its spec, each
 * allocated only when present and sized to what was decoded (NULL / 0 when
 * absent): spec.gpu.types, spec.node_selector, spec.tolerations and
 * spec.node_affinity; and the spec's names (spec.team, ...: "" when absent,
 * never NULL). Release with api_gpujob_release (embedded) or
 * api_gpujob_free (heap). Use api_gpujob_copy to duplicate, never a plain
 * struct assignment or memcpy (the copy would share, and later free twice,
 * those parts); a plain assignment is only a move when the source is then
 * dropped without release. Teams, pools and priority classes own no heap
 * memory.
 * Status structs for encode borrow the node-name pointers in admission.nodes
 * from the caller for the duration of the call. Every cJSON returned by an
 * *_encode function is owned by the caller.
 */
#ifndef GQ_API_H
#define GQ_API_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "gq.h"

#define API_GROUP "gangq.io"
#define API_VERSION "v1alpha1"
#define API_GROUP_VERSION "gangq.io/v1alpha1"

#define API_NAME_MAX 254      /* DNS subdomain (253) + NUL */
#define API_NS_MAX 64         /* DNS label (63) + NUL */
#define API_UID_MAX 64
#define API_TIME_MAX 32       /* RFC 3339 "2026-01-02T03:04:05Z" */
#define API_LABEL_KEY_MAX 128 /* gangq's bound on label keys (k8s allows 317) */
#define API_LABEL_VAL_MAX 64  /* label value (63) + NUL */
#define API_LEVEL_MAX 32      /* topology level name */
#define API_MAX_LEVELS 8
#define API_MAX_GPU_TYPES 8
#define API_MAX_SELECTOR 8
#define API_MAX_TOLERATIONS 8
#define API_MAX_AFFINITY_TERMS 8   /* required nodeSelectorTerms */
#define API_MAX_AFFINITY_EXPRS 16  /* matchExpressions + matchFields, all terms together */
#define API_MAX_AFFINITY_VALUES 32 /* values, all expressions together */
#define API_MAX_NAMESPACES 32
#define API_MAX_QUOTA 16
#define API_MAX_CONDITIONS 8
#define API_MSG_MAX 512
#define API_MAX_ERRORS 32
#define API_ERR_PATH_MAX 160
#define API_ERR_MSG_MAX 256

/* Validation bounds. */
#define API_GPU_COUNT_MAX 16
#define API_GPU_SHARES_MAX 999
#define API_REPLICAS_MAX 1024
/* Longest spec.ttlSecondsAfterFinished: a year, s. */
#define API_TTL_MAX 31536000
/* Longest spec.maxRunSeconds: a year, s. */
#define API_MAX_RUN_MAX 31536000
#define API_MIN_MEMORY_GIB_MAX 1024
#define API_PRIORITY_MIN (-2147483647 - 1)
#define API_PRIORITY_MAX 1000000000 /* user priorities, as Kubernetes */
#define API_QUOTA_GPUS_MAX 1000000
#define API_WEIGHT_MAX 1000
#define API_RESERVE_MAX 100000
/* GPUJob and Team names are label values on gangq's pods (gangq.io/job,
 * gangq.io/team), so at most 63 characters; pod names "<job>-<attempt>-<replica>"
 * (+ "-g<gen>") and Event names "<name>.<hex>" then stay far below 253. */
#define API_JOB_NAME_MAX 63
#define API_DEFAULT_MAX_PRIORITY 1000 /* Team spec.maxPriority when not given */
#define API_MAX_PRIORITY_CLASSES 16

/* ---- errors ---------------------------------------------------------- */

struct api_error {
    char path[API_ERR_PATH_MAX]; /* "spec.gpu.count", "" for the whole object */
    char msg[API_ERR_MSG_MAX];   /* "must be 1..16, got 0" */
};

struct api_errors {
    int n;       /* entries in e[] */
    int dropped; /* problems beyond API_MAX_ERRORS */
    struct api_error e[API_MAX_ERRORS];
};

void api_errors_init(struct api_errors *errs);
void api_errors_add(struct api_errors *errs, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "path: msg" for entry i (or just msg when path is empty) into buf. */
void api_error_format(const struct api_errors *errs, int i, char *buf, size_t len);
/* Index of the first error with this exact path, or -1. */
int api_errors_find(const struct api_errors *errs, const char *path);

/* ---- shared pieces --------------------------------------------------- */

enum api_bool { API_UNSET = -1, API_FALSE = 0, API_TRUE = 1 };

enum api_class { API_CLASS_NONE = 0, API_CLASS_INFERENCE, API_CLASS_BATCH, API_CLASS_TRAINING };
#define API_CLASS_COUNT 4
const char *api_class_name(enum api_class c); /* "Inference", ..., "" for NONE */
int api_class_parse(const char *s, enum api_class *out); /* 0 or GQ_EINVAL */

enum api_state {
    API_STATE_NONE = 0,
    API_STATE_QUEUED,
    API_STATE_ADMITTED,
    API_STATE_RUNNING,
    API_STATE_SUSPENDED,
    API_STATE_PREEMPTED,
    API_STATE_SUCCEEDED,
    API_STATE_FAILED,
};
const char *api_state_name(enum api_state s); /* "Queued", ..., "" for NONE */
int api_state_parse(const char *s, enum api_state *out);

struct api_meta {
    char name[API_NAME_MAX];
    char namespace[API_NS_MAX]; /* "" for cluster-scoped objects */
    char uid[API_UID_MAX];
    char resource_version[API_UID_MAX];
    int64_t generation;
    char creation_timestamp[API_TIME_MAX];
    int deleting; /* metadata.deletionTimestamp is set */
};

struct api_kv {
    char key[API_LABEL_KEY_MAX];
    char value[API_LABEL_VAL_MAX];
};

struct api_toleration {
    char key[API_LABEL_KEY_MAX];
    char op[8];                   /* "Equal" (default) or "Exists" */
    char value[API_LABEL_VAL_MAX];
    char effect[24];              /* "", NoSchedule, PreferNoSchedule, NoExecute */
    int has_seconds;
    int64_t seconds;
};

/* Topology levels known to the controller: name and node label. */
struct api_config {
    int nlevels; /* ordered widest first: zone, block, rack, node */
    char levels[API_MAX_LEVELS][API_LEVEL_MAX];
    char labels[API_MAX_LEVELS][API_LABEL_KEY_MAX];
};
/* zone=topology.kubernetes.io/zone, block=topology.gangq.io/block,
 * rack=topology.gangq.io/rack, node=kubernetes.io/hostname */
void api_config_default(struct api_config *cfg);
/* Index of level name in cfg (0 = widest), or -1. */
int api_config_level(const struct api_config *cfg, const char *name);

/* ---- GPUJob ---------------------------------------------------------- */

struct api_gpu {
    int present;     /* spec.gpu given; 0 = CPU-only job */
    int has_count;   /* spec.gpu.count given (so an explicit 0 is reported) */
    int has_shares;
    int32_t count;   /* whole GPUs per replica (0 when shares is used) */
    int32_t shares;  /* milli-GPU of one shared GPU, 1..999 (0 when count is used) */
    int ntypes;      /* acceptable products, e.g. "NVIDIA-H100-80GB-HBM3"; 0 = any */
    /* types[0 .. ntypes): owned by the job, NULL when ntypes is 0
     * (at most API_MAX_GPU_TYPES) */
    char (*types)[API_LABEL_VAL_MAX];
    int32_t min_memory_gib; /* per GPU; 0 = no minimum */
};

struct api_topology {
    char required[API_LEVEL_MAX];  /* "" = none */
    char preferred[API_LEVEL_MAX];
    char spread[API_LEVEL_MAX];
};

/* Required node affinity of the pod template
 * (spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution):
 * a node must match one term; a term matches when every expression does. Only
 * the required part is decoded: preferredDuringScheduling... and pod
 * (anti-)affinity are accepted and ignored by placement. */
enum api_node_op { /* same order as the core's enum sched_match_op */
    API_OP_IN = 0, API_OP_NOT_IN, API_OP_EXISTS, API_OP_DOES_NOT_EXIST, API_OP_GT, API_OP_LT
};

struct api_node_expr {
    char key[API_LABEL_KEY_MAX]; /* label key; "metadata.name" when field */
    int field;                   /* 1: from matchFields (the node name, In/NotIn) */
    enum api_node_op op;
    int v0, nvalues;             /* its values: values[v0 .. v0 + nvalues) of the affinity */
};

struct api_node_term {
    int x0, nexprs; /* exprs[x0 .. x0 + nexprs) of the affinity; 0 = matches no node */
};

/* One allocation (api_gpujob_release frees it): the header, then the three
 * arrays the pointers address, each sized to what was decoded. nterms >= 1
 * (a job without required node affinity has node_affinity NULL); at most
 * API_MAX_AFFINITY_TERMS terms, API_MAX_AFFINITY_EXPRS expressions and
 * API_MAX_AFFINITY_VALUES values. */
struct api_node_affinity {
    int nterms, nexprs, nvalues;
    struct api_node_term *terms;       /* [nterms] */
    struct api_node_expr *exprs;       /* [nexprs], all terms together */
    char (*values)[API_LABEL_VAL_MAX]; /* [nvalues], all expressions together */
};

/* The spec's names (team, priority_class_name, pool, team_requested) are
 * never NULL: "" when not given (a static empty string), else a copy the job
 * owns (api_gpujob_release frees it). They are const so that only gpujob.c's
 * setter writes them: a decoded job waiting in the controller holds the
 * names it has, not four 254-byte buffers (thousands of jobs wait decoded). */
struct api_gpujob_spec {
    const char *team;             /* "" until defaulted from the namespace */
    enum api_class class;         /* NONE until defaulted (Batch) */
    const char *priority_class_name;
    int priority_set;             /* spec.priority given */
    int32_t priority;             /* spec.priority as given */
    int32_t effective_priority;   /* after defaulting: priority, else the class value, else 0 */
    int priority_class_found;     /* after defaulting: priorityClassName resolved */
    enum api_bool preemptible;    /* default: false for Inference, true otherwise */
    enum api_bool gang;           /* default: true for Batch/Training, false for Inference */
    int32_t replicas;             /* decode sets 1 when absent */
    struct api_gpu gpu;
    struct api_topology topology;
    const char *pool;             /* "" = pools home to the class */
    int suspend;
    int32_t master_port;          /* spec.masterPort (1..65535): the replicas' MASTER_PORT;
                                   * 0 = not given (the controller's default, 29500) */
    int ttl_set;                  /* spec.ttlSecondsAfterFinished given (and valid) */
    int32_t ttl_after_finished;   /* spec.ttlSecondsAfterFinished (0..API_TTL_MAX): the GPUJob
                                   * is deleted this long after it finished; without ttl_set it
                                   * is kept until its owner deletes it */
    int32_t max_run_s;            /* spec.maxRunSeconds (1..API_MAX_RUN_MAX), 0 = none: the
                                   * longest one admission may run; the controller fails the
                                   * job then (DeadlineExceeded), and the scheduler lets it
                                   * backfill nodes a gang reserves when it ends before that
                                   * gang could start */
    /* From spec.template.spec: per-replica requests = max(sum of containers,
     * max of initContainers), a container's request falling back to its limit. */
    int64_t cpu_milli;
    int64_t memory_bytes;
    /* Owned by the job (see Ownership above), NULL when the count is 0:
     * template nodeSelector (at most API_MAX_SELECTOR), tolerations (at most
     * API_MAX_TOLERATIONS) and required node affinity (NULL = none). */
    int nselector;
    int ntolerations;
    struct api_kv *node_selector;          /* [nselector] */
    struct api_toleration *tolerations;    /* [ntolerations] */
    struct api_node_affinity *node_affinity;
    /* spec.team as written ("" = not given); after defaulting, team is the
     * namespace's Team and a different team_requested is refused (WrongTeam) */
    const char *team_requested;
};

struct api_gpujob {
    struct api_meta meta;
    struct api_gpujob_spec spec;
    cJSON *template; /* owned copy of spec.template, or NULL */
};

/* Status as written by the controller (encode) or read back (decode fills
 * state, position, message, preemptions, start/completion times, conditions). */
struct api_condition {
    char type[64];
    char status[8]; /* "True", "False", "Unknown" */
    char reason[64];
    char message[API_MSG_MAX];
    char last_transition_time[API_TIME_MAX];
};

struct api_gpujob_status {
    enum api_state state;
    int32_t position;             /* 1-based place in the team queue; 0 = not queued */
    char message[API_MSG_MAX];
    char team[API_NAME_MAX];      /* effective team (printer column TEAM) */
    int32_t priority;             /* effective priority (printer column PRIORITY) */
    int32_t gpus;                 /* api_gpujob_gpus() (printer column GPUS) */
    struct {
        int present;
        char time[API_TIME_MAX];
        char domain[API_NAME_MAX];  /* "rack=r1" or "" */
        char deadline[API_TIME_MAX]; /* time + the spec.maxRunSeconds in force: the job is
                                      * stopped then; "" = no limit */
        int nnodes;
        const char *const *nodes;   /* borrowed: node per replica; decode leaves NULL */
    } admission;
    int32_t preemptions;
    struct {
        int present;
        char by[API_NAME_MAX];      /* "namespace/name" of the preemptor */
        char reason[API_MSG_MAX];
        char time[API_TIME_MAX];
    } last_preemption;
    int nconditions;
    struct api_condition conditions[API_MAX_CONDITIONS];
    char start_time[API_TIME_MAX];      /* "" = unset */
    char completion_time[API_TIME_MAX];
    /* What must survive a lost store (the API server is the durable record):
     * the generation the state was decided for (a Succeeded or Failed job is
     * finished for that generation), admissions so far (pod names carry the
     * attempt), failure requeues, the enqueue time and the arrival sequence
     * (queue order among jobs of one enqueue time). 0 / "" = unknown. */
    int64_t observed_generation;
    int32_t attempt;
    int32_t retries;
    char enqueue_time[API_TIME_MAX];
    int64_t arrival;
    /* Why a waiting job waits, as a stable class ("Nodes", "Quota",
     * "Preempting", "MinRuntime", "Reserving", "PartialAdmission", "Invalid",
     * "Waiting"); "" = not waiting (encoded null). */
    char wait_reason[32];
};

void api_gpujob_init(struct api_gpujob *job);
/* A job all zero but its names (""): a placeholder to read, never to release
 * or write (api_gpujob_init sets defaults besides). */
extern const struct api_gpujob api_gpujob_zero;
void api_gpujob_release(struct api_gpujob *job);
struct api_gpujob *api_gpujob_new(void);
void api_gpujob_free(struct api_gpujob *job);
/* Deep copy (template and every out-of-line part included): dst shares no
 * memory with src. dst must be initialised; its old content is released
 * (on GQ_ENOMEM dst is left as it was). */
int api_gpujob_copy(struct api_gpujob *dst, const struct api_gpujob *src);

/* Decode a whole GPUJob object (apiVersion, kind, metadata, spec). Returns 0
 * when errs gained no entries, GQ_EINVAL when it did, GQ_ENOMEM (out is then
 * released and empty, as after api_gpujob_init). out must be initialised; it
 * is reset first. Either way the caller releases out. */
int api_gpujob_decode(const cJSON *obj, struct api_gpujob *out, struct api_errors *errs);

/* ---- Team ------------------------------------------------------------ */

struct api_quota {
    char gpu_type[API_LABEL_VAL_MAX]; /* product or "*" */
    int32_t gpus;                     /* nominal quota */
    int32_t borrowing_limit;          /* -1 = unlimited */
    int32_t lending_limit;            /* -1 = may lend everything */
};

/* Team spec.podPolicy: what the pods of the Team's jobs may ask for (all
 * refused by default). */
struct api_pod_policy {
    int allow_host_namespaces; /* hostNetwork, hostPID, hostIPC */
    int allow_privileged;      /* securityContext.privileged in any container */
    int allow_capabilities;    /* securityContext.capabilities.add in any container */
    int allow_host_path;       /* hostPath volumes */
    int allow_service_accounts; /* serviceAccountName other than "" or "default" */
};

struct api_team {
    struct api_meta meta;
    int nnamespaces;
    char namespaces[API_MAX_NAMESPACES][API_NS_MAX];
    char cohort[API_NAME_MAX]; /* "" = none */
    int nquota;
    struct api_quota quota[API_MAX_QUOTA];
    int32_t weight; /* fair-share weight; decode sets 1 when absent */
    /* priority ceiling of the Team's jobs; has_max_priority 0 = API_DEFAULT_MAX_PRIORITY
     * (use api_team_max_priority) */
    int has_max_priority;
    int32_t max_priority;
    int npriority_classes; /* PriorityClasses its jobs may name; 0 = any within the ceiling */
    char priority_classes[API_MAX_PRIORITY_CLASSES][API_NAME_MAX];
    struct api_pod_policy pod_policy;
};

/* One entry of a Team's status.pendingHead (the head of its queue). */
struct api_team_pending {
    char name[API_NAME_MAX];
    char namespace[API_NS_MAX];
    int32_t position;
    int32_t gpus;
};

#define API_MAX_PENDING_HEAD 64

struct api_team_status {
    int32_t quota;    /* nominal GPUs, all types */
    int32_t used;     /* GPUs held by admitted jobs */
    int32_t borrowed; /* GPUs used beyond nominal quota */
    int32_t pending;  /* queued jobs */
    int32_t running;  /* admitted or running jobs */
    int64_t observed_generation; /* generation of the spec in force (0 = none) */
    int nconditions;             /* "Valid": False when the latest edit is invalid */
    struct api_condition conditions[API_MAX_CONDITIONS];
    /* the first waiting jobs in queue order (encode only; decode leaves 0) */
    int npending_head;
    struct api_team_pending pending_head[API_MAX_PENDING_HEAD];
};

int api_team_decode(const cJSON *obj, struct api_team *out, struct api_errors *errs);

/* ---- GPUPool --------------------------------------------------------- */

struct api_gpupool {
    struct api_meta meta;
    int nselector;
    struct api_kv node_selector[API_MAX_SELECTOR];
    unsigned classes; /* bit (1u << enum api_class) per home class */
    int protect;      /* spec.protected */
    int32_t reserve_gpus;
};

struct api_gpupool_status {
    int32_t gpus;
    int32_t allocated;
    int32_t free;
    int32_t largest_free; /* most free GPUs on one node */
    int32_t pending;      /* queued jobs whose pool this is */
};

int api_gpupool_decode(const cJSON *obj, struct api_gpupool *out, struct api_errors *errs);

/* ---- PriorityClass (scheduling.k8s.io/v1) ----------------------------- */

struct api_priorityclass {
    char name[API_NAME_MAX];
    int32_t value;
    int global_default;
};

int api_priorityclass_decode(const cJSON *obj, struct api_priorityclass *out,
                             struct api_errors *errs);

/* ---- defaulting and validation ---------------------------------------- */

/* What defaulting may consult; any array may be NULL with count 0. */
struct api_lookup {
    const struct api_team *teams;
    size_t nteams;
    const struct api_priorityclass *pcs;
    size_t npcs;
};

/* Fill defaults: class Batch; gang and preemptible by class; replicas 1;
 * team = the namespace's Team (api_namespace_team), else spec.team as given;
 * effective_priority from spec.priority, else the named PriorityClass, else
 * the globalDefault PriorityClass, else 0, then capped at the team's ceiling
 * (api_gpujob_tenancy refuses a job that asks for more). lk may be NULL.
 * GQ_OK, or GQ_ENOMEM when the Team's name could not be copied (then
 * spec.team is what it was and the rest is defaulted). */
int api_gpujob_default(struct api_gpujob *job, const struct api_lookup *lk);
void api_team_default(struct api_team *team);

/* Semantic checks after decode (and ideally defaulting); append to errs.
 * cfg may be NULL for the default levels. Return 0 when errs gained nothing. */
int api_gpujob_validate(const struct api_gpujob *job, const struct api_config *cfg,
                        struct api_errors *errs);
int api_team_validate(const struct api_team *team, struct api_errors *errs);
int api_gpupool_validate(const struct api_gpupool *pool, struct api_errors *errs);

/* GPUs a job holds when admitted: replicas x count; a shares job holds
 * shares/1000 per replica, reported rounded up to whole GPUs. 0 for CPU-only. */
int32_t api_gpujob_gpus(const struct api_gpujob *job);

/* ---- encode ----------------------------------------------------------- */

/* {"status": {...}} ready for a merge patch on the status subresource.
 * NULL on allocation failure. */
cJSON *api_gpujob_status_encode(const struct api_gpujob_status *st);
cJSON *api_team_status_encode(const struct api_team_status *st);
cJSON *api_gpupool_status_encode(const struct api_gpupool_status *st);

/* Decode the status of a GPUJob object (missing status is all zero). */
int api_gpujob_status_decode(const cJSON *obj, struct api_gpujob_status *out,
                             struct api_errors *errs);
/* Decode the status of a Team object (missing status is all zero). */
int api_team_status_decode(const cJSON *obj, struct api_team_status *out,
                           struct api_errors *errs);

/* Parse JSON bytes into a cJSON tree; on failure errs gets
 * "invalid JSON at byte N". Caller owns *out. */
int api_json_parse(const char *data, size_t len, cJSON **out, struct api_errors *errs);

/* ---- tenancy --------------------------------------------------------- */

/* Team t's priority ceiling (spec.maxPriority or API_DEFAULT_MAX_PRIORITY). */
int32_t api_team_max_priority(const struct api_team *t);
/* 1 when a is older than b: creationTimestamp (empty = newest), then name. */
int api_team_older(const struct api_team *a, const struct api_team *b);
/* The Team owning namespace ns: of the Teams listing it, the oldest. NULL when none. */
const struct api_team *api_namespace_team(const struct api_team *teams, size_t nteams,
                                          const char *ns);
/* The first namespace of t that an older Team owns (its index in *ns_index),
 * and that Team; NULL when t owns all its namespaces. */
const struct api_team *api_team_conflict(const struct api_team *teams, size_t nteams,
                                         const struct api_team *t, int *ns_index);
/* The Team rules a job must pass to be admitted, after api_gpujob_default and
 * a clean api_gpujob_validate: its namespace has a Team and spec.team (when
 * given) names it; spec.priority and the priorityClassName values (job and
 * pod template) are known, allowed and within the Team's ceiling; the pod
 * template keeps to the Team's podPolicy. Every problem goes to errs with its
 * field path; returns NULL when there is none, else the condition reason of
 * the first: "NoTeam", "UnknownTeam", "WrongTeam", "UnknownPriorityClass",
 * "PriorityClassNotAllowed", "PriorityAboveCeiling" or "PodPolicy" (static). */
const char *api_gpujob_tenancy(const struct api_gpujob *job, const struct api_lookup *lk,
                               struct api_errors *errs);
/* Make a copy of a GPUJob's spec.template fit to become gangq's pod: every
 * label and annotation whose key prefix is gangq.io or a subdomain of it is
 * removed (gangq sets its own), metadata.finalizers are dropped and
 * spec.terminationGracePeriodSeconds is set to at most max_grace_s (and to
 * max_grace_s when absent and max_grace_s < 30, the Kubernetes default).
 * Returns 0, GQ_EINVAL when tpl is not an object, GQ_ENOMEM. */
int api_pod_template_sanitize(cJSON *tpl, int64_t max_grace_s);
/* A label or annotation key gangq owns (prefix gangq.io or *.gangq.io). */
int api_is_gangq_key(const char *key);

#endif
