/*
 * sched_quota.c — team quota and cohorts within a cycle: quota entries,
 * borrowing limits, charging and refunds, waiting preemptors' claims,
 * must_borrow and the team fair share.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"
#include "sched_cy.h"

/* ---------------- quota ---------------- */

int cy_quota_entry(const struct cy *cy, int team, int type)
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


static int quota_fits(const struct cy *cy, int e, int64_t d)
{
    const struct cy_quota *q = &cy->q[e];
    if (q->used + d <= q->nominal)
        return 1;
    int64_t borrow = q->used + d - q->nominal;
    if (q->borrow >= 0 && borrow > q->borrow)
        return 0;
    const struct cy_group *g = &cy->g[q->group];
    int64_t over = g->over_sum - GQ_MAX(0, q->used - cy_guaranteed(q)) +
                   GQ_MAX(0, q->used + d - cy_guaranteed(q));
    return over <= g->lendable_sum;
}

static void quota_charge(struct cy *cy, int e, int64_t d)
{
    struct cy_quota *q = &cy->q[e];
    struct cy_group *g = &cy->g[q->group];
    g->over_sum -= GQ_MAX(0, q->used - cy_guaranteed(q));
    q->used += d;
    g->over_sum += GQ_MAX(0, q->used - cy_guaranteed(q));
}

/* Type mask of the job's acceptable types that its team's quota admits. */
uint64_t cy_quota_mask(const struct cy *cy, int jx)
{
    const struct cy_job *cj = &cy->j[jx];
    const struct cy_team *t = &cy->t[cj->team];
    if (t->unlimited || !sc_is_gpu(&cj->r))
        return cj->r.types;
    int64_t need = cy_req_milli(&cj->r) * cj->want;
    uint64_t m = 0;
    int ntypes = cy->ctx->types.n;
    for (int ty = 0; ty < ntypes && ty < SC_MAX_GPU_TYPES; ty++) {
        if (!(cj->r.types & ((uint64_t)1 << ty)))
            continue;
        int e = cy_quota_entry(cy, cj->team, ty);
        if (e >= 0 && quota_fits(cy, e, need))
            m |= (uint64_t)1 << ty;
    }
    /* a job open to any product: nodes without a product need the "*" entry */
    if (cj->r.types == SC_ANY) {
        uint64_t all = ntypes >= 64 ? SC_ANY : (((uint64_t)1 << ntypes) - 1);
        int e = cy_quota_entry(cy, cj->team, -1);
        if (e >= 0 && quota_fits(cy, e, need) && (m & all) == all)
            return SC_ANY;
    }
    return m;
}


/* Charge (sign +1) or refund (-1) a placement to team quota only. */
static void charge_quota(struct cy *cy, int team, const struct sc_req *r,
                         const struct sched_replica *reps, int n, int sign)
{
    if (!sc_is_gpu(r) || cy->t[team].unlimited)
        return;
    int64_t per = cy_req_milli(r);
    for (int x = 0; x < n; x++) {
        int e = cy_quota_entry(cy, team, cy->n[reps[x].node].c.type);
        if (e >= 0)
            quota_charge(cy, e, sign * per);
    }
}

/* Charge (sign +1) or refund (-1) a placement to team quota and share. */
void cy_charge(struct cy *cy, int team, const struct sc_req *r,
               const struct sched_replica *reps, int n, int sign)
{
    if (!sc_is_gpu(r))
        return;
    struct cy_team *t = &cy->t[team];
    t->alloc += sign * cy_req_milli(r) * n;
    charge_quota(cy, team, r, reps, n, sign);
    cy_team_share_update(t);
}

/*
 * The quota entry a job is charged to on a node of GPU type `type` (-1: the
 * first acceptable type that has an entry, else "*"); -1 when none.
 */
int cy_job_entry(const struct cy *cy, int jx, int type)
{
    const struct cy_job *cj = &cy->j[jx];
    if (cy->t[cj->team].unlimited || !sc_is_gpu(&cj->r))
        return -1;
    if (type >= 0 && type < SC_MAX_GPU_TYPES && (cj->r.types & ((uint64_t)1 << type)))
        return cy_quota_entry(cy, cj->team, type);
    int ntypes = cy->ctx->types.n;
    for (int ty = 0; ty < ntypes && ty < SC_MAX_GPU_TYPES; ty++) {
        if (!(cj->r.types & ((uint64_t)1 << ty)))
            continue;
        int e = cy_quota_entry(cy, cj->team, ty);
        if (e >= 0)
            return e;
    }
    return cy_quota_entry(cy, cj->team, -1);
}

/*
 * A waiting preemptor's claim: its whole need charged to its team's quota
 * entry (so to its nominal, and beyond nominal to the cohort's lendable pool)
 * while its victims stop. Nobody else can borrow what it claimed. type: GPU
 * type of the nodes it will use (-1 unknown).
 */
void cy_claim_set(struct cy *cy, int jx, int type)
{
    struct cy_job *cj = &cy->j[jx];
    if (cj->claim_e >= 0)
        return;
    int e = cy_job_entry(cy, jx, type);
    if (e < 0)
        return;
    cy->epoch++;
    cj->claim_e = e;
    cj->claim = cy_req_milli(&cj->r) * cj->want;
    quota_charge(cy, e, cj->claim);
    cy->g[cy->q[e].group].claimed += cj->claim;
}

void cy_claim_drop(struct cy *cy, int jx)
{
    struct cy_job *cj = &cy->j[jx];
    if (cj->claim_e < 0)
        return;
    cy->epoch++;
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
int cy_must_borrow(const struct cy *cy, int jx)
{
    const struct cy_job *cj = &cy->j[jx];
    if (cy->t[cj->team].unlimited || !sc_is_gpu(&cj->r) || cj->want <= 0)
        return 0;
    int64_t need = cy_req_milli(&cj->r) * cj->want;
    int ntypes = cy->ctx->types.n, seen = 0;
    for (int ty = 0; ty < ntypes && ty < SC_MAX_GPU_TYPES; ty++) {
        if (!(cj->r.types & ((uint64_t)1 << ty)))
            continue;
        int e = cy_quota_entry(cy, cj->team, ty);
        if (e < 0)
            continue;
        seen = 1;
        if (cy->q[e].used - (cj->claim_e == e ? cj->claim : 0) + need <= cy->q[e].nominal)
            return 0;
    }
    if (cj->r.types == SC_ANY) {
        int e = cy_quota_entry(cy, cj->team, -1);
        if (e >= 0) {
            seen = 1;
            if (cy->q[e].used - (cj->claim_e == e ? cj->claim : 0) + need <= cy->q[e].nominal)
                return 0;
        }
    }
    return seen;
}

void cy_team_share_update(struct cy_team *ct)
{
    ct->share = ((double)ct->alloc / 1000.0 + ct->hist) / ct->weight;
}

double cy_team_share(const struct cy *cy, int t)
{
    return cy->t[t].share;
}
