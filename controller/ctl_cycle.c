/*
 * ctl_cycle.c — one reconcile: GPUJobs decoded and validated, the store
 * upserted, suspend/resume and deletions handled, lifecycle from pod phases,
 * one scheduling cycle, every decision written in one store transaction
 * (state, ledger, intent, audit), then (after the commit) the actuator, the
 * status patches and the Events. The phases are listed above phase_gather.
 *
 * Called by the loop (ctl_main.c) and never calling back into it:
 * ctl_reconcile returns a struct ctl_rc_result (committed, the error that
 * stopped it, when a held status write is due) and the loop acts on it
 * (readiness, the settle timer). Below it: the memo table (ctl_memo.c; a job
 * the reconcile changes is marked dirty on its memo, job_touch), the
 * actuator's requests (ctl_wire.c, ctl_act.c), the pure helpers
 * (ctl_snapshot.c, apply.c) and the clock (ctl_clock.c).
 *
 * What it keeps across reconciles is on each object's memo, by part:
 * decode (the decoded GPUJob and the last full examination: job_prepare),
 * wait (run_sched's explanations and positions, waiting_publish's pub),
 * pods (missing, released and stray pods), status (job_status,
 * counted_status, --status-settle), pl (placement_load) and victims
 * (run_sched); and on struct gq_ctl the committed store rows.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply.h"
#include "ctl_int.h"

#define LOGC(c, lvl, msg, ...) gq_log((c)->cfg.log_level, lvl, "ctl", msg, __VA_ARGS__)

/* A GPUJob of this reconcile. */
struct cj {
    const cJSON *obj;
    const char *key;            /* "ns/name" (borrowed from c->jobs_set: no event runs
                                 * during a reconcile) */
    const struct api_gpujob *job; /* decoded+defaulted: the memo's cache (borrowed) */
    int decoded;                /* decode gave a usable spec */
    int gen_changed;            /* metadata.generation differs from the store's */
    int64_t old_gpus;           /* store's GPUs before this reconcile's upsert (-1 new) */
    int failed_invalid;         /* decode/validate errors: Failed */
    const char *invalid_reason; /* condition reason (static text) */
    char *invalid_msg;          /* owned (rc_release; cj_invalid_msg), NULL = "" */
    struct store_job *row;      /* heap copy (free) */
    struct ctl_placement pl;
    struct ctl_memo *memo;
    int state;                  /* current store state, updated as we write */
    int admit_pending;          /* an ADMIT intent is pending */
    int released;               /* gave up its hold in this reconcile (an intent deletes its pods) */
    struct ctl_placement term;  /* Preempted, pods still stopping: the replicas they hold */
    struct ctl_objent *ent;     /* its entry in c->jobs_set (the memo hint; no event runs
                                 * during a reconcile) */
    int dormant;                /* finished and settled: skipped by this reconcile (job_sleep) */
};

/* An intent by job key (index into rc_ctx.intents). */
struct ikey {
    const char *key;
    int i;
};

/* A node of this reconcile by name; its info parsed on first use. */
struct rnode {
    const char *name;
    const cJSON *obj;
    int have_ni;
    struct ctl_nodeinfo ni;
};

/* A Team object of this reconcile: the spec in force (its latest spec when
 * valid, else the last valid one the store kept) and the latest edit's problem. */
struct rteam {
    const cJSON *obj;
    int idx;                 /* index into rc_ctx.teams of the spec in force, -1 none */
    int64_t gen_in_force;    /* metadata.generation of that spec */
    int64_t gen;             /* the object's metadata.generation */
    char bad[API_MSG_MAX];   /* first problem of the latest spec ("" valid) */
    struct api_team latest;  /* the latest spec as decoded (namespaces, for job messages) */
};


struct pend_event {
    const cJSON *obj;
    const char *type, *reason;
    char msg[SCHED_MSG_MAX + 128];
};

struct rc_ctx {
    struct gq_ctl *c;
    int64_t now;
    char err[512];
    struct api_team *teams;       /* the spec in force of each usable Team */
    int nteams;
    struct rteam *tinfo;          /* every Team object of this reconcile */
    int ntinfo;
    struct api_priorityclass *pcs;
    int npcs;
    struct api_gpupool *pools;
    int npools;
    const cJSON **nodes;
    int nnodes;
    struct rnode *nix;            /* named nodes sorted by name (nnix entries) */
    int nnix;
    const cJSON **foreign;
    int nforeign, capforeign;
    struct cj *jobs;
    int njobs;
    size_t capjobs;               /* entries allocated in jobs */
    struct store_job **rows;
    int nrows, caprows;
    int row_hint;                 /* index of the row row_find found last */
    int team_hint;                /* team_of's last answer (ctl_team_find) */
    int intent_hint;              /* intent_first's last answer (an iidx position) */
    struct store_intent *intents; /* strings owned (strdup'd job_key) */
    int nintents, capintents;
    struct ikey *iidx;            /* intents sorted by job_key (nintents entries) */
    uint64_t lookup_sig;          /* Teams + PriorityClasses seen (defaulting inputs) */
    struct pend_event *ev;
    int nev, capev;
    int nreleased;                /* released gangq pods still running or stopping */
    int sched_ran;
    int in_txn;                   /* the cycle's store transaction is open */
    int committed;                /* the cycle's store transaction committed */
    size_t done_marks;            /* intent done marks written in the transaction */
    int pub_epoch;                /* positions, pendingHead and counters are published now */
    int full;                     /* every job is examined in full (else only dirty ones) */
    int rows_read;                /* the rows came from the store, not the last reconcile */
    uint64_t jobs_deleted;        /* c->jobs_deleted when gathered */
    int64_t settle_next;          /* earliest status write held back by --status-settle or
                                   * --status-refresh-qps (0 = none) */
};

/* ------------------------------------------------------------ helpers */

static struct store_job *row_copy(const struct store_job *j)
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

static int rows_cb(void *ud, const struct store_job *j)
{
    struct rc_ctx *r = ud;
    if (r->nrows == r->caprows) {
        int cap = r->caprows ? r->caprows * 2 : 64;
        struct store_job **n = realloc(r->rows, (size_t)cap * sizeof(*n));
        if (!n)
            return GQ_ENOMEM;
        r->rows = n;
        r->caprows = cap;
    }
    if (!(r->rows[r->nrows] = row_copy(j)))
        return GQ_ENOMEM;
    r->nrows++;
    return 0;
}

static int intents_cb(void *ud, const struct store_intent *in)
{
    struct rc_ctx *r = ud;
    if (r->nintents == r->capintents) {
        int cap = r->capintents ? r->capintents * 2 : 32;
        struct store_intent *n = realloc(r->intents, (size_t)cap * sizeof(*n));
        if (!n)
            return GQ_ENOMEM;
        r->intents = n;
        r->capintents = cap;
    }
    struct store_intent *o = &r->intents[r->nintents];
    *o = *in;
    o->payload = NULL;
    if (!(o->job_key = strdup(in->job_key)))
        return GQ_ENOMEM;
    r->nintents++;
    return 0;
}

static int ikey_cmp(const void *a, const void *b)
{
    const struct ikey *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int intents_index(struct rc_ctx *r)
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
static int intent_first(struct rc_ctx *r, const char *key)
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
static uint64_t obj_sig(const cJSON *o)
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

static int row_cmp(const void *a, const void *b)
{
    return strcmp((*(struct store_job *const *)a)->key, (*(struct store_job *const *)b)->key);
}

static struct store_job *row_find(struct rc_ctx *r, const char *key)
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
    struct store_job **f = bsearch(&kp, r->rows, (size_t)r->nrows, sizeof(*r->rows), row_cmp);
    if (f)
        r->row_hint = (int)(f - r->rows);
    return f ? *f : NULL;
}

/* Insert a new row (owned by r from here) at its sorted place: one memmove,
 * not a sort of every row per new job. */
static int row_insert(struct rc_ctx *r, struct store_job *row)
{
    if (r->nrows == r->caprows) {
        int cap = r->caprows ? r->caprows * 2 : 64;
        struct store_job **n = realloc(r->rows, (size_t)cap * sizeof(*n));
        if (!n)
            return GQ_ENOMEM;
        r->rows = n;
        r->caprows = cap;
    }
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

/* j's row (j->row) kept on its memo for the next reconcile (row_kept). */
static void row_keep(const struct rc_ctx *r, struct cj *j)
{
    if (j->memo) {
        if (j->memo->decode.row != j->row)
            j->memo->pl.pl_row = NULL; /* placement_load compares the texts again */
        j->memo->decode.row = j->row;
        j->memo->decode.row_gen = r->c->rows_gen;
    }
}

/* The row m's job kept (row_keep) while the rows were not freed since,
 * else NULL. */
static struct store_job *row_kept(const struct rc_ctx *r, const struct ctl_memo *m)
{
    if (m->decode.row && m->decode.row_gen == r->c->rows_gen)
        return (struct store_job *)m->decode.row; /* r->rows holds it */
    return NULL;
}

static int push_ptr(const cJSON ***arr, int *n, int *cap, const cJSON *o)
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

static void event_add(struct rc_ctx *r, const cJSON *obj, const char *type, const char *reason,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void event_add(struct rc_ctx *r, const cJSON *obj, const char *type, const char *reason,
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
static struct apply_ctx actx(struct rc_ctx *r)
{
    return (struct apply_ctx){r->c->st, r->now, 0, r->err, sizeof(r->err)};
}

/* The team in force a job names, or NULL. */
static const struct api_team *team_of(struct rc_ctx *r, const char *name)
{
    int t = ctl_team_find(r->teams, r->nteams, name, &r->team_hint);
    return t >= 0 ? &r->teams[t] : NULL;
}

/* A Team's quota entries as the core and the ledger read them (q: API_MAX_QUOTA). */
static int team_quota(const struct api_team *tm, struct sched_quota *q)
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
    int nq = q ? team_quota(team_of(r, j->job->spec.team), q) : 0;
    return (struct apply_job){j->key, j->job->spec.team, j->state, g->present ? g->count : 0,
                              g->present && !g->count ? g->shares : 0, q, nq};
}

static int audit(struct rc_ctx *r, const char *action, const struct cj *j, const char *key,
                 const char *oldv, const char *newv, const char *reason)
{
    struct apply_ctx x = actx(r);
    return apply_audit(&x, action, j ? j->job->spec.team : "", key, oldv, newv, reason);
}

/* The job changed in this reconcile: examined in full by the rest of it
 * (status) and by the next one. */
static void job_touch(struct rc_ctx *r, struct cj *j)
{
    ctl_memo_dirty(j->memo, r->c->reconciles + 1);
}

/* What j's status shows may have changed in this reconcile (the core's
 * explanation, what is published of its wait): its status is computed again
 * by this reconcile's report, nothing else of it examined again. */
static void job_touch_status(struct rc_ctx *r, struct cj *j)
{
    if (j->memo && j->memo->status_upto < r->c->reconciles)
        j->memo->status_upto = r->c->reconciles;
}

/* Examined in full by this reconcile: a full pass, or the job is dirty; a
 * dormant job never (job_sleep). */
static int job_dirty(const struct rc_ctx *r, const struct cj *j)
{
    if (j->dormant)
        return 0;
    return r->full || !j->memo || !j->memo->decode.prepared || j->memo->dirty_upto >= r->c->reconciles ||
           (j->memo->status.settle_due_ms && j->memo->status.settle_due_ms <= r->now);
}

/* After a write of j's row (an apply_* call, or a transition below, that
 * returned rc): on success the reconcile's view follows the store (state,
 * row, placement when it changed) and j is examined in full again. */
static int refresh(struct rc_ctx *r, struct cj *j, int rc)
{
    if (rc)
        return rc;
    job_touch(r, j);
    struct store_job *fresh = NULL;
    if ((rc = store_job_get(r->c->st, j->key, &fresh, r->err, sizeof(r->err))))
        return rc;
    struct store_job *cp = row_copy(fresh);
    store_job_free(fresh);
    if (!cp)
        return GQ_ENOMEM;
    int pl_changed = !j->row || strcmp(j->row->placement, cp->placement);
    /* rows[] keeps the old pointer (sorted by key): replace it in place */
    if (j->row) {
        struct store_job **at = bsearch(&j->row, r->rows, (size_t)r->nrows, sizeof(*r->rows), row_cmp);
        if (at)
            *at = cp;
    }
    free(j->row);
    j->row = cp;
    row_keep(r, j);
    j->state = cp->state;
    if (pl_changed)
        rc = ctl_placement_parse(cp->placement, &j->pl, r->err, sizeof(r->err));
    return rc;
}

/* A transition no decision rule owns (recover, adopt, revalidate). */
static int transition(struct rc_ctx *r, struct cj *j, int state, const char *placement,
                      const char *message, const char *by, const char *why, int bump)
{
    struct store_transition t = {state, placement, message, by, why, bump};
    return refresh(r, j, store_job_transition(r->c->st, j->key, &t, r->now, r->err, sizeof(r->err)));
}

/* One decision rule applied to j: act_begin takes j as it is now (its
 * Team's quota included), the apply_* call writes, act_end makes the
 * reconcile follow the store. A rule that releases a hold writes an intent
 * that deletes the pods: the caller sets j->released.
 *   struct act a;
 *   act_begin(r, j, &a);
 *   rc = act_end(r, j, apply_suspend(&a.x, &a.j));  */
struct act {
    struct apply_ctx x;
    struct sched_quota q[API_MAX_QUOTA];
    struct apply_job j; /* j.quota points into q */
};

static void act_begin(struct rc_ctx *r, const struct cj *j, struct act *a)
{
    a->x = actx(r);
    a->j = ajob(r, j, a->q);
}

static int act_end(struct rc_ctx *r, struct cj *j, int rc)
{
    return refresh(r, j, rc);
}

static int holds(int state)
{
    return apply_holds(state);
}

static int job_gpus_placed(struct rc_ctx *r, const struct cj *j)
{
    struct apply_job a = ajob(r, j, NULL);
    return (int)apply_gpus(&a, j->pl.n);
}

static int rnode_cmp(const void *a, const void *b)
{
    return strcmp(((const struct rnode *)a)->name, ((const struct rnode *)b)->name);
}

static int nodes_index(struct rc_ctx *r)
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
static struct rnode *node_find(struct rc_ctx *r, const char *name)
{
    struct rnode k = {name, NULL, 0, {0}};
    if (!r->nnix)
        return NULL;
    return bsearch(&k, r->nix, (size_t)r->nnix, sizeof(*r->nix), rnode_cmp);
}

static const char *node_product(struct rc_ctx *r, const char *node)
{
    struct rnode *n = node_find(r, node);
    const char *p = n ? ctl_obj_label(n->obj, r->c->cfg.gpu_product_label) : NULL;
    return p ? p : "";
}

/* The product a placement's ledger row is charged to: its first replica's node's. */
static const char *pl_product(struct rc_ctx *r, const struct ctl_placement *pl)
{
    return pl->n ? node_product(r, pl->rep[0].node) : "";
}

static int ledger_set(struct rc_ctx *r, struct cj *j)
{
    struct apply_ctx x = actx(r);
    struct sched_quota q[API_MAX_QUOTA];
    struct apply_job a = ajob(r, j, q);
    return apply_ledger_set(&x, &a, j->pl.n, pl_product(r, &j->pl));
}

static int intent(struct rc_ctx *r, int kind, const char *key, const char *payload)
{
    ctl_memo_mark(&r->c->memo, key, r->c->reconciles + 1);
    return store_intent_add(r->c->st, kind, key, payload ? payload : "", r->now, NULL, r->err,
                            sizeof(r->err));
}

/* Pod of this job held by its placement: the name of a placed replica, on its node. */
static int pod_held(const struct cj *j, const struct ctl_podfacts *f)
{
    if (!j || !holds(j->state))
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

/* Node name (n: its node_find, NULL when gone) is gone or NotReady past the
 * grace period. A node not lost has n->ni parsed. */
static int node_lost_at(struct rc_ctx *r, struct rnode *n, const char *name, char *why, size_t len)
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

static int node_lost(struct rc_ctx *r, const char *name, char *why, size_t len)
{
    return node_lost_at(r, node_find(r, name), name, why, len);
}

static int cj_key_cmp(const void *key, const void *e)
{
    return strcmp((const char *)key, ((const struct cj *)e)->key);
}

static struct cj *job_find(struct rc_ctx *r, const char *key)
{
    return bsearch(key, r->jobs, (size_t)r->njobs, sizeof(*r->jobs), cj_key_cmp);
}

/* ------------------------------------------------------------ gather */

/* Keep a valid Team spec in the store (once per generation), so a later
 * invalid edit leaves it in force, across restarts too. */
static void team_save_valid(struct rc_ctx *r, const cJSON *o, const struct api_team *t)
{
    struct store_team *sv = NULL;
    char err[256];
    if (!store_team_get(r->c->st, t->meta.name, &sv, err, sizeof(err)) && !strcmp(sv->uid, t->meta.uid) &&
        sv->generation == t->meta.generation) {
        store_team_free(sv);
        return;
    }
    store_team_free(sv);
    cJSON *k = cJSON_CreateObject(), *md = k ? cJSON_AddObjectToObject(k, "metadata") : NULL;
    cJSON *spec = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(o, "spec"), 1);
    char *txt = NULL;
    if (md && spec && cJSON_AddStringToObject(k, "apiVersion", API_GROUP_VERSION) &&
        cJSON_AddStringToObject(k, "kind", "Team") && cJSON_AddStringToObject(md, "name", t->meta.name) &&
        cJSON_AddStringToObject(md, "uid", t->meta.uid) &&
        cJSON_AddNumberToObject(md, "generation", (double)t->meta.generation) &&
        cJSON_AddItemToObject(k, "spec", spec)) {
        spec = NULL;
        txt = cJSON_PrintUnformatted(k);
    }
    cJSON_Delete(spec);
    cJSON_Delete(k);
    struct store_team st = {t->meta.name, t->meta.uid, t->meta.generation, txt, 0};
    if (!txt || store_team_save(r->c->st, &st, r->now, err, sizeof(err)))
        LOGC(r->c, GQ_LOG_WARN, "could not keep the Team's valid spec", " team=%s err=\"%s\"", t->meta.name,
             txt ? err : "out of memory");
    free(txt);
}

/* The last valid spec of an invalid Team (same uid), decoded into t; 0 when found. */
static int team_last_valid(struct rc_ctx *r, const char *name, const char *uid, struct api_team *t)
{
    struct store_team *sv = NULL;
    char err[256];
    int ok = -1;
    if (store_team_get(r->c->st, name, &sv, err, sizeof(err)) || strcmp(sv->uid, uid)) {
        store_team_free(sv);
        return -1;
    }
    cJSON *o = cJSON_Parse(sv->object);
    struct api_errors e;
    api_errors_init(&e);
    memset(t, 0, sizeof(*t));
    if (o && api_team_decode(o, t, &e) == 0) {
        api_team_default(t);
        if (!api_team_validate(t, &e))
            ok = 0;
    }
    cJSON_Delete(o);
    store_team_free(sv);
    return ok;
}

/* An array kept from one reconcile to the next (fresh ones of a reconcile's
 * size come from mmap, page-faulted every time): p with room for at least n
 * elements of size bytes, grown by half again when short (its contents are
 * not kept then). NULL with *cap 0 when memory is short (p freed). */
static void *keep_reserve(void *p, size_t *cap, size_t n, size_t size)
{
    if (p && *cap >= n)
        return p;
    free(p);
    size_t c = n + n / 2;
    p = c <= SIZE_MAX / size ? malloc(c * size) : NULL;
    *cap = p ? c : 0;
    return p;
}

/* What one Team object decoded to, kept across reconciles (struct
 * ctl_team_keep): a Team changes only by an event of its own, which gives it
 * a new resourceVersion, so most reconciles see every Team as the last one
 * did and need not decode, validate or look up its kept valid spec again. */
struct tmemo {
    char uid[API_UID_MAX];
    char rv[API_UID_MAX];
    int64_t used;       /* the reconcile that last used it */
    uint64_t sig;       /* obj_sig of the object */
    struct rteam ti;    /* as gather_cb_team left it (ti.obj and ti.idx set per reconcile) */
    int in_force;       /* a spec is in force: t */
    struct api_team t;
};

struct ctl_team_keep {
    struct tmemo *m; /* unordered; at most one per uid */
    int n, cap;
    /* rc_ctx.teams and rc_ctx.tinfo, lent to each reconcile (keep_reserve) */
    struct api_team *teams;
    struct rteam *tinfo;
    size_t cap_teams, cap_tinfo;
};

void ctl_team_keep_free(struct ctl_team_keep *k)
{
    if (!k)
        return;
    free(k->m);
    free(k->teams);
    free(k->tinfo);
    free(k);
}

/* Forget every Team's decode (a reconcile rolled back: the valid specs it
 * saved are not in the store). */
static void team_keep_forget(struct gq_ctl *c)
{
    if (c->team_keep)
        c->team_keep->n = 0;
}

/* The kept decode of the Team with this uid, or NULL; guess (the Team's
 * place among the Teams this reconcile, as the last one saw them) first. */
static struct tmemo *tmemo_of(struct ctl_team_keep *k, int guess, const char *uid)
{
    if (!k || !uid)
        return NULL;
    if (guess >= 0 && guess < k->n && !strcmp(k->m[guess].uid, uid))
        return &k->m[guess];
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->m[i].uid, uid))
            return &k->m[i];
    return NULL;
}

/* Keep what gather_cb_team found for the object (uid, rv) in m (its kept
 * decode, or NULL for a new one); best effort: without memory the next
 * reconcile decodes it again. */
static void tmemo_put(struct rc_ctx *r, struct tmemo *m, const char *uid, const char *rv, uint64_t sig,
                      const struct rteam *ti, const struct api_team *t)
{
    struct ctl_team_keep *k = r->c->team_keep;
    if (!k || !uid || !rv || strlen(uid) >= API_UID_MAX || strlen(rv) >= API_UID_MAX)
        return;
    if (!m) {
        if (k->n == k->cap) {
            int cap = k->cap ? k->cap * 2 : 16;
            struct tmemo *nm = realloc(k->m, (size_t)cap * sizeof(*nm));
            if (!nm)
                return;
            k->m = nm;
            k->cap = cap;
        }
        m = &k->m[k->n++];
    }
    gq_strlcpy(m->uid, uid, sizeof(m->uid));
    gq_strlcpy(m->rv, rv, sizeof(m->rv));
    m->used = r->c->reconciles;
    m->sig = sig;
    m->ti = *ti;
    m->in_force = ti->idx >= 0;
    if (m->in_force)
        m->t = *t;
}

/* Drop the decodes of Teams this reconcile did not see (deleted). */
static void tmemo_sweep(struct gq_ctl *c)
{
    struct ctl_team_keep *k = c->team_keep;
    if (!k)
        return;
    int kept = 0;
    for (int i = 0; i < k->n; i++)
        if (k->m[i].used == c->reconciles) {
            if (kept != i)
                k->m[kept] = k->m[i];
            kept++;
        }
    k->n = kept;
}

static int gather_cb_team(const cJSON *o, void *ud)
{
    struct rc_ctx *r = ud;
    struct api_errors e;
    api_errors_init(&e);
    struct api_team *t = &r->teams[r->nteams];
    struct rteam *ti = &r->tinfo[r->ntinfo++];
    const char *uid = ctl_obj_str(o, "metadata", "uid"), *rv = ctl_obj_str(o, "metadata", "resourceVersion");
    struct tmemo *tm = tmemo_of(r->c->team_keep, r->ntinfo - 1, uid);
    if (tm && rv && !strcmp(tm->rv, rv)) {
        tm->used = r->c->reconciles;
        r->lookup_sig += tm->sig;
        *ti = tm->ti;
        ti->obj = o;
        ti->idx = -1;
        if (tm->in_force) {
            *t = tm->t;
            ti->idx = r->nteams++;
        }
        return 0;
    }
    uint64_t sig = obj_sig(o);
    r->lookup_sig += sig;
    memset(t, 0, sizeof(*t));
    memset(ti, 0, sizeof(*ti));
    ti->obj = o;
    ti->idx = -1;
    if (api_team_decode(o, t, &e) == GQ_ENOMEM)
        return GQ_ENOMEM;
    api_team_default(t);
    api_team_validate(t, &e);
    ti->gen = t->meta.generation;
    if (!e.n) {
        team_save_valid(r, o, t);
        ti->idx = r->nteams;
        ti->gen_in_force = t->meta.generation;
        r->nteams++;
        tmemo_put(r, tm, uid, rv, sig, ti, t);
        return 0;
    }
    char m[API_ERR_PATH_MAX + API_ERR_MSG_MAX + 4];
    api_error_format(&e, 0, m, sizeof(m));
    snprintf(ti->bad, sizeof(ti->bad), "%s%s", m, e.n + e.dropped > 1 ? " (and more)" : "");
    ti->latest = *t;
    if (t->meta.name[0] && !team_last_valid(r, t->meta.name, t->meta.uid, t)) {
        ti->idx = r->nteams;
        ti->gen_in_force = t->meta.generation;
        r->nteams++;
    }
    LOGC(r->c, GQ_LOG_DEBUG, "team spec invalid", " team=%s in_force_generation=%lld err=\"%s\"",
         ti->latest.meta.name, (long long)ti->gen_in_force, ti->bad);
    tmemo_put(r, tm, uid, rv, sig, ti, t);
    return 0;
}

/* The invalid Team (with no valid spec in force) a job waits on: the one it
 * names, or the one listing its namespace; NULL when none. */
static const struct rteam *team_invalid_for(const struct rc_ctx *r, const struct api_gpujob *job)
{
    for (int k = 0; k < r->ntinfo; k++) {
        const struct rteam *ti = &r->tinfo[k];
        if (ti->idx >= 0 || !ti->bad[0])
            continue;
        if (job->spec.team[0]) {
            if (!strcmp(ti->latest.meta.name, job->spec.team))
                return ti;
            continue;
        }
        for (int n = 0; n < ti->latest.nnamespaces; n++)
            if (!strcmp(ti->latest.namespaces[n], job->meta.namespace))
                return ti;
    }
    return NULL;
}

static int gather_cb_pool(const cJSON *o, void *ud)
{
    struct rc_ctx *r = ud;
    struct api_errors e;
    api_errors_init(&e);
    struct api_gpupool *p = &r->pools[r->npools];
    memset(p, 0, sizeof(*p));
    if (api_gpupool_decode(o, p, &e) == GQ_ENOMEM)
        return GQ_ENOMEM;
    api_gpupool_validate(p, &e);
    if (e.n) {
        LOGC(r->c, GQ_LOG_WARN, "pool ignored: invalid", " pool=%s", p->meta.name);
        return 0;
    }
    r->npools++;
    return 0;
}

/* PriorityClasses are read directly: items of a built-in LIST carry no
 * apiVersion/kind, which api_priorityclass_decode requires. */
static int gather_cb_pc(const cJSON *o, void *ud)
{
    struct rc_ctx *r = ud;
    const char *name = ctl_obj_str(o, "metadata", "name");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "value");
    r->lookup_sig += obj_sig(o) * 3;
    if (!name || !cJSON_IsNumber(v) || !(v->valuedouble >= -2147483648.0 && v->valuedouble <= 2147483647.0))
        return 0; /* the API server keeps values in int32; anything else is not a usable class */
    struct api_priorityclass *pc = &r->pcs[r->npcs];
    memset(pc, 0, sizeof(*pc));
    gq_strlcpy(pc->name, name, sizeof(pc->name));
    pc->value = (int32_t)v->valuedouble;
    pc->global_default = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "globalDefault"));
    r->npcs++;
    return 0;
}

static int gather_cb_node(const cJSON *o, void *ud)
{
    struct rc_ctx *r = ud;
    r->nodes[r->nnodes++] = o;
    return 0;
}

/* The job's pods in the pod cache and their facts (parallel arrays, kept by
 * the pod informer's events: ctl_index_pod). */
static const cJSON **memo_pods(struct rc_ctx *r, struct ctl_memo *m, int *n)
{
    (void)r;
    if (!m) {
        *n = 0;
        return NULL;
    }
    *n = m->pods.npods;
    return m->pods.pods;
}

static int index_rebuild_cb(const cJSON *o, void *ud)
{
    struct ctl_infud *u = ud;
    struct gq_ctl *c = u->c;
    return u->idx == INF_PODS ? ctl_index_pod(&c->memo, &c->foreign_set, NULL, o, c->reconciles)
                              : ctl_index_job(&c->memo, &c->jobs_set, NULL, o, c->reconciles);
}

/* Indexing an informer event ran out of memory: rebuild the sets and the
 * memos' pod lists from the caches. */
static int index_rebuild(struct gq_ctl *c)
{
    ctl_objset_release(&c->jobs_set);
    ctl_objset_release(&c->foreign_set);
    for (size_t b = 0; b < c->memo.nb; b++)
        for (struct ctl_memo *m = c->memo.b[b]; m; m = m->next)
            m->pods.npods = 0;
    int rc = kube_cache_foreach(c->cache[INF_JOBS], index_rebuild_cb, &c->infud[INF_JOBS]);
    if (!rc)
        rc = kube_cache_foreach(c->cache[INF_PODS], index_rebuild_cb, &c->infud[INF_PODS]);
    if (!rc)
        c->index_stale = 0;
    return rc;
}

static int gather(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc;
    size_t nt = kube_cache_count(c->cache[INF_TEAMS]);
    size_t np = kube_cache_count(c->cache[INF_POOLS]);
    size_t npc = kube_cache_count(c->cache[INF_PCS]);
    size_t nn = kube_cache_count(c->cache[INF_NODES]);
    size_t nj = kube_cache_count(c->cache[INF_JOBS]);
    if (!c->team_keep)
        c->team_keep = calloc(1, sizeof(*c->team_keep));
    struct ctl_team_keep *tk = c->team_keep;
    if (tk) {
        /* lent for this reconcile (every entry used is set by gather_cb_team) */
        r->teams = tk->teams = keep_reserve(tk->teams, &tk->cap_teams, nt + 1, sizeof(*tk->teams));
        r->tinfo = tk->tinfo = keep_reserve(tk->tinfo, &tk->cap_tinfo, nt + 1, sizeof(*tk->tinfo));
    }
    r->pools = calloc(np + 1, sizeof(*r->pools));
    r->pcs = calloc(npc + 1, sizeof(*r->pcs));
    r->nodes = calloc(nn + 1, sizeof(*r->nodes));
    /* the last reconcile's job array (each entry is zeroed below): fresh, it
     * came from mmap, page-faulted and zeroed by the kernel every reconcile */
    if (c->jobs_keep_cap < nj + 1) {
        /* grown by half again, not to the exact count: while jobs stream in,
         * every reconcile grew it and mremap page-faulted the new tail */
        size_t cap = c->jobs_keep_cap + c->jobs_keep_cap / 2;
        if (cap < nj + 1)
            cap = nj + 1;
        struct cj *nb = realloc(c->jobs_keep, cap * sizeof(*r->jobs));
        if (!nb)
            return GQ_ENOMEM;
        c->jobs_keep = nb;
        c->jobs_keep_cap = cap;
    }
    r->jobs = c->jobs_keep;
    c->jobs_keep = NULL; /* the reconcile's until rc_release hands it back */
    r->capjobs = c->jobs_keep_cap;
    c->jobs_keep_cap = 0;
    if (!r->teams || !r->tinfo || !r->pools || !r->pcs || !r->nodes || !r->jobs)
        return GQ_ENOMEM;
    if ((rc = kube_cache_foreach(c->cache[INF_TEAMS], gather_cb_team, r)))
        return rc;
    tmemo_sweep(c);
    if ((rc = kube_cache_foreach(c->cache[INF_POOLS], gather_cb_pool, r)) ||
        (rc = kube_cache_foreach(c->cache[INF_PCS], gather_cb_pc, r)) ||
        (rc = kube_cache_foreach(c->cache[INF_NODES], gather_cb_node, r)))
        return rc;
    if ((rc = nodes_index(r)))
        return rc;
    if (c->index_stale && (rc = index_rebuild(c)))
        return rc;
    /* GPUJobs and foreign pods from the event-kept sets (sorted by key, as
     * job_find expects); gangq pods are on their jobs' memos */
    if ((size_t)c->jobs_set.n + 1 > r->capjobs) {
        struct cj *nj2 = realloc(r->jobs, ((size_t)c->jobs_set.n + 1) * sizeof(*r->jobs));
        if (!nj2)
            return GQ_ENOMEM;
        r->jobs = nj2;
        r->capjobs = (size_t)c->jobs_set.n + 1;
    }
    r->jobs_deleted = c->jobs_deleted;
    for (int i = 0; i < c->jobs_set.n; i++) {
        struct cj *j = &r->jobs[r->njobs];
        memset(j, 0, sizeof(*j));
        j->job = &api_gpujob_zero; /* a cj not prepared (yet) */
        j->obj = c->jobs_set.e[i].obj;
        j->key = c->jobs_set.e[i].key; /* shorter than CTL_KEY_MAX (ctl_index_job) */
        j->ent = &c->jobs_set.e[i];
        r->njobs++;
    }
    for (int i = 0; i < c->foreign_set.n; i++)
        if ((rc = push_ptr(&r->foreign, &r->nforeign, &r->capforeign, c->foreign_set.e[i].obj)))
            return rc;
    if (c->rows && c->restart_done) {
        /* the rows as the last committed reconcile left them (handed back by ctl_reconcile) */
        r->rows = c->rows;
        r->nrows = c->nrows;
        r->caprows = c->caprows;
        c->rows = NULL;
        c->nrows = c->caprows = 0;
    } else {
        ctl_rows_release(c);
        r->rows_read = 1;
        if ((rc = store_jobs_each(c->st, STORE_MASK_ALL, rows_cb, r, r->err, sizeof(r->err))))
            return rc;
        if (r->nrows > 1)
            qsort(r->rows, (size_t)r->nrows, sizeof(*r->rows), row_cmp);
    }
    if ((rc = store_intents_pending(c->st, intents_cb, r, r->err, sizeof(r->err))))
        return rc;
    return intents_index(r);
}

/* ------------------------------------------------------------ jobs */

static int64_t creation_ms(const struct cj *j, int64_t now)
{
    double w = 0;
    if (j->job->meta.creation_timestamp[0] && !kube_time_parse(j->job->meta.creation_timestamp, &w))
        return (int64_t)(w * 1000.0);
    return now;
}

/* --status-settle: when a status write of this job is held back, the time it
 * is due, else 0. A state is written once the job has been in it for the
 * settle interval (a new job's Queued: since its creation), and a job's status
 * at most once per interval, so a state it leaves sooner (Queued admitted at
 * once, Admitted whose pods run, Running that finished) is never written.
 * Succeeded, Failed and an invalid spec are written at once. */
static int64_t status_held(const struct rc_ctx *r, const struct cj *j)
{
    int64_t iv = (int64_t)(r->c->cfg.status_settle_s * 1000.0);
    struct ctl_memo *m = j->memo;
    if (iv <= 0 || !m || !j->decoded || j->state == STORE_SUCCEEDED || j->state == STORE_FAILED ||
        (j->invalid_reason && !j->failed_invalid))
        return 0;
    if (!m->status.state_since_ms) {
        /* first seen since start: a new job's wait counts from its creation */
        m->status.state_since_ms = j->state == STORE_QUEUED ? creation_ms(j, r->now) : r->now;
        m->status.since_state = j->state;
    } else if (m->status.since_state != j->state) {
        m->status.state_since_ms = r->now;
        m->status.since_state = j->state;
    }
    int64_t due = 0;
    if (r->now >= m->status.state_since_ms && r->now - m->status.state_since_ms < iv)
        due = m->status.state_since_ms + iv;
    if (m->status.status_sent_ms && r->now >= m->status.status_sent_ms && r->now - m->status.status_sent_ms < iv &&
        m->status.status_sent_ms + iv > due)
        due = m->status.status_sent_ms + iv;
    return due;
}

static void settle_hold(struct rc_ctx *r, struct cj *j, int64_t due)
{
    j->memo->status.settle_due_ms = due;
    if (!r->settle_next || due < r->settle_next)
        r->settle_next = due;
}

static int team_exists(struct rc_ctx *r, const char *name)
{
    return team_of(r, name) != NULL;
}

static int pool_exists(struct rc_ctx *r, const char *name)
{
    for (int i = 0; i < r->npools; i++)
        if (!strcmp(r->pools[i].meta.name, name))
            return 1;
    return 0;
}

/* Highest gangq.io/attempt label among the job's pods (0 when none). */
static int max_pod_attempt(struct rc_ctx *r, struct ctl_memo *m)
{
    int np = 0, best = 0;
    memo_pods(r, m, &np);
    for (int i = 0; i < np; i++) {
        const char *a = m->pods.pf[i].attempt;
        int64_t v;
        if (a && !gq_parse_i64(a, (size_t)-1, &v) && v > best && v < 1000000)
            best = (int)v;
    }
    return best;
}

static int ledger_set(struct rc_ctx *r, struct cj *j);

/* A job new to the store whose pods already run (the store was lost or is
 * another replica's): find the newest complete attempt, to adopt instead of
 * admitting the gang a second time. Its live pods and those that Succeeded
 * (a finished replica of that attempt; the lifecycle completes the job when all
 * did) make the placement; an attempt older than the one the status records is
 * not adopted (its pods are strays). Returns 1 with *pl filled when adoptable. */
static int adopt_scan(struct rc_ctx *r, struct cj *j, int64_t status_attempt, struct ctl_placement *pl)
{
    int np = 0;
    const cJSON **pods = memo_pods(r, j->memo, &np);
    int attempt = max_pod_attempt(r, j->memo);
    if (!np || !attempt || attempt < status_attempt)
        return 0;
    pl->attempt = attempt;
    for (int i = 0; i < np; i++) {
        const cJSON *pod = pods[i];
        const char *a = ctl_obj_label(pod, CTL_LABEL_ATTEMPT), *rp = ctl_obj_label(pod, CTL_LABEL_REPLICA);
        const char *nn = ctl_obj_str(pod, "spec", "nodeName");
        const char *phase = ctl_obj_str(pod, "status", "phase");
        const cJSON *ref = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                                  cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "ownerReferences"), 0);
        const char *uid = ctl_obj_str(ref, "uid", NULL);
        int64_t av, rv;
        if (!a || !rp || !nn || !uid || strcmp(uid, j->job->meta.uid) || gq_parse_i64(a, (size_t)-1, &av) ||
            av != attempt || gq_parse_i64(rp, (size_t)-1, &rv) || (phase && !strcmp(phase, "Failed")) ||
            ctl_obj_str(pod, "metadata", "deletionTimestamp"))
            continue;
        struct ctl_podusage u;
        ctl_pod_usage(pod, &u);
        if (ctl_placement_add(pl, (int)rv, nn, u.devs))
            continue;
        /* keep the pod's own name: a re-placed replica carries a generation */
        char want[API_NAME_MAX + 32];
        const char *pn = ctl_obj_str(pod, "metadata", "name");
        struct ctl_prep *p = &pl->rep[ctl_placement_find(pl, (int)rv)];
        ctl_pod_name(j->job->meta.name, pl, p, want, sizeof(want));
        size_t wl = strlen(want);
        const char *g = pn && strlen(pn) > wl + 2 && !strncmp(pn, want, wl) && !strncmp(pn + wl, "-g", 2)
                            ? pn + wl : NULL;
        if (g) {
            int64_t gv;
            if (!gq_parse_i64(g + 2, (size_t)-1, &gv) && gv > 0 && gv < 1000000) {
                p->gen = (int)gv;
                if (p->gen > pl->reseq)
                    pl->reseq = p->gen;
            }
        }
    }
    int gang = j->job->spec.gang != API_FALSE;
    if (pl->n == 0 || (gang && pl->n != j->job->spec.replicas)) {
        ctl_placement_release(pl);
        ctl_placement_init(pl);
        return 0; /* incomplete: its pods are strays and get deleted */
    }
    return 1;
}

/* Arrival sequence of a job seen for the first time: its resourceVersion,
 * which until gangq writes its status is the revision that created it (etcd
 * revisions grow with every write, so they order a burst of creations that
 * share one creationTimestamp second); 0 when not a number. */
static int64_t first_sight_arrival(const struct cj *j)
{
    int64_t v;
    const char *rv = j->job->meta.resource_version;
    if (!rv[0] || gq_parse_i64(rv, (size_t)-1, &v) || v < 0)
        return 0;
    return v;
}

/* What a row new to the store is rebuilt from: the object's status (the
 * durable record of what gangq decided) and the job's pods. */
struct recovery {
    struct api_gpujob_status st;
    struct ctl_placement pl; /* adopted placement (when adopted) */
    struct gq_buf text;      /* its placement text */
    int adopted;
};

/* Fill the decision fields of sj (a row new to the store) from the status
 * and pods: arrival, enqueue time, attempts, retries, preemptions; a Succeeded
 * or Failed job stays finished (for the generation its status records: a later
 * spec change is seen as one, j->gen_changed); an Admitted or Running one whose
 * pods run is adopted; a Preempted one stays Preempted. */
static int row_recover(struct rc_ctx *r, struct cj *j, struct store_job *sj, struct recovery *rec)
{
    struct api_errors e;
    api_errors_init(&e);
    /* a field that does not decode stays unknown (0); the others are used */
    ctl_job_status_decode(j->obj, &rec->st, &e);
    const struct api_gpujob_status *st = &rec->st;
    double w = 0;
    sj->arrival = st->arrival > 0 ? st->arrival : first_sight_arrival(j);
    if (st->enqueue_time[0] && !kube_time_parse(st->enqueue_time, &w) && w > 0)
        sj->enqueue_ms = (int64_t)(w * 1000.0);
    sj->attempts = st->attempt;
    sj->retries = st->retries;
    sj->preemptions = st->preemptions;
    if (st->last_preemption.present) {
        sj->preempted_by = st->last_preemption.by;
        sj->preempt_reason = st->last_preemption.reason;
        if (st->last_preemption.time[0] && !kube_time_parse(st->last_preemption.time, &w))
            sj->preempted_ms = (int64_t)(w * 1000.0);
    }
    if (st->state == API_STATE_SUCCEEDED || st->state == API_STATE_FAILED) {
        sj->state = st->state == API_STATE_SUCCEEDED ? STORE_SUCCEEDED : STORE_FAILED;
        sj->message = st->message;
        if (st->observed_generation > 0 && st->observed_generation != j->job->meta.generation)
            j->gen_changed = 1;
        return 0;
    }
    if (j->failed_invalid || j->job->spec.suspend)
        return 0; /* the spec rules decide; any pods are strays */
    if (st->state == API_STATE_PREEMPTED) {
        sj->state = STORE_PREEMPTED;
        sj->message = st->message;
    }
    int pod_attempt = max_pod_attempt(r, j->memo);
    if (adopt_scan(r, j, st->attempt, &rec->pl)) {
        int rc = ctl_placement_format(&rec->pl, &rec->text);
        if (rc)
            return rc;
        rec->adopted = 1;
        sj->state = STORE_ADMITTED;
        sj->placement = rec->text.p;
        sj->attempts = rec->pl.attempt;
        sj->admitted_ms = r->now;
        if (st->admission.present && st->admission.time[0] && !kube_time_parse(st->admission.time, &w))
            sj->admitted_ms = (int64_t)(w * 1000.0);
        sj->message = "adopted from existing pods";
    } else if (pod_attempt > sj->attempts) {
        sj->attempts = pod_attempt; /* the next admission gets a new pod name */
    }
    return 0;
}

/* A store that is older than the API server (restored, or another replica's)
 * may hold a job as waiting or running that its status records as finished
 * for this very generation: the status wins (terminal states are final within a
 * generation), so it never runs again. */
static int status_finished_override(struct rc_ctx *r, struct cj *j)
{
    const char *ss = ctl_obj_str(j->obj, "status", "state");
    int s = j->state;
    if (!ss || (strcmp(ss, "Succeeded") && strcmp(ss, "Failed")) || s == STORE_SUCCEEDED ||
        s == STORE_FAILED || j->gen_changed || j->failed_invalid)
        return 0;
    struct api_gpujob_status st;
    struct api_errors e;
    api_errors_init(&e);
    ctl_job_status_decode(j->obj, &st, &e);
    if (st.observed_generation <= 0 || st.observed_generation != j->job->meta.generation)
        return 0;
    int to = st.state == API_STATE_SUCCEEDED ? STORE_SUCCEEDED : STORE_FAILED;
    int rc;
    struct act a;
    act_begin(r, j, &a);
    if ((rc = apply_ledger_clear(&a.x, &a.j)) || (rc = transition(r, j, to, "", st.message, NULL, NULL, 0)) ||
        (rc = audit(r, "recover", j, j->key, store_state_name(s), store_state_name(to),
                    "the GPUJob status records it finished for this generation; the store did not")))
        return rc;
    LOGC(r->c, GQ_LOG_WARN, "store behind the API server: job finished per its status", " job=%s store=%s status=%s",
         j->key, store_state_name(s), store_state_name(to));
    return 0;
}

/* A store older than the API server may hold as waiting a job whose status
 * records a later admission (same generation, higher attempt) whose pods run:
 * adopt them, as for a lost row, instead of deleting them and admitting the
 * gang again. With a current store the status never records an attempt the
 * row does not know, so this never fires. */
static int status_running_adopt(struct rc_ctx *r, struct cj *j)
{
    const char *ss = ctl_obj_str(j->obj, "status", "state");
    if (!ss || (strcmp(ss, "Admitted") && strcmp(ss, "Running")) ||
        (j->state != STORE_QUEUED && j->state != STORE_PREEMPTED) || j->failed_invalid ||
        j->job->spec.suspend || j->gen_changed || intent_first(r, j->key) < r->nintents)
        return 0;
    struct api_gpujob_status st;
    struct api_errors e;
    api_errors_init(&e);
    ctl_job_status_decode(j->obj, &st, &e);
    if (st.observed_generation <= 0 || st.observed_generation != j->job->meta.generation ||
        st.attempt <= j->row->attempts)
        return 0;
    struct ctl_placement pl;
    struct gq_buf b;
    int rc = 0, s = j->state;
    ctl_placement_init(&pl);
    gq_buf_init(&b, 1u << 20);
    if (!adopt_scan(r, j, st.attempt, &pl))
        goto out;
    if ((rc = ctl_placement_format(&pl, &b)) ||
        (rc = transition(r, j, STORE_ADMITTED, b.p, "adopted from existing pods", NULL, NULL, 0)) ||
        (rc = refresh(r, j, store_job_raise_attempts(r->c->st, j->key, pl.attempt, r->err, sizeof(r->err)))) ||
        (rc = ledger_set(r, j)) ||
        (rc = audit(r, "adopt", j, j->key, store_state_name(s), b.p,
                    "the GPUJob status records an admission the store did not")))
        goto out;
    j->row->attempts = GQ_MAX(j->row->attempts, pl.attempt);
    LOGC(r->c, GQ_LOG_WARN, "store behind the API server: adopted running pods", " job=%s store=%s attempt=%d",
         j->key, store_state_name(s), pl.attempt);
out:
    ctl_placement_release(&pl);
    gq_buf_release(&b);
    return rc;
}

/* The cache key of a GPUJob object's decode: what api_gpujob_decode reads
 * that can change under one uid. With the status subresource, the spec
 * changes only with metadata.generation, so a status write (new
 * resourceVersion) does not invalidate it; without a generation the
 * resourceVersion is the key. Name, namespace and creationTimestamp are
 * fixed for a uid; deletionTimestamp only appears. */
static void job_cache_key(const cJSON *obj, char *out, size_t len)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(md, "generation");
    const char *del = ctl_obj_str(md, "deletionTimestamp", NULL);
    if (cJSON_IsNumber(g) && g->valuedouble >= 1 && g->valuedouble < 9e15)
        snprintf(out, len, "g%lld%s", (long long)g->valuedouble, del ? "d" : "");
    else
        snprintf(out, len, "r%s%s", ctl_obj_str(md, "resourceVersion", NULL) ? ctl_obj_str(md, "resourceVersion", NULL) : "",
                 del ? "d" : "");
}

/* The job's decoded, defaulted and validated form, from the memo's cache
 * when the object (uid, job_cache_key) and the defaulting inputs (Teams,
 * PriorityClasses: r->lookup_sig) are those it was computed from. */
static int job_decode_cached(struct rc_ctx *r, struct cj *j, struct ctl_memo *m)
{
    const char *uid = ctl_obj_str(j->obj, "metadata", "uid");
    char ck[API_UID_MAX + 8];
    job_cache_key(j->obj, ck, sizeof(ck));
    if (m->decode.job_valid && uid && m->decode.job_lookup == r->lookup_sig && !strcmp(m->decode.job_uid, uid) &&
        !strcmp(m->decode.job_rv, ck)) {
        /* same spec: keep metadata.resourceVersion current (store upserts) */
        const char *rv = ctl_obj_str(j->obj, "metadata", "resourceVersion");
        gq_strlcpy(m->decode.job->meta.resource_version, rv ? rv : "", sizeof(m->decode.job->meta.resource_version));
        return 0;
    }
    struct api_gpujob nj;
    struct api_errors e;
    api_gpujob_init(&nj);
    api_errors_init(&e);
    int enomem = 0;
    cJSON *whole = ctl_job_expand(j->obj, &enomem); /* the cached spec is one string */
    if (enomem || api_gpujob_decode(whole ? whole : j->obj, &nj, &e) == GQ_ENOMEM) {
        cJSON_Delete(whole);
        api_gpujob_release(&nj);
        return GQ_ENOMEM;
    }
    cJSON_Delete(whole);
    struct api_lookup lk = {r->teams, (size_t)r->nteams, r->pcs, (size_t)r->npcs};
    if (api_gpujob_default(&nj, &lk)) {
        api_gpujob_release(&nj);
        return GQ_ENOMEM;
    }
    if (!e.n)
        api_gpujob_validate(&nj, &r->c->cfg.levels, &e);
    if (!m->decode.job && !(m->decode.job = malloc(sizeof(*m->decode.job)))) {
        api_gpujob_release(&nj);
        return GQ_ENOMEM;
    }
    if (m->decode.job_valid)
        api_gpujob_release(m->decode.job);
    *m->decode.job = nj; /* a move: nj's template and out-of-line parts now belong to the memo */
    m->decode.job_valid = 1;
    m->decode.job_lookup = r->lookup_sig;
    /* an object without uid is decoded again every time */
    gq_strlcpy(m->decode.job_uid, uid ? uid : "", sizeof(m->decode.job_uid));
    gq_strlcpy(m->decode.job_rv, uid ? ck : "", sizeof(m->decode.job_rv));
    m->decode.job_nerr = e.n;
    free(m->decode.job_err);
    m->decode.job_err = NULL;
    if (e.n) {
        char je[API_ERR_PATH_MAX + API_ERR_MSG_MAX + 4];
        api_error_format(&e, 0, je, sizeof(je));
        (void)ctl_str_set(&m->decode.job_err, je, sizeof(je)); /* no memory: the message says less */
    }
    m->decode.job_refusal = NULL;
    if (!e.n)
        m->decode.job_refusal = api_gpujob_tenancy(m->decode.job, &lk, &e);
    if (!m->decode.job_refusal) {
        /* the template copy is read by validation and the Team rules only
         * (pods are built from the object): kept for job_refused's message,
         * else dropped (a changed object or lookup decodes again) */
        cJSON_Delete(m->decode.job->template);
        m->decode.job->template = NULL;
    }
    return 0;
}

static int team_exists(struct rc_ctx *r, const char *name);

/* j->invalid_msg becomes the formatted text (at most API_MSG_MAX - 1
 * bytes; out of memory leaves none). Returns 1 when the text was cut. */
static int cj_invalid_msg(struct cj *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cj_invalid_msg(struct cj *j, const char *fmt, ...)
{
    char buf[API_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    (void)ctl_str_set(&j->invalid_msg, buf, sizeof(buf));
    return n >= (int)sizeof(buf);
}

/* The Team rules refuse the job (m->decode.job_refusal): reason and message into j.
 * They gate admission: a job holding GPUs under an existing team is not
 * stopped by them (a Team edit or a spec edit while it runs; defaulting caps
 * its priority at the Team's ceiling). */
static int job_refused(struct rc_ctx *r, struct cj *j)
{
    const char *why = j->memo->decode.job_refusal;
    const struct store_job *row = row_find(r, j->key);
    if (!why)
        return 0;
    if (row && holds(row->state) && !strcmp(row->uid, j->job->meta.uid) &&
        team_exists(r, j->job->spec.team))
        return 0;
    struct api_lookup lk = {r->teams, (size_t)r->nteams, r->pcs, (size_t)r->npcs};
    struct api_errors e;
    char first[API_ERR_PATH_MAX + API_ERR_MSG_MAX + 4];
    api_errors_init(&e);
    api_gpujob_tenancy(j->job, &lk, &e);
    api_error_format(&e, 0, first, sizeof(first));
    j->invalid_reason = why;
    cj_invalid_msg(j, "%s%s", first, e.n > 1 ? " (and more)" : "");
    return 1;
}

static int placement_copy(struct ctl_placement *dst, const struct ctl_placement *src)
{
    ctl_placement_release(dst);
    *dst = *src;
    dst->rep = NULL;
    if (src->n > 0) {
        if (!(dst->rep = malloc((size_t)src->n * sizeof(*dst->rep)))) {
            ctl_placement_init(dst);
            return GQ_ENOMEM;
        }
        memcpy(dst->rep, src->rep, (size_t)src->n * sizeof(*dst->rep));
    }
    return 0;
}

/* j->pl from the row's placement text, parsed once per distinct text (the
 * memo keeps the last one). */
static int placement_load(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    const char *t = j->row->placement ? j->row->placement : "";
    int same_row = m->pl.pl_text && m->pl.pl_row == j->row && m->pl.pl_row_gen == r->c->rows_gen;
    if (!same_row && (!m->pl.pl_text || strcmp(m->pl.pl_text, t))) {
        struct ctl_placement p;
        ctl_placement_init(&p);
        int rc = ctl_placement_parse(t, &p, r->err, sizeof(r->err));
        char *dup = rc ? NULL : strdup(t);
        if (rc || !dup) {
            ctl_placement_release(&p);
            return rc ? rc : GQ_ENOMEM;
        }
        free(m->pl.pl_text);
        ctl_placement_release(&m->pl.pl_cache);
        m->pl.pl_text = dup;
        m->pl.pl_cache = p;
    }
    m->pl.pl_row = j->row;
    m->pl.pl_row_gen = r->c->rows_gen;
    return placement_copy(&j->pl, &m->pl.pl_cache);
}

/* Decode (cached), default, validate; upsert the store row. */
static int job_prepare_full(struct rc_ctx *r, struct cj *j);

/* job_prepare_full, then the row it leaves kept on the memo (it may have
 * replaced the row the memo kept, which is then freed). */
static int job_look_again(struct rc_ctx *r, struct cj *j)
{
    int rc = job_prepare_full(r, j);
    if (!rc)
        row_keep(r, j);
    return rc;
}

/* What the job's last full examination found (job_prepare) into j. */
static void prep_found(struct cj *j, const struct ctl_memo *m)
{
    j->failed_invalid = m->decode.prep_failed_invalid;
    j->invalid_reason = m->decode.prep_invalid_reason;
    if (j->invalid_reason)
        (void)ctl_str_set(&j->invalid_msg, m->decode.prep_invalid_msg, API_MSG_MAX);
}

static int finished(int state)
{
    return state == STORE_SUCCEEDED || state == STORE_FAILED;
}

/* The job's status reports an invalid spec (ctl_status_lane_state): it waits
 * on one, or failed for one; not a job that holds GPUs or finished whatever
 * its Team or spec became since. */
static int reports_invalid(const struct cj *j)
{
    return j->invalid_reason && (j->failed_invalid || (!holds(j->state) && !finished(j->state)));
}

/* A job not dirty: what its last full examination found, and its current
 * store row and placement (the scheduling core sees every job). */
static int job_prepare_clean(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    j->job = m->decode.job;
    j->decoded = 1;
    prep_found(j, m);
    j->row = row_kept(r, m);
    if (!j->row)
        j->row = row_find(r, j->key);
    if (!j->row || strcmp(j->row->uid, j->job->meta.uid) || j->row->generation != j->job->meta.generation)
        return job_look_again(r, j); /* the store moved on */
    row_keep(r, j);
    j->old_gpus = j->row->gpus;
    j->state = j->row->state;
    if (placement_load(r, j)) {
        ctl_placement_release(&j->pl);
        ctl_placement_init(&j->pl);
    }
    for (int p = intent_first(r, j->key); p < r->nintents && !strcmp(r->iidx[p].key, j->key); p++)
        if (r->intents[r->iidx[p].i].kind == STORE_INTENT_ADMIT)
            j->admit_pending = 1;
    return 0;
}

/* The last pod created for m's job is in the cache (or gone): the cache
 * follows it from now on. */
static void created_seen(struct rc_ctx *r, struct ctl_memo *m)
{
    if (m->pods.created_attempt &&
        (max_pod_attempt(r, m) >= m->pods.created_attempt ||
         (m->pods.created_pod && !strcmp(ctl_str(m->pods.gone_pod), m->pods.created_pod)))) {
        m->pods.created_attempt = 0;
        (void)ctl_str_set(&m->pods.created_pod, NULL, 0);
    }
}

static int has_intent(struct rc_ctx *r, const char *key)
{
    return intent_first(r, key) < r->nintents;
}

/* A finished job stays out of reconciles once nothing of it can change
 * without an event (called last in the report phase: nothing after it in
 * the reconcile reads the job's decode): Succeeded or Failed in the store, that status accepted
 * by the API server and not due again, every pod of it terminated and
 * nothing of it pending or in flight, and untouched by this reconcile. Its
 * decode, placement and last status text are freed (a woken job decodes
 * again; its first status is compared with what the object shows, so an
 * unchanged one is not written again). */
static void job_sleep(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    if (j->dormant || !m || !j->row || !finished(j->state) || (j->invalid_reason && !j->failed_invalid) ||
        !m->decode.prepared || m->dirty_upto > r->c->reconciles || j->admit_pending || has_intent(r, j->key))
        return;
    /* the API server holds the state: what it last accepted from us (if we
     * wrote since start) and what the cached object shows (else the watch
     * event of our write would wake the job) */
    const char *acc = j->state == STORE_SUCCEEDED ? "Succeeded" : "Failed";
    char ls[sizeof(m->status.status_state)]; /* what it was written as: "Failed/Invalid" for its spec */
    ctl_status_lane_state(acc, reports_invalid(j), ls, sizeof(ls));
    if (!m->status.last_status || !m->status.status_sig || m->status.status_inflight ||
        m->status.settle_due_ms || (m->status.status_state[0] && strcmp(m->status.status_state, ls)))
        return;
    /* last, as the dearest: the cached object's state (a member lookup) */
    const char *cached = ctl_obj_str(j->obj, "status", "state");
    if (!cached || strcmp(cached, acc))
        return;
    created_seen(r, m);
    if (m->pods.rel_any || m->pods.stray_any || m->pods.confirm_inflight || m->pods.cleanup_inflight ||
        m->pods.created_attempt || m->wait.wait_msg)
        return;
    for (int k = 0; k < m->pods.npods; k++)
        if (!m->pods.pf[k].terminal)
            return;
    ctl_memo_sleep(m);
    j->job = &api_gpujob_zero; /* what it pointed to is gone */
    j->decoded = 0;
    j->dormant = 1;
}

/* A dormant job in this reconcile: its store row and state only (no decode;
 * j->job stays the empty placeholder, j->decoded 0). Returns 0 when it must
 * wake instead: dirty (an event of it or its pods), a settle timer due, or
 * its row no longer the finished one it slept with. The row it slept with
 * is used as it is while the rows were not freed since (only examining the
 * job, which wakes it first, replaces its row): a dormant job costs no
 * lookup among the rows. */
static int job_dormant_view(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    if (m->dirty_upto >= r->c->reconciles || m->status.settle_due_ms || has_intent(r, j->key))
        return 0;
    struct store_job *row = row_kept(r, m); /* the one it slept with */
    if (!row) {
        row = row_find(r, j->key);
        if (!row || !finished(row->state) || strcmp(row->uid, m->decode.job_uid))
            return 0;
    }
    j->row = row;
    row_keep(r, j);
    j->state = row->state;
    j->dormant = 1;
    prep_found(j, m);
    return 1;
}

/* Decode (cached), default, validate; upsert the store row. A job not dirty
 * in a reconcile that is not a full pass reuses its last examination; a
 * dormant one is only looked up (job_dormant_view). */
static int job_prepare(struct rc_ctx *r, struct cj *j)
{
    j->memo = j->ent && j->ent->memo ? j->ent->memo : ctl_memo_get(&r->c->memo, j->key, 1);
    if (!j->memo)
        return GQ_ENOMEM;
    if (j->ent)
        j->ent->memo = j->memo;
    ctl_memo_seen(&r->c->memo, j->memo, r->c->reconciles);
    if (j->memo->decode.dormant) {
        if (job_dormant_view(r, j))
            return 0;
        j->memo->decode.dormant = 0; /* woken: examined in full by this reconcile */
        r->c->m.jobs_woken++;
        ctl_memo_dirty(j->memo, r->c->reconciles);
    }
    if (!job_dirty(r, j) && j->memo->decode.job_valid && j->memo->decode.job_lookup == r->lookup_sig) {
        r->c->m.jobs_reused++;
        return job_prepare_clean(r, j);
    }
    r->c->m.jobs_full++;
    int rc = job_look_again(r, j);
    if (!rc) {
        struct ctl_memo *m = j->memo;
        m->decode.prepared = 1;
        m->decode.prep_failed_invalid = j->failed_invalid;
        m->decode.prep_invalid_reason = j->invalid_reason;
        (void)ctl_str_set(&m->decode.prep_invalid_msg, j->invalid_reason ? ctl_str(j->invalid_msg) : "", API_MSG_MAX);
    }
    return rc;
}

static int job_prepare_full(struct rc_ctx *r, struct cj *j)
{
    int rc;
    j->memo->decode.prepared = 0;
    if ((rc = job_decode_cached(r, j, j->memo)))
        return rc;
    j->job = j->memo->decode.job;
    j->decoded = 1;
    if (j->memo->decode.job_nerr) {
        j->failed_invalid = 1;
        j->invalid_reason = "InvalidSpec";
        cj_invalid_msg(j, "invalid spec: %s%s", ctl_str(j->memo->decode.job_err),
                       j->memo->decode.job_nerr > 1 ? " (and more)" : "");
    } else if (job_refused(r, j)) {
        /* invalid_reason and invalid_msg set */
    } else if (j->job->spec.pool[0] && !pool_exists(r, j->job->spec.pool)) {
        j->invalid_reason = "UnknownPool";
        cj_invalid_msg(j, "GPUPool %s does not exist", j->job->spec.pool);
    }
    /* required node affinity is decoded by api and placed by the core like nodeSelector */

    const struct rteam *bad_team;
    if (j->invalid_reason && (!strcmp(j->invalid_reason, "NoTeam") || !strcmp(j->invalid_reason, "UnknownTeam")) &&
        (bad_team = team_invalid_for(r, j->job))) {
        j->invalid_reason = "InvalidTeam";
        if (cj_invalid_msg(j, "Team %s is invalid and no earlier valid spec of it is known: %s",
                           bad_team->latest.meta.name, bad_team->bad))
            LOGC(r->c, GQ_LOG_DEBUG, "job message truncated", " job=%s", j->key);
    }

    j->row = row_find(r, j->key);
    int fresh = !j->row;
    int changed_uid = j->row && strcmp(j->row->uid, j->job->meta.uid);
    j->gen_changed = !fresh && !changed_uid && j->row->generation != j->job->meta.generation;
    j->old_gpus = fresh || changed_uid ? -1 : j->row->gpus;
    int changed = fresh || changed_uid || j->row->generation != j->job->meta.generation ||
                  strcmp(j->row->team, j->job->spec.team) ||
                  j->row->priority != j->job->spec.effective_priority;
    if (changed) {
        struct store_job sj = {0};
        sj.key = j->key;
        sj.uid = j->job->meta.uid;
        sj.team = j->job->spec.team;
        sj.cls = api_class_name(j->job->spec.class);
        sj.priority = j->job->spec.effective_priority;
        sj.gpus = api_gpujob_gpus(j->job);
        sj.enqueue_ms = creation_ms(j, r->now);
        sj.state = j->job->spec.suspend ? STORE_SUSPENDED : STORE_QUEUED;
        sj.placement = "";
        sj.message = "";
        sj.generation = j->job->meta.generation;
        sj.resource_version = j->job->meta.resource_version;
        struct recovery *rec = NULL;
        rc = 0;
        if (fresh || changed_uid) {
            if (!(rec = calloc(1, sizeof(*rec))))
                return GQ_ENOMEM;
            ctl_placement_init(&rec->pl);
            gq_buf_init(&rec->text, 1u << 20);
            rc = row_recover(r, j, &sj, rec);
        }
        if (!rc)
            rc = store_job_upsert(r->c->st, &sj, r->now, r->err, sizeof(r->err));
        if (!rc && rec && rec->adopted) {
            ctl_placement_release(&j->pl);
            j->pl = rec->pl; /* ledger_set reads it; placement_load below sets it again */
            ctl_placement_init(&rec->pl);
            if (!(rc = ledger_set(r, j)) &&
                !(rc = audit(r, "adopt", j, j->key, "", rec->text.p, "pods found without a store row")))
                LOGC(r->c, GQ_LOG_WARN, "adopted running pods of a job unknown to the store",
                     " job=%s attempt=%d replicas=%d", j->key, j->pl.attempt, j->pl.n);
        } else if (!rc && rec && sj.state != STORE_QUEUED && sj.state != STORE_SUSPENDED) {
            LOGC(r->c, GQ_LOG_WARN, "job unknown to the store: state recovered from its status",
                 " job=%s state=%s attempts=%lld", j->key, store_state_name(sj.state), (long long)sj.attempts);
            rc = audit(r, "recover", j, j->key, "", store_state_name(sj.state), "GPUJob status");
        }
        if (rec) {
            ctl_placement_release(&rec->pl);
            gq_buf_release(&rec->text);
            free(rec);
        }
        if (rc)
            return rc;
        struct store_job *g = NULL;
        if ((rc = store_job_get(r->c->st, j->key, &g, r->err, sizeof(r->err))))
            return rc;
        struct store_job *cp = row_copy(g);
        store_job_free(g);
        if (!cp)
            return GQ_ENOMEM;
        int replaced = 0;
        if (j->row) {
            struct store_job **at = bsearch(&j->row, r->rows, (size_t)r->nrows, sizeof(*r->rows), row_cmp);
            if (at && *at == j->row) {
                free(*at);
                *at = cp;
                replaced = 1;
            }
        }
        j->row = cp;
        if (!replaced && (rc = row_insert(r, cp))) {
            free(cp);
            j->row = NULL;
            return rc;
        }
        if (fresh || changed_uid) {
            LOGC(r->c, GQ_LOG_INFO, "job queued", " job=%s team=%s gpus=%d", j->key,
                 j->job->spec.team, (int)sj.gpus);
            if ((rc = audit(r, "enqueue", j, j->key, "", "", "")))
                return rc;
        }
    }
    j->state = j->row->state;
    if ((rc = placement_load(r, j))) {
        LOGC(r->c, GQ_LOG_WARN, "bad placement in store, ignored", " job=%s err=\"%s\"", j->key, r->err);
        ctl_placement_release(&j->pl);
        rc = 0;
    }
    if (!fresh && !changed_uid &&
        ((rc = status_finished_override(r, j)) || (rc = status_running_adopt(r, j))))
        return rc;
    for (int p = intent_first(r, j->key); p < r->nintents && !strcmp(r->iidx[p].key, j->key); p++)
        if (r->intents[r->iidx[p].i].kind == STORE_INTENT_ADMIT)
            j->admit_pending = 1;
    return 0;
}

static int job_spec_rules(struct rc_ctx *r, struct cj *j)
{
    int rc = 0;
    int s = j->state;
    if (s == STORE_FAILED && !j->failed_invalid && j->gen_changed &&
        !strncmp(j->row->message, "invalid spec:", 13)) {
        /* the user fixed the spec: queue it (it keeps its enqueue time) */
        if ((rc = transition(r, j, j->job->spec.suspend ? STORE_SUSPENDED : STORE_QUEUED, "", "", NULL,
                             NULL, 0)) ||
            (rc = audit(r, "revalidate", j, j->key, "Failed", store_state_name(j->state), "spec fixed")))
            return rc;
        event_add(r, j->obj, "Normal", "Revalidated", "spec is valid now: queued");
        LOGC(r->c, GQ_LOG_INFO, "job revalidated", " job=%s", j->key);
        return 0;
    }
    if (s == STORE_SUCCEEDED || s == STORE_FAILED)
        return 0;
    struct act a;
    act_begin(r, j, &a);
    if (j->failed_invalid) {
        j->released |= holds(s);
        if ((rc = act_end(r, j, apply_fail(&a.x, &a.j, ctl_str(j->invalid_msg), "invalid"))))
            return rc;
        event_add(r, j->obj, "Warning", "Failed", "%s", ctl_str(j->invalid_msg));
        LOGC(r->c, GQ_LOG_WARN, "job failed: invalid", " job=%s msg=\"%s\"", j->key, ctl_str(j->invalid_msg));
        return 0;
    }
    if (holds(s) && j->gen_changed && !j->job->spec.suspend &&
        (j->old_gpus != api_gpujob_gpus(j->job) ||
         (j->job->spec.gang != API_FALSE && j->pl.n != j->job->spec.replicas))) {
        /* the admitted shape no longer matches the spec: place it again */
        char msg[API_MSG_MAX];
        snprintf(msg, sizeof(msg), "spec changed while admitted (%lld -> %d GPUs, %d replicas): requeued",
                 (long long)j->old_gpus, (int)api_gpujob_gpus(j->job), (int)j->job->spec.replicas);
        j->released = 1;
        if ((rc = act_end(r, j, apply_requeue_spec(&a.x, &a.j, msg))))
            return rc;
        event_add(r, j->obj, "Normal", "Requeued", "%s", msg);
        LOGC(r->c, GQ_LOG_INFO, "job requeued: spec changed", " job=%s", j->key);
        return 0;
    }
    if (j->job->spec.suspend && s != STORE_SUSPENDED) {
        j->released |= holds(s);
        if ((rc = act_end(r, j, apply_suspend(&a.x, &a.j))))
            return rc;
        event_add(r, j->obj, "Normal", "Suspended", "job suspended (spec.suspend=true)%s",
                  holds(s) ? "; its pods are being deleted" : "");
        LOGC(r->c, GQ_LOG_INFO, "job suspended", " job=%s was=%s", j->key, store_state_name(s));
    } else if (!j->job->spec.suspend && s == STORE_SUSPENDED) {
        if ((rc = act_end(r, j, apply_resume(&a.x, &a.j))))
            return rc;
        event_add(r, j->obj, "Normal", "Resumed", "job resumed: queued at its original place");
        LOGC(r->c, GQ_LOG_INFO, "job resumed", " job=%s", j->key);
    }
    return 0;
}

static int requeue(struct rc_ctx *r, struct cj *j, const char *why)
{
    int rc, over = 0;
    char msg[API_MSG_MAX];
    struct act a;
    act_begin(r, j, &a);
    j->released = 1;
    if ((rc = act_end(r, j, apply_requeue(&a.x, &a.j, j->row->retries, r->c->cfg.max_retries, why, msg,
                                          sizeof(msg), &over))))
        return rc;
    if (over) {
        event_add(r, j->obj, "Warning", "Failed", "%s", msg);
        LOGC(r->c, GQ_LOG_WARN, "job failed", " job=%s msg=\"%s\"", j->key, msg);
    } else {
        event_add(r, j->obj, "Warning", "Requeued", "%s", msg);
        LOGC(r->c, GQ_LOG_WARN, "job requeued", " job=%s msg=\"%s\"", j->key, msg);
    }
    return 0;
}

/* The API server refused one of the job's pods: fail the job with its answer. */
static int job_create_refused(struct rc_ctx *r, struct cj *j)
{
    int rc = 0;
    char msg[API_MSG_MAX];
    if (!j->memo || !j->memo->pods.create_err || !holds(j->state))
        return 0;
    snprintf(msg, sizeof(msg), "pod create refused by the API server: %s", j->memo->pods.create_err);
    (void)ctl_str_set(&j->memo->pods.create_err, NULL, 0);
    for (int p = intent_first(r, j->key); p < r->nintents && !strcmp(r->iidx[p].key, j->key); p++) {
        const struct store_intent *in = &r->intents[r->iidx[p].i];
        if (in->kind == STORE_INTENT_ADMIT && !ctl_act_inflight(&r->c->act, in->id) &&
            (rc = store_intent_done(r->c->st, in->id, r->now, r->err, sizeof(r->err))))
            return rc;
    }
    j->admit_pending = 0;
    struct act a;
    act_begin(r, j, &a);
    j->released = 1;
    if ((rc = act_end(r, j, apply_fail(&a.x, &a.j, msg, "create-refused"))))
        return rc;
    event_add(r, j->obj, "Warning", "Failed", "%s", msg);
    LOGC(r->c, GQ_LOG_WARN, "job failed: pod refused", " job=%s msg=\"%s\"", j->key, msg);
    return 0;
}

/* A job whose pods of one attempt all Succeeded is Succeeded, whatever was
 * decided meanwhile: a preemption, suspend or requeue decided on a view of
 * its pods that was not current yet, or a newer attempt admitted since. The
 * attempt a holding job runs now is left to job_lifecycle's own rule. */
static int job_succeeded_meanwhile(struct rc_ctx *r, struct cj *j)
{
    int s = j->state, np = 0, rc;
    if (j->failed_invalid || !j->row ||
        (s != STORE_QUEUED && s != STORE_PREEMPTED && s != STORE_SUSPENDED && !holds(s)))
        return 0;
    const cJSON **pods = memo_pods(r, j->memo, &np);
    int ngone = j->memo->pods.gone_ok ? cJSON_GetArraySize(j->memo->pods.gone_ok) : 0;
    int a = 0;
    if (ngone) {
        /* the cached pods and those deleted while Succeeded */
        const cJSON **all = calloc((size_t)(np + ngone), sizeof(*all));
        if (!all)
            return GQ_ENOMEM;
        int n = 0;
        for (int i = 0; i < np; i++)
            all[n++] = pods[i];
        const cJSON *g;
        cJSON_ArrayForEach(g, j->memo->pods.gone_ok)
        {
            if (n < np + ngone)
                all[n++] = g;
        }
        a = ctl_pods_succeeded_attempt(all, n, j->job->meta.uid, j->job->spec.replicas);
        free(all);
    } else if (np) {
        a = ctl_pods_succeeded_attempt(pods, np, j->job->meta.uid, j->job->spec.replicas);
    }
    if (!a || (holds(s) && a == j->pl.attempt))
        return 0;
    char msg[API_MSG_MAX];
    snprintf(msg, sizeof(msg), "every replica succeeded (attempt %d)", a);
    struct act ac;
    act_begin(r, j, &ac);
    j->released |= holds(s);
    if ((rc = act_end(r, j, apply_succeed(&ac.x, &ac.j, msg, 1))))
        return rc;
    event_add(r, j->obj, "Normal", "Succeeded", "%s; it was %s when that was seen", msg, store_state_name(s));
    LOGC(r->c, GQ_LOG_INFO, "job succeeded (its pods finished before what was decided meanwhile)",
         " job=%s was=%s attempt=%d", j->key, store_state_name(s), a);
    return 0;
}

/* Lifecycle of an admitted job from its pods. */
static int job_lifecycle(struct rc_ctx *r, struct cj *j)
{
    j->memo->pods.steady = 0;
    int rc0 = job_succeeded_meanwhile(r, j);
    if (rc0 || !holds(j->state) || j->admit_pending || j->failed_invalid)
        return rc0;
    int unready = 0; /* a live pod on a node not Ready (lost once its grace ends) */
    int np = 0;
    const cJSON **pods = memo_pods(r, j->memo, &np);
    int running = 0, succeeded = 0, missing = 0;
    int lost_rep[API_REPLICAS_MAX];
    int nlost = 0;
    char why[API_MSG_MAX] = "", confirm[API_NAME_MAX + 32] = "";
    for (int k = 0; k < j->pl.n; k++) {
        const struct ctl_prep *p = &j->pl.rep[k];
        char name[API_NAME_MAX + 32];
        ctl_pod_name(j->job->meta.name, &j->pl, p, name, sizeof(name));
        const cJSON *pod = NULL;
        const struct ctl_podfacts *f = NULL;
        for (int i = 0; i < np; i++) {
            const char *pn = j->memo->pods.pf[i].name;
            if (pn && !strcmp(pn, name)) {
                pod = pods[i];
                f = &j->memo->pods.pf[i];
                break;
            }
        }
        char w[API_MSG_MAX] = "";
        struct rnode *n;
        const char *ph = f ? f->phase : NULL;
        if (!pod) {
            /* gone only when the API server said so (delete event, GET 404);
             * absent from the cache for a while: ask it */
            missing++;
            if (!strcmp(ctl_str(j->memo->pods.gone_pod), name))
                snprintf(w, sizeof(w), "pod %s was deleted", name);
            else if (!confirm[0] && j->memo->pods.missing_since_ms &&
                     r->now - j->memo->pods.missing_since_ms > CTL_MISSING_GRACE_MS)
                gq_strlcpy(confirm, name, sizeof(confirm));
        } else if (ph && !strcmp(ph, "Failed")) {
            snprintf(w, sizeof(w), "pod %s failed", name);
        } else if (ph && !strcmp(ph, "Succeeded")) {
            succeeded++;
            continue;
        } else if (f->deletion) {
            snprintf(w, sizeof(w), "pod %s is being deleted", name);
        } else if (node_lost_at(r, (n = node_find(r, p->node)), p->node, w, sizeof(w))) {
            /* w set */
        } else {
            unready += !n->ni.ready;
            if (ph && !strcmp(ph, "Running"))
                running++;
        }
        if (w[0]) {
            lost_rep[nlost++] = p->replica;
            if (!why[0])
                gq_strlcpy(why, w, sizeof(why));
        }
    }
    if (missing && !j->memo->pods.missing_since_ms)
        j->memo->pods.missing_since_ms = r->now;
    if (!missing)
        j->memo->pods.missing_since_ms = 0;
    if (confirm[0] && !nlost)
        ctl_pod_confirm(r->c, j->key, j->job->meta.namespace, confirm);
    int rc = 0;
    if (nlost) {
        j->memo->pods.missing_since_ms = 0;
        if (j->job->spec.gang != API_FALSE)
            return requeue(r, j, why);
        /* non-gang: drop the lost replicas; the core re-places them */
        for (int i = 0; i < nlost; i++)
            ctl_placement_remove(&j->pl, lost_rep[i]);
        struct gq_buf b;
        gq_buf_init(&b, 1u << 20);
        if ((rc = ctl_placement_format(&j->pl, &b)))
            goto nb_out;
        if (j->pl.n == 0) {
            rc = requeue(r, j, why);
            goto nb_out;
        }
        struct act a;
        act_begin(r, j, &a);
        if ((rc = act_end(r, j, apply_replace_replica(&a.x, &a.j, &j->pl, pl_product(r, &j->pl), why))))
            goto nb_out;
        event_add(r, j->obj, "Warning", "ReplicaLost", "%s; it will be placed again", why);
        LOGC(r->c, GQ_LOG_WARN, "replica lost", " job=%s msg=\"%s\"", j->key, why);
    nb_out:
        gq_buf_release(&b);
        return rc;
    }
    int want = j->job->spec.replicas;
    if (succeeded == j->pl.n && j->pl.n == want && want > 0) {
        struct act a;
        act_begin(r, j, &a);
        if ((rc = act_end(r, j, apply_succeed(&a.x, &a.j, "every replica succeeded", 0))))
            return rc;
        event_add(r, j->obj, "Normal", "Succeeded", "every replica succeeded");
        LOGC(r->c, GQ_LOG_INFO, "job succeeded", " job=%s", j->key);
        return 0;
    }
    if (j->state == STORE_ADMITTED && running + succeeded == j->pl.n && running > 0 &&
        (j->pl.n == want || j->job->spec.gang == API_FALSE)) {
        struct act a;
        act_begin(r, j, &a);
        if ((rc = act_end(r, j, apply_running(&a.x, &a.j))))
            return rc;
        LOGC(r->c, GQ_LOG_INFO, "job running", " job=%s", j->key);
        return 0; /* its row was written: examined again by the next reconcile */
    }
    j->memo->pods.steady = !missing && !unready;
    return 0;
}

/* ------------------------------------------------------------ cycle */

struct usage_map {
    struct rc_ctx *r;
    double *u;
};

static int usage_cb(void *ud, const char *team, double v)
{
    struct usage_map *m = ud;
    for (int i = 0; i < m->r->nteams; i++)
        if (!strcmp(m->r->teams[i].meta.name, team))
            m->u[i] = v;
    return 0;
}

/* A job that holds nothing (Queued, Preempted with no stopping pod) whose
 * earlier attempt may still run: a pod of it neither finished nor marked for
 * deletion (a delete refused with 409 because the pod changed leaves it so
 * until the cache shows what it became: Succeeded completes the job through
 * job_succeeded_meanwhile, anything else is deleted again as a stray), or a
 * pod it created that the cache does not show yet (asked of the API server
 * after CTL_MISSING_GRACE_MS). Such a job is not placed again: two attempts
 * would run at once, both possibly to completion. */
static int earlier_attempt_runs(struct rc_ctx *r, struct cj *j)
{
    struct ctl_memo *m = j->memo;
    int np = 0;
    if (!m)
        return 0;
    const cJSON **pods = memo_pods(r, m, &np);
    created_seen(r, m);
    if (m->pods.created_attempt) {
        if (r->now - m->pods.created_ms > CTL_MISSING_GRACE_MS && m->pods.created_pod) {
            ctl_pod_confirm(r->c, j->key, j->job->meta.namespace, m->pods.created_pod);
            m->pods.created_ms = r->now; /* asked again after another grace period */
        }
        return 1;
    }
    return np && ctl_pods_live(pods, np, j->job->meta.uid);
}

/* The class label of a job's metrics ("None" before defaulting). */
static const char *metric_class(const struct cj *j)
{
    enum api_class k = j->job->spec.class;
    return k > API_CLASS_NONE && k < API_CLASS_COUNT ? api_class_name(k) : "None";
}

/* gangq_admissions_total / gangq_preemptions_total{team,class} += 1 (a series
 * past the family's bound is refused and counted by the registry). */
static void metric_decision(struct rc_ctx *r, const char *family, const struct cj *j)
{
    struct gq_metric *h = NULL;
    const char *team = j->job->spec.team[0] ? j->job->spec.team : "none";
    if (r->c->metrics &&
        !gq_metrics_counter(r->c->metrics, family, "", (const char *[]){"team", team, "class", metric_class(j), NULL},
                            &h, NULL, 0))
        gq_metrics_inc(h);
}

static int decide_admit(struct rc_ctx *r, struct ctl_snap *s, const struct sched_decision *d)
{
    struct cj *j = &r->jobs[s->job_in[d->job]];
    int was = j->state;
    int partial = holds(was);
    int rc = 0;
    (void)ctl_str_set(&j->memo->pods.gone_pod, NULL, 0); /* names of this admission's pods are new */
    ctl_memo_victims_clear(j->memo); /* the jobs preempted for it no longer wait for it */
    if (!partial) {
        ctl_placement_release(&j->pl);
        /* above any attempt whose pods may still exist (adopted, or a lost store) */
        /* ... and above the attempt its status records (a store older than the API server) */
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j->obj, "status"), "attempt");
        int64_t floor = cJSON_IsNumber(sa) && sa->valuedouble > 0 && sa->valuedouble < 1000000 ? (int64_t)sa->valuedouble : 0;
        j->pl.attempt = (int)GQ_MAX(GQ_MAX(j->row->attempts, max_pod_attempt(r, j->memo)), floor) + 1;
    }
    if (d->domain && !partial)
        gq_strlcpy(j->pl.domain, d->domain, sizeof(j->pl.domain));
    struct act a;
    act_begin(r, j, &a);
    if ((rc = apply_placement_add(&j->pl, s->snap.nodes, d->rep, d->nrep, partial)) ||
        (rc = act_end(r, j, apply_admit(&a.x, &a.j, &j->pl, pl_product(r, &j->pl), d->message))))
        return rc;
    j->admit_pending = 1;
    r->c->m.admissions++;
    metric_decision(r, CTL_M_ADMISSIONS, j);
    if (!partial && j->pl.attempt == 1) {
        /* creation -> first admission (a requeued or preempted job's later
         * admissions would measure its run, not its wait) */
        enum api_class k = j->job->spec.class;
        double waited = (double)(r->now - creation_ms(j, r->now)) / 1000.0;
        gq_metrics_observe(r->c->mh.admit_wait[k > API_CLASS_NONE && k < API_CLASS_COUNT ? k : 0],
                           waited > 0 ? waited : 0);
    }
    event_add(r, j->obj, "Normal", "Admitted", "%s", d->message ? d->message : "admitted");
    LOGC(r->c, GQ_LOG_INFO, "job admitted", " job=%s replicas=%d domain=%s msg=\"%s\"", j->key,
         d->nrep, d->domain ? d->domain : "", d->message ? d->message : "");
    return 0;
}

static int decide_preempt(struct rc_ctx *r, struct ctl_snap *s, const struct sched_decision *d)
{
    struct cj *j = &r->jobs[s->job_in[d->job]];
    const char *by = d->for_job >= 0 ? s->jobs[d->for_job].id : "";
    const char *why = d->message ? d->message : "preempted";
    int rc;
    struct act a;
    act_begin(r, j, &a);
    j->released = 1;
    if ((rc = act_end(r, j, apply_preempt(&a.x, &a.j, by, why))))
        return rc;
    r->c->m.preemptions++;
    metric_decision(r, CTL_M_PREEMPTIONS, j);
    if (d->for_job >= 0 && (rc = ctl_memo_victim_add(r->jobs[s->job_in[d->for_job]].memo, j->key)))
        return rc;
    if (strstr(why, by))
        event_add(r, j->obj, "Warning", "Preempted", "%s", why);
    else
        event_add(r, j->obj, "Warning", "Preempted", "preempted to make room for %s: %s", by, why);
    LOGC(r->c, GQ_LOG_INFO, "job preempted", " job=%s by=%s reason=\"%s\"", j->key, by, why);
    return 0;
}

static int run_sched(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc = 0;
    /* the core's inputs, in arrays kept from the last reconcile */
    size_t nin = (size_t)r->njobs + 1;
    struct ctl_jobin *ins = c->ins_keep = keep_reserve(c->ins_keep, &c->ins_keep_cap, nin, sizeof(*ins));
    int *ins_job = c->ins_job_keep = /* ins[k] is r->jobs[ins_job[k]] */
        keep_reserve(c->ins_job_keep, &c->ins_job_keep_cap, nin, sizeof(*ins_job));
    if (ins && ins_job) {
        memset(ins, 0, nin * sizeof(*ins));
        memset(ins_job, 0, nin * sizeof(*ins_job));
    }
    double *usage = calloc((size_t)r->nteams + 1, sizeof(*usage));
    struct ctl_snap s;
    struct sched_result *res = NULL;
    memset(&s, 0, sizeof(s));
    s.keep = c->snap_keep; /* the last reconcile's arrays, reused */
    memset(&c->snap_keep, 0, sizeof(c->snap_keep));
    if (!ins || !usage || !ins_job) {
        rc = GQ_ENOMEM;
        goto out;
    }
    struct usage_map um = {r, usage};
    if ((rc = store_usage_decayed_all(c->st, r->now, c->cfg.usage_half_life_s, usage_cb, &um,
                                      r->err, sizeof(r->err))))
        goto out;
    int n = 0;
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        int st = j->state;
        /* a job that waits on a problem (unknown or deleted Team, pool, ...) is
         * not placed; one that holds GPUs stays in the snapshot whatever its
         * Team, pool or spec became: GPUs held by live pods are never offered
         * again (a missing Team gives it no quota, not free GPUs) */
        int stopping = j->row && st == STORE_PREEMPTED && j->term.n > 0;
        if (!j->row || (j->invalid_reason && !holds(st) && !stopping))
            continue;
        if (st != STORE_QUEUED && st != STORE_PREEMPTED && !holds(st))
            continue;
        if (!holds(st) && !stopping && earlier_attempt_runs(r, j))
            continue; /* placed again only once its earlier attempt has stopped */
        ins[n] = (struct ctl_jobin){j->key, j->job, holds(st) || stopping, j->row->enqueue_ms,
                                    j->row->admitted_ms, stopping ? &j->term : &j->pl,
                                    j->row->preempted_by, j->memo ? ctl_str(j->memo->wait.reserved) : NULL,
                                    stopping, stopping ? j->row->preempted_by : NULL,
                                    j->row->arrival, j->invalid_reason != NULL,
                                    j->memo ? (const char *const *)j->memo->victims.victims : NULL,
                                    j->memo ? j->memo->victims.nvictims : 0};
        ins_job[n] = i;
        n++;
    }
    /* map ins back to r->jobs: keep the index in a parallel array via key lookup */
    struct ctl_snapin in = {&c->scfg, r->now / 1000, r->nodes, r->nnodes,
                            r->foreign, r->nforeign, r->pools, r->npools, r->teams, r->nteams,
                            usage, ins, n};
    if ((rc = ctl_snap_build(&s, &in, r->err, sizeof(r->err))))
        goto out;
    /* s.job_in indexes ins[]; translate to r->jobs indices */
    for (int k = 0; k < s.snap.njobs; k++)
        s.job_in[k] = ins_job[s.job_in[k]];
    int64_t t0 = ctl_now_ms();
    if ((rc = sched_cycle(c->sched, &s.snap, &res, r->err, sizeof(r->err))))
        goto out;
    r->sched_ran = 1;
    c->m.cycles++;
    c->m.last_cycle_ms = (double)(ctl_now_ms() - t0);
    gq_metrics_observe(c->mh.cycle_dur, c->m.last_cycle_ms / 1000.0);
    /* the decisions below say what is current: a job whose explanation
     * changes is examined in full (its status may change) */
    for (int k = 0; k < s.snap.njobs; k++) {
        struct ctl_memo *m = r->jobs[s.job_in[k]].memo;
        m->wait.wait_gen = m->wait.wait_msg ? 1 : 0; /* 1: had one, not yet renewed */
        m->wait.position = 0;
        m->wait.gposition = 0; /* reserved: renewed by its WAIT, else cleared below */
    }
    int gpos = 0; /* WAITs come in the core's admission order across Teams */
    for (int k = 0; k < res->n; k++) {
        const struct sched_decision *d = &res->d[k];
        struct cj *j = &r->jobs[s.job_in[d->job]];
        if (d->kind == SCHED_ADMIT)
            rc = decide_admit(r, &s, d);
        else if (d->kind == SCHED_PREEMPT)
            rc = decide_preempt(r, &s, d);
        else if (d->kind == SCHED_WAIT) {
            const char *msg = d->message ? d->message : "";
            if (j->memo->wait.wait_gen != 2 && strcmp(ctl_str(j->memo->wait.wait_msg), msg)) {
                (void)ctl_str_set(&j->memo->wait.wait_msg, msg, SCHED_MSG_MAX);
                job_touch_status(r, j);
            }
            j->memo->wait.wait_gen = 2;
            j->memo->wait.position = d->position;
            j->memo->wait.gposition = ++gpos;
            (void)ctl_str_set(&j->memo->wait.reserved, d->reserved, 256);
            const char *unsched = d->unschedulable && d->unschedulable_msg ? d->unschedulable_msg : "";
            if (strcmp(ctl_str(j->memo->wait.unsched_msg), unsched)) {
                (void)ctl_str_set(&j->memo->wait.unsched_msg, unsched, SCHED_MSG_MAX);
                job_touch_status(r, j);
            }
        }
        if (rc)
            goto out;
    }
    for (int k = 0; k < s.snap.njobs; k++) {
        struct cj *j = &r->jobs[s.job_in[k]];
        if (j->memo->wait.wait_gen == 1) { /* no WAIT this time: no explanation */
            (void)ctl_str_set(&j->memo->wait.wait_msg, NULL, 0);
            job_touch_status(r, j);
        }
        if (j->memo->wait.wait_gen != 2)
            (void)ctl_str_set(&j->memo->wait.reserved, NULL, 0);
        if (j->memo->wait.wait_gen != 2 && j->memo->wait.unsched_msg) {
            (void)ctl_str_set(&j->memo->wait.unsched_msg, NULL, 0);
            job_touch_status(r, j);
        }
        j->memo->wait.wait_gen = 0;
    }
out:
    sched_result_free(res);
    c->snap_keep = s.keep; /* for the next reconcile (freed at stop) */
    free(usage); /* ins and ins_job are c's */
    return rc;
}

/* ------------------------------------------------------------ status */

/* A job's status signature: everything ctl_status_compute reads besides
 * prev and the clock, hashed (a string is its length, then its bytes). The
 * status of a job whose inputs equal those of its last written status (prev
 * = that status) is that status again. */
static uint64_t sig_int(uint64_t h, int64_t v)
{
    return gq_hash_bytes(h, &v, sizeof(v));
}

static uint64_t sig_str(uint64_t h, const char *s)
{
    if (!s)
        return sig_int(h, -1); /* NULL differs from "" */
    size_t n = strlen(s);
    return gq_hash_bytes(sig_int(h, (int64_t)n), s, n);
}

/* The signature of j's status inputs v (never 0); urgent: without the
 * position and the message text (what a refresh may change alone). */
static uint64_t status_sig(const struct cj *j, const struct ctl_jobview *v, int urgent)
{
    uint64_t h = GQ_HASH_SEED;
    const int64_t n[] = {v->state, urgent ? 0 : v->position, v->preemptions, v->preempted_ms, v->admitted_ms,
                         j->job->spec.effective_priority, api_gpujob_gpus(j->job), v->attempts,
                         v->retries, v->enqueue_ms, v->arrival, j->job->meta.generation, j->pl.n};
    for (size_t i = 0; i < GQ_ARRAY_LEN(n); i++)
        h = sig_int(h, n[i]);
    const char *t[] = {j->job->spec.team, v->invalid_reason, v->wait_reason, j->pl.domain,
                       urgent ? "" : v->message, v->preempted_by, v->preempt_reason, v->unschedulable};
    for (size_t i = 0; i < GQ_ARRAY_LEN(t); i++)
        h = sig_str(h, t[i]);
    for (int i = 0; i < j->pl.n; i++)
        h = sig_str(h, j->pl.rep[i].node);
    return h ? h : 1;
}

/* The story of a wait in a job's conditions: while it waits, Admitted=False
 * and Queued=True carry its wait reason (status.waitReason: Quota, Nodes,
 * ...; the state's name before the core explained it) and explanation, so
 * they follow each change of reason; once admitted (or finished, suspended)
 * Queued is False with the state's name. Transition times from prev when the
 * status stays. */
static void wait_conditions(struct api_gpujob_status *out, const struct api_gpujob_status *prev, int state,
                            int64_t now_ms)
{
    int waiting = state == STORE_QUEUED || state == STORE_PREEMPTED;
    const char *reason = waiting && out->wait_reason[0] ? out->wait_reason : store_state_name(state);
    char now[API_TIME_MAX];
    ctl_time_format(now_ms, now, sizeof(now));
    for (int i = 0; waiting && i < out->nconditions; i++)
        if (!strcmp(out->conditions[i].type, "Admitted")) {
            gq_strlcpy(out->conditions[i].reason, reason, sizeof(out->conditions[i].reason));
            if (out->message[0])
                gq_strlcpy(out->conditions[i].message, out->message, sizeof(out->conditions[i].message));
        }
    if (out->nconditions >= API_MAX_CONDITIONS)
        return;
    struct api_condition *c = &out->conditions[out->nconditions++];
    memset(c, 0, sizeof(*c));
    gq_strlcpy(c->type, "Queued", sizeof(c->type));
    gq_strlcpy(c->status, waiting ? "True" : "False", sizeof(c->status));
    gq_strlcpy(c->reason, reason, sizeof(c->reason));
    /* never empty: the 1.20 API server reads "" as null and refuses it */
    gq_strlcpy(c->message, waiting && out->message[0] ? out->message : reason, sizeof(c->message));
    gq_strlcpy(c->last_transition_time, now, sizeof(c->last_transition_time));
    for (int i = 0; prev && i < prev->nconditions; i++)
        if (!strcmp(prev->conditions[i].type, "Queued") && !strcmp(prev->conditions[i].status, c->status) &&
            prev->conditions[i].last_transition_time[0])
            gq_strlcpy(c->last_transition_time, prev->conditions[i].last_transition_time,
                       sizeof(c->last_transition_time));
}

static void job_status(struct rc_ctx *r, struct cj *j)
{
    if (!j->decoded || !j->row)
        return;
    const char *msg = j->row->message;
    int waiting = j->state == STORE_QUEUED || j->state == STORE_PREEMPTED;
    const struct ctl_waitpub *pub = &j->memo->wait.pub;
    if (waiting && pub->set && pub->msg)
        msg = pub->msg; /* what ctl_wait_publish let through (waiting_publish) */
    else if (j->invalid_reason && !j->failed_invalid)
        msg = ctl_str(j->invalid_msg);
    else if ((waiting || holds(j->state)) && j->memo->wait.wait_msg)
        msg = j->memo->wait.wait_msg;
    const char *reason = NULL;
    if (waiting)
        reason = ctl_wait_class_name(pub->set ? pub->cls : CTL_WAIT_NONE);
    struct ctl_jobview v = {j->state, msg, waiting ? pub->position : 0, j->row->preemptions,
                            j->row->preempted_by, j->row->preempt_reason, j->row->preempted_ms,
                            j->row->admitted_ms, &j->pl, j->invalid_reason, j->row->attempts,
                            j->row->retries, j->row->enqueue_ms, j->row->arrival, reason,
                            waiting && !j->invalid_reason ? ctl_str(j->memo->wait.unsched_msg) : NULL};
    uint64_t sig = status_sig(j, &v, 0);
    if (j->memo->status.last_status && j->memo->status.status_sig == sig) {
        j->memo->status.settle_due_ms = 0; /* what is written is still right */
        return;
    }
    int64_t due = status_held(r, j);
    if (due) {
        settle_hold(r, j, due); /* written then, unless replaced or unchanged by then */
        return;
    }
    j->memo->status.settle_due_ms = 0;
    /* a refresh (only the position or the message text changed since the
     * status last written): within --status-refresh-qps, else offered again
     * by the next reconcile */
    uint64_t usig = status_sig(j, &v, 1);
    int refresh = j->memo->status.last_status && j->memo->status.urgent_sig == usig;
    int64_t wait = refresh ? gq_rate_wait_ms(&r->c->refresh, r->now) : 0;
    if (wait) {
        r->c->m.refresh_held++;
        if (j->memo->status_upto <= r->c->reconciles)
            j->memo->status_upto = r->c->reconciles + 1; /* its status only, not a full look */
        /* and a reconcile when the next token is there (the settle timer) */
        if (!r->settle_next || r->now + wait < r->settle_next)
            r->settle_next = r->now + wait;
        return;
    }
    char path[CTL_PATH_MAX];
    if (kube_path(path, sizeof(path), "/apis/gangq.io/v1alpha1", j->job->meta.namespace, "gpujobs",
                  j->job->meta.name, NULL))
        return;
    /* a status that changes no state goes in the low lane; while that is
     * full it would be refused: not built now, offered again later as a
     * refused one is (building it is most of a waiting job's report cost) */
    if (ctl_status_would_refuse(r->c, j->key, path, store_state_name(j->state), reports_invalid(j))) {
        r->c->m.status_deferred++;
        return;
    }
    struct api_gpujob_status prev, out;
    struct api_errors e;
    api_errors_init(&e);
    memset(&prev, 0, sizeof(prev));
    if (j->memo->status.last_status) {
        cJSON *o = cJSON_Parse(j->memo->status.last_status);
        if (o)
            api_gpujob_status_decode(o, &prev, &e);
        cJSON_Delete(o);
    } else {
        ctl_job_status_decode(j->obj, &prev, &e);
    }
    const char **nodes = calloc((size_t)j->pl.n + 1, sizeof(*nodes));
    if (!nodes)
        return;
    ctl_status_compute(j->job, &prev, &v, r->now, nodes, j->pl.n, &out);
    wait_conditions(&out, &prev, j->state, r->now);
    cJSON *patch = api_gpujob_status_encode(&out);
    free(nodes);
    if (!patch)
        return;
    if (!j->memo->status.last_status && !e.n && !e.dropped) {
        /* first status since start: the object may already show it (after a
         * restart); then it is what was last written */
        cJSON *cur = api_gpujob_status_encode(&prev);
        char *a = cur ? cJSON_PrintUnformatted(cur) : NULL, *b = a ? cJSON_PrintUnformatted(patch) : NULL;
        if (a && b && !strcmp(a, b)) {
            j->memo->status.last_status = a;
            a = NULL;
        }
        free(a);
        free(b);
        cJSON_Delete(cur);
    }
    const char *before = j->memo->status.last_status;
    int taken = !ctl_status_write(r->c, j->key, path, patch, reports_invalid(j));
    if (j->memo->status.last_status != before)
        j->memo->status.status_sent_ms = r->now; /* a patch went out (or waits in line) */
    cJSON_Delete(patch);
    /* taken: last_status holds the status of these inputs (written, in
     * flight or already equal; a failed patch clears last_status, so it is
     * computed again); not taken (a full low lane): computed and offered
     * again later */
    j->memo->status.status_sig = taken && j->memo->status.last_status ? sig : 0;
    j->memo->status.urgent_sig = taken && j->memo->status.last_status ? usig : 0;
    if (taken && refresh && j->memo->status.last_status != before) {
        (void)gq_rate_take(&r->c->refresh, r->now);
        r->c->m.refresh_sent++;
    }
}

/* The Team's Valid condition: False with the latest edit's problem and what
 * is in force instead (InvalidSpec); else False while an older Team owns a
 * namespace the spec in force lists (NamespaceConflict: older, its namespace
 * ns); else True. Never an empty message (the API server stores "" in a
 * map-list entry as null and refuses it). Its transition time comes from prev. */
static void team_valid_condition(const struct rteam *ti, const struct api_team *older, const char *ns,
                                 const struct api_team_status *prev, const char *now,
                                 struct api_condition *c)
{
    memset(c, 0, sizeof(*c));
    gq_strlcpy(c->type, "Valid", sizeof(c->type));
    gq_strlcpy(c->status, ti->bad[0] || older ? "False" : "True", sizeof(c->status));
    gq_strlcpy(c->reason, ti->bad[0] ? "InvalidSpec" : older ? "NamespaceConflict" : "Valid",
               sizeof(c->reason));
    if (!ti->bad[0] && older)
        snprintf(c->message, sizeof(c->message),
                 "namespace %s belongs to Team %.100s (the older one): this Team's claim on it is "
                 "ignored and work there stays with that Team",
                 ns, older->meta.name);
    else if (!ti->bad[0])
        gq_strlcpy(c->message, "spec is valid and every namespace it lists is this Team's",
                   sizeof(c->message));
    else if (ti->idx >= 0)
        snprintf(c->message, sizeof(c->message), "generation %lld is invalid, generation %lld stays in force: %.300s",
                 (long long)ti->gen, (long long)ti->gen_in_force, ti->bad);
    else
        snprintf(c->message, sizeof(c->message),
                 "generation %lld is invalid and no earlier valid spec is known (its jobs wait): %.300s",
                 (long long)ti->gen, ti->bad);
    for (int i = 0; prev && i < prev->nconditions; i++)
        if (!strcmp(prev->conditions[i].type, "Valid") && !strcmp(prev->conditions[i].status, c->status) &&
            prev->conditions[i].last_transition_time[0]) {
            gq_strlcpy(c->last_transition_time, prev->conditions[i].last_transition_time,
                       sizeof(c->last_transition_time));
            return;
        }
    gq_strlcpy(c->last_transition_time, now, sizeof(c->last_transition_time));
}

/* Team and pool statuses hold counters that move with every admission:
 * written at once when nothing was written yet or what is urgent changed (a
 * Team's Valid condition and generation in force), else with the positions
 * (r->pub_epoch), at most every --position-interval. The memo's status_sig
 * holds the hash of the urgent text last written. */
static void counted_status(struct rc_ctx *r, const char *key, const char *path, cJSON *patch,
                           const char *urgent)
{
    struct ctl_memo *m = ctl_memo_get(&r->c->memo, key, 1);
    if (!m || m->status.status_inflight)
        return; /* in flight: computed again next reconcile */
    uint64_t sig = gq_hash_str(urgent);
    sig = sig ? sig : 1;
    if (!r->pub_epoch && m->status.last_status && m->status.status_sig == sig)
        return;
    if (ctl_status_write(r->c, key, path, patch, 0))
        return; /* not taken: offered again by the next computation */
    m->status.status_sig = sig;
}

/* ---- a Team's GPUs per quota entry, by the core's rules (sched_quota.c):
 * a replica on a node of product P is charged to the Team's first entry for
 * P, else to its first "*" entry, else to none (the core never places it
 * there); a share counts its milli-GPUs. A Team without quota is unlimited:
 * its rows are the products it uses, without a nominal. */
#define CTL_TEAM_TYPES (API_MAX_QUOTA + 8)

struct ttype {
    char type[API_LABEL_VAL_MAX];
    int has_nominal;
    int64_t nominal_milli;
    int64_t used_milli;
};

/* Milli-GPUs of one replica of j (0 for a CPU-only job). */
static int64_t job_rep_milli(const struct cj *j)
{
    const struct api_gpu *g = &j->job->spec.gpu;
    if (!g->present)
        return 0;
    return g->count ? (int64_t)g->count * 1000 : (int64_t)g->shares;
}

/* Group the jobs by the Team in force they name: tjobs holds job indices, the
 * jobs of r->tinfo[k] (when it has a spec in force) are tjobs[tstart[k] ..
 * tstart[k+1]). Both owned by the caller (free). GQ_ENOMEM. */
static int team_buckets(struct rc_ctx *r, int **tjobs, int **tstart)
{
    size_t nb = 1;
    while (nb < (size_t)r->ntinfo * 2 + 2)
        nb <<= 1;
    int *slot = malloc(nb * sizeof(*slot));
    int *tk = malloc(((size_t)r->njobs + 1) * sizeof(*tk));
    int *start = calloc((size_t)r->ntinfo + 2, sizeof(*start));
    int *out = malloc(((size_t)r->njobs + 1) * sizeof(*out));
    if (!slot || !tk || !start || !out) {
        free(slot);
        free(tk);
        free(start);
        free(out);
        return GQ_ENOMEM;
    }
    for (size_t b = 0; b < nb; b++)
        slot[b] = -1;
    for (int k = 0; k < r->ntinfo; k++) {
        const struct rteam *ti = &r->tinfo[k];
        if (ti->idx < 0)
            continue;
        size_t b = (size_t)gq_hash_str(r->teams[ti->idx].meta.name) & (nb - 1);
        while (slot[b] >= 0)
            b = (b + 1) & (nb - 1);
        slot[b] = k;
    }
    for (int i = 0; i < r->njobs; i++) {
        const char *team = r->jobs[i].job->spec.team;
        tk[i] = -1;
        for (size_t b = (size_t)gq_hash_str(team) & (nb - 1); slot[b] >= 0; b = (b + 1) & (nb - 1))
            if (!strcmp(r->teams[r->tinfo[slot[b]].idx].meta.name, team)) {
                tk[i] = slot[b];
                break;
            }
        if (tk[i] >= 0)
            start[tk[i] + 1]++;
    }
    for (int k = 0; k < r->ntinfo; k++)
        start[k + 1] += start[k];
    int *fill = calloc((size_t)r->ntinfo + 1, sizeof(*fill));
    if (!fill) {
        free(slot);
        free(tk);
        free(start);
        free(out);
        return GQ_ENOMEM;
    }
    for (int i = 0; i < r->njobs; i++)
        if (tk[i] >= 0)
            out[start[tk[i]] + fill[tk[i]]++] = i;
    free(fill);
    free(slot);
    free(tk);
    *tjobs = out;
    *tstart = start;
    return 0;
}

/* Fill tt (CTL_TEAM_TYPES rows) for Team tm; returns the row count. */
static int team_types(struct rc_ctx *r, const struct api_team *tm, const int *jobs, int njobs, struct ttype *tt)
{
    int n = 0;
    struct sched_quota q[API_MAX_QUOTA];
    int nq = team_quota(tm, q);
    for (int e = 0; e < tm->nquota && n < CTL_TEAM_TYPES; e++, n++) {
        memset(&tt[n], 0, sizeof(tt[n]));
        gq_strlcpy(tt[n].type, tm->quota[e].gpu_type, sizeof(tt[n].type));
        tt[n].has_nominal = 1;
        tt[n].nominal_milli = (int64_t)tm->quota[e].gpus * 1000;
    }
    for (int jx = 0; jx < njobs; jx++) {
        const struct cj *j = &r->jobs[jobs[jx]];
        int64_t per = j->row && holds(j->state) ? job_rep_milli(j) : 0;
        if (!per)
            continue;
        for (int k = 0; k < j->pl.n; k++) {
            const char *prod = node_product(r, j->pl.rep[k].node);
            int e = -1;
            if (tm->nquota) {
                e = apply_quota_entry(q, nq, prod);
            } else {
                const char *t = prod[0] ? prod : "*";
                for (int x = 0; x < n && e < 0; x++)
                    if (!strcmp(tt[x].type, t))
                        e = x;
                if (e < 0 && n < CTL_TEAM_TYPES) {
                    e = n++;
                    memset(&tt[e], 0, sizeof(tt[e]));
                    gq_strlcpy(tt[e].type, t, sizeof(tt[e].type));
                }
            }
            if (e >= 0)
                tt[e].used_milli += per;
        }
    }
    return n;
}

static int64_t ttype_borrowed(const struct ttype *t)
{
    return t->has_nominal ? apply_borrowed(t->nominal_milli, 0, t->used_milli) : 0;
}

/* Set a gauge of an object-labelled family (declared in ctl_main.c). */
static void obj_gauge(struct rc_ctx *r, const char *family, const char *const *labels, double v)
{
    struct gq_metric *h = NULL;
    if (r->c->metrics && !gq_metrics_gauge(r->c->metrics, family, "", labels, &h, NULL, 0))
        gq_metrics_set(h, v);
}

/* The exact figures of a Team's status, over what api_team_status_encode
 * wrote: used and borrowed as GPU numbers (shares exact; borrowed the sum
 * over GPU types), gpuTypes [{gpuType, nominal, used, borrowed}],
 * borrowedByType ("A100:6,*:0.5", nonzero only; null when none) and each pendingHead entry's
 * globalPosition (gpos, parallel to it; 0 = none). The gauges follow. */
static void team_status_exact(struct rc_ctx *r, cJSON *patch, const char *name, const struct ttype *tt, int nt,
                              int64_t used_milli, int64_t pend_jobs, int64_t pend_milli, const int *gpos)
{
    cJSON *st = cJSON_GetObjectItemCaseSensitive(patch, "status");
    char by[1024] = "", num[64];
    size_t bl = 0;
    int64_t borrowed = 0;
    if (!st)
        return;
    cJSON *arr = cJSON_CreateArray();
    for (int t = 0; arr && t < nt; t++) {
        int64_t b = ttype_borrowed(&tt[t]);
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            break;
        }
        cJSON_AddStringToObject(o, "gpuType", tt[t].type);
        if (tt[t].has_nominal)
            cJSON_AddNumberToObject(o, "nominal", (double)tt[t].nominal_milli / 1000.0);
        cJSON_AddNumberToObject(o, "used", (double)tt[t].used_milli / 1000.0);
        cJSON_AddNumberToObject(o, "borrowed", (double)b / 1000.0);
        borrowed += b;
        if (b > 0) {
            snprintf(num, sizeof(num), "%.15g", (double)b / 1000.0);
            int w = snprintf(by + bl, sizeof(by) - bl, "%s%s:%s", bl ? "," : "", tt[t].type, num);
            if (w > 0 && (size_t)w < sizeof(by) - bl)
                bl += (size_t)w;
            else
                by[bl] = 0; /* a row that does not fit is left out */
        }
        if (name[0]) {
            const char *lb[] = {"team", name, "gpu_type", tt[t].type, NULL};
            if (tt[t].has_nominal)
                obj_gauge(r, CTL_M_TEAM_QUOTA, lb, (double)tt[t].nominal_milli / 1000.0);
            obj_gauge(r, CTL_M_TEAM_USED, lb, (double)tt[t].used_milli / 1000.0);
            obj_gauge(r, CTL_M_TEAM_BORROWED, lb, (double)b / 1000.0);
        }
    }
    if (arr) {
        cJSON_DeleteItemFromObjectCaseSensitive(st, "gpuTypes");
        cJSON_AddItemToObject(st, "gpuTypes", arr);
    }
    cJSON_ReplaceItemInObjectCaseSensitive(st, "used", cJSON_CreateNumber((double)used_milli / 1000.0));
    cJSON_ReplaceItemInObjectCaseSensitive(st, "borrowed", cJSON_CreateNumber((double)borrowed / 1000.0));
    /* none: null (the merge patch removes it; the 1.20 API server reads "" as null) */
    cJSON_AddItemToObject(st, "borrowedByType", by[0] ? cJSON_CreateString(by) : cJSON_CreateNull());
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(st, "pendingHead");
    cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, ph)
    {
        if (i < API_MAX_PENDING_HEAD && gpos[i] > 0)
            cJSON_AddNumberToObject(e, "globalPosition", gpos[i]);
        i++;
    }
    if (name[0]) {
        const char *lb[] = {"team", name, NULL};
        obj_gauge(r, CTL_M_TEAM_PENDING_JOBS, lb, (double)pend_jobs);
        obj_gauge(r, CTL_M_TEAM_PENDING_GPUS, lb, (double)pend_milli / 1000.0);
    }
}

/* The name of a Team of this reconcile: its spec in force, else its latest. */
static const char *rteam_name(const struct rc_ctx *r, const struct rteam *ti)
{
    return ti->idx >= 0 ? r->teams[ti->idx].meta.name : ti->latest.meta.name;
}

/* The memo of a Team or pool ("team:N", "pool:N", into key[keylen]),
 * created when asked, kept by this reconcile (seen). NULL: none, or no memory. */
static struct ctl_memo *obj_memo(struct rc_ctx *r, const char *kind, const char *name, int create, char *key,
                                 size_t keylen)
{
    snprintf(key, keylen, "%s:%s", kind, name);
    struct ctl_memo *m = ctl_memo_get(&r->c->memo, key, create);
    if (m)
        ctl_memo_seen(&r->c->memo, m, r->c->reconciles);
    return m;
}

static void team_pool_status(struct rc_ctx *r)
{
    char key[API_NAME_MAX + 8], path[CTL_PATH_MAX], now[API_TIME_MAX];
    ctl_time_format(r->now, now, sizeof(now));
    /* object-labelled gauges: recomputed whole (a deleted Team's series go) */
    static const char *const objg[] = {CTL_M_TEAM_QUOTA, CTL_M_TEAM_USED, CTL_M_TEAM_BORROWED,
                                       CTL_M_TEAM_PENDING_JOBS, CTL_M_TEAM_PENDING_GPUS, CTL_M_POOL_GPUS,
                                       CTL_M_POOL_ALLOCATED, CTL_M_POOL_PENDING_JOBS};
    for (size_t g = 0; g < sizeof(objg) / sizeof(objg[0]); g++)
        gq_metrics_clear(r->c->metrics, objg[g]);
    /* the jobs of each Team in force, in one pass (not a pass per Team) */
    int *tjobs = NULL, *tstart = NULL;
    if (team_buckets(r, &tjobs, &tstart)) {
        LOGC(r->c, GQ_LOG_WARN, "out of memory for Team status: not written this reconcile", NULL);
        return;
    }
    for (int k = 0; k < r->ntinfo; k++) {
        const struct rteam *ti = &r->tinfo[k];
        const struct api_team *tm = ti->idx >= 0 ? &r->teams[ti->idx] : NULL;
        const char *name = rteam_name(r, ti);
        struct api_team_status st;
        struct ttype tt[CTL_TEAM_TYPES];
        int gpos[API_MAX_PENDING_HEAD] = {0}, gph[API_MAX_PENDING_HEAD] = {0};
        int64_t used_milli = 0, pend_milli = 0;
        const int *mine = tjobs + tstart[k];
        int nmine = tm ? tstart[k + 1] - tstart[k] : 0;
        int nt = tm ? team_types(r, tm, mine, nmine, tt) : 0;
        memset(&st, 0, sizeof(st));
        for (int q = 0; tm && q < tm->nquota; q++)
            st.quota += tm->quota[q].gpus;
        for (int x = 0; x < nmine; x++) {
            const struct cj *j = &r->jobs[mine[x]];
            if (!j->row)
                continue;
            if (holds(j->state)) {
                st.running++;
                st.used += job_gpus_placed(r, j);
                used_milli += job_rep_milli(j) * j->pl.n;
            } else if (j->state == STORE_QUEUED || j->state == STORE_PREEMPTED) {
                st.pending++;
                pend_milli += job_rep_milli(j) * j->job->spec.replicas;
                /* the head of its queue as last published (waiting_publish) */
                int pos = j->memo ? j->memo->wait.pub.position : 0;
                if (pos > 0 && pos <= API_MAX_PENDING_HEAD && !st.pending_head[pos - 1].position) {
                    struct api_team_pending *e = &st.pending_head[pos - 1];
                    gq_strlcpy(e->name, j->job->meta.name, sizeof(e->name));
                    gq_strlcpy(e->namespace, j->job->meta.namespace, sizeof(e->namespace));
                    e->position = pos;
                    e->gpus = api_gpujob_gpus(j->job);
                    gph[pos - 1] = j->memo->wait.gposition;
                }
            }
        }
        /* in position order, without gaps (a published head member may have
         * left the queue since) */
        for (int q = 0; q < API_MAX_PENDING_HEAD; q++)
            if (st.pending_head[q].position) {
                gpos[st.npending_head] = gph[q];
                st.pending_head[st.npending_head++] = st.pending_head[q];
            }
        st.borrowed = (int32_t)apply_borrowed(st.quota, 0, st.used);
        st.observed_generation = ti->idx >= 0 ? ti->gen_in_force : 0;
        if (!name[0])
            continue;
        struct ctl_memo *m = obj_memo(r, "team", name, 1, key, sizeof(key));
        struct api_team_status prev;
        struct api_errors e;
        api_errors_init(&e);
        cJSON *lo = m && m->status.last_status ? cJSON_Parse(m->status.last_status) : NULL;
        api_team_status_decode(lo ? lo : ti->obj, &prev, &e);
        cJSON_Delete(lo);
        int nsi = -1;
        const struct api_team *older = tm ? api_team_conflict(r->teams, (size_t)r->nteams, tm, &nsi) : NULL;
        st.nconditions = 1;
        team_valid_condition(ti, older, older ? tm->namespaces[nsi] : "", &prev, now, &st.conditions[0]);
        if (!ti->bad[0] && older && ti->obj) {
            /* a Warning Event when the conflict starts or changes */
            const struct api_condition *pc = NULL;
            for (int c = 0; c < prev.nconditions; c++)
                if (!strcmp(prev.conditions[c].type, "Valid"))
                    pc = &prev.conditions[c];
            if (!(pc && !strcmp(pc->status, "False") && !strcmp(pc->message, st.conditions[0].message))) {
                ctl_act_event(&r->c->act, ti->obj, "Warning", "NamespaceConflict", st.conditions[0].message);
                LOGC(r->c, GQ_LOG_WARN, "team claims a namespace an older team owns",
                     " team=%s namespace=%s owner=%s", name, tm->namespaces[nsi], older->meta.name);
            }
        }
        if (ti->bad[0] && m && m->invalid_reported_gen != ti->gen) {
            /* once per invalid generation (and once more after a restart) */
            m->invalid_reported_gen = ti->gen;
            ctl_act_event(&r->c->act, ti->obj, "Warning", "InvalidSpec", st.conditions[0].message);
            struct store_audit a = {0, r->now, "gangq", "team-invalid", name, "", "", "",
                                    st.conditions[0].message};
            if (store_audit_add(r->c->st, &a, r->err, sizeof(r->err)))
                LOGC(r->c, GQ_LOG_ERROR, "audit write failed", " err=\"%s\"", r->err);
            LOGC(r->c, GQ_LOG_WARN, "team spec invalid", " team=%s msg=\"%s\"", name, st.conditions[0].message);
        } else if (!ti->bad[0] && m) {
            m->invalid_reported_gen = 0;
        }
        cJSON *p = api_team_status_encode(&st);
        if (p)
            team_status_exact(r, p, name, tt, nt, used_milli, st.pending, pend_milli, gpos);
        char urgent[API_MSG_MAX + 256];
        snprintf(urgent, sizeof(urgent), "%lld|%s|%s|%s", (long long)st.observed_generation,
                 st.conditions[0].status, st.conditions[0].reason, st.conditions[0].message);
        if (p && !kube_path(path, sizeof(path), "/apis/gangq.io/v1alpha1", NULL, "teams", name, NULL))
            counted_status(r, key, path, p, urgent);
        cJSON_Delete(p);
    }
    free(tjobs);
    free(tstart);
    /* devices held and foreign GPUs per node (by r->nix index), in one pass */
    uint32_t *nused = r->npools ? calloc((size_t)r->nnix + 1, sizeof(*nused)) : NULL;
    int *nforeign = r->npools ? calloc((size_t)r->nnix + 1, sizeof(*nforeign)) : NULL;
    if (r->npools && (!nused || !nforeign)) {
        free(nused);
        free(nforeign);
        LOGC(r->c, GQ_LOG_WARN, "out of memory for GPUPool status: not written this reconcile", NULL);
        return;
    }
    for (int i = 0; r->npools && i < r->njobs; i++) {
        const struct cj *j = &r->jobs[i];
        const struct ctl_placement *jp = holds(j->state) ? &j->pl : &j->term;
        for (int k = 0; k < jp->n; k++) {
            struct rnode *rn = node_find(r, jp->rep[k].node);
            if (rn)
                nused[rn - r->nix] |= jp->rep[k].devs;
        }
    }
    for (int f = 0; r->npools && f < r->nforeign; f++) {
        const char *nn = ctl_obj_str(r->foreign[f], "spec", "nodeName");
        struct rnode *rn = nn ? node_find(r, nn) : NULL;
        if (rn) {
            struct ctl_podusage u;
            ctl_pod_usage(r->foreign[f], &u);
            nforeign[rn - r->nix] += u.gpus;
        }
    }
    for (int pi = 0; pi < r->npools; pi++) {
        const struct api_gpupool *pl = &r->pools[pi];
        struct api_gpupool_status st = {0};
        for (int n = 0; n < r->nnodes; n++) {
            if (ctl_node_pool(r->nodes[n], r->pools, r->npools) != pi)
                continue;
            struct ctl_nodeinfo ni;
            ctl_node_info(r->nodes[n], &ni);
            const char *name = ctl_obj_str(r->nodes[n], "metadata", "name");
            struct rnode *rn = name ? node_find(r, name) : NULL;
            uint32_t used = rn ? nused[rn - r->nix] : 0;
            int fgpus = rn ? nforeign[rn - r->nix] : 0;
            int alloc = __builtin_popcount(used) + fgpus;
            if (alloc > ni.gpus)
                alloc = ni.gpus;
            st.gpus += ni.gpus;
            st.allocated += alloc;
            if (ni.ready && !ni.unschedulable && ni.gpus - alloc > st.largest_free)
                st.largest_free = ni.gpus - alloc;
        }
        st.free = st.gpus - st.allocated;
        for (int i = 0; i < r->njobs; i++) {
            const struct cj *j = &r->jobs[i];
            if (!j->row || (j->state != STORE_QUEUED && j->state != STORE_PREEMPTED))
                continue;
            if (j->job->spec.pool[0] ? !strcmp(j->job->spec.pool, pl->meta.name)
                                    : (pl->classes & (1u << (unsigned)j->job->spec.class)) != 0)
                st.pending++;
        }
        cJSON *p = api_gpupool_status_encode(&st);
        const char *plb[] = {"pool", pl->meta.name, NULL};
        obj_gauge(r, CTL_M_POOL_GPUS, plb, st.gpus);
        obj_gauge(r, CTL_M_POOL_ALLOCATED, plb, st.allocated);
        obj_gauge(r, CTL_M_POOL_PENDING_JOBS, plb, st.pending);
        obj_memo(r, "pool", pl->meta.name, 1, key, sizeof(key));
        if (p && !kube_path(path, sizeof(path), "/apis/gangq.io/v1alpha1", NULL, "gpupools",
                            pl->meta.name, NULL))
            counted_status(r, key, path, p, "");
        cJSON_Delete(p);
    }
    free(nused);
    free(nforeign);
}

/* Between full passes and publication epochs, Team and GPUPool statuses and
 * gauges are not recomputed (what they show is written at most every
 * --position-interval anyway; a Team, pool or node change makes the next
 * reconcile a full pass): their memos are only kept. */
static void team_pool_seen(struct rc_ctx *r)
{
    char key[API_NAME_MAX + 8];
    for (int k = 0; k < r->ntinfo; k++) {
        const char *name = rteam_name(r, &r->tinfo[k]);
        if (name[0])
            obj_memo(r, "team", name, 0, key, sizeof(key));
    }
    for (int pi = 0; pi < r->npools; pi++)
        obj_memo(r, "pool", r->pools[pi].meta.name, 0, key, sizeof(key));
}

/* ------------------------------------------------------------ waiting jobs */

/* What the statuses of waiting jobs show (API writes follow decisions, not
 * queue moves): each job's explanation goes through ctl_wait_publish (its
 * status is rewritten when its state or wait class changes, the detailed
 * text at most every --wait-message-interval), with one Waiting Event per
 * class per wait; positions are published for the first --position-head jobs
 * of each Team queue at most every --position-interval (the others show
 * none), from a reconcile that scheduled. */
static void waiting_publish(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int64_t pos_iv = (int64_t)(c->cfg.position_interval_s * 1000.0);
    int64_t msg_iv = (int64_t)(c->cfg.wait_message_interval_s * 1000.0);
    int epoch = r->sched_ran && (!c->pos_pub_ms || r->now - c->pos_pub_ms >= pos_iv);
    if (epoch)
        c->pos_pub_ms = r->now;
    r->pub_epoch = epoch;
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        struct ctl_memo *m = j->memo;
        if (!m || !j->row || j->dormant)
            continue;
        int waiting = j->state == STORE_QUEUED || j->state == STORE_PREEMPTED;
        const char *inv = j->invalid_reason && !j->failed_invalid ? j->invalid_reason : NULL;
        const char *msg = inv ? ctl_str(j->invalid_msg) : m->wait.wait_msg ? m->wait.wait_msg : j->row->message;
        if (!m->wait.pub.set && waiting && j->obj) {
            /* first sight since start: what the object already shows of an
             * unchanged wait is not written again */
            struct api_gpujob_status st;
            struct api_errors e;
            api_errors_init(&e);
            if (!ctl_job_status_decode(j->obj, &st, &e))
                ctl_wait_adopt(&m->wait.pub, &st, j->state, ctl_wait_classify(msg, inv), r->now);
        }
        struct ctl_waitpub was = m->wait.pub;
        /* an Event speaks for the core's explanation or a problem, not a
         * stored message awaiting the next schedule; a wait the status does
         * not show yet (--status-settle) is neither published nor evented */
        if (!status_held(r, j) && ctl_wait_publish(&m->wait.pub, j->state, waiting, msg, inv, r->now, msg_iv) &&
            j->obj && (inv || m->wait.wait_msg)) {
            /* one per wait reason per wait: the message names the reason its
             * conditions now carry */
            char emsg[SCHED_MSG_MAX + 64];
            snprintf(emsg, sizeof(emsg), "%s: %s", ctl_wait_class_name(m->wait.pub.cls), msg ? msg : "");
            ctl_act_event(&c->act, j->obj, inv ? "Warning" : "Normal", "Waiting", emsg);
        }
        if (waiting && epoch)
            m->wait.pub.position = inv ? 0 : ctl_position_shown(m->wait.position, c->cfg.position_head);
        if (!waiting && !holds(j->state) && m->wait.wait_msg) {
            (void)ctl_str_set(&m->wait.wait_msg, NULL, 0);
            job_touch_status(r, j);
        }
        if (was.set != m->wait.pub.set || was.state != m->wait.pub.state || was.cls != m->wait.pub.cls ||
            was.msg_ms != m->wait.pub.msg_ms || was.position != m->wait.pub.position)
            job_touch_status(r, j); /* what its status shows changed: written in this reconcile */
    }
}

struct qrow {
    const struct ctl_memo *m;
    const char *team;
};

static int qrow_cmp(const void *a, const void *b)
{
    const struct qrow *x = a, *y = b;
    int c = strcmp(x->team, y->team);
    return c ? c : (x->m->wait.position > y->m->wait.position) - (x->m->wait.position < y->m->wait.position);
}

int ctl_queue_render(const struct gq_ctl *c, const char *team, struct gq_buf *out)
{
    size_t n = 0;
    struct qrow *rows = calloc(c->memo.n + 1, sizeof(*rows));
    cJSON *root = cJSON_CreateObject(), *arr = root ? cJSON_AddArrayToObject(root, "jobs") : NULL;
    int rc = GQ_ENOMEM;
    if (!rows || !arr)
        goto out;
    for (size_t b = 0; b < c->memo.nb; b++)
        for (const struct ctl_memo *m = c->memo.b[b]; m; m = m->next) {
            int waiting =
                m->wait.pub.set && (m->wait.pub.state == STORE_QUEUED || m->wait.pub.state == STORE_PREEMPTED);
            if (!waiting || m->wait.position <= 0 || !m->decode.job_valid || n >= c->memo.n)
                continue;
            if (team && team[0] && strcmp(team, m->decode.job->spec.team))
                continue;
            rows[n++] = (struct qrow){m, m->decode.job->spec.team};
        }
    qsort(rows, n, sizeof(*rows), qrow_cmp);
    for (size_t i = 0; i < n; i++) {
        const struct ctl_memo *m = rows[i].m;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            goto out;
        }
        if (!cJSON_AddStringToObject(o, "team", rows[i].team) ||
            !cJSON_AddStringToObject(o, "namespace", m->decode.job->meta.namespace) ||
            !cJSON_AddStringToObject(o, "name", m->decode.job->meta.name) ||
            !cJSON_AddNumberToObject(o, "position", m->wait.position) ||
            !cJSON_AddStringToObject(o, "state", store_state_name(m->wait.pub.state)) ||
            !cJSON_AddStringToObject(o, "waitReason", ctl_wait_class_name(m->wait.pub.cls)) ||
            !cJSON_AddStringToObject(o, "message", ctl_str(m->wait.wait_msg)))
            goto out;
    }
    char *txt = cJSON_PrintUnformatted(root);
    if (!txt)
        goto out;
    rc = gq_buf_puts(out, txt) || gq_buf_puts(out, "\n") ? GQ_ENOMEM : 0;
    free(txt);
out:
    cJSON_Delete(root);
    free(rows);
    return rc;
}

/* ------------------------------------------------------------ reconcile */

/* A released pod of a Preempted job, on a live node and not past its
 * deletion deadline by CTL_DRAIN_SLACK_S, that holds what its job was placed
 * with: recorded in j->term (the job stays in the snapshot, terminating for
 * its preemptor). Returns 0 when the pod does not qualify. */
static int pod_stopping(struct rc_ctx *r, struct cj *j, const cJSON *pod, const struct ctl_podfacts *f)
{
    int64_t rv;
    char w[256];
    double dw = 0;
    if (!j || !j->row || j->state != STORE_PREEMPTED || j->invalid_reason || !f->replica ||
        gq_parse_i64(f->replica, (size_t)-1, &rv) || rv < 0 || rv >= API_REPLICAS_MAX ||
        j->term.n >= j->job->spec.replicas || node_lost(r, f->node, w, sizeof(w)))
        return 0;
    if (f->deletion && !kube_time_parse(f->deletion, &dw) && (double)r->now / 1000.0 > dw + CTL_DRAIN_SLACK_S)
        return 0;
    struct ctl_podusage u;
    ctl_pod_usage(pod, &u);
    const struct api_gpu *g = &j->job->spec.gpu;
    int devs = !g->present ? 0 : g->count ? g->count : 1;
    const struct rnode *n = node_find(r, f->node); /* have_ni: node_lost parsed it */
    if (__builtin_popcount(u.devs) != devs || (n->ni.gpus < 32 && (u.devs >> n->ni.gpus)))
        return 0; /* not what the job's replicas hold: counted as foreign usage */
    return !ctl_placement_add(&j->term, (int)rv, f->node, u.devs);
}

/* The pods of memo m are looked at by this reconcile: a full pass, an event
 * of the job or its pods, or a write of its row (job_touch) since the last
 * look. Whether a pod is held depends only on those. */
static int memo_pods_dirty(const struct rc_ctx *r, const struct ctl_memo *m)
{
    return r->full || m->dirty_upto >= r->c->reconciles;
}

/* Gangq pods no placement holds (released by a preemption, suspend, requeue
 * or deletion, or left by an old attempt) that still run or stop. A
 * Preempted job's stopping pods keep it in the snapshot as terminating for
 * its preemptor (pod_stopping); every other such pod is foreign usage on its
 * node. Either way their devices are booked for no one else until the pods
 * are gone, and nothing else waits for them. */
static int released_pods(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc;
    for (size_t b = 0; b < c->memo.nb; b++)
        for (struct ctl_memo *m = c->memo.b[b]; m; m = m->next) {
            int np = 0;
            const cJSON **pods = memo_pods(r, m, &np);
            if (!np || (!m->pods.rel_any && !memo_pods_dirty(r, m)))
                continue; /* no released pod last time, and nothing changed since */
            struct cj *j = job_find(r, m->key);
            m->pods.rel_any = 0;
            for (int k = 0; k < np; k++) {
                const struct ctl_podfacts *f = &m->pods.pf[k];
                if (f->terminal || !f->node || !f->node[0] || pod_held(j, f))
                    continue;
                m->pods.rel_any = 1;
                r->nreleased++;
                if (!pod_stopping(r, j, pods[k], f) &&
                    (rc = push_ptr(&r->foreign, &r->nforeign, &r->capforeign, pods[k])))
                    return rc;
            }
        }
    return 0;
}

/* Delete gangq pods no job holds (old attempts, lost replicas, deleted jobs)
 * unless a pending intent of that job is already deleting them. */
static void cleanup_strays(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    for (size_t b = 0; b < c->memo.nb; b++)
        for (struct ctl_memo *m = c->memo.b[b]; m; m = m->next) {
            int np = 0;
            const cJSON **pods = memo_pods(r, m, &np);
            if (!np || (!m->pods.stray_any && !memo_pods_dirty(r, m)))
                continue; /* no stray pod last time, and nothing changed since */
            m->pods.stray_any = 1; /* until a look below finds none */
            if (m->pods.cleanup_inflight ||
                (m->pods.cleanup_done_ms && r->now - m->pods.cleanup_done_ms < CTL_STRAY_RETRY_MS))
                continue; /* a delete the pod watch has not shown yet is not repeated at once */
            if (intent_first(r, m->key) < r->nintents)
                continue; /* a pending intent of this job is already acting on its pods */
            struct cj *j = job_find(r, m->key);
            if (j && j->released)
                continue; /* the intent written in this reconcile deletes them */
            m->pods.stray_any = 0;
            for (int k = 0; k < np; k++) {
                const cJSON *pod = pods[k];
                const struct ctl_podfacts *f = &m->pods.pf[k];
                if (f->terminal || f->deletion || pod_held(j, f))
                    continue;
                m->pods.stray_any = 1;
                const char *nn = f->node;
                char w[256];
                long grace = (nn && nn[0] && node_lost(r, nn, w, sizeof(w))) ? 0 : -1;
                LOGC(c, GQ_LOG_INFO, "deleting stray pod", " job=%s pod=%s", m->key, f->name);
                ctl_pod_delete(c, pod, grace, m->key);
            }
        }
}

static void account_usage(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    if (!c->last_usage_ms || r->now < c->last_usage_ms) {
        c->last_usage_ms = r->now;
        return;
    }
    if (r->now - c->last_usage_ms < 1000)
        return; /* integrated over a second or more: usage between is what this pass sees */
    double dt = (double)(r->now - c->last_usage_ms) / 1000.0;
    double *g = calloc((size_t)r->nteams + 1, sizeof(*g));
    if (!g)
        return; /* integrated over a longer span next time */
    /* one pass over the jobs (a job's Team found among the Teams in force) */
    const char *last = NULL;
    int lt = -1;
    for (int i = 0; i < r->njobs; i++) {
        const struct cj *j = &r->jobs[i];
        if (!holds(j->state))
            continue;
        if (!last || strcmp(last, j->job->spec.team)) {
            const struct api_team *tm = team_of(r, j->job->spec.team);
            last = j->job->spec.team;
            lt = tm ? (int)(tm - r->teams) : -1;
        }
        if (lt >= 0)
            g[lt] += job_gpus_placed(r, j);
    }
    for (int t = 0; t < r->nteams; t++)
        if (g[t] > 0 && store_usage_add(c->st, r->teams[t].meta.name, r->now, g[t] * dt, r->err,
                                        sizeof(r->err))) {
            free(g);
            return;
        }
    free(g);
    c->last_usage_ms = r->now;
}

static void rc_release(struct rc_ctx *r)
{
    for (int i = 0; i < r->njobs; i++) {
        ctl_placement_release(&r->jobs[i].pl);
        ctl_placement_release(&r->jobs[i].term);
        free(r->jobs[i].invalid_msg);
    }
    free(r->iidx);
    free(r->nix);
    if (r->rows)
        r->c->rows_gen++; /* not handed back (a failed reconcile): freed below */
    for (int i = 0; i < r->nrows; i++)
        free(r->rows[i]);
    for (int i = 0; i < r->nintents; i++)
        free((char *)r->intents[i].job_key);
    free(r->intents);
    free(r->rows);
    /* the job array, for the next reconcile (freed at stop) */
    free(r->c->jobs_keep);
    r->c->jobs_keep = r->jobs;
    r->c->jobs_keep_cap = r->jobs ? r->capjobs : 0;
    /* r->teams and r->tinfo are c->team_keep's */
    free(r->pools);
    free(r->pcs);
    free(r->nodes);
    free(r->foreign);
    free(r->ev);
}

/* ------------------------------------------------------------ phases
 *
 * One reconcile is a fixed sequence of named phases, each timed on the
 * monotonic clock into gangq_reconcile_phase_duration_seconds{phase}:
 *   gather   finish acts that completed, read the informer caches, the store
 *            rows and the pending intents into r;
 *   observe  open the cycle's store transaction and bring every store row in
 *            line with what the cluster shows (prepare, spec rules, deleted
 *            jobs, lifecycle), account usage, prune;
 *   schedule book released pods and run the scheduling core on the snapshot,
 *            applying its decisions to the store rows;
 *   commit   commit the transaction (nothing reaches the cluster before);
 *   act      Events, waiting messages, the intents, stray pods;
 *   report   status of GPUJobs, Teams and GPUPools, memo aging, job gauges.
 * A phase that fails stops the sequence; its duration is still observed. */

const char *const ctl_phase_names[CTL_NPHASES] = {"gather", "observe", "schedule", "commit", "act", "report"};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int phase_gather(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc;
    r->now = ctl_now_ms();
    c->reconciles++;
    /* one store transaction from here to the commit phase; the intents acted
     * on since the last reconcile are marked done in it, before the pending
     * ones are read */
    if ((rc = store_begin_cycle(c->st, r->err, sizeof(r->err))))
        return rc;
    r->in_txn = 1;
    if ((rc = ctl_act_write_done(&c->act, r->now, &r->done_marks, r->err, sizeof(r->err))))
        return rc;
    /* a full pass: asked for (a Team, pool, class or node changed, an
     * index rebuilt), the first one, or none for --full-resync-interval */
    int64_t fiv = (int64_t)(c->cfg.full_resync_interval_s * 1000.0);
    int64_t iv = (int64_t)(c->cfg.cycle_interval_s * 1000.0);
    /* both intervals allow a tenth of slack: the resync timer firing a
     * little early must not put off what is due by a whole interval */
    r->full = c->full_next || !c->restart_done || !c->last_full_ms || r->now - c->last_full_ms >= fiv - fiv / 10 ||
              r->now < c->last_full_ms;
    if (r->full) {
        c->full_next = 0;
        c->last_full_ms = c->last_resync_ms = r->now;
        c->m.reconciles_full++;
    } else if (r->now - c->last_resync_ms >= iv - iv / 10 || r->now < c->last_resync_ms) {
        /* the periodic resync: a job that waits changes only by events (its
         * own, its Team's, pools', classes', nodes': those make a full pass)
         * and the scheduling core sees it every reconcile; what time alone
         * changes (a missing pod's or a lost node's grace, a stopping pod's
         * deadline, a pod create to ask about again) belongs to jobs past
         * waiting, examined again here, but for the admitted ones the last
         * look found steady (job_lifecycle): an idle resync examines none */
        c->last_resync_ms = r->now;
        for (int i = 0; i < c->nrows; i++) {
            int st = c->rows[i]->state;
            if (st == STORE_QUEUED || st == STORE_SUSPENDED || finished(st))
                continue;
            struct ctl_memo *m = ctl_memo_get(&c->memo, c->rows[i]->key, 0);
            if (!(m && m->pods.steady && holds(st))) /* steady: nothing time can change */
                ctl_memo_dirty(m, c->reconciles);
        }
    }
    return gather(r);
}

/* Row has no GPUJob in this reconcile. Called for rows in key order with
 * *k starting at 0: rows and jobs are both sorted by key, so one merge walk
 * answers for every row. */
static int row_gone(const struct rc_ctx *r, int *k, const struct store_job *row)
{
    int cmp = 1;
    while (*k < r->njobs && (cmp = strcmp(r->jobs[*k].key, row->key)) < 0)
        (*k)++;
    return *k >= r->njobs || cmp != 0;
}

static int phase_observe(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    int rc;
    if (!c->restart_done) {
        LOGC(c, GQ_LOG_INFO, "first reconcile: finishing intents left by a previous run",
             " pending=%d store_jobs=%d", r->nintents, r->nrows);
        c->restart_done = 1;
    }
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        int dirty = job_dirty(r, j);
        if ((rc = job_prepare(r, j)) || (dirty && (rc = job_spec_rules(r, j))))
            return rc;
    }
    /* store rows whose GPUJob is gone: deleted, then dropped from rows[].
     * Rows kept from the last committed reconcile each had a GPUJob then, and
     * a row is only ever added for a GPUJob present: unless a GPUJob was
     * deleted since (or the rows were read from the store, or this is a full
     * pass) every row still has one, and the walk, which reads every row,
     * is skipped. */
    int ngone = 0;
    int walk = r->full || r->rows_read || r->jobs_deleted != c->jobs_deleted_walked;
    for (int i = 0, k = 0; walk && i < r->nrows; i++) {
        struct store_job *row = r->rows[i];
        if (!row_gone(r, &k, row))
            continue;
        ngone++;
        struct store_audit a = {0, r->now, "gangq", "delete", row->team, row->key,
                                store_state_name(row->state), "", "GPUJob deleted"};
        struct apply_ctx x = actx(r);
        struct sched_quota q[API_MAX_QUOTA];
        int nq = team_quota(team_of(r, row->team), q);
        if ((rc = intent(r, STORE_INTENT_DELETE, row->key, "gone")) ||
            (rc = store_job_delete(c->st, row->key, r->err, sizeof(r->err))) ||
            (rc = apply_ledger_settle(&x, row->team, q, nq)) ||
            (rc = store_audit_add(c->st, &a, r->err, sizeof(r->err))))
            return rc;
        LOGC(c, GQ_LOG_INFO, "job deleted: released", " job=%s was=%s", row->key,
             store_state_name(row->state));
    }
    if (ngone) {
        int kept = 0;
        for (int i = 0, k = 0; i < r->nrows; i++) {
            if (row_gone(r, &k, r->rows[i]))
                free(r->rows[i]);
            else
                r->rows[kept++] = r->rows[i];
        }
        r->nrows = kept;
    }
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        if (job_dirty(r, j) && ((rc = job_create_refused(r, j)) || (rc = job_lifecycle(r, j))))
            return rc;
    }
    account_usage(r);
    if (r->now - c->last_prune_ms > 600000) {
        /* housekeeping: done intents after a day, usage older than ten half-lives */
        if ((rc = store_intents_prune(c->st, r->now - 86400000LL, r->err, sizeof(r->err))) ||
            (rc = store_usage_prune(c->st, r->now - (int64_t)(c->cfg.usage_half_life_s * 10000.0), r->err,
                                    sizeof(r->err))))
            return rc;
        c->last_prune_ms = r->now;
    }
    for (int i = 0; i < r->njobs; i++)
        if (r->jobs[i].invalid_reason && !r->jobs[i].failed_invalid) {
            (void)ctl_str_set(&r->jobs[i].memo->wait.wait_msg, ctl_str(r->jobs[i].invalid_msg), SCHED_MSG_MAX);
            r->jobs[i].memo->wait.position = 0;
        }
    return 0;
}

static int phase_schedule(struct rc_ctx *r)
{
    int rc = released_pods(r);
    return rc ? rc : run_sched(r);
}

static int phase_commit(struct rc_ctx *r)
{
    r->in_txn = 0;
    int rc = store_commit_cycle(r->c->st, r->err, sizeof(r->err));
    if (!rc) {
        r->committed = 1;
        r->c->jobs_deleted_walked = r->jobs_deleted; /* rows of those deleted are gone */
        ctl_act_done_committed(&r->c->act, r->done_marks);
    }
    return rc;
}

static int phase_act(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    for (int i = 0; i < r->nev; i++)
        ctl_act_event(&c->act, r->ev[i].obj, r->ev[i].type, r->ev[i].reason, r->ev[i].msg);
    waiting_publish(r);
    ctl_act_intents(&c->act);
    cleanup_strays(r);
    return 0;
}

static int phase_report(struct rc_ctx *r)
{
    struct gq_ctl *c = r->c;
    for (int i = 0; i < r->njobs; i++) {
        struct cj *j = &r->jobs[i];
        if (job_dirty(r, j) || (!j->dormant && j->memo && j->memo->status_upto >= c->reconciles))
            job_status(r, j);
    }
    if (r->full || r->pub_epoch)
        team_pool_status(r);
    else
        team_pool_seen(r);
    ctl_memo_drop_unseen(&c->memo, c->reconciles, &c->jobs_set);
    /* last: a job put to sleep no longer has the decode the steps above read */
    for (int i = 0; i < r->njobs; i++)
        job_sleep(r, &r->jobs[i]);
    memset(c->m.jobs_by_state, 0, sizeof(c->m.jobs_by_state));
    c->m.jobs_dormant = 0;
    for (int i = 0; i < r->njobs; i++) {
        if (r->jobs[i].row && r->jobs[i].state >= 0 && r->jobs[i].state < STORE_NSTATES)
            c->m.jobs_by_state[r->jobs[i].state]++;
        if (r->jobs[i].memo && r->jobs[i].memo->decode.dormant)
            c->m.jobs_dormant++;
    }
    return 0;
}

static int (*const phase_fns[CTL_NPHASES])(struct rc_ctx *r) = {
    phase_gather, phase_observe, phase_schedule, phase_commit, phase_act, phase_report};

struct ctl_rc_result ctl_reconcile(struct gq_ctl *c)
{
    struct ctl_rc_result res = {0};
    struct rc_ctx *r = calloc(1, sizeof(*r));
    if (!r)
        return res; /* did not run: nothing for the loop to act on */
    r->c = c;
    int rc = 0;
    for (int p = 0; p < CTL_NPHASES && !rc; p++) {
        int64_t t0 = mono_ns();
        rc = phase_fns[p](r);
        int64_t dt = mono_ns() - t0;
        c->m.phase_ns[p] += (uint64_t)dt;
        gq_metrics_observe(c->mh.phase_dur[p], (double)dt / 1e9);
    }
    if (rc) {
        if (r->in_txn)
            store_rollback_cycle(c->st);
        team_keep_forget(c); /* the valid Team specs it saved are not in the store */
        c->m.store_errors++;
        LOGC(c, GQ_LOG_ERROR, "reconcile failed: nothing acted on, retrying next cycle",
             " err=\"%s\" rc=%s", r->err, gq_strerror(rc));
        res.rc = rc;
        gq_strlcpy(res.err, r->err, sizeof(res.err));
    } else {
        /* the rows, as committed, start the next reconcile */
        ctl_rows_release(c);
        c->rows = r->rows;
        c->nrows = r->nrows;
        c->caprows = r->caprows;
        r->rows = NULL;
        r->nrows = r->caprows = 0;
        res.settle_due_ms = r->settle_next;
        int64_t dt = ctl_now_ms() - r->now;
        c->m.cycle_us_total += (uint64_t)dt * 1000;
        gq_log(c->cfg.log_level, GQ_LOG_DEBUG, "ctl", "reconcile",
               " n=%lld jobs=%d nodes=%d released_pods=%d sched=%d ms=%lld", (long long)c->reconciles,
               r->njobs, r->nnodes, r->nreleased, r->sched_ran, (long long)dt);
    }
    res.committed = r->committed;
    rc_release(r);
    free(r);
    return res;
}

void ctl_rows_release(struct gq_ctl *c)
{
    if (c->rows)
        c->rows_gen++; /* row pointers kept on memos (row_keep) are stale */
    for (int i = 0; i < c->nrows; i++)
        free(c->rows[i]);
    free(c->rows);
    c->rows = NULL;
    c->nrows = c->caprows = 0;
}

/* ------------------------------------------------------------ pod events */

void ctl_pod_deleted(struct gq_ctl *c, const cJSON *pod)
{
    const char *job = ctl_obj_label(pod, CTL_LABEL_JOB);
    const char *ns = ctl_obj_str(pod, "metadata", "namespace");
    const char *name = ctl_obj_str(pod, "metadata", "name");
    char key[CTL_KEY_MAX];
    if (!job || !ns || !name)
        return;
    snprintf(key, sizeof(key), "%s/%s", ns, job);
    struct ctl_memo *m = ctl_memo_get(&c->memo, key, 0);
    if (!m)
        return;
    (void)ctl_str_set(&m->pods.gone_pod, name, API_NAME_MAX + 32);
    const char *phase = ctl_obj_str(pod, "status", "phase");
    if (!phase || strcmp(phase, "Succeeded"))
        return;
    if (!m->pods.gone_ok && !(m->pods.gone_ok = cJSON_CreateArray()))
        return;
    if (cJSON_GetArraySize(m->pods.gone_ok) >= CTL_GONE_OK_MAX)
        cJSON_DeleteItemFromArray(m->pods.gone_ok, 0); /* the oldest */
    cJSON *cp = cJSON_Duplicate(pod, 1);
    if (cp)
        cJSON_AddItemToArray(m->pods.gone_ok, cp);
}

/* ------------------------------------------------------------ quota edits */

void ctl_team_changed(struct gq_ctl *c, const cJSON *old_obj, const cJSON *new_obj)
{
    char *o = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(old_obj, "spec"));
    char *n = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(new_obj, "spec"));
    if (o && n && strcmp(o, n)) {
        const char *name = ctl_obj_str(new_obj, "metadata", "name");
        char actor[API_NAME_MAX] = "unknown";
        const cJSON *mf = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(new_obj, "metadata"), "managedFields");
        const cJSON *last = NULL, *e;
        double lt = -1;
        /* the actor is the field manager that last wrote spec fields: a name the
         * client chooses (kubectl --field-manager), not an authenticated user;
         * who made the request is in the API server's audit log */
        cJSON_ArrayForEach(e, mf)
        {
            const char *t = ctl_obj_str(e, "time", NULL);
            double w = 0;
            if (!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "fieldsV1"), "f:spec"))
                continue; /* status writes (gangq's own) and metadata-only entries */
            if (t)
                kube_time_parse(t, &w);
            if (w >= lt) {
                lt = w;
                last = e;
            }
        }
        const char *mgr = last ? ctl_obj_str(last, "manager", NULL) : NULL;
        if (mgr)
            snprintf(actor, sizeof(actor), "manager:%s", mgr);
        if (c->leading) {
            char err[256];
            struct store_audit a = {0, ctl_now_ms(), actor, "quota-edit", name ? name : "", "",
                                    o, n, "Team spec changed"};
            if (store_audit_add(c->st, &a, err, sizeof(err)))
                LOGC(c, GQ_LOG_ERROR, "audit write failed", " err=\"%s\"", err);
        }
        LOGC(c, GQ_LOG_INFO, "team spec changed", " team=%s actor=%s recorded=%d", name ? name : "",
             actor, c->leading);
    }
    free(o);
    free(n);
}
