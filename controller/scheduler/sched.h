/*
 * sched.h — the pure scheduling core of gangq.
 *
 * Role: fed a snapshot (config, nodes, pools, teams, running and waiting jobs,
 * `now`), sched_cycle returns decisions: ADMIT (a placement per replica),
 * PREEMPT (a victim, the job it makes room for, a reason) and WAIT (an
 * explanation sentence and the position in the team queue). No I/O, no clock,
 * no allocation outside the result and the optional reusable context.
 *
 * Invariants:
 *  - Deterministic: the same snapshot gives the same decisions byte for byte
 *    (all orders are total: ties end on job id / node index).
 *  - Never over capacity: per device GPU milli <= 1000, cpu and memory within
 *    allocatable minus foreign usage minus gangq usage.
 *  - All-or-nothing for gangs; required topology respected; quota respected
 *    (nominal + borrowable from the cohort).
 *  - Never preempts an Inference job for a non-Inference job, never a
 *    non-preemptible job, and for a non-Inference preemptor never a job
 *    admitted less than config.min_runtime_s ago.
 *
 * Ownership: every pointer inside the snapshot (strings, arrays) is owned by
 * the caller and must stay valid during the call. The result is owned by the
 * caller and released with sched_result_free; every pointer inside it (messages,
 * placements, domain names) is owned by the result. Indices in decisions refer
 * to the snapshot's arrays.
 *
 * Semantics chosen where DESIGN.md is silent (queue, quota, pools, non-gang
 * jobs, reservations, preemption, explanations): see README.md in this folder.
 * CPU-only jobs are not limited by GPU quota. A job with more than one
 * acceptable product is quota-checked per product and may only use products
 * whose quota admits the whole job.
 *
 * Units: cpu in millicores, memory in bytes, GPU shares in milli-GPU (1000 = one
 * device), time in seconds (int64, supplied by the caller), GPU memory labels in
 * MiB (as NVIDIA GFD writes nvidia.com/gpu.memory).
 */
#ifndef GQ_SCHED_H
#define GQ_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define SCHED_LEVELS_MAX 6   /* topology levels, widest first */
#define SCHED_MAX_DEVICES 32 /* GPUs per node (device bitmask is 32 bits) */
#define SCHED_MAX_TYPES 8    /* acceptable GPU products per job */
#define SCHED_MSG_MAX 512    /* longest explanation / reason sentence */

enum sched_class { SCHED_INFERENCE = 0, SCHED_BATCH = 1, SCHED_TRAINING = 2 };
#define SCHED_CLASS_BIT(c) (1u << (unsigned)(c))

enum sched_taint_effect {
    SCHED_NO_SCHEDULE = 0,
    SCHED_PREFER_NO_SCHEDULE = 1, /* never blocks */
    SCHED_NO_EXECUTE = 2,
    SCHED_EFFECT_ANY = -1 /* tolerations only: matches every effect */
};

/* Node scoring used for single-replica choices. */
enum sched_policy {
    SCHED_POLICY_GANGQ = 0,   /* FGD (fragmentation gradient) + best-fit tie-breaks */
    SCHED_POLICY_FGD = 1,     /* FGD alone (ties: node index), the published baseline */
    SCHED_POLICY_BESTFIT = 2, /* least free GPUs left, then least free cpu */
    SCHED_POLICY_FIRSTFIT = 3 /* lowest node index that fits */
};

struct sched_level {
    const char *name;      /* "zone", "block", "rack", "node" */
    const char *label_key; /* node label holding the domain name */
};

struct sched_config {
    int nlevels;                                  /* 0..SCHED_LEVELS_MAX */
    struct sched_level levels[SCHED_LEVELS_MAX];  /* widest first */
    const char *gpu_product_key;  /* default "nvidia.com/gpu.product" */
    const char *gpu_memory_key;   /* default "nvidia.com/gpu.memory" (MiB) */
    int64_t min_runtime_s;        /* no preemption of work younger than this for a
                                   * non-Inference preemptor (Inference preempts at once) */
    double usage_norm_s;          /* fair share: decayed GPU-seconds worth one held GPU; default 3600 */
    int preemption;               /* 1 = plan preemptions (default), 0 = never */
    int max_reservations;         /* blocked heads that may reserve capacity per cycle; default 1 */
    enum sched_policy policy;     /* default SCHED_POLICY_GANGQ */
    int fgd_score_levels;         /* GANGQ: FGD score = floor(levels * sigmoid(-increase
                                   * in GPUs)); equal scores go to best fit. Default 200
                                   * (the FGD plugin uses 100), chosen on openb */
};

/* Defaults: levels zone/block/rack/node with the label keys of DESIGN.md,
 * GFD label keys, min_runtime_s 300, usage_norm_s 3600, preemption on,
 * max_reservations 1, policy GANGQ, fgd_score_levels 200. */
void sched_config_default(struct sched_config *c);
/* Level index for a level name, or -1. */
int sched_config_level(const struct sched_config *c, const char *name);

struct sched_label { const char *key; const char *value; };

/* Required node affinity (Kubernetes nodeSelectorTerms). */
enum sched_match_op {
    SCHED_OP_IN = 0,         /* label present with one of values */
    SCHED_OP_NOT_IN = 1,     /* label absent or not one of values */
    SCHED_OP_EXISTS = 2,     /* label present (no values) */
    SCHED_OP_DOES_NOT_EXIST = 3,
    SCHED_OP_GT = 4,         /* label an integer greater than values[0] (an integer) */
    SCHED_OP_LT = 5          /* label an integer less than values[0] */
};

/* One matchExpressions (field 0: key is a node label key) or matchFields
 * (field 1: key is "metadata.name", op In or NotIn, compared with the node
 * name) entry. values: caller-owned array of nvalues strings. */
struct sched_match_expr {
    const char *key;
    int field;
    enum sched_match_op op;
    const char *const *values; int nvalues;
};

/* A node matches a term when it matches every expression of the term (a term
 * without expressions matches no node, as in Kubernetes). */
struct sched_affinity_term {
    const struct sched_match_expr *exprs; int nexprs;
};

struct sched_taint {
    const char *key;
    const char *value; /* may be NULL */
    enum sched_taint_effect effect;
};

/* Kubernetes toleration: key NULL or "" with exists = tolerates everything;
 * exists = 1 matches any value; effect SCHED_EFFECT_ANY matches every effect. */
struct sched_toleration {
    const char *key;
    const char *value;
    int exists;
    int effect; /* enum sched_taint_effect or SCHED_EFFECT_ANY */
};

struct sched_node {
    const char *name;
    const struct sched_label *labels; int nlabels;
    const struct sched_taint *taints; int ntaints;
    int unschedulable;
    int ready;
    int64_t cpu_milli;      /* allocatable */
    int64_t mem_bytes;      /* allocatable */
    int gpus;               /* allocatable devices, 0..SCHED_MAX_DEVICES */
    const char *gpu_product; /* NULL: from label config.gpu_product_key */
    int64_t gpu_mem_mib;     /* 0: from label config.gpu_memory_key */
    int pool;                /* index into snapshot pools, -1 = in no pool */
    /* usage by pods gangq does not own */
    int64_t foreign_cpu_milli;
    int64_t foreign_mem_bytes;
    uint16_t foreign_gpu_milli[SCHED_MAX_DEVICES]; /* per device, 0..1000 */
    /* Of the foreign usage, what pods being deleted hold (each at most the
     * foreign figure): gone soon. A blocked job may reserve the node as if
     * it were free, and its reservation starts, for backfill, as soon as
     * they are gone. Appended (0: none). */
    int64_t releasing_cpu_milli;
    int64_t releasing_mem_bytes;
    uint16_t releasing_gpu_milli[SCHED_MAX_DEVICES];
};

struct sched_pool {
    const char *name;
    unsigned home_classes; /* SCHED_CLASS_BIT(...) mask */
    int protected_pool;    /* other classes only borrow idle GPUs, first victims */
    int reserve_gpus;      /* GPUs kept free for home classes (protected pools) */
};

struct sched_quota {
    const char *gpu_type;     /* a GPU product, or "*" = any product */
    int64_t gpus;             /* nominal */
    int64_t borrowing_limit;  /* -1 = unlimited */
    int64_t lending_limit;    /* -1 = unlimited */
};

/* A team with nquota == 0 has no quota limit. A job of a team that has quota
 * entries but none matching the GPU product (nor "*") cannot use that product. */
struct sched_team {
    const char *name;
    const char *cohort;       /* NULL or "" = no cohort */
    double weight;            /* > 0; 0 is treated as 1 */
    const struct sched_quota *quota; int nquota;
    double usage_gpu_s;       /* decayed usage history (caller applies half-life) */
};

/* What one replica needs. gpus > 0: whole devices; gpu_milli in 1..999: a share
 * of one device; both 0: CPU-only. */
struct sched_request {
    int gpus;
    int gpu_milli;
    const char *types[SCHED_MAX_TYPES]; int ntypes; /* acceptable products, 0 = any */
    int min_gpu_mem_gib;
    int64_t cpu_milli;
    int64_t mem_bytes;
};

/* Where one replica sits: node index and the devices it uses (bit i = device i;
 * a share uses exactly one bit, a CPU-only replica none). */
struct sched_replica {
    int32_t node;
    uint32_t devs;
};

enum sched_job_state {
    SCHED_JOB_WAITING = 0,
    SCHED_JOB_RUNNING = 1 /* admitted: placement holds its replicas */
};

struct sched_job {
    const char *id;           /* "namespace/name", unique */
    int team;                 /* index into teams, -1 = none (no quota) */
    enum sched_class cls;
    int32_t priority;
    int preemptible;
    int gang;                 /* 1 = all-or-nothing */
    int replicas;
    struct sched_request req; /* per replica */
    const struct sched_toleration *tols; int ntols;
    int topo_required;        /* level index, -1 = none */
    int topo_preferred;       /* level index, -1 = none */
    int topo_spread;          /* level index, -1 = none (a non-gang job's replicas still
                               * prefer the nodes holding fewest of its replicas) */
    int pool;                 /* index into pools, -1 = default by class */
    int64_t enqueue_time;
    enum sched_job_state state;
    /* RUNNING: placement of its replicas (caller-owned). A non-gang job may be
     * RUNNING with nplaced < replicas: the missing replicas are placed like a
     * waiting job's and an ADMIT lists only the new replicas. */
    const struct sched_replica *placement; int nplaced;
    int64_t admitted_at;
    /* RUNNING and being stopped (preempted, pods terminating): it still holds
     * its capacity but is never chosen as a victim again. terminating_for is
     * the snapshot index of the job it makes room for (-1 unknown); that job
     * plans no further preemption while such victims remain, and their nodes
     * are held for it. */
    int terminating;
    int terminating_for;
    /* Pod nodeSelector (caller-owned, like tols): a node is eligible only when
     * its labels hold every key with exactly that value. nnode_selector 0 = any
     * node. Nodes that do not match are never used for this job (placement,
     * preemption, reservations) and count as "node selector mismatch" in the
     * explanation. Appended last so positional initialisers stay valid. */
    const struct sched_label *node_selector; int nnode_selector;
    /* Id of the job this one was last preempted to make room for (caller-
     * owned; NULL = never, or forgotten). Honoured only while that job is in
     * the snapshot with replicas to place (WAITING, or a RUNNING non-gang job
     * short of replicas):
     *  - this job WAITING (its pods gone): the preemptor keeps a claim. At
     *    the start of each cycle a waiting preemptor with such victims (or
     *    with terminating ones) whose placement fits once its terminating
     *    victims are gone claims the nodes of that placement and the quota it
     *    needs: its victims and every job of lower or equal priority stay off
     *    them until it is placed; a higher-priority job may take them. When
     *    its placement no longer fits it gives the claim up (its victims are
     *    free to run) and may plan anew.
     *  - this job RUNNING (re-admitted): it is never chosen as a victim for
     *    that job again, so no job is preempted twice for the same waiting
     *    preemptor.
     * Appended last so positional initialisers stay valid. */
    const char *preempted_for;
    /* WAITING: what its reservation held last cycle, as the WAIT decision's
     * `reserved` returned it (caller-owned; NULL none). The reservation keeps
     * that domain (or those nodes) until another is strictly closer to
     * fitting, so backfill does not fill the one being drained. Appended. */
    const char *reserved_domain;
    /* Ids of the jobs preempted to make room for this one since it was last
     * admitted (caller-owned array and strings; npreempted_victims 0 = none).
     * The caller appends a victim on each PREEMPT decision naming this job and
     * clears the list when this job is admitted or leaves. Honoured while this
     * job has replicas to place: none of them is chosen as its victim again,
     * whatever it was preempted for since (preempted_for keeps only the last
     * preemptor), so no job is preempted twice for one waiting preemptor, even
     * after the preemptor gave its claim up; and its claim keeps them off its
     * claimed nodes whatever their priority. Ids not in the snapshot are
     * ignored. Appended. */
    const char *const *preempted_victims; int npreempted_victims;
    /* Required node affinity (caller-owned, like node_selector): a node is
     * eligible only when it matches at least one of the naffinity terms (and
     * the node selector). naffinity 0 = no affinity. Nodes that match no term
     * are never used for this job and count as "node affinity mismatch" in
     * the explanation. Appended. */
    const struct sched_affinity_term *affinity; int naffinity;
    /* The longest one admission may run, s (0 = no limit): the caller stops
     * a RUNNING job at admitted_at + max_run_s. Backfill: a node reserved
     * for a blocked head (see reserved_domain) stays open to a job with a
     * limit that ends by the reservation's start, the earliest time the
     * head fits on its reserved nodes once the jobs there end by their own
     * limits (a job there without one: never, no backfill). Appended. */
    int64_t max_run_s;
};

/* Workload shape for fragmentation scoring (FGD): tasks drawn with these
 * relative weights. A shape of weight 0 or less is ignored. Absent (none of
 * weight > 0): sched_cycle derives them from the waiting queue. */
struct sched_shape {
    struct sched_request req;
    double weight;
};

struct sched_snapshot {
    const struct sched_config *config; /* NULL = defaults */
    int64_t now;
    const struct sched_node *nodes; int nnodes;
    const struct sched_pool *pools; int npools;
    const struct sched_team *teams; int nteams;
    const struct sched_job *jobs; int njobs;
    const struct sched_shape *shapes; int nshapes;
};

enum sched_decision_kind { SCHED_ADMIT = 1, SCHED_PREEMPT = 2, SCHED_WAIT = 3 };

struct sched_decision {
    enum sched_decision_kind kind;
    int job;          /* snapshot job index */
    int for_job;      /* PREEMPT: the job it makes room for; WAIT/ADMIT: -1 */
    int position;     /* WAIT: 1-based position in its team's queue; else 0 */
    int nrep;         /* ADMIT: replicas placed */
    int unschedulable; /* WAIT: could not fit even an empty cluster (see unschedulable_msg;
                        * here it fills the padding before rep) */
    const struct sched_replica *rep; /* ADMIT: placement (result-owned) */
    const char *domain;  /* ADMIT: the tightest labelled domain, at or wider than the job's
                          * required (else preferred) level, holding every replica of this
                          * admission; NULL when none does or the job names no level */
    const char *message; /* WAIT: explanation; PREEMPT: reason; ADMIT: summary */
    /* WAIT: the job could preempt once the victims it needs are past the
     * minimum runtime: the time (snapshot clock, seconds) when the last of them
     * is; the message ends "... protected by the minimum runtime (Ns) until
     * <RFC 3339 of that time>". 0 otherwise. Appended last. */
    int64_t until;
    /* WAIT: what its reservation holds this cycle (result-owned; NULL none):
     * the domain name at its required level, or without one the reserved
     * node names joined by ','. The caller passes it back as the job's
     * reserved_domain next cycle. The message ends "; reserves rack r1" /
     * "; reserves node n0" / "; reserves nodes n0,n1". Appended last. */
    const char *reserved;
    /* WAIT of a job with every replica to place: unschedulable is 1 when it could not fit
     * even with every node empty — the nodes its GPU types, GPU memory,
     * pool, tolerations, node selector and node affinity allow (readiness
     * and cordons ignored: they pass) hold fewer replicas than it needs, in
     * any domain of its required level for a gang (distinct spread domains
     * counted once), one for a non-gang job. Usage and quota are ignored.
     * unschedulable_msg (result-owned, NULL when 0) gives the figures, e.g.
     * "needs 16 GPUs (2x8) of H100 in one node; the largest eligible node
     * has 8 GPUs and fits 1 of 2 replicas; 4 of 12 nodes eligible (8 node
     * selector mismatch)". Appended last (the flag: unschedulable above). */
    const char *unschedulable_msg;
};

struct sched_stats {
    int waiting;        /* waiting jobs considered */
    int admitted;
    int preempted;
    int placements_tried;
    int shape_cache_hits;
    int preempt_plans;      /* preemption plans run for blocked jobs */
    int preempt_remembered; /* blocked jobs answered by an equal plan that found nothing */
    int backfilled;         /* of the admissions, those on nodes reserved for another job
                             * (max_run_s ends before that job could start) */
};

struct sched_result {
    struct sched_decision *d; int n; /* ADMITs and PREEMPTs in cycle order, then WAITs in queue order */
    struct sched_stats stats;
    /* The earliest snapshot time (s, > snap.now) at which time alone may
     * change what this cycle decided on the same snapshot: while a job
     * waits and preemption is on, the first end of a running (or just
     * admitted) job's minimum-runtime protection. 0: none, the same
     * snapshot gets the same decisions at any later time. The only clock
     * rule of the core: a caller may skip cycles on an unchanged snapshot
     * until then. */
    int64_t due;
    struct sched_result_mem *mem;    /* private storage */
};

/* Reusable scratch across cycles (optional, speeds repeated cycles). */
struct sched;
struct sched *sched_new(void);
void sched_free(struct sched *s);
/* Bytes of scratch currently held (for the memory-per-job figure). */
size_t sched_mem_bytes(const struct sched *s);

/* One scheduling cycle. ctx may be NULL (temporary scratch). Returns 0 and a
 * result in *out, or GQ_EINVAL (bad snapshot: message names the field) /
 * GQ_ENOMEM. */
int sched_cycle(struct sched *ctx, const struct sched_snapshot *snap,
                struct sched_result **out, char *err, size_t errlen);
void sched_result_free(struct sched_result *r);
/* As sched_result_free, but the result's decision array is kept in ctx (the
 * scratch it was made with, or any) for the next sched_cycle on ctx: a cycle
 * over 15,000 jobs no longer page-faults a fresh megabyte for its decisions.
 * A kept array more than four times what a cycle needs is freed by that
 * cycle (a burst gone). ctx NULL: sched_result_free. r is freed. */
void sched_result_recycle(struct sched *ctx, struct sched_result *r);
/* Heap bytes held by a result (decisions, placements, messages). */
size_t sched_result_bytes(const struct sched_result *r);

/* Text helpers. */
const char *sched_class_name(enum sched_class c);
const char *sched_decision_name(enum sched_decision_kind k);

/*
 * Persistent capacity index for one-task-at-a-time placement (the openb replay:
 * no queue, tasks placed on arrival). Holds a copy of what it needs from the
 * nodes (strings are copied); the caller's node array may be freed afterwards.
 * Nodes start with their foreign usage only.
 */
struct sched_index;
struct sched_index *sched_index_new(const struct sched_config *cfg,
                                    const struct sched_node *nodes, int nnodes,
                                    char *err, size_t errlen);
void sched_index_free(struct sched_index *ix);
/* Shape distribution for FGD scoring (copied; shapes of weight 0 or less are
 * ignored). Without one, FGD terms are 0 and the policy degrades to its
 * tie-breaks. */
int sched_index_set_shapes(struct sched_index *ix, const struct sched_shape *shapes,
                           int nshapes, char *err, size_t errlen);
/* Choose a node (and devices) for one replica by the configured policy and
 * commit it. Returns 0 with *out filled, GQ_ENOTFOUND when no node fits,
 * GQ_EINVAL for a bad request. tols may be NULL. */
int sched_place_one(struct sched_index *ix, const struct sched_request *req,
                    const struct sched_toleration *tols, int ntols,
                    struct sched_replica *out);
/* Commit / release a given placement (e.g. replay existing tasks, departures). */
int sched_index_alloc(struct sched_index *ix, const struct sched_request *req,
                      const struct sched_replica *r);
int sched_index_release(struct sched_index *ix, const struct sched_request *req,
                        const struct sched_replica *r);
/* Cluster figures: allocated GPU milli, total GPU milli, and the expected
 * fragmentation (GPU milli, sum over nodes, per the shape distribution). */
void sched_index_totals(const struct sched_index *ix, int64_t *alloc_milli,
                        int64_t *total_milli, double *frag_milli);

#endif
