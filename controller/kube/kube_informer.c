/*
 * kube_informer.c — LIST (paginated) + WATCH with bookmarks, 410 relist,
 * exponential backoff with jitter, and stall detection.
 *
 * States: IDLE -> LISTING -> WATCHING -> (stream ends) WATCHING again from the
 * last resourceVersion; 410 (status or ERROR event), an over-long or broken
 * event line -> LISTING; other failures -> WAITING (backoff) -> the step that
 * failed. Every entry point (request callbacks, timers) holds `depth` so a
 * kube_informer_free() from the owner's handler is deferred until it unwinds.
 *
 * One object cannot stop it: list pages and watch lines are split and parsed
 * object by object (kube_list_page_parse, kube_watch_event_parse_ex); a
 * hostile object is skipped, counted, logged and reported (on_skip). A list
 * page over the client's body cap is fetched again with half the limit (down
 * to 1) from the same continue token; the limit is back to list_limit at the
 * next relist.
 */
#include "kube.h"
#include "kube_int.h"
#include "log.h"

#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum inf_state { ST_IDLE, ST_LISTING, ST_WATCHING, ST_WAITING };

/* Objects currently skipped (named ones only), so an owner that starts caring
 * later (a new leader) can still report them; bounded. */
#define SKIPS_MAX 1024
struct skips {
    struct kube_skipped *v;
    size_t n, cap;
};
/* A watch event held back by opts.event_delay_s (test hook). */
struct delayed {
    struct delayed *next;
    double due;
    struct kube_watch_event ev;
};
enum inf_next { NEXT_LIST, NEXT_WATCH };

struct kube_informer {
    struct kube_client *c;
    struct ev_loop *loop;
    struct kube_informer_opts o; /* strings below are the owned copies */
    struct kube_parse_opts po;   /* how list items and watch objects are taken (from o) */
    char *path, *label_selector, *field_selector, *name;
    struct kube_cache *cache;
    struct kube_lines lines;
    struct kube_backoff backoff;
    uint64_t rng;
    struct kube_req *req;
    ev_timer retry;   /* backoff wait */
    ev_timer stall;   /* stream silence watchdog */
    double last_data; /* ev_now of the last stream bytes */
    double stall_limit;
    double watch_started;
    enum inf_state state;
    enum inf_next next;
    cJSON *pages;     /* items accumulated over list pages */
    struct skips skips;      /* skipped now (the last list's, updated by the watch) */
    struct skips list_skips; /* skipped by the list in progress */
    char cont[4096];  /* list continue token */
    int cur_limit;    /* page size of the current list (halved on an over-cap page) */
    char rv[64];      /* last seen resourceVersion */
    int synced;
    int running;
    int depth;
    int dead;
    int stream_ok;    /* current watch got 2xx bytes */
    int abort_rc;     /* why we aborted the current stream */
    struct kube_informer_stats st;
    struct delayed *dq_head, *dq_tail; /* events waiting for opts.event_delay_s */
    ev_timer delay;
};

static void do_list(struct kube_informer *inf);
static void do_watch(struct kube_informer *inf);

/* Drop the events still held back (the next watch or list brings them again). */
static void delay_clear(struct kube_informer *inf)
{
    while (inf->dq_head) {
        struct delayed *d = inf->dq_head;
        inf->dq_head = d->next;
        kube_watch_event_release(&d->ev);
        free(d);
    }
    inf->dq_tail = NULL;
    ev_timer_stop(inf->loop, &inf->delay);
}

static void destroy(struct kube_informer *inf)
{
    delay_clear(inf);
    kube_req_cancel(inf->req);
    ev_timer_stop(inf->loop, &inf->retry);
    ev_timer_stop(inf->loop, &inf->stall);
    kube_cache_free(inf->cache);
    kube_lines_release(&inf->lines);
    cJSON_Delete(inf->pages);
    free(inf->skips.v);
    free(inf->list_skips.v);
    free(inf->path);
    free(inf->label_selector);
    free(inf->field_selector);
    free(inf->name);
    free(inf);
}

/* leave an entry point; returns 1 when inf was freed */
static int leave(struct kube_informer *inf)
{
    if (--inf->depth == 0 && inf->dead) {
        destroy(inf);
        return 1;
    }
    return 0;
}

static int log_level(const struct kube_informer *inf)
{
    return kube_client_log_level(inf->c);
}

static void wait_then(struct kube_informer *inf, enum inf_next next, double retry_after,
                      const char *why)
{
    double d = kube_backoff_next(&inf->backoff, retry_after);
    inf->state = ST_WAITING;
    inf->next = next;
    ev_timer_stop(inf->loop, &inf->stall);
    ev_timer_stop(inf->loop, &inf->retry);
    ev_timer_set(&inf->retry, d, 0.);
    ev_timer_start(inf->loop, &inf->retry);
    gq_log(log_level(inf), GQ_LOG_WARN, KUBE_LOG_MOD, "informer backing off",
           "informer=%s next=%s delay=%.2f reason=\"%s\"", inf->name,
           next == NEXT_LIST ? "list" : "watch", d, why ? why : "");
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_informer *inf = w->data;
    (void)loop;
    (void)revents;
    inf->depth++;
    if (inf->running && inf->state == ST_WAITING) {
        if (inf->next == NEXT_LIST)
            do_list(inf);
        else
            do_watch(inf);
    }
    leave(inf);
}

static void relay(enum kube_event_type type, const cJSON *old_obj, const cJSON *new_obj,
                  void *ud)
{
    struct kube_informer *inf = ud;
    if (inf->o.on_event && !inf->dead)
        inf->o.on_event(type, old_obj, new_obj, inf->o.ud);
}

/* Append the query string: sep is '?' or '&' as needed. */
static int add_param(struct gq_buf *b, const char *k, const char *v)
{
    int rc = gq_buf_printf(b, "%c%s=", strchr(b->p, '?') ? '&' : '?', k);
    return rc ? rc : kube_url_escape(b, v);
}

static int selectors(struct kube_informer *inf, struct gq_buf *b)
{
    int rc = 0;
    if (inf->label_selector)
        rc = add_param(b, "labelSelector", inf->label_selector);
    if (!rc && inf->field_selector)
        rc = add_param(b, "fieldSelector", inf->field_selector);
    return rc;
}

/* ------------------------------------------------------------------ list */

static void list_cb(const struct kube_response *resp, void *ud);

static void start_list_request(struct kube_informer *inf)
{
    struct gq_buf b;
    char lim[24];
    int rc;
    gq_buf_init(&b, 16384);
    snprintf(lim, sizeof lim, "%d", inf->cur_limit);
    rc = gq_buf_puts(&b, inf->path);
    if (!rc)
        rc = add_param(&b, "limit", lim);
    if (!rc && inf->cont[0])
        rc = add_param(&b, "continue", inf->cont);
    if (!rc)
        rc = selectors(inf, &b);
    if (!rc)
        rc = kube_request_h(inf->c, "GET", b.p, NULL, NULL, list_cb, inf, &inf->req);
    gq_buf_release(&b);
    if (rc) {
        inf->st.errors++;
        wait_then(inf, NEXT_LIST, -1, gq_strerror(rc));
    }
}

static void do_list(struct kube_informer *inf)
{
    delay_clear(inf);
    inf->state = ST_LISTING;
    inf->cont[0] = '\0';
    inf->cur_limit = inf->o.list_limit;
    inf->list_skips.n = 0;
    cJSON_Delete(inf->pages);
    inf->pages = cJSON_CreateArray();
    if (!inf->pages) {
        wait_then(inf, NEXT_LIST, -1, "out of memory");
        return;
    }
    start_list_request(inf);
}

static int same_obj(const struct kube_skipped *a, const char *ns, const char *name)
{
    return !strcmp(a->name, name) && !strcmp(a->namespace_, ns);
}

static void skips_remove(struct skips *k, const char *ns, const char *name)
{
    for (size_t i = 0; i < k->n; i++)
        if (same_obj(&k->v[i], ns, name)) {
            k->v[i] = k->v[--k->n];
            return;
        }
}

/* Insert or replace by namespace/name; silently full at SKIPS_MAX. */
static void skips_put(struct skips *k, const struct kube_skipped *s)
{
    if (!s->name[0])
        return;
    for (size_t i = 0; i < k->n; i++)
        if (same_obj(&k->v[i], s->namespace_, s->name)) {
            k->v[i] = *s;
            return;
        }
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 8;
        struct kube_skipped *v;
        if (k->cap >= SKIPS_MAX || !(v = realloc(k->v, cap * sizeof *v)))
            return;
        k->v = v;
        k->cap = cap;
    }
    k->v[k->n++] = *s;
}

/* Count, log and report one skipped object. */
static void skipped(struct kube_informer *inf, const struct kube_skipped *s)
{
    if (s->reason > 0 && s->reason < KUBE_SKIP_NREASONS)
        inf->st.skipped[s->reason]++;
    gq_log(log_level(inf), GQ_LOG_WARN, KUBE_LOG_MOD, "object skipped",
           "informer=%s reason=%s event=%s object=%s%s%s uid=%s resourceVersion=%s bytes=%zu "
           "detail=\"%s\"",
           inf->name, kube_skip_reason_name(s->reason), kube_event_type_name(s->type),
           s->namespace_, s->namespace_[0] ? "/" : "", s->name[0] ? s->name : "(unnamed)", s->uid,
           s->resource_version, s->bytes, s->detail);
    if (inf->o.on_skip && !inf->dead)
        inf->o.on_skip(s, inf->o.ud);
}

/* A list item skipped: if an earlier, readable version of it is cached, list
 * that version again so the relist keeps it (same resourceVersion: no event)
 * instead of reporting the object deleted. */
static void skip_cb(const struct kube_skipped *s, void *ud)
{
    struct kube_informer *inf = ud;
    const cJSON *old = s->name[0] ? kube_cache_get(inf->cache, s->namespace_, s->name) : NULL;
    cJSON *dup;
    skipped(inf, s);
    skips_put(&inf->list_skips, s);
    if (old && inf->pages && (dup = cJSON_Duplicate(old, 1)) != NULL &&
        !cJSON_AddItemToArray(inf->pages, dup = kube_pack(dup)))
        cJSON_Delete(dup);
}

static void list_cb(const struct kube_response *resp, void *ud)
{
    struct kube_informer *inf = ud;
    cJSON *j = NULL, *items = NULL;
    const cJSON *md, *v;
    char err[160];
    int rc;
    inf->depth++;
    inf->req = NULL;
    if (resp->rc == GQ_EGONE && inf->cont[0]) {
        /* the continue token expired: start the list over */
        gq_log(log_level(inf), GQ_LOG_INFO, KUBE_LOG_MOD, "list continue expired; relisting",
               "informer=%s", inf->name);
        do_list(inf);
        goto out;
    }
    if (resp->rc == GQ_ELIMIT && inf->cur_limit > 1) {
        /* the page is over the body cap: ask again for half as many objects */
        inf->cur_limit /= 2;
        inf->st.list_shrinks++;
        gq_log(log_level(inf), GQ_LOG_WARN, KUBE_LOG_MOD, "list page over the size cap; shrinking",
               "informer=%s limit=%d", inf->name, inf->cur_limit);
        start_list_request(inf);
        goto out;
    }
    if (resp->rc) {
        inf->st.errors++;
        if (resp->rc == GQ_EBUSY)
            inf->st.throttled++;
        wait_then(inf, NEXT_LIST, resp->retry_after, resp->errmsg);
        goto out;
    }
    rc = kube_list_page_parse(resp->body, resp->len, &inf->po, &items, &j, skip_cb,
                              inf, err, sizeof err);
    if (rc) {
        inf->st.errors++;
        wait_then(inf, NEXT_LIST, -1, err);
        goto out;
    }
    if (inf->dead || !inf->running)
        goto out;
    md = j;
    inf->st.list_pages++;
    {
        cJSON *it;
        while ((it = cJSON_DetachItemFromArray(items, 0)) != NULL)
            cJSON_AddItemToArray(inf->pages, kube_keep_object(it, inf->o.prune)); /* one block each */
    }
    v = cJSON_GetObjectItemCaseSensitive(md, "continue");
    if (cJSON_IsString(v) && v->valuestring[0]) {
        if (gq_strlcpy(inf->cont, v->valuestring, sizeof inf->cont) >= sizeof inf->cont) {
            inf->st.errors++;
            wait_then(inf, NEXT_LIST, -1, "list: continue token too long");
            goto out;
        }
        start_list_request(inf);
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
    if (!cJSON_IsString(v) ||
        gq_strlcpy(inf->rv, v->valuestring, sizeof inf->rv) >= sizeof inf->rv) {
        inf->st.errors++;
        wait_then(inf, NEXT_LIST, -1, "list: missing metadata.resourceVersion");
        goto out;
    }
    inf->cont[0] = '\0';
    {
        cJSON *pages = inf->pages;
        size_t n = (size_t)cJSON_GetArraySize(pages);
        inf->pages = NULL;
        if (kube_cache_replace(inf->cache, pages, relay, inf) != 0) {
            inf->st.errors++;
            wait_then(inf, NEXT_LIST, -1, "list: cache update failed");
            goto out;
        }
        inf->st.lists++;
        {
            struct skips t = inf->skips; /* the list's skips are now the current ones */
            inf->skips = inf->list_skips;
            inf->list_skips = t;
            inf->list_skips.n = 0;
        }
        gq_log(log_level(inf), GQ_LOG_INFO, KUBE_LOG_MOD, "listed",
               "informer=%s objects=%zu resourceVersion=%s", inf->name, n, inf->rv);
    }
    if (inf->dead || !inf->running)
        goto out;
    inf->synced = 1;
    kube_backoff_reset(&inf->backoff);
    if (inf->o.on_synced)
        inf->o.on_synced(inf->o.ud);
    if (inf->dead || !inf->running)
        goto out;
    do_watch(inf);
out:
    cJSON_Delete(items);
    cJSON_Delete(j);
    leave(inf);
}

/* ----------------------------------------------------------------- watch */

static void relist_now(struct kube_informer *inf, const char *why)
{
    inf->st.relists_410++;
    gq_log(log_level(inf), GQ_LOG_INFO, KUBE_LOG_MOD, "relisting", "informer=%s reason=\"%s\"",
           inf->name, why);
    do_list(inf);
}

/* A DELETED whose final state is unreadable still removes the cached object:
 * the owner sees a stub with the scanned metadata as new_obj. */
static void delete_stub(struct kube_informer *inf, const struct kube_skipped *s)
{
    cJSON *o = cJSON_CreateObject(), *md = o ? cJSON_AddObjectToObject(o, "metadata") : NULL;
    if (!md || !cJSON_AddStringToObject(md, "name", s->name) ||
        (s->namespace_[0] && !cJSON_AddStringToObject(md, "namespace", s->namespace_)) ||
        (s->uid[0] && !cJSON_AddStringToObject(md, "uid", s->uid)) ||
        (s->resource_version[0] &&
         !cJSON_AddStringToObject(md, "resourceVersion", s->resource_version))) {
        cJSON_Delete(o);
        return; /* out of memory: the next relist removes it */
    }
    inf->st.events++;
    kube_cache_apply(inf->cache, KUBE_EV_DELETED, o, relay, inf);
}

/* Apply one watch event (not ERROR): bookmarks move the resourceVersion,
 * the others go into the cache. Takes the event's object. */
static int apply_event(struct kube_informer *inf, struct kube_watch_event *ev)
{
    int rc;
    if (ev->type == KUBE_EV_BOOKMARK) {
        inf->st.bookmarks++;
        gq_strlcpy(inf->rv, ev->resource_version, sizeof inf->rv);
        kube_watch_event_release(ev);
        return 0;
    }
    inf->st.events++;
    if (ev->resource_version[0])
        gq_strlcpy(inf->rv, ev->resource_version, sizeof inf->rv);
    /* the cached copy: pruned, in one block, on the heap (the parse arena's
     * memory is reused by the next event) */
    if (!(ev->object = kube_keep_object(ev->object, inf->o.prune)))
        return GQ_ENOMEM;
    if (inf->skips.n) { /* readable again (or deleted): no longer skipped */
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(ev->object, "metadata");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(md, "name");
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(md, "namespace");
        if (cJSON_IsString(nm))
            skips_remove(&inf->skips, cJSON_IsString(ns) ? ns->valuestring : "", nm->valuestring);
    }
    rc = kube_cache_apply(inf->cache, ev->type, ev->object, relay, inf);
    ev->object = NULL; /* taken */
    return rc && rc != GQ_EINVAL ? rc : 0;
}

static void delay_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_informer *inf = w->data;
    double now = ev_now(loop);
    (void)revents;
    inf->depth++;
    while (inf->dq_head && inf->dq_head->due <= now && inf->running && !inf->dead) {
        struct delayed *d = inf->dq_head;
        int rc;
        inf->dq_head = d->next;
        if (!inf->dq_head)
            inf->dq_tail = NULL;
        rc = apply_event(inf, &d->ev);
        free(d);
        if (rc)
            gq_log(log_level(inf), GQ_LOG_WARN, KUBE_LOG_MOD, "delayed watch event not applied",
                   "informer=%s err=%s", inf->name, gq_strerror(rc));
    }
    if (inf->dq_head && inf->running && !inf->dead) {
        ev_timer_set(&inf->delay, inf->dq_head->due - now, 0.);
        ev_timer_start(loop, &inf->delay);
    }
    leave(inf);
}

/* Hold an event back for opts.event_delay_s (takes it). */
static int delay_push(struct kube_informer *inf, struct kube_watch_event *ev)
{
    struct delayed *d = calloc(1, sizeof *d);
    if (!d) {
        kube_watch_event_release(ev);
        return GQ_ENOMEM;
    }
    d->ev = *ev;
    ev->object = NULL;
    d->due = ev_now(inf->loop) + inf->o.event_delay_s;
    if (inf->dq_tail)
        inf->dq_tail->next = d;
    else
        inf->dq_head = d;
    inf->dq_tail = d;
    if (!ev_is_active(&inf->delay)) {
        ev_timer_set(&inf->delay, inf->o.event_delay_s, 0.);
        ev_timer_start(inf->loop, &inf->delay);
    }
    return 0;
}

static int on_line(const char *line, size_t len, void *ud)
{
    struct kube_informer *inf = ud;
    struct kube_watch_event ev;
    struct kube_skipped skip;
    char err[160];
    /* the event's tree comes from the parse arena, unless it is kept for later
     * (event_delay_s): apply_event keeps it on the heap (kube_keep_object) */
    int arena = inf->o.event_delay_s > 0 ? 0 : kube_arena_begin();
    int rc = kube_watch_event_parse_ex(line, len, &inf->po, &ev, &skip, err, sizeof err);
    if (arena)
        kube_arena_end();
    if (rc == GQ_OK && !ev.object) {
        /* a hostile object: skip the event, keep the stream */
        if (ev.resource_version[0])
            gq_strlcpy(inf->rv, ev.resource_version, sizeof inf->rv);
        if (ev.type == KUBE_EV_DELETED)
            skips_remove(&inf->skips, skip.namespace_, skip.name);
        else
            skips_put(&inf->skips, &skip);
        skipped(inf, &skip);
        if (ev.type == KUBE_EV_DELETED && skip.name[0] && !inf->dead)
            delete_stub(inf, &skip);
        return inf->dead || !inf->running ? GQ_EBUSY : 0;
    }
    if (rc) {
        inf->st.errors++;
        gq_log(log_level(inf), GQ_LOG_WARN, KUBE_LOG_MOD, "bad watch line; relisting",
               "informer=%s err=\"%s\"", inf->name, err);
        return GQ_EPARSE;
    }
    if (ev.type == KUBE_EV_ERROR) {
        rc = ev.code == 410 ? GQ_EGONE : GQ_EHTTP;
        if (rc != GQ_EGONE)
            inf->st.errors++;
        gq_log(log_level(inf), rc == GQ_EGONE ? GQ_LOG_INFO : GQ_LOG_WARN, KUBE_LOG_MOD,
               "watch ERROR event", "informer=%s code=%ld", inf->name, ev.code);
        kube_watch_event_release(&ev);
        return rc;
    }
    if (inf->o.event_delay_s > 0)
        return delay_push(inf, &ev);
    if ((rc = apply_event(inf, &ev)))
        return rc;
    if (inf->dead || !inf->running)
        return GQ_EBUSY; /* stop the stream; nobody is listening */
    return 0;
}

static int watch_data(const char *data, size_t len, void *ud)
{
    struct kube_informer *inf = ud;
    int rc;
    if (inf->dead || !inf->running)
        return GQ_EBUSY;
    inf->depth++;
    inf->last_data = ev_now(inf->loop);
    if (!inf->stream_ok) {
        inf->stream_ok = 1;
        kube_backoff_reset(&inf->backoff);
    }
    rc = kube_lines_feed(&inf->lines, data, len, on_line, inf);
    if (rc)
        inf->abort_rc = rc;
    if (leave(inf))
        return GQ_EBUSY;
    return rc;
}

static void watch_done(const struct kube_response *resp, void *ud)
{
    struct kube_informer *inf = ud;
    int rc = resp->rc;
    inf->depth++;
    inf->req = NULL;
    ev_timer_stop(inf->loop, &inf->stall);
    if (!inf->running || inf->dead)
        goto out;
    if (inf->abort_rc)
        rc = inf->abort_rc;
    switch (rc) {
    case GQ_OK:
        /* server closed the watch (timeoutSeconds): resume from the last RV;
         * a watch that ends at once without a byte is treated as a failure so
         * a misbehaving server cannot make us spin */
        if (!inf->stream_ok && ev_now(inf->loop) - inf->watch_started < 1.0) {
            inf->st.errors++;
            wait_then(inf, NEXT_WATCH, -1, "watch closed immediately");
        } else {
            do_watch(inf);
        }
        break;
    case GQ_EGONE:
        relist_now(inf, "410 Gone: resourceVersion too old");
        break;
    case GQ_ELIMIT:
        relist_now(inf, "watch event line over the maximum");
        break;
    case GQ_EPARSE:
        relist_now(inf, "undecodable watch event");
        break;
    case GQ_EBUSY:
        inf->st.throttled++;
        inf->st.errors++;
        wait_then(inf, NEXT_WATCH, resp->retry_after, resp->errmsg);
        break;
    default:
        inf->st.errors++;
        wait_then(inf, NEXT_WATCH, resp->retry_after, resp->errmsg);
        break;
    }
out:
    leave(inf);
}

static void stall_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_informer *inf = w->data;
    double idle, now = ev_now(loop);
    (void)revents;
    if (inf->state != ST_WATCHING || !inf->req)
        return;
    idle = now - inf->last_data;
    if (idle < inf->stall_limit) {
        ev_timer_set(w, inf->stall_limit - idle, 0.);
        ev_timer_start(loop, w);
        return;
    }
    inf->depth++;
    inf->st.stalls++;
    gq_log(log_level(inf), GQ_LOG_WARN, KUBE_LOG_MOD, "watch stalled; restarting",
           "informer=%s idle=%.1f resourceVersion=%s", inf->name, idle, inf->rv);
    kube_req_cancel(inf->req);
    inf->req = NULL;
    do_watch(inf);
    leave(inf);
}

static void do_watch(struct kube_informer *inf)
{
    struct gq_buf b;
    char to[24];
    int rc, timeout;
    int span = inf->o.watch_timeout_max_s - inf->o.watch_timeout_min_s;
    timeout = inf->o.watch_timeout_min_s + (int)(kube_rand01(&inf->rng) * (span + 1));
    if (timeout > inf->o.watch_timeout_max_s)
        timeout = inf->o.watch_timeout_max_s;
    delay_clear(inf);
    inf->state = ST_WATCHING;
    inf->stream_ok = 0;
    inf->abort_rc = 0;
    kube_lines_reset(&inf->lines);
    gq_buf_init(&b, 16384);
    snprintf(to, sizeof to, "%d", timeout);
    rc = gq_buf_puts(&b, inf->path);
    if (!rc)
        rc = add_param(&b, "watch", "1");
    if (!rc)
        rc = add_param(&b, "allowWatchBookmarks", "true");
    if (!rc)
        rc = add_param(&b, "resourceVersion", inf->rv);
    if (!rc)
        rc = add_param(&b, "timeoutSeconds", to);
    if (!rc)
        rc = selectors(inf, &b);
    if (!rc)
        rc = kube_stream(inf->c, b.p, watch_data, watch_done, inf, &inf->req);
    gq_buf_release(&b);
    if (rc) {
        inf->st.errors++;
        wait_then(inf, NEXT_WATCH, -1, gq_strerror(rc));
        return;
    }
    inf->st.watches++;
    inf->stall_limit = inf->o.stall_s > 0 ? inf->o.stall_s : timeout + inf->o.stall_margin_s;
    inf->last_data = inf->watch_started = ev_now(inf->loop);
    ev_timer_stop(inf->loop, &inf->stall);
    ev_timer_set(&inf->stall, inf->stall_limit, 0.);
    ev_timer_start(inf->loop, &inf->stall);
}

/* ---------------------------------------------------------------- public */

static char *dup_opt(const char *s, int *fail)
{
    char *d;
    if (!s || !*s)
        return NULL;
    d = strdup(s);
    if (!d)
        *fail = 1;
    return d;
}

struct kube_informer *kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o,
                                        char *err, size_t errlen)
{
    struct kube_informer *inf;
    int fail = 0;
    if (!c || !o || !o->path || o->path[0] != '/') {
        gq_errf(err, errlen, "informer: path must start with '/'");
        return NULL;
    }
    inf = calloc(1, sizeof *inf);
    if (!inf) {
        gq_errf(err, errlen, "informer: out of memory");
        return NULL;
    }
    inf->c = c;
    inf->loop = kube_client_loop(c);
    inf->o = *o;
    inf->path = dup_opt(o->path, &fail);
    inf->label_selector = dup_opt(o->label_selector, &fail);
    inf->field_selector = dup_opt(o->field_selector, &fail);
    inf->name = dup_opt(o->name ? o->name : o->path, &fail);
    inf->o.path = inf->o.label_selector = inf->o.field_selector = inf->o.name = NULL;
    inf->cache = kube_cache_new();
    if (fail || !inf->cache) {
        gq_errf(err, errlen, "informer: out of memory");
        destroy(inf);
        return NULL;
    }
    if (inf->o.list_limit <= 0)
        inf->o.list_limit = 500;
    inf->cur_limit = inf->o.list_limit;
    if (inf->o.max_object == 0)
        inf->o.max_object = KUBE_MAX_OBJECT_DEFAULT;
    inf->po = (struct kube_parse_opts){inf->o.max_object, inf->o.drop_managed_fields};
    if (inf->o.watch_timeout_min_s <= 0)
        inf->o.watch_timeout_min_s = 240;
    if (inf->o.watch_timeout_max_s < inf->o.watch_timeout_min_s)
        inf->o.watch_timeout_max_s =
            o->watch_timeout_max_s > 0 ? inf->o.watch_timeout_min_s : 360;
    if (inf->o.watch_timeout_max_s < inf->o.watch_timeout_min_s)
        inf->o.watch_timeout_max_s = inf->o.watch_timeout_min_s;
    if (inf->o.stall_margin_s <= 0)
        inf->o.stall_margin_s = 30;
    if (inf->o.max_event_line == 0)
        inf->o.max_event_line = 16u << 20;
    if (inf->o.backoff_base_s <= 0)
        inf->o.backoff_base_s = 0.5;
    if (inf->o.backoff_max_s <= 0)
        inf->o.backoff_max_s = 30;
    if (!inf->o.seed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        inf->o.seed = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^
                      (uint64_t)(uintptr_t)inf;
    }
    inf->rng = inf->o.seed;
    kube_backoff_init(&inf->backoff, inf->o.backoff_base_s, inf->o.backoff_max_s,
                      inf->o.seed * 2654435761u + 1);
    kube_lines_init(&inf->lines, inf->o.max_event_line);
    ev_timer_init(&inf->retry, retry_cb, 0., 0.);
    inf->retry.data = inf;
    ev_timer_init(&inf->stall, stall_cb, 0., 0.);
    inf->stall.data = inf;
    ev_timer_init(&inf->delay, delay_cb, 0., 0.);
    inf->delay.data = inf;
    if (inf->o.event_delay_s > 0)
        gq_log(log_level(inf), GQ_LOG_WARN, KUBE_LOG_MOD, "watch events delayed (test hook)",
               "informer=%s delay_s=%.2f", inf->name, inf->o.event_delay_s);
    return inf;
}

int kube_informer_start(struct kube_informer *inf)
{
    if (inf->running)
        return GQ_OK;
    inf->running = 1;
    if (inf->synced && inf->rv[0])
        do_watch(inf); /* restart after stop: resume from the last RV */
    else
        do_list(inf);
    return GQ_OK;
}

void kube_informer_stop(struct kube_informer *inf)
{
    if (!inf)
        return;
    inf->running = 0;
    inf->state = ST_IDLE;
    delay_clear(inf);
    kube_req_cancel(inf->req);
    inf->req = NULL;
    ev_timer_stop(inf->loop, &inf->retry);
    ev_timer_stop(inf->loop, &inf->stall);
}

void kube_informer_free(struct kube_informer *inf)
{
    if (!inf)
        return;
    kube_informer_stop(inf);
    if (inf->depth > 0) {
        inf->dead = 1;
        return;
    }
    destroy(inf);
}

int kube_informer_synced(const struct kube_informer *inf)
{
    return inf->synced;
}

const char *kube_informer_resource_version(const struct kube_informer *inf)
{
    return inf->rv;
}

const struct kube_cache *kube_informer_cache(const struct kube_informer *inf)
{
    return inf->cache;
}

const cJSON *kube_informer_get(const struct kube_informer *inf, const char *ns, const char *name)
{
    return kube_cache_get(inf->cache, ns, name);
}

void kube_informer_get_stats(const struct kube_informer *inf, struct kube_informer_stats *st)
{
    *st = inf->st;
}

int kube_informer_skipped_foreach(const struct kube_informer *inf,
                                  void (*fn)(const struct kube_skipped *s, void *ud), void *ud)
{
    /* a copy: fn may be called back into the informer (or free it) */
    size_t n = inf->skips.n;
    struct kube_skipped *v;
    if (!n)
        return 0;
    if (!(v = malloc(n * sizeof *v)))
        return GQ_ENOMEM;
    memcpy(v, inf->skips.v, n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        fn(&v[i], ud);
    free(v);
    return 0;
}
