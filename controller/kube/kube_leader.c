/*
 * kube_leader.c — leader election on a coordination.k8s.io/v1 Lease, after
 * client-go's leaderelection: every retry period GET the Lease; create it when
 * missing; take it over only when the holder has not renewed for
 * leaseDurationSeconds *as observed on our monotonic clock* (no clock-skew
 * trust in renewTime); every write is a PUT carrying the resourceVersion we
 * read, so of two contenders racing for the same version one gets 409. A
 * leader that has not renewed within the renew deadline stops leading.
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

struct kube_leader {
    struct kube_client *c;
    struct ev_loop *loop;
    struct kube_leader_opts o;
    char ns[254], name[254], identity[300];
    char holder[300];
    char path[600], coll[600];
    ev_timer tick;
    struct kube_req *req;
    cJSON *lease;          /* last Lease read or written (owned) */
    char obs_key[700];     /* holder|renewTime|rv of the last observed record */
    double obs_time;       /* ev_now when that record was first seen */
    double last_renew;     /* ev_now of our last successful write */
    int leading;
    int running;
    int depth;
    int dead;
};

static void destroy(struct kube_leader *l)
{
    kube_req_cancel(l->req);
    ev_timer_stop(l->loop, &l->tick);
    cJSON_Delete(l->lease);
    free(l);
}

static int leave(struct kube_leader *l)
{
    if (--l->depth == 0 && l->dead) {
        destroy(l);
        return 1;
    }
    return 0;
}

static int lvl(const struct kube_leader *l)
{
    return kube_client_log_level(l->c);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_leading(struct kube_leader *l, int on)
{
    if (l->leading == on)
        return;
    l->leading = on;
    gq_log(lvl(l), GQ_LOG_INFO, KUBE_LOG_MOD, on ? "started leading" : "stopped leading",
           "lease=%s/%s identity=%s", l->ns, l->name, l->identity);
    if (on && l->o.on_started)
        l->o.on_started(l->o.ud);
    if (!on && l->o.on_stopped)
        l->o.on_stopped(l->o.ud);
}

static void set_holder(struct kube_leader *l, const char *h)
{
    if (strcmp(l->holder, h) == 0)
        return;
    gq_strlcpy(l->holder, h, sizeof l->holder);
    if (l->o.on_new_leader)
        l->o.on_new_leader(h, l->o.ud);
}

static const cJSON *spec_of(const cJSON *lease)
{
    return cJSON_GetObjectItemCaseSensitive(lease, "spec");
}

static const char *sget(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Set o[k] = n (replacing any old value); takes n, which may be NULL (no memory). */
static int set_item(cJSON *o, const char *k, cJSON *n)
{
    if (!n)
        return GQ_ENOMEM;
    if (cJSON_GetObjectItemCaseSensitive(o, k))
        cJSON_ReplaceItemInObjectCaseSensitive(o, k, n);
    else
        cJSON_AddItemToObject(o, k, n);
    return GQ_OK;
}

static int set_str(cJSON *o, const char *k, const char *v)
{
    return set_item(o, k, cJSON_CreateString(v));
}

static int set_num(cJSON *o, const char *k, double v)
{
    return set_item(o, k, cJSON_CreateNumber(v));
}

/* Our record on top of `base` (NULL = new Lease). Caller owns the result. */
static cJSON *build_lease(struct kube_leader *l, const cJSON *base, int release)
{
    cJSON *lease = base ? cJSON_Duplicate(base, 1) : cJSON_CreateObject();
    cJSON *md, *spec;
    char now[40];
    const char *prev_holder;
    const cJSON *tr;
    double transitions = 0;
    int rc = 0;
    if (!lease)
        return NULL;
    if (kube_time_format_micro(wall_now(), now, sizeof now) != 0)
        goto fail;
    rc |= set_str(lease, "apiVersion", "coordination.k8s.io/v1");
    rc |= set_str(lease, "kind", "Lease");
    md = cJSON_GetObjectItemCaseSensitive(lease, "metadata");
    if (!md && !(md = cJSON_AddObjectToObject(lease, "metadata")))
        goto fail;
    rc |= set_str(md, "name", l->name);
    rc |= set_str(md, "namespace", l->ns);
    cJSON_DeleteItemFromObjectCaseSensitive(md, "managedFields");
    spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    if (!spec && !(spec = cJSON_AddObjectToObject(lease, "spec")))
        goto fail;
    prev_holder = sget(spec, "holderIdentity");
    tr = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
    if (cJSON_IsNumber(tr))
        transitions = tr->valuedouble;
    if (release) {
        rc |= set_str(spec, "holderIdentity", "");
        rc |= set_num(spec, "leaseDurationSeconds", 1);
        rc |= set_str(spec, "renewTime", now);
    } else {
        if (strcmp(prev_holder, l->identity) != 0) {
            rc |= set_str(spec, "acquireTime", now);
            if (base)
                transitions += 1;
        }
        rc |= set_str(spec, "holderIdentity", l->identity);
        rc |= set_num(spec, "leaseDurationSeconds", (double)(long)(l->o.lease_duration_s + 0.5));
        rc |= set_str(spec, "renewTime", now);
        rc |= set_num(spec, "leaseTransitions", transitions);
    }
    if (rc)
        goto fail;
    return lease;
fail:
    cJSON_Delete(lease);
    return NULL;
}

/* Lease reads and writes never wait behind other requests (no in-flight slot). */
static const struct kube_req_opts lease_opts = {KUBE_PRIO_EXEMPT, NULL, 0, 0};

static void write_cb(const struct kube_response *resp, void *ud);

static void write_lease(struct kube_leader *l, const cJSON *base)
{
    cJSON *lease = build_lease(l, base, 0);
    char *body;
    int rc;
    if (!lease)
        return;
    body = cJSON_PrintUnformatted(lease);
    cJSON_Delete(lease);
    if (!body)
        return;
    if (base)
        rc = kube_request_ex(l->c, &lease_opts, "PUT", l->path, "application/json", body,
                             write_cb, l, &l->req);
    else
        rc = kube_request_ex(l->c, &lease_opts, "POST", l->coll, "application/json", body,
                             write_cb, l, &l->req);
    cJSON_free(body);
    if (rc)
        gq_log(lvl(l), GQ_LOG_WARN, KUBE_LOG_MOD, "lease write not sent", "err=%s",
               gq_strerror(rc));
}

static void write_cb(const struct kube_response *resp, void *ud)
{
    struct kube_leader *l = ud;
    l->depth++;
    l->req = NULL;
    if (!l->running)
        goto out;
    if (resp->rc == GQ_OK) {
        cJSON *j = kube_response_json(resp);
        if (j) {
            cJSON_Delete(l->lease);
            l->lease = j;
        }
        l->last_renew = ev_now(l->loop);
        set_holder(l, l->identity);
        set_leading(l, 1);
    } else {
        /* 409: someone else wrote first; we re-read on the next tick */
        gq_log(lvl(l), resp->rc == GQ_ECONFLICT ? GQ_LOG_DEBUG : GQ_LOG_WARN, KUBE_LOG_MOD,
               "lease write failed", "lease=%s/%s err=\"%s\"", l->ns, l->name, resp->errmsg);
    }
out:
    leave(l);
}

static void get_cb(const struct kube_response *resp, void *ud)
{
    struct kube_leader *l = ud;
    cJSON *j = NULL;
    const cJSON *spec, *md;
    const char *holder;
    char key[700];
    double now = ev_now(l->loop), dur;
    l->depth++;
    l->req = NULL;
    if (!l->running)
        goto out;
    if (resp->rc == GQ_ENOTFOUND) {
        write_lease(l, NULL);
        goto out;
    }
    if (resp->rc) {
        gq_log(lvl(l), GQ_LOG_WARN, KUBE_LOG_MOD, "lease read failed", "lease=%s/%s err=\"%s\"",
               l->ns, l->name, resp->errmsg);
        goto out;
    }
    j = kube_response_json(resp);
    if (!cJSON_IsObject(j))
        goto out;
    cJSON_Delete(l->lease);
    l->lease = j;
    j = NULL;
    spec = spec_of(l->lease);
    md = cJSON_GetObjectItemCaseSensitive(l->lease, "metadata");
    holder = sget(spec, "holderIdentity");
    snprintf(key, sizeof key, "%.290s|%.60s|%.60s", holder, sget(spec, "renewTime"),
             sget(md, "resourceVersion"));
    if (strcmp(key, l->obs_key) != 0) {
        gq_strlcpy(l->obs_key, key, sizeof l->obs_key);
        l->obs_time = now;
    }
    set_holder(l, holder);
    {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(spec, "leaseDurationSeconds");
        dur = cJSON_IsNumber(d) && d->valuedouble > 0 ? d->valuedouble : l->o.lease_duration_s;
    }
    if (holder[0] && strcmp(holder, l->identity) != 0 && l->obs_time + dur > now) {
        /* held by someone else and not expired */
        set_leading(l, 0);
        goto out;
    }
    write_lease(l, l->lease);
out:
    cJSON_Delete(j);
    leave(l);
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_leader *l = w->data;
    double now = ev_now(loop);
    (void)revents;
    l->depth++;
    if (!l->running)
        goto out;
    if (l->leading && now - l->last_renew > l->o.renew_deadline_s) {
        gq_log(lvl(l), GQ_LOG_WARN, KUBE_LOG_MOD, "lease not renewed within the deadline",
               "lease=%s/%s since=%.1f", l->ns, l->name, now - l->last_renew);
        kube_req_cancel(l->req);
        l->req = NULL;
        set_leading(l, 0);
        if (!l->running || l->dead)
            goto out;
    }
    if (!l->req) {
        int rc = kube_request_ex(l->c, &lease_opts, "GET", l->path, NULL, NULL, get_cb, l,
                                 &l->req);
        if (rc)
            gq_log(lvl(l), GQ_LOG_WARN, KUBE_LOG_MOD, "lease read not sent", "err=%s",
                   gq_strerror(rc));
    }
out:
    leave(l);
}

struct kube_leader *kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o,
                                    char *err, size_t errlen)
{
    struct kube_leader *l;
    if (!c || !o || !o->namespace_ || !o->name) {
        gq_errf(err, errlen, "leader: namespace_ and name are required");
        return NULL;
    }
    l = calloc(1, sizeof *l);
    if (!l) {
        gq_errf(err, errlen, "leader: out of memory");
        return NULL;
    }
    l->c = c;
    l->loop = kube_client_loop(c);
    l->o = *o;
    if (l->o.lease_duration_s <= 0)
        l->o.lease_duration_s = 15;
    if (l->o.renew_deadline_s <= 0)
        l->o.renew_deadline_s = 10;
    if (l->o.retry_period_s <= 0)
        l->o.retry_period_s = 2;
    if (l->o.renew_deadline_s >= l->o.lease_duration_s ||
        l->o.retry_period_s >= l->o.renew_deadline_s) {
        gq_errf(err, errlen,
                "leader: need retry period < renew deadline < lease duration (%.1f < %.1f < %.1f)",
                l->o.retry_period_s, l->o.renew_deadline_s, l->o.lease_duration_s);
        free(l);
        return NULL;
    }
    gq_strlcpy(l->ns, o->namespace_, sizeof l->ns);
    gq_strlcpy(l->name, o->name, sizeof l->name);
    if (o->identity && *o->identity) {
        gq_strlcpy(l->identity, o->identity, sizeof l->identity);
    } else {
        char host[256];
        if (gethostname(host, sizeof host) != 0)
            gq_strlcpy(host, "unknown", sizeof host);
        host[sizeof host - 1] = '\0';
        snprintf(l->identity, sizeof l->identity, "%s_%ld", host, (long)getpid());
    }
    l->o.namespace_ = l->o.name = l->o.identity = NULL;
    if (kube_path(l->coll, sizeof l->coll, "/apis/coordination.k8s.io/v1", l->ns, "leases", NULL,
                  NULL) != 0 ||
        kube_path(l->path, sizeof l->path, "/apis/coordination.k8s.io/v1", l->ns, "leases",
                  l->name, NULL) != 0) {
        gq_errf(err, errlen, "leader: bad lease namespace or name");
        free(l);
        return NULL;
    }
    ev_timer_init(&l->tick, tick_cb, 0., l->o.retry_period_s);
    l->tick.data = l;
    return l;
}

int kube_leader_start(struct kube_leader *l)
{
    if (l->running)
        return GQ_OK;
    l->running = 1;
    ev_timer_set(&l->tick, 0., l->o.retry_period_s);
    ev_timer_start(l->loop, &l->tick);
    return GQ_OK;
}

void kube_leader_stop(struct kube_leader *l)
{
    if (!l || !l->running)
        return;
    l->running = 0;
    ev_timer_stop(l->loop, &l->tick);
    kube_req_cancel(l->req);
    l->req = NULL;
    if (l->leading && l->o.release_on_stop && l->lease) {
        cJSON *rel = build_lease(l, l->lease, 1);
        char *body = rel ? cJSON_PrintUnformatted(rel) : NULL;
        if (body)
            kube_request_ex(l->c, &lease_opts, "PUT", l->path, "application/json", body, NULL,
                            NULL, NULL);
        cJSON_free(body);
        cJSON_Delete(rel);
    }
    l->depth++;
    set_leading(l, 0);
    leave(l);
}

void kube_leader_free(struct kube_leader *l)
{
    if (!l)
        return;
    kube_leader_stop(l);
    if (l->depth > 0) {
        l->dead = 1;
        return;
    }
    destroy(l);
}

int kube_leader_is_leader(const struct kube_leader *l)
{
    return l->leading;
}

const char *kube_leader_identity(const struct kube_leader *l)
{
    return l->identity;
}

const char *kube_leader_holder(const struct kube_leader *l)
{
    return l->holder;
}
