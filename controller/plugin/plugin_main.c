/*
 * plugin_main.c — `kubectl gangq` (the gangq binary called as kubectl-gangq, or
 * `gangq kubectl ...`): queue, why, top teams|pools, suspend, resume, drain-team.
 * Exit codes: 0 ok, 1 error (API, not found, forbidden), 2 usage.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "gq.h"
#include "kube.h"
#include "plugin.h"

#define API "/apis/gangq.io/v1alpha1"

static const char USAGE[] =
    "usage: kubectl gangq <command> [flags]\n"
    "\n"
    "commands:\n"
    "  queue [-n NS | --team T | -A] [--watch]  waiting GPUJobs in admission order\n"
    "  why JOB [-n NS]                          why a GPUJob waits: reason, conditions,\n"
    "                                           its Team's quota arithmetic, closest nodes\n"
    "  top teams|pools                          quota, used, borrowed, pending per Team;\n"
    "                                           GPUPool capacity\n"
    "  suspend JOB... [-n NS]                   set spec.suspend=true (the controller\n"
    "                                           releases the job's GPUs)\n"
    "  resume JOB... [-n NS]                    set spec.suspend=false (back in the queue)\n"
    "  drain-team TEAM                          suspend every unfinished job of a Team in\n"
    "                                           all of its namespaces\n"
    "\n"
    "flags:\n"
    "  -n, --namespace NS     namespace (default: the kubeconfig context's)\n"
    "  -A, --all-namespaces   every namespace (queue)\n"
    "      --team T           one Team's jobs (queue)\n"
    "  -w, --watch            re-render the queue when it changes (polls every 2 s; Ctrl-C ends)\n"
    "  -o, --output FMT       table (default), json or yaml\n"
    "      --kubeconfig PATH  default $KUBECONFIG, else ~/.kube/config\n"
    "      --context NAME     default the current context\n"
    "\n"
    "Positions: POS is the controller's global admission position and TEAM-POS the place in\n"
    "the Team's queue; the controller publishes them for the head of each queue only\n"
    "(--position-head, default 10). Further back POS is \"-\" and TEAM-POS an estimate\n"
    "marked \"~\" (order: priority, then enqueue time).\n";

struct opts {
    const char *kubeconfig, *context, *ns, *team, *output;
    int all, watch;
    const char *pos[64];
    int npos;
};

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kubectl gangq: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", USAGE);
    return 2;
}

/* Parse flags anywhere among the positionals. 0 ok, 2 usage error, 3 help. */
static int parse(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        const char **dst = NULL;
        const char *val = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 3;
        if (!strcmp(a, "-A") || !strcmp(a, "--all-namespaces")) {
            o->all = 1;
            continue;
        }
        if (!strcmp(a, "-w") || !strcmp(a, "--watch")) {
            o->watch = 1;
            continue;
        }
        static const struct {
            const char *s, *l;
            size_t off;
        } F[] = {{"-n", "--namespace", offsetof(struct opts, ns)},
                 {"-o", "--output", offsetof(struct opts, output)},
                 {NULL, "--team", offsetof(struct opts, team)},
                 {NULL, "--kubeconfig", offsetof(struct opts, kubeconfig)},
                 {NULL, "--context", offsetof(struct opts, context)}};
        for (size_t f = 0; !dst && f < GQ_ARRAY_LEN(F); f++) {
            size_t ll = strlen(F[f].l);
            if ((F[f].s && !strcmp(a, F[f].s)) || !strcmp(a, F[f].l)) {
                if (i + 1 >= argc)
                    return usage_err("flag %s needs a value", a);
                dst = (const char **)((char *)o + F[f].off);
                val = argv[++i];
            } else if (!strncmp(a, F[f].l, ll) && a[ll] == '=') {
                dst = (const char **)((char *)o + F[f].off);
                val = a + ll + 1;
            } else if (F[f].s && !strncmp(a, F[f].s, 2) && a[2]) {
                dst = (const char **)((char *)o + F[f].off);
                val = a + 2 + (a[2] == '=');
            }
        }
        if (dst) {
            if (!val[0])
                return usage_err("flag %s needs a value", a);
            *dst = val;
            continue;
        }
        if (a[0] == '-' && a[1])
            return usage_err("unknown flag %s", a);
        if (o->npos >= (int)GQ_ARRAY_LEN(o->pos))
            return usage_err("too many arguments");
        o->pos[o->npos++] = a;
    }
    if (o->output && strcmp(o->output, "json") && strcmp(o->output, "yaml") &&
        strcmp(o->output, "table") && strcmp(o->output, "wide"))
        return usage_err("unknown output format \"%s\" (json, yaml or table)", o->output);
    if (o->ns && strlen(o->ns) >= PL_NS_MAX)
        return usage_err("namespace %s is too long", o->ns);
    return 0;
}

static int fmt_json(const struct opts *o)
{
    return o->output && !strcmp(o->output, "json");
}

static int fmt_yaml(const struct opts *o)
{
    return o->output && !strcmp(o->output, "yaml");
}

/* Print a tree as JSON or YAML; takes ownership of v. */
static int emit(const struct opts *o, cJSON *v)
{
    int rc = 0;
    if (!v) {
        fprintf(stderr, "kubectl gangq: out of memory\n");
        return 1;
    }
    if (fmt_yaml(o)) {
        struct gq_buf b;
        gq_buf_init(&b, 256u << 20);
        if (pl_yaml_emit(v, &b))
            rc = 1;
        else
            fputs(b.p ? b.p : "", stdout);
        gq_buf_release(&b);
    } else {
        char *s = cJSON_Print(v);
        if (s)
            printf("%s\n", s);
        else
            rc = 1;
        free(s);
    }
    cJSON_Delete(v);
    return rc;
}

static void put(struct gq_buf *b)
{
    fputs(b->p ? b->p : "", stdout);
    gq_buf_reset(b);
}

static const cJSON *jget(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = jget(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *jnum_text(const cJSON *o, const char *k, char *buf, size_t len)
{
    const cJSON *v = jget(o, k);
    if (cJSON_IsNumber(v))
        snprintf(buf, len, "%lld", (long long)v->valuedouble);
    else if (cJSON_IsString(v))
        gq_strlcpy(buf, v->valuestring, len);
    else
        gq_strlcpy(buf, "-", len);
    return buf;
}

static double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A request ended by SIGINT says "interrupted": the caller decides (see the end of
 * cmd_kubectl_gangq). */
static int fail(const char *err)
{
    if (strcmp(err, "interrupted"))
        fprintf(stderr, "error: %s\n", err);
    return 1;
}

/* Optional lists (teams, nodes, pods): a 403/404 leaves *items NULL and a note. */
static int list_optional(struct pl_client *pc, const char *path, const char *sel,
                         const struct pl_what *w, cJSON **items, char *note, size_t nlen)
{
    char err[768];
    long st = 0;
    int rc = pl_list(pc, path, sel, w, items, &st, err, sizeof err);
    if (rc && (st == 403 || st == 404)) {
        snprintf(note, nlen, "%s", err);
        return 0;
    }
    if (rc)
        return fail(err);
    return 0;
}

/* Decode a list of GPUJobs (caller frees *out). */
static int jobs_decode(const cJSON *items, struct pl_job **out, int *n)
{
    int cap = cJSON_GetArraySize(items), k = 0;
    *out = NULL;
    *n = 0;
    if (cap <= 0)
        return 0;
    struct pl_job *j = calloc((size_t)cap, sizeof *j);
    if (!j)
        return fail("out of memory");
    const cJSON *x;
    cJSON_ArrayForEach(x, items)
    {
        if (k < cap && !pl_job_from_json(x, &j[k]))
            k++;
    }
    *out = j;
    *n = k;
    return 0;
}

static const cJSON *team_find(const cJSON *teams, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, teams)
    {
        const char *n = jstr(jget(t, "metadata"), "name");
        if (n && !strcmp(n, name))
            return t;
    }
    return NULL;
}

/* ------------------------------------------------------------------ queue */

/* The waiting jobs in order (caller frees *jobs). */
static int queue_fetch(struct pl_client *pc, const struct opts *o, const char *ns,
                       struct pl_job **jobs, int *n, char *note, size_t nlen)
{
    struct pl_what wt = {"list", "teams.gangq.io", NULL, NULL};
    cJSON *teams = NULL, *items = NULL;
    char err[768], path[512];
    int rc = 0;
    *jobs = NULL;
    *n = 0;
    if (list_optional(pc, API "/teams", NULL, &wt, &teams, note, nlen))
        return 1;
    items = cJSON_CreateArray();
    if (!items) {
        cJSON_Delete(teams);
        return fail("out of memory");
    }
    const cJSON *team = o->team && teams ? team_find(teams, o->team) : NULL;
    if (o->team && teams && !team) {
        snprintf(err, sizeof err, "team %s not found", o->team);
        cJSON_Delete(teams);
        cJSON_Delete(items);
        return fail(err);
    }
    /* the Team's namespaces, one namespace, or all */
    const char *nss[64];
    int nns = 0;
    if (team) {
        const cJSON *x;
        cJSON_ArrayForEach(x, jget(jget(team, "spec"), "namespaces"))
        {
            if (cJSON_IsString(x) && nns < 64)
                nss[nns++] = x->valuestring;
        }
    } else if (!o->all && !o->team) {
        nss[nns++] = ns;
    }
    for (int i = 0; !rc && i < (nns ? nns : 1); i++) {
        struct pl_what w = {"list", "gpujobs.gangq.io", nns ? nss[i] : NULL, NULL};
        cJSON *part = NULL;
        if (nns)
            snprintf(path, sizeof path, API "/namespaces/%s/gpujobs", nss[i]);
        else
            snprintf(path, sizeof path, API "/gpujobs");
        if (pl_list(pc, path, NULL, &w, &part, NULL, err, sizeof err)) {
            rc = fail(err);
            break;
        }
        cJSON *x;
        while ((x = cJSON_DetachItemFromArray(part, 0)))
            cJSON_AddItemToArray(items, x);
        cJSON_Delete(part);
    }
    struct pl_job *all = NULL;
    int na = 0;
    if (!rc)
        rc = jobs_decode(items, &all, &na);
    if (!rc) {
        pl_jobs_apply_teams(all, na, teams);
        int k = 0;
        for (int i = 0; i < na; i++)
            if (pl_job_waiting(&all[i]) && (!o->team || !strcmp(all[i].team, o->team)))
                all[k++] = all[i];
        pl_queue_order(all, k);
        *jobs = all;
        *n = k;
    } else {
        free(all);
    }
    cJSON_Delete(items);
    cJSON_Delete(teams);
    return rc;
}

static void queue_text(const struct opts *o, const char *ns, const struct pl_job *jobs, int n,
                       double now, struct gq_buf *b)
{
    if (n == 0) {
        if (o->team)
            gq_buf_printf(b, "No waiting GPUJobs of team %s.\n", o->team);
        else if (o->all)
            gq_buf_puts(b, "No waiting GPUJobs.\n");
        else
            gq_buf_printf(b, "No waiting GPUJobs in namespace %s.\n", ns);
        return;
    }
    pl_render_queue(jobs, n, now, b);
    int est = 0;
    for (int i = 0; i < n; i++)
        est |= jobs[i].team_pos_est || jobs[i].gpos < 0;
    if (est)
        gq_buf_puts(b, "(POS \"-\": not published; TEAM-POS \"~N\": estimated beyond the head "
                       "the controller publishes)\n");
}

static int cmd_queue(struct pl_client *pc, const struct opts *o, const char *ns)
{
    struct gq_buf b, sig;
    char *last = NULL;
    int rc = 0, first = 1, tty = isatty(STDOUT_FILENO);
    if (o->npos > 1)
        return usage_err("queue takes no arguments (got %s)", o->pos[1]);
    gq_buf_init(&b, 64u << 20);
    gq_buf_init(&sig, 64u << 20);
    for (;;) {
        struct pl_job *jobs = NULL;
        int n = 0;
        char note[768] = "";
        rc = queue_fetch(pc, o, ns, &jobs, &n, note, sizeof note);
        if (rc) {
            free(jobs);
            if (pl_client_interrupted(pc))
                rc = 0;
            break;
        }
        if (note[0] && first)
            fprintf(stderr, "note: positions from the jobs only (%s)\n", note);
        double now = now_wall();
        if (fmt_json(o) || fmt_yaml(o)) {
            rc = emit(o, pl_queue_json(jobs, n, now));
        } else {
            /* --watch re-renders only when something other than the ages changed */
            gq_buf_reset(&sig);
            queue_text(o, ns, jobs, n, 0, &sig);
            if (first || !last || strcmp(last, sig.p ? sig.p : "")) {
                gq_buf_reset(&b);
                queue_text(o, ns, jobs, n, now, &b);
                if (!first)
                    fputs(tty ? "\033[H\033[2J" : "\n", stdout);
                put(&b);
                free(last);
                last = strdup(sig.p ? sig.p : "");
            }
        }
        free(jobs);
        fflush(stdout);
        first = 0;
        if (!o->watch || rc)
            break;
        pl_client_sleep(pc, 2.0);
        if (pl_client_interrupted(pc))
            break;
    }
    free(last);
    gq_buf_release(&b);
    gq_buf_release(&sig);
    return rc;
}

/* ------------------------------------------------------------------ why */

static void split_job(const char *arg, const char *ns, char *jns, size_t nl, char *name, size_t ml)
{
    const char *sl = strchr(arg, '/');
    if (sl && !strchr(sl + 1, '/')) {
        size_t l = (size_t)(sl - arg);
        if (l >= nl)
            l = nl - 1;
        memcpy(jns, arg, l);
        jns[l] = 0;
        gq_strlcpy(name, sl + 1, ml);
    } else {
        gq_strlcpy(jns, ns, nl);
        gq_strlcpy(name, arg, ml);
    }
}

static int cmd_why(struct pl_client *pc, const struct opts *o, const char *ns)
{
    char jns[PL_NS_MAX], name[PL_NAME_MAX], path[1024], err[768], note_t[768] = "",
                                                                 note_n[768] = "", note_p[768] = "";
    if (o->npos != 2)
        return usage_err("why takes one GPUJob name");
    split_job(o->pos[1], ns, jns, sizeof jns, name, sizeof name);
    if (kube_path(path, sizeof path, API, jns, "gpujobs", name, NULL))
        return usage_err("bad GPUJob name \"%s\"", o->pos[1]);
    struct pl_what w = {"get", "gpujobs.gangq.io", jns, name};
    cJSON *obj = NULL, *teams = NULL, *nodes = NULL, *pods = NULL;
    if (pl_request(pc, "GET", path, NULL, &w, &obj, NULL, err, sizeof err))
        return fail(err);
    struct pl_what wt = {"list", "teams.gangq.io", NULL, NULL};
    struct pl_what wn = {"list", "nodes", NULL, NULL};
    struct pl_what wp = {"list", "pods", NULL, NULL};
    int rc = list_optional(pc, API "/teams", NULL, &wt, &teams, note_t, sizeof note_t);
    rc = rc ? rc : list_optional(pc, "/api/v1/nodes", NULL, &wn, &nodes, note_n, sizeof note_n);
    rc = rc ? rc : list_optional(pc, "/api/v1/pods", "gangq.io/job", &wp, &pods, note_p, sizeof note_p);
    if (rc) {
        cJSON_Delete(obj);
        cJSON_Delete(teams);
        cJSON_Delete(nodes);
        cJSON_Delete(pods);
        return rc;
    }
    struct pl_job j;
    pl_job_from_json(obj, &j);
    pl_jobs_apply_teams(&j, 1, teams);
    j.team_pos = j.position;
    struct pl_nodeinfo *nd = NULL;
    struct pl_qentry *en = NULL;
    int nn = 0, nq = 0;
    if (pl_nodes_build(nodes, pods, &nd, &nn) ||
        pl_qentries_build(teams, nd, nn, pods, &en, &nq)) {
        rc = fail("out of memory");
        goto out;
    }
    const cJSON *team = teams ? team_find(teams, j.team) : NULL;
    int from_status = cJSON_IsArray(jget(jget(team, "status"), "gpuTypes"));

    cJSON *res = cJSON_CreateObject(), *jo = cJSON_AddObjectToObject(res, "job");
    cJSON *conds = cJSON_AddArrayToObject(res, "conditions");
    cJSON *quota = cJSON_AddArrayToObject(res, "quota");
    cJSON *nodes_out = cJSON_AddArrayToObject(res, "closestNodes");
    cJSON *notes = cJSON_AddArrayToObject(res, "notes");
    if (!res || !jo || !conds || !quota || !nodes_out || !notes) {
        cJSON_Delete(res);
        rc = fail("out of memory");
        goto out;
    }
    cJSON_AddStringToObject(jo, "namespace", j.ns);
    cJSON_AddStringToObject(jo, "name", j.name);
    cJSON_AddStringToObject(jo, "team", j.team);
    cJSON_AddStringToObject(jo, "state", j.state);
    cJSON_AddStringToObject(jo, "class", j.cls);
    cJSON_AddNumberToObject(jo, "priority", j.priority);
    cJSON_AddNumberToObject(jo, "replicas", j.replicas);
    cJSON_AddNumberToObject(jo, "gpus", (double)j.need_milli / 1000.0);
    cJSON_AddStringToObject(jo, "gpuTypes", j.types[0] ? j.types : "*");
    cJSON_AddBoolToObject(jo, "suspend", j.suspend);
    cJSON_AddStringToObject(jo, "waitReason", j.reason);
    cJSON_AddStringToObject(jo, "message", j.message);
    if (j.position > 0)
        cJSON_AddNumberToObject(jo, "position", j.position);
    else
        cJSON_AddNullToObject(jo, "position");
    if (j.gpos > 0)
        cJSON_AddNumberToObject(jo, "globalPosition", j.gpos);
    else
        cJSON_AddNullToObject(jo, "globalPosition");
    const cJSON *c;
    cJSON_ArrayForEach(c, jget(jget(obj, "status"), "conditions"))
    {
        cJSON *d = cJSON_Duplicate(c, 1);
        if (d)
            cJSON_AddItemToArray(conds, d);
    }
    /* the quota entries the job's types fall under */
    int seen[64], nseen = 0;
    for (int ti = 0; ti < 64; ti++) {
        /* ti-th type of the job, or every entry of the team when the job takes any type */
        char type[64] = "";
        if (j.types[0]) {
            const char *p = j.types;
            for (int k = 0; k < ti && p; k++) {
                p = strchr(p, ',');
                p = p ? p + 1 : NULL;
            }
            if (!p)
                break;
            size_t l = strcspn(p, ",");
            if (l >= sizeof type)
                l = sizeof type - 1;
            memcpy(type, p, l);
            type[l] = 0;
        }
        for (int e = 0; e < nq; e++) {
            if (strcmp(en[e].team, j.team))
                continue;
            int hit = !j.types[0] || !strcmp(en[e].type, type);
            if (!hit && !strcmp(en[e].type, "*")) { /* "*" only when no exact entry */
                int exact = 0;
                for (int x = 0; x < nq; x++)
                    exact |= !strcmp(en[x].team, j.team) && !strcmp(en[x].type, type);
                hit = !exact;
            }
            int dup = 0;
            for (int s = 0; s < nseen; s++)
                dup |= seen[s] == e;
            if (!hit || dup || nseen >= 64)
                continue;
            seen[nseen++] = e;
            struct pl_quota q;
            pl_quota_compute(en, nq, e, &q);
            cJSON *qo = cJSON_CreateObject();
            if (!qo || !cJSON_AddItemToArray(quota, qo)) {
                cJSON_Delete(qo);
                continue;
            }
            cJSON_AddStringToObject(qo, "gpuType", en[e].type);
            cJSON_AddStringToObject(qo, "cohort", en[e].cohort);
            cJSON_AddNumberToObject(qo, "nominal", (double)q.nominal / 1000.0);
            if (en[e].used_known) {
                cJSON_AddNumberToObject(qo, "used", (double)q.used / 1000.0);
                cJSON_AddNumberToObject(qo, "borrowed", (double)q.borrowed / 1000.0);
                cJSON_AddNumberToObject(qo, "mayBorrow", (double)q.may_borrow / 1000.0);
                cJSON_AddNumberToObject(qo, "available", (double)q.available / 1000.0);
                cJSON_AddBoolToObject(qo, "fits", j.need_milli <= q.available);
            }
            if (en[e].borrow_limit >= 0)
                cJSON_AddNumberToObject(qo, "borrowingLimit", (double)en[e].borrow_limit / 1000.0);
            if (en[e].lend_limit >= 0)
                cJSON_AddNumberToObject(qo, "lendingLimit", (double)en[e].lend_limit / 1000.0);
            cJSON_AddStringToObject(qo, "usedFrom", !en[e].used_known ? "unknown"
                                                    : from_status ? "team status" : "pods");
        }
        /* a type the Team has no entry for (neither exact nor "*") */
        if (j.types[0] && team && nseen < 64) {
            int any = 0;
            for (int x = 0; x < nq; x++)
                any |= !strcmp(en[x].team, j.team) &&
                       (!strcmp(en[x].type, type) || !strcmp(en[x].type, "*"));
            cJSON *qo = any ? NULL : cJSON_CreateObject();
            if (qo && cJSON_AddItemToArray(quota, qo)) {
                cJSON_AddStringToObject(qo, "gpuType", type);
                cJSON_AddNumberToObject(qo, "nominal", 0);
                cJSON_AddBoolToObject(qo, "noEntry", 1);
                cJSON_AddStringToObject(qo, "usedFrom", from_status ? "team status" : "pods");
            } else {
                cJSON_Delete(qo);
            }
        }
        if (!j.types[0])
            break;
    }
    if (j.team[0] && !team && teams)
        cJSON_AddItemToArray(notes, cJSON_CreateString("the job's Team does not exist"));
    if (note_t[0])
        cJSON_AddItemToArray(notes, cJSON_CreateString(note_t));
    if (note_n[0])
        cJSON_AddItemToArray(notes, cJSON_CreateString(note_n));
    if (note_p[0])
        cJSON_AddItemToArray(notes, cJSON_CreateString(note_p));
    int64_t per = j.count ? (int64_t)j.count * 1000 : j.shares;
    int nqual = pl_nodes_closest(nd, nn, j.types);
    for (int i = 0; i < nqual && i < 5; i++) {
        cJSON *no = cJSON_CreateObject();
        if (!no || !cJSON_AddItemToArray(nodes_out, no)) {
            cJSON_Delete(no);
            break;
        }
        cJSON_AddStringToObject(no, "name", nd[i].name);
        cJSON_AddStringToObject(no, "gpuType", nd[i].type);
        cJSON_AddNumberToObject(no, "allocatable", (double)nd[i].alloc / 1000.0);
        cJSON_AddNumberToObject(no, "used", (double)nd[i].used / 1000.0);
        cJSON_AddNumberToObject(no, "free", (double)GQ_MAX(0, nd[i].alloc - nd[i].used) / 1000.0);
        cJSON_AddBoolToObject(no, "fitsReplica", per > 0 && nd[i].alloc - nd[i].used >= per);
    }
    if (fmt_json(o) || fmt_yaml(o)) {
        rc = emit(o, res);
        goto out;
    }
    /* text */
    struct gq_buf b;
    char t1[32], t2[32], t3[32], t4[32], t5[32], t6[32];
    gq_buf_init(&b, 16u << 20);
    gq_buf_printf(&b, "GPUJob %s/%s  team %s  class %s  priority %d  state %s%s\n", j.ns, j.name,
                  j.team[0] ? j.team : "?", j.cls, j.priority, j.state[0] ? j.state : "(new)",
                  j.suspend ? " (suspended)" : "");
    gq_buf_printf(&b, "Needs:        %s GPUs of %s\n", j.gpus, j.types[0] ? j.types : "any type");
    if (j.position > 0)
        gq_buf_printf(&b, "Position:     %d in team %s", j.position, j.team);
    else
        gq_buf_puts(&b, "Position:     not published (beyond the head of the team queue)");
    if (j.gpos > 0)
        gq_buf_printf(&b, ", %d overall\n", j.gpos);
    else
        gq_buf_puts(&b, "\n");
    gq_buf_printf(&b, "Wait reason:  %s\n", j.reason[0] ? j.reason : "-");
    gq_buf_printf(&b, "Message:      %s\n", j.message[0] ? j.message : "-");
    if (cJSON_GetArraySize(conds) > 0) {
        static const char *const ch[] = {"TYPE", "STATUS", "REASON", "MESSAGE"};
        struct pl_table t;
        gq_buf_puts(&b, "Conditions:\n");
        if (!pl_table_init(&t, 4, ch)) {
            cJSON_ArrayForEach(c, conds)
            {
                const char *cells[] = {jstr(c, "type"), jstr(c, "status"), jstr(c, "reason"),
                                       jstr(c, "message")};
                pl_table_add(&t, cells);
            }
            pl_table_render(&t, "  ", &b);
        }
        pl_table_release(&t);
    }
    if (cJSON_GetArraySize(quota) > 0) {
        static const char *const qh[] = {"GPU-TYPE", "NOMINAL", "USED", "BORROWED", "MAY-BORROW",
                                         "AVAILABLE", "NEEDS", "FITS", "LIMITS"};
        struct pl_table t;
        const char *cohort = jstr(cJSON_GetArrayItem(quota, 0), "cohort");
        const char *from = jstr(cJSON_GetArrayItem(quota, 0), "usedFrom");
        if (cohort && cohort[0])
            gq_buf_printf(&b, "Quota of team %s, cohort %s (used from %s):\n", j.team, cohort,
                          from ? from : "?");
        else
            gq_buf_printf(&b, "Quota of team %s (no cohort: nothing to borrow; used from %s):\n",
                          j.team, from ? from : "?");
        if (!pl_table_init(&t, 9, qh)) {
            const cJSON *q;
            cJSON_ArrayForEach(q, quota)
            {
                char lim[96];
                const cJSON *bl = jget(q, "borrowingLimit"), *ll = jget(q, "lendingLimit");
                const char *qc = jstr(q, "cohort");
                if (jget(q, "noEntry"))
                    gq_strlcpy(lim, "no quota entry for this type", sizeof lim);
                else if (!qc || !qc[0])
                    gq_strlcpy(lim, "-", sizeof lim);
                else
                    snprintf(lim, sizeof lim, "borrow %s, lend %s",
                             bl ? jnum_text(q, "borrowingLimit", t5, sizeof t5) : "unlimited",
                             ll ? jnum_text(q, "lendingLimit", t6, sizeof t6) : "all");
                int known = jget(q, "used") != NULL;
                int none = jget(q, "noEntry") != NULL;
#define MF(k, buf) (known ? (pl_fmt_milli((int64_t)(jget(q, k)->valuedouble * 1000 + 0.5), buf, sizeof buf), buf) : none ? "-" : "?")
                char tn[32], tneed[32];
                pl_fmt_milli((int64_t)(jget(q, "nominal")->valuedouble * 1000 + 0.5), tn, sizeof tn);
                pl_fmt_milli(j.need_milli, tneed, sizeof tneed);
                const char *cells[] = {jstr(q, "gpuType"), tn, MF("used", t1), MF("borrowed", t2),
                                       MF("mayBorrow", t3), MF("available", t4), tneed,
                                       none ? "no" : known ? (cJSON_IsTrue(jget(q, "fits")) ? "yes" : "no") : "?",
                                       lim};
#undef MF
                pl_table_add(&t, cells);
            }
            pl_table_render(&t, "  ", &b);
        }
        pl_table_release(&t);
    } else if (j.team[0] && team) {
        gq_buf_printf(&b, "Quota:        team %s has no quota entry for %s\n", j.team,
                      j.types[0] ? j.types : "GPUs");
    }
    if (cJSON_GetArraySize(nodes_out) > 0) {
        static const char *const nh[] = {"NODE", "GPU-TYPE", "ALLOCATABLE", "GANGQ-USED", "FREE",
                                         "FITS-REPLICA"};
        struct pl_table t;
        gq_buf_printf(&b, "Nodes closest to fitting (%d of %d GPU nodes of its type%s):\n",
                      GQ_MIN(nqual, 5), nqual, j.types[0] ? "" : "s");
        if (!pl_table_init(&t, 6, nh)) {
            const cJSON *x;
            cJSON_ArrayForEach(x, nodes_out)
            {
                pl_fmt_milli((int64_t)(jget(x, "allocatable")->valuedouble * 1000 + 0.5), t1, sizeof t1);
                pl_fmt_milli((int64_t)(jget(x, "used")->valuedouble * 1000 + 0.5), t2, sizeof t2);
                pl_fmt_milli((int64_t)(jget(x, "free")->valuedouble * 1000 + 0.5), t3, sizeof t3);
                const char *cells[] = {jstr(x, "name"), jstr(x, "gpuType"), t1, t2, t3,
                                       cJSON_IsTrue(jget(x, "fitsReplica")) ? "yes" : "no"};
                pl_table_add(&t, cells);
            }
            pl_table_render(&t, "  ", &b);
        }
        pl_table_release(&t);
    } else if (nodes) {
        gq_buf_printf(&b, "Nodes:        no schedulable node has GPUs of %s\n",
                      j.types[0] ? j.types : "any type");
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, notes)
    {
        gq_buf_printf(&b, "Note:         %s\n", x->valuestring);
    }
    put(&b);
    gq_buf_release(&b);
    cJSON_Delete(res);
out:
    free(nd);
    free(en);
    cJSON_Delete(obj);
    cJSON_Delete(teams);
    cJSON_Delete(nodes);
    cJSON_Delete(pods);
    return rc;
}

/* ------------------------------------------------------------------ top */

static int top_teams(struct pl_client *pc, const struct opts *o)
{
    struct pl_what wt = {"list", "teams.gangq.io", NULL, NULL};
    struct pl_what wj = {"list", "gpujobs.gangq.io", NULL, NULL};
    struct pl_what wn = {"list", "nodes", NULL, NULL};
    struct pl_what wp = {"list", "pods", NULL, NULL};
    cJSON *teams = NULL, *items = NULL, *nodes = NULL, *pods = NULL;
    char err[768], nj[768] = "", nn_[768] = "", np[768] = "";
    struct pl_job *jobs = NULL;
    struct pl_nodeinfo *nd = NULL;
    struct pl_qentry *en = NULL;
    int nj_ = 0, nnd = 0, nq = 0, rc = 0;
    if (pl_list(pc, API "/teams", NULL, &wt, &teams, NULL, err, sizeof err))
        return fail(err);
    rc = list_optional(pc, API "/gpujobs", NULL, &wj, &items, nj, sizeof nj);
    rc = rc ? rc : list_optional(pc, "/api/v1/nodes", NULL, &wn, &nodes, nn_, sizeof nn_);
    rc = rc ? rc : list_optional(pc, "/api/v1/pods", "gangq.io/job", &wp, &pods, np, sizeof np);
    rc = rc ? rc : jobs_decode(items, &jobs, &nj_);
    if (!rc && (pl_nodes_build(nodes, pods, &nd, &nnd) ||
                pl_qentries_build(teams, nd, nnd, pods, &en, &nq)))
        rc = fail("out of memory");
    if (rc)
        goto out;
    pl_jobs_apply_teams(jobs, nj_, teams);
    cJSON *arr = cJSON_CreateArray();
    static const char *const hdr[] = {"TEAM", "COHORT", "GPU-TYPE", "QUOTA", "USED", "BORROWED",
                                      "MAY-BORROW", "PENDING", "RUNNING"};
    struct pl_table t;
    if (!arr || pl_table_init(&t, 9, hdr)) {
        cJSON_Delete(arr);
        rc = fail("out of memory");
        goto out;
    }
    const cJSON *tm;
    cJSON_ArrayForEach(tm, teams)
    {
        const char *name = jstr(jget(tm, "metadata"), "name");
        const char *cohort = jstr(jget(tm, "spec"), "cohort");
        if (!name)
            continue;
        int pend = 0, run = 0;
        int64_t pend_m = 0;
        char pend_s[64], run_s[32];
        if (items) {
            for (int i = 0; i < nj_; i++) {
                if (strcmp(jobs[i].team, name))
                    continue;
                if (pl_job_waiting(&jobs[i])) {
                    pend++;
                    pend_m += jobs[i].need_milli;
                } else if (!strcmp(jobs[i].state, "Running") || !strcmp(jobs[i].state, "Admitted")) {
                    run++;
                }
            }
            char g[32];
            pl_fmt_milli(pend_m, g, sizeof g);
            snprintf(pend_s, sizeof pend_s, "%d jobs/%s GPUs", pend, g);
            snprintf(run_s, sizeof run_s, "%d", run);
        } else {
            snprintf(pend_s, sizeof pend_s, "%s jobs", jnum_text(jget(tm, "status"), "pending", run_s, sizeof run_s));
            jnum_text(jget(tm, "status"), "running", run_s, sizeof run_s);
        }
        cJSON *to = cJSON_CreateObject(), *qa = NULL;
        if (to && cJSON_AddItemToArray(arr, to)) {
            cJSON_AddStringToObject(to, "team", name);
            cJSON_AddStringToObject(to, "cohort", cohort ? cohort : "");
            qa = cJSON_AddArrayToObject(to, "gpuTypes");
            if (items) {
                cJSON_AddNumberToObject(to, "pendingJobs", pend);
                cJSON_AddNumberToObject(to, "pendingGPUs", (double)pend_m / 1000.0);
                cJSON_AddNumberToObject(to, "running", run);
            }
        } else {
            cJSON_Delete(to);
        }
        int rows = 0;
        for (int e = 0; e < nq; e++) {
            if (strcmp(en[e].team, name))
                continue;
            struct pl_quota q;
            char a[32], u[32], bo[32], mb[32];
            pl_quota_compute(en, nq, e, &q);
            pl_fmt_milli(q.nominal, a, sizeof a);
            if (en[e].used_known) {
                pl_fmt_milli(q.used, u, sizeof u);
                pl_fmt_milli(q.borrowed, bo, sizeof bo);
                pl_fmt_milli(q.may_borrow, mb, sizeof mb);
            } else {
                gq_strlcpy(u, "?", sizeof u);
                gq_strlcpy(bo, "?", sizeof bo);
                gq_strlcpy(mb, "?", sizeof mb);
            }
            const char *cells[] = {rows ? "" : name, rows ? "" : (cohort ? cohort : "-"), en[e].type,
                                   a, u, bo, mb, rows ? "" : pend_s, rows ? "" : run_s};
            pl_table_add(&t, cells);
            rows++;
            cJSON *qo = cJSON_CreateObject();
            if (qo && qa && cJSON_AddItemToArray(qa, qo)) {
                cJSON_AddStringToObject(qo, "gpuType", en[e].type);
                cJSON_AddNumberToObject(qo, "quota", (double)q.nominal / 1000.0);
                if (en[e].used_known) {
                    cJSON_AddNumberToObject(qo, "used", (double)q.used / 1000.0);
                    cJSON_AddNumberToObject(qo, "borrowed", (double)q.borrowed / 1000.0);
                    cJSON_AddNumberToObject(qo, "mayBorrow", (double)q.may_borrow / 1000.0);
                }
            } else {
                cJSON_Delete(qo);
            }
        }
        if (!rows) {
            const char *cells[] = {name, cohort ? cohort : "-", "(none)", "0", "-", "-", "-",
                                   pend_s, run_s};
            pl_table_add(&t, cells);
        }
    }
    if (fmt_json(o) || fmt_yaml(o)) {
        rc = emit(o, arr);
    } else {
        struct gq_buf b;
        gq_buf_init(&b, 16u << 20);
        pl_table_render(&t, NULL, &b);
        put(&b);
        gq_buf_release(&b);
        cJSON_Delete(arr);
        if (nj[0])
            fprintf(stderr, "note: pending/running from Team status (%s)\n", nj);
        if (nn_[0] || np[0])
            fprintf(stderr, "note: usage per GPU type unknown without nodes and pods (%s)\n",
                    nn_[0] ? nn_ : np);
    }
    pl_table_release(&t);
out:
    free(jobs);
    free(nd);
    free(en);
    cJSON_Delete(teams);
    cJSON_Delete(items);
    cJSON_Delete(nodes);
    cJSON_Delete(pods);
    return rc;
}

static int top_pools(struct pl_client *pc, const struct opts *o)
{
    struct pl_what w = {"list", "gpupools.gangq.io", NULL, NULL};
    cJSON *pools = NULL;
    char err[768];
    if (pl_list(pc, API "/gpupools", NULL, &w, &pools, NULL, err, sizeof err))
        return fail(err);
    if (fmt_json(o) || fmt_yaml(o))
        return emit(o, pools);
    static const char *const hdr[] = {"POOL", "GPUS", "ALLOCATED", "FREE", "LARGEST-FREE",
                                      "PENDING", "PROTECTED", "CLASSES"};
    struct pl_table t;
    int rc = pl_table_init(&t, 8, hdr);
    const cJSON *p;
    cJSON_ArrayForEach(p, pools)
    {
        const cJSON *st = jget(p, "status"), *sp = jget(p, "spec"), *c;
        char a[32], b_[32], c_[32], d[32], e[32], cls[128] = "";
        size_t off = 0;
        cJSON_ArrayForEach(c, jget(sp, "classes"))
        {
            if (cJSON_IsString(c) && off + strlen(c->valuestring) + 2 < sizeof cls)
                off += (size_t)snprintf(cls + off, sizeof cls - off, "%s%s", off ? "," : "", c->valuestring);
        }
        const char *cells[] = {jstr(jget(p, "metadata"), "name"), jnum_text(st, "gpus", a, sizeof a),
                               jnum_text(st, "allocated", b_, sizeof b_), jnum_text(st, "free", c_, sizeof c_),
                               jnum_text(st, "largestFree", d, sizeof d), jnum_text(st, "pending", e, sizeof e),
                               cJSON_IsTrue(jget(sp, "protected")) ? "yes" : "no", cls[0] ? cls : "all"};
        rc = rc ? rc : pl_table_add(&t, cells);
    }
    struct gq_buf b;
    gq_buf_init(&b, 16u << 20);
    if (!rc)
        rc = pl_table_render(&t, NULL, &b);
    put(&b);
    gq_buf_release(&b);
    pl_table_release(&t);
    cJSON_Delete(pools);
    return rc ? fail("out of memory") : 0;
}

/* ------------------------------------------------------------------ suspend */

/* Patch spec.suspend of one job; appends a result to arr; prints a line in table mode. */
static int set_suspend(struct pl_client *pc, const struct opts *o, const char *jns, const char *name,
                       int suspend, cJSON *arr)
{
    char path[1024], err[768];
    const char *result;
    int rc = 0;
    if (kube_path(path, sizeof path, API, jns, "gpujobs", name, NULL)) {
        snprintf(err, sizeof err, "bad GPUJob name \"%s\"", name);
        rc = 1;
    } else {
        struct pl_what w = {"patch", "gpujobs.gangq.io", jns, name};
        cJSON *patch = cJSON_CreateObject(), *spec = cJSON_AddObjectToObject(patch, "spec");
        if (!spec || !cJSON_AddBoolToObject(spec, "suspend", suspend)) {
            cJSON_Delete(patch);
            return fail("out of memory");
        }
        rc = pl_request(pc, "PATCH", path, patch, &w, NULL, NULL, err, sizeof err) ? 1 : 0;
        cJSON_Delete(patch);
    }
    result = rc ? err : suspend ? "suspended" : "resumed";
    cJSON *r = cJSON_CreateObject();
    if (r && cJSON_AddItemToArray(arr, r)) {
        cJSON_AddStringToObject(r, "namespace", jns);
        cJSON_AddStringToObject(r, "name", name);
        cJSON_AddBoolToObject(r, "suspend", suspend);
        cJSON_AddStringToObject(r, rc ? "error" : "result", result);
    } else {
        cJSON_Delete(r);
    }
    if (!fmt_json(o) && !fmt_yaml(o)) {
        if (rc)
            fprintf(stderr, "error: %s\n", err);
        else
            printf("gpujob.gangq.io %s/%s %s\n", jns, name, result);
    }
    return rc;
}

static int cmd_suspend(struct pl_client *pc, const struct opts *o, const char *ns, int suspend)
{
    if (o->npos < 2)
        return usage_err("%s needs at least one GPUJob name", suspend ? "suspend" : "resume");
    cJSON *arr = cJSON_CreateArray();
    int rc = 0;
    if (!arr)
        return fail("out of memory");
    for (int i = 1; i < o->npos; i++) {
        char jns[PL_NS_MAX], name[PL_NAME_MAX];
        split_job(o->pos[i], ns, jns, sizeof jns, name, sizeof name);
        rc |= set_suspend(pc, o, jns, name, suspend, arr);
    }
    if (fmt_json(o) || fmt_yaml(o))
        emit(o, arr);
    else
        cJSON_Delete(arr);
    return rc;
}

static int cmd_drain(struct pl_client *pc, const struct opts *o)
{
    char path[1024], err[768];
    if (o->npos != 2)
        return usage_err("drain-team takes one Team name");
    const char *tname = o->pos[1];
    if (kube_path(path, sizeof path, API, NULL, "teams", tname, NULL))
        return usage_err("bad Team name \"%s\"", tname);
    struct pl_what w = {"get", "teams.gangq.io", NULL, tname};
    cJSON *team = NULL, *arr = cJSON_CreateArray();
    if (!arr)
        return fail("out of memory");
    if (pl_request(pc, "GET", path, NULL, &w, &team, NULL, err, sizeof err)) {
        cJSON_Delete(arr);
        return fail(err);
    }
    int rc = 0, count = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, jget(jget(team, "spec"), "namespaces"))
    {
        if (!cJSON_IsString(x))
            continue;
        const char *jns = x->valuestring;
        struct pl_what wl = {"list", "gpujobs.gangq.io", jns, NULL};
        cJSON *items = NULL;
        struct pl_job *jobs = NULL;
        int n = 0;
        if (kube_path(path, sizeof path, API, jns, "gpujobs", NULL, NULL) ||
            pl_list(pc, path, NULL, &wl, &items, NULL, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            rc = 1;
            continue;
        }
        if (jobs_decode(items, &jobs, &n)) {
            cJSON_Delete(items);
            rc = 1;
            continue;
        }
        for (int i = 0; i < n; i++) {
            /* jobs charged to another Team (it owns the namespace) are not this Team's */
            if (jobs[i].team[0] && strcmp(jobs[i].team, tname))
                continue;
            if (pl_job_finished(&jobs[i]))
                continue;
            count++;
            if (jobs[i].suspend) {
                cJSON *r = cJSON_CreateObject();
                if (r && cJSON_AddItemToArray(arr, r)) {
                    cJSON_AddStringToObject(r, "namespace", jobs[i].ns);
                    cJSON_AddStringToObject(r, "name", jobs[i].name);
                    cJSON_AddBoolToObject(r, "suspend", 1);
                    cJSON_AddStringToObject(r, "result", "already suspended");
                } else {
                    cJSON_Delete(r);
                }
                if (!fmt_json(o) && !fmt_yaml(o))
                    printf("gpujob.gangq.io %s/%s already suspended\n", jobs[i].ns, jobs[i].name);
                continue;
            }
            rc |= set_suspend(pc, o, jobs[i].ns, jobs[i].name, 1, arr);
        }
        free(jobs);
        cJSON_Delete(items);
    }
    if (fmt_json(o) || fmt_yaml(o))
        emit(o, arr);
    else {
        cJSON_Delete(arr);
        if (!count)
            printf("team %s has no unfinished GPUJobs\n", tname);
    }
    cJSON_Delete(team);
    return rc;
}

/* ------------------------------------------------------------------ main */

int cmd_kubectl_gangq(int argc, char **argv)
{
    struct opts o;
    char err[1024];
    int prc = parse(argc - 1, argv + 1, &o);
    if (prc == 3) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (prc)
        return prc;
    if (o.npos == 0)
        return usage_err("a command is required");
    const char *c = o.pos[0];
    enum { Q, WHY, TOPT, TOPP, SUS, RES, DRAIN } which;
    if (!strcmp(c, "queue"))
        which = Q;
    else if (!strcmp(c, "why"))
        which = WHY;
    else if (!strcmp(c, "top")) {
        if (o.npos != 2 || (strcmp(o.pos[1], "teams") && strcmp(o.pos[1], "pools")))
            return usage_err("top needs \"teams\" or \"pools\"");
        which = !strcmp(o.pos[1], "teams") ? TOPT : TOPP;
    } else if (!strcmp(c, "suspend"))
        which = SUS;
    else if (!strcmp(c, "resume"))
        which = RES;
    else if (!strcmp(c, "drain-team"))
        which = DRAIN;
    else if (!strcmp(c, "version")) {
        printf("kubectl-gangq %s\n", GANGQ_VERSION);
        return 0;
    } else
        return usage_err("unknown command \"%s\"", c);
    if (o.watch && which != Q)
        return usage_err("--watch is for queue only");
    if ((o.all || o.team) && which != Q)
        return usage_err("-A and --team are for queue only");
    if (o.all && (o.team || o.ns))
        return usage_err("-A cannot be combined with -n or --team");

    struct pl_client *pc = pl_client_new(o.kubeconfig, o.context, err, sizeof err);
    if (!pc)
        return fail(err);
    const char *ns = o.ns ? o.ns : pl_client_namespace(pc);
    int rc;
    if (pl_check_crds(pc, err, sizeof err))
        rc = fail(err);
    else if (which == Q)
        rc = cmd_queue(pc, &o, ns);
    else if (which == WHY)
        rc = cmd_why(pc, &o, ns);
    else if (which == TOPT)
        rc = top_teams(pc, &o);
    else if (which == TOPP)
        rc = top_pools(pc, &o);
    else if (which == SUS || which == RES)
        rc = cmd_suspend(pc, &o, ns, which == SUS);
    else
        rc = cmd_drain(pc, &o);
    if (pl_client_interrupted(pc) && !o.watch) {
        fprintf(stderr, "interrupted\n");
        rc = 130;
    }
    pl_client_free(pc);
    fflush(stdout);
    return rc;
}
