/*
 * ctl_memo.c — the per-object memo table: what the controller remembers about
 * each GPUJob between reconciles (decoded spec cache, published status,
 * victims, in-flight writes), keyed by namespace/name.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_int.h"

/* ------------------------------------------------------------ memo table */

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void memo_free(struct ctl_memo *m)
{
    if (!m)
        return;
    if (m->job_valid)
        api_gpujob_release(&m->job);
    free(m->key);
    free(m->last_status);
    free(m->status_sig);
    free(m->pl_text);
    ctl_placement_release(&m->pl_cache);
    free(m->pods);
    free(m->pf);
    ctl_memo_victims_clear(m);
    free(m->victims);
    free(m);
}

int ctl_memo_victim_add(struct ctl_memo *m, const char *key)
{
    for (int k = 0; k < m->nvictims; k++)
        if (!strcmp(m->victims[k], key))
            return GQ_OK;
    if (m->nvictims == m->capvictims) {
        int cap = m->capvictims ? 2 * m->capvictims : 4;
        char **nv = realloc(m->victims, (size_t)cap * sizeof(*nv));
        if (!nv)
            return GQ_ENOMEM;
        m->victims = nv;
        m->capvictims = cap;
    }
    if (!(m->victims[m->nvictims] = strdup(key)))
        return GQ_ENOMEM;
    m->nvictims++;
    return GQ_OK;
}

void ctl_memo_victims_clear(struct ctl_memo *m)
{
    for (int k = 0; k < m->nvictims; k++)
        free(m->victims[k]);
    m->nvictims = 0;
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
            size_t h = hash_str(m->key) % nb;
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
    if (t->nb) {
        for (struct ctl_memo *m = t->b[hash_str(key) % t->nb]; m; m = m->next)
            if (!strcmp(m->key, key))
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
    size_t h = hash_str(key) % t->nb;
    m->next = t->b[h];
    t->b[h] = m;
    t->n++;
    return m;
}

void ctl_memo_drop_unseen(struct ctl_memo_table *t, int64_t cycle)
{
    for (size_t i = 0; i < t->nb; i++) {
        struct ctl_memo **pp = &t->b[i];
        while (*pp) {
            struct ctl_memo *m = *pp;
            if (m->seen_cycle < cycle && !m->status_inflight && !m->cleanup_inflight) {
                *pp = m->next;
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
