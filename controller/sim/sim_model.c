/* sim_model.c — storage helpers for the simulator's input model. */
#include "sim_model.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gq.h"

static const char *const class_names[SIM_NCLASS] = {"Inference", "Batch", "Training"};

const char *sim_class_name(int cls)
{
    if (cls < 0 || cls >= SIM_NCLASS)
        return "?";
    return class_names[cls];
}

int sim_class_parse(const char *s)
{
    for (int i = 0; i < SIM_NCLASS; i++)
        if (s && !strcasecmp(s, class_names[i]))
            return i;
    return -1;
}

void sim_cluster_release(struct sim_cluster *c)
{
    if (!c)
        return;
    free(c->nodes);
    free(c->pools);
    free(c->teams);
    memset(c, 0, sizeof(*c));
}

void sim_trace_release(struct sim_trace *t)
{
    if (!t)
        return;
    free(t->jobs);
    free(t->events);
    memset(t, 0, sizeof(*t));
}

/* Grow *arr (element size sz) so one more fits; zero the new slot. */
static void *push(void **arr, size_t *n, size_t *cap, size_t sz)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        void *p;
        if (ncap > SIZE_MAX / sz)
            return NULL;
        p = realloc(*arr, ncap * sz);
        if (!p)
            return NULL;
        *arr = p;
        *cap = ncap;
    }
    char *slot = (char *)*arr + (*n) * sz;
    memset(slot, 0, sz);
    (*n)++;
    return slot;
}

struct sim_node *sim_cluster_add_node(struct sim_cluster *c)
{
    return push((void **)&c->nodes, &c->nnodes, &c->capnodes, sizeof(struct sim_node));
}

struct sim_job *sim_trace_add_job(struct sim_trace *t)
{
    struct sim_job *j = push((void **)&t->jobs, &t->njobs, &t->capjobs, sizeof(struct sim_job));
    if (j) {
        j->preemptible = -1;
        j->gang = -1;
        j->suspend_at = -1;
        j->resume_at = -1;
        j->replicas = 1;
    }
    return j;
}

struct sim_event *sim_trace_add_event(struct sim_trace *t)
{
    return push((void **)&t->events, &t->nevents, &t->capevents, sizeof(struct sim_event));
}

int sim_node_set_label(struct sim_node *n, const char *key, const char *value)
{
    for (int i = 0; i < n->nlabels; i++) {
        if (!strcmp(n->labels[i].key, key)) {
            gq_strlcpy(n->labels[i].value, value, sizeof(n->labels[i].value));
            return GQ_OK;
        }
    }
    if (n->nlabels >= SIM_MAX_LABELS)
        return GQ_ELIMIT;
    gq_strlcpy(n->labels[n->nlabels].key, key, sizeof(n->labels[0].key));
    gq_strlcpy(n->labels[n->nlabels].value, value, sizeof(n->labels[0].value));
    n->nlabels++;
    return GQ_OK;
}

const char *sim_node_label(const struct sim_node *n, const char *key)
{
    for (int i = 0; i < n->nlabels; i++)
        if (!strcmp(n->labels[i].key, key))
            return n->labels[i].value;
    return NULL;
}

/* Stable sorts: index arrays sorted by key then position (qsort is not stable). */
struct keyed {
    int64_t key;
    size_t pos;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : (x->pos > y->pos);
}

static int stable_sort(void *arr, size_t n, size_t sz, size_t key_off)
{
    int rc = GQ_ENOMEM;
    struct keyed *k = NULL;
    char *tmp = NULL;
    if (n < 2)
        return GQ_OK;
    k = calloc(n, sizeof(*k));
    tmp = malloc(n * sz);
    if (!k || !tmp)
        goto out;
    for (size_t i = 0; i < n; i++) {
        memcpy(&k[i].key, (char *)arr + i * sz + key_off, sizeof(int64_t));
        k[i].pos = i;
    }
    qsort(k, n, sizeof(*k), cmp_keyed);
    for (size_t i = 0; i < n; i++)
        memcpy(tmp + i * sz, (char *)arr + k[i].pos * sz, sz);
    memcpy(arr, tmp, n * sz);
    rc = GQ_OK;
out:
    free(k);
    free(tmp);
    return rc;
}

int sim_trace_sort(struct sim_trace *t)
{
    int rc = stable_sort(t->jobs, t->njobs, sizeof(struct sim_job), offsetof(struct sim_job, arrival));
    if (rc)
        return rc;
    return stable_sort(t->events, t->nevents, sizeof(struct sim_event), offsetof(struct sim_event, time));
}

int64_t sim_job_gpu_milli(const struct sim_job *j)
{
    int64_t per = j->gpus > 0 ? (int64_t)j->gpus * 1000 : j->shares;
    return per * j->replicas;
}
