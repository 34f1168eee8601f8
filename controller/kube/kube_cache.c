/* kube_cache.c — objects keyed by namespace/name in a chained hash table. */
#include "kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct centry {
    char *key;
    cJSON *obj;
    uint64_t mark;
    struct centry *next;
};

struct kube_cache {
    struct centry **tab;
    size_t cap; /* power of two */
    size_t count;
    uint64_t gen;
};

struct kube_cache *kube_cache_new(void)
{
    struct kube_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap = 64;
    c->tab = calloc(c->cap, sizeof *c->tab);
    if (!c->tab) {
        free(c);
        return NULL;
    }
    return c;
}

void kube_cache_clear(struct kube_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++) {
        struct centry *e = c->tab[i], *n;
        for (; e; e = n) {
            n = e->next;
            free(e->key);
            cJSON_Delete(e->obj);
            free(e);
        }
        c->tab[i] = NULL;
    }
    c->count = 0;
}

void kube_cache_free(struct kube_cache *c)
{
    if (!c)
        return;
    kube_cache_clear(c);
    free(c->tab);
    free(c);
}

size_t kube_cache_count(const struct kube_cache *c)
{
    return c->count;
}

static const char *md_str(const cJSON *obj, const char *k)
{
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int kube_object_key(const cJSON *obj, char *out, size_t outlen)
{
    const char *name = md_str(obj, "name"), *ns = md_str(obj, "namespace");
    int n;
    if (!name || !*name)
        return GQ_EINVAL;
    n = ns && *ns ? snprintf(out, outlen, "%s/%s", ns, name) : snprintf(out, outlen, "%s", name);
    return n < 0 || (size_t)n >= outlen ? GQ_ELIMIT : GQ_OK;
}

static struct centry **find_slot(const struct kube_cache *c, const char *key)
{
    struct centry **pp = &c->tab[gq_hash_str(key) & (c->cap - 1)];
    while (*pp && strcmp((*pp)->key, key) != 0)
        pp = &(*pp)->next;
    return pp;
}

const cJSON *kube_cache_get_key(const struct kube_cache *c, const char *key)
{
    struct centry *e = *find_slot(c, key);
    return e ? e->obj : NULL;
}

const cJSON *kube_cache_get(const struct kube_cache *c, const char *ns, const char *name)
{
    char key[600];
    int n = ns && *ns ? snprintf(key, sizeof key, "%s/%s", ns, name)
                      : snprintf(key, sizeof key, "%s", name);
    if (n < 0 || (size_t)n >= sizeof key)
        return NULL;
    return kube_cache_get_key(c, key);
}

int kube_cache_foreach(const struct kube_cache *c, int (*fn)(const cJSON *obj, void *ud),
                       void *ud)
{
    for (size_t i = 0; i < c->cap; i++)
        for (struct centry *e = c->tab[i]; e; e = e->next) {
            int rc = fn(e->obj, ud);
            if (rc)
                return rc;
        }
    return 0;
}

static void maybe_grow(struct kube_cache *c)
{
    size_t ncap;
    struct centry **nt;
    if (c->count * 4 < c->cap * 3)
        return;
    ncap = c->cap * 2;
    nt = calloc(ncap, sizeof *nt);
    if (!nt)
        return; /* keep working with longer chains */
    for (size_t i = 0; i < c->cap; i++) {
        struct centry *e = c->tab[i], *n;
        for (; e; e = n) {
            size_t b = gq_hash_str(e->key) & (ncap - 1);
            n = e->next;
            e->next = nt[b];
            nt[b] = e;
        }
    }
    free(c->tab);
    c->tab = nt;
    c->cap = ncap;
}

/* Insert or replace; reports through cb; takes obj. */
static int put(struct kube_cache *c, const char *key, cJSON *obj, int silent_if_same_rv,
               kube_cache_event_cb cb, void *ud)
{
    struct centry **pp = find_slot(c, key), *e = *pp;
    if (e) {
        cJSON *old = e->obj;
        const char *orv = md_str(old, "resourceVersion"), *nrv = md_str(obj, "resourceVersion");
        e->mark = c->gen;
        if (silent_if_same_rv && orv && nrv && strcmp(orv, nrv) == 0) {
            cJSON_Delete(obj);
            return GQ_OK;
        }
        e->obj = obj;
        if (cb)
            cb(KUBE_EV_MODIFIED, old, obj, ud);
        cJSON_Delete(old);
        return GQ_OK;
    }
    e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) {
        free(e);
        cJSON_Delete(obj);
        return GQ_ENOMEM;
    }
    e->obj = obj;
    e->mark = c->gen;
    *pp = e;
    c->count++;
    if (cb)
        cb(KUBE_EV_ADDED, NULL, obj, ud);
    maybe_grow(c);
    return GQ_OK;
}

int kube_cache_apply(struct kube_cache *c, enum kube_event_type type, cJSON *obj,
                     kube_cache_event_cb cb, void *ud)
{
    char key[600];
    int rc = kube_object_key(obj, key, sizeof key);
    if (rc) {
        cJSON_Delete(obj);
        return rc;
    }
    if (type == KUBE_EV_ADDED || type == KUBE_EV_MODIFIED)
        return put(c, key, obj, 0, cb, ud);
    if (type == KUBE_EV_DELETED) {
        struct centry **pp = find_slot(c, key), *e = *pp;
        if (e) {
            *pp = e->next;
            c->count--;
            if (cb)
                cb(KUBE_EV_DELETED, e->obj, obj, ud);
            cJSON_Delete(e->obj);
            free(e->key);
            free(e);
        }
        cJSON_Delete(obj);
        return GQ_OK;
    }
    cJSON_Delete(obj);
    return GQ_EINVAL;
}

int kube_cache_replace(struct kube_cache *c, cJSON *items, kube_cache_event_cb cb, void *ud)
{
    int rc = GQ_OK;
    cJSON *it;
    char key[600];
    if (!cJSON_IsArray(items)) {
        cJSON_Delete(items);
        return GQ_EINVAL;
    }
    c->gen++;
    while ((it = cJSON_DetachItemFromArray(items, 0)) != NULL) {
        if (kube_object_key(it, key, sizeof key) != 0) {
            cJSON_Delete(it);
            continue;
        }
        rc = put(c, key, it, 1, cb, ud);
        if (rc)
            break;
    }
    cJSON_Delete(items);
    if (rc)
        return rc; /* stale entries stay: the next relist removes them */
    for (size_t i = 0; i < c->cap; i++) {
        struct centry **pp = &c->tab[i];
        while (*pp) {
            struct centry *e = *pp;
            if (e->mark == c->gen) {
                pp = &e->next;
                continue;
            }
            *pp = e->next;
            c->count--;
            if (cb)
                cb(KUBE_EV_DELETED, e->obj, e->obj, ud);
            cJSON_Delete(e->obj);
            free(e->key);
            free(e);
        }
    }
    return GQ_OK;
}
