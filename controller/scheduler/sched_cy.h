/*
 * sched_cy.h — the state of one scheduling cycle (struct cy and its tables)
 * and the functions the cycle's files share (not a public API).
 *
 * Files: sched.c (cycle driver: queue order, admit/wait), sched_build.c
 * (snapshot validation, index build), sched_place.c (placement),
 * sched_quota.c (quota, claims, fair share), sched_explain.c (WAIT
 * explanations), sched_preempt.c (preemption, claims pass, reservations).
 *
 * Ownership: everything hangs off struct cy for one sched_cycle call; the
 * arrays live in the struct sched slots (cy_slot) and are reused across
 * cycles; strings in decisions are owned by the result (cy_res_str).
 */
#ifndef GQ_SCHED_CY_H
#define GQ_SCHED_CY_H

#include <stddef.h>
#include <stdint.h>
#include "sched_int.h"

#define CY_WINDOW_NODES 64  /* fitting nodes examined per placement (no required level) */
#define CY_WINDOW_DOMAINS 16 /* feasible domains examined per placement */
#define CY_MAX_PREEMPT_TRIES 32
#define CY_MAX_VICTIM_CANDS 256
#define CY_MAX_DERIVED_SHAPES 64

enum {
    R_OK = 0,
    R_NOTREADY,
    R_UNSCHED,
    R_POOL,
    R_TAINT,
    R_SELECTOR,
    R_AFFINITY,
    R_NOGPU,
    R_TYPE,
    R_GPUMEM,
    R_RESERVED,
    R_CLAIMED,
    R_PROTECTED,
    R_GPUS,
    R_CPU,
    R_MEM,
    R_COUNT
};

/* ---------------- internal state ---------------- */

struct cy_node {
    struct sc_node c;
    int32_t dom[SCHED_LEVELS_MAX];
    int32_t pool;
    int32_t reserved_by; /* job index, -1 */
    int64_t res_start;   /* reserved: when its job could start here at the earliest (the
                          * snapshot clock, s); a job with a limit ending by then may use
                          * the node (backfill); 0 = none may */
    /* Reserved by cy_reserve_for: capacity its job never needs here whatever of
     * the node's current work is still running when it starts (spare_set),
     * as of the node's free figures then (res_*); what the node has lost
     * since comes off it (cy_spare_count). */
    uint8_t spare_set;
    int32_t spare_dev, res_full_free;
    int64_t spare_cpu, spare_mem, res_cpu_free, res_mem_free;
    int32_t claimed_by;  /* waiting preemptor whose claim holds the node, -1 */
    uint32_t ver;
    uint8_t excluded;    /* R_NOTREADY / R_UNSCHED / 0 */
    double frag;
    /* FGD score cache: request id + 1, version, delta, devs */
    uint32_t cache_rid[4];
    uint32_t cache_ver[4];
    uint32_t cache_devs[4];
    double cache_delta[4];
};

struct cy_quota {
    int team;
    int type;        /* GPU type id, -2 = "*", -3 = product no node has */
    int group;       /* cohort+key group */
    int64_t nominal; /* milli */
    int64_t borrow;  /* milli, -1 unlimited */
    int64_t lendable;
    int64_t used;
    const char *name;
    /* the last quota wait message of this entry (cy_wait_msg) and the
     * facts it says: result-owned, reset with the entry each cycle */
    const char *wmsg, *wmsg_nodes;
    int64_t wmsg_used, wmsg_need, wmsg_may, wmsg_claimed;
};

struct cy_group {
    int64_t lendable_sum;
    int64_t over_sum;
    int64_t claimed; /* milli claimed by waiting preemptors of the group's teams */
};

struct sort_key {
    int64_t enq;
    int32_t prio;
    int32_t idx;
};

struct cy_team {
    double weight;
    double hist;    /* usage_gpu_s / usage_norm_s */
    double share;   /* (alloc GPUs + hist) / weight, kept current */
    int64_t alloc;  /* GPU milli held */
    int q0, nq;     /* quota entries */
    int cohort;     /* interned, -1 none */
    int unlimited;
    int *queue;     /* waiting job indices, team order */
    int nqueue, head;
    int32_t hprio;     /* head job's priority and enqueue time (cached) */
    int64_t henq;
    int hjob;
    int hborrow;       /* the head must borrow (goes after heads within nominal) */
    struct sort_key *keys; /* queue's sort keys, same order */
    const char *name;
};

struct cy_job {
    struct sc_req r;   /* full acceptable type mask */
    int32_t team;      /* internal team index */
    int32_t want;      /* replicas to place */
    int32_t victim;    /* chosen as victim this cycle */
    int32_t decided;   /* 1 admitted, 2 waiting */
    int32_t stopping;  /* terminating victims making room for this job */
    int32_t claim_e;   /* quota entry its claim is charged to, -1 none */
    int64_t claim;     /* milli claimed while it waits for its victims */
    int64_t until;     /* victims it needs are protected by the minimum runtime until then */
    int32_t pf;        /* snapshot index of the job it was last preempted for, -1 */
    int32_t nvictims;  /* waiting jobs preempted for it (they wait for it) */
    int32_t claimant;  /* 1: its claim on nodes and quota held at the start of the cycle */
    const char *reserved; /* the domain (or nodes) its reservation holds, result-owned */
    int32_t reserved_n;   /* nodes reserved */
    int64_t res_start;    /* its reservation is free for it by then at the latest (the jobs
                           * there end by their limits); 0 not known */
    const char *msg;   /* WAIT message */
    int32_t pv_off, pv_n; /* its preempted_victims resolved (cy->pv), while it waits */
    const char *never_msg; /* WAIT: why it could not fit an empty cluster (NULL: it could) */
};

/* static eligibility class: types, min memory, pool, class, tolerations,
 * node selector, node affinity */
struct cy_skey {
    uint64_t types;
    int64_t min_mem;
    int32_t pool, cls, ntols, gpu, nsel, naff;
    const struct sched_toleration *tols;
    const struct sched_label *sel;
    const struct sched_affinity_term *aff;
    int *nodes; /* statically eligible nodes, ascending */
    int nnodes;
};

/* full shape key for the fail cache */
struct cy_key {
    int32_t skey;
    int32_t gpus, milli;
    int64_t cpu, mem;
    int32_t want, gang, L, P, S;
    int64_t run_s;  /* the job's max_run_s: the reserved nodes it may backfill differ */
    int32_t failed;
    int32_t cursor; /* position in the static list of the first node that fitted */
    const char *msg;
    int32_t never;  /* 0 not computed yet, 1 fits an empty cluster, 2 never fits */
    const char *never_msg; /* result-owned, when never == 2 */
};

struct str_store {
    char **s;
    int n, cap;
};

struct sched_result_mem {
    struct str_store strs;
    struct sched_replica *reps;
    size_t nreps, capreps;
    size_t capd; /* decisions the result's d array holds */
};

#define SLOT_COUNT 29 /* the SL_ ids below */
struct sched {
    void *buf[SLOT_COUNT];
    size_t cap[SLOT_COUNT];
    struct sc_strtab types, cohorts, groups, doms[SCHED_LEVELS_MAX];
    struct sc_strtab ids; /* job ids, only when some job names its preemptor */
    /* a recycled result's decision array (sched_result_recycle), taken by the
     * next cycle it is large enough for */
    struct sched_decision *dkeep;
    size_t dkeep_cap;
};

enum {
    SL_NODES, SL_JOBS, SL_TEAMQ, SL_ORDER, SL_CAND, SL_CAND2, SL_DOMCAP, SL_DOMFREE,
    SL_DOMSEEN, SL_QUOTA, SL_TEAMS, SL_POOLFREE, SL_VICT, SL_SEL, SL_MISC, SL_GROUPS, SL_RUNNING, SL_SORT, SL_MARK, SL_WCAP, SL_IDS, SL_PART, SL_PV,
    SL_VSUB, SL_VBEST, SL_VCHOSEN, SL_VDFREE, SL_REL, SL_RELKEEP, SL_COUNT_
};
_Static_assert(SL_COUNT_ == SLOT_COUNT, "SLOT_COUNT counts the SL_ ids");

/* A preemption plan that found no victim set, remembered while the cycle's
 * state stays as it was (cy.epoch): see cy_preempt. */
#define CY_PMEMO 16
struct cy_pmemo {
    uint64_t epoch;
    int32_t key, skfull, team, cls, pool, quota_blocked, priority;
    struct sc_req r, full;
    int64_t until;
};

struct cy {
    struct sched *ctx;
    const struct sched_snapshot *s;
    const struct sched_config *cfg;
    struct sched_result *res;
    int nn, nj, nt; /* nt includes the pseudo team for team -1 */
    struct cy_node *n;
    struct cy_job *j;
    struct cy_team *t;
    struct cy_quota *q;
    int nq;
    struct cy_group *g;
    int ngroups;
    int64_t *pool_free; /* fully free devices per pool */
    /* GPU nodes not whole, by GPU type + 1 (0: no product) and fully free devices */
    int32_t inuse_free[SC_MAX_GPU_TYPES + 1][SCHED_MAX_DEVICES + 1];
    int ndom[SCHED_LEVELS_MAX];
    int *domcap, *domseen;
    int *wcap; /* per-domain capacity seen by the search window (kept zeroed) */
    int64_t *domfree;
    int *cand, *candcap; /* scratch candidate lists */
    struct sc_shape *sh;
    int nsh;
    /* key tables */
    struct cy_skey *sk;
    int nsk, capsk;
    struct cy_key *k;
    int nk, capk;
    int32_t *kslots;
    size_t nkslots;
    /* FGD request ids */
    struct sc_req *rq;
    int nrq, caprq;
    uint32_t stamp; /* node marks for preemption relevance */
    int *running; /* running jobs holding capacity */
    int *pv;      /* resolved preempted_victims of the jobs, cy_job.pv_off/pv_n index it */
    int nrunning;
    int nocache;
    int reservations;
    int preempt_tries;
    /* nodes with usage being released (snapshot releasing_*), listed once a
     * cycle by the first cy_fits_released: rel[0..nrel) when rel_listed */
    int *rel, nrel, rel_listed;
    int young_skipped; /* victims passed over for the minimum runtime by the last plan */
    int pm_excl;       /* the last plan passed over a victim for its job alone */
    /* What placement and quota look like changes (an admission, a claim, a
     * reservation, victims chosen): the remembered plans (pm) stand for
     * nothing after. Tentative changes undone in the same call do not count. */
    uint64_t epoch;
    struct cy_pmemo pm[CY_PMEMO];
    int npm, pmnext;
    size_t ndec, capdec;
    int64_t cluster_gpus;
    char err[256];
};

/* ---------------- placement ---------------- */

struct place_ctx {
    int jx;
    const struct sched_job *jb;
    struct sc_req r;
    int want, gang, L, P, S;
    int skey;
    int key; /* -1 when caches are bypassed */
    int only_dom; /* >= 0: place only in this domain of level L (a victim plan's try) */
};

/* a quota entry's guaranteed part (nominal minus lendable), milli */
static inline int64_t cy_guaranteed(const struct cy_quota *q) { return q->nominal - q->lendable; }

/* sched.c */
void *cy_slot(struct sched *s, int id, size_t bytes);
const char *cy_res_str(struct cy *cy, const char *s);
struct sched_decision *cy_add_dec(struct cy *cy);
int cy_job_cmp_team(const struct sched_snapshot *s, int a, int b);
int cy_make_pc(struct cy *cy, int jx, uint64_t types, struct place_ctx *pc);

/* sched_build.c */
int cy_static_reason(struct cy *cy, const struct sched_job *jb, const struct sc_req *r, int i);
/* The same without readiness and cordon (what an empty cluster would offer). */
int cy_shape_reason(struct cy *cy, const struct sched_job *jb, const struct sc_req *r, int i);
/* 1 when node sn matches at least one term (naff 0: always 1). */
int cy_affinity_match(const struct sched_node *sn, const struct sched_affinity_term *aff,
                      int naff);
int cy_skey_get(struct cy *cy, int jx, const struct sc_req *r);
int cy_key_get(struct cy *cy, const struct cy_key *probe);
int cy_build(struct cy *cy);

/* sched_place.c */
int cy_job_topo(const struct cy *cy, int lvl);
int64_t cy_req_milli(const struct sc_req *r);
int cy_pool_access(const struct cy *cy, const struct sched_job *jb, int pool);
void cy_node_apply(struct cy *cy, int i, const struct sc_req *r, uint32_t devs, int sign);
/* Node i's capacity becomes *c (its indexes kept in step); the caller keeps
 * the old one to put back. */
void cy_node_set(struct cy *cy, int i, const struct sc_node *c);
int cy_preempted_for_waiting(const struct cy *cy, int p, int jx);
int cy_claim_blocks(const struct cy *cy, int claimant, int jx);
int cy_backfills(const struct cy *cy, const struct sched_job *jb, const struct cy_node *n);
/* Replicas of pc's job (at most cap) that the spare capacity of node n,
 * reserved for another job, holds: capacity that job never needs there. */
int cy_spare_count(const struct cy *cy, const struct cy_node *n, const struct place_ctx *pc, int cap);
int cy_dyn_reason(struct cy *cy, const struct place_ctx *pc, int i);
int cy_node_cap(struct cy *cy, const struct place_ctx *pc, int i);
int cy_dom_of(const struct cy *cy, int i, int lvl);
int cy_try_place(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps);

/* sched_quota.c */
int cy_quota_entry(const struct cy *cy, int team, int type);
uint64_t cy_quota_mask(const struct cy *cy, int jx);
void cy_team_share_update(struct cy_team *ct);
void cy_charge(struct cy *cy, int team, const struct sc_req *r,
               const struct sched_replica *reps, int n, int sign);
int cy_job_entry(const struct cy *cy, int jx, int type);
void cy_claim_set(struct cy *cy, int jx, int type);
void cy_claim_drop(struct cy *cy, int jx);
int cy_must_borrow(const struct cy *cy, int jx);
double cy_team_share(const struct cy *cy, int t);

/* sched_explain.c */
const char *cy_key_message(struct cy *cy, struct place_ctx *pc);
/* Could the job of pc fit with every node empty? Sets *msg (result-owned)
 * when it could not. Returns 1 never fits, 0 fits, or a negative error. */
int cy_never_fits(struct cy *cy, const struct place_ctx *pc, const char **msg);
int cy_wait_msg(struct cy *cy, int jx, const char *nodes_part, int quota_blocked,
                const char *extra);

/* sched_preempt.c */
int cy_reserve_for(struct cy *cy, const struct place_ctx *pc);
int cy_hold_for(struct cy *cy, int jx, int *type);
int cy_preempt(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps,
               int quota_blocked);
int cy_claims_take(struct cy *cy, struct sched_replica *reps);
/* Would the job of pc fit once the usage being released (stopping pods: a
 * suspended, deleted or requeued job's, deleting foreign ones) is gone? > 0
 * yes, 0 no, < 0 error; the cycle's state is unchanged either way. */
int cy_fits_released(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps);

#endif
