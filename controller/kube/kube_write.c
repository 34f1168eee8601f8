/* kube_write.c — writers (create, replace, patches, delete, get) and Events. */
#include "kube.h"
#include "kube_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct kube_req_opts normal_opts = {KUBE_PRIO_NORMAL, NULL, 0, 0};

static int send_json_ex(struct kube_client *c, const struct kube_req_opts *ro, const char *method,
                        const char *path, const char *ctype, const cJSON *obj,
                        kube_response_cb cb, void *ud)
{
    char *body;
    int rc;
    if (!obj)
        return GQ_EINVAL;
    body = cJSON_PrintUnformatted(obj);
    if (!body)
        return GQ_ENOMEM;
    rc = kube_request_ex(c, ro, method, path, ctype, body, cb, ud, NULL);
    cJSON_free(body);
    return rc;
}

static int send_json(struct kube_client *c, const char *method, const char *path,
                     const char *ctype, const cJSON *obj, kube_response_cb cb, void *ud)
{
    return send_json_ex(c, &normal_opts, method, path, ctype, obj, cb, ud);
}

const char *kube_prio_name(enum kube_prio p)
{
    switch (p) {
    case KUBE_PRIO_CRITICAL: return "critical";
    case KUBE_PRIO_NORMAL: return "normal";
    case KUBE_PRIO_LOW: return "low";
    case KUBE_PRIO_EXEMPT: return "exempt";
    }
    return "unknown";
}

int kube_create(struct kube_client *c, const char *collection_path, const cJSON *obj,
                kube_response_cb cb, void *ud)
{
    return kube_create_p(c, KUBE_PRIO_NORMAL, collection_path, obj, cb, ud);
}

int kube_create_p(struct kube_client *c, enum kube_prio prio, const char *collection_path,
                  const cJSON *obj, kube_response_cb cb, void *ud)
{
    struct kube_req_opts ro = {prio, NULL, 0, 0};
    return kube_create_ex(c, &ro, collection_path, obj, cb, ud);
}

int kube_create_ex(struct kube_client *c, const struct kube_req_opts *ro, const char *collection_path,
                   const cJSON *obj, kube_response_cb cb, void *ud)
{
    return send_json_ex(c, ro, "POST", collection_path, "application/json", obj, cb, ud);
}

int kube_replace(struct kube_client *c, const char *path, const cJSON *obj, kube_response_cb cb,
                 void *ud)
{
    return send_json(c, "PUT", path, "application/json", obj, cb, ud);
}

int kube_patch_merge(struct kube_client *c, const char *path, const cJSON *patch,
                     kube_response_cb cb, void *ud)
{
    return send_json(c, "PATCH", path, "application/merge-patch+json", patch, cb, ud);
}

int kube_patch_json(struct kube_client *c, const char *path, const cJSON *ops,
                    kube_response_cb cb, void *ud)
{
    if (!cJSON_IsArray(ops))
        return GQ_EINVAL;
    return send_json(c, "PATCH", path, "application/json-patch+json", ops, cb, ud);
}

/* path + "/status" (unless it ends so already) into p. */
static int status_path(const char *path, char *p, size_t plen)
{
    size_t n = strlen(path);
    const char *suffix = n >= 7 && strcmp(path + n - 7, "/status") == 0 ? "" : "/status";
    if ((size_t)snprintf(p, plen, "%s%s", path, suffix) >= plen)
        return GQ_ELIMIT;
    return GQ_OK;
}

int kube_patch_status(struct kube_client *c, const char *path, const cJSON *patch,
                      kube_response_cb cb, void *ud)
{
    char p[2048];
    int rc = status_path(path, p, sizeof p);
    return rc ? rc : kube_patch_merge(c, p, patch, cb, ud);
}

/* The request of a merge patch of path's status subresource: that path into
 * p, the options coalescing by it; shared: the body is a gq_sstr text (a
 * reference held, not a copy) and a 2xx answer's body is not kept. */
static int status_req(const char *path, enum kube_prio prio, int shared, char *p, size_t plen,
                      struct kube_req_opts *ro)
{
    *ro = (struct kube_req_opts){prio, p, shared, shared};
    return status_path(path, p, plen);
}

int kube_patch_status_p(struct kube_client *c, enum kube_prio prio, const char *path,
                        const cJSON *patch, kube_response_cb cb, void *ud)
{
    char p[2048];
    struct kube_req_opts ro;
    int rc = status_req(path, prio, 0, p, sizeof p, &ro);
    return rc ? rc : send_json_ex(c, &ro, "PATCH", p, "application/merge-patch+json", patch, cb, ud);
}

int kube_patch_status_sstr(struct kube_client *c, enum kube_prio prio, const char *path,
                           const char *json, kube_response_cb cb, void *ud)
{
    if (!json)
        return GQ_EINVAL;
    char p[2048];
    struct kube_req_opts ro;
    int rc = status_req(path, prio, 1, p, sizeof p, &ro);
    if (rc)
        return rc;
    return kube_request_ex(c, &ro, "PATCH", p, "application/merge-patch+json", json, cb, ud, NULL);
}

int kube_patch_status_would_refuse(const struct kube_client *c, enum kube_prio prio, const char *path)
{
    char p[2048];
    return !status_path(path, p, sizeof p) && kube_client_would_refuse(c, prio, p);
}

int kube_delete(struct kube_client *c, const char *path, long grace_seconds, const char *uid,
                kube_response_cb cb, void *ud)
{
    return kube_delete_rv(c, path, grace_seconds, uid, NULL, cb, ud);
}

int kube_delete_rv(struct kube_client *c, const char *path, long grace_seconds, const char *uid,
                   const char *rv, kube_response_cb cb, void *ud)
{
    return kube_delete_rv_p(c, KUBE_PRIO_NORMAL, path, grace_seconds, uid, rv, cb, ud);
}

int kube_delete_rv_p(struct kube_client *c, enum kube_prio prio, const char *path,
                     long grace_seconds, const char *uid, const char *rv, kube_response_cb cb,
                     void *ud)
{
    struct kube_req_opts ro = {prio, NULL, 0, 0};
    cJSON *opts = cJSON_CreateObject();
    int rc = GQ_ENOMEM;
    if (!opts)
        return GQ_ENOMEM;
    if (!cJSON_AddStringToObject(opts, "kind", "DeleteOptions") ||
        !cJSON_AddStringToObject(opts, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(opts, "propagationPolicy", "Background"))
        goto out;
    if (grace_seconds >= 0 &&
        !cJSON_AddNumberToObject(opts, "gracePeriodSeconds", (double)grace_seconds))
        goto out;
    if ((uid && *uid) || (rv && *rv)) {
        cJSON *pre = cJSON_AddObjectToObject(opts, "preconditions");
        if (!pre || (uid && *uid && !cJSON_AddStringToObject(pre, "uid", uid)) ||
            (rv && *rv && !cJSON_AddStringToObject(pre, "resourceVersion", rv)))
            goto out;
    }
    rc = send_json_ex(c, &ro, "DELETE", path, "application/json", opts, cb, ud);
out:
    cJSON_Delete(opts);
    return rc;
}

int kube_get(struct kube_client *c, const char *path, kube_response_cb cb, void *ud)
{
    return kube_request(c, "GET", path, NULL, NULL, cb, ud);
}

/* ----------------------------------------------------------------- events */

static int add_str(cJSON *o, const char *k, const char *v)
{
    return v && *v ? (cJSON_AddStringToObject(o, k, v) ? 0 : GQ_ENOMEM) : 0;
}

cJSON *kube_event_build(const struct kube_objref *ref, const char *type, const char *reason,
                        const char *message, const char *instance, double now_wall)
{
    cJSON *ev = NULL, *md, *io, *src;
    char ts[40], tsec[40], name[300], host[128];
    const char *ns;
    int rc = 0;
    if (!ref || !ref->name || !ref->kind || !reason || !type)
        return NULL;
    if (kube_time_format_micro(now_wall, ts, sizeof ts) != 0)
        return NULL;
    /* firstTimestamp/lastTimestamp are second-precision metav1.Time */
    gq_strlcpy(tsec, ts, sizeof tsec);
    if (strlen(tsec) > 19)
        gq_strlcpy(tsec + 19, "Z", sizeof tsec - 19);
    ns = ref->namespace_ && *ref->namespace_ ? ref->namespace_ : "default";
    /* unique like client-go: <name>.<hex nanoseconds> */
    snprintf(name, sizeof name, "%.200s.%llx", ref->name,
             (unsigned long long)(now_wall * 1e9));
    if (!instance) {
        if (gethostname(host, sizeof host) != 0)
            gq_strlcpy(host, "gangq", sizeof host);
        host[sizeof host - 1] = '\0';
        instance = host;
    }
    ev = cJSON_CreateObject();
    if (!ev)
        return NULL;
    rc |= add_str(ev, "apiVersion", "v1");
    rc |= add_str(ev, "kind", "Event");
    md = cJSON_AddObjectToObject(ev, "metadata");
    io = cJSON_AddObjectToObject(ev, "involvedObject");
    src = cJSON_AddObjectToObject(ev, "source");
    if (!md || !io || !src)
        goto fail;
    rc |= add_str(md, "name", name);
    rc |= add_str(md, "namespace", ns);
    rc |= add_str(io, "apiVersion", ref->api_version);
    rc |= add_str(io, "kind", ref->kind);
    rc |= add_str(io, "namespace", ref->namespace_);
    rc |= add_str(io, "name", ref->name);
    rc |= add_str(io, "uid", ref->uid);
    rc |= add_str(io, "resourceVersion", ref->resource_version);
    rc |= add_str(ev, "type", type);
    rc |= add_str(ev, "reason", reason);
    rc |= add_str(ev, "message", message ? message : "");
    rc |= add_str(ev, "firstTimestamp", tsec);
    rc |= add_str(ev, "lastTimestamp", tsec);
    if (ref->namespace_ && *ref->namespace_) {
        /* a cluster-scoped object (Team, GPUPool, Node) gets a legacy event in
         * "default", as client-go's recorder writes it: the API server refuses
         * one with eventTime set outside kube-system */
        rc |= add_str(ev, "eventTime", ts);
        rc |= add_str(ev, "action", reason);
        rc |= add_str(ev, "reportingComponent", "gangq.io/controller");
        rc |= add_str(ev, "reportingInstance", instance);
    }
    rc |= add_str(src, "component", "gangq.io/controller");
    if (rc || !cJSON_AddNumberToObject(ev, "count", 1))
        goto fail;
    return ev;
fail:
    cJSON_Delete(ev);
    return NULL;
}

int kube_event_create(struct kube_client *c, const struct kube_objref *ref, const char *type,
                      const char *reason, const char *message, const char *instance,
                      kube_response_cb cb, void *ud)
{
    return kube_event_create_p(c, KUBE_PRIO_NORMAL, ref, type, reason, message, instance, cb,
                               ud);
}

int kube_event_create_p(struct kube_client *c, enum kube_prio prio, const struct kube_objref *ref,
                        const char *type, const char *reason, const char *message,
                        const char *instance, kube_response_cb cb, void *ud)
{
    char path[512];
    struct timespec ts;
    cJSON *ev;
    int rc;
    clock_gettime(CLOCK_REALTIME, &ts);
    ev = kube_event_build(ref, type, reason, message, instance,
                          (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
    if (!ev)
        return GQ_EINVAL;
    rc = kube_path(path, sizeof path, "/api/v1",
                   ref->namespace_ && *ref->namespace_ ? ref->namespace_ : "default", "events",
                   NULL, NULL);
    if (rc == 0)
        rc = kube_create_p(c, prio, path, ev, cb, ud);
    cJSON_Delete(ev);
    return rc;
}
