/*
 * sched_build.c — the cycle's snapshot validation and index build: request
 * conversion (req_from), static eligibility classes and their node lists
 * (skey), the fail-cache shape keys, static reasons, and build() itself
 * (node capacity, topology domains, quota entries, team queues).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gq.h"
#include "sched_cy.h"

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

static int str_equal(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static int aff_equal(const struct sched_affinity_term *a, int na,
                     const struct sched_affinity_term *b, int nb)
{
    if (na != nb)
        return 0;
    if (a == b)
        return 1;
    for (int t = 0; t < na; t++) {
        if (a[t].nexprs != b[t].nexprs)
            return 0;
        for (int e = 0; e < a[t].nexprs; e++) {
            const struct sched_match_expr *x = &a[t].exprs[e], *y = &b[t].exprs[e];
            if (x->field != y->field || x->op != y->op || x->nvalues != y->nvalues ||
                !str_equal(x->key, y->key))
                return 0;
            for (int v = 0; v < x->nvalues; v++)
                if (!str_equal(x->values[v], y->values[v]))
                    return 0;
        }
    }
    return 1;
}

/* A whole decimal int64 (Kubernetes reads Gt/Lt operands and label values
 * with strconv.ParseInt(s, 10, 64)); 0 when s is not one. */
static int parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return 0;
    const char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!*p)
        return 0;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        unsigned d = (unsigned)(*p - '0');
        if (v > (lim - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 1;
}

static int expr_match(const struct sched_node *sn, const struct sched_match_expr *x)
{
    const char *v = x->field ? sn->name : sc_label(sn, x->key);
    int64_t a, b;
    switch (x->op) {
    case SCHED_OP_IN:
    case SCHED_OP_NOT_IN: {
        int in = 0;
        for (int k = 0; v && !in && k < x->nvalues; k++)
            in = str_equal(v, x->values[k]);
        return x->op == SCHED_OP_IN ? in : !in;
    }
    case SCHED_OP_EXISTS: return v != NULL;
    case SCHED_OP_DOES_NOT_EXIST: return v == NULL;
    case SCHED_OP_GT:
    case SCHED_OP_LT:
        if (!v || x->nvalues != 1 || !parse_i64(v, &a) || !parse_i64(x->values[0], &b))
            return 0;
        return x->op == SCHED_OP_GT ? a > b : a < b;
    }
    return 0;
}

int cy_affinity_match(const struct sched_node *sn, const struct sched_affinity_term *aff,
                      int naff)
{
    if (naff <= 0)
        return 1;
    for (int t = 0; t < naff; t++) {
        int ok = aff[t].nexprs > 0;
        for (int e = 0; ok && e < aff[t].nexprs; e++)
            ok = expr_match(sn, &aff[t].exprs[e]);
        if (ok)
            return 1;
    }
    return 0;
}

int cy_static_reason(struct cy *cy, const struct sched_job *jb, const struct sc_req *r, int i)
{
    const struct cy_node *n = &cy->n[i];
    if (n->excluded)
        return n->excluded;
    return cy_shape_reason(cy, jb, r, i);
}

int cy_shape_reason(struct cy *cy, const struct sched_job *jb, const struct sc_req *r, int i)
{
    const struct cy_node *n = &cy->n[i];
    const struct sched_node *sn = &cy->s->nodes[i];
    if (!cy_pool_access(cy, jb, n->pool))
        return R_POOL;
    if (sn->ntaints > 0 && !sc_tolerates(sn->taints, sn->ntaints, jb->tols, jb->ntols))
        return R_TAINT;
    if (jb->nnode_selector > 0 && !sel_match(sn, jb->node_selector, jb->nnode_selector))
        return R_SELECTOR;
    if (jb->naffinity > 0 && !cy_affinity_match(sn, jb->affinity, jb->naffinity))
        return R_AFFINITY;
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

int cy_skey_get(struct cy *cy, int jx, const struct sc_req *r)
{
    const struct sched_job *jb = &cy->s->jobs[jx];
    int gpu = sc_is_gpu(r);
    for (int i = cy->nsk - 1; i >= 0; i--) {
        struct cy_skey *k = &cy->sk[i];
        if (k->types == r->types && k->min_mem == r->min_mem_mib && k->pool == jb->pool &&
            k->cls == (int)jb->cls && k->gpu == gpu &&
            tols_equal(k->tols, k->ntols, jb->tols, jb->ntols) &&
            sel_equal(k->sel, k->nsel, jb->node_selector, jb->nnode_selector) &&
            aff_equal(k->aff, k->naff, jb->affinity, jb->naffinity))
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
    k->aff = jb->affinity;
    k->naff = jb->naffinity;
    k->nodes = malloc((size_t)(cy->nn > 0 ? cy->nn : 1) * sizeof(int));
    if (!k->nodes)
        return GQ_ENOMEM;
    for (int i = 0; i < cy->nn; i++)
        if (cy_static_reason(cy, jb, r, i) == R_OK)
            k->nodes[k->nnodes++] = i;
    return cy->nsk++;
}

static uint64_t key_hash(const struct cy_key *k)
{
    uint64_t h = GQ_HASH_SEED;
    h = gq_hash_u64(h, (uint64_t)(uint32_t)k->skey << 32 | (uint32_t)k->gpus);
    h = gq_hash_u64(h, (uint64_t)(uint32_t)k->milli << 32 | (uint32_t)k->want);
    h = gq_hash_u64(h, (uint64_t)k->cpu);
    h = gq_hash_u64(h, (uint64_t)k->mem);
    h = gq_hash_u64(h, (uint64_t)(uint32_t)k->gang << 32 | (uint32_t)k->L);
    h = gq_hash_u64(h, (uint64_t)(uint32_t)k->P << 32 | (uint32_t)k->S);
    return gq_hash_u64(h, (uint64_t)k->run_s);
}

static int key_eq(const struct cy_key *a, const struct cy_key *b)
{
    return a->skey == b->skey && a->gpus == b->gpus && a->milli == b->milli && a->cpu == b->cpu &&
           a->mem == b->mem && a->want == b->want && a->gang == b->gang && a->L == b->L &&
           a->P == b->P && a->S == b->S && a->run_s == b->run_s;
}

int cy_key_get(struct cy *cy, const struct cy_key *probe)
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

int cy_build(struct cy *cy)
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
    cy->n = cy_slot(ctx, SL_NODES, nn1 * sizeof(*cy->n));
    cy->j = cy_slot(ctx, SL_JOBS, (size_t)(cy->nj > 0 ? cy->nj : 1) * sizeof(*cy->j));
    cy->t = cy_slot(ctx, SL_TEAMS, (size_t)cy->nt * sizeof(*cy->t));
    cy->cand = cy_slot(ctx, SL_CAND, nn1 * sizeof(int));
    cy->candcap = cy_slot(ctx, SL_CAND2, nn1 * sizeof(int));
    cy->domcap = cy_slot(ctx, SL_DOMCAP, nn1 * sizeof(int));
    cy->domfree = cy_slot(ctx, SL_DOMFREE, nn1 * sizeof(int64_t));
    cy->domseen = cy_slot(ctx, SL_DOMSEEN, nn1 * sizeof(int));
    cy->wcap = cy_slot(ctx, SL_WCAP, nn1 * sizeof(int));
    cy->pool_free = cy_slot(ctx, SL_POOLFREE, (size_t)(s->npools + 1) * sizeof(int64_t));
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
        n->res_start = 0;
        n->spare_set = 0;
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
    cy->q = cy_slot(ctx, SL_QUOTA, (size_t)(nq + 1) * sizeof(*cy->q));
    cy->g = cy_slot(ctx, SL_GROUPS, (size_t)(nq + 1) * sizeof(*cy->g));
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
        cy_team_share_update(ct);
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
    cy->sh = cy_slot(ctx, SL_MISC, (size_t)(GQ_MAX(nsh_in, CY_MAX_DERIVED_SHAPES) + 1) *
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
    cy->running = cy_slot(ctx, SL_RUNNING, (size_t)(cy->nj > 0 ? cy->nj : 1) * sizeof(int));
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
        if (jb->naffinity < 0 || (jb->naffinity > 0 && !jb->affinity))
            return bad(cy, "job %s: bad node affinity (%d terms)", jb->id, jb->naffinity);
        for (int t = 0; t < jb->naffinity; t++) {
            const struct sched_affinity_term *at = &jb->affinity[t];
            if (at->nexprs < 0 || (at->nexprs > 0 && !at->exprs))
                return bad(cy, "job %s: node affinity term %d: bad expressions (%d)", jb->id, t,
                           at->nexprs);
            for (int e = 0; e < at->nexprs; e++) {
                const struct sched_match_expr *mx = &at->exprs[e];
                int64_t num;
                if (!mx->key || !mx->key[0])
                    return bad(cy, "job %s: node affinity term %d expression %d has no key", jb->id, t, e);
                if (mx->nvalues < 0 || (mx->nvalues > 0 && !mx->values))
                    return bad(cy, "job %s: node affinity term %d expression %d: bad values", jb->id, t, e);
                for (int v = 0; v < mx->nvalues; v++)
                    if (!mx->values[v])
                        return bad(cy, "job %s: node affinity term %d expression %d: value %d is NULL",
                                   jb->id, t, e, v);
                if (mx->op < SCHED_OP_IN || mx->op > SCHED_OP_LT)
                    return bad(cy, "job %s: node affinity term %d expression %d: operator %d unknown",
                               jb->id, t, e, (int)mx->op);
                if ((mx->op == SCHED_OP_GT || mx->op == SCHED_OP_LT) &&
                    (mx->nvalues != 1 || !parse_i64(mx->values[0], &num)))
                    return bad(cy, "job %s: node affinity term %d expression %d: Gt/Lt needs one integer",
                               jb->id, t, e);
            }
        }
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
                cy_node_apply(cy, rp->node, &cj->r, rp->devs, 1);
            }
            cy_charge(cy, cj->team, &cj->r, jb->placement, jb->nplaced, 1);
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
                cy_claim_set(cy, p, jb->nplaced > 0 ? cy->n[jb->placement[0].node].c.type : -1);
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
        int *at = cy_slot(ctx, SL_IDS, (size_t)cy->nj * sizeof(int));
        cy->pv = cy_slot(ctx, SL_PV, (size_t)(npv > 0 ? npv : 1) * sizeof(int));
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
