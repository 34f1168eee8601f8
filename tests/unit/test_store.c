/* Unit tests for store/: every operation, migrations, and error paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "store.h"

struct fx {
    char dir[64];
    char path[128];
};

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    gq_strlcpy(fx->dir, "/tmp/gq-store-test-XXXXXX", sizeof fx->dir);
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof fx->path, "%s/gangq.db", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    nftw(fx->dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    free(fx);
    return 0;
}

static struct store *open_ok(const char *path)
{
    struct store *st = NULL;
    char err[512] = "";
    int rc = store_open(path, NULL, &st, err, sizeof err);
    if (rc)
        fail_msg("store_open: %s", err);
    return st;
}

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    char *msg = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("raw sql: %s", msg);
    sqlite3_close(db);
}

static int64_t raw_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t v = -1;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static void raw_text(const char *path, const char *sql, char *out, size_t outlen)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    out[0] = 0;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        gq_strlcpy(out, (const char *)sqlite3_column_text(s, 0), outlen);
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* Whole-file snapshot for "never touched" checks. */
struct snap {
    char *data;
    size_t len;
    struct timespec mtime;
};

static void snap_take(const char *path, struct snap *s)
{
    struct stat sb;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fstat(fileno(f), &sb), 0);
    s->len = (size_t)sb.st_size;
    s->mtime = sb.st_mtim;
    s->data = malloc(s->len + 1);
    assert_non_null(s->data);
    assert_int_equal(fread(s->data, 1, s->len, f), s->len);
    fclose(f);
}

static void snap_same(const char *path, struct snap *s)
{
    struct snap now;
    snap_take(path, &now);
    assert_int_equal(now.len, s->len);
    assert_memory_equal(now.data, s->data, s->len);
    assert_int_equal(now.mtime.tv_sec, s->mtime.tv_sec);
    assert_int_equal(now.mtime.tv_nsec, s->mtime.tv_nsec);
    free(now.data);
    free(s->data);
    s->data = NULL;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static struct store_job mkjob(const char *key, const char *team, int64_t prio, int64_t enq)
{
    struct store_job j = {0};
    j.key = key;
    j.uid = "uid-1";
    j.team = team;
    j.cls = "Batch";
    j.priority = prio;
    j.gpus = 8;
    j.enqueue_ms = enq;
    j.state = STORE_QUEUED;
    j.generation = 1;
    j.resource_version = "100";
    return j;
}

/* ---------------- open / schema ---------------- */

static void test_open_fresh(void **state)
{
    struct fx *fx = *state;
    struct stat sb;
    mode_t old = umask(0);
    struct store *st = open_ok(fx->path);
    umask(old);
    assert_int_equal(store_schema_version(st), STORE_SCHEMA_VERSION);
    assert_string_equal(store_path(st), fx->path);
    assert_int_equal(stat(fx->path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    store_close(st);
    assert_int_equal(raw_int(fx->path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    /* WAL is persistent in the file header. */
    {
        sqlite3 *db = NULL;
        sqlite3_stmt *s = NULL;
        assert_int_equal(sqlite3_open(fx->path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), 0);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
        sqlite3_finalize(s);
        sqlite3_close(db);
    }
    /* Reopen is a no-op migration. */
    st = open_ok(fx->path);
    assert_int_equal(store_schema_version(st), STORE_SCHEMA_VERSION);
    store_close(st);
    store_close(NULL);
}

static void test_open_bad_path(void **state)
{
    struct fx *fx = *state;
    struct store *st = NULL;
    char err[512], p[256];
    snprintf(p, sizeof p, "%s/no/such/dir/x.db", fx->dir);
    assert_int_equal(store_open(p, NULL, &st, err, sizeof err), GQ_ENOTFOUND);
    assert_null(st);
    assert_non_null(strstr(err, p));
    /* Read-only open never creates. */
    struct store_opts ro = {.readonly = 1};
    assert_int_equal(store_open(fx->path, &ro, &st, err, sizeof err), GQ_ENOTFOUND);
    assert_non_null(strstr(err, fx->path));
    assert_false(exists(fx->path));
    assert_int_equal(store_open("", NULL, &st, err, sizeof err), GQ_EINVAL);
}

/* ---------------- jobs ---------------- */

static void test_job_upsert_get(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    struct store_job j = mkjob("ml/train-a", "vision", 100, 1000), *g = NULL;
    char err[256];

    j.placement = "{\"n\":[\"node1\"]}";
    j.message = "hello";
    assert_int_equal(store_job_upsert(st, &j, 5000, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/train-a", &g, err, sizeof err), 0);
    assert_string_equal(g->key, "ml/train-a");
    assert_string_equal(g->uid, "uid-1");
    assert_string_equal(g->team, "vision");
    assert_string_equal(g->cls, "Batch");
    assert_int_equal(g->priority, 100);
    assert_int_equal(g->gpus, 8);
    assert_int_equal(g->enqueue_ms, 1000);
    assert_int_equal(g->state, STORE_QUEUED);
    assert_string_equal(g->placement, "{\"n\":[\"node1\"]}");
    assert_string_equal(g->message, "hello");
    assert_string_equal(g->resource_version, "100");
    assert_string_equal(g->preempted_by, "");
    assert_int_equal(g->generation, 1);
    assert_int_equal(g->updated_ms, 5000);
    assert_int_equal(g->arrival, 0);
    store_job_free(g);

    j.arrival = 4242;
    assert_int_equal(store_job_upsert(st, &j, 5000, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/train-a", &g, err, sizeof err), 0);
    assert_int_equal(g->arrival, 0); /* same uid: the arrival of the first sight stays */
    store_job_free(g);
    assert_int_equal(store_job_delete(st, "ml/train-a", err, sizeof err), 0);
    assert_int_equal(store_job_upsert(st, &j, 5000, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/train-a", &g, err, sizeof err), 0);
    assert_int_equal(g->arrival, 4242);
    store_job_free(g);

    /* Admit it, then a spec update with the same uid keeps the decision fields. */
    struct store_transition t = {.state = STORE_ADMITTED, .placement = "P1"};
    assert_int_equal(store_job_transition(st, "ml/train-a", &t, 6000, err, sizeof err), 0);
    j.priority = 200;
    j.enqueue_ms = 9999;
    j.state = STORE_QUEUED;
    j.placement = "";
    j.generation = 2;
    j.resource_version = "101";
    j.team = "vision2";
    j.arrival = 1;
    assert_int_equal(store_job_upsert(st, &j, 7000, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/train-a", &g, err, sizeof err), 0);
    assert_int_equal(g->priority, 200);
    assert_int_equal(g->generation, 2);
    assert_string_equal(g->resource_version, "101");
    assert_string_equal(g->team, "vision2");
    assert_int_equal(g->enqueue_ms, 1000);
    assert_int_equal(g->arrival, 4242);
    assert_int_equal(g->state, STORE_ADMITTED);
    assert_int_equal(g->attempts, 1);
    assert_string_equal(g->placement, "P1");
    store_job_free(g);

    /* A different uid is a re-created object: everything replaced. */
    j.uid = "uid-2";
    assert_int_equal(store_job_upsert(st, &j, 8000, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/train-a", &g, err, sizeof err), 0);
    assert_string_equal(g->uid, "uid-2");
    assert_int_equal(g->enqueue_ms, 9999);
    assert_int_equal(g->arrival, 1);
    assert_int_equal(g->state, STORE_QUEUED);
    assert_int_equal(g->attempts, 0);
    assert_string_equal(g->placement, "");
    store_job_free(g);

    /* NULL strings are stored as "". */
    struct store_job m = {.key = "ns/min", .state = STORE_QUEUED};
    assert_int_equal(store_job_upsert(st, &m, 1, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ns/min", &g, err, sizeof err), 0);
    assert_string_equal(g->team, "");
    assert_string_equal(g->placement, "");
    store_job_free(g);

    assert_int_equal(store_job_get(st, "ml/nope", &g, err, sizeof err), GQ_ENOTFOUND);
    assert_null(g);
    assert_non_null(strstr(err, "ml/nope"));
    m.key = "";
    assert_int_equal(store_job_upsert(st, &m, 1, err, sizeof err), GQ_EINVAL);
    m.key = "a/b";
    m.state = 42;
    assert_int_equal(store_job_upsert(st, &m, 1, err, sizeof err), GQ_EINVAL);
    store_close(st);
}

static void test_job_raise_attempts(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    struct store_job j = mkjob("ml/r", "nlp", 10, 500), *g = NULL;
    char err[256];
    j.attempts = 2;
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    assert_int_equal(store_job_raise_attempts(st, "ml/r", 5, err, sizeof err), 0);
    assert_int_equal(store_job_raise_attempts(st, "ml/r", 3, err, sizeof err), 0); /* never lowered */
    assert_int_equal(store_job_get(st, "ml/r", &g, err, sizeof err), 0);
    assert_int_equal(g->attempts, 5);
    store_job_free(g);
    assert_int_equal(store_job_raise_attempts(st, "ml/none", 1, err, sizeof err), GQ_ENOTFOUND);
    store_close(st);
}

static void test_job_transitions(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    struct store_job j = mkjob("ml/b", "nlp", 10, 500), *g = NULL;
    char err[256];
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);

    struct store_transition adm = {.state = STORE_ADMITTED, .placement = "[\"n1\",\"n2\"]",
                                   .message = ""};
    assert_int_equal(store_job_transition(st, "ml/b", &adm, 1000, err, sizeof err), 0);
    assert_int_equal(store_job_set_state(st, "ml/b", STORE_RUNNING, 1500, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/b", &g, err, sizeof err), 0);
    assert_int_equal(g->state, STORE_RUNNING);
    assert_int_equal(g->attempts, 1);
    assert_int_equal(g->admitted_ms, 1000);
    assert_string_equal(g->placement, "[\"n1\",\"n2\"]");
    assert_int_equal(g->updated_ms, 1500);
    store_job_free(g);

    struct store_transition pre = {.state = STORE_PREEMPTED, .placement = "",
                                   .message = "preempted by ml/big",
                                   .preempted_by = "ml/big", .preempt_reason = "priority 100 > 10"};
    assert_int_equal(store_job_transition(st, "ml/b", &pre, 2000, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/b", &g, err, sizeof err), 0);
    assert_int_equal(g->state, STORE_PREEMPTED);
    assert_int_equal(g->preemptions, 1);
    assert_int_equal(g->preempted_ms, 2000);
    assert_string_equal(g->preempted_by, "ml/big");
    assert_string_equal(g->preempt_reason, "priority 100 > 10");
    assert_string_equal(g->placement, "");
    assert_string_equal(g->message, "preempted by ml/big");
    assert_int_equal(g->enqueue_ms, 500); /* keeps its place */
    assert_int_equal(g->admitted_ms, 1000);
    store_job_free(g);

    /* Readmit, fail, requeue with retry: counters move, enqueue stays. */
    struct store_transition adm2 = {.state = STORE_ADMITTED, .placement = "[\"n3\"]"};
    assert_int_equal(store_job_transition(st, "ml/b", &adm2, 3000, err, sizeof err), 0);
    struct store_transition rq = {.state = STORE_QUEUED, .bump_retries = 1, .placement = ""};
    assert_int_equal(store_job_transition(st, "ml/b", &rq, 4000, err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ml/b", &g, err, sizeof err), 0);
    assert_int_equal(g->attempts, 2);
    assert_int_equal(g->retries, 1);
    assert_int_equal(g->preemptions, 1);
    assert_string_equal(g->preempted_by, "ml/big"); /* last preemption is remembered */
    assert_string_equal(g->message, "preempted by ml/big"); /* NULL message keeps */
    assert_int_equal(g->enqueue_ms, 500);
    assert_int_equal(g->state, STORE_QUEUED);
    store_job_free(g);

    assert_int_equal(store_job_set_state(st, "ml/none", STORE_RUNNING, 1, err, sizeof err),
                     GQ_ENOTFOUND);
    assert_int_equal(store_job_set_state(st, "ml/b", -1, 1, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_job_set_state(st, "ml/b", STORE_NSTATES, 1, err, sizeof err),
                     GQ_EINVAL);
    store_close(st);
}

struct collect {
    char keys[64][32];
    int n;
    int stop_at;
};

static int collect_cb(void *ctx, const struct store_job *j)
{
    struct collect *c = ctx;
    if (c->n < 64)
        gq_strlcpy(c->keys[c->n], j->key, sizeof c->keys[0]);
    c->n++;
    if (c->stop_at && c->n == c->stop_at)
        return 77;
    return 0;
}

static void test_queue_order(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256];
    /* Written in scrambled order. */
    struct { const char *key; int64_t prio, enq; int state; } in[] = {
        {"b/low-old", 1, 100, STORE_QUEUED},
        {"a/high-new", 50, 900, STORE_QUEUED},
        {"z/mid-tie", 10, 500, STORE_QUEUED},
        {"a/high-old", 50, 200, STORE_QUEUED},
        {"a/mid-tie", 10, 500, STORE_SUSPENDED},
        {"c/running", 99, 1, STORE_RUNNING},
        {"c/done", 99, 1, STORE_SUCCEEDED},
        {"d/neg", -5, 1, STORE_PREEMPTED},
    };
    const char *want_waiting[] = {"a/high-old", "a/high-new", "a/mid-tie", "z/mid-tie",
                                  "b/low-old", "d/neg"};
    struct collect c = {0};
    size_t i;
    int64_t n = 0;

    for (i = 0; i < GQ_ARRAY_LEN(in); i++) {
        struct store_job j = mkjob(in[i].key, "t", in[i].prio, in[i].enq);
        j.state = in[i].state;
        assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    }
    assert_int_equal(store_jobs_each(st, STORE_MASK_WAITING, collect_cb, &c, err, sizeof err), 0);
    assert_int_equal(c.n, (int)GQ_ARRAY_LEN(want_waiting));
    for (i = 0; i < GQ_ARRAY_LEN(want_waiting); i++)
        assert_string_equal(c.keys[i], want_waiting[i]);

    memset(&c, 0, sizeof c);
    assert_int_equal(store_jobs_each(st, STORE_MASK_ALL, collect_cb, &c, err, sizeof err), 0);
    assert_int_equal(c.n, 8);
    assert_string_equal(c.keys[0], "c/done");
    assert_string_equal(c.keys[1], "c/running");

    memset(&c, 0, sizeof c);
    assert_int_equal(store_jobs_each(st, STORE_MASK(STORE_RUNNING), collect_cb, &c, err,
                                     sizeof err), 0);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.keys[0], "c/running");

    /* A callback's non-zero return stops and is passed back. */
    memset(&c, 0, sizeof c);
    c.stop_at = 2;
    assert_int_equal(store_jobs_each(st, STORE_MASK_ALL, collect_cb, &c, err, sizeof err), 77);
    assert_int_equal(c.n, 2);

    assert_int_equal(store_jobs_count(st, STORE_MASK_ACTIVE, &n, err, sizeof err), 0);
    assert_int_equal(n, 7);
    assert_int_equal(store_jobs_count(st, STORE_MASK_ALL, &n, err, sizeof err), 0);
    assert_int_equal(n, 8);
    assert_int_equal(store_jobs_count(st, 0, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    store_close(st);
}

/* Jobs of one enqueue time (creation timestamps have 1 s resolution) come back
 * in arrival order, not name order. */
static void test_queue_arrival(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256];
    const char *names[] = {"b/job1", "b/job2", "b/job3", "b/job10", "b/job11", "b/job20"};
    struct collect c = {0};
    /* written in name order, arrived in numeric order */
    const int arrival[] = {101, 102, 103, 110, 111, 120};
    for (size_t i = 0; i < GQ_ARRAY_LEN(names); i++) {
        struct store_job j = mkjob(names[i], "t", 5, 7000);
        j.arrival = arrival[i];
        assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    }
    struct store_job late = mkjob("a/early-name-late-second", "t", 5, 8000);
    late.arrival = 1;
    assert_int_equal(store_job_upsert(st, &late, 1, err, sizeof err), 0);
    assert_int_equal(store_jobs_each(st, STORE_MASK_WAITING, collect_cb, &c, err, sizeof err), 0);
    assert_int_equal(c.n, 7);
    for (size_t i = 0; i < GQ_ARRAY_LEN(names); i++)
        assert_string_equal(c.keys[i], names[i]);
    assert_string_equal(c.keys[6], "a/early-name-late-second");
    store_close(st);
}

static void test_team_specs(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256];
    struct store_team *g = NULL;
    struct store_team t = {"nlp", "u1", 4, "{\"spec\":{}}", 0};
    assert_int_equal(store_team_get(st, "nlp", &g, err, sizeof err), GQ_ENOTFOUND);
    assert_null(g);
    assert_int_equal(store_team_save(st, &t, 77, err, sizeof err), 0);
    assert_int_equal(store_team_get(st, "nlp", &g, err, sizeof err), 0);
    assert_string_equal(g->name, "nlp");
    assert_string_equal(g->uid, "u1");
    assert_int_equal(g->generation, 4);
    assert_string_equal(g->object, "{\"spec\":{}}");
    assert_int_equal(g->updated_ms, 77);
    store_team_free(g);
    t.generation = 5;
    t.object = "{}";
    assert_int_equal(store_team_save(st, &t, 78, err, sizeof err), 0);
    assert_int_equal(store_team_get(st, "nlp", &g, err, sizeof err), 0);
    assert_int_equal(g->generation, 5);
    assert_string_equal(g->object, "{}");
    store_team_free(g);
    store_close(st);
    /* survives a reopen */
    st = open_ok(fx->path);
    assert_int_equal(store_team_get(st, "nlp", &g, err, sizeof err), 0);
    assert_int_equal(g->generation, 5);
    store_team_free(g);
    assert_int_equal(store_team_delete(st, "nlp", err, sizeof err), 0);
    assert_int_equal(store_team_delete(st, "nlp", err, sizeof err), 0);
    assert_int_equal(store_team_get(st, "nlp", &g, err, sizeof err), GQ_ENOTFOUND);
    t.name = "";
    assert_int_equal(store_team_save(st, &t, 1, err, sizeof err), GQ_EINVAL);
    store_close(st);
}

static int ledger_cb(void *ctx, const struct store_ledger_row *r)
{
    char *out = ctx;
    size_t len = strlen(out);
    snprintf(out + len, 512 - len, "%s/%s:%lld,%lld,%lld;", r->team, r->gpu_type,
             (long long)r->used, (long long)r->borrowed, (long long)r->jobs);
    return 0;
}

static int alloc_cb(void *ctx, const struct store_alloc *a)
{
    char *out = ctx;
    size_t len = strlen(out);
    snprintf(out + len, 512 - len, "%s=%lld;", a->job_key, (long long)a->gpus);
    return 0;
}

/* A team's summed allocation as "gpus,borrowed" (store_allocs_team_sum). */
static const char *team_sum(struct store *st, const char *team, char *out, size_t outlen)
{
    int64_t g = -1, b = -1;
    char err[256];
    assert_int_equal(store_allocs_team_sum(st, team, &g, &b, err, sizeof err), 0);
    snprintf(out, outlen, "%lld,%lld", (long long)g, (long long)b);
    return out;
}

static void test_delete_and_ledger(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256], out[512] = "";
    struct store_job j1 = mkjob("ns/j1", "a", 1, 1), j2 = mkjob("ns/j2", "a", 1, 2),
                     j3 = mkjob("ns/j3", "b", 1, 3), *g = NULL;
    assert_int_equal(store_job_upsert(st, &j1, 1, err, sizeof err), 0);
    assert_int_equal(store_job_upsert(st, &j2, 1, err, sizeof err), 0);
    assert_int_equal(store_job_upsert(st, &j3, 1, err, sizeof err), 0);

    struct store_alloc a1 = {"ns/j1", "a", "H100", 8, 0};
    struct store_alloc a2 = {"ns/j2", "a", "H100", 4, 4};
    struct store_alloc a3 = {"ns/j3", "b", "A100", 2, 1};
    struct store_alloc a4 = {"ns/j4", "a", "A100", 1, 0};
    assert_int_equal(store_alloc_set(st, &a1, err, sizeof err), 0);
    assert_int_equal(store_alloc_set(st, &a2, err, sizeof err), 0);
    assert_int_equal(store_alloc_set(st, &a3, err, sizeof err), 0);
    assert_int_equal(store_alloc_set(st, &a4, err, sizeof err), 0);
    assert_int_equal(store_ledger_each(st, ledger_cb, out, err, sizeof err), 0);
    assert_string_equal(out, "a/A100:1,0,1;a/H100:12,4,2;b/A100:2,1,1;");
    char sum[64];
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "13,4");
    assert_string_equal(team_sum(st, "b", sum, sizeof sum), "2,1");
    assert_string_equal(team_sum(st, "none", sum, sizeof sum), "0,0");

    /* Replace is not add. */
    a2.gpus = 6;
    a2.borrowed = 2;
    assert_int_equal(store_alloc_set(st, &a2, err, sizeof err), 0);
    out[0] = 0;
    assert_int_equal(store_ledger_each(st, ledger_cb, out, err, sizeof err), 0);
    assert_string_equal(out, "a/A100:1,0,1;a/H100:14,2,2;b/A100:2,1,1;");
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "15,2");
    /* ... also when the allocation moves to another team, and a borrowed
     * figure set alone counts */
    struct store_alloc a3b = {"ns/j3", "a", "A100", 2, 1};
    assert_int_equal(store_alloc_set(st, &a3b, err, sizeof err), 0);
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "17,3");
    assert_string_equal(team_sum(st, "b", sum, sizeof sum), "0,0");
    assert_int_equal(store_alloc_set(st, &a3, err, sizeof err), 0);
    assert_int_equal(store_alloc_set_borrowed(st, "ns/j1", 3, err, sizeof err), 0);
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "15,5");
    assert_int_equal(store_alloc_set_borrowed(st, "ns/j1", 0, err, sizeof err), 0);

    assert_int_equal(store_alloc_clear(st, "ns/j4", err, sizeof err), 0);
    assert_int_equal(store_alloc_clear(st, "ns/j4", err, sizeof err), 0); /* idempotent */
    out[0] = 0;
    assert_int_equal(store_allocs_each(st, alloc_cb, out, err, sizeof err), 0);
    assert_string_equal(out, "ns/j1=8;ns/j2=6;ns/j3=2;");
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "14,2");

    /* Deleting a job removes it and its allocation. */
    assert_int_equal(store_job_delete(st, "ns/j2", err, sizeof err), 0);
    assert_int_equal(store_job_get(st, "ns/j2", &g, err, sizeof err), GQ_ENOTFOUND);
    out[0] = 0;
    assert_int_equal(store_ledger_each(st, ledger_cb, out, err, sizeof err), 0);
    assert_string_equal(out, "a/H100:8,0,1;b/A100:2,1,1;");
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "8,0");
    assert_int_equal(store_job_delete(st, "ns/j2", err, sizeof err), GQ_ENOTFOUND);
    assert_non_null(strstr(err, "ns/j2"));
    store_close(st);

    /* The ledger survives a restart. */
    st = open_ok(fx->path);
    out[0] = 0;
    assert_int_equal(store_ledger_each(st, ledger_cb, out, err, sizeof err), 0);
    assert_string_equal(out, "a/H100:8,0,1;b/A100:2,1,1;");
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "8,0");
    store_close(st);

    /* A version 3 file (no team_alloc, as that version left it): the
     * migration sums the allocations it holds, and the sums follow from there */
    raw_exec(fx->path, "DROP TRIGGER team_alloc_ins; DROP TRIGGER team_alloc_del;"
                       " DROP TRIGGER team_alloc_upd; DROP TABLE team_alloc;"
                       " PRAGMA user_version=3;");
    st = open_ok(fx->path);
    assert_int_equal(raw_int(fx->path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "8,0");
    assert_string_equal(team_sum(st, "b", sum, sizeof sum), "2,1");
    assert_int_equal(store_alloc_clear(st, "ns/j1", err, sizeof err), 0);
    assert_string_equal(team_sum(st, "a", sum, sizeof sum), "0,0");
    store_close(st);
}

/* ---------------- intents ---------------- */

struct intents {
    int64_t ids[16];
    int kinds[16];
    char keys[16][32];
    char payloads[16][32];
    int64_t created[16];
    int n;
};

static int intent_cb(void *ctx, const struct store_intent *in)
{
    struct intents *r = ctx;
    if (r->n < 16) {
        r->ids[r->n] = in->id;
        r->kinds[r->n] = in->kind;
        gq_strlcpy(r->keys[r->n], in->job_key, sizeof r->keys[0]);
        gq_strlcpy(r->payloads[r->n], in->payload, sizeof r->payloads[0]);
        r->created[r->n] = in->created_ms;
    }
    r->n++;
    return 0;
}

static void test_intents(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256];
    int64_t id1 = 0, id2 = 0, id3 = 0, idx = 0;
    struct intents r = {0};

    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    assert_int_equal(store_intent_add(st, STORE_INTENT_ADMIT, "ns/a", "n1,n2", 10, &id1, err,
                                      sizeof err), 0);
    assert_int_equal(store_intent_add(st, STORE_INTENT_PREEMPT, "ns/b", "by ns/a", 11, &id2, err,
                                      sizeof err), 0);
    assert_int_equal(store_intent_add(st, STORE_INTENT_SUSPEND, "ns/c", NULL, 12, &id3, err,
                                      sizeof err), 0);
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
    assert_true(id1 > 0 && id2 > id1 && id3 > id2);

    /* An intent from a rolled-back cycle never existed. */
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    assert_int_equal(store_intent_add(st, STORE_INTENT_DELETE, "ns/x", "", 13, &idx, err,
                                      sizeof err), 0);
    store_rollback_cycle(st);

    assert_int_equal(store_intent_done(st, id2, 20, err, sizeof err), 0);
    assert_int_equal(store_intent_done(st, id2, 21, err, sizeof err), GQ_ENOTFOUND);
    assert_int_equal(store_intent_done(st, 9999, 21, err, sizeof err), GQ_ENOTFOUND);
    store_close(st);

    st = open_ok(fx->path);
    assert_int_equal(store_intents_pending(st, intent_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.ids[0], id1);
    assert_int_equal(r.kinds[0], STORE_INTENT_ADMIT);
    assert_string_equal(r.keys[0], "ns/a");
    assert_string_equal(r.payloads[0], "n1,n2");
    assert_int_equal(r.created[0], 10);
    assert_int_equal(r.ids[1], id3);
    assert_int_equal(r.kinds[1], STORE_INTENT_SUSPEND);
    assert_string_equal(r.payloads[1], "");

    assert_int_equal(store_intent_add(st, 0, "ns/a", "", 1, NULL, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_intent_add(st, 6, "ns/a", "", 1, NULL, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_intent_add(st, STORE_INTENT_RESUME, "", "", 1, NULL, err, sizeof err),
                     GQ_EINVAL);

    /* Prune removes done intents only, and ids are never reused. */
    assert_int_equal(store_intents_prune(st, 100, err, sizeof err), 0);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM intents"), 2);
    assert_int_equal(store_intent_add(st, STORE_INTENT_RESUME, "ns/d", "", 30, &idx, err,
                                      sizeof err), 0);
    assert_true(idx > id3);
    store_close(st);

    assert_string_equal(store_intent_kind_name(STORE_INTENT_PREEMPT), "preempt");
    assert_int_equal(store_intent_kind_parse("resume"), STORE_INTENT_RESUME);
    assert_int_equal(store_intent_kind_parse("nope"), -1);
    assert_string_equal(store_intent_kind_name(99), "?");
    assert_string_equal(store_state_name(STORE_PREEMPTED), "Preempted");
    assert_int_equal(store_state_parse("Succeeded"), STORE_SUCCEEDED);
    assert_int_equal(store_state_parse("running"), -1);
}

/* ---------------- cycles ---------------- */

static void test_cycle(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256];
    struct store_job j = mkjob("ns/c1", "t", 1, 1), *g = NULL;

    assert_int_equal(store_commit_cycle(st, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    assert_true(store_in_cycle(st));
    assert_int_equal(store_begin_cycle(st, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    /* Visible inside the cycle, gone after rollback. */
    assert_int_equal(store_job_get(st, "ns/c1", &g, err, sizeof err), 0);
    store_job_free(g);
    store_rollback_cycle(st);
    assert_false(store_in_cycle(st));
    assert_int_equal(store_job_get(st, "ns/c1", &g, err, sizeof err), GQ_ENOTFOUND);

    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    struct store_audit a = {.time_ms = 1, .actor = "gangq", .action = "admit", .team = "t",
                            .job_key = "ns/c1"};
    assert_int_equal(store_audit_add(st, &a, err, sizeof err), 0);
    /* Another connection does not see uncommitted work. */
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM jobs"), 0);
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM jobs"), 1);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM audit"), 1);
    /* Rollback without a cycle is harmless. */
    store_rollback_cycle(st);
    store_rollback_cycle(NULL);

    /* A lazy commit (not synced) commits the same; without a cycle it is
     * refused, and the cycles after it work as before. */
    assert_int_equal(store_commit_cycle_lazy(st, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    struct store_audit a2 = {.time_ms = 2, .actor = "gangq", .action = "admit", .team = "t",
                             .job_key = "ns/c1"};
    assert_int_equal(store_audit_add(st, &a2, err, sizeof err), 0);
    assert_int_equal(store_commit_cycle_lazy(st, err, sizeof err), 0);
    assert_false(store_in_cycle(st));
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM audit"), 2);
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    assert_int_equal(store_audit_add(st, &a2, err, sizeof err), 0);
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM audit"), 3);

    /* A second writer waits at most the busy timeout and gets GQ_EBUSY. */
    {
        struct store *st2 = open_ok(fx->path);
        assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
        assert_int_equal(store_begin_cycle(st2, err, sizeof err), GQ_EBUSY);
        assert_false(store_in_cycle(st2));
        assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
        assert_int_equal(store_begin_cycle(st2, err, sizeof err), 0);
        assert_int_equal(store_commit_cycle(st2, err, sizeof err), 0);
        store_close(st2);
    }
    /* Closing with an open cycle rolls it back. */
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    j.key = "ns/c2";
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    store_close(st);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM jobs"), 1);
}

/* ---------------- usage ---------------- */

struct usage_rows {
    char teams[8][16];
    double v[8];
    int n;
};

static int usage_cb(void *ctx, const char *team, double v)
{
    struct usage_rows *u = ctx;
    if (u->n < 8) {
        gq_strlcpy(u->teams[u->n], team, sizeof u->teams[0]);
        u->v[u->n] = v;
    }
    u->n++;
    return 0;
}

static void test_usage(void **state)
{
    struct fx *fx = *state;
    struct store *st = NULL;
    struct store_opts o = {.usage_bucket_s = 60};
    char err[256];
    double v = -1;
    struct usage_rows u = {0};
    const int64_t H = 3600 * 1000;

    assert_int_equal(store_open(fx->path, &o, &st, err, sizeof err), 0);
    /* Two adds into bucket [0, 60 s) and one into [60 s, 120 s). */
    assert_int_equal(store_usage_add(st, "vision", 1000, 60.0, err, sizeof err), 0);
    assert_int_equal(store_usage_add(st, "vision", 59999, 40.0, err, sizeof err), 0);
    assert_int_equal(store_usage_add(st, "nlp", 60000, 10.0, err, sizeof err), 0);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM usage"), 2);

    /* One half-life after the bucket ended: half. */
    assert_int_equal(store_usage_decayed(st, "vision", 60000 + H, 3600, &v, err, sizeof err), 0);
    assert_true(fabs(v - 50.0) < 1e-9);
    /* Two half-lives: a quarter. */
    assert_int_equal(store_usage_decayed(st, "vision", 60000 + 2 * H, 3600, &v, err, sizeof err),
                     0);
    assert_true(fabs(v - 25.0) < 1e-9);
    /* No decay, and a bucket still open counts fully. */
    assert_int_equal(store_usage_decayed(st, "vision", 60000 + H, 0, &v, err, sizeof err), 0);
    assert_true(fabs(v - 100.0) < 1e-9);
    assert_int_equal(store_usage_decayed(st, "vision", 30000, 3600, &v, err, sizeof err), 0);
    assert_true(fabs(v - 100.0) < 1e-9);
    assert_int_equal(store_usage_decayed(st, "nobody", 30000, 3600, &v, err, sizeof err), 0);
    assert_true(v == 0.0);

    assert_int_equal(store_usage_decayed_all(st, 120000 + H, 3600, usage_cb, &u, err,
                                             sizeof err), 0);
    assert_int_equal(u.n, 2);
    assert_string_equal(u.teams[0], "nlp");
    assert_true(fabs(u.v[0] - 5.0) < 1e-9);
    assert_string_equal(u.teams[1], "vision");
    /* vision's bucket ended 60 s earlier than nlp's: 100 * 0.5^((3600+60)/3600). */
    assert_true(fabs(u.v[1] - 100.0 * exp2(-3660.0 / 3600.0)) < 1e-9);

    assert_int_equal(store_usage_add(st, "vision", 0, -1.0, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_usage_add(st, "vision", 0, NAN, err, sizeof err), GQ_EINVAL);
    assert_int_equal(store_usage_add(st, "", 0, 1.0, err, sizeof err), GQ_EINVAL);

    /* Prune buckets that ended before 100 s: vision's [0,60) goes, nlp's [60,120) stays. */
    assert_int_equal(store_usage_prune(st, 100000, err, sizeof err), 0);
    memset(&u, 0, sizeof u);
    assert_int_equal(store_usage_decayed_all(st, 0, 0, usage_cb, &u, err, sizeof err), 0);
    assert_int_equal(u.n, 1);
    assert_string_equal(u.teams[0], "nlp");
    store_close(st);
}

/* ---------------- audit ---------------- */

struct audit_rows {
    int64_t ids[16];
    char text[1024];
    int n;
};

static int audit_cb(void *ctx, const struct store_audit *a)
{
    struct audit_rows *r = ctx;
    size_t len = strlen(r->text);
    if (r->n < 16)
        r->ids[r->n] = a->id;
    r->n++;
    snprintf(r->text + len, sizeof r->text - len, "%lld|%s|%s|%s|%s|%s|%s|%s\n",
             (long long)a->time_ms, a->actor, a->action, a->team, a->job_key, a->old_value,
             a->new_value, a->reason);
    return 0;
}

static void test_audit(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256];
    struct audit_rows r;
    struct store_audit es[] = {
        {0, 300, "gangq", "admit", "vision", "ml/a", "Queued", "Admitted", "fits rack r1"},
        {0, 100, "user:alice", "quota-edit", "vision", "", "8", "16", "kubectl patch"},
        {0, 200, "gangq", "preempt", "nlp", "ml/b", "Running", "Preempted", "for ml/a"},
        {0, 300, "gangq", "admit", "nlp", "ml/c", "Queued", "Admitted", ""},
        {0, 400, "gangq", "suspend", "vision", "ml/a", "Running", "Suspended", "spec.suspend"},
    };
    size_t i;
    for (i = 0; i < GQ_ARRAY_LEN(es); i++)
        assert_int_equal(store_audit_add(st, &es[i], err, sizeof err), 0);

    memset(&r, 0, sizeof r);
    assert_int_equal(store_audit_query(st, NULL, audit_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 5);
    /* Oldest first; equal times by insertion order. */
    assert_string_equal(r.text,
                        "100|user:alice|quota-edit|vision||8|16|kubectl patch\n"
                        "200|gangq|preempt|nlp|ml/b|Running|Preempted|for ml/a\n"
                        "300|gangq|admit|vision|ml/a|Queued|Admitted|fits rack r1\n"
                        "300|gangq|admit|nlp|ml/c|Queued|Admitted|\n"
                        "400|gangq|suspend|vision|ml/a|Running|Suspended|spec.suspend\n");

    struct store_audit_filter f = {.team = "vision"};
    memset(&r, 0, sizeof r);
    assert_int_equal(store_audit_query(st, &f, audit_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 3);

    f = (struct store_audit_filter){.job_key = "ml/a"};
    memset(&r, 0, sizeof r);
    assert_int_equal(store_audit_query(st, &f, audit_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 2);
    assert_non_null(strstr(r.text, "admit|vision|ml/a"));
    assert_non_null(strstr(r.text, "suspend|vision|ml/a"));

    f = (struct store_audit_filter){.since_ms = 300};
    memset(&r, 0, sizeof r);
    assert_int_equal(store_audit_query(st, &f, audit_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 3);

    /* limit keeps the most recent N, still oldest first. */
    f = (struct store_audit_filter){.limit = 2};
    memset(&r, 0, sizeof r);
    assert_int_equal(store_audit_query(st, &f, audit_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.text,
                        "300|gangq|admit|nlp|ml/c|Queued|Admitted|\n"
                        "400|gangq|suspend|vision|ml/a|Running|Suspended|spec.suspend\n");

    f = (struct store_audit_filter){.team = "nlp", .job_key = "ml/c", .since_ms = 1, .limit = 9};
    memset(&r, 0, sizeof r);
    assert_int_equal(store_audit_query(st, &f, audit_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 1);

    struct store_audit bad = {.time_ms = 1};
    assert_int_equal(store_audit_add(st, &bad, err, sizeof err), GQ_EINVAL);
    store_close(st);
}

/* Retention: entries older than the cut go, oldest first (equal times by
 * insertion), at most the batch asked for; newer ones and the count stay
 * right whatever the batch. */
static void test_audit_prune(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256];
    int deleted = -1;
    const int64_t times[] = {500, 100, 300, 300, 200, 400};
    const char *const keys[] = {"ml/e", "ml/a", "ml/c", "ml/d", "ml/b", "ml/f"};
    for (size_t i = 0; i < GQ_ARRAY_LEN(times); i++) {
        struct store_audit a = {0, times[i], "gangq", "admit", "t", keys[i], "Queued", "Admitted", ""};
        assert_int_equal(store_audit_add(st, &a, err, sizeof err), 0);
    }
    /* cut at 301 (100, 200, 300, 300 are older), batch 3: the three oldest */
    assert_int_equal(store_audit_prune(st, 301, 3, &deleted, err, sizeof err), 0);
    assert_int_equal(deleted, 3);
    struct audit_rows r;
    memset(&r, 0, sizeof r);
    assert_int_equal(store_audit_query(st, NULL, audit_cb, &r, err, sizeof err), 0);
    assert_string_equal(r.text, "300|gangq|admit|t|ml/d|Queued|Admitted|\n"
                                "400|gangq|admit|t|ml/f|Queued|Admitted|\n"
                                "500|gangq|admit|t|ml/e|Queued|Admitted|\n");
    /* the rest of the backlog: fewer than the batch, so nothing older is left */
    assert_int_equal(store_audit_prune(st, 301, 3, &deleted, err, sizeof err), 0);
    assert_int_equal(deleted, 1);
    assert_int_equal(store_audit_prune(st, 301, 3, &deleted, err, sizeof err), 0);
    assert_int_equal(deleted, 0);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM audit"), 2);
    /* inside a cycle's transaction, rolled back with it */
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    assert_int_equal(store_audit_prune(st, 1000, 10, &deleted, err, sizeof err), 0);
    assert_int_equal(deleted, 2);
    store_rollback_cycle(st);
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM audit"), 2);
    /* a batch must be positive: refused with the reason, nothing deleted */
    err[0] = 0;
    assert_int_equal(store_audit_prune(st, 1000, 0, &deleted, err, sizeof err), GQ_EINVAL);
    assert_int_equal(deleted, 0);
    assert_non_null(strstr(err, "limit"));
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM audit"), 2);
    store_close(st);
}

/* ---------------- migrations ---------------- */

/* Schema v1 exactly as that version created it. */
static const char *const V1_SQL =
    "CREATE TABLE jobs(key TEXT PRIMARY KEY NOT NULL, uid TEXT NOT NULL DEFAULT '',"
    " team TEXT NOT NULL DEFAULT '', cls TEXT NOT NULL DEFAULT '',"
    " priority INTEGER NOT NULL DEFAULT 0, gpus INTEGER NOT NULL DEFAULT 0,"
    " enqueue_ms INTEGER NOT NULL DEFAULT 0, state INTEGER NOT NULL DEFAULT 0,"
    " attempts INTEGER NOT NULL DEFAULT 0, placement TEXT NOT NULL DEFAULT '',"
    " admitted_ms INTEGER NOT NULL DEFAULT 0, message TEXT NOT NULL DEFAULT '',"
    " generation INTEGER NOT NULL DEFAULT 0, resource_version TEXT NOT NULL DEFAULT '',"
    " updated_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX jobs_queue ON jobs(priority DESC, enqueue_ms, key);"
    "CREATE TABLE intents(id INTEGER PRIMARY KEY AUTOINCREMENT, kind INTEGER NOT NULL,"
    " job_key TEXT NOT NULL, payload TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL,"
    " done_ms INTEGER);"
    "CREATE INDEX intents_pending ON intents(id) WHERE done_ms IS NULL;"
    "CREATE TABLE usage(team TEXT NOT NULL, bucket_ms INTEGER NOT NULL,"
    " width_ms INTEGER NOT NULL, gpu_s REAL NOT NULL, PRIMARY KEY(team, bucket_ms))"
    " WITHOUT ROWID;"
    "CREATE TABLE audit(id INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL,"
    " actor TEXT NOT NULL DEFAULT '', action TEXT NOT NULL DEFAULT '',"
    " team TEXT NOT NULL DEFAULT '', job_key TEXT NOT NULL DEFAULT '',"
    " old_value TEXT NOT NULL DEFAULT '', new_value TEXT NOT NULL DEFAULT '',"
    " reason TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX audit_time ON audit(time_ms, id);"
    "CREATE INDEX audit_team ON audit(team, time_ms);"
    "CREATE INDEX audit_job ON audit(job_key, time_ms);"
    "PRAGMA user_version=1;"
    "INSERT INTO jobs(key,uid,team,cls,priority,gpus,enqueue_ms,state,attempts,placement,"
    " admitted_ms) VALUES('old/j1','u1','vision','Training',7,16,1234,2,3,'n1,n2',999);"
    "INSERT INTO jobs(key,team,priority,enqueue_ms) VALUES('old/j2','nlp',9,2000);"
    "INSERT INTO intents(kind,job_key,payload,created_ms) VALUES(1,'old/j1','n1,n2',5);"
    "INSERT INTO usage VALUES('vision',0,60000,120.0);"
    "INSERT INTO audit(time_ms,actor,action,team,job_key) VALUES(7,'gangq','admit','vision',"
    "'old/j1');";

static void test_migrate_v1(void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct store_job *g = NULL;
    struct intents r = {0};
    struct collect c = {0};
    struct audit_rows ar;
    char err[256], out[512] = "";
    double v = 0;

    raw_exec(fx->path, V1_SQL);
    assert_int_equal(raw_int(fx->path, "PRAGMA user_version"), 1);
    st = open_ok(fx->path);
    assert_int_equal(store_schema_version(st), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(fx->path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);

    /* Old rows intact, new columns defaulted. */
    assert_int_equal(store_job_get(st, "old/j1", &g, err, sizeof err), 0);
    assert_string_equal(g->uid, "u1");
    assert_string_equal(g->cls, "Training");
    assert_int_equal(g->priority, 7);
    assert_int_equal(g->gpus, 16);
    assert_int_equal(g->enqueue_ms, 1234);
    assert_int_equal(g->state, STORE_RUNNING);
    assert_int_equal(g->attempts, 3);
    assert_int_equal(g->admitted_ms, 999);
    assert_string_equal(g->placement, "n1,n2");
    assert_int_equal(g->retries, 0);
    assert_int_equal(g->preemptions, 0);
    assert_string_equal(g->preempted_by, "");
    assert_int_equal(g->arrival, 0);
    store_job_free(g);
    assert_int_equal(store_jobs_each(st, STORE_MASK_ALL, collect_cb, &c, err, sizeof err), 0);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.keys[0], "old/j2");
    assert_int_equal(store_intents_pending(st, intent_cb, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.keys[0], "old/j1");
    assert_int_equal(store_usage_decayed(st, "vision", 0, 0, &v, err, sizeof err), 0);
    assert_true(fabs(v - 120.0) < 1e-9);
    memset(&ar, 0, sizeof ar);
    assert_int_equal(store_audit_query(st, NULL, audit_cb, &ar, err, sizeof err), 0);
    assert_int_equal(ar.n, 1);

    /* The v2 features work on the migrated file. */
    struct store_transition pre = {.state = STORE_PREEMPTED, .preempted_by = "x/y",
                                   .preempt_reason = "r"};
    assert_int_equal(store_job_transition(st, "old/j1", &pre, 50, err, sizeof err), 0);
    struct store_alloc a = {"old/j2", "nlp", "H100", 4, 0};
    assert_int_equal(store_alloc_set(st, &a, err, sizeof err), 0);
    assert_int_equal(store_ledger_each(st, ledger_cb, out, err, sizeof err), 0);
    assert_string_equal(out, "nlp/H100:4,0,1;");
    /* ... and the v3 ones */
    struct store_team tm = {"vision", "u-t", 3, "{}", 0};
    struct store_team *tg = NULL;
    assert_int_equal(store_team_save(st, &tm, 60, err, sizeof err), 0);
    assert_int_equal(store_team_get(st, "vision", &tg, err, sizeof err), 0);
    assert_int_equal(tg->generation, 3);
    store_team_free(tg);
    store_close(st);

    /* Opening again is stable. */
    st = open_ok(fx->path);
    assert_int_equal(store_job_get(st, "old/j1", &g, err, sizeof err), 0);
    assert_int_equal(g->preemptions, 1);
    assert_string_equal(g->preempted_by, "x/y");
    store_job_free(g);
    store_close(st);
    raw_text(fx->path, "PRAGMA integrity_check", out, sizeof out);
    assert_string_equal(out, "ok");
}

static void test_migrate_readonly_refuses_old(void **state)
{
    struct fx *fx = *state;
    struct store *st = NULL;
    struct store_opts ro = {.readonly = 1};
    char err[512];
    raw_exec(fx->path, V1_SQL);
    assert_int_equal(store_open(fx->path, &ro, &st, err, sizeof err), GQ_EVERSION);
    assert_non_null(strstr(err, fx->path));
    assert_int_equal(raw_int(fx->path, "PRAGMA user_version"), 1);
}

static void test_refuse_newer(void **state)
{
    struct fx *fx = *state;
    struct store *st = NULL;
    char err[512], wal[160];
    struct snap s;

    raw_exec(fx->path, "CREATE TABLE future(x); INSERT INTO future VALUES(1);"
                       " PRAGMA user_version=999;");
    snap_take(fx->path, &s);
    sleep(0); /* mtime granularity is ns; any write would change it */
    assert_int_equal(store_open(fx->path, NULL, &st, err, sizeof err), GQ_EVERSION);
    assert_null(st);
    assert_non_null(strstr(err, fx->path));
    assert_non_null(strstr(err, "999"));
    snap_same(fx->path, &s);
    snprintf(wal, sizeof wal, "%s-wal", fx->path);
    assert_false(exists(wal));
    assert_int_equal(raw_int(fx->path, "PRAGMA user_version"), 999);
    raw_text(fx->path, "PRAGMA journal_mode", wal, sizeof wal);
    assert_string_equal(wal, "delete"); /* never switched to WAL */
}

static void test_refuse_foreign(void **state)
{
    struct fx *fx = *state;
    struct store *st = NULL;
    char err[512];
    raw_exec(fx->path, "CREATE TABLE other(x);");
    assert_int_equal(store_open(fx->path, NULL, &st, err, sizeof err), GQ_EVERSION);
    assert_non_null(strstr(err, fx->path));
    assert_non_null(strstr(err, "not a gangq database"));
    assert_int_equal(raw_int(fx->path, "SELECT count(*) FROM sqlite_master"), 1);
}

/* ---------------- error paths ---------------- */

static void test_corrupt_header(void **state)
{
    struct fx *fx = *state;
    struct store *st;
    char err[512];
    struct snap s;
    struct store_job j = mkjob("ns/j", "t", 1, 1);
    FILE *f;
    static const char garbage[100] = "this is not a SQLite header, it is garbage ..........";

    st = open_ok(fx->path);
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    store_close(st);
    f = fopen(fx->path, "r+b");
    assert_non_null(f);
    assert_int_equal(fwrite(garbage, 1, sizeof garbage, f), sizeof garbage);
    fclose(f);
    snap_take(fx->path, &s);

    st = NULL;
    assert_int_equal(store_open(fx->path, NULL, &st, err, sizeof err), GQ_ECORRUPT);
    assert_null(st);
    assert_non_null(strstr(err, fx->path));
    assert_non_null(strstr(err, "not a database")); /* SQLite's own message */
    snap_same(fx->path, &s);

    /* Read-only open says the same. */
    struct store_opts ro = {.readonly = 1};
    snap_take(fx->path, &s);
    assert_int_equal(store_open(fx->path, &ro, &st, err, sizeof err), GQ_ECORRUPT);
    assert_non_null(strstr(err, fx->path));
    snap_same(fx->path, &s);

    /* A plain text file is not overwritten either. */
    f = fopen(fx->path, "wb");
    assert_non_null(f);
    fputs("hello: world\n", f);
    fclose(f);
    snap_take(fx->path, &s);
    assert_int_equal(store_open(fx->path, NULL, &st, err, sizeof err), GQ_ECORRUPT);
    snap_same(fx->path, &s);
}

static void test_corrupt_page(void **state)
{
    struct fx *fx = *state;
    struct store *st;
    char err[512];
    struct store_job j = mkjob("ns/j", "t", 1, 1);
    char key[32], pad[200];
    int i;
    FILE *f;
    struct snap s;

    st = open_ok(fx->path);
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = 0;
    j.message = pad;
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    for (i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "ns/j%d", i);
        j.key = key;
        assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    }
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
    store_close(st); /* checkpoints the WAL into the file */

    /* Smash page 3 (an index or table page), header intact. */
    f = fopen(fx->path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 4096 * 2, SEEK_SET), 0);
    for (i = 0; i < 4096; i++)
        fputc(0xA5, f);
    fclose(f);
    snap_take(fx->path, &s);
    assert_int_equal(store_open(fx->path, NULL, &st, err, sizeof err), GQ_ECORRUPT);
    assert_non_null(strstr(err, fx->path));
    snap_same(fx->path, &s);
}

/* A corrupt copy in rollback-journal mode (as `sqlite3 .backup` or a plain
 * copy of such a file leaves it): the integrity check refuses it before the
 * WAL switch, which would rewrite header bytes 18-19, or a migration. */
static void test_corrupt_copy_untouched(void **state)
{
    struct fx *fx = *state;
    struct store *st;
    char err[512], key[32], pad[200], wal[160], mode[32];
    struct store_job j = mkjob("ns/j", "t", 1, 1);
    unsigned char hdr[20];
    struct snap s;
    FILE *f;
    int i;

    st = open_ok(fx->path);
    memset(pad, 'y', sizeof pad - 1);
    pad[sizeof pad - 1] = 0;
    j.message = pad;
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    for (i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "ns/c%d", i);
        j.key = key;
        assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    }
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
    store_close(st);
    raw_exec(fx->path, "PRAGMA journal_mode=DELETE");
    raw_text(fx->path, "PRAGMA journal_mode", mode, sizeof mode);
    assert_string_equal(mode, "delete");

    f = fopen(fx->path, "r+b");
    assert_non_null(f);
    assert_int_equal(fread(hdr, 1, sizeof hdr, f), sizeof hdr);
    assert_int_equal(hdr[18], 1); /* rollback journal: file format 1 */
    assert_int_equal(hdr[19], 1);
    assert_int_equal(fseek(f, 4096 * 2, SEEK_SET), 0);
    for (i = 0; i < 4096; i++)
        fputc(0x5A, f);
    fclose(f);

    snap_take(fx->path, &s);
    st = NULL;
    assert_int_equal(store_open(fx->path, NULL, &st, err, sizeof err), GQ_ECORRUPT);
    assert_null(st);
    assert_non_null(strstr(err, fx->path));
    snap_same(fx->path, &s); /* every byte and the mtime */
    snprintf(wal, sizeof wal, "%s-wal", fx->path);
    assert_false(exists(wal));

    /* Refused again on a second try: nothing was half-converted. */
    snap_take(fx->path, &s);
    assert_int_equal(store_open(fx->path, NULL, &st, err, sizeof err), GQ_ECORRUPT);
    snap_same(fx->path, &s);
}

/* Read-only file: run in a child that has dropped root (root ignores modes). */
static void test_readonly_file(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[512];
    struct store_job j = mkjob("ns/ro", "t", 1, 1);
    pid_t pid;
    int status = 0;

    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    store_close(st);
    assert_int_equal(chmod(fx->path, 0444), 0);
    assert_int_equal(chmod(fx->dir, 0777), 0);

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store_opts ro = {.readonly = 1};
        struct store_job *g = NULL;
        int64_t n = 0;
        int code = 0;
        if (geteuid() == 0) {
            struct passwd *pw = getpwnam("nobody");
            uid_t uid = pw ? pw->pw_uid : 65534;
            if (setgid(uid) != 0 || setuid(uid) != 0)
                _exit(10);
        }
        st = NULL;
        if (store_open(fx->path, NULL, &st, err, sizeof err) != GQ_EIO)
            code = 11;
        else if (!strstr(err, fx->path) || !strstr(err, "read-only")) {
            fprintf(stderr, "unexpected message: %s\n", err);
            code = 12;
        }
        if (st)
            code = 13;
        /* Read-only mode reads it fine and refuses writes. */
        if (!code && store_open(fx->path, &ro, &st, err, sizeof err) != 0)
            code = 14;
        if (!code && store_job_get(st, "ns/ro", &g, err, sizeof err) != 0)
            code = 15;
        if (!code && store_jobs_count(st, STORE_MASK_ALL, &n, err, sizeof err) != 0)
            code = 16;
        if (!code && n != 1)
            code = 17;
        if (!code && store_job_upsert(st, &j, 1, err, sizeof err) != GQ_EINVAL)
            code = 18;
        if (!code && store_begin_cycle(st, err, sizeof err) != GQ_EINVAL)
            code = 19;
        store_job_free(g);
        store_close(st);
        _exit(code);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    chmod(fx->path, 0600);
}

static void test_disk_full(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[512], key[32], big[2048];
    struct store_job j = mkjob("ns/x", "t", 1, 1), *g = NULL;
    int i, rc = 0, full_at = -1;
    int64_t n = 0;

    memset(big, 'p', sizeof big - 1);
    big[sizeof big - 1] = 0;
    j.placement = big;
    /* Some committed data first. */
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    /* A cap a few pages above the current size (pages in the WAL count). */
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
    {
        int64_t pages = raw_int(fx->path, "PRAGMA page_count");
        assert_true(pages > 0);
        assert_int_equal(store_set_max_pages(st, pages + 4, err, sizeof err), 0);
    }

    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    for (i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "ns/full%d", i);
        j.key = key;
        rc = store_job_upsert(st, &j, 1, err, sizeof err);
        if (rc) {
            full_at = i;
            break;
        }
    }
    assert_int_equal(rc, GQ_EFULL);
    assert_true(full_at > 0);
    assert_non_null(strstr(err, fx->path));
    store_rollback_cycle(st);
    assert_false(store_in_cycle(st));
    /* Nothing of the failed cycle is there; what was committed before is. */
    assert_int_equal(store_jobs_count(st, STORE_MASK_ALL, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_job_get(st, "ns/x", &g, err, sizeof err), 0);
    store_job_free(g);

    /* The same failure at commit time reports GQ_EFULL and leaves no cycle open:
     * a smaller cycle that still fits in the cap works. */
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    j.key = "ns/small";
    j.placement = "p";
    assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);

    /* Raise the limit: the retried cycle commits whole. */
    assert_int_equal(store_set_max_pages(st, 0, err, sizeof err), 0);
    j.placement = big;
    assert_int_equal(store_begin_cycle(st, err, sizeof err), 0);
    for (i = 0; i < full_at + 10; i++) {
        snprintf(key, sizeof key, "ns/full%d", i);
        j.key = key;
        assert_int_equal(store_job_upsert(st, &j, 1, err, sizeof err), 0);
    }
    assert_int_equal(store_commit_cycle(st, err, sizeof err), 0);
    assert_int_equal(store_jobs_count(st, STORE_MASK_ALL, &n, err, sizeof err), 0);
    assert_int_equal(n, full_at + 12);
    store_close(st);
}


/* ---------------- gangq audit ---------------- */

/* Run cmd_audit with stdout captured into out. */
static int run_audit(struct fx *fx, char *out, size_t outlen, int argc, char **argv)
{
    char cap[160];
    int saved, fd, rc;
    ssize_t n;
    snprintf(cap, sizeof cap, "%s/out.txt", fx->dir);
    fflush(stdout);
    saved = dup(1);
    fd = open(cap, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    rc = cmd_audit(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    n = pread(fd, out, outlen - 1, 0);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    return rc;
}

static void test_audit_cmd(void **state)
{
    struct fx *fx = *state;
    struct store *st = open_ok(fx->path);
    char err[256], out[4096];
    struct snap s;
    struct store_audit es[] = {
        {0, 1764500000000LL, "user:alice", "quota-edit", "vision", "", "8", "16", "patch"},
        {0, 1764510000000LL, "gangq", "admit", "vision", "ml/a", "Queued", "Admitted", "fits"},
        {0, 1764520000000LL, "gangq", "preempt", "nlp", "nlp/b", "Running", "Preempted",
         "for \"ml/a\""},
    };
    size_t i;
    for (i = 0; i < GQ_ARRAY_LEN(es); i++)
        assert_int_equal(store_audit_add(st, &es[i], err, sizeof err), 0);
    store_close(st);
    snap_take(fx->path, &s);

    char *a1[] = {"audit", "--db", fx->path};
    assert_int_equal(run_audit(fx, out, sizeof out, 3, a1), 0);
    assert_non_null(strstr(out, "TIME"));
    assert_non_null(strstr(out, "OLD \xe2\x86\x92 NEW"));
    assert_non_null(strstr(out, "2025-11-30T10:53:20Z  user:alice  quota-edit  vision  -"));
    assert_non_null(strstr(out, "8 \xe2\x86\x92 16"));
    /* oldest first */
    assert_true(strstr(out, "quota-edit") < strstr(out, "preempt"));

    char *a2[] = {"audit", "--db", fx->path, "--team", "nlp", "--json"};
    assert_int_equal(run_audit(fx, out, sizeof out, 6, a2), 0);
    assert_non_null(strstr(out, "\"job\":\"nlp/b\""));
    assert_non_null(strstr(out, "\"reason\":\"for \\\"ml/a\\\"\""));
    assert_null(strstr(out, "vision"));

    /* RFC3339 with offset: 2025-11-30T14:00:00+01:00 is 13:00Z, after the first entry. */
    char *a3[] = {"audit", "--db", fx->path, "--since", "2025-11-30T14:00:00+01:00"};
    assert_int_equal(run_audit(fx, out, sizeof out, 5, a3), 0);
    assert_null(strstr(out, "quota-edit"));
    assert_non_null(strstr(out, "ml/a"));

    /* A relative time: nothing happened in the last hour of the real clock. */
    char *a4[] = {"audit", "--db", fx->path, "--since", "1h30m", "--job", "ml/a"};
    assert_int_equal(run_audit(fx, out, sizeof out, 7, a4), 0);
    assert_non_null(strstr(out, "no audit entries match"));

    char *a5[] = {"audit", "--db", fx->path, "--limit", "1"};
    assert_int_equal(run_audit(fx, out, sizeof out, 5, a5), 0);
    assert_non_null(strstr(out, "preempt"));
    assert_null(strstr(out, "admit "));

    char *b1[] = {"audit", "--db", fx->path, "--since", "yesterday"};
    assert_int_equal(run_audit(fx, out, sizeof out, 5, b1), 2);
    char *b2[] = {"audit", "--db", fx->path, "--job", "nons"};
    assert_int_equal(run_audit(fx, out, sizeof out, 5, b2), 2);
    char *b3[] = {"audit", "--team", "x"};
    assert_int_equal(run_audit(fx, out, sizeof out, 3, b3), 2);
    char *b4[] = {"audit", "--db", "/nonexistent/gangq.db"};
    assert_int_equal(run_audit(fx, out, sizeof out, 3, b4), 1);
    char *b5[] = {"audit", "--db", fx->path, "--limit", "0"};
    assert_int_equal(run_audit(fx, out, sizeof out, 5, b5), 2);
    /* The audit command never writes the database file. */
    snap_same(fx->path, &s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        T(test_open_fresh),
        T(test_open_bad_path),
        T(test_job_upsert_get),
        T(test_job_transitions),
        T(test_job_raise_attempts),
        T(test_queue_order),
        T(test_queue_arrival),
        T(test_team_specs),
        T(test_delete_and_ledger),
        T(test_intents),
        T(test_cycle),
        T(test_usage),
        T(test_audit),
        T(test_audit_prune),
        T(test_migrate_v1),
        T(test_migrate_readonly_refuses_old),
        T(test_refuse_newer),
        T(test_refuse_foreign),
        T(test_corrupt_header),
        T(test_corrupt_page),
        T(test_corrupt_copy_untouched),
        T(test_readonly_file),
        T(test_disk_full),
        T(test_audit_cmd),
#undef T
    };
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
