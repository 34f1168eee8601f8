/* libFuzzer target: List responses and watch lines with hostile objects. The
 * item-by-item splitter must never crash, leak or recurse; and on any input
 * cJSON can parse whole as a List, it must agree with cJSON: every item is
 * either returned (the same object) or reported skipped, in order. */
// fuzz-sources: common/gq.c common/buf.c controller/kube/kube_util.c controller/kube/kube_cache.c
// fuzz-libs: -lcurl -lev
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct count {
    int n;
};

static void on_skip(const struct kube_skipped *s, void *ud)
{
    struct count *c = ud;
    if (s->reason < KUBE_SKIP_TOO_LARGE || s->reason > KUBE_SKIP_INVALID)
        abort();
    if (strlen(s->name) >= sizeof s->name || strlen(s->detail) >= sizeof s->detail)
        abort();
    c->n++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    size_t cap = size > 0 ? (data[0] % 4) * 64 : 0; /* 0 = no cap, else a small one */
    cJSON *items = NULL, *md = NULL, *whole;
    struct count c = {0};
    struct kube_watch_event ev;
    struct kube_skipped sk;
    char err[256];
    /* inputs of odd length: managedFields cut before parsing */
    struct kube_parse_opts po = {cap, (int)(size & 1)};
    int rc = kube_list_page_parse(p, size, &po, &items, &md, on_skip, &c, err, sizeof err);
    if (rc == 0) {
        cJSON *it;
        struct kube_cache *cache = kube_cache_new();
        cJSON_ArrayForEach(it, items)
        {
            kube_prune_pod(it);
            kube_prune_node(it);
        }
        /* differential: a List cJSON parses whole has as many items as we took + skipped */
        whole = cJSON_ParseWithLength(p, size);
        if (cJSON_IsObject(whole)) {
            const cJSON *wi = cJSON_GetObjectItemCaseSensitive(whole, "items");
            if (cJSON_IsArray(wi) && cJSON_GetArraySize(wi) != cJSON_GetArraySize(items) + c.n)
                abort();
        }
        cJSON_Delete(whole);
        if (cache)
            kube_cache_replace(cache, items, NULL, NULL); /* takes items */
        else
            cJSON_Delete(items);
        kube_cache_free(cache);
        cJSON_Delete(md);
    } else if (items || md) {
        abort(); /* nothing half-returned on error */
    }
    if (kube_watch_event_parse_ex(p, size, &po, &ev, &sk, err, sizeof err) == 0) {
        if (!ev.object && !sk.reason)
            abort();
        if (ev.object && po.drop_managed_fields && ev.type != KUBE_EV_BOOKMARK && ev.type != KUBE_EV_ERROR) {
            /* differential: the object taken without its managedFields is the
             * object parsed whole less its metadata.managedFields (the cut
             * text is only scanned, so an object whose managedFields alone is
             * not JSON is taken all the same; anything else is the same). A
             * BOOKMARK's or an ERROR's object is no object to cache: it is
             * parsed whole, as it came (seed watch-error-managed) */
            struct kube_watch_event w;
            struct kube_parse_opts keep = {cap, 0};
            if (kube_watch_event_parse_ex(p, size, &keep, &w, &sk, err, sizeof err) != 0)
                abort();
            if (w.object) {
                cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(w.object, "metadata"),
                                                        "managedFields");
                /* compared as printed, not with cJSON_Compare: it looks each
                 * member up by name, so an object with a duplicate key of two
                 * values ({"x":1,"x":2}) is unequal even to itself */
                char *a = cJSON_PrintUnformatted(ev.object), *b = cJSON_PrintUnformatted(w.object);
                if (a && b && strcmp(a, b) != 0)
                    abort();
                cJSON_free(a);
                cJSON_free(b);
            }
            kube_watch_event_release(&w);
        }
        kube_watch_event_release(&ev);
    }
    kube_object_scan(p, size, &sk);
    return 0;
}
