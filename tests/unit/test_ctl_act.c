/* Unit tests of the actuator (controller/ctl_act.c) through its own interface
 * (controller/ctl_act.h): a recording struct ctl_act_kube stands in for the
 * kube client (the test answers each request by calling its callback), two
 * kube caches hold the GPUJobs and pods, a temporary store holds the rows and
 * intents, and recording hooks stand in for the controller. The real proof
 * stays the integration tests (tests/k8s/test_ctl_*.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctl.h"
#include "ctl_act.h"
#include "log.h"
#include "store.h"

/* ------------------------------------------------------------ recording kube */

#define MAXREQ 32

struct req {
    char method[16];
    enum kube_prio prio;
    char path[CTL_PATH_MAX];
    cJSON *body;       /* owned copy (create, patch) */
    long grace;
    char uid[API_UID_MAX], rv[64];
    char reason[64], instance[128];
    kube_response_cb cb;
    void *ud;
    int answered;
    int rank;          /* the rank in force when it was sent (m_set_rank) */
};

struct mock {
    struct req r[MAXREQ];
    int n;
    int fail_next;     /* the next request is refused at once (not queued) */
    size_t dropped;    /* drop_queued's answer */
    int drops;         /* drop_queued calls */
    enum kube_prio drop_prio;
    int rank;          /* set_rank's */
    int low_full;      /* status_would_refuse's answer for the low lane */
    int asked;         /* status_would_refuse calls, and the last one's question */
    enum kube_prio asked_prio;
    char asked_path[CTL_PATH_MAX];
};

static struct req *mock_add(struct mock *m, const char *method, enum kube_prio prio, const char *path,
                            kube_response_cb cb, void *ud)
{
    assert_true(m->n < MAXREQ);
    struct req *q = &m->r[m->n++];
    memset(q, 0, sizeof(*q));
    gq_strlcpy(q->method, method, sizeof(q->method));
    q->prio = prio;
    gq_strlcpy(q->path, path, sizeof(q->path));
    q->cb = cb;
    q->ud = ud;
    q->grace = -2;
    q->rank = m->rank;
    return q;
}

static int m_create(void *k, enum kube_prio prio, const char *coll, const cJSON *obj, kube_response_cb cb, void *ud)
{
    struct mock *m = k;
    if (m->fail_next) {
        m->fail_next = 0;
        return GQ_EIO;
    }
    struct req *q = mock_add(m, "POST", prio, coll, cb, ud);
    q->body = cJSON_Duplicate(obj, 1);
    assert_non_null(q->body);
    return 0;
}

static int m_delete_rv(void *k, enum kube_prio prio, const char *path, long grace_s, const char *uid,
                       const char *rv, kube_response_cb cb, void *ud)
{
    struct mock *m = k;
    struct req *q = mock_add(m, "DELETE", prio, path, cb, ud);
    q->grace = grace_s;
    gq_strlcpy(q->uid, uid ? uid : "", sizeof(q->uid));
    gq_strlcpy(q->rv, rv ? rv : "", sizeof(q->rv));
    return 0;
}

static int m_get(void *k, const char *path, kube_response_cb cb, void *ud)
{
    mock_add(k, "GET", KUBE_PRIO_NORMAL, path, cb, ud);
    return 0;
}

static int m_patch_status(void *k, enum kube_prio prio, const char *path, const char *json, kube_response_cb cb,
                          void *ud)
{
    struct req *q = mock_add(k, "PATCH", prio, path, cb, ud);
    q->body = cJSON_Parse(json);
    assert_non_null(q->body);
    return 0;
}

/* A status patch as ctl_act_patch_status takes it: printed, a shared text. */
static const char *sstr(const char *s)
{
    const char *t = gq_sstr_new(s, strlen(s));
    assert_non_null(t);
    return t;
}

static int m_event(void *k, enum kube_prio prio, const struct kube_objref *ref, const char *type, const char *reason,
                   const char *msg, const char *instance, kube_response_cb cb, void *ud)
{
    (void)type;
    (void)msg;
    char path[CTL_PATH_MAX];
    snprintf(path, sizeof(path), "event:%s/%s", ref->namespace_ ? ref->namespace_ : "", ref->name);
    struct req *q = mock_add(k, "EVENT", prio, path, cb, ud);
    gq_strlcpy(q->reason, reason, sizeof(q->reason));
    gq_strlcpy(q->instance, instance ? instance : "", sizeof(q->instance));
    return 0;
}

static size_t m_drop_queued(void *k, enum kube_prio prio)
{
    struct mock *m = k;
    m->drops++;
    m->drop_prio = prio;
    return m->dropped;
}

static int m_set_rank(void *k, int rank)
{
    struct mock *m = k;
    int was = m->rank;
    m->rank = rank;
    return was;
}

static int m_status_would_refuse(void *k, enum kube_prio prio, const char *path)
{
    struct mock *m = k;
    m->asked++;
    m->asked_prio = prio;
    gq_strlcpy(m->asked_path, path, sizeof(m->asked_path));
    return m->low_full && prio == KUBE_PRIO_LOW;
}

static const struct ctl_act_kube mock_kube = {m_create, m_delete_rv, m_get, m_patch_status, m_event, m_drop_queued,
                                              m_set_rank, m_status_would_refuse};

/* Answer request i (its callback runs now, as the loop would run it). */
static void answer(struct mock *m, int i, int rc, long status, const char *body, const char *errmsg)
{
    assert_true(i < m->n);
    struct req *q = &m->r[i];
    assert_false(q->answered);
    q->answered = 1;
    struct kube_response resp = {rc, status, body ? body : "", body ? strlen(body) : 0, -1, errmsg ? errmsg : "", 0};
    if (q->cb)
        q->cb(&resp, q->ud);
}

static void mock_release(struct mock *m)
{
    for (int i = 0; i < m->n; i++)
        cJSON_Delete(m->r[i].body);
    memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------ recording hooks */

struct rec {
    int settled;
    int64_t settled_id;
    char settled_key[CTL_KEY_MAX];
    int settled_ok;
    int sent;
    int sent_attempt;
    char sent_pod[128];
    int refused;
    char refused_msg[128];
    int confirmed;
    int confirmed_rc;
    char confirmed_pod[128];
    int status_ends;
    struct {
        uint64_t gen;
        int transition, rc, not_sent;
        char state[32], key[64];
    } se;
    int status_known; /* what status_end answers */
    /* job_pods: when use_idx, the pods of idx_key the controller's index
     * holds (else NULL: the actuator walks the pod cache) */
    int use_idx;
    char idx_key[64], asked_key[64];
    const cJSON *idx[4];
    int nidx;
    int dirty;
    int job_deleted;
    int job_deleted_rc;
    char job_deleted_key[64];
};

static void h_settled(void *ctx, int64_t id, const char *key, int ok)
{
    struct rec *r = ctx;
    r->settled++;
    r->settled_id = id;
    gq_strlcpy(r->settled_key, key, sizeof(r->settled_key));
    r->settled_ok = ok;
}

static void h_sent(void *ctx, const char *key, int attempt, const char *pod)
{
    struct rec *r = ctx;
    (void)key;
    r->sent++;
    r->sent_attempt = attempt;
    gq_strlcpy(r->sent_pod, pod, sizeof(r->sent_pod));
}

static void h_refused(void *ctx, const char *key, const char *msg)
{
    struct rec *r = ctx;
    (void)key;
    r->refused++;
    gq_strlcpy(r->refused_msg, msg, sizeof(r->refused_msg));
}

static void h_confirmed(void *ctx, const char *key, const char *pod, int rc)
{
    struct rec *r = ctx;
    (void)key;
    r->confirmed++;
    r->confirmed_rc = rc;
    gq_strlcpy(r->confirmed_pod, pod, sizeof(r->confirmed_pod));
}

static int h_status_end(void *ctx, const struct ctl_act_status_end *e)
{
    struct rec *r = ctx;
    r->status_ends++;
    r->se.gen = e->gen;
    r->se.transition = e->transition;
    r->se.rc = e->rc;
    r->se.not_sent = e->not_sent;
    gq_strlcpy(r->se.state, e->state, sizeof(r->se.state));
    gq_strlcpy(r->se.key, e->key, sizeof(r->se.key));
    return r->status_known;
}

static void h_job_deleted(void *ctx, const char *key, int rc)
{
    struct rec *r = ctx;
    r->job_deleted++;
    r->job_deleted_rc = rc;
    gq_strlcpy(r->job_deleted_key, key, sizeof(r->job_deleted_key));
}

static const cJSON *const *h_job_pods(void *ctx, const char *key, int *n)
{
    struct rec *r = ctx;
    *n = 0;
    if (!r->use_idx)
        return NULL;
    gq_strlcpy(r->asked_key, key, sizeof(r->asked_key));
    if (strcmp(key, r->idx_key))
        return r->idx; /* none of this job */
    *n = r->nidx;
    return r->idx;
}

static void h_dirty(void *ctx)
{
    ((struct rec *)ctx)->dirty++;
}

/* ------------------------------------------------------------ fixture */

struct fx {
    char dir[64], path[128];
    struct store *st;
    struct kube_cache *jobs, *pods;
    struct mock m;
    struct rec r;
    struct ctl_act a;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char err[256];
    if (!f)
        return -1;
    gq_strlcpy(f->dir, "/tmp/gq-act-test-XXXXXX", sizeof(f->dir));
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/gangq.db", f->dir);
    if (store_open(f->path, NULL, &f->st, err, sizeof(err)) || !(f->jobs = kube_cache_new()) ||
        !(f->pods = kube_cache_new()))
        return -1;
    f->r.status_known = 1;
    const struct ctl_act_hooks hooks = {&f->r, h_settled, h_sent, h_refused, h_confirmed, h_status_end, h_dirty,
                                        h_job_pods, h_job_deleted};
    ctl_act_init(&f->a, &mock_kube, &f->m, f->jobs, f->pods, &hooks, GQ_LOG_ERROR + 1, 45, "gangq-test_1");
    f->a.st = f->st;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ctl_act_release(&f->a);
    mock_release(&f->m);
    kube_cache_free(f->jobs);
    kube_cache_free(f->pods);
    store_close(f->st);
    store_remove_files(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void cache_add(struct kube_cache *c, const char *json)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    assert_int_equal(kube_cache_apply(c, KUBE_EV_ADDED, o, NULL, NULL), 0);
}

static const char *JOB_TRAIN =
    "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"metadata\":{\"namespace\":\"ml\","
    "\"name\":\"train\",\"uid\":\"u1\",\"resourceVersion\":\"5\"},\"spec\":{\"team\":\"a\",\"replicas\":2,"
    "\"gpu\":{\"count\":1},\"template\":{\"spec\":{\"terminationGracePeriodSeconds\":600,"
    "\"containers\":[{\"name\":\"main\",\"image\":\"x\"}]}}}}";

static void row_add(struct fx *f, const char *key, int state, const char *placement)
{
    char err[256];
    struct store_job j = {0};
    j.key = key;
    j.uid = "u1";
    j.team = "a";
    j.cls = "Training";
    j.gpus = 2;
    j.priority = 250;
    j.enqueue_ms = 1000;
    j.state = state;
    j.attempts = 3;
    j.placement = placement;
    assert_int_equal(store_job_upsert(f->st, &j, 2000, err, sizeof(err)), 0);
}

static int64_t intent_add(struct fx *f, int kind, const char *key)
{
    char err[256];
    int64_t id = 0;
    assert_int_equal(store_intent_add(f->st, kind, key, "", 3000, &id, err, sizeof(err)), 0);
    assert_true(id > 0);
    return id;
}

static int count_pending_cb(void *ctx, const struct store_intent *in)
{
    (void)in;
    (*(int *)ctx)++;
    return 0;
}

static int pending(struct fx *f)
{
    char err[256];
    int n = 0;
    assert_int_equal(store_intents_pending(f->st, count_pending_cb, &n, err, sizeof(err)), 0);
    return n;
}

/* Index of the first request with method and path (-1 none), from index from. */
static int find_req(const struct mock *m, int from, const char *method, const char *path)
{
    for (int i = from; i < m->n; i++)
        if (!strcmp(m->r[i].method, method) && !strcmp(m->r[i].path, path))
            return i;
    return -1;
}

static const char *env_of(const cJSON *ct, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ct, "env"))
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "value");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
            return cJSON_IsString(v) ? v->valuestring : NULL;
    }
    return NULL;
}

static const char *PL_TRAIN = "{\"attempt\":3,\"reseq\":0,\"domain\":\"\",\"replicas\":"
                              "[{\"i\":0,\"node\":\"n1\",\"devs\":1},{\"i\":1,\"node\":\"n2\",\"devs\":2}]}";

/* ------------------------------------------------------------ tests */

/* ADMIT: the Service and the missing pod are created (critical lane), the pod
 * carries its placement and rendezvous; the intent is in flight until its
 * requests end, then done, and marked in the store by ctl_act_flush_done. */
static void test_admit_creates_and_settles(void **state)
{
    struct fx *f = *state;
    cache_add(f->jobs, JOB_TRAIN);
    /* replica 1's pod exists already: only replica 0's is created */
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-3-1\",\"uid\":\"p1\","
                       "\"labels\":{\"gangq.io/job\":\"train\"}},\"spec\":{\"nodeName\":\"n2\"}}");
    row_add(f, "ml/train", STORE_ADMITTED, PL_TRAIN);
    int64_t id = intent_add(f, STORE_INTENT_ADMIT, "ml/train");

    ctl_act_intents(&f->a);
    assert_true(ctl_act_inflight(&f->a, id));
    assert_int_equal(f->m.n, 2);
    int svc = find_req(&f->m, 0, "POST", "/api/v1/namespaces/ml/services");
    int pod = find_req(&f->m, 0, "POST", "/api/v1/namespaces/ml/pods");
    assert_true(svc >= 0 && pod >= 0 && svc < pod); /* the Service first */
    assert_int_equal(f->m.r[svc].prio, KUBE_PRIO_CRITICAL);
    assert_int_equal(f->m.r[pod].prio, KUBE_PRIO_CRITICAL);
    /* ranked in their lane by the job's priority; the rank is put back after */
    assert_int_equal(f->m.r[svc].rank, 250);
    assert_int_equal(f->m.r[pod].rank, 250);
    assert_int_equal(f->m.rank, 0);

    const cJSON *p = f->m.r[pod].body;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(p, "metadata");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(p, "spec");
    assert_string_equal(ctl_obj_str(p, "metadata", "name"), "train-3-0");
    assert_string_equal(ctl_obj_str(spec, "nodeName", NULL), "n1");
    assert_string_equal(ctl_obj_str(spec, "hostname", NULL), "train-0");
    assert_string_equal(ctl_obj_str(spec, "subdomain", NULL), "train");
    assert_string_equal(ctl_obj_label(p, CTL_LABEL_JOB), "train");
    assert_string_equal(ctl_obj_label(p, CTL_LABEL_REPLICA), "0");
    assert_string_equal(ctl_obj_label(p, CTL_LABEL_ATTEMPT), "3");
    assert_string_equal(ctl_obj_annotation(p, CTL_ANN_GPU_DEVICES), "0");
    const cJSON *owner = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences"), 0);
    assert_string_equal(ctl_obj_str(owner, "uid", NULL), "u1");
    /* the grace period capped at max_grace_s */
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(spec, "terminationGracePeriodSeconds")->valueint, 45);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
    assert_string_equal(env_of(c0, "RANK"), "0");
    assert_string_equal(env_of(c0, "WORLD_SIZE"), "2");
    assert_string_equal(env_of(c0, "MASTER_ADDR"), "train-0.train.ml.svc");
    assert_string_equal(ctl_obj_str(cJSON_GetObjectItemCaseSensitive(c0, "resources"), "limits", CTL_GPU_RESOURCE),
                        "1");
    /* the Service: headless, selects the job's pods, owned by the GPUJob */
    const cJSON *s = f->m.r[svc].body;
    assert_string_equal(ctl_obj_str(s, "metadata", "name"), "train");
    assert_string_equal(ctl_obj_str(s, "spec", "clusterIP"), "None");

    /* the controller heard of the create; nothing settled yet */
    assert_int_equal(f->r.sent, 1);
    assert_int_equal(f->r.sent_attempt, 3);
    assert_string_equal(f->r.sent_pod, "train-3-0");
    assert_int_equal(f->r.settled, 0);

    /* in flight: a second pass acts on nothing */
    ctl_act_intents(&f->a);
    assert_int_equal(f->m.n, 2);

    /* 409 AlreadyExists counts as created */
    answer(&f->m, pod, GQ_ECONFLICT, 409, "{}", "exists");
    assert_int_equal(f->r.settled, 1);
    assert_int_equal(f->r.settled_id, id);
    assert_string_equal(f->r.settled_key, "ml/train");
    assert_int_equal(f->r.settled_ok, 1);
    assert_int_equal(f->a.ndone, 1);
    assert_true(ctl_act_inflight(&f->a, id)); /* until marked in the store */
    answer(&f->m, svc, GQ_OK, 201, "{}", NULL); /* outside the intent */
    assert_int_equal(f->r.settled, 1);

    assert_int_equal(pending(f), 1);
    ctl_act_flush_done(&f->a);
    assert_int_equal(pending(f), 0);
    assert_int_equal(f->a.ndone, 0);
    assert_false(ctl_act_inflight(&f->a, id));
    assert_int_equal(f->a.store_errors, 0);
}

/* A create refused for what the pod is (422) tells the controller, fails the
 * op (the intent leaves the in-flight set) and a later pass acts again. A
 * single-replica job gets no Service. */
static void test_admit_refused(void **state)
{
    struct fx *f = *state;
    cache_add(f->jobs, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"solo\",\"uid\":\"u1\"},"
                       "\"spec\":{\"replicas\":1,\"template\":{\"spec\":{\"containers\":[{\"name\":\"m\"}]}}}}");
    row_add(f, "ml/solo", STORE_RUNNING, "{\"attempt\":1,\"replicas\":[{\"i\":0,\"node\":\"n1\",\"devs\":0}]}");
    int64_t id = intent_add(f, STORE_INTENT_ADMIT, "ml/solo");

    ctl_act_intents(&f->a);
    assert_int_equal(f->m.n, 1);
    assert_string_equal(f->m.r[0].path, "/api/v1/namespaces/ml/pods");
    const cJSON *c0 =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f->m.r[0].body, "spec"),
                                                            "containers"),
                           0);
    assert_string_equal(env_of(c0, "MASTER_ADDR"), "localhost");
    assert_null(ctl_obj_str(f->m.r[0].body, "spec", "hostname"));

    answer(&f->m, 0, GQ_EHTTP, 422, "{}", "spec.containers: Required value");
    assert_int_equal(f->r.refused, 1);
    assert_string_equal(f->r.refused_msg, "spec.containers: Required value");
    assert_int_equal(f->r.settled, 1);
    assert_int_equal(f->r.settled_ok, 0);
    assert_false(ctl_act_inflight(&f->a, id));
    assert_int_equal(f->a.ndone, 0);

    /* a 5xx is not a refusal: retried, nothing told */
    ctl_act_intents(&f->a);
    assert_int_equal(f->m.n, 2);
    answer(&f->m, 1, GQ_EHTTP, 500, "{}", "boom");
    assert_int_equal(f->r.refused, 1);
    assert_int_equal(f->r.settled, 2);
    assert_false(ctl_act_inflight(&f->a, id));

    /* a request that cannot be queued fails the op at once */
    f->m.fail_next = 1;
    ctl_act_intents(&f->a);
    assert_int_equal(f->m.n, 2);
    assert_int_equal(f->r.settled, 3);
    assert_int_equal(f->r.settled_ok, 0);
    assert_false(ctl_act_inflight(&f->a, id));
    assert_int_equal(pending(f), 1);
}

/* PREEMPT: the job's pods are deleted with uid and resourceVersion
 * preconditions and the grace capped; a pod being deleted and a finished pod
 * of a live job are left alone; 404 counts as deleted. */
static void test_preempt_deletes(void **state)
{
    struct fx *f = *state;
    cache_add(f->jobs, JOB_TRAIN);
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-3-0\",\"uid\":\"p0\","
                       "\"resourceVersion\":\"77\",\"labels\":{\"gangq.io/job\":\"train\"}},"
                       "\"spec\":{\"terminationGracePeriodSeconds\":600},\"status\":{\"phase\":\"Running\"}}");
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-3-1\",\"uid\":\"p1\","
                       "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":{\"gangq.io/job\":\"train\"}},"
                       "\"status\":{\"phase\":\"Running\"}}");
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-2-0\",\"uid\":\"p2\","
                       "\"labels\":{\"gangq.io/job\":\"train\"}},\"status\":{\"phase\":\"Succeeded\"}}");
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"other-1-0\",\"uid\":\"p3\","
                       "\"labels\":{\"gangq.io/job\":\"other\"}},\"status\":{\"phase\":\"Running\"}}");
    row_add(f, "ml/train", STORE_PREEMPTED, "");
    int64_t id = intent_add(f, STORE_INTENT_PREEMPT, "ml/train");

    ctl_act_intents(&f->a);
    assert_int_equal(f->m.n, 1);
    assert_string_equal(f->m.r[0].method, "DELETE");
    assert_string_equal(f->m.r[0].path, "/api/v1/namespaces/ml/pods/train-3-0");
    assert_int_equal(f->m.r[0].prio, KUBE_PRIO_CRITICAL);
    assert_int_equal(f->m.r[0].rank, INT_MAX); /* deletes free capacity: first */
    assert_int_equal(f->m.rank, 0);
    assert_int_equal(f->m.r[0].grace, 45);
    assert_string_equal(f->m.r[0].uid, "p0");
    assert_string_equal(f->m.r[0].rv, "77");
    answer(&f->m, 0, GQ_ENOTFOUND, 404, "{}", "gone");
    assert_int_equal(f->r.settled, 1);
    assert_int_equal(f->r.settled_ok, 1);
    assert_int_equal(f->r.settled_id, id);
    ctl_act_flush_done(&f->a);
    assert_int_equal(pending(f), 0);
}

/* A reconcile marks intents done inside its own store transaction: the marks
 * written stay in flight until that transaction commits (ctl_act_done_committed);
 * after a rollback they are pending again and written by the next reconcile;
 * an intent settled after the marks were written stays for the next one. */
static void test_done_in_cycle_txn(void **state)
{
    struct fx *f = *state;
    char err[256];
    size_t n = 99;
    cache_add(f->jobs, JOB_TRAIN);
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-3-0\",\"uid\":\"p0\","
                       "\"labels\":{\"gangq.io/job\":\"train\"}},\"status\":{\"phase\":\"Running\"}}");
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-3-1\",\"uid\":\"p1\","
                       "\"labels\":{\"gangq.io/job\":\"train\"}},\"status\":{\"phase\":\"Running\"}}");
    row_add(f, "ml/train", STORE_PREEMPTED, "");
    int64_t id = intent_add(f, STORE_INTENT_PREEMPT, "ml/train");
    ctl_act_intents(&f->a);
    assert_int_equal(f->m.n, 2);
    answer(&f->m, 0, GQ_OK, 200, "{}", NULL);
    answer(&f->m, 1, GQ_OK, 200, "{}", NULL);
    assert_int_equal(f->a.ndone, 1);

    /* written, then rolled back: still pending, still in flight, kept */
    assert_int_equal(store_begin_cycle(f->st, err, sizeof(err)), 0);
    assert_int_equal(ctl_act_write_done(&f->a, 4000, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    store_rollback_cycle(f->st);
    assert_int_equal(pending(f), 1);
    assert_true(ctl_act_inflight(&f->a, id));
    assert_int_equal(f->a.ndone, 1);
    ctl_act_intents(&f->a); /* in flight: not acted on again */
    assert_int_equal(f->m.n, 2);

    /* written again; another intent settles before the commit */
    assert_int_equal(store_begin_cycle(f->st, err, sizeof(err)), 0);
    assert_int_equal(ctl_act_write_done(&f->a, 5000, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_commit_cycle(f->st, err, sizeof(err)), 0);
    int64_t id2 = intent_add(f, STORE_INTENT_PREEMPT, "ml/train");
    ctl_act_intents(&f->a);
    int before = f->m.n;
    assert_true(before > 2);
    for (int i = 2; i < before; i++)
        answer(&f->m, i, GQ_ENOTFOUND, 404, "{}", "gone");
    assert_int_equal(f->a.ndone, 2);
    ctl_act_done_committed(&f->a, n);
    assert_int_equal(f->a.ndone, 1);
    assert_false(ctl_act_inflight(&f->a, id));
    assert_true(ctl_act_inflight(&f->a, id2));
    assert_int_equal(pending(f), 1); /* the second: its mark not written yet */

    /* no marks: nothing written, nothing dropped */
    assert_int_equal(store_begin_cycle(f->st, err, sizeof(err)), 0);
    assert_int_equal(ctl_act_write_done(&f->a, 6000, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_commit_cycle(f->st, err, sizeof(err)), 0);
    ctl_act_done_committed(&f->a, n);
    assert_int_equal(f->a.ndone, 0);
    assert_false(ctl_act_inflight(&f->a, id2));
    assert_int_equal(pending(f), 0);
    ctl_act_done_committed(&f->a, 0);
    assert_int_equal(f->a.ndone, 0);
}

/* The controller's index of a job's pods is used when it has one: the pods
 * it names are deleted though the pod cache does not hold them, and no other
 * pod of the cache is looked at. */
static void test_preempt_deletes_indexed(void **state)
{
    struct fx *f = *state;
    cJSON *p0 = cJSON_Parse("{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-3-0\",\"uid\":\"p0\","
                            "\"resourceVersion\":\"77\",\"labels\":{\"gangq.io/job\":\"train\"}},"
                            "\"status\":{\"phase\":\"Running\"}}");
    cJSON *p1 = cJSON_Parse("{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-2-0\",\"uid\":\"p2\","
                            "\"labels\":{\"gangq.io/job\":\"train\"}},\"status\":{\"phase\":\"Succeeded\"}}");
    assert_non_null(p0);
    assert_non_null(p1);
    cache_add(f->jobs, JOB_TRAIN);
    /* in the cache but not the job's index: a walk would delete it */
    cache_add(f->pods, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"train-9-0\",\"uid\":\"p9\","
                       "\"labels\":{\"gangq.io/job\":\"train\"}},\"status\":{\"phase\":\"Running\"}}");
    f->r.use_idx = 1;
    gq_strlcpy(f->r.idx_key, "ml/train", sizeof(f->r.idx_key));
    f->r.idx[0] = p0;
    f->r.idx[1] = p1;
    f->r.nidx = 2;
    row_add(f, "ml/train", STORE_PREEMPTED, "");
    intent_add(f, STORE_INTENT_PREEMPT, "ml/train");
    ctl_act_intents(&f->a);
    assert_string_equal(f->r.asked_key, "ml/train");
    assert_int_equal(f->m.n, 1);
    assert_string_equal(f->m.r[0].method, "DELETE");
    assert_string_equal(f->m.r[0].path, "/api/v1/namespaces/ml/pods/train-3-0");
    assert_string_equal(f->m.r[0].uid, "p0");
    answer(&f->m, 0, GQ_ENOTFOUND, 404, "{}", "gone");
    assert_int_equal(f->r.settled_ok, 1);
    f->r.use_idx = 0;
    cJSON_Delete(p0);
    cJSON_Delete(p1);
}

/* DELETE of a job whose row is gone: its Service is looked at (GET) and,
 * being the job's (controller ownerReference) while no GPUJob wants it,
 * deleted with a uid precondition. */
static void test_delete_releases_service(void **state)
{
    struct fx *f = *state;
    intent_add(f, STORE_INTENT_DELETE, "ml/train");
    ctl_act_intents(&f->a);
    assert_int_equal(f->r.settled, 1); /* no pod: the op ends at once */
    assert_int_equal(f->r.settled_ok, 1);
    int get = find_req(&f->m, 0, "GET", "/api/v1/namespaces/ml/services/train");
    assert_true(get >= 0);
    answer(&f->m, get, GQ_OK, 200,
           "{\"metadata\":{\"name\":\"train\",\"uid\":\"s1\",\"ownerReferences\":[{\"apiVersion\":"
           "\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"name\":\"train\",\"uid\":\"u0\",\"controller\":true}]}}",
           NULL);
    int del = find_req(&f->m, 0, "DELETE", "/api/v1/namespaces/ml/services/train");
    assert_true(del >= 0);
    assert_string_equal(f->m.r[del].uid, "s1");
    answer(&f->m, del, GQ_OK, 200, "{}", NULL);
    assert_int_equal(f->r.settled, 1); /* the Service is outside the intents */
}

/* A stray pod delete ends with settled(0, key); the pod's own grace (30 s by
 * default) below the cap is kept, an explicit 0 too. */
static void test_delete_pod(void **state)
{
    struct fx *f = *state;
    cJSON *pod = cJSON_Parse("{\"metadata\":{\"namespace\":\"ml\",\"name\":\"x-1-0\",\"uid\":\"px\"}}");
    assert_non_null(pod);
    ctl_act_delete_pod(&f->a, pod, -1, "ml/x");
    ctl_act_delete_pod(&f->a, pod, 0, "ml/x");
    cJSON_Delete(pod);
    assert_int_equal(f->m.n, 2);
    assert_int_equal(f->m.r[0].grace, 30);
    assert_int_equal(f->m.r[1].grace, 0);
    assert_string_equal(f->m.r[0].uid, "px");
    answer(&f->m, 0, GQ_EHTTP, 500, "{}", "boom");
    assert_int_equal(f->r.settled, 1);
    assert_int_equal(f->r.settled_id, 0);
    assert_string_equal(f->r.settled_key, "ml/x");
    assert_int_equal(f->r.settled_ok, 0);
    answer(&f->m, 1, GQ_ECONFLICT, 409, "{}", "changed"); /* a different pod now: not a failure */
    assert_int_equal(f->r.settled, 2);
    assert_int_equal(f->r.settled_ok, 1);

    /* a pod without a name fails at once, still settled */
    pod = cJSON_Parse("{\"metadata\":{}}");
    ctl_act_delete_pod(&f->a, pod, -1, "ml/y");
    cJSON_Delete(pod);
    assert_int_equal(f->m.n, 2);
    assert_int_equal(f->r.settled, 3);
    assert_string_equal(f->r.settled_key, "ml/y");
    assert_int_equal(f->r.settled_ok, 0);
}

/* A pod absent from the cache: one GET, its answer goes to pod_confirmed. */
static void test_confirm_pod(void **state)
{
    struct fx *f = *state;
    assert_int_equal(ctl_act_confirm_pod(&f->a, "ml/train", "ml", "train-3-0"), 0);
    assert_int_equal(f->m.n, 1);
    assert_string_equal(f->m.r[0].path, "/api/v1/namespaces/ml/pods/train-3-0");
    assert_int_equal(f->r.confirmed, 0);
    answer(&f->m, 0, GQ_ENOTFOUND, 404, "{}", "not found");
    assert_int_equal(f->r.confirmed, 1);
    assert_int_equal(f->r.confirmed_rc, GQ_ENOTFOUND);
    assert_string_equal(f->r.confirmed_pod, "train-3-0");
    /* a name the API cannot have: no request, no hook */
    assert_int_not_equal(ctl_act_confirm_pod(&f->a, "ml/train", "ml", "a/b"), 0);
    assert_int_equal(f->m.n, 1);
    assert_int_equal(f->r.confirmed, 1);
}

/* A finished GPUJob's delete (its ttlSecondsAfterFinished): one DELETE of
 * the GPUJob's path with its uid as precondition, in the low lane; the
 * answer goes to the hook whatever it is; a uid or name it cannot send is
 * refused at once, with no request and no hook. */
static void test_delete_job(void **state)
{
    struct fx *f = *state;
    assert_int_equal(ctl_act_delete_job(&f->a, "ml/train", "ml", "train", "uid-7"), 0);
    assert_int_equal(f->m.n, 1);
    assert_string_equal(f->m.r[0].method, "DELETE");
    assert_string_equal(f->m.r[0].path, "/apis/gangq.io/v1alpha1/namespaces/ml/gpujobs/train");
    assert_string_equal(f->m.r[0].uid, "uid-7");
    assert_string_equal(f->m.r[0].rv, "");
    assert_int_equal(f->m.r[0].prio, KUBE_PRIO_LOW);
    assert_int_equal(f->r.job_deleted, 0); /* never inside the call */
    answer(&f->m, 0, GQ_ECONFLICT, 409, "{}", "precondition failed: uid");
    assert_int_equal(f->r.job_deleted, 1);
    assert_int_equal(f->r.job_deleted_rc, GQ_ECONFLICT);
    assert_string_equal(f->r.job_deleted_key, "ml/train");
    assert_int_equal(ctl_act_delete_job(&f->a, "ml/b", "ml", "b", "uid-8"), 0);
    answer(&f->m, 1, GQ_EIO, 0, NULL, "connection refused");
    assert_int_equal(f->r.job_deleted, 2);
    assert_int_equal(f->r.job_deleted_rc, GQ_EIO);
    /* no uid (the precondition protects a re-created job), a bad name */
    assert_int_not_equal(ctl_act_delete_job(&f->a, "ml/c", "ml", "c", ""), 0);
    assert_int_not_equal(ctl_act_delete_job(&f->a, "ml/c", "ml", "a/b", "uid-9"), 0);
    assert_int_equal(f->m.n, 2);
    assert_int_equal(f->r.job_deleted, 2);
}

/* Status patches: a transition goes normal (pod writes alone are critical),
 * a finished one ranked ahead, another patch low; the end is
 * told with what was sent; a 409 of a known object reads it again (then
 * mark_dirty), of a forgotten one does nothing more. */
static void test_status_patch(void **state)
{
    struct fx *f = *state;
    const char *path = "/apis/gangq.io/v1alpha1/namespaces/ml/gpujobs/train/status";
    const char *patch = sstr("{\"status\":{\"state\":\"Running\"}}");
    assert_int_equal(ctl_act_patch_status(&f->a, "ml/train", path, patch, 1, "Running", 7), 0);
    assert_int_equal(ctl_act_patch_status(&f->a, "ml/train", path, patch, 0, "Running", 8), 0);
    gq_sstr_put(patch);
    assert_int_equal(f->m.n, 2);
    assert_int_equal(f->m.r[0].prio, KUBE_PRIO_NORMAL);
    assert_int_equal(f->m.r[1].prio, KUBE_PRIO_LOW);
    assert_int_equal(f->m.r[0].rank, 0);
    assert_string_equal(f->m.r[0].path, path);
    /* would it be refused? A state change never (its lane, normal, takes
     * every write); another patch when the low lane is full */
    f->m.low_full = 1;
    assert_true(ctl_act_status_would_refuse(&f->a, path, 0));
    assert_int_equal(f->m.asked_prio, KUBE_PRIO_LOW);
    assert_string_equal(f->m.asked_path, path);
    assert_false(ctl_act_status_would_refuse(&f->a, path, 1));
    f->m.low_full = 0;
    assert_false(ctl_act_status_would_refuse(&f->a, path, 0));
    assert_int_equal(f->m.n, 2); /* asking sends nothing */
    /* a finished state: normal too, ahead of the other state changes, so
     * it never waits in the critical lane before the next gangs' pods */
    {
        const char *fin = sstr("{\"status\":{\"state\":\"Succeeded\"}}");
        assert_int_equal(ctl_act_patch_status(&f->a, "ml/other", "/x/other/status", fin, 1, "Succeeded", 1), 0);
        gq_sstr_put(fin);
        assert_int_equal(f->m.n, 3);
        assert_int_equal(f->m.r[2].prio, KUBE_PRIO_NORMAL);
        assert_int_equal(f->m.r[2].rank, 1);
        assert_int_equal(f->m.rank, 0);
        answer(&f->m, 2, GQ_OK, 200, "{}", NULL);
        cJSON_Delete(f->m.r[2].body); /* forgotten: the checks below count from 2 again */
        f->m.r[2].body = NULL;
        f->m.n = 2;
        f->r.status_ends = 0;
    }
    /* a report of an invalid spec (Queued, or Failed for its spec): normal,
     * never refused, but ranked after the other state changes, so a flood of
     * invalid jobs never delays other jobs' transitions */
    {
        const char *inv = sstr("{\"status\":{\"state\":\"Queued\"}}");
        assert_int_equal(ctl_act_patch_status(&f->a, "ml/bad", "/x/bad/status", inv, 1, "Queued" CTL_ACT_STATE_INVALID, 1), 0);
        assert_int_equal(ctl_act_patch_status(&f->a, "ml/bad2", "/x/bad2/status", inv, 1, "Failed" CTL_ACT_STATE_INVALID, 1), 0);
        gq_sstr_put(inv);
        assert_int_equal(f->m.n, 4);
        for (int k = 2; k < 4; k++) {
            assert_int_equal(f->m.r[k].prio, KUBE_PRIO_NORMAL);
            assert_int_equal(f->m.r[k].rank, -1);
        }
        assert_int_equal(f->m.rank, 0);
        answer(&f->m, 2, GQ_OK, 200, "{}", NULL);
        answer(&f->m, 3, GQ_OK, 200, "{}", NULL);
        assert_string_equal(f->r.se.state, "Failed" CTL_ACT_STATE_INVALID); /* echoed for the memo */
        for (int k = 2; k < 4; k++) {
            cJSON_Delete(f->m.r[k].body);
            f->m.r[k].body = NULL;
        }
        f->m.n = 2;
        f->r.status_ends = 0;
    }

    answer(&f->m, 0, GQ_ECONFLICT, 409, "{}", "conflict");
    assert_int_equal(f->r.status_ends, 1);
    assert_int_equal(f->r.se.gen, 7);
    assert_int_equal(f->r.se.transition, 1);
    assert_int_equal(f->r.se.rc, GQ_ECONFLICT);
    assert_string_equal(f->r.se.state, "Running");
    assert_string_equal(f->r.se.key, "ml/train");
    assert_int_equal(f->m.n, 3);
    assert_string_equal(f->m.r[2].method, "GET");
    assert_string_equal(f->m.r[2].path, path);
    assert_int_equal(f->r.dirty, 0);
    answer(&f->m, 2, GQ_OK, 200, "{}", NULL);
    assert_int_equal(f->r.dirty, 1);

    f->r.status_known = 0; /* the controller forgot the object */
    answer(&f->m, 1, GQ_ECONFLICT, 409, "{}", "conflict");
    assert_int_equal(f->r.status_ends, 2);
    assert_int_equal(f->r.se.gen, 8);
    assert_int_equal(f->r.se.transition, 0);
    assert_int_equal(f->m.n, 3); /* no GET */
}

/* Events carry the identity, low lane; stop drops the low lane's queue. */
static void test_event_and_stop(void **state)
{
    struct fx *f = *state;
    cJSON *job = cJSON_Parse(JOB_TRAIN);
    assert_non_null(job);
    ctl_act_event(&f->a, job, "Normal", "Waiting", "waits");
    cJSON_Delete(job);
    assert_int_equal(f->m.n, 1);
    assert_string_equal(f->m.r[0].path, "event:ml/train");
    assert_string_equal(f->m.r[0].reason, "Waiting");
    assert_string_equal(f->m.r[0].instance, "gangq-test_1");
    assert_int_equal(f->m.r[0].prio, KUBE_PRIO_LOW);
    f->m.dropped = 3;
    ctl_act_stop(&f->a);
    assert_int_equal(f->m.drops, 1);
    assert_int_equal(f->m.drop_prio, KUBE_PRIO_LOW);
}

/* The Normal Events' budget: the total, and each namespace at most a quarter
 * of it; Warning Events are not limited. */
static void test_event_budget(void **state)
{
    struct fx *f = *state;
    cJSON *ml = cJSON_Parse(JOB_TRAIN); /* namespace ml */
    cJSON *o1 = cJSON_Parse("{\"kind\":\"GPUJob\",\"metadata\":{\"namespace\":\"o1\",\"name\":\"x\"}}");
    cJSON *o2 = cJSON_Parse("{\"kind\":\"GPUJob\",\"metadata\":{\"namespace\":\"o2\",\"name\":\"y\"}}");
    assert_non_null(ml);
    assert_non_null(o1);
    assert_non_null(o2);
    ctl_act_event_budget(&f->a, 1, 8); /* total: 8 at once; a namespace: 2 at once */
    ctl_act_write_credit(&f->a, 100);  /* decisions paid for them (the write budget) */
    for (int i = 0; i < 5; i++)
        ctl_act_event(&f->a, ml, "Normal", "Admitted", "admitted");
    assert_int_equal(f->m.n, 2); /* ml's quarter */
    ctl_act_event(&f->a, ml, "Warning", "Preempted", "preempted");
    assert_int_equal(f->m.n, 3); /* a Warning goes */
    for (int i = 0; i < 5; i++) {
        ctl_act_event(&f->a, o1, "Normal", "Admitted", "admitted");
        ctl_act_event(&f->a, o2, "Normal", "Admitted", "admitted");
    }
    assert_int_equal(f->m.n, 7); /* the other namespaces still had theirs */
    assert_string_equal(f->m.r[3].path, "event:o1/x");
    assert_string_equal(f->m.r[4].path, "event:o2/y");
    assert_int_equal(f->a.events_sent, 7);
    assert_int_equal(f->a.events_throttled, 9);
    ctl_act_event_budget(&f->a, 0, 1); /* no limit */
    ctl_act_event(&f->a, ml, "Normal", "Admitted", "admitted");
    assert_int_equal(f->m.n, 8);
    cJSON_Delete(ml);
    cJSON_Delete(o1);
    cJSON_Delete(o2);
}

/* Normal Events that narrate a decision are paid from the write budget.
 * With nothing credited one goes on the floor's token; an admission's credit
 * (its pods + 2) pays for what its writes leave over; every write sent
 * spends; a Warning never waits, nor does a job's Waiting Event (it says why
 * the job waits). */
static void test_event_write_budget(void **state)
{
    struct fx *f = *state;
    cJSON *ml = cJSON_Parse(JOB_TRAIN);
    assert_non_null(ml);
    ctl_act_event_budget(&f->a, 0, 1); /* the events' own budget: no limit */
    for (int i = 0; i < 5; i++)
        ctl_act_event(&f->a, ml, "Normal", "Succeeded", "succeeded");
    assert_int_equal(f->m.n, 1); /* the floor's one token */
    assert_true(f->a.writes.credit == -1); /* sent, so spent: a debt */
    ctl_act_event(&f->a, ml, "Warning", "Preempted", "preempted");
    assert_int_equal(f->m.n, 2);
    assert_true(f->a.writes.credit == -2);
    ctl_act_event(&f->a, ml, "Normal", "Waiting", "Quota: waiting"); /* not paid, spent */
    assert_int_equal(f->m.n, 3);
    assert_true(f->a.writes.credit == -3);
    ctl_act_write_credit(&f->a, 4 + 2); /* an admission of 4 pods */
    for (int i = 0; i < 5; i++)
        ctl_act_event(&f->a, ml, "Normal", "Admitted", "admitted");
    assert_int_equal(f->m.n, 6); /* the debt of 3 paid, 3 left */
    assert_true(f->a.writes.credit == 0);
    assert_int_equal(f->a.events_throttled, 4 + 2);
    cJSON_Delete(ml);
}

/* Without a store nothing is read or marked; the sets stay empty. */
static void test_no_store(void **state)
{
    struct fx *f = *state;
    intent_add(f, STORE_INTENT_DELETE, "ml/train");
    f->a.st = NULL;
    ctl_act_intents(&f->a);
    ctl_act_flush_done(&f->a);
    assert_int_equal(f->m.n, 0);
    assert_int_equal(f->a.ninflight, 0);
    assert_int_equal(f->r.settled, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_admit_creates_and_settles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_deletes_indexed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_deletes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_in_cycle_txn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_releases_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_confirm_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_patch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_and_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_write_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_store, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
