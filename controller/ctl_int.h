/*
 * ctl_int.h — internals shared by the controller's files, included by each
 * of them: ctl_main.c (loop, CLI), the reconcile (ctl_cycle.c and the files
 * of its phases, whose own declarations are in ctl_rc.h), ctl_wire.c (the
 * controller's side of the actuator), ctl_memo.c (memo table, object sets,
 * pod index), ctl_clock.c (wall clock), ctl_config.c (options),
 * ctl_bench.c (`gangq bench reconcile`: the reconcile on caches it fills)
 * and tests/unit/test_ctl_perf.c (the pod index). Not a public interface. The
 * actuator (ctl_act.c) does not include it: it sees only ctl_act.h, and
 * struct gq_ctl embeds its struct ctl_act.
 *
 * Who calls whom (one way; no file calls back into one above it):
 *   ctl_main.c   -> ctl_cycle.c  ctl_reconcile (returns struct ctl_rc_result:
 *                                the loop acts on it: readiness, settle
 *                                timer), ctl_team_changed, ctl_pod_deleted,
 *                                ctl_rows_release
 *                -> ctl_report.c ctl_queue_render
 *                -> ctl_wire.c   ctl_act_wire (hands over c->wake)
 *                -> ctl_memo.c   informer events indexed, table released
 *   reconcile    -> ctl_wire.c   status writes, pod deletes and GETs
 *                -> ctl_memo.c   memos, victims, texts; marks jobs dirty
 *                                itself (dirty_upto: no loop needed)
 *   ctl_wire.c   -> ctl_memo.c   memos looked up again by key in every hook
 *   ctl_main.c, the reconcile, ctl_wire.c -> ctl_clock.c (ctl_now_ms), and down
 *   to ctl_act.c and ctl_snapshot.c, which see only ctl_act.h and ctl.h.
 * The loop is reached from below only through function pointers: the
 * actuator's hooks (ctl_wire.c, called by ctl_act.c from the loop or inside
 * a call into it) ask for a reconcile through c->wake (ctl_main.c's
 * ctl_mark_dirty).
 *
 * Ownership: struct gq_ctl owns every member. Memo entries (struct ctl_memo)
 * are owned by the memo table; request callbacks never hold a memo pointer,
 * only a heap copy of the key, and look the entry up again when they run, so
 * an entry may be dropped while a request for it is in flight. A memo is
 * grouped by concern (decode, wait, pods, status, pl, victims: each part
 * says who writes it and what it owns). A job's memo also caches its decoded
 * GPUJob (the reconcile borrows it for one reconcile; the memo is not dropped
 * during the reconcile that saw it).
 */
#ifndef GQ_CTL_INT_H
#define GQ_CTL_INT_H

#include <ev.h>

#include "ctl.h"
#include "ctl_act.h"
#include "httpd.h"
#include "kube.h"
#include "metrics.h"
#include "log.h"
#include "store.h"

enum ctl_inf { INF_JOBS = 0, INF_TEAMS, INF_POOLS, INF_NODES, INF_PODS, INF_PCS, INF_COUNT };

/* What a reconcile reads of a gangq pod, looked up once when the pods are
 * gathered (pointers into the pod cache's cJSON: valid for that reconcile). */
struct ctl_podfacts {
    const char *name, *node, *phase, *replica, *attempt, *deletion;
    int terminal; /* phase Succeeded or Failed */
};

/* Per object memory kept across cycles (jobs "ns/name", teams "team:N",
 * pools "pool:N"), one sub-struct per concern. A job memo uses every part; a
 * Team or pool memo only status (and a Team's invalid_reported_gen).
 * Texts below marked (str) are owned heap strings, NULL for "" (set with
 * ctl_str_set, read with ctl_str): most jobs have none of them. Every memo
 * is freed by ctl_memo.c (memo_free), which releases what each part owns. */

/* The GPUJob decode cache, and what the last full examination of the job
 * found. Written by ctl_observe.c only (job_decode_cached, rc_job_prepare*), read
 * by the reconcile (struct cj borrows &job for one reconcile: the memo is not
 * dropped during the reconcile that saw it) and by ctl_queue_render. */
struct ctl_memo_decode {
    /* job is the decoded+defaulted+validated form of the object with
     * (job_uid, job_rv = generation or resourceVersion key, ctl_observe.c
     * job_cache_key) under the Teams/PriorityClasses signature job_lookup;
     * job_nerr/job_err are its decode/validate errors.
     * job is owned (heap, NULL when none; released and freed by ctl_memo.c
     * memo_decode_drop); job_valid says it holds a decode. job->template is
     * kept only while job_refusal is set (job_refused formats the Team
     * rules' message again); otherwise NULL: pods are built from the object. */
    struct api_gpujob *job;
    int job_valid;
    int job_nerr;
    uint64_t job_lookup;
    char job_uid[API_UID_MAX], job_rv[API_UID_MAX + 8];
    char *job_err;                /* (str) */
    const char *job_refusal;      /* api_gpujob_tenancy's reason (static) or NULL, same inputs */
    /* A full examination (a dirty job, a full pass) filled the fields below;
     * a reconcile that finds the job clean reuses them (job_prepare_clean). */
    int prepared;
    int prep_failed_invalid;
    const char *prep_invalid_reason; /* static text or NULL */
    char *prep_invalid_msg;       /* (str) */
    /* The job is finished and settled (ctl_observe.c rc_job_sleep): Succeeded or
     * Failed in the store, its status written, every pod of it terminated,
     * nothing of it pending. Reconciles, full passes included, skip it (no
     * decode, no rules, no status) until an event of the job or its pods
     * marks the memo dirty; its decode, placement and last status text are
     * freed meanwhile (a finished job costs its cached object and a small
     * memo, not a decoded spec). */
    int dormant;
    /* Its store row as the last reconcile that looked left it (a pointer
     * into the controller's kept rows, not owned), valid while the
     * controller's rows_gen is still row_gen: within a reconcile only an
     * examination of the job replaces its row (and keeps the new one here),
     * and rows freed wholesale bump rows_gen. So a job not examined finds
     * its row without a search among the rows (ctl_rc.c rc_row_kept). */
    const struct store_job *row;
    uint64_t row_gen;
};

/* Why the job waits and what its status shows of the wait. wait_msg,
 * unsched_msg, position, gposition and reserved are renewed by
 * each scheduling cycle (ctl_decide.c rc_run_sched; phase_observe sets wait_msg
 * to a spec problem, rc_waiting_publish clears it once the job neither waits
 * nor holds); pub is written by rc_waiting_publish (ctl_wait_publish,
 * ctl_wait_adopt). Read by rc_job_status, the Teams' pendingHead and /queue. */
struct ctl_memo_wait {
    char *wait_msg;               /* (str) last WAIT explanation */
    uint64_t wait_msg_hash;       /* gq_hash_str of wait_msg as set (0 while NULL) */
    char *unsched_msg;            /* (str) last WAIT's unschedulable_msg ("" = fits an empty cluster) */
    char *reserved;               /* (str) what its reservation held last cycle (WAIT's reserved) */
    int position;                 /* exact WAIT position of the last schedule in its Team's
                                   * queue (0 = none) */
    int gposition;                /* exact WAIT position of the last schedule across all
                                   * Teams, in the core's admission order (0 = none) */
    struct ctl_waitpub pub;       /* what its status shows of its wait (ctl_wait_publish) */
};

/* The job's pods: the index kept by the pod informer's events (pods, pf,
 * npods, podcap: ctl_memo.c ctl_index_pod, which creates the memo), and what
 * is known of them beyond the cache: API answers (ctl_wire.c's hooks,
 * ctl_cycle.c ctl_pod_deleted) and the reconcile's own bookkeeping
 * (missing pods, released and stray pods). A memo with pods or
 * stray deletes in flight is not dropped. */
struct ctl_memo_pods {
    /* this job's pods in the pod cache (array owned, objects borrowed: an
     * entry is replaced or removed by ctl_index_pod before the cache frees
     * its object) */
    const cJSON **pods;
    struct ctl_podfacts *pf;      /* parallel to pods (array owned, texts borrowed likewise) */
    int npods, podcap;
    /* The last examination of this memo's pods found a released pod
     * (released_pods) / left a stray pod to delete or to look at again
     * (cleanup_strays): a clean memo without them is not examined again. */
    int rel_any, stray_any;
    int confirm_inflight;         /* a GET of an absent pod in flight (ctl_wire.c) */
    int cleanup_inflight;         /* stray pod deletes in flight (ctl_wire.c) */
    /* The last pod create submitted (its attempt, name, when; ctl_wire.c
     * hook_pod_create_sent): until the cache shows a pod of that attempt or
     * newer, or the API server says it is gone, the pod may run unseen, so
     * the job is not placed again while it holds nothing (ctl_decide.c
     * earlier_attempt_runs). 0 = none pending. created_pod is (str), NULL
     * when none or out of memory: the job then waits for the cache alone
     * (never placed again sooner). */
    int created_attempt;
    int64_t created_ms;
    char *created_pod;
    int64_t missing_since_ms;     /* a placed replica's pod is absent since (or last asked for) */
    /* The last lifecycle look (ctl_observe.c rc_job_lifecycle) found the admitted
     * job with nothing time can change: every placed replica's pod seen, none
     * failed, stopping or on a node not Ready. Only an event (its own, its
     * pods', a node's: a full pass) or a write of its row changes that, so
     * the periodic resync does not examine it again. */
    int steady;
    int64_t cleanup_done_ms;      /* the last stray pod deletes, or the last intent's, ended
                                   * (a stale cache is not asked again at once:
                                   * CTL_STRAY_RETRY_MS) */
    /* A pod of this job the API server said is gone: a delete event
     * (ctl_pod_deleted) or a GET answering 404 (ctl_pod_confirm). A
     * placed pod absent from the cache is lost only when named here; a
     * lagging watch never counts. Cleared by a new admission. (str: out
     * of memory leaves it unnamed, so the API server is asked again) */
    char *gone_pod;
    /* Pods of this job deleted while Succeeded (copies, owned; a cJSON array,
     * at most CTL_GONE_OK_MAX): a replica that finished while its deletion
     * (preemption, suspend) was under way still counts for "every replica of
     * one attempt succeeded" after the pod is gone. */
    cJSON *gone_ok;
    char *create_err;             /* (str, at most 255 bytes) a pod create the API server
                                   * refused (4xx): the job fails
                                   * (ctl_wire.c hook_pod_create_refused; read and cleared by
                                   * ctl_observe.c rc_job_create_refused) */
};

/* The object's status subresource as we wrote it (jobs, Teams, pools).
 * last_status, status_gen and status_inflight are written by ctl_wire.c
 * (ctl_status_write, hook_status_end), status_state by hook_status_end; the
 * other fields by ctl_report.c (rc_job_status, counted_status) and ctl_observe.c
 * (rc_status_held). */
struct ctl_memo_status {
    const char *last_status;      /* JSON last written successfully, or submitted (a
                                   * gq_sstr text, one reference owned: the request sending
                                   * it holds another; gq_sstr_put, never free. A failed
                                   * or dropped latest write clears it: written again) */
    /* a hash of the inputs last_status was computed from (jobs: status_sig
     * in ctl_report.c; Teams and pools: what must be written at once): equal
     * inputs give the same status, so it is not written again. 0 = none */
    uint64_t status_sig;
    uint64_t urgent_sig;          /* jobs: status_sig without position and message text, of
                                   * the status last taken for writing (ctl_report.c rc_job_status) */
    int status_inflight;          /* state transitions queued or on the wire */
    int since_state;              /* the store state seen last, since state_since_ms */
    /* status writes (ctl_status_write): status_gen numbers them (only the latest
     * one's failure clears last_status); status_state is the status.state the
     * API server last accepted from us, "/Invalid" appended while it reported
     * an invalid spec ("" = none yet): a patch with another is a transition,
     * written in the normal lane, never refused */
    uint64_t status_gen;
    char status_state[32];
    /* --status-settle: when a status was last sent for this job (0 = never
     * since start), and when a write it holds back is due (0 = none) */
    int64_t status_sent_ms;
    int64_t settle_due_ms;
    int64_t state_since_ms;       /* (0 = not seen yet) */
};

/* The job's placement as last parsed from its store row (ctl_observe.c
 * placement_load): pl_cache is ctl_placement_parse(pl_text), both owned.
 * pl_row (not owned, only compared) is the row it was last checked against
 * while the controller's rows_gen was pl_row_gen: a row's placement never
 * changes while it is kept (a change replaces the row, and the job's
 * rc_row_keep then clears pl_row), so the same row needs no comparison of
 * the texts. */
struct ctl_memo_placement {
    char *pl_text;
    struct ctl_placement pl_cache;
    const struct store_job *pl_row;
    uint64_t pl_row_gen;
};

/* Keys of the jobs preempted for this job since it was last admitted
 * (owned: the array and each key; ctl_memo_victim_add, ctl_memo_victims_clear,
 * called by ctl_decide.c), passed to the core as its preempted_victims. In
 * memory only: a restart forgets it (the victims' stored preempted_by
 * remains). */
struct ctl_memo_victims {
    char **victims;
    int nvictims, capvictims;
};

/* spec.ttlSecondsAfterFinished of a finished job (ctl_observe.c rc_job_ttl):
 * kept while the job is dormant, so a dormant job wakes when it is due. */
struct ctl_memo_ttl {
    int64_t at_ms;                /* when the GPUJob is to be deleted (0 = not known) */
    int64_t retry_ms;             /* a delete ended: none sent again before then */
    int inflight;                 /* a delete is on its way (ctl_job_delete .. hook) */
    int fails;                    /* deletes failed in a row: the wait doubles with each */
};

/* spec.maxRunSeconds in force for the admission a job holds (ctl_observe.c
 * rc_run_limit): taken at the first look at that admission, lowered by a spec
 * edit, never raised until the next admission. Kept in memory: a restart
 * takes the spec's value again. */
struct ctl_memo_run {
    int64_t adm_ms;               /* the admission it is for (store admitted_ms), 0 none */
    int32_t limit_s;              /* 0 = no limit */
};

struct ctl_memo {
    char *key;                    /* owned */
    uint64_t hash;                /* gq_hash_str(key): a chain is walked without reading keys */
    struct ctl_memo *next;        /* hash chain */
    /* Event-driven reconcile: the job is examined in full (decode checks, spec
     * rules, lifecycle, status) by every reconcile numbered <= dirty_upto, and
     * by full passes; other reconciles reuse what the last full examination
     * found (decode.prepared). Set by informer events of the job or its pods,
     * by acts that finish, and by the reconcile's own writes. */
    int64_t dirty_upto;
    /* its status is computed again (not the rest of a full examination) by
     * the reconcile numbered status_upto: what the scheduling core says of it
     * or what is published of its wait changed (ctl_rc.c rc_job_touch_status) */
    int64_t status_upto;
    int64_t seen_cycle;           /* last reconcile that saw the object or row (memo aging) */
    /* Team memo: generation whose invalid edit was last reported (Event, audit) */
    int64_t invalid_reported_gen;
    struct ctl_memo_decode decode;
    struct ctl_memo_wait wait;
    struct ctl_memo_pods pods;
    struct ctl_memo_status status;
    struct ctl_memo_placement pl;
    struct ctl_memo_victims victims;
    struct ctl_memo_ttl ttl;
    struct ctl_memo_run run;
};

struct ctl_memo_table {
    struct ctl_memo **b;
    size_t nb, n;
    int64_t seen_for;             /* the reconcile nseen counts for */
    size_t nseen;                 /* memos ctl_memo_seen marked for it */
};

/* Objects by key ("ns/name"), sorted, kept by informer events: what a
 * reconcile gathers without walking the caches. Keys owned, objects borrowed
 * from the informer's cache (replaced or removed by the event that frees them). */
struct ctl_objent {
    char *key;
    const cJSON *obj;
    /* the key's memo, once a reconcile looked it up (NULL: look it up); a
     * memo is freed only by ctl_memo_drop_unseen, which clears it here */
    struct ctl_memo *memo;
};
struct ctl_objset {
    struct ctl_objent *e;
    int n, cap;
};
int ctl_objset_put(struct ctl_objset *s, const char *key, const cJSON *obj); /* GQ_ENOMEM */
void ctl_objset_del(struct ctl_objset *s, const char *key);
void ctl_objset_release(struct ctl_objset *s);

struct ctl_metrics_counters {
    uint64_t cycles, cycle_us_total, admissions, preemptions, store_errors;
    uint64_t informer_events;
    double last_cycle_ms;
    int64_t jobs_by_state[STORE_NSTATES];
    int64_t jobs_dormant;         /* finished jobs reconciles skip (ctl_observe.c rc_job_sleep) */
    uint64_t phase_ns[6];         /* each reconcile phase's time so far, ns (CTL_NPHASES) */
    uint64_t jobs_woken;          /* dormant jobs an event made examine again */
    uint64_t reconciles_full;     /* reconciles that examined every job (--full-resync-interval,
                                   * a Team/GPUPool/class/node change) */
    uint64_t reconciles_quiet;    /* reconciles skipped: nothing changed, nothing due (rc_quiet) */
    uint64_t jobs_full, jobs_reused; /* jobs examined in full / whose last examination was reused */
    uint64_t job_status_events;      /* GPUJob events that changed the status alone (ctl_object_event) */
    uint64_t refresh_sent, refresh_held; /* status refreshes written / put off (--status-refresh-qps) */
    uint64_t status_deferred;     /* cosmetic statuses not built: the low lane was full */
    uint64_t audit_pruned;        /* audit entries deleted past --audit-retention */
    uint64_t jobs_ttl_deleted;    /* finished GPUJobs deleted for their ttlSecondsAfterFinished */
    uint64_t jobs_deadline_exceeded; /* jobs stopped for running past spec.maxRunSeconds */
    uint64_t backfills;           /* admissions onto nodes reserved for another job */
};

/* The named phases of one reconcile (ctl_cycle.c), in order. */
#define CTL_NPHASES 6
/* Housekeeping (done intents, decayed usage, audit entries past retention) at most this often. */
#define CTL_PRUNE_INTERVAL_MS 600000
/* Audit entries one reconcile deletes at most; a longer backlog goes on a second later. */
#define CTL_AUDIT_PRUNE_BATCH 20000
/* A finished GPUJob's delete that failed is tried again this much later, doubled
 * with each failure in a row up to CTL_TTL_RETRY_MAX_MS (a refusing API server, e.g.
 * RBAC without the delete, is not asked again and again); one that succeeded is
 * not sent again before CTL_TTL_RETRY_MS (the watch may still show the object). */
#define CTL_TTL_RETRY_MS 10000
#define CTL_TTL_RETRY_MAX_MS 600000
extern const char *const ctl_phase_names[CTL_NPHASES];

/* Metric handles (NULL when --listen is not given: updates are no-ops). */
struct ctl_mh {
    struct gq_metric *cycles, *cycle_dur, *store_errors, *leader;
    struct gq_metric *draining;
    struct gq_metric *phase_dur[CTL_NPHASES]; /* gangq_reconcile_phase_duration_seconds{phase} */
    struct gq_metric *phase_cpu[CTL_NPHASES]; /* gangq_reconcile_phase_cpu_seconds_total{phase} */
    struct gq_metric *jobs[STORE_NSTATES];
    struct gq_metric *jobs_dormant, *jobs_woken;
    struct gq_metric *write_credit; /* gangq_write_budget (ctl_act.h's write budget) */
    struct gq_metric *heap_inuse, *heap_free; /* gangq_heap_bytes{state} (mallinfo2) */
    struct gq_metric *inf_events[INF_COUNT], *inf_lists[INF_COUNT];
    struct gq_metric *inf_relists[INF_COUNT]; /* gangq_informer_relists_total{resource,reason} */
    /* gangq_watch_delay_seconds{informer}: creationTimestamp -> ADDED event
     * (GPUJobs only: pods are cached without their creationTimestamp) */
    struct gq_metric *watch_delay[INF_COUNT];
    /* creation -> first admission, by class (index enum api_class) */
    struct gq_metric *admit_wait[API_CLASS_COUNT];
};

/* Families whose series carry label values from objects (team, pool, GPU
 * type): declared in ctl_main.c with CTL_METRICS_MAX_OBJ_SERIES series each,
 * the gauges recomputed (cleared and set) by every report phase. */
#define CTL_METRICS_MAX_OBJ_SERIES 1024
#define CTL_M_TEAM_QUOTA "gangq_team_quota_gpus"
#define CTL_M_TEAM_USED "gangq_team_used_gpus"
#define CTL_M_TEAM_BORROWED "gangq_team_borrowed_gpus"
#define CTL_M_TEAM_PENDING_JOBS "gangq_team_pending_jobs"
#define CTL_M_TEAM_PENDING_GPUS "gangq_team_pending_gpus"
#define CTL_M_POOL_GPUS "gangq_pool_gpus"
#define CTL_M_POOL_ALLOCATED "gangq_pool_allocated_gpus"
#define CTL_M_POOL_PENDING_JOBS "gangq_pool_pending_jobs"
#define CTL_M_ADMISSIONS "gangq_admissions_total"   /* {team,class} */
#define CTL_M_PREEMPTIONS "gangq_preemptions_total" /* {team,class} */

struct gq_ctl;
struct ctl_infud {
    struct gq_ctl *c;
    int idx;
};

#define CTL_GONE_OK_MAX 64

struct gq_ctl {
    struct ctl_infud infud[INF_COUNT];
    struct ctl_config cfg;
    struct sched_config scfg;
    const char *level_names[API_MAX_LEVELS]; /* into cfg.levels */
    struct ev_loop *loop;
    struct kube_config kcfg;
    struct kube_client *client;
    struct kube_informer *inf[INF_COUNT];
    /* what the reconcile and the actuator read: the informers' caches
     * (kube_informer_cache, set in ctl_run), or a benchmark's own
     * (controller/ctl_bench.c); borrowed */
    const struct kube_cache *cache[INF_COUNT];
    struct kube_leader *leader;
    struct store *st;
    struct sched *sched;
    struct ctl_memo_table memo;
    char identity[128];
    int leading;          /* leader (or leader election off) */
    int dirty;
    /* adaptive batching: when the last reconcile that ran began and ended
     * (ev_time()); the next one waits so that reconciles take at most
     * cfg.max_reconcile_share percent of the time and, while events stream
     * in, start cfg.batch_window_s apart (ctl_batch_delay) */
    double rc_start;
    double rc_end;
    double trim_at;               /* ev_time of the last malloc_trim (ctl_main.c) */
    double heap_at;               /* ev_time of the last mallinfo2 behind the heap gauges */
    /* the next reconcile examines every job in full (a Team, pool, priority
     * class or node changed, a set ran out of memory, the first one) */
    int full_next;
    int64_t last_full_ms;      /* the last full reconcile began */
    int64_t last_resync_ms;    /* the last periodic resync (--cycle-interval) began */
    /* Quiet reconciles (ctl_cycle.c rc_quiet): what the last committed
     * reconcile left for deciding that the next one has nothing to do.
     * inputs counts what a reconcile reads changing (ctl_wake); inputs_seen
     * is its value when that reconcile began; due_ms when time alone changes
     * something (rc_ctx.due_next); resync_jobs the jobs the periodic resync
     * examines; quiet_ok that it committed. */
    uint64_t inputs, inputs_seen;
    int64_t due_ms;
    int resync_jobs;
    int quiet_ok;
    struct cj *jobs_keep;         /* the last reconcile's job array (ctl_gather.c), reused
                                   * by the next; owned, freed at stop */
    size_t jobs_keep_cap;
    struct ctl_jobin *ins_keep;   /* the scheduling core's job inputs (ctl_decide.c rc_run_sched),
                                   * reused by the next reconcile; owned, freed at stop */
    size_t ins_keep_cap;
    int *ins_job_keep;            /* and their r->jobs indexes */
    size_t ins_job_keep_cap;
    unsigned char *waited_keep;   /* rc_run_sched: which snapshot jobs had a WAIT */
    size_t waited_keep_cap;
    struct ctl_team_keep *team_keep; /* each Team's last decode and the reconcile's Team
                                      * arrays (ctl_gather.c); owned, ctl_team_keep_free */
    struct ctl_snap_keep snap_keep; /* the last scheduling snapshot's array memory, reused by
                                     * the next (ctl_snap_build); owned, freed at stop */
    int index_stale;           /* indexing an event failed: rebuild the sets from the caches */
    /* The store's job rows as the last committed reconcile left them (owned,
     * sorted by key; rc_row_copy blocks): the controller is the store's only
     * writer and every write in a reconcile refreshes its row, so a reconcile
     * starts from these instead of reading every row again. NULL (none kept:
     * the first reconcile after leading, one that failed or rolled back, an
     * empty store) = read from the store. */
    struct store_job **rows;
    int nrows, caprows;
    uint64_t rows_gen;            /* bumped whenever rows are freed wholesale (ctl_rows_release) */
    uint64_t jobs_deleted;        /* GPUJob DELETED events so far (ctl_object_event) */
    uint64_t jobs_deleted_walked; /* ... when the last committed reconcile looked for rows
                                   * whose GPUJob is gone (ctl_cycle.c phase_observe) */
    struct ctl_objset jobs_set;    /* GPUJobs (ctl_index_job) */
    struct ctl_objset foreign_set; /* bound non-terminal pods not gangq's (ctl_index_pod) */
    int stopping;
    int exit_code;
    int in_reconcile;
    int restart_done;     /* pending intents of the previous run were looked at */
    int64_t reconciles;
    int64_t last_usage_ms;
    int64_t last_prune_ms;
    int64_t pos_pub_ms;   /* positions and Teams' pendingHead last published */
    /* the actuator: its in-flight and done intent sets (the next reconcile
     * marks the done ones in its own transaction); its kube
     * client, caches and store are c's (borrowed), its hooks ctl_wire.c's */
    struct ctl_act act;
    struct gq_rate refresh; /* status refreshes' budget (--status-refresh-qps/-burst) */
    /* the loop's wake-up (ctl_main.c's ctl_mark_dirty, given to ctl_act_wire):
     * how the actuator's hooks (ctl_wire.c) ask for a reconcile without
     * calling into ctl_main.c */
    void (*wake)(struct gq_ctl *c);
    ev_timer debounce, resync, stop_timer, settle_timer;
    int64_t settle_at_ms;         /* settle_timer fires then (0 = not armed) */
    ev_signal sigterm, sigint;
    ev_tstamp stop_deadline;
    struct ctl_metrics_counters m;
    struct gq_metrics *metrics;
    struct gq_httpd *httpd;
    struct ctl_mh mh;
    uint64_t inf_events[INF_COUNT];
    uint64_t last_relists;
    /* reconciles in a row that failed (rolled back), and the last error:
     * /readyz answers 503 from CTL_READY_MAX_FAILED of them on */
    int failed_streak;
    char failed_err[256];
};

#define CTL_READY_MAX_FAILED 3

/* ctl_clock.c */
/* The wall clock, Unix ms (CLOCK_REALTIME), plus what ctl_clock_advance added. */
int64_t ctl_now_ms(void);
/* Move the controller's clock ms forward for the rest of the process: for
 * the reconcile harness (ctl_bench.c, tests), so that time-held writes come
 * due as in a cluster; the controller never calls it. */
void ctl_clock_advance(int64_t ms);

/* ctl_memo.c: the memo table, object sets and pod index; no loop, no I/O.
 * (ctl_str_set and ctl_str: ctl.h) */
struct ctl_memo *ctl_memo_get(struct ctl_memo_table *t, const char *key, int create);
/* m's job is dormant (ctl_observe.c rc_job_sleep): its decode, last status text,
 * placement cache, victims and wait texts are freed, decode.dormant set. */
void ctl_memo_sleep(struct ctl_memo *m);
/* m (of t) is kept by reconcile cycle (memo aging): seen_cycle set, and
 * counted, so that a reconcile that saw every memo skips the walk below. */
void ctl_memo_seen(struct ctl_memo_table *t, struct ctl_memo *m, int64_t cycle);
/* Free the memos no reconcile has seen since cycle (and nothing waits on);
 * a dropped memo is cleared from its entry in hints (may be NULL). Nothing
 * to walk when cycle saw every memo of t (ctl_memo_seen). */
void ctl_memo_drop_unseen(struct ctl_memo_table *t, int64_t cycle, struct ctl_objset *hints);
/* Record that key was preempted for m's job (once); GQ_ENOMEM. */
int ctl_memo_victim_add(struct ctl_memo *m, const char *key);
/* m's job was admitted: the jobs preempted for it no longer wait for it. */
void ctl_memo_victims_clear(struct ctl_memo *m);
void ctl_memo_table_release(struct ctl_memo_table *t);
/* Informer events (old_obj: the cached object replaced or deleted, NULL on
 * add; new_obj: the object now cached, NULL on delete): keep a job's pods on
 * its memo (gangq pods, by job label; the memo is created) and the other bound,
 * non-terminal pods in foreign; GPUJobs in jobs. The memo of the job concerned
 * is examined in full up to reconcile dirty_cycle (0: not marked). GQ_ENOMEM (the caller then
 * asks for a relist: the sets would be incomplete). */
int ctl_index_pod(struct ctl_memo_table *t, struct ctl_objset *foreign, const cJSON *old_obj,
                  const cJSON *new_obj, int64_t dirty_cycle);
int ctl_index_job(struct ctl_memo_table *t, struct ctl_objset *jobs, const cJSON *old_obj,
                  const cJSON *new_obj, int64_t dirty_cycle);
/* The job of key (if it has a memo) is examined in full up to reconcile dirty_cycle. */
void ctl_memo_mark(struct ctl_memo_table *t, const char *key, int64_t dirty_cycle);
/* The same for memo m (may be NULL). */
void ctl_memo_dirty(struct ctl_memo *m, int64_t dirty_cycle);

/* ctl_main.c */
/* An informer event of resource idx (enum ctl_inf; old_obj/new_obj as for
 * ctl_index_pod, the cache already holds new_obj): indexed (the job or pod
 * concerned examined by the next reconcile; a Team, pool, class or node
 * change makes it a full pass), counted, and a reconcile asked for through
 * c->wake. The informers' callback; a benchmark (ctl_bench.c) calls it for
 * the objects it puts in its own caches. */
void ctl_object_event(struct gq_ctl *c, int idx, enum kube_event_type type, const cJSON *old_obj,
                      const cJSON *new_obj);
/* c->scfg from c->cfg (levels, label keys, minimum runtime). */
void ctl_scfg_init(struct gq_ctl *c);
/* The heap tuned for the controller (glibc mallopt): called first by ctl_run
 * and by the reconcile benchmark, before their caches are filled. */
void ctl_heap_init(void);
/* Release what c owns below the loop (the informers, client and metrics are
 * ctl_run's): the done marks flushed, an open store transaction rolled back,
 * the kept reconcile arrays, store, core, memo table, sets and actuator. c
 * itself is the caller's. */
void ctl_core_release(struct gq_ctl *c);

/* ctl_bench.c: the controller's reconcile without an API server (`gangq
 * bench reconcile`, and unit tests of the reconcile). A struct gq_ctl with
 * its defaults, its real store at db and its actuator, reading caches the
 * caller fills (ctl_fake_put, through ctl_object_event as the informers
 * would); the actuator's requests are answered by ctl_fake_deliver, as an
 * API server and a kubelet would: a pod created is cached bound and
 * Running, a GPUJob status patch merged into the cached object (the
 * watch's MODIFIED), a pod delete removes it, a GET of a pod answers 404,
 * the rest succeed. The caller runs ctl_reconcile(ctl_fake_ctl(f)) itself.
 * Owns the gq_ctl and the caches; ctl_fake_free releases them (the db file
 * stays). */
struct ctl_fake;
struct ctl_fake_counts {
    uint64_t creates, deletes, patches, events, gets; /* requests answered so far */
    uint64_t job_deletes;         /* of the deletes, those of GPUJobs */
};
/* NULL on failure (err filled). */
struct ctl_fake *ctl_fake_new(const char *db, char *err, size_t errlen);
struct gq_ctl *ctl_fake_ctl(struct ctl_fake *f);
/* Put obj (owned, always) in cache idx (enum ctl_inf) as an informer event
 * of type: ADDED, MODIFIED (the cached object replaced) or DELETED (by key). */
int ctl_fake_put(struct ctl_fake *f, int idx, enum kube_event_type type, cJSON *obj);
/* The object cached under key ("ns/name", or "name"), borrowed; NULL if none. */
const cJSON *ctl_fake_get(const struct ctl_fake *f, int idx, const char *key);
/* Answer every request sent so far, then update the caches (events). */
int ctl_fake_deliver(struct ctl_fake *f);
struct ctl_fake_counts ctl_fake_requests(const struct ctl_fake *f);
/* GPUJob deletes are answered with HTTP status (0 or 200: done, the object
 * goes; else refused with GQ_EHTTP, the object stays). */
void ctl_fake_job_delete_status(struct ctl_fake *f, long status);
void ctl_fake_free(struct ctl_fake *f);

/* The reconcile: ctl_cycle.c, and ctl_gather.c (ctl_team_keep_free),
 * ctl_report.c (ctl_queue_render). */
/* What one reconcile tells the loop, which acts on it (ctl_main.c): the
 * reconcile itself never calls into the loop. */
struct ctl_rc_result {
    int committed;           /* its store transaction committed (readiness: a success) */
    int rc;                  /* GQ_OK, or the error that stopped it (rolled back before
                              * the commit): a failure for readiness. rc 0 and not
                              * committed: it did not run (no memory for its context) */
    char err[512];           /* with rc: why ("" = gq_strerror(rc) says it) */
    int64_t due_ms;          /* reconcile again then (wall clock, ms): time alone changes
                              * something (rc_ctx.due_next; 0 = none; only when rc 0) */
    int quiet;               /* skipped: nothing could have changed (ctl_cycle.c rc_quiet) */
};
/* One reconcile (the phases in ctl_cycle.c); only while leading, after every
 * informer synced. */
struct ctl_rc_result ctl_reconcile(struct gq_ctl *c);
/* Free the kept store rows; the next reconcile reads them. */
void ctl_rows_release(struct gq_ctl *c);
/* Free what c->team_keep holds (NULL: nothing). */
void ctl_team_keep_free(struct ctl_team_keep *k);
/* Team "quota-edit" audit for an informer MODIFIED of a Team. */
void ctl_team_changed(struct gq_ctl *c, const cJSON *old_obj, const cJSON *new_obj);
/* Every waiting job with its exact queue position from the last schedule
 * (not the bounded-rate one its status shows), as JSON {"jobs":[{team,
 * namespace, name, position, state, waitReason, message}]} ordered by team
 * and position; team non-empty keeps that Team's. GQ_ENOMEM. */
int ctl_queue_render(const struct gq_ctl *c, const char *team, struct gq_buf *out);
/* An informer DELETED of a pod: a gangq pod's name is recorded as gone on its job's memo. */
void ctl_pod_deleted(struct gq_ctl *c, const cJSON *pod);

/* ctl_wire.c: the actuator (ctl_act.h) wired to the controller, and the
 * actuator's requests that first consult the memo. */
/* Fill c->act (requests, caches, configuration, hooks): after c->cache is
 * set. kube and kube_ctx send the requests (&ctl_act_kube_client and
 * c->client in the controller; borrowed). c->act.st follows c->st
 * (ctl_store_open). wake asks the loop for a reconcile (kept in c->wake):
 * the hooks call it when an outcome needs one, from the loop or inside a
 * call into the actuator. */
/* Something a reconcile reads changed (an informer event but a status echo,
 * an actuator outcome, a due time, an informer synced, the lease taken):
 * counted in c->inputs, so the next reconcile is not quiet, and the loop is
 * asked for one through c->wake. */
void ctl_wake(struct gq_ctl *c);
void ctl_act_wire(struct gq_ctl *c, void (*wake)(struct gq_ctl *c), const struct ctl_act_kube *kube,
                  void *kube_ctx);
/* Delete one pod (uid precondition); grace < 0 = the pod's own. Tracked on
 * the memo's cleanup counter of key (when it has a memo) until it ends. */
void ctl_pod_delete(struct gq_ctl *c, const cJSON *pod, long grace, const char *key);
/* Ask the API server for a pod absent from the cache (GET): a 404 records it
 * as gone on the memo of key; any other answer restarts missing_since_ms. One
 * at a time per memo; none without a memo. */
void ctl_pod_confirm(struct gq_ctl *c, const char *key, const char *ns, const char *name);
/* Delete the finished GPUJob of key (ns/name, uid: ctl_act_delete_job): its
 * ttlSecondsAfterFinished passed. One at a time per memo (m->ttl.inflight);
 * a failure (now or in its answer) is tried again later (ctl_wire.c
 * ttl_wait_ms: CTL_TTL_RETRY_MS, doubled per refusal in a row).
 * GQ_ENOTFOUND without a memo. */
int ctl_job_delete(struct gq_ctl *c, const char *key, const char *ns, const char *name, const char *uid);
/* Patch a status subresource if its JSON differs from memo->last_status
 * (the memo of memo_key is created); invalid: it reports an invalid spec
 * (ctl_status_lane_state). Returns 0 when last_status now holds patch
 * (submitted, or already equal), else nonzero: not taken (no memory, or a
 * cosmetic write refused while the low lane is full) and to be written again
 * later. */
int ctl_status_write(struct gq_ctl *c, const char *memo_key, const char *path, cJSON *patch, int invalid);
/* What a status says for the request lanes, into out (len bytes, always
 * terminated): its status.state, with CTL_ACT_STATE_INVALID ("/Invalid")
 * appended when it reports an invalid spec (invalid: the caller's flag, or
 * for a cached object its waitReason Invalid).
 * A patch whose lane state differs from the object's is a transition (normal
 * lane, never refused). A job whose spec turns invalid stays Queued, yet the
 * user's error is a decision, not a cosmetic refresh: it never waits behind,
 * or is dropped from, a full low lane; it is ranked after other jobs' state
 * changes, so a flood of invalid jobs delays only its own kind. */
void ctl_status_lane_state(const char *state, int invalid, char *out, size_t len);
/* 1 when ctl_status_write of a patch with this status.state (invalid: it
 * reports an invalid spec) would be refused now (a cosmetic write while the low
 * lane is full), so it need not be built; else 0. */
int ctl_status_would_refuse(struct gq_ctl *c, const char *memo_key, const char *path, const char *state,
                            int invalid);

#endif
