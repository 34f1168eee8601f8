/*
 * ctl_rc.c — the reconcile's shared helpers (ctl_rc.h): the store rows and
 * pending intents of one reconcile (found by key, kept on memos), Events
 * queued for after the commit, one decision rule applied to a job (act_begin,
 * the apply_* call, act_end: transition, ledger, intent and audit through
 * apply.c, the path the simulator takes too), a job's Team and nodes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_rc.h"

struct store_job *rc_row_copy(const struct store_job *j)
{
    const char *s[] = {j->key, j->uid, j->team, j->cls, j->placement, j->message,
                       j->preempted_by, j->preempt_reason, j->resource_version};
    size_t n = sizeof(struct store_job);
    for (size_t i = 0; i < GQ_ARRAY_LEN(s); i++)
        n += strlen(s[i] ? s[i] : "") + 1;
    struct store_job *o = malloc(n);
    if (!o)
        return NULL;
    *o = *j;
    char *p = (char *)(o + 1);
    const char **d[] = {&o->key, &o->uid, &o->team, &o->cls, &o->placement, &o->message,
                        &o->preempted_by, &o->preempt_reason, &o->resource_version};
    for (size_t i = 0; i < GQ_ARRAY_LEN(s); i++) {
        size_t l = strlen(s[i] ? s[i] : "");
        memcpy(p, s[i] ? s[i] : "", l + 1);
        *d[i] = p;
        p += l + 1;
    }
    return o;
}

static int ikey_cmp(const void *a, const void *b)
{
    const struct ikey *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

int rc_intents_index(struct rc_ctx *r)
{
    r->iidx = calloc((size_t)r->nintents + 1, sizeof(*r->iidx));
    if (!r->iidx)
        return GQ_ENOMEM;
    for (int i = 0; i < r->nintents; i++)
        r->iidx[i] = (struct ikey){r->intents[i].job_key, i};
    if (r->nintents > 1)
        qsort(r->iidx, (size_t)r->nintents, sizeof(*r->iidx), ikey_cmp);
    return 0;
}

/* Position in r->iidx of the first intent of key, or r->nintents when none;
 * the job's intents follow while iidx[p].key equals key (in id order). */
int rc_intent_first(struct rc_ctx *r, const char *key)
{
    int n = r->nintents, lo = 0, hi = n;
    if (n == 0)
        return 0;
    /* jobs are looked up in key order, mostly: the place of the last answer
     * settles most lookups in two comparisons instead of a binary search */
    int h = r->intent_hint;
    if (h > 0 && h <= n) {
        if (strcmp(r->iidx[h - 1].key, key) < 0)
            lo = h;
        else
            hi = h - 1;
    }
    if (lo == h && h < n) {
        int c = strcmp(r->iidx[h].key, key);
        if (c > 0)
            return n; /* between two keys of intents: none */
        if (c == 0)
            return h;
        lo = h + 1;
    }
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(r->iidx[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    r->intent_hint = lo;
    return lo < n && !strcmp(r->iidx[lo].key, key) ? lo : n;
}

/* Order-independent signature of the objects defaulting reads: a change
 * invalidates every cached decode. An object is its name, uid and
 * metadata.generation (spec changes; a Team's status writes do not count),
 * or its resourceVersion when it has no generation (PriorityClass). */
uint64_t rc_obj_sig(const cJSON *o)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(md, "generation");
    char gen[32];
    if (cJSON_IsNumber(g) && g->valuedouble >= 1 && g->valuedouble < 9e15)
        snprintf(gen, sizeof(gen), "g%lld", (long long)g->valuedouble);
    else
        gen[0] = 0;
    const char *parts[3] = {ctl_obj_str(md, "name", NULL), ctl_obj_str(md, "uid", NULL),
                            gen[0] ? gen : ctl_obj_str(md, "resourceVersion", NULL)};
    uint64_t h = GQ_HASH_SEED;
    const unsigned char end = 0xffu;
    for (int k = 0; k < 3; k++) {
        const char *p = parts[k] ? parts[k] : "";
        h = gq_hash_bytes(gq_hash_bytes(h, p, strlen(p)), &end, 1);
    }
    return h;
}

int rc_row_cmp(const void *a, const void *b)
{
    return strcmp((*(struct store_job *const *)a)->key, (*(struct store_job *const *)b)->key);
}

struct store_job *rc_row_find(struct rc_ctx *r, const char *key)
{
    struct store_job k = {0}, *kp = &k;
    if (!r->nrows)
        return NULL;
    /* jobs are looked up in key order (the reconcile walks them sorted, as
     * rows are): the row after the last one found is the likely one */
    for (int h = r->row_hint; h < r->nrows && h <= r->row_hint + 1; h++)
        if (!strcmp(r->rows[h]->key, key)) {
            r->row_hint = h;
            return r->rows[h];
        }
    k.key = key;
    struct store_job **f = bsearch(&kp, r->rows, (size_t)r->nrows, sizeof(*r->rows), rc_row_cmp);
    if (f)
        r->row_hint = (int)(f - r->rows);
    return f ? *f : NULL;
}

/* Room for one more row in r->rows (doubling). GQ_ENOMEM. */
int rc_rows_reserve(struct rc_ctx *r)
{
    if (r->nrows == r->caprows) {
        int cap = r->caprows ? r->caprows * 2 : 64;
        struct store_job **n = realloc(r->rows, (size_t)cap * sizeof(*n));
        if (!n)
            return GQ_ENOMEM;
        r->rows = n;
        r->caprows = cap;
    }
    return 0;
}

/* Insert a new row (owned by r from here) at its sorted place: one memmove,
 * not a sort of every row per new job. */
int rc_row_insert(struct rc_ctx *r, struct store_job *row)
{
    if (rc_rows_reserve(r))
        return GQ_ENOMEM;
    int lo = 0, hi = r->nrows;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(r->rows[mid]->key, row->key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&r->rows[lo + 1], &r->rows[lo], (size_t)(r->nrows - lo) * sizeof(*r->rows));
    r->rows[lo] = row;
    r->nrows++;
    return 0;
}

/* j's row (j->row) kept on its memo for the next reconcile (rc_row_kept). */
void rc_row_keep(const struct rc_ctx *r, struct cj *j)
{
    if (j->memo) {
        if (j->memo->decode.row != j->row)
            j->memo->pl.pl_row = NULL; /* placement_load compares the texts again */
        j->memo->decode.row = j->row;
        j->memo->decode.row_gen = r->c->rows_gen;
    }
}

/* The row m's job kept (rc_row_keep) while the rows were not freed since,
 * else NULL. */
struct store_job *rc_row_kept(const struct rc_ctx *r, const struct ctl_memo *m)
{
    if (m->decode.row && m->decode.row_gen == r->c->rows_gen)
        return (struct store_job *)m->decode.row; /* r->rows holds it */
    return NULL;
}

int rc_push_ptr(const cJSON ***arr, int *n, int *cap, const cJSON *o)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        const cJSON **p = realloc(*arr, (size_t)nc * sizeof(*p));
        if (!p)
            return GQ_ENOMEM;
        *arr = p;
        *cap = nc;
    }
    (*arr)[(*n)++] = o;
    return 0;
}

void rc_event_add(struct rc_ctx *r, const cJSON *obj, const char *type, const char *reason,
                  const char *fmt, ...)
{
    if (!obj)
        return;
    if (r->nev == r->capev) {
        int cap = r->capev ? r->capev * 2 : 16;
        struct pend_event *n = realloc(r->ev, (size_t)cap * sizeof(*n));
        if (!n)
            return;
        r->ev = n;
        r->capev = cap;
    }
    struct pend_event *e = &r->ev[r->nev++];
    e->obj = obj;
    e->type = type;
    e->reason = reason;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
}

/* The store writes of this reconcile's decisions (controller/apply.h). */
struct apply_ctx rc_actx(struct rc_ctx *r)
{
    return (struct apply_ctx){r->c->st, r->now, 0, r->err, sizeof(r->err), &r->settle};
}

/* The team in force a job names, or NULL. */
const struct api_team *rc_team_of(struct rc_ctx *r, const char *name)
{
    int t = ctl_team_find(r->teams, r->nteams, name, &r->team_hint);
    return t >= 0 ? &r->teams[t] : NULL;
}

/* A Team's quota entries as the core and the ledger read them (q: API_MAX_QUOTA). */
int rc_team_quota(const struct api_team *tm, struct sched_quota *q)
{
    int n = 0;
    for (int e = 0; tm && e < tm->nquota && e < API_MAX_QUOTA; e++, n++)
        q[n] = (struct sched_quota){tm->quota[e].gpu_type, tm->quota[e].gpus, tm->quota[e].borrowing_limit,
                                    tm->quota[e].lending_limit};
    return n;
}

/* What apply_* needs of j; with q (API_MAX_QUOTA entries, filled) its Team's quota too. */
static struct apply_job ajob(struct rc_ctx *r, const struct cj *j, struct sched_quota *q)
{
    const struct api_gpu *g = &j->job->spec.gpu;
    int nq = q ? rc_team_quota(rc_team_of(r, j->job->spec.team), q) : 0;
    return (struct apply_job){j->key, j->job->spec.team, j->state, g->present ? g->count : 0,
                              g->present && !g->count ? g->shares : 0, q, nq};
}

int rc_audit(struct rc_ctx *r, const char *action, const struct cj *j, const char *key,
             const char *oldv, const char *newv, const char *reason)
{
    struct apply_ctx x = rc_actx(r);
    return apply_audit(&x, action, j ? j->job->spec.team : "", key, oldv, newv, reason);
}

void rc_due(struct rc_ctx *r, int64_t when, const char *why)
{
    if (when > r->now && (!r->due_next || when < r->due_next)) {
        r->due_next = when;
        r->due_why = why;
    }
}

/* The job changed in this reconcile: examined in full by the rest of it
 * (status) and by the next one. */
static void job_touch(struct rc_ctx *r, struct cj *j)
{
    ctl_memo_dirty(j->memo, r->c->reconciles + 1);
    r->marked_next = 1;
}

/* What j's status shows may have changed in this reconcile (the core's
 * explanation, what is published of its wait): its status is computed again
 * by this reconcile's report, nothing else of it examined again. */
void rc_job_touch_status(struct rc_ctx *r, struct cj *j)
{
    if (j->memo && j->memo->status_upto < r->c->reconciles)
        j->memo->status_upto = r->c->reconciles;
}

/* Examined in full by this reconcile: a full pass, or the job is dirty; a
 * dormant job never (rc_job_sleep). */
int rc_job_dirty(const struct rc_ctx *r, const struct cj *j)
{
    if (j->dormant)
        return 0;
    return r->full || !j->memo || !j->memo->decode.prepared || j->memo->dirty_upto >= r->c->reconciles;
}

/* Its status is computed again by this reconcile's report: examined in
 * full, or its status alone is due (rc_job_touch_status, or a status write
 * held by --status-settle whose time has come: what is held is a status,
 * nothing else of the job changed for it). */
int rc_job_status_due(const struct rc_ctx *r, const struct cj *j)
{
    if (rc_job_dirty(r, j))
        return 1;
    return !j->dormant && j->memo &&
           (j->memo->status_upto >= r->c->reconciles ||
            (j->memo->status.settle_due_ms && j->memo->status.settle_due_ms <= r->now));
}

/* The store's row of key now, as an rc_row_copy block (*out, the caller's
 * to free). GQ_ENOMEM, or the store's error (r->err). */
int rc_row_read(struct rc_ctx *r, const char *key, struct store_job **out)
{
    struct store_job *g = NULL;
    int rc = store_job_get(r->c->st, key, &g, r->err, sizeof(r->err));
    if (rc)
        return rc;
    *out = rc_row_copy(g);
    store_job_free(g);
    return *out ? 0 : GQ_ENOMEM;
}

/* After a write of j's row (an apply_* call, or a transition below, that
 * returned rc): on success the reconcile's view follows the store (state,
 * row, placement when it changed) and j is examined in full again. */
int rc_refresh(struct rc_ctx *r, struct cj *j, int rc)
{
    if (rc)
        return rc;
    job_touch(r, j);
    struct store_job *cp = NULL;
    if ((rc = rc_row_read(r, j->key, &cp)))
        return rc;
    int pl_changed = !j->row || strcmp(j->row->placement, cp->placement);
    /* rows[] keeps the old pointer (sorted by key): replace it in place */
    if (j->row) {
        struct store_job **at = bsearch(&j->row, r->rows, (size_t)r->nrows, sizeof(*r->rows), rc_row_cmp);
        if (at)
            *at = cp;
    }
    free(j->row);
    j->row = cp;
    rc_row_keep(r, j);
    j->state = cp->state;
    if (pl_changed)
        rc = ctl_placement_parse(cp->placement, &j->pl, r->err, sizeof(r->err));
    return rc;
}

/* A transition no decision rule owns (recover, adopt, revalidate). */
int rc_transition(struct rc_ctx *r, struct cj *j, int state, const char *placement,
                  const char *message, const char *by, const char *why, int bump)
{
    struct store_transition t = {state, placement, message, by, why, bump};
    return rc_refresh(r, j, store_job_transition(r->c->st, j->key, &t, r->now, r->err, sizeof(r->err)));
}

void rc_act_begin(struct rc_ctx *r, const struct cj *j, struct act *a)
{
    a->x = rc_actx(r);
    a->j = ajob(r, j, a->q);
}

int rc_act_end(struct rc_ctx *r, struct cj *j, int rc)
{
    return rc_refresh(r, j, rc);
}

int rc_holds(int state)
{
    return apply_holds(state);
}

int rc_job_gpus_placed(struct rc_ctx *r, const struct cj *j)
{
    struct apply_job a = ajob(r, j, NULL);
    return (int)apply_gpus(&a, j->pl.n);
}

static int rnode_cmp(const void *a, const void *b)
{
    return strcmp(((const struct rnode *)a)->name, ((const struct rnode *)b)->name);
}

int rc_nodes_index(struct rc_ctx *r)
{
    r->nix = calloc((size_t)r->nnodes + 1, sizeof(*r->nix));
    if (!r->nix)
        return GQ_ENOMEM;
    for (int i = 0; i < r->nnodes; i++) {
        const char *n = ctl_obj_str(r->nodes[i], "metadata", "name");
        if (n)
            r->nix[r->nnix++] = (struct rnode){n, r->nodes[i], 0, {0}};
    }
    if (r->nnix > 1)
        qsort(r->nix, (size_t)r->nnix, sizeof(*r->nix), rnode_cmp);
    return 0;
}

/* The node of this name in the node cache (as of this reconcile), or NULL. */
struct rnode *rc_node_find(struct rc_ctx *r, const char *name)
{
    struct rnode k = {name, NULL, 0, {0}};
    if (!r->nnix)
        return NULL;
    return bsearch(&k, r->nix, (size_t)r->nnix, sizeof(*r->nix), rnode_cmp);
}

const char *rc_node_product(struct rc_ctx *r, const char *node)
{
    struct rnode *n = rc_node_find(r, node);
    const char *p = n ? ctl_obj_label(n->obj, r->c->cfg.gpu_product_label) : NULL;
    return p ? p : "";
}

/* The product a placement's ledger row is charged to: its first replica's node's. */
const char *rc_pl_product(struct rc_ctx *r, const struct ctl_placement *pl)
{
    return pl->n ? rc_node_product(r, pl->rep[0].node) : "";
}

int rc_ledger_set(struct rc_ctx *r, struct cj *j)
{
    struct apply_ctx x = rc_actx(r);
    struct sched_quota q[API_MAX_QUOTA];
    struct apply_job a = ajob(r, j, q);
    return apply_ledger_set(&x, &a, j->pl.n, rc_pl_product(r, &j->pl));
}

int rc_intent(struct rc_ctx *r, int kind, const char *key, const char *payload)
{
    ctl_memo_mark(&r->c->memo, key, r->c->reconciles + 1);
    r->marked_next = 1;
    return store_intent_add(r->c->st, kind, key, payload ? payload : "", r->now, NULL, r->err,
                            sizeof(r->err));
}

/* Pod of this job held by its placement: the name of a placed replica, on its node. */
int rc_pod_held(const struct cj *j, const struct ctl_podfacts *f)
{
    if (!j || !rc_holds(j->state))
        return 0;
    const char *rp = f->replica;
    const char *pn = f->name;
    int64_t rv;
    if (!rp || !pn || gq_parse_i64(rp, (size_t)-1, &rv))
        return 0;
    int i = ctl_placement_find(&j->pl, (int)rv);
    if (i < 0)
        return 0;
    char want[API_NAME_MAX + 32];
    const char *nn = f->node;
    if (!nn || strcmp(nn, j->pl.rep[i].node))
        return 0;
    ctl_pod_name(j->job->meta.name, &j->pl, &j->pl.rep[i], want, sizeof(want));
    return !strcmp(want, pn);
}

/* Node name (n: its rc_node_find, NULL when gone) is gone or NotReady past the
 * grace period. A node not lost has n->ni parsed. */
int rc_node_lost_at(struct rc_ctx *r, struct rnode *n, const char *name, char *why, size_t len)
{
    if (!n) {
        snprintf(why, len, "node %s was deleted", name);
        return 1;
    }
    if (!n->have_ni) {
        ctl_node_info(n->obj, &n->ni);
        n->have_ni = 1;
    }
    const struct ctl_nodeinfo ni = n->ni;
    if (!ni.ready && ni.ready_since > 0 &&
        (double)r->now / 1000.0 - ni.ready_since > r->c->cfg.node_lost_grace_s) {
        snprintf(why, len, "node %s not ready for more than %.0fs", name, r->c->cfg.node_lost_grace_s);
        return 1;
    }
    return 0;
}

int rc_node_lost(struct rc_ctx *r, const char *name, char *why, size_t len)
{
    return rc_node_lost_at(r, rc_node_find(r, name), name, why, len);
}

static int cj_key_cmp(const void *key, const void *e)
{
    return strcmp((const char *)key, ((const struct cj *)e)->key);
}

struct cj *rc_job_find(struct rc_ctx *r, const char *key)
{
    return bsearch(key, r->jobs, (size_t)r->njobs, sizeof(*r->jobs), cj_key_cmp);
}

/* The job's pods in the pod cache and their facts (m->pods.pf, parallel,
 * kept by the pod informer's events: ctl_index_pod); none without a memo. */
const cJSON **rc_memo_pods(struct ctl_memo *m, int *n)
{
    if (!m) {
        *n = 0;
        return NULL;
    }
    *n = m->pods.npods;
    return m->pods.pods;
}

/* An array kept from one reconcile to the next (fresh ones of a reconcile's
 * size come from mmap, page-faulted every time): p with room for at least n
 * elements of size bytes, grown by half again when short (its contents are
 * not kept then). NULL with *cap 0 when memory is short (p freed). */
void *rc_keep_reserve(void *p, size_t *cap, size_t n, size_t size)
{
    if (p && *cap >= n)
        return p;
    free(p);
    size_t c = n + n / 2;
    p = c <= SIZE_MAX / size ? malloc(c * size) : NULL;
    *cap = p ? c : 0;
    return p;
}

