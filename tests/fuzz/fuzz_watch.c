/* libFuzzer target: watch-stream bytes -> line cutter -> watch event decode, and
 * the same bytes as a kubeconfig document. Both read what the API server or a
 * user file hands us; they must never crash, leak or trip a sanitizer. */
// fuzz-sources: common/gq.c common/buf.c common/yamljson.c controller/kube/kube_util.c controller/kube/kube_config.c controller/kube/kube_cache.c
// fuzz-libs: -lcurl -lev
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_line(const char *line, size_t len, void *ud)
{
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
