/*
 * sched_score.c — node capacity arithmetic and fragmentation-aware scoring.
 *
 * Fragmentation follows Weng et al. (USENIX ATC 2023, FGD): for a node n and
 * a task shape m, F_n(m) is the free GPU capacity of n that m cannot use —
 * all of it when m cannot run on n at all (wrong type, too little cpu/memory,
 * too few free GPUs, or m requests no GPU), otherwise the free capacity of the
 * devices that individually hold less than m's per-device demand. The expected
 * fragmentation is the weighted sum over the shape distribution; a task goes
 * where that expectation grows least (the fragmentation gradient). gangq then
 * breaks ties by best fit (least free GPU, then cpu, left on the node).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gq.h"
#include "sched_int.h"

void sc_recount(struct sc_node *n)
{
    int32_t full = 0, fm = 0;
    for (int d = 0; d < n->ndev; d++) {
        int f = sc_dev_free(n, d);
        fm += f;
        if (n->used[d] == 0)
            full++;
    }
    n->full_free = full;
    n->free_milli = fm;
}

int sc_static_ok(const struct sc_node *n, const struct sc_req *r)
{
    if (!sc_is_gpu(r))
        return 1;
    if (n->ndev <= 0)
        return 0;
    if (n->type < 0 ? r->types != SC_ANY : !(r->types & ((uint64_t)1 << n->type)))
        return 0;
    /* minMemoryGiB names the card's memory as sold; the driver reports up to
     * ~6.5 % less (ECC and reserved memory: L4 "24GB" 23034 MiB, L40S "48GB"
     * 46068, H100 "80GB" 81559), so a node qualifies when it reports at least
     * (100 - SC_GPU_MEM_TOLERANCE_PCT) % of the asked MiB */
    if (r->min_mem_mib > 0 &&
        n->gpu_mem_mib * 100 < r->min_mem_mib * (100 - SC_GPU_MEM_TOLERANCE_PCT))
        return 0;
    return 1;
}

int sc_gpu_ok(const struct sc_node *n, const struct sc_req *r)
{
    if (r->gpus > 0)
        return n->full_free >= r->gpus;
    if (r->milli > 0) {
        for (int d = 0; d < n->ndev; d++)
            if (sc_dev_free(n, d) >= r->milli)
                return 1;
        return 0;
    }
    return 1;
}

int sc_fit(const struct sc_node *n, const struct sc_req *r)
{
    return sc_static_ok(n, r) && n->cpu_free >= r->cpu && n->mem_free >= r->mem &&
           sc_gpu_ok(n, r);
}

int sc_fit_count(const struct sc_node *n, const struct sc_req *r, int cap)
{
    if (!sc_static_ok(n, r))
        return 0;
    int64_t k = cap;
    if (r->cpu > 0)
        k = GQ_MIN(k, n->cpu_free < 0 ? 0 : n->cpu_free / r->cpu);
    if (r->mem > 0)
        k = GQ_MIN(k, n->mem_free < 0 ? 0 : n->mem_free / r->mem);
    if (r->gpus > 0) {
        k = GQ_MIN(k, n->full_free / r->gpus);
    } else if (r->milli > 0) {
        int64_t s = 0;
        for (int d = 0; d < n->ndev; d++)
            s += sc_dev_free(n, d) / r->milli;
        k = GQ_MIN(k, s);
    }
    if (k < 0)
        k = 0;
    return (int)k;
}

void sc_apply(struct sc_node *n, const struct sc_req *r, uint32_t devs, int sign)
{
    n->cpu_free -= sign * r->cpu;
    n->mem_free -= sign * r->mem;
    int per = r->gpus > 0 ? 1000 : r->milli;
    for (int d = 0; d < n->ndev && devs; d++) {
        if (!(devs & ((uint32_t)1 << d)))
            continue;
        int u = (int)n->used[d] + sign * per;
        if (u < 0)
            u = 0;
        if (u > 65535)
            u = 65535;
        n->used[d] = (uint16_t)u;
    }
    sc_recount(n);
}

/* The GPU-dependent part of F_n(m) for a class of shapes (same GPU demand,
 * types and memory): fm when m cannot use the node's GPUs at all. */
static int32_t class_gpu_frag(const struct sc_node *n, const struct sc_req *r, int32_t fm)
{
    if (!sc_is_gpu(r) || !sc_static_ok(n, r))
        return fm; /* a task that uses no GPU (or not these) can use none of it */
    if (r->gpus > 0)
        return n->full_free < r->gpus ? fm : fm - (int32_t)n->full_free * 1000;
    int any = 0;
    int32_t small = 0;
    for (int d = 0; d < n->ndev; d++) {
        int f = sc_dev_free(n, d);
        if (f >= r->milli)
            any = 1;
        else
            small += f;
    }
    return any ? small : fm;
}

int sc_same_class(const struct sc_req *a, const struct sc_req *b)
{
    return a->gpus == b->gpus && a->milli == b->milli && a->types == b->types &&
           a->min_mem_mib == b->min_mem_mib;
}

double sc_frag(const struct sc_node *n, const struct sc_shape *sh, int nsh)
{
    int32_t fm = n->free_milli;
    if (fm <= 0)
        return 0;
    double f = 0;
    const struct sc_req *cls = NULL;
    int32_t g = fm;
    for (int i = 0; i < nsh; i++) {
        const struct sc_req *r = &sh[i].r;
        if (!cls || !sc_same_class(cls, r)) {
            cls = r;
            g = class_gpu_frag(n, r, fm);
        }
        if (g != fm && (n->cpu_free < r->cpu || n->mem_free < r->mem))
            f += sh[i].w * fm; /* the task cannot run here at all */
        else
            f += sh[i].w * g;
    }
    return f;
}

static int shape_cmp(const void *pa, const void *pb)
{
    const struct sc_req *a = &((const struct sc_shape *)pa)->r;
    const struct sc_req *b = &((const struct sc_shape *)pb)->r;
    if (a->gpus != b->gpus)
        return a->gpus < b->gpus ? -1 : 1;
    if (a->milli != b->milli)
        return a->milli < b->milli ? -1 : 1;
    if (a->types != b->types)
        return a->types < b->types ? -1 : 1;
    if (a->min_mem_mib != b->min_mem_mib)
        return a->min_mem_mib < b->min_mem_mib ? -1 : 1;
    if (a->cpu != b->cpu)
        return a->cpu < b->cpu ? -1 : 1;
    if (a->mem != b->mem)
        return a->mem < b->mem ? -1 : 1;
    double x = ((const struct sc_shape *)pa)->w, y = ((const struct sc_shape *)pb)->w;
    return (x > y) - (x < y);
}

void sc_shapes_sort(struct sc_shape *sh, int nsh)
{
    if (nsh > 1)
        qsort(sh, (size_t)nsh, sizeof(*sh), shape_cmp);
}

static int uses_fgd(enum sched_policy p)
{
    return p == SCHED_POLICY_GANGQ || p == SCHED_POLICY_FGD;
}

uint32_t sc_pick_devs(const struct sc_node *n, const struct sc_req *r,
                      const struct sc_shape *sh, int nsh, enum sched_policy pol,
                      double frag_before, double *delta)
{
    *delta = 0;
    uint32_t devs = 0;
    if (r->gpus > 0) {
        int need = r->gpus;
        for (int d = 0; d < n->ndev && need > 0; d++) {
            if (n->used[d] == 0) {
                devs |= (uint32_t)1 << d;
                need--;
            }
        }
        if (need > 0)
            return 0;
        if (nsh > 0 && uses_fgd(pol)) {
            struct sc_node t = *n;
            sc_apply(&t, r, devs, 1);
            *delta = sc_frag(&t, sh, nsh) - frag_before;
        }
        return devs;
    }
    if (r->milli <= 0) {
        if (nsh > 0 && uses_fgd(pol)) {
            struct sc_node t = *n;
            sc_apply(&t, r, 0, 1);
            *delta = sc_frag(&t, sh, nsh) - frag_before;
        }
        return 0;
    }
    int best = -1, bestfree = 0;
    double bestd = 0;
    for (int d = 0; d < n->ndev; d++) {
        int f = sc_dev_free(n, d);
        if (f < r->milli)
            continue;
        /* devices with equal free capacity give the same node state: the
         * first of them already stands for all (ties keep the lower index) */
        int seen = 0;
        for (int e = 0; e < d && !seen; e++)
            seen = sc_dev_free(n, e) == f;
        if (seen)
            continue;
        double dd = 0;
        if (nsh > 0 && uses_fgd(pol)) {
            struct sc_node t = *n;
            sc_apply(&t, r, (uint32_t)1 << d, 1);
            dd = sc_frag(&t, sh, nsh) - frag_before;
        }
        int better;
        if (best < 0)
            better = 1;
        else if (pol == SCHED_POLICY_FGD)
            /* the FGD plugin: the device with the highest 0..100 score, the
             * lowest index among equals (fgd_score.go) */
            better = sc_fgd_level(dd, SC_FGD_PLUGIN_LEVELS) > sc_fgd_level(bestd, SC_FGD_PLUGIN_LEVELS);
        else if (dd != bestd)
            better = dd < bestd;
        else
            better = (pol == SCHED_POLICY_FIRSTFIT) ? 0 : f < bestfree;
        if (better) {
            best = d;
            bestfree = f;
            bestd = dd;
        }
    }
    if (best < 0)
        return 0;
    *delta = bestd;
    return (uint32_t)1 << best;
}

int32_t sc_shape_gpus_max(const struct sc_node *n, const struct sc_shape *sh, int nsh)
{
    int32_t m = 0;
    for (int i = 0; i < nsh; i++) {
        const struct sc_req *r = &sh[i].r;
        int32_t g = r->gpus > 0 ? r->gpus : (r->milli > 0 ? 1 : 0);
        if (g > m && g <= n->ndev && sc_static_ok(n, r))
            m = g;
    }
    return m;
}

int sc_whole_kept(const struct sc_node *n, const struct sc_req *r, int32_t shape_gpus_max)
{
    if (!sc_node_whole(n))
        return 0;
    int32_t left = n->ndev - (r->gpus > 0 ? r->gpus : 1);
    return shape_gpus_max <= left;
}

int32_t sc_fgd_level(double delta, int levels)
{
    if (levels <= 0)
        return 0;
    double x = delta / 1000.0;
    if (x > 700)
        return 0;
    if (x < -700)
        return levels;
    return (int32_t)((double)levels / (1.0 + exp(x)));
}

int sc_cand_cmp(const struct sc_cand *a, const struct sc_cand *b, enum sched_policy pol)
{
    switch (pol) {
    case SCHED_POLICY_GANGQ:
        /* quantised FGD score first (higher is better); among equals a node
         * not whole (whole nodes stay whole for large gangs), then best fit */
        if (a->level != b->level)
            return a->level > b->level ? -1 : 1;
        if (a->whole != b->whole)
            return a->whole < b->whole ? -1 : 1;
        __attribute__((fallthrough)); /* best-fit tie-breaks */
    case SCHED_POLICY_BESTFIT:
        if (a->free_after != b->free_after)
            return a->free_after < b->free_after ? -1 : 1;
        if (a->cpu_after != b->cpu_after)
            return a->cpu_after < b->cpu_after ? -1 : 1;
        break;
    case SCHED_POLICY_FGD:
        if (a->delta != b->delta)
            return a->delta < b->delta ? -1 : 1;
        break;
    case SCHED_POLICY_FIRSTFIT:
        break;
    }
    return (a->node > b->node) - (a->node < b->node);
}

void sc_pick_init(struct sc_pick *p)
{
    memset(p, 0, sizeof(*p));
}

/* The keep-whole rule (GANGQ; callers use it for sc_keep_whole requests): a
 * single replica without topology preference never breaks a whole node that
 * the shape distribution does not price (kept) while a node in use can take
 * it. The FGD score only sees the shapes known so far; with none, or only
 * small ones, breaking an empty node looks free while it is what a later gang
 * or larger job needs. Among whole nodes, and among nodes in use, the score
 * decides as usual. */
void sc_pick_offer(struct sc_pick *p, const struct sc_cand *c, enum sched_policy pol)
{
    if (!p->have_all || sc_cand_cmp(c, &p->all, pol) < 0) {
        p->all = *c;
        p->have_all = 1;
    }
    if (!c->kept && (!p->have_unkept || sc_cand_cmp(c, &p->unkept, pol) < 0)) {
        p->unkept = *c;
        p->have_unkept = 1;
    }
    p->in_use |= !c->whole;
}

const struct sc_cand *sc_pick_best(const struct sc_pick *p)
{
    if (p->in_use)
        return &p->unkept; /* a node in use is never kept: unkept is set */
    return p->have_all ? &p->all : NULL;
}

/* ---- string interner ---- */

void sc_strtab_init(struct sc_strtab *t)
{
    memset(t, 0, sizeof(*t));
}

void sc_strtab_release(struct sc_strtab *t)
{
    free(t->keys);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

void sc_strtab_reset(struct sc_strtab *t)
{
    t->n = 0;
    if (t->slots)
        for (size_t i = 0; i < t->nslots; i++)
            t->slots[i] = -1;
}

static int strtab_grow(struct sc_strtab *t)
{
    size_t ns = t->nslots ? t->nslots * 2 : 64;
    int32_t *slots = malloc(ns * sizeof(*slots));
    if (!slots)
        return GQ_ENOMEM;
    for (size_t i = 0; i < ns; i++)
        slots[i] = -1;
    for (int id = 0; id < t->n; id++) {
        uint64_t h = gq_hash_bytes(GQ_HASH_SEED, t->keys[id], strlen(t->keys[id]));
        size_t j = (size_t)h & (ns - 1);
        while (slots[j] >= 0)
            j = (j + 1) & (ns - 1);
        slots[j] = id;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

int sc_strtab_get(struct sc_strtab *t, const char *s, int add)
{
    if (!s)
        s = "";
    size_t len = strlen(s);
    uint64_t h = gq_hash_bytes(GQ_HASH_SEED, s, len);
    if (t->nslots) {
        size_t j = (size_t)h & (t->nslots - 1);
        while (t->slots[j] >= 0) {
            if (strcmp(t->keys[t->slots[j]], s) == 0)
                return t->slots[j];
            j = (j + 1) & (t->nslots - 1);
        }
    }
    if (!add)
        return -1;
    if ((size_t)(t->n + 1) * 2 > t->nslots) {
        int rc = strtab_grow(t);
        if (rc)
            return -2;
    }
    if (t->n == t->cap) {
        int nc = t->cap ? t->cap * 2 : 32;
        const char **k = realloc(t->keys, (size_t)nc * sizeof(*k));
        if (!k)
            return -2;
        t->keys = k;
        t->cap = nc;
    }
    int id = t->n++;
    t->keys[id] = s;
    size_t j = (size_t)h & (t->nslots - 1);
    while (t->slots[j] >= 0)
        j = (j + 1) & (t->nslots - 1);
    t->slots[j] = id;
    return id;
}

/* ---- snapshot helpers ---- */

const char *sc_label(const struct sched_node *n, const char *key)
{
    if (!key)
        return NULL;
    for (int i = 0; i < n->nlabels; i++)
        if (n->labels[i].key && strcmp(n->labels[i].key, key) == 0)
            return n->labels[i].value;
    return NULL;
}

static int tol_matches(const struct sched_toleration *t, const struct sched_taint *x)
{
    if (t->effect != SCHED_EFFECT_ANY && t->effect != (int)x->effect)
        return 0;
    if (!t->key || !t->key[0])
        return t->exists;
    if (!x->key || strcmp(t->key, x->key) != 0)
        return 0;
    if (t->exists)
        return 1;
    const char *a = t->value ? t->value : "";
    const char *b = x->value ? x->value : "";
    return strcmp(a, b) == 0;
}

int sc_tolerates(const struct sched_taint *taints, int ntaints,
                 const struct sched_toleration *tols, int ntols)
{
    for (int i = 0; i < ntaints; i++) {
        if (taints[i].effect == SCHED_PREFER_NO_SCHEDULE)
            continue;
        int ok = 0;
        for (int j = 0; j < ntols && !ok; j++)
            ok = tol_matches(&tols[j], &taints[i]);
        if (!ok)
            return 0;
    }
    return 1;
}

int64_t sc_node_gpu_mem(const struct sched_node *n, const struct sched_config *c)
{
    if (n->gpu_mem_mib > 0)
        return n->gpu_mem_mib;
    const char *v = sc_label(n, c->gpu_memory_key);
    int64_t m = 0;
    if (v && gq_parse_i64(v, (size_t)-1, &m) == 0 && m > 0)
        return m;
    return 0;
}

const char *sc_node_product(const struct sched_node *n, const struct sched_config *c)
{
    if (n->gpu_product && n->gpu_product[0])
        return n->gpu_product;
    const char *v = sc_label(n, c->gpu_product_key);
    return (v && v[0]) ? v : NULL;
}
