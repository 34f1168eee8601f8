/* Unit tests for controller/httpd (+ metrics over HTTP): the server runs in a
 * libev loop in the test process; a forked client talks to it over loopback
 * with plain blocking sockets, records what it saw in shared memory, then
 * exits; the closing of its pipe stops the loop. Assertions run afterwards.
 * (fork, not a thread: <pthread.h> includes <sched.h>, which the project's
 * -Icontroller/scheduler shadows with the scheduler's sched.h.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

#include "buf.h"
#include "httpd.h"
#include "metrics.h"

#define NRESP 24
#define SLOT0_MAX (5u << 20) /* slot 0 may hold a 4 MiB body */
#define SLOT_MAX (64u << 10)
#define SHARED_SIZE (SLOT0_MAX + (NRESP - 1) * SLOT_MAX)

/* What the client saw, in memory shared with the forked client. */
struct shared {
    int nslow;              /* slow connections the client held open */
    double closed_at[2];    /* when the server closed a slow client (0 = never) */
    size_t len[NRESP];
    double secs[NRESP];
    int got[NRESP];
    char data[];
};

struct fx {
    struct ev_loop *loop;
    struct gq_httpd *h;
    struct gq_metrics *m;
    ev_io done;             /* read end of the client's pipe: EOF = client exited */
    int pfd[2];
    struct shared *sh;
    ev_timer guard;         /* fails the test instead of hanging */
    int port;
    int guard_fired;
    void (*client)(struct fx *);
    /* client results (point into sh) */
    char *resp[NRESP];
    size_t resplen[NRESP];
    double secs[NRESP];
    int peak_conns;         /* max gq_httpd_nconns seen by handlers */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_port(int port)
{
    struct sockaddr_in sa;
    struct timeval tv = {5, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static char *slot(struct fx *f, int i, size_t *cap)
{
    *cap = i == 0 ? SLOT0_MAX : SLOT_MAX;
    return f->sh->data + (i == 0 ? 0 : SLOT0_MAX + (size_t)(i - 1) * SLOT_MAX);
}

/* Read to EOF into shared slot i (NUL-terminated, truncated at the slot). */
static void read_all(struct fx *f, int i, int fd)
{
    size_t cap, len = 0;
    char *p = slot(f, i, &cap);
    for (;;) {
        ssize_t n;
        if (len + 1 >= cap)
            break;
        n = recv(fd, p + len, cap - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    p[len] = '\0';
    f->sh->got[i] = 1;
    f->sh->len[i] = len;
}

static void exchange(struct fx *f, int i, const char *req, size_t n)
{
    double t0 = now_s();
    int fd = connect_port(f->port);
    if (fd < 0)
        return;
    if (send_all(fd, req, n) == 0)
        read_all(f, i, fd);
    close(fd);
    f->sh->secs[i] = now_s() - t0;
}

static void done_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    char c;
    (void)revents;
    if (read(w->fd, &c, 1) <= 0) {
        ev_io_stop(loop, w);
        ev_break(loop, EVBREAK_ALL);
    }
}

static void guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct fx *f = w->data;
    (void)revents;
    f->guard_fired = 1;
    ev_break(loop, EVBREAK_ALL);
}

/* ---- handlers ---- */

static void note_peak(struct fx *f)
{
    int n = gq_httpd_nconns(f->h);
    if (n > f->peak_conns)
        f->peak_conns = n;
}

static int h_metrics(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    struct fx *f = ud;
    (void)req;
    note_peak(f);
    gq_strlcpy(resp->content_type, GQ_METRICS_CONTENT_TYPE, sizeof resp->content_type);
    return gq_metrics_render(f->m, resp->body);
}

static int h_ready(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    note_peak(ud);
    resp->status = strcmp(req->query, "ready=1") == 0 ? 200 : 503;
    return gq_buf_puts(resp->body, resp->status == 200 ? "ok\n" : "not ready\n");
}

static int h_health(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    (void)req;
    note_peak(ud);
    return gq_buf_puts(resp->body, "ok\n");
}

static int h_fail(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    (void)req;
    (void)resp;
    (void)ud;
    return GQ_EIO;
}

static int h_big(const struct gq_httpd_req *req, struct gq_httpd_resp *resp, void *ud)
{
    size_t i;
    int rc = 0;
    (void)req;
    note_peak(ud);
    for (i = 0; i < (4u << 20) / 64 && !rc; i++)
        rc = gq_buf_printf(resp->body, "%063zu\n", i);
    return rc;
}

/* ---- fixture ---- */

static void fx_start(struct fx *f, const struct gq_httpd_opts *o)
{
    char err[256] = "";
    struct gq_metric *c = NULL, *g = NULL;
    memset(f, 0, sizeof *f);
    f->loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(f->loop);
    f->m = gq_metrics_new();
    assert_non_null(f->m);
    assert_int_equal(gq_metrics_counter(f->m, "gangq_cycles_total", "Cycles.", NULL, &c, err,
                                        sizeof err), 0);
    assert_int_equal(gq_metrics_gauge(f->m, "gangq_jobs", "Jobs by state.",
                                      (const char *[]){"state", "Queued", NULL}, &g, err,
                                      sizeof err), 0);
    gq_metrics_add(c, 41);
    gq_metrics_inc(c);
    gq_metrics_set(g, 3);
    assert_int_equal(gq_httpd_new(f->loop, o, &f->h, err, sizeof err), 0);
    f->port = gq_httpd_port(f->h);
    assert_true(f->port > 0);
    assert_int_equal(gq_httpd_route(f->h, "/metrics", h_metrics, f), 0);
    assert_int_equal(gq_httpd_route(f->h, "/readyz", h_ready, f), 0);
    assert_int_equal(gq_httpd_route(f->h, "/fail", h_fail, f), 0);
    assert_int_equal(gq_httpd_route(f->h, "/healthz", h_health, f), 0);
    assert_int_equal(gq_httpd_route(f->h, "/big", h_big, f), 0);
    f->sh = mmap(NULL, sizeof(struct shared) + SHARED_SIZE, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(f->sh != MAP_FAILED);
    ev_timer_init(&f->guard, guard_cb, 30., 0.);
    f->guard.data = f;
    ev_timer_start(f->loop, &f->guard);
}

static void fx_run(struct fx *f, void (*client)(struct fx *))
{
    pid_t pid;
    int i, wst = 0;
    size_t cap;
    f->client = client;
    assert_int_equal(pipe(f->pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(f->pfd[0]);
        client(f);
        _exit(0); /* the pipe's write end closes with us */
    }
    close(f->pfd[1]);
    ev_io_init(&f->done, done_cb, f->pfd[0], EV_READ);
    ev_io_start(f->loop, &f->done);
    ev_run(f->loop, 0);
    ev_io_stop(f->loop, &f->done);
    close(f->pfd[0]);
    if (f->guard_fired)
        kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_false(f->guard_fired);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    for (i = 0; i < NRESP; i++) {
        f->resp[i] = f->sh->got[i] ? slot(f, i, &cap) : NULL;
        f->resplen[i] = f->sh->len[i];
        f->secs[i] = f->sh->secs[i];
    }
    /* let the reaper and any draining connections finish */
    ev_run(f->loop, EVRUN_NOWAIT);
}

static void fx_stop(struct fx *f)
{
    gq_httpd_free(f->h);
    ev_timer_stop(f->loop, &f->guard);
    gq_metrics_free(f->m);
    ev_loop_destroy(f->loop);
    munmap(f->sh, sizeof(struct shared) + SHARED_SIZE);
}

static const char *body_of(const char *resp)
{
    const char *p = resp ? strstr(resp, "\r\n\r\n") : NULL;
    return p ? p + 4 : "";
}

static int status_of(const char *resp)
{
    int st = 0;
    if (resp && sscanf(resp, "HTTP/1.1 %d ", &st) == 1)
        return st;
    return -1;
}

/* ---- tests ---- */

#define S(x) x, sizeof(x) - 1

static void client_routes(struct fx *f)
{
    exchange(f, 0, S("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
    exchange(f, 1, S("GET /nope HTTP/1.1\r\n\r\n"));
    exchange(f, 2, S("POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"));
    exchange(f, 3, S("HEAD /metrics HTTP/1.0\r\n\r\n"));
    exchange(f, 4, S("GET /readyz?ready=1 HTTP/1.1\r\n\r\n"));
    exchange(f, 5, S("GET /readyz HTTP/1.1\r\n\r\n"));
    exchange(f, 6, S("GET /fail HTTP/1.1\r\n\r\n"));
    exchange(f, 7, S("BROKEN\r\n\r\n"));
    exchange(f, 8, S("GET /metrics HTTP/1.1\n\n")); /* bare LF heads are accepted */
    exchange(f, 9, S("GET /metrics SPDY/3\r\n\r\n"));
    {
        char req[512];
        int n = snprintf(req, sizeof req, "GET /%0300d HTTP/1.1\r\n\r\n", 7);
        exchange(f, 10, req, (size_t)n); /* path longer than GQ_HTTPD_PATH_MAX */
    }
    exchange(f, 11, S("HEAD /nope HTTP/1.1\r\n\r\n"));
}

static void test_routes_and_statuses(void **st)
{
    struct fx f;
    struct gq_buf want;
    struct gq_httpd_stats s;
    char clen[64];
    (void)st;
    fx_start(&f, NULL);
    fx_run(&f, client_routes);
    gq_buf_init(&want, 1 << 16);
    assert_int_equal(gq_metrics_render(f.m, &want), 0);
    assert_string_equal(want.p, "# HELP gangq_cycles_total Cycles.\n"
                                "# TYPE gangq_cycles_total counter\n"
                                "gangq_cycles_total 42\n"
                                "# HELP gangq_jobs Jobs by state.\n"
                                "# TYPE gangq_jobs gauge\n"
                                "gangq_jobs{state=\"Queued\"} 3\n");
    snprintf(clen, sizeof clen, "\r\nContent-Length: %zu\r\n", want.len);

    assert_int_equal(status_of(f.resp[0]), 200);
    assert_string_equal(body_of(f.resp[0]), want.p);
    assert_non_null(strstr(f.resp[0], "\r\nContent-Type: text/plain; version=0.0.4; "
                                      "charset=utf-8\r\n"));
    assert_non_null(strstr(f.resp[0], clen));
    assert_non_null(strstr(f.resp[0], "\r\nConnection: close\r\n"));

    assert_int_equal(status_of(f.resp[1]), 404);
    assert_int_equal(status_of(f.resp[2]), 405);
    assert_non_null(strstr(f.resp[2], "\r\nAllow: GET, HEAD\r\n"));
    /* HEAD: same length header, no body */
    assert_int_equal(status_of(f.resp[3]), 200);
    assert_non_null(strstr(f.resp[3], clen));
    assert_string_equal(body_of(f.resp[3]), "");
    assert_int_equal(status_of(f.resp[4]), 200);
    assert_string_equal(body_of(f.resp[4]), "ok\n");
    assert_int_equal(status_of(f.resp[5]), 503);
    assert_int_equal(status_of(f.resp[6]), 500);
    assert_int_equal(status_of(f.resp[7]), 400);
    assert_int_equal(status_of(f.resp[8]), 200);
    assert_string_equal(body_of(f.resp[8]), want.p);
    assert_int_equal(status_of(f.resp[9]), 400);
    assert_int_equal(status_of(f.resp[10]), 414);
    assert_int_equal(status_of(f.resp[11]), 404);
    assert_non_null(strstr(f.resp[11], "\r\nContent-Length: 14\r\n")); /* "404 Not Found\n" */
    assert_string_equal(body_of(f.resp[11]), "");

    gq_httpd_stats(f.h, &s);
    assert_int_equal(s.accepted, 12);
    assert_int_equal(s.responses, 12);
    assert_int_equal(s.rejected, 8); /* 404 405 503 500 400 400 414 404 */
    assert_int_equal(s.timeouts, 0);
    assert_int_equal(gq_httpd_nconns(f.h), 0);
    gq_buf_release(&want);
    fx_stop(&f);
}

static void client_oversized(struct fx *f)
{
    char big[9000 + 64];
    size_t n;
    memset(big, 0, sizeof big);
    n = (size_t)snprintf(big, sizeof big, "GET /metrics HTTP/1.1\r\nX-Pad: ");
    memset(big + n, 'a', 9000 - n);
    exchange(f, 0, big, 9000); /* no end of head in the first 8 KiB */
    /* just under the limit is fine */
    memset(big, 0, sizeof big);
    n = (size_t)snprintf(big, sizeof big, "GET /metrics HTTP/1.1\r\nX-Pad: ");
    memset(big + n, 'a', 8192 - n - 4);
    memcpy(big + 8192 - 4, "\r\n\r\n", 4);
    exchange(f, 1, big, 8192);
}

static void test_oversized_head(void **st)
{
    struct fx f;
    (void)st;
    fx_start(&f, NULL);
    fx_run(&f, client_oversized);
    assert_int_equal(status_of(f.resp[0]), 431);
    assert_non_null(strstr(f.resp[0], "\r\nConnection: close\r\n"));
    assert_int_equal(status_of(f.resp[1]), 200);
    fx_stop(&f);
}

static void client_silent(struct fx *f)
{
    double t0 = now_s();
    int fd = connect_port(f->port);
    if (fd >= 0) {
        read_all(f, 0, fd); /* returns at EOF: the server dropped us */
        close(fd);
    }
    f->sh->secs[0] = now_s() - t0;
}

static void test_silent_client_dropped(void **st)
{
    struct fx f;
    struct gq_httpd_opts o;
    struct gq_httpd_stats s;
    (void)st;
    gq_httpd_opts_default(&o);
    o.timeout_s = 0.2;
    fx_start(&f, &o);
    fx_run(&f, client_silent);
    assert_non_null(f.resp[0]);
    assert_int_equal(f.resplen[0], 0); /* dropped without a response */
    assert_true(f.secs[0] >= 0.15);
    assert_true(f.secs[0] < 3.0);     /* well before the client's own 5 s */
    gq_httpd_stats(f.h, &s);
    assert_int_equal(s.timeouts, 1);
    assert_int_equal(gq_httpd_nconns(f.h), 0);
    fx_stop(&f);
}

/* Two silent clients take both slots; a third, real request does not wait
 * for their deadlines: it takes the slot of the oldest silent one. */
static void client_cap(struct fx *f)
{
    int a = connect_port(f->port), b = connect_port(f->port);
    usleep(50 * 1000);
    exchange(f, 0, S("GET /metrics HTTP/1.1\r\n\r\n"));
    if (a >= 0) {
        read_all(f, 1, a); /* EOF at once: evicted, no response */
        close(a);
    }
    if (b >= 0)
        close(b);
}

static void test_connection_cap(void **st)
{
    struct fx f;
    struct gq_httpd_opts o;
    struct gq_httpd_stats s;
    (void)st;
    gq_httpd_opts_default(&o);
    o.timeout_s = 10;
    o.head_timeout_s = 10;
    o.max_conns = 2;
    fx_start(&f, &o);
    fx_run(&f, client_cap);
    assert_int_equal(status_of(f.resp[0]), 200);
    assert_true(f.secs[0] < 5.0); /* not held until a deadline (10 s) */
    assert_non_null(f.resp[1]);
    assert_int_equal(f.resplen[1], 0);
    assert_true(f.peak_conns <= 2);
    gq_httpd_stats(f.h, &s);
    assert_int_equal(s.evicted, 1);
    assert_int_equal(s.timeouts, 0);
    fx_stop(&f);
}

/* 200 slow clients (150 silent, 50 dribbling a head that never ends) are held
 * open while 7 probes are made: every probe is answered. */
#define NSLOW 200
#define NPROBE 7
static void client_slow_flood(struct fx *f)
{
    static int fds[NSLOW];
    static const char partial[] = "GET /readyz HTTP/1.1\r\nX-Slow: ";
    int i, k;
    f->sh->nslow = 0;
    for (i = 0; i < NSLOW; i++) {
        fds[i] = connect_port(f->port);
        if (fds[i] < 0)
            continue;
        f->sh->nslow++;
        if (i % 4 == 0)
            send(fds[i], partial, sizeof partial - 1, MSG_NOSIGNAL);
    }
    for (k = 0; k < NPROBE; k++) {
        if (k % 2)
            exchange(f, k, S("GET /readyz?ready=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
        else
            exchange(f, k, S("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
        for (i = 0; i < NSLOW; i += 4) /* dribble: one more byte each */
            if (fds[i] >= 0)
                send(fds[i], "a", 1, MSG_NOSIGNAL);
    }
    for (i = 0; i < NSLOW; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void test_probes_under_slow_clients(void **st)
{
    struct gq_httpd_opts o;
    int run, k;
    (void)st;
    /* run 0: the defaults; run 1: deadlines far away, so only the room kept
     * for new clients can serve the probes */
    for (run = 0; run < 2; run++) {
        struct fx f;
        struct gq_httpd_stats s;
        gq_httpd_opts_default(&o);
        if (run == 1) {
            o.timeout_s = 60;
            o.head_timeout_s = 60;
        }
        fx_start(&f, &o);
        fx_run(&f, client_slow_flood);
        assert_int_equal(f.sh->nslow, NSLOW);
        for (k = 0; k < NPROBE; k++) {
            assert_int_equal(status_of(f.resp[k]), 200);
            assert_string_equal(body_of(f.resp[k]), "ok\n");
            assert_true(f.secs[k] < 5.0);
        }
        assert_true(f.peak_conns <= o.max_conns);
        gq_httpd_stats(f.h, &s);
        assert_int_equal(s.responses, NPROBE);
        /* the cap held: all but max_conns of the slow ones were closed */
        assert_true(s.evicted + s.timeouts >= (uint64_t)(NSLOW - o.max_conns));
        if (run == 1)
            assert_int_equal(s.timeouts, 0);
        fx_stop(&f);
    }
}

/* The head deadline: a silent client and one dribbling a byte every 50 ms
 * are both dropped at head_timeout_s, long before timeout_s. */
static int closed_by_peer(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static void client_head_deadline(struct fx *f)
{
    static const char head[] = "GET /readyz?ready=1 HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int fds[2] = {connect_port(f->port), connect_port(f->port)};
    double t0 = now_s();
    size_t off = 0;
    while (now_s() - t0 < 8.0 && (!f->sh->closed_at[0] || !f->sh->closed_at[1])) {
        if (!f->sh->closed_at[1] && fds[1] >= 0 &&
            send(fds[1], head + off % (sizeof head - 1), 1, MSG_NOSIGNAL) < 0)
            f->sh->closed_at[1] = now_s() - t0;
        off++;
        for (int i = 0; i < 2; i++)
            if (!f->sh->closed_at[i] && fds[i] >= 0 && closed_by_peer(fds[i]))
                f->sh->closed_at[i] = now_s() - t0;
        usleep(50 * 1000);
    }
    exchange(f, 0, S("GET /readyz?ready=1 HTTP/1.1\r\n\r\n"));
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void test_head_deadline(void **st)
{
    struct fx f;
    struct gq_httpd_opts o;
    struct gq_httpd_stats s;
    (void)st;
    gq_httpd_opts_default(&o);
    o.timeout_s = 20;
    o.head_timeout_s = 0.3;
    fx_start(&f, &o);
    fx_run(&f, client_head_deadline);
    for (int i = 0; i < 2; i++) {
        assert_true(f.sh->closed_at[i] >= 0.2);
        assert_true(f.sh->closed_at[i] < 5.0); /* at the head deadline, not at 20 s */
    }
    assert_int_equal(status_of(f.resp[0]), 200);
    gq_httpd_stats(f.h, &s);
    assert_int_equal(s.timeouts, 2);
    assert_int_equal(s.evicted, 0);
    assert_int_equal(s.responses, 1);
    fx_stop(&f);
}

/* Many clients at once: connect all, then send, then read; one of them pulls a
 * 4 MiB body slowly so the server's writes hit EAGAIN. */
static void client_many(struct fx *f)
{
    int fds[NRESP], i;
    double t0 = now_s();
    for (i = 0; i < 16; i++)
        fds[i] = connect_port(f->port);
    for (i = 0; i < 16; i++) {
        if (fds[i] >= 0 && i == 0)
            send_all(fds[i], S("GET /big HTTP/1.1\r\n\r\n"));
        else if (fds[i] >= 0)
            send_all(fds[i], S("GET /metrics HTTP/1.1\r\n\r\n"));
    }
    usleep(100 * 1000);
    for (i = 15; i >= 0; i--) {
        if (fds[i] < 0)
            continue;
        read_all(f, i, fds[i]);
        close(fds[i]);
    }
    f->sh->secs[0] = now_s() - t0;
}

static void test_many_clients(void **st)
{
    struct fx f;
    struct gq_buf want;
    struct gq_httpd_stats s;
    const char *b;
    int i;
    (void)st;
    fx_start(&f, NULL);
    fx_run(&f, client_many);
    gq_buf_init(&want, 1 << 16);
    assert_int_equal(gq_metrics_render(f.m, &want), 0);
    for (i = 1; i < 16; i++) {
        assert_int_equal(status_of(f.resp[i]), 200);
        assert_string_equal(body_of(f.resp[i]), want.p);
    }
    assert_int_equal(status_of(f.resp[0]), 200);
    b = body_of(f.resp[0]);
    assert_int_equal(f.resplen[0] - (size_t)(b - f.resp[0]), 4u << 20);
    assert_memory_equal(b, "000000000000000000000000000000000000000000000000000000000000000\n",
                        64);
    assert_memory_equal(b + (4u << 20) - 64,
                        "000000000000000000000000000000000000000000000000000000000065535\n",
                        64);
    assert_true(f.peak_conns >= 2); /* they really were open at the same time */
    gq_httpd_stats(f.h, &s);
    assert_int_equal(s.responses, 16);
    gq_buf_release(&want);
    fx_stop(&f);
}

static void test_bad_options(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct gq_httpd *h = (struct gq_httpd *)1;
    struct gq_httpd_opts o;
    char err[256];
    (void)st;
    gq_httpd_opts_default(&o);
    o.listen = "127.0.0.1";
    assert_int_equal(gq_httpd_new(loop, &o, &h, err, sizeof err), GQ_EINVAL);
    assert_null(h);
    assert_non_null(strstr(err, "127.0.0.1"));
    o.listen = "127.0.0.1:70000";
    assert_int_equal(gq_httpd_new(loop, &o, &h, err, sizeof err), GQ_EINVAL);
    o.listen = "not-an-ip:80";
    assert_int_equal(gq_httpd_new(loop, &o, &h, err, sizeof err), GQ_EINVAL);
    o.listen = "[::1]:0";
    if (gq_httpd_new(loop, &o, &h, err, sizeof err) == 0) { /* host may lack IPv6 */
        assert_true(gq_httpd_port(h) > 0);
        assert_int_equal(gq_httpd_route(h, "nope", h_fail, NULL), GQ_EINVAL);
        gq_httpd_free(h);
    }
    o.listen = "127.0.0.1:0";
    assert_int_equal(gq_httpd_new(loop, &o, &h, err, sizeof err), 0);
    for (int i = 0; i < GQ_HTTPD_MAX_ROUTES; i++) {
        char p[32];
        snprintf(p, sizeof p, "/r%d", i);
        assert_int_equal(gq_httpd_route(h, p, h_fail, NULL), 0);
    }
    assert_int_equal(gq_httpd_route(h, "/r0", h_ready, NULL), 0); /* replace is fine */
    assert_int_equal(gq_httpd_route(h, "/one-more", h_fail, NULL), GQ_ELIMIT);
    gq_httpd_free(h);
    gq_httpd_free(NULL);
    ev_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_and_statuses),
        cmocka_unit_test(test_oversized_head),
        cmocka_unit_test(test_silent_client_dropped),
        cmocka_unit_test(test_connection_cap),
        cmocka_unit_test(test_probes_under_slow_clients),
        cmocka_unit_test(test_head_deadline),
        cmocka_unit_test(test_many_clients),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
