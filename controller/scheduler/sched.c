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
 *     closest to fitting them (no later job may use them this cycle, but
 *     one that ends before they are free or fits in what the head never
 *     needs there: backfill).
 *  4. WAIT decisions carry an explanation built from per-reason node counts
 *     (computed once per shape key) and the team-queue position.
 *
 * Capacity only shrinks during a cycle (preemption trials are undone), so a
 * shape key that failed once fails again, and the scan cursor per key (the
 * first node that still fitted) never needs to move back.
 *
 * This file drives the cycle (queue merge, admit/wait decisions); the cycle's
 * state (struct cy) and shared helpers are in sched_cy.h, the steps in
 * sched_build.c, sched_place.c, sched_quota.c, sched_explain.c and
 * sched_preempt.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"
#include "sched_cy.h"

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

/* ---------------- cycle memory and results ---------------- */

void *cy_slot(struct sched *s, int id, size_t bytes)
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
    free(s->dkeep);
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
    b += s->dkeep_cap * sizeof(*s->dkeep);
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

void sched_result_recycle(struct sched *ctx, struct sched_result *r)
{
    if (ctx && r && r->d && r->mem && r->mem->capd > ctx->dkeep_cap) {
        free(ctx->dkeep);
        ctx->dkeep = r->d;
        ctx->dkeep_cap = r->mem->capd;
        r->d = NULL;
    }
    sched_result_free(r);
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

const char *cy_res_str(struct cy *cy, const char *s)
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

struct sched_decision *cy_add_dec(struct cy *cy)
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

/* ---------------- order ---------------- */

int cy_job_cmp_team(const struct sched_snapshot *s, int a, int b)
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
    return cy_job_cmp_team(s, a->idx, b->idx) <= 0;
}

static void msort(const struct sched_snapshot *s, struct sort_key *v, struct sort_key *tmp, int n)
{
    if (n < 2)
        return;
    int h = n / 2;
    msort(s, v, tmp, h);
    msort(s, v + h, tmp, n - h);
    if (key_before(s, &v[h - 1], &v[h]))
        return; /* the halves are in order already (a queue changes little between cycles) */
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

static void team_head(struct cy *cy, int t)
{
    struct cy_team *ct = &cy->t[t];
    if (ct->head >= ct->nqueue)
        return;
    ct->hprio = ct->keys[ct->head].prio;
    ct->henq = ct->keys[ct->head].enq;
    ct->hjob = ct->keys[ct->head].idx;
    ct->hborrow = cy_must_borrow(cy, ct->hjob);
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
            bs = cy_team_share(cy, t);
            continue;
        }
        const struct cy_team *b = &cy->t[best];
        int better;
        double sh = cy_team_share(cy, t);
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

int cy_make_pc(struct cy *cy, int jx, uint64_t types, struct place_ctx *pc)
{
    const struct sched_job *jb = &cy->s->jobs[jx];
    memset(pc, 0, sizeof(*pc));
    pc->jx = jx;
    pc->jb = jb;
    pc->r = cy->j[jx].r;
    pc->r.types = types;
    pc->want = cy->j[jx].want;
    pc->gang = jb->gang ? 1 : 0;
    pc->L = cy_job_topo(cy, jb->topo_required);
    pc->P = cy_job_topo(cy, jb->topo_preferred);
    pc->S = cy_job_topo(cy, jb->topo_spread);
    pc->only_dom = -1;
    int sk = cy_skey_get(cy, jx, &pc->r);
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
    probe.run_s = jb->max_run_s > 0 ? jb->max_run_s : 0;
    int k = cy_key_get(cy, &probe);
    if (k < 0)
        return k;
    pc->key = k;
    return 0;
}

/* A waiting job that found no place: could it fit with every node empty
 * (all its acceptable types, whatever its quota allows)? */
static int never_check(struct cy *cy, int jx, const struct place_ctx *pc)
{
    struct cy_job *cj = &cy->j[jx];
    cj->never_msg = NULL;
    if (cy->s->jobs[jx].state != SCHED_JOB_WAITING)
        return 0;
    struct place_ctx full;
    if (pc->r.types != cj->r.types) {
        int rc = cy_make_pc(cy, jx, cj->r.types, &full);
        if (rc)
            return rc;
        pc = &full;
    }
    const char *m;
    int rc = cy_never_fits(cy, pc, &m);
    if (rc < 0)
        return rc;
    cj->never_msg = rc ? m : NULL;
    return 0;
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
    cy->epoch++;
    memcpy(&m->reps[off], reps, (size_t)got * sizeof(*reps));
    m->nreps += (size_t)got;
    cy_charge(cy, cy->j[pc->jx].team, &pc->r, reps, got, 1);
    struct sched_decision *d = cy_add_dec(cy);
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
        int dm = cy_dom_of(cy, reps[0].node, lvl), same = dm < cy->ctx->doms[lvl].n;
        for (int y = 1; y < got && same; y++)
            same = cy_dom_of(cy, reps[y].node, lvl) == dm;
        if (same)
            break;
    }
    if (lvl >= 0) {
        const struct sched_node *sn = &cy->s->nodes[reps[0].node];
        const char *v = sc_label(sn, cy->cfg->levels[lvl].label_key);
        d->domain = cy_res_str(cy, v && v[0] ? v : (sn->name ? sn->name : "?"));
        if (!d->domain)
            return GQ_ENOMEM;
    }
    char msg[SCHED_MSG_MAX];
    int n;
    if (lvl >= 0)
        n = snprintf(msg, sizeof(msg), "admitted %d replica%s in %s %s", got, got == 1 ? "" : "s",
                     cy->cfg->levels[lvl].name, d->domain);
    else
        n = snprintf(msg, sizeof(msg), "admitted %d replica%s", got, got == 1 ? "" : "s");
    /* a backfill says whose reservation it uses, and why it may */
    for (int y = 0; y < got; y++) {
        const struct cy_node *nd = &cy->n[reps[y].node];
        if (nd->reserved_by < 0 || nd->reserved_by == pc->jx)
            continue;
        if (n >= 0 && (size_t)n < sizeof(msg)) {
            if (cy_backfills(cy, pc->jb, nd))
                snprintf(msg + n, sizeof(msg) - (size_t)n,
                         "; backfill on nodes reserved for %s: ends within its maxRunSeconds (%llds), before "
                         "that job could start",
                         cy->s->jobs[nd->reserved_by].id, (long long)pc->jb->max_run_s);
            else
                snprintf(msg + n, sizeof(msg) - (size_t)n,
                         "; backfill on nodes reserved for %s: in capacity that job does not need there",
                         cy->s->jobs[nd->reserved_by].id);
        }
        cy->res->stats.backfilled++;
        break;
    }
    d->message = cy_res_str(cy, msg);
    if (!d->message)
        return GQ_ENOMEM;
    cy->res->stats.admitted++;
    return 0;
}

static int run(struct cy *cy)
{
    const struct sched_snapshot *s = cy->s;
    int rc = cy_build(cy);
    if (rc)
        return rc;
    /* team queues */
    int nw = 0;
    for (int x = 0; x < cy->nj; x++)
        if (cy->j[x].want > 0)
            nw++;
    int *all = cy_slot(cy->ctx, SL_TEAMQ, (size_t)(nw + 1) * sizeof(int) * 2);
    if (!all)
        return GQ_ENOMEM;
    int *tmp = all + nw + 1;
    struct sort_key *keys = cy_slot(cy->ctx, SL_SORT, (size_t)(nw + 1) * 2 * sizeof(*keys));
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
    rc = cy_claims_take(cy, reps);
    if (rc)
        goto out;
    for (int last = -1;;) {
        /* only the last job's team changed its quota usage (admission or claim) */
        if (last >= 0 && cy->t[last].head < cy->t[last].nqueue)
            cy->t[last].hborrow = cy_must_borrow(cy, cy->t[last].hjob);
        int t = next_team(cy);
        if (t < 0)
            break;
        last = t;
        int jx = cy->t[t].queue[cy->t[t].head++];
        team_head(cy, t);
        order[no++] = jx;
        struct cy_job *cj = &cy->j[jx];
        cy_claim_drop(cy, jx); /* its own claim does not block it; set again if it still waits */
        const struct sched_job *jb = &s->jobs[jx];
        uint64_t qm = cy_quota_mask(cy, jx);
        int gpu = sc_is_gpu(&cj->r);
        struct place_ctx pc;
        if (gpu && qm == 0 && cj->r.types != 0 && !cy->t[cj->team].unlimited) {
            /* blocked by quota: explain node side with the full type mask */
            rc = cy_make_pc(cy, jx, cj->r.types, &pc);
            if (rc)
                goto out;
            int got = 0, ctype = -1;
            if (cj->stopping > 0) {
                got = cy_hold_for(cy, jx, &ctype);
            } else if (cy->cfg->preemption && cy->preempt_tries < CY_MAX_PREEMPT_TRIES) {
                cy->preempt_tries++;
                got = cy_preempt(cy, &pc, reps, 1);
                if (got < 0) {
                    rc = got;
                    goto out;
                }
                if (got > 0)
                    ctype = cy->n[reps[0].node].c.type;
            }
            if (got > 0) {
                cy_claim_set(cy, jx, ctype);
                char e[96];
                snprintf(e, sizeof(e), "waiting for %d preempted job%s to stop", got,
                         got == 1 ? "" : "s");
                rc = cy_wait_msg(cy, jx, NULL, 0, e);
            } else {
                rc = never_check(cy, jx, &pc);
                if (!rc)
                    rc = cy_wait_msg(cy, jx, cy_key_message(cy, &pc), 1, NULL);
            }
            if (rc)
                goto out;
            cj->decided = 2;
            continue;
        }
        rc = cy_make_pc(cy, jx, gpu ? (cj->r.types & qm) : cj->r.types, &pc);
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
            got = cy_try_place(cy, &own, reps);
        } else {
            got = cy_try_place(cy, &pc, reps);
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
                rc = cy_wait_msg(cy, jx, NULL, 0, e);
                if (rc)
                    goto out;
            }
            continue;
        }
        cy->k[pc.key].failed = 1;
        const char *nodes_part = cy_key_message(cy, &pc);
        if (!nodes_part) {
            rc = GQ_ENOMEM;
            goto out;
        }
        int pre = 0, ctype = -1, soon = 0;
        if (cj->stopping > 0) {
            pre = cy_hold_for(cy, jx, &ctype); /* its victims are still stopping: no new ones */
        } else if (cy->cfg->preemption && cy->preempt_tries < CY_MAX_PREEMPT_TRIES) {
            /* what stopping pods release (a suspended or deleted job's, a
             * victim's whose job left) will fit it: it waits for that, and
             * stops no running work for what is being freed already */
            soon = cy_fits_released(cy, &pc, reps);
            if (soon < 0) {
                rc = soon;
                goto out;
            }
            /* worth trying only when some running job could be a victim */
            if (!soon) {
                cy->preempt_tries++;
                pre = cy_preempt(cy, &pc, reps, 0);
            }
            if (pre < 0) {
                rc = pre;
                goto out;
            }
            if (pre > 0)
                ctype = cy->n[reps[0].node].c.type;
        }
        if (pre > 0) {
            cy_claim_set(cy, jx, ctype);
            char e[96];
            snprintf(e, sizeof(e), "waiting for %d preempted job%s to stop", pre,
                     pre == 1 ? "" : "s");
            rc = cy_wait_msg(cy, jx, NULL, 0, e);
        } else {
            if (cy->reservations < cy->cfg->max_reservations)
                rc = cy_reserve_for(cy, &pc);
            if (!rc)
                rc = never_check(cy, jx, &pc);
            if (rc)
                goto out;
            char e[SCHED_MSG_MAX];
            if (soon)
                snprintf(e, sizeof(e), "%s; fits once stopping pods release their GPUs", nodes_part);
            rc = cy_wait_msg(cy, jx, nodes_part, 0, soon ? e : NULL);
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
        struct sched_decision *d = cy_add_dec(cy);
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
        d->unschedulable = cy->j[jx].never_msg != NULL;
        d->unschedulable_msg = cy->j[jx].never_msg;
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

/* sched_result.due: the first end of a minimum-runtime protection after
 * now, among the jobs running and those this cycle admits (admitted now),
 * while a job waits; 0 when no job waits, preemption is off or nothing is
 * protected. Victims are chosen among running jobs only, and only their
 * youth depends on the clock (cy_preempt), so nothing else can change the
 * decisions of an unchanged snapshot before then. */
static int64_t protection_due(const struct sched_snapshot *s, const struct sched_config *cfg,
                              const struct sched_result *res)
{
    int waits = 0, admits = 0;
    for (int k = 0; k < res->n; k++) {
        waits += res->d[k].kind == SCHED_WAIT;
        admits += res->d[k].kind == SCHED_ADMIT;
    }
    if (!waits || !cfg->preemption || cfg->min_runtime_s <= 0)
        return 0;
    int64_t due = admits ? s->now + cfg->min_runtime_s : 0;
    for (int i = 0; i < s->njobs; i++) {
        const struct sched_job *j = &s->jobs[i];
        int64_t end = j->admitted_at + cfg->min_runtime_s;
        if (j->state == SCHED_JOB_RUNNING && end > s->now && (!due || end < due))
            due = end;
    }
    return due;
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
    /* one decision per job, most cycles (a wait or an admission; preemptions
     * add to it): sized once, not grown by doubling, each step a copy */
    if (snap->njobs > 0) {
        size_t cap0 = (size_t)snap->njobs + 16;
        if (ctx->dkeep && gq_kept_fits(ctx->dkeep_cap, cap0, 0)) {
            /* a recycled array: its pages are already the process's */
            cy.res->d = ctx->dkeep;
            cap0 = ctx->dkeep_cap;
        } else {
            free(ctx->dkeep); /* too small, or a burst's left behind */
        }
        ctx->dkeep = NULL;
        ctx->dkeep_cap = 0;
        if (!cy.res->d && !(cy.res->d = malloc(cap0 * sizeof(*cy.res->d)))) {
            rc = GQ_ENOMEM;
            goto done;
        }
        cy.capdec = cap0;
    }
    rc = run(&cy);
    cy.res->mem->capd = cy.capdec;
    if (!rc)
        cy.res->due = protection_due(snap, cy.cfg, cy.res);
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
