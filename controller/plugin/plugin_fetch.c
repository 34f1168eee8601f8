/*
 * plugin_fetch.c — synchronous requests for `kubectl gangq` over controller/kube's async
 * client: each call starts one request and runs a private libev loop until it ends
 * (or a SIGINT watcher interrupts it). Error texts name what the user lacks.
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gq.h"
#include "kube.h"
#include "log.h"
#include "plugin.h"

struct pl_client {
    struct ev_loop *loop;        /* owned */
    struct kube_client *c;       /* owned */
    struct kube_config cfg;      /* owned */
    int interrupted;
};

static void kubeconfig_path(const char *flag, char *out, size_t len)
{
    const char *env = getenv("KUBECONFIG");
    if (flag && flag[0]) {
        gq_strlcpy(out, flag, len);
    } else if (env && env[0]) {
        /* a list: the first file (merging several is not supported) */
        const char *colon = strchr(env, ':');
        size_t n = colon ? (size_t)(colon - env) : strlen(env);
        if (n >= len)
            n = len - 1;
        memcpy(out, env, n);
        out[n] = 0;
    } else {
        const char *home = getenv("HOME");
        snprintf(out, len, "%s/.kube/config", home && home[0] ? home : ".");
    }
}

struct pl_client *pl_client_new(const char *kubeconfig, const char *context, char *err,
                                size_t errlen)
{
    char path[4096];
    struct pl_client *pc = calloc(1, sizeof *pc);
    if (!pc) {
        gq_errf(err, errlen, "out of memory");
        return NULL;
    }
    kube_config_init(&pc->cfg);
    kubeconfig_path(kubeconfig, path, sizeof path);
    if (kube_global_init()) {
        gq_errf(err, errlen, "curl initialisation failed");
        free(pc);
        return NULL;
    }
    if (kube_config_load_kubeconfig(&pc->cfg, path, context, err, errlen)) {
        free(pc);
        return NULL;
    }
    pc->loop = ev_loop_new(EVFLAG_AUTO);
    if (!pc->loop) {
        gq_errf(err, errlen, "cannot create an event loop");
        pl_client_free(pc);
        return NULL;
    }
    struct kube_client_opts o = {0};
    o.log_level = GQ_LOG_ERROR;
    o.request_timeout_ms = 30000;
    o.user_agent = "kubectl-gangq/" "0.1.0";
    pc->c = kube_client_new(pc->loop, &pc->cfg, &o, err, errlen);
    if (!pc->c) {
        pl_client_free(pc);
        return NULL;
    }
    return pc;
}

void pl_client_free(struct pl_client *pc)
{
    if (!pc)
        return;
    kube_client_free(pc->c);
    if (pc->loop)
        ev_loop_destroy(pc->loop);
    kube_config_release(&pc->cfg);
    free(pc);
}

const char *pl_client_namespace(const struct pl_client *pc)
{
    return pc->cfg.namespace_ && pc->cfg.namespace_[0] ? pc->cfg.namespace_ : "default";
}

static void on_sigint(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)revents;
    ((struct pl_client *)w->data)->interrupted = 1;
    ev_break(loop, EVBREAK_ALL);
}

void pl_client_interrupt(struct pl_client *pc)
{
    pc->interrupted = 1;
    ev_break(pc->loop, EVBREAK_ALL);
}

int pl_client_interrupted(const struct pl_client *pc)
{
    return pc->interrupted;
}

struct sync {
    int done, rc;
    long status;
    char *body; /* owned copy */
    char errmsg[256];
};

static void sync_cb(const struct kube_response *r, void *ud)
{
    struct sync *s = ud;
    s->done = 1;
    s->rc = r->rc;
    s->status = r->status;
    s->body = strdup(r->body ? r->body : "");
    gq_strlcpy(s->errmsg, r->errmsg ? r->errmsg : "", sizeof s->errmsg);
}

/* Run the loop until s->done or SIGINT. */
static void run(struct pl_client *pc, struct sync *s)
{
    ev_signal sig;
    ev_signal_init(&sig, on_sigint, SIGINT);
    sig.data = pc;
    ev_signal_start(pc->loop, &sig);
    while (!s->done && !pc->interrupted)
        ev_run(pc->loop, EVRUN_ONCE);
    ev_signal_stop(pc->loop, &sig);
}

static void on_sleep(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    *(int *)w->data = 1;
    ev_break(loop, EVBREAK_ONE);
}

void pl_client_sleep(struct pl_client *pc, double seconds)
{
    ev_signal sig;
    ev_timer t;
    int done = 0;
    ev_signal_init(&sig, on_sigint, SIGINT);
    sig.data = pc;
    ev_signal_start(pc->loop, &sig);
    ev_now_update(pc->loop);
    ev_timer_init(&t, on_sleep, seconds, 0.);
    t.data = &done;
    ev_timer_start(pc->loop, &t);
    while (!done && !pc->interrupted)
        ev_run(pc->loop, EVRUN_ONCE);
    ev_timer_stop(pc->loop, &t);
    ev_signal_stop(pc->loop, &sig);
}

int pl_request(struct pl_client *pc, const char *method, const char *path, const cJSON *body,
               const struct pl_what *w, cJSON **out, long *status, char *err, size_t errlen)
{
    struct sync s;
    int rc;
    memset(&s, 0, sizeof s);
    if (out)
        *out = NULL;
    if (status)
        *status = 0;
    if (!strcmp(method, "PATCH"))
        rc = kube_patch_merge(pc->c, path, body, sync_cb, &s);
    else
        rc = kube_get(pc->c, path, sync_cb, &s);
    if (rc) {
        gq_errf(err, errlen, "%s %s: %s", w && w->verb ? w->verb : method,
                w && w->resource ? w->resource : path, gq_strerror(rc));
        return rc;
    }
    run(pc, &s);
    if (!s.done) {
        gq_errf(err, errlen, "interrupted");
        return GQ_EIO;
    }
    if (status)
        *status = s.status;
    if (s.rc) {
        if (s.status)
            pl_http_error_text(s.status, s.body, w, err, errlen);
        else
            gq_errf(err, errlen, "%s %s: %s", w && w->verb ? w->verb : method,
                    w && w->resource ? w->resource : path, s.errmsg[0] ? s.errmsg : gq_strerror(s.rc));
        free(s.body);
        return s.rc;
    }
    if (out) {
        *out = s.body ? cJSON_Parse(s.body) : NULL;
        if (!*out) {
            gq_errf(err, errlen, "%s %s: the API server's answer is not JSON",
                    w && w->verb ? w->verb : method, w && w->resource ? w->resource : path);
            free(s.body);
            return GQ_EPARSE;
        }
    }
    free(s.body);
    return GQ_OK;
}

static int url_escape(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~';
        if (o + 4 >= len)
            return GQ_ELIMIT;
        if (plain)
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, len - o, "%%%02X", *p);
    }
    out[o] = 0;
    return GQ_OK;
}

int pl_list(struct pl_client *pc, const char *path, const char *label_selector,
            const struct pl_what *w, cJSON **items, long *status, char *err, size_t errlen)
{
    char cont[2048] = "", sel[512] = "", url[4096];
    cJSON *all = cJSON_CreateArray();
    *items = NULL;
    if (!all) {
        gq_errf(err, errlen, "out of memory");
        return GQ_ENOMEM;
    }
    if (label_selector && url_escape(label_selector, sel, sizeof sel)) {
        cJSON_Delete(all);
        gq_errf(err, errlen, "label selector too long");
        return GQ_ELIMIT;
    }
    for (int page = 0; page < 100000; page++) {
        char ce[2048 * 3];
        if (url_escape(cont, ce, sizeof ce)) {
            cJSON_Delete(all);
            gq_errf(err, errlen, "continue token too long");
            return GQ_ELIMIT;
        }
        int n = snprintf(url, sizeof url, "%s?limit=500%s%s%s%s", path, sel[0] ? "&labelSelector=" : "",
                         sel, ce[0] ? "&continue=" : "", ce);
        if (n < 0 || (size_t)n >= sizeof url) {
            cJSON_Delete(all);
            gq_errf(err, errlen, "request path too long");
            return GQ_ELIMIT;
        }
        cJSON *resp = NULL;
        int rc = pl_request(pc, "GET", url, NULL, w, &resp, status, err, errlen);
        if (rc) {
            cJSON_Delete(all);
            return rc;
        }
        cJSON *its = cJSON_DetachItemFromObjectCaseSensitive(resp, "items"), *x;
        while (cJSON_IsArray(its) && (x = cJSON_DetachItemFromArray(its, 0)))
            cJSON_AddItemToArray(all, x);
        cJSON_Delete(its);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(resp, "metadata"), "continue");
        gq_strlcpy(cont, cJSON_IsString(c) ? c->valuestring : "", sizeof cont);
        cJSON_Delete(resp);
        if (!cont[0])
            break;
    }
    *items = all;
    return GQ_OK;
}

int pl_check_crds(struct pl_client *pc, char *err, size_t errlen)
{
    struct pl_what w = {"get", "the gangq.io API group", NULL, NULL};
    cJSON *d = NULL;
    long st = 0;
    int rc = pl_request(pc, "GET", "/apis/gangq.io/v1alpha1", NULL, &w, &d, &st, err, errlen);
    if (rc == GQ_ENOTFOUND || (!rc && d)) {
        int found = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "resources"))
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "name");
            found |= cJSON_IsString(n) && !strcmp(n->valuestring, "gpujobs");
        }
        cJSON_Delete(d);
        if (!found) {
            gq_errf(err, errlen, "gangq CRDs not installed (gpujobs.gangq.io not found)");
            return GQ_ENOTFOUND;
        }
        return GQ_OK;
    }
    cJSON_Delete(d);
    return rc;
}
