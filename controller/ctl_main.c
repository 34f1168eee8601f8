/*
 * ctl_main.c — `gangq controller`: the command line (options in ctl_config.c), the libev loop,
 * informers, leader election, debounce/resync/settle timers, signals and a bounded
 * graceful shutdown (the per-object memo table is in ctl_memo.c). It calls the
 * reconcile (ctl_reconcile) and acts on its result; nothing below calls back
 * in except through c->wake (the actuator's hooks, ctl_int.h).
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "ctl_int.h"
#include "yamljson.h"

/* ------------------------------------------------------------ loop */

/* A reconcile is wanted: the debounce timer is armed (batched, adaptive).
 * The loop's c->wake (ctl_act_wire), called by ctl_wake. */
static void ctl_mark_dirty(struct gq_ctl *c)
{
    if (c->stopping)
        return;
    if (!c->dirty) {
        c->dirty = 1;
        /* a libev timer counts from the loop's time, which a reconcile run
         * in this loop iteration left behind by its duration */
        ev_now_update(c->loop);
        ev_timer_stop(c->loop, &c->debounce);
        ev_timer_set(&c->debounce,
                     ctl_batch_delay(c->cfg.debounce_s, c->cfg.max_reconcile_share, c->cfg.batch_window_s,
                                     c->rc_start, c->rc_end, ev_time()),
                     0.);
        ev_timer_start(c->loop, &c->debounce);
    }
}

/* A reconcile ended: committed (rc 0) or failed and rolled back (err says
 * why): readiness (/readyz) follows. */
static void ctl_reconcile_result(struct gq_ctl *c, int rc, const char *err)
{
    if (!rc) {
        if (c->failed_streak >= CTL_READY_MAX_FAILED)
            gq_log(c->cfg.log_level, GQ_LOG_INFO, "ctl", "reconcile committed again: ready",
                   " failed_before=%d", c->failed_streak);
        c->failed_streak = 0;
        c->failed_err[0] = 0;
        return;
    }
    c->failed_streak++;
    if (err && err[0])
        gq_strlcpy(c->failed_err, err, sizeof(c->failed_err));
    else
        gq_strlcpy(c->failed_err, gq_strerror(rc), sizeof(c->failed_err));
}

static int all_synced(const struct gq_ctl *c)
{
    for (int i = 0; i < INF_COUNT; i++)
        if (!kube_informer_synced(c->inf[i]))
            return 0;
    return 1;
}

/* The delay before a reconcile asked for at now: the debounce, or longer
 * while reconciles are costly, so that they take at most share percent of
 * the time, or follow each other, so that they start at least window_s
 * apart (the work of the events meanwhile is batched into one). An event
 * after a quiet spell (more than window_s since the last reconcile ended)
 * waits the debounce alone. */
double ctl_batch_delay(double debounce_s, int share, double window_s, double start, double end, double now)
{
    if (end <= 0 || now < end)
        return debounce_s; /* no reconcile yet, or the clock was set back past its end */
    double at = now + debounce_s;
    if (share > 0 && share < 100 && end > start)
        at = GQ_MAX(at, end + (end - start) * (double)(100 - share) / (double)share);
    if (window_s > 0 && now - end < window_s)
        at = GQ_MAX(at, start + window_s);
    return at - now;
}

static void ctl_settle_at(struct gq_ctl *c, int64_t due_ms);

#define CTL_TRIM_INTERVAL_S 10.0
#define CTL_HEAP_INTERVAL_S 5.0

/* Run a reconcile and act on its result (ctl_reconcile never calls the loop). */
static void maybe_reconcile(struct gq_ctl *c)
{
    c->dirty = 0;
    if (c->stopping || !c->leading || !all_synced(c))
        return;
    double t0 = ev_time();
    struct ctl_rc_result res = ctl_reconcile(c);
    if (res.quiet)
        return; /* nothing changed, nothing due: the batching keeps the last real cost */
    if (res.committed)
        ctl_reconcile_result(c, 0, NULL);
    if (res.rc)
        ctl_reconcile_result(c, res.rc, res.err);
    if (res.due_ms)
        ctl_settle_at(c, res.due_ms);
    if (ev_time() - c->trim_at >= CTL_TRIM_INTERVAL_S) {
        /* a reconcile's arrays and the objects the informers replaced leave
         * free heap glibc would keep resident: give it back (a few ms) */
        malloc_trim(0);
        c->trim_at = ev_time();
    }
    c->rc_start = t0;
    c->rc_end = ev_time();
}

static void debounce_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    maybe_reconcile(w->data);
}

static void settle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gq_ctl *c = w->data;
    c->settle_at_ms = 0;
    ctl_wake(c); /* what time alone changes is due */
}

/* Reconcile again at due_ms (wall clock, ms): time alone changes something
 * then (a status write held back by --status-settle, a position epoch, the
 * end of a minimum-runtime protection, ...: ctl_rc.h due_next). An earlier
 * one already armed is kept. */
static void ctl_settle_at(struct gq_ctl *c, int64_t due_ms)
{
    if (c->stopping || (c->settle_at_ms && c->settle_at_ms <= due_ms))
        return;
    int64_t now = ctl_now_ms();
    double d = due_ms > now ? (double)(due_ms - now) / 1000.0 : 0.;
    ev_now_update(c->loop); /* the timer counts from the loop's time (see ctl_mark_dirty) */
    ev_timer_stop(c->loop, &c->settle_timer);
    ev_timer_set(&c->settle_timer, d + 0.001, 0.);
    ev_timer_start(c->loop, &c->settle_timer);
    c->settle_at_ms = due_ms;
}

static void log_relists(struct gq_ctl *c)
{
    uint64_t total = 0;
    for (int i = 0; i < INF_COUNT; i++) {
        struct kube_informer_stats s;
        kube_informer_get_stats(c->inf[i], &s);
        total += s.lists;
    }
    if (total != c->last_relists) {
        char kv[1024];
        size_t off = 0;
        for (int i = 0; i < INF_COUNT && off < sizeof(kv); i++) {
            struct kube_informer_stats s;
            kube_informer_get_stats(c->inf[i], &s);
            int n = snprintf(kv + off, sizeof(kv) - off, "%sinf%d_lists=%llu inf%d_relists_410=%llu inf%d_watches=%llu",
                             i ? " " : "", i, (unsigned long long)s.lists, i,
                             (unsigned long long)s.relists_410, i, (unsigned long long)s.watches);
            if (n < 0)
                break;
            off += (size_t)n;
        }
        gq_log(c->cfg.log_level, GQ_LOG_INFO, "ctl", "informer lists", " total_lists=%llu %s",
               (unsigned long long)total, kv);
        c->last_relists = total;
    }
}

static void resync_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gq_ctl *c = w->data;
    log_relists(c);
    /* the reconcile decides what is due: the periodic resync of jobs time
     * alone changes, or a full pass (ctl_cycle.c phase_gather) */
    maybe_reconcile(c);
}

/* Member e is one of skip[0..nskip). */
static int skipped(const cJSON *e, const char *const *skip, size_t nskip)
{
    for (size_t s = 0; e->string && s < nskip; s++)
        if (!strcmp(e->string, skip[s]))
            return 1;
    return 0;
}

/* Objects o and n agree on every member but those in skip (in metadata: but
 * resourceVersion and managedFields): count and compare the others. */
static int same_but(const cJSON *o, const cJSON *n, const char *const *skip, size_t nskip)
{
    const cJSON *e;
    int no = 0, nn = 0;
    cJSON_ArrayForEach(e, o)
    {
        no += !skipped(e, skip, nskip);
    }
    cJSON_ArrayForEach(e, n)
    {
        if (skipped(e, skip, nskip))
            continue;
        nn++;
        const cJSON *oe = e->string ? cJSON_GetObjectItemCaseSensitive(o, e->string) : NULL;
        if (!oe)
            return 0;
        if (!strcmp(e->string, "metadata")) {
            static const char *const meta_skip[] = {"resourceVersion", "managedFields"};
            if (!cJSON_IsObject(oe) || !cJSON_IsObject(e) || !same_but(oe, e, meta_skip, GQ_ARRAY_LEN(meta_skip)))
                return 0;
        } else if (!cJSON_Compare(oe, e, 1)) {
            return 0;
        }
    }
    return no == nn;
}

/* A Team or GPUPool whose update changed its status only (gangq's own
 * status write coming back): no job is concerned. */
static int status_only(const cJSON *o, const cJSON *n)
{
    static const char *const skip[] = {"status"};
    return o && n && cJSON_IsObject(o) && cJSON_IsObject(n) && same_but(o, n, skip, GQ_ARRAY_LEN(skip));
}

/* A status-only change of a GPUJob that now shows a finished state, of a
 * job with spec.ttlSecondsAfterFinished: its deletion counts from that
 * (ctl_observe.c rc_job_ttl), so a reconcile is asked for, though the job
 * is not examined again for it. The spec is the pruned one's raw text: a
 * match elsewhere in it only costs a reconcile. */
static int ttl_finish_shown(const cJSON *o, const cJSON *n)
{
    const char *ns = ctl_obj_str(n, "status", "state"), *os = ctl_obj_str(o, "status", "state");
    if (!ns || (strcmp(ns, "Succeeded") && strcmp(ns, "Failed")) || (os && !strcmp(os, ns)))
        return 0;
    const cJSON *raw = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "spec"), CTL_SPEC_RAW);
    return !cJSON_IsString(raw) || strstr(raw->valuestring, "\"ttlSecondsAfterFinished\"") != NULL;
}

/* How long the API server took to tell us of a new object: its
 * creationTimestamp (whole seconds, so up to 1 s early) to its ADDED event.
 * A lagging watch delays every decision about new work by as much. */
static void watch_delay(struct gq_ctl *c, int idx, const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(meta, "creationTimestamp");
    double created;
    if (!cJSON_IsString(ts) || gq_parse_rfc3339(ts->valuestring, 1, &created))
        return;
    double d = (double)ctl_now_ms() / 1000.0 - created;
    gq_metrics_observe(c->mh.watch_delay[idx], d > 0 ? d : 0);
}

void ctl_object_event(struct gq_ctl *c, int idx, enum kube_event_type type, const cJSON *old_obj,
                      const cJSON *new_obj)
{
    c->m.informer_events++;
    c->inf_events[idx]++;
    if (idx == INF_JOBS && type == KUBE_EV_DELETED)
        c->jobs_deleted++; /* the next reconcile looks for store rows whose GPUJob is gone */
    if (idx == INF_TEAMS && type == KUBE_EV_MODIFIED && old_obj && new_obj)
        ctl_team_changed(c, old_obj, new_obj);
    if (idx == INF_PODS && type == KUBE_EV_DELETED && old_obj)
        ctl_pod_deleted(c, old_obj);
    /* after the first list, an ADDED event is a new object */
    if (type == KUBE_EV_ADDED && new_obj && c->mh.watch_delay[idx] && c->inf[idx] &&
        kube_informer_synced(c->inf[idx]))
        watch_delay(c, idx, new_obj);
    /* what changed is examined by the next reconcile (c->reconciles + 1) */
    const cJSON *now_obj = type == KUBE_EV_DELETED ? NULL : new_obj;
    int rc = GQ_OK, quiet = 0;
    if (idx == INF_PODS)
        rc = ctl_index_pod(&c->memo, &c->foreign_set, old_obj, now_obj, c->reconciles + 1);
    else if (idx == INF_JOBS) {
        /* A change of the status alone (gangq's own status write coming
         * back, as a rule) changes nothing a reconcile reads of the job: the
         * status to write is compared with the one last written, kept on the
         * memo (ctl_report.c), not with the object's. The object is kept,
         * the job is not examined again for it, and no reconcile is asked. */
        quiet = type == KUBE_EV_MODIFIED && old_obj && new_obj && status_only(old_obj, new_obj);
        rc = ctl_index_job(&c->memo, &c->jobs_set, old_obj, now_obj, quiet ? 0 : c->reconciles + 1);
        if (quiet)
            c->m.job_status_events++;
    }
    else if (!((idx == INF_TEAMS || idx == INF_POOLS) && type == KUBE_EV_MODIFIED &&
               status_only(old_obj, new_obj)))
        c->full_next = 1; /* Teams, pools, priority classes, nodes: every job may be concerned */
    if (rc) {
        /* a set is incomplete: start over from a relist of that resource */
        gq_log(c->cfg.log_level, GQ_LOG_ERROR, "ctl", "out of memory indexing an informer event: "
               "the next reconcile rebuilds the index from the caches", " informer=%d", idx);
        c->index_stale = 1;
        c->full_next = 1;
        quiet = 0;
    }
    if (!quiet || (idx == INF_JOBS && ttl_finish_shown(old_obj, new_obj)))
        ctl_wake(c);
}

static void inf_event(enum kube_event_type type, const cJSON *old_obj, const cJSON *new_obj, void *ud)
{
    struct ctl_infud *u = ud;
    ctl_object_event(u->c, u->idx, type, old_obj, new_obj);
}

/* An object the informer had to skip (too large, too deep, undecodable): it
 * was counted and logged there. A GPUJob gangq never read gets a Warning
 * Event and is marked Failed with a condition, once (an object already
 * Failed is left alone, so our own status write cannot loop); one with an
 * older readable version in the cache keeps that version in force and only
 * gets the Event. Only the leader writes. */
static void inf_skip(const struct kube_skipped *s, void *ud)
{
    struct ctl_infud *u = ud;
    struct gq_ctl *c = u->c;
    char msg[256], path[CTL_PATH_MAX], now[40];
    int known;
    if (u->idx != INF_JOBS || !c->leading || c->stopping || !s->name[0] || !s->namespace_[0] ||
        !strcmp(s->state, "Failed") || s->type == KUBE_EV_DELETED)
        return;
    known = kube_informer_get(c->inf[INF_JOBS], s->namespace_, s->name) != NULL;
    snprintf(msg, sizeof(msg), "gangq cannot read this GPUJob (%s: %s); %s", kube_skip_reason_name(s->reason),
             s->detail, known ? "its last readable version stays in force" : "it is ignored until fixed");
    struct kube_objref ref = {API_GROUP_VERSION, "GPUJob", s->namespace_, s->name,
                              s->uid[0] ? s->uid : NULL, s->resource_version[0] ? s->resource_version : NULL};
    if (kube_event_create(c->client, &ref, "Warning", "Unreadable", msg, c->identity, NULL, NULL))
        gq_log(c->cfg.log_level, GQ_LOG_WARN, "ctl", "event not sent", " job=%s/%s", s->namespace_, s->name);
    if (known || kube_path(path, sizeof(path), "/apis/" API_GROUP_VERSION, s->namespace_, "gpujobs", s->name, NULL))
        return;
    ctl_time_format(ctl_now_ms(), now, sizeof(now));
    cJSON *patch = cJSON_CreateObject(), *st = cJSON_AddObjectToObject(patch, "status");
    cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
    static const char *const types[2][2] = {{"Valid", "False"}, {"Failed", "True"}};
    int ok = st && conds && cJSON_AddStringToObject(st, "state", "Failed") &&
             cJSON_AddStringToObject(st, "message", msg) && cJSON_AddStringToObject(st, "completionTime", now);
    for (int i = 0; ok && i < 2; i++) {
        cJSON *cd = cJSON_CreateObject();
        ok = cd && cJSON_AddItemToArray(conds, cd) && cJSON_AddStringToObject(cd, "type", types[i][0]) &&
             cJSON_AddStringToObject(cd, "status", types[i][1]) &&
             cJSON_AddStringToObject(cd, "reason", "Unreadable") && cJSON_AddStringToObject(cd, "message", msg) &&
             cJSON_AddStringToObject(cd, "lastTransitionTime", now);
    }
    if (!ok || kube_patch_status(c->client, path, patch, NULL, NULL))
        gq_log(c->cfg.log_level, GQ_LOG_WARN, "ctl", "status not written", " job=%s/%s", s->namespace_, s->name);
    else
        gq_log(c->cfg.log_level, GQ_LOG_WARN, "ctl", "unreadable job marked Failed", " job=%s/%s reason=%s",
               s->namespace_, s->name, kube_skip_reason_name(s->reason));
    cJSON_Delete(patch);
}

static void inf_synced(void *ud)
{
    struct ctl_infud *u = ud;
    gq_log(u->c->cfg.log_level, GQ_LOG_INFO, "ctl", "informer synced", " informer=%d", u->idx);
    ctl_wake(u->c);
}

static int ctl_store_open(struct gq_ctl *c)
{
    char err[1024];
    if (c->st)
        return 0;
    if (store_open(c->cfg.db, NULL, &c->st, err, sizeof(err))) {
        gq_log(c->cfg.log_level, GQ_LOG_ERROR, "ctl", err, NULL);
        return GQ_EIO;
    }
    c->act.st = c->st;
    if (c->cfg.db_max_pages > 0 && store_set_max_pages(c->st, c->cfg.db_max_pages, err, sizeof(err)))
        gq_log(c->cfg.log_level, GQ_LOG_WARN, "ctl", err, NULL);
    int64_t n = 0;
    store_jobs_count(c->st, STORE_MASK_ALL, &n, NULL, 0);
    gq_log(c->cfg.log_level, GQ_LOG_INFO, "ctl", "store open", " db=%s jobs=%lld", c->cfg.db, (long long)n);
    return 0;
}

static void begin_stop(struct gq_ctl *c);

static void lead_started(void *ud)
{
    struct gq_ctl *c = ud;
    if (ctl_store_open(c)) {
        /* cannot work without the store: give the lease back and exit */
        c->exit_code = 1;
        begin_stop(c);
        return;
    }
    c->leading = 1;
    c->restart_done = 0;
    c->failed_streak = 0;
    gq_log(c->cfg.log_level, GQ_LOG_INFO, "ctl", "leading: cycles on", " identity=%s", c->identity);
    /* GPUJobs skipped while standing by get their Event and Failed status now */
    kube_informer_skipped_foreach(c->inf[INF_JOBS], inf_skip, &c->infud[INF_JOBS]);
    ctl_wake(c);
}

static void lead_stopped(void *ud)
{
    struct gq_ctl *c = ud;
    c->leading = 0;
    gq_log(c->cfg.log_level, GQ_LOG_WARN, "ctl", "lost leadership: cycles off", " identity=%s",
           c->identity);
}

static void stop_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct gq_ctl *c = w->data;
    size_t pend = kube_client_pending(c->client);
    if (pend == 0 || ev_now(loop) >= c->stop_deadline) {
        if (pend) {
            struct kube_client_stats ks;
            kube_client_get_stats(c->client, &ks);
            gq_log(c->cfg.log_level, GQ_LOG_WARN, "ctl", "shutdown: giving up on writes in flight",
                   " pending=%zu critical=%zu normal=%zu low=%zu", pend,
                   ks.queued[KUBE_PRIO_CRITICAL] + ks.inflight[KUBE_PRIO_CRITICAL],
                   ks.queued[KUBE_PRIO_NORMAL] + ks.inflight[KUBE_PRIO_NORMAL],
                   ks.queued[KUBE_PRIO_LOW] + ks.inflight[KUBE_PRIO_LOW]);
        }
        {
            struct kube_client_stats ks;
            kube_client_get_stats(c->client, &ks);
            gq_log(c->cfg.log_level, GQ_LOG_INFO, "ctl", "shutdown: API requests sent by priority",
                   " critical=%llu normal=%llu low=%llu exempt=%llu coalesced=%llu dropped_low=%llu",
                   (unsigned long long)ks.started[KUBE_PRIO_CRITICAL],
                   (unsigned long long)ks.started[KUBE_PRIO_NORMAL],
                   (unsigned long long)ks.started[KUBE_PRIO_LOW],
                   (unsigned long long)ks.started[KUBE_PRIO_EXEMPT], (unsigned long long)ks.coalesced,
                   (unsigned long long)ks.dropped[KUBE_PRIO_LOW]);
        }
        ev_timer_stop(loop, w);
        ev_break(loop, EVBREAK_ALL);
    }
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gq_ctl *c = w->data;
    if (c->stopping)
        return;
    gq_log(c->cfg.log_level, GQ_LOG_INFO, "ctl", "signal: shutting down", " signal=%d", w->signum);
    begin_stop(c);
}

/* Stop watches and timers, release the lease, then wait (bounded) for the
 * writes in flight before leaving the loop. */
static void begin_stop(struct gq_ctl *c)
{
    struct ev_loop *loop = c->loop;
    if (c->stopping)
        return;
    c->stopping = 1;
    ev_timer_stop(loop, &c->debounce);
    ev_timer_stop(loop, &c->resync);
    ev_timer_stop(loop, &c->settle_timer);
    for (int i = 0; i < INF_COUNT; i++)
        kube_informer_stop(c->inf[i]);
    if (c->leader)
        kube_leader_stop(c->leader);
    ctl_act_stop(&c->act);
    c->stop_deadline = ev_now(loop) + c->cfg.shutdown_wait_s;
    ev_timer_set(&c->stop_timer, 0.02, 0.05);
    ev_timer_start(loop, &c->stop_timer);
}

static const char *const inf_paths[INF_COUNT] = {
    "/apis/gangq.io/v1alpha1/gpujobs", "/apis/gangq.io/v1alpha1/teams",
    "/apis/gangq.io/v1alpha1/gpupools", "/api/v1/nodes",
    "/api/v1/pods", "/apis/scheduling.k8s.io/v1/priorityclasses"};
static const char *const inf_names[INF_COUNT] = {"gpujobs", "teams", "gpupools",
                                                 "nodes", "pods", "priorityclasses"};

/* ------------------------------------------------------------ metrics */

/* Bring a counter up to an absolute value kept elsewhere. */
static void counter_to(struct gq_metric *h, double v)
{
    double d = v - gq_metrics_value(h);
    if (d > 0)
        gq_metrics_add(h, d);
}

static void metrics_refresh(struct gq_ctl *c)
{
    counter_to(c->mh.cycles, (double)c->m.cycles);
    counter_to(c->mh.store_errors, (double)(c->m.store_errors + c->act.store_errors));
    gq_metrics_set(c->mh.leader, c->leading ? 1 : 0);
    for (int s = 0; s < STORE_NSTATES; s++)
        gq_metrics_set(c->mh.jobs[s], (double)c->m.jobs_by_state[s]);
    gq_metrics_set(c->mh.jobs_dormant, (double)c->m.jobs_dormant);
    counter_to(c->mh.jobs_woken, (double)c->m.jobs_woken);
    gq_metrics_set(c->mh.write_credit, c->act.writes.credit);
    if (ev_time() - c->heap_at >= CTL_HEAP_INTERVAL_S) { /* heap_at 0: the first scrape */
        /* main arena and the others: what RSS is made of. mallinfo2 merges
         * the fast bins and walks every free chunk, which costs more than the
         * rest of a scrape with a large heap: at most every few seconds */
        struct mallinfo2 mi = mallinfo2();
        gq_metrics_set(c->mh.heap_inuse, (double)(mi.uordblks + mi.hblkhd));
        gq_metrics_set(c->mh.heap_free, (double)mi.fordblks);
        c->heap_at = ev_time();
    }
    for (int i = 0; i < INF_COUNT; i++) {
        struct kube_informer_stats st;
        kube_informer_get_stats(c->inf[i], &st);
        counter_to(c->mh.inf_events[i], (double)c->inf_events[i]);
        counter_to(c->mh.inf_lists[i], (double)st.lists);
        counter_to(c->mh.inf_relists[i], (double)st.relists_410); /* every relist it counts */
        for (int r = 1; r < KUBE_SKIP_NREASONS; r++) {
            /* registering again returns the same series: no handle to keep */
            struct gq_metric *h = NULL;
            const char *lb[] = {"informer", inf_names[i], "reason", kube_skip_reason_name(r), NULL};
            if (!gq_metrics_counter(c->metrics, "gangq_informer_objects_skipped_total",
                                    "Objects an informer skipped (too large, too deep, undecodable)", lb, &h,
                                    NULL, 0))
                counter_to(h, (double)st.skipped[r]);
        }
    }
}

/* The kube client's lanes: requests waiting and in flight now, sent, dropped
 * and coalesced in total. Registering again returns the same series. */
static void metrics_lanes(struct gq_ctl *c)
{
    struct kube_client_stats ks;
    struct gq_metric *h;
    if (!c->metrics || !c->client)
        return;
    kube_client_get_stats(c->client, &ks);
    for (int p = 0; p < KUBE_NPRIO; p++) {
        const char *lb[] = {"priority", kube_prio_name((enum kube_prio)p), NULL};
        h = NULL;
        if (!gq_metrics_gauge(c->metrics, "gangq_kube_requests_queued",
                              "API requests waiting for an in-flight slot, by priority", lb, &h, NULL, 0))
            gq_metrics_set(h, (double)ks.queued[p]);
        h = NULL;
        if (!gq_metrics_gauge(c->metrics, "gangq_kube_requests_inflight", "API requests in flight, by priority",
                              lb, &h, NULL, 0))
            gq_metrics_set(h, (double)ks.inflight[p]);
        h = NULL;
        if (!gq_metrics_counter(c->metrics, "gangq_kube_requests_started_total", "API requests sent, by priority",
                                lb, &h, NULL, 0))
            counter_to(h, (double)ks.started[p]);
        h = NULL;
        if (!gq_metrics_counter(c->metrics, "gangq_kube_requests_dropped_total",
                                "API requests dropped unsent (low-priority queue full, shutdown), by priority",
                                lb, &h, NULL, 0))
            counter_to(h, (double)ks.dropped[p]);
        h = NULL;
        if (!gq_metrics_counter(c->metrics, "gangq_kube_requests_finished_total",
                                "API requests answered (or failed) after being sent, by priority", lb, &h, NULL, 0))
            counter_to(h, (double)ks.finished[p]);
        h = NULL;
        if (!gq_metrics_counter(c->metrics, "gangq_kube_request_wait_seconds_total",
                                "Time finished API requests waited for an in-flight slot, in total, by priority",
                                lb, &h, NULL, 0))
            counter_to(h, ks.wait_s[p]);
        h = NULL;
        if (!gq_metrics_counter(c->metrics, "gangq_kube_request_wire_seconds_total",
                                "Time finished API requests spent from their slot to the answer, in total, by "
                                "priority",
                                lb, &h, NULL, 0))
            counter_to(h, ks.wire_s[p]);
    }
    h = NULL;
    if (!gq_metrics_counter(c->metrics, "gangq_kube_requests_coalesced_total",
                            "Status writes replaced unsent by a newer one for the same object", NULL, &h, NULL, 0))
        counter_to(h, (double)ks.coalesced);
    h = NULL;
    if (!gq_metrics_counter(c->metrics, "gangq_kube_requests_refused_total",
                            "Low-priority status writes refused while that queue was full (written later)", NULL,
                            &h, NULL, 0))
        counter_to(h, (double)ks.refused);
}

/* Counter series name{label=values[i]} brought up to v[i] (label NULL: one
 * series, n 1). Registering again returns the same series. */
static void counters_to(struct gq_ctl *c, const char *name, const char *help, const char *label,
                        const char *const *values, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *lb[] = {label, label ? values[i] : NULL, NULL};
        struct gq_metric *h = NULL;
        if (!gq_metrics_counter(c->metrics, name, help, label ? lb : NULL, &h, NULL, 0))
            counter_to(h, (double)v[i]);
    }
}

/* What reconciles examined, and the Events budget's outcome. */
static void metrics_work(struct gq_ctl *c)
{
    if (!c->metrics)
        return;
    const uint64_t ex[] = {c->m.jobs_full, c->m.jobs_reused};
    const char *const exn[] = {"full", "reused"};
    counters_to(c, "gangq_jobs_examined_total",
                "GPUJobs a reconcile examined: in full (dirty, or a full pass), or reusing their last examination",
                "how", exn, ex, GQ_ARRAY_LEN(ex));
    counters_to(c, "gangq_gpujob_status_events_total",
                "GPUJob watch events that changed the status alone (gangq's own status writes coming back, "
                "as a rule): the job is not examined again for them",
                NULL, NULL, &c->m.job_status_events, 1);
    counters_to(c, "gangq_reconciles_full_total",
                "Reconciles that examined every job (every --full-resync-interval; a Team, GPUPool, node or "
                "PriorityClass change)",
                NULL, NULL, &c->m.reconciles_full, 1);
    counters_to(c, "gangq_reconciles_quiet_total",
                "Reconciles skipped: nothing they read changed since the last one and nothing time changes was due "
                "(the --cycle-interval ticks of an idle controller); not in the phase histograms",
                NULL, NULL, &c->m.reconciles_quiet, 1);
    counters_to(c, "gangq_jobs_ttl_deleted_total",
                "Finished GPUJobs deleted for their spec.ttlSecondsAfterFinished (the API server's answer: done)",
                NULL, NULL, &c->m.jobs_ttl_deleted, 1);
    counters_to(c, "gangq_jobs_deadline_exceeded_total",
                "Jobs stopped and Failed for running past their spec.maxRunSeconds (DeadlineExceeded)", NULL, NULL,
                &c->m.jobs_deadline_exceeded, 1);
    counters_to(c, "gangq_backfill_admissions_total",
                "Admissions onto nodes reserved for a blocked job, by a job whose spec.maxRunSeconds ends before "
                "that job could start",
                NULL, NULL, &c->m.backfills, 1);
    counters_to(c, "gangq_audit_pruned_total",
                "Audit log entries deleted for being older than --audit-retention", NULL, NULL, &c->m.audit_pruned, 1);
    const uint64_t rf[] = {c->m.refresh_sent, c->m.refresh_held};
    const char *const rfr[] = {"sent", "held"};
    counters_to(c, "gangq_status_refresh_total",
                "GPUJob status rewrites that change only the position or the wait message's text: sent, "
                "or held past --status-refresh-qps/--status-refresh-burst (offered again by a later reconcile; each "
                "reconcile that holds one counts)",
                "result", rfr, rf, GQ_ARRAY_LEN(rf));
    counters_to(c, "gangq_status_deferred_total",
                "GPUJob statuses that change no state, not built while the request queue's low lane was "
                "full (offered again by a later reconcile; each reconcile that defers one counts)",
                NULL, NULL, &c->m.status_deferred, 1);
    const uint64_t ev[] = {c->act.events_sent, c->act.events_throttled, c->act.events_failed};
    const char *const evr[] = {"sent", "throttled", "failed"};
    counters_to(c, "gangq_events_total",
                "Events: sent (queued to the API server), throttled (a Normal Event past "
                "--event-qps/--event-burst, not sent), failed (not queued)",
                "result", evr, ev, GQ_ARRAY_LEN(ev));
}

static int h_metrics(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    (void)req;
    struct gq_ctl *c = ud;
    metrics_refresh(c);
    metrics_lanes(c);
    metrics_work(c);
    gq_strlcpy(resp->content_type, GQ_METRICS_CONTENT_TYPE, sizeof(resp->content_type));
    return gq_metrics_render(c->metrics, resp->body);
}

/* /queue[?team=NAME]: exact queue positions (ctl_queue_render) */
static int h_queue(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    const char *team = !strncmp(req->query, "team=", 5) ? req->query + 5 : "";
    gq_strlcpy(resp->content_type, "application/json", sizeof(resp->content_type));
    return ctl_queue_render(ud, team, resp->body);
}

static int h_healthz(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    return gq_buf_puts(resp->body, "ok\n");
}


static int h_readyz(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    (void)req;
    struct gq_ctl *c = ud;
    /* ready: informers synced and, when leading (or without election), the store open
     * and the last reconciles committing */
    int ok = all_synced(c) && !c->stopping && (c->st || (c->cfg.leader_elect && !c->leading));
    resp->status = 503;
    if (!ok)
        return gq_buf_puts(resp->body, "not ready: informers not synced or store closed\n");
    if (c->leading && c->failed_streak >= CTL_READY_MAX_FAILED)
        return gq_buf_printf(resp->body, "not ready: the last %d reconciles failed and were rolled back: %s\n",
                             c->failed_streak, c->failed_err);
    resp->status = 200;
    return gq_buf_puts(resp->body, "ok\n");
}

static int metrics_setup(struct gq_ctl *c, char *err, size_t errlen)
{
    int rc = 0;
    if (!(c->metrics = gq_metrics_new()))
        return GQ_ENOMEM;
    struct gq_metrics *m = c->metrics;
    struct ctl_mh *h = &c->mh;
    /* reconciles: gangq_reconcile_phase_duration_seconds_count{phase="gather"} (every
     * reconcile runs that phase first); scheduling cycles: gangq_cycles_total */
    if ((rc = gq_metrics_counter(m, "gangq_cycles_total", "Scheduling cycles run", NULL, &h->cycles, err, errlen)) ||
        (rc = gq_metrics_histogram(m, "gangq_cycle_duration_seconds", "Scheduling cycle duration", NULL, NULL, 0,
                                   &h->cycle_dur, err, errlen)) ||
        (rc = gq_metrics_counter(m, "gangq_store_errors_total", "Failed store transactions or writes", NULL,
                                 &h->store_errors, err, errlen)) ||
        (rc = gq_metrics_gauge(m, "gangq_leader", "1 while this replica runs cycles", NULL, &h->leader, err, errlen)))
        return rc;
    for (int p = 0; p < CTL_NPHASES; p++)
        if ((rc = gq_metrics_histogram(m, "gangq_reconcile_phase_duration_seconds",
                                       "Duration of each named phase of a reconcile",
                                       (const char *[]){"phase", ctl_phase_names[p], NULL}, NULL, 0,
                                       &h->phase_dur[p], err, errlen)) ||
            (rc = gq_metrics_counter(m, "gangq_reconcile_phase_cpu_seconds_total",
                                     "Controller thread CPU time spent in each named phase of reconciles",
                                     (const char *[]){"phase", ctl_phase_names[p], NULL}, &h->phase_cpu[p], err,
                                     errlen)))
            return rc;
    for (int s = 0; s < STORE_NSTATES; s++)
        if ((rc = gq_metrics_gauge(m, "gangq_jobs", "GPUJobs by state",
                                   (const char *[]){"state", store_state_name(s), NULL}, &h->jobs[s], err, errlen)))
            return rc;
    if ((rc = gq_metrics_gauge(m, "gangq_jobs_dormant",
                               "Finished GPUJobs reconciles skip until an event of the job or its pods",
                               NULL, &h->jobs_dormant, err, errlen)) ||
        (rc = gq_metrics_counter(m, "gangq_jobs_woken_total",
                                 "Dormant GPUJobs examined again (an event of the job or its pods)", NULL,
                                 &h->jobs_woken, err, errlen)) ||
        (rc = gq_metrics_gauge(m, "gangq_write_budget",
                               "API writes the admissions so far have paid for and not spent (each admission "
                               "credits its pods + 2, each write sent spends one; below 1, Normal Events and "
                               "status refreshes go out at 1 per second each)",
                               NULL, &h->write_credit, err, errlen)) ||
        (rc = gq_metrics_gauge(m, "gangq_heap_bytes",
                               "Heap bytes allocated (inuse) and free but kept by malloc (free), read at most every 5 s",
                               (const char *[]){"state", "inuse", NULL}, &h->heap_inuse, err, errlen)) ||
        (rc = gq_metrics_gauge(m, "gangq_heap_bytes",
                               "Heap bytes allocated (inuse) and free but kept by malloc (free), read at most every 5 s",
                               (const char *[]){"state", "free", NULL}, &h->heap_free, err, errlen)))
        return rc;
    for (int i = 0; i < INF_COUNT; i++) {
        const char *lb[] = {"informer", inf_names[i], NULL};
        if ((rc = gq_metrics_counter(m, "gangq_informer_events_total", "Watch events applied", lb,
                                     &h->inf_events[i], err, errlen)) ||
            (rc = gq_metrics_counter(m, "gangq_informer_lists_total", "LIST cycles (first sync and relists)", lb,
                                     &h->inf_lists[i], err, errlen)) ||
            (rc = gq_metrics_counter(m, "gangq_informer_relists_total",
                                     "Relists of a resource's informer, by reason (watch_error: 410 Gone, an "
                                     "oversized or an undecodable watch event)",
                                     (const char *[]){"resource", inf_names[i], "reason", "watch_error", NULL},
                                     &h->inf_relists[i], err, errlen)))
            return rc;
        static const double delay_bounds[] = {0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300};
        /* GPUJobs only: the pod cache drops creationTimestamp (kube_prune_pod),
         * so a pod's delay cannot be told */
        if (i == INF_JOBS &&
            (rc = gq_metrics_histogram(m, "gangq_watch_delay_seconds",
                                       "A new object's creationTimestamp (whole seconds) to its ADDED watch "
                                       "event: how far the API server's watch lags",
                                       lb, delay_bounds, GQ_ARRAY_LEN(delay_bounds), &h->watch_delay[i], err,
                                       errlen)))
            return rc;
    }
    /* series labelled with object names (Teams, pools, GPU types): bounded per name */
    static const struct {
        enum gq_metric_type type;
        const char *name, *help;
    } objfams[] = {
        {GQ_METRIC_GAUGE, CTL_M_TEAM_QUOTA, "Nominal GPU quota of a Team, by GPU type (\"*\": any other type)"},
        {GQ_METRIC_GAUGE, CTL_M_TEAM_USED,
         "GPUs held by a Team's admitted jobs (shares counted exactly), by the quota entry they are charged to"},
        {GQ_METRIC_GAUGE, CTL_M_TEAM_BORROWED, "GPUs a Team uses beyond its nominal quota of a GPU type"},
        {GQ_METRIC_GAUGE, CTL_M_TEAM_PENDING_JOBS, "Queued or preempted jobs of a Team"},
        {GQ_METRIC_GAUGE, CTL_M_TEAM_PENDING_GPUS, "GPUs asked for by a Team's waiting jobs"},
        {GQ_METRIC_GAUGE, CTL_M_POOL_GPUS, "GPUs of a GPUPool's nodes"},
        {GQ_METRIC_GAUGE, CTL_M_POOL_ALLOCATED, "GPU devices in use on a GPUPool's nodes"},
        {GQ_METRIC_GAUGE, CTL_M_POOL_PENDING_JOBS, "Waiting jobs a GPUPool would run"},
        {GQ_METRIC_COUNTER, CTL_M_ADMISSIONS, "Admission decisions, by Team and class"},
        {GQ_METRIC_COUNTER, CTL_M_PREEMPTIONS, "Preemption decisions, by the preempted job's Team and class"},
    };
    for (size_t f = 0; f < sizeof(objfams) / sizeof(objfams[0]); f++)
        if ((rc = gq_metrics_family(m, objfams[f].type, objfams[f].name, objfams[f].help, NULL, 0,
                                    CTL_METRICS_MAX_OBJ_SERIES, err, errlen)))
            return rc;
    /* creation -> first admission: seconds to a day */
    static const double wait_bounds[] = {1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400};
    for (int k = 0; k < API_CLASS_COUNT; k++)
        if ((rc = gq_metrics_histogram(m, "gangq_time_to_admission_seconds",
                                       "Seconds from a GPUJob's creation to its first admission, by class",
                                       (const char *[]){"class", k ? api_class_name((enum api_class)k) : "None",
                                                        NULL},
                                       wait_bounds, sizeof(wait_bounds) / sizeof(wait_bounds[0]),
                                       &h->admit_wait[k], err, errlen)))
            return rc;
    struct gq_httpd_opts ho;
    gq_httpd_opts_default(&ho);
    ho.listen = c->cfg.listen;
    ho.log_level = c->cfg.log_level;
    if ((rc = gq_httpd_new(c->loop, &ho, &c->httpd, err, errlen)))
        return rc;
    if ((rc = gq_httpd_route(c->httpd, "/metrics", h_metrics, c)) ||
        (rc = gq_httpd_route(c->httpd, "/healthz", h_healthz, c)) ||
        (rc = gq_httpd_route(c->httpd, "/readyz", h_readyz, c)) ||
        (rc = gq_httpd_route(c->httpd, "/queue", h_queue, c)))
        return rc;
    gq_log(c->cfg.log_level, GQ_LOG_INFO, "ctl", "http server listening", " listen=%s port=%d", c->cfg.listen,
           gq_httpd_port(c->httpd));
    return 0;
}

void ctl_scfg_init(struct gq_ctl *c)
{
    sched_config_default(&c->scfg);
    c->scfg.nlevels = GQ_MIN(c->cfg.levels.nlevels, SCHED_LEVELS_MAX);
    for (int i = 0; i < c->scfg.nlevels; i++) {
        c->scfg.levels[i].name = c->cfg.levels.levels[i];
        c->scfg.levels[i].label_key = c->cfg.levels.labels[i];
    }
    c->scfg.gpu_product_key = c->cfg.gpu_product_label;
    c->scfg.gpu_memory_key = c->cfg.gpu_memory_label;
    c->scfg.min_runtime_s = c->cfg.min_runtime_s;
}

/* A reconcile's per-job arrays (megabytes at 15,000 jobs) come from mmap and
 * go back at free: a fixed threshold stops glibc from raising it to the size
 * of the last one freed, which would put them in the heap between long-lived
 * cached objects and leave the heap fragmented. */
#define CTL_MMAP_THRESHOLD (256 * 1024)

void ctl_heap_init(void)
{
    (void)mallopt(M_MMAP_THRESHOLD, CTL_MMAP_THRESHOLD);
    /* Not M_MXFAST 0 (no fastbins): it made gangq bench reconcile's churn
     * stage 40 % cheaper, but the controller against the API server used
     * 10 % more CPU (bench_kueue, two runs each; docs/measurements.md). */
}

int ctl_run(const struct ctl_config *cfg)
{
    char err[1024] = "";
    int rc = 1;
    ctl_heap_init();
    struct gq_ctl *c = calloc(1, sizeof(*c));
    if (!c) {
        fprintf(stderr, "gangq controller: out of memory\n");
        return 1;
    }
    c->cfg = *cfg;
    int ll = c->cfg.log_level;
    ctl_scfg_init(c);
    kube_config_init(&c->kcfg);
    c->loop = EV_DEFAULT;
    /* socket I/O in batches: a wake-up per response or watch event cost
     * more (syscalls, context switches, libcurl's pass over its transfers)
     * than the work itself; timers, and so reconciles, are not delayed */
    if (c->cfg.io_collect_interval_s > 0)
        ev_set_io_collect_interval(c->loop, c->cfg.io_collect_interval_s);
    char host[64] = "gangq";
    gethostname(host, sizeof(host) - 1);
    const char *pod = getenv("POD_NAME");
    if (pod && pod[0])
        snprintf(c->identity, sizeof(c->identity), "%s_%ld", pod, (long)getpid());
    else
        snprintf(c->identity, sizeof(c->identity), "%s_%ld", host, (long)getpid());

    if (kube_global_init()) {
        gq_log(ll, GQ_LOG_ERROR, "ctl", "curl init failed", NULL);
        goto out;
    }
    /* With leader election the store is opened when the lease is won: a
     * standby never writes the database (deploy/: one file, two replicas). */
    if (!c->cfg.leader_elect && ctl_store_open(c))
        goto out;
    if (!(c->sched = sched_new())) {
        gq_log(ll, GQ_LOG_ERROR, "ctl", "out of memory", NULL);
        goto out;
    }
    if (c->cfg.kubeconfig[0])
        rc = kube_config_load_kubeconfig(&c->kcfg, c->cfg.kubeconfig, NULL, err, sizeof(err));
    else
        rc = kube_config_load_incluster(&c->kcfg, NULL, err, sizeof(err));
    if (rc) {
        rc = 1;
        gq_log(ll, GQ_LOG_ERROR, "ctl", err, NULL);
        goto out;
    }
    rc = 1;
    struct kube_client_opts co = {0};
    co.log_level = ll;
    co.allow_http_token = c->cfg.allow_http_token;
    co.max_inflight = (size_t)c->cfg.kube_max_inflight;
    if (!(c->client = kube_client_new(c->loop, &c->kcfg, &co, err, sizeof(err)))) {
        gq_log(ll, GQ_LOG_ERROR, "ctl", err, NULL);
        goto out;
    }
    for (int i = 0; i < INF_COUNT; i++) {
        struct kube_informer_opts io = {0};
        c->infud[i] = (struct ctl_infud){c, i};
        io.path = inf_paths[i];
        io.name = inf_names[i];
        io.on_event = inf_event;
        io.on_synced = inf_synced;
        io.on_skip = inf_skip;
        /* drop what gangq never reads (Teams keep managedFields: quota edits read them) */
        io.prune = i == INF_PODS ? kube_prune_pod : i == INF_NODES ? kube_prune_node
                   : i == INF_JOBS ? ctl_prune_gpujob : i == INF_TEAMS ? NULL : kube_prune_common;
        io.drop_managed_fields = i != INF_TEAMS; /* not even parsed: the pruners drop them */
        io.ud = &c->infud[i];
        if (i == INF_PODS)
            io.event_delay_s = c->cfg.pod_watch_delay_s;
        if (!(c->inf[i] = kube_informer_new(c->client, &io, err, sizeof(err)))) {
            gq_log(ll, GQ_LOG_ERROR, "ctl", err, NULL);
            goto out;
        }
        c->cache[i] = kube_informer_cache(c->inf[i]);
    }
    ctl_act_wire(c, ctl_mark_dirty, &ctl_act_kube_client, c->client);
    ev_timer_init(&c->debounce, debounce_cb, c->cfg.debounce_s, 0.);
    c->debounce.data = c;
    ev_timer_init(&c->resync, resync_cb, c->cfg.cycle_interval_s, c->cfg.cycle_interval_s);
    c->resync.data = c;
    ev_timer_init(&c->stop_timer, stop_timer_cb, 0.05, 0.05);
    c->stop_timer.data = c;
    ev_timer_init(&c->settle_timer, settle_cb, 1., 0.);
    c->settle_timer.data = c;
    ev_signal_init(&c->sigterm, signal_cb, SIGTERM);
    c->sigterm.data = c;
    ev_signal_init(&c->sigint, signal_cb, SIGINT);
    c->sigint.data = c;
    ev_signal_start(c->loop, &c->sigterm);
    ev_signal_start(c->loop, &c->sigint);
    ev_timer_start(c->loop, &c->resync);
    if (c->cfg.listen[0] && metrics_setup(c, err, sizeof(err))) {
        gq_log(ll, GQ_LOG_ERROR, "ctl", err[0] ? err : "metrics/http setup failed", NULL);
        goto out;
    }

    for (int i = 0; i < INF_COUNT; i++)
        if (kube_informer_start(c->inf[i])) {
            gq_log(ll, GQ_LOG_ERROR, "ctl", "informer start failed", " informer=%s", inf_names[i]);
            goto out;
        }
    if (c->cfg.leader_elect) {
        struct kube_leader_opts lo = {0};
        const char *podns = getenv("POD_NAMESPACE");
        lo.namespace_ = c->cfg.lease_ns[0] ? c->cfg.lease_ns
                        : (podns && podns[0]) ? podns
                        : (c->kcfg.namespace_ && c->kcfg.namespace_[0]) ? c->kcfg.namespace_
                                                                          : "default";
        lo.name = c->cfg.lease_name;
        lo.identity = c->identity;
        lo.release_on_stop = 1;
        lo.on_started = lead_started;
        lo.on_stopped = lead_stopped;
        lo.ud = c;
        if (!(c->leader = kube_leader_new(c->client, &lo, err, sizeof(err))) ||
            kube_leader_start(c->leader)) {
            gq_log(ll, GQ_LOG_ERROR, "ctl", err[0] ? err : "leader election failed to start", NULL);
            goto out;
        }
    } else {
        c->leading = 1;
    }
    gq_log(ll, GQ_LOG_INFO, "ctl", "controller started",
           " server=%s leader_elect=%d identity=%s min_runtime_s=%lld levels=%d", c->kcfg.server,
           c->cfg.leader_elect, c->identity, (long long)c->cfg.min_runtime_s, c->scfg.nlevels);
    ev_run(c->loop, 0);
    rc = c->exit_code;
    gq_log(ll, GQ_LOG_INFO, "ctl", "controller stopped", " reconciles=%lld", (long long)c->reconciles);
out:
    ev_timer_stop(c->loop, &c->debounce);
    ev_timer_stop(c->loop, &c->resync);
    ev_timer_stop(c->loop, &c->stop_timer);
    ev_timer_stop(c->loop, &c->settle_timer);
    ev_signal_stop(c->loop, &c->sigterm);
    ev_signal_stop(c->loop, &c->sigint);
    gq_httpd_free(c->httpd);
    gq_metrics_free(c->metrics);
    kube_leader_free(c->leader);
    for (int i = 0; i < INF_COUNT; i++)
        kube_informer_free(c->inf[i]);
    kube_client_free(c->client);
    kube_config_release(&c->kcfg);
    ctl_core_release(c);
    free(c);
    kube_global_cleanup();
    return rc;
}

void ctl_core_release(struct gq_ctl *c)
{
    ctl_act_flush_done(&c->act); /* intents acted on before the stop */
    if (c->st && store_in_cycle(c->st))
        store_rollback_cycle(c->st);
    ctl_rows_release(c);
    ctl_snap_keep_release(&c->snap_keep);
    free(c->jobs_keep);
    free(c->ins_keep);
    free(c->ins_job_keep);
    free(c->waited_keep);
    ctl_team_keep_free(c->team_keep);
    store_close(c->st);
    sched_free(c->sched);
    ctl_memo_table_release(&c->memo);
    ctl_objset_release(&c->jobs_set);
    ctl_objset_release(&c->foreign_set);
    ctl_act_release(&c->act);
}

/* ------------------------------------------------------------ CLI */

int cmd_controller(int argc, char **argv)
{
    struct ctl_config cfg;
    char err[512];
    ctl_config_default(&cfg);
    /* pass 1: --config and --help; pass 2: flags over the file */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 1; i < argc; i++) {
            const char *a = argv[i];
            if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                ctl_config_usage(stdout);
                return 0;
            }
            if (strncmp(a, "--", 2)) {
                fprintf(stderr, "gangq controller: unexpected argument \"%s\"\n", a);
                ctl_config_usage(stderr);
                return 2;
            }
            char key[64];
            const char *val = NULL;
            const char *eq = strchr(a + 2, '=');
            size_t kl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (kl >= sizeof(key)) {
                fprintf(stderr, "gangq controller: unknown option %s\n", a);
                return 2;
            }
            memcpy(key, a + 2, kl);
            key[kl] = 0;
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            if (!strcmp(key, "config")) {
                if (!val) {
                    fprintf(stderr, "gangq controller: --config needs a file\n");
                    return 2;
                }
                if (pass == 0 && ctl_config_load_file(&cfg, val, err, sizeof(err))) {
                    fprintf(stderr, "gangq controller: %s\n", err);
                    return 2;
                }
                continue;
            }
            if (pass == 1 && ctl_config_set(&cfg, key, val, err, sizeof(err))) {
                fprintf(stderr, "gangq controller: %s\n", err);
                return 2;
            }
        }
        if (pass == 0 && cfg.levels_set)
            cfg.levels_set = 0; /* flags' --level replace the file's list */
    }
    if (!cfg.listen[0] && !cfg.kubeconfig[0])
        gq_strlcpy(cfg.listen, ":8080", sizeof(cfg.listen)); /* in a pod: deploy/ probes port 8080 */
    if (!cfg.db[0]) {
        fprintf(stderr, "gangq controller: --db is required\n");
        ctl_config_usage(stderr);
        return 2;
    }
    return ctl_run(&cfg);
}
