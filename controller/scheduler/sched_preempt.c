/*
 * sched_preempt.c — preemption and reservations: victim ordering and
 * eligibility, plan_preempt, the claims pass for waiting preemptors, and the
 * head reservations (reserve_for, hold_for).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"
#include "sched_cy.h"

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

/* The tier of a victim: what its eviction costs beyond lost work. Owed
 * capacity first: a borrower of a protected pool home to the preemptor, then
 * a borrower of quota the preemptor's team lends (taking a job its team runs
 * within nominal instead would only pass the reclaim on: that team, under its
 * nominal again, reclaims from the same borrower, two evictions for one);
 * then Batch before Training before Inference, lower priority first,
 * borrowers first. */
static int victim_tier_cmp(const struct cy *cy, const struct victim *a, const struct victim *b)
{
    const struct sched_job *x = &cy->s->jobs[a->job], *y = &cy->s->jobs[b->job];
    if (a->prot != b->prot)
        return a->prot ? -1 : 1;
    if (a->lent != b->lent)
        return a->lent ? -1 : 1;
    static const int rank[3] = {2, 0, 1}; /* Batch, Training, Inference */
    if (rank[x->cls] != rank[y->cls])
        return rank[x->cls] < rank[y->cls] ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    if (a->borrower != b->borrower)
        return a->borrower ? -1 : 1;
    return 0;
}

/* Cost order of victims: tier, then shortest running first (least lost work). */
static int victim_cmp(const struct cy *cy, const struct victim *a, const struct victim *b)
{
    int t = victim_tier_cmp(cy, a, b);
    if (t)
        return t;
    const struct sched_job *x = &cy->s->jobs[a->job], *y = &cy->s->jobs[b->job];
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
        cy_node_apply(cy, jb->placement[p].node, &cj->r, jb->placement[p].devs, -sign);
    cy_charge(cy, cj->team, &cj->r, jb->placement, jb->nplaced, -sign);
}

/* Make the first k of vs the victims removed (*cur of them are now). */
static void victims_prefix(struct cy *cy, const struct victim *vs, int *cur, int k)
{
    while (*cur < k)
        remove_job(cy, vs[(*cur)++].job, 1);
    while (*cur > k)
        remove_job(cy, vs[--(*cur)].job, -1);
}

static int fits_now(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps)
{
    uint64_t qm = cy_quota_mask(cy, pc->jx);
    if (sc_is_gpu(&pc->r) && !(qm & cy->j[pc->jx].r.types))
        return 0;
    struct place_ctx t = *pc;
    t.r.types = cy->j[pc->jx].r.types & qm;
    int sk = cy_skey_get(cy, pc->jx, &t.r);
    if (sk < 0)
        return sk;
    t.skey = sk;
    t.key = -1;
    int got = cy_try_place(cy, &t, reps);
    if (got <= 0)
        return got;
    for (int y = got - 1; y >= 0; y--)
        cy_node_apply(cy, reps[y].node, &t.r, reps[y].devs, -1);
    return got >= pc->want ? got : 0;
}

/*
 * The cheapest victim set among vs[0..nv) (in cost order) for the job of pc:
 * the shortest prefix of the order that makes room, then, most expensive
 * first, the victims it does not need dropped. Returns the replicas placed
 * (> 0) with the set's nv indices in chosen[0..*nch) and those victims
 * removed from the cycle's state; 0 when no subset makes room, < 0 on error
 * (the state restored both ways).
 */
static int min_victims(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps,
                       const struct victim *vs, int nv, int *chosen, int *nch)
{
    int cur = 0, rc;
    *nch = 0;
    /* Removing every candidate frees the most: when the job does not fit even
     * then, no set of them makes room, and one placement attempt says so (not
     * one per candidate). Otherwise the shortest prefix by binary search
     * (fitting only gets easier as the prefix grows: each victim removed
     * frees capacity and quota); the job did not fit with none removed. */
    victims_prefix(cy, vs, &cur, nv);
    rc = fits_now(cy, pc, reps);
    if (rc <= 0) {
        victims_prefix(cy, vs, &cur, 0);
        return rc;
    }
    int lo = 0, hi = nv;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        victims_prefix(cy, vs, &cur, mid);
        rc = fits_now(cy, pc, reps);
        if (rc < 0) {
            victims_prefix(cy, vs, &cur, 0);
            return rc;
        }
        if (rc > 0)
            hi = mid;
        else
            lo = mid;
    }
    victims_prefix(cy, vs, &cur, hi);
    int n = hi;
    for (int c = 0; c < n; c++)
        chosen[c] = c;
    /* drop victims that are not needed (most expensive first) */
    for (int c = n - 2; c >= 0; c--) {
        remove_job(cy, vs[chosen[c]].job, -1);
        rc = fits_now(cy, pc, reps);
        if (rc < 0) {
            remove_job(cy, vs[chosen[c]].job, 1); /* the loop below restores each once */
            break;
        }
        if (rc > 0) {
            memmove(&chosen[c], &chosen[c + 1], (size_t)(n - c - 1) * sizeof(int));
            n--;
        } else {
            remove_job(cy, vs[chosen[c]].job, 1);
        }
    }
    if (rc >= 0)
        rc = fits_now(cy, pc, reps); /* > 0: the last state fitted */
    if (rc <= 0) {
        for (int c = n - 1; c >= 0; c--)
            remove_job(cy, vs[chosen[c]].job, -1);
        return rc < 0 ? rc : 0;
    }
    *nch = n;
    return rc;
}

/* What a victim set costs, to compare the sets of different domains: its
 * most expensive victim's tier, then the work lost (GPU milli x seconds run),
 * then how many jobs stop. */
struct vset_cost {
    struct victim worst;
    int64_t lost;
    int n;
};

static struct vset_cost vset_cost(const struct cy *cy, const struct victim *vs, const int *chosen, int n)
{
    struct vset_cost c = {vs[chosen[n - 1]], 0, n}; /* chosen ascend in cost order */
    for (int k = 0; k < n; k++) {
        int v = vs[chosen[k]].job;
        const struct sched_job *V = &cy->s->jobs[v];
        int64_t ran = cy->s->now - V->admitted_at;
        c.lost += cy_req_milli(&cy->j[v].r) * V->nplaced * (ran > 0 ? ran : 0);
    }
    return c;
}

static int vset_better(const struct cy *cy, const struct vset_cost *a, const struct vset_cost *b)
{
    int t = victim_tier_cmp(cy, &a->worst, &b->worst);
    if (t)
        return t < 0;
    if (a->lost != b->lost)
        return a->lost < b->lost;
    return a->n < b->n;
}

#define CY_MAX_VICTIM_DOMAINS 32
#define CY_MAX_VICTIM_DOMAIN_TRIES 8

/* A domain the candidates run in, and a lower bound of what its set costs
 * (vset_cost's order): the tier of its cheapest candidate, and the work lost
 * freeing the GPUs it lacks from its youngest candidates first, in fractions
 * of jobs (what a set of whole jobs that also fits loses at least). */
struct vdom {
    int32_t dom;
    int cheapest; /* index in vs */
    int64_t lb_lost;
};

static int vdom_before(const struct cy *cy, const struct victim *vs, const struct vdom *a,
                       const struct vdom *b)
{
    int t = victim_tier_cmp(cy, &vs[a->cheapest], &vs[b->cheapest]);
    if (t)
        return t < 0;
    return a->lb_lost < b->lb_lost;
}

/* 1 when domain x's bound cannot beat the set cost c (so neither can it) */
static int vdom_hopeless(const struct cy *cy, const struct victim *vs, const struct vdom *x,
                         const struct vset_cost *c)
{
    int t = victim_tier_cmp(cy, &vs[x->cheapest], &c->worst);
    if (t)
        return t > 0;
    return x->lb_lost >= c->lost;
}

/* Victim v runs on a node the job could use (marked in mark) in domain d of
 * level L; d < 0: in any domain (one that does not is a candidate for the
 * quota it frees alone). */
static int runs_in(const struct cy *cy, int v, int L, int32_t d, const uint32_t *mark)
{
    const struct sched_job *V = &cy->s->jobs[v];
    for (int p = 0; p < V->nplaced; p++) {
        int node = V->placement[p].node;
        if (mark[node] == cy->stamp && (d < 0 || cy->n[node].dom[L] == d))
            return 1;
    }
    return 0;
}

/* The usable nodes' GPU milli held by victim v in domain d (level L). */
static int64_t held_in(const struct cy *cy, int v, int L, int32_t d, const uint32_t *mark)
{
    const struct sched_job *V = &cy->s->jobs[v];
    int64_t per = cy_req_milli(&cy->j[v].r), m = 0;
    for (int p = 0; p < V->nplaced; p++) {
        int node = V->placement[p].node;
        if (mark[node] == cy->stamp && cy->n[node].dom[L] == d)
            m += per;
    }
    return m;
}

/*
 * A job that must sit in one domain of a level: the cheapest set is found
 * within each domain the candidates run in (its candidates there, and those
 * that free quota alone), and the cheapest of those is the plan. One cost
 * order over the whole cluster would take its cheapest victims wherever they
 * are, and its prefix could empty a domain of many jobs where one job of
 * another domain would do. Domains are tried by their lower bound, best
 * first, until the bound cannot beat the best set found, at most
 * CY_MAX_VICTIM_DOMAIN_TRIES of the first CY_MAX_VICTIM_DOMAINS (in the order
 * of their cheapest candidate); a domain whose free GPUs and candidates' GPUs
 * together fall short is not tried.
 * usable: the job's usable nodes (marked in mark). Returns like min_victims
 * (chosen index vs, ascending).
 */
static int min_victims_domains(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps,
                               const struct victim *vs, int nv, const uint32_t *mark,
                               const int *usable, int nusable, int quota_blocked, int *chosen,
                               int *nch)
{
    int L = pc->L;
    struct victim *sub = cy_slot(cy->ctx, SL_VSUB, (size_t)nv * sizeof(*sub));
    int *ix = cy_slot(cy->ctx, SL_VBEST, (size_t)nv * 2 * sizeof(int)); /* sub's vs index, best */
    int *ch = cy_slot(cy->ctx, SL_VCHOSEN, (size_t)nv * sizeof(int));
    int nall = GQ_MAX(cy->ndom[L], 1);
    int64_t *dfree = cy_slot(cy->ctx, SL_VDFREE, (size_t)nall * sizeof(int64_t));
    if (!sub || !ix || !ch || !dfree)
        return GQ_ENOMEM;
    int *best = ix + nv;
    struct vdom dv[CY_MAX_VICTIM_DOMAINS];
    int nd = 0;
    for (int a = 0; a < nv && nd < CY_MAX_VICTIM_DOMAINS; a++) {
        const struct sched_job *V = &cy->s->jobs[vs[a].job];
        for (int p = 0; p < V->nplaced && nd < CY_MAX_VICTIM_DOMAINS; p++) {
            int node = V->placement[p].node;
            if (mark[node] != cy->stamp)
                continue;
            int32_t d = cy->n[node].dom[L];
            int seen = 0;
            for (int k = 0; k < nd && !seen; k++)
                seen = dv[k].dom == d;
            if (!seen)
                dv[nd++] = (struct vdom){d, a, 0};
        }
    }
    /* the bounds: free GPUs of each domain's usable nodes, then its
     * candidates youngest first (by selection: few per domain) */
    memset(dfree, 0, (size_t)nall * sizeof(int64_t));
    for (int x = 0; x < nusable; x++)
        if (cy->n[usable[x]].dom[L] >= 0 && cy->n[usable[x]].dom[L] < nall)
            dfree[cy->n[usable[x]].dom[L]] += cy->n[usable[x]].c.free_milli;
    int64_t need = cy_req_milli(&pc->r) * pc->want;
    int nk = 0;
    for (int k = 0; k < nd; k++) {
        int64_t lack = need - (dv[k].dom >= 0 && dv[k].dom < nall ? dfree[dv[k].dom] : 0), lost = 0;
        int ns = 0;
        for (int a = 0; a < nv; a++) /* the domain's candidates, in ix */
            if (held_in(cy, vs[a].job, L, dv[k].dom, mark) > 0)
                ix[ns++] = a;
        while (lack > 0 && ns > 0) {
            int y = 0;
            for (int z = 1; z < ns; z++)
                if (cy->s->jobs[vs[ix[z]].job].admitted_at > cy->s->jobs[vs[ix[y]].job].admitted_at)
                    y = z;
            int v = vs[ix[y]].job;
            int64_t h = held_in(cy, v, L, dv[k].dom, mark), ran = cy->s->now - cy->s->jobs[v].admitted_at;
            lost += GQ_MIN(h, lack) * (ran > 0 ? ran : 0);
            lack -= h;
            ix[y] = ix[--ns];
        }
        if (lack > 0)
            continue; /* even every candidate there leaves it short */
        dv[k].lb_lost = lost;
        struct vdom t = dv[k];
        int y = nk++;
        while (y > 0 && vdom_before(cy, vs, &t, &dv[y - 1])) {
            dv[y] = dv[y - 1];
            y--;
        }
        dv[y] = t;
    }
    int nbest = 0, rc, cur = 0;
    struct vset_cost bc = {{0, 0, 0, 0, 0}, 0, 0};
    if (nk == 0)
        return 0;
    /* every candidate removed frees the most: when the job does not fit even
     * then, no domain's set makes room (one placement attempt says so) */
    victims_prefix(cy, vs, &cur, nv);
    rc = fits_now(cy, pc, reps);
    victims_prefix(cy, vs, &cur, 0);
    if (rc <= 0)
        return rc;
    for (int k = 0; k < nk && k < CY_MAX_VICTIM_DOMAIN_TRIES; k++) {
        if (nbest > 0 && vdom_hopeless(cy, vs, &dv[k], &bc))
            break; /* the rest are bounded no lower */
        int ns = 0;
        for (int a = 0; a < nv; a++)
            if (runs_in(cy, vs[a].job, L, dv[k].dom, mark) || !runs_in(cy, vs[a].job, L, -1, mark)) {
                ix[ns] = a; /* in the domain, or it frees quota alone */
                sub[ns++] = vs[a];
            }
        int m = 0;
        /* capacity alone blocks it: what this domain's victims free, it can
         * use only here (quota they free could admit it elsewhere) */
        if (!quota_blocked)
            pc->only_dom = dv[k].dom;
        rc = min_victims(cy, pc, reps, sub, ns, ch, &m);
        pc->only_dom = -1;
        if (rc < 0)
            return rc;
        if (rc == 0)
            continue;
        struct vset_cost c = vset_cost(cy, sub, ch, m);
        for (int c2 = m - 1; c2 >= 0; c2--) /* restore: the next domain starts afresh */
            remove_job(cy, sub[ch[c2]].job, -1);
        if (nbest == 0 || vset_better(cy, &c, &bc)) {
            bc = c;
            nbest = m;
            for (int c2 = 0; c2 < m; c2++)
                best[c2] = ix[ch[c2]];
        }
    }
    *nch = 0;
    if (nbest == 0)
        return 0;
    for (int c = 0; c < nbest; c++) {
        chosen[c] = best[c];
        remove_job(cy, vs[chosen[c]].job, 1);
    }
    rc = fits_now(cy, pc, reps);
    if (rc <= 0) { /* cannot happen: the set fitted */
        for (int c = nbest - 1; c >= 0; c--)
            remove_job(cy, vs[chosen[c]].job, -1);
        return rc < 0 ? rc : 0;
    }
    *nch = nbest;
    return rc;
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
    struct victim *vs = cy_slot(cy->ctx, SL_VICT, CY_MAX_VICTIM_CANDS * sizeof(*vs));
    uint32_t *mark = cy_slot(cy->ctx, SL_MARK, (size_t)(cy->nn > 0 ? cy->nn : 1) * sizeof(*mark));
    if (!vs || !mark)
        return GQ_ENOMEM;
    if (cy->stamp == 0) {
        memset(mark, 0, (size_t)(cy->nn > 0 ? cy->nn : 1) * sizeof(*mark));
    }
    cy->stamp++;
    /* nodes the job could use with any acceptable type */
    int usk = cy_skey_get(cy, pc->jx, &cy->j[pc->jx].r);
    if (usk < 0)
        return usk;
    for (int x = 0; x < cy->sk[usk].nnodes; x++)
        mark[cy->sk[usk].nodes[x]] = cy->stamp;
    int nv = 0;
    int jcoh = cy->t[cJ->team].cohort;
    for (int rx = 0; rx < cy->nrunning && nv < CY_MAX_VICTIM_CANDS; rx++) {
        int v = cy->running[rx];
        const struct sched_job *V = &cy->s->jobs[v];
        const struct cy_job *cV = &cy->j[v];
        if (V->state != SCHED_JOB_RUNNING || V->nplaced == 0 || cV->victim)
            continue;
        if (V->cls == SCHED_INFERENCE && J->cls != SCHED_INFERENCE)
            continue;
        if (cy_preempted_for_waiting(cy, pc->jx, v)) {
            cy->pm_excl = 1;
            continue; /* already preempted once for this job: never twice */
        }
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
            if (pl >= 0 && cy_pool_access(cy, V, pl) == 2 &&
                (cy->s->pools[pl].home_classes & SCHED_CLASS_BIT(J->cls)))
                w.prot = 1;
        }
        w.borrower = team_over_nominal(cy, cV->team);
        {
            /* it borrows quota the preemptor's team lends: over nominal on the
             * GPU type it runs on, in the quota group where the preemptor's
             * team is under nominal */
            int vtype = cy->n[V->placement[0].node].c.type;
            int ve = cy_job_entry(cy, v, vtype), je = cy_job_entry(cy, pc->jx, vtype);
            w.qborrow = ve >= 0 && cy->q[ve].used > cy->q[ve].nominal;
            w.lent = w.qborrow && cV->team != cJ->team && je >= 0 &&
                     cy->q[je].group == cy->q[ve].group && cy->q[je].used < cy->q[je].nominal;
        }
        if (!(V->priority < J->priority || w.lent || w.prot))
            continue;
        /* spec.preemptible false keeps a job from being preempted within its
         * Team's quota and its pools; what it borrows stays reclaimable (or a
         * job could keep another Team's guaranteed quota by opting out) */
        if (!V->preemptible && !w.lent && !w.prot)
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
    int *chosen = cy_slot(cy->ctx, SL_ORDER, (size_t)nv * sizeof(int));
    if (!chosen)
        return GQ_ENOMEM;
    int nch = 0, rc = 0, pass = 0;
    cy->nocache = 1;
retry:
    if (pc->L >= 0)
        rc = min_victims_domains(cy, pc, reps, vs, nv, mark, cy->sk[usk].nodes, cy->sk[usk].nnodes,
                                 quota_blocked, chosen, &nch);
    else
        rc = min_victims(cy, pc, reps, vs, nv, chosen, &nch);
    if (rc <= 0)
        goto out;
    int got = rc;
    /* A job that still borrows once its victims are gone goes, when they are
     * requeued, after every job within nominal and after higher-priority
     * borrowers: a victim of another team that is one of those would be
     * admitted first and take the room back, and the two would preempt each
     * other in turn. Such a job may only take, from other teams, lower-priority
     * victims that borrow on their GPU type (or protected-pool borrowers).
     * Plan again without the others. */
    int e = cy_job_entry(cy, pc->jx, cy->n[reps[0].node].c.type);
    int borrows = e >= 0 && cy->q[e].used + cy_req_milli(&cJ->r) * cJ->want > cy->q[e].nominal;
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
    cy->epoch++;
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
        else if (V->priority < J->priority && V->preemptible)
            gq_buf_printf(&b, "lower priority %d", (int)V->priority);
        else
            gq_buf_printf(&b, "reclaiming quota lent to team %s", cy->t[cy->j[w->job].team].name);
        struct sched_decision *d = cy_add_dec(cy);
        const char *m = b.p ? cy_res_str(cy, b.p) : NULL;
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

/* Backfill: the jobs running on the nodes reserved for pc's job
 * (reserved_by == pc->jx among cand[0..nc)) end in order of their expected
 * end: admitted_at + max_run_s (the caller stops a job there), now for one
 * stopping or chosen as a victim; stopping pods of no job (the nodes'
 * releasing usage) are gone now. Replicas admitted earlier in this cycle
 * count as running from now (a job admitted now ends by now + max_run_s;
 * more replicas of a running job by its own end). The reservation starts
 * at the first end after which the reserved nodes hold the job's replicas.
 * 0 when a job without a limit must end first (no one can say when: no
 * backfill), or out of memory (likewise). */
struct res_end {
    int64_t end;
    int job;
    int dec; /* -1: a running job's placement; else its admission in this cycle, cy->res->d[dec] */
};

static int res_end_cmp(const void *a, const void *b)
{
    const struct res_end *x = a, *y = b;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    if (x->job != y->job)
        return x->job - y->job;
    return x->dec - y->dec;
}

/* t (node sn's capacity, foreign usage included) without what pods being
 * deleted hold there: gone soon, so a reservation counts it as free. */
static void drop_releasing(const struct sched_node *sn, struct sc_node *t)
{
    for (int d = 0; d < t->ndev; d++)
        t->used[d] -= GQ_MIN(sn->releasing_gpu_milli[d], t->used[d]);
    t->cpu_free += GQ_MIN(sn->releasing_cpu_milli, sn->foreign_cpu_milli);
    t->mem_free += GQ_MIN(sn->releasing_mem_bytes, sn->foreign_mem_bytes);
    sc_recount(t);
}

static int releasing_any(const struct sched_node *sn)
{
    for (int d = 0; d < SCHED_MAX_DEVICES; d++)
        if (sn->releasing_gpu_milli[d])
            return 1;
    return sn->releasing_cpu_milli > 0 || sn->releasing_mem_bytes > 0;
}

int cy_fits_released(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps)
{
    if (!cy->rel_listed) { /* the snapshot's releasing usage is the cycle's: listed once */
        cy->rel = cy_slot(cy->ctx, SL_REL, (size_t)(cy->nn > 0 ? cy->nn : 1) * sizeof(int));
        if (!cy->rel)
            return GQ_ENOMEM;
        for (int i = 0; i < cy->nn; i++)
            if (releasing_any(&cy->s->nodes[i]))
                cy->rel[cy->nrel++] = i;
        cy->rel_listed = 1;
    }
    if (cy->nrel == 0)
        return 0;
    struct sc_node *keep = cy_slot(cy->ctx, SL_RELKEEP, (size_t)cy->nrel * sizeof(*keep));
    if (!keep)
        return GQ_ENOMEM;
    for (int k = 0; k < cy->nrel; k++) {
        int i = cy->rel[k];
        keep[k] = cy->n[i].c;
        struct sc_node t = cy->n[i].c;
        drop_releasing(&cy->s->nodes[i], &t);
        cy_node_set(cy, i, &t);
    }
    int nocache = cy->nocache;
    cy->nocache = 1;
    int rc = fits_now(cy, pc, reps);
    cy->nocache = nocache;
    for (int k = cy->nrel - 1; k >= 0; k--)
        cy_node_set(cy, cy->rel[k], &keep[k]);
    return rc;
}

static int reserved_fits(struct cy *cy, const struct place_ctx *pc, const int *cand, int nc)
{
    int got = 0;
    for (int x = 0; x < nc && got < pc->want; x++) {
        int i = cand[x];
        if (cy->n[i].reserved_by != pc->jx)
            continue;
        struct sc_node t = cy->n[i].c;
        drop_releasing(&cy->s->nodes[i], &t); /* free by then */
        int c = sc_fit_count(&t, &pc->r, pc->want);
        got += c > 0 && pc->S >= 0 ? 1 : GQ_MAX(c, 0);
    }
    return got >= pc->want;
}

/* The replicas of this cycle's admission d (its replica array is still an
 * offset into the result's memory: fixed up at the cycle's end). */
static const struct sched_replica *dec_reps(const struct cy *cy, const struct sched_decision *d)
{
    return cy->res->mem->reps + (uintptr_t)d->rep;
}

/* The replicas of running job v (dec < 0: its placement) or of this
 * cycle's admission cy->res->d[dec] (of job v); *n gets their count. */
static const struct sched_replica *job_reps(const struct cy *cy, int v, int dec, int *n)
{
    if (dec >= 0) {
        *n = cy->res->d[dec].nrep;
        return dec_reps(cy, &cy->res->d[dec]);
    }
    *n = cy->s->jobs[v].nplaced;
    return cy->s->jobs[v].placement;
}

static void job_usage(struct cy *cy, const struct res_end *e, int sign)
{
    int n;
    const struct sched_replica *reps = job_reps(cy, e->job, e->dec, &n);
    for (int p = 0; p < n; p++)
        cy_node_apply(cy, reps[p].node, &cy->j[e->job].r, reps[p].devs, sign);
}

/* Does running job v (dec < 0) or this cycle's admission cy->res->d[dec]
 * hold a node reserved for jx? */
static int on_reserved(const struct cy *cy, int v, int dec, int jx)
{
    int n;
    const struct sched_replica *reps = job_reps(cy, v, dec, &n);
    for (int p = 0; p < n; p++)
        if (cy->n[reps[p].node].reserved_by == jx)
            return 1;
    return 0;
}

/* Node i as a reserving job finds it empty: its allocatable less foreign
 * usage, but what pods being deleted hold there (going). */
static void node_empty(const struct cy *cy, int i, struct sc_node *t)
{
    const struct sched_node *sn = &cy->s->nodes[i];
    *t = cy->n[i].c;
    memset(t->used, 0, sizeof(t->used));
    for (int d = 0; d < t->ndev; d++)
        t->used[d] = sn->foreign_gpu_milli[d];
    t->cpu_free = sn->cpu_milli - sn->foreign_cpu_milli;
    t->mem_free = sn->mem_bytes - sn->foreign_mem_bytes;
    drop_releasing(sn, t);
}

static int64_t reservation_start(struct cy *cy, const struct place_ctx *pc, const int *cand, int nc)
{
    const int64_t now = cy->s->now;
    if (reserved_fits(cy, pc, cand, nc))
        return now;
    int ne = 0;
    for (int rx = 0; rx < cy->nrunning; rx++)
        ne += on_reserved(cy, cy->running[rx], -1, pc->jx);
    for (size_t x = 0; x < cy->ndec; x++)
        ne += cy->res->d[x].kind == SCHED_ADMIT && on_reserved(cy, cy->res->d[x].job, (int)x, pc->jx);
    if (ne == 0)
        return 0;
    struct res_end *ev = malloc((size_t)ne * sizeof(*ev));
    if (!ev)
        return 0;
    ne = 0;
    for (int rx = 0; rx < cy->nrunning; rx++) {
        int v = cy->running[rx];
        const struct sched_job *V = &cy->s->jobs[v];
        if (!on_reserved(cy, v, -1, pc->jx))
            continue;
        int64_t end = INT64_MAX;
        if (V->terminating || cy->j[v].victim)
            end = now;
        else if (V->max_run_s > 0)
            end = GQ_MAX(now, V->admitted_at + V->max_run_s);
        ev[ne++] = (struct res_end){end, v, -1};
    }
    for (size_t x = 0; x < cy->ndec; x++) {
        const struct sched_decision *d = &cy->res->d[x];
        if (d->kind != SCHED_ADMIT || !on_reserved(cy, d->job, (int)x, pc->jx))
            continue;
        const struct sched_job *V = &cy->s->jobs[d->job];
        int64_t end = INT64_MAX;
        if (V->max_run_s > 0) /* more replicas of a running job end with it */
            end = V->state == SCHED_JOB_RUNNING && V->admitted_at > 0 ? GQ_MAX(now, V->admitted_at + V->max_run_s)
                                                                       : now + V->max_run_s;
        ev[ne++] = (struct res_end){end, d->job, (int)x};
    }
    qsort(ev, (size_t)ne, sizeof(*ev), res_end_cmp);
    int64_t start = 0;
    int removed = 0;
    for (int e = 0; e < ne && ev[e].end != INT64_MAX; e++) {
        job_usage(cy, &ev[e], -1);
        removed++;
        if (e + 1 < ne && ev[e + 1].end == ev[e].end)
            continue; /* every job ending then goes before the look */
        if (reserved_fits(cy, pc, cand, nc)) {
            start = ev[e].end;
            break;
        }
    }
    while (removed > 0)
        job_usage(cy, &ev[--removed], 1);
    free(ev);
    return start;
}

/* The spare of node i, reserved for pc's job, which may take `need` of its
 * replicas there (as many as the node holds empty, at most the job's
 * count): capacity that job never needs there, whatever of the node's work
 * is still running when it starts (struct cy_node spare_*). That work is the
 * jobs on the node (running, or admitted earlier in this cycle). The job
 * starts once what remains of it leaves the job room, so what remains then
 * is some subset R of that work that fits beside the job's replicas, and a
 * later replica does not delay it when it fits beside every such R: beside
 * the largest R in each resource. R is found by trying every subset of up
 * to CY_SPARE_JOBS jobs; with more, it is bounded by their total. Devices
 * count whole (a share's device among them); pods being deleted are gone
 * (releasing usage), other foreign usage stays. No spare when the node
 * cannot hold the replicas even empty. Without run limits this is the only
 * room a reserved node offers later jobs: which of its jobs ends first is
 * not known, so only capacity no end order makes needed is handed out. */
#define CY_SPARE_JOBS 12

struct spare_use {
    int64_t cpu, mem, dev;
};

struct spare_jobs {
    struct spare_use u[CY_SPARE_JOBS], tot;
    int nu, over;
};

/* What running job v (dec < 0) or this cycle's admission d[dec] holds on
 * node i, added to sj when it holds anything there. */
static void spare_add(const struct cy *cy, int v, int dec, int i, struct spare_jobs *sj)
{
    int n, k = 0;
    uint32_t devs = 0;
    const struct sched_replica *reps = job_reps(cy, v, dec, &n);
    for (int p = 0; p < n; p++)
        if (reps[p].node == i) {
            k++;
            devs |= reps[p].devs;
        }
    if (!k)
        return;
    struct spare_use x = {k * cy->j[v].r.cpu, k * cy->j[v].r.mem, __builtin_popcount(devs)};
    sj->tot.cpu += x.cpu;
    sj->tot.mem += x.mem;
    sj->tot.dev += x.dev;
    if (sj->nu < CY_SPARE_JOBS)
        sj->u[sj->nu++] = x;
    else
        sj->over = 1;
}

static void node_spare(struct cy *cy, const struct place_ctx *pc, int i, int need)
{
    struct cy_node *nd = &cy->n[i];
    nd->spare_set = 0;
    struct sc_node empty;
    node_empty(cy, i, &empty);
    struct spare_use cap = {empty.cpu_free - (int64_t)need * pc->r.cpu, empty.mem_free - (int64_t)need * pc->r.mem,
                            empty.full_free - (int64_t)need * (pc->r.gpus > 0 ? pc->r.gpus : pc->r.milli > 0)};
    if (cap.cpu < 0 || cap.mem < 0 || cap.dev < 0)
        return;
    struct spare_jobs sj = {.nu = 0};
    for (int rx = 0; rx < cy->nrunning; rx++)
        spare_add(cy, cy->running[rx], -1, i, &sj);
    for (size_t x = 0; x < cy->ndec; x++)
        if (cy->res->d[x].kind == SCHED_ADMIT)
            spare_add(cy, cy->res->d[x].job, (int)x, i, &sj);
    struct spare_use mx = {0, 0, 0};
    if (sj.over) {
        mx = (struct spare_use){GQ_MIN(sj.tot.cpu, cap.cpu), GQ_MIN(sj.tot.mem, cap.mem), GQ_MIN(sj.tot.dev, cap.dev)};
    } else {
        /* every subset once, in Gray-code order: each differs from the one
         * before by one job, added or taken away */
        struct spare_use r = {0, 0, 0};
        uint32_t gray = 0;
        for (uint32_t m = 1; m < (1u << sj.nu); m++) {
            int b = __builtin_ctz(m);
            int64_t sg = (gray >> b) & 1u ? -1 : 1;
            gray ^= 1u << b;
            r.cpu += sg * sj.u[b].cpu;
            r.mem += sg * sj.u[b].mem;
            r.dev += sg * sj.u[b].dev;
            if (r.cpu > cap.cpu || r.mem > cap.mem || r.dev > cap.dev)
                continue; /* the job could not start beside it: not what remains */
            mx.cpu = GQ_MAX(mx.cpu, r.cpu);
            mx.mem = GQ_MAX(mx.mem, r.mem);
            mx.dev = GQ_MAX(mx.dev, r.dev);
        }
    }
    nd->spare_cpu = cap.cpu - mx.cpu;
    nd->spare_mem = cap.mem - mx.mem;
    nd->spare_dev = (int32_t)(cap.dev - mx.dev);
    nd->res_cpu_free = nd->c.cpu_free;
    nd->res_mem_free = nd->c.mem_free;
    nd->res_full_free = nd->c.full_free;
    nd->spare_set = 1;
}

/* Reserve, for blocked job jx, the nodes of the domain closest to fitting it.
 * Only statically eligible nodes that could hold a replica when empty count.
 * The domain it reserved last cycle (jb->reserved_domain) is kept until
 * another is strictly closer to fitting; the choice is recorded in the job
 * (cy_job.reserved) for its WAIT. */
int cy_reserve_for(struct cy *cy, const struct place_ctx *pc)
{
    const char *prevname = pc->jb->reserved_domain;
    const struct cy_skey *sk = &cy->sk[pc->skey];
    int lvl = pc->L;
    int want = pc->want;
    /* candidates: nodes that could host one replica on their allocatable */
    int *cand = cy->cand, nc = 0;
    for (int x = 0; x < sk->nnodes; x++) {
        int i = sk->nodes[x];
        if (cy->n[i].reserved_by >= 0 || cy_claim_blocks(cy, cy->n[i].claimed_by, pc->jx))
            continue;
        /* a borrower of a protected pool yields it to the pool's home classes:
         * it reserves none of it (a reservation there would hold their nodes
         * for it, and may wait for room the pool's reserve never leaves) */
        if (cy->n[i].pool >= 0 && cy_pool_access(cy, pc->jb, cy->n[i].pool) == 2)
            continue;
        struct sc_node empty;
        node_empty(cy, i, &empty);
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
        int d = lvl >= 0 ? cy_dom_of(cy, cand[x], lvl) : 0;
        cnt[d] = 0;
        fr[d] = 0;
    }
    for (int x = 0; x < nc; x++) {
        int d = lvl >= 0 ? cy_dom_of(cy, cand[x], lvl) : 0;
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
        int d = lvl >= 0 ? cy_dom_of(cy, cand[x], lvl) : 0;
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
            int d = cy_dom_of(cy, cand[x], lvl);
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
            if ((lvl >= 0 && cy_dom_of(cy, i, lvl) != bestdom) || cy->n[i].reserved_by >= 0)
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
        cy->epoch++;
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
        /* backfill: jobs sure to end by then may use the reserved nodes */
        int64_t start = reservation_start(cy, pc, cand, nc);
        for (int x = 0; x < nc && start > 0; x++)
            if (cy->n[cand[x]].reserved_by == pc->jx)
                cy->n[cand[x]].res_start = start;
        if (start > cy->s->now)
            cy->j[pc->jx].res_start = start; /* its WAIT says by when */
        for (int x = 0; x < nc; x++)
            if (cy->n[cand[x]].reserved_by == pc->jx)
                node_spare(cy, pc, cand[x], GQ_MIN(cy->candcap[x], want));
        cy->j[pc->jx].reserved = b.p ? cy_res_str(cy, b.p) : NULL;
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
int cy_hold_for(struct cy *cy, int jx, int *type)
{
    int n = 0;
    *type = -1;
    for (int x = 0; x < cy->nj; x++) {
        const struct sched_job *V = &cy->s->jobs[x];
        if (V->state != SCHED_JOB_RUNNING || !V->terminating || V->terminating_for != jx)
            continue;
        n++;
        cy->epoch++;
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

/* The job plans like any other of its kind: it passes over no victim for
 * itself alone (none preempted for it, it was not preempted for a waiting
 * job) and holds no claim. */
static int pm_plain(const struct cy *cy, int jx)
{
    const struct cy_job *cj = &cy->j[jx];
    return cj->pv_n == 0 && cj->pf < 0 && !cj->claimant && cj->claim_e < 0 && cj->nvictims == 0;
}

static int pm_fill(struct cy *cy, const struct place_ctx *pc, int quota_blocked, struct cy_pmemo *m)
{
    const struct cy_job *cj = &cy->j[pc->jx];
    int sk = cy_skey_get(cy, pc->jx, &cj->r);
    if (sk < 0)
        return sk;
    memset(m, 0, sizeof(*m));
    m->epoch = cy->epoch;
    m->key = pc->key;
    m->skfull = sk;
    m->team = cj->team;
    m->cls = (int32_t)pc->jb->cls;
    m->pool = pc->jb->pool;
    m->quota_blocked = quota_blocked;
    m->priority = pc->jb->priority;
    m->r = pc->r;
    m->full = cj->r;
    return 0;
}

static int pm_same(const struct cy_pmemo *a, const struct cy_pmemo *b)
{
    return a->epoch == b->epoch && a->key == b->key && a->skfull == b->skfull && a->team == b->team &&
           a->cls == b->cls && a->pool == b->pool && a->quota_blocked == b->quota_blocked &&
           a->priority == b->priority && !memcmp(&a->r, &b->r, sizeof(a->r)) &&
           !memcmp(&a->full, &b->full, sizeof(a->full));
}

/* Plan preemption for a blocked job. When no victim set works only because
 * the minimum runtime protects some candidates, record in the job when the
 * last victim it would need leaves that protection (its WAIT says so).
 *
 * A plan that finds nothing is remembered for the rest of the cycle while
 * its state stands (cy.epoch): the next job of the same team, priority,
 * class, pool, eligibility and request finds nothing either (the candidates,
 * their order and every placement tried are the same), and gets the answer
 * without a plan (a queue of identical jobs cost one plan per job, each up to
 * dozens of placement attempts). A remembered answer still counts as a try
 * (CY_MAX_PREEMPT_TRIES): the decisions are those of the plans themselves.
 * Returns the victims chosen, 0 for none, < 0 on error. */
int cy_preempt(struct cy *cy, struct place_ctx *pc, struct sched_replica *reps,
               int quota_blocked)
{
    struct cy_pmemo probe;
    int plain = pm_plain(cy, pc->jx);
    if (plain) {
        int rc = pm_fill(cy, pc, quota_blocked, &probe);
        if (rc < 0)
            return rc;
        for (int x = 0; x < cy->npm; x++)
            if (pm_same(&cy->pm[x], &probe)) {
                if (cy->pm[x].until)
                    cy->j[pc->jx].until = cy->pm[x].until;
                cy->res->stats.preempt_remembered++;
                return 0;
            }
    }
    cy->res->stats.preempt_plans++;
    cy->young_skipped = 0;
    cy->pm_excl = 0;
    int got = plan_preempt(cy, pc, reps, quota_blocked, NULL);
    int64_t until = 0;
    if (got == 0 && cy->young_skipped > 0) {
        int rc = plan_preempt(cy, pc, reps, quota_blocked, &until);
        if (rc < 0)
            return rc;
        if (rc > 0)
            cy->j[pc->jx].until = until;
        else
            until = 0;
    }
    if (got == 0 && plain && !cy->pm_excl) {
        probe.until = until;
        cy->pm[cy->pmnext] = probe;
        cy->pmnext = (cy->pmnext + 1) % CY_PMEMO;
        if (cy->npm < CY_PMEMO)
            cy->npm++;
    }
    return got;
}

/*
 * Claims of waiting preemptors, taken before the queue is walked. A waiting
 * job with victims (still stopping, or preempted jobs waiting for it) whose
 * placement fits once its stopping victims are gone claims the nodes of that
 * placement (claim_blocks: its victims and jobs of lower or equal priority
 * stay off them) and the quota it needs, in queue order. A preemptor whose
 * placement no longer fits gives its claim up: its victims are free to run.
 */
int cy_claims_take(struct cy *cy, struct sched_replica *reps)
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
        while (b >= 0 && cy_job_cmp_team(cy->s, list[b], t) > 0) {
            list[b + 1] = list[b];
            b--;
        }
        list[b + 1] = t;
    }
    int rc = 0;
    for (int c = 0; c < nc && rc == 0; c++) {
        int p = list[c];
        struct cy_job *cj = &cy->j[p];
        cy_claim_drop(cy, p);
        int ctype = -1;
        for (int v = 0; v < nterm; v++)
            if (cy->s->jobs[term[v]].terminating_for == p) {
                const struct sched_job *V = &cy->s->jobs[term[v]];
                if (ctype < 0 && V->nplaced > 0)
                    ctype = cy->n[V->placement[0].node].c.type;
                remove_job(cy, term[v], 1);
            }
        struct place_ctx pc;
        rc = cy_make_pc(cy, p, cj->r.types, &pc);
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
                if (cy->n[reps[y].node].claimed_by < 0) {
                    cy->n[reps[y].node].claimed_by = p;
                    cy->epoch++;
                }
            cj->claimant = 1;
            cy_claim_set(cy, p, cy->n[reps[0].node].c.type);
        } else if (cj->stopping > 0) {
            cy_claim_set(cy, p, ctype); /* still waiting for its victims: the quota stays claimed */
        }
    }
    free(list);
    return rc;
}
