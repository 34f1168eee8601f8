/*
 * ctl.h — the gangq controller: wiring of informers (controller/kube), the
 * scheduling core (controller/scheduler), the store (store/) and the API types
 * (api/) into one reconcile loop on one libev loop.
 *
 * Role and data flow (DESIGN.md "Architecture"):
 *   informers --(mark dirty)--> debounce timer --> ctl_reconcile():
 *     decode+default+validate every GPUJob, upsert the store, lifecycle from
 *     pod phases, snapshot (ctl_snap_build) --> sched_cycle --> decisions
 *     written in ONE store transaction (state, ledger, intent, audit) -->
 *     commit --> actuator (ctl_act_*): pods created/deleted per pending intent,
 *     status patches (only when changed), Events.
 *
 * Invariants:
 *  - One struct gq_ctl owns everything (loop, client, informers, leader,
 *    store, scheduler scratch, config, per-job memory). No hidden globals.
 *  - Nothing is acted on before the store transaction that decided it has
 *    committed. Every side effect on pods comes from a pending store intent,
 *    so a crash between commit and action is finished after a restart.
 *  - Pod names are deterministic: "<job>-<attempt>-<replica>" where attempt is
 *    recorded in the job's placement text, so repeating a create gives 409
 *    AlreadyExists (= already done) and a gang is never admitted twice.
 *  - The API server is the durable record: a GPUJob's status holds its state
 *    for a generation, attempt, retries, enqueue time and arrival, so a store
 *    row lost or older than the API server is rebuilt from status and pods
 *    (ctl_observe.c row_recover): a Succeeded or Failed job never runs again
 *    for the same spec, running gangs are adopted.
 *  - GPUs held by live pods are never offered again: a job holding a
 *    placement stays in the snapshot whatever its Team, pool or spec became;
 *    an invalid Team edit leaves the last valid spec (kept in the store) in
 *    force.
 *  - Scheduling cycles run only while leading (when leader election is on)
 *    and after every informer synced. Released gangq pods that still stop
 *    never hold the cluster back: a preempted job's stopping pods keep it in
 *    the snapshot as terminating for its preemptor (their devices held for
 *    it), and every other released pod is foreign usage on its node, so their
 *    GPUs are never booked twice while unrelated jobs keep being admitted.
 *
 * Ownership: the ctl_snapshot / placement / status helpers are pure (no I/O)
 * and borrow every input for the duration of the call (snapshot strings point
 * into the caller's cJSON objects and api structs, which must outlive the
 * snapshot). struct ctl_snap and struct ctl_placement own their arrays
 * (ctl_snap_release / ctl_placement_release).
 */
#ifndef GQ_CTL_H
#define GQ_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cJSON.h>

#include "api.h"
#include "buf.h"
#include "gq.h"
#include "sched.h"

/* Labels and annotations written on the pods gangq creates. */
#define CTL_LABEL_JOB "gangq.io/job"
#define CTL_LABEL_TEAM "gangq.io/team"
#define CTL_LABEL_REPLICA "gangq.io/replica"
#define CTL_LABEL_ATTEMPT "gangq.io/attempt"
#define CTL_ANN_GPU_MILLI "gangq.io/gpu-milli"
#define CTL_ANN_GPU_DEVICES "gangq.io/gpu-devices"
#define CTL_GPU_RESOURCE "nvidia.com/gpu"

#define CTL_KEY_MAX (API_NS_MAX + API_NAME_MAX) /* "namespace/name" */
#define CTL_PATH_MAX 1024
#define CTL_DRAIN_SLACK_S 30      /* a preempted job's pod this far past its deletion deadline
                                   * no longer keeps the job stopping (it stays foreign usage) */
#define CTL_MISSING_GRACE_MS 5000 /* a created pod absent from the cache this long is asked
                                   * for with a GET (only a 404 or a delete event = gone) */
#define CTL_STRAY_RETRY_MS 2000   /* a job's stray pods are deleted at most this often */

/* ------------------------------------------------------------ config */

struct ctl_config {
    char kubeconfig[CTL_PATH_MAX]; /* "" = in-cluster */
    char db[CTL_PATH_MAX];
    char listen[64];               /* "" = no HTTP server; "127.0.0.1:8080" */
    int log_level;                 /* enum gq_log_level */
    int leader_elect;              /* default 1 */
    char lease_ns[API_NS_MAX];     /* "" = the config's namespace */
    char lease_name[API_NAME_MAX]; /* default "gangq-controller" */
    int64_t min_runtime_s;         /* default 300 */
    struct api_config levels;      /* topology levels, widest first */
    int levels_set;                /* a --level was given: the defaults were replaced */
    char gpu_product_label[API_LABEL_KEY_MAX];
    char gpu_memory_label[API_LABEL_KEY_MAX];
    double node_lost_grace_s;      /* default 40 */
    int max_retries;               /* default 3 */
    double usage_half_life_s;      /* default 86400 */
    double audit_retention_s;      /* audit entries older than this are deleted; 0 keeps them
                                    * all; default 30 days */
    double cycle_interval_s;       /* periodic resync of the jobs time alone can change
                                    * (holding GPUs, pods stopping); default 2 */
    double full_resync_interval_s; /* every job examined again at least this often; default 30
                                    * (waiting jobs change only by events: theirs, their Team's,
                                    * pools', classes', nodes') */
    double debounce_s;             /* after the first dirty mark; default 0.05 */
    int max_reconcile_share;       /* percent of the time reconciles may take while events
                                    * stream in (adaptive batching); default 30 */
    double batch_window_s;         /* while events stream in (one comes within this long of
                                    * the last reconcile's end), reconciles start at least
                                    * this far apart; 0 = off; default 0.15 */
    double io_collect_interval_s;  /* socket I/O taken at most this often (libev
                                    * io_collect_interval); 0 = at once; default 0.02 */
    double shutdown_wait_s;        /* bounded wait for writes at exit; default 5 */
    int64_t db_max_pages;          /* 0 = no cap; else store_set_max_pages (tests, safety cap) */
    int allow_http_token;          /* --insecure-allow-http-token: bearer token to a non-https server */
    double max_grace_period_s;     /* cap on gangq pods' termination grace; default 30 */
    double pod_watch_delay_s;      /* test hook: pod watch events applied this late (a lagging
                                    * watch, kube_informer_opts.event_delay_s); default 0 */
    /* API writes follow decisions, not queue moves: a waiting job's
     * status.position is published only for the first position_head jobs of
     * each Team queue (others null), refreshed at most every
     * position_interval_s (with the Team's status.pendingHead); its
     * status.message is written at once when its state changes or its wait
     * reason class changes to stay (wait_reason_settle_s), else refreshed at
     * most every wait_message_interval_s */
    int position_head;             /* default 10; 0 = no positions published */
    double position_interval_s;    /* default 5 */
    double wait_message_interval_s; /* default 60 */
    /* a waiting job's wait reason (class) that changes between capacity
     * reasons (Nodes, Quota, Reserving, ...) is published once the new one
     * has held this long; a problem, a preemption under way or a partial
     * admission at once (ctl_wait_publish) */
    double wait_reason_settle_s; /* default 10 */
    /* A job's status is written at most once per status_settle_s (the first
     * time no sooner than status_settle_s after its creation), so a state it
     * leaves within that time (Queued admitted at once, Admitted whose pods
     * are Running, Running that Succeeded) is replaced by the next one
     * instead of written. Succeeded, Failed and an invalid spec are written at
     * once. 0 = every change at once. Default 2. */
    double status_settle_s;
    /* Events narrate; the status is the record. Normal Events (Admitted,
     * Waiting, Succeeded, ...) share a token bucket of event_burst refilled
     * at event_qps per second (kubelet's --event-qps/--event-burst); past it
     * they are not sent (counted); one namespace's Normal Events take at most
     * a quarter of both, so a tenant's flood leaves the others most of it.
     * Warning Events (a failure, a preemption, a refused spec) are not
     * limited. event_qps 0 = no limit. Defaults 10, 100. */
    int event_qps;
    int event_burst;
    /* A GPUJob status rewrite that changes nothing but the queue position or
     * the text of the wait message (state, wait reason, conditions' reasons,
     * placement as last written) is a refresh: refreshes share a token bucket
     * of refresh_burst refilled at refresh_qps per second; one past it is
     * offered again in a later reconcile. State and reason changes are never
     * held. refresh_qps 0 = no limit. Defaults 10, 100. */
    int refresh_qps;
    int refresh_burst;
    /* API requests in flight at once (kube_client_opts.max_inflight; the
     * lanes' shares are quarters of it). Default 64. */
    int kube_max_inflight;
};

/* Seconds until a reconcile asked for at now may start (ctl_main.c):
 * debounce_s, or more after the last reconcile (it ran from start to end,
 * both 0 before the first) so that reconciles take at most share percent of
 * the time, and, when now is within window_s of its end (events stream in),
 * start no sooner than window_s after it started (a clock set back before
 * its end: debounce_s). Pure. */
double ctl_batch_delay(double debounce_s, int share, double window_s, double start, double end, double now);

/* The option table (ctl_config.c): every option's defaults, parsing and usage
 * line come from its entry. */
enum ctl_opt_kind {
    CTL_OPT_STRING,       /* char[size] */
    CTL_OPT_BOOL,         /* int: true|false|1|0|yes|no */
    CTL_OPT_INT,          /* int or int64_t (size), ilo..ihi */
    CTL_OPT_DURATION,     /* double seconds, dlo..dhi (dhi 0: no highest) */
    CTL_OPT_DURATION_S64, /* int64_t whole seconds */
    CTL_OPT_LOG_LEVEL,    /* int, enum gq_log_level */
    CTL_OPT_LEVEL,        /* repeatable name=labelkey into levels */
    CTL_OPT_FILE,         /* --config: command line only */
};

struct ctl_option {
    const char *name;      /* flag without "--", also the config-file key */
    enum ctl_opt_kind kind;
    size_t off, size;      /* the field in struct ctl_config */
    const char *def;       /* default as option text; NULL = zero */
    double dlo, dhi;       /* durations: range, seconds (dhi 0 = no highest) */
    int64_t ilo, ihi;      /* integers: range */
    const char *expect;    /* what a bad value is told it should be (NULL: from the kind) */
    const char *meta;      /* usage: " PATH", "=BOOL" */
    const char *help;      /* usage text; '\n' continues on an indented line */
};
extern const struct ctl_option ctl_options[];
extern const size_t ctl_noptions;

void ctl_config_default(struct ctl_config *c);
/* Usage text: one line (or more) per ctl_options entry. */
void ctl_config_usage(FILE *f);
/* Set one option by its flag name without "--" ("min-runtime", "level", ...).
 * A "level" value is "name=labelkey"; the first one replaces the defaults. */
int ctl_config_set(struct ctl_config *c, const char *key, const char *val, char *err,
                   size_t errlen);
/* Apply a YAML config file (a mapping with the flag names as keys; "level" or
 * "levels" may be a list of "name=label" strings or {name, label} objects). */
int ctl_config_load_file(struct ctl_config *c, const char *path, char *err, size_t errlen);
/* "40s", "5m", "1h30m", "250ms", "2" (seconds) -> seconds. */

/* ------------------------------------------------------------ placement */

/* The store's placement text for an admitted job: JSON
 * {"attempt":N,"domain":"rack-1","reseq":0,"replicas":[{"i":0,"node":"n1","devs":255},...]}
 * A replica re-placed after a loss (non-gang jobs) gets a new generation
 * ("g", from reseq) so its pod gets a new name. */
struct ctl_prep {
    int replica;
    int gen;
    char node[API_NAME_MAX];
    uint32_t devs;
};
/* A domain is the value of a node's topology label: at most 63 bytes */
#define CTL_DOMAIN_MAX 64
struct ctl_placement {
    int attempt;
    int reseq;
    char domain[CTL_DOMAIN_MAX];
    int n;
    struct ctl_prep *rep; /* n entries, sorted by replica; owned unless borrowed */
    int borrowed;         /* rep is another placement's (ctl_placement_borrow): never
                           * freed here, copied before the first change (add, remove) */
};
void ctl_placement_init(struct ctl_placement *p);
/* Frees rep unless borrowed; p is empty after. */
void ctl_placement_release(struct ctl_placement *p);
/* dst (released first) reads src's replicas without a copy: valid while src
 * is unchanged and alive; dst's own fields (attempt, reseq, domain) are its
 * own. The first ctl_placement_add or ctl_placement_remove on dst copies the
 * replicas (so a direct write to dst->rep is only made after one of those). */
void ctl_placement_borrow(struct ctl_placement *dst, const struct ctl_placement *src);
/* "" or NULL parses to an empty placement. */
int ctl_placement_parse(const char *text, struct ctl_placement *out, char *err, size_t errlen);
int ctl_placement_format(const struct ctl_placement *p, struct gq_buf *out);
/* Index of replica r in p, or -1. */
int ctl_placement_find(const struct ctl_placement *p, int replica);
int ctl_placement_add(struct ctl_placement *p, int replica, const char *node, uint32_t devs);
/* Drops replica's entry (none: nothing). 0, or GQ_ENOMEM copying borrowed
 * replicas (p unchanged). */
int ctl_placement_remove(struct ctl_placement *p, int replica);
/* Pod name of a placed replica: "<job>-<attempt>-<replica>" (+ "-g<gen>"). */
void ctl_pod_name(const char *job, const struct ctl_placement *p, const struct ctl_prep *r,
                  char *out, size_t len);

/* ------------------------------------------------------------ rendezvous */

/* What a job's replicas need to find each other (ctl_act.c), as JobSet and
 * Volcano's svc plugin give: a multi-replica job (replicas > 1) gets a
 * headless Service named after the job (selector CTL_LABEL_JOB=<job>,
 * publishNotReadyAddresses, owned by the GPUJob), and replica i's pod gets
 * spec.hostname "<job>-<i>" and spec.subdomain "<job>", so it is
 * "<job>-<i>.<job>.<ns>.svc" whatever the attempt in its pod name. Every
 * container and init container gets CTL_RDV_NVARS variables (torchrun's names
 * and gangq's own); a variable the template's container already sets in env is
 * never replaced. A single-replica job gets the variables (MASTER_ADDR
 * "localhost", WORLD_SIZE 1, RANK 0) and no Service. A job name that cannot
 * name the Service (not a DNS-1035 label) or whose last replica's hostname
 * would pass 63 characters gets no Service, no hostname and no MASTER_ADDR
 * (the other variables still). */
#define CTL_RDV_PORT_DEFAULT 29500
#define CTL_RDV_NVARS 10
/* Variable names in the order they are added (MASTER_ADDR, MASTER_PORT,
 * WORLD_SIZE, RANK, NODE_RANK, GANGQ_REPLICA_INDEX, GANGQ_REPLICA_COUNT,
 * GANGQ_MASTER_ADDR, GANGQ_MASTER_PORT, GANGQ_JOB_NAME). */
extern const char *const ctl_rdv_vars[CTL_RDV_NVARS];
/* 1 when job can name the headless Service and, when replicas > 1, every
 * replica's hostname ("<job>-<replicas-1>" at most 63 characters), else 0
 * with the reason in why (may be NULL). */
int ctl_rdv_dns_ok(const char *job, int replicas, char *why, size_t whylen);
/* Apply the rendezvous to a pod spec (the pod's "spec" object, modified in
 * place; strings copied): hostname/subdomain when replicas > 1 and
 * ctl_rdv_dns_ok, and the variables in every object of "containers" and
 * "initContainers" (an "env" that is not an array leaves that container as it
 * is). port: the master port. 0 or GQ_ENOMEM. */
int ctl_rdv_apply(cJSON *pspec, const char *ns, const char *job, int replica, int replicas, int port);
/* The job's headless Service (caller owns; NULL on allocation failure). */
cJSON *ctl_rdv_service(const char *ns, const char *job, const char *uid);
/* The master port of a GPUJob object: spec.masterPort when a number in
 * 1..65535, else CTL_RDV_PORT_DEFAULT. */
int ctl_rdv_port(const cJSON *job);

/* ------------------------------------------------------------ objects */

/* A short owned text (ctl_memo.c): *dst becomes a heap copy of at most
 * max - 1 bytes of src, or NULL when src is NULL or "" (the old text freed).
 * Unchanged text is not copied again. GQ_ENOMEM leaves *dst NULL. */
int ctl_str_set(char **dst, const char *src, size_t max);
static inline const char *ctl_str(const char *s)
{
    return s ? s : "";
}

/* Label value of a Kubernetes object (NULL when absent). */
const char *ctl_obj_label(const cJSON *obj, const char *key);
const char *ctl_obj_annotation(const cJSON *obj, const char *key);
const char *ctl_obj_str(const cJSON *obj, const char *a, const char *b); /* obj.a.b string */
/* obj[k] = the string v (any member k replaced); 0 or GQ_ENOMEM. */
int ctl_obj_set_str(cJSON *obj, const char *k, const char *v);
/* The object member k of parent, added (replacing a non-object k) when
 * missing; borrowed from parent; NULL without memory. */
cJSON *ctl_obj_child(cJSON *parent, const char *k);

struct ctl_nodeinfo {
    int ready;
    double ready_since;  /* wall seconds of the Ready condition's last transition (0 unknown) */
    int unschedulable;
    int64_t cpu_milli, mem_bytes;
    int gpus;
};
int ctl_node_info(const cJSON *node, struct ctl_nodeinfo *out);

/* What a pod holds on its node: cpu/memory requests (max(sum containers, max
 * init), request falling back to limit), whole GPUs (nvidia.com/gpu limits or
 * requests), the gangq share annotation and device annotation (mask; 0 when
 * absent). */
struct ctl_podusage {
    int64_t cpu_milli, mem_bytes;
    int gpus;
    int gpu_milli;
    uint32_t devs;
};
void ctl_pod_usage(const cJSON *pod, struct ctl_podusage *out);
/* Pod phase is Succeeded or Failed. */
int ctl_pod_terminal(const cJSON *pod);

/* The GPUJob informer's pruner (kube_informer_opts.prune): what
 * kube_prune_common drops, and a status object kept as {"state": ...,
 * "attempt": ..., "completionTime": ..., CTL_STATUS_RAW: "<the whole status,
 * compact JSON, deflated>"}: the fields read without decoding stay, the rest
 * is one string instead of a tree of some 40 nodes (~3 KB less per cached
 * job), deflated when that halves it (ctl_snapshot.c raw_deflate: a finished
 * job's 813 bytes become 112); the spec likewise as
 * {CTL_SPEC_RAW: "<the whole spec, compact JSON>"} (read only when the job
 * changed or its pods are built: ctl_job_spec, ctl_job_expand). Each left as
 * it is when not an object or out of memory. Member names interned. */
#define CTL_STATUS_RAW "gangqRawStatus"
#define CTL_SPEC_RAW "gangqRawSpec"
void ctl_prune_gpujob(cJSON *obj);
/* The spec of a GPUJob object, pruned or not: its spec member, or (pruned)
 * the spec parsed into *tmp, which the caller frees (cJSON_Delete; NULL when
 * nothing was parsed). NULL when there is none, it does not parse or out of
 * memory. */
const cJSON *ctl_job_spec(const cJSON *job, cJSON **tmp);
/* A pruned GPUJob object whole again, for api_gpujob_decode: a new object
 * whose members are references to job's (never freed through it) but for a
 * parsed spec. Caller frees (cJSON_Delete). NULL when job's spec is not
 * condensed (decode job itself), or *enomem set when out of memory; a raw
 * spec that does not parse becomes the string itself (the decoder names
 * spec as not an object). */
cJSON *ctl_job_expand(const cJSON *job, int *enomem);
/* api_gpujob_status_decode of a GPUJob object, pruned (ctl_prune_gpujob) or
 * not. A raw status that does not parse decodes as no status (an error in
 * errs); GQ_ENOMEM when the copy could not be made. */
int ctl_job_status_decode(const cJSON *job, struct api_gpujob_status *out, struct api_errors *errs);
/* The attempt that finished a job: the highest gangq.io/attempt label for
 * which, among the pods owned by uid (an ownerReferences entry; uid NULL or
 * "" = any owner), every replica 0..replicas-1 has a Succeeded pod. 0 when no
 * attempt did. */
int ctl_pods_succeeded_attempt(const cJSON *const *pods, int npods, const char *uid, int replicas);
/* A pod owned by uid (as above) that has neither finished (Succeeded,
 * Failed) nor been marked for deletion (metadata.deletionTimestamp): in the
 * API server's view it may still run. */
int ctl_pods_live(const cJSON *const *pods, int npods, const char *uid);

/* ------------------------------------------------------------ snapshot */

struct ctl_jobin {
    const char *key;               /* "namespace/name" */
    const struct api_gpujob *job;  /* decoded, defaulted, valid */
    int running;                   /* store state Admitted/Running: placement holds it */
    int64_t enqueue_ms;
    int64_t admitted_ms;
    const struct ctl_placement *pl; /* running: its placement */
    const char *preempted_by;      /* key of the job it was last preempted for, or NULL/"" */
    const char *reserved;          /* what its reservation held last cycle, or NULL/"" */
    /* Running and being stopped (released, pods still terminating): pl holds
     * the replicas whose pods still stop. It keeps that capacity, is never a
     * victim again and wants no new replicas; terminating_for is the key of
     * the job it makes room for (its snapshot index when that job waits, else
     * -1). */
    int terminating;
    const char *terminating_for;
    int64_t arrival;                /* order among jobs of one enqueue_ms */
    int hold_only;                  /* running but waiting on a problem (Team deleted, ...):
                                     * keeps what it holds, gets no further replica */
    /* keys of the jobs preempted for it since it was last admitted (borrowed;
     * sched_job.preempted_victims): it never preempts them again while it waits */
    const char *const *preempted_victims; int npreempted_victims;
    /* running: the maxRunSeconds in force for its admission (0 none), which
     * a spec edit may lower, not raise (the controller's rc_run_limit); a
     * waiting job's is its spec's */
    int64_t run_limit_s;
};

struct ctl_snapin {
    const struct sched_config *cfg;
    int64_t now_s;
    const cJSON *const *nodes; int nnodes;
    const cJSON *const *foreign_pods; int nforeign; /* pods counted as foreign usage */
    const struct api_gpupool *pools; int npools;
    const struct api_team *teams; int nteams;
    const double *team_usage;      /* decayed GPU-seconds per team, may be NULL */
    const struct ctl_jobin *jobs; int njobs;
    int keys_sorted;               /* the caller vouches the jobs come in ascending key order
                                    * (the reconcile's do: the index it reads them from is):
                                    * not checked again; 0: checked */
    int nforeign_released;         /* the last this many of foreign_pods are gangq pods no job
                                    * holds any more, which gangq deletes: like pods with a
                                    * deletionTimestamp, their usage is releasing (sched_node) */
};

#define CTL_SNAP_NKEEP 15
struct ctl_snap {
    struct sched_snapshot snap;
    struct sched_node *nodes;
    struct sched_label *labels;
    struct sched_taint *taints;
    struct sched_pool *pools;
    struct sched_team *teams;
    struct sched_quota *quotas;
    struct sched_job *jobs;
    struct sched_replica *reps;
    struct sched_toleration *tols;
    struct sched_label *sels; /* jobs' template nodeSelector terms (strings: the api jobs') */
    int *job_in;          /* snapshot job index -> ctl_snapin.jobs index */
    int64_t *gangq_milli; /* per node: GPU milli held by running gangq jobs */
    /* nodes by name: an open-addressed table of node_ixcap (a power of two,
     * at least twice the nodes) entries, name NULL = empty; h the name's
     * gq_hash_str; the first node of a name only */
    struct ctl_snap_nodeix { const char *name; uint64_t h; int i; } *node_ix;
    size_t node_ixcap;
    /* The memory of the arrays above, owned, kept when the snapshot is built
     * again: a controller builds one per reconcile, and fresh arrays of that
     * size (megabytes at 15,000 jobs) come from mmap, page-faulted and zeroed
     * by the kernel each time. */
    struct ctl_snap_keep {
        void *p[CTL_SNAP_NKEEP];
        size_t cap[CTL_SNAP_NKEEP];
    } keep;
};

/* Pool of a node: first GPUPool whose nodeSelector all match, or -1.
 * ctl_snap_build gives each job's sched enqueue_time its rank in the order
 * (enqueue_ms, arrival, key): creation timestamps have 1 s resolution, so a
 * burst of jobs keeps the order it arrived in instead of falling back to names. */
int ctl_node_pool(const cJSON *node, const struct api_gpupool *pools, int npools);
/* The index in teams[0..n) of the Team named name; -1 when none (name NULL
 * or "" too). Jobs are looked at in key order, a namespace's together, so
 * most lookups name the Team the last one found: *hint (that answer, -1 at
 * first) is tried first, and set to each answer found. */
int ctl_team_find(const struct api_team *teams, int n, const char *name, int *hint);
/* s is zeroed (or released) before its first build; built again, it reuses
 * the memory of its arrays (s->keep) for the new snapshot, whose pointers
 * replace the old ones. */
int ctl_snap_build(struct ctl_snap *s, const struct ctl_snapin *in, char *err, size_t errlen);
/* Free the arrays and zero s. */
void ctl_snap_release(struct ctl_snap *s);
/* Free kept array memory (a struct ctl_snap_keep moved out of a snapshot). */
void ctl_snap_keep_release(struct ctl_snap_keep *k);
/* Node index by name in the snapshot, or -1 (O(log nodes)). */
int ctl_snap_node(const struct ctl_snap *s, const char *name);

/* ------------------------------------------------------------ status */

/* What the controller knows about a job, for its status. */
struct ctl_jobview {
    int state;                    /* enum store_state */
    const char *message;          /* store message or the last WAIT explanation */
    int position;                 /* WAIT position (0 = none) */
    int64_t preemptions;
    const char *preempted_by;
    const char *preempt_reason;
    int64_t preempted_ms;
    int64_t admitted_ms;
    const struct ctl_placement *pl;
    const char *invalid_reason;   /* non-NULL: a condition "Valid"=False with this reason */
    /* recorded in status so a lost store is rebuilt from it (status.attempt,
     * retries, enqueueTime, arrival; observedGeneration is the job's
     * metadata.generation) */
    int64_t attempts;
    int64_t retries;
    int64_t enqueue_ms;
    int64_t arrival;
    const char *wait_reason;      /* waiting: ctl_wait_class_name of its class; else NULL */
    /* waiting and it could not fit even an empty cluster: why, with the
     * figures (condition Unschedulable=True); NULL or "" = it could */
    const char *unschedulable;
    int64_t run_limit_s;          /* holding: the maxRunSeconds in force (status.admission.deadline) */
};

/* How a job stopped by its spec.maxRunSeconds is told (the store's message
 * starts so; the status's Failed condition then has reason DeadlineExceeded). */
#define CTL_MAX_RUN_MSG "ran past spec.maxRunSeconds"
/* Compute the status to write from prev (the object's current status, for
 * start/completion times and condition transition times), the view and
 * now_ms (wall). nodes (nodes_cap entries) receives node-name pointers into
 * v->pl for out->admission.nodes. */
void ctl_status_compute(const struct api_gpujob *job, const struct api_gpujob_status *prev,
                        const struct ctl_jobview *v, int64_t now_ms, const char **nodes,
                        int nodes_cap, struct api_gpujob_status *out);
/* RFC 3339 seconds, UTC. */
void ctl_time_format(int64_t ms, char *out, size_t len);

/* ------------------------------------------------------------ waiting jobs */

/* Why a job waits, as a stable class: the explanation's text carries
 * figures that move with the queue (nodes fit, quota used, times), its class
 * does not. The status of a waiting job is rewritten when its state or class
 * changes; a Waiting Event is sent once per class per wait. */
enum ctl_wait_class {
    CTL_WAIT_NONE = 0,     /* no explanation yet */
    CTL_WAIT_NODES,        /* no node set fits the gang ("N/M nodes fit ...") */
    CTL_WAIT_QUOTA,        /* the Team's quota (and what it may borrow) is used */
    CTL_WAIT_PREEMPTING,   /* waiting for the jobs it preempted to stop */
    CTL_WAIT_MIN_RUNTIME,  /* its victims are protected by the minimum runtime */
    CTL_WAIT_RESERVING,    /* holds a reservation of nodes or a domain */
    CTL_WAIT_PARTIAL,      /* some replicas admitted, the rest wait */
    CTL_WAIT_INVALID,      /* held by a problem (unknown Team or pool, refused spec) */
    CTL_WAIT_OTHER,
    CTL_WAIT_NCLASSES
};

/* Class of a WAIT explanation msg (NULL or "" = CTL_WAIT_NONE); any
 * invalid_reason makes it CTL_WAIT_INVALID. When several parts are present
 * the most specific wins: invalid, preempting, partial, minimum runtime,
 * quota, reserving, nodes. */
int ctl_wait_classify(const char *msg, const char *invalid_reason);
/* "Nodes", "Quota", ...: the status.waitReason text ("" for CTL_WAIT_NONE). */
const char *ctl_wait_class_name(int cls);

/* What of a waiting job's explanation its status shows (per job, kept
 * across reconciles; zero = nothing published yet). */
struct ctl_waitpub {
    int set;                      /* state/cls below were published */
    int state;                    /* store state published for */
    int cls;                      /* enum ctl_wait_class published */
    char *msg;                    /* the explanation published: an owned heap copy of at most
                                   * SCHED_MSG_MAX - 1 bytes, NULL for "" (or when out of
                                   * memory: the status shows none) */
    int64_t msg_ms;               /* when msg was published */
    unsigned evented;             /* bit per class: a Waiting Event was sent in this wait */
    int position;                 /* published position (0 = none) */
    /* the class of the last explanation given (not necessarily msg): a
     * waiting job is offered the same one every reconcile, and classifying
     * it reads it several times over (ctl_wait_publish) */
    uint64_t in_sig;              /* hash of that explanation and invalid reason, 0 none */
    int in_cls;
    int64_t in_cls_ms;            /* since when explanations of class in_cls were given (a class
                                   * other than cls is published once it has held long enough) */
    uint64_t pub_sig;             /* the same hash of what msg published (0: not known); when
                                   * it differs from in_sig, the explanation given waits to be
                                   * published until interval_ms has passed since msg_ms */
};

/* Free p's message (p stays usable: zero it to reuse). */
void ctl_waitpub_release(struct ctl_waitpub *p);

/* Publish this reconcile's explanation msg of a job in state (waiting: Queued
 * or Preempted). A job not waiting clears everything. A waiting job's msg is
 * published at once when nothing was or its state changed. When its class
 * changes: at once for a problem found or gone (CTL_WAIT_INVALID), a
 * preemption under way or a partial admission, and from or to them
 * (ctl_wait_class_at_once); between capacity classes (Nodes, Quota,
 * Reserving, the minimum runtime, ...), once explanations of the new class
 * have been given for settle_ms without a break (p->in_cls_ms), so a reason
 * that flips back and forth while jobs come and go is not rewritten each
 * time. The same class's
 * newer text only when interval_ms has passed since the last publication
 * (one waits while p->pub_sig != p->in_sig). Returns 1 when a Waiting Event
 * is due (the class published was not evented in this wait; the bit is
 * set), else 0. */
int ctl_wait_publish(struct ctl_waitpub *p, int state, int waiting, const char *msg,
                     const char *invalid_reason, int64_t now_ms, int64_t interval_ms, int64_t settle_ms);
/* The same with gq_hash_str(msg) given as msg_hash (a caller that keeps it
 * with the text hashes an unchanged explanation once, not every reconcile). */
int ctl_wait_publish_hashed(struct ctl_waitpub *p, int state, int waiting, const char *msg, uint64_t msg_hash,
                            const char *invalid_reason, int64_t now_ms, int64_t interval_ms, int64_t settle_ms);
/* A capacity class: the job waits for room (Nodes, Quota, Reserving, the
 * minimum runtime, other), not on a problem, a preemption under way or a
 * partial admission (nor before any explanation). */
int ctl_wait_class_capacity(int cls);
/* A change of the published class from to class to is published at once
 * (1), not after the settle time (0): unless both are capacity classes
 * (ctl_wait_publish). */
int ctl_wait_class_at_once(int from, int to);
/* Seed p, when nothing was published yet (a restarted controller), from the
 * object's current status st: when st shows the same waiting state and the
 * class cls, its message and position count as published at now_ms and the
 * class as evented, so an unchanged wait is neither rewritten nor evented
 * again. Returns 1 when seeded, else 0 (p unchanged). */
int ctl_wait_adopt(struct ctl_waitpub *p, const struct api_gpujob_status *st, int state, int cls,
                   int64_t now_ms);
/* ctl_wait_adopt of what a cached GPUJob (pruned or not) shows, cls from msg
 * and invalid_reason (ctl_wait_classify). The status is decoded only when its
 * cached status.state is the wait's own, the only status adoption takes: a
 * waiting job not adopted is looked at every reconcile. */
int ctl_wait_adopt_shown(struct ctl_waitpub *p, const cJSON *job, int state, const char *msg,
                         const char *invalid_reason, int64_t now_ms);
/* The position a job at exact queue position pos shows: pos when within the
 * first head (1-based), else 0 (none). */
int ctl_position_shown(int pos, int head);

/* ------------------------------------------------------------ controller */

struct gq_ctl;

/* Run the controller until SIGTERM/SIGINT. Returns the exit code. */
int ctl_run(const struct ctl_config *cfg);

#endif
