/*
 * ctl_snapshot.c — pure conversions for the controller: placement text,
 * Kubernetes Node/Pod reading, the scheduler snapshot, and GPUJob status.
 * No I/O, no clock (now is passed in).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "ctl.h"
#include "kube.h"
#include "quantity.h"
#include "store.h"

/* ------------------------------------------------------------ placement */

void ctl_placement_init(struct ctl_placement *p)
{
    memset(p, 0, sizeof(*p));
}

void ctl_placement_release(struct ctl_placement *p)
{
    if (!p)
        return;
    if (!p->borrowed)
        free(p->rep);
    memset(p, 0, sizeof(*p));
}

void ctl_placement_borrow(struct ctl_placement *dst, const struct ctl_placement *src)
{
    ctl_placement_release(dst);
    *dst = *src;
    dst->borrowed = src->n > 0;
    if (!dst->borrowed)
        dst->rep = NULL;
}

/* p's replicas its own (a borrowed set copied). */
static int placement_own(struct ctl_placement *p)
{
    if (!p->borrowed)
        return 0;
    struct ctl_prep *r = malloc((size_t)p->n * sizeof(*r)); /* borrowed: n > 0 */
    if (!r)
        return GQ_ENOMEM;
    memcpy(r, p->rep, (size_t)p->n * sizeof(*r));
    p->rep = r;
    p->borrowed = 0;
    return 0;
}

int ctl_placement_find(const struct ctl_placement *p, int replica)
{
    for (int i = 0; i < p->n; i++)
        if (p->rep[i].replica == replica)
            return i;
    return -1;
}

int ctl_placement_add(struct ctl_placement *p, int replica, const char *node, uint32_t devs)
{
    if (ctl_placement_find(p, replica) >= 0)
        return GQ_EINVAL;
    if (placement_own(p))
        return GQ_ENOMEM;
    struct ctl_prep *r = realloc(p->rep, (size_t)(p->n + 1) * sizeof(*r));
    if (!r)
        return GQ_ENOMEM;
    p->rep = r;
    int at = p->n;
    while (at > 0 && r[at - 1].replica > replica) {
        r[at] = r[at - 1];
        at--;
    }
    memset(&r[at], 0, sizeof(r[at]));
    r[at].replica = replica;
    if (gq_strlcpy(r[at].node, node, sizeof(r[at].node)) >= sizeof(r[at].node))
        return GQ_EINVAL;
    r[at].devs = devs;
    p->n++;
    return 0;
}

void ctl_pod_name(const char *job, const struct ctl_placement *p, const struct ctl_prep *r,
                  char *out, size_t len)
{
    if (r->gen)
        snprintf(out, len, "%s-%d-%d-g%d", job, p->attempt, r->replica, r->gen);
    else
        snprintf(out, len, "%s-%d-%d", job, p->attempt, r->replica);
}

int ctl_placement_remove(struct ctl_placement *p, int replica)
{
    int i = ctl_placement_find(p, replica);
    if (i < 0)
        return 0;
    if (placement_own(p))
        return GQ_ENOMEM;
    memmove(&p->rep[i], &p->rep[i + 1], (size_t)(p->n - i - 1) * sizeof(p->rep[0]));
    p->n--;
    return 0;
}

int ctl_placement_parse(const char *text, struct ctl_placement *out, char *err, size_t errlen)
{
    int rc = 0;
    cJSON *root = NULL;
    ctl_placement_release(out);
    if (!text || !text[0])
        return 0;
    root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) {
        gq_errf(err, errlen, "placement: invalid JSON");
        rc = GQ_EPARSE;
        goto out;
    }
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "attempt");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "domain");
    const cJSON *reps = cJSON_GetObjectItemCaseSensitive(root, "replicas");
    if (!cJSON_IsNumber(a) || !cJSON_IsArray(reps)) {
        gq_errf(err, errlen, "placement: attempt and replicas are required");
        rc = GQ_EPARSE;
        goto out;
    }
    out->attempt = a->valueint;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "reseq");
    if (cJSON_IsNumber(rs))
        out->reseq = rs->valueint;
    if (cJSON_IsString(d))
        gq_strlcpy(out->domain, d->valuestring, sizeof(out->domain));
    const cJSON *r;
    cJSON_ArrayForEach(r, reps)
    {
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(r, "i");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "node");
        const cJSON *dv = cJSON_GetObjectItemCaseSensitive(r, "devs");
        if (!cJSON_IsNumber(i) || !cJSON_IsString(n) || !cJSON_IsNumber(dv) || i->valuedouble < 0 ||
            dv->valuedouble < 0 || dv->valuedouble > 4294967295.0) {
            gq_errf(err, errlen, "placement: bad replica entry");
            rc = GQ_EPARSE;
            goto out;
        }
        if ((rc = ctl_placement_add(out, i->valueint, n->valuestring, (uint32_t)dv->valuedouble))) {
            gq_errf(err, errlen, "placement: duplicate or bad replica %d", i->valueint);
            goto out;
        }
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(r, "g");
        if (cJSON_IsNumber(g))
            out->rep[ctl_placement_find(out, i->valueint)].gen = g->valueint;
    }
out:
    cJSON_Delete(root);
    if (rc)
        ctl_placement_release(out);
    return rc;
}

int ctl_placement_format(const struct ctl_placement *p, struct gq_buf *out)
{
    int rc = gq_buf_printf(out, "{\"attempt\":%d,\"reseq\":%d,\"domain\":", p->attempt, p->reseq);
    if (!rc)
        rc = gq_buf_json_str(out, p->domain);
    if (!rc)
        rc = gq_buf_puts(out, ",\"replicas\":[");
    for (int i = 0; !rc && i < p->n; i++) {
        rc = gq_buf_printf(out, "%s{\"i\":%d,\"node\":", i ? "," : "", p->rep[i].replica);
        if (!rc)
            rc = gq_buf_json_str(out, p->rep[i].node);
        if (!rc)
            rc = gq_buf_printf(out, ",\"devs\":%u", (unsigned)p->rep[i].devs);
        if (!rc && p->rep[i].gen)
            rc = gq_buf_printf(out, ",\"g\":%d", p->rep[i].gen);
        if (!rc)
            rc = gq_buf_puts(out, "}");
    }
    if (!rc)
        rc = gq_buf_puts(out, "]}");
    return rc;
}

/* ------------------------------------------------------------ objects */

static const cJSON *obj_get(const cJSON *o, const char *k)
{
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

const char *ctl_obj_str(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = obj_get(obj, a);
    if (b)
        v = obj_get(v, b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int ctl_obj_set_str(cJSON *obj, const char *k, const char *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(obj, k);
    return cJSON_AddStringToObject(obj, k, v) ? 0 : GQ_ENOMEM;
}

cJSON *ctl_obj_child(cJSON *parent, const char *k)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(parent, k);
    if (cJSON_IsObject(v))
        return v;
    cJSON_DeleteItemFromObjectCaseSensitive(parent, k);
    return cJSON_AddObjectToObject(parent, k);
}

const char *ctl_obj_label(const cJSON *obj, const char *key)
{
    const cJSON *v = obj_get(obj_get(obj_get(obj, "metadata"), "labels"), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *ctl_obj_annotation(const cJSON *obj, const char *key)
{
    const cJSON *v = obj_get(obj_get(obj_get(obj, "metadata"), "annotations"), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Quantity value of a string or number item; 0 when absent or malformed. */
static int64_t qty(const cJSON *v, int milli)
{
    int64_t out = 0;
    if (cJSON_IsString(v)) {
        if ((milli ? api_quantity_milli(v->valuestring, &out, NULL, 0)
                   : api_quantity_value(v->valuestring, &out, NULL, 0)))
            return 0;
        return out;
    }
    if (cJSON_IsNumber(v))
        return (int64_t)(v->valuedouble * (milli ? 1000.0 : 1.0));
    return 0;
}

int ctl_node_info(const cJSON *node, struct ctl_nodeinfo *out)
{
    memset(out, 0, sizeof(*out));
    const cJSON *spec = obj_get(node, "spec");
    const cJSON *status = obj_get(node, "status");
    out->unschedulable = cJSON_IsTrue(obj_get(spec, "unschedulable"));
    const cJSON *alloc = obj_get(status, "allocatable");
    if (!alloc)
        alloc = obj_get(status, "capacity");
    out->cpu_milli = qty(obj_get(alloc, "cpu"), 1);
    out->mem_bytes = qty(obj_get(alloc, "memory"), 0);
    int64_t g = qty(obj_get(alloc, CTL_GPU_RESOURCE), 0);
    out->gpus = (int)(g < 0 ? 0 : g > SCHED_MAX_DEVICES ? SCHED_MAX_DEVICES : g);
    const cJSON *c;
    cJSON_ArrayForEach(c, obj_get(status, "conditions"))
    {
        const char *t = ctl_obj_str(c, "type", NULL);
        if (!t || strcmp(t, "Ready"))
            continue;
        const char *s = ctl_obj_str(c, "status", NULL);
        out->ready = s && !strcmp(s, "True");
        const char *lt = ctl_obj_str(c, "lastTransitionTime", NULL);
        double w = 0;
        if (lt && !kube_time_parse(lt, &w))
            out->ready_since = w;
    }
    return 0;
}

/* A condensed status is kept deflated: at 15,000 cached jobs its compact
 * JSON (some 800 bytes a finished job, conditions and all) is the largest
 * part of the cache. The raw text is then RAW_Z followed by a raw deflate
 * stream (level 1, a window of 2^RAW_WBITS bytes, the preset dictionary
 * below) whose bytes 0 and 1 are written as 1 1 and 1 2, so that it stays a
 * C string a cJSON string holds. Any other raw text is the JSON itself (what
 * could not be deflated). Equal statuses give equal texts. */
#define RAW_Z '\x02'
#define RAW_WBITS 11
#define RAW_INFLATED_MAX ((size_t)4 << 20) /* a status is far smaller (the object's own bound) */
/* What a status repeats (the encoder's member names and values, two
 * conditions' worth), the likeliest last: deflate refers back into it. */
static const char status_dict[] =
    "\"lastPreemption\":{\"by\":\"\",\"reason\":\"\",\"time\":\"\"},\"admission\":{\"borrowed\":0,"
    "\"domain\":\"\",\"nodes\":[\"\"]},\"pendingHead\":[],\"quota\":{\"used\":0},\"deadline\":\"\","
    "\"running\":0,\"pending\":0,\"nodes\":\"\",\"waitReason\":\"Quota\",\"waitReason\":\"Preempting\","
    "\"reason\":\"ExceedsCluster\",\"status\":\"True\",\"type\":\"Unschedulable\"},"
    "{\"arrival\":1,\"attempt\":1,\"completionTime\":\"2026-12-06T00:00:00Z\",\"conditions\":[{"
    "\"lastTransitionTime\":\"2026-12-06T00:00:00Z\",\"message\":\"Admitted\",\"reason\":\"Admitted\","
    "\"status\":\"True\",\"type\":\"Admitted\"},{\"lastTransitionTime\":\"2026-12-06T00:00:00Z\","
    "\"message\":\"NotRunning\",\"reason\":\"NotRunning\",\"status\":\"False\",\"type\":\"Running\"},"
    "{\"lastTransitionTime\":\"2026-12-06T00:00:00Z\",\"message\":\"every replica succeeded\",\"reason\":"
    "\"PodsSucceeded\",\"status\":\"True\",\"type\":\"Succeeded\"},{\"lastTransitionTime\":"
    "\"2026-12-06T00:00:00Z\",\"message\":\"Succeeded\",\"reason\":\"Succeeded\",\"status\":\"False\","
    "\"type\":\"Queued\"}],\"enqueueTime\":\"2026-12-06T00:00:00Z\",\"gpus\":1,\"message\":\"\","
    "\"observedGeneration\":1,\"position\":1,\"preemptions\":0,\"priority\":0,\"retries\":0,"
    "\"startTime\":\"2026-12-06T00:00:00Z\",\"state\":\"Queued\",\"state\":\"Succeeded\",\"team\":\"";

/* json deflated and escaped (RAW_Z first), a new string, or NULL (out of
 * memory, or it would not be smaller: the caller keeps the JSON). */
static char *raw_deflate(const char *json)
{
    size_t n = strlen(json);
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (n < 64 || n > (size_t)UINT_MAX / 2 ||
        deflateInit2(&zs, 1, Z_DEFLATED, -RAW_WBITS, 2, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    uLong bound = deflateBound(&zs, (uLong)n);
    unsigned char *z = malloc(bound);
    char *out = NULL;
    if (z && deflateSetDictionary(&zs, (const Bytef *)status_dict, (uInt)(sizeof(status_dict) - 1)) == Z_OK) {
        zs.next_in = (Bytef *)(uintptr_t)json;
        zs.avail_in = (uInt)n;
        zs.next_out = z;
        zs.avail_out = (uInt)bound;
        if (deflate(&zs, Z_FINISH) == Z_STREAM_END && zs.total_out < n / 2) {
            size_t zl = zs.total_out, k = 0;
            out = malloc(2 * zl + 2);
            if (out) {
                out[k++] = RAW_Z;
                for (size_t i = 0; i < zl; i++) {
                    if (z[i] <= 1) {
                        out[k++] = 1;
                        out[k++] = (char)(z[i] + 1);
                    } else {
                        out[k++] = (char)z[i];
                    }
                }
                out[k] = '\0';
            }
        }
    }
    deflateEnd(&zs);
    free(z);
    return out;
}

/* A raw text raw_deflate wrote (RAW_Z first). */
static int raw_deflated(const char *raw)
{
    return (unsigned char)raw[0] == (unsigned char)RAW_Z;
}

/* The JSON of a raw_deflated text, a new string; NULL when it is damaged or
 * out of memory. */
static char *raw_inflate(const char *raw)
{
    size_t rl = strlen(raw + 1), zl = 0;
    unsigned char *z = malloc(rl + 1);
    if (!z)
        return NULL;
    for (size_t i = 1; raw[i]; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c == 1) {
            unsigned char e = (unsigned char)raw[++i];
            if (e != 1 && e != 2) {
                free(z);
                return NULL; /* not an escape raw_deflate writes (or the text ends) */
            }
            c = (unsigned char)(e - 1);
        }
        z[zl++] = c;
    }
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, -RAW_WBITS) != Z_OK) {
        free(z);
        return NULL;
    }
    size_t cap = 4 * zl + 256, len = 0;
    char *out = NULL;
    int zr = inflateSetDictionary(&zs, (const Bytef *)status_dict, (uInt)(sizeof(status_dict) - 1));
    zs.next_in = z;
    zs.avail_in = (uInt)zl;
    while (zr == Z_OK && cap <= RAW_INFLATED_MAX) {
        char *grown = realloc(out, cap + 1);
        if (!grown)
            break;
        out = grown;
        zs.next_out = (Bytef *)out + len;
        zs.avail_out = (uInt)(cap - len);
        zr = inflate(&zs, Z_FINISH);
        len = cap - zs.avail_out;
        if (zr == Z_STREAM_END)
            break;
        if (zr == Z_BUF_ERROR && zs.avail_out == 0)
            zr = Z_OK; /* more room */
        cap *= 2;
    }
    inflateEnd(&zs);
    free(z);
    if (zr != Z_STREAM_END || zs.avail_in || memchr(out, '\0', len)) {
        free(out);
        return NULL;
    }
    out[len] = '\0';
    return out;
}

/* obj's member name, an object, becomes {raw_key: "<it, compact JSON>"} and
 * copies of its members named in keep (NULL-terminated); the text deflated
 * (raw_deflate) when deflate is set. Left as it is when not an object,
 * already condensed, or out of memory. */
static void condense(cJSON *obj, const char *name, const char *raw_key, const char *const *keep, int deflate)
{
    const cJSON *part = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsObject(part) || cJSON_GetObjectItemCaseSensitive(part, raw_key))
        return;
    char *raw = cJSON_PrintUnformatted(part);
    char *z = raw && deflate ? raw_deflate(raw) : NULL;
    cJSON *small = raw ? cJSON_CreateObject() : NULL;
    int ok = small && cJSON_AddStringToObject(small, raw_key, z ? z : raw);
    free(z);
    free(raw);
    for (int k = 0; ok && keep[k]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(part, keep[k]);
        cJSON *dup = v ? cJSON_Duplicate(v, 1) : NULL;
        if (v && (!dup || !cJSON_AddItemToObject(small, keep[k], dup))) {
            cJSON_Delete(dup);
            ok = 0;
        }
    }
    if (!ok || !cJSON_ReplaceItemInObjectCaseSensitive(obj, name, small))
        cJSON_Delete(small);
}

void ctl_prune_gpujob(cJSON *obj)
{
    /* completionTime: a finished job's ttlSecondsAfterFinished counts from it */
    static const char *const status_keep[] = {"state", "attempt", "completionTime", NULL}, *const none[] = {NULL};
    condense(obj, "status", CTL_STATUS_RAW, status_keep, 1);
    /* the spec stays JSON: a search of its text decides whether a finished
     * job has a ttlSecondsAfterFinished (ctl_main.c ttl_finish_shown) */
    condense(obj, "spec", CTL_SPEC_RAW, none, 0);
    kube_prune_common(obj); /* interns the member names, the condensed parts' too */
}

/* The raw text condense left of obj's member name, or NULL (not condensed). */
static const cJSON *raw_of(const cJSON *obj, const char *name, const char *raw_key)
{
    const cJSON *raw = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, name), raw_key);
    return cJSON_IsString(raw) ? raw : NULL;
}

const cJSON *ctl_job_spec(const cJSON *job, cJSON **tmp)
{
    const cJSON *raw = raw_of(job, "spec", CTL_SPEC_RAW);
    *tmp = raw ? cJSON_Parse(raw->valuestring) : NULL;
    return raw ? *tmp : cJSON_GetObjectItemCaseSensitive(job, "spec");
}

cJSON *ctl_job_expand(const cJSON *job, int *enomem)
{
    *enomem = 0;
    const cJSON *raw = raw_of(job, "spec", CTL_SPEC_RAW);
    if (!raw)
        return NULL;
    cJSON *out = cJSON_CreateObject(), *c;
    int ok = out != NULL;
    cJSON_ArrayForEach(c, job)
    {
        if (!ok || !c->string)
            break;
        if (strcmp(c->string, "spec")) {
            ok = cJSON_AddItemReferenceToObject(out, c->string, c);
            continue;
        }
        cJSON *parsed = cJSON_Parse(raw->valuestring);
        if (!parsed) /* not JSON (or no memory): the decoder reports spec */
            parsed = cJSON_CreateString(raw->valuestring);
        ok = parsed && cJSON_AddItemToObject(out, "spec", parsed);
        if (!ok)
            cJSON_Delete(parsed);
    }
    if (!ok) {
        cJSON_Delete(out);
        *enomem = 1;
        return NULL;
    }
    return out;
}

int ctl_job_status_decode(const cJSON *job, struct api_gpujob_status *out, struct api_errors *errs)
{
    const cJSON *raw = raw_of(job, "status", CTL_STATUS_RAW);
    if (!raw)
        return api_gpujob_status_decode(job, out, errs);
    int z = raw_deflated(raw->valuestring);
    char *json = z ? raw_inflate(raw->valuestring) : NULL;
    const char *text = z ? json : raw->valuestring;
    cJSON *st = text ? cJSON_Parse(text) : NULL;
    free(json);
    if (!st) {
        memset(out, 0, sizeof(*out));
        api_errors_add(errs, "status", "cached status is not JSON");
        return GQ_EPARSE;
    }
    cJSON *wrap = cJSON_CreateObject();
    if (!wrap || !cJSON_AddItemToObject(wrap, "status", st)) {
        cJSON_Delete(wrap);
        cJSON_Delete(st);
        return GQ_ENOMEM;
    }
    int rc = api_gpujob_status_decode(wrap, out, errs);
    cJSON_Delete(wrap);
    return rc;
}

int ctl_pod_terminal(const cJSON *pod)
{
    const char *ph = ctl_obj_str(pod, "status", "phase");
    return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"));
}

static int pod_owned_by(const cJSON *pod, const char *uid)
{
    const cJSON *ref;
    if (!uid || !uid[0])
        return 1;
    cJSON_ArrayForEach(ref, obj_get(obj_get(pod, "metadata"), "ownerReferences"))
    {
        const char *u = ctl_obj_str(ref, "uid", NULL);
        if (u && !strcmp(u, uid))
            return 1;
    }
    return 0;
}

/* A Succeeded pod of uid: its attempt and replica labels (0 = not one). */
static int pod_succeeded_of(const cJSON *pod, const char *uid, int64_t *attempt, int64_t *replica)
{
    const char *ph = ctl_obj_str(pod, "status", "phase");
    const char *a = ctl_obj_label(pod, CTL_LABEL_ATTEMPT), *r = ctl_obj_label(pod, CTL_LABEL_REPLICA);
    return ph && !strcmp(ph, "Succeeded") && a && r && !gq_parse_i64(a, (size_t)-1, attempt) &&
           !gq_parse_i64(r, (size_t)-1, replica) && *attempt > 0 && *attempt < 1000000 && *replica >= 0 &&
           pod_owned_by(pod, uid);
}

int ctl_pods_succeeded_attempt(const cJSON *const *pods, int npods, const char *uid, int replicas)
{
    uint8_t seen[API_REPLICAS_MAX / 8];
    int64_t limit = INT64_MAX;
    if (replicas <= 0 || replicas > API_REPLICAS_MAX)
        return 0;
    for (;;) { /* attempts with a Succeeded pod, newest first */
        int64_t a = 0, pa, pr;
        for (int i = 0; i < npods; i++)
            if (pod_succeeded_of(pods[i], uid, &pa, &pr) && pa < limit && pa > a)
                a = pa;
        if (!a)
            return 0;
        int n = 0;
        memset(seen, 0, sizeof(seen));
        for (int i = 0; i < npods; i++)
            if (pod_succeeded_of(pods[i], uid, &pa, &pr) && pa == a && pr < replicas &&
                !(seen[pr / 8] & (1u << (pr % 8)))) {
                seen[pr / 8] |= (uint8_t)(1u << (pr % 8));
                n++;
            }
        if (n == replicas)
            return (int)a;
        limit = a;
    }
}

int ctl_pods_live(const cJSON *const *pods, int npods, const char *uid)
{
    for (int i = 0; i < npods; i++)
        if (pods[i] && !ctl_pod_terminal(pods[i]) && !ctl_obj_str(pods[i], "metadata", "deletionTimestamp") &&
            pod_owned_by(pods[i], uid))
            return 1;
    return 0;
}

static void container_req(const cJSON *c, int64_t *cpu, int64_t *mem, int64_t *gpu)
{
    const cJSON *res = obj_get(c, "resources");
    const cJSON *req = obj_get(res, "requests"), *lim = obj_get(res, "limits");
    const cJSON *v;
    v = obj_get(req, "cpu");
    *cpu = qty(v ? v : obj_get(lim, "cpu"), 1);
    v = obj_get(req, "memory");
    *mem = qty(v ? v : obj_get(lim, "memory"), 0);
    v = obj_get(lim, CTL_GPU_RESOURCE);
    *gpu = qty(v ? v : obj_get(req, CTL_GPU_RESOURCE), 0);
}

static uint32_t parse_devs(const char *s)
{
    uint32_t m = 0;
    if (!s)
        return 0;
    while (*s) {
        char *end = NULL;
        long d = strtol(s, &end, 10);
        if (end == s)
            break;
        if (d >= 0 && d < SCHED_MAX_DEVICES)
            m |= 1u << (unsigned)d;
        s = end;
        while (*s == ',' || *s == ' ')
            s++;
    }
    return m;
}

void ctl_pod_usage(const cJSON *pod, struct ctl_podusage *out)
{
    memset(out, 0, sizeof(*out));
    const cJSON *spec = obj_get(pod, "spec");
    int64_t sc = 0, sm = 0, sg = 0, ic = 0, im = 0, ig = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj_get(spec, "containers"))
    {
        int64_t a, b, g;
        container_req(c, &a, &b, &g);
        sc += a;
        sm += b;
        sg += g;
    }
    cJSON_ArrayForEach(c, obj_get(spec, "initContainers"))
    {
        int64_t a, b, g;
        container_req(c, &a, &b, &g);
        ic = GQ_MAX(ic, a);
        im = GQ_MAX(im, b);
        ig = GQ_MAX(ig, g);
    }
    out->cpu_milli = GQ_MAX(sc, ic);
    out->mem_bytes = GQ_MAX(sm, im);
    int64_t g = GQ_MAX(sg, ig);
    out->gpus = (int)(g < 0 ? 0 : g > SCHED_MAX_DEVICES ? SCHED_MAX_DEVICES : g);
    const char *ms = ctl_obj_annotation(pod, CTL_ANN_GPU_MILLI);
    int64_t mv = 0;
    if (ms && !gq_parse_i64(ms, (size_t)-1, &mv) && mv > 0 && mv < 1000)
        out->gpu_milli = (int)mv;
    out->devs = parse_devs(ctl_obj_annotation(pod, CTL_ANN_GPU_DEVICES));
}

/* ------------------------------------------------------------ snapshot */

int ctl_node_pool(const cJSON *node, const struct api_gpupool *pools, int npools)
{
    for (int p = 0; p < npools; p++) {
        int ok = 1;
        for (int k = 0; ok && k < pools[p].nselector; k++) {
            const char *v = ctl_obj_label(node, pools[p].node_selector[k].key);
            ok = v && !strcmp(v, pools[p].node_selector[k].value);
        }
        if (ok)
            return p;
    }
    return -1;
}

static int class_idx(enum api_class c)
{
    switch (c) {
    case API_CLASS_INFERENCE: return SCHED_INFERENCE;
    case API_CLASS_TRAINING: return SCHED_TRAINING;
    default: return SCHED_BATCH;
    }
}

static int taint_effect(const char *e)
{
    if (!e || !e[0])
        return SCHED_EFFECT_ANY;
    if (!strcmp(e, "NoExecute"))
        return SCHED_NO_EXECUTE;
    if (!strcmp(e, "PreferNoSchedule"))
        return SCHED_PREFER_NO_SCHEDULE;
    return SCHED_NO_SCHEDULE;
}

/* The slot of name (hash h) in the node table: its entry, or the empty one
 * where it would go. */
static size_t nodeix_slot(const struct ctl_snap *s, const char *name, uint64_t h)
{
    size_t mask = s->node_ixcap - 1, k = (size_t)h & mask;
    while (s->node_ix[k].name && (s->node_ix[k].h != h || strcmp(s->node_ix[k].name, name)))
        k = (k + 1) & mask;
    return k;
}

int ctl_snap_node(const struct ctl_snap *s, const char *name)
{
    if (!s->node_ix) {
        for (int i = 0; i < s->snap.nnodes; i++)
            if (!strcmp(s->nodes[i].name, name))
                return i;
        return -1;
    }
    /* one hash and, mostly, one comparison: a bound replica of every running
     * job is looked up here in every reconcile */
    size_t k = nodeix_slot(s, name, gq_hash_str(name));
    return s->node_ix[k].name ? s->node_ix[k].i : -1;
}

/* The kept arrays of a snapshot, one slot each. */
enum {
    KEEP_NODES, KEEP_MILLI, KEEP_LABELS, KEEP_TAINTS, KEEP_POOLS, KEEP_TEAMS, KEEP_QUOTAS,
    KEEP_JOBS, KEEP_JOB_IN, KEEP_REPS, KEEP_TOLS, KEEP_SELS, KEEP_NODE_IX, KEEP_ARRIVAL, KEEP_ARRIVAL_TMP
};
_Static_assert(KEEP_ARRIVAL_TMP < CTL_SNAP_NKEEP, "CTL_SNAP_NKEEP too small");

/* Kept memory larger than this and more than four times what a snapshot
 * needs is given back: after a burst (15,000 jobs, then a few hundred) it
 * would stay resident for nothing. */
#define KEEP_SHRINK_MIN (256u * 1024u)

/* n zeroed bytes in slot k of s's kept memory, grown (with a quarter of
 * slack) when too small, made anew when far too large (KEEP_SHRINK_MIN);
 * NULL when out of memory (the slot keeps what it had). */
static void *keep_zalloc(struct ctl_snap *s, int k, size_t n)
{
    if (!gq_kept_fits(s->keep.cap[k], n, KEEP_SHRINK_MIN)) {
        size_t cap = n + n / 4;
        void *p = malloc(cap);
        if (!p)
            return NULL;
        free(s->keep.p[k]);
        s->keep.p[k] = p;
        s->keep.cap[k] = cap;
    }
    memset(s->keep.p[k], 0, n);
    return s->keep.p[k];
}

void ctl_snap_keep_release(struct ctl_snap_keep *k)
{
    for (int i = 0; i < CTL_SNAP_NKEEP; i++)
        free(k->p[i]);
    memset(k, 0, sizeof(*k));
}

void ctl_snap_release(struct ctl_snap *s)
{
    if (!s)
        return;
    ctl_snap_keep_release(&s->keep); /* every array lives there */
    memset(s, 0, sizeof(*s));
}

/* What a pod gangq does not hold may say of its GPUs. The annotations
 * (devices, share) are gangq's record on the pods it creates; on any other
 * pod they are the author's word, and a tenant able to create a pod could
 * copy them to be counted for one device, or a share, while its request asks
 * the kubelet for eight. So they count only on a gangq pod no job holds any
 * more (gangq_pod), and there only as far as they agree with the request:
 * devices only when as many as the whole GPUs requested, a share only when
 * no whole GPU is. Otherwise the request alone counts (whole devices). */
static void foreign_trust(struct ctl_podusage *u, int gangq_pod)
{
    if (!gangq_pod) {
        u->devs = 0;
        u->gpu_milli = 0;
        return;
    }
    if (u->gpus > 0) {
        u->gpu_milli = 0;
        if (__builtin_popcount(u->devs) != u->gpus)
            u->devs = 0;
    }
}

/* Mark n whole devices (or one share) as foreign on a node. */
static void foreign_gpus(struct sched_node *n, const struct ctl_podusage *u)
{
    if (u->devs) {
        for (int d = 0; d < n->gpus; d++)
            if (u->devs & (1u << (unsigned)d)) {
                int v = n->foreign_gpu_milli[d] + (u->gpu_milli ? u->gpu_milli : 1000);
                n->foreign_gpu_milli[d] = (uint16_t)(v > 1000 ? 1000 : v);
            }
        return;
    }
    if (u->gpu_milli) {
        for (int d = 0; d < n->gpus; d++)
            if (n->foreign_gpu_milli[d] + u->gpu_milli <= 1000) {
                n->foreign_gpu_milli[d] = (uint16_t)(n->foreign_gpu_milli[d] + u->gpu_milli);
                return;
            }
        return;
    }
    int left = u->gpus;
    for (int d = 0; left > 0 && d < n->gpus; d++)
        if (n->foreign_gpu_milli[d] == 0) {
            n->foreign_gpu_milli[d] = 1000;
            left--;
        }
    for (int d = 0; left > 0 && d < n->gpus; d++)
        if (n->foreign_gpu_milli[d] < 1000) {
            n->foreign_gpu_milli[d] = 1000;
            left--;
        }
}

struct arrival_key {
    int64_t enq, arrival;
    const char *key;
    int k;
};

/* (enqueue_ms, arrival, key) order; keys_sorted: the jobs' keys ascend with
 * k, so k stands for the key (no string comparison). */
static int arrival_before(const struct arrival_key *x, const struct arrival_key *y, int keys_sorted)
{
    if (x->enq != y->enq)
        return x->enq < y->enq;
    if (x->arrival != y->arrival)
        return x->arrival < y->arrival;
    return keys_sorted ? x->k < y->k : strcmp(x->key, y->key) < 0;
}

/* Stable bottom-up merge sort of v[0..n) with tmp (n entries); the result
 * ends in v. No allocation: qsort's own buffer of a reconcile's 15,000 jobs
 * came fresh from mmap, page faults included, every reconcile. */
static void arrival_sort(struct arrival_key *v, struct arrival_key *tmp, int n, int keys_sorted)
{
    struct arrival_key *a = v, *b = tmp;
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                b[o++] = arrival_before(&a[j], &a[i], keys_sorted) ? a[j++] : a[i++];
            while (i < mid)
                b[o++] = a[i++];
            while (j < hi)
                b[o++] = a[j++];
        }
        struct arrival_key *t = a;
        a = b;
        b = t;
    }
    if (a != v)
        memcpy(v, a, (size_t)n * sizeof(*v));
}

/* The core orders equal priorities by enqueue_time, then by id (the name):
 * give it each job's rank in (enqueue_ms, arrival, key) order, so jobs created
 * within one second keep their arrival order. */
static int arrival_ranks(struct ctl_snap *s, const struct ctl_snapin *in, int nj, char *err,
                         size_t errlen)
{
    struct arrival_key *v = keep_zalloc(s, KEEP_ARRIVAL, ((size_t)nj + 1) * sizeof(*v));
    struct arrival_key *tmp = keep_zalloc(s, KEEP_ARRIVAL_TMP, ((size_t)nj + 1) * sizeof(*tmp));
    if (!v || !tmp) {
        gq_errf(err, errlen, "snapshot: out of memory");
        return GQ_ENOMEM;
    }
    int keys_sorted = 1, check = !in->keys_sorted; /* the reconcile hands the jobs over in key order */
    for (int k = 0; k < nj; k++) {
        const struct ctl_jobin *ji = &in->jobs[s->job_in[k]];
        v[k] = (struct arrival_key){ji->enqueue_ms, ji->arrival, ji->key, k};
        if (check && k > 0 && keys_sorted && strcmp(v[k - 1].key, ji->key) >= 0)
            keys_sorted = 0;
    }
    arrival_sort(v, tmp, nj, keys_sorted);
    for (int r = 0; r < nj; r++)
        s->jobs[v[r].k].enqueue_time = r;
    return 0;
}

int ctl_team_find(const struct api_team *teams, int n, const char *name, int *hint)
{
    if (!name || !name[0])
        return -1;
    if (*hint >= 0 && *hint < n && !strcmp(teams[*hint].meta.name, name))
        return *hint;
    for (int t = 0; t < n; t++)
        if (!strcmp(teams[t].meta.name, name))
            return *hint = t;
    return -1;
}

/* The index of the job with id key among the first nj of s->jobs, -1 when
 * none. The ids are keys, unique; ctl_snapin's jobs come sorted by key and
 * the snapshot keeps their order, so a binary search finds it; should they
 * not be (a caller of this module), a scan does. */
static int snap_job_find(const struct ctl_snap *s, int nj, const char *key)
{
    int lo = 0, hi = nj;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(s->jobs[mid].id, key);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int p = 0; p < nj; p++)
        if (!strcmp(s->jobs[p].id, key))
            return p;
    return -1;
}

int ctl_snap_build(struct ctl_snap *s, const struct ctl_snapin *in, char *err, size_t errlen)
{
    int rc = 0;
    struct ctl_snap_keep keep = s->keep;
    memset(s, 0, sizeof(*s));
    s->keep = keep;
    int nl = 0, nt = 0, nq = 0, nr = 0, ntol = 0, nsel = 0;
    int naff_t = 0, naff_x = 0, naff_v = 0;
    for (int i = 0; i < in->nnodes; i++) {
        nl += cJSON_GetArraySize(obj_get(obj_get(in->nodes[i], "metadata"), "labels"));
        nt += cJSON_GetArraySize(obj_get(obj_get(in->nodes[i], "spec"), "taints"));
    }
    for (int i = 0; i < in->nteams; i++)
        nq += in->teams[i].nquota;
    for (int i = 0; i < in->njobs; i++) {
        if (in->jobs[i].running && in->jobs[i].pl)
            nr += in->jobs[i].pl->n;
        const struct api_gpujob_spec *sp = &in->jobs[i].job->spec;
        ntol += sp->ntolerations;
        nsel += sp->nselector;
        if (sp->node_affinity) {
            naff_t += sp->node_affinity->nterms;
            naff_x += sp->node_affinity->nexprs;
            naff_v += sp->node_affinity->nvalues;
        }
    }
    s->nodes = keep_zalloc(s, KEEP_NODES, ((size_t)in->nnodes + 1) * sizeof(*s->nodes));
    s->gangq_milli = keep_zalloc(s, KEEP_MILLI, ((size_t)in->nnodes + 1) * sizeof(*s->gangq_milli));
    s->labels = keep_zalloc(s, KEEP_LABELS, ((size_t)nl + 1) * sizeof(*s->labels));
    s->taints = keep_zalloc(s, KEEP_TAINTS, ((size_t)nt + 1) * sizeof(*s->taints));
    s->pools = keep_zalloc(s, KEEP_POOLS, ((size_t)in->npools + 1) * sizeof(*s->pools));
    s->teams = keep_zalloc(s, KEEP_TEAMS, ((size_t)in->nteams + 1) * sizeof(*s->teams));
    s->quotas = keep_zalloc(s, KEEP_QUOTAS, ((size_t)nq + 1) * sizeof(*s->quotas));
    s->jobs = keep_zalloc(s, KEEP_JOBS, ((size_t)in->njobs + 1) * sizeof(*s->jobs));
    s->job_in = keep_zalloc(s, KEEP_JOB_IN, ((size_t)in->njobs + 1) * sizeof(*s->job_in));
    s->reps = keep_zalloc(s, KEEP_REPS, ((size_t)nr + 1) * sizeof(*s->reps));
    s->tols = keep_zalloc(s, KEEP_TOLS, ((size_t)ntol + 1) * sizeof(*s->tols));
    /* s->sels also holds, after the nsel selector entries, the jobs' node
     * affinity: terms, then expressions, then value pointers (one block, one
     * free; every element is pointer-aligned) */
    size_t aff_off_t = ((size_t)nsel + 1) * sizeof(*s->sels);
    size_t aff_off_x = aff_off_t + (size_t)naff_t * sizeof(struct sched_affinity_term);
    size_t aff_off_v = aff_off_x + (size_t)naff_x * sizeof(struct sched_match_expr);
    s->sels = keep_zalloc(s, KEEP_SELS, aff_off_v + (size_t)naff_v * sizeof(const char *));
    struct sched_affinity_term *aff_t = s->sels ? (void *)((char *)s->sels + aff_off_t) : NULL;
    struct sched_match_expr *aff_x = s->sels ? (void *)((char *)s->sels + aff_off_x) : NULL;
    const char **aff_v = s->sels ? (void *)((char *)s->sels + aff_off_v) : NULL;
    if (!s->nodes || !s->gangq_milli || !s->labels || !s->taints || !s->pools || !s->teams ||
        !s->quotas || !s->jobs || !s->job_in || !s->reps || !s->tols || !s->sels) {
        gq_errf(err, errlen, "snapshot: out of memory");
        rc = GQ_ENOMEM;
        goto out;
    }

    /* pools */
    for (int p = 0; p < in->npools; p++) {
        const struct api_gpupool *ap = &in->pools[p];
        struct sched_pool *sp = &s->pools[p];
        sp->name = ap->meta.name;
        for (int c = 0; c < API_CLASS_COUNT; c++)
            if (ap->classes & (1u << (unsigned)c))
                sp->home_classes |= SCHED_CLASS_BIT(class_idx((enum api_class)c));
        sp->protected_pool = ap->protect;
        sp->reserve_gpus = ap->reserve_gpus;
    }

    /* nodes */
    nl = nt = 0;
    for (int i = 0; i < in->nnodes; i++) {
        const cJSON *no = in->nodes[i];
        struct sched_node *n = &s->nodes[i];
        struct ctl_nodeinfo ni;
        ctl_node_info(no, &ni);
        n->name = ctl_obj_str(no, "metadata", "name");
        if (!n->name) {
            gq_errf(err, errlen, "snapshot: node %d has no name", i);
            rc = GQ_EINVAL;
            goto out;
        }
        n->labels = &s->labels[nl];
        const cJSON *l;
        cJSON_ArrayForEach(l, obj_get(obj_get(no, "metadata"), "labels"))
        {
            if (!cJSON_IsString(l))
                continue;
            s->labels[nl++] = (struct sched_label){l->string, l->valuestring};
            n->nlabels++;
        }
        n->taints = &s->taints[nt];
        const cJSON *t;
        cJSON_ArrayForEach(t, obj_get(obj_get(no, "spec"), "taints"))
        {
            const char *k = ctl_obj_str(t, "key", NULL);
            if (!k)
                continue;
            int e = taint_effect(ctl_obj_str(t, "effect", NULL));
            s->taints[nt++] = (struct sched_taint){k, ctl_obj_str(t, "value", NULL),
                                                   e == SCHED_EFFECT_ANY ? SCHED_NO_SCHEDULE
                                                                         : (enum sched_taint_effect)e};
            n->ntaints++;
        }
        n->unschedulable = ni.unschedulable;
        n->ready = ni.ready;
        n->cpu_milli = ni.cpu_milli;
        n->mem_bytes = ni.mem_bytes;
        n->gpus = ni.gpus;
        n->pool = ctl_node_pool(no, in->pools, in->npools);
    }
    s->snap.nodes = s->nodes;
    s->snap.nnodes = in->nnodes;
    size_t cap = 16;
    while (cap < 2 * (size_t)in->nnodes)
        cap *= 2;
    if ((s->node_ix = keep_zalloc(s, KEEP_NODE_IX, cap * sizeof(*s->node_ix)))) {
        s->node_ixcap = cap;
        for (int i = 0; i < in->nnodes; i++) {
            uint64_t h = gq_hash_str(s->nodes[i].name);
            size_t k = nodeix_slot(s, s->nodes[i].name, h);
            if (!s->node_ix[k].name) /* the first node of a name, as a scan finds it */
                s->node_ix[k] = (struct ctl_snap_nodeix){s->nodes[i].name, h, i};
        }
    } /* else ctl_snap_node scans */

    /* foreign usage */
    for (int i = 0; i < in->nforeign; i++) {
        const cJSON *pod = in->foreign_pods[i];
        const char *nn = ctl_obj_str(pod, "spec", "nodeName");
        if (!nn || !nn[0] || ctl_pod_terminal(pod))
            continue;
        int ni = ctl_snap_node(s, nn);
        if (ni < 0)
            continue;
        struct ctl_podusage u;
        ctl_pod_usage(pod, &u);
        foreign_trust(&u, i >= in->nforeign - in->nforeign_released);
        struct sched_node *n = &s->nodes[ni];
        n->foreign_cpu_milli += u.cpu_milli;
        n->foreign_mem_bytes += u.mem_bytes;
        uint16_t before[SCHED_MAX_DEVICES];
        memcpy(before, n->foreign_gpu_milli, sizeof(before));
        foreign_gpus(n, &u);
        /* a pod being deleted, or a gangq pod no job holds (gangq deletes it):
         * its usage goes soon (a reservation counts on it) */
        if (i >= in->nforeign - in->nforeign_released || ctl_obj_str(pod, "metadata", "deletionTimestamp")) {
            n->releasing_cpu_milli += u.cpu_milli;
            n->releasing_mem_bytes += u.mem_bytes;
            for (int d = 0; d < SCHED_MAX_DEVICES; d++)
                n->releasing_gpu_milli[d] = (uint16_t)(n->releasing_gpu_milli[d] + n->foreign_gpu_milli[d] - before[d]);
        }
    }

    /* teams */
    nq = 0;
    for (int i = 0; i < in->nteams; i++) {
        const struct api_team *at = &in->teams[i];
        struct sched_team *st = &s->teams[i];
        st->name = at->meta.name;
        st->cohort = at->cohort;
        st->weight = at->weight > 0 ? at->weight : 1;
        st->quota = &s->quotas[nq];
        for (int q = 0; q < at->nquota; q++)
            s->quotas[nq++] = (struct sched_quota){at->quota[q].gpu_type, at->quota[q].gpus,
                                                   at->quota[q].borrowing_limit,
                                                   at->quota[q].lending_limit};
        st->nquota = at->nquota;
        st->usage_gpu_s = in->team_usage ? in->team_usage[i] : 0;
    }

    /* jobs */
    int nj = 0, tlast = -1;
    nr = ntol = nsel = 0;
    for (int i = 0; i < in->njobs; i++) {
        const struct ctl_jobin *ji = &in->jobs[i];
        const struct api_gpujob_spec *sp = &ji->job->spec;
        struct sched_job *j = &s->jobs[nj];
        /* the jobs' decodes lie anywhere in the heap: fetch ahead the spec
         * read below and the Team name it points to */
        if (i + GQ_PREFETCH_AHEAD < in->njobs)
            gq_prefetch(&in->jobs[i + GQ_PREFETCH_AHEAD].job->spec, sizeof(struct api_gpujob_spec));
        if (i + GQ_PREFETCH_AHEAD / 2 < in->njobs)
            gq_prefetch(in->jobs[i + GQ_PREFETCH_AHEAD / 2].job->spec.team, 1);
        j->id = ji->key;
        j->team = ctl_team_find(in->teams, in->nteams, sp->team, &tlast);
        j->cls = (enum sched_class)class_idx(sp->class);
        j->priority = sp->effective_priority;
        j->preemptible = sp->preemptible == API_TRUE;
        j->gang = sp->gang != API_FALSE;
        j->replicas = sp->replicas > 0 ? sp->replicas : 1;
        /* the lifecycle stops it then (ctl_observe.c job_max_run) */
        j->max_run_s = ji->running ? ji->run_limit_s : sp->max_run_s;
        if (sp->gpu.present) {
            j->req.gpus = sp->gpu.count;
            j->req.gpu_milli = sp->gpu.count ? 0 : sp->gpu.shares;
            for (int k = 0; k < sp->gpu.ntypes && k < SCHED_MAX_TYPES; k++)
                j->req.types[j->req.ntypes++] = sp->gpu.types[k];
            j->req.min_gpu_mem_gib = sp->gpu.min_memory_gib;
        }
        j->req.cpu_milli = sp->cpu_milli;
        j->req.mem_bytes = sp->memory_bytes;
        j->tols = &s->tols[ntol];
        for (int k = 0; k < sp->ntolerations; k++) {
            const struct api_toleration *t = &sp->tolerations[k];
            s->tols[ntol++] = (struct sched_toleration){t->key, t->value, !strcmp(t->op, "Exists"),
                                                        taint_effect(t->effect)};
        }
        j->ntols = sp->ntolerations;
        /* template nodeSelector: the core only uses nodes whose labels match
         * (the pods keep it, so the kubelet accepts them on those nodes) */
        j->node_selector = &s->sels[nsel];
        for (int k = 0; k < sp->nselector; k++)
            s->sels[nsel++] = (struct sched_label){sp->node_selector[k].key, sp->node_selector[k].value};
        j->nnode_selector = sp->nselector;
        /* template required node affinity: likewise (its strings: the api job's) */
        const struct api_node_affinity *na = sp->node_affinity; /* NULL = none */
        int nterms = na ? na->nterms : 0;
        j->affinity = nterms > 0 ? aff_t : NULL;
        j->naffinity = nterms;
        for (int t = 0; t < nterms; t++) {
            aff_t->exprs = aff_x;
            aff_t->nexprs = na->terms[t].nexprs;
            for (int e = 0; e < na->terms[t].nexprs; e++) {
                const struct api_node_expr *ax = &na->exprs[na->terms[t].x0 + e];
                aff_x->key = ax->key;
                aff_x->field = ax->field;
                aff_x->op = (enum sched_match_op)ax->op; /* same order */
                aff_x->values = aff_v;
                aff_x->nvalues = ax->nvalues;
                for (int v = 0; v < ax->nvalues; v++)
                    *aff_v++ = na->values[ax->v0 + v];
                aff_x++;
            }
            aff_t++;
        }
        const struct sched_config *cfg = in->cfg;
        j->topo_required = sp->topology.required[0] ? sched_config_level(cfg, sp->topology.required) : -1;
        j->topo_preferred = sp->topology.preferred[0] ? sched_config_level(cfg, sp->topology.preferred) : -1;
        j->topo_spread = sp->topology.spread[0] ? sched_config_level(cfg, sp->topology.spread) : -1;
        j->pool = -1;
        if (sp->pool[0])
            for (int p = 0; p < in->npools; p++)
                if (!strcmp(in->pools[p].meta.name, sp->pool))
                    j->pool = p;
        j->enqueue_time = 0; /* its arrival rank: arrival_ranks() */
        /* the core holds what its preemptor claimed while that one waits */
        j->preempted_for = ji->preempted_by && ji->preempted_by[0] ? ji->preempted_by : NULL;
        /* ... and never preempts for it again what it preempted already */
        j->preempted_victims = ji->npreempted_victims > 0 ? ji->preempted_victims : NULL;
        j->npreempted_victims = ji->npreempted_victims > 0 ? ji->npreempted_victims : 0;
        /* the reservation keeps its domain while nothing is strictly closer */
        j->reserved_domain = ji->reserved && ji->reserved[0] ? ji->reserved : NULL;
        j->state = SCHED_JOB_WAITING;
        if (ji->running) {
            j->state = SCHED_JOB_RUNNING;
            j->admitted_at = ji->admitted_ms / 1000;
            j->placement = &s->reps[nr];
            for (int r = 0; ji->pl && r < ji->pl->n; r++) {
                int ni = ctl_snap_node(s, ji->pl->rep[r].node);
                if (ni < 0)
                    continue; /* node gone: the lifecycle requeues it */
                s->reps[nr++] = (struct sched_replica){ni, ji->pl->rep[r].devs};
                j->nplaced++;
                int64_t m = j->req.gpu_milli ? j->req.gpu_milli : 1000LL * j->req.gpus;
                s->gangq_milli[ni] += m;
            }
            if (j->nplaced == 0)
                continue; /* nothing placed any more: leave it out */
            if ((j->gang || ji->terminating || ji->hold_only) && j->nplaced < j->replicas)
                j->replicas = j->nplaced; /* a broken gang, a stopping job or one waiting on a
                                           * problem (Team deleted, ...) holds what it holds, and
                                           * no more */
            j->terminating = ji->terminating;
            j->terminating_for = -1;
        }
        s->job_in[nj] = i;
        nj++;
    }
    /* a stopping job makes room for its preemptor while that one waits */
    for (int k = 0; k < nj; k++) {
        const char *f = in->jobs[s->job_in[k]].terminating_for;
        if (!s->jobs[k].terminating || !f)
            continue;
        int p = snap_job_find(s, nj, f);
        if (p >= 0 && s->jobs[p].state == SCHED_JOB_WAITING)
            s->jobs[k].terminating_for = p;
    }
    if ((rc = arrival_ranks(s, in, nj, err, errlen)))
        goto out;
    s->snap.jobs = s->jobs;
    s->snap.njobs = nj;
    s->snap.pools = s->pools;
    s->snap.npools = in->npools;
    s->snap.teams = s->teams;
    s->snap.nteams = in->nteams;
    s->snap.config = in->cfg;
    s->snap.now = in->now_s;
out:
    if (rc)
        ctl_snap_release(s);
    return rc;
}

/* ------------------------------------------------------------ status */

void ctl_time_format(int64_t ms, char *out, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
        gq_strlcpy(out, "", len);
}

static const struct api_condition *prev_cond(const struct api_gpujob_status *prev, const char *type)
{
    for (int i = 0; prev && i < prev->nconditions; i++)
        if (!strcmp(prev->conditions[i].type, type))
            return &prev->conditions[i];
    return NULL;
}

static void add_cond(struct api_gpujob_status *st, const struct api_gpujob_status *prev,
                     const char *type, int on, const char *reason, const char *msg,
                     const char *now)
{
    if (st->nconditions >= API_MAX_CONDITIONS)
        return;
    struct api_condition *c = &st->conditions[st->nconditions++];
    memset(c, 0, sizeof(*c));
    gq_strlcpy(c->type, type, sizeof(c->type));
    gq_strlcpy(c->status, on ? "True" : "False", sizeof(c->status));
    gq_strlcpy(c->reason, reason, sizeof(c->reason));
    /* the 1.20 API server refuses an empty condition message (it reads as null) */
    gq_strlcpy(c->message, msg && msg[0] ? msg : reason, sizeof(c->message));
    const struct api_condition *p = prev_cond(prev, type);
    if (p && !strcmp(p->status, c->status) && p->last_transition_time[0])
        gq_strlcpy(c->last_transition_time, p->last_transition_time, sizeof(c->last_transition_time));
    else
        gq_strlcpy(c->last_transition_time, now, sizeof(c->last_transition_time));
}

void ctl_status_compute(const struct api_gpujob *job, const struct api_gpujob_status *prev,
                        const struct ctl_jobview *v, int64_t now_ms, const char **nodes,
                        int nodes_cap, struct api_gpujob_status *out)
{
    char now[API_TIME_MAX];
    ctl_time_format(now_ms, now, sizeof(now));
    memset(out, 0, sizeof(*out));
    static const enum api_state map[STORE_NSTATES] = {
        API_STATE_QUEUED,    API_STATE_ADMITTED,  API_STATE_RUNNING, API_STATE_SUSPENDED,
        API_STATE_PREEMPTED, API_STATE_SUCCEEDED, API_STATE_FAILED};
    int s = v->state >= 0 && v->state < STORE_NSTATES ? v->state : STORE_QUEUED;
    out->state = map[s];
    out->position = (s == STORE_QUEUED || s == STORE_PREEMPTED) ? v->position : 0;
    gq_strlcpy(out->message, v->message ? v->message : "", sizeof(out->message));
    if (s == STORE_QUEUED || s == STORE_PREEMPTED)
        gq_strlcpy(out->wait_reason, v->wait_reason ? v->wait_reason : "", sizeof(out->wait_reason));
    gq_strlcpy(out->team, job->spec.team, sizeof(out->team));
    out->priority = job->spec.effective_priority;
    out->gpus = api_gpujob_gpus(job);
    int admitted = s == STORE_ADMITTED || s == STORE_RUNNING;
    if (admitted && v->pl && v->pl->n > 0) {
        out->admission.present = 1;
        ctl_time_format(v->admitted_ms, out->admission.time, sizeof(out->admission.time));
        gq_strlcpy(out->admission.domain, v->pl->domain, sizeof(out->admission.domain));
        if (v->run_limit_s > 0)
            ctl_time_format(v->admitted_ms + v->run_limit_s * 1000, out->admission.deadline,
                            sizeof(out->admission.deadline));
        int n = 0;
        for (int i = 0; i < v->pl->n && n < nodes_cap; i++)
            nodes[n++] = v->pl->rep[i].node;
        out->admission.nnodes = n;
        out->admission.nodes = nodes;
    }
    out->observed_generation = job->meta.generation;
    out->attempt = (int32_t)GQ_MIN(GQ_MAX(v->attempts, 0), INT32_MAX);
    out->retries = (int32_t)GQ_MIN(GQ_MAX(v->retries, 0), INT32_MAX);
    if (v->enqueue_ms > 0)
        ctl_time_format(v->enqueue_ms, out->enqueue_time, sizeof(out->enqueue_time));
    out->arrival = v->arrival;
    out->preemptions = (int32_t)v->preemptions;
    if (v->preemptions > 0 && v->preempted_by && v->preempted_by[0]) {
        out->last_preemption.present = 1;
        gq_strlcpy(out->last_preemption.by, v->preempted_by, sizeof(out->last_preemption.by));
        gq_strlcpy(out->last_preemption.reason, v->preempt_reason ? v->preempt_reason : "",
                   sizeof(out->last_preemption.reason));
        ctl_time_format(v->preempted_ms, out->last_preemption.time, sizeof(out->last_preemption.time));
    }
    /* start/completion times: kept once set (a requeue clears start) */
    if (prev && prev->start_time[0] && (s == STORE_RUNNING || s == STORE_SUCCEEDED || s == STORE_FAILED))
        gq_strlcpy(out->start_time, prev->start_time, sizeof(out->start_time));
    else if (s == STORE_RUNNING || (s == STORE_SUCCEEDED && !(prev && prev->start_time[0])))
        gq_strlcpy(out->start_time, now, sizeof(out->start_time));
    if (s == STORE_SUCCEEDED || s == STORE_FAILED) {
        if (prev && prev->completion_time[0])
            gq_strlcpy(out->completion_time, prev->completion_time, sizeof(out->completion_time));
        else
            gq_strlcpy(out->completion_time, now, sizeof(out->completion_time));
    }
    const char *msg = out->message;
    if (v->invalid_reason)
        add_cond(out, prev, "Valid", 0, v->invalid_reason, msg, now);
    add_cond(out, prev, "Admitted", admitted, admitted ? "Admitted" : store_state_name(s),
             admitted ? msg : "", now);
    add_cond(out, prev, "Running", s == STORE_RUNNING, s == STORE_RUNNING ? "PodsRunning" : "NotRunning",
             "", now);
    /* a waiting job that could not fit even with every node empty says so
     * with the figures; once it could, the condition turns False */
    int waiting = s == STORE_QUEUED || s == STORE_PREEMPTED;
    if (waiting && v->unschedulable && v->unschedulable[0])
        add_cond(out, prev, "Unschedulable", 1, "ExceedsCluster", v->unschedulable, now);
    else if (prev_cond(prev, "Unschedulable"))
        add_cond(out, prev, "Unschedulable", 0, "FitsCluster",
                 "the cluster has nodes that fit it when they are free", now);
    if (s == STORE_SUSPENDED)
        add_cond(out, prev, "Suspended", 1, "UserSuspended", "spec.suspend is true", now);
    if (s == STORE_PREEMPTED)
        add_cond(out, prev, "Preempted", 1, "Preempted", v->preempt_reason, now);
    if (s == STORE_SUCCEEDED)
        add_cond(out, prev, "Succeeded", 1, "PodsSucceeded", "every replica succeeded", now);
    if (s == STORE_FAILED)
        add_cond(out, prev, "Failed", 1,
                 v->invalid_reason                                                  ? v->invalid_reason
                 : !strncmp(msg, CTL_MAX_RUN_MSG, sizeof(CTL_MAX_RUN_MSG) - 1) ? "DeadlineExceeded"
                                                                                    : "Failed",
                 msg, now);
}

/* ------------------------------------------------------------ waiting jobs */

/* A part of msg (its start or after "; ") that starts with prefix and
 * contains needle before the next "; ". */
static int has_part(const char *msg, const char *prefix, const char *needle)
{
    size_t pl = strlen(prefix);
    for (const char *p = msg; p; p = strstr(p, "; ")) {
        if (p != msg)
            p += 2;
        if (strncmp(p, prefix, pl))
            continue;
        const char *end = strstr(p, "; ");
        const char *n = strstr(p + pl, needle);
        if (n && (!end || n < end))
            return 1;
    }
    return 0;
}

int ctl_wait_classify(const char *msg, const char *invalid_reason)
{
    if (invalid_reason)
        return CTL_WAIT_INVALID;
    if (!msg || !msg[0])
        return CTL_WAIT_NONE;
    if (has_part(msg, "waiting for ", " preempted job"))
        return CTL_WAIT_PREEMPTING;
    if (strstr(msg, " replicas admitted"))
        return CTL_WAIT_PARTIAL;
    if (has_part(msg, "the jobs it would preempt are protected by the minimum runtime", ""))
        return CTL_WAIT_MIN_RUNTIME;
    if (has_part(msg, "team ", " quota ") || has_part(msg, "team ", " has no quota for "))
        return CTL_WAIT_QUOTA;
    if (has_part(msg, "reserves ", ""))
        return CTL_WAIT_RESERVING;
    if (has_part(msg, "", " nodes fit"))
        return CTL_WAIT_NODES;
    return CTL_WAIT_OTHER;
}

const char *ctl_wait_class_name(int cls)
{
    static const char *const names[CTL_WAIT_NCLASSES] = {
        "", "Nodes", "Quota", "Preempting", "MinRuntime", "Reserving", "PartialAdmission", "Invalid", "Waiting"};
    return cls >= 0 && cls < CTL_WAIT_NCLASSES ? names[cls] : "Waiting";
}

void ctl_waitpub_release(struct ctl_waitpub *p)
{
    free(p->msg);
    p->msg = NULL;
}

int ctl_wait_publish(struct ctl_waitpub *p, int state, int waiting, const char *msg,
                     const char *invalid_reason, int64_t now_ms, int64_t interval_ms, int64_t settle_ms)
{
    return ctl_wait_publish_hashed(p, state, waiting, msg, waiting ? gq_hash_str(msg ? msg : "") : 0,
                                   invalid_reason, now_ms, interval_ms, settle_ms);
}

int ctl_wait_class_capacity(int cls)
{
    return cls == CTL_WAIT_NODES || cls == CTL_WAIT_QUOTA || cls == CTL_WAIT_RESERVING ||
           cls == CTL_WAIT_MIN_RUNTIME || cls == CTL_WAIT_OTHER;
}

int ctl_wait_class_at_once(int from, int to)
{
    return !ctl_wait_class_capacity(from) || !ctl_wait_class_capacity(to);
}

int ctl_wait_publish_hashed(struct ctl_waitpub *p, int state, int waiting, const char *msg, uint64_t msg_hash,
                            const char *invalid_reason, int64_t now_ms, int64_t interval_ms, int64_t settle_ms)
{
    if (!waiting) {
        ctl_waitpub_release(p);
        memset(p, 0, sizeof(*p));
        p->set = 1;
        p->state = state;
        return 0;
    }
    if (!msg)
        msg = "";
    const unsigned char has_inv = invalid_reason ? 1u : 0u; /* "" is a reason, NULL none */
    uint64_t sig = gq_hash_bytes(gq_hash_bytes(msg_hash, &has_inv, 1), invalid_reason ? invalid_reason : "",
                                 invalid_reason ? strlen(invalid_reason) : 0);
    if (!sig)
        sig = 1;
    int cls = p->in_sig == sig ? p->in_cls : ctl_wait_classify(msg, invalid_reason);
    if (cls != p->in_cls || !p->in_cls_ms)
        p->in_cls_ms = now_ms; /* explanations of this class are given from now on */
    p->in_sig = sig;
    p->in_cls = cls;
    int fresh = !p->set || p->state != state;
    if (fresh) {
        p->evented = 0; /* a new wait (or a new waiting state) */
        p->position = 0;
    }
    if (fresh || (p->cls != cls && (ctl_wait_class_at_once(p->cls, cls) || now_ms - p->in_cls_ms >= settle_ms))) {
        (void)ctl_str_set(&p->msg, msg, SCHED_MSG_MAX);
        p->msg_ms = now_ms;
        p->pub_sig = sig;
        p->cls = cls;
    } else if (p->cls == cls && p->pub_sig != sig && now_ms - p->msg_ms >= interval_ms) {
        if (strcmp(ctl_str(p->msg), msg)) {
            (void)ctl_str_set(&p->msg, msg, SCHED_MSG_MAX);
            p->msg_ms = now_ms;
        }
        p->pub_sig = sig;
    }
    p->set = 1;
    p->state = state;
    unsigned bit = 1u << (unsigned)p->cls; /* the class published, which a held change is not yet */
    if (p->cls == CTL_WAIT_NONE || (p->evented & bit))
        return 0;
    p->evented |= bit;
    return 1;
}

/* The status state a wait in store state state shows (API_STATE_NONE: not a wait). */
static enum api_state wait_shown_state(int state)
{
    return state == STORE_QUEUED ? API_STATE_QUEUED : state == STORE_PREEMPTED ? API_STATE_PREEMPTED : API_STATE_NONE;
}

int ctl_wait_adopt(struct ctl_waitpub *p, const struct api_gpujob_status *st, int state, int cls,
                   int64_t now_ms)
{
    enum api_state want = wait_shown_state(state);
    if (p->set || want == API_STATE_NONE || cls == CTL_WAIT_NONE || st->state != want ||
        strcmp(st->wait_reason, ctl_wait_class_name(cls)) || !st->message[0])
        return 0;
    ctl_waitpub_release(p);
    memset(p, 0, sizeof(*p));
    p->set = 1;
    p->state = state;
    p->cls = cls;
    (void)ctl_str_set(&p->msg, st->message, SCHED_MSG_MAX);
    p->msg_ms = now_ms;
    p->evented = 1u << (unsigned)cls;
    p->position = st->position > 0 ? st->position : 0;
    return 1;
}

int ctl_wait_adopt_shown(struct ctl_waitpub *p, const cJSON *job, int state, const char *msg,
                         const char *invalid_reason, int64_t now_ms)
{
    enum api_state want = wait_shown_state(state);
    const char *shown = ctl_obj_str(job, "status", "state");
    if (p->set || want == API_STATE_NONE || !shown || strcmp(shown, api_state_name(want)))
        return 0; /* not a status ctl_wait_adopt would take: not decoded */
    struct api_gpujob_status st;
    struct api_errors e;
    api_errors_init(&e);
    if (ctl_job_status_decode(job, &st, &e))
        return 0;
    return ctl_wait_adopt(p, &st, state, ctl_wait_classify(msg, invalid_reason), now_ms);
}

int ctl_position_shown(int pos, int head)
{
    return pos > 0 && pos <= head ? pos : 0;
}
