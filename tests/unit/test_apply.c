/* Unit tests for controller/apply: one decision, written to a real SQLite
 * store, gives the same job, ledger, intent and audit rows whoever applies
 * it (the controller, or the simulator with no actuator), and the ledger
 * records borrowed GPUs when a Team is over its nominal quota. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply.h"
#include "ctl.h"
#include "gq.h"
#include "sim_load.h"
#include "sim_model.h"
#include "sim_run.h"
#include "store.h"

#define T0 INT64_C(1767225600000)

struct fx {
    char dir[64];
    char path[2][128];
    struct store *st[2];
    char err[512];
};

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    if (!fx)
        return -1;
    gq_strlcpy(fx->dir, "/tmp/gq-apply-test-XXXXXX", sizeof(fx->dir));
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    char dir[sizeof(fx->dir)];
    gq_strlcpy(dir, fx->dir, sizeof(dir)); /* not fx: snprintf's source and destination stay apart */
    for (int k = 0; k < 2; k++) {
        snprintf(fx->path[k], sizeof(fx->path[k]), "%s/s%d.db", dir, k);
        if (store_open(fx->path[k], NULL, &fx->st[k], fx->err, sizeof(fx->err))) {
            fprintf(stderr, "store_open: %s\n", fx->err);
            return -1;
        }
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    for (int k = 0; k < 2; k++)
        store_close(fx->st[k]);
    nftw(fx->dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    free(fx);
    return 0;
}

static void upsert(struct store *st, const char *key, const char *team, int64_t gpus)
{
    char err[256] = "";
    struct store_job j = {0};
    j.key = key;
    j.uid = "u";
    j.team = team;
    j.cls = "Batch";
    j.gpus = gpus;
    j.enqueue_ms = T0;
    j.state = STORE_QUEUED;
    if (store_job_upsert(st, &j, T0, err, sizeof(err)))
        fail_msg("upsert %s: %s", key, err);
}

/* ---- what a store holds, as text, for comparing two stores ---- */

static int dump_job(void *ctx, const struct store_job *j)
{
    struct gq_buf *b = ctx;
    return gq_buf_printf(b, "job %s %s %s attempts=%lld retries=%lld pl=%s msg=%s pre=%lld by=%s why=%s\n", j->key,
                         j->team, store_state_name(j->state), (long long)j->attempts, (long long)j->retries,
                         j->placement, j->message, (long long)j->preemptions, j->preempted_by, j->preempt_reason);
}

static int dump_alloc(void *ctx, const struct store_alloc *a)
{
    struct gq_buf *b = ctx;
    return gq_buf_printf(b, "alloc %s %s %s gpus=%lld borrowed=%lld\n", a->job_key, a->team, a->gpu_type,
                         (long long)a->gpus, (long long)a->borrowed);
}

static int dump_audit(void *ctx, const struct store_audit *a)
{
    struct gq_buf *b = ctx;
    return gq_buf_printf(b, "audit %lld %s %s %s %s %s -> %s (%s)\n", (long long)a->time_ms, a->actor, a->action,
                         a->team, a->job_key, a->old_value, a->new_value, a->reason);
}

/* Every intent, done or not (the simulator's are done at once; the store's
 * API lists pending ones only, so the table is read directly). */
static void dump_intents(const char *path, struct gq_buf *b)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT kind,job_key,payload,created_ms FROM intents ORDER BY id", -1, &q,
                                        NULL),
                     SQLITE_OK);
    while (sqlite3_step(q) == SQLITE_ROW)
        assert_int_equal(gq_buf_printf(b, "%d|%s|%s|%lld\n", sqlite3_column_int(q, 0),
                                       (const char *)sqlite3_column_text(q, 1),
                                       (const char *)sqlite3_column_text(q, 2),
                                       (long long)sqlite3_column_int64(q, 3)),
                         0);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

static void dump(struct store *st, struct gq_buf *b)
{
    char err[256] = "";
    struct store_audit_filter f = {NULL, NULL, 0, 0};
    assert_int_equal(store_jobs_each(st, STORE_MASK_ALL, dump_job, b, err, sizeof(err)), 0);
    assert_int_equal(store_allocs_each(st, dump_alloc, b, err, sizeof(err)), 0);
    assert_int_equal(store_audit_query(st, &f, dump_audit, b, err, sizeof(err)), 0);
}

struct ledger_sum {
    const char *team, *type;
    int64_t used, borrowed;
};

static int ledger_cb(void *ctx, const struct store_ledger_row *r)
{
    struct ledger_sum *s = ctx;
    if (!strcmp(r->team, s->team) && !strcmp(r->gpu_type, s->type)) {
        s->used = r->used;
        s->borrowed = r->borrowed;
    }
    return 0;
}

static struct ledger_sum ledger(struct store *st, const char *team, const char *type)
{
    char err[256] = "";
    struct ledger_sum s = {team, type, 0, 0};
    assert_int_equal(store_ledger_each(st, ledger_cb, &s, err, sizeof(err)), 0);
    return s;
}

struct one_alloc {
    const char *key;
    int found;
    struct {
        char type[64];
        int64_t gpus, borrowed;
    } a;
};

static int one_alloc_cb(void *ctx, const struct store_alloc *a)
{
    struct one_alloc *o = ctx;
    if (!strcmp(a->job_key, o->key)) {
        o->found = 1;
        gq_strlcpy(o->a.type, a->gpu_type, sizeof(o->a.type));
        o->a.gpus = a->gpus;
        o->a.borrowed = a->borrowed;
    }
    return 0;
}

static struct one_alloc alloc_of(struct store *st, const char *key)
{
    char err[256] = "";
    struct one_alloc o;
    memset(&o, 0, sizeof(o));
    o.key = key;
    assert_int_equal(store_allocs_each(st, one_alloc_cb, &o, err, sizeof(err)), 0);
    return o;
}

/* ---- the rules ---- */

static void test_rules(void **state)
{
    (void)state;
    struct sched_quota q[] = {{"A100", 8, -1, -1}, {"*", 4, -1, -1}, {"H100", 16, -1, -1}};
    assert_int_equal(apply_quota_entry(q, 3, "A100"), 0);
    assert_int_equal(apply_quota_entry(q, 3, "H100"), 2);
    assert_int_equal(apply_quota_entry(q, 3, "L4"), 1);
    assert_int_equal(apply_quota_entry(q, 3, ""), 1);
    assert_int_equal(apply_quota_entry(q, 1, "L4"), -1);
    assert_int_equal(apply_quota_entry(q, 0, "A100"), -1);
    assert_int_equal(apply_borrowed(8, 0, 8), 0);
    assert_int_equal(apply_borrowed(8, 8, 4), 4);
    assert_int_equal(apply_borrowed(8, 6, 4), 2);
    assert_int_equal(apply_borrowed(8, 20, 4), 4);
    assert_int_equal(apply_borrowed(0, 0, 3), 3);
    assert_int_equal(apply_borrowed(8, 0, 0), 0);
    struct apply_job whole = {"n/a", "t", STORE_QUEUED, 4, 0, NULL, 0};
    struct apply_job share = {"n/b", "t", STORE_QUEUED, 0, 250, NULL, 0};
    struct apply_job cpu = {"n/c", "t", STORE_QUEUED, 0, 0, NULL, 0};
    assert_int_equal(apply_gpus(&whole, 3), 12);
    assert_int_equal(apply_gpus(&share, 3), 1);
    assert_int_equal(apply_gpus(&share, 5), 2);
    assert_int_equal(apply_gpus(&cpu, 3), 0);
    assert_true(apply_holds(STORE_ADMITTED) && apply_holds(STORE_RUNNING));
    assert_false(apply_holds(STORE_QUEUED) || apply_holds(STORE_PREEMPTED) || apply_holds(STORE_SUCCEEDED));
}

static void test_placement_add(void **state)
{
    (void)state;
    struct sched_node nodes[2];
    memset(nodes, 0, sizeof(nodes));
    nodes[0].name = "n0";
    nodes[1].name = "n1";
    struct sched_replica rep[] = {{0, 0x3}, {1, 0x1}};
    struct ctl_placement pl;
    struct gq_buf b;
    ctl_placement_init(&pl);
    gq_buf_init(&b, 4096);
    pl.attempt = 2;
    gq_strlcpy(pl.domain, "rack-1", sizeof(pl.domain));
    assert_int_equal(apply_placement_add(&pl, nodes, rep, 2, 0), 0);
    ctl_placement_remove(&pl, 0); /* lost */
    struct sched_replica more[] = {{1, 0x2}};
    assert_int_equal(apply_placement_add(&pl, nodes, more, 1, 1), 0); /* re-placed: index 0, gen 1 */
    assert_int_equal(ctl_placement_format(&pl, &b), 0);
    assert_string_equal(b.p, "{\"attempt\":2,\"reseq\":1,\"domain\":\"rack-1\",\"replicas\":["
                             "{\"i\":0,\"node\":\"n1\",\"devs\":2,\"g\":1},{\"i\":1,\"node\":\"n1\",\"devs\":1}]}");
    gq_buf_release(&b);
    ctl_placement_release(&pl);
}

/* ---- one decision, two appliers ---- */

static const struct sched_quota QA[] = {{"A100", 8, -1, -1}, {"*", 4, -1, -1}};

static void sequence(struct store *st, int at_once, char *err, size_t errlen)
{
    struct apply_ctx x = {st, T0 + 1000, at_once, err, errlen, NULL};
    struct ctl_placement pl;
    struct sched_node nodes[2];
    memset(nodes, 0, sizeof(nodes));
    nodes[0].name = "a100-0";
    nodes[1].name = "a100-1";
    struct sched_replica rep[] = {{0, 0xF}, {1, 0xF}};
    upsert(st, "ns/big", "t", 8);
    upsert(st, "ns/small", "t", 4);
    /* big: 2 x 4 A100 (its nominal); small: 1 x 4 A100 on top (borrows 4) */
    struct apply_job big = {"ns/big", "t", STORE_QUEUED, 4, 0, QA, 2};
    struct apply_job small = {"ns/small", "t", STORE_QUEUED, 4, 0, QA, 2};
    ctl_placement_init(&pl);
    pl.attempt = 1;
    assert_int_equal(apply_placement_add(&pl, nodes, rep, 2, 0), 0);
    assert_int_equal(apply_admit(&x, &big, &pl, "A100", "admitted on rack r0"), 0);
    big.state = STORE_ADMITTED;
    assert_int_equal(apply_running(&x, &big), 0);
    big.state = STORE_RUNNING;
    ctl_placement_release(&pl);
    pl.attempt = 1;
    assert_int_equal(apply_placement_add(&pl, nodes, rep + 1, 1, 0), 0);
    assert_int_equal(apply_admit(&x, &small, &pl, "A100", "admitted, borrowing"), 0);
    small.state = STORE_ADMITTED;
    ctl_placement_release(&pl);
    /* big is preempted for someone; small no longer borrows */
    x.now_ms += 1000;
    assert_int_equal(apply_preempt(&x, &big, "ns/urgent", "preempted for ns/urgent (priority 100)"), 0);
    big.state = STORE_PREEMPTED;
    /* small's node fails: requeued, then the second failure gives up (max 1 retry) */
    char msg[256];
    int failed = -1;
    assert_int_equal(apply_requeue(&x, &small, 0, 1, "node a100-1 failed", msg, sizeof(msg), &failed), 0);
    assert_int_equal(failed, 0);
    assert_string_equal(msg, "requeued (retry 1 of 1): node a100-1 failed");
    small.state = STORE_QUEUED;
    assert_int_equal(apply_suspend(&x, &small), 0);
    small.state = STORE_SUSPENDED;
    assert_int_equal(apply_resume(&x, &small), 0);
    small.state = STORE_QUEUED;
}

static void test_same_rows(void **state)
{
    struct fx *fx = *state;
    struct gq_buf b[2];
    for (int k = 0; k < 2; k++) {
        gq_buf_init(&b[k], 1u << 20);
        sequence(fx->st[k], k, fx->err, sizeof(fx->err)); /* 0: the controller; 1: the simulator */
        dump(fx->st[k], &b[k]);
        dump_intents(fx->path[k], &b[k]);
    }
    assert_string_equal(b[0].p, b[1].p);
    /* what they both wrote */
    const char *want[] = {
        "job ns/big t Preempted attempts=1 retries=0 pl= msg=preempted for ns/urgent (priority 100) pre=1 "
        "by=ns/urgent why=preempted for ns/urgent (priority 100)\n",
        "job ns/small t Queued attempts=1 retries=1 pl= msg= pre=0",
        "audit 1767225601000 gangq admit t ns/big Queued -> {\"attempt\":1,\"reseq\":0,\"domain\":\"\",\"replicas\":["
        "{\"i\":0,\"node\":\"a100-0\",\"devs\":15},{\"i\":1,\"node\":\"a100-1\",\"devs\":15}]} (admitted on rack r0)\n",
        "audit 1767225602000 gangq preempt t ns/big Running -> Preempted (preempted for ns/urgent (priority 100))\n",
        "audit 1767225602000 gangq requeue t ns/small Admitted -> Queued (requeued (retry 1 of 1): node a100-1 failed)\n",
        "audit 1767225602000 gangq suspend t ns/small Queued -> Suspended (spec.suspend=true)\n",
        "audit 1767225602000 gangq resume t ns/small Suspended -> Queued (spec.suspend=false)\n",
        "2|ns/big|ns/urgent|1767225602000\n",
        "5|ns/small|requeue|1767225602000\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(b[0].p, want[i]))
            fail_msg("missing:\n%s\nin:\n%s", want[i], b[0].p);
    assert_null(strstr(b[0].p, "alloc ")); /* nothing holds GPUs any more */
    gq_buf_release(&b[0]);
    gq_buf_release(&b[1]);
}

static int count_pending(void *ctx, const struct store_intent *in)
{
    (void)in;
    (*(int *)ctx)++;
    return 0;
}

static void test_intents_at_once(void **state)
{
    struct fx *fx = *state;
    int pending[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        sequence(fx->st[k], k, fx->err, sizeof(fx->err));
        assert_int_equal(store_intents_pending(fx->st[k], count_pending, &pending[k], fx->err, sizeof(fx->err)), 0);
    }
    assert_int_equal(pending[0], 4); /* admit x2, preempt, requeue (a queued job's suspend deletes nothing) */
    assert_int_equal(pending[1], 0);
}

/* ---- borrowed GPUs ---- */

static void test_borrowed(void **state)
{
    struct fx *fx = *state;
    struct store *st = fx->st[0];
    struct apply_ctx x = {st, T0, 0, fx->err, sizeof(fx->err), NULL};
    struct sched_node nodes[3];
    memset(nodes, 0, sizeof(nodes));
    nodes[0].name = "a0";
    nodes[1].name = "a1";
    nodes[2].name = "l0";
    struct sched_replica r8[] = {{0, 0xFF}}, r4[] = {{1, 0x0F}}, r6[] = {{2, 0x3F}};
    struct ctl_placement pl;
    upsert(st, "ns/a", "t", 8);
    upsert(st, "ns/b", "t", 4);
    upsert(st, "ns/c", "t", 6);
    upsert(st, "ns/o", "other", 4);
    struct apply_job a = {"ns/a", "t", STORE_QUEUED, 8, 0, QA, 2};
    struct apply_job b = {"ns/b", "t", STORE_QUEUED, 4, 0, QA, 2};
    struct apply_job c = {"ns/c", "t", STORE_QUEUED, 6, 0, QA, 2};
    struct apply_job o = {"ns/o", "other", STORE_QUEUED, 4, 0, NULL, 0}; /* no quota: borrows nothing */
    ctl_placement_init(&pl);
#define ADMIT(j, reps, type)                                                       \
    do {                                                                           \
        ctl_placement_release(&pl);                                                \
        pl.attempt = 1;                                                            \
        assert_int_equal(apply_placement_add(&pl, nodes, reps, 1, 0), 0);          \
        assert_int_equal(apply_admit(&x, &j, &pl, type, ""), 0);                   \
        j.state = STORE_ADMITTED;                                                  \
    } while (0)
    ADMIT(a, r8, "A100"); /* 8 of nominal 8 */
    assert_int_equal(alloc_of(st, "ns/a").a.borrowed, 0);
    ADMIT(b, r4, "A100"); /* 12 of 8: b borrows 4 */
    assert_int_equal(alloc_of(st, "ns/b").a.borrowed, 4);
    assert_int_equal(alloc_of(st, "ns/a").a.borrowed, 0);
    struct ledger_sum s = ledger(st, "t", "A100");
    assert_int_equal(s.used, 12);
    assert_int_equal(s.borrowed, 4);
    ADMIT(c, r6, "L4"); /* no L4 entry: the "*" entry, 6 of 4 */
    assert_string_equal(alloc_of(st, "ns/c").a.type, "L4");
    assert_int_equal(alloc_of(st, "ns/c").a.borrowed, 2);
    ADMIT(o, r4, "A100");
    assert_int_equal(alloc_of(st, "ns/o").a.borrowed, 0);
    /* a finishes: the Team holds 4 of 8 A100, nobody borrows there any more */
    assert_int_equal(apply_succeed(&x, &a, "every replica succeeded", 0), 0);
    assert_false(alloc_of(st, "ns/a").found);
    assert_int_equal(alloc_of(st, "ns/b").a.borrowed, 0);
    assert_int_equal(alloc_of(st, "ns/c").a.borrowed, 2); /* another entry: unchanged */
    s = ledger(st, "t", "A100");
    assert_int_equal(s.used, 4);
    assert_int_equal(s.borrowed, 0);
    /* a share job: 3 x 250 milli on an L4 is 1 GPU, charged to "*" after c */
    upsert(st, "ns/s", "t", 1);
    struct apply_job sh = {"ns/s", "t", STORE_QUEUED, 0, 250, QA, 2};
    struct sched_replica r3[] = {{2, 0x40}, {2, 0x40}, {2, 0x40}};
    ctl_placement_release(&pl);
    pl.attempt = 1;
    assert_int_equal(apply_placement_add(&pl, nodes, r3, 3, 0), 0);
    assert_int_equal(apply_admit(&x, &sh, &pl, "L4", ""), 0);
    assert_int_equal(alloc_of(st, "ns/s").a.gpus, 1);
    assert_int_equal(alloc_of(st, "ns/s").a.borrowed, 1);
    s = ledger(st, "t", "L4");
    assert_int_equal(s.used, 7);
    assert_int_equal(s.borrowed, 3);
    /* a lost replica of c (non-gang): 5 GPUs left, the "*" entry holds 6 of 4 */
    sh.state = STORE_ADMITTED;
    struct sched_replica r5[] = {{2, 0x1F}};
    ctl_placement_release(&pl);
    pl.attempt = 1;
    assert_int_equal(apply_placement_add(&pl, nodes, r5, 1, 0), 0);
    struct apply_job c1 = {"ns/c", "t", STORE_ADMITTED, 5, 0, QA, 2};
    assert_int_equal(apply_replace_replica(&x, &c1, &pl, "L4", "node l0 lost a GPU"), 0);
    s = ledger(st, "t", "L4");
    assert_int_equal(s.used, 6);
    assert_int_equal(s.borrowed, 2);
    /* re-placed last: c now borrows after the share job */
    assert_int_equal(alloc_of(st, "ns/s").a.borrowed, 0);
    assert_int_equal(alloc_of(st, "ns/c").a.borrowed, 2);
#undef ADMIT
    ctl_placement_release(&pl);
}

/* ---- the ledger settled once per Team before the commit ---- */

static void test_settle_set(void **state)
{
    (void)state;
    struct apply_settle_set s = {NULL, 0, 0};
    const char *in[] = {"t", "b", "t", "a", "b", "z", "t"};
    for (size_t i = 0; i < GQ_ARRAY_LEN(in); i++)
        assert_int_equal(apply_settle_add(&s, in[i]), 0);
    assert_int_equal(s.n, 4); /* each Team once, in order */
    assert_string_equal(s.team[0], "a");
    assert_string_equal(s.team[1], "b");
    assert_string_equal(s.team[2], "t");
    assert_string_equal(s.team[3], "z");
    apply_settle_clear(&s);
    assert_int_equal(s.n, 0);
    assert_int_equal(apply_settle_add(&s, "x"), 0);
    assert_int_equal(s.n, 1);
    apply_settle_release(&s);
    assert_null(s.team);
}

/* Team "t" has quota QA, any other none (apply_quota_fn). */
static const struct sched_quota *quota_t(void *ud, const char *team, struct sched_quota *buf, int *nq)
{
    (void)ud;
    (void)buf;
    *nq = strcmp(team, "t") ? 0 : 2;
    return *nq ? QA : NULL;
}

/* The same admissions and finishes applied at once (store 0) and with the
 * settling deferred (store 1): until the caller settles, a deferred row
 * keeps the borrowed figure it was written with; once each Team in the set
 * is settled, both ledgers are the same. */
static void test_borrowed_deferred(void **state)
{
    struct fx *fx = *state;
    struct apply_settle_set set = {NULL, 0, 0};
    struct apply_ctx x[2] = {{fx->st[0], T0, 0, fx->err, sizeof(fx->err), NULL},
                             {fx->st[1], T0, 0, fx->err, sizeof(fx->err), &set}};
    struct sched_node nodes[2];
    memset(nodes, 0, sizeof(nodes));
    nodes[0].name = "a0";
    nodes[1].name = "a1";
    struct sched_replica r8[] = {{0, 0xFF}}, r4[] = {{1, 0x0F}};
    struct ctl_placement pl;
    ctl_placement_init(&pl);
    for (int k = 0; k < 2; k++) {
        struct store *st = fx->st[k];
        upsert(st, "ns/a", "t", 8);
        upsert(st, "ns/b", "t", 4);
        upsert(st, "ns/o", "other", 4);
        struct apply_job a = {"ns/a", "t", STORE_QUEUED, 8, 0, QA, 2};
        struct apply_job b = {"ns/b", "t", STORE_QUEUED, 4, 0, QA, 2};
        struct apply_job o = {"ns/o", "other", STORE_QUEUED, 4, 0, NULL, 0};
        struct {
            struct apply_job *j;
            struct sched_replica *r;
        } seq[] = {{&a, r8}, {&b, r4}, {&o, r4}};
        assert_int_equal(store_begin_cycle(st, fx->err, sizeof(fx->err)), 0);
        for (size_t i = 0; i < GQ_ARRAY_LEN(seq); i++) {
            ctl_placement_release(&pl);
            pl.attempt = 1;
            assert_int_equal(apply_placement_add(&pl, nodes, seq[i].r, 1, 0), 0);
            assert_int_equal(apply_admit(&x[k], seq[i].j, &pl, "A100", ""), 0);
            seq[i].j->state = STORE_ADMITTED;
        }
        /* b is admitted over the nominal 8: it borrows 4, once settled */
        assert_int_equal(alloc_of(st, "ns/b").a.borrowed, k ? 0 : 4);
        if (k) {
            assert_int_equal(set.n, 2);
            assert_int_equal(apply_settle_flush(&x[k], quota_t, NULL), 0);
            assert_int_equal(alloc_of(st, "ns/b").a.borrowed, 4);
        }
        /* a finishes: b no longer borrows, once settled */
        assert_int_equal(apply_succeed(&x[k], &a, "every replica succeeded", 0), 0);
        assert_int_equal(alloc_of(st, "ns/b").a.borrowed, k ? 4 : 0);
        if (k) {
            assert_int_equal(set.n, 1);
            assert_string_equal(set.team[0], "t");
            assert_int_equal(apply_settle_flush(&x[k], quota_t, NULL), 0);
        }
        assert_int_equal(alloc_of(st, "ns/b").a.borrowed, 0);
        assert_int_equal(store_commit_cycle(st, fx->err, sizeof(fx->err)), 0);
    }
    struct gq_buf d[2];
    for (int k = 0; k < 2; k++) {
        gq_buf_init(&d[k], 1 << 20);
        assert_int_equal(store_allocs_each(fx->st[k], dump_alloc, &d[k], fx->err, sizeof(fx->err)), 0);
    }
    assert_string_equal(d[0].p ? d[0].p : "", d[1].p ? d[1].p : "");
    assert_non_null(strstr(d[0].p ? d[0].p : "", "alloc ns/b t A100 gpus=4 borrowed=0"));
    for (int k = 0; k < 2; k++)
        gq_buf_release(&d[k]);
    ctl_placement_release(&pl);
    apply_settle_release(&set);
}

/* ---- the simulator writes the same thing, borrowed included ---- */

static const char SIM_CLUSTER[] =
    "nodes:\n"
    "  - {name: h, count: 2, gpus: 8, gpuType: H100, gpuMemoryGiB: 80, cpu: 96, memoryGiB: 1024}\n"
    "teams:\n"
    "  - name: a\n"
    "    cohort: ml\n"
    "    quota: [{gpuType: H100, gpus: 8, borrowingLimit: 8}]\n"
    "  - name: b\n"
    "    cohort: ml\n"
    "    quota: [{gpuType: H100, gpus: 8}]\n";

static const char SIM_TRACE[] =
    "jobs:\n"
    "  - {name: J1, team: a, gpus: 8, duration: 100}\n"
    "  - {name: J2, team: a, gpus: 8, duration: 100, arrival: 10}\n";

static int sim_audit_cb(void *ctx, const struct store_audit *a)
{
    struct gq_buf *b = ctx;
    return gq_buf_printf(b, "%s %s %s %s -> %s\n", a->actor, a->action, a->job_key, a->old_value, a->new_value);
}

static void test_sim_borrows(void **state)
{
    struct fx *fx = *state;
    char db[160];
    struct sim_cluster c;
    struct sim_trace t;
    struct sim_result res;
    struct sim_opts o;
    memset(&o, 0, sizeof(o));
    snprintf(db, sizeof(db), "%s/sim.db", fx->dir);
    o.db_path = db;
    o.min_runtime_s = -1;
    o.grace_s = 0;
    o.until = 50; /* both still run */
    assert_int_equal(sim_load_cluster_mem(SIM_CLUSTER, strlen(SIM_CLUSTER), "c.yaml", &c, fx->err, sizeof(fx->err)),
                     0);
    assert_int_equal(sim_load_trace_mem(SIM_TRACE, strlen(SIM_TRACE), "t.yaml", 0, &t, fx->err, sizeof(fx->err)), 0);
    assert_int_equal(sim_check(&c, &t, "t.yaml", fx->err, sizeof(fx->err)), 0);
    if (sim_run(&c, &t, &o, &res, fx->err, sizeof(fx->err)))
        fail_msg("sim_run: %s", fx->err);
    struct store *st = NULL;
    struct store_opts ro = {0, 0, 1};
    assert_int_equal(store_open(db, &ro, &st, fx->err, sizeof(fx->err)), 0);
    struct ledger_sum s = ledger(st, "a", "H100");
    assert_int_equal(s.used, 16);
    assert_int_equal(s.borrowed, 8); /* was 0: the simulator hard-coded it */
    assert_int_equal(alloc_of(st, "sim/J2").a.borrowed, 8);
    assert_int_equal(alloc_of(st, "sim/J1").a.borrowed, 0);
    /* the controller's placement text, and the admission's audit row carries it */
    struct store_job *j = NULL;
    assert_int_equal(store_job_get(st, "sim/J2", &j, fx->err, sizeof(fx->err)), 0);
    assert_int_equal(j->state, STORE_RUNNING);
    struct ctl_placement pl;
    ctl_placement_init(&pl);
    assert_int_equal(ctl_placement_parse(j->placement, &pl, fx->err, sizeof(fx->err)), 0);
    assert_int_equal(pl.attempt, 1);
    assert_int_equal(pl.n, 1);
    assert_int_equal(pl.rep[0].devs, 0xFF);
    struct gq_buf b;
    gq_buf_init(&b, 1u << 16);
    struct store_audit_filter f = {NULL, "sim/J2", 0, 0};
    assert_int_equal(store_audit_query(st, &f, sim_audit_cb, &b, fx->err, sizeof(fx->err)), 0);
    char want[1024];
    snprintf(want, sizeof(want), "gangq admit sim/J2 Queued -> %s\n", j->placement);
    assert_string_equal(b.p, want);
    gq_buf_release(&b);
    ctl_placement_release(&pl);
    store_job_free(j);
    store_close(st);
    sim_result_release(&res);
    sim_trace_release(&t);
    sim_cluster_release(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_placement_add),
        cmocka_unit_test_setup_teardown(test_same_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_intents_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_borrowed, setup, teardown),
        cmocka_unit_test(test_settle_set),
        cmocka_unit_test_setup_teardown(test_borrowed_deferred, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_borrows, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
