/*
 * kube.h — the Kubernetes API client: libcurl multi driven by one caller-owned
 * libev loop, kubeconfig / in-cluster auth, list+watch informers with an
 * in-memory object cache, writers, and Lease-based leader election.
 *
 * Layers (each usable and testable on its own):
 *   kube_config    — where the API server is and how to authenticate (no I/O
 *                    after loading).
 *   kube_client    — async HTTP on curl multi + ev_io/ev_timer watchers. Every
 *                    request ends in exactly one callback (unless cancelled or
 *                    the client is freed first). Response bodies are bounded.
 *   kube_lines     — cuts a byte stream into '\n'-terminated lines in a bounded
 *                    buffer (a line over the maximum is an error).
 *   kube_backoff   — exponential backoff with jitter, honours Retry-After.
 *   kube_cache     — objects keyed by "namespace/name" (or "name"), owning
 *                    their cJSON; replace() diffs a relist into synthetic events.
 *   kube_informer  — LIST (paginated) then WATCH from the list's
 *                    resourceVersion, bookmarks, relist on 410, backoff,
 *                    stall detection; feeds the cache and the owner's handler.
 *   kube_leader    — coordination.k8s.io/v1 Lease election, resourceVersion-
 *                    guarded PUTs so two contenders can never both lead.
 *
 * Invariants and ownership:
 *   - One struct ev_loop * is owned by the caller and must outlive every
 *     object here. Nothing here blocks except kube_config loading (files).
 *   - Timers and backoff use monotonic time (ev_now); wall time is used only
 *     for Kubernetes timestamps (Lease renewTime, Event timestamps).
 *   - Callbacks may call any function here, including freeing or cancelling
 *     the very object whose callback is running: frees are deferred until the
 *     callback returns (never free an object whose callback is on the stack).
 *   - Pointers handed to callbacks (response bodies, cache objects) are
 *     borrowed: valid only for the duration of the callback unless stated.
 *   - Objects returned by *_new are owned by the caller; *_free accepts NULL.
 *   - No hidden globals. curl_global_init() is the process owner's job
 *     (kube_global_init() wraps it; call once from main before threads).
 *   - Requests may be started from any callback, including an informer's
 *     on_event (which runs inside curl's write callback): the client defers
 *     the curl_multi_add_handle to a 0 s timer there.
 *
 * Typical use (controller):
 *   kube_global_init();
 *   kube_config_load_kubeconfig(&cfg, path, NULL, err, sizeof err)   // or _incluster
 *   c = kube_client_new(loop, &cfg, &(struct kube_client_opts){.log_level = lvl}, err, n);
 *   inf = kube_informer_new(c, &(struct kube_informer_opts){
 *             .path = "/apis/gangq.io/v1alpha1/gpujobs", .on_event = on_job,
 *             .on_synced = on_synced, .ud = ctx}, err, n);
 *   kube_informer_start(inf);            // ... ev_run(loop, 0) ...
 *   kube_patch_status(c, path, patch, on_written, ctx);  // 409 -> GQ_ECONFLICT
 *   kube_informer_free(inf); kube_client_free(c); kube_config_release(&cfg);
 * Informer events: ADDED (old NULL), MODIFIED (old, new), DELETED (old = the
 * cached object, new = the final state from the watch, or the same as old for
 * a deletion found by a relist). BOOKMARKs only advance the resourceVersion.
 * After an API server restart the watch resumes from the last resourceVersion;
 * the server may answer 410 (its new watch cache starts later), and only then
 * the informer relists once, emitting synthetic events for what changed.
 */
#ifndef GQ_KUBE_H
#define GQ_KUBE_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "buf.h"
#include "gq.h"

struct ev_loop;

/* curl_global_init/cleanup, once per process (main, tests). */
int kube_global_init(void);
void kube_global_cleanup(void);

/* ------------------------------------------------------------------ config */

/*
 * Everything the client needs to reach and authenticate to an API server.
 * All strings are heap copies owned by the config (NULL when absent). *_data
 * fields hold decoded PEM bytes (kubeconfig *-data fields are base64).
 */
struct kube_config {
    char *server;        /* "https://127.0.0.1:6443" (no trailing slash) */
    char *ca_file;       /* certificate-authority */
    char *ca_data;       /* certificate-authority-data, decoded PEM */
    size_t ca_data_len;
    char *cert_file;     /* client-certificate */
    char *cert_data;     /* client-certificate-data, decoded */
    size_t cert_data_len;
    char *key_file;      /* client-key */
    char *key_data;      /* client-key-data, decoded */
    size_t key_data_len;
    char *token;         /* bearer token (static, or last read of token_file) */
    char *token_file;    /* tokenFile / in-cluster token: re-read periodically */
    char *namespace_;    /* context namespace ("default" when unset) */
    char *context;       /* name of the context used ("in-cluster" for in-cluster) */
    int insecure;        /* insecure-skip-tls-verify: true (warned about at client creation) */
};

void kube_config_init(struct kube_config *cfg);
void kube_config_release(struct kube_config *cfg);

/*
 * Load a kubeconfig file. context NULL = current-context. Relative file paths
 * inside the kubeconfig are resolved against the kubeconfig's directory.
 * Errors name the missing/bad field and the file. On error cfg is left
 * released (empty).
 */
int kube_config_load_kubeconfig(struct kube_config *cfg, const char *path,
                                const char *context, char *err, size_t errlen);

/* Same, from an in-memory YAML document; `origin` names it in messages and
 * base_dir resolves relative paths (may be NULL = cwd). */
int kube_config_parse_kubeconfig(struct kube_config *cfg, const char *yaml, size_t len,
                                 const char *origin, const char *base_dir,
                                 const char *context, char *err, size_t errlen);

/* In-cluster config. Any field NULL = the standard value:
 * host/port from KUBERNETES_SERVICE_HOST/PORT, files under
 * /var/run/secrets/kubernetes.io/serviceaccount/. */
struct kube_incluster_paths {
    const char *host;
    const char *port;
    const char *token_file;
    const char *ca_file;
    const char *namespace_file;
};
int kube_config_load_incluster(struct kube_config *cfg, const struct kube_incluster_paths *p,
                               char *err, size_t errlen);

/* ------------------------------------------------------------------ client */

struct kube_client_opts {
    int log_level;              /* enum gq_log_level threshold */
    long connect_timeout_ms;    /* 0 = 10000 */
    long request_timeout_ms;    /* plain requests; 0 = 60000 (streams: none) */
    size_t max_body;            /* response body cap; 0 = 64 MiB */
    double token_reload_s;      /* re-read token_file this often; 0 = 60 */
    size_t max_inflight;        /* plain (non-stream) requests in flight at once; more
                                   wait in their priority's FIFO (keeps clear of the API
                                   server's max-(mutating-)requests-inflight 429s); 0 = 64 */
    const char *user_agent;     /* NULL = "gangq/<version>" */
    int allow_http_token;       /* send the bearer token to a server that is not
                                   https:// (a local proxy, tests); refused by
                                   default: kube_client_new fails with GQ_EINVAL */
    /* Lanes (see "Request priorities" below). */
    size_t reserved_critical;   /* in-flight slots only KUBE_PRIO_CRITICAL may use;
                                   0 = max_inflight / 4 (at most max_inflight - 1) */
    size_t reserved_normal;     /* in-flight slots KUBE_PRIO_CRITICAL leaves to
                                   KUBE_PRIO_NORMAL requests while some wait;
                                   0 = max_inflight / 4 (at most max_inflight -
                                   reserved_critical) */
    size_t max_inflight_low;    /* KUBE_PRIO_LOW requests in flight at once;
                                   0 = max_inflight / 4 (at least 1) */
    size_t max_queued_low;      /* KUBE_PRIO_LOW requests waiting; beyond, the oldest
                                   is dropped; 0 = 1024 */
};

struct kube_client;

/* The client copies cfg. loop is borrowed. Transport rules: TLS 1.2 or
 * newer; a config with a token (or token file) and a server that is not
 * https:// is refused unless opts->allow_http_token; cfg->insecure (no
 * certificate check) is logged as a warning. */
struct kube_client *kube_client_new(struct ev_loop *loop, const struct kube_config *cfg,
                                    const struct kube_client_opts *opts, char *err,
                                    size_t errlen);
/* Aborts every request in flight without calling its callbacks. Must not be
 * called from inside one of this client's callbacks. */
void kube_client_free(struct kube_client *c);
struct ev_loop *kube_client_loop(const struct kube_client *c);
const struct kube_config *kube_client_config(const struct kube_client *c);
int kube_client_log_level(const struct kube_client *c);
/* Number of live requests, queued ones included (tests, shutdown). */
size_t kube_client_pending(const struct kube_client *c);
/* Number of plain requests waiting for an in-flight slot. */
size_t kube_client_queued(const struct kube_client *c);

/*
 * A finished request. rc: GQ_OK for 2xx, GQ_ECONFLICT 409, GQ_ENOTFOUND 404,
 * GQ_EGONE 410, GQ_EBUSY 429 (and 503 with Retry-After), GQ_EHTTP other
 * statuses, GQ_EIO / GQ_ETIMEOUT transport failures, GQ_ELIMIT body over the
 * cap. status is 0 when no HTTP response was received. body is NUL-terminated
 * (never NULL), borrowed for the duration of the callback.
 */
struct kube_response {
    int rc;
    long status;
    const char *body;
    size_t len;
    double retry_after;   /* seconds from Retry-After, or -1 when absent */
    const char *errmsg;   /* one sentence; "" on success */
    int not_sent;         /* KUBE_NOT_SENT_*: the request ended without being sent
                             (rc GQ_ELIMIT, status 0); 0 otherwise */
};
typedef void (*kube_response_cb)(const struct kube_response *resp, void *userdata);

/* Stream chunk (only while the status is 2xx). Return 0 to continue, or a
 * negative gq_err to abort the request; on_done then gets that rc. */
typedef int (*kube_data_cb)(const char *data, size_t len, void *userdata);

struct kube_req; /* handle of a request in flight; owned by the client */

/*
 * Start a request. path is "/api/v1/..." (query string included). body may be
 * NULL; content_type NULL defaults to application/json when body is set.
 * cb may be NULL (fire and forget). On an immediate failure returns a gq_err
 * and cb is never called. out (may be NULL) receives a handle valid until the
 * callback has returned or kube_req_cancel().
 */
int kube_request(struct kube_client *c, const char *method, const char *path,
                 const char *content_type, const char *body, kube_response_cb cb,
                 void *userdata);
int kube_request_h(struct kube_client *c, const char *method, const char *path,
                   const char *content_type, const char *body, kube_response_cb cb,
                   void *userdata, struct kube_req **out);
/*
 * Streaming GET (watches): no overall timeout; while the status is 2xx each
 * chunk goes to on_data as it arrives; a non-2xx body is buffered (bounded)
 * and delivered to on_done. on_done is called once at the end.
 */
int kube_stream(struct kube_client *c, const char *path, kube_data_cb on_data,
                kube_response_cb on_done, void *userdata, struct kube_req **out);
/* Abort a request; its callbacks will not be called. Safe from callbacks. */
void kube_req_cancel(struct kube_req *r);

/* Parse a response body as JSON; caller owns the result (NULL on bad JSON). */
cJSON *kube_response_json(const struct kube_response *resp);

/* --------------------------------------------------------------- writers */

/*
 * Build an API path: prefix "/api/v1" or "/apis/GROUP/VERSION"; ns may be
 * NULL (cluster-scoped); name and sub (subresource, e.g. "status") may be NULL.
 * Names are checked to hold only DNS-label characters. Returns 0, GQ_ELIMIT
 * or GQ_EINVAL.
 */
int kube_path(char *out, size_t outlen, const char *prefix, const char *ns,
              const char *resource, const char *name, const char *sub);

/* POST obj to a collection path. */
int kube_create(struct kube_client *c, const char *collection_path, const cJSON *obj,
                kube_response_cb cb, void *ud);
/* PUT obj (must carry metadata.resourceVersion for a guarded update). */
int kube_replace(struct kube_client *c, const char *path, const cJSON *obj,
                 kube_response_cb cb, void *ud);
/* PATCH application/merge-patch+json. */
int kube_patch_merge(struct kube_client *c, const char *path, const cJSON *patch,
                     kube_response_cb cb, void *ud);
/* PATCH application/json-patch+json; ops is a JSON array. */
int kube_patch_json(struct kube_client *c, const char *path, const cJSON *ops,
                    kube_response_cb cb, void *ud);
/* Merge patch to path + "/status". */
int kube_patch_status(struct kube_client *c, const char *path, const cJSON *patch,
                      kube_response_cb cb, void *ud);
/* DELETE with DeleteOptions: grace_seconds < 0 = server default; uid (may be
 * NULL) becomes preconditions.uid. */
int kube_delete(struct kube_client *c, const char *path, long grace_seconds, const char *uid,
                kube_response_cb cb, void *ud);
/* The same with preconditions.resourceVersion as well (rv may be NULL): the
 * object is deleted only if it has not changed since that version (409
 * otherwise), i.e. only as the caller saw it. */
int kube_delete_rv(struct kube_client *c, const char *path, long grace_seconds, const char *uid,
                   const char *rv, kube_response_cb cb, void *ud);
int kube_get(struct kube_client *c, const char *path, kube_response_cb cb, void *ud);

/* The object a core/v1 Event is about. Strings are borrowed for the call. */
struct kube_objref {
    const char *api_version; /* "gangq.io/v1alpha1" */
    const char *kind;        /* "GPUJob" */
    const char *namespace_;  /* NULL for cluster-scoped (event goes to "default") */
    const char *name;
    const char *uid;         /* may be NULL */
    const char *resource_version; /* may be NULL */
};
/* Build (caller owns) / create a core/v1 Event. type "Normal" or "Warning";
 * reportingController "gangq.io/controller"; reportingInstance = instance
 * (may be NULL). now_wall is the wall clock (time(NULL)-style seconds with
 * fraction) used for eventTime/firstTimestamp. */
cJSON *kube_event_build(const struct kube_objref *ref, const char *type, const char *reason,
                        const char *message, const char *instance, double now_wall);
int kube_event_create(struct kube_client *c, const struct kube_objref *ref, const char *type,
                      const char *reason, const char *message, const char *instance,
                      kube_response_cb cb, void *ud);

/* RFC3339 with microseconds, UTC: "2006-01-02T15:04:05.000000Z". */
int kube_time_format_micro(double wall, char *out, size_t outlen);
/* Parse RFC3339 ("...Z", optional fraction, or +hh:mm offset) to wall seconds. */
int kube_time_parse(const char *s, double *wall);

/* ------------------------------------------------------------ line cutter */

/* Cuts a stream into lines; a partial line waits in buf for more bytes. */
struct kube_lines {
    struct gq_buf b;  /* holds at most one partial line */
    size_t scanned;   /* bytes of b already searched for '\n' */
    size_t max_line;  /* longest accepted line, excluding '\n' */
};
typedef int (*kube_line_cb)(const char *line, size_t len, void *ud);

void kube_lines_init(struct kube_lines *l, size_t max_line);
void kube_lines_release(struct kube_lines *l);
void kube_lines_reset(struct kube_lines *l);
/* Feed bytes; calls cb for every complete line (without '\n', '\r' stripped,
 * empty lines skipped). Stops at the first nonzero return from cb and returns
 * it. Returns GQ_ELIMIT when a line exceeds max_line (buffer is reset). */
int kube_lines_feed(struct kube_lines *l, const char *data, size_t len, kube_line_cb cb,
                    void *ud);

/* ---------------------------------------------------------------- backoff */

struct kube_backoff {
    double base;     /* first delay, seconds */
    double max;      /* cap, seconds */
    double factor;   /* growth per failure (2) */
    double jitter;   /* delay is scaled by a factor in [1, 1+jitter] */
    double cur;      /* un-jittered current delay (0 = next is base) */
    uint64_t rng;    /* xorshift state; seed it (never 0) */
};
void kube_backoff_init(struct kube_backoff *b, double base, double max, uint64_t seed);
/* Next delay: max(jittered exponential delay, retry_after) (retry_after < 0 =
 * absent), capped at max unless Retry-After asks for longer (then that). */
double kube_backoff_next(struct kube_backoff *b, double retry_after);
void kube_backoff_reset(struct kube_backoff *b);
/* Uniform in [0,1) from the state (also used for randomised timeouts). */
double kube_rand01(uint64_t *state);

/* ---------------------------------------------------------- watch events */

enum kube_event_type {
    KUBE_EV_ADDED = 1,
    KUBE_EV_MODIFIED,
    KUBE_EV_DELETED,
    KUBE_EV_BOOKMARK,
    KUBE_EV_ERROR,
};
const char *kube_event_type_name(enum kube_event_type t);

struct kube_watch_event {
    enum kube_event_type type;
    cJSON *object;                /* owned; the object, or the Status for ERROR */
    char resource_version[64];    /* object's metadata.resourceVersion ("" if none) */
    long code;                    /* ERROR: Status.code (410 = relist), else 0 */
};
/* Decode one watch line. ev->object is owned by ev (release frees it). */
int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ev,
                           char *err, size_t errlen);
void kube_watch_event_release(struct kube_watch_event *ev);

/* ------------------------------------------------------------------ cache */

/*
 * Objects keyed by "namespace/name" (cluster-scoped: "name"). The cache owns
 * every cJSON object. Pointers handed out stay valid until the next mutation
 * of that key (apply/replace/clear).
 */
struct kube_cache;
typedef void (*kube_cache_event_cb)(enum kube_event_type type, const cJSON *old_obj,
                                    const cJSON *new_obj, void *ud);

struct kube_cache *kube_cache_new(void);
void kube_cache_free(struct kube_cache *cache);
size_t kube_cache_count(const struct kube_cache *cache);
/* Key of an object ("ns/name" or "name"); GQ_EINVAL if it has no name. */
int kube_object_key(const cJSON *obj, char *out, size_t outlen);
const cJSON *kube_cache_get(const struct kube_cache *cache, const char *ns, const char *name);
const cJSON *kube_cache_get_key(const struct kube_cache *cache, const char *key);
/* Visit every object (unspecified order); stop when fn returns nonzero. */
int kube_cache_foreach(const struct kube_cache *cache,
                       int (*fn)(const cJSON *obj, void *ud), void *ud);
/*
 * Apply ADDED/MODIFIED/DELETED; takes ownership of obj (always, even on
 * error). ADDED of a known key is reported as MODIFIED, MODIFIED of an
 * unknown key as ADDED, DELETED of an unknown key is ignored. cb (may be
 * NULL) sees old (NULL on add) and new (the deleted object on delete); the old
 * object is freed after cb returns.
 */
int kube_cache_apply(struct kube_cache *cache, enum kube_event_type type, cJSON *obj,
                     kube_cache_event_cb cb, void *ud);
/*
 * Replace the whole content with a relist (items: array of objects, ownership
 * taken). Emits ADDED for new keys, MODIFIED for keys whose
 * metadata.resourceVersion changed, DELETED for keys gone; unchanged objects
 * are kept silently.
 */
int kube_cache_replace(struct kube_cache *cache, cJSON *items, kube_cache_event_cb cb,
                       void *ud);
void kube_cache_clear(struct kube_cache *cache);

/* --------------------------------------------------------------- informer */

struct kube_skipped; /* below: an object the informer could not take */

struct kube_informer_opts {
    const char *path;            /* "/api/v1/pods", "/apis/gangq.io/v1alpha1/gpujobs" */
    const char *label_selector;  /* may be NULL */
    const char *field_selector;  /* e.g. "status.phase!=Succeeded,status.phase!=Failed" */
    int list_limit;              /* page size; 0 = 500 */
    int watch_timeout_min_s;     /* randomised timeoutSeconds in [min,max]; 0 = 240 */
    int watch_timeout_max_s;     /* 0 = 360 */
    double stall_margin_s;       /* stream silent > timeout + margin = stalled; 0 = 30 */
    double stall_s;              /* if > 0, override: silent this long = stalled */
    size_t max_event_line;       /* 0 = 16 MiB */
    double backoff_base_s;       /* 0 = 0.5 */
    double backoff_max_s;        /* 0 = 30 */
    uint64_t seed;               /* jitter seed; 0 = from time and pid */
    const char *name;            /* for logs; NULL = path */
    /* Called for every applied change, including synthetic relist events;
     * BOOKMARK is not reported. old/new are borrowed (see kube_cache_apply). */
    kube_cache_event_cb on_event;
    /* Called once per (re)list completion (first = synced). May be NULL. */
    void (*on_synced)(void *ud);
    void *ud;
    /* Hostile objects (see "Objects the informer skips" below). */
    size_t max_object;           /* an object's JSON text over this is skipped; 0 = 1 MiB */
    void (*prune)(cJSON *obj);   /* applied to every object before it is cached (drop what
                                    the owner never reads); NULL = keep everything */
    int drop_managed_fields;     /* never build metadata.managedFields (kube_parse_opts) */
    /* Called for every skipped list item or watch event (after it is counted
     * and logged); s is borrowed for the call. May be NULL. */
    void (*on_skip)(const struct kube_skipped *s, void *ud);
    /* Test hook (a lagging watch): apply each watch event (bookmarks too, in
     * order) this many seconds after it arrived; the resourceVersion moves
     * as events are applied, and events still waiting when the watch restarts
     * or a relist starts are dropped (the new watch or the list brings them
     * again). 0 = at once. Lists are never delayed. */
    double event_delay_s;
};

struct kube_informer_stats {
    uint64_t lists;        /* LIST cycles completed */
    uint64_t list_pages;
    uint64_t watches;      /* WATCH requests started */
    uint64_t events;       /* watch events applied */
    uint64_t bookmarks;
    uint64_t relists_410;  /* relists forced by 410 */
    uint64_t errors;       /* failed requests / bad lines */
    uint64_t stalls;       /* streams restarted for silence */
    uint64_t throttled;    /* 429 answers */
    uint64_t skipped[4];   /* objects skipped, by enum kube_skip_reason (index 0 unused) */
    uint64_t list_shrinks; /* list pages retried with a halved limit (page over max_body) */
};

struct kube_informer;
/* Strings in opts are copied. client is borrowed and must outlive it. */
struct kube_informer *kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o,
                                        char *err, size_t errlen);
int kube_informer_start(struct kube_informer *inf);
/* Stop requests and timers; the cache is kept. */
void kube_informer_stop(struct kube_informer *inf);
void kube_informer_free(struct kube_informer *inf); /* deferred if called from its callback */
int kube_informer_synced(const struct kube_informer *inf);
const char *kube_informer_resource_version(const struct kube_informer *inf);
const struct kube_cache *kube_informer_cache(const struct kube_informer *inf);
const cJSON *kube_informer_get(const struct kube_informer *inf, const char *ns,
                               const char *name);
void kube_informer_get_stats(const struct kube_informer *inf, struct kube_informer_stats *st);

/* ----------------------------------------------------------------- leader */

struct kube_leader_opts {
    const char *namespace_;     /* Lease namespace */
    const char *name;           /* Lease name */
    const char *identity;       /* NULL = "<hostname>_<pid>" */
    double lease_duration_s;    /* 0 = 15 */
    double renew_deadline_s;    /* 0 = 10 */
    double retry_period_s;      /* 0 = 2 */
    int release_on_stop;        /* on stop, clear holderIdentity if we lead (a PUT that
                                   needs the loop to run a moment before the client is freed) */
    void (*on_started)(void *ud);
    void (*on_stopped)(void *ud);
    void (*on_new_leader)(const char *identity, void *ud); /* may be NULL */
    void *ud;
};
struct kube_leader;
struct kube_leader *kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o,
                                    char *err, size_t errlen);
int kube_leader_start(struct kube_leader *l);
/* Stop trying; calls on_stopped if leading. */
void kube_leader_stop(struct kube_leader *l);
void kube_leader_free(struct kube_leader *l);
int kube_leader_is_leader(const struct kube_leader *l);
const char *kube_leader_identity(const struct kube_leader *l);
/* Last observed holder ("" when none). */
const char *kube_leader_holder(const struct kube_leader *l);

/* ---------------------------------------------- objects the informer skips */

/*
 * One object must not stop an informer. A List response is never parsed
 * whole: a scanner with an explicit depth counter (no recursion, no tree)
 * cuts `items` into per-object byte ranges and each is parsed on its own;
 * a watch line's `object` likewise. An object whose text is over max_object
 * bytes, nested at least CJSON_NESTING_LIMIT deep, or not a decodable named
 * object is skipped: counted, logged with its name (found by the same cheap
 * scan of its metadata when possible) and handed to on_skip; every other
 * object proceeds, and the resourceVersion still advances past it. A skipped
 * watch ADDED/MODIFIED leaves the cache as it was, and so does a relist
 * that skips an object whose earlier readable version is cached (that
 * version stays, it is not reported deleted); a skipped DELETED whose
 * name is readable still removes the cached object (the owner's new_obj is a
 * stub holding only metadata name/namespace/uid/resourceVersion).
 */
enum kube_skip_reason {
    KUBE_SKIP_TOO_LARGE = 1, /* JSON text over max_object */
    KUBE_SKIP_TOO_DEEP = 2,  /* nesting >= CJSON_NESTING_LIMIT */
    KUBE_SKIP_INVALID = 3,   /* not a JSON object, or no metadata.name */
};
#define KUBE_SKIP_NREASONS 4
#define KUBE_MAX_OBJECT_DEFAULT ((size_t)1 << 20)
/* "too_large", "too_deep", "invalid" (metric label values). */
const char *kube_skip_reason_name(enum kube_skip_reason r);

struct kube_skipped {
    enum kube_skip_reason reason;
    enum kube_event_type type; /* ADDED for a list item, else the watch event's type */
    size_t bytes;              /* length of the object's JSON text */
    size_t depth;              /* deepest nesting seen by the scanner */
    /* From a scan of the raw text; "" when absent, unreadable or too long. */
    char namespace_[64];
    char name[254];
    char uid[64];
    char resource_version[64];
    char kind[64];
    char state[32];            /* status.state (GPUJob), to tell an already-Failed object */
    char detail[96];           /* one phrase: "nested 1201 levels deep (limit 1000)" */
};

/*
 * Cheap scan of one object's JSON text for the fields above (bytes, depth,
 * metadata strings, kind, status.state); reason, type and detail are left 0.
 * Returns GQ_OK when metadata.name was found, GQ_ENOTFOUND otherwise.
 */
int kube_object_scan(const char *p, size_t n, struct kube_skipped *out);

typedef void (*kube_skip_cb)(const struct kube_skipped *s, void *ud);

/* How list items and watch objects are taken (NULL: no size cap, every
 * member kept). */
struct kube_parse_opts {
    size_t max_object;       /* an object's JSON text over this is skipped; 0 = no cap */
    /* metadata.managedFields is cut out of the text before it is parsed: the
     * field managers' trees (fieldsV1, one node per field of the object) are
     * never built, for an owner that never reads them. The cut text is only
     * scanned (strings, brackets), not validated: an object whose
     * managedFields alone is not JSON is taken all the same. */
    int drop_managed_fields;
};
/*
 * Split one List response item by item. *items (an array; caller owns) gets
 * every decodable object; each skipped one goes to on_skip (may be NULL);
 * *metadata (caller owns; NULL when the List has none) is the List's
 * metadata. po may be NULL (see kube_parse_opts). Errors (GQ_EPARSE, err says why) only
 * for a response that is not a List at all; then both outputs are NULL.
 */
int kube_list_page_parse(const char *body, size_t len, const struct kube_parse_opts *po, cJSON **items,
                         cJSON **metadata, kube_skip_cb on_skip, void *ud, char *err,
                         size_t errlen);
/*
 * kube_watch_event_parse, plus hostile objects: when an ADDED/MODIFIED/
 * DELETED object is over po->max_object (po NULL or 0: no cap), too deep or undecodable,
 * returns GQ_OK with ev->object NULL, ev->type and ev->resource_version set
 * (from the scan) and *skip filled. skip may not be NULL. A broken line
 * (not an object, no type, no object) is still GQ_EPARSE.
 */
int kube_watch_event_parse_ex(const char *line, size_t len, const struct kube_parse_opts *po,
                              struct kube_watch_event *ev, struct kube_skipped *skip,
                              char *err, size_t errlen);

/*
 * Pruners for kube_informer_opts.prune: drop what gangq never reads so a
 * cache of many objects stays small.
 *   common: metadata.managedFields and the kubectl last-applied-configuration
 *           annotation (not for Teams: quota edits read managedFields).
 *   pod:    only what the controller reads: metadata keeps name, namespace,
 *           uid, resourceVersion, deletionTimestamp and its grace period,
 *           each ownerReference's uid only, and the gangq.io/ labels and
 *           annotations; spec
 *           keeps nodeName, overhead and containers / initContainers with only
 *           name and resources; status keeps phase and reason; top level
 *           keeps apiVersion, kind, metadata, spec, status. A terminated pod
 *           (phase Succeeded or Failed) holds no resources: its spec keeps
 *           nodeName only.
 *   node:   common, then status.images.
 * All three then share member names: each object's member name becomes a
 * pointer into one process-wide table of names (cJSON_StringIsConst; the
 * table owns them for the life of the process, at most
 * KUBE_INTERN_MAX names of up to 63 bytes, others stay the object's own), so
 * thousands of cached objects hold one "metadata", not thousands. Not
 * thread-safe: the informers run on one thread.
 */
#define KUBE_INTERN_MAX 8192
/* The interned copy of s (owned by the table, never freed), or NULL when s is
 * too long or the table is full. */
const char *kube_intern(const char *s);
/* Intern every member name in the tree o (see above). */
void kube_intern_names(cJSON *o);
/*
 * The objects an informer skips now, with what was scanned of them: the last
 * list's skips, updated by the watch (a readable or deleted version removes
 * one). Named objects only, at most 1024. For an owner that starts caring
 * later, e.g. a controller that just became leader. GQ_ENOMEM or 0.
 */
int kube_informer_skipped_foreach(const struct kube_informer *inf,
                                  void (*fn)(const struct kube_skipped *s, void *ud), void *ud);

void kube_prune_common(cJSON *obj);
void kube_prune_pod(cJSON *obj);
void kube_prune_node(cJSON *obj);

/*
 * A cached object in one allocation: its nodes and value strings copied into a
 * single block whose first node is the root, member names left as the interned
 * pointers kube_intern_names set. A cJSON tree costs a malloc per node and per
 * string (a 16-byte header and rounding each); a pruned pod of about 25 nodes
 * is a third smaller packed. The root is marked cJSON_IsReference and
 * cJSON_StringIsConst, so cJSON_Delete(root) frees the whole block with one
 * free() and the tree stays a plain cJSON tree for every reader, print and
 * cJSON_Duplicate (whose copy is an ordinary tree). A packed tree must not be
 * changed below its root: no member added, deleted, detached or replaced (the
 * root's own prev/next may be, as arrays and caches link it). Cached objects
 * are read-only, which is what makes this safe.
 * Takes obj; returns the packed copy (obj freed), or obj itself when it is
 * not an object, a member name is not interned, it holds a reference, or
 * memory is short. Never NULL for a non-NULL obj.
 */
cJSON *kube_pack(cJSON *obj);
/* 1 if obj is a kube_pack block. */
int kube_packed(const cJSON *obj);

/*
 * The parse arena. Between kube_arena_begin and kube_arena_end every cJSON
 * allocation of this thread comes from one bump arena, and cJSON_Delete
 * gives nothing back for what lives there: a watch event's tree, parsed,
 * pruned and packed (kube_pack copies it into one heap block), costs a few
 * bumps instead of a malloc and a free per member. The next
 * kube_arena_begin reuses the arena's memory, so nothing of it may outlive
 * the work that began it: kube_arena_settle returns an object that lives on
 * the heap (obj itself when it does; else a heap copy, obj given up; NULL
 * when memory is short). The first kube_arena_begin installs cJSON hooks
 * for the process (everything else still goes to malloc and free).
 * Returns 1 when the arena began, 0 when it was already active (nested: the
 * outer begin owns it and nothing is reset). kube_arena_end after a 1.
 */
int kube_arena_begin(void);
void kube_arena_end(void);
cJSON *kube_arena_settle(cJSON *obj);
/* 1 when p lies in the arena's memory (tests). */
int kube_arena_owns(const void *p);
/* 1 when obj, or a node, member name or value string below it, lies in the
 * arena (obj's siblings are not looked at). */
int kube_arena_holds(const cJSON *obj);
/* What an informer's cache keeps of a parsed object (on the heap or in the
 * arena): obj pruned (prune may be NULL), packed and settled on the heap.
 * Takes obj; NULL when memory is short (obj freed). */
cJSON *kube_keep_object(cJSON *obj, void (*prune)(cJSON *obj));

/* -------------------------------------------------------- request priorities */

/*
 * Plain requests wait for an in-flight slot in the line of their priority
 * (a FIFO per rank, higher ranks first: kube_client_set_rank). Free slots
 * go to the critical lane first, but while normal requests wait the
 * critical ones leave them reserved_normal slots: pod creates never starve
 * the state transitions (a steady stream of creates would otherwise hold
 * every slot, and finished jobs would stay unreported). Normal and low
 * requests together never hold the last reserved_critical slots, and low
 * ones at most max_inflight_low, so no amount of cosmetic (low) work delays
 * a critical request, and normal work delays it only by that share.
 * Exempt requests (the Lease) and streams never wait and hold no slot.
 *
 * A request with a coalesce key (by convention the object's path) is
 * serialised with the others of that key: at most one is on the wire and one
 * waits. A newer one replaces the waiting one (which then ends not sent,
 * KUBE_NOT_SENT_SUPERSEDED, and is counted as coalesced), takes its place in
 * line (further ahead when its rank is higher) and the higher of the two
 * priorities and ranks; it never touches the one already
 * in flight. Writes that carry a whole state (a status) coalesce safely; a
 * request whose effect depends on its predecessor must not use a key.
 *
 * The low lane holds at most max_queued_low waiting requests, and at most a
 * quarter of that (at least one) keyed ones of one namespace (read from the
 * key, a path by convention: ".../namespaces/NS/..."), so one namespace's
 * flood of cosmetic writes never fills the lane for the others. A new keyed
 * one (a status) that would go beyond either finds the lane full and is
 * refused at once (GQ_EBUSY, no callback, counted as refused): the owner
 * writes it later, and the writes already waiting keep their place (dropping
 * them instead would have every full-queue pass rewrite and drop thousands).
 * One that replaces a waiting write of its key is always taken. An unkeyed one
 * (an Event) beyond that drops the oldest of the lowest rank waiting (itself,
 * when its rank is below every other; KUBE_NOT_SENT_DROPPED, counted); the
 * owner learns it from the callback.
 *
 * Requests that end without being sent get their callback from the loop,
 * never from inside the call that displaced them.
 */
enum kube_prio {
    KUBE_PRIO_CRITICAL = 0, /* pod create/delete, a gang's Service */
    KUBE_PRIO_NORMAL = 1,   /* state transitions; the default (kube_request and
                             * the plain writers) */
    KUBE_PRIO_LOW = 2,      /* cosmetic status writes, Events: bounded, dropped first */
    KUBE_PRIO_EXEMPT = 3,   /* never queued (leader-election Lease) */
};
#define KUBE_NPRIO 4
/* "critical", "normal", "low", "exempt" (metric label values). */
const char *kube_prio_name(enum kube_prio p);

enum kube_not_sent {
    KUBE_NOT_SENT_DROPPED = 1,    /* dropped: the low lane was full, or kube_client_drop_queued */
    KUBE_NOT_SENT_SUPERSEDED = 2, /* replaced by a newer request with the same coalesce key */
};

struct kube_req_opts {
    enum kube_prio prio;
    const char *coalesce_key; /* NULL = none; copied; not for EXEMPT */
    /* body is a gq_sstr_new text (common/gq.h): the request holds a
     * reference to it until it ends (gq_sstr_ref/gq_sstr_put), not a copy */
    int body_shared;
    /* a 2xx answer's body is not kept (the callback sees body "", len 0):
     * for a caller that reads only the status. An error's body is kept (its
     * message names the cause). */
    int discard_ok_body;
};

/* kube_request_h with a priority and coalesce key (ro NULL = NORMAL, no key).
 * GQ_EINVAL for a priority out of range or a key on an EXEMPT request. */
int kube_request_ex(struct kube_client *c, const struct kube_req_opts *ro, const char *method,
                    const char *path, const char *content_type, const char *body,
                    kube_response_cb cb, void *userdata, struct kube_req **out);

/* 1 when a request of this priority and coalesce key would be refused now
 * (GQ_EBUSY: the low lane is full, or holds its namespace's share, and no
 * waiting write of the key would be replaced), so the owner need not build
 * it yet; else 0. */
int kube_client_would_refuse(const struct kube_client *c, enum kube_prio prio, const char *key);

/* Within a lane, requests wait in rank order: a request joins behind every
 * waiting one of its rank or higher (first come first served among equals),
 * so a higher rank passes lower ones still waiting, never one in flight.
 * Every request made after this call takes `rank` (0 at start) until the
 * next call; a write that replaces its key's waiting one keeps the higher of
 * both ranks. Returns the rank in force before. (The actuator ranks a gang's
 * pod creates by the job's priority: what is admitted first under a
 * loaded API server is what the scheduler ranked first.) */
int kube_client_set_rank(struct kube_client *c, int rank);

struct kube_client_stats {
    size_t queued[KUBE_NPRIO];     /* waiting now (in line, or behind their key's write) */
    size_t inflight[KUBE_NPRIO];   /* on the wire now (EXEMPT: requests started) */
    uint64_t started[KUBE_NPRIO];  /* total sent */
    uint64_t dropped[KUBE_NPRIO];  /* total ended not sent: dropped */
    uint64_t coalesced;            /* total ended not sent: replaced by a newer one */
    uint64_t refused;              /* total low keyed writes refused: the lane was full */
    /* Plain requests that ended after being sent, and their time (the loop's
     * clock, ev_now) in total: waiting for a slot (from being asked for to
     * being given a slot; exempt: 0), then from the slot to the answer. */
    uint64_t finished[KUBE_NPRIO];
    double wait_s[KUBE_NPRIO];
    double wire_s[KUBE_NPRIO];
    size_t handles;                /* requests holding a curl handle now (those given a
                                    * slot and the exempt ones: none waiting in a lane) */
};
void kube_client_get_stats(const struct kube_client *c, struct kube_client_stats *st);

/* Drop every request of this lane that waits (shutdown: cosmetic writes are
 * not worth the wait); each ends KUBE_NOT_SENT_DROPPED from the loop.
 * Requests in flight are kept. Returns how many. EXEMPT: none. */
size_t kube_client_drop_queued(struct kube_client *c, enum kube_prio prio);

/* The writers with a priority. kube_patch_status_p coalesces by the status
 * path (only a status patch's latest version matters). */
int kube_create_p(struct kube_client *c, enum kube_prio prio, const char *collection_path,
                  const cJSON *obj, kube_response_cb cb, void *ud);
/* kube_create_p with request options (ro NULL = NORMAL; a coalesce key is
 * refused for EXEMPT as by kube_request_ex). */
int kube_create_ex(struct kube_client *c, const struct kube_req_opts *ro, const char *collection_path,
                   const cJSON *obj, kube_response_cb cb, void *ud);
int kube_delete_rv_p(struct kube_client *c, enum kube_prio prio, const char *path,
                     long grace_seconds, const char *uid, const char *rv, kube_response_cb cb,
                     void *ud);
int kube_patch_status_p(struct kube_client *c, enum kube_prio prio, const char *path,
                        const cJSON *patch, kube_response_cb cb, void *ud);
/* kube_patch_status_p of a patch already printed: json is a gq_sstr_new text
 * (the request holds a reference, not a copy). The answer's body is not kept
 * on success (the callback sees only the status). */
int kube_patch_status_sstr(struct kube_client *c, enum kube_prio prio, const char *path,
                           const char *json, kube_response_cb cb, void *ud);
/* kube_client_would_refuse for kube_patch_status_p's request of this path
 * (its key: the status path); 0 when the path is too long to be one. */
int kube_patch_status_would_refuse(const struct kube_client *c, enum kube_prio prio, const char *path);
int kube_event_create_p(struct kube_client *c, enum kube_prio prio, const struct kube_objref *ref,
                        const char *type, const char *reason, const char *message,
                        const char *instance, kube_response_cb cb, void *ud);

#endif
