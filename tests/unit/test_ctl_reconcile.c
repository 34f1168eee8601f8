/* Unit tests of the controller's reconcile as a whole, without an API
 * server: controller/ctl_bench.c's harness (struct ctl_fake) runs the real
 * ctl_reconcile, store (a SQLite file in a temporary directory) and
 * actuator on caches filled here, and answers the actuator's requests as an
 * API server and a kubelet would. What the event-driven reconcile must do:
 * admit what fits and nothing twice; an idle reconcile examines no job in
 * full and sends nothing; freed GPUs go to the waiting jobs; a finished job
 * goes dormant and stays so; a deleted GPUJob's store row goes (whatever
 * else happened since), a re-created one starts afresh. A reconcile with no
 * input since the last and nothing due is quiet (skipped); one that time
 * makes due (the end of a minimum-runtime protection while a job waits)
 * runs then and decides what that time allows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctl.h"
#include "ctl_int.h"

struct env {
    char dir[64];
    char db[128];
    struct ctl_fake *f;
    struct gq_ctl *c;
};

static cJSON *parse(const char *json)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    return o;
}

static void put(struct env *e, int idx, enum kube_event_type type, const char *json)
{
    assert_int_equal(ctl_fake_put(e->f, idx, type, parse(json)), 0);
}

/* Job jN of class cls, priority prio, gpus GPUs. */
static void put_job_of(struct env *e, int i, const char *uid, const char *cls, int prio, int gpus)
{
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"metadata\":{\"name\":\"j%d\","
             "\"namespace\":\"a\",\"uid\":\"%s\",\"resourceVersion\":\"1\",\"generation\":1,"
             "\"creationTimestamp\":\"2026-12-01T00:00:00Z\"},\"spec\":{\"class\":\"%s\",\"priority\":%d,"
             "\"gpu\":{\"count\":%d},\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"m\","
             "\"image\":\"busybox\"}]}}}}",
             i, uid, cls, prio, gpus);
    cJSON *o = parse(json);
    ctl_prune_gpujob(o);
    assert_int_equal(ctl_fake_put(e->f, INF_JOBS, KUBE_EV_ADDED, o), 0);
}

/* Job jN (Batch, 2 GPUs) with spec.ttlSecondsAfterFinished ttl (< 0: none). */
/* GPUJob jN of 2 GPUs with extra spec fields (JSON members, each ending
 * with a comma) before the others, at generation gen (1: ADDED, else the
 * cached one MODIFIED). */
static void put_job_gen(struct env *e, int i, const char *uid, const char *extra, int gen)
{
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"metadata\":{\"name\":\"j%d\","
             "\"namespace\":\"a\",\"uid\":\"%s\",\"resourceVersion\":\"%d\",\"generation\":%d,"
             "\"creationTimestamp\":\"2026-12-01T00:00:00Z\"},\"spec\":{%s\"gpu\":{\"count\":2},"
             "\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"m\","
             "\"image\":\"busybox\"}]}}}}",
             i, uid, gen, gen, extra);
    cJSON *o = parse(json);
    ctl_prune_gpujob(o);
    assert_int_equal(ctl_fake_put(e->f, INF_JOBS, gen == 1 ? KUBE_EV_ADDED : KUBE_EV_MODIFIED, o), 0);
}

static void put_job_extra(struct env *e, int i, const char *uid, const char *extra)
{
    put_job_gen(e, i, uid, extra, 1);
}

static void put_job_ttl(struct env *e, int i, const char *uid, int ttl)
{
    char ttls[64] = "";
    if (ttl >= 0)
        snprintf(ttls, sizeof(ttls), "\"ttlSecondsAfterFinished\":%d,", ttl);
    put_job_extra(e, i, uid, ttls);
}

static void put_job(struct env *e, int i, const char *uid)
{
    put_job_of(e, i, uid, "Batch", 0, 2);
}

/* Reconcile and answer until a reconcile sends nothing (at most 20). */
static void settle(struct env *e)
{
    for (int k = 0; k < 20; k++) {
        struct ctl_fake_counts a = ctl_fake_requests(e->f);
        struct ctl_rc_result res = ctl_reconcile(e->c);
        assert_int_equal(res.rc, 0);
        if (res.quiet)
            return; /* nothing changed since the last, nothing due */
        assert_true(res.committed);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
        struct ctl_fake_counts b = ctl_fake_requests(e->f);
        if (k > 0 && a.creates == b.creates && a.deletes == b.deletes && a.patches == b.patches)
            return;
    }
    fail_msg("the reconciles never stopped sending requests");
}

/* The store state of job jN, -1 when it has no row. */
static int state_of(struct env *e, int i)
{
    char key[32], err[256];
    snprintf(key, sizeof(key), "a/j%d", i);
    struct store_job *row = NULL;
    int rc = store_job_get(e->c->st, key, &row, err, sizeof(err));
    if (rc == GQ_ENOTFOUND)
        return -1;
    assert_int_equal(rc, 0);
    int st = row->state;
    store_job_free(row);
    return st;
}

static int holding(int st)
{
    return st == STORE_ADMITTED || st == STORE_RUNNING;
}

/* The pods of jN (their cache keys into keys[], at most 4). */
static int pods_of(struct env *e, int i, char keys[][CTL_KEY_MAX])
{
    char key[32];
    snprintf(key, sizeof(key), "a/j%d", i);
    struct ctl_memo *m = ctl_memo_get(&e->c->memo, key, 0);
    int n = 0;
    for (int p = 0; m && p < m->pods.npods && n < 4; p++)
        assert_int_equal(kube_object_key(m->pods.pods[p], keys[n++], CTL_KEY_MAX), 0);
    return n;
}

/* The cached object key of cache idx with status.k1 = v1 (and k2 = v2 when
 * k2 is not NULL), as a MODIFIED event. */
static void status_modified(struct env *e, int idx, const char *key, const char *k1, const char *v1,
                            const char *k2, const char *v2)
{
    const cJSON *cur = ctl_fake_get(e->f, idx, key);
    assert_non_null(cur);
    cJSON *o = cJSON_Duplicate(cur, 1);
    cJSON *st = ctl_obj_child(o, "status");
    assert_non_null(st);
    assert_int_equal(ctl_obj_set_str(st, k1, v1), 0);
    if (k2)
        assert_int_equal(ctl_obj_set_str(st, k2, v2), 0);
    assert_int_equal(ctl_fake_put(e->f, idx, KUBE_EV_MODIFIED, o), 0);
}

static void pod_phase(struct env *e, const char *key, const char *phase)
{
    status_modified(e, INF_PODS, key, "phase", phase, NULL, NULL);
}

/* Team ta (namespace a) with a quota of gpus GPUs of any type, at
 * resourceVersion and generation rv, as an event of type. */
static void team_quota(struct env *e, enum kube_event_type type, int gpus, int rv)
{
    char json[512];
    snprintf(json, sizeof(json),
             "{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"Team\",\"metadata\":{\"name\":\"ta\",\"uid\":\"t1\","
             "\"resourceVersion\":\"%d\",\"generation\":%d},\"spec\":{\"namespaces\":[\"a\"],"
             "\"quota\":[{\"gpuType\":\"*\",\"gpus\":%d}]}}",
             rv, rv, gpus);
    put(e, INF_TEAMS, type, json);
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    snprintf(e->dir, sizeof(e->dir), "/tmp/gangq-unit-rc.XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    snprintf(e->db, sizeof(e->db), "%s/gangq.db", e->dir);
    char err[512] = "";
    e->f = ctl_fake_new(e->db, err, sizeof(err));
    assert_non_null(e->f);
    e->c = ctl_fake_ctl(e->f);
    e->c->cfg.status_settle_s = 0;
    /* two nodes of 8 GPUs, one Team of 16 for namespace a */
    for (int n = 0; n < 2; n++) {
        char json[512];
        snprintf(json, sizeof(json),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n%d\",\"uid\":\"node%d\","
                 "\"labels\":{\"kubernetes.io/hostname\":\"n%d\"}},\"status\":{\"allocatable\":{\"cpu\":\"64\","
                 "\"memory\":\"256Gi\",\"nvidia.com/gpu\":\"8\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                 n, n, n);
        put(e, INF_NODES, KUBE_EV_ADDED, json);
    }
    team_quota(e, KUBE_EV_ADDED, 16, 1);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    ctl_fake_free(e->f);
    store_remove_files(e->db);
    rmdir(e->dir);
    free(e);
    return 0;
}

static void test_reconcile_event_driven(void **state)
{
    struct env *e = *state;
    char uid[32];
    /* ten jobs of 2 GPUs on 16: eight admitted, two wait */
    for (int i = 0; i < 10; i++) {
        snprintf(uid, sizeof(uid), "u%d", i);
        put_job(e, i, uid);
    }
    settle(e);
    int held = 0, waiting = 0;
    for (int i = 0; i < 10; i++) {
        int st = state_of(e, i);
        held += holding(st);
        waiting += st == STORE_QUEUED;
    }
    assert_int_equal(held, 8);
    assert_int_equal(waiting, 2);
    struct ctl_fake_counts n0 = ctl_fake_requests(e->f);
    assert_int_equal(n0.creates, 8); /* one pod each, none twice */

    /* idle: nothing examined in full, nothing sent, even by a reconcile
     * asked for (as a due time asks) */
    uint64_t full0 = e->c->m.jobs_full;
    for (int k = 0; k < 3; k++) {
        e->c->inputs++;
        struct ctl_rc_result res = ctl_reconcile(e->c);
        assert_int_equal(res.rc, 0);
        assert_false(res.quiet);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
    }
    assert_int_equal(e->c->m.jobs_full, full0);
    struct ctl_fake_counts n1 = ctl_fake_requests(e->f);
    assert_int_equal(n1.creates, n0.creates);
    assert_int_equal(n1.patches, n0.patches);

    /* the pods of two admitted jobs succeed: those two are Succeeded, the
     * two waiting ones take their GPUs */
    int done[2], nd = 0;
    for (int i = 0; i < 10 && nd < 2; i++)
        if (holding(state_of(e, i))) {
            char keys[4][CTL_KEY_MAX];
            int np = pods_of(e, i, keys);
            assert_int_equal(np, 1);
            pod_phase(e, keys[0], "Succeeded");
            done[nd++] = i;
        }
    settle(e);
    assert_int_equal(state_of(e, done[0]), STORE_SUCCEEDED);
    assert_int_equal(state_of(e, done[1]), STORE_SUCCEEDED);
    held = 0;
    for (int i = 0; i < 10; i++)
        held += holding(state_of(e, i));
    assert_int_equal(held, 8);
    assert_int_equal(ctl_fake_requests(e->f).creates, 10);

    /* a finished job with no stray pod goes dormant at once (no wait of
     * CTL_STRAY_RETRY_MS after its last intent ended: that is for pods a
     * delete was sent for), and stays dormant */
    settle(e);
    assert_int_equal(e->c->m.jobs_dormant, 2);
    full0 = e->c->m.jobs_full;
    for (int k = 0; k < 3; k++)
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
    assert_int_equal(e->c->m.jobs_dormant, 2);
    assert_int_equal(e->c->m.jobs_full, full0);
    assert_int_equal(e->c->m.jobs_by_state[STORE_SUCCEEDED], 2);
    /* the kept rows freed (as after a failed reconcile or a new term as
     * leader): the dormant jobs find their rows among those read again (a
     * row kept from before would be freed memory: ASan's to see) */
    ctl_rows_release(e->c);
    e->c->restart_done = 0;
    assert_int_equal(ctl_reconcile(e->c).rc, 0);
    assert_int_equal(ctl_fake_deliver(e->f), 0);
    assert_int_equal(ctl_reconcile(e->c).rc, 0);
    assert_int_equal(e->c->m.jobs_by_state[STORE_SUCCEEDED], 2);
    assert_int_equal(e->c->m.jobs_dormant, 2);

    /* a dormant job deleted, then an idle reconcile, then another job (one
     * that holds GPUs) deleted: both rows go, and the held job's GPUs go to
     * nobody else twice */
    char key[96];
    snprintf(key, sizeof(key), "{\"metadata\":{\"namespace\":\"a\",\"name\":\"j%d\"}}", done[0]);
    put(e, INF_JOBS, KUBE_EV_DELETED, key);
    settle(e);
    assert_int_equal(state_of(e, done[0]), -1);
    int victim = -1;
    for (int i = 0; i < 10 && victim < 0; i++)
        if (holding(state_of(e, i)))
            victim = i;
    assert_true(victim >= 0);
    assert_int_equal(ctl_reconcile(e->c).rc, 0); /* idle in between */
    snprintf(key, sizeof(key), "{\"metadata\":{\"namespace\":\"a\",\"name\":\"j%d\"}}", victim);
    put(e, INF_JOBS, KUBE_EV_DELETED, key);
    settle(e);
    assert_int_equal(state_of(e, victim), -1);
    char keys[4][CTL_KEY_MAX];
    snprintf(key, sizeof(key), "a/j%d", victim);
    assert_int_equal(pods_of(e, victim, keys), 0); /* its pod was deleted */
    assert_int_equal(state_of(e, done[1]), STORE_SUCCEEDED); /* the other dormant one stays */

    /* a kept row that no longer matches its job (as if the store moved on
     * without an event): the job is looked at again, its row replaced, and
     * the next reconciles use the new row (the old one is freed: ASan's to
     * see if a memo still pointed at it) */
    int moved = -1;
    for (int i = 0; i < 10 && moved < 0; i++)
        if (holding(state_of(e, i)) && i != victim)
            moved = i;
    assert_true(moved >= 0);
    snprintf(key, sizeof(key), "a/j%d", moved);
    int found = 0;
    for (int k = 0; k < e->c->nrows; k++)
        if (!strcmp(e->c->rows[k]->key, key)) {
            e->c->rows[k]->generation += 7;
            found = 1;
        }
    assert_true(found);
    full0 = e->c->m.jobs_full;
    for (int k = 0; k < 3; k++) {
        e->c->inputs++; /* a reconcile asked for: this one change came without an event */
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
    }
    assert_true(e->c->m.jobs_full > full0);
    assert_true(holding(state_of(e, moved)));

    /* the deleted held job re-created (a new uid): a fresh row, admitted */
    put_job(e, victim, "u-new");
    settle(e);
    assert_true(holding(state_of(e, victim)));
    held = 0;
    for (int i = 0; i < 10; i++)
        held += holding(state_of(e, i));
    assert_int_equal(held, 8);
}

/* Reconcile (answering its requests) until one is quiet; how many ran. */
static int until_quiet(struct env *e)
{
    for (int k = 0; k < 10; k++) {
        struct ctl_rc_result res = ctl_reconcile(e->c);
        assert_int_equal(res.rc, 0);
        if (res.quiet)
            return k;
        assert_int_equal(ctl_fake_deliver(e->f), 0);
    }
    fail_msg("no quiet reconcile in 10");
    return -1;
}

static void test_reconcile_quiet_and_due(void **state)
{
    struct env *e = *state;
    e->c->cfg.min_runtime_s = 3;
    ctl_scfg_init(e->c);
    char uid[32];
    /* eight Batch jobs of 2 GPUs fill the Team's 16 */
    for (int i = 0; i < 8; i++) {
        snprintf(uid, sizeof(uid), "u%d", i);
        put_job(e, i, uid);
    }
    settle(e);
    (void)until_quiet(e);
    int64_t t_adm = ctl_now_ms(); /* all eight admitted by now */
    for (int i = 0; i < 8; i++)
        assert_true(holding(state_of(e, i)));

    /* nothing changes: quiet reconciles, no phase run, nothing sent */
    int64_t n0 = e->c->reconciles;
    uint64_t q0 = e->c->m.reconciles_quiet;
    struct ctl_fake_counts r0 = ctl_fake_requests(e->f);
    for (int k = 0; k < 5; k++)
        assert_true(ctl_reconcile(e->c).quiet);
    assert_int_equal(e->c->reconciles, n0);
    assert_int_equal(e->c->m.reconciles_quiet, q0 + 5);
    struct ctl_fake_counts r1 = ctl_fake_requests(e->f);
    assert_int_equal(r1.creates + r1.patches + r1.deletes, r0.creates + r0.patches + r0.deletes);

    /* an event: the next reconcile runs; a Training job of priority 100
     * needing 4 GPUs waits, its victims protected by the minimum runtime */
    put_job_of(e, 8, "u8", "Training", 100, 4);
    struct ctl_rc_result res = ctl_reconcile(e->c);
    assert_false(res.quiet);
    assert_int_equal(res.rc, 0);
    assert_int_equal(ctl_fake_deliver(e->f), 0);
    (void)until_quiet(e);
    assert_int_equal(state_of(e, 8), STORE_QUEUED);
    struct ctl_memo *m = ctl_memo_get(&e->c->memo, "a/j8", 0);
    assert_non_null(m);
    assert_non_null(strstr(ctl_str(m->wait.wait_msg), "minimum runtime"));
    /* no event from here: each reconcile is quiet until the next due time
     * (a stray-pod look, a position epoch, the protection's end), then runs;
     * the one at the end of the protection (3 s after the admissions, the
     * core's due) preempts, not a later one (the next epoch is 5 s after) */
    int preempted = 0;
    for (int k = 0; k < 10 && !preempted; k++) {
        int64_t now = ctl_now_ms();
        assert_true(e->c->due_ms > now);
        assert_true(ctl_reconcile(e->c).quiet);
        assert_int_equal(state_of(e, 8), STORE_QUEUED);
        usleep((useconds_t)(e->c->due_ms - now + 20) * 1000);
        res = ctl_reconcile(e->c);
        assert_false(res.quiet);
        assert_int_equal(res.rc, 0);
        for (int i = 0; i < 8; i++)
            preempted += state_of(e, i) == STORE_PREEMPTED;
        assert_int_equal(ctl_fake_deliver(e->f), 0);
    }
    assert_int_equal(preempted, 2);
    assert_true(ctl_now_ms() <= t_adm + 3000 + 400);
    /* the victims' pods deleted (the fake answers), then it is admitted */
    settle(e);
    assert_true(holding(state_of(e, 8)));
}

/* Counts entries whose action is ctx's. */
static int audit_action_cb(void *ctx, const struct store_audit *a)
{
    struct {
        const char *action;
        int n;
    } *c = ctx;
    c->n += !strcmp(a->action, c->action);
    return 0;
}

/* Counts entries whose job key starts with ctx's prefix. */
static int audit_count_cb(void *ctx, const struct store_audit *a)
{
    struct {
        const char *kp;
        int *n;
    } *c = ctx;
    if (!strncmp(a->job_key, c->kp, strlen(c->kp)))
        (*c->n)++;
    return 0;
}

static int job_cached(struct env *e, int i)
{
    char key[32];
    snprintf(key, sizeof(key), "a/j%d", i);
    return ctl_fake_get(e->f, INF_JOBS, key) != NULL;
}

/* Reconciles (their requests answered) until job jN's GPUJob is gone, for
 * at most ms; the wall time (ms) it went at, 0 if it did not. */
static int64_t until_deleted(struct env *e, int i, int ms)
{
    int64_t t0 = ctl_now_ms();
    while (ctl_now_ms() - t0 < ms) {
        struct ctl_rc_result res = ctl_reconcile(e->c);
        assert_int_equal(res.rc, 0);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
        if (!job_cached(e, i))
            return ctl_now_ms();
        if (res.quiet)
            usleep(20000);
    }
    return 0;
}

static int audit_of(struct env *e, const char *key, const char *action)
{
    struct store_audit_filter f = {.job_key = key};
    struct audit_rows {
        const char *action;
        int n;
    } ctx = {action, 0};
    char err[256];
    assert_int_equal(store_audit_query(e->c->st, &f, audit_action_cb, &ctx, err, sizeof(err)), 0);
    return ctx.n;
}

/* spec.ttlSecondsAfterFinished: a finished GPUJob is deleted (uid
 * precondition; its row goes with the DELETED event, an audit entry says
 * why) that long after its completionTime, once its final status is what
 * the API server shows: 0 at once, a longer one after the job went dormant
 * (the due time wakes it, with no event); one without it stays. */
static void test_reconcile_finished_ttl(void **state)
{
    struct env *e = *state;
    const int ttl0 = CTL_STRAY_RETRY_MS / 1000 + 3;
    put_job_ttl(e, 0, "u0", ttl0);
    put_job_ttl(e, 1, "u1", -1);
    put_job_ttl(e, 2, "u2", 0);
    settle(e);
    for (int i = 0; i < 3; i++)
        assert_true(holding(state_of(e, i)));
    for (int i = 0; i < 3; i++) {
        char keys[4][CTL_KEY_MAX];
        assert_int_equal(pods_of(e, i, keys), 1);
        pod_phase(e, keys[0], "Succeeded");
    }
    settle(e);
    int64_t t_done = ctl_now_ms();
    for (int i = 0; i < 2; i++)
        assert_int_equal(state_of(e, i), STORE_SUCCEEDED);

    /* TTL 0: gone once its Succeeded status is shown (the reconciles above
     * may have seen it already) */
    assert_true(until_deleted(e, 2, 3000) > 0);
    settle(e);
    assert_int_equal(state_of(e, 2), -1);
    assert_int_equal(audit_of(e, "a/j2", "ttl-delete"), 1);
    assert_int_equal(ctl_fake_requests(e->f).job_deletes, 1);
    assert_true(job_cached(e, 0) && job_cached(e, 1));

    /* the others go dormant meanwhile */
    settle(e);
    struct ctl_memo *m0 = ctl_memo_get(&e->c->memo, "a/j0", 0);
    assert_non_null(m0);
    assert_true(m0->decode.dormant);
    assert_int_equal(e->c->m.jobs_dormant, 2);
    assert_true(job_cached(e, 0));

    /* j0 at its completionTime (whole seconds) + ttl0: not before */
    int64_t gone = until_deleted(e, 0, (ttl0 + 4) * 1000);
    assert_true(gone > 0);
    assert_true(gone >= t_done - 1000 + ttl0 * 1000);
    settle(e); /* the DELETED event: its row goes */
    assert_int_equal(state_of(e, 0), -1);
    assert_int_equal(audit_of(e, "a/j0", "ttl-delete"), 1);
    assert_int_equal(e->c->m.jobs_ttl_deleted, 2);
    assert_int_equal(ctl_fake_requests(e->f).job_deletes, 2); /* once each */

    /* the one without a TTL stays, dormant, and nothing more is sent */
    (void)until_quiet(e);
    for (int k = 0; k < 3; k++)
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
    assert_true(job_cached(e, 1));
    assert_int_equal(state_of(e, 1), STORE_SUCCEEDED);
    assert_int_equal(audit_of(e, "a/j1", "ttl-delete"), 0);
    assert_int_equal(ctl_fake_requests(e->f).job_deletes, 2);
}

/* spec.maxRunSeconds: a running job is stopped at its admission + the
 * limit by the reconcile due then (no event comes), Failed with reason
 * DeadlineExceeded and its pods deleted; a job without a limit runs on. */
static void test_reconcile_max_run(void **state)
{
    struct env *e = *state;
    put_job_extra(e, 0, "u0", "\"maxRunSeconds\":2,");
    put_job_extra(e, 1, "u1", "");
    settle(e);
    for (int i = 0; i < 2; i++) {
        char keys[4][CTL_KEY_MAX];
        assert_int_equal(pods_of(e, i, keys), 1);
        pod_phase(e, keys[0], "Running");
    }
    settle(e);
    (void)until_quiet(e);
    assert_int_equal(state_of(e, 0), STORE_RUNNING);
    assert_int_equal(state_of(e, 1), STORE_RUNNING);
    char err[256];
    struct store_job *row = NULL;
    assert_int_equal(store_job_get(e->c->st, "a/j0", &row, err, sizeof(err)), 0);
    int64_t end = row->admitted_ms + 2000;
    store_job_free(row);
    struct ctl_fake_counts d0 = ctl_fake_requests(e->f);
    /* quiet until the limit (its end is the reconcile's due time), then Failed */
    int failed = 0;
    for (int k = 0; k < 20 && !failed; k++) {
        int64_t now = ctl_now_ms();
        assert_true(e->c->due_ms > 0 && e->c->due_ms <= end);
        if (now < end)
            assert_true(ctl_reconcile(e->c).quiet);
        usleep((useconds_t)(GQ_MAX(e->c->due_ms - now, 0) + 20) * 1000);
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
        failed = state_of(e, 0) == STORE_FAILED;
        assert_true(!failed || ctl_now_ms() >= end);
    }
    assert_true(failed);
    settle(e);
    assert_int_equal(ctl_fake_requests(e->f).deletes, d0.deletes + 1); /* its pod */
    assert_int_equal(audit_of(e, "a/j0", "fail"), 1);
    const cJSON *o = ctl_fake_get(e->f, INF_JOBS, "a/j0");
    assert_non_null(o);
    assert_string_equal(ctl_obj_str(o, "status", "state"), "Failed");
    const cJSON *cond, *found = NULL;
    cJSON_ArrayForEach(cond, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "status"),
                                                              "conditions"))
    {
        if (!strcmp(ctl_str(ctl_obj_str(cond, "type", NULL)), "Failed"))
            found = cond;
    }
    assert_non_null(found);
    assert_string_equal(ctl_obj_str(found, "reason", NULL), "DeadlineExceeded");
    assert_int_equal(e->c->m.jobs_deadline_exceeded, 1);
    assert_non_null(strstr(ctl_obj_str(found, "message", NULL), "ran past spec.maxRunSeconds (2s"));
    assert_int_equal(state_of(e, 1), STORE_RUNNING);
}

/* A running job's maxRunSeconds may be lowered (at once), not raised: the
 * limit of its admission stays (a job that backfilled a reserved node cannot
 * stay longer by a patch). j0 admitted with 2 s, raised to 600: stopped at
 * 2 s; j1 admitted with 600, lowered to 2: stopped 2 s after its admission. */
static void test_reconcile_max_run_edit(void **state)
{
    struct env *e = *state;
    put_job_extra(e, 0, "u0", "\"maxRunSeconds\":2,");
    put_job_extra(e, 1, "u1", "\"maxRunSeconds\":600,");
    settle(e);
    assert_true(holding(state_of(e, 0)) && holding(state_of(e, 1)));
    put_job_gen(e, 0, "u0", "\"maxRunSeconds\":600,", 2);
    put_job_gen(e, 1, "u1", "\"maxRunSeconds\":2,", 2);
    settle(e);
    char err[256];
    struct store_job *row = NULL;
    assert_int_equal(store_job_get(e->c->st, "a/j1", &row, err, sizeof(err)), 0);
    int64_t end = row->admitted_ms + 2000;
    store_job_free(row);
    for (int k = 0; k < 40 && (state_of(e, 0) != STORE_FAILED || state_of(e, 1) != STORE_FAILED); k++) {
        usleep(100 * 1000);
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
    }
    assert_int_equal(state_of(e, 0), STORE_FAILED);
    assert_int_equal(state_of(e, 1), STORE_FAILED);
    assert_true(ctl_now_ms() >= end);
}

/* jN's cached object with its status.state (and completionTime) replaced: a
 * status-only MODIFIED event, as gangq's own status write comes back. */
static void echo_state(struct env *e, int i, const char *state)
{
    char key[32];
    snprintf(key, sizeof(key), "a/j%d", i);
    status_modified(e, INF_JOBS, key, "state", state, "completionTime", "2026-12-01T00:00:09Z");
}

/* A status echo changes nothing a reconcile reads and asks for none, but
 * one that shows a finished state of a job with ttlSecondsAfterFinished
 * does (its deletion counts from there); the job is not examined again. */
static void test_finished_echo_wakes_ttl_jobs(void **state)
{
    struct env *e = *state;
    put_job_ttl(e, 0, "u0", 60);
    put_job_ttl(e, 1, "u1", -1);
    settle(e);
    (void)until_quiet(e);
    uint64_t in0 = e->c->inputs, full0 = e->c->m.jobs_full, se0 = e->c->m.job_status_events;
    echo_state(e, 1, "Succeeded"); /* no TTL */
    echo_state(e, 0, "Running");   /* not finished */
    assert_int_equal(e->c->inputs, in0);
    echo_state(e, 0, "Succeeded");
    assert_int_equal(e->c->inputs, in0 + 1);
    echo_state(e, 0, "Succeeded"); /* the same state again */
    assert_int_equal(e->c->inputs, in0 + 1);
    assert_int_equal(e->c->m.job_status_events, se0 + 4); /* all four status-only */
    struct ctl_rc_result res = ctl_reconcile(e->c);
    assert_false(res.quiet);
    assert_int_equal(e->c->m.jobs_full, full0);
}

/* A finished job with ttlSecondsAfterFinished 0 that its owner deleted
 * already, a finalizer holding it (metadata.deletionTimestamp): gangq sends
 * no DELETE of its own, however many reconciles pass. */
static void test_ttl_not_while_deleting(void **state)
{
    struct env *e = *state;
    put_job_ttl(e, 0, "u0", 0);
    settle(e);
    assert_true(holding(state_of(e, 0)));
    const cJSON *cur = ctl_fake_get(e->f, INF_JOBS, "a/j0");
    assert_non_null(cur);
    cJSON *o = cJSON_Duplicate(cur, 1);
    assert_int_equal(ctl_obj_set_str(ctl_obj_child(o, "metadata"), "deletionTimestamp", "2026-12-01T00:00:05Z"), 0);
    assert_int_equal(ctl_fake_put(e->f, INF_JOBS, KUBE_EV_MODIFIED, o), 0);
    char keys[4][CTL_KEY_MAX];
    assert_int_equal(pods_of(e, 0, keys), 1);
    pod_phase(e, keys[0], "Succeeded");
    settle(e);
    assert_int_equal(state_of(e, 0), STORE_SUCCEEDED);
    for (int k = 0; k < 5; k++) {
        e->c->inputs++; /* reconciles asked for */
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
    }
    assert_int_equal(ctl_fake_requests(e->f).job_deletes, 0);
    assert_true(job_cached(e, 0));
    assert_int_equal(audit_of(e, "a/j0", "ttl-delete"), 0);
}

/* An API server that refuses the delete (RBAC without it, say): each refusal
 * doubles the wait before the next (10 s, 20 s, 40 s ... at most 10
 * minutes), a success resets it; meanwhile the job sleeps, and reconciles do
 * not wake it to examine it again. */
static void test_ttl_refused_backs_off(void **state)
{
    struct env *e = *state;
    ctl_fake_job_delete_status(e->f, 403);
    put_job_ttl(e, 0, "u0", 0);
    settle(e);
    char keys[4][CTL_KEY_MAX];
    assert_int_equal(pods_of(e, 0, keys), 1);
    pod_phase(e, keys[0], "Succeeded");
    settle(e);
    (void)until_quiet(e);
    assert_int_equal(ctl_fake_requests(e->f).job_deletes, 1); /* refused once, not again soon */
    assert_true(job_cached(e, 0));
    struct ctl_memo *m = ctl_memo_get(&e->c->memo, "a/j0", 0);
    assert_non_null(m);
    assert_int_equal(m->ttl.fails, 1);
    int64_t now = ctl_now_ms();
    assert_true(m->ttl.retry_ms > now + 9000 && m->ttl.retry_ms <= now + 10000);
    /* asleep till then: reconciles asked for wake and examine nothing */
    usleep((CTL_STRAY_RETRY_MS + 200) * 1000);
    settle(e);
    assert_true(m->decode.dormant);
    uint64_t woken0 = e->c->m.jobs_woken, full0 = e->c->m.jobs_full;
    for (int k = 0; k < 3; k++) {
        e->c->inputs++;
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
    }
    assert_int_equal(e->c->m.jobs_woken, woken0);
    assert_int_equal(e->c->m.jobs_full, full0);
    assert_int_equal(ctl_fake_requests(e->f).job_deletes, 1);
    /* the waits double, up to ten minutes; a success resets them */
    const int64_t want[] = {20000, 40000, 80000, 160000, 320000, 600000, 600000};
    for (size_t k = 0; k < GQ_ARRAY_LEN(want); k++) {
        e->c->act.hooks.job_deleted(e->c, "a/j0", GQ_EHTTP);
        int64_t d = m->ttl.retry_ms - ctl_now_ms();
        assert_true(d > want[k] - 1000 && d <= want[k]);
    }
    e->c->act.hooks.job_deleted(e->c, "a/j0", GQ_OK);
    assert_int_equal(m->ttl.fails, 0);
    assert_true(m->ttl.retry_ms - ctl_now_ms() <= CTL_TTL_RETRY_MS);
}

/* Audit entries of age ms, n of them, job key prefix kp (one transaction). */
static void audit_aged(struct env *e, int n, int64_t age_ms, const char *kp)
{
    char err[256], key[64];
    int64_t now = ctl_now_ms();
    assert_int_equal(store_begin_cycle(e->c->st, err, sizeof(err)), 0);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s/%d", kp, i);
        struct store_audit a = {0, now - age_ms, "gangq", "admit", "ta", key, "Queued", "Admitted", ""};
        assert_int_equal(store_audit_add(e->c->st, &a, err, sizeof(err)), 0);
    }
    assert_int_equal(store_commit_cycle(e->c->st, err, sizeof(err)), 0);
}

static int audit_count(struct env *e, const char *kp)
{
    struct store_audit_filter f = {0};
    char err[256];
    int n = 0;
    struct cnt {
        const char *kp;
        int *n;
    } ctx = {kp, &n};
    assert_int_equal(store_audit_query(e->c->st, &f, audit_count_cb, &ctx, err, sizeof(err)), 0);
    return n;
}

/* --audit-retention: a reconcile deletes the audit entries older than the
 * retention and keeps the younger ones and those it writes itself; a
 * backlog past one batch goes on in a reconcile it makes due a second
 * later, with no event; 0 keeps everything. */
static void test_reconcile_audit_retention(void **state)
{
    struct env *e = *state;
    e->c->cfg.audit_retention_s = 0;
    audit_aged(e, 3, 48 * 3600000LL, "keep0");
    put_job(e, 0, "u0");
    settle(e);
    (void)until_quiet(e);
    assert_int_equal(audit_count(e, "keep0/"), 3); /* 0 keeps them all */
    assert_true(holding(state_of(e, 0)));
    assert_true(audit_count(e, "a/j0") > 0);

    /* a day's retention: 20,001 entries two days old, 5 an hour old */
    e->c->cfg.audit_retention_s = 86400;
    e->c->last_prune_ms = 0;
    audit_aged(e, CTL_AUDIT_PRUNE_BATCH + 1, 48 * 3600000LL, "old");
    audit_aged(e, 5, 3600000LL, "young");
    put_job(e, 1, "u1");
    settle(e); /* the first reconcile prunes one batch, the next the rest */
    (void)until_quiet(e);
    assert_int_equal(audit_count(e, "keep0/"), 0);
    assert_int_equal(audit_count(e, "old/"), 0);
    assert_int_equal(e->c->m.audit_pruned, (uint64_t)CTL_AUDIT_PRUNE_BATCH + 4);
    assert_true(holding(state_of(e, 1)));

    /* a backlog with no event: a reconcile that prunes a whole batch (a full
     * pass here, as every --full-resync-interval) makes one due a second
     * later, which takes the rest; the reconciles in between are quiet */
    /* first, whatever else was due passes (a status settle, a position epoch) */
    int64_t w0 = ctl_now_ms();
    while (e->c->due_ms && ctl_now_ms() - w0 < 15000) {
        assert_int_equal(ctl_reconcile(e->c).rc, 0);
        assert_int_equal(ctl_fake_deliver(e->f), 0);
        usleep(20000);
    }
    assert_int_equal(e->c->due_ms, 0);
    e->c->last_prune_ms = 0;
    audit_aged(e, CTL_AUDIT_PRUNE_BATCH + 2, 48 * 3600000LL, "old2");
    e->c->full_next = 1;
    int64_t t_start = ctl_now_ms();
    struct ctl_rc_result res = ctl_reconcile(e->c);
    int64_t t_prune = ctl_now_ms(), res0due = res.due_ms;
    assert_int_equal(res.rc, 0);
    assert_false(res.quiet);
    assert_int_equal(audit_count(e, "old2/"), 2);
    int ran = 0;
    int64_t ran_at = 0;
    while (!ran && ctl_now_ms() - t_prune < 5000) {
        res = ctl_reconcile(e->c);
        assert_int_equal(res.rc, 0);
        ran = !res.quiet;
        ran_at = ctl_now_ms();
        if (!ran)
            usleep(20000);
    }
    assert_true(ran);
    /* due a second after the prune reconcile's start (nothing else is due
     * that soon here), and run then */
    assert_true(res0due >= t_start + 1000 && res0due <= t_prune + 1000);
    assert_true(ran_at >= res0due && ran_at - res0due < 600);
    assert_int_equal(audit_count(e, "old2/"), 0);
    assert_int_equal(e->c->m.audit_pruned, 2 * (uint64_t)CTL_AUDIT_PRUNE_BATCH + 6);
    /* the young ones and the reconciles' own stay */
    assert_int_equal(audit_count(e, "young/"), 5);
    assert_true(audit_count(e, "a/j0") > 0);
    assert_true(audit_count(e, "a/j1") > 0);
    /* done: nothing more is due for it, the reconciles are quiet again */
    (void)until_quiet(e);
    for (int k = 0; k < 3; k++)
        assert_true(ctl_reconcile(e->c).quiet);
}

/* The resourceVersion of GPUJob jN as cached (each status patch answered
 * changes it). */
static long job_rv(struct env *e, int i)
{
    char key[32];
    snprintf(key, sizeof(key), "a/j%d", i);
    const char *rv = ctl_obj_str(ctl_fake_get(e->f, INF_JOBS, key), "metadata", "resourceVersion");
    assert_non_null(rv);
    return strtol(rv, NULL, 10);
}

static int published_class(struct env *e, int i)
{
    char key[32];
    snprintf(key, sizeof(key), "a/j%d", i);
    struct ctl_memo *m = ctl_memo_get(&e->c->memo, key, 0);
    assert_non_null(m);
    return m->wait.pub.cls;
}

/* A wait reason that flips between Quota and Nodes every second (the Team's
 * quota cut and raised) is not rewritten; kept, it is written once it has
 * held --wait-reason-settle, for the head of the queue and (paid by the
 * write budget) beyond it. Runs last: it moves the controller's clock. */
static void test_reconcile_reason_flips(void **state)
{
    struct env *e = *state;
    e->c->cfg.status_settle_s = 2; /* the defaults but --position-head */
    e->c->cfg.wait_reason_settle_s = 10;
    e->c->cfg.position_head = 1;
    /* 6 GPUs held on each node (2 free on each); three 4-GPU jobs wait */
    put_job_of(e, 0, "u0", "Batch", 100, 6);
    put_job_of(e, 9, "u9", "Batch", 100, 6);
    team_quota(e, KUBE_EV_MODIFIED, 12, 2);
    for (int k = 0; k < 3; k++) {
        ctl_clock_advance(3000);
        settle(e);
    }
    assert_true(holding(state_of(e, 0)) && holding(state_of(e, 9)));
    put_job_of(e, 1, "u1", "Batch", 50, 4);
    put_job_of(e, 2, "u2", "Batch", 50, 4);
    put_job_of(e, 3, "u3", "Batch", 50, 4);
    for (int k = 0; k < 3; k++) {
        ctl_clock_advance(3000);
        settle(e);
    }
    long rv[4];
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(state_of(e, i), STORE_QUEUED);
        assert_int_equal(published_class(e, i), CTL_WAIT_QUOTA);
        rv[i] = job_rv(e, i);
    }
    /* 16 flips, a second apart */
    int trv = 3;
    for (int k = 0; k < 16; k++) {
        team_quota(e, KUBE_EV_MODIFIED, k % 2 ? 12 : 32, trv++);
        ctl_clock_advance(1000);
        settle(e);
        for (int i = 1; i <= 3; i++) {
            assert_int_equal(published_class(e, i), CTL_WAIT_QUOTA);
            assert_int_equal(job_rv(e, i), rv[i]); /* no status patch */
        }
    }
    /* quota 32 for good: written once the new reason has held 10 s */
    team_quota(e, KUBE_EV_MODIFIED, 32, trv++);
    settle(e);
    for (int t = 1; t <= 9; t++) {
        ctl_clock_advance(1000);
        settle(e);
        assert_int_equal(published_class(e, 1), CTL_WAIT_QUOTA);
        assert_int_equal(job_rv(e, 1), rv[1]);
    }
    for (int t = 0; t < 5; t++) { /* the head at once; beyond it at the budget's floor (1/s) */
        ctl_clock_advance(1000);
        settle(e);
    }
    /* the first reserves the nodes it waits for, the others wait on them */
    assert_int_equal(published_class(e, 1), CTL_WAIT_RESERVING);
    for (int i = 1; i <= 3; i++) {
        if (i > 1)
            assert_int_equal(published_class(e, i), CTL_WAIT_NODES);
        assert_int_not_equal(job_rv(e, i), rv[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reconcile_event_driven, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile_quiet_and_due, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile_audit_retention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile_finished_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile_max_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconcile_max_run_edit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finished_echo_wakes_ttl_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ttl_not_while_deleting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ttl_refused_backs_off, setup, teardown),
        /* last: it moves the controller's clock (ctl_clock_advance) */
        cmocka_unit_test_setup_teardown(test_reconcile_reason_flips, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
