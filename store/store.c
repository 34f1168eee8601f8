/* store.c — SQLite-backed durable state (see store.h for the contract). */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- schema: migrations[i] takes a file from version i to version i+1 ---- */

static const char *const migrations[STORE_SCHEMA_VERSION] = {
    /* 0 → 1: initial schema */
    "CREATE TABLE jobs("
    " key TEXT PRIMARY KEY NOT NULL,"
    " uid TEXT NOT NULL DEFAULT '',"
    " team TEXT NOT NULL DEFAULT '',"
    " cls TEXT NOT NULL DEFAULT '',"
    " priority INTEGER NOT NULL DEFAULT 0,"
    " gpus INTEGER NOT NULL DEFAULT 0,"
    " enqueue_ms INTEGER NOT NULL DEFAULT 0,"
    " state INTEGER NOT NULL DEFAULT 0,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " placement TEXT NOT NULL DEFAULT '',"
    " admitted_ms INTEGER NOT NULL DEFAULT 0,"
    " message TEXT NOT NULL DEFAULT '',"
    " generation INTEGER NOT NULL DEFAULT 0,"
    " resource_version TEXT NOT NULL DEFAULT '',"
    " updated_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX jobs_queue ON jobs(priority DESC, enqueue_ms, key);"
    "CREATE TABLE intents("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " kind INTEGER NOT NULL,"
    " job_key TEXT NOT NULL,"
    " payload TEXT NOT NULL DEFAULT '',"
    " created_ms INTEGER NOT NULL,"
    " done_ms INTEGER);"
    "CREATE INDEX intents_pending ON intents(id) WHERE done_ms IS NULL;"
    "CREATE TABLE usage("
    " team TEXT NOT NULL,"
    " bucket_ms INTEGER NOT NULL,"
    " width_ms INTEGER NOT NULL,"
    " gpu_s REAL NOT NULL,"
    " PRIMARY KEY(team, bucket_ms)) WITHOUT ROWID;"
    "CREATE TABLE audit("
    " id INTEGER PRIMARY KEY,"
    " time_ms INTEGER NOT NULL,"
    " actor TEXT NOT NULL DEFAULT '',"
    " action TEXT NOT NULL DEFAULT '',"
    " team TEXT NOT NULL DEFAULT '',"
    " job_key TEXT NOT NULL DEFAULT '',"
    " old_value TEXT NOT NULL DEFAULT '',"
    " new_value TEXT NOT NULL DEFAULT '',"
    " reason TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX audit_time ON audit(time_ms, id);"
    "CREATE INDEX audit_team ON audit(team, time_ms);"
    "CREATE INDEX audit_job ON audit(job_key, time_ms);",
    /* 1 → 2: preemption bookkeeping and retries on jobs; the quota ledger */
    "ALTER TABLE jobs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN preempted_by TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN preempt_reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN preempted_ms INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE alloc("
    " job_key TEXT PRIMARY KEY NOT NULL,"
    " team TEXT NOT NULL,"
    " gpu_type TEXT NOT NULL DEFAULT '',"
    " gpus INTEGER NOT NULL DEFAULT 0,"
    " borrowed INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX alloc_team ON alloc(team, gpu_type);",
    /* 2 → 3: arrival order of jobs (ties within one creation second); the last
     * valid spec of every Team */
    "ALTER TABLE jobs ADD COLUMN arrival INTEGER NOT NULL DEFAULT 0;"
    "DROP INDEX jobs_queue;"
    "CREATE INDEX jobs_queue ON jobs(priority DESC, enqueue_ms, arrival, key);"
    "CREATE TABLE teams("
    " name TEXT PRIMARY KEY NOT NULL,"
    " uid TEXT NOT NULL DEFAULT '',"
    " generation INTEGER NOT NULL DEFAULT 0,"
    " object TEXT NOT NULL DEFAULT '',"
    " updated_ms INTEGER NOT NULL DEFAULT 0);",
    /* 3 → 4: each Team's allocation totals, kept by triggers on alloc (the
     * ledger settle read every row of the Team at each admission) */
    "CREATE TABLE team_alloc("
    " team TEXT PRIMARY KEY NOT NULL,"
    " gpus INTEGER NOT NULL DEFAULT 0,"
    " borrowed INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
    "INSERT INTO team_alloc(team,gpus,borrowed) SELECT team,SUM(gpus),SUM(borrowed) FROM alloc"
    " GROUP BY team;"
    "CREATE TRIGGER team_alloc_ins AFTER INSERT ON alloc BEGIN"
    " INSERT INTO team_alloc(team,gpus,borrowed) VALUES(NEW.team,NEW.gpus,NEW.borrowed)"
    " ON CONFLICT(team) DO UPDATE SET gpus=gpus+excluded.gpus,borrowed=borrowed+excluded.borrowed;"
    " END;"
    "CREATE TRIGGER team_alloc_del AFTER DELETE ON alloc BEGIN"
    " UPDATE team_alloc SET gpus=gpus-OLD.gpus,borrowed=borrowed-OLD.borrowed WHERE team=OLD.team;"
    " END;"
    "CREATE TRIGGER team_alloc_upd AFTER UPDATE ON alloc BEGIN"
    " UPDATE team_alloc SET gpus=gpus-OLD.gpus,borrowed=borrowed-OLD.borrowed WHERE team=OLD.team;"
    " INSERT INTO team_alloc(team,gpus,borrowed) VALUES(NEW.team,NEW.gpus,NEW.borrowed)"
    " ON CONFLICT(team) DO UPDATE SET gpus=gpus+excluded.gpus,borrowed=borrowed+excluded.borrowed;"
    " END;",
};

/* ---- prepared statements ---- */

#define JOB_COLS \
    "key,uid,team,cls,priority,gpus,enqueue_ms,state,attempts,retries,placement," \
    "admitted_ms,message,preemptions,preempted_by,preempt_reason,preempted_ms," \
    "generation,resource_version,updated_ms,arrival"

/* Keep a decision column when the uid matches, else take the new value. */
#define KEEP(c) c "=CASE WHEN jobs.uid=excluded.uid THEN jobs." c " ELSE excluded." c " END"

enum {
    S_BEGIN, S_COMMIT, S_ROLLBACK,
    S_JOB_UPSERT, S_JOB_TRANSITION, S_JOB_DELETE, S_JOB_GET, S_JOBS_EACH, S_JOBS_COUNT,
    S_INTENT_ADD, S_INTENT_DONE, S_INTENTS_PENDING, S_INTENTS_PRUNE,
    S_ALLOC_SET, S_ALLOC_CLEAR, S_ALLOCS_EACH, S_LEDGER, S_ALLOCS_TEAM, S_ALLOCS_TEAM_SUM, S_ALLOC_BORROWED,
    S_USAGE_ADD, S_USAGE_TEAM, S_USAGE_ALL, S_USAGE_PRUNE,
    S_AUDIT_ADD, S_AUDIT_QUERY, S_AUDIT_PRUNE,
    S_TEAM_SAVE, S_TEAM_GET, S_TEAM_DELETE, S_JOB_RAISE_ATTEMPTS,
    S_COUNT
};

static const char *const stmt_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_JOB_UPSERT] =
        "INSERT INTO jobs(" JOB_COLS ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,"
        "?14,?15,?16,?17,?18,?19,?20,?21) ON CONFLICT(key) DO UPDATE SET "
        KEEP("enqueue_ms") "," KEEP("arrival") "," KEEP("state") "," KEEP("attempts") "," KEEP("retries") ","
        KEEP("placement") "," KEEP("admitted_ms") "," KEEP("message") ","
        KEEP("preemptions") "," KEEP("preempted_by") "," KEEP("preempt_reason") ","
        KEEP("preempted_ms") ","
        "uid=excluded.uid,team=excluded.team,cls=excluded.cls,priority=excluded.priority,"
        "gpus=excluded.gpus,generation=excluded.generation,"
        "resource_version=excluded.resource_version,updated_ms=excluded.updated_ms",
    [S_JOB_TRANSITION] =
        "UPDATE jobs SET state=?1,"
        " attempts=attempts+(?1=1),"
        " admitted_ms=CASE WHEN ?1=1 THEN ?2 ELSE admitted_ms END,"
        " preemptions=preemptions+(?1=4),"
        " preempted_ms=CASE WHEN ?1=4 THEN ?2 ELSE preempted_ms END,"
        " preempted_by=CASE WHEN ?1=4 THEN ?3 ELSE preempted_by END,"
        " preempt_reason=CASE WHEN ?1=4 THEN ?4 ELSE preempt_reason END,"
        " retries=retries+?5,"
        " placement=COALESCE(?6,placement),"
        " message=COALESCE(?7,message),"
        " updated_ms=?2"
        " WHERE key=?8",
    [S_JOB_DELETE] = "DELETE FROM jobs WHERE key=?1",
    [S_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE key=?1",
    [S_JOBS_EACH] = "SELECT " JOB_COLS " FROM jobs WHERE ((1<<state)&?1)!=0"
                    " ORDER BY priority DESC, enqueue_ms, arrival, key",
    [S_JOBS_COUNT] = "SELECT count(*) FROM jobs WHERE ((1<<state)&?1)!=0",
    [S_INTENT_ADD] = "INSERT INTO intents(kind,job_key,payload,created_ms) VALUES(?1,?2,?3,?4)",
    [S_INTENT_DONE] = "UPDATE intents SET done_ms=?2 WHERE id=?1 AND done_ms IS NULL",
    [S_INTENTS_PENDING] = "SELECT id,kind,job_key,payload,created_ms FROM intents"
                          " WHERE done_ms IS NULL ORDER BY id",
    [S_INTENTS_PRUNE] = "DELETE FROM intents WHERE done_ms IS NOT NULL AND done_ms<?1",
    /* after S_ALLOC_CLEAR of the key (a REPLACE would fire no delete trigger) */
    [S_ALLOC_SET] = "INSERT INTO alloc(job_key,team,gpu_type,gpus,borrowed)"
                    " VALUES(?1,?2,?3,?4,?5)",
    [S_ALLOC_CLEAR] = "DELETE FROM alloc WHERE job_key=?1",
    [S_ALLOCS_EACH] = "SELECT job_key,team,gpu_type,gpus,borrowed FROM alloc"
                      " ORDER BY team,gpu_type,job_key",
    [S_LEDGER] = "SELECT team,gpu_type,sum(gpus),sum(borrowed),count(*) FROM alloc"
                 " GROUP BY team,gpu_type ORDER BY team,gpu_type",
    [S_ALLOCS_TEAM] = "SELECT job_key,team,gpu_type,gpus,borrowed FROM alloc WHERE team=?1 ORDER BY rowid",
    [S_ALLOCS_TEAM_SUM] = "SELECT COALESCE(SUM(gpus),0),COALESCE(SUM(borrowed),0) FROM team_alloc WHERE team=?1",
    [S_ALLOC_BORROWED] = "UPDATE alloc SET borrowed=?2 WHERE job_key=?1",
    [S_USAGE_ADD] = "INSERT INTO usage(team,bucket_ms,width_ms,gpu_s) VALUES(?1,?2,?3,?4)"
                    " ON CONFLICT(team,bucket_ms) DO UPDATE SET gpu_s=gpu_s+excluded.gpu_s",
    [S_USAGE_TEAM] = "SELECT bucket_ms+width_ms,gpu_s FROM usage WHERE team=?1",
    [S_USAGE_ALL] = "SELECT team,bucket_ms+width_ms,gpu_s FROM usage ORDER BY team",
    [S_USAGE_PRUNE] = "DELETE FROM usage WHERE bucket_ms+width_ms<?1",
    /* oldest first, at most ?2 (the time index finds them) */
    [S_AUDIT_PRUNE] = "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE time_ms<?1"
                      " ORDER BY time_ms, id LIMIT ?2)",
    [S_AUDIT_ADD] = "INSERT INTO audit(time_ms,actor,action,team,job_key,old_value,new_value,"
                    "reason) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)",
    [S_AUDIT_QUERY] =
        "SELECT * FROM (SELECT id,time_ms,actor,action,team,job_key,old_value,new_value,reason"
        " FROM audit WHERE (?1='' OR team=?1) AND (?2='' OR job_key=?2) AND time_ms>=?3"
        " ORDER BY time_ms DESC, id DESC LIMIT ?4) ORDER BY time_ms, id",
    [S_TEAM_SAVE] = "INSERT OR REPLACE INTO teams(name,uid,generation,object,updated_ms)"
                    " VALUES(?1,?2,?3,?4,?5)",
    [S_TEAM_GET] = "SELECT name,uid,generation,object,updated_ms FROM teams WHERE name=?1",
    [S_TEAM_DELETE] = "DELETE FROM teams WHERE name=?1",
    [S_JOB_RAISE_ATTEMPTS] = "UPDATE jobs SET attempts=max(attempts,?2) WHERE key=?1",
};

struct store {
    sqlite3 *db;
    sqlite3_stmt *stmt[S_COUNT];
    char *path;
    int64_t bucket_ms;
    int version;
    int readonly;
    int in_cycle;
};

/* ---- helpers ---- */

static int map_rc(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK: case SQLITE_DONE: case SQLITE_ROW: return GQ_OK;
    case SQLITE_FULL: return GQ_EFULL;
    case SQLITE_BUSY: case SQLITE_LOCKED: return GQ_EBUSY;
    case SQLITE_CORRUPT: case SQLITE_NOTADB: return GQ_ECORRUPT;
    case SQLITE_NOMEM: return GQ_ENOMEM;
    case SQLITE_CONSTRAINT: return GQ_ECONFLICT;
    case SQLITE_TOOBIG: return GQ_ELIMIT;
    default: return GQ_EIO;
    }
}

/* Record a SQLite failure: "PATH: WHAT: sqlite message". Returns the gq code. */
static int sql_fail(struct store *st, int rc, const char *what, char *err, size_t errlen)
{
    gq_errf(err, errlen, "%s: %s: %s", st->path, what,
            st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
    return map_rc(rc);
}

static const char *nz(const char *s) { return s ? s : ""; }

static const char *col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

static void bind_text(sqlite3_stmt *s, int i, const char *v)
{
    sqlite3_bind_text(s, i, nz(v), -1, SQLITE_STATIC);
}

static void stmt_done(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* Inside a cycle, SQLite may have rolled the whole transaction back after an
 * error (e.g. SQLITE_FULL); refuse to go on writing in autocommit mode. */
static int write_guard(struct store *st, char *err, size_t errlen)
{
    if (st->readonly) {
        gq_errf(err, errlen, "%s: store opened read-only", st->path);
        return GQ_EINVAL;
    }
    if (st->in_cycle && sqlite3_get_autocommit(st->db)) {
        gq_errf(err, errlen, "%s: the cycle transaction was rolled back after an earlier error;"
                " call store_rollback_cycle and retry the cycle", st->path);
        return GQ_EIO;
    }
    return GQ_OK;
}

/* Step a write statement to completion and reset it. */
static int step_write(struct store *st, int idx, const char *what, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[idx];
    int rc = sqlite3_step(s);
    int ret = GQ_OK;
    if (rc != SQLITE_DONE)
        ret = sql_fail(st, rc, what, err, errlen);
    stmt_done(s);
    return ret;
}

static int exec_sql(struct store *st, const char *sql, const char *what, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    int ret = GQ_OK;
    if (rc != SQLITE_OK) {
        gq_errf(err, errlen, "%s: %s: %s", st->path, what, msg ? msg : sqlite3_errstr(rc));
        ret = map_rc(rc);
    }
    sqlite3_free(msg);
    return ret;
}

/* Single integer result of a pragma/query. */
static int query_int(struct store *st, const char *sql, int64_t *out, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    int ret = GQ_OK;
    if (rc != SQLITE_OK) {
        ret = sql_fail(st, rc, "cannot read the database", err, errlen);
        goto out;
    }
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE)
        *out = 0;
    else
        ret = sql_fail(st, rc, "cannot read the database", err, errlen);
out:
    sqlite3_finalize(s);
    return ret;
}

const char *store_state_name(int state)
{
    static const char *const names[STORE_NSTATES] = {
        "Queued", "Admitted", "Running", "Suspended", "Preempted", "Succeeded", "Failed",
    };
    if (state < 0 || state >= STORE_NSTATES)
        return "?";
    return names[state];
}

int store_state_parse(const char *s)
{
    int i;
    for (i = 0; s && i < STORE_NSTATES; i++)
        if (!strcmp(s, store_state_name(i)))
            return i;
    return -1;
}

const char *store_intent_kind_name(int kind)
{
    switch (kind) {
    case STORE_INTENT_ADMIT: return "admit";
    case STORE_INTENT_PREEMPT: return "preempt";
    case STORE_INTENT_SUSPEND: return "suspend";
    case STORE_INTENT_RESUME: return "resume";
    case STORE_INTENT_DELETE: return "delete";
    default: return "?";
    }
}

int store_intent_kind_parse(const char *s)
{
    int k;
    for (k = STORE_INTENT_ADMIT; s && k <= STORE_INTENT_DELETE; k++)
        if (!strcmp(s, store_intent_kind_name(k)))
            return k;
    return -1;
}

/* ---- open / migrate / close ---- */

static int migrate(struct store *st, char *err, size_t errlen)
{
    int64_t v = 0, objs = 0;
    int ret;
    char what[64];

    ret = exec_sql(st, "BEGIN IMMEDIATE", "cannot start the migration", err, errlen);
    if (ret)
        return ret;
    /* Re-read inside the write lock: another process may have migrated. */
    ret = query_int(st, "PRAGMA user_version", &v, err, errlen);
    if (ret)
        goto fail;
    if (v == 0) {
        ret = query_int(st, "SELECT count(*) FROM sqlite_master", &objs, err, errlen);
        if (ret)
            goto fail;
        if (objs > 0) {
            gq_errf(err, errlen, "%s: not a gangq database (schema version 0 but %lld objects"
                    " present); refusing to touch it", st->path, (long long)objs);
            ret = GQ_EVERSION;
            goto fail;
        }
    }
    for (; v < STORE_SCHEMA_VERSION; v++) {
        char pragma[48];
        snprintf(what, sizeof what, "migration to schema version %lld failed",
                 (long long)v + 1);
        ret = exec_sql(st, migrations[v], what, err, errlen);
        if (ret)
            goto fail;
        snprintf(pragma, sizeof pragma, "PRAGMA user_version=%lld", (long long)v + 1);
        ret = exec_sql(st, pragma, what, err, errlen);
        if (ret)
            goto fail;
    }
    ret = exec_sql(st, "COMMIT", "cannot commit the migration", err, errlen);
    if (ret)
        goto fail;
    st->version = STORE_SCHEMA_VERSION;
    return GQ_OK;
fail:
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return ret;
}

int store_open(const char *path, const struct store_opts *opts, struct store **out,
               char *err, size_t errlen)
{
    struct store *st = NULL;
    struct store_opts o = {0};
    int ret = GQ_OK, rc, i, flags;
    int64_t v = 0;
    sqlite3_stmt *qc = NULL;

    *out = NULL;
    if (!path || !*path) {
        gq_errf(err, errlen, "store: empty database path");
        return GQ_EINVAL;
    }
    if (opts)
        o = *opts;
    if (o.usage_bucket_s <= 0)
        o.usage_bucket_s = 60;
    if (o.busy_timeout_ms <= 0)
        o.busy_timeout_ms = 100;

    st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        gq_errf(err, errlen, "%s: out of memory", path);
        ret = GQ_ENOMEM;
        goto fail;
    }
    st->readonly = o.readonly;
    st->bucket_ms = o.usage_bucket_s * 1000;

    if (o.readonly) {
        struct stat sb;
        if (stat(path, &sb) != 0) {
            gq_errf(err, errlen, "%s: %s", path, strerror(errno));
            ret = errno == ENOENT ? GQ_ENOTFOUND : GQ_EIO;
            goto fail;
        }
        flags = SQLITE_OPEN_READONLY;
    } else {
        /* Create it ourselves so the mode is 0600 whatever the umask. */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            int e = errno;
            if ((e == EACCES || e == EROFS || e == EPERM) && access(path, F_OK) == 0)
                gq_errf(err, errlen, "%s: database file is read-only (need write access): %s",
                        path, strerror(e));
            else
                gq_errf(err, errlen, "%s: cannot open for writing: %s", path, strerror(e));
            ret = e == ENOENT ? GQ_ENOTFOUND : GQ_EIO;
            goto fail;
        }
        close(fd);
        flags = SQLITE_OPEN_READWRITE;
    }
    rc = sqlite3_open_v2(path, &st->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        ret = sql_fail(st, rc, "cannot open database", err, errlen);
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, o.busy_timeout_ms);

    /* Read the version before anything that could write (journal mode). */
    rc = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &qc, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(qc);
        if (rc == SQLITE_ROW) {
            v = sqlite3_column_int64(qc, 0);
            rc = SQLITE_OK;
        }
    }
    if (rc != SQLITE_OK) {
        ret = sql_fail(st, rc, "cannot read the database", err, errlen);
        goto fail;
    }
    sqlite3_finalize(qc);
    qc = NULL;
    if (v > STORE_SCHEMA_VERSION) {
        gq_errf(err, errlen, "%s: schema version %lld is newer than this gangq supports (%d);"
                " refusing to open it (upgrade gangq)", path, (long long)v,
                STORE_SCHEMA_VERSION);
        ret = GQ_EVERSION;
        goto fail;
    }
    if (v < 0) {
        gq_errf(err, errlen, "%s: invalid schema version %lld", path, (long long)v);
        ret = GQ_EVERSION;
        goto fail;
    }
    st->version = (int)v;

    if (o.readonly) {
        if (v != STORE_SCHEMA_VERSION) {
            gq_errf(err, errlen, "%s: schema version %lld, this gangq needs %d; open it once"
                    " read-write (the controller migrates it)", path, (long long)v,
                    STORE_SCHEMA_VERSION);
            ret = GQ_EVERSION;
            goto fail;
        }
    } else {
        if (sqlite3_db_readonly(st->db, "main") == 1) {
            gq_errf(err, errlen, "%s: database file is read-only (need write access)", path);
            ret = GQ_EIO;
            goto fail;
        }
    }

    /* Damage check (cheap compared with a full integrity_check), before
     * anything that writes: the WAL switch rewrites header bytes 18-19 and a
     * migration writes pages, and a refused file must stay as it was. */
    rc = sqlite3_prepare_v2(st->db, "PRAGMA quick_check(1)", -1, &qc, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(qc);
    if (rc != SQLITE_ROW) {
        ret = sql_fail(st, rc, "database check failed", err, errlen);
        goto fail;
    }
    if (strcmp(col_text(qc, 0), "ok") != 0) {
        gq_errf(err, errlen, "%s: database is corrupt: %s", path, col_text(qc, 0));
        ret = GQ_ECORRUPT;
        goto fail;
    }
    sqlite3_finalize(qc);
    qc = NULL;

    if (!o.readonly) {
        int64_t dummy = 0;
        ret = exec_sql(st, "PRAGMA journal_mode=WAL", "cannot enable WAL", err, errlen);
        if (ret)
            goto fail;
        ret = query_int(st, "PRAGMA synchronous=FULL", &dummy, err, errlen);
        if (ret)
            goto fail;
        if (v < STORE_SCHEMA_VERSION) {
            ret = migrate(st, err, errlen);
            if (ret)
                goto fail;
        }
    }
    /* a 4 MiB page cache: the controller keeps the job rows in memory and
     * mostly writes (a miss reads the WAL or the OS page cache) */
    ret = exec_sql(st, "PRAGMA cache_size=-4096; PRAGMA temp_store=MEMORY;"
                       " PRAGMA wal_autocheckpoint=4096; PRAGMA journal_size_limit=33554432;",
                   "cannot configure the connection", err, errlen);
    if (ret)
        goto fail;

    for (i = 0; i < S_COUNT; i++) {
        rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                &st->stmt[i], NULL);
        if (rc != SQLITE_OK) {
            ret = sql_fail(st, rc, "cannot prepare statement", err, errlen);
            goto fail;
        }
    }
    *out = st;
    return GQ_OK;
fail:
    sqlite3_finalize(qc);
    /* A refused file is left as found: no checkpoint of a WAL it may have
     * into the main file on close. */
    if (st && st->db)
        sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    store_close(st);
    return ret;
}

void store_remove_files(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[PATH_MAX + 16];
    for (size_t i = 0; i < GQ_ARRAY_LEN(sfx); i++)
        if ((size_t)snprintf(p, sizeof(p), "%s%s", path, sfx[i]) < sizeof(p))
            unlink(p);
}

void store_close(struct store *st)
{
    int i;
    if (!st)
        return;
    if (st->db && !sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    for (i = 0; i < S_COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    sqlite3_close(st->db);
    free(st->path);
    free(st);
}

const char *store_path(const struct store *st) { return st->path; }
int store_schema_version(const struct store *st) { return st->version; }

int store_set_max_pages(struct store *st, int64_t pages, char *err, size_t errlen)
{
    char sql[64];
    int64_t got = 0;
    /* SQLite's own maximum when uncapped. */
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld",
             (long long)(pages > 0 ? pages : 4294967294LL));
    return query_int(st, sql, &got, err, errlen);
}

/* ---- cycle ---- */

int store_begin_cycle(struct store *st, char *err, size_t errlen)
{
    int ret;
    if (st->in_cycle) {
        gq_errf(err, errlen, "%s: a cycle is already open", st->path);
        return GQ_EINVAL;
    }
    ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    ret = step_write(st, S_BEGIN, "cannot begin the cycle", err, errlen);
    if (ret == GQ_OK)
        st->in_cycle = 1;
    return ret;
}

int store_commit_cycle(struct store *st, char *err, size_t errlen)
{
    int ret;
    if (!st->in_cycle) {
        gq_errf(err, errlen, "%s: no cycle is open", st->path);
        return GQ_EINVAL;
    }
    if (sqlite3_get_autocommit(st->db)) {
        st->in_cycle = 0;
        gq_errf(err, errlen, "%s: the cycle transaction was rolled back after an earlier"
                " error; nothing was committed", st->path);
        return GQ_EIO;
    }
    ret = step_write(st, S_COMMIT, "cannot commit the cycle", err, errlen);
    if (ret != GQ_OK && !sqlite3_get_autocommit(st->db)) {
        sqlite3_step(st->stmt[S_ROLLBACK]);
        stmt_done(st->stmt[S_ROLLBACK]);
    }
    st->in_cycle = 0;
    return ret;
}

int store_commit_cycle_lazy(struct store *st, char *err, size_t errlen)
{
    int lazy = st->in_cycle && !sqlite3_get_autocommit(st->db) &&
               sqlite3_exec(st->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) == SQLITE_OK;
    int ret = store_commit_cycle(st, err, errlen);
    if (lazy && sqlite3_exec(st->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK && !ret)
        ret = sql_fail(st, sqlite3_errcode(st->db), "cannot set synchronous=FULL again", err, errlen);
    return ret;
}

void store_rollback_cycle(struct store *st)
{
    if (!st)
        return;
    if (!sqlite3_get_autocommit(st->db)) {
        sqlite3_step(st->stmt[S_ROLLBACK]);
        stmt_done(st->stmt[S_ROLLBACK]);
    }
    st->in_cycle = 0;
}

int store_in_cycle(const struct store *st) { return st->in_cycle; }

/* ---- jobs ---- */

static int check_key(struct store *st, const char *key, char *err, size_t errlen)
{
    if (!key || !*key) {
        gq_errf(err, errlen, "%s: empty job key", st->path);
        return GQ_EINVAL;
    }
    return GQ_OK;
}

static int check_state(struct store *st, int state, char *err, size_t errlen)
{
    if (state < 0 || state >= STORE_NSTATES) {
        gq_errf(err, errlen, "%s: invalid job state %d", st->path, state);
        return GQ_EINVAL;
    }
    return GQ_OK;
}

int store_job_upsert(struct store *st, const struct store_job *j, int64_t now_ms,
                     char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_JOB_UPSERT];
    int ret = write_guard(st, err, errlen);
    if (!ret)
        ret = check_key(st, j->key, err, errlen);
    if (!ret)
        ret = check_state(st, j->state, err, errlen);
    if (ret)
        return ret;
    bind_text(s, 1, j->key);
    bind_text(s, 2, j->uid);
    bind_text(s, 3, j->team);
    bind_text(s, 4, j->cls);
    sqlite3_bind_int64(s, 5, j->priority);
    sqlite3_bind_int64(s, 6, j->gpus);
    sqlite3_bind_int64(s, 7, j->enqueue_ms);
    sqlite3_bind_int(s, 8, j->state);
    sqlite3_bind_int64(s, 9, j->attempts);
    sqlite3_bind_int64(s, 10, j->retries);
    bind_text(s, 11, j->placement);
    sqlite3_bind_int64(s, 12, j->admitted_ms);
    bind_text(s, 13, j->message);
    sqlite3_bind_int64(s, 14, j->preemptions);
    bind_text(s, 15, j->preempted_by);
    bind_text(s, 16, j->preempt_reason);
    sqlite3_bind_int64(s, 17, j->preempted_ms);
    sqlite3_bind_int64(s, 18, j->generation);
    bind_text(s, 19, j->resource_version);
    sqlite3_bind_int64(s, 20, now_ms);
    sqlite3_bind_int64(s, 21, j->arrival);
    return step_write(st, S_JOB_UPSERT, "cannot write job", err, errlen);
}

int store_job_transition(struct store *st, const char *key, const struct store_transition *t,
                         int64_t now_ms, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_JOB_TRANSITION];
    int ret = write_guard(st, err, errlen);
    if (!ret)
        ret = check_key(st, key, err, errlen);
    if (!ret)
        ret = check_state(st, t->state, err, errlen);
    if (ret)
        return ret;
    sqlite3_bind_int(s, 1, t->state);
    sqlite3_bind_int64(s, 2, now_ms);
    bind_text(s, 3, t->preempted_by);
    bind_text(s, 4, t->preempt_reason);
    sqlite3_bind_int(s, 5, t->bump_retries ? 1 : 0);
    if (t->placement)
        bind_text(s, 6, t->placement);
    else
        sqlite3_bind_null(s, 6);
    if (t->message)
        bind_text(s, 7, t->message);
    else
        sqlite3_bind_null(s, 7);
    bind_text(s, 8, key);
    ret = step_write(st, S_JOB_TRANSITION, "cannot update job", err, errlen);
    if (ret == GQ_OK && sqlite3_changes(st->db) == 0) {
        gq_errf(err, errlen, "%s: no job %s", st->path, key);
        ret = GQ_ENOTFOUND;
    }
    return ret;
}

int store_job_set_state(struct store *st, const char *key, int state, int64_t now_ms,
                        char *err, size_t errlen)
{
    struct store_transition t = {.state = state};
    return store_job_transition(st, key, &t, now_ms, err, errlen);
}

int store_job_raise_attempts(struct store *st, const char *key, int64_t attempts, char *err,
                             size_t errlen)
{
    int ret = write_guard(st, err, errlen);
    if (!ret)
        ret = check_key(st, key, err, errlen);
    if (ret)
        return ret;
    bind_text(st->stmt[S_JOB_RAISE_ATTEMPTS], 1, key);
    sqlite3_bind_int64(st->stmt[S_JOB_RAISE_ATTEMPTS], 2, attempts);
    ret = step_write(st, S_JOB_RAISE_ATTEMPTS, "cannot update job", err, errlen);
    if (ret == GQ_OK && sqlite3_changes(st->db) == 0) {
        gq_errf(err, errlen, "%s: no job %s", st->path, key);
        ret = GQ_ENOTFOUND;
    }
    return ret;
}

int store_job_delete(struct store *st, const char *key, char *err, size_t errlen)
{
    int ret = write_guard(st, err, errlen);
    int changed;
    if (!ret)
        ret = check_key(st, key, err, errlen);
    if (ret)
        return ret;
    bind_text(st->stmt[S_JOB_DELETE], 1, key);
    ret = step_write(st, S_JOB_DELETE, "cannot delete job", err, errlen);
    if (ret)
        return ret;
    changed = sqlite3_changes(st->db);
    bind_text(st->stmt[S_ALLOC_CLEAR], 1, key);
    ret = step_write(st, S_ALLOC_CLEAR, "cannot clear the job's allocation", err, errlen);
    if (ret)
        return ret;
    if (changed == 0) {
        gq_errf(err, errlen, "%s: no job %s", st->path, key);
        return GQ_ENOTFOUND;
    }
    return GQ_OK;
}

/* Fill j from a row of JOB_COLS; strings point into the row. */
static void job_from_row(sqlite3_stmt *s, struct store_job *j)
{
    j->key = col_text(s, 0);
    j->uid = col_text(s, 1);
    j->team = col_text(s, 2);
    j->cls = col_text(s, 3);
    j->priority = sqlite3_column_int64(s, 4);
    j->gpus = sqlite3_column_int64(s, 5);
    j->enqueue_ms = sqlite3_column_int64(s, 6);
    j->state = sqlite3_column_int(s, 7);
    j->attempts = sqlite3_column_int64(s, 8);
    j->retries = sqlite3_column_int64(s, 9);
    j->placement = col_text(s, 10);
    j->admitted_ms = sqlite3_column_int64(s, 11);
    j->message = col_text(s, 12);
    j->preemptions = sqlite3_column_int64(s, 13);
    j->preempted_by = col_text(s, 14);
    j->preempt_reason = col_text(s, 15);
    j->preempted_ms = sqlite3_column_int64(s, 16);
    j->generation = sqlite3_column_int64(s, 17);
    j->resource_version = col_text(s, 18);
    j->updated_ms = sqlite3_column_int64(s, 19);
    j->arrival = sqlite3_column_int64(s, 20);
}

int store_job_get(struct store *st, const char *key, struct store_job **out,
                  char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_JOB_GET];
    struct store_job row, *j = NULL;
    const char **fields[] = {&row.key, &row.uid, &row.team, &row.cls, &row.placement,
                             &row.message, &row.preempted_by, &row.preempt_reason,
                             &row.resource_version};
    size_t total = sizeof *j, i;
    char *p;
    int rc, ret = check_key(st, key, err, errlen);

    *out = NULL;
    if (ret)
        return ret;
    bind_text(s, 1, key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        gq_errf(err, errlen, "%s: no job %s", st->path, key);
        ret = GQ_ENOTFOUND;
        goto out;
    }
    if (rc != SQLITE_ROW) {
        ret = sql_fail(st, rc, "cannot read job", err, errlen);
        goto out;
    }
    job_from_row(s, &row);
    for (i = 0; i < GQ_ARRAY_LEN(fields); i++)
        total += strlen(*fields[i]) + 1;
    j = malloc(total);
    if (!j) {
        gq_errf(err, errlen, "%s: out of memory", st->path);
        ret = GQ_ENOMEM;
        goto out;
    }
    *j = row;
    p = (char *)(j + 1);
    for (i = 0; i < GQ_ARRAY_LEN(fields); i++) {
        /* Same field offset in *j as in row. */
        const char **dst = (const char **)((char *)j + ((char *)fields[i] - (char *)&row));
        size_t n = strlen(*fields[i]) + 1;
        memcpy(p, *fields[i], n);
        *dst = p;
        p += n;
    }
    *out = j;
out:
    stmt_done(s);
    return ret;
}

void store_job_free(struct store_job *j)
{
    free(j);
}

int store_jobs_each(struct store *st, unsigned state_mask, store_job_cb cb, void *ctx,
                    char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_JOBS_EACH];
    struct store_job j;
    int rc, ret = GQ_OK;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)state_mask);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        job_from_row(s, &j);
        ret = cb(ctx, &j);
        if (ret)
            goto out;
    }
    if (rc != SQLITE_DONE)
        ret = sql_fail(st, rc, "cannot read jobs", err, errlen);
out:
    stmt_done(s);
    return ret;
}

int store_jobs_count(struct store *st, unsigned state_mask, int64_t *out,
                     char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_JOBS_COUNT];
    int rc, ret = GQ_OK;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)state_mask);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(s, 0);
    else
        ret = sql_fail(st, rc, "cannot count jobs", err, errlen);
    stmt_done(s);
    return ret;
}

/* ---- intents ---- */

int store_intent_add(struct store *st, int kind, const char *job_key, const char *payload,
                     int64_t now_ms, int64_t *id_out, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_INTENT_ADD];
    int ret = write_guard(st, err, errlen);
    if (!ret)
        ret = check_key(st, job_key, err, errlen);
    if (ret)
        return ret;
    if (kind < STORE_INTENT_ADMIT || kind > STORE_INTENT_DELETE) {
        gq_errf(err, errlen, "%s: invalid intent kind %d", st->path, kind);
        return GQ_EINVAL;
    }
    sqlite3_bind_int(s, 1, kind);
    bind_text(s, 2, job_key);
    bind_text(s, 3, payload);
    sqlite3_bind_int64(s, 4, now_ms);
    ret = step_write(st, S_INTENT_ADD, "cannot record intent", err, errlen);
    if (ret == GQ_OK && id_out)
        *id_out = sqlite3_last_insert_rowid(st->db);
    return ret;
}

int store_intent_done(struct store *st, int64_t id, int64_t now_ms, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_INTENT_DONE];
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, now_ms);
    ret = step_write(st, S_INTENT_DONE, "cannot mark intent done", err, errlen);
    if (ret == GQ_OK && sqlite3_changes(st->db) == 0) {
        gq_errf(err, errlen, "%s: no pending intent %lld", st->path, (long long)id);
        ret = GQ_ENOTFOUND;
    }
    return ret;
}

int store_intents_pending(struct store *st, store_intent_cb cb, void *ctx,
                          char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_INTENTS_PENDING];
    struct store_intent in;
    int rc, ret = GQ_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        in.id = sqlite3_column_int64(s, 0);
        in.kind = sqlite3_column_int(s, 1);
        in.job_key = col_text(s, 2);
        in.payload = col_text(s, 3);
        in.created_ms = sqlite3_column_int64(s, 4);
        ret = cb(ctx, &in);
        if (ret)
            goto out;
    }
    if (rc != SQLITE_DONE)
        ret = sql_fail(st, rc, "cannot read intents", err, errlen);
out:
    stmt_done(s);
    return ret;
}

int store_intents_prune(struct store *st, int64_t before_ms, char *err, size_t errlen)
{
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    sqlite3_bind_int64(st->stmt[S_INTENTS_PRUNE], 1, before_ms);
    return step_write(st, S_INTENTS_PRUNE, "cannot prune intents", err, errlen);
}

/* ---- quota ledger ---- */

int store_alloc_set(struct store *st, const struct store_alloc *a, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_ALLOC_SET];
    int ret = write_guard(st, err, errlen);
    if (!ret)
        ret = check_key(st, a->job_key, err, errlen);
    if (ret)
        return ret;
    /* replaces the key's row (a new rowid, as the ledger's order wants):
     * delete and insert, one transaction when called outside one */
    int own = sqlite3_get_autocommit(st->db);
    if (own && (ret = exec_sql(st, "BEGIN IMMEDIATE", "cannot write allocation", err, errlen)))
        return ret;
    bind_text(st->stmt[S_ALLOC_CLEAR], 1, a->job_key);
    ret = step_write(st, S_ALLOC_CLEAR, "cannot replace the allocation", err, errlen);
    if (!ret) {
        bind_text(s, 1, a->job_key);
        bind_text(s, 2, a->team);
        bind_text(s, 3, a->gpu_type);
        sqlite3_bind_int64(s, 4, a->gpus);
        sqlite3_bind_int64(s, 5, a->borrowed);
        ret = step_write(st, S_ALLOC_SET, "cannot write allocation", err, errlen);
    }
    if (own) {
        if (ret)
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        else
            ret = exec_sql(st, "COMMIT", "cannot commit the allocation", err, errlen);
    }
    return ret;
}

int store_alloc_clear(struct store *st, const char *job_key, char *err, size_t errlen)
{
    int ret = write_guard(st, err, errlen);
    if (!ret)
        ret = check_key(st, job_key, err, errlen);
    if (ret)
        return ret;
    bind_text(st->stmt[S_ALLOC_CLEAR], 1, job_key);
    return step_write(st, S_ALLOC_CLEAR, "cannot clear allocation", err, errlen);
}

int store_alloc_set_borrowed(struct store *st, const char *job_key, int64_t borrowed, char *err,
                             size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_ALLOC_BORROWED];
    int ret = write_guard(st, err, errlen);
    if (!ret)
        ret = check_key(st, job_key, err, errlen);
    if (ret)
        return ret;
    bind_text(s, 1, job_key);
    sqlite3_bind_int64(s, 2, borrowed);
    return step_write(st, S_ALLOC_BORROWED, "cannot write borrowed GPUs", err, errlen);
}

static int alloc_rows(struct store *st, sqlite3_stmt *s, store_alloc_cb cb, void *ctx, char *err,
                      size_t errlen)
{
    struct store_alloc a;
    int rc, ret = GQ_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        a.job_key = col_text(s, 0);
        a.team = col_text(s, 1);
        a.gpu_type = col_text(s, 2);
        a.gpus = sqlite3_column_int64(s, 3);
        a.borrowed = sqlite3_column_int64(s, 4);
        ret = cb(ctx, &a);
        if (ret)
            goto out;
    }
    if (rc != SQLITE_DONE)
        ret = sql_fail(st, rc, "cannot read allocations", err, errlen);
out:
    stmt_done(s);
    return ret;
}

static int ledger_rows(struct store *st, sqlite3_stmt *s, store_ledger_cb cb, void *ctx, char *err,
                       size_t errlen)
{
    struct store_ledger_row r;
    int rc, ret = GQ_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        r.team = col_text(s, 0);
        r.gpu_type = col_text(s, 1);
        r.used = sqlite3_column_int64(s, 2);
        r.borrowed = sqlite3_column_int64(s, 3);
        r.jobs = sqlite3_column_int64(s, 4);
        ret = cb(ctx, &r);
        if (ret)
            goto out;
    }
    if (rc != SQLITE_DONE)
        ret = sql_fail(st, rc, "cannot read the quota ledger", err, errlen);
out:
    stmt_done(s);
    return ret;
}

int store_allocs_each(struct store *st, store_alloc_cb cb, void *ctx, char *err, size_t errlen)
{
    return alloc_rows(st, st->stmt[S_ALLOCS_EACH], cb, ctx, err, errlen);
}

int store_allocs_team(struct store *st, const char *team, store_alloc_cb cb, void *ctx, char *err,
                      size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_ALLOCS_TEAM];
    bind_text(s, 1, team);
    return alloc_rows(st, s, cb, ctx, err, errlen);
}

int store_allocs_team_sum(struct store *st, const char *team, int64_t *gpus, int64_t *borrowed, char *err,
                          size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_ALLOCS_TEAM_SUM];
    int rc, ret = GQ_OK;
    *gpus = *borrowed = 0;
    bind_text(s, 1, team);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        *gpus = sqlite3_column_int64(s, 0);
        *borrowed = sqlite3_column_int64(s, 1);
    } else {
        ret = sql_fail(st, rc, "cannot sum allocations", err, errlen);
    }
    stmt_done(s);
    return ret;
}

int store_ledger_each(struct store *st, store_ledger_cb cb, void *ctx, char *err, size_t errlen)
{
    return ledger_rows(st, st->stmt[S_LEDGER], cb, ctx, err, errlen);
}


/* ---- usage history ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

int store_usage_add(struct store *st, const char *team, int64_t at_ms, double gpu_seconds,
                    char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_USAGE_ADD];
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    if (!team || !*team) {
        gq_errf(err, errlen, "%s: usage: empty team", st->path);
        return GQ_EINVAL;
    }
    if (!isfinite(gpu_seconds) || gpu_seconds < 0) {
        gq_errf(err, errlen, "%s: usage: invalid GPU-seconds %g for team %s", st->path,
                gpu_seconds, team);
        return GQ_EINVAL;
    }
    bind_text(s, 1, team);
    sqlite3_bind_int64(s, 2, floor_div(at_ms, st->bucket_ms) * st->bucket_ms);
    sqlite3_bind_int64(s, 3, st->bucket_ms);
    sqlite3_bind_double(s, 4, gpu_seconds);
    return step_write(st, S_USAGE_ADD, "cannot record usage", err, errlen);
}

static double decay(int64_t end_ms, double gpu_s, int64_t now_ms, double half_life_s)
{
    double age_s;
    if (half_life_s <= 0 || end_ms >= now_ms)
        return gpu_s;
    age_s = (double)(now_ms - end_ms) / 1000.0;
    return gpu_s * exp2(-age_s / half_life_s);
}

int store_usage_decayed(struct store *st, const char *team, int64_t now_ms, double half_life_s,
                        double *out, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_USAGE_TEAM];
    double sum = 0;
    int rc, ret = GQ_OK;
    bind_text(s, 1, team);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        sum += decay(sqlite3_column_int64(s, 0), sqlite3_column_double(s, 1), now_ms,
                     half_life_s);
    if (rc != SQLITE_DONE)
        ret = sql_fail(st, rc, "cannot read usage", err, errlen);
    else
        *out = sum;
    stmt_done(s);
    return ret;
}

int store_usage_decayed_all(struct store *st, int64_t now_ms, double half_life_s,
                            store_usage_cb cb, void *ctx, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_USAGE_ALL];
    char team[256] = "", next[256];
    double sum = 0;
    int rc, ret = GQ_OK, have = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (gq_strlcpy(next, col_text(s, 0), sizeof next) >= sizeof next) {
            gq_errf(err, errlen, "%s: usage: team name longer than %zu bytes", st->path,
                    sizeof next - 1);
            ret = GQ_ELIMIT;
            goto out;
        }
        if (have && strcmp(next, team) != 0) {
            ret = cb(ctx, team, sum);
            if (ret)
                goto out;
            sum = 0;
        }
        memcpy(team, next, sizeof team);
        have = 1;
        sum += decay(sqlite3_column_int64(s, 1), sqlite3_column_double(s, 2), now_ms,
                     half_life_s);
    }
    if (rc != SQLITE_DONE) {
        ret = sql_fail(st, rc, "cannot read usage", err, errlen);
        goto out;
    }
    if (have)
        ret = cb(ctx, team, sum);
out:
    stmt_done(s);
    return ret;
}

int store_usage_prune(struct store *st, int64_t before_ms, char *err, size_t errlen)
{
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    sqlite3_bind_int64(st->stmt[S_USAGE_PRUNE], 1, before_ms);
    return step_write(st, S_USAGE_PRUNE, "cannot prune usage", err, errlen);
}

/* ---- audit ---- */

/* ---- last valid Team specs ---- */

int store_team_save(struct store *st, const struct store_team *t, int64_t now_ms,
                    char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_TEAM_SAVE];
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    if (!t->name || !*t->name) {
        gq_errf(err, errlen, "%s: empty team name", st->path);
        return GQ_EINVAL;
    }
    bind_text(s, 1, t->name);
    bind_text(s, 2, t->uid);
    sqlite3_bind_int64(s, 3, t->generation);
    bind_text(s, 4, t->object);
    sqlite3_bind_int64(s, 5, now_ms);
    return step_write(st, S_TEAM_SAVE, "cannot write team", err, errlen);
}

int store_team_get(struct store *st, const char *name, struct store_team **out,
                   char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_TEAM_GET];
    int rc, ret = GQ_OK;
    *out = NULL;
    bind_text(s, 1, name);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        gq_errf(err, errlen, "%s: no team %s", st->path, nz(name));
        ret = GQ_ENOTFOUND;
    } else if (rc != SQLITE_ROW) {
        ret = sql_fail(st, rc, "cannot read team", err, errlen);
    } else {
        const char *nm = col_text(s, 0), *uid = col_text(s, 1), *obj = col_text(s, 3);
        size_t ln = strlen(nm) + 1, lu = strlen(uid) + 1, lo = strlen(obj) + 1;
        struct store_team *t = malloc(sizeof(*t) + ln + lu + lo);
        if (!t) {
            gq_errf(err, errlen, "%s: out of memory", st->path);
            ret = GQ_ENOMEM;
        } else {
            char *p = (char *)(t + 1);
            memcpy(p, nm, ln);
            t->name = p;
            memcpy(p + ln, uid, lu);
            t->uid = p + ln;
            memcpy(p + ln + lu, obj, lo);
            t->object = p + ln + lu;
            t->generation = sqlite3_column_int64(s, 2);
            t->updated_ms = sqlite3_column_int64(s, 4);
            *out = t;
        }
    }
    stmt_done(s);
    return ret;
}

void store_team_free(struct store_team *t)
{
    free(t);
}

int store_team_delete(struct store *st, const char *name, char *err, size_t errlen)
{
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    bind_text(st->stmt[S_TEAM_DELETE], 1, name);
    return step_write(st, S_TEAM_DELETE, "cannot delete team", err, errlen);
}

int store_audit_add(struct store *st, const struct store_audit *a, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_AUDIT_ADD];
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    if (!a->action || !*a->action) {
        gq_errf(err, errlen, "%s: audit entry without an action", st->path);
        return GQ_EINVAL;
    }
    sqlite3_bind_int64(s, 1, a->time_ms);
    bind_text(s, 2, a->actor);
    bind_text(s, 3, a->action);
    bind_text(s, 4, a->team);
    bind_text(s, 5, a->job_key);
    bind_text(s, 6, a->old_value);
    bind_text(s, 7, a->new_value);
    bind_text(s, 8, a->reason);
    return step_write(st, S_AUDIT_ADD, "cannot append to the audit log", err, errlen);
}

int store_audit_prune(struct store *st, int64_t before_ms, int max, int *deleted, char *err, size_t errlen)
{
    if (deleted)
        *deleted = 0;
    int ret = write_guard(st, err, errlen);
    if (ret)
        return ret;
    if (max <= 0) {
        gq_errf(err, errlen, "%s: audit prune without a positive row limit", st->path);
        return GQ_EINVAL;
    }
    sqlite3_bind_int64(st->stmt[S_AUDIT_PRUNE], 1, before_ms);
    sqlite3_bind_int64(st->stmt[S_AUDIT_PRUNE], 2, max);
    ret = step_write(st, S_AUDIT_PRUNE, "cannot prune the audit log", err, errlen);
    if (!ret && deleted)
        *deleted = sqlite3_changes(st->db);
    return ret;
}

int store_audit_query(struct store *st, const struct store_audit_filter *f, store_audit_cb cb,
                      void *ctx, char *err, size_t errlen)
{
    sqlite3_stmt *s = st->stmt[S_AUDIT_QUERY];
    struct store_audit_filter none = {0};
    struct store_audit a;
    int rc, ret = GQ_OK;
    if (!f)
        f = &none;
    bind_text(s, 1, f->team);
    bind_text(s, 2, f->job_key);
    sqlite3_bind_int64(s, 3, f->since_ms > 0 ? f->since_ms : INT64_MIN);
    sqlite3_bind_int64(s, 4, f->limit > 0 ? f->limit : -1);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        a.id = sqlite3_column_int64(s, 0);
        a.time_ms = sqlite3_column_int64(s, 1);
        a.actor = col_text(s, 2);
        a.action = col_text(s, 3);
        a.team = col_text(s, 4);
        a.job_key = col_text(s, 5);
        a.old_value = col_text(s, 6);
        a.new_value = col_text(s, 7);
        a.reason = col_text(s, 8);
        ret = cb(ctx, &a);
        if (ret)
            goto out;
    }
    if (rc != SQLITE_DONE)
        ret = sql_fail(st, rc, "cannot read the audit log", err, errlen);
out:
    stmt_done(s);
    return ret;
}
