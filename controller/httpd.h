/*
 * httpd.h — a minimal HTTP/1.1 server on libev for /metrics, /healthz, /readyz.
 *
 * Role: listen on ADDR:PORT, accept non-blocking, read one request head per
 * connection into a bounded buffer, route GET/HEAD by exact path (query string
 * ignored) to a handler registered by the caller, write the response
 * non-blocking and close ("Connection: close" on every response).
 *
 * Invariants and limits:
 * - Request head > max_head bytes -> 431; malformed request line -> 400;
 *   method other than GET/HEAD -> 405 (with "Allow: GET, HEAD"); no route -> 404;
 *   handler error or body over max_body -> 500. HEAD gets the GET headers and
 *   no body. Request bodies are never read (drained and discarded on close).
 * - Deadlines count from accept and are not reset on activity: the request
 *   head must be complete within head_timeout_s (a silent or dribbling client
 *   is dropped then), the response written within timeout_s.
 * - At most max_conns connections at once, and a new client always gets
 *   one: at the cap, accepting a connection closes the oldest one still
 *   waiting for its head (else the oldest of all). Slow clients therefore
 *   cannot keep probes (/healthz, /readyz), which send their head at once,
 *   waiting in the kernel backlog. A request's head is read as soon as it
 *   is accepted.
 * - A connection is never freed while one of its callbacks is on the stack:
 *   closing stops its watchers and closes the fd at once, the memory is
 *   reclaimed later by an idle watcher (or by gq_httpd_free).
 * - Single-threaded: all calls from the thread that runs the loop.
 *
 * Ownership: the caller owns the struct ev_loop (it must outlive the server)
 * and the server returned by gq_httpd_new (gq_httpd_free, accepts NULL; it
 * closes the listener and every connection; must not be called from inside a
 * handler). Route paths are copied; ud is borrowed. In a handler, req and its
 * strings are valid for the call only; resp->body is owned by the server.
 */
#ifndef GQ_HTTPD_H
#define GQ_HTTPD_H

#include <stddef.h>
#include <ev.h>
#include "gq.h"
#include "buf.h"

#define GQ_HTTPD_MAX_ROUTES 16
#define GQ_HTTPD_PATH_MAX 256

struct gq_httpd_opts {
    const char *listen;  /* "ADDR:PORT": "127.0.0.1:8080", ":8080" (all IPv4),
                            "[::1]:0"; port 0 = ephemeral. Default "127.0.0.1:0" */
    double timeout_s;    /* per-connection deadline; default 5 */
    double head_timeout_s; /* the request head must arrive within this (capped
                              at timeout_s); default 2 */
    int max_conns;       /* concurrent connections; default 64 */
    size_t max_head;     /* request head bytes; default 8192 */
    size_t max_body;     /* response body bytes; default 8 MiB */
    int log_level;       /* threshold for gq_log (common/log.h); default WARN */
};

/* Fill o with the defaults above. */
void gq_httpd_opts_default(struct gq_httpd_opts *o);

struct gq_httpd_req {
    const char *method;  /* "GET" or "HEAD" */
    const char *path;    /* target without the query string */
    const char *query;   /* after '?', "" when none */
};

struct gq_httpd_resp {
    int status;                /* preset 200 */
    char content_type[128];    /* preset "text/plain; charset=utf-8" */
    struct gq_buf *body;       /* empty, bounded by max_body; fill it */
};

/* Return 0 after filling resp; nonzero -> the server answers 500. */
typedef int (*gq_httpd_handler)(const struct gq_httpd_req *req,
                                struct gq_httpd_resp *resp, void *ud);

struct gq_httpd;

/* Bind, listen and start accepting on loop. o may be NULL for defaults.
 * Errors: GQ_EINVAL (bad listen string / options), GQ_EIO (socket, bind,
 * listen: err names the address and errno text), GQ_ENOMEM. */
int gq_httpd_new(struct ev_loop *loop, const struct gq_httpd_opts *o,
                 struct gq_httpd **out, char *err, size_t errlen);
void gq_httpd_free(struct gq_httpd *h);

/* Register fn for an exact path (starts with '/'); re-registering a path
 * replaces its handler. GQ_EINVAL, GQ_ELIMIT (more than GQ_HTTPD_MAX_ROUTES). */
int gq_httpd_route(struct gq_httpd *h, const char *path, gq_httpd_handler fn, void *ud);

/* The bound port (useful with port 0). */
int gq_httpd_port(const struct gq_httpd *h);

/* Open connections right now (for tests and a gauge). */
int gq_httpd_nconns(const struct gq_httpd *h);

/* Counters since start (for tests and metrics). */
struct gq_httpd_stats {
    uint64_t accepted;
    uint64_t responses;  /* responses fully written */
    uint64_t timeouts;   /* connections dropped at a deadline before a response */
    uint64_t evicted;    /* closed at the cap to make room for a new client */
    uint64_t rejected;   /* 4xx/5xx responses */
};
void gq_httpd_stats(const struct gq_httpd *h, struct gq_httpd_stats *out);

#endif
