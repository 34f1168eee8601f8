/* sim_openb.c — openb loaders, seeded workload, allocation binning, published table. */
#include "sim_openb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gq.h"
#include "sim_csv.h"

/* ---- PRNG ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

uint64_t sim_rng_below(struct sim_rng *r, uint64_t n)
{
    uint64_t lim = UINT64_MAX - (UINT64_MAX % n);
    uint64_t v;
    do
        v = sim_rng_next(r);
    while (v >= lim);
    return v % n;
}

/* ---- paths ---- */

const char *const sim_openb_workloads[SIM_OPENB_NWORKLOADS] = {
    "default",    "multigpu20", "multigpu30", "multigpu40", "multigpu50",
    "gpushare40", "gpushare60", "gpushare80", "gpuspec10",  "gpuspec20",
    "gpuspec25",  "cpu050",     "cpu100",     "cpu200",
};

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int sim_openb_dir(const char *given, char *out, size_t outlen)
{
    const char *dir = given && *given ? given : getenv("GANGQ_TRACES");
    if (!dir || !*dir) {
        gq_strlcpy(out, "", outlen);
        return GQ_ENOTFOUND;
    }
    if (gq_strlcpy(out, dir, outlen) >= outlen)
        return GQ_ELIMIT;
    return is_dir(out) ? GQ_OK : GQ_ENOTFOUND;
}

int sim_openb_resolve(const char *dir, const char *workload, char *path, size_t pathlen,
                      char *name_out, size_t namelen)
{
    int w, named = 0;
    for (size_t i = 0; i < sizeof(sim_openb_workloads) / sizeof(sim_openb_workloads[0]); i++)
        named |= !strcmp(workload, sim_openb_workloads[i]);
    if (named)
        w = snprintf(path, pathlen, "%s/openb_pod_list_%s.csv", dir, workload);
    else
        w = snprintf(path, pathlen, "%s", workload);
    if (w < 0 || (size_t)w >= pathlen)
        return GQ_ELIMIT;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    gq_strlcpy(name_out, base, namelen);
    char *dot = strrchr(name_out, '.');
    if (dot && !strcmp(dot, ".csv"))
        *dot = '\0';
    return GQ_OK;
}

/* ---- loaders ---- */

static int need_col(const struct sim_csv *c, const char *name, int *idx, char *err, size_t errlen)
{
    *idx = sim_csv_col(c, name);
    if (*idx < 0) {
        gq_errf(err, errlen, "%s:1: header: missing column \"%s\"", c->path, name);
        return GQ_EPARSE;
    }
    return GQ_OK;
}

int sim_openb_load_nodes(struct sim_openb *o, const char *path, char *err, size_t errlen)
{
    struct sim_csv c;
    int rc, csn, ccpu, cmem, cgpu, cmodel;
    size_t cap = 0;
    rc = sim_csv_open(&c, path, err, errlen);
    if (rc)
        return rc;
    if ((rc = need_col(&c, "sn", &csn, err, errlen)) || (rc = need_col(&c, "cpu_milli", &ccpu, err, errlen)) ||
        (rc = need_col(&c, "memory_mib", &cmem, err, errlen)) || (rc = need_col(&c, "gpu", &cgpu, err, errlen)) ||
        (rc = need_col(&c, "model", &cmodel, err, errlen)))
        goto out;
    while ((rc = sim_csv_next(&c, err, errlen)) == 1) {
        struct sim_openb_node *n;
        int64_t g;
        if (o->nnodes == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            void *p = realloc(o->nodes, ncap * sizeof(*o->nodes));
            if (!p) {
                rc = GQ_ENOMEM;
                goto out;
            }
            o->nodes = p;
            cap = ncap;
        }
        n = &o->nodes[o->nnodes];
        memset(n, 0, sizeof(*n));
        gq_strlcpy(n->name, sim_csv_get(&c, csn), sizeof(n->name));
        gq_strlcpy(n->model, sim_csv_get(&c, cmodel), sizeof(n->model));
        if ((rc = sim_csv_i64(&c, ccpu, -1, &n->cpu_milli, err, errlen)) ||
            (rc = sim_csv_i64(&c, cmem, -1, &n->mem_mib, err, errlen)) ||
            (rc = sim_csv_i64(&c, cgpu, -1, &g, err, errlen)))
            goto out;
        if (n->cpu_milli < 0 || n->mem_mib < 0 || g < 0 || g > 64) {
            gq_errf(err, errlen, "%s:%d: cpu_milli/memory_mib/gpu: missing or out of range", path, c.line);
            rc = GQ_EPARSE;
            goto out;
        }
        n->gpus = (int)g;
        o->node_cpu_milli += n->cpu_milli;
        o->node_gpu_milli += g * 1000;
        o->nnodes++;
    }
    if (rc == 0 && o->nnodes == 0) {
        gq_errf(err, errlen, "%s: no nodes", path);
        rc = GQ_EPARSE;
    }
out:
    sim_csv_release(&c);
    return rc < 0 ? rc : GQ_OK;
}

int sim_openb_load_pods(struct sim_openb *o, const char *path, char *err, size_t errlen)
{
    struct sim_csv c;
    int rc, cname, ccpu, cmem, cng, cgm, cspec;
    size_t cap = 0;
    rc = sim_csv_open(&c, path, err, errlen);
    if (rc)
        return rc;
    if ((rc = need_col(&c, "name", &cname, err, errlen)) || (rc = need_col(&c, "cpu_milli", &ccpu, err, errlen)) ||
        (rc = need_col(&c, "memory_mib", &cmem, err, errlen)) || (rc = need_col(&c, "num_gpu", &cng, err, errlen)) ||
        (rc = need_col(&c, "gpu_milli", &cgm, err, errlen)))
        goto out;
    cspec = sim_csv_col(&c, "gpu_spec"); /* absent in the multigpu files */
    while ((rc = sim_csv_next(&c, err, errlen)) == 1) {
        struct sim_openb_pod *p;
        int64_t ng, gm;
        if (o->npods == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            void *np = realloc(o->pods, ncap * sizeof(*o->pods));
            if (!np) {
                rc = GQ_ENOMEM;
                goto out;
            }
            o->pods = np;
            cap = ncap;
        }
        p = &o->pods[o->npods];
        memset(p, 0, sizeof(*p));
        gq_strlcpy(p->name, sim_csv_get(&c, cname), sizeof(p->name));
        if (cspec >= 0)
            gq_strlcpy(p->spec, sim_csv_get(&c, cspec), sizeof(p->spec));
        if ((rc = sim_csv_i64(&c, ccpu, 0, &p->cpu_milli, err, errlen)) ||
            (rc = sim_csv_i64(&c, cmem, 0, &p->mem_mib, err, errlen)) ||
            (rc = sim_csv_i64(&c, cng, 0, &ng, err, errlen)) ||
            (rc = sim_csv_i64(&c, cgm, 0, &gm, err, errlen)))
            goto out;
        if (p->cpu_milli < 0 || p->mem_mib < 0 || ng < 0 || ng > 64 || gm < 0 || gm > 1000 ||
            (gm < 1000 && gm > 0 && ng != 1) || (ng > 0 && gm == 0)) {
            gq_errf(err, errlen, "%s:%d: num_gpu/gpu_milli: inconsistent request (num_gpu %lld, gpu_milli %lld)",
                    path, c.line, (long long)ng, (long long)gm);
            rc = GQ_EPARSE;
            goto out;
        }
        p->num_gpu = (int)ng;
        p->gpu_milli = ng ? (int)gm : 0;
        o->pod_cpu_milli += p->cpu_milli;
        o->pod_gpu_milli += sim_openb_pod_gpu_milli(p);
        o->npods++;
    }
    if (rc == 0 && o->npods == 0) {
        gq_errf(err, errlen, "%s: no pods", path);
        rc = GQ_EPARSE;
    }
out:
    sim_csv_release(&c);
    return rc < 0 ? rc : GQ_OK;
}

void sim_openb_release(struct sim_openb *o)
{
    if (!o)
        return;
    free(o->nodes);
    free(o->pods);
    memset(o, 0, sizeof(*o));
}

int64_t sim_openb_pod_gpu_milli(const struct sim_openb_pod *p)
{
    return (int64_t)p->num_gpu * p->gpu_milli;
}

int sim_openb_workload(const struct sim_openb *o, uint64_t seed, double ratio, size_t **order,
                       size_t *norder, size_t *ninflated)
{
    size_t n = o->npods, ninf = 0, k;
    size_t want = 0;
    size_t *ord;
    struct sim_rng rng;
    *order = NULL;
    *norder = 0;
    *ninflated = 0;
    if (n == 0)
        return GQ_EINVAL;
    if (ratio > 1.0)
        want = (size_t)ceil((double)n * ratio) - n;
    ord = malloc((n + want) * sizeof(*ord));
    if (!ord)
        return GQ_ENOMEM;
    for (k = 0; k < n; k++)
        ord[k] = k;
    sim_rng_seed(&rng, seed);
    for (k = n - 1; k > 0; k--) { /* Fisher-Yates */
        size_t j = (size_t)sim_rng_below(&rng, k + 1);
        size_t t = ord[k];
        ord[k] = ord[j];
        ord[j] = t;
    }
    /* Inflation: a separate stream (the original seeds it with seed+1). */
    sim_rng_seed(&rng, seed + 1);
    int64_t cpu = o->pod_cpu_milli, gpu = o->pod_gpu_milli;
    for (size_t i = 0; i < want; i++) {
        size_t idx = (size_t)sim_rng_below(&rng, n);
        const struct sim_openb_pod *p = &o->pods[idx];
        if (cpu + p->cpu_milli > o->node_cpu_milli ||
            gpu + sim_openb_pod_gpu_milli(p) > o->node_gpu_milli)
            break; /* stop early: requests would exceed the cluster */
        cpu += p->cpu_milli;
        gpu += sim_openb_pod_gpu_milli(p);
        ord[n + ninf++] = idx;
    }
    *order = ord;
    *norder = n + ninf;
    *ninflated = ninf;
    return GQ_OK;
}

int sim_openb_workload_tune(const struct sim_openb *o, uint64_t seed, double ratio, size_t **order,
                            size_t *norder, size_t *nadded, size_t *nremoved)
{
    size_t n = o->npods, cap, k, m;
    size_t *ord = NULL;
    struct sim_rng rng;
    double tgt = ratio * (double)o->node_gpu_milli;
    int64_t gpu = o->pod_gpu_milli;
    *order = NULL;
    *norder = 0;
    *nadded = 0;
    *nremoved = 0;
    if (n == 0 || !(ratio > 0))
        return GQ_EINVAL;
    cap = n;
    ord = malloc(cap * sizeof(*ord));
    if (!ord)
        return GQ_ENOMEM;
    for (k = 0; k < n; k++)
        ord[k] = k;
    sim_rng_seed(&rng, seed);
    for (k = n - 1; k > 0; k--) { /* Fisher-Yates */
        size_t j = (size_t)sim_rng_below(&rng, k + 1);
        size_t t = ord[k];
        ord[k] = ord[j];
        ord[j] = t;
    }
    m = n;
    if ((double)gpu > tgt) {
        /* tuneDownPods: remove random pods, keeping the others' order */
        while ((double)gpu > tgt && m > 0) {
            size_t idx = (size_t)sim_rng_below(&rng, m);
            gpu -= sim_openb_pod_gpu_milli(&o->pods[ord[idx]]);
            memmove(&ord[idx], &ord[idx + 1], (m - idx - 1) * sizeof(*ord));
            m--;
            (*nremoved)++;
        }
    } else if ((double)gpu < tgt && o->pod_gpu_milli > 0) { /* else it never ends */
        /* tuneUpPods: append random draws (do-while) until the next would overshoot */
        for (;;) {
            size_t idx = (size_t)sim_rng_below(&rng, n);
            const struct sim_openb_pod *p = &o->pods[idx];
            if ((double)(gpu + p->gpu_milli) > tgt)
                break;
            if (m == cap) {
                size_t nc = cap * 2;
                size_t *q = realloc(ord, nc * sizeof(*q));
                if (!q) {
                    free(ord);
                    return GQ_ENOMEM;
                }
                ord = q;
                cap = nc;
            }
            gpu += sim_openb_pod_gpu_milli(p);
            ord[m++] = idx;
            (*nadded)++;
        }
    }
    *order = ord;
    *norder = m;
    return GQ_OK;
}

void sim_openb_bin(const int64_t *arrived, const int64_t *used, size_t n, int64_t total_milli,
                   double alloc[SIM_OPENB_BINS], int have[SIM_OPENB_BINS])
{
    double sum[SIM_OPENB_BINS] = {0};
    size_t cnt[SIM_OPENB_BINS] = {0};
    for (int x = 0; x < SIM_OPENB_BINS; x++) {
        alloc[x] = 0;
        have[x] = 0;
    }
    if (total_milli <= 0)
        return;
    /* Exact bins first. */
    for (size_t i = 0; i < n; i++) {
        double ar = nearbyint((double)arrived[i] * 100.0 / (double)total_milli);
        double al = nearbyint((double)used[i] * 100.0 / (double)total_milli * 100.0) / 100.0;
        if (ar < 0 || ar >= SIM_OPENB_BINS)
            continue;
        sum[(int)ar] += al;
        cnt[(int)ar]++;
    }
    for (int x = 0; x < SIM_OPENB_BINS; x++) {
        if (cnt[x]) {
            alloc[x] = nearbyint(sum[x] / (double)cnt[x] * 100.0) / 100.0;
            have[x] = 1;
            continue;
        }
        /* Fallback window [X-1, X+1] over the exact bins. */
        double s = 0;
        size_t c = 0;
        for (int d = -1; d <= 1; d++) {
            int y = x + d;
            if (y < 0 || y >= SIM_OPENB_BINS)
                continue;
            s += sum[y];
            c += cnt[y];
        }
        if (c) {
            alloc[x] = nearbyint(s / (double)c * 100.0) / 100.0;
            have[x] = 1;
        }
    }
}

int sim_fgd_table_read(const char *path, const char *workload, struct sim_fgd_table_row *row,
                       char *err, size_t errlen)
{
    struct sim_csv c;
    int rc, cw;
    memset(row, 0, sizeof(*row));
    rc = sim_csv_open(&c, path, err, errlen);
    if (rc)
        return rc;
    cw = sim_csv_col(&c, "workload");
    if (cw < 0) {
        gq_errf(err, errlen, "%s:1: header: missing column \"workload\"", path);
        rc = GQ_EPARSE;
        goto out;
    }
    while ((rc = sim_csv_next(&c, err, errlen)) == 1) {
        if (strcmp(sim_csv_get(&c, cw), workload))
            continue;
        gq_strlcpy(row->workload, workload, sizeof(row->workload));
        for (size_t i = 0; i < c.nheader && row->npolicies < SIM_FGD_MAX_POLICIES; i++) {
            const char *h = c.header[i];
            size_t hl = strlen(h);
            if (hl < 6 || strcmp(h + hl - 5, "_mean"))
                continue;
            char sdname[64];
            int w = snprintf(sdname, sizeof(sdname), "%.*s_sd", (int)(hl - 5), h);
            int csd = (w > 0 && (size_t)w < sizeof(sdname)) ? sim_csv_col(&c, sdname) : -1;
            /* "06-FGD_mean" -> "FGD" */
            const char *nm = h;
            const char *dash = memchr(h, '-', hl);
            if (dash)
                nm = dash + 1;
            int k = row->npolicies;
            snprintf(row->policy[k], sizeof(row->policy[k]), "%.*s", (int)(h + hl - 5 - nm), nm);
            row->mean[k] = strtod(sim_csv_get(&c, (int)i), NULL);
            row->sd[k] = csd >= 0 ? strtod(sim_csv_get(&c, csd), NULL) : 0;
            row->npolicies++;
        }
        rc = GQ_OK;
        goto out;
    }
    if (rc == 0) {
        gq_errf(err, errlen, "%s: no row for workload \"%s\"", path, workload);
        rc = GQ_ENOTFOUND;
    }
out:
    sim_csv_release(&c);
    return rc;
}
