/* libFuzzer target: watch-stream bytes -> line cutter -> watch event decode, and
 * the same bytes as a kubeconfig document. Both read what the API server or a
 * user file hands us; they must never crash, leak or trip a sanitizer.
 * Differential: each line is also taken as the informer takes it (the parse
 * in the arena, pruned as a pod, packed, settled) and must equal the same
 * taken on the heap, and nothing of what is settled may lie in the arena. */
// fuzz-sources: common/gq.c common/buf.c common/yamljson.c controller/kube/kube_util.c controller/kube/kube_config.c controller/kube/kube_cache.c
// fuzz-libs: -lcurl -lev
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The line taken as the pod informer takes it, in the arena or not; NULL when
 * it is no object event. */
static cJSON *take(const char *line, size_t len, int arena)
{
    const struct kube_parse_opts po = {0, 1};
    struct kube_watch_event ev;
    struct kube_skipped sk;
    char err[256];
    int began = arena ? kube_arena_begin() : 0;
    int rc = kube_watch_event_parse_ex(line, len, &po, &ev, &sk, err, sizeof err);
    if (began)
        kube_arena_end();
    if (rc || !ev.object || ev.type == KUBE_EV_BOOKMARK || ev.type == KUBE_EV_ERROR) {
        kube_watch_event_release(&ev);
        return NULL;
    }
    return kube_keep_object(ev.object, kube_prune_pod);
}

static int on_line(const char *line, size_t len, void *ud)
{
    cJSON *a = take(line, len, 1), *h = take(line, len, 0);
    if ((a == NULL) != (h == NULL) || kube_arena_holds(a))
        abort();
    if (a) {
        /* compared as text: cJSON_Compare finds a duplicate member's first
         * value only, so it calls such an object unequal to itself */
        char *ta = cJSON_PrintUnformatted(a), *th = cJSON_PrintUnformatted(h);
        if (ta && th && strcmp(ta, th))
            abort();
        cJSON_free(ta);
        cJSON_free(th);
    }
    cJSON_Delete(a);
    cJSON_Delete(h);
    struct kube_cache *cache = ud;
    struct kube_watch_event ev;
    char err[256];
    if (kube_watch_event_parse(line, len, &ev, err, sizeof err) == 0) {
        if (ev.type == KUBE_EV_ADDED || ev.type == KUBE_EV_MODIFIED || ev.type == KUBE_EV_DELETED) {
            kube_cache_apply(cache, ev.type, ev.object, NULL, NULL); /* takes ownership */
            ev.object = NULL;
        }
        kube_watch_event_release(&ev);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kube_lines lines;
    struct kube_cache *cache = kube_cache_new();
    struct kube_config cfg;
    char err[256];
    size_t half = size / 2;

    if (!cache)
        return 0;
    /* feed in two chunks so partial lines are exercised */
    kube_lines_init(&lines, 4096);
    kube_lines_feed(&lines, (const char *)data, half, on_line, cache);
    kube_lines_feed(&lines, (const char *)data + half, size - half, on_line, cache);
    kube_lines_release(&lines);
    kube_cache_free(cache);

    kube_config_init(&cfg);
    kube_config_parse_kubeconfig(&cfg, (const char *)data, size, "fuzz", NULL, NULL, err, sizeof err);
    kube_config_release(&cfg);
    return 0;
}
