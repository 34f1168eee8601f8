/*
 * sched_int.h — internals shared by the scheduling core's files (not a public
 * API): the per-node capacity record, the interned request form, the FGD
 * fragmentation measure and a small string interner.
 *
 * Invariants: sc_node.full_free and free_milli always match used[] (callers
 * change used[] only through sc_apply or call sc_recount). A device's free
 * capacity is max(0, 1000 - used). GPU type ids are < 64 so a request's
 * acceptable types fit one uint64_t mask (SC_ANY = every type).
 *
 * Ownership: sc_strtab owns its slot array but not the strings it maps; the
 * strings must outlive the table.
 */
#ifndef GQ_SCHED_INT_H
#define GQ_SCHED_INT_H

#include <stddef.h>
#include <stdint.h>
#include "sched.h"

#define SC_ANY (~(uint64_t)0)
#define SC_MAX_GPU_TYPES 64
/* minMemoryGiB is met by a node reporting at least (100 - this) % of it (driver/ECC reserve) */
#define SC_GPU_MEM_TOLERANCE_PCT 7

struct sc_node {
    int32_t type;         /* GPU type id, -1 = no product */
    int32_t ndev;
    int64_t gpu_mem_mib;
    int64_t cpu_free;
    int64_t mem_free;
    int32_t full_free;    /* devices with nothing used */
    int32_t free_milli;   /* sum of device free capacity */
    uint16_t used[SCHED_MAX_DEVICES];
};

struct sc_req {
    int32_t gpus;   /* whole devices */
    int32_t milli;  /* share of one device (1..999) */
    int64_t cpu;
    int64_t mem;
    uint64_t types; /* acceptable type ids (SC_ANY = any) */
    int64_t min_mem_mib;
};

struct sc_shape {
    struct sc_req r;
    double w; /* normalised: weights sum to 1 */
};

static inline int sc_dev_free(const struct sc_node *n, int d)
{
    return n->used[d] >= 1000 ? 0 : 1000 - (int)n->used[d];
}

static inline int sc_is_gpu(const struct sc_req *r) { return r->gpus > 0 || r->milli > 0; }

void sc_recount(struct sc_node *n);
/* Type and GPU memory match (always true for a CPU-only request). */
int sc_static_ok(const struct sc_node *n, const struct sc_req *r);
/* Enough free GPU (whole devices or one device with the share) for one replica. */
int sc_gpu_ok(const struct sc_node *n, const struct sc_req *r);
/* Full fit of one replica: static, gpu, cpu, memory. */
int sc_fit(const struct sc_node *n, const struct sc_req *r);
/* How many replicas fit on the node at once, capped at cap. */
int sc_fit_count(const struct sc_node *n, const struct sc_req *r, int cap);
/* Allocate (sign +1) or release (sign -1) one replica on devs. */
void sc_apply(struct sc_node *n, const struct sc_req *r, uint32_t devs, int sign);
/* Same GPU class: GPU demand (whole devices or share), accepted types and GPU
 * memory. Shapes are told apart by class at least (the type is part of it: a
 * typed task's fragmentation differs by node model). */
int sc_same_class(const struct sc_req *a, const struct sc_req *b);
/* Order shapes by GPU class so sc_frag evaluates each class's GPU part once. */
void sc_shapes_sort(struct sc_shape *sh, int nsh);
/* Expected fragmentation of the node's free GPU milli under the shapes (FGD). */
double sc_frag(const struct sc_node *n, const struct sc_shape *sh, int nsh);
/* Choose devices for one replica (node must fit). With shapes and an FGD
 * policy a share goes to the device minimising the fragmentation increase,
 * else to the fullest device that fits. *delta gets frag(after)-frag(before)
 * when shapes are given (0 otherwise); frag_before is sc_frag of n. */
uint32_t sc_pick_devs(const struct sc_node *n, const struct sc_req *r,
                      const struct sc_shape *sh, int nsh, enum sched_policy pol,
                      double frag_before, double *delta);

/* A whole node: it has GPUs and none of them is in use (work that takes no
 * GPU may run there). */
static inline int sc_node_whole(const struct sc_node *n)
{
    return n->ndev > 0 && n->full_free == n->ndev;
}

/* Compare two candidate placements by policy: returns <0 if a is better.
 * delta: FGD increase; free_after: GPU milli left; cpu_after: cpu left. */
struct sc_cand {
    double delta;
    int32_t level; /* sc_fgd_level(delta) (GANGQ) */
    int32_t whole; /* sc_node_whole before the placement */
    int32_t kept;  /* sc_whole_kept: the keep-whole rule protects the node */
    int64_t free_after;
    int64_t cpu_after;
    int32_t node;
    int32_t slot;  /* the caller's own index of the candidate */
    uint32_t devs;
};
/* GANGQ: quantised FGD score, then a node not whole, then best fit. */
int sc_cand_cmp(const struct sc_cand *a, const struct sc_cand *b, enum sched_policy pol);
/* The keep-whole rule holds under the gangq policy for a request of GPUs
 * (whole or a share) made by a single replica without topology preference
 * (simple: the caller's verdict on replicas and topology). A CPU-only request
 * breaks no GPU; whether its cpu strands a node's GPUs is the FGD measure's
 * business. The other policies are reference baselines and stay as published. */
static inline int sc_keep_whole(enum sched_policy pol, const struct sc_req *r, int simple)
{
    return pol == SCHED_POLICY_GANGQ && simple && sc_is_gpu(r);
}
/* Choosing one candidate under the keep-whole rule: a kept node (see
 * sc_whole_kept) may be chosen only when no candidate is a node in use; the
 * others compete by sc_cand_cmp. Offer every candidate, then take the best. */
struct sc_pick {
    struct sc_cand all, unkept; /* best of all, best of those not kept */
    int have_all, have_unkept, in_use;
};
void sc_pick_init(struct sc_pick *p);
void sc_pick_offer(struct sc_pick *p, const struct sc_cand *c, enum sched_policy pol);
/* NULL when nothing was offered. */
const struct sc_cand *sc_pick_best(const struct sc_pick *p);
/* The most whole GPUs (a share counts as one) that a shape which may run on n
 * asks, among shapes that fit n's device count; 0 when none. Depends only on
 * the node's type, GPU memory and device count, not on its usage. */
int32_t sc_shape_gpus_max(const struct sc_node *n, const struct sc_shape *sh, int nsh);
/* The keep-whole rule's verdict on node n for request r: n is whole and the
 * shape distribution does not price breaking it, i.e. no shape that may run
 * on n needs more GPUs than r would leave whole there (shape_gpus_max from
 * sc_shape_gpus_max). The FGD measure is then blind to the break (an empty or
 * small distribution), so the node is kept for work the distribution does not
 * show yet (a gang, a larger job). */
int sc_whole_kept(const struct sc_node *n, const struct sc_req *r, int32_t shape_gpus_max);
/* GANGQ's quantised FGD score: floor(levels * sigmoid(-delta / 1000)), delta in
 * milli-GPU; like the FGD scheduler plugin's 0..100 score, at finer resolution. */
int32_t sc_fgd_level(double delta, int levels);
/* The published FGD plugin's score resolution (framework.MaxNodeScore). */
#define SC_FGD_PLUGIN_LEVELS 100

/* String interner: maps string content to dense ids 0..n-1 in insertion order. */
struct sc_strtab {
    const char **keys; /* by id */
    int32_t *slots;    /* open addressing, -1 empty */
    size_t nslots;
    int n;
    int cap;
};
void sc_strtab_init(struct sc_strtab *t);
void sc_strtab_release(struct sc_strtab *t);
void sc_strtab_reset(struct sc_strtab *t);
/* Id of s, inserting it when absent (add != 0); -1 when absent and !add;
 * -2 on allocation failure. */
int sc_strtab_get(struct sc_strtab *t, const char *s, int add);

/* Label lookup on a snapshot node; NULL when absent. */
const char *sc_label(const struct sched_node *n, const char *key);
/* 1 when every NoSchedule/NoExecute taint of the node is tolerated. */
int sc_tolerates(const struct sched_taint *taints, int ntaints,
                 const struct sched_toleration *tols, int ntols);
/* GPU memory of a node in MiB from the field or the label; 0 unknown. */
int64_t sc_node_gpu_mem(const struct sched_node *n, const struct sched_config *c);
const char *sc_node_product(const struct sched_node *n, const struct sched_config *c);

#endif
