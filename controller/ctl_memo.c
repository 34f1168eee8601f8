/*
 * ctl_memo.c — the per-object memo table: what the controller remembers about
 * each GPUJob between reconciles (struct ctl_memo's parts: decoded spec
 * cache, wait, pods, published status, placement, victims), keyed by
 * namespace/name; the object sets and each job's pod index kept by informer
 * events. No loop and no I/O: called by ctl_main.c, the reconcile and ctl_wire.c.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_int.h"

/* ------------------------------------------------------------ memo table */

int ctl_str_set(char **dst, const char *src, size_t max)
{
    size_t n = src ? strnlen(src, max ? max - 1 : 0) : 0;
    if (*dst && n && strlen(*dst) == n && !memcmp(*dst, src, n))
        return GQ_OK;
    free(*dst);
    *dst = NULL;
    if (!n)
        return GQ_OK;
    if (!(*dst = malloc(n + 1)))
        return GQ_ENOMEM;
    memcpy(*dst, src, n);
    (*dst)[n] = 0;
    return GQ_OK;
}

/* The decode cache emptied (the job decodes again when next examined). */
static void memo_decode_drop(struct ctl_memo *m)
{
    if (m->decode.job_valid)
        api_gpujob_release(m->decode.job);
    free(m->decode.job);
    m->decode.job = NULL;
    m->decode.job_valid = 0;
}

void ctl_memo_sleep(struct ctl_memo *m)
{
    memo_decode_drop(m);
    gq_sstr_put(m->status.last_status);
    m->status.last_status = NULL;
    free(m->pl.pl_text);
    m->pl.pl_text = NULL;
    ctl_placement_release(&m->pl.pl_cache);
    ctl_memo_victims_clear(m);
    (void)ctl_str_set(&m->wait.reserved, NULL, 0);
    (void)ctl_str_set(&m->wait.unsched_msg, NULL, 0);
    m->decode.dormant = 1;
}

static void memo_free(struct ctl_memo *m)
{
    if (!m)
        return;
    memo_decode_drop(m);
    free(m->key);
    gq_sstr_put(m->status.last_status);
    free(m->pl.pl_text);
    free(m->wait.wait_msg);
    free(m->wait.unsched_msg);
    free(m->wait.reserved);
    free(m->decode.job_err);
    free(m->decode.prep_invalid_msg);
    free(m->pods.gone_pod);
    free(m->pods.created_pod);
    ctl_waitpub_release(&m->wait.pub);
    free(m->pods.create_err);
    ctl_placement_release(&m->pl.pl_cache);
    free(m->pods.pods);
    free(m->pods.pf);
    cJSON_Delete(m->pods.gone_ok);
    ctl_memo_victims_clear(m);
    free(m->victims.victims);
    free(m);
}

int ctl_memo_victim_add(struct ctl_memo *m, const char *key)
{
    for (int k = 0; k < m->victims.nvictims; k++)
        if (!strcmp(m->victims.victims[k], key))
            return GQ_OK;
    if (m->victims.nvictims == m->victims.capvictims) {
        int cap = m->victims.capvictims ? 2 * m->victims.capvictims : 4;
        char **nv = realloc(m->victims.victims, (size_t)cap * sizeof(*nv));
        if (!nv)
            return GQ_ENOMEM;
        m->victims.victims = nv;
        m->victims.capvictims = cap;
    }
    if (!(m->victims.victims[m->victims.nvictims] = strdup(key)))
        return GQ_ENOMEM;
    m->victims.nvictims++;
    return GQ_OK;
}

void ctl_memo_victims_clear(struct ctl_memo *m)
{
    for (int k = 0; k < m->victims.nvictims; k++)
        free(m->victims.victims[k]);
    m->victims.nvictims = 0;
}

static int memo_grow(struct ctl_memo_table *t)
{
    size_t nb = t->nb ? t->nb * 2 : 256;
    struct ctl_memo **b = calloc(nb, sizeof(*b));
    if (!b)
        return GQ_ENOMEM;
    for (size_t i = 0; i < t->nb; i++) {
        struct ctl_memo *m = t->b[i], *next;
        for (; m; m = next) {
            next = m->next;
            size_t h = (size_t)(m->hash % nb);
            m->next = b[h];
            b[h] = m;
        }
    }
    free(t->b);
    t->b = b;
    t->nb = nb;
    return 0;
}

struct ctl_memo *ctl_memo_get(struct ctl_memo_table *t, const char *key, int create)
{
    uint64_t hash = gq_hash_str(key);
    if (t->nb) {
        for (struct ctl_memo *m = t->b[(size_t)(hash % t->nb)]; m; m = m->next)
            if (m->hash == hash && !strcmp(m->key, key))
                return m;
    }
    if (!create)
        return NULL;
    if ((t->n + 1 > t->nb * 2 || !t->nb) && memo_grow(t))
        return NULL;
    struct ctl_memo *m = calloc(1, sizeof(*m));
    if (!m || !(m->key = strdup(key))) {
        free(m);
        return NULL;
    }
    m->hash = hash;
    size_t h = (size_t)(hash % t->nb);
    m->next = t->b[h];
    t->b[h] = m;
    t->n++;
    return m;
}

static int objset_find(const struct ctl_objset *s, const char *key, int *at);

void ctl_memo_seen(struct ctl_memo_table *t, struct ctl_memo *m, int64_t cycle)
{
    if (t->seen_for != cycle) {
        t->seen_for = cycle;
        t->nseen = 0;
    }
    if (m->seen_cycle < cycle) {
        m->seen_cycle = cycle;
        t->nseen++;
    }
}

void ctl_memo_drop_unseen(struct ctl_memo_table *t, int64_t cycle, struct ctl_objset *hints)
{
    if (t->seen_for == cycle && t->nseen >= t->n)
        return; /* every memo was seen: none to drop */
    for (size_t i = 0; i < t->nb; i++) {
        struct ctl_memo **pp = &t->b[i];
        while (*pp) {
            struct ctl_memo *m = *pp;
            if (m->seen_cycle < cycle && !m->status.status_inflight && !m->pods.cleanup_inflight && !m->pods.npods) {
                int at;
                *pp = m->next;
                if (hints && objset_find(hints, m->key, &at) && hints->e[at].memo == m)
                    hints->e[at].memo = NULL;
                memo_free(m);
                t->n--;
            } else {
                pp = &m->next;
            }
        }
    }
}

void ctl_memo_table_release(struct ctl_memo_table *t)
{
    for (size_t i = 0; i < t->nb; i++) {
        struct ctl_memo *m = t->b[i], *next;
        for (; m; m = next) {
            next = m->next;
            memo_free(m);
        }
    }
    free(t->b);
    memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------ object sets */

static int objset_find(const struct ctl_objset *s, const char *key, int *at)
{
    int lo = 0, hi = s->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(s->e[mid].key, key);
        if (!c) {
            *at = mid;
            return 1;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return 0;
}

int ctl_objset_put(struct ctl_objset *s, const char *key, const cJSON *obj)
{
    int at;
    if (objset_find(s, key, &at)) {
        s->e[at].obj = obj;
        return GQ_OK;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 256;
        struct ctl_objent *n = realloc(s->e, (size_t)cap * sizeof(*n));
        if (!n)
            return GQ_ENOMEM;
        s->e = n;
        s->cap = cap;
    }
    char *k = strdup(key);
    if (!k)
        return GQ_ENOMEM;
    memmove(&s->e[at + 1], &s->e[at], (size_t)(s->n - at) * sizeof(*s->e));
    s->e[at].key = k;
    s->e[at].obj = obj;
    s->e[at].memo = NULL;
    s->n++;
    return GQ_OK;
}

void ctl_objset_del(struct ctl_objset *s, const char *key)
{
    int at;
    if (!objset_find(s, key, &at))
        return;
    free(s->e[at].key);
    memmove(&s->e[at], &s->e[at + 1], (size_t)(s->n - at - 1) * sizeof(*s->e));
    s->n--;
}

void ctl_objset_release(struct ctl_objset *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->e[i].key);
    free(s->e);
    memset(s, 0, sizeof(*s));
}

/* ------------------------------------------------------------ pods by job */

static void pod_facts(const cJSON *o, struct ctl_podfacts *f)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
    f->name = ctl_obj_str(md, "name", NULL);
    f->deletion = ctl_obj_str(md, "deletionTimestamp", NULL);
    f->replica = ctl_obj_str(labels, CTL_LABEL_REPLICA, NULL);
    f->attempt = ctl_obj_str(labels, CTL_LABEL_ATTEMPT, NULL);
    f->node = ctl_obj_str(o, "spec", "nodeName");
    f->phase = ctl_obj_str(o, "status", "phase");
    f->terminal = f->phase && (!strcmp(f->phase, "Succeeded") || !strcmp(f->phase, "Failed"));
}

/* The key of the job a gangq pod belongs to ("ns/<job label>"); 0 when the
 * pod is not gangq's (no job label). */
static int pod_job_key(const cJSON *o, char *key, size_t len)
{
    const char *job = ctl_obj_label(o, CTL_LABEL_JOB);
    const char *ns = ctl_obj_str(o, "metadata", "namespace");
    if (!job)
        return 0;
    snprintf(key, len, "%s/%s", ns ? ns : "", job);
    return 1;
}

static void memo_pod_del(struct ctl_memo *m, const cJSON *o)
{
    for (int i = 0; i < m->pods.npods; i++)
        if (m->pods.pods[i] == o) {
            m->pods.npods--;
            m->pods.pods[i] = m->pods.pods[m->pods.npods];
            m->pods.pf[i] = m->pods.pf[m->pods.npods];
            return;
        }
}

static int memo_pod_add(struct ctl_memo *m, const cJSON *o)
{
    if (m->pods.npods == m->pods.podcap) {
        int nc = m->pods.podcap ? m->pods.podcap * 2 : 1; /* most jobs have one pod */
        const cJSON **p = realloc(m->pods.pods, (size_t)nc * sizeof(*p));
        if (!p)
            return GQ_ENOMEM;
        m->pods.pods = p;
        struct ctl_podfacts *f = realloc(m->pods.pf, (size_t)nc * sizeof(*f));
        if (!f)
            return GQ_ENOMEM;
        m->pods.pf = f;
        m->pods.podcap = nc;
    }
    pod_facts(o, &m->pods.pf[m->pods.npods]);
    m->pods.pods[m->pods.npods++] = o;
    return GQ_OK;
}

static int foreign_pod(const cJSON *o)
{
    const char *nn = ctl_obj_str(o, "spec", "nodeName");
    return nn && nn[0] && !ctl_pod_terminal(o);
}

int ctl_index_pod(struct ctl_memo_table *t, struct ctl_objset *foreign, const cJSON *old_obj,
                  const cJSON *new_obj, int64_t dirty_cycle)
{
    char key[CTL_KEY_MAX];
    int rc = GQ_OK;
    if (old_obj) {
        struct ctl_memo *m;
        if (pod_job_key(old_obj, key, sizeof(key))) {
            if ((m = ctl_memo_get(t, key, 0))) {
                memo_pod_del(m, old_obj);
                m->dirty_upto = dirty_cycle;
            }
        } else if (!kube_object_key(old_obj, key, sizeof(key))) {
            ctl_objset_del(foreign, key);
        }
    }
    if (new_obj) {
        struct ctl_memo *m;
        if (pod_job_key(new_obj, key, sizeof(key))) {
            if (!(m = ctl_memo_get(t, key, 1)))
                return GQ_ENOMEM;
            rc = memo_pod_add(m, new_obj);
            m->dirty_upto = dirty_cycle;
        } else if (foreign_pod(new_obj) && !kube_object_key(new_obj, key, sizeof(key))) {
            rc = ctl_objset_put(foreign, key, new_obj);
        }
    }
    return rc;
}

int ctl_index_job(struct ctl_memo_table *t, struct ctl_objset *jobs, const cJSON *old_obj,
                  const cJSON *new_obj, int64_t dirty_cycle)
{
    char key[CTL_KEY_MAX];
    const cJSON *o = new_obj ? new_obj : old_obj;
    const char *ns = o ? ctl_obj_str(o, "metadata", "namespace") : NULL;
    const char *name = o ? ctl_obj_str(o, "metadata", "name") : NULL;
    if (!ns || !name)
        return GQ_OK; /* never gathered (a GPUJob is namespaced) */
    int kl = snprintf(key, sizeof(key), "%s/%s", ns, name);
    if (kl < 0 || (size_t)kl >= sizeof(key))
        return GQ_OK; /* longer than the API allows: never gathered, never truncated */
    if (dirty_cycle)
        ctl_memo_mark(t, key, dirty_cycle);
    if (!new_obj) {
        ctl_objset_del(jobs, key);
        return GQ_OK;
    }
    return ctl_objset_put(jobs, key, new_obj);
}

void ctl_memo_dirty(struct ctl_memo *m, int64_t dirty_cycle)
{
    if (m && m->dirty_upto < dirty_cycle)
        m->dirty_upto = dirty_cycle;
}

void ctl_memo_mark(struct ctl_memo_table *t, const char *key, int64_t dirty_cycle)
{
    ctl_memo_dirty(ctl_memo_get(t, key, 0), dirty_cycle);
}
