/*
 * kube_bench.c — `gangq bench cache`: memory of the pod informer's cache.
 *
 * Builds List pages of realistic pods (as the API server returns them for
 * pods a Deployment or Job made and a kubelet runs: managedFields of both
 * managers, env, volumes, probes, tolerations, status conditions and
 * container statuses), feeds them through the informer's path —
 * kube_list_page_parse, then the pruner and kube_pack, then the cache — and prints what
 * the cache costs: heap bytes per pod (mallinfo2, after malloc_trim) and the
 * process RSS. Each mode runs in its own child process so one mode's freed
 * memory does not flatter the other's RSS. Not a timed test.
 */
#include "kube.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cmd.h"

static long status_kb(const char *key)
{
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* One pod as the API server lists it (about 6 KB of JSON). */
static int pod_json(struct gq_buf *b, int i)
{
    int node = i % 1000, rs = i / 50;
    return gq_buf_printf(
        b,
        "{\"metadata\":{\"name\":\"train-%d-7d9f8c6b5-x%05d\",\"generateName\":\"train-%d-7d9f8c6b5-\","
        "\"namespace\":\"team-%d\",\"uid\":\"4f1c2b7e-%04x-4d2a-9c3e-%012d\",\"resourceVersion\":\"%d\","
        "\"creationTimestamp\":\"2026-11-30T10:%02d:%02dZ\","
        "\"labels\":{\"app\":\"train-%d\",\"pod-template-hash\":\"7d9f8c6b5\",\"team\":\"team-%d\","
        "\"app.kubernetes.io/part-of\":\"ml-platform\",\"app.kubernetes.io/version\":\"1.4.2\"},"
        "\"annotations\":{\"prometheus.io/scrape\":\"true\",\"prometheus.io/port\":\"9090\","
        "\"kubectl.kubernetes.io/restartedAt\":\"2026-11-29T08:00:00Z\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"train-%d-7d9f8c6b5\","
        "\"uid\":\"9a8b7c6d-%04x-4e5f-8a9b-%012d\",\"controller\":true,\"blockOwnerDeletion\":true}],"
        "\"managedFields\":[{\"manager\":\"kube-controller-manager\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
        "\"time\":\"2026-11-30T10:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{"
        "\"f:generateName\":{},\"f:labels\":{\".\":{},\"f:app\":{},\"f:pod-template-hash\":{},\"f:team\":{}},"
        "\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":\\\"9a8b7c6d\\\"}\":{}}},\"f:spec\":{\"f:containers\":{"
        "\"k:{\\\"name\\\":\\\"main\\\"}\":{\".\":{},\"f:args\":{},\"f:command\":{},\"f:env\":{\".\":{},"
        "\"k:{\\\"name\\\":\\\"MASTER_ADDR\\\"}\":{\".\":{},\"f:name\":{},\"f:value\":{}},"
        "\"k:{\\\"name\\\":\\\"WORLD_SIZE\\\"}\":{\".\":{},\"f:name\":{},\"f:value\":{}}},\"f:image\":{},"
        "\"f:imagePullPolicy\":{},\"f:name\":{},\"f:ports\":{},\"f:readinessProbe\":{},\"f:resources\":{"
        "\".\":{},\"f:limits\":{},\"f:requests\":{}},\"f:terminationMessagePath\":{},\"f:volumeMounts\":{}}},"
        "\"f:dnsPolicy\":{},\"f:enableServiceLinks\":{},\"f:restartPolicy\":{},\"f:schedulerName\":{},"
        "\"f:securityContext\":{},\"f:terminationGracePeriodSeconds\":{},\"f:tolerations\":{},\"f:volumes\":{}}}},"
        "{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-11-30T10:00:09Z\","
        "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\"f:conditions\":{"
        "\"k:{\\\"type\\\":\\\"ContainersReady\\\"}\":{\".\":{},\"f:lastProbeTime\":{},\"f:lastTransitionTime\":{},"
        "\"f:status\":{},\"f:type\":{}},\"k:{\\\"type\\\":\\\"Initialized\\\"}\":{\".\":{},\"f:lastProbeTime\":{},"
        "\"f:lastTransitionTime\":{},\"f:status\":{},\"f:type\":{}},\"k:{\\\"type\\\":\\\"Ready\\\"}\":{\".\":{},"
        "\"f:lastProbeTime\":{},\"f:lastTransitionTime\":{},\"f:status\":{},\"f:type\":{}}},"
        "\"f:containerStatuses\":{},\"f:hostIP\":{},\"f:phase\":{},\"f:podIP\":{},\"f:podIPs\":{\".\":{},"
        "\"k:{\\\"ip\\\":\\\"10.1.2.3\\\"}\":{\".\":{},\"f:ip\":{}}},\"f:startTime\":{}}}}]},"
        "\"spec\":{\"volumes\":[{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"data-%d\"}},"
        "{\"name\":\"shm\",\"emptyDir\":{\"medium\":\"Memory\",\"sizeLimit\":\"16Gi\"}},"
        "{\"name\":\"kube-api-access-%05d\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{"
        "\"expirationSeconds\":3607,\"path\":\"token\"}},{\"configMap\":{\"name\":\"kube-root-ca.crt\","
        "\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}]}},{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\","
        "\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.namespace\"}}]}}],\"defaultMode\":420}}],"
        "\"containers\":[{\"name\":\"main\",\"image\":\"registry.example.com/ml/train:1.4.2\","
        "\"command\":[\"torchrun\"],\"args\":[\"--nnodes=4\",\"--nproc-per-node=8\",\"train.py\","
        "\"--config=/data/config.yaml\"],\"ports\":[{\"name\":\"metrics\",\"containerPort\":9090,\"protocol\":\"TCP\"}],"
        "\"env\":[{\"name\":\"MASTER_ADDR\",\"value\":\"train-%d-0.train-%d\"},{\"name\":\"MASTER_PORT\",\"value\":\"29500\"},"
        "{\"name\":\"WORLD_SIZE\",\"value\":\"32\"},{\"name\":\"NCCL_DEBUG\",\"value\":\"WARN\"}],"
        "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\",\"memory\":\"256Gi\"},"
        "\"requests\":{\"cpu\":\"32\",\"memory\":\"256Gi\",\"nvidia.com/gpu\":\"8\"}},"
        "\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"},{\"name\":\"shm\",\"mountPath\":\"/dev/shm\"},"
        "{\"name\":\"kube-api-access-%05d\",\"readOnly\":true,\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}],"
        "\"readinessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":9090,\"scheme\":\"HTTP\"},"
        "\"timeoutSeconds\":1,\"periodSeconds\":10,\"successThreshold\":1,\"failureThreshold\":3},"
        "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
        "\"imagePullPolicy\":\"IfNotPresent\"}],\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
        "\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\","
        "\"nodeName\":\"gpu-node-%04d\",\"securityContext\":{},\"schedulerName\":\"default-scheduler\","
        "\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"},"
        "{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300},"
        "{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],"
        "\"priority\":0,\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\"},"
        "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\","
        "\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-11-30T10:00:01Z\"},{\"type\":\"Ready\",\"status\":\"True\","
        "\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-11-30T10:00:09Z\"},{\"type\":\"ContainersReady\","
        "\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-11-30T10:00:09Z\"},"
        "{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-11-30T10:00:00Z\"}],"
        "\"hostIP\":\"10.0.%d.%d\",\"podIP\":\"10.1.%d.%d\",\"podIPs\":[{\"ip\":\"10.1.%d.%d\"}],"
        "\"startTime\":\"2026-11-30T10:00:01Z\",\"containerStatuses\":[{\"name\":\"main\",\"state\":{\"running\":{"
        "\"startedAt\":\"2026-11-30T10:00:05Z\"}},\"lastState\":{},\"ready\":true,\"restartCount\":0,"
        "\"image\":\"registry.example.com/ml/train:1.4.2\",\"imageID\":\"registry.example.com/ml/train@sha256:"
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904b825dc642cb6eb9a060e54bf\",\"containerID\":\"containerd://"
        "%064d\",\"started\":true}],\"qosClass\":\"Burstable\"}}",
        rs, i, rs, i % 40, i & 0xffff, i, 1000 + i, (i / 60) % 60, i % 60, rs, i % 40, rs, rs & 0xffff, rs,
        rs, i, rs, rs, i, node, node / 250, node % 250, (i / 250) % 250, i % 250, (i / 250) % 250, i % 250, i);
}

enum bench_mode { MODE_PRUNED, MODE_LATE, MODE_FULL, MODE_WATCH_HEAP, MODE_WATCH };
static const char *const mode_names[] = {"pruned", "late", "full", "w-heap", "watch"};

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Take npods pods one watch event each, as the informer's watch does: the
 * event parsed (managedFields never), pruned, packed and settled on the heap;
 * the parse in the arena (watch) or on the heap (w-heap). */
static int watch_take(struct kube_cache *cache, int npods, enum bench_mode mode, struct gq_buf *b,
                      size_t *json_bytes, double *cpu)
{
    struct kube_parse_opts po = {KUBE_MAX_OBJECT_DEFAULT, 1};
    char err[256];
    int rc = 0;
    for (int i = 0; i < npods && !rc; i++) {
        struct kube_watch_event ev;
        struct kube_skipped sk;
        gq_buf_reset(b);
        if ((rc = gq_buf_puts(b, "{\"type\":\"ADDED\",\"object\":")) || (rc = pod_json(b, i)) ||
            (rc = gq_buf_puts(b, "}")))
            break;
        *json_bytes += b->len;
        double c0 = cpu_s();
        int arena = mode == MODE_WATCH ? kube_arena_begin() : 0;
        rc = kube_watch_event_parse_ex(b->p, b->len, &po, &ev, &sk, err, sizeof err);
        if (arena)
            kube_arena_end();
        if (!rc && !ev.object)
            rc = GQ_EINVAL;
        if (rc) {
            fprintf(stderr, "bench cache: %s\n", err);
            break;
        }
        cJSON *it = kube_keep_object(ev.object, kube_prune_pod);
        rc = it ? kube_cache_apply(cache, KUBE_EV_ADDED, it, NULL, NULL) : GQ_ENOMEM;
        *cpu += cpu_s() - c0;
    }
    return rc;
}

/* Fill a cache with npods pods as the informer takes them (pruned: their
 * managedFields never parsed, then pruned and packed), pruned after a whole
 * parse (late), or whole (full), or one watch event each (watch, w-heap:
 * watch_take); print one result line. */
static int run_mode(int npods, int page, enum bench_mode mode, int json)
{
    struct kube_cache *cache = kube_cache_new();
    struct kube_parse_opts po = {KUBE_MAX_OBJECT_DEFAULT, mode == MODE_PRUNED};
    int prune = mode != MODE_FULL;
    double cpu = 0;
    struct gq_buf b;
    size_t heap0, heap1, json_bytes = 0;
    long rss0, rss1;
    char err[256];
    int rc = 0;
    if (!cache)
        return GQ_ENOMEM;
    malloc_trim(0);
    heap0 = heap_in_use();
    rss0 = status_kb("VmRSS");
    gq_buf_init(&b, (size_t)page * 16384 + 4096);
    int watch = mode == MODE_WATCH || mode == MODE_WATCH_HEAP;
    if (watch)
        rc = watch_take(cache, npods, mode, &b, &json_bytes, &cpu);
    for (int first = 0; first < npods && !rc && !watch; first += page) {
        cJSON *items = NULL, *md = NULL, *it;
        gq_buf_reset(&b);
        rc = gq_buf_puts(&b, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"},"
                             "\"items\":[");
        for (int i = first; i < first + page && i < npods && !rc; i++)
            if (!(rc = i > first ? gq_buf_puts(&b, ",") : 0))
                rc = pod_json(&b, i);
        if (!rc)
            rc = gq_buf_puts(&b, "]}");
        if (rc)
            break;
        json_bytes += b.len;
        double c0 = cpu_s();
        rc = kube_list_page_parse(b.p, b.len, &po, &items, &md, NULL, NULL, err,
                                  sizeof err);
        cJSON_Delete(md);
        if (rc) {
            fprintf(stderr, "bench cache: %s\n", err);
            break;
        }
        while (!rc && (it = cJSON_DetachItemFromArray(items, 0)) != NULL) {
            if (prune) {
                kube_prune_pod(it);
                it = kube_pack(it); /* as the informer caches it: one block */
            }
            rc = kube_cache_apply(cache, KUBE_EV_ADDED, it, NULL, NULL);
        }
        cJSON_Delete(items);
        cpu += cpu_s() - c0;
    }
    gq_buf_release(&b);
    malloc_trim(0);
    heap1 = heap_in_use();
    rss1 = status_kb("VmRSS");
    if (!rc && kube_cache_count(cache) != (size_t)npods)
        rc = GQ_EINVAL;
    if (!rc) {
        double per = (double)(heap1 - heap0) / npods;
        if (json)
            printf("{\"mode\":\"%s\",\"pods\":%d,\"json_bytes_per_pod\":%.0f,\"heap_bytes_per_pod\":%.0f,"
                   "\"cache_mib\":%.1f,\"rss_mib\":%.1f,\"rss_growth_mib\":%.1f,\"maxrss_mib\":%.1f,"
                   "\"take_us_per_pod\":%.1f}\n",
                   mode_names[mode], npods, (double)json_bytes / npods, per,
                   (double)(heap1 - heap0) / 1048576.0, rss1 / 1024.0, (rss1 - rss0) / 1024.0,
                   status_kb("VmHWM") / 1024.0, cpu * 1e6 / npods);
        else
            printf("%-8s %-7d %-12.0f %-12.0f %-10.1f %-8.1f %-12.1f %-11.1f %.1f\n", mode_names[mode],
                   npods, (double)json_bytes / npods, per, (double)(heap1 - heap0) / 1048576.0,
                   rss1 / 1024.0, (rss1 - rss0) / 1024.0, status_kb("VmHWM") / 1024.0, cpu * 1e6 / npods);
        fflush(stdout);
    }
    kube_cache_free(cache);
    return rc;
}

int bench_cache(int argc, char **argv)
{
    int npods = 10000, page = 500, json = 0, rc = 0;
    static const enum bench_mode modes[] = {MODE_PRUNED, MODE_LATE, MODE_FULL, MODE_WATCH_HEAP, MODE_WATCH};
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--pods") && i + 1 < argc) {
            long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 1 || v > 1000000) {
                fprintf(stderr, "gangq bench cache: --pods wants 1..1000000, got \"%s\"\n", argv[i]);
                return 2;
            }
            npods = (int)v;
        } else {
            fprintf(stderr, "usage: gangq bench cache [--pods N] [--json]\n");
            return 2;
        }
    }
    if (!json)
        printf("%-8s %-7s %-12s %-12s %-10s %-8s %-12s %-11s %s\n", "mode", "pods", "json_B/pod", "heap_B/pod",
               "cache_MiB", "rss_MiB", "rss_grow_MiB", "maxrss_MiB", "take_us/pod");
    fflush(stdout);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        int st = 0;
        pid_t pid = fork();
        if (pid < 0) {
            perror("gangq bench cache: fork");
            return 1;
        }
        if (pid == 0)
            _exit(run_mode(npods, page, modes[m], json) ? 1 : 0);
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "gangq bench cache: %s mode failed\n", mode_names[modes[m]]);
            rc = 1;
        }
    }
    return rc;
}
