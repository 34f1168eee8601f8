/*
 * ctl_gather.c — the reconcile's gather phase: the informer caches read into
 * one struct rc_ctx (Teams decoded once per resourceVersion and their last
 * valid spec kept in the store, GPU pools, PriorityClasses, nodes, the
 * GPUJobs to examine), the committed store rows (handed on by the last
 * reconcile; read from the store after a restart or once released) and the
 * pending intents.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_rc.h"

static int rows_cb(void *ud, const struct store_job *j)
{
    struct rc_ctx *r = ud;
    if (rc_rows_reserve(r))
        return GQ_ENOMEM;
    if (!(r->rows[r->nrows] = rc_row_copy(j)))
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

/* What one Team object decoded to, kept across reconciles (struct
 * ctl_team_keep): a Team changes only by an event of its own, which gives it
 * a new resourceVersion, so most reconciles see every Team as the last one
 * did and need not decode, validate or look up its kept valid spec again. */
struct tmemo {
    char uid[API_UID_MAX];
    char rv[API_UID_MAX];
    int64_t used;       /* the reconcile that last used it */
    uint64_t sig;       /* rc_obj_sig of the object */
    struct rteam ti;    /* as gather_cb_team left it (ti.obj and ti.idx set per reconcile) */
    int in_force;       /* a spec is in force: t */
    struct api_team t;
};

struct ctl_team_keep {
    struct tmemo *m; /* unordered; at most one per uid */
    int n, cap;
    /* rc_ctx.teams and rc_ctx.tinfo, lent to each reconcile (rc_keep_reserve) */
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
void rc_team_keep_forget(struct gq_ctl *c)
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
    uint64_t sig = rc_obj_sig(o);
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
const struct rteam *rc_team_invalid_for(const struct rc_ctx *r, const struct api_gpujob *job)
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
    r->lookup_sig += rc_obj_sig(o) * 3;
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

int rc_gather(struct rc_ctx *r)
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
        r->teams = tk->teams = rc_keep_reserve(tk->teams, &tk->cap_teams, nt + 1, sizeof(*tk->teams));
        r->tinfo = tk->tinfo = rc_keep_reserve(tk->tinfo, &tk->cap_tinfo, nt + 1, sizeof(*tk->tinfo));
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
    if ((rc = rc_nodes_index(r)))
        return rc;
    if (c->index_stale && (rc = index_rebuild(c)))
        return rc;
    /* GPUJobs and foreign pods from the event-kept sets (sorted by key, as
     * rc_job_find expects); gangq pods are on their jobs' memos */
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
        if ((rc = rc_push_ptr(&r->foreign, &r->nforeign, &r->capforeign, c->foreign_set.e[i].obj)))
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
            qsort(r->rows, (size_t)r->nrows, sizeof(*r->rows), rc_row_cmp);
    }
    if ((rc = store_intents_pending(c->st, intents_cb, r, r->err, sizeof(r->err))))
        return rc;
    return rc_intents_index(r);
}

