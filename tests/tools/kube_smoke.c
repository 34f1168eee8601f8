/*
 * kube_smoke — exercises controller/kube against a real kube-apiserver
 * (tests/k8s/kube_smoke.sh starts one with tests/k8s/env.sh):
 *   kube_smoke --kubeconfig PATH [--restart-cmd CMD]
 * list+watch Nodes, ConfigMaps (paginated) and GPUJobs (CRD); create, merge
 * patch, JSON patch, status patch, guarded PUT (409), delete with a uid
 * precondition; see the events arrive; create a core/v1 Event; two Lease
 * contenders (one wins; release hands over); optionally restart the API server
 * (CMD) and check the watches resume from their resourceVersion without a
 * relist. Prints `kube smoke: N passed, M failed`.
 */
#include <ev.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube.h"
#include "log.h"

struct smoke {
    struct ev_loop *loop;
    struct kube_client *c;
    int passed, failed;
    int loglevel;
};

static void check(struct smoke *s, int ok, const char *what)
{
    if (ok)
        s->passed++;
    else
        s->failed++;
    printf("  %s: %s\n", ok ? "ok" : "FAIL", what);
    fflush(stdout);
}

/* ---- run the loop until a condition or a deadline ---- */

struct wait {
    int (*cond)(void *);
    void *ud;
    int met;
};

static void wait_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct wait *wt = w->data;
    (void)revents;
    if (wt->cond(wt->ud)) {
        wt->met = 1;
        ev_break(loop, EVBREAK_ALL);
    }
}

static void wait_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static int run_until(struct smoke *s, int (*cond)(void *), void *ud, double deadline)
{
    struct wait wt = {cond, ud, 0};
    ev_timer p, d;
    if (cond(ud))
        return 1;
    ev_now_update(s->loop);
    ev_timer_init(&p, wait_poll, 0.02, 0.02);
    p.data = &wt;
    ev_timer_init(&d, wait_deadline, deadline, 0.);
    ev_timer_start(s->loop, &p);
    ev_timer_start(s->loop, &d);
    ev_run(s->loop, 0);
    ev_timer_stop(s->loop, &p);
    ev_timer_stop(s->loop, &d);
    return wt.met || cond(ud);
}

/* ---- synchronous wrapper over one request ---- */

struct res {
    int done, rc;
    long status;
    cJSON *json;
    char errmsg[512];
};

static void res_cb(const struct kube_response *r, void *ud)
{
    struct res *x = ud;
    x->done = 1;
    x->rc = r->rc;
    x->status = r->status;
    x->json = kube_response_json(r);
    gq_strlcpy(x->errmsg, r->errmsg, sizeof x->errmsg);
}

static int res_done(void *ud)
{
    return ((struct res *)ud)->done;
}

static void res_clear(struct res *x)
{
    cJSON_Delete(x->json);
    memset(x, 0, sizeof *x);
}

static int wait_res(struct smoke *s, struct res *x, int start_rc)
{
    if (start_rc) {
        x->rc = start_rc;
        return start_rc;
    }
    if (!run_until(s, res_done, x, 15)) {
        x->rc = GQ_ETIMEOUT;
        return GQ_ETIMEOUT;
    }
    if (x->rc && gq_log_on(s->loglevel, GQ_LOG_DEBUG))
        fprintf(stderr, "    (%s)\n", x->errmsg);
    return x->rc;
}

static const char *jstr(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- informer bookkeeping ---- */

struct seen {
    int added, modified, deleted;
    char last_key[256];
    char last_label[128]; /* metadata.labels.smoke of the last new object */
    int synced;
};

static void seen_event(enum kube_event_type t, const cJSON *o, const cJSON *n, void *ud)
{
    struct seen *s = ud;
    const cJSON *obj = n ? n : o;
    const cJSON *lab;
    if (t == KUBE_EV_ADDED)
        s->added++;
    else if (t == KUBE_EV_MODIFIED)
        s->modified++;
    else if (t == KUBE_EV_DELETED)
        s->deleted++;
    kube_object_key(obj, s->last_key, sizeof s->last_key);
    lab = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                         "labels"),
        "smoke");
    gq_strlcpy(s->last_label, cJSON_IsString(lab) ? lab->valuestring : "",
               sizeof s->last_label);
}

static void seen_synced(void *ud)
{
    ((struct seen *)ud)->synced++;
}

static struct kube_informer *informer(struct smoke *s, const char *path, struct seen *sn,
                                      int limit)
{
    struct kube_informer_opts o = {0};
    char err[256];
    struct kube_informer *inf;
    o.path = path;
    o.list_limit = limit;
    o.watch_timeout_min_s = 60;
    o.watch_timeout_max_s = 90;
    o.on_event = seen_event;
    o.on_synced = seen_synced;
    o.ud = sn;
    inf = kube_informer_new(s->c, &o, err, sizeof err);
    if (!inf) {
        fprintf(stderr, "kube_smoke: %s\n", err);
        return NULL;
    }
    kube_informer_start(inf);
    return inf;
}

struct cond_int {
    const int *v;
    int want;
};
static int cond_ge(void *ud)
{
    struct cond_int *c = ud;
    return *c->v >= c->want;
}
static int wait_ge(struct smoke *s, const int *v, int want, double deadline)
{
    struct cond_int c = {v, want};
    return run_until(s, cond_ge, &c, deadline);
}

/* ---- leader ---- */

struct lstate {
    int leading;
    int starts, stops;
};
static void l_start(void *ud)
{
    struct lstate *l = ud;
    l->leading = 1;
    l->starts++;
}
static void l_stop(void *ud)
{
    struct lstate *l = ud;
    l->leading = 0;
    l->stops++;
}

struct two {
    struct lstate *a, *b;
};
static int one_leads(void *ud)
{
    struct two *t = ud;
    return t->a->leading + t->b->leading == 1;
}

struct bench {
    int sent, ok, errors;
};
static void bench_cb(const struct kube_response *r, void *ud)
{
    struct bench *b = ud;
    if (r->rc == 0)
        b->ok++;
    else
        b->errors++;
}
static int bench_all_acked(void *ud)
{
    struct bench *b = ud;
    return b->ok + b->errors >= b->sent;
}

static int sleep_cond(void *ud)
{
    (void)ud;
    return 0;
}

int main(int argc, char **argv)
{
    struct smoke s = {0};
    struct kube_config cfg;
    struct kube_client_opts co = {0};
    const char *kc = getenv("KUBECONFIG"), *restart_cmd = NULL, *cert_kc = NULL;
    int bench_n = 0;
    char err[512];
    const char *ns = "kube-smoke";
    struct res r = {0};
    struct seen nodes = {0}, cms = {0}, jobs = {0};
    struct kube_informer *inf_nodes = NULL, *inf_cms = NULL, *inf_jobs = NULL;
    char node_uid[128] = "";
    s.loglevel = GQ_LOG_WARN;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kubeconfig") == 0 && i + 1 < argc)
            kc = argv[++i];
        else if (strcmp(argv[i], "--cert-kubeconfig") == 0 && i + 1 < argc)
            cert_kc = argv[++i];
        else if (strcmp(argv[i], "--restart-cmd") == 0 && i + 1 < argc)
            restart_cmd = argv[++i];
        else if (strcmp(argv[i], "--bench") == 0 && i + 1 < argc)
            bench_n = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-v") == 0)
            s.loglevel = GQ_LOG_DEBUG;
        else {
            fprintf(stderr, "usage: kube_smoke [--kubeconfig PATH] [--cert-kubeconfig PATH] "
                            "[--restart-cmd CMD] [--bench N] [-v]\n");
            return 2;
        }
    }
    if (!kc) {
        fprintf(stderr, "kube_smoke: no kubeconfig (--kubeconfig or KUBECONFIG)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    kube_global_init();
    if (kube_config_load_kubeconfig(&cfg, kc, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "kube_smoke: %s\n", err);
        return 1;
    }
    check(&s, cfg.server && (cfg.ca_file || cfg.ca_data) && cfg.token, "kubeconfig loaded");
    s.loop = ev_loop_new(EVFLAG_AUTO);
    co.log_level = s.loglevel;
    s.c = kube_client_new(s.loop, &cfg, &co, err, sizeof err);
    kube_config_release(&cfg);
    if (!s.c) {
        fprintf(stderr, "kube_smoke: %s\n", err);
        return 1;
    }

    /* 1. TLS + token */
    wait_res(&s, &r, kube_get(s.c, "/version", res_cb, &r));
    check(&s, r.rc == 0 && strncmp(jstr(r.json, "gitVersion", NULL), "v1.", 3) == 0,
          "GET /version over TLS verified with the cluster CA and the bearer token");
    res_clear(&r);

    /* 1b. client certificate + key given inline (kubeconfig *-data) */
    if (cert_kc) {
        struct kube_config cc;
        struct kube_client *c2 = NULL;
        int ok = kube_config_load_kubeconfig(&cc, cert_kc, NULL, err, sizeof err) == 0;
        check(&s, ok && cc.cert_data && cc.key_data && cc.ca_data && !cc.token,
              "client-certificate kubeconfig loaded (inline data, no token)");
        if (ok) {
            c2 = kube_client_new(s.loop, &cc, &co, err, sizeof err);
            kube_config_release(&cc);
        }
        if (c2) {
            wait_res(&s, &r, kube_get(c2, "/api/v1/namespaces/default", res_cb, &r));
            check(&s, r.rc == 0 && strcmp(jstr(cJSON_GetObjectItem(r.json, "metadata"), "name",
                                               NULL),
                                          "default") == 0,
                  "GET with the client certificate (CURLOPT_SSLCERT_BLOB/SSLKEY_BLOB)");
            res_clear(&r);
            kube_client_free(c2);
        } else {
            check(&s, 0, "client for the certificate kubeconfig");
        }
    }

    /* namespace */
    {
        cJSON *o = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"kube-smoke\"}}");
        wait_res(&s, &r, kube_create(s.c, "/api/v1/namespaces", o, res_cb, &r));
        check(&s, r.rc == 0 || r.rc == GQ_ECONFLICT, "create namespace kube-smoke");
        cJSON_Delete(o);
        res_clear(&r);
    }

    /* 2. informers */
    for (int i = 0; i < 23; i++) {
        char body[256];
        cJSON *o;
        snprintf(body, sizeof body,
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-%d\"},"
                 "\"data\":{\"i\":\"%d\"}}",
                 i, i);
        o = cJSON_Parse(body);
        wait_res(&s, &r, kube_create(s.c, "/api/v1/namespaces/kube-smoke/configmaps", o, res_cb, &r));
        cJSON_Delete(o);
        if (r.rc && r.rc != GQ_ECONFLICT)
            break;
        res_clear(&r);
    }
    check(&s, r.rc == 0 || r.rc == GQ_ECONFLICT, "created 23 configmaps");
    res_clear(&r);
    inf_nodes = informer(&s, "/api/v1/nodes", &nodes, 0);
    inf_cms = informer(&s, "/api/v1/namespaces/kube-smoke/configmaps", &cms, 5);
    inf_jobs = informer(&s, "/apis/gangq.io/v1alpha1/gpujobs", &jobs, 0);
    if (!inf_nodes || !inf_cms || !inf_jobs)
        return 1;
    wait_ge(&s, &nodes.synced, 1, 15);
    wait_ge(&s, &cms.synced, 1, 15);
    wait_ge(&s, &jobs.synced, 1, 15);
    check(&s, kube_informer_synced(inf_nodes) && kube_informer_synced(inf_jobs),
          "node and GPUJob informers synced");
    {
        struct kube_informer_stats st;
        kube_informer_get_stats(inf_cms, &st);
        check(&s, kube_informer_synced(inf_cms) && cms.added == 23 &&
                      kube_cache_count(kube_informer_cache(inf_cms)) == 23 && st.list_pages >= 5,
              "configmap list paginated with limit=5 (23 objects, >=5 pages)");
    }

    /* 3. create a node: ADDED arrives by watch */
    {
        cJSON *o = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"smoke-n1\",\"labels\":{\"smoke\":\"a\"}}}");
        int before = nodes.added;
        wait_res(&s, &r, kube_create(s.c, "/api/v1/nodes", o, res_cb, &r));
        check(&s, r.rc == 0, "POST node smoke-n1");
        gq_strlcpy(node_uid, jstr(cJSON_GetObjectItem(r.json, "metadata"), "uid", NULL),
                   sizeof node_uid);
        res_clear(&r);
        check(&s, wait_ge(&s, &nodes.added, before + 1, 10) &&
                      kube_informer_get(inf_nodes, NULL, "smoke-n1") != NULL,
              "watch delivered ADDED smoke-n1 into the cache");
        /* create again: 409 AlreadyExists -> GQ_ECONFLICT */
        wait_res(&s, &r, kube_create(s.c, "/api/v1/nodes", o, res_cb, &r));
        check(&s, r.rc == GQ_ECONFLICT && r.status == 409, "second POST: 409 -> GQ_ECONFLICT");
        res_clear(&r);
        cJSON_Delete(o);
    }

    /* 4. merge patch, JSON patch, status patch -> MODIFIED */
    {
        cJSON *p = cJSON_Parse("{\"metadata\":{\"labels\":{\"smoke\":\"b\"}}}");
        int before = nodes.modified;
        wait_res(&s, &r, kube_patch_merge(s.c, "/api/v1/nodes/smoke-n1", p, res_cb, &r));
        check(&s, r.rc == 0, "merge patch node label");
        res_clear(&r);
        cJSON_Delete(p);
        check(&s, wait_ge(&s, &nodes.modified, before + 1, 10) &&
                      strcmp(nodes.last_label, "b") == 0,
              "watch delivered MODIFIED with the new label");
        p = cJSON_Parse("[{\"op\":\"replace\",\"path\":\"/metadata/labels/smoke\",\"value\":\"c\"}]");
        before = nodes.modified;
        wait_res(&s, &r, kube_patch_json(s.c, "/api/v1/nodes/smoke-n1", p, res_cb, &r));
        check(&s, r.rc == 0, "JSON patch node label");
        res_clear(&r);
        cJSON_Delete(p);
        check(&s, wait_ge(&s, &nodes.modified, before + 1, 10) &&
                      strcmp(nodes.last_label, "c") == 0,
              "watch delivered MODIFIED after JSON patch");
        p = cJSON_Parse("{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\",\"cpu\":\"64\"},"
                        "\"allocatable\":{\"nvidia.com/gpu\":\"8\",\"cpu\":\"64\"}}}");
        before = nodes.modified;
        wait_res(&s, &r, kube_patch_status(s.c, "/api/v1/nodes/smoke-n1", p, res_cb, &r));
        check(&s, r.rc == 0, "status patch (nodes/smoke-n1/status)");
        res_clear(&r);
        cJSON_Delete(p);
        wait_ge(&s, &nodes.modified, before + 1, 10);
        {
            const cJSON *n = kube_informer_get(inf_nodes, NULL, "smoke-n1");
            const cJSON *gpu = cJSON_GetObjectItem(
                cJSON_GetObjectItem(cJSON_GetObjectItem(n, "status"), "capacity"),
                "nvidia.com/gpu");
            check(&s, cJSON_IsString(gpu) && strcmp(gpu->valuestring, "8") == 0,
                  "cache shows the patched status capacity");
        }
    }

    /* 5. guarded PUT with a stale resourceVersion -> 409 */
    {
        cJSON *o = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"smoke-n1\",\"resourceVersion\":\"1\"}}");
        wait_res(&s, &r, kube_replace(s.c, "/api/v1/nodes/smoke-n1", o, res_cb, &r));
        check(&s, r.rc == GQ_ECONFLICT, "PUT with a stale resourceVersion: GQ_ECONFLICT");
        res_clear(&r);
        cJSON_Delete(o);
    }

    /* 6. GPUJob (CRD) create -> informer; status patch; Event */
    {
        cJSON *o = cJSON_Parse(
            "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"metadata\":{\"name\":"
            "\"smoke-job\",\"namespace\":\"kube-smoke\"},\"spec\":{\"class\":\"Batch\","
            "\"replicas\":1,\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
            "\"busybox\"}]}}}}");
        int before = jobs.added;
        char uid[128], rv[64];
        wait_res(&s, &r, kube_create(s.c, "/apis/gangq.io/v1alpha1/namespaces/kube-smoke/gpujobs", o,
                                     res_cb, &r));
        check(&s, r.rc == 0, "create GPUJob kube-smoke/smoke-job");
        gq_strlcpy(uid, jstr(cJSON_GetObjectItem(r.json, "metadata"), "uid", NULL), sizeof uid);
        gq_strlcpy(rv, jstr(cJSON_GetObjectItem(r.json, "metadata"), "resourceVersion", NULL),
                   sizeof rv);
        res_clear(&r);
        cJSON_Delete(o);
        check(&s, wait_ge(&s, &jobs.added, before + 1, 10) &&
                      kube_informer_get(inf_jobs, "kube-smoke", "smoke-job"),
              "GPUJob ADDED via watch");
        o = cJSON_Parse("{\"status\":{\"state\":\"Queued\",\"message\":\"waiting\"}}");
        before = jobs.modified;
        wait_res(&s, &r, kube_patch_status(
                             s.c, "/apis/gangq.io/v1alpha1/namespaces/kube-smoke/gpujobs/smoke-job",
                             o, res_cb, &r));
        check(&s, r.rc == 0 && strcmp(jstr(cJSON_GetObjectItem(r.json, "status"), "state", NULL),
                                      "Queued") == 0,
              "GPUJob status subresource merge patch");
        res_clear(&r);
        cJSON_Delete(o);
        check(&s, wait_ge(&s, &jobs.modified, before + 1, 10), "GPUJob MODIFIED via watch");
        {
            struct kube_objref ref = {"gangq.io/v1alpha1", "GPUJob", "kube-smoke", "smoke-job",
                                      uid, rv};
            wait_res(&s, &r, kube_event_create(s.c, &ref, "Normal", "Queued",
                                               "queued at position 1", "smoke", res_cb, &r));
            check(&s, r.rc == 0 && r.status == 201, "core/v1 Event created for the GPUJob");
            res_clear(&r);
            wait_res(&s, &r,
                     kube_get(s.c,
                              "/api/v1/namespaces/kube-smoke/events?fieldSelector="
                              "involvedObject.name%3Dsmoke-job",
                              res_cb, &r));
            {
                const cJSON *items = cJSON_GetObjectItem(r.json, "items"), *it;
                int found = 0;
                cJSON_ArrayForEach(it, items) if (strcmp(jstr(it, "reason", NULL), "Queued") == 0 &&
                                                  strcmp(jstr(it, "reportingComponent", NULL),
                                                         "gangq.io/controller") == 0) found = 1;
                check(&s, r.rc == 0 && found, "the Event is listed for the involved object");
            }
            res_clear(&r);
        }
    }

    /* 7. API server restart under the watches: resume from RV, no relist */
    if (restart_cmd) {
        struct kube_informer_stats a0, a1;
        int before = nodes.added, rc;
        kube_informer_get_stats(inf_nodes, &a0);
        rc = system(restart_cmd);
        check(&s, rc == 0, "API server restarted (restart command)");
        {
            cJSON *o = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"smoke-n2\"}}");
            for (int i = 0; i < 20; i++) { /* the server may need a moment */
                res_clear(&r);
                wait_res(&s, &r, kube_create(s.c, "/api/v1/nodes", o, res_cb, &r));
                if (r.rc == 0 || r.rc == GQ_ECONFLICT)
                    break;
                run_until(&s, sleep_cond, NULL, 0.5);
            }
            check(&s, r.rc == 0, "POST node smoke-n2 after the restart");
            res_clear(&r);
            cJSON_Delete(o);
        }
        check(&s, wait_ge(&s, &nodes.added, before + 1, 40) &&
                      kube_informer_get(inf_nodes, NULL, "smoke-n2"),
              "node watch resumed after the restart and saw smoke-n2");
        kube_informer_get_stats(inf_nodes, &a1);
        printf("    nodes informer: lists %llu->%llu relists(410) %llu->%llu watches %llu->%llu "
               "errors %llu->%llu\n",
               (unsigned long long)a0.lists, (unsigned long long)a1.lists,
               (unsigned long long)a0.relists_410, (unsigned long long)a1.relists_410,
               (unsigned long long)a0.watches, (unsigned long long)a1.watches,
               (unsigned long long)a0.errors, (unsigned long long)a1.errors);
        /* The watch resumes from its resourceVersion; a fresh API server may answer
         * 410 for a version older than its new watch cache, and only then we relist. */
        check(&s, a1.watches > a0.watches && a1.lists - a0.lists == a1.relists_410 - a0.relists_410 &&
                      a1.lists - a0.lists <= 1,
              "watch resumed from the resourceVersion (relisted at most once, only on 410)");
        {
            int cm_added = cms.added, cm_deleted = cms.deleted;
            struct kube_informer_stats a2;
            run_until(&s, sleep_cond, NULL, 3);
            kube_informer_get_stats(inf_nodes, &a2);
            check(&s, a2.lists == a1.lists, "no relist loop in the 3 s after catching up");
            check(&s, cms.added == cm_added && cms.deleted == cm_deleted &&
                          kube_cache_count(kube_informer_cache(inf_cms)) == 23,
                  "configmap cache unchanged by the restart (no spurious events)");
        }
    }

    /* 8. delete with a uid precondition */
    {
        int before = nodes.deleted;
        wait_res(&s, &r, kube_delete(s.c, "/api/v1/nodes/smoke-n1", 0, "00000000-wrong", res_cb, &r));
        check(&s, r.rc == GQ_ECONFLICT, "delete with a wrong preconditions.uid: 409");
        res_clear(&r);
        wait_res(&s, &r, kube_delete(s.c, "/api/v1/nodes/smoke-n1", 0, node_uid, res_cb, &r));
        check(&s, r.rc == 0, "delete with the right uid and gracePeriodSeconds=0");
        res_clear(&r);
        check(&s, wait_ge(&s, &nodes.deleted, before + 1, 10) &&
                      !kube_informer_get(inf_nodes, NULL, "smoke-n1"),
              "watch delivered DELETED; gone from the cache");
        wait_res(&s, &r, kube_get(s.c, "/api/v1/nodes/smoke-n1", res_cb, &r));
        check(&s, r.rc == GQ_ENOTFOUND, "GET deleted node: GQ_ENOTFOUND");
        res_clear(&r);
    }

    /* 9. Lease: two contenders, exactly one leads; release hands over */
    {
        struct lstate la = {0}, lb = {0};
        struct kube_leader_opts o = {0};
        struct kube_leader *a, *b;
        struct two t = {&la, &lb};
        o.namespace_ = ns;
        o.name = "gangq-smoke";
        o.lease_duration_s = 4;
        o.renew_deadline_s = 3;
        o.retry_period_s = 0.5;
        o.release_on_stop = 1;
        o.on_started = l_start;
        o.on_stopped = l_stop;
        o.identity = "contender-a";
        o.ud = &la;
        a = kube_leader_new(s.c, &o, err, sizeof err);
        o.identity = "contender-b";
        o.ud = &lb;
        b = kube_leader_new(s.c, &o, err, sizeof err);
        check(&s, a && b, "two leader electors");
        if (a && b) {
            struct lstate *winner, *loser;
            struct kube_leader *wl;
            kube_leader_start(a);
            kube_leader_start(b);
            check(&s, run_until(&s, one_leads, &t, 10), "one contender leads");
            run_until(&s, sleep_cond, NULL, 3); /* several retry periods */
            check(&s, la.leading + lb.leading == 1 && la.starts + lb.starts == 1,
                  "still exactly one leader after 3 s of contention");
            winner = la.leading ? &la : &lb;
            loser = la.leading ? &lb : &la;
            wl = la.leading ? a : b;
            check(&s, strcmp(kube_leader_holder(la.leading ? b : a),
                             kube_leader_identity(wl)) == 0,
                  "the other contender observes the holder");
            kube_leader_stop(wl); /* releases the lease */
            check(&s, winner->stops == 1 && !winner->leading, "stopped leading on stop");
            check(&s, wait_ge(&s, &loser->starts, 1, 8), "the other contender took over after release");
        }
        kube_leader_free(a); /* the current leader releases the lease */
        kube_leader_free(b);
        a = b = NULL;
        run_until(&s, sleep_cond, NULL, 1); /* let the release PUT land */
        /* A leader that vanishes without releasing (a crash): the next contender
         * must wait until the lease expires on its own clock, then take over. */
        {
            struct lstate ld = {0}, lc = {0};
            struct kube_leader *d, *cl;
            double t0, took;
            o.release_on_stop = 0;
            o.identity = "contender-d";
            o.ud = &ld;
            d = kube_leader_new(s.c, &o, err, sizeof err);
            o.identity = "contender-c";
            o.ud = &lc;
            cl = kube_leader_new(s.c, &o, err, sizeof err);
            if (d && cl) {
                kube_leader_start(d);
                check(&s, wait_ge(&s, &ld.starts, 1, 2), "a released lease is acquired at once");
                kube_leader_free(d); /* stops renewing, keeps holding the lease */
                ev_now_update(s.loop);
                t0 = ev_now(s.loop);
                kube_leader_start(cl);
                wait_ge(&s, &lc.starts, 1, 12);
                ev_now_update(s.loop);
                took = ev_now(s.loop) - t0;
                printf("    takeover of an unreleased lease after %.1f s (leaseDurationSeconds 4)\n",
                       took);
                check(&s, lc.starts == 1 && took >= 3.5 && took < 8,
                      "a crashed leader's lease is taken over only after it expires");
                check(&s, strcmp(kube_leader_holder(cl), "contender-c") == 0,
                      "holder is the new leader");
            } else {
                check(&s, 0, "leader electors c and d");
                kube_leader_free(d);
            }
            kube_leader_free(cl);
        }
    }

    /* 10. throughput: N creates through the capped queue, and their watch events */
    if (bench_n > 0) {
        struct bench b = {0};
        struct seen bs = {0};
        struct kube_informer *bi = informer(&s, "/api/v1/namespaces/kube-smoke/secrets", &bs, 0);
        struct rusage ru0, ru1;
        double t0, t_acked, t_seen, cpu;
        wait_ge(&s, &bs.synced, 1, 15);
        getrusage(RUSAGE_SELF, &ru0);
        ev_now_update(s.loop);
        t0 = ev_now(s.loop);
        for (int i = 0; i < bench_n; i++) {
            char body[200];
            cJSON *o;
            snprintf(body, sizeof body,
                     "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"b-%d\"},"
                     "\"stringData\":{\"k\":\"v\"}}",
                     i);
            o = cJSON_Parse(body);
            if (kube_create(s.c, "/api/v1/namespaces/kube-smoke/secrets", o, bench_cb, &b) == 0)
                b.sent++;
            cJSON_Delete(o);
        }
        run_until(&s, bench_all_acked, &b, 120);
        ev_now_update(s.loop);
        t_acked = ev_now(s.loop) - t0;
        wait_ge(&s, &bs.added, bench_n, 60);
        ev_now_update(s.loop);
        t_seen = ev_now(s.loop) - t0;
        getrusage(RUSAGE_SELF, &ru1);
        cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
              (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
              (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
              (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
        printf("    bench: %d creates acknowledged in %.2f s (%.0f/s), all %d watch events in "
               "%.2f s; client CPU %.3f s (%.0f us per create+event); errors %d\n",
               bench_n, t_acked, bench_n / t_acked, bs.added, t_seen, cpu,
               cpu * 1e6 / bench_n, b.errors);
        check(&s, b.ok == bench_n && bs.added == bench_n, "bench: every create acknowledged and seen");
        kube_informer_free(bi);
    }

    /* cleanup */
    {
        wait_res(&s, &r, kube_delete(s.c, "/api/v1/nodes/smoke-n2", 0, NULL, res_cb, &r));
        res_clear(&r);
        wait_res(&s, &r, kube_delete(s.c, "/api/v1/namespaces/kube-smoke", -1, NULL, res_cb, &r));
        res_clear(&r);
    }
    kube_informer_free(inf_nodes);
    kube_informer_free(inf_cms);
    kube_informer_free(inf_jobs);
    kube_client_free(s.c);
    ev_loop_destroy(s.loop);
    kube_global_cleanup();
    printf("kube smoke: %d passed, %d failed\n", s.passed, s.failed);
    return s.failed ? 1 : 0;
}
