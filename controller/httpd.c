/* httpd.c — see httpd.h. One struct conn per accepted socket; it moves
 * READ (collect the head) -> WRITE (send the response) -> DRAIN (half-closed,
 * discard what the client still sends until it closes) -> closed. Closed
 * connections go on a dead list freed by an idle watcher, never inside their
 * own callback. */
#include "httpd.h"
#include "log.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum conn_state { C_READ, C_WRITE, C_DRAIN, C_CLOSED };

struct conn {
    struct gq_httpd *h;
    int fd;
    enum conn_state state;
    ev_io io;
    ev_timer tm;
    char *in;        /* request head, max_head bytes + NUL */
    size_t inlen;
    struct gq_buf out;
    size_t off;      /* bytes of out already sent */
    ev_tstamp t0;    /* accepted at (loop time) */
    int responded;   /* a response was queued */
    struct conn *prev, *next;
};

struct route {
    char path[GQ_HTTPD_PATH_MAX];
    gq_httpd_handler fn;
    void *ud;
};

struct gq_httpd {
    struct ev_loop *loop;
    struct gq_httpd_opts o;
    int fd;
    int port;
    int paused;          /* listener stopped after an accept error (retry timer) */
    int closing;         /* inside gq_httpd_free: never restart the listener */
    ev_io lio;
    ev_timer retry;      /* restarts the listener after an accept error */
    ev_idle reaper;      /* frees dead connections */
    struct route routes[GQ_HTTPD_MAX_ROUTES];
    int nroutes;
    struct conn *live;
    int nconns;
    struct conn *dead;
    struct gq_httpd_stats st;
};

#define DRAIN_TIMEOUT_S 1.0

void gq_httpd_opts_default(struct gq_httpd_opts *o)
{
    o->listen = "127.0.0.1:0";
    o->timeout_s = 5.0;
    o->head_timeout_s = 2.0;
    o->max_conns = 64;
    o->max_head = 8192;
    o->max_body = 8u << 20;
    o->log_level = GQ_LOG_WARN;
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

/* ---- connection lifetime ---- */

static void listener_resume(struct gq_httpd *h)
{
    if (!h->closing && h->paused && !ev_is_active(&h->retry)) {
        ev_io_start(h->loop, &h->lio);
        h->paused = 0;
    }
}

static void conn_destroy(struct conn *c)
{
    gq_buf_release(&c->out);
    free(c->in);
    free(c);
}

/* Stop everything and close the socket now; free later (the caller may be
 * this connection's own callback). */
static void conn_close(struct conn *c)
{
    struct gq_httpd *h = c->h;
    if (c->state == C_CLOSED)
        return;
    ev_io_stop(h->loop, &c->io);
    ev_timer_stop(h->loop, &c->tm);
    close(c->fd);
    c->fd = -1;
    c->state = C_CLOSED;
    if (c->prev)
        c->prev->next = c->next;
    else
        h->live = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = NULL;
    c->next = h->dead;
    h->dead = c;
    h->nconns--;
    ev_idle_start(h->loop, &h->reaper);
    listener_resume(h);
}

static void reaper_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
    struct gq_httpd *h = w->data;
    (void)revents;
    ev_idle_stop(loop, w);
    while (h->dead) {
        struct conn *c = h->dead;
        h->dead = c->next;
        conn_destroy(c);
    }
}

static void io_watch(struct conn *c, int events)
{
    ev_io_stop(c->h->loop, &c->io);
    ev_io_set(&c->io, c->fd, events);
    ev_io_start(c->h->loop, &c->io);
}

/* ---- writing ---- */

static void conn_write(struct conn *c)
{
    struct gq_httpd *h = c->h;
    while (c->off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->off, c->out.len - c->off, MSG_NOSIGNAL);
        if (n > 0) {
            c->off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!(c->io.events & EV_WRITE))
                io_watch(c, EV_WRITE);
            return;
        } else {
            conn_close(c);
            return;
        }
    }
    h->st.responses++;
    gq_buf_release(&c->out);
    /* Half-close and drain so unread request bytes do not turn our close into
     * a reset that could destroy the response in flight. */
    shutdown(c->fd, SHUT_WR);
    c->state = C_DRAIN;
    io_watch(c, EV_READ);
    ev_timer_stop(h->loop, &c->tm);
    ev_timer_set(&c->tm, GQ_MIN(h->o.timeout_s, DRAIN_TIMEOUT_S), 0.);
    ev_timer_start(h->loop, &c->tm);
}

/* Queue a complete response and start writing. body may be NULL. */
static void respond(struct conn *c, int status, const char *ctype, const char *extra,
                    const struct gq_buf *body, int head_only)
{
    size_t blen = body ? body->len : 0;
    int rc;
    c->responded = 1;
    if (status >= 400)
        c->h->st.rejected++;
    gq_buf_reset(&c->out);
    rc = gq_buf_printf(&c->out,
                       "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                       "%sConnection: close\r\n\r\n",
                       status, reason(status), ctype, blen, extra ? extra : "");
    if (!rc && blen && !head_only)
        rc = gq_buf_append(&c->out, body->p, blen);
    if (rc) {
        conn_close(c);
        return;
    }
    free(c->in);
    c->in = NULL;
    c->state = C_WRITE;
    c->off = 0;
    /* the head deadline is met: the response has until timeout_s from accept */
    ev_timer_stop(c->h->loop, &c->tm);
    ev_timer_set(&c->tm, GQ_MAX(0.001, c->t0 + c->h->o.timeout_s - ev_now(c->h->loop)), 0.);
    ev_timer_start(c->h->loop, &c->tm);
    conn_write(c);
}

static void respond_text(struct conn *c, int status, const char *extra, int head_only)
{
    struct gq_buf b;
    gq_buf_init(&b, 256);
    if (gq_buf_printf(&b, "%d %s\n", status, reason(status)) == 0)
        respond(c, status, "text/plain; charset=utf-8", extra, &b, head_only);
    else
        conn_close(c);
    gq_buf_release(&b);
}

/* ---- request handling ---- */

static const struct route *find_route(const struct gq_httpd *h, const char *path)
{
    int i;
    for (i = 0; i < h->nroutes; i++)
        if (strcmp(h->routes[i].path, path) == 0)
            return &h->routes[i];
    return NULL;
}

/* Parse the request line in place. Returns 0 with method/path/query set, or
 * the error status to answer (400, 405, 414). */
static int parse_request_line(char *line, struct gq_httpd_req *req)
{
    char *eol, *sp1, *sp2, *q;
    int status = 0;

    eol = strchr(line, '\n');
    if (eol) {
        *eol = '\0';
        if (eol > line && eol[-1] == '\r')
            eol[-1] = '\0';
    }
    sp1 = strchr(line, ' ');
    sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1 || strchr(sp2 + 1, ' ') ||
        strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || sp1[1] != '/') {
        status = 400;
        goto out;
    }
    *sp1 = '\0';
    *sp2 = '\0';
    req->method = line;
    req->path = sp1 + 1;
    q = strchr(sp1 + 1, '?');
    if (q)
        *q = '\0';
    req->query = q ? q + 1 : "";
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)
        status = 405;
    else if (strlen(req->path) >= GQ_HTTPD_PATH_MAX)
        status = 414;
out:
    return status;
}

/* The head is complete in c->in (NUL-terminated): answer it. */
static void handle(struct conn *c)
{
    struct gq_httpd *h = c->h;
    const struct route *r = NULL;
    struct gq_httpd_req req = {"", "", ""};
    struct gq_httpd_resp resp;
    struct gq_buf body;
    int head_only, status, rc;

    gq_buf_init(&body, h->o.max_body);
    status = parse_request_line(c->in, &req);
    head_only = strcmp(req.method, "HEAD") == 0;
    if (!status) {
        r = find_route(h, req.path);
        if (!r)
            status = 404;
    }
    if (status) {
        respond_text(c, status, status == 405 ? "Allow: GET, HEAD\r\n" : NULL, head_only);
        goto out;
    }
    resp.status = 200;
    gq_strlcpy(resp.content_type, "text/plain; charset=utf-8", sizeof resp.content_type);
    resp.body = &body;
    rc = r->fn(&req, &resp, r->ud);
    if (rc || resp.status < 200 || resp.status > 599 ||
        strpbrk(resp.content_type, "\r\n")) {
        gq_log(h->o.log_level, GQ_LOG_WARN, "httpd", "handler failed", "path=%s rc=%d",
               req.path, rc);
        respond_text(c, 500, NULL, head_only);
    } else {
        respond(c, resp.status, resp.content_type, NULL, &body, head_only);
    }
out:
    gq_buf_release(&body);
}

static int head_complete(const char *p, size_t n)
{
    return memmem(p, n, "\r\n\r\n", 4) != NULL || memmem(p, n, "\n\n", 2) != NULL;
}

static void conn_read(struct conn *c)
{
    struct gq_httpd *h = c->h;
    for (;;) {
        size_t room = h->o.max_head - c->inlen;
        ssize_t n;
        if (room == 0) {
            respond_text(c, 431, NULL, 0);
            return;
        }
        n = read(c->fd, c->in + c->inlen, room);
        if (n > 0) {
            size_t from = c->inlen > 3 ? c->inlen - 3 : 0;
            c->inlen += (size_t)n;
            c->in[c->inlen] = '\0';
            if (head_complete(c->in + from, c->inlen - from)) {
                if (memchr(c->in, '\0', c->inlen))
                    respond_text(c, 400, NULL, 0);
                else
                    handle(c);
                return;
            }
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        } else {
            conn_close(c); /* EOF before a full head, or an error */
            return;
        }
    }
}

static void conn_drain(struct conn *c)
{
    char scratch[4096];
    for (;;) {
        ssize_t n = read(c->fd, scratch, sizeof scratch);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        conn_close(c);
        return;
    }
}

static void conn_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    (void)loop;
    (void)revents;
    switch (c->state) {
    case C_READ: conn_read(c); break;
    case C_WRITE: conn_write(c); break;
    case C_DRAIN: conn_drain(c); break;
    case C_CLOSED: break;
    }
}

static void conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct conn *c = w->data;
    (void)loop;
    (void)revents;
    if (!c->responded) {
        c->h->st.timeouts++;
        gq_log(c->h->o.log_level, GQ_LOG_DEBUG, "httpd", "connection timed out",
               "read=%zu", c->inlen);
    }
    conn_close(c);
}

/* ---- listener ---- */

/* At the cap: close the oldest connection still waiting for its head, else
 * the oldest of all (live is newest first). */
static void evict_one(struct gq_httpd *h)
{
    struct conn *c = h->live, *victim = NULL;
    if (!c)
        return;
    while (c->next)
        c = c->next;
    for (victim = c; c; c = c->prev)
        if (c->state == C_READ) {
            victim = c;
            break;
        }
    h->st.evicted++;
    gq_log(h->o.log_level, GQ_LOG_DEBUG, "httpd", "connection evicted at the cap",
           "state=%d read=%zu", (int)victim->state, victim->inlen);
    conn_close(victim);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct gq_httpd *h = w->data;
    (void)revents;
    for (;;) {
        struct conn *c;
        int fd;
        fd = accept4(h->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            /* EMFILE and friends: back off instead of spinning. */
            gq_log(h->o.log_level, GQ_LOG_WARN, "httpd", "accept failed", "err=\"%s\"",
                   strerror(errno));
            ev_io_stop(loop, &h->lio);
            h->paused = 1;
            ev_timer_start(loop, &h->retry);
            return;
        }
        if (h->nconns >= h->o.max_conns)
            evict_one(h);
        c = calloc(1, sizeof *c);
        if (c)
            c->in = malloc(h->o.max_head + 1);
        if (!c || !c->in) {
            if (c)
                free(c);
            close(fd);
            continue;
        }
        c->h = h;
        c->fd = fd;
        c->state = C_READ;
        gq_buf_init(&c->out, h->o.max_body + 1024);
        ev_io_init(&c->io, conn_io_cb, fd, EV_READ);
        c->io.data = c;
        ev_timer_init(&c->tm, conn_timer_cb, GQ_MIN(h->o.head_timeout_s, h->o.timeout_s), 0.);
        c->tm.data = c;
        c->t0 = ev_now(loop);
        c->next = h->live;
        if (h->live)
            h->live->prev = c;
        h->live = c;
        h->nconns++;
        h->st.accepted++;
        ev_io_start(loop, &c->io);
        ev_timer_start(loop, &c->tm);
        /* A client that waited in the backlog has usually sent its head
         * already: answer it now, before the next accept can evict it. */
        conn_read(c);
    }
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct gq_httpd *h = w->data;
    (void)loop;
    (void)revents;
    ev_timer_stop(loop, w);
    listener_resume(h);
}

/* Split "ADDR:PORT" / ":PORT" / "[V6]:PORT" into host and port text. */
static int split_listen(const char *s, char *host, size_t hostlen, char *port,
                        size_t portlen, char *err, size_t errlen)
{
    const char *colon = s ? strrchr(s, ':') : NULL;
    const char *hb = s, *he = colon;
    int64_t pv = -1;
    int rc = GQ_EINVAL;

    if (!colon) {
        gq_errf(err, errlen, "listen address \"%s\" is not ADDR:PORT", s ? s : "(null)");
        goto out;
    }
    if (gq_parse_i64(colon + 1, (size_t)-1, &pv) || pv < 0 || pv > 65535) {
        gq_errf(err, errlen, "listen address \"%s\": bad port", s);
        goto out;
    }
    if (he > hb && *hb == '[' && he[-1] == ']') {
        hb++;
        he--;
    }
    if ((size_t)(he - hb) >= hostlen) {
        gq_errf(err, errlen, "listen address \"%s\": host too long", s);
        goto out;
    }
    if (he == hb) {
        gq_strlcpy(host, "0.0.0.0", hostlen);
    } else {
        memcpy(host, hb, (size_t)(he - hb));
        host[he - hb] = '\0';
    }
    snprintf(port, portlen, "%d", (int)pv);
    rc = GQ_OK;
out:
    return rc;
}

static int open_listener(const char *listen_s, int *fd_out, int *port_out, char *err,
                         size_t errlen)
{
    char host[128], port[16];
    struct addrinfo hints, *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = -1, one = 1, rc, gai;

    rc = split_listen(listen_s, host, sizeof host, port, sizeof port, err, errlen);
    if (rc)
        goto out;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        gq_errf(err, errlen, "listen address \"%s\": %s", listen_s, gai_strerror(gai));
        rc = GQ_EINVAL;
        goto out;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        gq_errf(err, errlen, "listen on %s: %s", listen_s, strerror(errno));
        rc = GQ_EIO;
        goto out;
    }
    if (ss.ss_family == AF_INET6)
        *port_out = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else
        *port_out = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    fd = -1;
    rc = GQ_OK;
out:
    if (fd >= 0)
        close(fd);
    if (ai)
        freeaddrinfo(ai);
    return rc;
}

int gq_httpd_new(struct ev_loop *loop, const struct gq_httpd_opts *o,
                 struct gq_httpd **out, char *err, size_t errlen)
{
    struct gq_httpd *h = NULL;
    int rc;

    *out = NULL;
    if (!loop) {
        gq_errf(err, errlen, "httpd: no event loop");
        rc = GQ_EINVAL;
        goto out;
    }
    h = calloc(1, sizeof *h);
    if (!h) {
        gq_errf(err, errlen, "httpd: out of memory");
        rc = GQ_ENOMEM;
        goto out;
    }
    h->fd = -1;
    h->loop = loop;
    if (o)
        h->o = *o;
    else
        gq_httpd_opts_default(&h->o);
    if (!h->o.listen || h->o.timeout_s <= 0 || h->o.head_timeout_s <= 0 || h->o.max_conns <= 0 ||
        h->o.max_head < 16 || h->o.max_body == 0) {
        gq_errf(err, errlen, "httpd: listen, timeout_s, head_timeout_s, max_conns, max_head "
                             "and max_body must be set (use gq_httpd_opts_default)");
        rc = GQ_EINVAL;
        goto out;
    }
    rc = open_listener(h->o.listen, &h->fd, &h->port, err, errlen);
    if (rc)
        goto out;
    h->o.listen = NULL; /* borrowed string: not kept past this call */
    ev_io_init(&h->lio, accept_cb, h->fd, EV_READ);
    h->lio.data = h;
    ev_timer_init(&h->retry, retry_cb, 0.5, 0.);
    h->retry.data = h;
    ev_idle_init(&h->reaper, reaper_cb);
    h->reaper.data = h;
    ev_io_start(loop, &h->lio);
    *out = h;
    h = NULL;
out:
    gq_httpd_free(h);
    return rc;
}

void gq_httpd_free(struct gq_httpd *h)
{
    if (!h)
        return;
    h->closing = 1;
    if (h->fd >= 0) {
        ev_io_stop(h->loop, &h->lio);
        ev_timer_stop(h->loop, &h->retry);
        ev_idle_stop(h->loop, &h->reaper);
        close(h->fd);
    }
    while (h->live) {
        struct conn *c = h->live;
        conn_close(c); /* moves c to the dead list */
    }
    ev_idle_stop(h->loop, &h->reaper);
    while (h->dead) {
        struct conn *c = h->dead;
        h->dead = c->next;
        conn_destroy(c);
    }
    free(h);
}

int gq_httpd_route(struct gq_httpd *h, const char *path, gq_httpd_handler fn, void *ud)
{
    int i;
    if (!h || !path || path[0] != '/' || !fn || strlen(path) >= GQ_HTTPD_PATH_MAX)
        return GQ_EINVAL;
    for (i = 0; i < h->nroutes; i++) {
        if (strcmp(h->routes[i].path, path) == 0) {
            h->routes[i].fn = fn;
            h->routes[i].ud = ud;
            return GQ_OK;
        }
    }
    if (h->nroutes >= GQ_HTTPD_MAX_ROUTES)
        return GQ_ELIMIT;
    gq_strlcpy(h->routes[h->nroutes].path, path, GQ_HTTPD_PATH_MAX);
    h->routes[h->nroutes].fn = fn;
    h->routes[h->nroutes].ud = ud;
    h->nroutes++;
    return GQ_OK;
}

int gq_httpd_port(const struct gq_httpd *h)
{
    return h ? h->port : -1;
}

int gq_httpd_nconns(const struct gq_httpd *h)
{
    return h ? h->nconns : 0;
}

void gq_httpd_stats(const struct gq_httpd *h, struct gq_httpd_stats *out)
{
    if (h)
        *out = h->st;
    else
        memset(out, 0, sizeof *out);
}
