/*
 * plugin_render.c — pure parts of `kubectl gangq`: GPUJob/Team/Node/Pod objects to
 * rows, queue order and estimated positions, quota arithmetic, tables and YAML.
 * No I/O, no clock.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gq.h"
#include "plugin.h"
#include "quantity.h"

/* ---------------------------------------------------------------- json helpers */

static const cJSON *jget(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = jget(o, k);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

static int jint(const cJSON *o, const char *k, int64_t *out)
{
    const cJSON *v = jget(o, k);
    if (!cJSON_IsNumber(v))
        return 0;
    double d = v->valuedouble;
    if (d != d || d > 9e15 || d < -9e15)
        return 0;
    *out = (int64_t)d;
    return 1;
}

static double jtime(const cJSON *o, const char *k)
{
    const char *s = jstr(o, k);
    double t = 0;
    if (s && gq_parse_rfc3339(s, 0, &t))
        return 0;
    return t;
}

static const char *label_of(const cJSON *obj, const char *key)
{
    return jstr(jget(jget(obj, "metadata"), "labels"), key);
}

void pl_fmt_milli(int64_t m, char *out, size_t len)
{
    const char *sign = m < 0 ? "-" : "";
    if (m < 0)
        m = -m;
    if (m % 1000 == 0) {
        snprintf(out, len, "%s%lld", sign, (long long)(m / 1000));
        return;
    }
    char frac[8];
    snprintf(frac, sizeof frac, "%03lld", (long long)(m % 1000));
    for (int i = 2; i > 0 && frac[i] == '0'; i--)
        frac[i] = 0;
    snprintf(out, len, "%s%lld.%s", sign, (long long)(m / 1000), frac);
}

/* ---------------------------------------------------------------- errors */

/* The API server's Status message, if the body is one. */
static void status_message(const char *body, char *out, size_t len)
{
    cJSON *j = body ? cJSON_Parse(body) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    gq_strlcpy(out, cJSON_IsString(m) ? m->valuestring : "", len);
    cJSON_Delete(j);
}

void pl_http_error_text(long status, const char *body, const struct pl_what *w, char *err,
                        size_t errlen)
{
    char msg[512];
    status_message(body, msg, sizeof msg);
    const char *res = w && w->resource ? w->resource : "resource";
    const char *verb = w && w->verb ? w->verb : "get";
    if (status == 403) {
        char where[PL_NS_MAX + 32] = "";
        if (w && w->ns)
            snprintf(where, sizeof where, " in namespace %s", w->ns);
        else if (w && !strcmp(verb, "list"))
            gq_strlcpy(where, " at the cluster scope (all namespaces)", sizeof where);
        gq_errf(err, errlen, "forbidden: you may not %s %s%s%s%s%s%s", verb, res,
                w && w->name ? " " : "", w && w->name ? w->name : "", where,
                msg[0] ? " (API server: " : "", msg[0] ? msg : "");
        if (msg[0] && strlen(err) + 2 < errlen)
            strncat(err, ")", errlen - strlen(err) - 1);
        return;
    }
    if (status == 404 && w && w->name) {
        /* "gpujobs.gangq.io" -> "gpujob" */
        char kind[64];
        gq_strlcpy(kind, res, sizeof kind);
        char *dot = strchr(kind, '.');
        if (dot)
            *dot = 0;
        size_t kl = strlen(kind);
        if (kl > 1 && kind[kl - 1] == 's')
            kind[kl - 1] = 0;
        if (w->ns)
            gq_errf(err, errlen, "%s %s/%s not found", kind, w->ns, w->name);
        else
            gq_errf(err, errlen, "%s %s not found", kind, w->name);
        return;
    }
    if (status == 401) {
        gq_errf(err, errlen, "unauthorized: the API server did not accept the kubeconfig's credentials%s%s",
                msg[0] ? ": " : "", msg);
        return;
    }
    if (status)
        gq_errf(err, errlen, "%s %s: HTTP %ld%s%s", verb, res, status, msg[0] ? ": " : "", msg);
    else
        gq_errf(err, errlen, "%s %s: cannot reach the API server", verb, res);
}

/* ---------------------------------------------------------------- jobs */

int pl_job_from_json(const cJSON *obj, struct pl_job *j)
{
    const cJSON *md = jget(obj, "metadata"), *spec = jget(obj, "spec"), *st = jget(obj, "status");
    const cJSON *gpu = jget(spec, "gpu");
    const char *s;
    int64_t v;
    memset(j, 0, sizeof *j);
    j->position = j->gpos = -1;
    j->arrival = -1;
    if (!(s = jstr(md, "name")))
        return GQ_EINVAL;
    gq_strlcpy(j->name, s, sizeof j->name);
    gq_strlcpy(j->ns, (s = jstr(md, "namespace")) ? s : "", sizeof j->ns);
    gq_strlcpy(j->team, (s = jstr(st, "team")) ? s : "", sizeof j->team);
    gq_strlcpy(j->cls, (s = jstr(spec, "class")) ? s : "Batch", sizeof j->cls);
    gq_strlcpy(j->state, (s = jstr(st, "state")) ? s : "", sizeof j->state);
    gq_strlcpy(j->reason, (s = jstr(st, "waitReason")) ? s : "", sizeof j->reason);
    gq_strlcpy(j->message, (s = jstr(st, "message")) ? s : "", sizeof j->message);
    j->replicas = jint(spec, "replicas", &v) && v > 0 && v <= 1024 ? (int)v : 1;
    if (jint(gpu, "count", &v) && v > 0 && v <= 1000)
        j->count = (int)v;
    else if (jint(gpu, "shares", &v) && v > 0 && v < 1000)
        j->shares = (int)v;
    j->need_milli = (int64_t)j->replicas * (j->count ? j->count * 1000 : j->shares);
    const cJSON *types = jget(gpu, "types"), *t;
    size_t off = 0;
    cJSON_ArrayForEach(t, types)
    {
        if (!cJSON_IsString(t) || off + strlen(t->valuestring) + 2 >= sizeof j->types)
            continue;
        off += (size_t)snprintf(j->types + off, sizeof j->types - off, "%s%s", off ? "," : "",
                                t->valuestring);
    }
    const cJSON *sus = jget(spec, "suspend");
    j->suspend = cJSON_IsTrue(sus);
    if (jint(st, "priority", &v) || jint(spec, "priority", &v))
        j->priority = (int)GQ_MAX(GQ_MIN(v, 2000000000), -2000000000);
    j->created = jtime(md, "creationTimestamp");
    j->enqueued = jtime(st, "enqueueTime");
    if (j->enqueued == 0)
        j->enqueued = j->created;
    if (jint(st, "arrival", &v))
        j->arrival = v;
    if (jint(st, "position", &v) && v > 0 && v < 1000000000)
        j->position = (int)v;
    if (jint(st, "globalPosition", &v) && v > 0 && v < 1000000000)
        j->gpos = (int)v;
    char tot[16], per[16];
    if (j->count) {
        pl_fmt_milli(j->need_milli, tot, sizeof tot);
        if (j->replicas > 1)
            snprintf(j->gpus, sizeof j->gpus, "%s (%dx%d)", tot, j->replicas, j->count);
        else
            snprintf(j->gpus, sizeof j->gpus, "%s", tot);
    } else if (j->shares) {
        snprintf(per, sizeof per, "%dm", j->shares);
        if (j->replicas > 1)
            snprintf(j->gpus, sizeof j->gpus, "%dx%s", j->replicas, per);
        else
            snprintf(j->gpus, sizeof j->gpus, "%s", per);
    } else {
        gq_strlcpy(j->gpus, "-", sizeof j->gpus);
    }
    return GQ_OK;
}

int pl_job_waiting(const struct pl_job *j)
{
    return !j->suspend && (!j->state[0] || !strcmp(j->state, "Queued") ||
                           !strcmp(j->state, "Preempted"));
}

int pl_job_finished(const struct pl_job *j)
{
    return !strcmp(j->state, "Succeeded") || !strcmp(j->state, "Failed");
}

static int team_lists_ns(const cJSON *team, const char *ns)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, jget(jget(team, "spec"), "namespaces"))
    {
        if (cJSON_IsString(x) && !strcmp(x->valuestring, ns))
            return 1;
    }
    return 0;
}

void pl_jobs_apply_teams(struct pl_job *jobs, int n, const cJSON *teams)
{
    const cJSON *tm;
    if (!teams)
        return;
    for (int i = 0; i < n; i++) {
        struct pl_job *j = &jobs[i];
        if (!j->team[0]) { /* the oldest Team listing the namespace owns it */
            const cJSON *best = NULL;
            double bt = 0;
            cJSON_ArrayForEach(tm, teams)
            {
                if (!team_lists_ns(tm, j->ns))
                    continue;
                double t = jtime(jget(tm, "metadata"), "creationTimestamp");
                const char *nm = jstr(jget(tm, "metadata"), "name");
                if (!nm)
                    continue;
                if (!best || t < bt ||
                    (t == bt && strcmp(nm, jstr(jget(best, "metadata"), "name")) < 0)) {
                    best = tm;
                    bt = t;
                }
            }
            if (best)
                gq_strlcpy(j->team, jstr(jget(best, "metadata"), "name"), sizeof j->team);
        }
        cJSON_ArrayForEach(tm, teams)
        {
            const cJSON *h;
            cJSON_ArrayForEach(h, jget(jget(tm, "status"), "pendingHead"))
            {
                const char *hn = jstr(h, "name"), *hns = jstr(h, "namespace");
                int64_t v;
                if (!hn || !hns || strcmp(hn, j->name) || strcmp(hns, j->ns))
                    continue;
                if (j->position < 0 && jint(h, "position", &v) && v > 0 && v < 1000000000)
                    j->position = (int)v;
                if (j->gpos < 0 && jint(h, "globalPosition", &v) && v > 0 && v < 1000000000)
                    j->gpos = (int)v;
            }
        }
    }
}

static int job_cmp(const void *pa, const void *pb)
{
    const struct pl_job *a = pa, *b = pb;
    if ((a->gpos > 0) != (b->gpos > 0))
        return a->gpos > 0 ? -1 : 1;
    if (a->gpos > 0 && a->gpos != b->gpos)
        return a->gpos < b->gpos ? -1 : 1;
    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    if (a->enqueued != b->enqueued)
        return a->enqueued < b->enqueued ? -1 : 1;
    if (a->arrival != b->arrival)
        return a->arrival < b->arrival ? -1 : 1;
    int c = strcmp(a->ns, b->ns);
    return c ? c : strcmp(a->name, b->name);
}

void pl_queue_order(struct pl_job *jobs, int n)
{
    if (n <= 0)
        return;
    qsort(jobs, (size_t)n, sizeof *jobs, job_cmp);
    for (int i = 0; i < n; i++) {
        struct pl_job *j = &jobs[i];
        if (j->position > 0) {
            j->team_pos = j->position;
            j->team_pos_est = 0;
            continue;
        }
        int last = 0;
        for (int k = 0; k < i; k++)
            if (!strcmp(jobs[k].team, j->team) && jobs[k].team_pos > last)
                last = jobs[k].team_pos;
        j->team_pos = last + 1;
        j->team_pos_est = 1;
    }
}

void pl_age(double now, double t, char *out, size_t len)
{
    if (t <= 0) {
        gq_strlcpy(out, "-", len);
        return;
    }
    double d = now - t;
    if (d < 0)
        d = 0;
    long long s = (long long)d;
    if (s < 120)
        snprintf(out, len, "%llds", s);
    else if (s < 3 * 3600)
        snprintf(out, len, "%lldm", s / 60);
    else if (s < 2 * 86400)
        snprintf(out, len, "%lldh", s / 3600);
    else
        snprintf(out, len, "%lldd", s / 86400);
}

/* ---------------------------------------------------------------- tables */

int pl_table_init(struct pl_table *t, int ncol, const char *const *header)
{
    memset(t, 0, sizeof *t);
    if (ncol <= 0 || ncol > 64)
        return GQ_EINVAL;
    t->ncol = ncol;
    return header ? pl_table_add(t, header) : GQ_OK;
}

int pl_table_add(struct pl_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        int nc = t->cap ? t->cap * 2 : 16;
        if (nc > 1000000)
            return GQ_ELIMIT;
        char **p = realloc(t->cells, (size_t)nc * (size_t)t->ncol * sizeof *p);
        if (!p)
            return GQ_ENOMEM;
        t->cells = p;
        t->cap = nc;
    }
    char **row = t->cells + (size_t)t->nrows * (size_t)t->ncol;
    for (int c = 0; c < t->ncol; c++) {
        row[c] = strdup(cells[c] ? cells[c] : "");
        if (!row[c]) {
            for (int k = 0; k < c; k++)
                free(row[k]);
            return GQ_ENOMEM;
        }
        for (char *p = row[c]; *p; p++) /* one line per row */
            if (*p == '\n' || *p == '\t')
                *p = ' ';
    }
    t->nrows++;
    return GQ_OK;
}

int pl_table_render(const struct pl_table *t, const char *indent, struct gq_buf *out)
{
    size_t w[64] = {0};
    int rc = GQ_OK;
    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncol; c++) {
            size_t l = strlen(t->cells[(size_t)r * (size_t)t->ncol + (size_t)c]);
            if (l > w[c])
                w[c] = l;
        }
    for (int r = 0; !rc && r < t->nrows; r++) {
        rc = gq_buf_puts(out, indent ? indent : "");
        for (int c = 0; !rc && c < t->ncol; c++) {
            const char *s = t->cells[(size_t)r * (size_t)t->ncol + (size_t)c];
            if (c == t->ncol - 1)
                rc = gq_buf_puts(out, s);
            else
                rc = gq_buf_printf(out, "%-*s   ", (int)GQ_MIN(w[c], 4096), s);
        }
        /* no trailing blanks when the last cells are empty */
        while (!rc && out->len && out->p[out->len - 1] == ' ')
            out->p[--out->len] = 0;
        if (!rc)
            rc = gq_buf_puts(out, "\n");
    }
    return rc;
}

void pl_table_release(struct pl_table *t)
{
    for (size_t i = 0; t->cells && i < (size_t)t->nrows * (size_t)t->ncol; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

static void pos_text(const struct pl_job *j, char *g, size_t gl, char *tp, size_t tl)
{
    if (j->gpos > 0)
        snprintf(g, gl, "%d", j->gpos);
    else
        gq_strlcpy(g, "-", gl);
    snprintf(tp, tl, "%s%d", j->team_pos_est ? "~" : "", j->team_pos);
}

int pl_render_queue(const struct pl_job *jobs, int n, double now, struct gq_buf *out)
{
    static const char *const hdr[] = {"POS", "TEAM-POS", "TEAM", "NAMESPACE/NAME", "GPUS",
                                      "CLASS", "AGE", "WAIT-REASON", "MESSAGE"};
    struct pl_table t;
    int rc = pl_table_init(&t, 9, hdr);
    for (int i = 0; !rc && i < n; i++) {
        const struct pl_job *j = &jobs[i];
        char g[16], tp[16], age[16], nn[PL_NS_MAX + PL_NAME_MAX + 2];
        pos_text(j, g, sizeof g, tp, sizeof tp);
        pl_age(now, j->created, age, sizeof age);
        snprintf(nn, sizeof nn, "%s/%s", j->ns, j->name);
        const char *reason = j->reason[0] ? j->reason : j->state[0] ? j->state : "New";
        const char *cells[] = {g, tp, j->team[0] ? j->team : "?", nn, j->gpus, j->cls, age,
                               reason, j->message};
        rc = pl_table_add(&t, cells);
    }
    if (!rc)
        rc = pl_table_render(&t, NULL, out);
    pl_table_release(&t);
    return rc;
}

cJSON *pl_queue_json(const struct pl_job *jobs, int n, double now)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) {
        const struct pl_job *j = &jobs[i];
        cJSON *o = cJSON_CreateObject();
        int ok = o && cJSON_AddItemToArray(arr, o);
        if (!ok) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        ok = (j->gpos > 0 ? cJSON_AddNumberToObject(o, "globalPosition", j->gpos)
                          : cJSON_AddNullToObject(o, "globalPosition")) &&
             cJSON_AddNumberToObject(o, "teamPosition", j->team_pos) &&
             cJSON_AddBoolToObject(o, "teamPositionEstimated", j->team_pos_est) &&
             cJSON_AddStringToObject(o, "team", j->team) &&
             cJSON_AddStringToObject(o, "namespace", j->ns) &&
             cJSON_AddStringToObject(o, "name", j->name) &&
             cJSON_AddNumberToObject(o, "replicas", j->replicas) &&
             cJSON_AddNumberToObject(o, "gpus", (double)j->need_milli / 1000.0) &&
             cJSON_AddStringToObject(o, "class", j->cls) &&
             cJSON_AddNumberToObject(o, "priority", j->priority) &&
             cJSON_AddStringToObject(o, "state", j->state) &&
             cJSON_AddNumberToObject(o, "ageSeconds",
                                     j->created > 0 && now > j->created ? (long long)(now - j->created) : 0) &&
             cJSON_AddStringToObject(o, "waitReason", j->reason) &&
             cJSON_AddStringToObject(o, "message", j->message);
        if (!ok) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* ---------------------------------------------------------------- quota */

static int64_t lendable(const struct pl_qentry *e)
{
    if (!e->cohort[0])
        return 0;
    if (e->lend_limit >= 0)
        return GQ_MIN(e->lend_limit, e->nominal);
    return e->nominal;
}

void pl_quota_compute(const struct pl_qentry *en, int n, int idx, struct pl_quota *out)
{
    const struct pl_qentry *q = &en[idx];
    memset(out, 0, sizeof *out);
    out->nominal = q->nominal;
    out->used = q->used;
    out->borrowed = GQ_MAX(0, q->used - q->nominal);
    if (q->cohort[0] && q->borrow_limit != 0) {
        int64_t lend_sum = 0, over_sum = 0;
        for (int i = 0; i < n; i++) {
            const struct pl_qentry *e = &en[i];
            if (strcmp(e->cohort, q->cohort) || strcmp(e->type, q->type))
                continue;
            int64_t guaranteed = e->nominal - lendable(e);
            lend_sum += lendable(e);
            over_sum += GQ_MAX(0, e->used - guaranteed);
        }
        int64_t guaranteed = q->nominal - lendable(q);
        int64_t own_unused = GQ_MAX(0, q->nominal - GQ_MAX(q->used, guaranteed));
        int64_t may = lend_sum - over_sum - own_unused;
        if (q->borrow_limit >= 0)
            may = GQ_MIN(may, q->borrow_limit - out->borrowed);
        out->may_borrow = GQ_MAX(0, may);
        out->cohort_lendable = lend_sum;
    }
    out->available = GQ_MAX(0, q->nominal - q->used) + out->may_borrow;
}

/* status.gpuTypes[{gpuType, used}] of a Team: 1 when found. used may be fractional. */
static int status_used(const cJSON *team, const char *type, int64_t *used)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, jget(jget(team, "status"), "gpuTypes"))
    {
        const char *t = jstr(x, "gpuType");
        const cJSON *u = jget(x, "used");
        if (!t || strcmp(t, type))
            continue;
        if (cJSON_IsNumber(u) && u->valuedouble >= 0 && u->valuedouble < 1e12) {
            *used = (int64_t)(u->valuedouble * 1000.0 + 0.5);
            return 1;
        }
        if (cJSON_IsString(u) && !api_quantity_milli(u->valuestring, used, NULL, 0))
            return 1;
    }
    return 0;
}

static const struct pl_nodeinfo *node_find(const struct pl_nodeinfo *nodes, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(nodes[i].name, name))
            return &nodes[i];
    return NULL;
}

int pl_qentries_build(const cJSON *teams, const struct pl_nodeinfo *nodes, int nnodes,
                      const cJSON *pods, struct pl_qentry **out, int *nout)
{
    const cJSON *tm, *q;
    int n = 0, cap = 0;
    struct pl_qentry *en = NULL;
    *out = NULL;
    *nout = 0;
    cJSON_ArrayForEach(tm, teams)
    {
        const char *name = jstr(jget(tm, "metadata"), "name");
        const char *cohort = jstr(jget(tm, "spec"), "cohort");
        int first = n;
        if (!name)
            continue;
        cJSON_ArrayForEach(q, jget(jget(tm, "spec"), "quota"))
        {
            const char *type = jstr(q, "gpuType");
            int64_t v;
            if (!type)
                continue;
            if (n == cap) {
                int nc = cap ? cap * 2 : 16;
                struct pl_qentry *p = nc > 100000 ? NULL : realloc(en, (size_t)nc * sizeof *p);
                if (!p) {
                    free(en);
                    return GQ_ENOMEM;
                }
                en = p;
                cap = nc;
            }
            struct pl_qentry *e = &en[n++];
            memset(e, 0, sizeof *e);
            gq_strlcpy(e->team, name, sizeof e->team);
            gq_strlcpy(e->cohort, cohort ? cohort : "", sizeof e->cohort);
            gq_strlcpy(e->type, type, sizeof e->type);
            e->nominal = jint(q, "gpus", &v) && v >= 0 ? v * 1000 : 0;
            e->borrow_limit = jint(q, "borrowingLimit", &v) && v >= 0 ? v * 1000 : -1;
            e->lend_limit = jint(q, "lendingLimit", &v) && v >= 0 ? v * 1000 : -1;
            e->used_known = status_used(tm, type, &e->used);
        }
        /* from the pods: each pod of the team is charged to the entry of its node's
         * GPU type, else to "*" (as the controller charges) */
        int need = 0;
        for (int i = first; i < n; i++)
            need |= !en[i].used_known;
        if (!need || !pods || !nodes)
            continue;
        for (int i = first; i < n; i++)
            if (!en[i].used_known) {
                en[i].used = 0;
                en[i].used_known = 1;
            }
        const cJSON *pod;
        cJSON_ArrayForEach(pod, pods)
        {
            const char *pt = label_of(pod, "gangq.io/team");
            if (!pt || strcmp(pt, name))
                continue;
            int64_t m = pl_pod_gpu_milli(pod);
            const struct pl_nodeinfo *nd = node_find(nodes, nnodes, jstr(jget(pod, "spec"), "nodeName"));
            if (m <= 0 || !nd)
                continue;
            int hit = -1, star = -1;
            for (int i = first; i < n; i++) {
                if (nd->type[0] && !strcmp(en[i].type, nd->type))
                    hit = i;
                if (!strcmp(en[i].type, "*") && star < 0)
                    star = i;
            }
            if (hit < 0)
                hit = star;
            /* an entry the Team published keeps its published value */
            if (hit >= 0 && !status_used(tm, en[hit].type, &(int64_t){0}))
                en[hit].used += m;
        }
    }
    *out = en;
    *nout = n;
    return GQ_OK;
}

/* ---------------------------------------------------------------- nodes */

int64_t pl_pod_gpu_milli(const cJSON *pod)
{
    const char *phase = jstr(jget(pod, "status"), "phase");
    if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")))
        return 0;
    int64_t sum = 0, v;
    const cJSON *c;
    cJSON_ArrayForEach(c, jget(jget(pod, "spec"), "containers"))
    {
        const cJSON *req = jget(jget(c, "resources"), "requests");
        const cJSON *g = jget(req, PL_GPU_RESOURCE);
        if (!g)
            g = jget(jget(jget(c, "resources"), "limits"), PL_GPU_RESOURCE);
        if (cJSON_IsString(g) && !api_quantity_value(g->valuestring, &v, NULL, 0) && v > 0 &&
            v < 1000000)
            sum += v * 1000;
        else if (cJSON_IsNumber(g) && g->valuedouble > 0 && g->valuedouble < 1e6)
            sum += (int64_t)g->valuedouble * 1000;
    }
    if (sum > 0)
        return sum;
    const char *ms = jstr(jget(jget(pod, "metadata"), "annotations"), "gangq.io/gpu-milli");
    if (ms && !gq_parse_i64(ms, (size_t)-1, &v) && v > 0 && v < 1000)
        return v;
    return 0;
}

int pl_nodes_build(const cJSON *nodes, const cJSON *pods, struct pl_nodeinfo **out, int *nout)
{
    int n = cJSON_GetArraySize(nodes), k = 0;
    *out = NULL;
    *nout = 0;
    if (n <= 0)
        return GQ_OK;
    struct pl_nodeinfo *nd = calloc((size_t)n, sizeof *nd);
    if (!nd)
        return GQ_ENOMEM;
    const cJSON *x;
    cJSON_ArrayForEach(x, nodes)
    {
        const char *name = jstr(jget(x, "metadata"), "name"), *t = label_of(x, PL_GPU_LABEL);
        const char *a = jstr(jget(jget(x, "status"), "allocatable"), PL_GPU_RESOURCE);
        int64_t v = 0;
        if (!name || k >= n)
            continue;
        gq_strlcpy(nd[k].name, name, sizeof nd[k].name);
        gq_strlcpy(nd[k].type, t ? t : "", sizeof nd[k].type);
        if (a && !api_quantity_value(a, &v, NULL, 0) && v > 0 && v < 1000000)
            nd[k].alloc = v * 1000;
        nd[k].unschedulable = cJSON_IsTrue(jget(jget(x, "spec"), "unschedulable"));
        k++;
    }
    cJSON_ArrayForEach(x, pods)
    {
        const char *nn = jstr(jget(x, "spec"), "nodeName");
        int64_t m = pl_pod_gpu_milli(x);
        for (int i = 0; nn && i < k; i++)
            if (!strcmp(nd[i].name, nn)) {
                nd[i].used += m;
                if (m > 0)
                    nd[i].pods++;
                break;
            }
    }
    *out = nd;
    *nout = k;
    return GQ_OK;
}

static int type_ok(const char *types, const char *t)
{
    if (!types[0])
        return 1;
    size_t l = strlen(t);
    for (const char *p = types; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == l && !strncmp(p, t, l))
            return 1;
        p += n + (e ? 1 : 0);
    }
    return 0;
}

static int node_qualifies(const struct pl_nodeinfo *n, const char *types)
{
    return n->alloc > 0 && !n->unschedulable && type_ok(types, n->type);
}

static int node_cmp(const void *pa, const void *pb, void *ctx)
{
    const struct pl_nodeinfo *a = pa, *b = pb;
    const char *types = ctx;
    int qa = node_qualifies(a, types), qb = node_qualifies(b, types);
    if (qa != qb)
        return qa ? -1 : 1;
    int64_t fa = a->alloc - a->used, fb = b->alloc - b->used;
    if (fa != fb)
        return fa > fb ? -1 : 1;
    return strcmp(a->name, b->name);
}

int pl_nodes_closest(struct pl_nodeinfo *nodes, int n, const char *types)
{
    int q = 0;
    if (n <= 0)
        return 0;
    types = types ? types : "";
    qsort_r(nodes, (size_t)n, sizeof *nodes, node_cmp, (void *)(uintptr_t)types);
    for (int i = 0; i < n; i++)
        q += node_qualifies(&nodes[i], types);
    return q;
}

/* ---------------------------------------------------------------- yaml */

static int plain_key(const char *s)
{
    if (!*s)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.' || *p == '/'))
            return 0;
    return !(*s == '-' || *s == '.' || !strcmp(s, "true") || !strcmp(s, "false") ||
             !strcmp(s, "null") || !strcmp(s, "yes") || !strcmp(s, "no") ||
             (*s >= '0' && *s <= '9'));
}

static int yaml_scalar(const cJSON *v, struct gq_buf *b)
{
    if (cJSON_IsString(v))
        return gq_buf_json_str(b, v->valuestring ? v->valuestring : "");
    if (cJSON_IsBool(v))
        return gq_buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == (double)(long long)d && d < 9e15 && d > -9e15)
            return gq_buf_printf(b, "%lld", (long long)d);
        return gq_buf_printf(b, "%.17g", d);
    }
    return gq_buf_puts(b, "null");
}

static int yaml_node(const cJSON *v, int ind, struct gq_buf *b, int depth);

static int is_coll(const cJSON *v)
{
    return (cJSON_IsObject(v) || cJSON_IsArray(v)) && v->child;
}

/* Writes the collection's items each on its own line at indent `ind`; the caller
 * has ended the line before. The first item may continue a "- " already written
 * when `inl` is set. */
static int yaml_items(const cJSON *v, int ind, int inl, struct gq_buf *b, int depth)
{
    const cJSON *c;
    int rc = 0, first = 1;
    if (depth > 64)
        return GQ_ELIMIT;
    cJSON_ArrayForEach(c, v)
    {
        if (!(first && inl))
            rc = rc ? rc : gq_buf_printf(b, "%*s", ind, "");
        first = 0;
        if (cJSON_IsObject(v)) {
            const char *k = c->string ? c->string : "";
            rc = rc ? rc : plain_key(k) ? gq_buf_puts(b, k) : gq_buf_json_str(b, k);
            rc = rc ? rc : gq_buf_puts(b, ":");
            if (is_coll(c)) {
                rc = rc ? rc : gq_buf_puts(b, "\n");
                rc = rc ? rc : yaml_node(c, cJSON_IsArray(c) ? ind : ind + 2, b, depth + 1);
            } else {
                rc = rc ? rc : gq_buf_puts(b, " ");
                rc = rc ? rc : yaml_node(c, ind + 2, b, depth + 1);
            }
        } else {
            if (cJSON_IsArray(c) && c->child) {
                rc = rc ? rc : gq_buf_puts(b, "-\n");
                rc = rc ? rc : yaml_node(c, ind + 2, b, depth + 1);
            } else {
                rc = rc ? rc : gq_buf_puts(b, "- ");
                if (cJSON_IsObject(c) && c->child)
                    rc = rc ? rc : yaml_items(c, ind + 2, 1, b, depth + 1);
                else
                    rc = rc ? rc : yaml_node(c, ind + 2, b, depth + 1);
            }
        }
    }
    return rc;
}

static int yaml_node(const cJSON *v, int ind, struct gq_buf *b, int depth)
{
    if (is_coll(v))
        return yaml_items(v, ind, 0, b, depth);
    int rc;
    if (cJSON_IsObject(v))
        rc = gq_buf_puts(b, "{}");
    else if (cJSON_IsArray(v))
        rc = gq_buf_puts(b, "[]");
    else
        rc = yaml_scalar(v, b);
    return rc ? rc : gq_buf_puts(b, "\n");
}

int pl_yaml_emit(const cJSON *v, struct gq_buf *out)
{
    return yaml_node(v, 0, out, 0);
}
