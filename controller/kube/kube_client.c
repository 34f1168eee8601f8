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
 *
 * Lanes: a plain request waits in the FIFO of its priority (critical, normal,
 * low) for an in-flight slot; slots go to the critical lane first, except
 * that a waiting normal lane keeps reserved_normal of them (critical work
 * never starves it), the normal and low lanes never hold the last
 * reserved_critical slots, and the low lane at most max_inflight_low.
 * Exempt requests (Lease) skip all of it.
 * A request with a coalesce key (an object's status path) is serialised per
 * key: at most one in flight ("active") and one waiting ("pending", in its
 * lane, or held off the lanes while the active one runs); a newer request
 * replaces the pending one, which then ends without being sent
 * (not_sent = SUPERSEDED). The low lane is bounded: when full, its oldest
 * request ends not sent (DROPPED). Requests that end without being sent are
 * completed from the kick timer, never inside the call that displaced them.
 *
 * Connections: requests share one HTTP/2 connection (CURLOPT_PIPEWAIT); a
 * stream (watch) has an HTTP/1.1 connection of its own (see setup_easy), in
 * a multi handle of its own (struct kube_multi).
 */
#include "kube.h"
#include "kube_int.h"
#include "log.h"
#include "cmd.h"
#include "yamljson.h"

#include <curl/curl.h>
#include <ev.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_MAX_BODY (64u << 20)

/* Longest request URL (server + path) and header line, NUL included. */
#define KUBE_URL_MAX 16384
/* Finished requests' curl handles kept for the next ones (curl_easy_reset):
 * a new handle per request allocated and freed curl's state and its 16 KB
 * receive buffer every time (malloc consolidation, page faults and heap
 * trimming were a tenth of the controller's CPU). At most this many idle. */
#define KUBE_EASY_IDLE_MAX 32

/* A list of requests through their tnext/tprev links (the kick timer's). */
struct kube_rlist {
    struct kube_req *head, *tail;
};

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
    int queued;     /* in its lane's FIFO, waiting for an in-flight slot */
    int counted;    /* holds one of the max_inflight slots */
    int prio;       /* enum kube_prio */
    int rank;       /* its order within its lane: higher first (kube_client_set_rank) */
    int held;       /* pending behind its key's active request (in no lane) */
    int not_sent;   /* KUBE_NOT_SENT_*: ends from the kick timer, never sent */
    struct kube_ckey *ck; /* its coalesce key (NULL = none) */
    struct kube_nsq *nsq; /* its namespace's count while it waits in the low lane */
    struct kube_req *qnext, *qprev;
    struct kube_req *nsnext, *nsprev; /* on the not-sent list (not_sent set) */
    /* on one of the kick timer's lists (c->todo, c->failed), or NULL */
    struct kube_req *tnext, *tprev;
    struct kube_rlist *on;
    double t_queued;  /* ev_now when it was put in line (plain requests) */
    double t_started; /* ev_now when it got its slot (or was sent: exempt); 0 = not yet */
    int cancelled;
    int in_cb;      /* its final callback is on the stack */
    int abort_rc;   /* rc chosen by on_data to stop the stream */
    int body_shared; /* body is a gq_sstr text (a reference, put at the end) */
    int discard_ok; /* a 2xx answer's body is not kept (kube_req_opts.discard_ok_body) */
    char method[16];
    /* path and content type (owned) until the curl handle is made: a request
     * waiting in a lane holds no curl handle (ensure_easy, at its slot) */
    char *path, *ctype;
    char *errbuf;   /* CURL_ERROR_SIZE bytes, owned, made with its curl handle
                     * (thousands of requests may wait in the lanes without one) */
    struct kube_req *prev, *next;
};

/* Requests for one object, serialised: active is in flight, pending waits. */
struct kube_ckey {
    char *key;
    struct kube_ckey *next; /* hash chain */
    struct kube_req *active;
    struct kube_req *pending;
};

/* Keyed requests of one namespace in the low lane: n waiting, refs made
 * (freed when no request refers to it). */
#define KUBE_NS_MAX 64 /* a DNS label (63) and its NUL */
struct kube_nsq {
    char ns[KUBE_NS_MAX];
    size_t n, refs;
    struct kube_nsq *next; /* hash chain */
};
#define KUBE_NSQ_BUCKETS 256

struct kube_lane {
    struct kube_req *head, *tail; /* FIFO of requests waiting for a slot */
    size_t n;                     /* in the FIFO */
    size_t held;                  /* held behind their key's active request */
    size_t inflight;              /* holding a slot */
};

/* A curl multi handle with its timer: KUBE_MULTI_REQ for requests (one
 * HTTP/2 connection), KUBE_MULTI_STREAM for watches (an HTTP/1.1 connection
 * each). Two connection caches: in one, curl 7.88 made a request wait
 * (CURLOPT_PIPEWAIT) for a watch's connection being set up, for good when
 * that connection turned out HTTP/1.1. */
enum { KUBE_MULTI_REQ, KUBE_MULTI_STREAM, KUBE_NMULTI };
struct kube_multi {
    CURLM *m;
    ev_timer timer; /* curl's timeout */
    struct kube_client *c;
};

struct kube_sock {
    ev_io io;
    curl_socket_t fd;
    struct kube_multi *mu;
};

struct kube_client {
    struct ev_loop *loop;
    struct kube_config cfg;
    struct kube_client_opts opts;
    char user_agent[64];
    struct kube_multi mu[KUBE_NMULTI];
    ev_timer kick;  /* deferred adds/removes */
    struct kube_req *reqs; /* every live request (queued, running) */
    size_t nreqs;
    size_t inflight;       /* plain requests holding a slot */
    struct kube_lane lanes[KUBE_NPRIO]; /* KUBE_PRIO_EXEMPT's stays empty */
    struct kube_ckey **ckeys; /* coalesce keys in use (hash table) */
    size_t nckeys, nbckeys;
    struct kube_nsq **nsqs;   /* KUBE_NSQ_BUCKETS chains, made on first use */
    struct kube_req *nshead, *nstail; /* to complete as not sent (kick timer), in order */
    /* what the kick timer has to do, so it never walks every request (most
     * wait in the lanes): requests given a slot or cancelled inside curl's
     * callbacks (todo), and adds that failed (failed), each in order */
    struct kube_rlist todo, failed;
    struct kube_client_stats st; /* totals; the gauges are filled in by get_stats */
    int rank;                    /* given to requests made from now on (kube_client_set_rank) */
    int in_curl;
    double token_read_at;
    CURL *idle[KUBE_EASY_IDLE_MAX]; /* reset handles for the next requests (owned) */
    size_t nidle;
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

/* The multi handle a request's easy handle belongs to. */
static CURLM *req_multi(const struct kube_client *c, const struct kube_req *r)
{
    return c->mu[r->stream ? KUBE_MULTI_STREAM : KUBE_MULTI_REQ].m;
}

static void sock_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct kube_sock *s = w->data;
    struct kube_client *c = s->mu->c;
    int action = 0, running = 0;
    (void)loop;
    if (revents & EV_READ)
        action |= CURL_CSELECT_IN;
    if (revents & EV_WRITE)
        action |= CURL_CSELECT_OUT;
    c->in_curl++;
    curl_multi_socket_action(s->mu->m, s->fd, action, &running);
    c->in_curl--;
    check_done(c);
}

static int socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct kube_multi *mu = userp;
    struct kube_client *c = mu->c;
    struct kube_sock *s = socketp;
    int events = 0;
    (void)e;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            ev_io_stop(c->loop, &s->io);
            free(s);
            curl_multi_assign(mu->m, fd, NULL);
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
        s->mu = mu;
        ev_io_init(&s->io, sock_io_cb, fd, events);
        s->io.data = s;
        curl_multi_assign(mu->m, fd, s);
    } else {
        ev_io_stop(c->loop, &s->io);
        ev_io_set(&s->io, fd, events);
    }
    ev_io_start(c->loop, &s->io);
    return 0;
}

static void timer_ev_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_multi *mu = w->data;
    struct kube_client *c = mu->c;
    int running = 0;
    (void)loop;
    (void)revents;
    c->in_curl++;
    curl_multi_socket_action(mu->m, CURL_SOCKET_TIMEOUT, 0, &running);
    c->in_curl--;
    check_done(c);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct kube_multi *mu = userp;
    struct ev_loop *loop = mu->c->loop;
    (void)multi;
    ev_timer_stop(loop, &mu->timer);
    if (timeout_ms >= 0) {
        ev_timer_set(&mu->timer, (double)timeout_ms / 1000.0, 0.);
        ev_timer_start(loop, &mu->timer);
    }
    return 0;
}

static void schedule_kick(struct kube_client *c);

/* ------------------------------------------------------------- lanes */

static struct kube_ckey *ckey_find(const struct kube_client *c, const char *key)
{
    if (!c->nbckeys)
        return NULL;
    for (struct kube_ckey *k = c->ckeys[gq_hash_str(key) % c->nbckeys]; k; k = k->next)
        if (!strcmp(k->key, key))
            return k;
    return NULL;
}

static struct kube_ckey *ckey_get(struct kube_client *c, const char *key)
{
    struct kube_ckey *k = ckey_find(c, key);
    if (k)
        return k;
    if (c->nckeys + 1 > c->nbckeys) {
        size_t nb = c->nbckeys ? c->nbckeys * 2 : 64;
        struct kube_ckey **b = calloc(nb, sizeof *b);
        if (!b)
            return NULL;
        for (size_t i = 0; i < c->nbckeys; i++) {
            struct kube_ckey *e, *next;
            for (e = c->ckeys[i]; e; e = next) {
                size_t h = gq_hash_str(e->key) % nb;
                next = e->next;
                e->next = b[h];
                b[h] = e;
            }
        }
        free(c->ckeys);
        c->ckeys = b;
        c->nbckeys = nb;
    }
    k = calloc(1, sizeof *k);
    if (!k || !(k->key = strdup(key))) {
        free(k);
        return NULL;
    }
    size_t h = gq_hash_str(key) % c->nbckeys;
    k->next = c->ckeys[h];
    c->ckeys[h] = k;
    c->nckeys++;
    return k;
}

/* Free k when no request refers to it any more. */
static void ckey_release(struct kube_client *c, struct kube_ckey *k)
{
    if (!k || k->active || k->pending)
        return;
    struct kube_ckey **pp = &c->ckeys[gq_hash_str(k->key) % c->nbckeys];
    while (*pp && *pp != k)
        pp = &(*pp)->next;
    if (*pp)
        *pp = k->next;
    c->nckeys--;
    free(k->key);
    free(k);
}

/* The namespace a request path names ("/api/v1/namespaces/NS/...",
 * "/apis/G/V/namespaces/NS/..."), into out; 0 when none (or too long). */
static int path_ns(const char *path, char *out, size_t len)
{
    static const char seg[] = "/namespaces/";
    const char *p = path ? strstr(path, seg) : NULL;
    if (!p)
        return 0;
    p += sizeof(seg) - 1;
    size_t n = strcspn(p, "/?");
    if (!n || n >= len)
        return 0;
    memcpy(out, p, n);
    out[n] = 0;
    return 1;
}

static struct kube_nsq *nsq_find(const struct kube_client *c, const char *ns)
{
    if (!c->nsqs)
        return NULL;
    for (struct kube_nsq *q = c->nsqs[gq_hash_str(ns) % KUBE_NSQ_BUCKETS]; q; q = q->next)
        if (!strcmp(q->ns, ns))
            return q;
    return NULL;
}

/* ns's entry with one more reference (made on first use); NULL without memory. */
static struct kube_nsq *nsq_ref(struct kube_client *c, const char *ns)
{
    struct kube_nsq *q = nsq_find(c, ns);
    if (!q) {
        if (!c->nsqs && !(c->nsqs = calloc(KUBE_NSQ_BUCKETS, sizeof(*c->nsqs))))
            return NULL;
        if (!(q = calloc(1, sizeof(*q))))
            return NULL;
        gq_strlcpy(q->ns, ns, sizeof(q->ns));
        size_t h = gq_hash_str(ns) % KUBE_NSQ_BUCKETS;
        q->next = c->nsqs[h];
        c->nsqs[h] = q;
    }
    q->refs++;
    return q;
}

static void nsq_unref(struct kube_client *c, struct kube_nsq *q)
{
    if (!q || --q->refs)
        return;
    struct kube_nsq **pp = &c->nsqs[gq_hash_str(q->ns) % KUBE_NSQ_BUCKETS];
    while (*pp && *pp != q)
        pp = &(*pp)->next;
    if (*pp)
        *pp = q->next;
    free(q);
}

/* The most keyed writes of one namespace that may wait in the low lane: a
 * quarter of it (at least one), so one namespace's flood of cosmetic writes
 * leaves room for every other's. */
static size_t nsq_share(const struct kube_client *c)
{
    return c->opts.max_queued_low / 4 ? c->opts.max_queued_low / 4 : 1;
}

/* The last request of r's lane, at or before `after` (NULL: none, r goes
 * first), that r does not outrank: where r goes. */
static struct kube_req *rank_place(const struct kube_req *r, struct kube_req *after)
{
    while (after && after->rank < r->rank)
        after = after->qprev;
    return after;
}

/* Link r into its lane right after `after` (NULL: at the head). */
static void lane_link(struct kube_client *c, struct kube_req *r, struct kube_req *after)
{
    struct kube_lane *l = &c->lanes[r->prio];
    r->qprev = after;
    r->qnext = after ? after->qnext : l->head;
    if (r->qnext)
        r->qnext->qprev = r;
    else
        l->tail = r;
    if (after)
        after->qnext = r;
    else
        l->head = r;
    l->n++;
    r->queued = 1;
    if (r->nsq && r->prio == KUBE_PRIO_LOW)
        r->nsq->n++;
}

/* A new request joins its lane behind every waiting one of its rank or
 * above: higher ranks first, first come first served among equals. Ranks
 * take few values and most requests arrive at the lowest one waiting, so the
 * walk back from the tail is short. */
static void lane_push(struct kube_client *c, struct kube_req *r)
{
    lane_link(c, r, rank_place(r, c->lanes[r->prio].tail));
}

static void lane_remove(struct kube_client *c, struct kube_req *r)
{
    struct kube_lane *l = &c->lanes[r->prio];
    if (!r->queued)
        return;
    if (r->qprev)
        r->qprev->qnext = r->qnext;
    else
        l->head = r->qnext;
    if (r->qnext)
        r->qnext->qprev = r->qprev;
    else
        l->tail = r->qprev;
    r->qprev = r->qnext = NULL;
    r->queued = 0;
    l->n--;
    if (r->nsq && r->prio == KUBE_PRIO_LOW)
        r->nsq->n--;
}

/* Take r out of every queue and key; it ends, not sent, from the kick timer. */
static void mark_not_sent(struct kube_client *c, struct kube_req *r, int why)
{
    lane_remove(c, r);
    if (r->held) {
        r->held = 0;
        c->lanes[r->prio].held--;
    }
    if (r->ck) {
        if (r->ck->pending == r)
            r->ck->pending = NULL;
        ckey_release(c, r->ck);
        r->ck = NULL;
    }
    r->not_sent = why;
    if (why == KUBE_NOT_SENT_DROPPED)
        c->st.dropped[r->prio]++;
    else
        c->st.coalesced++;
    r->nsnext = NULL;
    r->nsprev = c->nstail;
    if (c->nstail)
        c->nstail->nsnext = r;
    else
        c->nshead = r;
    c->nstail = r;
    schedule_kick(c);
}

static void ns_remove(struct kube_client *c, struct kube_req *r)
{
    if (!r->not_sent)
        return;
    if (r->nsprev)
        r->nsprev->nsnext = r->nsnext;
    else if (c->nshead == r)
        c->nshead = r->nsnext;
    if (r->nsnext)
        r->nsnext->nsprev = r->nsprev;
    else if (c->nstail == r)
        c->nstail = r->nsprev;
    r->nsprev = r->nsnext = NULL;
    r->not_sent = 0;
}

/* May a request of this priority take a slot now? */
static int can_start(const struct kube_client *c, int prio)
{
    size_t n = c->opts.max_inflight;
    if (c->inflight >= n)
        return 0;
    if (prio == KUBE_PRIO_CRITICAL) {
        /* requests waiting in the normal lane keep their share: the free
         * slots it lacks to hold reserved_normal are left to it */
        const struct kube_lane *nl = &c->lanes[KUBE_PRIO_NORMAL];
        return !nl->head || nl->inflight >= c->opts.reserved_normal ||
               n - c->inflight > c->opts.reserved_normal - nl->inflight;
    }
    if (c->inflight - c->lanes[KUBE_PRIO_CRITICAL].inflight >= n - c->opts.reserved_critical)
        return 0;
    return prio != KUBE_PRIO_LOW || c->lanes[KUBE_PRIO_LOW].inflight < c->opts.max_inflight_low;
}

/* Take r off the kick timer's list it is on (if any). */
static void todo_remove(struct kube_req *r)
{
    struct kube_rlist *l = r->on;
    if (!l)
        return;
    if (r->tprev)
        r->tprev->tnext = r->tnext;
    else
        l->head = r->tnext;
    if (r->tnext)
        r->tnext->tprev = r->tprev;
    else
        l->tail = r->tprev;
    r->tnext = r->tprev = NULL;
    r->on = NULL;
}

/* The order in which one kick hands requests to curl: the Lease and
 * critical writes first, then normal, then low; in order within each. */
static int kick_rank(const struct kube_req *r)
{
    return r->prio == KUBE_PRIO_EXEMPT ? 0 : r->prio;
}

/* Put r on list l of the kick timer (c->todo: to add to curl, or to remove
 * when cancelled, in kick_rank order; c->failed: its add failed, in order)
 * and arm the timer. */
static void todo_push(struct kube_client *c, struct kube_req *r, struct kube_rlist *l)
{
    todo_remove(r);
    struct kube_req *after = l->tail; /* insert after the last one of no higher rank */
    while (l == &c->todo && after && kick_rank(after) > kick_rank(r))
        after = after->tprev;
    r->tprev = after;
    r->tnext = after ? after->tnext : l->head;
    if (r->tnext)
        r->tnext->tprev = r;
    else
        l->tail = r;
    if (after)
        after->tnext = r;
    else
        l->head = r;
    r->on = l;
    schedule_kick(c);
}

static void take_slot(struct kube_client *c, struct kube_req *r)
{
    r->counted = 1;
    r->t_started = ev_now(c->loop);
    c->inflight++;
    c->lanes[r->prio].inflight++;
    c->st.started[r->prio]++;
    if (r->ck) {
        r->ck->active = r;
        if (r->ck->pending == r)
            r->ck->pending = NULL;
    }
}

/* Hand free slots to queued requests, critical lane first; the kick timer
 * adds them to curl. */
static void promote(struct kube_client *c)
{
    for (int p = KUBE_PRIO_CRITICAL; p <= KUBE_PRIO_LOW; p++) {
        struct kube_lane *l = &c->lanes[p];
        while (l->head && can_start(c, p)) {
            struct kube_req *q = l->head;
            lane_remove(c, q);
            take_slot(c, q);
            todo_push(c, q, &c->todo);
        }
    }
}

/* The low lane is bounded: the oldest waiting request of its lowest rank
 * makes room (the lane is in rank order, first come first served within a
 * rank: the first of the tail's rank). */
static void lane_bound(struct kube_client *c)
{
    struct kube_lane *l = &c->lanes[KUBE_PRIO_LOW];
    while (l->n > c->opts.max_queued_low && l->tail) {
        struct kube_req *v = l->tail;
        while (v->qprev && v->qprev->rank == v->rank)
            v = v->qprev;
        mark_not_sent(c, v, KUBE_NOT_SENT_DROPPED);
    }
}

/* Put a new plain request in line (r->prio set; r->ck set when keyed). */
static void enqueue(struct kube_client *c, struct kube_req *r)
{
    struct kube_ckey *k = r->ck;
    if (k && k->pending) {
        /* a newer write for the same object replaces the one not yet sent;
         * it keeps the older one's place (or a better one its rank gives)
         * and the higher of both priorities and ranks */
        struct kube_req *old = k->pending;
        if (old->prio < r->prio)
            r->prio = old->prio;
        if (old->rank > r->rank)
            r->rank = old->rank;
        k->pending = r;
        if (old->held) {
            r->held = 1;
            c->lanes[r->prio].held++;
        } else if (old->queued && old->prio == r->prio) {
            /* old's place, or further up when r's rank is higher (the lane
             * is in rank order, so an equal rank stops at old's place) */
            struct kube_req *after = rank_place(r, old->qprev);
            lane_remove(c, old);
            lane_link(c, r, after);
        } else {
            lane_push(c, r);
        }
        mark_not_sent(c, old, KUBE_NOT_SENT_SUPERSEDED);
        return;
    }
    if (k)
        k->pending = r;
    if (k && k->active) {
        r->held = 1; /* one write per object on the wire, in order */
        c->lanes[r->prio].held++;
        return;
    }
    lane_push(c, r);
    if (r->prio == KUBE_PRIO_LOW)
        lane_bound(c);
}

/* Take r off the client's lists; frees its slot for the next queued one. */
static void req_unlink(struct kube_req *r)
{
    struct kube_client *c = r->c;
    lane_remove(c, r);
    ns_remove(c, r);
    todo_remove(r);
    if (r->held) {
        r->held = 0;
        c->lanes[r->prio].held--;
    }
    if (r->ck) {
        struct kube_ckey *k = r->ck;
        r->ck = NULL;
        if (k->pending == r)
            k->pending = NULL;
        if (k->active == r) {
            k->active = NULL;
            if (k->pending && k->pending->held) {
                struct kube_req *q = k->pending;
                q->held = 0;
                c->lanes[q->prio].held--;
                lane_push(c, q);
                if (q->prio == KUBE_PRIO_LOW)
                    lane_bound(c);
            }
        }
        ckey_release(c, k);
    }
    if (r->counted) {
        r->counted = 0;
        c->inflight--;
        c->lanes[r->prio].inflight--;
    }
    promote(c);
    if (r->prev)
        r->prev->next = r->next;
    else if (c->reqs == r)
        c->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->nreqs--;
}

/* A handle no longer in the multi: kept (reset) for a later request, or freed. */
static void easy_release(struct kube_client *c, CURL *e)
{
    if (!e)
        return;
    if (c->nidle < KUBE_EASY_IDLE_MAX) {
        curl_easy_reset(e);
        c->idle[c->nidle++] = e;
    } else {
        curl_easy_cleanup(e);
    }
}

static void req_destroy(struct kube_req *r)
{
    if (!r)
        return;
    easy_release(r->c, r->easy); /* reset first: it no longer points at errbuf */
    nsq_unref(r->c, r->nsq);
    curl_slist_free_all(r->headers);
    free(r->errbuf);
    if (r->body_shared)
        gq_sstr_put(r->body);
    else
        free(r->body);
    free(r->path);
    free(r->ctype);
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
    if (r->easy)
        curl_multi_remove_handle(req_multi(c, r), r->easy);
    r->added = 0;
    if (!r->stream && r->t_started > 0) {
        /* where its time went: waiting for a slot, then on the wire */
        double now = ev_now(c->loop);
        c->st.finished[r->prio]++;
        c->st.wait_s[r->prio] += r->t_started > r->t_queued ? r->t_started - r->t_queued : 0;
        c->st.wire_s[r->prio] += now > r->t_started ? now - r->t_started : 0;
    }
    req_unlink(r);
    if (r->cancelled || !r->cb) {
        req_destroy(r);
        return;
    }
    if (r->easy) {
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &path);
    }
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
                 r->errbuf && r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
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

/* A request displaced before it was sent (superseded, or dropped from the
 * low lane): its callback gets rc GQ_ELIMIT, status 0 and not_sent set. */
static void finish_not_sent(struct kube_req *r)
{
    struct kube_client *c = r->c;
    struct kube_response resp;
    char msg[160];
    int why = r->not_sent;
    req_unlink(r);
    if (!r->cb) {
        req_destroy(r);
        return;
    }
    memset(&resp, 0, sizeof resp);
    resp.rc = GQ_ELIMIT;
    resp.retry_after = -1;
    resp.body = "";
    resp.not_sent = why;
    snprintf(msg, sizeof msg, "%s: not sent: %s", r->method,
             why == KUBE_NOT_SENT_DROPPED ? "dropped from the full low-priority queue"
                                                  : "replaced by a newer write to the same object");
    resp.errmsg = msg;
    if (gq_log_on(c->opts.log_level, GQ_LOG_DEBUG))
        gq_log(c->opts.log_level, GQ_LOG_DEBUG, KUBE_LOG_MOD, msg, NULL);
    r->in_cb = 1;
    r->cb(&resp, r->ud);
    req_destroy(r);
}

static void check_done(struct kube_client *c)
{
    CURLMsg *m;
    int left;
    for (int i = 0; i < KUBE_NMULTI; i++)
        while ((m = curl_multi_info_read(c->mu[i].m, &left)) != NULL) {
            struct kube_req *r = NULL;
            if (m->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            if (r)
                finish(r, m->data.result);
        }
}

static int ensure_easy(struct kube_client *c, struct kube_req *r);

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_client *c = w->data;
    struct kube_req *r;
    (void)loop;
    (void)revents;
    /* unlinking a request promotes others onto the list: take the head each time */
    while ((r = c->todo.head) != NULL) {
        todo_remove(r);
        if (r->cancelled) {
            if (r->added)
                curl_multi_remove_handle(req_multi(c, r), r->easy);
            req_unlink(r);
            req_destroy(r);
        } else if (!r->added && !r->queued && !r->held && !r->not_sent) {
            if (ensure_easy(c, r) == GQ_OK && curl_multi_add_handle(req_multi(c, r), r->easy) == CURLM_OK)
                r->added = 1;
            else
                todo_push(c, r, &c->failed); /* short of memory: reported below */
        }
    }
    /* A callback may cancel any other request (which leaves the list): take the head each time. */
    while ((r = c->failed.head) != NULL) {
        todo_remove(r);
        if (!r->cancelled)
            finish(r, CURLE_OUT_OF_MEMORY);
    }
    /* (a callback may cancel or displace others: take the head each time) */
    while ((r = c->nshead) != NULL) {
        if (r->cancelled)
            ns_remove(c, r); /* freed by the kick its cancellation scheduled */
        else
            finish_not_sent(r);
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
    if (c->opts.reserved_critical == 0)
        c->opts.reserved_critical = c->opts.max_inflight / 4;
    if (c->opts.reserved_critical >= c->opts.max_inflight)
        c->opts.reserved_critical = c->opts.max_inflight - 1;
    if (c->opts.reserved_normal == 0)
        c->opts.reserved_normal = c->opts.max_inflight / 4;
    if (c->opts.reserved_normal > c->opts.max_inflight - c->opts.reserved_critical)
        c->opts.reserved_normal = c->opts.max_inflight - c->opts.reserved_critical;
    if (c->opts.max_inflight_low == 0)
        c->opts.max_inflight_low = c->opts.max_inflight / 4 ? c->opts.max_inflight / 4 : 1;
    if (c->opts.max_queued_low == 0)
        c->opts.max_queued_low = 1024;
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
    for (int i = 0; i < KUBE_NMULTI; i++) {
        struct kube_multi *mu = &c->mu[i];
        mu->c = c;
        if (!(mu->m = curl_multi_init())) {
            gq_errf(err, errlen, "kube client: curl_multi_init failed");
            while (i--)
                curl_multi_cleanup(c->mu[i].m);
            kube_config_release(&c->cfg);
            free(c);
            return NULL;
        }
        curl_multi_setopt(mu->m, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(mu->m, CURLMOPT_SOCKETDATA, mu);
        curl_multi_setopt(mu->m, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(mu->m, CURLMOPT_TIMERDATA, mu);
        ev_timer_init(&mu->timer, timer_ev_cb, 0., 0.);
        mu->timer.data = mu;
    }
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
            curl_multi_remove_handle(req_multi(c, r), r->easy);
        req_destroy(r);
    }
    c->reqs = NULL;
    for (size_t i = 0; i < c->nbckeys; i++) {
        struct kube_ckey *k, *knext;
        for (k = c->ckeys[i]; k; k = knext) {
            knext = k->next;
            free(k->key);
            free(k);
        }
    }
    free(c->ckeys);
    free(c->nsqs); /* empty: each request freed above released its entry */
    while (c->nidle)
        curl_easy_cleanup(c->idle[--c->nidle]);
    ev_timer_stop(c->loop, &c->kick);
    /* cleanup calls socket_cb(REMOVE) for sockets still open, freeing them */
    for (int i = 0; i < KUBE_NMULTI; i++) {
        ev_timer_stop(c->loop, &c->mu[i].timer);
        curl_multi_cleanup(c->mu[i].m);
    }
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
    if (r->discard_ok) {
        if (r->status == 0)
            curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
        if (r->status >= 200 && r->status < 300)
            return len; /* read only for its status */
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

/* curl's OpenSSL connections release their TLS read buffer whenever it
 * empties (SSL_MODE_RELEASE_BUFFERS): an allocation and a free of about
 * 17 KB per read, and a malloc that large merges glibc's fast bins each time
 * (3 % of the controller's CPU in the Kueue benchmark at full scale). The
 * client keeps a handful of connections: their buffers stay. Other TLS
 * backends never call this. */
static CURLcode ssl_ctx_cb(CURL *e, void *ssl_ctx, void *ud)
{
    (void)e;
    (void)ud;
    SSL_CTX_clear_mode((SSL_CTX *)ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
    return CURLE_OK;
}

static int setup_easy(struct kube_client *c, struct kube_req *r, const char *path,
                      const char *content_type)
{
    struct gq_buf url, hdr;
    int rc = GQ_ENOMEM;
    CURL *e;
    gq_buf_init(&url, KUBE_URL_MAX);
    gq_buf_init(&hdr, KUBE_URL_MAX);
    if (!r->errbuf && !(r->errbuf = calloc(1, CURL_ERROR_SIZE)))
        goto out;
    r->easy = e = c->nidle ? c->idle[--c->nidle] : curl_easy_init();
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
    /* A watch gets a connection of its own (HTTP/1.1): multiplexed on the
     * writes' HTTP/2 connection, its events waited behind that connection's
     * traffic in the API server (one serving goroutine per connection; when
     * the API server is short of CPU, a new GPUJob reached the controller
     * 15.5 s after its create on average, against 1.6 s on its own
     * connection; Kueue benchmark at scale 0.3). Everything else shares the
     * HTTP/2 connection. */
    if (r->stream)
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
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
    (void)curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_cb); /* CURLE_NOT_BUILT_IN: not OpenSSL */
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

/* The curl handle of r, made when it is about to be sent (its path and
 * content type are kept until then). GQ_ENOMEM or 0. */
static int ensure_easy(struct kube_client *c, struct kube_req *r)
{
    if (r->easy)
        return GQ_OK;
    maybe_reload_token(c);
    int rc = setup_easy(c, r, r->path ? r->path : "/", r->ctype);
    if (rc) {
        easy_release(c, r->easy);
        r->easy = NULL;
        curl_slist_free_all(r->headers);
        r->headers = NULL;
    }
    return rc;
}

static int start(struct kube_client *c, const struct kube_req_opts *ro, const char *method,
                 const char *path, const char *content_type, const char *body, int stream,
                 kube_data_cb on_data, kube_response_cb cb, void *ud, struct kube_req **out)
{
    struct kube_req *r;
    int rc, prio = ro ? (int)ro->prio : KUBE_PRIO_NORMAL;
    const char *key = ro && ro->coalesce_key && *ro->coalesce_key ? ro->coalesce_key : NULL;
    if (out)
        *out = NULL;
    if (!path || path[0] != '/' || !method || strlen(method) >= sizeof r->method)
        return GQ_EINVAL;
    if (prio < KUBE_PRIO_CRITICAL || prio >= KUBE_NPRIO ||
        (key && (stream || prio == KUBE_PRIO_EXEMPT)))
        return GQ_EINVAL;
    if (kube_client_would_refuse(c, (enum kube_prio)prio, key)) {
        c->st.refused++;
        return GQ_EBUSY;
    }
    r = calloc(1, sizeof *r);
    if (!r)
        return GQ_ENOMEM;
    r->c = c;
    r->cb = cb;
    r->on_data = on_data;
    r->ud = ud;
    r->stream = stream;
    r->prio = stream ? KUBE_PRIO_EXEMPT : prio;
    r->rank = c->rank;
    if (key && prio == KUBE_PRIO_LOW) {
        char ns[KUBE_NS_MAX];
        if (path_ns(key, ns, sizeof(ns)) && !(r->nsq = nsq_ref(c, ns))) {
            free(r);
            return GQ_ENOMEM;
        }
    }
    r->retry_after = -1;
    gq_strlcpy(r->method, method, sizeof r->method);
    gq_buf_init(&r->resp, stream ? (size_t)1 << 20 : c->opts.max_body);
    if (body && ro && ro->body_shared) {
        r->body = (char *)(uintptr_t)gq_sstr_ref(body);
        r->body_shared = 1;
    } else if (body && !(r->body = strdup(body))) {
        req_destroy(r);
        return GQ_ENOMEM;
    }
    r->discard_ok = ((ro && ro->discard_ok_body) || !cb) && !stream; /* no callback: nobody reads it */
    if (strlen(c->cfg.server) + strlen(path) >= KUBE_URL_MAX) {
        req_destroy(r); /* setup_easy's URL bound, checked now */
        return GQ_EINVAL;
    }
    if (r->prio == KUBE_PRIO_EXEMPT) {
        /* sent at once: its handle now */
        maybe_reload_token(c);
        if ((rc = setup_easy(c, r, path, content_type))) {
            req_destroy(r);
            return rc;
        }
    } else if (!(r->path = strdup(path)) || (content_type && !(r->ctype = strdup(content_type)))) {
        req_destroy(r);
        return GQ_ENOMEM;
    }
    if (key && !(r->ck = ckey_get(c, key))) {
        req_destroy(r);
        return GQ_ENOMEM;
    }
    /* link */
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    c->nreqs++;
    r->t_queued = ev_now(c->loop);
    if (r->prio != KUBE_PRIO_EXEMPT) {
        enqueue(c, r);
        promote(c); /* r goes now if its lane is empty and a slot is free */
    } else {
        c->st.started[KUBE_PRIO_EXEMPT]++;
        r->t_started = r->t_queued;
        if (c->in_curl) {
            todo_push(c, r, &c->todo);
        } else if (curl_multi_add_handle(req_multi(c, r), r->easy) != CURLM_OK) {
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
    return start(c, NULL, method, path, content_type, body, 0, NULL, cb, userdata, NULL);
}

int kube_request_h(struct kube_client *c, const char *method, const char *path,
                   const char *content_type, const char *body, kube_response_cb cb,
                   void *userdata, struct kube_req **out)
{
    return start(c, NULL, method, path, content_type, body, 0, NULL, cb, userdata, out);
}

int kube_request_ex(struct kube_client *c, const struct kube_req_opts *ro, const char *method,
                    const char *path, const char *content_type, const char *body,
                    kube_response_cb cb, void *userdata, struct kube_req **out)
{
    return start(c, ro, method, path, content_type, body, 0, NULL, cb, userdata, out);
}

int kube_stream(struct kube_client *c, const char *path, kube_data_cb on_data,
                kube_response_cb on_done, void *userdata, struct kube_req **out)
{
    return start(c, NULL, "GET", path, NULL, NULL, 1, on_data, on_done, userdata, out);
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
        todo_push(c, r, &c->todo); /* removed outside curl's callbacks */
        return;
    }
    if (r->added)
        curl_multi_remove_handle(req_multi(c, r), r->easy);
    req_unlink(r);
    req_destroy(r);
}

int kube_client_would_refuse(const struct kube_client *c, enum kube_prio prio, const char *key)
{
    /* a full low lane, or its namespace's share of it taken: a keyed write
     * waits with its owner, not here (unless it replaces its key's waiting
     * write) */
    if (prio != KUBE_PRIO_LOW || !key || !*key)
        return 0;
    size_t n = c->lanes[KUBE_PRIO_LOW].n;
    if (n < nsq_share(c))
        return 0; /* no namespace can hold its share yet: no path to parse */
    if (n < c->opts.max_queued_low) {
        char ns[KUBE_NS_MAX];
        const struct kube_nsq *q = path_ns(key, ns, sizeof(ns)) ? nsq_find(c, ns) : NULL;
        if (!q || q->n < nsq_share(c))
            return 0;
    }
    struct kube_ckey *k = ckey_find(c, key);
    return !k || !k->pending;
}

int kube_client_set_rank(struct kube_client *c, int rank)
{
    int was = c->rank;
    c->rank = rank;
    return was;
}

size_t kube_client_queued(const struct kube_client *c)
{
    size_t n = 0;
    for (int p = 0; p < KUBE_NPRIO; p++)
        n += c->lanes[p].n + c->lanes[p].held;
    return n;
}

void kube_client_get_stats(const struct kube_client *c, struct kube_client_stats *st)
{
    *st = c->st;
    for (int p = 0; p < KUBE_NPRIO; p++) {
        st->queued[p] = c->lanes[p].n + c->lanes[p].held;
        st->inflight[p] = c->lanes[p].inflight;
    }
    st->inflight[KUBE_PRIO_EXEMPT] = 0;
    st->handles = 0;
    for (const struct kube_req *r = c->reqs; r; r = r->next) {
        if (r->prio == KUBE_PRIO_EXEMPT && r->added)
            st->inflight[KUBE_PRIO_EXEMPT]++;
        if (r->easy)
            st->handles++;
    }
}

size_t kube_client_drop_queued(struct kube_client *c, enum kube_prio prio)
{
    size_t n = 0;
    if ((int)prio < KUBE_PRIO_CRITICAL || prio >= KUBE_PRIO_EXEMPT)
        return 0;
    while (c->lanes[prio].head) {
        mark_not_sent(c, c->lanes[prio].head, KUBE_NOT_SENT_DROPPED);
        n++;
    }
    for (struct kube_req *r = c->reqs; r; r = r->next)
        if (r->held && r->prio == (int)prio) {
            mark_not_sent(c, r, KUBE_NOT_SENT_DROPPED);
            n++;
        }
    return n;
}

cJSON *kube_response_json(const struct kube_response *resp)
{
    if (!resp || !resp->body || resp->len == 0)
        return NULL;
    return cJSON_ParseWithLength(resp->body, resp->len);
}
