/*
 * ctl_config.c — the controller's options: one table (ctl_options) gives
 * every option's name, kind, field, default and help; the defaults, the flag
 * and config-file parsing and the usage text are all derived from it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ctl_int.h"
#include "yamljson.h"

#define F(field) offsetof(struct ctl_config, field), sizeof(((struct ctl_config *)0)->field)

const struct ctl_option ctl_options[] = {
    {"kubeconfig", CTL_OPT_STRING, F(kubeconfig), NULL, 0, 0, 0, 0, NULL, " PATH",
     "kubeconfig (default: in-cluster config)"},
    {"db", CTL_OPT_STRING, F(db), NULL, 0, 0, 0, 0, NULL, " PATH", "SQLite store (created if absent)"},
    {"config", CTL_OPT_FILE, 0, 0, NULL, 0, 0, 0, 0, NULL, " FILE",
     "YAML file with the same keys as the flags (flags win)"},
    {"listen", CTL_OPT_STRING, F(listen), NULL, 0, 0, 0, 0, NULL, " ADDR:PORT",
     "/metrics /healthz /readyz, /queue[?team=T] (exact queue\n"
     "positions as JSON) (in-cluster default :8080)"},
    {"log-level", CTL_OPT_LOG_LEVEL, F(log_level), "info", 0, 0, 0, 0, "debug|info|warn|error", " L",
     "debug|info|warn|error"},
    {"leader-elect", CTL_OPT_BOOL, F(leader_elect), "true", 0, 0, 0, 0, NULL, "=BOOL", "Lease leader election"},
    {"lease-namespace", CTL_OPT_STRING, F(lease_ns), NULL, 0, 0, 0, 0, NULL, " NS",
     "Lease namespace (config namespace, else default)"},
    {"lease-name", CTL_OPT_STRING, F(lease_name), "gangq-controller", 0, 0, 0, 0, NULL, " N", "Lease name"},
    {"min-runtime", CTL_OPT_DURATION_S64, F(min_runtime_s), "5m", 0, 0, 0, 0, "a duration like 5m", " DUR",
     "no preemption of work younger than this"},
    {"level", CTL_OPT_LEVEL, F(levels), NULL, 0, 0, 0, 0, "name=labelkey", " name=labelkey",
     "topology level, widest first, repeatable\n(zone, block, rack, node by default)"},
    {"gpu-product-label", CTL_OPT_STRING, F(gpu_product_label), "nvidia.com/gpu.product", 0, 0, 0, 0, NULL, " K",
     "node label naming the GPU product"},
    {"gpu-memory-label", CTL_OPT_STRING, F(gpu_memory_label), "nvidia.com/gpu.memory", 0, 0, 0, 0, NULL, " K",
     "node label giving the GPU memory, MiB"},
    {"node-lost-grace", CTL_OPT_DURATION, F(node_lost_grace_s), "40s", 0, 0, 0, 0, NULL, " DUR",
     "NotReady this long = node lost"},
    {"max-retries", CTL_OPT_INT, F(max_retries), "3", 0, 0, 0, 1000, NULL, " N", "failed-gang requeues before Failed"},
    {"usage-half-life", CTL_OPT_DURATION, F(usage_half_life_s), "24h", 0, 0, 0, 0, NULL, " DUR",
     "fair-share usage decay"},
    {"audit-retention", CTL_OPT_DURATION, F(audit_retention_s), "30d", 0, 0, 0, 0, NULL, " DUR",
     "audit log entries (`gangq audit`) older than this are deleted,\n"
     "oldest first, a bounded batch at a time (0 = keep them all)"},
    {"cycle-interval", CTL_OPT_DURATION, F(cycle_interval_s), "2s", 0.05, 0, 0, 0, NULL, " DUR",
     "periodic resync: jobs whose state can change with time alone\n"
     "(holding GPUs, pods stopping) are examined again"},
    {"full-resync-interval", CTL_OPT_DURATION, F(full_resync_interval_s), "30s", 0.05, 0, 0, 0, NULL, " DUR",
     "every job, waiting ones too, examined again at least this often\n"
     "(anything an event did not say); a Team, GPUPool, PriorityClass\n"
     "or node change does so at once"},
    {"max-reconcile-share", CTL_OPT_INT, F(max_reconcile_share), "30", 0, 0, 1, 100, NULL, " PCT",
     "while events stream in, reconciles take at most this share of\n"
     "the time: after one that took T, the next starts no sooner than\n"
     "T*(100-PCT)/PCT later (events meanwhile are batched into it)"},
    {"batch-window", CTL_OPT_DURATION, F(batch_window_s), "150ms", 0, 1, 0, 0, "a duration from 0 to 1s", " DUR",
     "while events stream in (one within this long of the last\n"
     "reconcile's end), reconciles start at least this far apart\n"
     "(the events meanwhile are batched; after a quiet spell the\n"
     "first waits 50ms alone; 0 = off)"},
    {"io-collect-interval", CTL_OPT_DURATION, F(io_collect_interval_s), "20ms", 0, 1, 0, 0,
     "a duration from 0 to 1s", " DUR",
     "wake for socket I/O at most this often: responses and watch\n"
     "events that arrive meanwhile are taken in one wake-up\n"
     "(timers are not delayed; 0 = wake for each)"},
    {"position-head", CTL_OPT_INT, F(position_head), "10", 0, 0, 0, API_MAX_PENDING_HEAD, NULL, " N",
     "status.position and Team status.pendingHead for the first N\n"
     "waiting jobs of each Team (others carry no position)"},
    {"position-interval", CTL_OPT_DURATION, F(position_interval_s), "5s", 0, 0, 0, 0, NULL, " DUR",
     "positions and pendingHead refreshed at most this often"},
    {"wait-message-interval", CTL_OPT_DURATION, F(wait_message_interval_s), "60s", 0, 0, 0, 0, NULL, " DUR",
     "a waiting job's status.message is rewritten at once when its\n"
     "state or (settled) wait reason changes, else at most this often"},
    {"wait-reason-settle", CTL_OPT_DURATION, F(wait_reason_settle_s), "10s", 0, 0, 0, 0, NULL, " DUR",
     "a waiting job's wait reason that changes between capacity\n"
     "reasons (Nodes, Quota, Reserving...) is written once the new one\n"
     "has held this long (a reason flapping as jobs come and go is not);\n"
     "a problem, a preemption under way, a partial admission at once"},
    {"status-settle", CTL_OPT_DURATION, F(status_settle_s), "2s", 0, 0, 0, 0, NULL, " DUR",
     "a job's status is written at most this often (first: this long\n"
     "after creation); a state left sooner is never written; finished\n"
     "and invalid jobs at once"},
    {"event-qps", CTL_OPT_INT, F(event_qps), "10", 0, 0, 0, 100000, NULL, " N",
     "Normal Events (Admitted, Waiting, Succeeded...) sent per second\n"
     "at most, after a burst of --event-burst, one namespace's at most\n"
     "a quarter of both; Warning Events are not limited; the status is\n"
     "the record (0 = no limit)"},
    {"event-burst", CTL_OPT_INT, F(event_burst), "100", 0, 0, 1, 1000000, NULL, " N",
     "Normal Events sent at once before --event-qps applies"},
    {"status-refresh-qps", CTL_OPT_INT, F(refresh_qps), "10", 0, 0, 0, 100000, NULL, " N",
     "GPUJob status rewrites that change only the queue position or\n"
     "the wait message's text written per second at most, after a\n"
     "burst of --status-refresh-burst; one past it is written later\n"
     "(state and wait-reason changes are never held; 0 = no limit)"},
    {"status-refresh-burst", CTL_OPT_INT, F(refresh_burst), "100", 0, 0, 1, 1000000, NULL, " N",
     "status refreshes written at once before --status-refresh-qps applies"},
    {"kube-max-inflight", CTL_OPT_INT, F(kube_max_inflight), "64", 0, 0, 4, 1000, NULL, " N",
     "API requests in flight at once (watches apart); a quarter is\n"
     "kept for pod creates and deletes, a quarter for waiting state\n"
     "transitions, at most a quarter carries cosmetic status writes"},
    {"max-grace-period", CTL_OPT_DURATION, F(max_grace_period_s), "30s", 0, 0, 0, 0, NULL, " DUR",
     "cap on the termination grace of gangq's pods"},
    {"db-max-pages", CTL_OPT_INT, F(db_max_pages), NULL, 0, 0, 0, INT64_MAX, "a page count", " N",
     "cap the database size (pages; writes past it fail as on a full disk)"},
    {"insecure-allow-http-token", CTL_OPT_BOOL, F(allow_http_token), "false", 0, 0, 0, 0, NULL, "=BOOL",
     "send the bearer token to a server that is not https"},
    {"pod-watch-delay", CTL_OPT_DURATION, F(pod_watch_delay_s), NULL, 0, 0, 0, 0, NULL, " DUR",
     "testing only: apply pod watch events this late (a lagging watch)"},
};
const size_t ctl_noptions = GQ_ARRAY_LEN(ctl_options);

#undef F

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) {
        *out = 0;
        return 0;
    }
    return GQ_EINVAL;
}

static int set_level(struct ctl_config *c, const char *val, char *err, size_t errlen)
{
    const char *eq = strchr(val, '=');
    if (!eq || eq == val || !eq[1] || (size_t)(eq - val) >= API_LEVEL_MAX || strlen(eq + 1) >= API_LABEL_KEY_MAX) {
        gq_errf(err, errlen, "--level: expected name=labelkey, got \"%s\"", val);
        return GQ_EINVAL;
    }
    if (!c->levels_set) {
        c->levels.nlevels = 0;
        c->levels_set = 1;
    }
    if (c->levels.nlevels >= SCHED_LEVELS_MAX) {
        gq_errf(err, errlen, "--level: at most %d levels", SCHED_LEVELS_MAX);
        return GQ_EINVAL;
    }
    int n = c->levels.nlevels++;
    memcpy(c->levels.levels[n], val, (size_t)(eq - val));
    c->levels.levels[n][eq - val] = 0;
    gq_strlcpy(c->levels.labels[n], eq + 1, sizeof(c->levels.labels[n]));
    return 0;
}

/* Set the field of option o from its text val. */
static int opt_set(struct ctl_config *c, const struct ctl_option *o, const char *val, char *err, size_t errlen)
{
    char *field = (char *)c + o->off;
    double d;
    int64_t i;
    int b;
    switch (o->kind) {
    case CTL_OPT_STRING:
        if (gq_strlcpy(field, val, o->size) >= o->size) {
            gq_errf(err, errlen, "--%s: value too long", o->name);
            return GQ_EINVAL;
        }
        return 0;
    case CTL_OPT_BOOL:
        if (parse_bool(val, &b))
            break;
        *(int *)field = b;
        return 0;
    case CTL_OPT_INT:
        if (gq_parse_i64(val, (size_t)-1, &i) || i < o->ilo || i > o->ihi)
            break;
        if (o->size == sizeof(int64_t))
            *(int64_t *)field = i;
        else
            *(int *)field = (int)i;
        return 0;
    case CTL_OPT_DURATION:
        if (gq_parse_duration(val, &d) || d < o->dlo || (o->dhi > 0 && d > o->dhi))
            break;
        *(double *)field = d;
        return 0;
    case CTL_OPT_DURATION_S64:
        if (gq_parse_duration(val, &d))
            break;
        *(int64_t *)field = (int64_t)d;
        return 0;
    case CTL_OPT_LOG_LEVEL:
        if ((b = gq_log_level_parse(val)) < 0)
            break;
        *(int *)field = b;
        return 0;
    case CTL_OPT_LEVEL:
        return set_level(c, val, err, errlen);
    case CTL_OPT_FILE:
        gq_errf(err, errlen, "unknown option --%s", o->name);
        return GQ_EINVAL;
    }
    if (o->expect)
        gq_errf(err, errlen, "--%s: expected %s, got \"%s\"", o->name, o->expect, val);
    else if (o->kind == CTL_OPT_BOOL)
        gq_errf(err, errlen, "--%s: expected true or false, got \"%s\"", o->name, val);
    else if (o->kind == CTL_OPT_INT)
        gq_errf(err, errlen, "--%s: expected %lld..%lld, got \"%s\"", o->name, (long long)o->ilo,
                (long long)o->ihi, val);
    else
        gq_errf(err, errlen, "--%s: expected a duration like 40s or 5m, got \"%s\"", o->name, val);
    return GQ_EINVAL;
}

void ctl_config_default(struct ctl_config *c)
{
    char err[256];
    memset(c, 0, sizeof(*c));
    api_config_default(&c->levels);
    for (size_t k = 0; k < ctl_noptions; k++)
        if (ctl_options[k].def && opt_set(c, &ctl_options[k], ctl_options[k].def, err, sizeof(err)))
            gq_log(GQ_LOG_ERROR, GQ_LOG_ERROR, "ctl", "bad option default", " err=\"%s\"", err);
    c->debounce_s = 0.05;
    c->shutdown_wait_s = 5;
}

int ctl_config_set(struct ctl_config *c, const char *key, const char *val, char *err, size_t errlen)
{
    if (!val) {
        gq_errf(err, errlen, "--%s needs a value", key);
        return GQ_EINVAL;
    }
    for (size_t k = 0; k < ctl_noptions; k++)
        if (!strcmp(key, ctl_options[k].name))
            return opt_set(c, &ctl_options[k], val, err, errlen);
    gq_errf(err, errlen, "unknown option --%s", key);
    return GQ_EINVAL;
}

/* A scalar config value as text. */
static int scalar_text(const cJSON *v, char *buf, size_t len)
{
    if (cJSON_IsString(v))
        return gq_strlcpy(buf, v->valuestring, len) < len ? 0 : GQ_EINVAL;
    if (cJSON_IsBool(v))
        return gq_strlcpy(buf, cJSON_IsTrue(v) ? "true" : "false", len) < len ? 0 : GQ_EINVAL;
    if (cJSON_IsNumber(v)) {
        snprintf(buf, len, "%.15g", v->valuedouble);
        return 0;
    }
    return GQ_EINVAL;
}

int ctl_config_load_file(struct ctl_config *c, const char *path, char *err, size_t errlen)
{
    cJSON *docs = NULL;
    int rc = gq_yaml_load_file(path, &docs, err, errlen);
    if (rc)
        return rc;
    const cJSON *root = cJSON_GetArrayItem(docs, 0);
    if (cJSON_GetArraySize(docs) != 1 || !cJSON_IsObject(root)) {
        gq_errf(err, errlen, "%s: expected one YAML mapping", path);
        rc = GQ_EINVAL;
        goto out;
    }
    const cJSON *it;
    char val[CTL_PATH_MAX], e2[512];
    cJSON_ArrayForEach(it, root)
    {
        const char *key = it->string;
        if (!strcmp(key, "level") || !strcmp(key, "levels")) {
            const cJSON *l;
            if (!cJSON_IsArray(it)) {
                gq_errf(err, errlen, "%s: %s: expected a list", path, key);
                rc = GQ_EINVAL;
                goto out;
            }
            cJSON_ArrayForEach(l, it)
            {
                if (cJSON_IsObject(l)) {
                    const char *n = ctl_obj_str(l, "name", NULL), *lb = ctl_obj_str(l, "label", NULL);
                    snprintf(val, sizeof(val), "%s=%s", n ? n : "", lb ? lb : "");
                } else if (scalar_text(l, val, sizeof(val))) {
                    val[0] = 0;
                }
                if ((rc = ctl_config_set(c, "level", val, e2, sizeof(e2)))) {
                    gq_errf(err, errlen, "%s: %s", path, e2);
                    goto out;
                }
            }
            continue;
        }
        if (scalar_text(it, val, sizeof(val))) {
            gq_errf(err, errlen, "%s: %s: expected a scalar value", path, key);
            rc = GQ_EINVAL;
            goto out;
        }
        if ((rc = ctl_config_set(c, key, val, e2, sizeof(e2)))) {
            gq_errf(err, errlen, "%s: %s", path, e2);
            goto out;
        }
    }
out:
    cJSON_Delete(docs);
    return rc;
}


#define USAGE_COL 27 /* help text column */

void ctl_config_usage(FILE *f)
{
    fprintf(f, "usage: gangq controller [--kubeconfig PATH] --db PATH [options]\n\n");
    for (size_t k = 0; k < ctl_noptions; k++) {
        const struct ctl_option *o = &ctl_options[k];
        int w = fprintf(f, "  --%s%s", o->name, o->meta);
        if (w < 0)
            return;
        if (w > USAGE_COL - 2)
            fprintf(f, "\n%*s", USAGE_COL, "");
        else
            fprintf(f, "%*s", USAGE_COL - w, "");
        for (const char *p = o->help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fprintf(f, "%*s", USAGE_COL, "");
        }
        if (o->def)
            fprintf(f, " (%s)", o->def);
        fputc('\n', f);
    }
}
