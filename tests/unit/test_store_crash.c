/*
 * Crash test for store/: a child process writes scheduling cycles in a loop and
 * is killed with SIGKILL at random points, hundreds of times. After each kill
 * the parent reopens the file and checks:
 *  - PRAGMA integrity_check is "ok";
 *  - every cycle is whole or absent: N job rows, one intent and one audit row
 *    tagged with the cycle number, never a part of them;
 *  - every cycle the child reported as committed (it writes the number to a
 *    pipe after store_commit_cycle returned) is there;
 *  - unfinished intents are reported: the child marks a cycle's intent done
 *    only after the commit, so at most the newest cycle's intent is pending,
 *    and every older one is done.
 * GQ_CRASH_ITERS overrides the number of kills (default 300).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

#define ROWS_PER_CYCLE 20

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

/* The child: cycles start, start+1, ... until killed. Never returns. */
static void child_loop(const char *path, int64_t start, int wfd)
{
    struct store *st = NULL;
    char err[512], key[64], team[32], payload[32];
    int64_t c, id = 0;
    int i;

    struct store_opts o = {.usage_bucket_s = 1};
    if (store_open(path, &o, &st, err, sizeof err) != 0) {
        fprintf(stderr, "child: %s\n", err);
        _exit(3);
    }
    for (c = start;; c++) {
        struct store_job j = {0};
        struct store_audit a = {0};
        snprintf(team, sizeof team, "c%lld", (long long)c);
        snprintf(payload, sizeof payload, "%lld", (long long)c);
        if (store_begin_cycle(st, err, sizeof err) != 0)
            goto fail;
        for (i = 0; i < ROWS_PER_CYCLE; i++) {
            snprintf(key, sizeof key, "crash/c%lld-%d", (long long)c, i);
            j.key = key;
            j.uid = key;
            j.team = team;
            j.cls = "Batch";
            j.priority = c;
            j.gpus = 8;
            j.enqueue_ms = c * 1000 + i;
            j.state = STORE_QUEUED;
            j.placement = "{\"nodes\":[\"node-a\",\"node-b\",\"node-c\",\"node-d\"]}";
            if (store_job_upsert(st, &j, c, err, sizeof err) != 0)
                goto fail;
        }
        snprintf(key, sizeof key, "crash/c%lld-0", (long long)c);
        if (store_intent_add(st, STORE_INTENT_ADMIT, key, payload, c, &id, err, sizeof err))
            goto fail;
        a.time_ms = c;
        a.actor = "gangq";
        a.action = "admit";
        a.team = team;
        a.job_key = key;
        a.new_value = payload;
        if (store_audit_add(st, &a, err, sizeof err) != 0)
            goto fail;
        if (store_usage_add(st, "crash", c * 1000, 1.0, err, sizeof err) != 0)
            goto fail;
        if (store_commit_cycle(st, err, sizeof err) != 0)
            goto fail;
        if (write(wfd, &c, sizeof c) != (ssize_t)sizeof c)
            _exit(4);
        /* The actuator acted; record it. */
        if (store_intent_done(st, id, c, err, sizeof err) != 0)
            goto fail;
    }
fail:
    fprintf(stderr, "child: cycle %lld: %s\n", (long long)c, err);
    _exit(5);
}

struct pending {
    int64_t ids[8];
    int64_t cycles[8];
    int n;
};

static int pending_cb(void *ctx, const struct store_intent *in)
{
    struct pending *p = ctx;
    int64_t c = 0;
    if (p->n < 8) {
        p->ids[p->n] = in->id;
        if (gq_parse_i64(in->payload, (size_t)-1, &c) != 0)
            c = -1;
        p->cycles[p->n] = c;
    }
    p->n++;
    return 0;
}

static void sql_text(sqlite3 *db, const char *sql, char *out, size_t outlen)
{
    sqlite3_stmt *s = NULL;
    out[0] = 0;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        gq_strlcpy(out, (const char *)sqlite3_column_text(s, 0), outlen);
    sqlite3_finalize(s);
}

/* Per-cycle counts of jobs, intents and audit rows; each must be all or nothing. */
static int64_t check_cycles(sqlite3 *db, const int64_t *reported, size_t nrep, int64_t *ncycles)
{
    sqlite3_stmt *s = NULL;
    int64_t max = -1;
    size_t i;
    *ncycles = 0;
    assert_int_equal(sqlite3_prepare_v2(db,
        "SELECT j.priority, j.n,"
        " (SELECT count(*) FROM intents WHERE payload = CAST(j.priority AS TEXT)),"
        " (SELECT count(*) FROM audit WHERE new_value = CAST(j.priority AS TEXT)),"
        " (SELECT count(*) FROM usage WHERE team='crash' AND bucket_ms/1000 = j.priority)"
        " FROM (SELECT priority, count(*) AS n FROM jobs GROUP BY priority) j", -1, &s, NULL),
        SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
        int64_t c = sqlite3_column_int64(s, 0);
        if (sqlite3_column_int64(s, 1) != ROWS_PER_CYCLE ||
            sqlite3_column_int64(s, 2) != 1 || sqlite3_column_int64(s, 3) != 1 ||
            sqlite3_column_int64(s, 4) != 1)
            fail_msg("cycle %lld is not whole: %lld jobs, %lld intents, %lld audit, %lld usage",
                     (long long)c, (long long)sqlite3_column_int64(s, 1),
                     (long long)sqlite3_column_int64(s, 2),
                     (long long)sqlite3_column_int64(s, 3),
                     (long long)sqlite3_column_int64(s, 4));
        (*ncycles)++;
        if (c > max)
            max = c;
    }
    sqlite3_finalize(s);
    /* No half cycle hides in a table the jobs query does not see. */
    {
        char t[64];
        sql_text(db, "SELECT count(*) FROM intents WHERE CAST(payload AS INTEGER) NOT IN"
                     " (SELECT priority FROM jobs)", t, sizeof t);
        assert_string_equal(t, "0");
        sql_text(db, "SELECT count(*) FROM audit WHERE CAST(new_value AS INTEGER) NOT IN"
                     " (SELECT priority FROM jobs)", t, sizeof t);
        assert_string_equal(t, "0");
    }
    for (i = 0; i < nrep; i++) {
        char sql[128], t[32];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE priority=%lld",
                 (long long)reported[i]);
        sql_text(db, sql, t, sizeof t);
        if (strcmp(t, "20") != 0)
            fail_msg("committed cycle %lld lost (%s rows)", (long long)reported[i], t);
    }
    return max;
}

static void test_crash_loop(void **state)
{
    (void)state;
    char dir[64], path[128], err[512];
    const char *env = getenv("GQ_CRASH_ITERS");
    int64_t iters = 300, it, next = 1;
    int64_t total_reported = 0, total_cycles = 0, kills_before_commit = 0, pending_seen = 0;
    unsigned seed = 12345;
    struct timespec t0, t1;

    if (env)
        assert_int_equal(gq_parse_i64(env, (size_t)-1, &iters), 0);
    gq_strlcpy(dir, "/tmp/gq-store-crash-XXXXXX", sizeof dir);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/crash.db", dir);
    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (it = 0; it < iters; it++) {
        int fds[2], status = 0;
        pid_t pid;
        int64_t rep[8192], c, max_db, ncycles = 0, max_rep = -1;
        size_t nrep = 0;
        ssize_t n;
        struct timespec d;
        struct store *st = NULL;
        struct pending p = {0};
        sqlite3 *db = NULL;
        char ic[64];

        assert_int_equal(pipe(fds), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child_loop(path, next, fds[1]);
        }
        close(fds[1]);
        /* Every other child is first let commit one cycle (up to 5 s: a slow
         * disk or a sanitizer build can take longer than the whole random
         * window to open the store and fsync), so kills land in the middle of
         * writing cycles too, not only while the child starts. */
        if (it % 2) {
            struct pollfd pf = {fds[0], POLLIN, 0};
            if (poll(&pf, 1, 5000) == 1 && read(fds[0], &c, sizeof c) == (ssize_t)sizeof c) {
                rep[nrep++] = c;
                if (c > max_rep)
                    max_rep = c;
            }
        }
        /* Random kill point: 0–12 ms later, sometimes before the child opened. */
        d.tv_sec = 0;
        d.tv_nsec = (long)(rand_r(&seed) % 12000) * 1000L;
        nanosleep(&d, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            fail_msg("child exited on its own (status %d) at iteration %lld", status,
                     (long long)it);
        while ((n = read(fds[0], &c, sizeof c)) == (ssize_t)sizeof c)
            if (nrep < GQ_ARRAY_LEN(rep)) {
                rep[nrep++] = c;
                if (c > max_rep)
                    max_rep = c;
            }
        close(fds[0]);
        total_reported += (int64_t)nrep;
        if (nrep == 0)
            kills_before_commit++;

        /* Reopen through the store first: recovery + migration + quick_check. */
        if (store_open(path, NULL, &st, err, sizeof err) != 0)
            fail_msg("iteration %lld: reopen failed: %s", (long long)it, err);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sql_text(db, "PRAGMA integrity_check", ic, sizeof ic);
        if (strcmp(ic, "ok") != 0)
            fail_msg("iteration %lld: integrity_check: %s", (long long)it, ic);
        max_db = check_cycles(db, rep, nrep, &ncycles);
        sqlite3_close(db);
        total_cycles += ncycles;

        assert_int_equal(store_intents_pending(st, pending_cb, &p, err, sizeof err), 0);
        assert_true(p.n <= 1);
        if (p.n == 1) {
            /* The unfinished one is the newest committed cycle. */
            assert_int_equal(p.cycles[0], max_db);
            pending_seen++;
            /* The controller would reconcile it; mark it done. */
            assert_int_equal(store_intent_done(st, p.ids[0], 0, err, sizeof err), 0);
        }
        /* Cycles before the newest have their intents done. */
        if (max_db >= 0) {
            struct pending again = {0};
            assert_int_equal(store_intents_pending(st, pending_cb, &again, err, sizeof err), 0);
            assert_int_equal(again.n, 0);
        }
        /* Clean slate for the next child (cycle numbers keep growing). */
        store_close(st);
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "DELETE FROM jobs; DELETE FROM intents;"
                                          " DELETE FROM audit; DELETE FROM usage;",
                                      NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        next = (max_db > max_rep ? max_db : max_rep) + 1;
        if (next < 1)
            next = 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("crash test: %lld kills, %lld cycles reported committed by children, %lld whole"
           " cycles found, %lld kills before the first commit, %lld unfinished intents"
           " reported, %.1f s\n",
           (long long)iters, (long long)total_reported, (long long)total_cycles,
           (long long)kills_before_commit, (long long)pending_seen,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    assert_true(total_cycles >= total_reported);
    assert_true(total_reported > 0);
    nftw(dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_loop),
    };
    return cmocka_run_group_tests_name("store_crash", tests, NULL, NULL);
}
