/*
 * kube_client.c — async HTTP on libcurl multi driven by libev.
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION -> ev_io) and
 * when to time out (CURLMOPT_TIMERFUNCTION -> ev_timer); we call
 * curl_multi_socket_action and drain curl_multi_info_read after every action.
 *
 * Re-entrancy: user callbacks may run while curl is inside socket_action (the
 * stream data callback runs inside curl's write callback). libcurl refuses
 * multi API calls from there, so while `in_curl` is set, new requests are
 * queued and cancellations only flagged; the `kick` timer (0 s) applies them
 * right after. A finished request is unlinked before its callback runs and
 * freed after it returns (cancel from inside the callback only flags it).
 */
#include "kube.h"
#include "kube_int.h"
#include "log.h"
#include "cmd.h"
#include "yamljson.h"

#include <curl/curl.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_MAX_BODY (64u << 20)

struct kube_req {
    struct kube_client *c;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    struct gq_buf resp;
    kube_response_cb cb;
    kube_data_cb on_data;
    void *ud;
    long status;
    double retry_after;
    int stream;
    int added;      /* handed to curl_multi */
    int add_failed;
    int queued;     /* waiting for an in-flight slot (plain requests only) */
    int counted;    /* holds one of the max_inflight slots */
    struct kube_req *qnext;
    int cancelled;
    int in_cb;      /* its final callback is on the stack */
    int abort_rc;   /* rc chosen by on_data to stop the stream */
    char method[16];
    char errbuf[CURL_ERROR_SIZE];
    struct kube_req *prev, *next;
};

struct kube_sock {
    ev_io io;
    curl_socket_t fd;
    struct kube_client *c;
};

struct kube_client {
    struct ev_loop *loop;
    struct kube_config cfg;
    struct kube_client_opts opts;
    char user_agent[64];
    CURLM *multi;
    ev_timer timer; /* curl's timeout */
    ev_timer kick;  /* deferred adds/removes */
    struct kube_req *reqs; /* every live request (queued, running) */
    size_t nreqs;
    size_t inflight;       /* plain requests holding a slot */
    struct kube_req *qhead, *qtail; /* FIFO of plain requests waiting for a slot */
    int in_curl;
    double token_read_at;
};

int kube_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? GQ_OK : GQ_EIO;
}

void kube_global_cleanup(void)
{
    curl_global_cleanup();
}

/* ------------------------------------------------------------- plumbing */

static void check_done(struct kube_client *c);

static void sock_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct kube_sock *s = w->data;
    struct kube_client *c = s->c;
    int action = 0, running = 0;
    (void)loop;
    if (revents & EV_READ)
        action |= CURL_CSELECT_IN;
    if (revents & EV_WRITE)
        action |= CURL_CSELECT_OUT;
    c->in_curl++;
    curl_multi_socket_action(c->multi, s->fd, action, &running);
    c->in_curl--;
    check_done(c);
}

static int socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct kube_client *c = userp;
    struct kube_sock *s = socketp;
    int events = 0;
    (void)e;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            ev_io_stop(c->loop, &s->io);
            free(s);
            curl_multi_assign(c->multi, fd, NULL);
        }
        return 0;
    }
    if (what & CURL_POLL_IN)
        events |= EV_READ;
    if (what & CURL_POLL_OUT)
        events |= EV_WRITE;
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        s->fd = fd;
        s->c = c;
        ev_io_init(&s->io, sock_io_cb, fd, events);
        s->io.data = s;
        curl_multi_assign(c->multi, fd, s);
    } else {
        ev_io_stop(c->loop, &s->io);
        ev_io_set(&s->io, fd, events);
    }
    ev_io_start(c->loop, &s->io);
    return 0;
}

static void timer_ev_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_client *c = w->data;
    int running = 0;
    (void)loop;
    (void)revents;
    c->in_curl++;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    c->in_curl--;
    check_done(c);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct kube_client *c = userp;
    (void)multi;
    ev_timer_stop(c->loop, &c->timer);
    if (timeout_ms >= 0) {
        ev_timer_set(&c->timer, (double)timeout_ms / 1000.0, 0.);
        ev_timer_start(c->loop, &c->timer);
    }
    return 0;
}

static void schedule_kick(struct kube_client *c);

/* Hand free slots to queued requests; the kick timer adds them to curl. */
static void promote(struct kube_client *c)
{
    while (c->qhead && c->inflight < c->opts.max_inflight) {
        struct kube_req *q = c->qhead;
        c->qhead = q->qnext;
        if (!c->qhead)
            c->qtail = NULL;
        q->qnext = NULL;
        q->queued = 0;
        q->counted = 1;
        c->inflight++;
        schedule_kick(c);
    }
}

static void dequeue(struct kube_client *c, struct kube_req *r)
{
    struct kube_req **pp = &c->qhead, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (*pp) {
        *pp = r->qnext;
        if (c->qtail == r)
            c->qtail = prev;
    }
    r->qnext = NULL;
    r->queued = 0;
}

/* Take r off the client's lists; frees its slot for the next queued one. */
static void req_unlink(struct kube_req *r)
{
    struct kube_client *c = r->c;
    if (r->queued)
        dequeue(c, r);
    if (r->counted) {
        r->counted = 0;
        c->inflight--;
        promote(c);
    }
    if (r->prev)
        r->prev->next = r->next;
    else if (c->reqs == r)
        c->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->nreqs--;
}

static void req_destroy(struct kube_req *r)
{
    if (!r)
        return;
    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r->body);
    gq_buf_release(&r->resp);
    free(r);
}

static int status_rc(long status, double retry_after)
{
    if (status >= 200 && status < 300)
        return GQ_OK;
    switch (status) {
    case 404: return GQ_ENOTFOUND;
    case 409: return GQ_ECONFLICT;
    case 410: return GQ_EGONE;
    case 429: return GQ_EBUSY;
    case 503: return retry_after >= 0 ? GQ_EBUSY : GQ_EHTTP;
    default: return GQ_EHTTP;
    }
}

/* Pull "message" out of a Status body for the error sentence. */
static void status_message(const char *body, char *out, size_t outlen)
{
    cJSON *j = cJSON_Parse(body);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    if (cJSON_IsString(m))
        gq_strlcpy(out, m->valuestring, outlen);
    else
        out[0] = '\0';
    cJSON_Delete(j);
}

static void finish(struct kube_req *r, CURLcode res)
{
    struct kube_client *c = r->c;
    struct kube_response resp;
    char msg[512] = "", smsg[300];
    const char *path = "";
    curl_multi_remove_handle(c->multi, r->easy);
    r->added = 0;
    req_unlink(r);
    if (r->cancelled || !r->cb) {
        req_destroy(r);
        return;
    }
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &path);
    memset(&resp, 0, sizeof resp);
    resp.status = r->status;
    resp.retry_after = r->retry_after;
    if (r->abort_rc) {
        resp.rc = r->abort_rc;
        snprintf(msg, sizeof msg, "%s %s: stopped by the stream reader: %s", r->method,
                 path ? path : "", gq_strerror(r->abort_rc));
    } else if (res != CURLE_OK) {
        resp.rc = res == CURLE_OPERATION_TIMEDOUT ? GQ_ETIMEOUT : GQ_EIO;
        snprintf(msg, sizeof msg, "%s %s: %s", r->method, path ? path : "",
                 r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
    } else {
        resp.rc = status_rc(r->status, r->retry_after);
        if (resp.rc) {
            status_message(r->resp.p ? r->resp.p : "", smsg, sizeof smsg);
            snprintf(msg, sizeof msg, "%s %s: HTTP %ld%s%s", r->method, path ? path : "",
                     r->status, smsg[0] ? ": " : "", smsg);
        }
    }
    resp.body = r->resp.p ? r->resp.p : "";
    resp.len = r->resp.len;
    resp.errmsg = msg;
    if (resp.rc && gq_log_on(c->opts.log_level, GQ_LOG_DEBUG))
        gq_log(c->opts.log_level, GQ_LOG_DEBUG, KUBE_LOG_MOD, msg, NULL);
    r->in_cb = 1;
    r->cb(&resp, r->ud);
    req_destroy(r);
}

static void check_done(struct kube_client *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
        struct kube_req *r = NULL;
        if (m->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r)
            finish(r, m->data.result);
    }
}

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_client *c = w->data;
    struct kube_req *r, *next;
    (void)loop;
    (void)revents;
    for (r = c->reqs; r; r = next) {
        next = r->next;
        if (r->cancelled) {
            if (r->added)
                curl_multi_remove_handle(c->multi, r->easy);
            req_unlink(r);
            req_destroy(r);
        } else if (!r->added && !r->queued) {
            if (curl_multi_add_handle(c->multi, r->easy) == CURLM_OK)
                r->added = 1;
            else
                r->add_failed = 1; /* short of memory: reported below */
        }
    }
    /* A callback may cancel any other request, so rescan after each one. */
    for (;;) {
        for (r = c->reqs; r && !(r->add_failed && !r->cancelled); r = r->next)
            ;
        if (!r)
            break;
        r->add_failed = 0;
        finish(r, CURLE_OUT_OF_MEMORY);
    }
    check_done(c);
}

static void schedule_kick(struct kube_client *c)
{
    if (!ev_is_active(&c->kick)) {
        ev_timer_set(&c->kick, 0., 0.);
        ev_timer_start(c->loop, &c->kick);
    }
}

/* --------------------------------------------------------------- client */

static char *dup_n(const char *p, size_t n)
{
    char *d;
    if (!p)
        return NULL;
    d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

static int config_copy(struct kube_config *dst, const struct kube_config *src)
{
    kube_config_init(dst);
#define CP(f)                                                                                  \
    do {                                                                                       \
        if (src->f && !(dst->f = strdup(src->f)))                                              \
            goto nomem;                                                                        \
    } while (0)
#define CPN(f)                                                                                 \
    do {                                                                                       \
        if (src->f && !(dst->f = dup_n(src->f, src->f##_len)))                                 \
            goto nomem;                                                                        \
        dst->f##_len = src->f##_len;                                                           \
    } while (0)
    CP(server);
    CP(ca_file);
    CPN(ca_data);
    CP(cert_file);
    CPN(cert_data);
    CP(key_file);
    CPN(key_data);
    CP(token);
    CP(token_file);
    CP(namespace_);
    CP(context);
#undef CP
#undef CPN
    dst->insecure = src->insecure;
    return GQ_OK;
nomem:
    kube_config_release(dst);
    return GQ_ENOMEM;
}

struct kube_client *kube_client_new(struct ev_loop *loop, const struct kube_config *cfg,
                                    const struct kube_client_opts *opts, char *err,
                                    size_t errlen)
{
    struct kube_client *c = calloc(1, sizeof *c);
    if (!c) {
        gq_errf(err, errlen, "kube client: out of memory");
        return NULL;
    }
    if (!cfg->server || !*cfg->server) {
        gq_errf(err, errlen, "kube client: config has no server");
        free(c);
        return NULL;
    }
    if ((cfg->token || cfg->token_file) && strncasecmp(cfg->server, "https://", 8) != 0 &&
        !(opts && opts->allow_http_token)) {
        gq_errf(err, errlen,
                "kube client: server %s is not https: refusing to send the bearer token in "
                "clear text (use an https server, or allow it with "
                "--insecure-allow-http-token=true)",
                cfg->server);
        free(c);
        return NULL;
    }
    if (config_copy(&c->cfg, cfg) != 0) {
        gq_errf(err, errlen, "kube client: out of memory");
        free(c);
        return NULL;
    }
    c->loop = loop;
    if (opts)
        c->opts = *opts;
    else
        c->opts.log_level = GQ_LOG_INFO;
    if (c->opts.connect_timeout_ms <= 0)
        c->opts.connect_timeout_ms = 10000;
    if (c->opts.request_timeout_ms <= 0)
        c->opts.request_timeout_ms = 60000;
    if (c->opts.max_body == 0)
        c->opts.max_body = DEFAULT_MAX_BODY;
    if (c->opts.max_inflight == 0)
        c->opts.max_inflight = 64;
    if (c->opts.token_reload_s <= 0)
        c->opts.token_reload_s = 60;
    snprintf(c->user_agent, sizeof c->user_agent, "%s",
             c->opts.user_agent ? c->opts.user_agent : "gangq/" GANGQ_VERSION);
    c->opts.user_agent = NULL; /* not kept: copied above */
    c->token_read_at = ev_now(loop);
    if (c->cfg.insecure)
        gq_log(c->opts.log_level, GQ_LOG_WARN, "kube",
               "TLS certificate verification is off (insecure-skip-tls-verify): the API "
               "server is not authenticated",
               " server=%s", c->cfg.server);
    else if ((c->cfg.token || c->cfg.token_file) && strncasecmp(c->cfg.server, "https://", 8) != 0)
        gq_log(c->opts.log_level, GQ_LOG_WARN, "kube",
               "sending the bearer token over plain http (allowed by option)", " server=%s",
               c->cfg.server);
    c->multi = curl_multi_init();
    if (!c->multi) {
        gq_errf(err, errlen, "kube client: curl_multi_init failed");
        kube_config_release(&c->cfg);
        free(c);
        return NULL;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    ev_timer_init(&c->timer, timer_ev_cb, 0., 0.);
    c->timer.data = c;
    ev_timer_init(&c->kick, kick_cb, 0., 0.);
    c->kick.data = c;
    return c;
}

void kube_client_free(struct kube_client *c)
{
    struct kube_req *r, *next;
    if (!c)
        return;
    for (r = c->reqs; r; r = next) {
        next = r->next;
        if (r->added)
            curl_multi_remove_handle(c->multi, r->easy);
        req_destroy(r);
    }
    c->reqs = NULL;
    ev_timer_stop(c->loop, &c->timer);
    ev_timer_stop(c->loop, &c->kick);
    /* cleanup calls socket_cb(REMOVE) for sockets still open, freeing them */
    curl_multi_cleanup(c->multi);
    kube_config_release(&c->cfg);
    free(c);
}

struct ev_loop *kube_client_loop(const struct kube_client *c)
{
    return c->loop;
}

const struct kube_config *kube_client_config(const struct kube_client *c)
{
    return &c->cfg;
}

int kube_client_log_level(const struct kube_client *c)
{
    return c->opts.log_level;
}

size_t kube_client_pending(const struct kube_client *c)
{
    return c->nreqs;
}

/* ------------------------------------------------------------- requests */

static size_t header_cb(char *buf, size_t size, size_t n, void *ud)
{
    struct kube_req *r = ud;
    size_t len = size * n;
    if (len > 12 && strncasecmp(buf, "Retry-After:", 12) == 0) {
        char v[32];
        size_t vl = GQ_MIN(len - 12, sizeof v - 1);
        memcpy(v, buf + 12, vl);
        v[vl] = '\0';
        r->retry_after = kube_parse_retry_after(v);
    } else if (len > 5 && strncmp(buf, "HTTP/", 5) == 0) {
        r->retry_after = -1; /* a new response (e.g. after 100-continue) */
    }
    return len;
}

static size_t write_cb(char *data, size_t size, size_t n, void *ud)
{
    struct kube_req *r = ud;
    size_t len = size * n;
    if (r->cancelled)
        return 0;
    if (r->stream) {
        if (r->status == 0)
            curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
        if (r->status >= 200 && r->status < 300) {
            int rc = r->on_data ? r->on_data(data, len, r->ud) : 0;
            if (rc) {
                r->abort_rc = rc;
                return 0;
            }
            return r->cancelled ? 0 : len;
        }
    }
    if (gq_buf_append(&r->resp, data, len) != 0) {
        r->abort_rc = GQ_ELIMIT;
        return 0;
    }
    return len;
}

static void maybe_reload_token(struct kube_client *c)
{
    char *text = NULL, err[256];
    size_t len = 0;
    double now = ev_now(c->loop);
    if (!c->cfg.token_file || now - c->token_read_at < c->opts.token_reload_s)
        return;
    c->token_read_at = now;
    if (gq_read_file(c->cfg.token_file, 64 * 1024, &text, &len, err, sizeof err) != 0) {
        gq_log(c->opts.log_level, GQ_LOG_WARN, KUBE_LOG_MOD,
               "cannot re-read token file; keeping the old token", "err=\"%s\"", err);
        return;
    }
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        text[--len] = '\0';
    free(c->cfg.token);
    c->cfg.token = text;
}

static int setup_easy(struct kube_client *c, struct kube_req *r, const char *path,
                      const char *content_type)
{
    struct gq_buf url, hdr;
    int rc = GQ_ENOMEM;
    CURL *e;
    gq_buf_init(&url, 16384);
    gq_buf_init(&hdr, 16384);
    r->easy = e = curl_easy_init();
    if (!e)
        goto out;
    if ((rc = gq_buf_printf(&url, "%s%s", c->cfg.server, path)) != 0)
        goto out;
    rc = GQ_ENOMEM;
    curl_easy_setopt(e, CURLOPT_URL, url.p);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->opts.connect_timeout_ms);
    if (!r->stream)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->opts.request_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    /* wait for an HTTP/2 connection being set up rather than opening more */
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (strcmp(r->method, "GET") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
    if (r->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    }
    /* TLS: 1.2 or newer; server certificate checked unless insecure */
    curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (c->cfg.insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (c->cfg.ca_data) {
        struct curl_blob blob = {c->cfg.ca_data, c->cfg.ca_data_len, CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
    } else if (c->cfg.ca_file) {
        curl_easy_setopt(e, CURLOPT_CAINFO, c->cfg.ca_file);
    }
    if (c->cfg.cert_data) {
        struct curl_blob blob = {c->cfg.cert_data, c->cfg.cert_data_len, CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &blob);
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (c->cfg.cert_file) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, c->cfg.cert_file);
    }
    if (c->cfg.key_data) {
        struct curl_blob blob = {c->cfg.key_data, c->cfg.key_data_len, CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &blob);
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (c->cfg.key_file) {
        curl_easy_setopt(e, CURLOPT_SSLKEY, c->cfg.key_file);
    }
    /* headers */
    {
        struct curl_slist *h;
        if (!(h = curl_slist_append(r->headers, "Accept: application/json")))
            goto out;
        r->headers = h;
        if (c->cfg.token && *c->cfg.token) {
            if (gq_buf_printf(&hdr, "Authorization: Bearer %s", c->cfg.token) != 0)
                goto out;
            if (!(h = curl_slist_append(r->headers, hdr.p)))
                goto out;
            r->headers = h;
        }
        if (r->body) {
            gq_buf_reset(&hdr);
            if (gq_buf_printf(&hdr, "Content-Type: %s",
                              content_type ? content_type : "application/json") != 0)
                goto out;
            if (!(h = curl_slist_append(r->headers, hdr.p)))
                goto out;
            r->headers = h;
            /* no 100-continue round trip */
            if (!(h = curl_slist_append(r->headers, "Expect:")))
                goto out;
            r->headers = h;
        }
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    }
    rc = GQ_OK;
out:
    gq_buf_release(&url);
    gq_buf_release(&hdr);
    return rc;
}

static int start(struct kube_client *c, const char *method, const char *path,
                 const char *content_type, const char *body, int stream, kube_data_cb on_data,
                 kube_response_cb cb, void *ud, struct kube_req **out)
{
    struct kube_req *r;
    int rc;
    if (out)
        *out = NULL;
    if (!path || path[0] != '/' || !method || strlen(method) >= sizeof r->method)
        return GQ_EINVAL;
    r = calloc(1, sizeof *r);
    if (!r)
        return GQ_ENOMEM;
    r->c = c;
    r->cb = cb;
    r->on_data = on_data;
    r->ud = ud;
    r->stream = stream;
    r->retry_after = -1;
    gq_strlcpy(r->method, method, sizeof r->method);
    gq_buf_init(&r->resp, stream ? (size_t)1 << 20 : c->opts.max_body);
    if (body && !(r->body = strdup(body))) {
        req_destroy(r);
        return GQ_ENOMEM;
    }
    maybe_reload_token(c);
    rc = setup_easy(c, r, path, content_type);
    if (rc) {
        req_destroy(r);
        return rc;
    }
    /* link */
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    c->nreqs++;
    if (!stream && c->inflight >= c->opts.max_inflight) {
        r->queued = 1;
        if (c->qtail)
            c->qtail->qnext = r;
        else
            c->qhead = r;
        c->qtail = r;
    } else {
        if (!stream) {
            r->counted = 1;
            c->inflight++;
        }
        if (c->in_curl) {
            schedule_kick(c);
        } else if (curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
            req_unlink(r);
            req_destroy(r);
            return GQ_EIO;
        } else {
            r->added = 1;
        }
    }
    if (gq_log_on(c->opts.log_level, GQ_LOG_DEBUG))
        gq_log(c->opts.log_level, GQ_LOG_DEBUG, KUBE_LOG_MOD, "request", "method=%s path=\"%s\"",
               method, path);
    if (out)
        *out = r;
    return GQ_OK;
}

int kube_request(struct kube_client *c, const char *method, const char *path,
                 const char *content_type, const char *body, kube_response_cb cb, void *userdata)
{
    return start(c, method, path, content_type, body, 0, NULL, cb, userdata, NULL);
}

int kube_request_h(struct kube_client *c, const char *method, const char *path,
                   const char *content_type, const char *body, kube_response_cb cb,
                   void *userdata, struct kube_req **out)
{
    return start(c, method, path, content_type, body, 0, NULL, cb, userdata, out);
}

int kube_stream(struct kube_client *c, const char *path, kube_data_cb on_data,
                kube_response_cb on_done, void *userdata, struct kube_req **out)
{
    return start(c, "GET", path, NULL, NULL, 1, on_data, on_done, userdata, out);
}

void kube_req_cancel(struct kube_req *r)
{
    struct kube_client *c;
    if (!r || r->cancelled)
        return;
    r->cancelled = 1;
    if (r->in_cb)
        return; /* finish() frees it when the callback returns */
    c = r->c;
    if (c->in_curl) {
        schedule_kick(c); /* removed outside curl's callbacks */
        return;
    }
    if (r->added)
        curl_multi_remove_handle(c->multi, r->easy);
    req_unlink(r);
    req_destroy(r);
}

size_t kube_client_queued(const struct kube_client *c)
{
    size_t n = 0;
    for (const struct kube_req *q = c->qhead; q; q = q->qnext)
        n++;
    return n;
}

cJSON *kube_response_json(const struct kube_response *resp)
{
    if (!resp || !resp->body || resp->len == 0)
        return NULL;
    return cJSON_ParseWithLength(resp->body, resp->len);
}
