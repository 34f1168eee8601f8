/* sim_fgd.c — the openb replay through the core's one-task placement index. */
#include "sim_fgd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gq.h"

/* FGD's typical-pod key (PodResource): cpu, per-GPU milli, GPU count and the
 * accepted GPU models, so a typed task's shape keeps its type. */
struct shape_key {
    int64_t cpu;
    int gpus, milli;
    const char *spec; /* the pod's gpu_spec ("" = any model) */
};

static int cmp_shape(const void *a, const void *b)
{
    const struct shape_key *x = a, *y = b;
    if (x->gpus != y->gpus)
        return x->gpus < y->gpus ? -1 : 1;
    if (x->milli != y->milli)
        return x->milli < y->milli ? -1 : 1;
    if (x->cpu != y->cpu)
        return x->cpu < y->cpu ? -1 : 1;
    return strcmp(x->spec, y->spec);
}

/* Split a gpu_spec ("A|B|C") into req->types, each copied into types[k]. */
static void spec_types(const char *s, struct sched_request *req, char types[][24])
{
    while (*s && req->ntypes < SCHED_MAX_TYPES) {
        const char *bar = strchr(s, '|');
        size_t l = bar ? (size_t)(bar - s) : strlen(s);
        if (l && l < 24) {
            memcpy(types[req->ntypes], s, l);
            types[req->ntypes][l] = '\0';
            req->types[req->ntypes] = types[req->ntypes];
            req->ntypes++;
        }
        s += l + (bar ? 1 : 0);
    }
}

static void pod_request(const struct sim_openb_pod *p, struct sched_request *req, char types[][24])
{
    memset(req, 0, sizeof(*req));
    if (p->num_gpu > 0 && p->gpu_milli >= 1000)
        req->gpus = p->num_gpu;
    else if (p->num_gpu > 0)
        req->gpu_milli = p->gpu_milli;
    req->cpu_milli = p->cpu_milli;
    req->mem_bytes = p->mem_mib * 1048576;
    if (req->gpus > 0 || req->gpu_milli > 0)
        spec_types(p->spec, req, types); /* a CPU-only task's spec names no device */
}

/* The workload's shape distribution: distinct (gpus, gpu milli, cpu) with
 * their frequency in the trace, as FGD's "typical pods". */
/* SortTargetPodInDecreasingCount: count descending; among equal counts the
 * reverse of PodResource.Less (MilliCpu, then MilliGpu per GPU, then GpuNumber,
 * all descending). */
static int shape_milli(const struct sched_shape *x)
{
    return x->req.gpus > 0 ? 1000 : x->req.gpu_milli;
}

static int cmp_weight_desc(const void *a, const void *b)
{
    const struct sched_shape *x = a, *y = b;
    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    if (x->req.cpu_milli != y->req.cpu_milli)
        return x->req.cpu_milli > y->req.cpu_milli ? -1 : 1;
    if (shape_milli(x) != shape_milli(y))
        return shape_milli(x) > shape_milli(y) ? -1 : 1;
    int gx = x->req.gpus > 0 ? x->req.gpus : (x->req.gpu_milli > 0), gy = y->req.gpus > 0 ? y->req.gpus : (y->req.gpu_milli > 0);
    if (gx != gy)
        return (gx < gy) - (gx > gy);
    /* then the accepted models, so the order never depends on qsort */
    if (x->req.ntypes != y->req.ntypes)
        return x->req.ntypes < y->req.ntypes ? -1 : 1;
    for (int i = 0; i < x->req.ntypes; i++) {
        int c = strcmp(x->req.types[i], y->req.types[i]);
        if (c)
            return c;
    }
    return 0;
}

/* The shapes' type names live in *types (one row of SCHED_MAX_TYPES names per
 * shape, malloc'ed, freed by the caller after sched_index_set_shapes). */
static int build_shapes(const struct sim_openb *o, double typical_pct, struct sched_shape **out,
                        int *nout, char (**types)[SCHED_MAX_TYPES][24])
{
    struct shape_key *k = malloc(o->npods * sizeof(*k));
    struct sched_shape *sh = NULL;
    char(*tb)[SCHED_MAX_TYPES][24] = NULL;
    int n = 0;
    *out = NULL;
    *nout = 0;
    *types = NULL;
    if (!k)
        return GQ_ENOMEM;
    for (size_t i = 0; i < o->npods; i++) {
        const struct sim_openb_pod *p = &o->pods[i];
        k[i].cpu = p->cpu_milli;
        k[i].gpus = p->num_gpu > 0 && p->gpu_milli >= 1000 ? p->num_gpu : 0;
        k[i].milli = p->num_gpu > 0 && p->gpu_milli < 1000 ? p->gpu_milli : 0;
        k[i].spec = p->num_gpu > 0 ? p->spec : ""; /* a CPU-only task uses no GPU model */
    }
    qsort(k, o->npods, sizeof(*k), cmp_shape);
    sh = calloc(o->npods, sizeof(*sh));
    tb = calloc(o->npods, sizeof(*tb));
    if (!sh || !tb) {
        free(k);
        free(sh);
        free(tb);
        return GQ_ENOMEM;
    }
    for (size_t i = 0; i < o->npods; i++) {
        if (n && !cmp_shape(&k[i], &k[i - 1])) {
            sh[n - 1].weight += 1.0;
            continue;
        }
        sh[n].req.gpus = k[i].gpus;
        sh[n].req.gpu_milli = k[i].milli;
        sh[n].req.cpu_milli = k[i].cpu;
        spec_types(k[i].spec, &sh[n].req, tb[n]);
        sh[n].weight = 1.0;
        n++;
    }
    /* typical_pct in (0, 100): FGD's "typical pods" (utils.GetTypicalPods with
     * the experiments' typicalPodsConfig: CPU-only pods included, step 1): the
     * most frequent shapes, one at a time in decreasing count, until they
     * cover typical_pct % of the tasks; the weights are then renormalised over
     * the kept shapes (sched_index_set_shapes does that). >= 100: every shape.
     * The sort moves whole shapes; their type pointers go into tb rows that
     * stay put, so they remain valid. */
    qsort(sh, (size_t)n, sizeof(*sh), cmp_weight_desc);
    if (typical_pct > 0 && typical_pct < 100) {
        double cum = 0, want = typical_pct / 100.0 * (double)o->npods;
        int keep = 0;
        while (cum < want && keep < n)
            cum += sh[keep++].weight;
        n = keep;
    }
    for (int i = 0; i < n; i++)
        sh[i].weight /= (double)o->npods;
    free(k);
    *out = sh;
    *nout = n;
    *types = tb;
    return GQ_OK;
}

int sim_fgd_replay(const struct sim_openb *o, uint64_t seed, enum sched_policy policy,
                   double typical_pct, struct sim_fgd_run *out, char *err, size_t errlen)
{
    struct sched_config cfg;
    struct sched_node *nodes = NULL;
    struct sched_shape *shapes = NULL;
    char(*shape_types)[SCHED_MAX_TYPES][24] = NULL;
    struct sched_index *ix = NULL;
    size_t *order = NULL, norder = 0, ninf = 0;
    int64_t *arr = NULL, *used = NULL;
    int nshapes = 0, rc;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(out, 0, sizeof(*out));
    out->seed = seed;
    out->unalloc_pct = NAN;
    sched_config_default(&cfg);
    cfg.policy = policy;
    nodes = calloc(o->nnodes, sizeof(*nodes));
    if (!nodes) {
        rc = GQ_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < o->nnodes; i++) {
        nodes[i].name = o->nodes[i].name;
        nodes[i].ready = 1;
        nodes[i].cpu_milli = o->nodes[i].cpu_milli;
        nodes[i].mem_bytes = o->nodes[i].mem_mib * 1048576;
        nodes[i].gpus = o->nodes[i].gpus;
        nodes[i].gpu_product = o->nodes[i].model;
        nodes[i].pool = -1;
    }
    ix = sched_index_new(&cfg, nodes, (int)o->nnodes, err, errlen);
    if (!ix) {
        rc = GQ_EINVAL;
        goto out;
    }
    if ((rc = build_shapes(o, typical_pct, &shapes, &nshapes, &shape_types)) ||
        (rc = sched_index_set_shapes(ix, shapes, nshapes, err, errlen)))
        goto out;
    if ((rc = sim_openb_workload_tune(o, seed, SIM_FGD_TUNE, &order, &norder, &ninf, &out->removed)))
        goto out;
    arr = malloc((norder + 1) * sizeof(*arr));
    used = malloc((norder + 1) * sizeof(*used));
    if (!arr || !used) {
        rc = GQ_ENOMEM;
        goto out;
    }
    int64_t arrived = 0, usedm = 0;
    for (size_t i = 0; i < norder; i++) {
        const struct sim_openb_pod *p = &o->pods[order[i]];
        struct sched_request req;
        struct sched_replica rep;
        char types[SCHED_MAX_TYPES][24];
        pod_request(p, &req, types);
        arrived += sim_openb_pod_gpu_milli(p);
        rc = sched_place_one(ix, &req, NULL, 0, &rep);
        if (rc == GQ_OK) {
            out->placed++;
            usedm += sim_openb_pod_gpu_milli(p);
        } else if (rc == GQ_ENOTFOUND) {
            out->failed++;
        } else {
            gq_errf(err, errlen, "core refused task %s (%s)", p->name, gq_strerror(rc));
            goto out;
        }
        arr[i] = arrived;
        used[i] = usedm;
    }
    rc = GQ_OK;
    {
        int64_t am = 0, tm = 0;
        double fr = 0;
        sched_index_totals(ix, &am, &tm, &fr);
        if (am != usedm || tm != o->node_gpu_milli) {
            gq_errf(err, errlen, "core's totals (%lld used of %lld) disagree with the replay (%lld of %lld)",
                    (long long)am, (long long)tm, (long long)usedm, (long long)o->node_gpu_milli);
            rc = GQ_ECORRUPT;
            goto out;
        }
    }
    out->tasks = norder;
    out->inflated = ninf;
    sim_openb_bin(arr, used, norder, o->node_gpu_milli, out->alloc, out->have);
    if (out->have[100])
        out->unalloc_pct = 100.0 - out->alloc[100];
out:
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    sched_index_free(ix);
    free(nodes);
    free(shapes);
    free(shape_types);
    free(order);
    free(arr);
    free(used);
    return rc;
}
