/*
 * store.h — gangq's durable memory on SQLite: the job queue with its decisions,
 * intents (persist before acting), the quota ledger, per-team usage history for
 * fair share, and the audit log.
 *
 * Role: Kubernetes objects hold what users want (spec); the store holds what
 * gangq decided and remembers. The scheduling core never sees the store; the
 * controller and the simulator load a snapshot from it and write decisions back.
 *
 * Invariants:
 *  - One `struct store` per database file and per thread (no internal locking).
 *    The file is created 0600, opened in WAL mode with a small busy timeout;
 *    every SQL statement is prepared once at open and kept until store_close.
 *  - Schema versions are explicit (PRAGMA user_version). Opening migrates an
 *    older file forward inside one transaction; a file newer than this build
 *    knows is refused (GQ_EVERSION) and never written. A corrupt or unreadable
 *    file is reported with its path and SQLite's message (GQ_ECORRUPT / GQ_EIO)
 *    and never overwritten.
 *  - Writes are grouped into one transaction per scheduling cycle:
 *    store_begin_cycle (BEGIN IMMEDIATE) ... store_commit_cycle. Any write call
 *    made outside a cycle commits on its own (autocommit). When a write inside a
 *    cycle fails (e.g. disk full → GQ_EFULL) the caller calls
 *    store_rollback_cycle; store_commit_cycle rolls back by itself when COMMIT
 *    fails. Either way the store is usable again for the next cycle.
 *  - Times are int64 milliseconds since the Unix epoch, always passed in by the
 *    caller: the store never reads the clock.
 *  - Queue order is: priority descending, enqueue time ascending, arrival
 *    ascending, key ascending.
 *    A job's enqueue time is written when the row is first inserted and is kept
 *    across suspend, preempt and requeue (and across upserts of the same uid).
 *
 * Ownership: store_open hands the caller a struct store (store_close frees it,
 * accepts NULL). Input strings are borrowed for the duration of the call and
 * copied into SQLite. Rows handed to callbacks (struct store_job,
 * store_intent, store_audit, store_alloc, store_ledger_row) point into SQLite's
 * row buffer: valid only during the callback; copy what you keep. A callback
 * returning non-zero stops the iteration and that value is returned. Callbacks
 * must not call back into the same store. store_job_get returns a heap copy
 * the caller frees with store_job_free.
 *
 * Errors: 0 ok or a negative enum gq_err, with one sentence in err (which names
 * the database path for open-time failures). SQLITE_FULL → GQ_EFULL,
 * SQLITE_BUSY/LOCKED → GQ_EBUSY, SQLITE_CORRUPT/NOTADB → GQ_ECORRUPT, missing
 * row → GQ_ENOTFOUND, other SQLite failures → GQ_EIO.
 */
#ifndef GQ_STORE_H
#define GQ_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "gq.h"

/* Current schema version written by this build.
 * v1: jobs, intents, usage, audit.
 * v2: jobs gain preemption columns (preemptions, preempted_by, preempt_reason,
 *     preempted_ms) and retries; the alloc table (quota ledger) is added.
 * v3: jobs gain arrival (queue order among jobs of one enqueue time); the
 *     teams table (last valid spec of each Team) is added.
 * v4: the team_alloc table (each Team's allocated and borrowed GPUs, kept by
 *     triggers on alloc) is added. */
#define STORE_SCHEMA_VERSION 4

struct store;

enum store_state {
    STORE_QUEUED = 0,
    STORE_ADMITTED = 1,
    STORE_RUNNING = 2,
    STORE_SUSPENDED = 3,
    STORE_PREEMPTED = 4,
    STORE_SUCCEEDED = 5,
    STORE_FAILED = 6,
};
#define STORE_NSTATES 7
/* Bit for a state in a state mask; STORE_MASK_ALL selects every state. */
#define STORE_MASK(s) (1u << (unsigned)(s))
#define STORE_MASK_ALL 0x7Fu
/* The waiting queue: Queued, Suspended and Preempted (Suspended jobs are
 * included so the caller can show their position; it skips them itself). */
#define STORE_MASK_WAITING \
    (STORE_MASK(STORE_QUEUED) | STORE_MASK(STORE_SUSPENDED) | STORE_MASK(STORE_PREEMPTED))
/* Everything not finished: waiting plus Admitted and Running. */
#define STORE_MASK_ACTIVE \
    (STORE_MASK_WAITING | STORE_MASK(STORE_ADMITTED) | STORE_MASK(STORE_RUNNING))

/* "Queued", "Admitted", ... (the API's spelling); "?" when out of range. */
const char *store_state_name(int state);
/* Inverse of store_state_name (exact match); -1 when unknown. */
int store_state_parse(const char *s);

struct store_opts {
    int64_t usage_bucket_s; /* usage history bucket width in seconds; 0 → 60 */
    int busy_timeout_ms;    /* 0 → 100 */
    int readonly;           /* open without creating or migrating; writes fail */
};

/* Open (creating 0600 if absent, unless readonly) and migrate PATH. opts may be
 * NULL for defaults. On success *out owns the store. */
int store_open(const char *path, const struct store_opts *opts, struct store **out,
               char *err, size_t errlen);
void store_close(struct store *st);
/* Remove a closed store's database file at path and its SQLite side files
 * (-wal, -shm, -journal); missing ones are no error. */
void store_remove_files(const char *path);
const char *store_path(const struct store *st);
/* user_version of the open file (== STORE_SCHEMA_VERSION unless readonly). */
int store_schema_version(const struct store *st);
/* Cap the database size at `pages` pages (PRAGMA max_page_count, this
 * connection only). Writes past it fail with GQ_EFULL, as on a full disk. Used
 * by tests and as an operator safety cap; pages <= 0 removes the cap. */
int store_set_max_pages(struct store *st, int64_t pages, char *err, size_t errlen);

/* ---- cycle transaction ---- */
int store_begin_cycle(struct store *st, char *err, size_t errlen);
int store_commit_cycle(struct store *st, char *err, size_t errlen);
/* store_commit_cycle without waiting for the disk (synchronous=NORMAL for
 * this one commit, then FULL again): what it wrote survives a crash of the
 * process, and a power loss once a later commit is synced. Only for records
 * whose loss is harmless (an intent's done mark: the intent is acted on again,
 * idempotently). GQ_EIO when FULL could not be set again (the commit itself
 * may have succeeded). */
int store_commit_cycle_lazy(struct store *st, char *err, size_t errlen);
void store_rollback_cycle(struct store *st);
int store_in_cycle(const struct store *st);

/* ---- jobs ---- */
struct store_job {
    const char *key;              /* "namespace/name" (required) */
    const char *uid;              /* Kubernetes metadata.uid ("" if unknown) */
    const char *team;
    const char *cls;              /* "Inference" | "Batch" | "Training" */
    int64_t priority;
    int64_t gpus;                 /* total whole GPUs of the gang (replicas*count) */
    int64_t enqueue_ms;
    int state;                    /* enum store_state */
    int64_t attempts;             /* times admitted */
    int64_t retries;              /* failure requeues */
    const char *placement;        /* opaque caller text (e.g. JSON node per replica); "" none */
    int64_t admitted_ms;          /* 0 when never admitted */
    const char *message;          /* status message ("" none) */
    int64_t preemptions;          /* times preempted */
    const char *preempted_by;     /* key of the job that preempted it last ("" none) */
    const char *preempt_reason;
    int64_t preempted_ms;
    int64_t generation;           /* metadata.generation last seen */
    const char *resource_version; /* metadata.resourceVersion last seen */
    int64_t updated_ms;           /* time of the last write (set by the store from the caller's now) */
    int64_t arrival;              /* order among jobs of one enqueue_ms (the caller's sequence,
                                   * e.g. the object's resourceVersion when first seen) */
};

/* Insert or update by key. A new key (or a key whose stored uid differs: the
 * object was deleted and re-created) writes every field of j as given. An
 * existing key with the same uid updates only the spec fields (uid, team, cls,
 * priority, gpus, generation, resource_version) and keeps the decision fields
 * (state, enqueue_ms, arrival, attempts, retries, placement, admitted_ms,
 * message, preemption fields). A caller rebuilding a lost row (from the
 * object's status) passes the recovered decision fields with the new key. NULL strings are stored as "". now_ms → updated_ms. */
int store_job_upsert(struct store *st, const struct store_job *j, int64_t now_ms,
                     char *err, size_t errlen);

/* A state change with its side data. Rules applied by the store:
 *  - state ADMITTED: attempts += 1, admitted_ms = now_ms;
 *  - state PREEMPTED: preemptions += 1, preempted_ms = now_ms, preempted_by and
 *    preempt_reason set from the fields below;
 *  - bump_retries: retries += 1 (a failed gang requeued);
 *  - placement / message: NULL keeps the stored value, "" clears it;
 *  - enqueue_ms is never changed. */
struct store_transition {
    int state;                  /* enum store_state */
    const char *placement;      /* NULL keep */
    const char *message;        /* NULL keep */
    const char *preempted_by;   /* used when state == STORE_PREEMPTED */
    const char *preempt_reason; /* used when state == STORE_PREEMPTED */
    int bump_retries;
};
/* GQ_ENOTFOUND when key is absent. */
int store_job_transition(struct store *st, const char *key, const struct store_transition *t,
                         int64_t now_ms, char *err, size_t errlen);
/* Shorthand: transition with only a state (placement/message kept). */
int store_job_set_state(struct store *st, const char *key, int state, int64_t now_ms,
                        char *err, size_t errlen);
/* attempts = max(attempts, given): a job adopted from pods of an admission the
 * store missed (a store older than the API server). GQ_ENOTFOUND when absent. */
int store_job_raise_attempts(struct store *st, const char *key, int64_t attempts, char *err,
                             size_t errlen);
/* GQ_ENOTFOUND when key is absent. Also clears the job's ledger allocation. */
int store_job_delete(struct store *st, const char *key, char *err, size_t errlen);
/* Heap copy of one job (all strings inside the same block); GQ_ENOTFOUND when
 * absent. Free with store_job_free. */
int store_job_get(struct store *st, const char *key, struct store_job **out,
                  char *err, size_t errlen);
void store_job_free(struct store_job *j);

typedef int (*store_job_cb)(void *ctx, const struct store_job *j);
/* Every job whose state is in state_mask, in queue order. */
int store_jobs_each(struct store *st, unsigned state_mask, store_job_cb cb, void *ctx,
                    char *err, size_t errlen);
int store_jobs_count(struct store *st, unsigned state_mask, int64_t *out,
                     char *err, size_t errlen);

/* ---- intents: persist before acting ---- */
enum store_intent_kind {
    STORE_INTENT_ADMIT = 1,
    STORE_INTENT_PREEMPT = 2,
    STORE_INTENT_SUSPEND = 3,
    STORE_INTENT_RESUME = 4,
    STORE_INTENT_DELETE = 5,
};
const char *store_intent_kind_name(int kind); /* "admit", ...; "?" */
int store_intent_kind_parse(const char *s);   /* -1 when unknown */

struct store_intent {
    int64_t id;
    int kind;
    const char *job_key;
    const char *payload; /* opaque caller text (e.g. the placement or the victim list) */
    int64_t created_ms;
};
/* Record an intent (normally inside the cycle that made the decision, so it
 * commits with it). *id_out (may be NULL) receives its id. */
int store_intent_add(struct store *st, int kind, const char *job_key, const char *payload,
                     int64_t now_ms, int64_t *id_out, char *err, size_t errlen);
/* Mark done once the actuator acted (inside or outside a cycle).
 * GQ_ENOTFOUND when no pending intent has this id. */
int store_intent_done(struct store *st, int64_t id, int64_t now_ms, char *err, size_t errlen);
typedef int (*store_intent_cb)(void *ctx, const struct store_intent *in);
/* Unfinished intents, oldest first. */
int store_intents_pending(struct store *st, store_intent_cb cb, void *ctx,
                          char *err, size_t errlen);
/* Delete done intents finished before before_ms (housekeeping). */
int store_intents_prune(struct store *st, int64_t before_ms, char *err, size_t errlen);

/* ---- quota ledger: one allocation per admitted job, aggregated per team and GPU type ---- */
struct store_alloc {
    const char *job_key;
    const char *team;
    const char *gpu_type; /* GPU product the job got ("" for CPU-only) */
    int64_t gpus;         /* GPUs held (milli-GPU jobs: the caller's unit, be consistent) */
    int64_t borrowed;     /* of which borrowed from the cohort */
};
/* Set (replace) the allocation of a job. */
int store_alloc_set(struct store *st, const struct store_alloc *a, char *err, size_t errlen);
/* Remove a job's allocation (0 even if it had none). */
int store_alloc_clear(struct store *st, const char *job_key, char *err, size_t errlen);
typedef int (*store_alloc_cb)(void *ctx, const struct store_alloc *a);
/* Every allocation, ordered by team, gpu_type, job_key. */
int store_allocs_each(struct store *st, store_alloc_cb cb, void *ctx, char *err, size_t errlen);
/* The allocations of one team in the order they were set (the one written
 * last by store_alloc_set comes last). */
int store_allocs_team(struct store *st, const char *team, store_alloc_cb cb, void *ctx, char *err,
                      size_t errlen);
/* The GPUs and the borrowed GPUs of one team's allocations, summed. */
int store_allocs_team_sum(struct store *st, const char *team, int64_t *gpus, int64_t *borrowed, char *err,
                          size_t errlen);
/* Change only the borrowed figure of a job's allocation (its place in the
 * order above is kept); 0 when it has none. */
int store_alloc_set_borrowed(struct store *st, const char *job_key, int64_t borrowed, char *err,
                             size_t errlen);

struct store_ledger_row {
    const char *team;
    const char *gpu_type;
    int64_t used;     /* sum of gpus */
    int64_t borrowed; /* sum of borrowed */
    int64_t jobs;     /* number of allocations */
};
typedef int (*store_ledger_cb)(void *ctx, const struct store_ledger_row *r);
/* Aggregate per (team, gpu_type), ordered by team, gpu_type. */
int store_ledger_each(struct store *st, store_ledger_cb cb, void *ctx, char *err, size_t errlen);

/* ---- usage history (fair-share input) ---- */
/* Add gpu_seconds for team to the bucket containing at_ms (bucket width from
 * store_opts.usage_bucket_s). */
int store_usage_add(struct store *st, const char *team, int64_t at_ms, double gpu_seconds,
                    char *err, size_t errlen);
/* Decayed usage of one team: sum over buckets of gpu_seconds *
 * 0.5^((now_ms - bucket_end_ms) / half_life), buckets ending after now count
 * with weight 1. half_life_s <= 0 means no decay. 0 for an unknown team. */
int store_usage_decayed(struct store *st, const char *team, int64_t now_ms, double half_life_s,
                        double *out, char *err, size_t errlen);
typedef int (*store_usage_cb)(void *ctx, const char *team, double decayed_gpu_seconds);
/* Decayed usage of every team with history, ordered by team. */
int store_usage_decayed_all(struct store *st, int64_t now_ms, double half_life_s,
                            store_usage_cb cb, void *ctx, char *err, size_t errlen);
/* Drop buckets that ended before before_ms. Reads cost one row per bucket, so
 * callers prune what has decayed away (e.g. older than 10 half-lives: < 0.1%). */
int store_usage_prune(struct store *st, int64_t before_ms, char *err, size_t errlen);

/* ---- last valid Team specs ---- */
/* The controller keeps the last valid spec of each Team so an invalid edit
 * leaves it in force (across restarts too). object is opaque caller text
 * (the Team object as JSON). */
struct store_team {
    const char *name;
    const char *uid;
    int64_t generation;
    const char *object;
    int64_t updated_ms; /* set by the store from the caller's now */
};
/* Insert or replace by name. */
int store_team_save(struct store *st, const struct store_team *t, int64_t now_ms,
                    char *err, size_t errlen);
/* Heap copy (strings in the same block; free with store_team_free);
 * GQ_ENOTFOUND when absent. */
int store_team_get(struct store *st, const char *name, struct store_team **out,
                   char *err, size_t errlen);
void store_team_free(struct store_team *t);
/* 0 even when absent. */
int store_team_delete(struct store *st, const char *name, char *err, size_t errlen);

/* ---- audit log ---- */
struct store_audit {
    int64_t id;          /* set by the store (ignored by store_audit_add) */
    int64_t time_ms;
    const char *actor;   /* "gangq", "user:alice", ... */
    const char *action;  /* admit | preempt | suspend | resume | quota-edit | fail | ... */
    const char *team;
    const char *job_key; /* "" for team-level actions */
    const char *old_value;
    const char *new_value;
    const char *reason;
};
int store_audit_add(struct store *st, const struct store_audit *a, char *err, size_t errlen);

struct store_audit_filter {
    const char *team;    /* NULL/"" any */
    const char *job_key; /* NULL/"" any */
    int64_t since_ms;    /* entries with time_ms >= since_ms; 0 any */
    int64_t limit;       /* <= 0 no limit; otherwise the most recent `limit` matches */
};
typedef int (*store_audit_cb)(void *ctx, const struct store_audit *a);
/* Matching entries, oldest first (time, then id). */
int store_audit_query(struct store *st, const struct store_audit_filter *f, store_audit_cb cb,
                      void *ctx, char *err, size_t errlen);
/* Delete the entries older than before_ms (time_ms < before_ms), oldest first, at most max
 * (> 0) of them: retention, in bounded steps so a first prune of a long history does not hold
 * one transaction for long. *deleted (may be NULL) gets how many went; fewer than max means
 * none older is left. Inside a cycle's transaction or on its own. */
int store_audit_prune(struct store *st, int64_t before_ms, int max, int *deleted, char *err, size_t errlen);

#endif
