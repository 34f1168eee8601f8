/* sim_report.c — statistics, text table, JSON summary and SVG plot of a run. */
#include "sim_report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>

#include "gq.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t rank(const int64_t *v, size_t n, double p)
{
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    if (k < 1)
        k = 1;
    return v[k - 1];
}

void sim_delay_compute(int64_t *v, size_t n, struct sim_delay *out)
{
    double sum = 0;
    memset(out, 0, sizeof(*out));
    if (n == 0)
        return;
    qsort(v, n, sizeof(*v), cmp_i64);
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    out->n = (int64_t)n;
    out->mean = sum / (double)n;
    out->p50 = rank(v, n, 50);
    out->p95 = rank(v, n, 95);
    out->p99 = rank(v, n, 99);
    out->max = v[n - 1];
}

void sim_fmt_dur(char *buf, size_t len, int64_t s)
{
    if (s < 60)
        snprintf(buf, len, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, len, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else if (s < 86400)
        snprintf(buf, len, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
    else
        snprintf(buf, len, "%lldd%02lldh", (long long)(s / 86400), (long long)(s % 86400 / 3600));
}

static void add_reason(struct sim_report *rep, const char *text, const char *job)
{
    for (int i = 0; i < rep->nreasons; i++) {
        if (!strcmp(rep->reasons[i].text, text)) {
            rep->reasons[i].count++;
            return;
        }
    }
    if (rep->nreasons < SIM_REPORT_REASONS) {
        struct sim_reason *r = &rep->reasons[rep->nreasons++];
        gq_strlcpy(r->text, text, sizeof(r->text));
        gq_strlcpy(r->example, job, sizeof(r->example));
        r->count = 1;
        return;
    }
    /* the table is full: count under the last row as "other reasons" */
    struct sim_reason *o = &rep->reasons[SIM_REPORT_REASONS - 1];
    if (strcmp(o->text, "(other reasons)")) {
        gq_strlcpy(o->text, "(other reasons)", sizeof(o->text));
    }
    o->count++;
}

int sim_report_compute(const struct sim_cluster *c, const struct sim_trace *t,
                       const struct sim_result *res, struct sim_report *rep)
{
    int rc = GQ_ENOMEM;
    int64_t *vals = NULL, *tmp = NULL;
    size_t nv;
    memset(rep, 0, sizeof(*rep));
    rep->total_gpus = res->total_gpus;
    rep->nteams = c->nteams + 1;
    rep->by_team = calloc(rep->nteams, sizeof(*rep->by_team));
    vals = malloc((t->njobs + 1) * sizeof(*vals));
    tmp = malloc((t->njobs + 1) * sizeof(*tmp));
    if (!rep->by_team || !vals || !tmp)
        goto out;
    /* outcomes */
    rep->jobs = (int64_t)t->njobs;
    for (size_t i = 0; i < t->njobs; i++) {
        const struct sim_job_out *o = &res->jobs[i];
        rep->jobs_by_class[t->jobs[i].cls]++;
        switch (o->final) {
        case SIM_F_DONE: rep->done++; break;
        case SIM_F_RUNNING: rep->running++; break;
        case SIM_F_WAITING: rep->waiting++; break;
        case SIM_F_SUSPENDED: rep->suspended++; break;
        case SIM_F_TIMED_OUT: rep->timed_out++; break;
        default: rep->never_arrived++; break;
        }
        if (o->first_start < 0 && o->final == SIM_F_WAITING) {
            rep->never_ran++;
            add_reason(rep, o->reason[0] ? o->reason : "(no explanation from the core)", t->jobs[i].name);
        }
    }
    /* the most preempted jobs (ties: trace order) */
    for (size_t i = 0; i < t->njobs; i++) {
        int p = res->jobs[i].preemptions, k;
        if (p <= 0)
            continue;
        for (k = rep->ntop_preempted; k > 0 && res->jobs[rep->top_preempted[k - 1]].preemptions < p; k--)
            if (k < 3)
                rep->top_preempted[k] = rep->top_preempted[k - 1];
        if (k < 3) {
            rep->top_preempted[k] = i;
            if (rep->ntop_preempted < 3)
                rep->ntop_preempted++;
        }
    }
    /* sort reasons by count, descending (small table) */
    for (int i = 1; i < rep->nreasons; i++)
        for (int k = i; k > 0 && rep->reasons[k].count > rep->reasons[k - 1].count; k--) {
            struct sim_reason x = rep->reasons[k];
            rep->reasons[k] = rep->reasons[k - 1];
            rep->reasons[k - 1] = x;
        }
    /* queueing delay: arrival to first start, jobs that started */
    nv = 0;
    for (size_t i = 0; i < t->njobs; i++)
        if (res->jobs[i].first_start >= 0)
            vals[nv++] = res->jobs[i].first_start - t->jobs[i].arrival;
    memcpy(tmp, vals, nv * sizeof(*vals));
    sim_delay_compute(tmp, nv, &rep->all);
    for (int k = 0; k < SIM_NCLASS; k++) {
        size_t m = 0;
        for (size_t i = 0; i < t->njobs; i++)
            if (res->jobs[i].first_start >= 0 && t->jobs[i].cls == k)
                tmp[m++] = res->jobs[i].first_start - t->jobs[i].arrival;
        sim_delay_compute(tmp, m, &rep->by_class[k]);
    }
    for (size_t k = 0; k < rep->nteams; k++) {
        size_t m = 0;
        for (size_t i = 0; i < t->njobs; i++) {
            if (res->jobs[i].first_start < 0)
                continue;
            int match = k < c->nteams ? !strcmp(t->jobs[i].team, c->teams[k].name) : 1;
            if (k == c->nteams)
                for (size_t q = 0; q < c->nteams && match; q++)
                    match = strcmp(t->jobs[i].team, c->teams[q].name) != 0;
            if (match)
                tmp[m++] = res->jobs[i].first_start - t->jobs[i].arrival;
        }
        sim_delay_compute(tmp, m, &rep->by_team[k]);
    }
    for (int k = 0; k < SIM_NCLASS; k++) {
        rep->preemptions[k] = res->preemptions[k];
        rep->lost_gpu_h[k] = (double)res->lost_gpu_s[k] / 3600.0;
    }
    /* time-weighted figures over [first sample, end] */
    if (res->nsamples) {
        rep->start = res->samples[0].t;
        rep->end = res->end_time > rep->start ? res->end_time : rep->start;
        double span = (double)(rep->end - rep->start);
        double aw = 0, qw = 0, fw = 0, fpw = 0, wtime = 0;
        rep->nbuckets = span > 0 ? SIM_REPORT_BUCKETS : 0;
        for (int b = 0; b <= rep->nbuckets; b++)
            rep->bucket_start[b] = rep->start + (int64_t)((double)b * span / SIM_REPORT_BUCKETS);
        double bw[SIM_REPORT_BUCKETS] = {0};
        for (size_t i = 0; i < res->nsamples; i++) {
            const struct sim_sample *s = &res->samples[i];
            int64_t a = s->t, e = i + 1 < res->nsamples ? res->samples[i + 1].t : rep->end;
            double alloc = s->total_milli ? 100.0 * (double)s->used_milli / (double)s->total_milli : 0;
            if (alloc > rep->alloc_peak_pct)
                rep->alloc_peak_pct = alloc;
            if (s->waiting > rep->queue_max)
                rep->queue_max = s->waiting;
            if (e <= a)
                continue;
            double dt = (double)(e - a);
            aw += alloc * dt;
            qw += (double)s->waiting * dt;
            if (s->waiting > 0) {
                wtime += dt;
                fw += (double)s->frag_milli / 1000.0 * dt;
                fpw += (s->free_milli ? 100.0 * (double)s->frag_milli / (double)s->free_milli : 0) * dt;
            }
            for (int b = 0; b < rep->nbuckets; b++) {
                int64_t lo = GQ_MAX(a, rep->bucket_start[b]), hi = GQ_MIN(e, rep->bucket_start[b + 1]);
                if (hi > lo) {
                    rep->bucket_alloc_pct[b] += alloc * (double)(hi - lo);
                    rep->bucket_queue[b] += (double)s->waiting * (double)(hi - lo);
                    bw[b] += (double)(hi - lo);
                }
            }
        }
        if (span > 0) {
            rep->alloc_mean_pct = aw / span;
            rep->queue_mean = qw / span;
        } else {
            const struct sim_sample *s = &res->samples[res->nsamples - 1];
            rep->alloc_mean_pct = s->total_milli ? 100.0 * (double)s->used_milli / (double)s->total_milli : 0;
            rep->queue_mean = s->waiting;
        }
        if (wtime > 0) {
            rep->frag_mean_gpus = fw / wtime;
            rep->frag_mean_pct_free = fpw / wtime;
        }
        for (int b = 0; b < rep->nbuckets; b++)
            if (bw[b] > 0) {
                rep->bucket_alloc_pct[b] /= bw[b];
                rep->bucket_queue[b] /= bw[b];
            }
    }
    rc = GQ_OK;
out:
    free(vals);
    free(tmp);
    if (rc)
        sim_report_release(rep);
    return rc;
}

void sim_report_release(struct sim_report *rep)
{
    if (!rep)
        return;
    free(rep->by_team);
    memset(rep, 0, sizeof(*rep));
}

static void clock_of(char *buf, size_t len, int64_t t)
{
    snprintf(buf, len, "%02lld:%02lld", (long long)(t / 3600), (long long)(t % 3600 / 60));
}

static void print_delay(FILE *f, const char *label, const struct sim_delay *d, int64_t total)
{
    char m[16], a[16], b[16], c[16], x[16];
    if (d->n == 0) {
        fprintf(f, "  %-16s %6lld %6s  %9s %9s %9s %9s %9s\n", label, (long long)d->n, "", "-", "-", "-", "-",
                "-");
        return;
    }
    sim_fmt_dur(m, sizeof(m), (int64_t)llround(d->mean));
    sim_fmt_dur(a, sizeof(a), d->p50);
    sim_fmt_dur(b, sizeof(b), d->p95);
    sim_fmt_dur(c, sizeof(c), d->p99);
    sim_fmt_dur(x, sizeof(x), d->max);
    fprintf(f, "  %-16s %6lld %6lld  %9s %9s %9s %9s %9s\n", label, (long long)d->n, (long long)total, m, a, b,
            c, x);
}

void sim_report_print(FILE *f, const struct sim_cluster *c, const struct sim_trace *t,
                      const struct sim_result *res, const struct sim_report *rep,
                      const char *cluster_path, const char *trace_path)
{
    char d1[16];
    /* GPU types */
    fprintf(f, "gangq simulate: %s + %s\n\n", cluster_path, trace_path);
    fprintf(f, "cluster  %zu nodes, %lld GPUs (", c->nnodes, (long long)res->total_gpus);
    {
        const char *seen[16];
        int nseen = 0;
        for (size_t i = 0; i < c->nnodes; i++) {
            const char *ty = c->nodes[i].gpu_type;
            int k;
            if (!ty[0])
                continue;
            for (k = 0; k < nseen && strcmp(seen[k], ty); k++)
                ;
            if (k < nseen || nseen == 16)
                continue;
            seen[nseen++] = ty;
            long long g = 0;
            for (size_t q = 0; q < c->nnodes; q++)
                if (!strcmp(c->nodes[q].gpu_type, ty))
                    g += c->nodes[q].gpus;
            fprintf(f, "%s%s %lld", nseen > 1 ? ", " : "", ty, g);
        }
    }
    fprintf(f, "), %zu pools, %zu teams\n", c->npools, c->nteams);
    sim_fmt_dur(d1, sizeof(d1), t->njobs ? t->jobs[t->njobs - 1].arrival - t->jobs[0].arrival : 0);
    fprintf(f, "trace    %zu jobs arriving over %s (Inference %lld, Batch %lld, Training %lld), %zu node events\n",
            t->njobs, d1, (long long)rep->jobs_by_class[0], (long long)rep->jobs_by_class[1],
            (long long)rep->jobs_by_class[2], t->nevents);
    sim_fmt_dur(d1, sizeof(d1), res->end_time);
    fprintf(f, "run      %lld scheduling cycles, %lld admissions, virtual time %s, wall time %.2f s\n\n",
            (long long)res->cycles, (long long)res->admits, d1, res->wall_s);

    fprintf(f, "OUTCOME  finished %lld, still running %lld, still waiting %lld, suspended %lld", (long long)rep->done,
            (long long)rep->running, (long long)rep->waiting, (long long)rep->suspended);
    if (rep->timed_out)
        fprintf(f, ", stopped at their maxRun %lld", (long long)rep->timed_out);
    fprintf(f, " (of %lld jobs)\n\n", (long long)rep->jobs);

    fprintf(f, "GPU ALLOCATION  share of the cluster's GPUs held by running jobs (time-weighted)\n");
    fprintf(f, "  mean %.1f %%, peak %.1f %%; jobs waiting: mean %.1f, max %lld\n", rep->alloc_mean_pct,
            rep->alloc_peak_pct, rep->queue_mean, (long long)rep->queue_max);
    if (rep->nbuckets) {
        fprintf(f, "  %-13s %7s  %-26s %s\n", "time", "alloc", "", "waiting (mean)");
        for (int b = 0; b < rep->nbuckets; b++) {
            char a[24], z[24], bar[27];
            int n = (int)lround(rep->bucket_alloc_pct[b] / 4.0);
            clock_of(a, sizeof(a), rep->bucket_start[b]);
            clock_of(z, sizeof(z), rep->bucket_start[b + 1]);
            n = n < 0 ? 0 : n > 25 ? 25 : n;
            memset(bar, '#', (size_t)n);
            bar[n] = '\0';
            fprintf(f, "  %5s-%-7s %6.1f%%  %-26s %.1f\n", a, z, rep->bucket_alloc_pct[b], bar, rep->bucket_queue[b]);
        }
    }
    fprintf(f, "\nQUEUEING DELAY  arrival to first start, jobs that started\n");
    fprintf(f, "  %-16s %6s %6s  %9s %9s %9s %9s %9s\n", "", "jobs", "of", "mean", "p50", "p95", "p99", "max");
    for (int k = 0; k < SIM_NCLASS; k++)
        print_delay(f, sim_class_name(k), &rep->by_class[k], rep->jobs_by_class[k]);
    print_delay(f, "all", &rep->all, rep->jobs);
    for (size_t k = 0; k < rep->nteams; k++) {
        char lab[40];
        int64_t total = 0;
        if (k == c->nteams && rep->by_team[k].n == 0)
            continue;
        for (size_t i = 0; i < t->njobs; i++)
            if (k < c->nteams ? !strcmp(t->jobs[i].team, c->teams[k].name) : !t->jobs[i].team[0])
                total++;
        snprintf(lab, sizeof(lab), "team %.30s", k < c->nteams ? c->teams[k].name : "(none)");
        print_delay(f, lab, &rep->by_team[k], total);
    }
    fprintf(f, "\nFRAGMENTATION  free GPUs the smallest waiting request cannot use (while jobs wait)\n");
    fprintf(f, "  mean %.1f GPUs, %.1f %% of the free GPUs\n", rep->frag_mean_gpus, rep->frag_mean_pct_free);
    fprintf(f, "\nPREEMPTIONS  by class of the preempted job (work lost when it did not checkpoint)\n");
    for (int k = 0; k < SIM_NCLASS; k++)
        fprintf(f, "  %-10s %5lld   lost %.1f GPU-hours\n", sim_class_name(k), (long long)rep->preemptions[k],
                rep->lost_gpu_h[k]);
    if (rep->ntop_preempted) {
        fprintf(f, "  most preempted:");
        for (int k = 0; k < rep->ntop_preempted; k++) {
            size_t i = rep->top_preempted[k];
            fprintf(f, "%s %s %d time%s", k ? "," : "", t->jobs[i].name, res->jobs[i].preemptions,
                    res->jobs[i].preemptions == 1 ? "" : "s");
        }
        fprintf(f, "\n");
    }
    if (res->node_failures)
        fprintf(f, "  node failures: %lld\n", (long long)res->node_failures);
    fprintf(f, "\nNEVER RAN  %lld jobs", (long long)rep->never_ran);
    if (rep->never_ran) {
        fprintf(f, ", by the scheduler's last explanation:\n");
        for (int i = 0; i < rep->nreasons; i++)
            fprintf(f, "  %5lld x %s%s%s%s\n", (long long)rep->reasons[i].count, rep->reasons[i].text,
                    rep->reasons[i].example[0] ? " (e.g. " : "", rep->reasons[i].example,
                    rep->reasons[i].example[0] ? ")" : "");
    } else {
        fprintf(f, "\n");
    }
}

static cJSON *delay_json(const struct sim_delay *d)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "jobs", (double)d->n);
    cJSON_AddNumberToObject(o, "mean_s", d->mean);
    cJSON_AddNumberToObject(o, "p50_s", (double)d->p50);
    cJSON_AddNumberToObject(o, "p95_s", (double)d->p95);
    cJSON_AddNumberToObject(o, "p99_s", (double)d->p99);
    cJSON_AddNumberToObject(o, "max_s", (double)d->max);
    return o;
}

int sim_report_json(const char *path, const struct sim_cluster *c, const struct sim_result *res,
                    const struct sim_report *rep, char *err, size_t errlen)
{
    int rc = GQ_ENOMEM;
    cJSON *root = cJSON_CreateObject(), *o, *a;
    char *text = NULL;
    FILE *f = NULL;
    if (!root)
        goto out;
    o = cJSON_AddObjectToObject(root, "jobs");
    if (!o)
        goto out;
    cJSON_AddNumberToObject(o, "total", (double)rep->jobs);
    cJSON_AddNumberToObject(o, "finished", (double)rep->done);
    cJSON_AddNumberToObject(o, "running", (double)rep->running);
    cJSON_AddNumberToObject(o, "waiting", (double)rep->waiting);
    cJSON_AddNumberToObject(o, "suspended", (double)rep->suspended);
    cJSON_AddNumberToObject(o, "timed_out", (double)rep->timed_out);
    cJSON_AddNumberToObject(o, "never_ran", (double)rep->never_ran);
    o = cJSON_AddObjectToObject(root, "run");
    if (!o)
        goto out;
    cJSON_AddNumberToObject(o, "cycles", (double)res->cycles);
    cJSON_AddNumberToObject(o, "admissions", (double)res->admits);
    cJSON_AddNumberToObject(o, "end_time_s", (double)res->end_time);
    cJSON_AddNumberToObject(o, "wall_s", res->wall_s);
    cJSON_AddNumberToObject(o, "total_gpus", (double)res->total_gpus);
    cJSON_AddNumberToObject(o, "node_failures", (double)res->node_failures);
    o = cJSON_AddObjectToObject(root, "allocation");
    if (!o)
        goto out;
    cJSON_AddNumberToObject(o, "mean_pct", rep->alloc_mean_pct);
    cJSON_AddNumberToObject(o, "peak_pct", rep->alloc_peak_pct);
    cJSON_AddNumberToObject(o, "queue_mean", rep->queue_mean);
    cJSON_AddNumberToObject(o, "queue_max", (double)rep->queue_max);
    a = cJSON_AddArrayToObject(o, "buckets");
    for (int b = 0; a && b < rep->nbuckets; b++) {
        cJSON *e = cJSON_CreateObject();
        if (!e)
            goto out;
        cJSON_AddNumberToObject(e, "start_s", (double)rep->bucket_start[b]);
        cJSON_AddNumberToObject(e, "end_s", (double)rep->bucket_start[b + 1]);
        cJSON_AddNumberToObject(e, "alloc_pct", rep->bucket_alloc_pct[b]);
        cJSON_AddNumberToObject(e, "queue_mean", rep->bucket_queue[b]);
        cJSON_AddItemToArray(a, e);
    }
    o = cJSON_AddObjectToObject(root, "queueing_delay");
    if (!o)
        goto out;
    cJSON_AddItemToObject(o, "all", delay_json(&rep->all));
    a = cJSON_AddObjectToObject(o, "by_class");
    for (int k = 0; a && k < SIM_NCLASS; k++)
        cJSON_AddItemToObject(a, sim_class_name(k), delay_json(&rep->by_class[k]));
    a = cJSON_AddObjectToObject(o, "by_team");
    for (size_t k = 0; a && k < c->nteams; k++)
        cJSON_AddItemToObject(a, c->teams[k].name, delay_json(&rep->by_team[k]));
    o = cJSON_AddObjectToObject(root, "fragmentation");
    if (!o)
        goto out;
    cJSON_AddNumberToObject(o, "mean_gpus_while_waiting", rep->frag_mean_gpus);
    cJSON_AddNumberToObject(o, "mean_pct_of_free", rep->frag_mean_pct_free);
    o = cJSON_AddObjectToObject(root, "preemptions");
    for (int k = 0; o && k < SIM_NCLASS; k++) {
        cJSON *e = cJSON_AddObjectToObject(o, sim_class_name(k));
        if (!e)
            goto out;
        cJSON_AddNumberToObject(e, "count", (double)rep->preemptions[k]);
        cJSON_AddNumberToObject(e, "lost_gpu_hours", rep->lost_gpu_h[k]);
    }
    a = cJSON_AddArrayToObject(root, "never_ran");
    for (int i = 0; a && i < rep->nreasons; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e)
            goto out;
        cJSON_AddStringToObject(e, "reason", rep->reasons[i].text);
        cJSON_AddNumberToObject(e, "jobs", (double)rep->reasons[i].count);
        cJSON_AddStringToObject(e, "example", rep->reasons[i].example);
        cJSON_AddItemToArray(a, e);
    }
    text = cJSON_Print(root);
    if (!text)
        goto out;
    f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fputc('\n', f) == EOF) {
        gq_errf(err, errlen, "%s: %s", path, strerror(errno));
        rc = GQ_EIO;
        goto out;
    }
    rc = GQ_OK;
out:
    if (f && fclose(f) && rc == GQ_OK) {
        gq_errf(err, errlen, "%s: %s", path, strerror(errno));
        rc = GQ_EIO;
    }
    free(text);
    cJSON_Delete(root);
    return rc;
}

/* Time-weighted mean of alloc% and max queue within each of ncol columns. */
static void columns(const struct sim_result *res, int64_t a, int64_t b, int ncol, double *alloc, double *queue)
{
    size_t i = 0;
    for (int k = 0; k < ncol; k++) {
        int64_t lo = a + (int64_t)((double)(b - a) * k / ncol);
        int64_t hi = a + (int64_t)((double)(b - a) * (k + 1) / ncol);
        double w = 0, s = 0, q = 0;
        if (hi <= lo)
            hi = lo + 1;
        while (i + 1 < res->nsamples && res->samples[i + 1].t <= lo)
            i++;
        for (size_t j = i; j < res->nsamples && res->samples[j].t < hi; j++) {
            const struct sim_sample *sm = &res->samples[j];
            int64_t e = j + 1 < res->nsamples ? res->samples[j + 1].t : b;
            int64_t x = GQ_MAX(sm->t, lo), y = GQ_MIN(e, hi);
            double al = sm->total_milli ? 100.0 * (double)sm->used_milli / (double)sm->total_milli : 0;
            if (y > x) {
                s += al * (double)(y - x);
                w += (double)(y - x);
            }
            if (sm->waiting > q)
                q = sm->waiting;
        }
        alloc[k] = w > 0 ? s / w : (k ? alloc[k - 1] : 0);
        queue[k] = q;
    }
}

int sim_report_svg(const char *path, const struct sim_result *res, const struct sim_report *rep,
                   const char *title, char *err, size_t errlen)
{
    enum { W = 900, H = 460, L = 60, R = 20, PW = W - L - R, T1 = 40, PH = 160, T2 = 260 };
    double *alloc = NULL, *queue = NULL, qmax = 1;
    int rc = GQ_ENOMEM;
    FILE *f = NULL;
    int64_t a = rep->start, b = rep->end > rep->start ? rep->end : rep->start + 1;
    alloc = calloc(PW, sizeof(*alloc));
    queue = calloc(PW, sizeof(*queue));
    if (!alloc || !queue)
        goto out;
    if (res->nsamples)
        columns(res, a, b, PW, alloc, queue);
    for (int k = 0; k < PW; k++)
        if (queue[k] > qmax)
            qmax = queue[k];
    f = fopen(path, "w");
    if (!f) {
        gq_errf(err, errlen, "%s: %s", path, strerror(errno));
        rc = GQ_EIO;
        goto out;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\">", L);
    for (const char *p = title; *p; p++) { /* escape the title */
        if (*p == '<')
            fputs("&lt;", f);
        else if (*p == '>')
            fputs("&gt;", f);
        else if (*p == '&')
            fputs("&amp;", f);
        else
            fputc(*p, f);
    }
    fprintf(f, "</text>\n");
    /* panels and axes */
    const int tops[2] = {T1, T2};
    const char *names[2] = {"GPU allocation %", "jobs waiting"};
    for (int p = 0; p < 2; p++) {
        int top = tops[p];
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", L, top,
                PW, PH);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", L + 4, top - 4, names[p]);
        for (int g = 0; g <= 4; g++) {
            int y = top + PH - g * PH / 4;
            double v = p == 0 ? 25.0 * g : qmax * g / 4.0;
            fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n", L, y, L + PW, y);
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n", L - 4, y + 4, v);
        }
        for (int g = 0; g <= 8; g++) {
            int x = L + g * PW / 8;
            int64_t tt = a + (b - a) * g / 8;
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%lldh%02lld</text>\n", x, top + PH + 14,
                    (long long)(tt / 3600), (long long)(tt % 3600 / 60));
        }
    }
    /* series */
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
    for (int k = 0; k < PW; k++)
        fprintf(f, "%d,%.1f ", L + k, T1 + PH - alloc[k] / 100.0 * PH);
    fprintf(f, "\"/>\n");
    fprintf(f, "<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" points=\"");
    for (int k = 0; k < PW; k++)
        fprintf(f, "%d,%.1f ", L + k, T2 + PH - queue[k] / qmax * PH);
    fprintf(f, "\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">mean allocation %.1f %%, mean queue %.1f</text>\n", W - R,
            20, rep->alloc_mean_pct, rep->queue_mean);
    fprintf(f, "</svg>\n");
    rc = GQ_OK;
out:
    if (f && (ferror(f) | fclose(f)) && rc == GQ_OK) {
        gq_errf(err, errlen, "%s: write failed", path);
        rc = GQ_EIO;
    }
    free(alloc);
    free(queue);
    return rc;
}
