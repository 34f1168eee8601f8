/*
 * sched_place.c — gang and topology placement for one cycle: node capacity
 * bookkeeping (apply, FGD device pick), dynamic per-node reasons, domain and
 * node selection, try_place/place_in.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"
#include "sched_cy.h"

/* ---------------- helpers ---------------- */

int cy_job_topo(const struct cy *cy, int lvl)
{
    return (lvl >= 0 && lvl < cy->cfg->nlevels) ? lvl : -1;
}

int64_t cy_req_milli(const struct sc_req *r)
{
    return r->gpus > 0 ? (int64_t)r->gpus * 1000 : r->milli;
}

/* pool access: 0 no, 1 yes, 2 borrow (protected pool of another class) */
int cy_pool_access(const struct cy *cy, const struct sched_job *jb, int pool)
{
    if (cy->s->npools == 0)
        return 1;
    if (jb->pool >= 0) {
        /* a named pool: only its nodes, and a protected one on its own terms:
         * a class it is not home to borrows (its reserve kept, preempted
         * first for a home class), naming the pool or not */
        if (jb->pool != pool)
            return 0;
        const struct sched_pool *np = &cy->s->pools[pool];
        return np->protected_pool && !(np->home_classes & SCHED_CLASS_BIT(jb->cls)) ? 2 : 1;
    }
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

void cy_node_apply(struct cy *cy, int i, const struct sc_req *r, uint32_t devs, int sign)
{
    int old = cy->n[i].c.full_free;
    sc_apply(&cy->n[i].c, r, devs, sign);
    node_changed(cy, i, old);
}

void cy_node_set(struct cy *cy, int i, const struct sc_node *c)
{
    int old = cy->n[i].c.full_free;
    cy->n[i].c = *c;
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

/* ---------------- placement ---------------- */

/* dynamic check on a statically eligible node; returns reason */
/* jx was preempted for p while p waits (p's preempted_victims, or jx's
 * preempted_for naming p): p never takes it again, and p's claim keeps it off. */
int cy_preempted_for_waiting(const struct cy *cy, int p, int jx)
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
int cy_claim_blocks(const struct cy *cy, int claimant, int jx)
{
    if (claimant < 0 || claimant == jx)
        return 0;
    return cy->s->jobs[jx].priority <= cy->s->jobs[claimant].priority ||
           cy_preempted_for_waiting(cy, claimant, jx);
}

/* Backfill: a job with a limit that ends by the time the reservation
 * holding node n expects its job to start may use the node (it is gone,
 * stopped by its limit if not finished, before that job could use it). */
int cy_backfills(const struct cy *cy, const struct sched_job *jb, const struct cy_node *n)
{
    return jb->max_run_s > 0 && n->res_start > 0 && cy->s->now + jb->max_run_s <= n->res_start;
}

int cy_spare_count(const struct cy *cy, const struct cy_node *n, const struct place_ctx *pc, int cap)
{
    (void)cy;
    const struct sc_req *r = &pc->r;
    if (!n->spare_set || r->milli > 0 || cap <= 0)
        return 0; /* a share's device is not counted whole: never in the spare */
    /* what the node lost since the reservation (placements after it), never
     * what a trial's removals gave back */
    int64_t cpu = n->spare_cpu - GQ_MAX(0, n->res_cpu_free - n->c.cpu_free);
    int64_t mem = n->spare_mem - GQ_MAX(0, n->res_mem_free - n->c.mem_free);
    int64_t dev = (int64_t)n->spare_dev - GQ_MAX(0, n->res_full_free - n->c.full_free);
    int64_t k = cap;
    if (r->cpu > 0)
        k = GQ_MIN(k, cpu / r->cpu);
    if (r->mem > 0)
        k = GQ_MIN(k, mem / r->mem);
    if (r->gpus > 0)
        k = GQ_MIN(k, dev / r->gpus);
    if (r->cpu <= 0 && r->mem <= 0 && r->gpus <= 0)
        k = 0; /* asks for nothing the spare counts: not known to be harmless */
    return k > 0 ? (int)k : 0;
}

/* Node n is reserved for another job and pc's job is no backfill by time
 * there (its limit does not end in time): it may use only the node's spare. */
static int spare_only(const struct cy *cy, const struct place_ctx *pc, const struct cy_node *n)
{
    return n->reserved_by >= 0 && n->reserved_by != pc->jx && !cy_backfills(cy, pc->jb, n);
}

int cy_dyn_reason(struct cy *cy, const struct place_ctx *pc, int i)
{
    const struct cy_node *n = &cy->n[i];
    if (spare_only(cy, pc, n) && cy_spare_count(cy, n, pc, 1) < 1)
        return R_RESERVED;
    if (n->claimed_by >= 0 && cy_claim_blocks(cy, n->claimed_by, pc->jx))
        return R_CLAIMED;
    const struct sc_req *r = &pc->r;
    if (sc_is_gpu(r) && !sc_gpu_ok(&n->c, r))
        return R_GPUS;
    if (n->c.cpu_free < r->cpu)
        return R_CPU;
    if (n->c.mem_free < r->mem)
        return R_MEM;
    if (n->pool >= 0 && cy_pool_access(cy, pc->jb, n->pool) == 2) {
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

int cy_node_cap(struct cy *cy, const struct place_ctx *pc, int i)
{
    const struct cy_node *n = &cy->n[i];
    int cap = sc_fit_count(&n->c, &pc->r, pc->want);
    if (cap > 0 && spare_only(cy, pc, n))
        cap = cy_spare_count(cy, n, pc, cap); /* only what its reservation never needs */
    if (cap <= 0)
        return 0;
    if (pc->S >= 0)
        cap = 1;
    return cap;
}

int cy_dom_of(const struct cy *cy, int i, int lvl)
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
        int d = cy_dom_of(cy, cand[x], lvl);
        cy->domcap[d] = 0;
        cy->domfree[d] = 0;
    }
    for (int x = 0; x < nc; x++) {
        int i = cand[x], d = cy_dom_of(cy, i, lvl);
        int c = candcap[x];
        if (pc->S >= 0) {
            int sd = cy_dom_of(cy, i, pc->S);
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
        int d = cy_dom_of(cy, cand[x], lvl);
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
            cy->domseen[cy_dom_of(cy, cand[x], pc->S)] = 0;
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
        percount = cy_slot(cy->ctx, SL_SEL, (size_t)(nc > 0 ? nc : 1) * sizeof(int));
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
            if (lvl >= 0 && cy_dom_of(cy, i, lvl) != dom)
                continue;
            if (!sc_fit(&cy->n[i].c, &pc->r) || cy_dyn_reason(cy, pc, i) != R_OK)
                continue;
            if (pc->S >= 0) {
                int sd = cy_dom_of(cy, i, pc->S), clash = 0;
                for (int y = 0; y < placed && !clash; y++)
                    clash = cy_dom_of(cy, reps[y].node, pc->S) == sd;
                if (pc->jb->state == SCHED_JOB_RUNNING)
                    for (int y = 0; y < pc->jb->nplaced && !clash; y++)
                        clash = cy_dom_of(cy, pc->jb->placement[y].node, pc->S) == sd;
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
            c.free_after = cy->n[i].c.free_milli - cy_req_milli(&pc->r);
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
        cy_node_apply(cy, best.node, &pc->r, best.devs, 1);
        reps[placed].node = best.node;
        reps[placed].devs = best.devs;
        placed++;
        if (percount)
            percount[bestx]++;
    }
    if (placed < want && pc->gang) {
        for (int y = placed - 1; y >= 0; y--)
            cy_node_apply(cy, reps[y].node, &pc->r, reps[y].devs, -1);
    }
    return placed;
}

/*
 * Try to place the job. Returns replicas placed (allocations applied) — want
 * for a gang or 0; for a non-gang 0..want — or a negative error.
 */
static int place_in(struct cy *cy, struct place_ctx *pc, int *cand, int *candcap, int nc,
                    struct sched_replica *reps);

int cy_try_place(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps)
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
        if (pc->only_dom >= 0 && cy_dom_of(cy, i, pc->L) != pc->only_dom)
            continue;
        if (cy_dyn_reason(cy, pc, i) != R_OK)
            continue;
        int c = cy_node_cap(cy, pc, i);
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
        if (cy->n[i].pool >= 0 && cy_pool_access(cy, pc->jb, cy->n[i].pool) == 2) {
            nprot++; /* a protected pool of another class: the last resort */
            continue;
        }
        capsum += c;
        if (!early)
            continue;
        if (pc->L >= 0) {
            int d = cy_dom_of(cy, i, pc->L);
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
            cy->wcap[cy_dom_of(cy, cand[x], pc->L)] = 0;
    if (k)
        k->cursor = first_fit >= 0 ? first_fit : sk->nnodes;
    if (nc == 0)
        return 0;
    if (nprot > 0 && nprot < nc) {
        /* protected pools of other classes take the job only when nothing
         * else fits: first the other nodes alone */
        int *own = cy_slot(cy->ctx, SL_PART, (size_t)(nc - nprot) * 2 * sizeof(int));
        if (!own)
            return GQ_ENOMEM;
        int *owncap = own + (nc - nprot), m = 0;
        for (int x = 0; x < nc; x++)
            if (!(cy->n[cand[x]].pool >= 0 && cy_pool_access(cy, pc->jb, cy->n[cand[x]].pool) == 2)) {
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
                candcap[x] = cy_node_cap(cy, &rest, cand[x]);
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
            ldom = cy_dom_of(cy, pc->jb->placement[0].node, pc->L); /* stay with running replicas */
        } else if (pc->gang && pc->P > pc->L) {
            /* a tighter preferred level: the required domain holding the
             * tightest preferred-level domain that fits, when one does */
            int pdom = pick_domain(cy, pc, cand, candcap, nc, pc->P, 0);
            for (int x = 0; x < nc && pdom >= 0 && ldom < 0; x++)
                if (cy_dom_of(cy, cand[x], pc->P) == pdom)
                    ldom = cy_dom_of(cy, cand[x], pc->L);
        }
        if (ldom < 0)
            ldom = pick_domain(cy, pc, cand, candcap, nc, pc->L, !pc->gang);
        if (ldom < 0)
            return 0;
        /* keep only the chosen domain's candidates */
        int m = 0;
        capsum = 0;
        for (int x = 0; x < nc; x++) {
            if (cy_dom_of(cy, cand[x], pc->L) != ldom)
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
                if (cy_dom_of(cy, cand[x], lvl) == dom) {
                    cand[m] = cand[x];
                    candcap[m] = candcap[x];
                    m++;
                }
            nc = m;
            split = pick_domain(cy, pc, cand, candcap, nc, lvl + 1, 1);
            for (int x = 0; x < nc && split >= 0; x++)
                if (cy_dom_of(cy, cand[x], lvl + 1) == split)
                    splitn += candcap[x];
            splitn = GQ_MIN(splitn, pc->want);
        }
    }
    if (lvl < 0 && pc->gang) {
        /* no domain: enough capacity overall (with spread: distinct domains) */
        if (pc->S >= 0) {
            int distinct = 0;
            for (int x = 0; x < nc; x++) {
                int sd = cy_dom_of(cy, cand[x], pc->S);
                if (!cy->domseen[sd]) {
                    cy->domseen[sd] = 1;
                    distinct++;
                }
            }
            for (int x = 0; x < nc; x++)
                cy->domseen[cy_dom_of(cy, cand[x], pc->S)] = 0;
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
                    cy_node_apply(cy, reps[y].node, &pc->r, reps[y].devs, -1);
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
