/*
 * sched_explain.c — WAIT explanations: per-reason node counts for a shape
 * (explain_nodes), quota blocks (explain_quota), the per-key message and the
 * final wait message with the team-queue position.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"
#include "sched_cy.h"

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
    case R_AFFINITY: gq_buf_puts(b, "node affinity mismatch"); break;
    case R_NOGPU: gq_buf_puts(b, "no GPUs"); break;
    case R_TYPE:
        gq_buf_puts(b, "wrong GPU type (need ");
        for (int i = 0; i < jb->req.ntypes; i++)
            gq_buf_printf(b, "%s%s", i ? "|" : "", jb->req.types[i] ? jb->req.types[i] : "");
        gq_buf_puts(b, ")");
        break;
    case R_GPUMEM: gq_buf_printf(b, "less than %d GiB GPU memory", jb->req.min_gpu_mem_gib); break;
    case R_RESERVED:
        /* a job with a limit was not let backfill: it does not surely end
         * before that job could start (or that start is not known) */
        gq_buf_puts(b, jb->max_run_s > 0 ? "reserved for a higher job its maxRunSeconds could delay"
                                        : "reserved for a higher job");
        break;
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
        int why = cy_static_reason(cy, pc->jb, &pc->r, i);
        if (why == R_OK)
            why = cy_dyn_reason(cy, pc, i);
        if (why == R_PROTECTED && !pname)
            pname = cy->s->pools[cy->n[i].pool].name;
        count[why]++;
        if (why == R_OK) {
            fit++;
            capsum += cy_node_cap(cy, pc, i);
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

/* What explain_quota says, as numbers: the same facts give the same words. */
struct quota_facts {
    int e;                /* quota entry, -1: none for tname */
    const char *tname;    /* the first acceptable type, NULL: any */
    int64_t need, may, claimed;
};

static void quota_facts(const struct cy *cy, int jx, struct quota_facts *f)
{
    const struct cy_job *cj = &cy->j[jx];
    const struct cy_team *t = &cy->t[cj->team];
    const struct sched_job *jb = &cy->s->jobs[jx];
    memset(f, 0, sizeof(*f));
    f->need = cy_req_milli(&cj->r) * cj->want;
    /* describe the first acceptable type (or "*") */
    f->tname = jb->req.ntypes > 0 && jb->req.types[0] ? jb->req.types[0] : NULL;
    int ty = f->tname ? sc_strtab_get(&cy->ctx->types, f->tname, 0) : -1;
    int e = -1;
    if (f->tname)
        e = ty >= 0 ? cy_quota_entry(cy, cj->team, ty) : -1;
    if (e < 0 && (!f->tname || ty >= 0)) {
        for (int x = t->q0; x < t->q0 + t->nq; x++)
            if (cy->q[x].type == -2) {
                e = x;
                break;
            }
    }
    /* a job of any type in a Team whose quota names types only: each entry
     * applies on its type's nodes; describe the one with the most room */
    if (e < 0 && !f->tname)
        for (int x = t->q0; x < t->q0 + t->nq; x++)
            if (cy->q[x].type >= 0 &&
                (e < 0 || cy->q[x].nominal - cy->q[x].used > cy->q[e].nominal - cy->q[e].used))
                e = x;
    f->e = e;
    if (e < 0)
        return;
    const struct cy_quota *q = &cy->q[e];
    const struct cy_group *g = &cy->g[q->group];
    int64_t room = g->lendable_sum - g->over_sum;
    int64_t own_unused = GQ_MAX(0, q->nominal - GQ_MAX(q->used, cy_guaranteed(q)));
    if (q->borrow != 0 && room - own_unused > 0) {
        f->may = room - own_unused;
        if (q->borrow >= 0)
            f->may = GQ_MIN(f->may, q->borrow - GQ_MAX(0, q->used - q->nominal));
    }
    f->claimed = g->claimed;
}

static void explain_quota(const struct cy *cy, int jx, const struct quota_facts *f, struct gq_buf *b)
{
    const struct cy_team *t = &cy->t[cy->j[jx].team];
    if (f->e < 0) {
        gq_buf_printf(b, "team %s has no quota for %s", t->name, f->tname ? f->tname : "GPUs");
        return;
    }
    const struct cy_quota *q = &cy->q[f->e];
    gq_buf_printf(b, "team %s quota ", t->name);
    fmt_gpus(b, q->used);
    gq_buf_puts(b, "/");
    fmt_gpus(b, q->nominal);
    gq_buf_printf(b, " %s used", q->type == -2 ? "GPUs" : q->name);
    if (f->may > 0) {
        gq_buf_puts(b, " (may borrow ");
        fmt_gpus(b, f->may);
        gq_buf_puts(b, ")");
    }
    if (f->claimed > 0) {
        gq_buf_puts(b, ", ");
        fmt_gpus(b, f->claimed);
        gq_buf_puts(b, " claimed by jobs waiting for preempted jobs");
    }
    gq_buf_puts(b, ", needs ");
    fmt_gpus(b, f->need);
}

const char *cy_key_message(struct cy *cy, struct place_ctx *pc)
{
    struct cy_key *k = &cy->k[pc->key];
    if (k->msg)
        return k->msg;
    struct gq_buf b;
    gq_buf_init(&b, SCHED_MSG_MAX);
    explain_nodes(cy, pc, &b);
    k->msg = b.p ? cy_res_str(cy, b.p) : cy_res_str(cy, "no node fits");
    gq_buf_release(&b);
    return k->msg;
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

int cy_wait_msg(struct cy *cy, int jx, const char *nodes_part, int quota_blocked,
                const char *extra)
{
    int64_t until = cy->j[jx].until;
    const char *held = cy->j[jx].reserved;
    if (!extra && !quota_blocked && nodes_part && until <= 0 && !held) {
        cy->j[jx].msg = nodes_part; /* shared per shape key, result-owned */
        return 0;
    }
    struct quota_facts f;
    struct cy_quota *q = NULL;
    if (quota_blocked) {
        quota_facts(cy, jx, &f);
        /* the jobs of a Team a full quota holds back read alike: the words
         * of the last one of its entry serve the next with the same facts */
        q = !extra && until <= 0 && !held && f.e >= 0 ? &cy->q[f.e] : NULL;
        if (q && q->wmsg && q->wmsg_nodes == nodes_part && q->wmsg_used == q->used &&
            q->wmsg_need == f.need && q->wmsg_may == f.may && q->wmsg_claimed == f.claimed) {
            cy->j[jx].msg = q->wmsg;
            return 0;
        }
    }
    struct gq_buf b;
    gq_buf_init(&b, SCHED_MSG_MAX);
    if (extra)
        gq_buf_puts(&b, extra);
    else if (nodes_part)
        gq_buf_puts(&b, nodes_part);
    if (quota_blocked) {
        gq_buf_puts(&b, b.len ? "; " : "");
        explain_quota(cy, jx, &f, &b);
    }
    if (until > 0) {
        gq_buf_printf(&b, "%sthe jobs it would preempt are protected by the minimum runtime (%llds) until ",
                      b.len ? "; " : "", (long long)cy->cfg->min_runtime_s);
        fmt_time(&b, until);
    }
    if (held) {
        int L = cy_job_topo(cy, cy->s->jobs[jx].topo_required);
        if (L >= 0)
            gq_buf_printf(&b, "; reserves %s %s", cy->cfg->levels[L].name, held);
        else
            gq_buf_printf(&b, "; reserves node%s %s", cy->j[jx].reserved_n > 1 ? "s" : "", held);
        if (cy->j[jx].res_start > 0) {
            /* the jobs there end by their maxRunSeconds (the caller stops them) */
            gq_buf_puts(&b, ", free by ");
            fmt_time(&b, cy->j[jx].res_start);
            gq_buf_puts(&b, " at the latest (the maxRunSeconds of the jobs there)");
        }
    }
    const char *m = cy_res_str(cy, b.p ? b.p : "waiting");
    gq_buf_release(&b);
    if (!m)
        return GQ_ENOMEM;
    cy->j[jx].msg = m;
    if (q) {
        q->wmsg = m;
        q->wmsg_nodes = nodes_part;
        q->wmsg_used = q->used;
        q->wmsg_need = f.need;
        q->wmsg_may = f.may;
        q->wmsg_claimed = f.claimed;
    }
    return 0;
}

/* ---------------- can it ever fit? ---------------- */

/* What the job asks, in words: "16 GPUs (2x8) of T1|T2 in one node". */
static void never_need_text(struct cy *cy, struct gq_buf *b, const struct place_ctx *pc)
{
    const struct sc_req *r = &pc->r;
    const struct sched_job *jb = pc->jb;
    int R = pc->gang ? pc->want : 1;
    if (r->gpus > 0) {
        gq_buf_printf(b, "needs %lld GPU%s", (long long)R * r->gpus, (long long)R * r->gpus == 1 ? "" : "s");
        if (R > 1)
            gq_buf_printf(b, " (%dx%d)", R, r->gpus);
    } else if (r->milli > 0) {
        if (R > 1)
            gq_buf_printf(b, "needs %dx%dm GPU", R, r->milli);
        else
            gq_buf_printf(b, "needs %dm GPU", r->milli);
    } else {
        if (R > 1)
            gq_buf_printf(b, "needs %dx%lldm cpu", R, (long long)r->cpu);
        else
            gq_buf_printf(b, "needs %lldm cpu", (long long)r->cpu);
    }
    if (sc_is_gpu(r) && jb->req.ntypes > 0) {
        gq_buf_puts(b, " of ");
        for (int i = 0; i < jb->req.ntypes; i++)
            gq_buf_printf(b, "%s%s", i ? "|" : "", jb->req.types[i] ? jb->req.types[i] : "");
    }
    if (sc_is_gpu(r) && jb->req.min_gpu_mem_gib > 0)
        gq_buf_printf(b, " with %d GiB GPU memory", jb->req.min_gpu_mem_gib);
    if (!pc->gang && pc->want > 1)
        gq_buf_puts(b, " for one replica");
    if (pc->gang && pc->L >= 0)
        gq_buf_printf(b, " in one %s", cy->cfg->levels[pc->L].name);
    if (pc->gang && pc->S >= 0 && R > 1)
        gq_buf_printf(b, " on distinct %s domains", cy->cfg->levels[pc->S].name);
}

/* Accumulates, over the nodes a job may use, what they hold with every
 * device free: per domain of its level (per node for one replica). */
struct never_acc {
    int L, S, per_node, need, nd;
    int64_t *cap, *gpus; /* per domain (nd); per_node: unused */
    int *seen;           /* spread domain -> domain + 1 that took it */
    int64_t best_cap, best_gpus; /* per_node: the best node so far */
    int eligible;
};

/* Returns 1 once some domain holds the whole job (the job fits: stop). */
static int never_add(struct cy *cy, const struct place_ctx *pc, struct never_acc *a, int i)
{
    const struct sched_node *sn = &cy->s->nodes[i];
    struct sc_node e;
    memset(&e, 0, sizeof(e));
    e.type = cy->n[i].c.type;
    e.ndev = cy->n[i].c.ndev;
    e.gpu_mem_mib = cy->n[i].c.gpu_mem_mib;
    e.cpu_free = sn->cpu_milli;
    e.mem_free = sn->mem_bytes;
    sc_recount(&e);
    int c = sc_fit_count(&e, &pc->r, a->need);
    a->eligible++;
    if (a->per_node) {
        if (c > a->best_cap || (c == a->best_cap && e.ndev > a->best_gpus)) {
            a->best_cap = c;
            a->best_gpus = e.ndev;
        }
        return a->best_cap >= a->need;
    }
    int d = a->L >= 0 ? cy_dom_of(cy, i, a->L) : 0;
    a->gpus[d] += e.ndev;
    if (c > 0 && a->S >= 0) {
        int sd = cy_dom_of(cy, i, a->S);
        c = a->seen[sd] == d + 1 ? 0 : 1; /* one replica per spread domain */
        a->seen[sd] = d + 1;
    }
    a->cap[d] += c;
    return a->cap[d] >= a->need;
}

int cy_never_fits(struct cy *cy, const struct place_ctx *pc, const char **msg)
{
    struct cy_key *k = pc->key >= 0 ? &cy->k[pc->key] : NULL;
    *msg = NULL;
    if (k && k->never) {
        *msg = k->never_msg;
        return k->never == 2;
    }
    /* gangs need every replica in one domain of the required level (all
     * nodes when none); a non-gang job needs room for one replica; one
     * replica's domain is a node (per_node), whatever the level */
    struct never_acc a;
    memset(&a, 0, sizeof(a));
    a.L = pc->gang ? pc->L : -1;
    a.S = pc->gang ? pc->S : -1;
    a.need = pc->gang ? pc->want : 1;
    a.per_node = a.need == 1;
    a.nd = a.per_node ? 1 : a.L >= 0 ? GQ_MAX(cy->ndom[a.L], 1) : 1;
    a.cap = calloc((size_t)a.nd, sizeof(*a.cap));
    a.gpus = calloc((size_t)a.nd, sizeof(*a.gpus));
    a.seen = a.S >= 0 ? calloc((size_t)GQ_MAX(cy->ndom[a.S], 1), sizeof(*a.seen)) : NULL;
    if (!a.cap || !a.gpus || (a.S >= 0 && !a.seen)) {
        free(a.cap);
        free(a.gpus);
        free(a.seen);
        return GQ_ENOMEM;
    }
    /* the nodes it may use: its static class's list (ready, not cordoned)
     * and the not-ready or cordoned nodes it would otherwise accept */
    const struct cy_skey *sk = &cy->sk[pc->skey];
    int fits = 0;
    for (int x = 0; x < sk->nnodes && !fits; x++)
        fits = never_add(cy, pc, &a, sk->nodes[x]);
    for (int i = 0; i < cy->nn && !fits; i++)
        if (cy->n[i].excluded && cy_shape_reason(cy, pc->jb, &pc->r, i) == R_OK)
            fits = never_add(cy, pc, &a, i);
    int best = 0;
    for (int d = 1; d < a.nd; d++)
        if (a.cap[d] > a.cap[best] || (a.cap[d] == a.cap[best] && a.gpus[d] > a.gpus[best]))
            best = d;
    int64_t best_cap = a.per_node ? a.best_cap : a.cap[best];
    int64_t best_gpus = a.per_node ? a.best_gpus : a.gpus[best];
    int eligible = a.eligible, need = a.need, L = a.L, per_node = a.per_node;
    free(a.cap);
    free(a.gpus);
    free(a.seen);
    int never = !fits; /* the figures are complete only then */
    int rc = 0;
    if (never) {
        struct gq_buf b;
        gq_buf_init(&b, SCHED_MSG_MAX);
        never_need_text(cy, &b, pc);
        if (eligible == 0) {
            gq_buf_printf(&b, "; no node is eligible (%d node%s", cy->nn, cy->nn == 1 ? "" : "s");
        } else {
            if (per_node || L >= 0)
                gq_buf_printf(&b, "; the largest eligible %s has ",
                              per_node ? "node" : cy->cfg->levels[L].name);
            else
                gq_buf_puts(&b, "; the eligible nodes have ");
            if (sc_is_gpu(&pc->r))
                gq_buf_printf(&b, "%lld GPU%s and ", (long long)best_gpus, best_gpus == 1 ? "" : "s");
            gq_buf_printf(&b, "fit%s %lld of %d replica%s; %d of %d node%s eligible",
                          per_node || L >= 0 ? "s" : "", (long long)best_cap, need, need == 1 ? "" : "s",
                          eligible, cy->nn, cy->nn == 1 ? "" : "s");
        }
        int count[R_COUNT] = {0}, used[R_COUNT] = {0}, first = 1;
        for (int i = 0; i < cy->nn; i++)
            count[cy_shape_reason(cy, pc->jb, &pc->r, i)]++;
        for (;;) {
            int w = -1;
            for (int x = 1; x < R_COUNT; x++)
                if (!used[x] && count[x] > 0 && (w < 0 || count[x] > count[w]))
                    w = x;
            if (w < 0)
                break;
            used[w] = 1;
            gq_buf_printf(&b, "%s%d ", first ? (eligible == 0 ? ": " : " (") : ", ", count[w]);
            reason_text(cy, &b, pc, w, NULL);
            first = 0;
        }
        if (eligible == 0 || !first)
            gq_buf_puts(&b, ")");
        *msg = cy_res_str(cy, b.p ? b.p : "can never fit");
        gq_buf_release(&b);
        if (!*msg)
            rc = GQ_ENOMEM;
    }
    if (rc)
        return rc;
    if (k) {
        k->never = never ? 2 : 1;
        k->never_msg = *msg;
    }
    return never;
}
