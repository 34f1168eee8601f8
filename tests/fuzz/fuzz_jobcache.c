/* libFuzzer target: a GPUJob as the controller's cache keeps it. The bytes
 * as JSON -> ctl_prune_gpujob (the status condensed and deflated) -> the
 * status decoded from what is cached must be the status decoded from its
 * compact JSON (what the cache kept before it deflated). The bytes as a
 * cached raw status text (a deflated stream after 0x02) must decode or fail
 * with an error. Never crash, leak or trip a sanitizer. */
// fuzz-sources: common/*.c api/*.c store/store.c controller/ctl_snapshot.c controller/ctl_memo.c controller/scheduler/sched*.c controller/kube/kube_util.c controller/kube/kube_cache.c
// fuzz-libs: -lcurl -lev -lsqlite3 -lz
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "gq.h"
#include "sched.h"
#include "ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The status of obj decoded (pruned or not), encoded again as text; NULL when
 * it does not decode. */
static char *status_text(const cJSON *obj)
{
    struct api_gpujob_status st;
    struct api_errors e;
    api_errors_init(&e);
    if (ctl_job_status_decode(obj, &st, &e) || e.n || e.dropped)
        return NULL;
    cJSON *enc = api_gpujob_status_encode(&st);
    char *t = enc ? cJSON_PrintUnformatted(enc) : NULL;
    cJSON_Delete(enc);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *s = malloc(size + 2);
    if (!s)
        return 0;
    /* 1: the bytes as a GPUJob */
    memcpy(s, data, size);
    s[size] = '\0';
    cJSON *whole = cJSON_Parse(s), *pruned = cJSON_Parse(s);
    const cJSON *st0 = cJSON_GetObjectItemCaseSensitive(whole, "status");
    if (whole && pruned && cJSON_IsObject(st0)) {
        /* what the cache held before it deflated: the status printed and
         * parsed again */
        char *txt = cJSON_PrintUnformatted(st0);
        cJSON *plain = cJSON_CreateObject(), *re = txt ? cJSON_Parse(txt) : NULL;
        if (plain && re && cJSON_AddItemToObject(plain, "status", re)) {
            re = NULL;
            ctl_prune_gpujob(pruned);
            char *a = status_text(plain), *b = status_text(pruned);
            if ((!a) != (!b) || (a && strcmp(a, b)))
                __builtin_trap();
            free(a);
            free(b);
        }
        cJSON_Delete(re);
        cJSON_Delete(plain);
        free(txt);
    }
    cJSON_Delete(whole);
    cJSON_Delete(pruned);
    /* 2: the bytes as the raw text a cached status holds (deflated: 0x02
     * first; cut at the first NUL, as a C string would be) */
    s[0] = '\x02';
    memcpy(s + 1, data, size);
    s[size + 1] = '\0';
    cJSON *job = cJSON_CreateObject(), *st = job ? cJSON_AddObjectToObject(job, "status") : NULL;
    if (st && cJSON_AddStringToObject(st, CTL_STATUS_RAW, s)) {
        char *t = status_text(job);
        free(t);
    }
    cJSON_Delete(job);
    free(s);
    return 0;
}
