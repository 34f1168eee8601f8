/*
 * sched.c — one scheduling cycle: queue order, quota and cohorts, gang and
 * topology placement, head reservation, preemption planning, explanations.
 *
 * Cycle outline:
 *  1. Build per-node capacity (allocatable - foreign - running gangq jobs),
 *     topology domain ids per level, per-team quota usage and fair share.
 *  2. Merge the team queues: priority, then fair share (updated after every
 *     admission), then enqueue time, then id.
 *  3. For each waiting job: quota → placement (fail cache per shape key) →
 *     admit; else try preemption (victims are only planned: their capacity is
 *     not handed to anyone else this cycle, the preemptor's nodes are
 *     reserved for it); else the first blocked heads reserve the nodes
 *     closest to fitting them (no later job may use them this cycle).
 *  4. WAIT decisions carry an explanation built from per-reason node counts
 *     (computed once per shape key) and the team-queue position.
 *
 * Capacity only shrinks during a cycle (preemption trials are undone), so a
 * shape key that failed once fails again, and the scan cursor per key (the
 * first node that still fitted) never needs to move back.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"
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

/* ---------------- config ---------------- */

void sched_config_default(struct sched_config *c)
{
    memset(c, 0, sizeof(*c));
    c->nlevels = 4;
    c->levels[0] = (struct sched_level){"zone", "topology.kubernetes.io/zone"};
    c->levels[1] = (struct sched_level){"block", "topology.gangq.io/block"};
    c->levels[2] = (struct sched_level){"rack", "topology.gangq.io/rack"};
    c->levels[3] = (struct sched_level){"node", "kubernetes.io/hostname"};
    c->gpu_product_key = "nvidia.com/gpu.product";
    c->gpu_memory_key = "nvidia.com/gpu.memory";
    c->min_runtime_s = 300;
    c->usage_norm_s = 3600;
    c->preemption = 1;
    c->max_reservations = 1;
    c->policy = SCHED_POLICY_GANGQ;
    c->fgd_score_levels = 200;
}

int sched_config_level(const struct sched_config *c, const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < c->nlevels; i++)
        if (c->levels[i].name && strcmp(c->levels[i].name, name) == 0)
            return i;
    return -1;
}

const char *sched_class_name(enum sched_class c)
{
    switch (c) {
    case SCHED_INFERENCE: return "Inference";
    case SCHED_BATCH: return "Batch";
    case SCHED_TRAINING: return "Training";
    }
    return "?";
}

const char *sched_decision_name(enum sched_decision_kind k)
{
    switch (k) {
    case SCHED_ADMIT: return "admit";
    case SCHED_PREEMPT: return "preempt";
    case SCHED_WAIT: return "wait";
    }
    return "?";
}

/* ---------------- internal state ---------------- */

struct cy_node {
    struct sc_node c;
    int32_t dom[SCHED_LEVELS_MAX];
    int32_t pool;
    int32_t reserved_by; /* job index, -1 */
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
    const char *msg;   /* WAIT message */
    int32_t pv_off, pv_n; /* its preempted_victims resolved (cy->pv), while it waits */
};

/* static eligibility class: types, min memory, pool, class, tolerations,
 * node selector */
struct cy_skey {
    uint64_t types;
    int64_t min_mem;
    int32_t pool, cls, ntols, gpu, nsel;
    const struct sched_toleration *tols;
    const struct sched_label *sel;
    int *nodes; /* statically eligible nodes, ascending */
    int nnodes;
};

/* full shape key for the fail cache */
struct cy_key {
    int32_t skey;
    int32_t gpus, milli;
    int64_t cpu, mem;
    int32_t want, gang, L, P, S;
    int32_t failed;
    int32_t cursor; /* position in the static list of the first node that fitted */
    const char *msg;
};

struct str_store {
    char **s;
    int n, cap;
};

struct sched_result_mem {
    struct str_store strs;
    struct sched_replica *reps;
    size_t nreps, capreps;
};

#define SLOT_COUNT 23
struct sched {
    void *buf[SLOT_COUNT];
    size_t cap[SLOT_COUNT];
    struct sc_strtab types, cohorts, groups, doms[SCHED_LEVELS_MAX];
    struct sc_strtab ids; /* job ids, only when some job names its preemptor */
};

enum {
    SL_NODES, SL_JOBS, SL_TEAMQ, SL_ORDER, SL_CAND, SL_CAND2, SL_DOMCAP, SL_DOMFREE,
    SL_DOMSEEN, SL_QUOTA, SL_TEAMS, SL_POOLFREE, SL_VICT, SL_SEL, SL_MISC, SL_GROUPS, SL_RUNNING, SL_SORT, SL_MARK, SL_WCAP, SL_IDS, SL_PART, SL_PV
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
    int young_skipped; /* victims passed over for the minimum runtime by the last plan */
    size_t ndec, capdec;
    int64_t cluster_gpus;
    char err[256];
};

static void *slot(struct sched *s, int id, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (s->cap[id] < bytes) {
        void *p = realloc(s->buf[id], bytes);
        if (!p)
            return NULL;
        s->buf[id] = p;
        s->cap[id] = bytes;
    }
    return s->buf[id];
}

struct sched *sched_new(void)
{
    struct sched *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    sc_strtab_init(&s->types);
    sc_strtab_init(&s->cohorts);
    sc_strtab_init(&s->groups);
    sc_strtab_init(&s->ids);
    for (int i = 0; i < SCHED_LEVELS_MAX; i++)
        sc_strtab_init(&s->doms[i]);
    return s;
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    for (int i = 0; i < SLOT_COUNT; i++)
        free(s->buf[i]);
    sc_strtab_release(&s->types);
    sc_strtab_release(&s->cohorts);
    sc_strtab_release(&s->groups);
    sc_strtab_release(&s->ids);
    for (int i = 0; i < SCHED_LEVELS_MAX; i++)
        sc_strtab_release(&s->doms[i]);
    free(s);
}

size_t sched_mem_bytes(const struct sched *s)
{
    if (!s)
        return 0;
    size_t b = sizeof(*s);
    for (int i = 0; i < SLOT_COUNT; i++)
        b += s->cap[i];
    b += s->types.nslots * 4 + (size_t)s->types.cap * sizeof(char *);
    b += s->ids.nslots * 4 + (size_t)s->ids.cap * sizeof(char *);
    for (int i = 0; i < SCHED_LEVELS_MAX; i++)
        b += s->doms[i].nslots * 4 + (size_t)s->doms[i].cap * sizeof(char *);
    return b;
}

/* ---------------- result ---------------- */

void sched_result_free(struct sched_result *r)
{
    if (!r)
        return;
    if (r->mem) {
        for (int i = 0; i < r->mem->strs.n; i++)
            free(r->mem->strs.s[i]);
        free(r->mem->strs.s);
        free(r->mem->reps);
        free(r->mem);
    }
    free(r->d);
    free(r);
}

size_t sched_result_bytes(const struct sched_result *r)
{
    if (!r)
        return 0;
    size_t b = sizeof(*r) + (size_t)r->n * sizeof(*r->d);
    if (r->mem) {
        b += sizeof(*r->mem) + r->mem->capreps * sizeof(*r->mem->reps);
        b += (size_t)r->mem->strs.cap * sizeof(char *);
        for (int i = 0; i < r->mem->strs.n; i++)
            b += strlen(r->mem->strs.s[i]) + 1;
    }
    return b;
}

static const char *res_str(struct cy *cy, const char *s)
{
    struct str_store *st = &cy->res->mem->strs;
    if (st->n == st->cap) {
        int nc = st->cap ? st->cap * 2 : 64;
        char **p = realloc(st->s, (size_t)nc * sizeof(*p));
        if (!p)
            return NULL;
        st->s = p;
        st->cap = nc;
    }
    char *d = strdup(s);
    if (!d)
        return NULL;
    st->s[st->n++] = d;
    return d;
}

static struct sched_decision *add_dec(struct cy *cy)
{
    struct sched_result *r = cy->res;
    if (cy->ndec == cy->capdec) {
        size_t nc = cy->capdec ? cy->capdec * 2 : 64;
        struct sched_decision *d = realloc(r->d, nc * sizeof(*d));
        if (!d)
            return NULL;
        r->d = d;
        cy->capdec = nc;
    }
    struct sched_decision *d = &r->d[cy->ndec++];
    memset(d, 0, sizeof(*d));
    d->for_job = -1;
    r->n = (int)cy->ndec;
    return d;
}

/* ---------------- helpers ---------------- */

static int job_topo(const struct cy *cy, int lvl)
{
    return (lvl >= 0 && lvl < cy->cfg->nlevels) ? lvl : -1;
}

static int64_t req_milli(const struct sc_req *r)
{
    return r->gpus > 0 ? (int64_t)r->gpus * 1000 : r->milli;
}

/* pool access: 0 no, 1 yes, 2 borrow (protected pool of another class) */
static int pool_access(const struct cy *cy, const struct sched_job *jb, int pool)
{
    if (cy->s->npools == 0)
        return 1;
    if (jb->pool >= 0)
        return jb->pool == pool; /* a named pool: only its nodes */
    if (pool < 0)
        return 1;
    const struct sched_pool *p = &cy->s->pools[pool];
    if (p->home_classes & SCHED_CLASS_BIT(jb->cls))
        return 1;
    return p->protected_pool ? 2 : 0;
}

static void node_changed(struct cy *cy, int i, int old_full)
{
    struct cy_node *n = &cy->n[i];
    n->ver++;
    if (cy->nsh > 0)
        n->frag = sc_frag(&n->c, cy->sh, cy->nsh);
    if (n->pool >= 0 && cy->s->npools > 0 && !n->excluded)
        cy->pool_free[n->pool] += n->c.full_free - old_full;
    if (n->c.ndev > 0) {
        cy->inuse_free[n->c.type + 1][old_full] -= old_full != n->c.ndev;
        cy->inuse_free[n->c.type + 1][n->c.full_free] += !sc_node_whole(&n->c);
    }
}

static void node_apply(struct cy *cy, int i, const struct sc_req *r, uint32_t devs, int sign)
{
    int old = cy->n[i].c.full_free;
    sc_apply(&cy->n[i].c, r, devs, sign);
    node_changed(cy, i, old);
}

static int rq_id(struct cy *cy, const struct sc_req *r)
{
    for (int i = cy->nrq - 1; i >= 0 && i >= cy->nrq - 8; i--)
        if (memcmp(&cy->rq[i], r, sizeof(*r)) == 0)
            return i;
    if (cy->nrq == cy->caprq) {
        int nc = cy->caprq ? cy->caprq * 2 : 64;
        struct sc_req *p = realloc(cy->rq, (size_t)nc * sizeof(*p));
        if (!p)
            return -1;
        cy->rq = p;
        cy->caprq = nc;
    }
    cy->rq[cy->nrq] = *r;
    return cy->nrq++;
}

/* devices + FGD delta for one replica on node i (cached per node) */
static uint32_t node_pick(struct cy *cy, int i, const struct sc_req *r, int rid, double *delta)
{
    struct cy_node *n = &cy->n[i];
    int w = rid & 3;
    if (rid >= 0 && n->cache_rid[w] == (uint32_t)rid + 1 && n->cache_ver[w] == n->ver) {
        *delta = n->cache_delta[w];
        return n->cache_devs[w];
    }
    uint32_t devs = sc_pick_devs(&n->c, r, cy->sh, cy->nsh, cy->cfg->policy, n->frag, delta);
    if (rid >= 0) {
        n->cache_rid[w] = (uint32_t)rid + 1;
        n->cache_ver[w] = n->ver;
        n->cache_devs[w] = devs;
        n->cache_delta[w] = *delta;
    }
    return devs;
}

/* ---------------- keys ---------------- */

static int tols_equal(const struct sched_toleration *a, int na, const struct sched_toleration *b,
                      int nb)
{
    if (na != nb)
        return 0;
    if (a == b)
        return 1;
    for (int i = 0; i < na; i++) {
        if (a[i].exists != b[i].exists || a[i].effect != b[i].effect)
            return 0;
        if (strcmp(a[i].key ? a[i].key : "", b[i].key ? b[i].key : "") != 0)
            return 0;
        if (strcmp(a[i].value ? a[i].value : "", b[i].value ? b[i].value : "") != 0)
            return 0;
    }
    return 1;
}

static int sel_equal(const struct sched_label *a, int na, const struct sched_label *b, int nb)
{
    if (na != nb)
        return 0;
    if (a == b)
        return 1;
    for (int i = 0; i < na; i++) {
        if (strcmp(a[i].key ? a[i].key : "", b[i].key ? b[i].key : "") != 0)
            return 0;
        if (strcmp(a[i].value ? a[i].value : "", b[i].value ? b[i].value : "") != 0)
            return 0;
    }
    return 1;
}

/* Every selector term present on the node with the same value. */
static int sel_match(const struct sched_node *sn, const struct sched_label *sel, int nsel)
{
    for (int t = 0; t < nsel; t++) {
        const char *v = sc_label(sn, sel[t].key);
        if (!v || strcmp(v, sel[t].value ? sel[t].value : "") != 0)
            return 0;
    }
    return 1;
}

static int static_reason(struct cy *cy, const struct sched_job *jb, const struct sc_req *r, int i)
{
    const struct cy_node *n = &cy->n[i];
    const struct sched_node *sn = &cy->s->nodes[i];
    if (n->excluded)
        return n->excluded;
    if (!pool_access(cy, jb, n->pool))
        return R_POOL;
    if (sn->ntaints > 0 && !sc_tolerates(sn->taints, sn->ntaints, jb->tols, jb->ntols))
        return R_TAINT;
    if (jb->nnode_selector > 0 && !sel_match(sn, jb->node_selector, jb->nnode_selector))
        return R_SELECTOR;
    if (sc_is_gpu(r)) {
        if (n->c.ndev <= 0)
            return R_NOGPU;
        struct sc_req t = *r;
        t.min_mem_mib = 0;
        if (!sc_static_ok(&n->c, &t))
            return R_TYPE;
        if (!sc_static_ok(&n->c, r))
            return R_GPUMEM;
    }
    return R_OK;
}

static int skey_get(struct cy *cy, int jx, const struct sc_req *r)
{
    const struct sched_job *jb = &cy->s->jobs[jx];
    int gpu = sc_is_gpu(r);
    for (int i = cy->nsk - 1; i >= 0; i--) {
        struct cy_skey *k = &cy->sk[i];
        if (k->types == r->types && k->min_mem == r->min_mem_mib && k->pool == jb->pool &&
            k->cls == (int)jb->cls && k->gpu == gpu &&
            tols_equal(k->tols, k->ntols, jb->tols, jb->ntols) &&
            sel_equal(k->sel, k->nsel, jb->node_selector, jb->nnode_selector))
            return i;
    }
    if (cy->nsk == cy->capsk) {
        int nc = cy->capsk ? cy->capsk * 2 : 16;
        struct cy_skey *p = realloc(cy->sk, (size_t)nc * sizeof(*p));
        if (!p)
            return GQ_ENOMEM;
        cy->sk = p;
        cy->capsk = nc;
    }
    struct cy_skey *k = &cy->sk[cy->nsk];
    memset(k, 0, sizeof(*k));
    k->types = r->types;
    k->min_mem = r->min_mem_mib;
    k->pool = jb->pool;
    k->cls = (int)jb->cls;
    k->gpu = gpu;
    k->tols = jb->tols;
    k->ntols = jb->ntols;
    k->sel = jb->node_selector;
    k->nsel = jb->nnode_selector;
    k->nodes = malloc((size_t)(cy->nn > 0 ? cy->nn : 1) * sizeof(int));
    if (!k->nodes)
        return GQ_ENOMEM;
    for (int i = 0; i < cy->nn; i++)
        if (static_reason(cy, jb, r, i) == R_OK)
            k->nodes[k->nnodes++] = i;
    return cy->nsk++;
}

static uint64_t key_hash(const struct cy_key *k)
{
    uint64_t h = SC_HASH_SEED;
    h = sc_hash_bytes(h, &k->skey, sizeof(k->skey));
    h = sc_hash_bytes(h, &k->gpus, sizeof(k->gpus));
    h = sc_hash_bytes(h, &k->milli, sizeof(k->milli));
    h = sc_hash_bytes(h, &k->cpu, sizeof(k->cpu));
    h = sc_hash_bytes(h, &k->mem, sizeof(k->mem));
    h = sc_hash_bytes(h, &k->want, sizeof(k->want));
    h = sc_hash_bytes(h, &k->gang, sizeof(k->gang));
    h = sc_hash_bytes(h, &k->L, sizeof(k->L));
    h = sc_hash_bytes(h, &k->P, sizeof(k->P));
    h = sc_hash_bytes(h, &k->S, sizeof(k->S));
    return h;
}

static int key_eq(const struct cy_key *a, const struct cy_key *b)
{
    return a->skey == b->skey && a->gpus == b->gpus && a->milli == b->milli && a->cpu == b->cpu &&
           a->mem == b->mem && a->want == b->want && a->gang == b->gang && a->L == b->L &&
           a->P == b->P && a->S == b->S;
}

static int key_get(struct cy *cy, const struct cy_key *probe)
{
    if ((size_t)(cy->nk + 1) * 2 > cy->nkslots) {
        size_t ns = cy->nkslots ? cy->nkslots * 2 : 256;
        int32_t *s = malloc(ns * sizeof(*s));
        if (!s)
            return GQ_ENOMEM;
        for (size_t i = 0; i < ns; i++)
            s[i] = -1;
        for (int id = 0; id < cy->nk; id++) {
            size_t x = (size_t)key_hash(&cy->k[id]) & (ns - 1);
            while (s[x] >= 0)
                x = (x + 1) & (ns - 1);
            s[x] = id;
        }
        free(cy->kslots);
        cy->kslots = s;
        cy->nkslots = ns;
    }
    size_t x = (size_t)key_hash(probe) & (cy->nkslots - 1);
    while (cy->kslots[x] >= 0) {
        if (key_eq(&cy->k[cy->kslots[x]], probe))
            return cy->kslots[x];
        x = (x + 1) & (cy->nkslots - 1);
    }
    if (cy->nk == cy->capk) {
        int nc = cy->capk ? cy->capk * 2 : 64;
        struct cy_key *p = realloc(cy->k, (size_t)nc * sizeof(*p));
        if (!p)
            return GQ_ENOMEM;
        cy->k = p;
        cy->capk = nc;
    }
    cy->k[cy->nk] = *probe;
    cy->kslots[x] = cy->nk;
    return cy->nk++;
}

/* ---------------- placement ---------------- */

struct place_ctx {
    int jx;
    const struct sched_job *jb;
    struct sc_req r;
    int want, gang, L, P, S;
    int skey;
    int key; /* -1 when caches are bypassed */
};

/* dynamic check on a statically eligible node; returns reason */
/* jx was preempted for p while p waits (p's preempted_victims, or jx's
 * preempted_for naming p): p never takes it again, and p's claim keeps it off. */
static int preempted_for_waiting(const struct cy *cy, int p, int jx)
{
    if (cy->j[jx].pf == p)
        return 1;
    const struct cy_job *cp = &cy->j[p];
    for (int k = 0; k < cp->pv_n; k++)
        if (cy->pv[cp->pv_off + k] == jx)
            return 1;
    return 0;
}

/* A waiting preemptor's claim on a node keeps off it the jobs it preempted
 * and every job of lower or equal priority; a higher-priority job may still
 * take the node (the preemptor then finds its plan no longer fits). */
static int claim_blocks(const struct cy *cy, int claimant, int jx)
{
    if (claimant < 0 || claimant == jx)
        return 0;
    return cy->s->jobs[jx].priority <= cy->s->jobs[claimant].priority ||
           preempted_for_waiting(cy, claimant, jx);
}

static int dyn_reason(struct cy *cy, const struct place_ctx *pc, int i)
{
    const struct cy_node *n = &cy->n[i];
    if (n->reserved_by >= 0 && n->reserved_by != pc->jx)
        return R_RESERVED;
    if (n->claimed_by >= 0 && claim_blocks(cy, n->claimed_by, pc->jx))
        return R_CLAIMED;
    const struct sc_req *r = &pc->r;
    if (sc_is_gpu(r) && !sc_gpu_ok(&n->c, r))
        return R_GPUS;
    if (n->c.cpu_free < r->cpu)
        return R_CPU;
    if (n->c.mem_free < r->mem)
        return R_MEM;
    if (n->pool >= 0 && pool_access(cy, pc->jb, n->pool) == 2) {
        /* a borrower (CPU-only too) never takes a protected pool past its reserve */
        const struct sched_pool *p = &cy->s->pools[n->pool];
        if (cy->pool_free[n->pool] - p->reserve_gpus < GQ_MAX(1, r->gpus))
            return R_PROTECTED;
    }
    return R_OK;
}

/* The keep-whole rule applies (sc_keep_whole): one replica, no topology. */
static int pc_keep_whole(const struct cy *cy, const struct place_ctx *pc)
{
    return sc_keep_whole(cy->cfg->policy, &pc->r,
                         pc->jb->replicas == 1 && pc->L < 0 && pc->P < 0 && pc->S < 0);
}

/* Some node not whole, of a type r accepts, may have the devices r asks (a
 * count, not a fit). */
static int inuse_may_take(const struct cy *cy, const struct sc_req *r)
{
    for (int t = 0; t <= SC_MAX_GPU_TYPES; t++) {
        if (t == 0 ? r->types != SC_ANY : !(r->types & ((uint64_t)1 << (t - 1))))
            continue;
        for (int k = r->gpus > 0 ? r->gpus : 0; k <= SCHED_MAX_DEVICES; k++)
            if (cy->inuse_free[t][k] > 0)
                return 1;
    }
    return 0;
}

static int node_cap(struct cy *cy, const struct place_ctx *pc, int i)
{
    int cap = sc_fit_count(&cy->n[i].c, &pc->r, pc->want);
    if (cap <= 0)
        return 0;
    if (pc->S >= 0)
        cap = 1;
    return cap;
}

static int dom_of(const struct cy *cy, int i, int lvl)
{
    return cy->n[i].dom[lvl];
}

/* Choose, among cand[0..nc) (capacities in candcap), the best domain at level
 * lvl that holds `want` replicas (respecting spread). Returns domain id or -1. */
static int pick_domain(struct cy *cy, const struct place_ctx *pc, const int *cand,
                       const int *candcap, int nc, int lvl, int largest)
{
    int best = -1;
    int64_t bestfree = 0;
    int bestcap = 0;
    int nd = cy->ndom[lvl];
    /* domcap/domfree indexed by domain; domseen marks spread domains per stamp */
    for (int x = 0; x < nc; x++) {
        int d = dom_of(cy, cand[x], lvl);
        cy->domcap[d] = 0;
        cy->domfree[d] = 0;
    }
    for (int x = 0; x < nc; x++) {
        int i = cand[x], d = dom_of(cy, i, lvl);
        int c = candcap[x];
        if (pc->S >= 0) {
            int sd = dom_of(cy, i, pc->S);
            int stamp = d + 1;
            if (cy->domseen[sd] == stamp)
                c = 0;
            else
                cy->domseen[sd] = stamp;
        }
        cy->domcap[d] += c;
        cy->domfree[d] += cy->n[i].c.free_milli;
    }
    for (int x = 0; x < nc; x++) {
        int d = dom_of(cy, cand[x], lvl);
        int c = cy->domcap[d];
        if (c < 0)
            continue; /* already considered */
        int ok = largest ? c > 0 : c >= pc->want;
        if (ok) {
            int better;
            if (best < 0)
                better = 1;
            else if (largest && GQ_MIN(c, pc->want) != GQ_MIN(bestcap, pc->want))
                better = GQ_MIN(c, pc->want) > GQ_MIN(bestcap, pc->want);
            else if (cy->domfree[d] != bestfree)
                better = cy->domfree[d] < bestfree;
            else
                better = d < best;
            if (better) {
                best = d;
                bestfree = cy->domfree[d];
                bestcap = c;
            }
        }
        cy->domcap[d] = -1;
    }
    /* clear spread stamps */
    if (pc->S >= 0)
        for (int x = 0; x < nc; x++)
            cy->domseen[dom_of(cy, cand[x], pc->S)] = 0;
    (void)nd;
    return best;
}

/*
 * Greedy selection of `want` replicas among cand (restricted to domain dom at
 * level lvl when lvl >= 0). Applies allocations; on failure undoes them and
 * returns the number placed (< want). reps receives the placements.
 */
static int select_nodes(struct cy *cy, const struct place_ctx *pc, const int *cand, int nc,
                        int lvl, int dom, int want, struct sched_replica *reps)
{
    int rid = (cy->nsh > 0) ? rq_id(cy, &pc->r) : -1;
    int placed = 0;
    int *percount = NULL; /* replicas of this job per candidate (soft spread) */
    if (!pc->gang) {
        percount = slot(cy->ctx, SL_SEL, (size_t)(nc > 0 ? nc : 1) * sizeof(int));
        if (!percount)
            return -1;
        memset(percount, 0, (size_t)(nc > 0 ? nc : 1) * sizeof(int));
    }
    int keep = pc_keep_whole(cy, pc);
    for (int rep = 0; rep < want; rep++) {
        struct sc_cand best = {0};
        struct sc_pick pick;
        int have = 0, bestx = -1;
        sc_pick_init(&pick);
        for (int x = 0; x < nc; x++) {
            int i = cand[x];
            if (lvl >= 0 && dom_of(cy, i, lvl) != dom)
                continue;
            if (!sc_fit(&cy->n[i].c, &pc->r) || dyn_reason(cy, pc, i) != R_OK)
                continue;
            if (pc->S >= 0) {
                int sd = dom_of(cy, i, pc->S), clash = 0;
                for (int y = 0; y < placed && !clash; y++)
                    clash = dom_of(cy, reps[y].node, pc->S) == sd;
                if (pc->jb->state == SCHED_JOB_RUNNING)
                    for (int y = 0; y < pc->jb->nplaced && !clash; y++)
                        clash = dom_of(cy, pc->jb->placement[y].node, pc->S) == sd;
                if (clash)
                    continue;
            }
            struct sc_cand c;
            c.devs = node_pick(cy, i, &pc->r, rid, &c.delta);
            c.level = sc_fgd_level(c.delta, cy->cfg->fgd_score_levels);
            c.node = i;
            c.whole = sc_node_whole(&cy->n[i].c);
            c.kept = keep && c.whole && sc_whole_kept(&cy->n[i].c, &pc->r,
                                              sc_shape_gpus_max(&cy->n[i].c, cy->sh, cy->nsh));
            c.free_after = cy->n[i].c.free_milli - req_milli(&pc->r);
            c.cpu_after = cy->n[i].c.cpu_free - pc->r.cpu;
            c.slot = x;
            if (keep) { /* one replica: no per-candidate replica counts to weigh */
                sc_pick_offer(&pick, &c, cy->cfg->policy);
                continue;
            }
            int cmp = 0;
            if (have && percount && percount[x] != percount[bestx])
                cmp = percount[x] < percount[bestx] ? -1 : 1;
            else if (have)
                cmp = sc_cand_cmp(&c, &best, cy->cfg->policy);
            if (!have || cmp < 0) {
                best = c;
                bestx = x;
                have = 1;
            }
        }
        if (keep && sc_pick_best(&pick)) {
            best = *sc_pick_best(&pick);
            bestx = best.slot;
            have = 1;
        }
        if (!have)
            break;
        node_apply(cy, best.node, &pc->r, best.devs, 1);
        reps[placed].node = best.node;
        reps[placed].devs = best.devs;
        placed++;
        if (percount)
            percount[bestx]++;
    }
    if (placed < want && pc->gang) {
        for (int y = placed - 1; y >= 0; y--)
            node_apply(cy, reps[y].node, &pc->r, reps[y].devs, -1);
    }
    return placed;
}

/*
 * Try to place the job. Returns replicas placed (allocations applied) — want
 * for a gang or 0; for a non-gang 0..want — or a negative error.
 */
static int place_in(struct cy *cy, struct place_ctx *pc, int *cand, int *candcap, int nc,
                    struct sched_replica *reps);

static int try_place(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps)
{
    const struct cy_skey *sk = &cy->sk[pc->skey];
    struct cy_key *k = pc->key >= 0 ? &cy->k[pc->key] : NULL;
    if (k && k->failed)
        return 0;
    int *cand = cy->cand, *candcap = cy->candcap;
    int nc = 0, start = k ? k->cursor : 0, first_fit = -1;
    int64_t capsum = 0;
    int feasible_doms = 0, nprot = 0;
    /* Bounded search window: stop once enough capacity (and, with a required
     * level, enough domains that hold the whole job) has been seen. A spread
     * job scans everything (distinct domains are not counted on the way). */
    int early = !cy->nocache && pc->S < 0;
    int window = CY_WINDOW_NODES;
    /* keep-whole: the window also waits for a node that is not whole (once
     * it holds enough whole ones, only such nodes are added), unless none
     * has the devices the request asks */
    int keep = pc_keep_whole(cy, pc) && inuse_may_take(cy, &pc->r), part = 0;
    for (int x = start; x < sk->nnodes; x++) {
        int i = sk->nodes[x];
        if (dyn_reason(cy, pc, i) != R_OK)
            continue;
        int c = node_cap(cy, pc, i);
        if (c <= 0)
            continue;
        if (first_fit < 0)
            first_fit = x;
        int whole = sc_node_whole(&cy->n[i].c);
        if (early && keep && whole && nc >= window && capsum >= pc->want)
            continue;
        part |= !whole;
        cand[nc] = i;
        candcap[nc] = c;
        nc++;
        if (cy->n[i].pool >= 0 && pool_access(cy, pc->jb, cy->n[i].pool) == 2) {
            nprot++; /* a protected pool of another class: the last resort */
            continue;
        }
        capsum += c;
        if (!early)
            continue;
        if (pc->L >= 0) {
            int d = dom_of(cy, i, pc->L);
            int before = cy->wcap[d];
            cy->wcap[d] += c;
            if (before < pc->want && cy->wcap[d] >= pc->want)
                feasible_doms++;
            if (feasible_doms >= CY_WINDOW_DOMAINS && nc >= window)
                break;
        } else if (nc >= window && capsum >= pc->want && (!keep || part)) {
            break;
        }
    }
    if (early && pc->L >= 0)
        for (int x = 0; x < nc; x++)
            cy->wcap[dom_of(cy, cand[x], pc->L)] = 0;
    if (k)
        k->cursor = first_fit >= 0 ? first_fit : sk->nnodes;
    if (nc == 0)
        return 0;
    if (nprot > 0 && nprot < nc) {
        /* protected pools of other classes take the job only when nothing
         * else fits: first the other nodes alone */
        int *own = slot(cy->ctx, SL_PART, (size_t)(nc - nprot) * 2 * sizeof(int));
        if (!own)
            return GQ_ENOMEM;
        int *owncap = own + (nc - nprot), m = 0;
        for (int x = 0; x < nc; x++)
            if (!(cy->n[cand[x]].pool >= 0 && pool_access(cy, pc->jb, cy->n[cand[x]].pool) == 2)) {
                own[m] = cand[x];
                owncap[m++] = candcap[x];
            }
        int got = place_in(cy, pc, own, owncap, m, reps);
        if (got < 0 || got >= pc->want)
            return got;
        if (got > 0) {
            /* a non-gang job placed in part: the rest may borrow */
            struct place_ctx rest = *pc;
            rest.want = pc->want - got;
            for (int x = 0; x < nc; x++)
                candcap[x] = node_cap(cy, &rest, cand[x]);
            int more = place_in(cy, &rest, cand, candcap, nc, reps + got);
            return more < 0 ? more : got + more;
        }
    }
    return place_in(cy, pc, cand, candcap, nc, reps);
}

/* Place the job among candidates cand[0..nc) (capacities candcap; both
 * arrays are reordered): domain choice, then replica by replica. */
static int place_in(struct cy *cy, struct place_ctx *pc, int *cand, int *candcap, int nc,
                    struct sched_replica *reps)
{
    int64_t capsum = 0;
    for (int x = 0; x < nc; x++)
        capsum += candcap[x];
    int lvl = -1, dom = -1;
    if (pc->L >= 0) {
        int ldom;
        ldom = -1;
        if (!pc->gang && pc->jb->state == SCHED_JOB_RUNNING && pc->jb->nplaced > 0) {
            ldom = dom_of(cy, pc->jb->placement[0].node, pc->L); /* stay with running replicas */
        } else if (pc->gang && pc->P > pc->L) {
            /* a tighter preferred level: the required domain holding the
             * tightest preferred-level domain that fits, when one does */
            int pdom = pick_domain(cy, pc, cand, candcap, nc, pc->P, 0);
            for (int x = 0; x < nc && pdom >= 0 && ldom < 0; x++)
                if (dom_of(cy, cand[x], pc->P) == pdom)
                    ldom = dom_of(cy, cand[x], pc->L);
        }
        if (ldom < 0)
            ldom = pick_domain(cy, pc, cand, candcap, nc, pc->L, !pc->gang);
        if (ldom < 0)
            return 0;
        /* keep only the chosen domain's candidates */
        int m = 0;
        capsum = 0;
        for (int x = 0; x < nc; x++) {
            if (dom_of(cy, cand[x], pc->L) != ldom)
                continue;
            cand[m] = cand[x];
            candcap[m] = candcap[x];
            capsum += candcap[m];
            m++;
        }
        nc = m;
        if (nc == 0)
            return 0;
        lvl = pc->L;
        dom = ldom;
    }
    int split = -1, splitn = 0; /* sub-domain filled first, and how many go there */
    if (pc->P >= 0 && (pc->L < 0 || pc->P > pc->L)) {
        /* preferred level: the tightest domain at that level that holds the
         * job, else the tightest at the next wider level, and so on (up to the
         * required level, whose domain is already chosen) */
        for (int lp = pc->P; lp > pc->L; lp--) {
            int pdom = pick_domain(cy, pc, cand, candcap, nc, lp, 0);
            if (pdom < 0)
                continue;
            lvl = lp;
            dom = pdom;
            break;
        }
        if (lvl >= 0 && lvl < pc->P && pc->gang && pc->S < 0) {
            /* fell back to a wider level: keep the replicas close inside it by
             * filling first its sub-domain (one level down) that holds most */
            int m = 0;
            for (int x = 0; x < nc; x++)
                if (dom_of(cy, cand[x], lvl) == dom) {
                    cand[m] = cand[x];
                    candcap[m] = candcap[x];
                    m++;
                }
            nc = m;
            split = pick_domain(cy, pc, cand, candcap, nc, lvl + 1, 1);
            for (int x = 0; x < nc && split >= 0; x++)
                if (dom_of(cy, cand[x], lvl + 1) == split)
                    splitn += candcap[x];
            splitn = GQ_MIN(splitn, pc->want);
        }
    }
    if (lvl < 0 && pc->gang) {
        /* no domain: enough capacity overall (with spread: distinct domains) */
        if (pc->S >= 0) {
            int distinct = 0;
            for (int x = 0; x < nc; x++) {
                int sd = dom_of(cy, cand[x], pc->S);
                if (!cy->domseen[sd]) {
                    cy->domseen[sd] = 1;
                    distinct++;
                }
            }
            for (int x = 0; x < nc; x++)
                cy->domseen[dom_of(cy, cand[x], pc->S)] = 0;
            if (distinct < pc->want)
                return 0;
        } else if (capsum < pc->want) {
            return 0;
        }
    }
    int placed;
    if (split >= 0 && splitn > 0 && splitn < pc->want) {
        placed = select_nodes(cy, pc, cand, nc, lvl + 1, split, splitn, reps);
        if (placed < 0)
            return GQ_ENOMEM;
        if (placed == splitn) {
            int more = select_nodes(cy, pc, cand, nc, lvl, dom, pc->want - splitn, reps + placed);
            if (more < 0)
                return GQ_ENOMEM;
            if (more < pc->want - splitn) /* the gang does not fit: undo the first part */
                for (int y = placed - 1; y >= 0; y--)
                    node_apply(cy, reps[y].node, &pc->r, reps[y].devs, -1);
            else
                placed += more;
        }
    } else {
        placed = select_nodes(cy, pc, cand, nc, lvl, dom, pc->want, reps);
    }
    if (placed < 0)
        return GQ_ENOMEM;
    if (pc->gang && placed < pc->want)
        return 0;
    return placed;
}

/* ---------------- quota ---------------- */

static int quota_entry(const struct cy *cy, int team, int type)
{
    const struct cy_team *t = &cy->t[team];
    int star = -1;
    for (int e = t->q0; e < t->q0 + t->nq; e++) {
        if (cy->q[e].type == type && type >= 0)
            return e;
        if (cy->q[e].type == -2 && star < 0)
            star = e;
    }
    return star;
}

static int64_t guaranteed(const struct cy_quota *q) { return q->nominal - q->lendable; }

static int quota_fits(const struct cy *cy, int e, int64_t d)
{
    const struct cy_quota *q = &cy->q[e];
    if (q->used + d <= q->nominal)
        return 1;
    int64_t borrow = q->used + d - q->nominal;
    if (q->borrow >= 0 && borrow > q->borrow)
        return 0;
    const struct cy_group *g = &cy->g[q->group];
    int64_t over = g->over_sum - GQ_MAX(0, q->used - guaranteed(q)) +
                   GQ_MAX(0, q->used + d - guaranteed(q));
    return over <= g->lendable_sum;
}

static void quota_charge(struct cy *cy, int e, int64_t d)
{
    struct cy_quota *q = &cy->q[e];
    struct cy_group *g = &cy->g[q->group];
    g->over_sum -= GQ_MAX(0, q->used - guaranteed(q));
    q->used += d;
    g->over_sum += GQ_MAX(0, q->used - guaranteed(q));
}

/* Type mask of the job's acceptable types that its team's quota admits. */
static uint64_t quota_mask(const struct cy *cy, int jx)
{
    const struct cy_job *cj = &cy->j[jx];
    const struct cy_team *t = &cy->t[cj->team];
    if (t->unlimited || !sc_is_gpu(&cj->r))
        return cj->r.types;
    int64_t need = req_milli(&cj->r) * cj->want;
    uint64_t m = 0;
    int ntypes = cy->ctx->types.n;
    for (int ty = 0; ty < ntypes && ty < SC_MAX_GPU_TYPES; ty++) {
        if (!(cj->r.types & ((uint64_t)1 << ty)))
            continue;
        int e = quota_entry(cy, cj->team, ty);
        if (e >= 0 && quota_fits(cy, e, need))
            m |= (uint64_t)1 << ty;
    }
    /* a job open to any product: nodes without a product need the "*" entry */
    if (cj->r.types == SC_ANY) {
        uint64_t all = ntypes >= 64 ? SC_ANY : (((uint64_t)1 << ntypes) - 1);
        int e = quota_entry(cy, cj->team, -1);
        if (e >= 0 && quota_fits(cy, e, need) && (m & all) == all)
            return SC_ANY;
    }
    return m;
}

static void team_share_update(struct cy_team *ct);

/* Charge (sign +1) or refund (-1) a placement to team quota only. */
static void charge_quota(struct cy *cy, int team, const struct sc_req *r,
                         const struct sched_replica *reps, int n, int sign)
{
    if (!sc_is_gpu(r) || cy->t[team].unlimited)
        return;
    int64_t per = req_milli(r);
    for (int x = 0; x < n; x++) {
        int e = quota_entry(cy, team, cy->n[reps[x].node].c.type);
        if (e >= 0)
            quota_charge(cy, e, sign * per);
    }
}

/* Charge (sign +1) or refund (-1) a placement to team quota and share. */
static void charge(struct cy *cy, int team, const struct sc_req *r,
                   const struct sched_replica *reps, int n, int sign)
{
    if (!sc_is_gpu(r))
        return;
    struct cy_team *t = &cy->t[team];
    t->alloc += sign * req_milli(r) * n;
    charge_quota(cy, team, r, reps, n, sign);
    team_share_update(t);
}

/*
 * The quota entry a job is charged to on a node of GPU type `type` (-1: the
 * first acceptable type that has an entry, else "*"); -1 when none.
 */
static int job_entry(const struct cy *cy, int jx, int type)
{
    const struct cy_job *cj = &cy->j[jx];
    if (cy->t[cj->team].unlimited || !sc_is_gpu(&cj->r))
        return -1;
    if (type >= 0 && type < SC_MAX_GPU_TYPES && (cj->r.types & ((uint64_t)1 << type)))
        return quota_entry(cy, cj->team, type);
    int ntypes = cy->ctx->types.n;
    for (int ty = 0; ty < ntypes && ty < SC_MAX_GPU_TYPES; ty++) {
        if (!(cj->r.types & ((uint64_t)1 << ty)))
            continue;
        int e = quota_entry(cy, cj->team, ty);
        if (e >= 0)
            return e;
    }
    return quota_entry(cy, cj->team, -1);
}

/*
 * A waiting preemptor's claim: its whole need charged to its team's quota
 * entry (so to its nominal, and beyond nominal to the cohort's lendable pool)
 * while its victims stop. Nobody else can borrow what it claimed. type: GPU
 * type of the nodes it will use (-1 unknown).
 */
static void claim_set(struct cy *cy, int jx, int type)
{
    struct cy_job *cj = &cy->j[jx];
    if (cj->claim_e >= 0)
        return;
    int e = job_entry(cy, jx, type);
    if (e < 0)
        return;
    cj->claim_e = e;
    cj->claim = req_milli(&cj->r) * cj->want;
    quota_charge(cy, e, cj->claim);
    cy->g[cy->q[e].group].claimed += cj->claim;
}

static void claim_drop(struct cy *cy, int jx)
{
    struct cy_job *cj = &cy->j[jx];
    if (cj->claim_e < 0)
        return;
    quota_charge(cy, cj->claim_e, -cj->claim);
    cy->g[cy->q[cj->claim_e].group].claimed -= cj->claim;
    cj->claim_e = -1;
    cj->claim = 0;
}

/*
 * 1 when the job cannot stay within its team's nominal quota on any
 * acceptable type (it must borrow from the cohort; its own claim does not
 * count against it); 0 for teams without
 * quota, CPU-only jobs and jobs with no usable quota entry.
 */
static int must_borrow(const struct cy *cy, int jx)
{
    const struct cy_job *cj = &cy->j[jx];
    if (cy->t[cj->team].unlimited || !sc_is_gpu(&cj->r) || cj->want <= 0)
        return 0;
    int64_t need = req_milli(&cj->r) * cj->want;
    int ntypes = cy->ctx->types.n, seen = 0;
    for (int ty = 0; ty < ntypes && ty < SC_MAX_GPU_TYPES; ty++) {
        if (!(cj->r.types & ((uint64_t)1 << ty)))
            continue;
        int e = quota_entry(cy, cj->team, ty);
        if (e < 0)
            continue;
        seen = 1;
        if (cy->q[e].used - (cj->claim_e == e ? cj->claim : 0) + need <= cy->q[e].nominal)
            return 0;
    }
    if (cj->r.types == SC_ANY) {
        int e = quota_entry(cy, cj->team, -1);
        if (e >= 0) {
            seen = 1;
            if (cy->q[e].used - (cj->claim_e == e ? cj->claim : 0) + need <= cy->q[e].nominal)
                return 0;
        }
    }
    return seen;
}

/* ---------------- explanations ---------------- */

static void fmt_gpus(struct gq_buf *b, int64_t milli)
{
    if (milli % 1000 == 0)
        gq_buf_printf(b, "%lld", (long long)(milli / 1000));
    else
        gq_buf_printf(b, "%.3g", (double)milli / 1000.0);
}

static void shape_text(struct cy *cy, struct gq_buf *b, const struct place_ctx *pc)
{
    const struct sc_req *r = &pc->r;
    int R = pc->want;
    if (r->gpus > 0) {
        if (R > 1)
            gq_buf_printf(b, "%dx%d GPU%s", R, r->gpus, r->gpus == 1 ? "" : "s");
        else
            gq_buf_printf(b, "%d GPU%s", r->gpus, r->gpus == 1 ? "" : "s");
    } else if (r->milli > 0) {
        if (R > 1)
            gq_buf_printf(b, "%dx%dm GPU", R, r->milli);
        else
            gq_buf_printf(b, "%dm GPU", r->milli);
    } else {
        if (R > 1)
            gq_buf_printf(b, "%dx%lldm cpu", R, (long long)r->cpu);
        else
            gq_buf_printf(b, "%lldm cpu", (long long)r->cpu);
    }
    if (pc->L >= 0)
        gq_buf_printf(b, " in one %s", cy->cfg->levels[pc->L].name);
}

static void reason_text(struct cy *cy, struct gq_buf *b, const struct place_ctx *pc, int why,
                        const char *pool_name)
{
    const struct sched_job *jb = pc->jb;
    switch (why) {
    case R_NOTREADY: gq_buf_puts(b, "not ready"); break;
    case R_UNSCHED: gq_buf_puts(b, "unschedulable"); break;
    case R_POOL:
        if (jb->pool >= 0 && jb->pool < cy->s->npools)
            gq_buf_printf(b, "not in pool %s", cy->s->pools[jb->pool].name);
        else
            gq_buf_puts(b, "in pools not open to class ");
        if (jb->pool < 0)
            gq_buf_puts(b, sched_class_name(jb->cls));
        break;
    case R_TAINT: gq_buf_puts(b, "taint not tolerated"); break;
    case R_SELECTOR: gq_buf_puts(b, "node selector mismatch"); break;
    case R_NOGPU: gq_buf_puts(b, "no GPUs"); break;
    case R_TYPE:
        gq_buf_puts(b, "wrong GPU type (need ");
        for (int i = 0; i < jb->req.ntypes; i++)
            gq_buf_printf(b, "%s%s", i ? "|" : "", jb->req.types[i] ? jb->req.types[i] : "");
        gq_buf_puts(b, ")");
        break;
    case R_GPUMEM: gq_buf_printf(b, "less than %d GiB GPU memory", jb->req.min_gpu_mem_gib); break;
    case R_RESERVED: gq_buf_puts(b, "reserved for a higher job"); break;
    case R_CLAIMED: gq_buf_puts(b, "held for a preempting job"); break;
    case R_PROTECTED:
        gq_buf_printf(b, "in protected pool %s", pool_name ? pool_name : "?");
        break;
    case R_GPUS:
        if (pc->r.gpus > 0)
            gq_buf_printf(b, "fewer than %d free GPU%s", pc->r.gpus, pc->r.gpus == 1 ? "" : "s");
        else
            gq_buf_printf(b, "no GPU with %dm free", pc->r.milli);
        break;
    case R_CPU: gq_buf_puts(b, "insufficient cpu"); break;
    case R_MEM: gq_buf_puts(b, "insufficient memory"); break;
    default: break;
    }
}

/* Node-side explanation: counts over all nodes plus the gang-level reason. */
static int explain_nodes(struct cy *cy, const struct place_ctx *pc, struct gq_buf *b)
{
    int count[R_COUNT] = {0};
    const char *pname = NULL;
    int fit = 0;
    int64_t capsum = 0;
    for (int i = 0; i < cy->nn; i++) {
        int why = static_reason(cy, pc->jb, &pc->r, i);
        if (why == R_OK)
            why = dyn_reason(cy, pc, i);
        if (why == R_PROTECTED && !pname)
            pname = cy->s->pools[cy->n[i].pool].name;
        count[why]++;
        if (why == R_OK) {
            fit++;
            capsum += node_cap(cy, pc, i);
        }
    }
    gq_buf_printf(b, "%d/%d nodes fit ", fit, cy->nn);
    shape_text(cy, b, pc);
    int used[R_COUNT] = {0}, first = 1;
    for (;;) {
        int best = -1;
        for (int w = 1; w < R_COUNT; w++)
            if (!used[w] && count[w] > 0 && (best < 0 || count[w] > count[best]))
                best = w;
        if (best < 0)
            break;
        used[best] = 1;
        gq_buf_printf(b, "%s%d ", first ? ": " : ", ", count[best]);
        reason_text(cy, b, pc, best, pname);
        first = 0;
    }
    if (fit > 0 && pc->key >= 0 && cy->k[pc->key].failed) {
        if (pc->L >= 0)
            gq_buf_printf(b, "; no %s holds %d replica%s%s", cy->cfg->levels[pc->L].name, pc->want,
                          pc->want == 1 ? "" : "s", pc->S >= 0 ? " on distinct domains" : "");
        else if (pc->S >= 0)
            gq_buf_printf(b, "; fewer than %d distinct %s domains fit", pc->want,
                          cy->cfg->levels[pc->S].name);
        else if (capsum < pc->want)
            gq_buf_printf(b, "; only %lld of %d replicas fit", (long long)capsum, pc->want);
        else
            gq_buf_puts(b, "; not enough room left in protected pools");
    }
    return b->p ? 0 : GQ_ENOMEM;
}

static void explain_quota(struct cy *cy, int jx, struct gq_buf *b)
{
    const struct cy_job *cj = &cy->j[jx];
    const struct cy_team *t = &cy->t[cj->team];
    const struct sched_job *jb = &cy->s->jobs[jx];
    int64_t need = req_milli(&cj->r) * cj->want;
    /* describe the first acceptable type (or "*") */
    const char *tname = jb->req.ntypes > 0 && jb->req.types[0] ? jb->req.types[0] : NULL;
    int ty = tname ? sc_strtab_get(&cy->ctx->types, tname, 0) : -1;
    int e = -1;
    if (tname)
        e = ty >= 0 ? quota_entry(cy, cj->team, ty) : -1;
    if (e < 0 && (!tname || ty >= 0)) {
        for (int x = t->q0; x < t->q0 + t->nq; x++)
            if (cy->q[x].type == -2) {
                e = x;
                break;
            }
    }
    if (e < 0) {
        gq_buf_printf(b, "team %s has no quota for %s", t->name, tname ? tname : "GPUs");
        return;
    }
    const struct cy_quota *q = &cy->q[e];
    gq_buf_printf(b, "team %s quota ", t->name);
    fmt_gpus(b, q->used);
    gq_buf_puts(b, "/");
    fmt_gpus(b, q->nominal);
    gq_buf_printf(b, " %s used", q->type == -2 ? "GPUs" : q->name);
    const struct cy_group *g = &cy->g[q->group];
    int64_t room = g->lendable_sum - g->over_sum;
    int64_t own_unused = GQ_MAX(0, q->nominal - GQ_MAX(q->used, guaranteed(q)));
    if (q->borrow != 0 && room - own_unused > 0) {
        int64_t may = room - own_unused;
        if (q->borrow >= 0)
            may = GQ_MIN(may, q->borrow - GQ_MAX(0, q->used - q->nominal));
        if (may > 0) {
            gq_buf_puts(b, " (may borrow ");
            fmt_gpus(b, may);
            gq_buf_puts(b, ")");
        }
    }
    if (g->claimed > 0) {
        gq_buf_puts(b, ", ");
        fmt_gpus(b, g->claimed);
        gq_buf_puts(b, " claimed by jobs waiting for preempted jobs");
    }
    gq_buf_puts(b, ", needs ");
    fmt_gpus(b, need);
}

/* ---------------- build ---------------- */

static int bad(struct cy *cy, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct cy *cy, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cy->err, sizeof(cy->err), fmt, ap);
    va_end(ap);
    return GQ_EINVAL;
}

static int req_from(struct cy *cy, const struct sched_request *in, struct sc_req *o)
{
    memset(o, 0, sizeof(*o));
    o->gpus = in->gpus;
    o->milli = in->gpu_milli;
    o->cpu = in->cpu_milli;
    o->mem = in->mem_bytes;
    o->min_mem_mib = (int64_t)in->min_gpu_mem_gib * 1024;
    if (in->gpus < 0 || in->gpus > SCHED_MAX_DEVICES || in->gpu_milli < 0 ||
        in->gpu_milli > 999 || (in->gpus > 0 && in->gpu_milli > 0) || in->cpu_milli < 0 ||
        in->mem_bytes < 0 || in->ntypes < 0 || in->ntypes > SCHED_MAX_TYPES)
        return GQ_EINVAL;
    if (in->ntypes == 0 || !sc_is_gpu(o)) {
        o->types = SC_ANY;
        return 0;
    }
    for (int i = 0; i < in->ntypes; i++) {
        if (!in->types[i])
            return GQ_EINVAL;
        int id = sc_strtab_get(&cy->ctx->types, in->types[i], 0);
        if (id >= 0)
            o->types |= (uint64_t)1 << id;
    }
    return 0;
}

static int build(struct cy *cy)
{
    const struct sched_snapshot *s = cy->s;
    const struct sched_config *cfg = cy->cfg;
    struct sched *ctx = cy->ctx;
    if (s->nnodes < 0 || s->njobs < 0 || s->nteams < 0 || s->npools < 0 || s->nshapes < 0 ||
        (s->nnodes && !s->nodes) || (s->njobs && !s->jobs) || (s->nteams && !s->teams) ||
        (s->npools && !s->pools) || (s->nshapes && !s->shapes))
        return bad(cy, "snapshot: negative count or NULL array");
    if (cfg->nlevels < 0 || cfg->nlevels > SCHED_LEVELS_MAX)
        return bad(cy, "config: nlevels %d out of range 0..%d", cfg->nlevels, SCHED_LEVELS_MAX);
    cy->nn = s->nnodes;
    cy->nj = s->njobs;
    cy->nt = s->nteams + 1;
    sc_strtab_reset(&ctx->types);
    sc_strtab_reset(&ctx->cohorts);
    sc_strtab_reset(&ctx->groups);
    for (int l = 0; l < SCHED_LEVELS_MAX; l++)
        sc_strtab_reset(&ctx->doms[l]);
    size_t nn1 = (size_t)(cy->nn > 0 ? cy->nn : 1);
    cy->n = slot(ctx, SL_NODES, nn1 * sizeof(*cy->n));
    cy->j = slot(ctx, SL_JOBS, (size_t)(cy->nj > 0 ? cy->nj : 1) * sizeof(*cy->j));
    cy->t = slot(ctx, SL_TEAMS, (size_t)cy->nt * sizeof(*cy->t));
    cy->cand = slot(ctx, SL_CAND, nn1 * sizeof(int));
    cy->candcap = slot(ctx, SL_CAND2, nn1 * sizeof(int));
    cy->domcap = slot(ctx, SL_DOMCAP, nn1 * sizeof(int));
    cy->domfree = slot(ctx, SL_DOMFREE, nn1 * sizeof(int64_t));
    cy->domseen = slot(ctx, SL_DOMSEEN, nn1 * sizeof(int));
    cy->wcap = slot(ctx, SL_WCAP, nn1 * sizeof(int));
    cy->pool_free = slot(ctx, SL_POOLFREE, (size_t)(s->npools + 1) * sizeof(int64_t));
    if (!cy->n || !cy->j || !cy->t || !cy->cand || !cy->candcap || !cy->domcap ||
        !cy->domfree || !cy->domseen || !cy->pool_free || !cy->wcap)
        return GQ_ENOMEM;
    memset(cy->domseen, 0, nn1 * sizeof(int));
    memset(cy->wcap, 0, nn1 * sizeof(int));
    memset(cy->pool_free, 0, (size_t)(s->npools + 1) * sizeof(int64_t));
    memset(cy->t, 0, (size_t)cy->nt * sizeof(*cy->t));

    /* nodes */
    for (int i = 0; i < cy->nn; i++) {
        const struct sched_node *sn = &s->nodes[i];
        struct cy_node *n = &cy->n[i];
        memset(n, 0, sizeof(*n));
        if (sn->gpus < 0 || sn->gpus > SCHED_MAX_DEVICES)
            return bad(cy, "node %s: gpus out of range (%d)", sn->name, sn->gpus);
        if (sn->pool < -1 || sn->pool >= s->npools)
            return bad(cy, "node %s: pool index %d out of range", sn->name, sn->pool);
        n->c.ndev = sn->gpus;
        n->c.type = -1;
        const char *prod = sc_node_product(sn, cfg);
        if (prod && sn->gpus > 0) {
            int id = sc_strtab_get(&ctx->types, prod, 1);
            if (id < -1)
                return GQ_ENOMEM;
            if (id >= SC_MAX_GPU_TYPES)
                return bad(cy, "node %s: more than 64 GPU products (%d)", sn->name, id);
            n->c.type = id;
        }
        n->c.gpu_mem_mib = sc_node_gpu_mem(sn, cfg);
        n->c.cpu_free = sn->cpu_milli - sn->foreign_cpu_milli;
        n->c.mem_free = sn->mem_bytes - sn->foreign_mem_bytes;
        for (int d = 0; d < n->c.ndev; d++)
            n->c.used[d] = sn->foreign_gpu_milli[d];
        sc_recount(&n->c);
        n->pool = s->npools > 0 ? sn->pool : -1;
        n->reserved_by = -1;
        n->claimed_by = -1;
        n->excluded = !sn->ready ? R_NOTREADY : (sn->unschedulable ? R_UNSCHED : 0);
        cy->cluster_gpus += n->c.ndev;
        for (int l = 0; l < cfg->nlevels; l++) {
            const char *v = sc_label(sn, cfg->levels[l].label_key);
            int id;
            if (v && v[0]) {
                id = sc_strtab_get(&ctx->doms[l], v, 1);
            } else {
                /* its own domain: keyed by an unprintable prefix + node index */
                id = -1;
            }
            if (id < -1)
                return GQ_ENOMEM;
            n->dom[l] = id;
        }
    }
    /* unique domains for nodes without the label: appended after named ones */
    for (int l = 0; l < cfg->nlevels; l++) {
        int next = ctx->doms[l].n;
        for (int i = 0; i < cy->nn; i++)
            if (cy->n[i].dom[l] < 0)
                cy->n[i].dom[l] = next++;
        cy->ndom[l] = next;
        if (next > cy->nn)
            return bad(cy, "topology level %s: %d domains", cfg->levels[l].name, next);
    }

    /* teams and quotas */
    int nq = 0;
    for (int t = 0; t < s->nteams; t++) {
        if (s->teams[t].nquota < 0 || (s->teams[t].nquota > 0 && !s->teams[t].quota))
            return bad(cy, "team %d: bad quota array", t);
        nq += s->teams[t].nquota;
    }
    cy->q = slot(ctx, SL_QUOTA, (size_t)(nq + 1) * sizeof(*cy->q));
    cy->g = slot(ctx, SL_GROUPS, (size_t)(nq + 1) * sizeof(*cy->g));
    if (!cy->q || !cy->g)
        return GQ_ENOMEM;
    memset(cy->g, 0, (size_t)(nq + 1) * sizeof(*cy->g));
    cy->nq = 0;
    for (int t = 0; t <= s->nteams; t++) {
        struct cy_team *ct = &cy->t[t];
        ct->cohort = -1;
        if (t == s->nteams) {
            ct->weight = 1;
            ct->unlimited = 1;
            ct->name = "(none)";
            continue;
        }
        const struct sched_team *st = &s->teams[t];
        ct->name = st->name ? st->name : "?";
        ct->weight = st->weight > 0 ? st->weight : 1;
        ct->hist = cfg->usage_norm_s > 0 ? st->usage_gpu_s / cfg->usage_norm_s : 0;
        ct->unlimited = st->nquota == 0;
        team_share_update(ct);
        if (st->cohort && st->cohort[0]) {
            ct->cohort = sc_strtab_get(&ctx->cohorts, st->cohort, 1);
            if (ct->cohort < -1)
                return GQ_ENOMEM;
        }
        ct->q0 = cy->nq;
        ct->nq = st->nquota;
        for (int e = 0; e < st->nquota; e++) {
            const struct sched_quota *sq = &st->quota[e];
            struct cy_quota *q = &cy->q[cy->nq++];
            memset(q, 0, sizeof(*q));
            q->team = t;
            q->name = sq->gpu_type ? sq->gpu_type : "*";
            if (strcmp(q->name, "*") == 0) {
                q->type = -2;
            } else {
                int id = sc_strtab_get(&ctx->types, q->name, 0);
                q->type = id >= 0 ? id : -3;
            }
            q->nominal = sq->gpus * 1000;
            q->borrow = sq->borrowing_limit < 0 ? -1 : sq->borrowing_limit * 1000;
            q->lendable = sq->lending_limit < 0 ? q->nominal
                                                : GQ_MIN(q->nominal, sq->lending_limit * 1000);
            q->group = ct->cohort < 0 ? -1 : -2; /* resolved below */
        }
    }
    /* groups: (cohort, key name) pairs; entries without cohort get their own */
    cy->ngroups = 0;
    for (int e = 0; e < cy->nq; e++) {
        struct cy_quota *q = &cy->q[e];
        int found = -1;
        if (q->group == -2) {
            int co = cy->t[q->team].cohort;
            for (int f = 0; f < e && found < 0; f++) {
                const struct cy_quota *o = &cy->q[f];
                if (o->group >= 0 && cy->t[o->team].cohort == co && o->team != q->team &&
                    strcmp(o->name, q->name) == 0)
                    found = o->group;
            }
        }
        q->group = found >= 0 ? found : cy->ngroups++;
        cy->g[q->group].lendable_sum += q->lendable;
    }

    /* shapes for FGD */
    cy->nsh = 0;
    int nsh_in = s->nshapes;
    cy->sh = slot(ctx, SL_MISC, (size_t)(GQ_MAX(nsh_in, CY_MAX_DERIVED_SHAPES) + 1) *
                                    sizeof(*cy->sh));
    if (!cy->sh)
        return GQ_ENOMEM;
    double wsum = 0;
    for (int i = 0; i < nsh_in; i++) {
        if (!(s->shapes[i].weight > 0))
            continue;
        if (req_from(cy, &s->shapes[i].req, &cy->sh[cy->nsh].r) != 0)
            return bad(cy, "shape %d: bad request", i);
        cy->sh[cy->nsh].w = s->shapes[i].weight;
        wsum += s->shapes[i].weight;
        cy->nsh++;
    }

    /* jobs */
    cy->running = slot(ctx, SL_RUNNING, (size_t)(cy->nj > 0 ? cy->nj : 1) * sizeof(int));
    if (!cy->running)
        return GQ_ENOMEM;
    cy->nrunning = 0;
    for (int x = 0; x < cy->nj; x++) {
        const struct sched_job *jb = &s->jobs[x];
        struct cy_job *cj = &cy->j[x];
        memset(cj, 0, sizeof(*cj));
        if (!jb->id)
            return bad(cy, "job %d: no id", x);
        if (jb->team < -1 || jb->team >= s->nteams)
            return bad(cy, "job %s: team index %d out of range", jb->id, jb->team);
        if (jb->pool < -1 || jb->pool >= s->npools)
            return bad(cy, "job %s: pool index %d out of range", jb->id, jb->pool);
        if (jb->replicas < 1)
            return bad(cy, "job %s: replicas %d < 1", jb->id, jb->replicas);
        if (jb->cls < SCHED_INFERENCE || jb->cls > SCHED_TRAINING)
            return bad(cy, "job %s: class %d unknown", jb->id, (int)jb->cls);
        if (jb->ntols < 0 || (jb->ntols > 0 && !jb->tols))
            return bad(cy, "job %s: bad tolerations (%d)", jb->id, jb->ntols);
        if (jb->nnode_selector < 0 || (jb->nnode_selector > 0 && !jb->node_selector))
            return bad(cy, "job %s: bad node selector (%d)", jb->id, jb->nnode_selector);
        if (jb->npreempted_victims < 0 || (jb->npreempted_victims > 0 && !jb->preempted_victims))
            return bad(cy, "job %s: bad preempted_victims (%d)", jb->id, jb->npreempted_victims);
        for (int k = 0; k < jb->npreempted_victims; k++)
            if (!jb->preempted_victims[k])
                return bad(cy, "job %s: preempted_victims entry %d is NULL", jb->id, k);
        for (int t = 0; t < jb->nnode_selector; t++)
            if (!jb->node_selector[t].key || !jb->node_selector[t].key[0])
                return bad(cy, "job %s: node selector term %d has no key", jb->id, t);
        if (req_from(cy, &jb->req, &cj->r) != 0)
            return bad(cy, "job %s: bad request (gpus %d)", jb->id, jb->req.gpus);
        cj->team = jb->team >= 0 ? jb->team : s->nteams;
        cj->claim_e = -1;
        cj->pf = -1;
        if (jb->state == SCHED_JOB_RUNNING) {
            if (jb->nplaced < 0 || jb->nplaced > jb->replicas || (jb->nplaced && !jb->placement))
                return bad(cy, "job %s: bad placement (%d replicas)", jb->id, jb->nplaced);
            for (int p = 0; p < jb->nplaced; p++) {
                const struct sched_replica *rp = &jb->placement[p];
                if (rp->node < 0 || rp->node >= cy->nn)
                    return bad(cy, "job %s: placement node %d out of range", jb->id, rp->node);
                int nd = cy->n[rp->node].c.ndev;
                if (nd < 32 && (rp->devs >> nd) != 0)
                    return bad(cy, "job %s: device bits beyond node (node %d)", jb->id, rp->node);
                node_apply(cy, rp->node, &cj->r, rp->devs, 1);
            }
            charge(cy, cj->team, &cj->r, jb->placement, jb->nplaced, 1);
            if (jb->nplaced > 0 && !jb->terminating)
                cy->running[cy->nrunning++] = x;
            /* a job being stopped gets no more replicas */
            cj->want = jb->gang || jb->terminating ? 0 : jb->replicas - jb->nplaced;
        } else {
            cj->want = jb->replicas;
        }
    }

    /* victims still stopping, per job they make room for. While its victims
     * stop, a waiting preemptor holds a claim on the quota it needs; the
     * victims keep theirs (their pods still run) until they are gone. */
    for (int x = 0; x < cy->nj; x++) {
        const struct sched_job *jb = &s->jobs[x];
        if (jb->state == SCHED_JOB_RUNNING && jb->terminating && jb->terminating_for >= 0 &&
            jb->terminating_for < cy->nj) {
            int p = jb->terminating_for;
            cy->j[p].stopping++;
            if (cy->j[p].want > 0 && p != x)
                claim_set(cy, p, jb->nplaced > 0 ? cy->n[jb->placement[0].node].c.type : -1);
        }
    }

    /* jobs preempted for a job that still waits: resolve the preemptor's id,
     * and the victims a waiting preemptor names */
    int npf = 0, npv = 0;
    for (int x = 0; x < cy->nj; x++) {
        npf += s->jobs[x].preempted_for != NULL;
        if (cy->j[x].want > 0)
            npv += s->jobs[x].npreempted_victims;
    }
    if (npf > 0 || npv > 0) {
        int *at = slot(ctx, SL_IDS, (size_t)cy->nj * sizeof(int));
        cy->pv = slot(ctx, SL_PV, (size_t)(npv > 0 ? npv : 1) * sizeof(int));
        if (!at || !cy->pv)
            return GQ_ENOMEM;
        sc_strtab_reset(&ctx->ids);
        for (int x = 0; x < cy->nj; x++) {
            if (cy->j[x].want <= 0 && npv == 0)
                continue; /* only a job with replicas to place holds a claim */
            int before = ctx->ids.n;
            int id = sc_strtab_get(&ctx->ids, s->jobs[x].id, 1);
            if (id < -1)
                return GQ_ENOMEM;
            if (ctx->ids.n > before)
                at[id] = x; /* first job with that id */
        }
        for (int x = 0; x < cy->nj; x++) {
            const char *pf = s->jobs[x].preempted_for;
            int id = pf ? sc_strtab_get(&ctx->ids, pf, 0) : -1;
            int p = id >= 0 ? at[id] : -1;
            if (p < 0 || p == x || cy->j[p].want <= 0)
                continue; /* its preemptor is gone or placed: no claim */
            cy->j[x].pf = p;
            if (s->jobs[x].state == SCHED_JOB_WAITING)
                cy->j[p].nvictims++;
        }
        int off = 0;
        for (int x = 0; x < cy->nj; x++) {
            if (cy->j[x].want <= 0)
                continue; /* placed (or stopping): it preempts no more */
            cy->j[x].pv_off = off;
            for (int k = 0; k < s->jobs[x].npreempted_victims; k++) {
                int id = sc_strtab_get(&ctx->ids, s->jobs[x].preempted_victims[k], 0);
                int v = id >= 0 ? at[id] : -1;
                if (v >= 0 && v != x)
                    cy->pv[off++] = v;
            }
            cy->j[x].pv_n = off - cy->j[x].pv_off;
        }
    }

    /* derive shapes from the waiting queue when none given */
    if (cy->nsh == 0 && cy->nj > 0) {
        for (int x = 0; x < cy->nj; x++) {
            if (cy->j[x].want <= 0)
                continue;
            const struct sc_req *r = &cy->j[x].r;
            int f = -1;
            for (int y = 0; y < cy->nsh && f < 0; y++)
                if (sc_same_class(&cy->sh[y].r, r))
                    f = y;
            if (f < 0) {
                if (cy->nsh >= CY_MAX_DERIVED_SHAPES)
                    continue;
                f = cy->nsh++;
                cy->sh[f].r = *r;
                cy->sh[f].r.cpu = 0;
                cy->sh[f].r.mem = 0;
                cy->sh[f].w = 0;
            }
            /* cpu and memory per shape: the demand-weighted mean of its jobs, so the
             * fragmentation measure sees nodes whose cpu or memory strands GPUs */
            double w0 = cy->sh[f].w, w1 = w0 + cy->j[x].want;
            cy->sh[f].r.cpu = (int64_t)(((double)cy->sh[f].r.cpu * w0 + (double)r->cpu * cy->j[x].want) / w1);
            cy->sh[f].r.mem = (int64_t)(((double)cy->sh[f].r.mem * w0 + (double)r->mem * cy->j[x].want) / w1);
            cy->sh[f].w = w1;
            wsum += cy->j[x].want;
        }
    }
    for (int y = 0; y < cy->nsh; y++)
        cy->sh[y].w /= wsum;
    sc_shapes_sort(cy->sh, cy->nsh);
    memset(cy->pool_free, 0, (size_t)(s->npools + 1) * sizeof(int64_t));
    memset(cy->inuse_free, 0, sizeof(cy->inuse_free));
    for (int i = 0; i < cy->nn; i++) {
        cy->n[i].frag = cy->nsh > 0 ? sc_frag(&cy->n[i].c, cy->sh, cy->nsh) : 0;
        memset(cy->n[i].cache_rid, 0, sizeof(cy->n[i].cache_rid));
        if (cy->n[i].pool >= 0 && !cy->n[i].excluded)
            cy->pool_free[cy->n[i].pool] += cy->n[i].c.full_free;
        if (cy->n[i].c.ndev > 0 && !sc_node_whole(&cy->n[i].c))
            cy->inuse_free[cy->n[i].c.type + 1][cy->n[i].c.full_free]++;
    }
    return 0;
}

/* ---------------- order ---------------- */

static int job_cmp_team(const struct sched_snapshot *s, int a, int b)
{
    const struct sched_job *x = &s->jobs[a], *y = &s->jobs[b];
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->enqueue_time != y->enqueue_time)
        return x->enqueue_time < y->enqueue_time ? -1 : 1;
    int c = strcmp(x->id, y->id);
    if (c)
        return c;
    return (a > b) - (a < b);
}

static int key_before(const struct sched_snapshot *s, const struct sort_key *a,
                      const struct sort_key *b)
{
    if (a->prio != b->prio)
        return a->prio > b->prio;
    if (a->enq != b->enq)
        return a->enq < b->enq;
    return job_cmp_team(s, a->idx, b->idx) <= 0;
}

static void msort(const struct sched_snapshot *s, struct sort_key *v, struct sort_key *tmp, int n)
{
    if (n < 2)
        return;
    int h = n / 2;
    msort(s, v, tmp, h);
    msort(s, v + h, tmp, n - h);
    int i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = key_before(s, &v[i], &v[j]) ? v[i++] : v[j++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof(*v));
}

/* Sort job indices by team order (stable merge sort on packed keys); k has
 * room for 2n keys and keeps the sorted keys in its first n. */
static int sort_jobs(struct cy *cy, int *v, int n, struct sort_key *k)
{
    for (int x = 0; x < n; x++) {
        const struct sched_job *jb = &cy->s->jobs[v[x]];
        k[x].enq = jb->enqueue_time;
        k[x].prio = jb->priority;
        k[x].idx = v[x];
    }
    msort(cy->s, k, k + n, n);
    for (int x = 0; x < n; x++)
        v[x] = k[x].idx;
    return 0;
}

static void team_share_update(struct cy_team *ct)
{
    ct->share = ((double)ct->alloc / 1000.0 + ct->hist) / ct->weight;
}

static double team_share(const struct cy *cy, int t)
{
    return cy->t[t].share;
}

static void team_head(struct cy *cy, int t)
{
    struct cy_team *ct = &cy->t[t];
    if (ct->head >= ct->nqueue)
        return;
    ct->hprio = ct->keys[ct->head].prio;
    ct->henq = ct->keys[ct->head].enq;
    ct->hjob = ct->keys[ct->head].idx;
    ct->hborrow = must_borrow(cy, ct->hjob);
    /* the queue visits jobs in an order unrelated to memory: fetch ahead */
    if (ct->head + 4 < ct->nqueue) {
        int nx = ct->keys[ct->head + 4].idx;
        __builtin_prefetch(&cy->s->jobs[nx]);
        __builtin_prefetch((const char *)&cy->s->jobs[nx] + 64);
        __builtin_prefetch(&cy->j[nx]);
    }
}

/* next team whose head goes first: priority, share, enqueue, id */
static int next_team(const struct cy *cy)
{
    int best = -1;
    double bs = 0;
    for (int t = 0; t < cy->nt; t++) {
        const struct cy_team *ct = &cy->t[t];
        if (ct->head >= ct->nqueue)
            continue;
        if (best < 0) {
            best = t;
            bs = team_share(cy, t);
            continue;
        }
        const struct cy_team *b = &cy->t[best];
        int better;
        double sh = team_share(cy, t);
        if (ct->hborrow != b->hborrow)
            better = !ct->hborrow; /* within nominal quota before borrowing */
        else if (ct->hprio != b->hprio)
            better = ct->hprio > b->hprio;
        else if (sh != bs)
            better = sh < bs;
        else if (ct->henq != b->henq)
            better = ct->henq < b->henq;
        else
            better = strcmp(cy->s->jobs[ct->hjob].id, cy->s->jobs[b->hjob].id) < 0;
        if (better) {
            best = t;
            bs = sh;
        }
    }
    return best;
}

/* ---------------- preemption ---------------- */

struct victim {
    int job;
    int prot;     /* borrower of a protected pool home to the preemptor */
    int borrower; /* its team is over nominal */
    int lent;     /* borrows quota the preemptor's team lends */
    int qborrow;  /* its team is over nominal on the GPU type it runs on */
};

static int team_over_nominal(const struct cy *cy, int t)
{
    const struct cy_team *ct = &cy->t[t];
    for (int e = ct->q0; e < ct->q0 + ct->nq; e++)
        if (cy->q[e].used > cy->q[e].nominal)
            return 1;
    return 0;
}

static int victim_cmp(const struct cy *cy, const struct victim *a, const struct victim *b)
{
    const struct sched_job *x = &cy->s->jobs[a->job], *y = &cy->s->jobs[b->job];
    if (a->prot != b->prot)
        return a->prot ? -1 : 1;
    static const int rank[3] = {2, 0, 1}; /* Batch, Training, Inference */
    if (rank[x->cls] != rank[y->cls])
        return rank[x->cls] < rank[y->cls] ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    if (a->borrower != b->borrower)
        return a->borrower ? -1 : 1;
    if (x->admitted_at != y->admitted_at)
        return x->admitted_at > y->admitted_at ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* May a preemptor that borrows take this victim (see plan_preempt)? */
static int borrower_victim_ok(const struct cy *cy, int jx, const struct victim *w)
{
    const struct sched_job *J = &cy->s->jobs[jx], *V = &cy->s->jobs[w->job];
    if (cy->j[w->job].team == cy->j[jx].team || w->prot)
        return 1;
    return w->qborrow && V->priority < J->priority;
}

static void remove_job(struct cy *cy, int v, int sign)
{
    const struct sched_job *jb = &cy->s->jobs[v];
    struct cy_job *cj = &cy->j[v];
    for (int p = 0; p < jb->nplaced; p++)
        node_apply(cy, jb->placement[p].node, &cj->r, jb->placement[p].devs, -sign);
    charge(cy, cj->team, &cj->r, jb->placement, jb->nplaced, -sign);
}

static int fits_now(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps)
{
    uint64_t qm = quota_mask(cy, pc->jx);
    if (sc_is_gpu(&pc->r) && !(qm & cy->j[pc->jx].r.types))
        return 0;
    struct place_ctx t = *pc;
    t.r.types = cy->j[pc->jx].r.types & qm;
    int sk = skey_get(cy, pc->jx, &t.r);
    if (sk < 0)
        return sk;
    t.skey = sk;
    t.key = -1;
    int got = try_place(cy, &t, reps);
    if (got <= 0)
        return got;
    for (int y = got - 1; y >= 0; y--)
        node_apply(cy, reps[y].node, &t.r, reps[y].devs, -1);
    return got >= pc->want ? got : 0;
}

/*
 * Plan victims for blocked job jx. Returns number of victims (> 0) with the
 * preemptor's nodes reserved, 0 when no victim set works, < 0 on error.
 */
static int plan_preempt(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps,
                        int quota_blocked, int64_t *until)
{
    const struct sched_job *J = pc->jb;
    const struct cy_job *cJ = &cy->j[pc->jx];
    if (cy->nrunning == 0)
        return 0;
    struct victim *vs = slot(cy->ctx, SL_VICT, CY_MAX_VICTIM_CANDS * sizeof(*vs));
    uint32_t *mark = slot(cy->ctx, SL_MARK, (size_t)(cy->nn > 0 ? cy->nn : 1) * sizeof(*mark));
    if (!vs || !mark)
        return GQ_ENOMEM;
    if (cy->stamp == 0) {
        memset(mark, 0, (size_t)(cy->nn > 0 ? cy->nn : 1) * sizeof(*mark));
    }
    cy->stamp++;
    {
        /* nodes the job could use with any acceptable type */
        int sk = skey_get(cy, pc->jx, &cy->j[pc->jx].r);
        if (sk < 0)
            return sk;
        for (int x = 0; x < cy->sk[sk].nnodes; x++)
            mark[cy->sk[sk].nodes[x]] = cy->stamp;
    }
    int nv = 0;
    int jcoh = cy->t[cJ->team].cohort;
    for (int rx = 0; rx < cy->nrunning && nv < CY_MAX_VICTIM_CANDS; rx++) {
        int v = cy->running[rx];
        const struct sched_job *V = &cy->s->jobs[v];
        const struct cy_job *cV = &cy->j[v];
        if (V->state != SCHED_JOB_RUNNING || V->nplaced == 0 || cV->victim || !V->preemptible)
            continue;
        if (V->cls == SCHED_INFERENCE && J->cls != SCHED_INFERENCE)
            continue;
        if (preempted_for_waiting(cy, pc->jx, v))
            continue; /* already preempted once for this job: never twice */
        /* the minimum runtime stops batch and training from trading GPUs; it
         * never holds back an Inference preemptor. A probe (until != NULL)
         * counts protected victims too, to say until when they are protected. */
        int young = cy->s->now - V->admitted_at < cy->cfg->min_runtime_s;
        if (young && J->cls != SCHED_INFERENCE && !until) {
            cy->young_skipped++;
            continue;
        }
        /* relevant: holds a node the job could use, or quota the job needs */
        int rel = quota_blocked && (cV->team == cJ->team ||
                                    (jcoh >= 0 && cy->t[cV->team].cohort == jcoh));
        for (int p = 0; p < V->nplaced && !rel; p++)
            rel = mark[V->placement[p].node] == cy->stamp;
        if (!rel)
            continue;
        struct victim w = {v, 0, 0, 0, 0};
        /* protected pool borrower whose pool is home to the preemptor */
        for (int p = 0; p < V->nplaced && !w.prot; p++) {
            int pl = cy->n[V->placement[p].node].pool;
            if (pl >= 0 && pool_access(cy, V, pl) == 2 &&
                (cy->s->pools[pl].home_classes & SCHED_CLASS_BIT(J->cls)))
                w.prot = 1;
        }
        w.borrower = team_over_nominal(cy, cV->team);
        {
            /* it borrows quota the preemptor's team lends: over nominal on the
             * GPU type it runs on, in the quota group where the preemptor's
             * team is under nominal */
            int vtype = cy->n[V->placement[0].node].c.type;
            int ve = job_entry(cy, v, vtype), je = job_entry(cy, pc->jx, vtype);
            w.qborrow = ve >= 0 && cy->q[ve].used > cy->q[ve].nominal;
            w.lent = w.qborrow && cV->team != cJ->team && je >= 0 &&
                     cy->q[je].group == cy->q[ve].group && cy->q[je].used < cy->q[je].nominal;
        }
        if (!(V->priority < J->priority || w.lent || w.prot))
            continue;
        vs[nv++] = w;
    }
    if (nv == 0)
        return 0;
    /* insertion sort by cost (nv small) */
    for (int a = 1; a < nv; a++) {
        struct victim t = vs[a];
        int b = a - 1;
        while (b >= 0 && victim_cmp(cy, &vs[b], &t) > 0) {
            vs[b + 1] = vs[b];
            b--;
        }
        vs[b + 1] = t;
    }
    int *chosen = slot(cy->ctx, SL_ORDER, (size_t)nv * sizeof(int));
    if (!chosen)
        return GQ_ENOMEM;
    int nch = 0, ok = 0, rc = 0, pass = 0;
    cy->nocache = 1;
retry:
    nch = 0;
    ok = 0;
    for (int a = 0; a < nv; a++) {
        remove_job(cy, vs[a].job, 1);
        chosen[nch++] = a;
        rc = fits_now(cy, pc, reps);
        if (rc < 0)
            goto out;
        if (rc > 0) {
            ok = 1;
            break;
        }
    }
    if (!ok) {
        for (int c = nch - 1; c >= 0; c--)
            remove_job(cy, vs[chosen[c]].job, -1);
        rc = 0;
        goto out;
    }
    /* drop victims that are not needed (most expensive first) */
    for (int c = nch - 2; c >= 0; c--) {
        remove_job(cy, vs[chosen[c]].job, -1);
        rc = fits_now(cy, pc, reps);
        if (rc < 0)
            goto out;
        if (rc > 0) {
            memmove(&chosen[c], &chosen[c + 1], (size_t)(nch - c - 1) * sizeof(int));
            nch--;
        } else {
            remove_job(cy, vs[chosen[c]].job, 1);
        }
    }
    rc = fits_now(cy, pc, reps);
    if (rc <= 0) { /* cannot happen: last state fitted */
        for (int c = nch - 1; c >= 0; c--)
            remove_job(cy, vs[chosen[c]].job, -1);
        goto out;
    }
    int got = rc;
    /* A job that still borrows once its victims are gone goes, when they are
     * requeued, after every job within nominal and after higher-priority
     * borrowers: a victim of another team that is one of those would be
     * admitted first and take the room back, and the two would preempt each
     * other in turn. Such a job may only take, from other teams, lower-priority
     * victims that borrow on their GPU type (or protected-pool borrowers).
     * Plan again without the others. */
    int e = job_entry(cy, pc->jx, cy->n[reps[0].node].c.type);
    int borrows = e >= 0 && cy->q[e].used + req_milli(&cJ->r) * cJ->want > cy->q[e].nominal;
    int bad_victim = 0;
    for (int c = 0; c < nch && borrows && !bad_victim; c++)
        bad_victim = !borrower_victim_ok(cy, pc->jx, &vs[chosen[c]]);
    /* restore victims' usage: they still run until they stop */
    for (int c = nch - 1; c >= 0; c--)
        remove_job(cy, vs[chosen[c]].job, -1);
    if (bad_victim) {
        int m = 0;
        for (int a = 0; a < nv; a++)
            if (borrower_victim_ok(cy, pc->jx, &vs[a]))
                vs[m++] = vs[a];
        nv = m;
        rc = 0;
        if (pass++ > 0 || nv == 0)
            goto out;
        goto retry;
    }
    if (until) {
        /* probe: the latest end of protection among the victims needed */
        *until = 0;
        for (int c = 0; c < nch; c++) {
            const struct sched_job *V = &cy->s->jobs[vs[chosen[c]].job];
            int64_t end = V->admitted_at + cy->cfg->min_runtime_s;
            if (end > cy->s->now && end > *until)
                *until = end;
        }
        rc = nch;
        goto out;
    }
    for (int y = 0; y < got; y++)
        cy->n[reps[y].node].reserved_by = pc->jx;
    for (int c = 0; c < nch; c++) {
        const struct victim *w = &vs[chosen[c]];
        const struct sched_job *V = &cy->s->jobs[w->job];
        cy->j[w->job].victim = 1;
        struct gq_buf b;
        gq_buf_init(&b, SCHED_MSG_MAX);
        gq_buf_printf(&b, "preempted to make room for %s (%s, priority %d): ", J->id,
                      sched_class_name(J->cls), (int)J->priority);
        if (w->prot)
            gq_buf_printf(&b, "borrowing protected pool GPUs its home class needs");
        else if (V->priority < J->priority)
            gq_buf_printf(&b, "lower priority %d", (int)V->priority);
        else
            gq_buf_printf(&b, "reclaiming quota lent to team %s", cy->t[cy->j[w->job].team].name);
        struct sched_decision *d = add_dec(cy);
        const char *m = b.p ? res_str(cy, b.p) : NULL;
        gq_buf_release(&b);
        if (!d || !m) {
            rc = GQ_ENOMEM;
            goto out;
        }
        d->kind = SCHED_PREEMPT;
        d->job = w->job;
        d->for_job = pc->jx;
        d->message = m;
        cy->res->stats.preempted++;
    }
    rc = nch;
out:
    cy->nocache = 0;
    return rc;
}

/* ---------------- reservation ---------------- */

/* 1 when name is one of the comma-separated names in list. */
static int name_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* How close node i is to fitting the job: free GPU milli for a GPU job,
 * free cpu for a CPU-only one. */
static int64_t closeness(const struct cy *cy, const struct place_ctx *pc, int i)
{
    return sc_is_gpu(&pc->r) ? cy->n[i].c.free_milli : cy->n[i].c.cpu_free;
}

/* Reserve, for blocked job jx, the nodes of the domain closest to fitting it.
 * Only statically eligible nodes that could hold a replica when empty count.
 * The domain it reserved last cycle (jb->reserved_domain) is kept until
 * another is strictly closer to fitting; the choice is recorded in the job
 * (cy_job.reserved) for its WAIT. */
static int reserve_for(struct cy *cy, const struct place_ctx *pc)
{
    const char *prevname = pc->jb->reserved_domain;
    const struct cy_skey *sk = &cy->sk[pc->skey];
    int lvl = pc->L;
    int want = pc->want;
    /* candidates: nodes that could host one replica on their allocatable */
    int *cand = cy->cand, nc = 0;
    for (int x = 0; x < sk->nnodes; x++) {
        int i = sk->nodes[x];
        if (cy->n[i].reserved_by >= 0 || claim_blocks(cy, cy->n[i].claimed_by, pc->jx))
            continue;
        const struct sched_node *sn = &cy->s->nodes[i];
        struct sc_node empty = cy->n[i].c;
        memset(empty.used, 0, sizeof(empty.used));
        for (int d = 0; d < empty.ndev; d++)
            empty.used[d] = sn->foreign_gpu_milli[d];
        empty.cpu_free = sn->cpu_milli - sn->foreign_cpu_milli;
        empty.mem_free = sn->mem_bytes - sn->foreign_mem_bytes;
        sc_recount(&empty);
        int c = sc_fit_count(&empty, &pc->r, want);
        if (c <= 0)
            continue;
        if (pc->S >= 0)
            c = 1;
        cy->candcap[nc] = c;
        cand[nc++] = i;
    }
    if (nc == 0)
        return 0;
    /* per domain: pick up to `want` nodes with the most free capacity */
    int bestdom = -1;
    int64_t bestscore = -1;
    int ndom = lvl >= 0 ? cy->ndom[lvl] : 1;
    (void)ndom;
    int *cnt = cy->domcap;
    int64_t *fr = cy->domfree;
    for (int x = 0; x < nc; x++) {
        int d = lvl >= 0 ? dom_of(cy, cand[x], lvl) : 0;
        cnt[d] = 0;
        fr[d] = 0;
    }
    for (int x = 0; x < nc; x++) {
        int d = lvl >= 0 ? dom_of(cy, cand[x], lvl) : 0;
        cnt[d] += cy->candcap[x];
        fr[d] += cy->n[cand[x]].c.free_milli + cy->n[cand[x]].c.cpu_free / 1000;
    }
    int prev = -1, prev_ok = 0;
    if (lvl >= 0 && prevname && prevname[0]) {
        prev = sc_strtab_get(&cy->ctx->doms[lvl], prevname, 0);
        if (prev < -1)
            prev = -1;
    }
    for (int x = 0; x < nc; x++) {
        int d = lvl >= 0 ? dom_of(cy, cand[x], lvl) : 0;
        if (cnt[d] < 0)
            continue;
        /* the domain could hold the whole job once its own work drains */
        if (cnt[d] >= want) {
            if (d == prev)
                prev_ok = 1;
            if (fr[d] > bestscore || (fr[d] == bestscore && d < bestdom)) {
                bestscore = fr[d];
                bestdom = d;
            }
        }
        cnt[d] = -1;
    }
    if (bestdom < 0)
        return 0;
    if (prev_ok && prev != bestdom) {
        /* keep the domain it holds unless the other is strictly closer */
        int64_t cb = 0, cp = 0;
        for (int x = 0; x < nc; x++) {
            int d = dom_of(cy, cand[x], lvl);
            if (d == bestdom)
                cb += closeness(cy, pc, cand[x]);
            else if (d == prev)
                cp += closeness(cy, pc, cand[x]);
        }
        if (cb <= cp)
            bestdom = prev;
    }
    /* reserve the `want` freest nodes of the domain; without a level the
     * nodes reserved last cycle keep it on equal closeness */
    struct gq_buf b;
    gq_buf_init(&b, SCHED_MSG_MAX);
    int nres = 0;
    for (int k = 0; k < want; k++) {
        int bi = -1, bprev = 0;
        for (int x = 0; x < nc; x++) {
            int i = cand[x];
            if ((lvl >= 0 && dom_of(cy, i, lvl) != bestdom) || cy->n[i].reserved_by >= 0)
                continue;
            int ip = lvl < 0 && prevname && cy->s->nodes[i].name &&
                     name_in_list(prevname, cy->s->nodes[i].name);
            int better;
            if (bi < 0)
                better = 1;
            else if (closeness(cy, pc, i) != closeness(cy, pc, bi))
                better = closeness(cy, pc, i) > closeness(cy, pc, bi);
            else if (ip != bprev)
                better = ip;
            else if (cy->n[i].c.free_milli != cy->n[bi].c.free_milli)
                better = cy->n[i].c.free_milli > cy->n[bi].c.free_milli;
            else
                better = cy->n[i].c.cpu_free > cy->n[bi].c.cpu_free;
            if (better) {
                bi = i;
                bprev = ip;
            }
        }
        if (bi < 0)
            break;
        cy->n[bi].reserved_by = pc->jx;
        if (lvl < 0)
            gq_buf_printf(&b, "%s%s", nres ? "," : "", cy->s->nodes[bi].name ? cy->s->nodes[bi].name : "?");
        else if (nres == 0) {
            const struct sched_node *sn = &cy->s->nodes[bi];
            const char *v = sc_label(sn, cy->cfg->levels[lvl].label_key);
            gq_buf_puts(&b, v && v[0] ? v : (sn->name ? sn->name : "?"));
        }
        nres++;
    }
    cy->reservations++;
    int rc = 0;
    if (nres > 0) {
        cy->j[pc->jx].reserved = b.p ? res_str(cy, b.p) : NULL;
        cy->j[pc->jx].reserved_n = nres;
        if (!cy->j[pc->jx].reserved)
            rc = GQ_ENOMEM;
    }
    gq_buf_release(&b);
    return rc;
}

/* ---------------- stopping victims ---------------- */

/* Hold the nodes of victims still stopping for job jx (no one else may take
 * what they free); returns how many victims are still stopping. */
static int hold_for(struct cy *cy, int jx, int *type)
{
    int n = 0;
    *type = -1;
    for (int x = 0; x < cy->nj; x++) {
        const struct sched_job *V = &cy->s->jobs[x];
        if (V->state != SCHED_JOB_RUNNING || !V->terminating || V->terminating_for != jx)
            continue;
        n++;
        if (*type < 0 && V->nplaced > 0)
            *type = cy->n[V->placement[0].node].c.type;
        for (int p = 0; p < V->nplaced; p++) {
            struct cy_node *nd = &cy->n[V->placement[p].node];
            if (nd->reserved_by < 0)
                nd->reserved_by = jx;
        }
    }
    return n;
}

/* ---------------- cycle ---------------- */

/* Plan preemption for a blocked job. When no victim set works only because
 * the minimum runtime protects some candidates, record in the job when the
 * last victim it would need leaves that protection (its WAIT says so). */
static int preempt(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps,
                   int quota_blocked)
{
    cy->young_skipped = 0;
    int got = plan_preempt(cy, pc, reps, quota_blocked, NULL);
    if (got != 0 || cy->young_skipped == 0)
        return got;
    int64_t until = 0;
    int rc = plan_preempt(cy, pc, reps, quota_blocked, &until);
    if (rc < 0)
        return rc;
    if (rc > 0)
        cy->j[pc->jx].until = until;
    return 0;
}

static int make_pc(struct cy *cy, int jx, uint64_t types, struct place_ctx *pc)
{
    const struct sched_job *jb = &cy->s->jobs[jx];
    memset(pc, 0, sizeof(*pc));
    pc->jx = jx;
    pc->jb = jb;
    pc->r = cy->j[jx].r;
    pc->r.types = types;
    pc->want = cy->j[jx].want;
    pc->gang = jb->gang ? 1 : 0;
    pc->L = job_topo(cy, jb->topo_required);
    pc->P = job_topo(cy, jb->topo_preferred);
    pc->S = job_topo(cy, jb->topo_spread);
    int sk = skey_get(cy, jx, &pc->r);
    if (sk < 0)
        return sk;
    pc->skey = sk;
    struct cy_key probe;
    memset(&probe, 0, sizeof(probe));
    probe.skey = sk;
    probe.gpus = pc->r.gpus;
    probe.milli = pc->r.milli;
    probe.cpu = pc->r.cpu;
    probe.mem = pc->r.mem;
    probe.want = pc->want;
    probe.gang = pc->gang;
    probe.L = pc->L;
    probe.P = pc->P;
    probe.S = pc->S;
    int k = key_get(cy, &probe);
    if (k < 0)
        return k;
    pc->key = k;
    return 0;
}

static const char *key_message(struct cy *cy, struct place_ctx *pc)
{
    struct cy_key *k = &cy->k[pc->key];
    if (k->msg)
        return k->msg;
    struct gq_buf b;
    gq_buf_init(&b, SCHED_MSG_MAX);
    explain_nodes(cy, pc, &b);
    k->msg = b.p ? res_str(cy, b.p) : res_str(cy, "no node fits");
    gq_buf_release(&b);
    return k->msg;
}

static int admit(struct cy *cy, const struct place_ctx *pc, struct sched_replica *reps, int got)
{
    struct sched_result_mem *m = cy->res->mem;
    if (m->nreps + (size_t)got > m->capreps) {
        size_t nc = m->capreps ? m->capreps * 2 : 256;
        while (nc < m->nreps + (size_t)got)
            nc *= 2;
        struct sched_replica *p = realloc(m->reps, nc * sizeof(*p));
        if (!p)
            return GQ_ENOMEM;
        m->reps = p;
        m->capreps = nc;
    }
    size_t off = m->nreps;
    memcpy(&m->reps[off], reps, (size_t)got * sizeof(*reps));
    m->nreps += (size_t)got;
    charge(cy, cy->j[pc->jx].team, &pc->r, reps, got, 1);
    struct sched_decision *d = add_dec(cy);
    if (!d)
        return GQ_ENOMEM;
    d->kind = SCHED_ADMIT;
    d->job = pc->jx;
    d->nrep = got;
    d->rep = (const struct sched_replica *)(uintptr_t)off; /* fixed up at the end */
    /* the domain the replicas actually share: the tightest level, at or wider
     * than the one the job names (required or preferred), whose one labelled
     * domain holds every replica of this admission; none when none does */
    int lvl = GQ_MAX(pc->L, pc->P);
    for (; lvl >= 0; lvl--) {
        int dm = dom_of(cy, reps[0].node, lvl), same = dm < cy->ctx->doms[lvl].n;
        for (int y = 1; y < got && same; y++)
            same = dom_of(cy, reps[y].node, lvl) == dm;
        if (same)
            break;
    }
    if (lvl >= 0) {
        const struct sched_node *sn = &cy->s->nodes[reps[0].node];
        const char *v = sc_label(sn, cy->cfg->levels[lvl].label_key);
        d->domain = res_str(cy, v && v[0] ? v : (sn->name ? sn->name : "?"));
        if (!d->domain)
            return GQ_ENOMEM;
    }
    char msg[160];
    if (lvl >= 0)
        snprintf(msg, sizeof(msg), "admitted %d replica%s in %s %s", got, got == 1 ? "" : "s",
                 cy->cfg->levels[lvl].name, d->domain);
    else
        snprintf(msg, sizeof(msg), "admitted %d replica%s", got, got == 1 ? "" : "s");
    d->message = res_str(cy, msg);
    if (!d->message)
        return GQ_ENOMEM;
    cy->res->stats.admitted++;
    return 0;
}

/* RFC 3339 (UTC, seconds) of t seconds since the epoch; pure arithmetic
 * (days to civil date, proleptic Gregorian calendar). */
static void fmt_time(struct gq_buf *b, int64_t t)
{
    int64_t days = t / 86400, sec = t % 86400;
    if (sec < 0) {
        sec += 86400;
        days--;
    }
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    gq_buf_printf(b, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", (long long)y, (long long)m,
                  (long long)d, (long long)(sec / 3600), (long long)(sec / 60 % 60),
                  (long long)(sec % 60));
}

static int wait_msg(struct cy *cy, int jx, const char *nodes_part, int quota_blocked,
                    const char *extra)
{
    int64_t until = cy->j[jx].until;
    const char *held = cy->j[jx].reserved;
    if (!extra && !quota_blocked && nodes_part && until <= 0 && !held) {
        cy->j[jx].msg = nodes_part; /* shared per shape key, result-owned */
        return 0;
    }
    struct gq_buf b;
    gq_buf_init(&b, SCHED_MSG_MAX);
    if (extra)
        gq_buf_puts(&b, extra);
    else if (nodes_part)
        gq_buf_puts(&b, nodes_part);
    if (quota_blocked) {
        gq_buf_puts(&b, b.len ? "; " : "");
        explain_quota(cy, jx, &b);
    }
    if (until > 0) {
        gq_buf_printf(&b, "%sthe jobs it would preempt are protected by the minimum runtime (%llds) until ",
                      b.len ? "; " : "", (long long)cy->cfg->min_runtime_s);
        fmt_time(&b, until);
    }
    if (held) {
        int L = job_topo(cy, cy->s->jobs[jx].topo_required);
        if (L >= 0)
            gq_buf_printf(&b, "; reserves %s %s", cy->cfg->levels[L].name, held);
        else
            gq_buf_printf(&b, "; reserves node%s %s", cy->j[jx].reserved_n > 1 ? "s" : "", held);
    }
    const char *m = res_str(cy, b.p ? b.p : "waiting");
    gq_buf_release(&b);
    if (!m)
        return GQ_ENOMEM;
    cy->j[jx].msg = m;
    return 0;
}

/*
 * Claims of waiting preemptors, taken before the queue is walked. A waiting
 * job with victims (still stopping, or preempted jobs waiting for it) whose
 * placement fits once its stopping victims are gone claims the nodes of that
 * placement (claim_blocks: its victims and jobs of lower or equal priority
 * stay off them) and the quota it needs, in queue order. A preemptor whose
 * placement no longer fits gives its claim up: its victims are free to run.
 */
static int claims_take(struct cy *cy, struct sched_replica *reps)
{
    int nc = 0, nterm = 0;
    for (int x = 0; x < cy->nj; x++) {
        const struct sched_job *jb = &cy->s->jobs[x];
        if (cy->j[x].want > 0 && (cy->j[x].stopping > 0 || cy->j[x].nvictims > 0))
            nc++;
        if (jb->state == SCHED_JOB_RUNNING && jb->terminating)
            nterm++;
    }
    if (nc == 0)
        return 0;
    int *list = malloc((size_t)(nc + nterm) * sizeof(int));
    if (!list)
        return GQ_ENOMEM;
    int *term = list + nc;
    nc = nterm = 0;
    for (int x = 0; x < cy->nj; x++) {
        const struct sched_job *jb = &cy->s->jobs[x];
        if (cy->j[x].want > 0 && (cy->j[x].stopping > 0 || cy->j[x].nvictims > 0))
            list[nc++] = x;
        if (jb->state == SCHED_JOB_RUNNING && jb->terminating)
            term[nterm++] = x;
    }
    for (int a = 1; a < nc; a++) { /* queue order (few claimants) */
        int t = list[a], b = a - 1;
        while (b >= 0 && job_cmp_team(cy->s, list[b], t) > 0) {
            list[b + 1] = list[b];
            b--;
        }
        list[b + 1] = t;
    }
    int rc = 0;
    for (int c = 0; c < nc && rc == 0; c++) {
        int p = list[c];
        struct cy_job *cj = &cy->j[p];
        claim_drop(cy, p);
        int ctype = -1;
        for (int v = 0; v < nterm; v++)
            if (cy->s->jobs[term[v]].terminating_for == p) {
                const struct sched_job *V = &cy->s->jobs[term[v]];
                if (ctype < 0 && V->nplaced > 0)
                    ctype = cy->n[V->placement[0].node].c.type;
                remove_job(cy, term[v], 1);
            }
        struct place_ctx pc;
        rc = make_pc(cy, p, cj->r.types, &pc);
        int got = 0;
        if (rc == 0) {
            cy->nocache = 1;
            got = fits_now(cy, &pc, reps);
            cy->nocache = 0;
        }
        for (int v = nterm - 1; v >= 0; v--)
            if (cy->s->jobs[term[v]].terminating_for == p)
                remove_job(cy, term[v], -1);
        if (rc == 0 && got < 0)
            rc = got;
        if (rc)
            break;
        if (got > 0) {
            for (int y = 0; y < got; y++)
                if (cy->n[reps[y].node].claimed_by < 0)
                    cy->n[reps[y].node].claimed_by = p;
            cj->claimant = 1;
            claim_set(cy, p, cy->n[reps[0].node].c.type);
        } else if (cj->stopping > 0) {
            claim_set(cy, p, ctype); /* still waiting for its victims: the quota stays claimed */
        }
    }
    free(list);
    return rc;
}

static int run(struct cy *cy)
{
    const struct sched_snapshot *s = cy->s;
    int rc = build(cy);
    if (rc)
        return rc;
    /* team queues */
    int nw = 0;
    for (int x = 0; x < cy->nj; x++)
        if (cy->j[x].want > 0)
            nw++;
    int *all = slot(cy->ctx, SL_TEAMQ, (size_t)(nw + 1) * sizeof(int) * 2);
    if (!all)
        return GQ_ENOMEM;
    int *tmp = all + nw + 1;
    struct sort_key *keys = slot(cy->ctx, SL_SORT, (size_t)(nw + 1) * 2 * sizeof(*keys));
    if (!keys)
        return GQ_ENOMEM;
    int fill = 0;
    for (int t = 0; t < cy->nt; t++) {
        cy->t[t].queue = all + fill;
        for (int x = 0; x < cy->nj; x++)
            if (cy->j[x].want > 0 && cy->j[x].team == t)
                all[fill++] = x;
        cy->t[t].nqueue = (int)(all + fill - cy->t[t].queue);
        cy->t[t].keys = keys + (cy->t[t].queue - all);
        rc = sort_jobs(cy, cy->t[t].queue, cy->t[t].nqueue, cy->t[t].keys);
        if (rc)
            return rc;
        team_head(cy, t);
    }
    cy->res->stats.waiting = nw;
    int *order = tmp; /* reuse: global order */
    int no = 0;
    struct sched_replica *reps = NULL;
    int maxwant = 1;
    for (int x = 0; x < cy->nj; x++)
        maxwant = GQ_MAX(maxwant, cy->j[x].want);
    reps = malloc((size_t)maxwant * sizeof(*reps));
    if (!reps)
        return GQ_ENOMEM;
    rc = claims_take(cy, reps);
    if (rc)
        goto out;
    for (int last = -1;;) {
        /* only the last job's team changed its quota usage (admission or claim) */
        if (last >= 0 && cy->t[last].head < cy->t[last].nqueue)
            cy->t[last].hborrow = must_borrow(cy, cy->t[last].hjob);
        int t = next_team(cy);
        if (t < 0)
            break;
        last = t;
        int jx = cy->t[t].queue[cy->t[t].head++];
        team_head(cy, t);
        order[no++] = jx;
        struct cy_job *cj = &cy->j[jx];
        claim_drop(cy, jx); /* its own claim does not block it; set again if it still waits */
        const struct sched_job *jb = &s->jobs[jx];
        uint64_t qm = quota_mask(cy, jx);
        int gpu = sc_is_gpu(&cj->r);
        struct place_ctx pc;
        if (gpu && qm == 0 && cj->r.types != 0 && !cy->t[cj->team].unlimited) {
            /* blocked by quota: explain node side with the full type mask */
            rc = make_pc(cy, jx, cj->r.types, &pc);
            if (rc)
                goto out;
            int got = 0, ctype = -1;
            if (cj->stopping > 0) {
                got = hold_for(cy, jx, &ctype);
            } else if (cy->cfg->preemption && cy->preempt_tries < CY_MAX_PREEMPT_TRIES) {
                cy->preempt_tries++;
                got = preempt(cy, &pc, reps, 1);
                if (got < 0) {
                    rc = got;
                    goto out;
                }
                if (got > 0)
                    ctype = cy->n[reps[0].node].c.type;
            }
            if (got > 0) {
                claim_set(cy, jx, ctype);
                char e[96];
                snprintf(e, sizeof(e), "waiting for %d preempted job%s to stop", got,
                         got == 1 ? "" : "s");
                rc = wait_msg(cy, jx, NULL, 0, e);
            } else {
                rc = wait_msg(cy, jx, key_message(cy, &pc), 1, NULL);
            }
            if (rc)
                goto out;
            cj->decided = 2;
            continue;
        }
        rc = make_pc(cy, jx, gpu ? (cj->r.types & qm) : cj->r.types, &pc);
        if (rc)
            goto out;
        if (cy->k[pc.key].failed)
            cy->res->stats.shape_cache_hits++;
        cy->res->stats.placements_tried++;
        int got;
        if (cj->claimant) {
            /* its claimed nodes were closed to earlier jobs of the same shape:
             * the fail cache and scan cursor do not speak for it */
            struct place_ctx own = pc;
            own.key = -1;
            got = try_place(cy, &own, reps);
        } else {
            got = try_place(cy, &pc, reps);
        }
        if (got < 0) {
            rc = got;
            goto out;
        }
        if (got > 0) {
            rc = admit(cy, &pc, reps, got);
            if (rc)
                goto out;
            if (cj->claimant) /* placed: what is left of its claimed nodes is free */
                for (int i = 0; i < cy->nn; i++)
                    if (cy->n[i].claimed_by == jx)
                        cy->n[i].claimed_by = -1;
            cj->decided = 1;
            if (!jb->gang && got < pc.want) {
                char e[SCHED_MSG_MAX];
                snprintf(e, sizeof(e), "%d of %d replicas admitted", got + (jb->state == SCHED_JOB_RUNNING ? jb->nplaced : 0), jb->replicas);
                rc = wait_msg(cy, jx, NULL, 0, e);
                if (rc)
                    goto out;
            }
            continue;
        }
        cy->k[pc.key].failed = 1;
        const char *nodes_part = key_message(cy, &pc);
        if (!nodes_part) {
            rc = GQ_ENOMEM;
            goto out;
        }
        int pre = 0, ctype = -1;
        if (cj->stopping > 0) {
            pre = hold_for(cy, jx, &ctype); /* its victims are still stopping: no new ones */
        } else if (cy->cfg->preemption && cy->preempt_tries < CY_MAX_PREEMPT_TRIES) {
            /* worth trying only when some running job could be a victim */
            cy->preempt_tries++;
            pre = preempt(cy, &pc, reps, 0);
            if (pre < 0) {
                rc = pre;
                goto out;
            }
            if (pre > 0)
                ctype = cy->n[reps[0].node].c.type;
        }
        if (pre > 0) {
            claim_set(cy, jx, ctype);
            char e[96];
            snprintf(e, sizeof(e), "waiting for %d preempted job%s to stop", pre,
                     pre == 1 ? "" : "s");
            rc = wait_msg(cy, jx, NULL, 0, e);
        } else {
            if (cy->reservations < cy->cfg->max_reservations)
                rc = reserve_for(cy, &pc);
            if (rc)
                goto out;
            rc = wait_msg(cy, jx, nodes_part, 0, NULL);
        }
        if (rc)
            goto out;
        cj->decided = 2;
    }
    /* WAIT decisions in queue order with team positions */
    for (int t = 0; t < cy->nt; t++) {
        int pos = 0;
        for (int q = 0; q < cy->t[t].nqueue; q++) {
            int jx = cy->t[t].queue[q];
            if (cy->j[jx].msg)
                cy->j[jx].want = ++pos; /* reuse want as position */
        }
    }
    for (int x = 0; x < no; x++) {
        int jx = order[x];
        if (!cy->j[jx].msg)
            continue;
        struct sched_decision *d = add_dec(cy);
        if (!d) {
            rc = GQ_ENOMEM;
            goto out;
        }
        d->kind = SCHED_WAIT;
        d->job = jx;
        d->position = cy->j[jx].want;
        d->message = cy->j[jx].msg;
        d->until = cy->j[jx].until;
        d->reserved = cy->j[jx].reserved;
    }
    /* fix up replica pointers */
    for (size_t x = 0; x < cy->ndec; x++) {
        struct sched_decision *d = &cy->res->d[x];
        if (d->kind == SCHED_ADMIT)
            d->rep = cy->res->mem->reps + (uintptr_t)d->rep;
    }
out:
    free(reps);
    return rc;
}

int sched_cycle(struct sched *ctx, const struct sched_snapshot *snap,
                struct sched_result **out, char *err, size_t errlen)
{
    int rc = 0;
    struct sched *own = NULL;
    struct cy cy;
    memset(&cy, 0, sizeof(cy));
    *out = NULL;
    if (!snap) {
        gq_errf(err, errlen, "sched: no snapshot");
        return GQ_EINVAL;
    }
    if (!ctx) {
        own = sched_new();
        if (!own) {
            gq_errf(err, errlen, "sched: out of memory");
            return GQ_ENOMEM;
        }
        ctx = own;
    }
    struct sched_config defc;
    if (!snap->config)
        sched_config_default(&defc);
    cy.ctx = ctx;
    cy.s = snap;
    cy.cfg = snap->config ? snap->config : &defc;
    cy.res = calloc(1, sizeof(*cy.res));
    if (!cy.res || !(cy.res->mem = calloc(1, sizeof(*cy.res->mem)))) {
        rc = GQ_ENOMEM;
        goto done;
    }
    rc = run(&cy);
done:
    for (int i = 0; i < cy.nsk; i++)
        free(cy.sk[i].nodes);
    free(cy.sk);
    free(cy.k);
    free(cy.kslots);
    free(cy.rq);
    if (rc) {
        if (rc == GQ_EINVAL)
            gq_errf(err, errlen, "%s", cy.err);
        else
            gq_errf(err, errlen, "sched: %s", gq_strerror(rc));
        sched_result_free(cy.res);
    } else {
        *out = cy.res;
    }
    sched_free(own);
    return rc;
}
