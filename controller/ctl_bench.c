/*
 * ctl_bench.c — `gangq bench reconcile`: what the controller's reconcile
 * costs, without an API server.
 *
 * The controller's own reconcile (ctl_reconcile, its real SQLite store in a
 * temporary file, its actuator, memo table and event index) runs on caches
 * this benchmark fills, in place of the informers': nodes, Teams and
 * GPUJobs made up here, and the pods the actuator creates. The actuator's
 * requests (struct ctl_act_kube) are answered here, after the reconcile
 * that sent them, as the API server and a kubelet would: a pod created is
 * cached bound and Running (an ADDED event), a status patch is merged into
 * the cached GPUJob (a MODIFIED event, as the watch echoes it), a delete
 * removes the pod (or the GPUJob). Every cache change goes through ctl_object_event, the
 * informers' own callback, so the reconcile sees what it sees in a cluster.
 *
 * Stages (each prints one line: reconciles, the reconcile's CPU, jobs
 * examined in full, and what the stage measures):
 *   admit   --jobs jobs arrive at once, the cluster holds --fit of them: the
 *           reconciles until no job changes, and the reconcile CPU per
 *           admission;
 *   idle    --idle reconciles with nothing changed: quiet ones (skipped:
 *           no input, nothing due; ctl_cycle.c rc_quiet) but for those time
 *           makes due;
 *   woken   --idle reconciles each asked for with nothing changed (as a due
 *           time or an actuator outcome that changes nothing asks): the
 *           floor of a reconcile that runs, with the queue as it stands;
 *   one     one waiting job's spec touched (a label), then a reconcile, --idle
 *           times: the cost of one event against the whole queue;
 *   full    a full pass each (as a Team, GPUPool, class or node change, or
 *           --full-resync-interval, asks), nothing changed, at most 5 times;
 *   settle  with --round-ms only: reconciles that far apart, for at least
 *           a minute and until one sends nothing (the statuses the stages
 *           before held back go out);
 *   churn   --rounds rounds: the pods of --finish admitted jobs succeed,
 *           then a reconcile, with the answers to its requests: the
 *           steady state of a busy queue, CPU and writes per admission
 *           (with --round-ms, the controller's clock moves that far each
 *           round and its status-write holds keep their defaults; without,
 *           statuses go out as soon as decided);
 *   after   --after reconciles (default --idle) with nothing changed, the
 *           finished jobs settled (dormant): what finished work still costs.
 * --ctl NAME=VALUE sets a controller option (`gangq controller --NAME
 * VALUE`), to measure what it changes.
 * Each stage also prints the writes sent and the mean wall time of each reconcile phase. The
 * request answers and the cache updates are not counted in the reconcile's
 * CPU (they stand for the API server and the watch); they are printed
 * apart. The nodes hold about --fit of the jobs' GPUs. Not a timed test:
 * `make bench` prints it.
 *
 * The harness (struct ctl_fake, ctl_int.h) is also what
 * tests/unit/test_ctl_reconcile.c runs the reconcile with.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cmd.h"
#include "ctl_int.h"

/* ------------------------------------------------------------ the fake API */

enum fk_kind { FK_PLAIN, FK_POD_ADD, FK_POD_DELETE, FK_JOB_STATUS, FK_JOB_DELETE };

struct fk_req {
    enum fk_kind kind;
    kube_response_cb cb;
    void *ud;
    int rc;
    long status;
    cJSON *obj;     /* FK_POD_ADD: the pod to cache (owned) */
    const char *text; /* FK_JOB_STATUS: the patch as sent (a gq_sstr reference, owned) */
    char key[CTL_KEY_MAX]; /* FK_POD_DELETE, FK_JOB_STATUS, FK_JOB_DELETE: "ns/name" */
};

struct ctl_fake {
    struct gq_ctl *c;
    struct kube_cache *cache[INF_COUNT];
    struct fk_req *q;
    size_t n, cap;
    uint64_t seq; /* uids and resourceVersions */
    struct ctl_fake_counts counts;
    long job_delete_status; /* ctl_fake_job_delete_status (0: 200) */
};

struct fk_evud {
    struct gq_ctl *c;
    int idx;
};

static void fk_event_cb(enum kube_event_type type, const cJSON *old_obj, const cJSON *new_obj, void *ud)
{
    struct fk_evud *e = ud;
    ctl_object_event(e->c, e->idx, type, old_obj, new_obj);
}

/* Put obj (owned) in cache idx as the informer would, with the event. */
static int fk_apply(struct ctl_fake *f, int idx, enum kube_event_type type, cJSON *obj)
{
    struct fk_evud e = {f->c, idx};
    return kube_cache_apply(f->cache[idx], type, obj, fk_event_cb, &e);
}

static int fk_push(struct ctl_fake *f, enum fk_kind kind, kube_response_cb cb, void *ud, long status, cJSON *obj,
                   const char *key)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 256;
        struct fk_req *nq = realloc(f->q, cap * sizeof(*nq));
        if (!nq) {
            cJSON_Delete(obj);
            return GQ_ENOMEM;
        }
        f->q = nq;
        f->cap = cap;
    }
    struct fk_req *r = &f->q[f->n++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->cb = cb;
    r->ud = ud;
    r->status = status;
    r->rc = status == 404 ? GQ_ENOTFOUND : status >= 400 ? GQ_EHTTP : GQ_OK;
    r->obj = obj;
    if (key)
        gq_strlcpy(r->key, key, sizeof(r->key));
    return 0;
}

/* "ns/name" of path ".../namespaces/NS/<resource>/NAME[/status]". */
static int fk_path_key(const char *path, const char *resource, char *out, size_t len)
{
    const char *ns = strstr(path, "/namespaces/");
    if (!ns)
        return GQ_EINVAL;
    ns += strlen("/namespaces/");
    const char *slash = strchr(ns, '/');
    size_t rl = strlen(resource);
    if (!slash || strncmp(slash + 1, resource, rl) || slash[1 + rl] != '/')
        return GQ_EINVAL;
    const char *name = slash + 2 + rl;
    size_t nl = strcspn(name, "/");
    if ((size_t)(slash - ns) + 1 + nl + 1 > len)
        return GQ_EINVAL;
    snprintf(out, len, "%.*s/%.*s", (int)(slash - ns), ns, (int)nl, name);
    return 0;
}

static int fk_create(void *k, enum kube_prio prio, const char *coll, const cJSON *obj, kube_response_cb cb,
                     void *ud)
{
    struct ctl_fake *f = k;
    (void)prio;
    f->counts.creates++;
    size_t cl = strlen(coll);
    if (cl < 5 || strcmp(coll + cl - 5, "/pods"))
        return fk_push(f, FK_PLAIN, cb, ud, 201, NULL, NULL);
    /* the pod as the API server stores it and a kubelet starts it */
    cJSON *pod = cJSON_Duplicate(obj, 1);
    cJSON *meta = pod ? ctl_obj_child(pod, "metadata") : NULL;
    cJSON *st = pod ? ctl_obj_child(pod, "status") : NULL;
    char uid[64], rv[32];
    snprintf(uid, sizeof(uid), "bench-pod-%llu", (unsigned long long)++f->seq);
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)++f->seq);
    if (!meta || !st || ctl_obj_set_str(meta, "uid", uid) || ctl_obj_set_str(meta, "resourceVersion", rv) ||
        ctl_obj_set_str(st, "phase", "Running")) {
        cJSON_Delete(pod);
        return GQ_ENOMEM;
    }
    return fk_push(f, FK_POD_ADD, cb, ud, 201, pod, NULL);
}

static int fk_delete_rv(void *k, enum kube_prio prio, const char *path, long grace_s, const char *uid,
                        const char *rv, kube_response_cb cb, void *ud)
{
    struct ctl_fake *f = k;
    char key[CTL_KEY_MAX];
    (void)prio, (void)grace_s, (void)uid, (void)rv;
    f->counts.deletes++;
    if (!fk_path_key(path, "gpujobs", key, sizeof(key))) {
        f->counts.job_deletes++;
        if (f->job_delete_status && f->job_delete_status != 200)
            return fk_push(f, FK_PLAIN, cb, ud, f->job_delete_status, NULL, NULL); /* refused */
        return fk_push(f, FK_JOB_DELETE, cb, ud, 200, NULL, key); /* a finished job's TTL */
    }
    if (fk_path_key(path, "pods", key, sizeof(key)))
        return fk_push(f, FK_PLAIN, cb, ud, 200, NULL, NULL);
    return fk_push(f, FK_POD_DELETE, cb, ud, 200, NULL, key);
}

static int fk_get(void *k, const char *path, kube_response_cb cb, void *ud)
{
    struct ctl_fake *f = k;
    (void)path;
    f->counts.gets++;
    return fk_push(f, FK_PLAIN, cb, ud, 404, NULL, NULL); /* a pod asked about is gone */
}

static int fk_patch_status(void *k, enum kube_prio prio, const char *path, const char *json,
                           kube_response_cb cb, void *ud)
{
    struct ctl_fake *f = k;
    char key[CTL_KEY_MAX];
    (void)prio;
    f->counts.patches++;
    if (fk_path_key(path, "gpujobs", key, sizeof(key)))
        return fk_push(f, FK_PLAIN, cb, ud, 200, NULL, NULL); /* Teams' status: not echoed */
    int rc = fk_push(f, FK_JOB_STATUS, cb, ud, 200, NULL, key);
    if (!rc)
        f->q[f->n - 1].text = gq_sstr_ref(json); /* parsed when answered, as the API server would */
    return rc;
}

static int fk_event(void *k, enum kube_prio prio, const struct kube_objref *ref, const char *type,
                    const char *reason, const char *msg, const char *instance, kube_response_cb cb, void *ud)
{
    struct ctl_fake *f = k;
    (void)prio, (void)ref, (void)type, (void)reason, (void)msg, (void)instance;
    f->counts.events++;
    return fk_push(f, FK_PLAIN, cb, ud, 201, NULL, NULL);
}

static size_t fk_drop_queued(void *k, enum kube_prio prio)
{
    (void)k, (void)prio;
    return 0;
}

static const struct ctl_act_kube fk_kube = {fk_create, fk_delete_rv, fk_get, fk_patch_status,
                                            fk_event, fk_drop_queued, NULL, NULL};

/* A status patch merged into the cached GPUJob (the members of status it
 * names replaced), a new resourceVersion: the watch's MODIFIED. */
static int fk_job_status(struct ctl_fake *f, const char *key, const cJSON *patch)
{
    const cJSON *cur = kube_cache_get_key(f->cache[INF_JOBS], key);
    const cJSON *pst = cJSON_GetObjectItemCaseSensitive(patch, "status");
    if (!cur || !cJSON_IsObject(pst))
        return 0;
    cJSON *obj = cJSON_Duplicate(cur, 1);
    cJSON *st = obj ? ctl_obj_child(obj, "status") : NULL;
    cJSON *meta = obj ? ctl_obj_child(obj, "metadata") : NULL;
    char rv[32];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)++f->seq);
    if (!st || !meta || ctl_obj_set_str(meta, "resourceVersion", rv)) {
        cJSON_Delete(obj);
        return GQ_ENOMEM;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, pst)
    {
        cJSON_DeleteItemFromObjectCaseSensitive(st, e->string);
        if (!cJSON_IsNull(e)) {
            cJSON *d = cJSON_Duplicate(e, 1);
            if (!d || !cJSON_AddItemToObject(st, e->string, d)) {
                cJSON_Delete(d);
                cJSON_Delete(obj);
                return GQ_ENOMEM;
            }
        }
    }
    return fk_apply(f, INF_JOBS, KUBE_EV_MODIFIED, obj);
}

/* Answer every request sent so far (and those their answers send), then
 * make the cache follow, as the API server and the watch would. */
static int fk_deliver(struct ctl_fake *f)
{
    int rc = 0;
    size_t i;
    for (i = 0; i < f->n && !rc; i++) {
        struct fk_req r = f->q[i];
        f->q[i].obj = NULL;
        f->q[i].text = NULL;
        if (r.cb) {
            struct kube_response resp = {r.rc, r.status, "", 0, -1, r.rc ? "not found" : "", 0};
            r.cb(&resp, r.ud);
        }
        if (r.kind == FK_POD_ADD) {
            rc = fk_apply(f, INF_PODS, KUBE_EV_ADDED, r.obj);
            r.obj = NULL;
        } else if (r.kind == FK_POD_DELETE || r.kind == FK_JOB_DELETE) {
            int idx = r.kind == FK_POD_DELETE ? INF_PODS : INF_JOBS;
            const cJSON *cur = kube_cache_get_key(f->cache[idx], r.key);
            cJSON *gone = cur ? cJSON_Duplicate(cur, 1) : NULL;
            if (gone)
                rc = fk_apply(f, idx, KUBE_EV_DELETED, gone);
        } else if (r.kind == FK_JOB_STATUS) {
            cJSON *patch = cJSON_Parse(r.text);
            rc = patch ? fk_job_status(f, r.key, patch) : GQ_ENOMEM;
            cJSON_Delete(patch);
            gq_sstr_put(r.text);
        }
        cJSON_Delete(r.obj);
    }
    for (; i < f->n; i++) { /* not answered: an error stopped the benchmark */
        cJSON_Delete(f->q[i].obj);
        gq_sstr_put(f->q[i].text);
    }
    f->n = 0;
    return rc;
}

static void fk_wake(struct gq_ctl *c)
{
    (void)c; /* the benchmark reconciles when it wants */
}

/* ------------------------------------------------------------ the harness */

struct ctl_fake *ctl_fake_new(const char *db, char *err, size_t errlen)
{
    struct ctl_fake *f = calloc(1, sizeof(*f));
    struct gq_ctl *c = f ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        free(f);
        gq_errf(err, errlen, "out of memory");
        return NULL;
    }
    f->c = c;
    ctl_config_default(&c->cfg);
    c->cfg.log_level = GQ_LOG_WARN;
    gq_strlcpy(c->cfg.db, db, sizeof(c->cfg.db));
    ctl_scfg_init(c);
    gq_strlcpy(c->identity, "gangq-fake", sizeof(c->identity));
    c->leading = 1;
    if (errlen)
        err[0] = 0;
    if (store_open(c->cfg.db, NULL, &c->st, err, errlen)) {
        if (errlen && !err[0])
            gq_errf(err, errlen, "cannot open the store %s", db);
        ctl_fake_free(f);
        return NULL;
    }
    if (!(c->sched = sched_new())) {
        gq_errf(err, errlen, "out of memory");
        ctl_fake_free(f);
        return NULL;
    }
    for (int i = 0; i < INF_COUNT; i++) {
        if (!(f->cache[i] = kube_cache_new())) {
            gq_errf(err, errlen, "out of memory");
            ctl_fake_free(f);
            return NULL;
        }
        c->cache[i] = f->cache[i];
    }
    ctl_act_wire(c, fk_wake, &fk_kube, f); /* c->act.st too */
    return f;
}

struct gq_ctl *ctl_fake_ctl(struct ctl_fake *f)
{
    return f->c;
}

int ctl_fake_put(struct ctl_fake *f, int idx, enum kube_event_type type, cJSON *obj)
{
    if (idx < 0 || idx >= INF_COUNT) {
        cJSON_Delete(obj);
        return GQ_EINVAL;
    }
    return fk_apply(f, idx, type, obj);
}

const cJSON *ctl_fake_get(const struct ctl_fake *f, int idx, const char *key)
{
    return idx >= 0 && idx < INF_COUNT ? kube_cache_get_key(f->cache[idx], key) : NULL;
}

int ctl_fake_deliver(struct ctl_fake *f)
{
    return fk_deliver(f);
}

void ctl_fake_job_delete_status(struct ctl_fake *f, long status)
{
    f->job_delete_status = status;
}

struct ctl_fake_counts ctl_fake_requests(const struct ctl_fake *f)
{
    return f->counts;
}

void ctl_fake_free(struct ctl_fake *f)
{
    if (!f)
        return;
    if (f->c) {
        (void)fk_deliver(f);
        ctl_core_release(f->c);
        free(f->c);
    }
    for (int i = 0; i < INF_COUNT; i++)
        kube_cache_free(f->cache[i]);
    for (size_t i = 0; i < f->n; i++) {
        cJSON_Delete(f->q[i].obj);
        gq_sstr_put(f->q[i].text);
    }
    free(f->q);
    free(f);
}

/* ------------------------------------------------------------ objects */

/* The object printed in b (NULL when printing it failed: bad nonzero). */
static cJSON *parse_owned(struct gq_buf *b, int bad)
{
    cJSON *o = bad ? NULL : cJSON_ParseWithLength(b->p, b->len);
    gq_buf_reset(b);
    return o;
}

static int add_node(struct ctl_fake *f, struct gq_buf *b, int i, int gpus)
{
    int bad = gq_buf_printf(b,
                  "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n-%d\",\"uid\":\"node-%d\","
                  "\"resourceVersion\":\"1\",\"labels\":{\"kubernetes.io/hostname\":\"n-%d\","
                  "\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB\",\"nvidia.com/gpu.memory\":\"40960\"}},"
                  "\"status\":{\"allocatable\":{\"cpu\":\"256\",\"memory\":\"2Ti\",\"pods\":\"250\","
                  "\"nvidia.com/gpu\":\"%d\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                  i, i, i, gpus);
    cJSON *o = parse_owned(b, bad);
    return o ? fk_apply(f, INF_NODES, KUBE_EV_ADDED, o) : GQ_ENOMEM;
}

static int add_team(struct ctl_fake *f, struct gq_buf *b, int t, int nominal, int teams_per_cohort)
{
    int bad = gq_buf_printf(b,
                  "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"team-%d\","
                  "\"uid\":\"team-uid-%d\",\"resourceVersion\":\"1\",\"generation\":1},"
                  "\"spec\":{\"namespaces\":[\"ns-%d\"],\"cohort\":\"cohort-%d\",\"weight\":1,"
                  "\"quota\":[{\"gpuType\":\"*\",\"gpus\":%d,\"borrowingLimit\":%d}]}}",
                  t, t, t, t / (teams_per_cohort > 0 ? teams_per_cohort : 1), nominal, nominal * 5);
    cJSON *o = parse_owned(b, bad);
    return o ? fk_apply(f, INF_TEAMS, KUBE_EV_ADDED, o) : GQ_ENOMEM;
}

/* Job i: a mix like Kueue's baseline (7 of 10 one GPU, 2 five, 1 two
 * replicas of ten), in team i % teams. label: a metadata label's value
 * (a change of spec-free metadata for the "one" stage). */
static int job_json(struct gq_buf *b, int i, int teams, const char *label, int gen)
{
    int k = i % 10, replicas = k == 9 ? 2 : 1, gpus = k < 7 ? 1 : k < 9 ? 5 : 10;
    int prio = k < 7 ? 50 : k < 9 ? 100 : 200;
    return gq_buf_printf(
        b,
        "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"metadata\":{\"name\":\"job-%06d\","
        "\"namespace\":\"ns-%d\",\"uid\":\"job-uid-%d\",\"resourceVersion\":\"%d\",\"generation\":%d,"
        "\"creationTimestamp\":\"2026-12-01T00:00:00Z\",\"labels\":{\"bench\":\"%s\"}},"
        "\"spec\":{\"class\":\"Batch\",\"replicas\":%d,\"gpu\":{\"count\":%d},\"priority\":%d,"
        "\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\","
        "\"image\":\"busybox\",\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}}}]}}}}",
        i, i % teams, i, 1000 + gen, gen, label, replicas, gpus, prio);
}

static int add_job(struct ctl_fake *f, struct gq_buf *b, int i, int teams)
{
    int bad = job_json(b, i, teams, "a", 1);
    cJSON *o = parse_owned(b, bad);
    if (o)
        ctl_prune_gpujob(o);
    return o ? fk_apply(f, INF_JOBS, KUBE_EV_ADDED, o) : GQ_ENOMEM;
}

/* ------------------------------------------------------------ the stages */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct stage {
    int reconciles;
    double rc_cpu, deliver_cpu;
    uint64_t full0, quiet0;
    struct ctl_fake_counts counts0; /* the fake API's counts at the stage's start */
    uint64_t phase0[CTL_NPHASES];
    int churn; /* the churn stage (churn_reconcile) */
};

static uint64_t admitted_total(const struct gq_ctl *c)
{
    return c->m.jobs_by_state[STORE_ADMITTED] + c->m.jobs_by_state[STORE_RUNNING] +
           c->m.jobs_by_state[STORE_SUCCEEDED];
}

/* The jobs by state as the last reconcile counted them, for a stage's line. */
static void jobs_what(const struct gq_ctl *c, char *out, size_t len)
{
    snprintf(out, len, "(nothing changed; %lld jobs waiting, %lld running, %lld finished, %lld dormant)",
             (long long)(c->m.jobs_by_state[STORE_QUEUED] + c->m.jobs_by_state[STORE_PREEMPTED]),
             (long long)(c->m.jobs_by_state[STORE_ADMITTED] + c->m.jobs_by_state[STORE_RUNNING]),
             (long long)c->m.jobs_by_state[STORE_SUCCEEDED], (long long)c->m.jobs_dormant);
}

/* Pod creates and deletes and status patches sent so far. */
static uint64_t writes_sent(const struct ctl_fake *f)
{
    return f->counts.creates + f->counts.patches + f->counts.deletes;
}

/* One reconcile of the churn stage: a function of its own, so a profiler
 * can count that stage's reconciles alone (valgrind --tool=callgrind
 * --toggle-collect=churn_reconcile). */
__attribute__((noinline)) static struct ctl_rc_result churn_reconcile(struct gq_ctl *c)
{
    return ctl_reconcile(c);
}

/* One reconcile, then the answers to its requests; 0, or an error printed. */
static int step(struct ctl_fake *f, struct stage *s)
{
    double t0 = cpu_s();
    struct ctl_rc_result res = s->churn ? churn_reconcile(f->c) : ctl_reconcile(f->c);
    double t1 = cpu_s();
    int rc = res.rc ? res.rc : fk_deliver(f);
    s->rc_cpu += t1 - t0;
    s->deliver_cpu += cpu_s() - t1;
    s->reconciles++;
    if (rc)
        fprintf(stderr, "gangq bench reconcile: %s\n", res.rc ? res.err : gq_strerror(rc));
    return rc;
}

static void stage_begin(const struct ctl_fake *f, struct stage *s)
{
    memset(s, 0, sizeof(*s));
    s->full0 = f->c->m.jobs_full;
    s->quiet0 = f->c->m.reconciles_quiet;
    s->counts0 = f->counts;
    memcpy(s->phase0, f->c->m.phase_ns, sizeof(s->phase0));
}

static void stage_print(const struct ctl_fake *f, const char *name, const struct stage *s, long admitted,
                        const char *what)
{
    const struct gq_ctl *c = f->c;
    printf("%-6s reconciles %5d  quiet %5llu  reconcile_cpu_ms %9.1f  per_reconcile_ms %7.2f  examined_in_full %7llu"
           "  admissions %6ld  us_per_admission %8.1f  api_and_watch_cpu_ms %8.1f  %s\n",
           name, s->reconciles, (unsigned long long)(c->m.reconciles_quiet - s->quiet0), s->rc_cpu * 1e3,
           s->reconciles ? s->rc_cpu * 1e3 / s->reconciles : 0.0, (unsigned long long)(c->m.jobs_full - s->full0),
           admitted,
           admitted > 0 ? s->rc_cpu * 1e6 / (double)admitted : 0.0, s->deliver_cpu * 1e3, what);
    uint64_t patches = f->counts.patches - s->counts0.patches, events = f->counts.events - s->counts0.events;
    printf("       writes: pod creates %llu  status patches %llu  events %llu",
           (unsigned long long)(f->counts.creates - s->counts0.creates), (unsigned long long)patches,
           (unsigned long long)events);
    if (admitted > 0)
        printf("  (status patches per admission %.2f, events %.2f)", (double)patches / (double)admitted,
               (double)events / (double)admitted);
    printf("\n       phases (mean ms per reconcile, wall):");
    for (int p = 0; p < CTL_NPHASES; p++)
        printf(" %s %.2f", ctl_phase_names[p],
               s->reconciles ? (double)(c->m.phase_ns[p] - s->phase0[p]) / 1e6 / s->reconciles : 0.0);
    printf("\n");
}

/* The pods of up to n admitted jobs (the first found) succeed. */
static int finish_some(struct ctl_fake *f, int n, int *done)
{
    struct gq_ctl *c = f->c;
    *done = 0;
    for (int i = 0; i < c->jobs_set.n && *done < n; i++) {
        struct ctl_memo *m = c->jobs_set.e[i].memo;
        if (!m || !m->pods.npods)
            continue;
        int live = 0;
        for (int p = 0; p < m->pods.npods; p++)
            live += !m->pods.pf[p].terminal;
        if (live < m->pods.npods)
            continue; /* finishing, or its pods are not all running yet */
        /* the pods' names first: each apply below replaces the memo's list */
        char keys[16][CTL_KEY_MAX];
        int nk = 0;
        for (int p = 0; p < m->pods.npods && nk < 16; p++) {
            char key[CTL_KEY_MAX];
            if (!kube_object_key(m->pods.pods[p], key, sizeof(key)))
                gq_strlcpy(keys[nk++], key, sizeof(keys[0]));
        }
        for (int p = 0; p < nk; p++) {
            const cJSON *cur = kube_cache_get_key(f->cache[INF_PODS], keys[p]);
            cJSON *pod = cur ? cJSON_Duplicate(cur, 1) : NULL;
            cJSON *st = pod ? ctl_obj_child(pod, "status") : NULL;
            char rv[32];
            snprintf(rv, sizeof(rv), "%llu", (unsigned long long)++f->seq);
            if (!st || ctl_obj_set_str(st, "phase", "Succeeded") ||
                ctl_obj_set_str(ctl_obj_child(pod, "metadata"), "resourceVersion", rv)) {
                cJSON_Delete(pod);
                return GQ_ENOMEM;
            }
            int rc = fk_apply(f, INF_PODS, KUBE_EV_MODIFIED, pod);
            if (rc)
                return rc;
        }
        (*done)++;
    }
    return 0;
}

static int bench_usage(void)
{
    fprintf(stderr,
            "usage: gangq bench reconcile [--jobs N] [--nodes N] [--gpus-per-node N] [--teams N]\n"
            "                             [--fit F] [--idle N] [--rounds N] [--finish N] [--after N]\n"
            "                             [--round-ms MS] [--ctl OPTION=VALUE]... [--db PATH]\n");
    return 2;
}

static int int_arg(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int bench_reconcile(int argc, char **argv)
{
    int njobs = 15000, teams = 30, gpn = 24, idle = 20, rounds = 50, finish = 20, nnodes = -1, after = -1;
    int round_ms = 0;
    double fit = 0.4;
    const char *db = NULL;
    const char *ctl_opts[16];
    int nctl_opts = 0;
    const struct {
        const char *name;
        int lo, hi;
        int *v;
    } iopts[] = {{"--jobs", 1, 1000000, &njobs},  {"--nodes", 1, 100000, &nnodes},
                 {"--gpus-per-node", 1, 64, &gpn}, {"--teams", 1, 1000, &teams},
                 {"--idle", 0, 100000, &idle},     {"--after", 0, 100000, &after},
                 {"--rounds", 0, 100000, &rounds}, {"--finish", 1, 100000, &finish},
                 {"--round-ms", 0, 3600000, &round_ms}};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = !v, known = 0;
        for (size_t o = 0; v && o < GQ_ARRAY_LEN(iopts) && !known; o++)
            if (!strcmp(a, iopts[o].name)) {
                known = 1;
                bad = int_arg(v, iopts[o].lo, iopts[o].hi, iopts[o].v);
            }
        if (!v || known)
            ;
        else if (!strcmp(a, "--fit")) {
            char *end;
            fit = strtod(v, &end);
            bad = !*v || *end || !(fit > 0 && fit <= 1);
        } else if (!strcmp(a, "--db"))
            db = v;
        else if (!strcmp(a, "--ctl")) {
            bad = nctl_opts >= (int)GQ_ARRAY_LEN(ctl_opts) || !strchr(v, '=');
            if (!bad)
                ctl_opts[nctl_opts++] = v;
        }
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "gangq bench reconcile: bad option %s%s%s\n", a, v ? " " : "", v ? v : "");
            return bench_usage();
        }
    }
    ctl_heap_init(); /* the controller's heap, as ctl_run sets it */
    /* the mix asks 2.4 GPUs per job on average (7 x 1 + 2 x 5 + 1 x 20 over ten) */
    if (nnodes < 0)
        nnodes = (int)((double)njobs * 2.4 * fit / gpn + 0.5) + 1;
    char tmpdir[] = "/tmp/gangq-bench-rc.XXXXXX", dbpath[PATH_MAX];
    int made = 0;
    if (!db) {
        if (!mkdtemp(tmpdir)) {
            perror("gangq bench reconcile: mkdtemp");
            return 1;
        }
        made = 1;
        snprintf(dbpath, sizeof(dbpath), "%s/gangq.db", tmpdir);
        db = dbpath;
    }
    struct gq_buf b;
    gq_buf_init(&b, 1 << 20);
    char err[1024] = "";
    int rc = 1;
    struct ctl_fake *f = ctl_fake_new(db, err, sizeof(err));
    struct gq_ctl *c = f ? f->c : NULL;
    if (!f) {
        fprintf(stderr, "gangq bench reconcile: %s\n", err);
        goto out;
    }
    /* statuses as soon as decided (more writes, the dearer case), unless the
     * churn's rounds take time (--round-ms): then the controller's defaults,
     * its clock moved forward each round, so held writes come due as they
     * would in a cluster */
    if (!round_ms)
        c->cfg.status_settle_s = 0;
    for (int i = 0; i < nctl_opts; i++) { /* a controller option, as `gangq controller --NAME VALUE` */
        char name[64];
        const char *eq = strchr(ctl_opts[i], '=');
        snprintf(name, sizeof(name), "%.*s", (int)(eq - ctl_opts[i]), ctl_opts[i]);
        if (ctl_config_set(&c->cfg, name, eq + 1, err, sizeof(err))) {
            fprintf(stderr, "gangq bench reconcile: --ctl %s: %s\n", ctl_opts[i], err);
            goto out;
        }
    }
    for (int i = 0; i < nnodes; i++)
        if (add_node(f, &b, i, gpn))
            goto out;
    int per_cohort = 6, nominal = nnodes * gpn / teams > 0 ? nnodes * gpn / teams : 1;
    for (int t = 0; t < teams; t++)
        if (add_team(f, &b, t, nominal, per_cohort))
            goto out;
    for (int i = 0; i < njobs; i++)
        if (add_job(f, &b, i, teams))
            goto out;
    printf("reconcile bench: %d GPUJobs over %d Teams (nominal %d GPUs each), %d nodes x %d GPUs, store %s\n",
           njobs, teams, nominal, nnodes, gpn, db);

    struct stage s;
    /* admit: until a reconcile admits nothing and sends nothing */
    stage_begin(f, &s);
    for (int k = 0; k < 1000; k++) {
        uint64_t before = admitted_total(c), sent = writes_sent(f);
        if (step(f, &s))
            goto out;
        if (k > 0 && admitted_total(c) == before && writes_sent(f) == sent)
            break;
    }
    stage_print(f, "admit", &s, (long)admitted_total(c),
                "(the jobs arrive at once; reconciles until nothing changes)");
    /* idle */
    stage_begin(f, &s);
    for (int k = 0; k < idle; k++)
        if (step(f, &s))
            goto out;
    char what[160];
    jobs_what(c, what, sizeof(what));
    stage_print(f, "idle", &s, 0, what);
    /* woken: each reconcile asked for, nothing changed */
    stage_begin(f, &s);
    for (int k = 0; k < idle; k++) {
        c->inputs++; /* what ctl_object_event, the actuator's hooks and the due timer do */
        if (step(f, &s))
            goto out;
    }
    stage_print(f, "woken", &s, 0, "(each asked for, nothing changed)");
    /* one: a waiting job's metadata changes, one reconcile */
    stage_begin(f, &s);
    for (int k = 0; k < idle; k++) {
        int i = njobs - 1 - k % njobs;
        int bad = job_json(&b, i, teams, k % 2 ? "a" : "b", 1);
        cJSON *o = parse_owned(&b, bad);
        if (!o)
            goto out;
        ctl_prune_gpujob(o);
        if (fk_apply(f, INF_JOBS, KUBE_EV_MODIFIED, o) || step(f, &s))
            goto out;
    }
    stage_print(f, "one", &s, 0, "(one GPUJob event each)");
    /* full: a full pass asked for (as a Team, GPUPool, class or node change
     * or --full-resync-interval does), nothing changed */
    stage_begin(f, &s);
    for (int k = 0; k < (idle < 5 ? idle : 5); k++) {
        c->full_next = 1;
        if (step(f, &s))
            goto out;
    }
    stage_print(f, "full", &s, 0, "(a full pass each, nothing changed)");
    /* settle (--round-ms only): time passes until no held write is due, so
     * that the churn counts its own writes, not the admit stage's held ones */
    if (round_ms) {
        stage_begin(f, &s);
        for (int k = 0; k < 100; k++) {
            uint64_t sent = writes_sent(f);
            ctl_clock_advance(round_ms);
            if (step(f, &s))
                goto out;
            if (k >= 60000 / round_ms && writes_sent(f) == sent)
                break;
        }
        stage_print(f, "settle", &s, 0, "(--round-ms apart, until no held write is due)");
    }
    /* churn */
    stage_begin(f, &s);
    s.churn = 1;
    uint64_t adm0 = admitted_total(c);
    long finished = 0;
    for (int k = 0; k < rounds; k++) {
        int done = 0;
        ctl_clock_advance(round_ms);
        if (finish_some(f, finish, &done) || step(f, &s))
            goto out;
        finished += done;
    }
    snprintf(what, sizeof(what), "(%ld jobs' pods succeeded, %d per round%s)", finished, finish,
             round_ms ? ", rounds --round-ms apart" : "");
    stage_print(f, "churn", &s, (long)(admitted_total(c) - adm0), what);
    /* idle again, with the finished jobs settled (dormant) */
    stage_begin(f, &s);
    for (int k = 0; k < (after >= 0 ? after : idle); k++)
        if (step(f, &s))
            goto out;
    jobs_what(c, what, sizeof(what));
    stage_print(f, "after", &s, 0, what);
    printf("requests answered: %llu creates, %llu status patches, %llu deletes, %llu events, %llu gets\n",
           (unsigned long long)f->counts.creates, (unsigned long long)f->counts.patches,
           (unsigned long long)f->counts.deletes, (unsigned long long)f->counts.events,
           (unsigned long long)f->counts.gets);
    rc = 0;
out:
    if (rc && !err[0])
        fprintf(stderr, "gangq bench reconcile: failed\n");
    ctl_fake_free(f);
    gq_buf_release(&b);
    if (made) {
        store_remove_files(dbpath);
        rmdir(tmpdir);
    }
    return rc;
}
