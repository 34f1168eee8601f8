/*
 * Unit tests for controller/kube: kubeconfig and in-cluster config, the watch
 * line cutter, backoff, watch event decoding, the cache relist diff, paths,
 * time formats, Event building — and the curl-multi/libev plumbing against a
 * scripted loopback HTTP server (a forked process on 127.0.0.1): a paginated
 * list, watch events split across chunks, a 410 ERROR event mid-watch, 429
 * with Retry-After, a stalled stream, an HTTP 410, writers' methods and
 * content types, 409 -> GQ_ECONFLICT, and Lease election.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kube.h"
#include "kube_int.h"
#include "log.h"
#include "ctl.h"

/* ------------------------------------------------------------ fixtures */

static char tmpdir[256];

static void write_file(const char *name, const char *text)
{
    char p[512];
    FILE *f;
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup_tmp(void **st)
{
    (void)st;
    gq_strlcpy(tmpdir, "/tmp/gq-kube-test-XXXXXX", sizeof tmpdir);
    if (!mkdtemp(tmpdir))
        return -1;
    return 0;
}

static int teardown_tmp(void **st)
{
    char cmd[300];
    (void)st;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* "-----BEGIN CERTIFICATE-----\nAAA\n" base64 */
#define PEM_TEXT "-----BEGIN CERTIFICATE-----\nAAA\n"
#define PEM_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFBQQo="

static const char *KC_INLINE =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: dev\n"
    "clusters:\n"
    "- name: c1\n"
    "  cluster:\n"
    "    server: https://127.0.0.1:6443/\n"
    "    certificate-authority-data: " PEM_B64 "\n"
    "- name: c2\n"
    "  cluster:\n"
    "    server: https://10.0.0.1:443\n"
    "    certificate-authority: ca.crt\n"
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: c1, user: u1, namespace: team-a}\n"
    "- name: prod\n"
    "  context: {cluster: c2, user: u2}\n"
    "users:\n"
    "- name: u1\n"
    "  user:\n"
    "    token: abc123\n"
    "    client-certificate-data: " PEM_B64 "\n"
    "    client-key-data: " PEM_B64 "\n"
    "- name: u2\n"
    "  user:\n"
    "    tokenFile: tok\n"
    "    client-certificate: /abs/cert.pem\n"
    "    client-key: keys/key.pem\n";

static void test_kubeconfig_inline(void **st)
{
    struct kube_config cfg;
    char err[256];
    (void)st;
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, KC_INLINE, strlen(KC_INLINE), "kc",
                                                  "/base", NULL, err, sizeof err),
                     0);
    assert_string_equal(cfg.server, "https://127.0.0.1:6443"); /* trailing slash cut */
    assert_string_equal(cfg.context, "dev");
    assert_string_equal(cfg.namespace_, "team-a");
    assert_string_equal(cfg.token, "abc123");
    assert_null(cfg.ca_file);
    assert_int_equal(cfg.ca_data_len, strlen(PEM_TEXT));
    assert_memory_equal(cfg.ca_data, PEM_TEXT, cfg.ca_data_len);
    assert_memory_equal(cfg.cert_data, PEM_TEXT, cfg.cert_data_len);
    assert_memory_equal(cfg.key_data, PEM_TEXT, cfg.key_data_len);
    assert_null(cfg.cert_file);
    kube_config_release(&cfg);
}

static void test_kubeconfig_files(void **st)
{
    struct kube_config cfg;
    char err[256], path[512];
    (void)st;
    write_file("kubeconfig", KC_INLINE);
    write_file("tok", "tok-from-file\n");
    snprintf(path, sizeof path, "%s/kubeconfig", tmpdir);
    assert_int_equal(kube_config_load_kubeconfig(&cfg, path, "prod", err, sizeof err), 0);
    assert_string_equal(cfg.server, "https://10.0.0.1:443");
    assert_string_equal(cfg.namespace_, "default");
    assert_string_equal(cfg.token, "tok-from-file"); /* newline trimmed */
    {
        char want[512];
        snprintf(want, sizeof want, "%s/ca.crt", tmpdir);
        assert_string_equal(cfg.ca_file, want);
        snprintf(want, sizeof want, "%s/tok", tmpdir);
        assert_string_equal(cfg.token_file, want);
        snprintf(want, sizeof want, "%s/keys/key.pem", tmpdir);
        assert_string_equal(cfg.key_file, want);
    }
    assert_string_equal(cfg.cert_file, "/abs/cert.pem");
    assert_null(cfg.ca_data);
    kube_config_release(&cfg);

    /* unknown context */
    assert_int_equal(kube_config_load_kubeconfig(&cfg, path, "nope", err, sizeof err),
                     GQ_EINVAL);
    assert_non_null(strstr(err, "nope"));
    assert_non_null(strstr(err, path));
    /* missing file */
    assert_int_equal(kube_config_load_kubeconfig(&cfg, "/nonexistent/kc", NULL, err, sizeof err),
                     GQ_ENOTFOUND);
    assert_non_null(strstr(err, "/nonexistent/kc"));
}

static void test_kubeconfig_errors(void **st)
{
    struct kube_config cfg;
    char err[256];
    static const char *no_server = "current-context: a\n"
                                   "contexts: [{name: a, context: {cluster: c}}]\n"
                                   "clusters: [{name: c, cluster: {certificate-authority: x}}]\n";
    static const char *no_ca = "current-context: a\n"
                               "contexts: [{name: a, context: {cluster: c}}]\n"
                               "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n";
    static const char *no_cur = "contexts: []\n";
    static const char *half_cert =
        "current-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'http://h:1'}}]\n"
        "users: [{name: u, user: {client-certificate-data: " PEM_B64 "}}]\n";
    static const char *bad_yaml = "a: [1, 2\n";
    static const char *exec_user =
        "current-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'http://h:1'}}]\n"
        "users: [{name: u, user: {exec: {command: aws}}}]\n";
    (void)st;
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, no_server, strlen(no_server), "f1.yaml",
                                                  NULL, NULL, err, sizeof err),
                     GQ_EINVAL);
    assert_non_null(strstr(err, "f1.yaml"));
    assert_non_null(strstr(err, "server"));
    assert_null(cfg.server); /* released */
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, no_ca, strlen(no_ca), "f2", NULL, NULL,
                                                  err, sizeof err),
                     GQ_EINVAL);
    assert_non_null(strstr(err, "certificate-authority"));
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, no_cur, strlen(no_cur), "f3", NULL, NULL,
                                                  err, sizeof err),
                     GQ_EINVAL);
    assert_non_null(strstr(err, "current-context"));
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, half_cert, strlen(half_cert), "f4", NULL,
                                                  NULL, err, sizeof err),
                     GQ_EINVAL);
    assert_non_null(strstr(err, "client key"));
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, exec_user, strlen(exec_user), "f6", NULL,
                                                  NULL, err, sizeof err),
                     GQ_EINVAL);
    assert_non_null(strstr(err, "users[u].user.exec"));
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, bad_yaml, strlen(bad_yaml), "f5", NULL,
                                                  NULL, err, sizeof err),
                     GQ_EPARSE);
    assert_non_null(strstr(err, "f5"));
}

static void test_incluster(void **st)
{
    struct kube_config cfg;
    struct kube_incluster_paths p = {0};
    char err[256], tok[512], ca[512], ns[512];
    (void)st;
    write_file("sa-token", "sa-tok\n");
    write_file("sa-ca", PEM_TEXT);
    write_file("sa-ns", "gangq-system\n");
    snprintf(tok, sizeof tok, "%s/sa-token", tmpdir);
    snprintf(ca, sizeof ca, "%s/sa-ca", tmpdir);
    snprintf(ns, sizeof ns, "%s/sa-ns", tmpdir);
    p.host = "10.96.0.1";
    p.port = "443";
    p.token_file = tok;
    p.ca_file = ca;
    p.namespace_file = ns;
    assert_int_equal(kube_config_load_incluster(&cfg, &p, err, sizeof err), 0);
    assert_string_equal(cfg.server, "https://10.96.0.1:443");
    assert_string_equal(cfg.token, "sa-tok");
    assert_string_equal(cfg.token_file, tok);
    assert_string_equal(cfg.namespace_, "gangq-system");
    kube_config_release(&cfg);
    p.host = "fd00::1";
    assert_int_equal(kube_config_load_incluster(&cfg, &p, err, sizeof err), 0);
    assert_string_equal(cfg.server, "https://[fd00::1]:443");
    kube_config_release(&cfg);
    /* no host: error */
    p.host = "";
    assert_int_equal(kube_config_load_incluster(&cfg, &p, err, sizeof err), GQ_ENOTFOUND);
    assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
    /* missing token */
    p.host = "h";
    p.token_file = "/nonexistent/token";
    assert_int_equal(kube_config_load_incluster(&cfg, &p, err, sizeof err), GQ_ENOTFOUND);
    assert_non_null(strstr(err, "/nonexistent/token"));
}

/* ---------------------------------------------------------- line cutter */

struct linelog {
    char lines[16][64];
    int n;
    int stop_at; /* return 7 on this line index (-1 never) */
};

static int line_cb(const char *line, size_t len, void *ud)
{
    struct linelog *l = ud;
    assert_true(l->n < 16);
    assert_true(len < 64);
    memcpy(l->lines[l->n], line, len);
    l->lines[l->n][len] = '\0';
    return l->n++ == l->stop_at ? 7 : 0;
}

static void test_lines(void **st)
{
    struct kube_lines lc;
    struct linelog log = {.stop_at = -1};
    (void)st;
    kube_lines_init(&lc, 10);
    /* partial chunks */
    assert_int_equal(kube_lines_feed(&lc, "ab", 2, line_cb, &log), 0);
    assert_int_equal(log.n, 0);
    assert_int_equal(kube_lines_feed(&lc, "c\nde", 4, line_cb, &log), 0);
    assert_int_equal(log.n, 1);
    assert_string_equal(log.lines[0], "abc");
    /* several lines in one chunk, CRLF, empty line skipped */
    assert_int_equal(kube_lines_feed(&lc, "f\r\n\nghi\njk", 10, line_cb, &log), 0);
    assert_int_equal(log.n, 3);
    assert_string_equal(log.lines[1], "def");
    assert_string_equal(log.lines[2], "ghi");
    /* exactly max (10) is fine: "jk" + 8 */
    assert_int_equal(kube_lines_feed(&lc, "12345678\n", 9, line_cb, &log), 0);
    assert_string_equal(log.lines[3], "jk12345678");
    /* one over the maximum: in one chunk, and across chunks */
    assert_int_equal(kube_lines_feed(&lc, "12345678901\n", 12, line_cb, &log), GQ_ELIMIT);
    assert_int_equal(kube_lines_feed(&lc, "123456", 6, line_cb, &log), 0);
    assert_int_equal(kube_lines_feed(&lc, "78901", 5, line_cb, &log), GQ_ELIMIT);
    assert_int_equal(log.n, 4);
    /* buffer was reset: a fresh line works */
    assert_int_equal(kube_lines_feed(&lc, "ok\n", 3, line_cb, &log), 0);
    assert_string_equal(log.lines[4], "ok");
    /* callback stop code propagates and stops further lines */
    log.stop_at = 5;
    assert_int_equal(kube_lines_feed(&lc, "x\ny\n", 4, line_cb, &log), 7);
    assert_int_equal(log.n, 6);
    assert_string_equal(log.lines[5], "x");
    kube_lines_release(&lc);
}

/* --------------------------------------------------------------- backoff */

static void test_backoff(void **st)
{
    struct kube_backoff b;
    double want = 0.5;
    (void)st;
    kube_backoff_init(&b, 0.5, 8, 12345);
    for (int i = 0; i < 10; i++) {
        double d = kube_backoff_next(&b, -1);
        double lo = GQ_MIN(want, 8), hi = GQ_MIN(want * 1.5, 8);
        assert_true(d >= lo - 1e-9);
        assert_true(d <= hi + 1e-9);
        want *= 2;
    }
    /* jitter actually varies */
    {
        double seen_lo = 1e9, seen_hi = 0;
        for (int i = 0; i < 200; i++) {
            kube_backoff_reset(&b);
            double d = kube_backoff_next(&b, -1);
            seen_lo = GQ_MIN(seen_lo, d);
            seen_hi = GQ_MAX(seen_hi, d);
        }
        assert_true(seen_lo < 0.55);
        assert_true(seen_hi > 0.7);
    }
    /* Retry-After wins when longer, even over the cap */
    kube_backoff_reset(&b);
    assert_true(kube_backoff_next(&b, 3) >= 3.0);
    assert_true(kube_backoff_next(&b, 30) >= 30.0);
    kube_backoff_reset(&b);
    assert_true(kube_backoff_next(&b, 0) <= 0.75 + 1e-9);
    /* header parsing */
    assert_true(kube_parse_retry_after(" 7\r\n") == 7.0);
    assert_true(kube_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") < 0);
    assert_true(kube_parse_retry_after(NULL) < 0);
}

/* ---------------------------------------------------------- watch events */

static void test_watch_events(void **st)
{
    struct kube_watch_event ev;
    char err[200];
    const char *l;
    (void)st;
    l = "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
        "\"namespace\":\"n\",\"resourceVersion\":\"17\"}}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), 0);
    assert_int_equal(ev.type, KUBE_EV_ADDED);
    assert_string_equal(ev.resource_version, "17");
    assert_string_equal(cJSON_GetObjectItem(ev.object, "kind")->valuestring, "Pod");
    kube_watch_event_release(&ev);
    l = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"p\",\"resourceVersion\":"
        "\"18\"}}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), 0);
    assert_int_equal(ev.type, KUBE_EV_MODIFIED);
    kube_watch_event_release(&ev);
    l = "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"p\",\"resourceVersion\":"
        "\"19\"}}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), 0);
    assert_int_equal(ev.type, KUBE_EV_DELETED);
    kube_watch_event_release(&ev);
    l = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":"
        "\"250\"}}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), 0);
    assert_int_equal(ev.type, KUBE_EV_BOOKMARK);
    assert_string_equal(ev.resource_version, "250");
    kube_watch_event_release(&ev);
    l = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"
        "\"too old resource version: 1 (5)\",\"reason\":\"Expired\",\"code\":410}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), 0);
    assert_int_equal(ev.type, KUBE_EV_ERROR);
    assert_int_equal(ev.code, 410);
    kube_watch_event_release(&ev);
    /* a code no integer holds (found by fuzz_watch) is no code, not an overflow */
    l = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":9e0000410}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), 0);
    assert_int_equal(ev.code, 0);
    kube_watch_event_release(&ev);
    /* errors */
    l = "{\"type\":\"BOOKMARK\",\"object\":{}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), GQ_EPARSE);
    assert_non_null(strstr(err, "resourceVersion"));
    l = "{\"type\":\"WHAT\",\"object\":{}}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), GQ_EPARSE);
    l = "{\"type\":\"ADDED\"}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), GQ_EPARSE);
    assert_non_null(strstr(err, "object"));
    l = "{\"type\":\"ADDED\",\"object\":{}";
    assert_int_equal(kube_watch_event_parse(l, strlen(l), &ev, err, sizeof err), GQ_EPARSE);
    assert_null(ev.object);
}

/* ----------------------------------------------------------------- cache */

struct evlog {
    char s[64][80];
    int n;
};

static void evlog_cb(enum kube_event_type t, const cJSON *old_obj, const cJSON *new_obj, void *ud)
{
    struct evlog *l = ud;
    char ko[24] = "-", kn[24] = "-";
    const cJSON *md;
    if (old_obj)
        kube_object_key(old_obj, ko, sizeof ko);
    if (new_obj)
        kube_object_key(new_obj, kn, sizeof kn);
    md = cJSON_GetObjectItem(new_obj ? new_obj : old_obj, "metadata");
    assert_true(l->n < 64);
    snprintf(l->s[l->n++], sizeof l->s[0], "%.10s %.23s %.23s rv=%.10s", kube_event_type_name(t), ko, kn,
             cJSON_GetObjectItem(md, "resourceVersion")
                 ? cJSON_GetObjectItem(md, "resourceVersion")->valuestring
                 : "?");
}

static cJSON *obj(const char *ns, const char *name, const char *rv)
{
    cJSON *o = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(o, "metadata");
    if (ns)
        cJSON_AddStringToObject(md, "namespace", ns);
    cJSON_AddStringToObject(md, "name", name);
    cJSON_AddStringToObject(md, "resourceVersion", rv);
    return o;
}

static int evlog_has(const struct evlog *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->s[i], s) == 0)
            return 1;
    return 0;
}

static void test_cache_relist_diff(void **st)
{
    struct kube_cache *c = kube_cache_new();
    struct evlog log = {0};
    cJSON *items;
    (void)st;
    assert_non_null(c);
    assert_int_equal(kube_cache_apply(c, KUBE_EV_ADDED, obj("ns", "a", "1"), evlog_cb, &log), 0);
    assert_int_equal(kube_cache_apply(c, KUBE_EV_ADDED, obj("ns", "b", "2"), evlog_cb, &log), 0);
    assert_int_equal(kube_cache_apply(c, KUBE_EV_ADDED, obj(NULL, "node1", "3"), evlog_cb, &log),
                     0);
    assert_int_equal(kube_cache_count(c), 3);
    assert_string_equal(log.s[2], "ADDED - node1 rv=3");
    /* MODIFIED of a known key, ADDED of a known key (reported as MODIFIED) */
    assert_int_equal(kube_cache_apply(c, KUBE_EV_MODIFIED, obj("ns", "a", "4"), evlog_cb, &log),
                     0);
    assert_string_equal(log.s[3], "MODIFIED ns/a ns/a rv=4");
    assert_int_equal(kube_cache_apply(c, KUBE_EV_ADDED, obj("ns", "a", "5"), evlog_cb, &log), 0);
    assert_string_equal(log.s[4], "MODIFIED ns/a ns/a rv=5");
    /* DELETED of an unknown key: silent */
    assert_int_equal(kube_cache_apply(c, KUBE_EV_DELETED, obj("ns", "zz", "6"), evlog_cb, &log),
                     0);
    assert_int_equal(log.n, 5);
    assert_non_null(kube_cache_get(c, "ns", "b"));
    assert_non_null(kube_cache_get(c, NULL, "node1"));
    assert_null(kube_cache_get(c, "other", "b"));

    /* relist: a unchanged (rv 5), b changed, node1 gone, c new */
    log.n = 0;
    items = cJSON_CreateArray();
    cJSON_AddItemToArray(items, obj("ns", "a", "5"));
    cJSON_AddItemToArray(items, obj("ns", "b", "9"));
    cJSON_AddItemToArray(items, obj("ns", "c", "10"));
    assert_int_equal(kube_cache_replace(c, items, evlog_cb, &log), 0);
    assert_int_equal(log.n, 3);
    assert_true(evlog_has(&log, "MODIFIED ns/b ns/b rv=9"));
    assert_true(evlog_has(&log, "ADDED - ns/c rv=10"));
    assert_true(evlog_has(&log, "DELETED node1 node1 rv=3"));
    assert_int_equal(kube_cache_count(c), 3);
    assert_null(kube_cache_get(c, NULL, "node1"));
    /* many objects: table growth keeps everything reachable */
    items = cJSON_CreateArray();
    for (int i = 0; i < 1000; i++) {
        char n[32];
        snprintf(n, sizeof n, "o%d", i);
        cJSON_AddItemToArray(items, obj("big", n, "1"));
    }
    assert_int_equal(kube_cache_replace(c, items, NULL, NULL), 0);
    assert_int_equal(kube_cache_count(c), 1000);
    assert_non_null(kube_cache_get(c, "big", "o777"));
    assert_null(kube_cache_get(c, "ns", "a"));
    /* an object without a name is refused */
    assert_int_equal(kube_cache_apply(c, KUBE_EV_ADDED, cJSON_CreateObject(), NULL, NULL),
                     GQ_EINVAL);
    kube_cache_free(c);
    kube_cache_free(NULL);
}

/* ------------------------------------------------------ paths, time, event */

static void test_path_time_event(void **st)
{
    char p[128], ts[40];
    double w;
    cJSON *ev;
    struct kube_objref ref = {"gangq.io/v1alpha1", "GPUJob", "team-a", "job1", "uid-1", "42"};
    (void)st;
    assert_int_equal(kube_path(p, sizeof p, "/apis/gangq.io/v1alpha1", "team-a", "gpujobs",
                               "job1", "status"),
                     0);
    assert_string_equal(p, "/apis/gangq.io/v1alpha1/namespaces/team-a/gpujobs/job1/status");
    assert_int_equal(kube_path(p, sizeof p, "/api/v1", NULL, "nodes", NULL, NULL), 0);
    assert_string_equal(p, "/api/v1/nodes");
    assert_int_equal(kube_path(p, sizeof p, "/api/v1", "a/b", "pods", NULL, NULL), GQ_EINVAL);
    assert_int_equal(kube_path(p, sizeof p, "/api/v1", "ns", "pods", "x?y", NULL), GQ_EINVAL);
    assert_int_equal(kube_path(p, 10, "/api/v1", "ns", "pods", NULL, NULL), GQ_ELIMIT);

    assert_int_equal(kube_time_format_micro(1136214245.5, ts, sizeof ts), 0);
    assert_string_equal(ts, "2006-01-02T15:04:05.500000Z");
    assert_int_equal(kube_time_parse("2006-01-02T15:04:05.500000Z", &w), 0);
    assert_true(w > 1136214245.49 && w < 1136214245.51);
    assert_int_equal(kube_time_parse("2006-01-02T17:04:05+02:00", &w), 0);
    assert_true(w == 1136214245.0);
    assert_int_equal(kube_time_parse("2006-01-02 15:04:05", &w), GQ_EINVAL);

    ev = kube_event_build(&ref, "Warning", "Preempted", "made room for team-b/big", "ctl-0",
                          1136214245.0);
    assert_non_null(ev);
    assert_string_equal(cJSON_GetObjectItem(ev, "reason")->valuestring, "Preempted");
    assert_string_equal(cJSON_GetObjectItem(ev, "type")->valuestring, "Warning");
    assert_string_equal(cJSON_GetObjectItem(ev, "reportingComponent")->valuestring,
                        "gangq.io/controller");
    assert_string_equal(cJSON_GetObjectItem(ev, "eventTime")->valuestring,
                        "2006-01-02T15:04:05.000000Z");
    assert_string_equal(cJSON_GetObjectItem(ev, "firstTimestamp")->valuestring,
                        "2006-01-02T15:04:05Z");
    {
        cJSON *io = cJSON_GetObjectItem(ev, "involvedObject");
        cJSON *md = cJSON_GetObjectItem(ev, "metadata");
        assert_string_equal(cJSON_GetObjectItem(io, "uid")->valuestring, "uid-1");
        assert_string_equal(cJSON_GetObjectItem(io, "kind")->valuestring, "GPUJob");
        assert_string_equal(cJSON_GetObjectItem(md, "namespace")->valuestring, "team-a");
        assert_true(strncmp(cJSON_GetObjectItem(md, "name")->valuestring, "job1.", 5) == 0);
    }
    cJSON_Delete(ev);
    /* a cluster-scoped object's Event: namespace default, legacy (no eventTime) */
    {
        struct kube_objref team = {"gangq.io/v1alpha1", "Team", NULL, "vision", "uid-2", "7"};
        ev = kube_event_build(&team, "Warning", "NamespaceConflict", "m", "ctl-0", 1136214245.0);
        assert_non_null(ev);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "metadata"), "namespace")->valuestring,
                            "default");
        assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "involvedObject"), "namespace"));
        assert_null(cJSON_GetObjectItem(ev, "eventTime"));
        assert_string_equal(cJSON_GetObjectItem(ev, "firstTimestamp")->valuestring, "2006-01-02T15:04:05Z");
        cJSON_Delete(ev);
    }
}

/* ------------------------------------------- scripted loopback HTTP server */

struct step {
    int status;
    const char *headers;   /* extra header lines, each ending in \r\n */
    const char *chunks[6]; /* body pieces, written with a pause between */
    int pause_ms;          /* between chunks */
    int hold_ms;           /* keep the connection open after the body */
};

struct server {
    pid_t pid;
    int port;
    char log[512];
};

static void msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static const char *find_header(const char *req, const char *name, char *out, size_t outlen)
{
    const char *p = strcasestr(req, name);
    size_t n = 0;
    out[0] = '\0';
    if (!p)
        return out;
    p += strlen(name);
    while (*p == ' ')
        p++;
    while (p[n] && p[n] != '\r' && n + 1 < outlen)
        n++;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

/* Handle connection i per steps[i]: log "i t METHOD PATH|ctype|auth|body". */
static void serve_conn(int fd, int i, const struct step *s, const char *logpath)
{
    char req[65536], ct[128], auth[128], line[2048];
    size_t n = 0;
    long clen = 0;
    char *hend = NULL;
    FILE *lf;
    struct timespec now;
    while (n + 1 < sizeof req) {
        ssize_t r = read(fd, req + n, sizeof req - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        req[n] = '\0';
        if (!hend && (hend = strstr(req, "\r\n\r\n")) != NULL) {
            char cl[32];
            find_header(req, "Content-Length:", cl, sizeof cl);
            clen = cl[0] ? strtol(cl, NULL, 10) : 0;
        }
        if (hend && (long)(n - (size_t)(hend + 4 - req)) >= clen)
            break;
    }
    req[n] = '\0';
    clock_gettime(CLOCK_MONOTONIC, &now);
    find_header(req, "Content-Type:", ct, sizeof ct);
    find_header(req, "Authorization:", auth, sizeof auth);
    {
        char *sp = strstr(req, " HTTP/");
        if (sp)
            *sp = '\0';
    }
    lf = fopen(logpath, "a");
    if (lf) {
        /* one write per record: the log is shared by concurrent handlers */
        setvbuf(lf, NULL, _IOFBF, 1 << 17);
        fprintf(lf, "%d %.3f %s|%s|%s|%s\n", i, (double)now.tv_sec + now.tv_nsec / 1e9, req,
                ct, auth, hend ? hend + 4 : "");
        fclose(lf);
    }
    if (!s) {
        static const char nf[] = "HTTP/1.1 503 No Script\r\nContent-Length: 0\r\nConnection: "
                                 "close\r\n\r\n";
        write_all(fd, nf, sizeof nf - 1);
        return;
    }
    snprintf(line, sizeof line,
             "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nConnection: close\r\n%s\r\n",
             s->status, s->headers ? s->headers : "");
    write_all(fd, line, strlen(line));
    for (int k = 0; k < 6 && s->chunks[k]; k++) {
        if (k > 0 && s->pause_ms)
            msleep(s->pause_ms);
        write_all(fd, s->chunks[k], strlen(s->chunks[k]));
    }
    if (s->hold_ms)
        msleep(s->hold_ms);
}

static void server_start(struct server *srv, const struct step *steps, int nsteps)
{
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    assert_true(lfd >= 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 16), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    srv->port = ntohs(a.sin_port);
    snprintf(srv->log, sizeof srv->log, "%s/server-%d.log", tmpdir, srv->port);
    fflush(NULL);
    srv->pid = fork();
    assert_true(srv->pid >= 0);
    if (srv->pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        /* die with the test process, and never hold its stdout/stderr pipes */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
            _exit(0);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
            close(devnull);
        }
        signal(SIGCHLD, SIG_IGN); /* reap connection handlers automatically */
        for (int i = 0;; i++) {
            int fd = accept(lfd, NULL, NULL);
            pid_t h;
            if (fd < 0)
                _exit(0);
            h = fork();
            if (h == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(lfd);
                serve_conn(fd, i, i < nsteps ? &steps[i] : NULL, srv->log);
                close(fd);
                _exit(0);
            }
            close(fd);
        }
    }
    close(lfd);
}

static void server_stop(struct server *srv)
{
    if (srv->pid > 0) {
        kill(srv->pid, SIGKILL);
        waitpid(srv->pid, NULL, 0);
        srv->pid = 0;
    }
}

/* Line i of the server log ("" when absent); returns its timestamp. */
static double server_req(const struct server *srv, int i, char *out, size_t outlen)
{
    FILE *f = fopen(srv->log, "r");
    char line[4096];
    double t = -1;
    out[0] = '\0';
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        int k;
        double tt;
        int off = 0;
        if (sscanf(line, "%d %lf %n", &k, &tt, &off) >= 2 && k == i) {
            size_t n = strlen(line + off);
            if (n && line[off + n - 1] == '\n')
                line[off + n - 1] = '\0';
            gq_strlcpy(out, line + off, outlen);
            t = tt;
            break;
        }
    }
    fclose(f);
    return t;
}

static struct kube_client *client_for(struct ev_loop *loop, const struct server *srv,
                                      const char *token)
{
    struct kube_config cfg;
    struct kube_client_opts o = {0};
    struct kube_client *c;
    char url[64], err[200];
    kube_config_init(&cfg);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv->port);
    cfg.server = url;
    cfg.token = (char *)token;
    o.allow_http_token = 1; /* the test server speaks plain http */
    o.log_level = GQ_LOG_ERROR + 1; /* quiet */
    o.request_timeout_ms = 5000;
    c = kube_client_new(loop, &cfg, &o, err, sizeof err);
    assert_non_null(c);
    return c;
}

/* Run the loop until *flag, cond(ud) or the deadline (seconds). */
struct waiter {
    int *flag;
    int (*cond)(void *);
    void *ud;
};
static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct waiter *wt = w->data;
    (void)revents;
    if ((wt->flag && *wt->flag) || (wt->cond && wt->cond(wt->ud)))
        ev_break(loop, EVBREAK_ALL);
}
static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}
static void run_until(struct ev_loop *loop, int *flag, int (*cond)(void *), void *ud,
                      double deadline)
{
    struct waiter wt = {flag, cond, ud};
    ev_timer poll, dl;
    ev_now_update(loop);
    ev_timer_init(&poll, poll_cb, 0.01, 0.01);
    poll.data = &wt;
    ev_timer_start(loop, &poll);
    ev_timer_init(&dl, deadline_cb, deadline, 0.);
    ev_timer_start(loop, &dl);
    ev_run(loop, 0);
    ev_timer_stop(loop, &poll);
    ev_timer_stop(loop, &dl);
}

/* ------------------------------------------------------- writers / client */

struct result {
    int done;
    int rc;
    long status;
    double retry_after;
    char body[512];
};

static void result_cb(const struct kube_response *r, void *ud)
{
    struct result *res = ud;
    res->done = 1;
    res->rc = r->rc;
    res->status = r->status;
    res->retry_after = r->retry_after;
    gq_strlcpy(res->body, r->body, sizeof res->body);
}

static void test_client_writers(void **st)
{
    static const struct step steps[] = {
        {201, NULL, {"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p1\"}}"}, 0, 0},
        {409, NULL, {"{\"kind\":\"Status\",\"code\":409,\"message\":\"the object has been modified\"}"}, 0, 0},
        {200, NULL, {"{}"}, 0, 0},
        {200, NULL, {"{}"}, 0, 0},
        {200, NULL, {"{}"}, 0, 0},
        {429, "Retry-After: 3\r\n", {"{}"}, 0, 0},
        {404, NULL, {"{}"}, 0, 0},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct result r[7];
    cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"p1\"}}");
    cJSON *ops = cJSON_Parse("[{\"op\":\"replace\",\"path\":\"/spec/x\",\"value\":1}]");
    char line[4096];
    (void)st;
    memset(r, 0, sizeof r);
    server_start(&srv, steps, 7);
    c = client_for(loop, &srv, "sekret");
    /* one at a time so the server's connection order matches */
    assert_int_equal(kube_create(c, "/api/v1/namespaces/ns/pods", o, result_cb, &r[0]), 0);
    run_until(loop, &r[0].done, NULL, NULL, 5);
    assert_int_equal(kube_patch_merge(c, "/api/v1/namespaces/ns/pods/p1", o, result_cb, &r[1]),
                     0);
    run_until(loop, &r[1].done, NULL, NULL, 5);
    assert_int_equal(kube_patch_json(c, "/api/v1/namespaces/ns/pods/p1", ops, result_cb, &r[2]),
                     0);
    run_until(loop, &r[2].done, NULL, NULL, 5);
    assert_int_equal(kube_patch_status(c, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/j", o,
                                       result_cb, &r[3]),
                     0);
    run_until(loop, &r[3].done, NULL, NULL, 5);
    assert_int_equal(kube_delete_rv(c, "/api/v1/namespaces/ns/pods/p1", 30, "uid-9", "41", result_cb, &r[4]),
                     0);
    run_until(loop, &r[4].done, NULL, NULL, 5);
    assert_int_equal(kube_get(c, "/api/v1/nodes", result_cb, &r[5]), 0);
    run_until(loop, &r[5].done, NULL, NULL, 5);
    assert_int_equal(kube_get(c, "/api/v1/nodes/x", result_cb, &r[6]), 0);
    run_until(loop, &r[6].done, NULL, NULL, 5);
    for (int i = 0; i < 7; i++)
        assert_true(r[i].done);
    assert_int_equal(r[0].rc, 0);
    assert_int_equal(r[0].status, 201);
    assert_non_null(strstr(r[0].body, "p1"));
    assert_int_equal(r[1].rc, GQ_ECONFLICT);
    assert_int_equal(r[2].rc, 0);
    assert_int_equal(r[5].rc, GQ_EBUSY);
    assert_true(r[5].retry_after == 3.0);
    assert_int_equal(r[6].rc, GQ_ENOTFOUND);
    /* what went over the wire */
    server_req(&srv, 0, line, sizeof line);
    assert_non_null(strstr(line, "POST /api/v1/namespaces/ns/pods|application/json|Bearer sekret|"));
    server_req(&srv, 1, line, sizeof line);
    assert_non_null(strstr(line, "PATCH /api/v1/namespaces/ns/pods/p1|application/merge-patch+json|"));
    server_req(&srv, 2, line, sizeof line);
    assert_non_null(strstr(line, "PATCH /api/v1/namespaces/ns/pods/p1|application/json-patch+json|"));
    assert_non_null(strstr(line, "\"op\":\"replace\""));
    server_req(&srv, 3, line, sizeof line);
    assert_non_null(
        strstr(line, "PATCH /apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/j/status|application/merge-patch+json|"));
    server_req(&srv, 4, line, sizeof line);
    assert_non_null(strstr(line, "DELETE /api/v1/namespaces/ns/pods/p1|"));
    assert_non_null(strstr(line, "\"gracePeriodSeconds\":30"));
    /* deleted only as the caller saw it: uid and resourceVersion preconditions */
    assert_non_null(strstr(line, "\"preconditions\":{\"uid\":\"uid-9\",\"resourceVersion\":\"41\"}"));
    server_req(&srv, 5, line, sizeof line);
    assert_non_null(strstr(line, "GET /api/v1/nodes|"));
    assert_int_equal(kube_client_pending(c), 0);
    cJSON_Delete(o);
    cJSON_Delete(ops);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* A status patch already printed (kube_patch_status_sstr): the request holds
 * a reference to the caller's shared text, not a copy, so the caller may drop
 * its own at once; the body goes over the wire as given; a 2xx answer's body
 * is not kept (only the status is read), an error's is (its message). */
static void test_client_patch_status_sstr(void **st)
{
    static const struct step steps[] = {
        {200, NULL, {"{\"kind\":\"GPUJob\",\"metadata\":{\"name\":\"j\"},\"status\":{\"state\":\"Queued\"}}"}, 0, 0},
        {409, NULL, {"{\"kind\":\"Status\",\"code\":409,\"message\":\"the object has been modified\"}"}, 0, 0},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct result r[2];
    char line[4096];
    (void)st;
    memset(r, 0, sizeof r);
    server_start(&srv, steps, 2);
    c = client_for(loop, &srv, "sekret");
    for (int i = 0; i < 2; i++) {
        const char *t = "{\"status\":{\"state\":\"Queued\"}}";
        const char *json = gq_sstr_new(t, strlen(t));
        assert_non_null(json);
        assert_int_equal(kube_patch_status_sstr(c, KUBE_PRIO_NORMAL, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/j",
                                                json, result_cb, &r[i]),
                         0);
        gq_sstr_put(json); /* the request keeps its own reference (ASan: no use after free, no leak) */
        run_until(loop, &r[i].done, NULL, NULL, 5);
        assert_true(r[i].done);
    }
    assert_int_equal(kube_patch_status_sstr(c, KUBE_PRIO_NORMAL, "/x", NULL, result_cb, &r[0]), GQ_EINVAL);
    assert_int_equal(r[0].rc, 0);
    assert_int_equal(r[0].status, 200);
    assert_string_equal(r[0].body, ""); /* read for its status only */
    assert_int_equal(r[1].rc, GQ_ECONFLICT);
    assert_non_null(strstr(r[1].body, "the object has been modified"));
    for (int i = 0; i < 2; i++) {
        server_req(&srv, i, line, sizeof line);
        assert_non_null(strstr(line, "PATCH /apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/j/status|application/merge-patch+json|"));
        assert_non_null(strstr(line, "{\"status\":{\"state\":\"Queued\"}}"));
    }
    assert_int_equal(kube_client_pending(c), 0);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* A transport failure and cancellation from inside the callback. */
static void cancel_self_cb(const struct kube_response *r, void *ud)
{
    struct kube_req **h = ud;
    (void)r;
    kube_req_cancel(*h); /* must be harmless: the request is finishing */
    *h = NULL;
}

static void test_client_transport(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv = {0};
    struct kube_client *c;
    struct result r = {0};
    struct kube_req *h = NULL;
    int sock;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    (void)st;
    /* a port nobody listens on */
    sock = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(sock, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(sock, (struct sockaddr *)&a, &al);
    srv.port = ntohs(a.sin_port);
    close(sock);
    c = client_for(loop, &srv, NULL);
    assert_int_equal(kube_get(c, "/api/v1/nodes", result_cb, &r), 0);
    run_until(loop, &r.done, NULL, NULL, 5);
    assert_true(r.done);
    assert_int_equal(r.rc, GQ_EIO);
    assert_int_equal(r.status, 0);
    assert_int_equal(kube_request_h(c, "GET", "/x", NULL, NULL, cancel_self_cb, &h, &h), 0);
    assert_non_null(h);
    run_until(loop, NULL, NULL, NULL, 0.5);
    assert_null(h);
    /* cancel before it runs: callback never called */
    memset(&r, 0, sizeof r);
    assert_int_equal(kube_request_h(c, "GET", "/y", NULL, NULL, result_cb, &r, &h), 0);
    kube_req_cancel(h);
    run_until(loop, NULL, NULL, NULL, 0.3);
    assert_false(r.done);
    assert_int_equal(kube_client_pending(c), 0);
    assert_int_equal(kube_request(c, "GET", "no-slash", NULL, NULL, result_cb, &r), GQ_EINVAL);
    kube_client_free(c);
    ev_loop_destroy(loop);
}

/* Read what fn wrote to stderr (fd 2) into out. */
static void capture_stderr(void (*fn)(void *), void *ud, char *out, size_t outlen)
{
    char path[512];
    int fd, saved;
    ssize_t n;
    snprintf(path, sizeof path, "%s/stderr.txt", tmpdir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    fflush(stderr);
    saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    fn(ud);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    n = read(fd, out, outlen - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
}

struct mk_client {
    struct ev_loop *loop;
    struct kube_config *cfg;
    struct kube_client_opts *o;
    struct kube_client *c;
    char err[300];
};
static void mk_client_run(void *ud)
{
    struct mk_client *m = ud;
    m->err[0] = '\0';
    m->c = kube_client_new(m->loop, m->cfg, m->o, m->err, sizeof m->err);
}

/* A bearer token never goes to a server that is not https:// unless the
 * option allows it; insecure-skip-tls-verify is warned about. */
static void test_http_token_refused(void **st)
{
    static const char *kc_http =
        "current-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'http://10.1.2.3:8080'}}]\n"
        "users: [{name: u, user: {token: s3cret}}]\n";
    static const char *kc_file =
        "current-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'http://10.1.2.3:8080'}}]\n"
        "users: [{name: u, user: {tokenFile: http-tok}}]\n";
    static const char *kc_insecure =
        "current-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://10.1.2.3:6443', "
        "insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: s3cret}}]\n";
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct kube_config cfg;
    struct kube_client_opts o = {0};
    struct mk_client m = {loop, &cfg, &o, NULL, ""};
    char err[256], out[4096];
    (void)st;
    o.log_level = GQ_LOG_WARN;

    /* http:// + token: refused, naming the server and the option */
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, kc_http, strlen(kc_http), "kc", tmpdir,
                                                  NULL, err, sizeof err), 0);
    mk_client_run(&m);
    assert_null(m.c);
    assert_non_null(strstr(m.err, "http://10.1.2.3:8080"));
    assert_non_null(strstr(m.err, "--insecure-allow-http-token"));
    assert_non_null(strstr(m.err, "token"));
    assert_null(strstr(m.err, "s3cret"));
    /* a server with no scheme is not https either (curl would guess http) */
    free(cfg.server);
    cfg.server = strdup("10.1.2.3:6443");
    assert_non_null(cfg.server);
    mk_client_run(&m);
    assert_null(m.c);
    assert_non_null(strstr(m.err, "10.1.2.3:6443"));
    /* the option allows it, and says so in the log */
    o.allow_http_token = 1;
    capture_stderr(mk_client_run, &m, out, sizeof out);
    assert_non_null(m.c);
    assert_non_null(strstr(out, "level=warn"));
    assert_non_null(strstr(out, "plain http"));
    kube_client_free(m.c);
    o.allow_http_token = 0;
    /* https (any case) with a token is fine; http without a token too */
    free(cfg.server);
    cfg.server = strdup("HTTPS://10.1.2.3:6443");
    assert_non_null(cfg.server);
    mk_client_run(&m);
    assert_non_null(m.c);
    kube_client_free(m.c);
    free(cfg.server);
    cfg.server = strdup("http://127.0.0.1:8001");
    assert_non_null(cfg.server);
    free(cfg.token);
    cfg.token = NULL;
    mk_client_run(&m);
    assert_non_null(m.c);
    kube_client_free(m.c);
    kube_config_release(&cfg);

    /* a token file counts as a token */
    write_file("http-tok", "t0k\n");
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, kc_file, strlen(kc_file), "kc", tmpdir,
                                                  NULL, err, sizeof err), 0);
    mk_client_run(&m);
    assert_null(m.c);
    assert_non_null(strstr(m.err, "--insecure-allow-http-token"));
    kube_config_release(&cfg);

    /* insecure-skip-tls-verify: accepted with a warning naming it and the server */
    assert_int_equal(kube_config_parse_kubeconfig(&cfg, kc_insecure, strlen(kc_insecure), "kc",
                                                  tmpdir, NULL, err, sizeof err), 0);
    assert_int_equal(cfg.insecure, 1);
    capture_stderr(mk_client_run, &m, out, sizeof out);
    assert_non_null(m.c);
    assert_non_null(strstr(out, "level=warn"));
    assert_non_null(strstr(out, "insecure-skip-tls-verify"));
    assert_non_null(strstr(out, "https://10.1.2.3:6443"));
    kube_client_free(m.c);
    kube_config_release(&cfg);
    ev_loop_destroy(loop);
}

/* A response body over max_body fails with GQ_ELIMIT instead of growing. */
static void test_body_limit(void **st)
{
    static const struct step steps[] = {
        {200, NULL, {"{\"items\":[", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]}"}, 20, 0},
        {200, NULL, {"{\"ok\":1}"}, 0, 0},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_config cfg;
    struct kube_client_opts o = {0};
    struct kube_client *c;
    struct result r[2];
    char url[64], err[200];
    (void)st;
    memset(r, 0, sizeof r);
    server_start(&srv, steps, 2);
    kube_config_init(&cfg);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv.port);
    cfg.server = url;
    o.log_level = GQ_LOG_ERROR + 1;
    o.max_body = 32;
    c = kube_client_new(loop, &cfg, &o, err, sizeof err);
    assert_non_null(c);
    assert_int_equal(kube_get(c, "/big", result_cb, &r[0]), 0);
    run_until(loop, &r[0].done, NULL, NULL, 5);
    assert_int_equal(r[0].rc, GQ_ELIMIT);
    assert_int_equal(kube_get(c, "/small", result_cb, &r[1]), 0);
    run_until(loop, &r[1].done, NULL, NULL, 5);
    assert_int_equal(r[1].rc, 0);
    assert_string_equal(r[1].body, "{\"ok\":1}");
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* At most max_inflight plain requests run at once; the rest wait in order. */
static void test_max_inflight(void **st)
{
    static const struct step steps[] = {
        {200, NULL, {"{}"}, 0, 300}, {200, NULL, {"{}"}, 0, 300}, {200, NULL, {"{}"}, 0, 300},
        {200, NULL, {"{}"}, 0, 300}, {200, NULL, {"{}"}, 0, 300}, {200, NULL, {"{}"}, 0, 300},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_config cfg;
    struct kube_client_opts o = {0};
    struct kube_client *c;
    struct result r[6];
    struct kube_req *h = NULL;
    char url[64], err[200], line[4096];
    double t[6];
    int all = 0;
    (void)st;
    memset(r, 0, sizeof r);
    server_start(&srv, steps, 6);
    kube_config_init(&cfg);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv.port);
    cfg.server = url;
    o.log_level = GQ_LOG_ERROR + 1;
    o.max_inflight = 2;
    c = kube_client_new(loop, &cfg, &o, err, sizeof err);
    assert_non_null(c);
    for (int i = 0; i < 6; i++) {
        char p[16];
        snprintf(p, sizeof p, "/r%d", i);
        assert_int_equal(kube_request_h(c, "GET", p, NULL, NULL, result_cb, &r[i], i == 3 ? &h : NULL), 0);
    }
    assert_int_equal(kube_client_queued(c), 4);
    kube_req_cancel(h); /* a queued request can be cancelled */
    assert_int_equal(kube_client_queued(c), 3);
    for (int k = 0; k < 60 && !all; k++) {
        run_until(loop, NULL, NULL, NULL, 0.1);
        all = r[0].done && r[1].done && r[2].done && r[4].done && r[5].done;
    }
    assert_true(all);
    assert_false(r[3].done);
    for (int i = 0; i < 5; i++) {
        t[i] = server_req(&srv, i, line, sizeof line);
        assert_true(t[i] > 0);
    }
    assert_true(server_req(&srv, 5, line, sizeof line) < 0); /* only 5 went out */
    /* waves of two: the third connection starts after the first ones finished */
    assert_true(t[2] - t[0] >= 0.25);
    assert_true(t[4] - t[0] >= 0.5);
    assert_int_equal(kube_client_pending(c), 0);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* The token file is re-read after token_reload_s (service-account rotation). */
static void test_token_rotation(void **st)
{
    static const struct step steps[] = {
        {200, NULL, {"{}"}, 0, 0},
        {200, NULL, {"{}"}, 0, 0},
        {200, NULL, {"{}"}, 0, 0},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_config cfg;
    struct kube_client_opts o = {0};
    struct kube_client *c;
    struct result r[3];
    char url[64], err[200], tok[512], line[4096];
    (void)st;
    memset(r, 0, sizeof r);
    server_start(&srv, steps, 3);
    write_file("rot-token", "first\n");
    snprintf(tok, sizeof tok, "%s/rot-token", tmpdir);
    kube_config_init(&cfg);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv.port);
    cfg.server = url;
    cfg.token = "first";
    cfg.token_file = tok;
    o.allow_http_token = 1; /* the test server speaks plain http */
    o.log_level = GQ_LOG_ERROR + 1;
    o.token_reload_s = 0.3;
    c = kube_client_new(loop, &cfg, &o, err, sizeof err);
    assert_non_null(c);
    write_file("rot-token", "second\n");
    assert_int_equal(kube_get(c, "/a", result_cb, &r[0]), 0); /* too soon: old token */
    run_until(loop, &r[0].done, NULL, NULL, 5);
    run_until(loop, NULL, NULL, NULL, 0.4);
    assert_int_equal(kube_get(c, "/b", result_cb, &r[1]), 0);
    run_until(loop, &r[1].done, NULL, NULL, 5);
    server_req(&srv, 0, line, sizeof line);
    assert_non_null(strstr(line, "GET /a||Bearer first|"));
    server_req(&srv, 1, line, sizeof line);
    assert_non_null(strstr(line, "GET /b||Bearer second|"));
    /* an unreadable file keeps the last good token */
    unlink(tok);
    run_until(loop, NULL, NULL, NULL, 0.4);
    assert_int_equal(kube_get(c, "/c", result_cb, &r[2]), 0);
    run_until(loop, &r[2].done, NULL, NULL, 5);
    server_req(&srv, 2, line, sizeof line);
    assert_non_null(strstr(line, "GET /c||Bearer second|"));
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* -------------------------------------------------------------- informer */

#define POD(name, rv) "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"" name "\",\"resourceVersion\":\"" rv "\"}}"
#define WEV(type, o) "{\"type\":\"" type "\",\"object\":" o "}\n"

struct result;
struct inf_ctx {
    struct evlog log;
    int synced;
    struct kube_informer *inf;
    struct kube_client *c;
    struct result *side;
};

static void inf_event(enum kube_event_type t, const cJSON *o, const cJSON *n, void *ud)
{
    struct inf_ctx *x = ud;
    evlog_cb(t, o, n, &x->log);
}

static void inf_synced(void *ud)
{
    struct inf_ctx *x = ud;
    x->synced++;
}

static int server_saw_10(void *ud)
{
    char line[4096];
    return server_req(ud, 9, line, sizeof line) > 0;
}

static void test_informer_flow(void **st)
{
    static const struct step steps[] = {
        /* 0: list page 1 */
        {200, NULL,
         {"{\"kind\":\"PodList\",\"metadata\":{\"continue\":\"c1\",\"resourceVersion\":\"99\"},"
          "\"items\":[" POD("a", "1") "," POD("b", "2") "]}"},
         0, 0},
        /* 1: list page 2 */
        {200, NULL,
         {"{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[" POD("c", "3") "]}"},
         0, 0},
        /* 2: watch: ADDED d split mid-line; MODIFIED a + BOOKMARK in one chunk; ERROR 410 */
        {200, NULL,
         {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"ns\",",
          "\"name\":\"d\",\"resourceVersion\":\"101\"}}}\n",
          WEV("MODIFIED", POD("a", "102")) "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"105\"}}}\n",
          "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n"},
         50, 3000},
        /* 3: relist: a unchanged, c unchanged, e new; b and d gone */
        {200, NULL,
         {"{\"metadata\":{\"resourceVersion\":\"200\"},\"items\":[" POD("a", "102") "," POD("c", "3") "," POD("e", "150") "]}"},
         0, 0},
        /* 4: watch: 429 Retry-After 1 */
        {429, "Retry-After: 1\r\n", {"{\"kind\":\"Status\",\"code\":429}"}, 0, 0},
        /* 5: watch: stalls (headers, then nothing) */
        {200, NULL, {""}, 0, 4000},
        /* 6: watch: HTTP 410 */
        {410, NULL, {"{\"kind\":\"Status\",\"code\":410}"}, 0, 0},
        /* 7: list */
        {200, NULL, {"{\"metadata\":{\"resourceVersion\":\"300\"},\"items\":[" POD("a", "102") "," POD("e", "150") "]}"}, 0, 0},
        /* 8: watch: DELETED e, then the server closes normally */
        {200, NULL, {WEV("DELETED", POD("e", "301"))}, 0, 1200},
        /* 9: watch resumes from 301 and idles */
        {200, NULL, {""}, 0, 3000},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct inf_ctx x;
    struct kube_informer_opts o = {0};
    struct kube_informer_stats s;
    char err[200], line[4096];
    double t4, t5;
    (void)st;
    memset(&x, 0, sizeof x);
    server_start(&srv, steps, 10);
    c = client_for(loop, &srv, "t");
    o.path = "/api/v1/pods";
    o.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
    o.list_limit = 2;
    o.watch_timeout_min_s = 5;
    o.watch_timeout_max_s = 9;
    o.stall_s = 0.6;
    o.backoff_base_s = 0.05;
    o.backoff_max_s = 0.2;
    o.seed = 42;
    o.on_event = inf_event;
    o.on_synced = inf_synced;
    o.ud = &x;
    x.inf = kube_informer_new(c, &o, err, sizeof err);
    assert_non_null(x.inf);
    assert_false(kube_informer_synced(x.inf));
    assert_int_equal(kube_informer_start(x.inf), 0);
    run_until(loop, NULL, server_saw_10, &srv, 12);
    kube_informer_get_stats(x.inf, &s);
    /* request sequence */
    server_req(&srv, 0, line, sizeof line);
    assert_non_null(strstr(line, "GET /api/v1/pods?limit=2&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed|"));
    server_req(&srv, 1, line, sizeof line);
    assert_non_null(strstr(line, "limit=2&continue=c1&"));
    server_req(&srv, 2, line, sizeof line);
    assert_non_null(strstr(line, "watch=1&allowWatchBookmarks=true&resourceVersion=100&timeoutSeconds="));
    server_req(&srv, 3, line, sizeof line);
    assert_non_null(strstr(line, "GET /api/v1/pods?limit=2&field")); /* relist after ERROR 410 */
    t4 = server_req(&srv, 4, line, sizeof line);
    assert_non_null(strstr(line, "resourceVersion=200&"));
    t5 = server_req(&srv, 5, line, sizeof line);
    assert_non_null(strstr(line, "resourceVersion=200&")); /* after 429: same RV */
    assert_true(t5 - t4 >= 0.95);                          /* honoured Retry-After: 1 */
    server_req(&srv, 6, line, sizeof line);
    assert_non_null(strstr(line, "resourceVersion=200&")); /* after the stall: same RV */
    server_req(&srv, 7, line, sizeof line);
    assert_non_null(strstr(line, "GET /api/v1/pods?limit=2&")); /* HTTP 410 -> relist */
    server_req(&srv, 8, line, sizeof line);
    assert_non_null(strstr(line, "resourceVersion=300&"));
    server_req(&srv, 9, line, sizeof line);
    assert_non_null(strstr(line, "resourceVersion=301&")); /* resumed from the last event */
    {
        const char *to = strstr(line, "timeoutSeconds=");
        long v;
        assert_non_null(to);
        v = strtol(to + 15, NULL, 10);
        assert_true(v >= 5 && v <= 9);
    }
    /* events seen by the owner */
    assert_true(evlog_has(&x.log, "ADDED - ns/a rv=1"));
    assert_true(evlog_has(&x.log, "ADDED - ns/b rv=2"));
    assert_true(evlog_has(&x.log, "ADDED - ns/c rv=3"));
    assert_true(evlog_has(&x.log, "ADDED - ns/d rv=101"));
    assert_true(evlog_has(&x.log, "MODIFIED ns/a ns/a rv=102"));
    assert_true(evlog_has(&x.log, "DELETED ns/b ns/b rv=2"));   /* synthetic, relist */
    assert_true(evlog_has(&x.log, "DELETED ns/d ns/d rv=101")); /* synthetic, relist */
    assert_true(evlog_has(&x.log, "ADDED - ns/e rv=150"));
    assert_true(evlog_has(&x.log, "DELETED ns/e ns/e rv=301")); /* the watch carries the final state */
    assert_true(evlog_has(&x.log, "DELETED ns/c ns/c rv=3")); /* synthetic, 2nd relist */
    assert_int_equal(x.log.n, 10); /* and nothing else (no event for unchanged a, c) */
    assert_true(kube_informer_synced(x.inf));
    assert_int_equal(x.synced, 3);
    assert_int_equal(s.relists_410, 2);
    assert_true(s.stalls >= 1);
    assert_int_equal(s.throttled, 1);
    assert_int_equal(s.bookmarks, 1);
    assert_string_equal(kube_informer_resource_version(x.inf), "301");
    assert_non_null(kube_informer_get(x.inf, "ns", "a"));
    assert_null(kube_informer_get(x.inf, "ns", "e"));
    assert_int_equal(kube_cache_count(kube_informer_cache(x.inf)), 1); /* only a is left */
    kube_informer_free(x.inf);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* An ERROR event other than 410 backs off and re-watches from the same
 * resourceVersion: no relist. A label selector goes into every request. */
static int server_saw_3(void *ud)
{
    char line[4096];
    return server_req(ud, 2, line, sizeof line) > 0;
}

static void test_informer_error_event(void **st)
{
    static const struct step steps[] = {
        {200, NULL, {"{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[" POD("a", "5") "]}"}, 0, 0},
        {200, NULL,
         {WEV("MODIFIED", POD("a", "8")) "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,\"message\":\"internal\"}}\n"},
         0, 2000},
        {200, NULL, {""}, 0, 2000},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct inf_ctx x;
    struct kube_informer_opts o = {0};
    struct kube_informer_stats s;
    char err[200], line[4096];
    (void)st;
    memset(&x, 0, sizeof x);
    server_start(&srv, steps, 3);
    c = client_for(loop, &srv, NULL);
    o.path = "/api/v1/pods";
    o.label_selector = "gangq.io/job";
    o.backoff_base_s = 0.05;
    o.on_event = inf_event;
    o.ud = &x;
    x.inf = kube_informer_new(c, &o, err, sizeof err);
    assert_non_null(x.inf);
    kube_informer_start(x.inf);
    run_until(loop, NULL, server_saw_3, &srv, 5);
    kube_informer_get_stats(x.inf, &s);
    server_req(&srv, 0, line, sizeof line);
    assert_non_null(strstr(line, "GET /api/v1/pods?limit=500&labelSelector=gangq.io%2Fjob|"));
    server_req(&srv, 2, line, sizeof line);
    assert_non_null(strstr(line, "watch=1&allowWatchBookmarks=true&resourceVersion=8&"));
    assert_non_null(strstr(line, "&labelSelector=gangq.io%2Fjob|"));
    assert_int_equal(s.lists, 1);
    assert_int_equal(s.relists_410, 0);
    assert_true(s.errors >= 1);
    assert_true(evlog_has(&x.log, "MODIFIED ns/a ns/a rv=8"));
    kube_informer_free(x.inf);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* The lagging-watch test hook: watch events (bookmarks too) reach the cache,
 * the owner and the resourceVersion event_delay_s late, in order; the list
 * is not delayed. */
static int server_saw_2(void *ud)
{
    char line[4096];
    return server_req(ud, 1, line, sizeof line) > 0;
}

static int log_has_3(void *ud)
{
    return ((struct inf_ctx *)ud)->log.n >= 3;
}

static void test_informer_event_delay(void **st)
{
    static const struct step steps[] = {
        {200, NULL, {"{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[" POD("a", "5") "]}"}, 0, 0},
        {200, NULL,
         {WEV("MODIFIED", POD("a", "8")) WEV("ADDED", POD("b", "9"))
              "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n"},
         0, 3000},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct inf_ctx x;
    struct kube_informer_opts o = {0};
    char err[200];
    double t0;
    (void)st;
    memset(&x, 0, sizeof x);
    server_start(&srv, steps, 2);
    c = client_for(loop, &srv, NULL);
    o.path = "/api/v1/pods";
    o.on_event = inf_event;
    o.on_synced = inf_synced;
    o.ud = &x;
    o.event_delay_s = 0.8;
    x.inf = kube_informer_new(c, &o, err, sizeof err);
    assert_non_null(x.inf);
    kube_informer_start(x.inf);
    run_until(loop, NULL, server_saw_2, &srv, 5);
    t0 = ev_now(loop);
    assert_int_equal(x.synced, 1); /* the list at once */
    run_until(loop, NULL, NULL, NULL, 0.3);
    assert_int_equal(x.log.n, 1); /* the watch events arrived but wait */
    assert_string_equal(kube_informer_resource_version(x.inf), "7");
    {
        const cJSON *a = kube_informer_get(x.inf, "ns", "a");
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "metadata"),
                                                           "resourceVersion");
        assert_true(cJSON_IsString(rv));
        assert_string_equal(rv->valuestring, "5");
    }
    assert_null(kube_informer_get(x.inf, "ns", "b"));
    run_until(loop, NULL, log_has_3, &x, 5);
    assert_true(ev_now(loop) - t0 >= 0.7);
    assert_string_equal(x.log.s[0], "ADDED - ns/a rv=5");
    assert_string_equal(x.log.s[1], "MODIFIED ns/a ns/a rv=8");
    assert_string_equal(x.log.s[2], "ADDED - ns/b rv=9");
    run_until(loop, NULL, NULL, NULL, 0.1);
    assert_string_equal(kube_informer_resource_version(x.inf), "12"); /* the bookmark, in order */
    kube_informer_free(x.inf); /* events still held would be dropped */
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* An over-long event line forces a relist; freeing from the handler is safe. */
static void free_in_handler(enum kube_event_type t, const cJSON *o, const cJSON *n, void *ud)
{
    struct inf_ctx *x = ud;
    evlog_cb(t, o, n, &x->log);
    if (strstr(x->log.s[x->log.n - 1], "ns/z")) {
        /* we are inside curl's write callback: the new request must be deferred */
        assert_int_equal(kube_get(x->c, "/side", result_cb, x->side), 0);
        kube_informer_free(x->inf);
        x->inf = NULL;
        x->synced = 100;
    }
}

static void test_informer_long_line_and_free(void **st)
{
    static char big[400];
    static struct step steps[] = {
        {200, NULL, {"{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}"}, 0, 0},
        {200, NULL, {big, "\n"}, 0, 2000},
        {200, NULL, {"{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[" POD("y", "20") "]}"}, 0, 0},
        {200, NULL, {WEV("ADDED", POD("z", "21")) WEV("ADDED", POD("zz", "22"))}, 0, 2000},
        {200, NULL, {"{\"side\":true}"}, 0, 0},
    };
    struct result side = {0};
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct inf_ctx x;
    struct kube_informer_opts o = {0};
    char err[200], line[4096];
    (void)st;
    memset(big, 'x', sizeof big - 1);
    big[0] = '{';
    memset(&x, 0, sizeof x);
    server_start(&srv, steps, 5);
    c = client_for(loop, &srv, NULL);
    x.c = c;
    x.side = &side;
    o.path = "/apis/gangq.io/v1alpha1/gpujobs";
    o.max_event_line = 200;
    o.backoff_base_s = 0.05;
    o.on_event = free_in_handler;
    o.ud = &x;
    x.inf = kube_informer_new(c, &o, err, sizeof err);
    assert_non_null(x.inf);
    kube_informer_start(x.inf);
    run_until(loop, &x.synced, NULL, NULL, 8);
    assert_int_equal(x.synced, 100);
    assert_null(x.inf);
    server_req(&srv, 2, line, sizeof line);
    assert_non_null(strstr(line, "GET /apis/gangq.io/v1alpha1/gpujobs?limit=500|"));
    assert_true(evlog_has(&x.log, "ADDED - ns/y rv=20"));
    assert_true(evlog_has(&x.log, "ADDED - ns/z rv=21"));
    assert_false(evlog_has(&x.log, "ADDED - ns/zz rv=22")); /* freed before it */
    run_until(loop, &side.done, NULL, NULL, 3); /* deferred add and removal run */
    assert_true(side.done);
    assert_int_equal(side.rc, 0);
    assert_string_equal(side.body, "{\"side\":true}");
    server_req(&srv, 4, line, sizeof line);
    assert_non_null(strstr(line, "GET /side|"));
    assert_int_equal(kube_client_pending(c), 0);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* ---------------------------------------------------------------- leader */

struct lctx {
    int started, stopped;
};
static void l_started(void *ud) { ((struct lctx *)ud)->started++; }
static void l_stopped(void *ud) { ((struct lctx *)ud)->stopped++; }

static void test_leader(void **st)
{
    /* 0: GET 404 -> 1: POST 201 (leader) -> 2: GET ours -> 3: PUT 409 ->
     * 4..: 503: renewals fail until the renew deadline passes */
    static const struct step steps[] = {
        {404, NULL, {"{\"kind\":\"Status\",\"code\":404}"}, 0, 0},
        {201, NULL, {"{\"metadata\":{\"name\":\"gangq\",\"namespace\":\"kube-system\",\"resourceVersion\":\"5\"},\"spec\":{\"holderIdentity\":\"me\",\"leaseDurationSeconds\":3}}"}, 0, 0},
        {200, NULL, {"{\"metadata\":{\"name\":\"gangq\",\"namespace\":\"kube-system\",\"resourceVersion\":\"5\"},\"spec\":{\"holderIdentity\":\"me\",\"leaseDurationSeconds\":3,\"leaseTransitions\":0}}"}, 0, 0},
        {409, NULL, {"{\"kind\":\"Status\",\"code\":409}"}, 0, 0},
    };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_leader *l;
    struct kube_leader_opts o = {0};
    struct lctx x = {0};
    char err[200], line[4096];
    (void)st;
    server_start(&srv, steps, 4);
    c = client_for(loop, &srv, NULL);
    o.namespace_ = "kube-system";
    o.name = "gangq";
    o.identity = "me";
    o.lease_duration_s = 3;
    o.renew_deadline_s = 1.0;
    o.retry_period_s = 0.2;
    o.on_started = l_started;
    o.on_stopped = l_stopped;
    o.ud = &x;
    /* bad timing is refused */
    o.retry_period_s = 2;
    assert_null(kube_leader_new(c, &o, err, sizeof err));
    assert_non_null(strstr(err, "renew deadline"));
    o.retry_period_s = 0.2;
    l = kube_leader_new(c, &o, err, sizeof err);
    assert_non_null(l);
    kube_leader_start(l);
    run_until(loop, &x.started, NULL, NULL, 3);
    assert_int_equal(x.started, 1);
    assert_true(kube_leader_is_leader(l));
    assert_string_equal(kube_leader_holder(l), "me");
    run_until(loop, &x.stopped, NULL, NULL, 4);
    assert_int_equal(x.stopped, 1); /* renewals failed past the deadline */
    assert_false(kube_leader_is_leader(l));
    server_req(&srv, 0, line, sizeof line);
    assert_non_null(strstr(line, "GET /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gangq|"));
    server_req(&srv, 1, line, sizeof line);
    assert_non_null(strstr(line, "POST /apis/coordination.k8s.io/v1/namespaces/kube-system/leases|"));
    assert_non_null(strstr(line, "\"holderIdentity\":\"me\""));
    assert_non_null(strstr(line, "\"leaseDurationSeconds\":3"));
    server_req(&srv, 3, line, sizeof line);
    assert_non_null(strstr(line, "PUT /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gangq|"));
    assert_non_null(strstr(line, "\"resourceVersion\":\"5\"")); /* guarded update */
    kube_leader_free(l);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* ------------------------------------------------------ hostile objects */

/* A GPUJob-like object named ns/NAME with `depth` objects nested inside
 * spec.template (caller frees). */
static char *deep_obj(const char *name, const char *rv, int depth)
{
    struct gq_buf b;
    gq_buf_init(&b, 1u << 20);
    assert_int_equal(gq_buf_printf(&b, "{\"kind\":\"GPUJob\",\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\","
                                       "\"uid\":\"u-%s\",\"resourceVersion\":\"%s\"},\"spec\":{\"template\":",
                                   name, name, rv), 0);
    for (int i = 0; i < depth; i++)
        assert_int_equal(gq_buf_puts(&b, "{\"a\":"), 0);
    assert_int_equal(gq_buf_puts(&b, "1"), 0);
    for (int i = 0; i < depth; i++)
        assert_int_equal(gq_buf_puts(&b, "}"), 0);
    assert_int_equal(gq_buf_puts(&b, "},\"status\":{\"state\":\"Queued\"}}"), 0);
    return b.p;
}

/* An object named ns/NAME whose JSON text is about `bytes` long. */
static char *big_obj(const char *name, const char *rv, size_t bytes)
{
    struct gq_buf b;
    gq_buf_init(&b, bytes + 4096);
    assert_int_equal(gq_buf_printf(&b, "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"resourceVersion\":\"%s\"},"
                                       "\"spec\":{\"blob\":\"", name, rv), 0);
    for (size_t i = 0; i < bytes; i++)
        assert_int_equal(gq_buf_puts(&b, i % 7 ? "x" : "\\\""), 0); /* escaped quotes too */
    assert_int_equal(gq_buf_puts(&b, "\"}}"), 0);
    return b.p;
}

struct skiplog {
    struct kube_skipped s[16];
    int n;
};

static void skiplog_cb(const struct kube_skipped *s, void *ud)
{
    struct skiplog *l = ud;
    assert_true(l->n < 16);
    l->s[l->n++] = *s;
}

/* A List page holding a 1,200-deep object, an oversized one and undecodable
 * ones among good ones: the good ones are decoded, the others skipped and
 * named; the whole page is one cJSON cannot parse. */
static void test_list_page_hostile(void **st)
{
    char *deep = deep_obj("deep", "11", 1200), *big = big_obj("big", "12", 10000);
    struct gq_buf b;
    struct skiplog sl = {0};
    cJSON *items = NULL, *md = NULL, *whole;
    char err[200], key[64];
    (void)st;
    gq_buf_init(&b, 1u << 20);
    assert_int_equal(gq_buf_printf(&b,
                                   "{\"kind\":\"GPUJobList\",\"metadata\":{\"resourceVersion\":\"99\",\"continue\":\"c\"},"
                                   "\"items\":[ %s,\n%s , %s,%s,17,{\"metadata\":{\"namespace\":\"ns\"}},"
                                   "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"bad\"},\"spec\":{\"x\":tru}},%s ]}",
                                   POD("a", "1"), deep, POD("b", "2"), big, POD("c", "3")),
                     0);
    whole = cJSON_Parse(b.p);
    assert_null(whole); /* what used to stop the informer */
    assert_int_equal(kube_list_page_parse(b.p, b.len, &(struct kube_parse_opts){8192, 0}, &items, &md, skiplog_cb, &sl, err, sizeof err), 0);
    assert_int_equal(cJSON_GetArraySize(items), 3);
    assert_int_equal(kube_object_key(cJSON_GetArrayItem(items, 0), key, sizeof key), 0);
    assert_string_equal(key, "ns/a");
    assert_int_equal(kube_object_key(cJSON_GetArrayItem(items, 1), key, sizeof key), 0);
    assert_string_equal(key, "ns/b");
    assert_int_equal(kube_object_key(cJSON_GetArrayItem(items, 2), key, sizeof key), 0);
    assert_string_equal(key, "ns/c");
    assert_string_equal(cJSON_GetObjectItem(md, "resourceVersion")->valuestring, "99");
    assert_string_equal(cJSON_GetObjectItem(md, "continue")->valuestring, "c");
    assert_int_equal(sl.n, 5);
    assert_int_equal(sl.s[0].reason, KUBE_SKIP_TOO_DEEP);
    assert_string_equal(sl.s[0].namespace_, "ns");
    assert_string_equal(sl.s[0].name, "deep");
    assert_string_equal(sl.s[0].uid, "u-deep");
    assert_string_equal(sl.s[0].resource_version, "11");
    assert_string_equal(sl.s[0].kind, "GPUJob");
    assert_string_equal(sl.s[0].state, "Queued");
    assert_true(sl.s[0].depth >= 1200);
    assert_int_equal(sl.s[0].type, KUBE_EV_ADDED);
    assert_non_null(strstr(sl.s[0].detail, "levels deep"));
    assert_int_equal(sl.s[1].reason, KUBE_SKIP_TOO_LARGE);
    assert_string_equal(sl.s[1].name, "big");
    assert_true(sl.s[1].bytes > 10000);
    assert_int_equal(sl.s[2].reason, KUBE_SKIP_INVALID); /* 17 */
    assert_string_equal(sl.s[2].name, "");
    assert_int_equal(sl.s[3].reason, KUBE_SKIP_INVALID); /* no name */
    assert_int_equal(sl.s[4].reason, KUBE_SKIP_INVALID); /* bad JSON inside, name still found */
    assert_string_equal(sl.s[4].name, "bad");
    assert_string_equal(kube_skip_reason_name(KUBE_SKIP_TOO_DEEP), "too_deep");
    cJSON_Delete(items);
    cJSON_Delete(md);
    /* no size cap: the big one is taken; 999 levels are still decodable */
    free(deep);
    deep = deep_obj("deep", "11", CJSON_NESTING_LIMIT - 4);
    gq_buf_reset(&b);
    assert_int_equal(gq_buf_printf(&b, "{\"metadata\":{},\"items\":[%s,%s]}", deep, big), 0);
    sl.n = 0;
    assert_int_equal(kube_list_page_parse(b.p, b.len, NULL, &items, &md, skiplog_cb, &sl, err, sizeof err), 0);
    assert_int_equal(cJSON_GetArraySize(items), 2);
    assert_int_equal(sl.n, 0);
    cJSON_Delete(items);
    cJSON_Delete(md);
    /* null or absent items: an empty page */
    assert_int_equal(kube_list_page_parse("{\"metadata\":{},\"items\":null}", 29, NULL, &items, &md, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(cJSON_GetArraySize(items), 0);
    cJSON_Delete(items);
    cJSON_Delete(md);
    /* not a List: errors, nothing returned */
    {
        static const char *const bad[] = {"", "[]", "{\"items\":{}}", "{\"items\":[1,}", "{\"items\":[{\"a\":1}",
                                          "{\"metadata\":[],\"items\":[]}", "{\"items\":[]} x", "{\"items\":[\"a]}"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            assert_int_equal(kube_list_page_parse(bad[i], strlen(bad[i]), NULL, &items, &md, NULL, NULL, err, sizeof err),
                             GQ_EPARSE);
            assert_null(items);
            assert_null(md);
        }
    }
    /* a raw control character in a string, a NUL in a key among them, is no
     * JSON (found by fuzz_listpage: cJSON read the key up to its NUL as
     * "items" while the splitter saw another key) */
    {
        static const char nul_key[] = "{\"metadata\":{},\"items\0x\":[{\"metadata\":{\"name\":\"a\"}}]}";
        static const char ctl_val[] = "{\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"a\x01\"}}]}";
        assert_int_equal(kube_list_page_parse(nul_key, sizeof nul_key - 1, NULL, &items, &md, NULL, NULL, err, sizeof err),
                         GQ_EPARSE);
        assert_null(items);
        assert_null(md);
        assert_int_equal(kube_list_page_parse(ctl_val, sizeof ctl_val - 1, NULL, &items, &md, NULL, NULL, err, sizeof err),
                         GQ_EPARSE);
        assert_null(items);
        assert_null(md);
    }
    gq_buf_release(&b);
    free(deep);
    free(big);
}

/* A watch line whose object is hostile decodes to "skip this event": type,
 * name and resourceVersion known, no object; the plain decoder refuses it. */
static void test_watch_event_hostile(void **st)
{
    char *deep = deep_obj("deep", "41", 1200), *big = big_obj("big", "42", 5000);
    struct gq_buf b;
    struct kube_watch_event ev;
    struct kube_skipped sk;
    char err[200];
    (void)st;
    gq_buf_init(&b, 1u << 20);
    assert_int_equal(gq_buf_printf(&b, "{\"type\":\"MODIFIED\",\"object\":%s}", deep), 0);
    assert_int_equal(kube_watch_event_parse_ex(b.p, b.len, NULL, &ev, &sk, err, sizeof err), 0);
    assert_null(ev.object);
    assert_int_equal(ev.type, KUBE_EV_MODIFIED);
    assert_string_equal(ev.resource_version, "41");
    assert_int_equal(sk.reason, KUBE_SKIP_TOO_DEEP);
    assert_int_equal(sk.type, KUBE_EV_MODIFIED);
    assert_string_equal(sk.name, "deep");
    assert_int_equal(kube_watch_event_parse(b.p, b.len, &ev, err, sizeof err), GQ_EPARSE);
    assert_non_null(strstr(err, "ns/deep"));
    assert_null(ev.object);
    gq_buf_reset(&b);
    assert_int_equal(gq_buf_printf(&b, "{\"object\":%s,\"type\":\"DELETED\"}", big), 0);
    assert_int_equal(kube_watch_event_parse_ex(b.p, b.len, &(struct kube_parse_opts){4096, 0}, &ev, &sk, err, sizeof err), 0);
    assert_null(ev.object);
    assert_int_equal(ev.type, KUBE_EV_DELETED);
    assert_int_equal(sk.reason, KUBE_SKIP_TOO_LARGE);
    assert_string_equal(sk.name, "big");
    assert_string_equal(ev.resource_version, "42");
    /* the same line under no cap decodes */
    assert_int_equal(kube_watch_event_parse_ex(b.p, b.len, NULL, &ev, &sk, err, sizeof err), 0);
    assert_non_null(ev.object);
    assert_int_equal(sk.reason, 0);
    kube_watch_event_release(&ev);
    /* a BOOKMARK or ERROR with a broken object is still a broken line */
    {
        const char *l = "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"},\"x\":tru}}";
        assert_int_equal(kube_watch_event_parse_ex(l, strlen(l), NULL, &ev, &sk, err, sizeof err), GQ_EPARSE);
        l = "{\"type\":\"ADDED\",\"object\":[]}";
        assert_int_equal(kube_watch_event_parse_ex(l, strlen(l), NULL, &ev, &sk, err, sizeof err), GQ_EPARSE);
        l = "{\"type\":7,\"object\":{}}";
        assert_int_equal(kube_watch_event_parse_ex(l, strlen(l), NULL, &ev, &sk, err, sizeof err), GQ_EPARSE);
    }
    gq_buf_release(&b);
    free(deep);
    free(big);
}

/* drop_managed_fields: metadata.managedFields is never built, wherever it
 * sits among metadata's members, and the rest is what a whole parse gives
 * (less managedFields); a key spelled with escapes is the same key; without
 * the option (a Team's informer) the member is kept. */
static void test_parse_drop_managed(void **st)
{
    static const char *const objs[] = {
        "{\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"manager\":\"m\",\"fieldsV1\":{\"f:spec\":{}}}],"
        "\"uid\":\"u\"},\"spec\":{\"x\":1}}",
        "{\"metadata\":{\"managedFields\":[] , \"name\":\"a\"}}",
        "{\"kind\":\"K\",\"metadata\":{\"name\":\"a\" ,\n \"managedFields\":[{\"a\":\"}]\"}] }}",
        "{\"metadata\":{\"name\":\"a\",\"managedFi\\u0065lds\":[1]},\"status\":{}}",
        "{\"metadata\":{\"name\":\"a\"},\"managedFields\":[1]}", /* not metadata's: kept */
        "{\"metadata\":{\"name\":\"a\",\"managedFields\":null,\"managedFields\":[2]}}",
    };
    char err[200];
    (void)st;
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        struct gq_buf b;
        struct kube_watch_event ev, whole;
        struct kube_skipped sk;
        gq_buf_init(&b, 1u << 16);
        assert_int_equal(gq_buf_printf(&b, "{\"type\":\"ADDED\",\"object\":%s}", objs[i]), 0);
        assert_int_equal(kube_watch_event_parse_ex(b.p, b.len, &(struct kube_parse_opts){0, 1}, &ev, &sk, err,
                                                   sizeof err), 0);
        assert_non_null(ev.object);
        assert_int_equal(kube_watch_event_parse_ex(b.p, b.len, NULL, &whole, &sk, err, sizeof err), 0);
        cJSON *md = cJSON_GetObjectItemCaseSensitive(whole.object, "metadata");
        assert_non_null(md);
        int had = cJSON_GetObjectItemCaseSensitive(md, "managedFields") != NULL;
        assert_int_equal(had, i != 4);
        cJSON_DeleteItemFromObjectCaseSensitive(md, "managedFields");
        assert_true(cJSON_Compare(ev.object, whole.object, 1));
        if (i == 5) /* the first of two is cut, as cJSON reads the first */
            assert_non_null(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(ev.object, "metadata"), "managedFields"));
        kube_watch_event_release(&ev);
        kube_watch_event_release(&whole);
        /* the same object in a List page */
        cJSON *items = NULL, *lmd = NULL;
        gq_buf_reset(&b);
        assert_int_equal(gq_buf_printf(&b, "{\"metadata\":{},\"items\":[%s,%s]}", objs[i], objs[0]), 0);
        assert_int_equal(kube_list_page_parse(b.p, b.len, &(struct kube_parse_opts){0, 1}, &items, &lmd, NULL, NULL,
                                              err, sizeof err), 0);
        assert_int_equal(cJSON_GetArraySize(items), 2);
        assert_null(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(items, 1), "metadata"), "managedFields"));
        cJSON_Delete(items);
        cJSON_Delete(lmd);
        /* kept without the option */
        assert_int_equal(kube_list_page_parse(b.p, b.len, NULL, &items, &lmd, NULL, NULL, err, sizeof err), 0);
        assert_non_null(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(items, 1), "metadata"), "managedFields"));
        cJSON_Delete(items);
        cJSON_Delete(lmd);
        gq_buf_release(&b);
    }
}

static int server_saw_4(void *ud)
{
    char line[4096];
    return server_req(ud, 3, line, sizeof line) > 0;
}

struct hostile_ctx {
    struct inf_ctx x; /* first: inf_event/inf_synced take the same ud */
    struct skiplog sl;
};

static void hostile_skip(const struct kube_skipped *s, void *ud)
{
    struct hostile_ctx *h = ud;
    skiplog_cb(s, &h->sl);
}

/* The informer syncs past hostile list items and keeps its watch through
 * hostile events; objects are pruned before they are cached. */
static void test_informer_hostile(void **st)
{
    char *deep = deep_obj("deep", "11", 1200), *big = big_obj("big", "12", 10000);
    char *deep2 = deep_obj("a", "50", 1400), *bigdel = big_obj("b", "51", 12000);
    char *deep3 = deep_obj("d2", "30", 1300);
    char *page, *events, *page2;
    struct gq_buf b;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct hostile_ctx h;
    struct kube_informer_opts o = {0};
    struct kube_informer_stats s;
    char err[200], line[4096];
    const cJSON *a;
    (void)st;
    gq_buf_init(&b, 1u << 20);
    assert_int_equal(gq_buf_printf(&b, "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[%s,%s,%s,"
                                       "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"b\",\"resourceVersion\":\"3\","
                                       "\"managedFields\":[{\"manager\":\"kubectl\"}]}},%s]}",
                                   POD("a", "1"), deep, big, POD("c", "4")), 0);
    page = strdup(b.p);
    gq_buf_reset(&b);
    /* a deep ADDED (skipped), a good ADDED, a deep MODIFIED of a (skipped: a keeps
     * its last good state), an oversized DELETED of b (still deletes b) */
    assert_int_equal(gq_buf_printf(&b, "{\"type\":\"ADDED\",\"object\":%s}\n" "%s" "{\"type\":\"MODIFIED\",\"object\":%s}\n"
                                       "{\"type\":\"DELETED\",\"object\":%s}\n"
                                       "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n",
                                   deep3, WEV("ADDED", POD("d", "40")), deep2, bigdel),
                     0);
    events = strdup(b.p);
    /* the relist after the 410 still holds a in its unreadable version */
    gq_buf_reset(&b);
    assert_int_equal(gq_buf_printf(&b, "{\"metadata\":{\"resourceVersion\":\"60\"},\"items\":[%s,%s,%s]}",
                                   deep2, POD("c", "4"), POD("d", "40")), 0);
    page2 = strdup(b.p);
    assert_non_null(page);
    assert_non_null(events);
    {
        const struct step steps[] = {
            {200, NULL, {page}, 0, 0},
            {200, NULL, {events}, 0, 0},
            {200, NULL, {page2}, 0, 0},
            {200, NULL, {""}, 0, 3000},
        };
        memset(&h, 0, sizeof h);
        server_start(&srv, steps, 4);
    }
    c = client_for(loop, &srv, NULL);
    o.path = "/apis/gangq.io/v1alpha1/gpujobs";
    o.name = "gpujobs";
    o.max_object = 9500;
    o.stall_s = 0.5;
    o.backoff_base_s = 0.05;
    o.prune = kube_prune_common;
    o.on_event = inf_event;
    o.on_synced = inf_synced;
    o.on_skip = hostile_skip;
    o.ud = &h;
    h.x.inf = kube_informer_new(c, &o, err, sizeof err);
    assert_non_null(h.x.inf);
    kube_informer_start(h.x.inf);
    run_until(loop, NULL, server_saw_4, &srv, 6);
    kube_informer_get_stats(h.x.inf, &s);
    assert_true(kube_informer_synced(h.x.inf));
    assert_int_equal(h.x.synced, 2);
    assert_int_equal(s.lists, 2);        /* only the 410 relisted: no skip did */
    assert_int_equal(s.relists_410, 1);
    assert_int_equal(s.skipped[KUBE_SKIP_TOO_DEEP], 4);
    assert_int_equal(s.skipped[KUBE_SKIP_TOO_LARGE], 2);
    assert_int_equal(h.sl.n, 6);
    assert_string_equal(h.sl.s[0].name, "deep");
    assert_string_equal(h.sl.s[1].name, "big");
    assert_string_equal(h.sl.s[2].name, "d2");
    assert_int_equal(h.sl.s[2].type, KUBE_EV_ADDED);
    assert_string_equal(h.sl.s[3].name, "a");
    assert_int_equal(h.sl.s[3].type, KUBE_EV_MODIFIED);
    assert_string_equal(h.sl.s[4].name, "b");
    assert_int_equal(h.sl.s[4].type, KUBE_EV_DELETED);
    assert_string_equal(h.sl.s[5].name, "a"); /* the relist */
    server_req(&srv, 1, line, sizeof line);
    assert_non_null(strstr(line, "resourceVersion=20&"));
    server_req(&srv, 3, line, sizeof line);
    assert_non_null(strstr(line, "resourceVersion=60&"));
    assert_true(evlog_has(&h.x.log, "ADDED - ns/a rv=1"));
    assert_true(evlog_has(&h.x.log, "ADDED - ns/b rv=3"));
    assert_true(evlog_has(&h.x.log, "ADDED - ns/c rv=4"));
    assert_true(evlog_has(&h.x.log, "ADDED - ns/d rv=40"));
    assert_true(evlog_has(&h.x.log, "DELETED ns/b ns/b rv=51")); /* the stub */
    assert_int_equal(h.x.log.n, 5); /* no DELETED for a at the relist */
    a = kube_informer_get(h.x.inf, "ns", "a");
    assert_non_null(a);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "metadata"), "resourceVersion")->valuestring, "1");
    assert_null(kube_informer_get(h.x.inf, "ns", "b"));
    assert_null(kube_informer_get(h.x.inf, "ns", "deep"));
    assert_null(kube_informer_get(h.x.inf, "ns", "big"));
    assert_int_equal(kube_cache_count(kube_informer_cache(h.x.inf)), 3); /* a, c, d */
    /* skipped now: only what the last list skipped (deep, big and d2 are gone) */
    h.sl.n = 0;
    assert_int_equal(kube_informer_skipped_foreach(h.x.inf, skiplog_cb, &h.sl), 0);
    assert_int_equal(h.sl.n, 1);
    assert_string_equal(h.sl.s[0].name, "a");
    assert_int_equal(h.sl.s[0].reason, KUBE_SKIP_TOO_DEEP);
    kube_informer_free(h.x.inf);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
    gq_buf_release(&b);
    free(page);
    free(page2);
    free(events);
    free(deep);
    free(big);
    free(deep2);
    free(deep3);
    free(bigdel);
}

/* A list page over the client's body cap is asked for again with half the
 * limit, from the same continue token; the next relist starts at the full limit. */
static void test_informer_list_shrink(void **st)
{
    char *big = big_obj("big", "12", 3000);
    char *page1 = NULL;
    struct gq_buf b;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_config cfg;
    struct kube_client_opts co = {0};
    struct inf_ctx x;
    struct kube_informer_opts o = {0};
    struct kube_informer_stats s;
    char err[200], line[4096], url[64];
    (void)st;
    gq_buf_init(&b, 1u << 16);
    assert_int_equal(gq_buf_printf(&b, "{\"metadata\":{\"continue\":\"k1\"},\"items\":[%s,%s,%s]}", big, big, big), 0);
    page1 = strdup(b.p);
    {
        const struct step steps[] = {
            {200, NULL, {page1}, 0, 0}, /* limit=4: ~9 KB, over the 6 KB cap */
            {200, NULL, {page1}, 0, 0}, /* limit=2: still over */
            {200, NULL, {"{\"metadata\":{\"continue\":\"k2\"},\"items\":[" POD("a", "1") "]}"}, 0, 0}, /* limit=1 */
            {200, NULL, {"{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[" POD("b", "2") "]}"}, 0, 0},
            {200, NULL, {""}, 0, 3000},
        };
        server_start(&srv, steps, 5);
    }
    kube_config_init(&cfg);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv.port);
    cfg.server = url;
    co.log_level = GQ_LOG_ERROR + 1;
    co.max_body = 6000;
    c = kube_client_new(loop, &cfg, &co, err, sizeof err);
    assert_non_null(c);
    memset(&x, 0, sizeof x);
    o.path = "/api/v1/pods";
    o.list_limit = 4;
    o.backoff_base_s = 0.05;
    o.on_event = inf_event;
    o.on_synced = inf_synced;
    o.ud = &x;
    x.inf = kube_informer_new(c, &o, err, sizeof err);
    assert_non_null(x.inf);
    kube_informer_start(x.inf);
    run_until(loop, &x.synced, NULL, NULL, 6);
    kube_informer_get_stats(x.inf, &s);
    assert_int_equal(x.synced, 1);
    assert_int_equal(s.list_shrinks, 2);
    server_req(&srv, 0, line, sizeof line);
    assert_non_null(strstr(line, "?limit=4|"));
    server_req(&srv, 1, line, sizeof line);
    assert_non_null(strstr(line, "?limit=2|"));
    server_req(&srv, 2, line, sizeof line);
    assert_non_null(strstr(line, "?limit=1|"));
    server_req(&srv, 3, line, sizeof line);
    assert_non_null(strstr(line, "?limit=1&continue=k2|"));
    assert_non_null(kube_informer_get(x.inf, "ns", "a"));
    assert_non_null(kube_informer_get(x.inf, "ns", "b"));
    kube_informer_free(x.inf);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
    gq_buf_release(&b);
    free(page1);
    free(big);
}

/* Each object's list links: next ends at NULL, the first child's prev is the
 * last child (cJSON appends through it); recursively. */
static void assert_links(const cJSON *o)
{
    const cJSON *last = NULL;
    for (const cJSON *c = o->child; c; c = c->next) {
        if (last)
            assert_ptr_equal(c->prev, last);
        last = c;
        assert_links(c);
    }
    if (o->child)
        assert_ptr_equal(o->child->prev, last);
}

/* kube_pack: a pruned object in one block reads, prints and duplicates as the
 * tree it was, frees with cJSON_Delete (ASan checks the one free), can be
 * linked into and out of an array, and an object it cannot pack (a member
 * name not interned, not an object) comes back as it was. */
/* The parse arena: a watch event parsed in it, pruned, packed and settled
 * lives on the heap and outlives the arena's reuse; a tree that cannot be
 * packed is copied out whole; a heap object is left as it is. */
static void test_parse_arena(void **st)
{
    static const char line[] =
        "{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
        "\"j-1-0\",\"namespace\":\"ns\",\"uid\":\"u1\",\"resourceVersion\":\"7\",\"labels\":{\"gangq.io/job\":\"j\"},"
        "\"managedFields\":[{\"manager\":\"m\"}]},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\","
        "\"image\":\"i\"}]},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\"}]}}}";
    static const char team[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"t\",\"resourceVersion\":\"3\"},"
                               "\"spec\":{\"quota\":[{\"gpus\":8}]}}}";
    const struct kube_parse_opts po = {0, 1};
    struct kube_watch_event ev;
    struct kube_skipped sk;
    char err[200];
    (void)st;
    /* heap parse, for comparing */
    assert_int_equal(kube_watch_event_parse_ex(line, strlen(line), &po, &ev, &sk, err, sizeof err), 0);
    cJSON *want = ev.object;
    kube_prune_pod(want);
    assert_false(kube_arena_owns(want));

    assert_int_equal(kube_arena_begin(), 1);
    assert_int_equal(kube_arena_begin(), 0); /* nested: the outer one owns it */
    assert_int_equal(kube_watch_event_parse_ex(line, strlen(line), &po, &ev, &sk, err, sizeof err), 0);
    kube_arena_end();
    assert_true(kube_arena_owns(ev.object));
    assert_true(kube_arena_owns(cJSON_GetObjectItemCaseSensitive(ev.object, "metadata")));
    cJSON *kept = kube_keep_object(ev.object, kube_prune_pod); /* frees of arena nodes are no-ops */
    assert_non_null(kept);
    assert_true(kube_packed(kept));
    assert_false(kube_arena_owns(kept));
    assert_true(cJSON_Compare(kept, want, 1));

    /* the next use overwrites the arena: what was settled is untouched */
    assert_int_equal(kube_arena_begin(), 1);
    assert_int_equal(kube_watch_event_parse_ex(team, strlen(team), &po, &ev, &sk, err, sizeof err), 0);
    kube_arena_end();
    assert_true(kube_arena_owns(ev.object));
    assert_true(cJSON_Compare(kept, want, 1));
    assert_string_equal(ctl_obj_str(kept, "spec", "nodeName"), "n1");
    /* names not interned: kube_pack leaves the tree, settle copies it out */
    cJSON *t = kube_pack(ev.object);
    assert_false(kube_packed(t));
    char *tw = cJSON_PrintUnformatted(t);
    assert_non_null(tw);
    cJSON *tk = kube_arena_settle(t);
    assert_non_null(tk);
    assert_false(kube_arena_owns(tk));
    assert_false(kube_arena_owns(cJSON_GetObjectItemCaseSensitive(tk, "spec")));
    char *tg = cJSON_PrintUnformatted(tk);
    assert_string_equal(tg, tw);
    /* a heap tree is left as it is */
    assert_ptr_equal(kube_arena_settle(tk), tk);
    assert_ptr_equal(kube_arena_settle(want), want);
    assert_ptr_equal(kube_arena_settle(kept), kept);
    free(tg);
    free(tw);
    cJSON_Delete(tk);
    cJSON_Delete(kept);
    cJSON_Delete(want);
}

static void test_pack(void **st)
{
    static const char pod[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"j-1-0\",\"namespace\":\"ns\",\"uid\":\"u1\","
        "\"labels\":{\"gangq.io/job\":\"j\",\"gangq.io/replica\":\"0\"},\"ownerReferences\":[{\"uid\":\"uj\"}]},"
        "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"2\"},"
        "\"limits\":{\"nvidia.com/gpu\":2}}},{\"name\":\"d\",\"resources\":{}}]},"
        "\"status\":{\"phase\":\"Running\",\"ready\":true,\"n\":null,\"x\":[1,2.5,\"s\",[],{}]}}";
    (void)st;
    cJSON *p = cJSON_Parse(pod);
    assert_non_null(p);
    kube_intern_names(p); /* as every pruner does */
    char *want = cJSON_PrintUnformatted(p);
    cJSON *k = kube_pack(p); /* p is freed */
    assert_true(kube_packed(k));
    char *got = cJSON_PrintUnformatted(k);
    assert_string_equal(got, want);
    assert_links(k);
    assert_string_equal(ctl_obj_label(k, CTL_LABEL_JOB), "j");
    assert_string_equal(ctl_obj_str(k, "spec", "nodeName"), "n1");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(k, "spec"), "containers")), 2);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(k, "status"), "ready")));
    assert_int_equal(kube_pack(k) == k, 1); /* packed already: as it is */
    /* a copy is an ordinary tree that outlives the block */
    cJSON *d = cJSON_Duplicate(k, 1);
    assert_false(kube_packed(d));
    cJSON *arr = cJSON_CreateArray(), *other = cJSON_CreateObject();
    assert_non_null(arr);
    cJSON_AddItemToArray(arr, other);
    cJSON_AddItemToArray(arr, k); /* the root's own links may change */
    assert_ptr_equal(cJSON_DetachItemFromArray(arr, 1), k);
    cJSON_AddItemToArray(arr, k);
    cJSON_Delete(arr); /* frees other, and the block as one */
    char *dup = cJSON_PrintUnformatted(d);
    assert_string_equal(dup, want);
    free(dup);
    cJSON_Delete(d);
    free(got);
    free(want);
    /* a member name that is not interned: not packed */
    cJSON *u = cJSON_Parse("{\"a\":{\"b\":\"c\"}}");
    assert_ptr_equal(kube_pack(u), u);
    assert_false(kube_packed(u));
    cJSON_Delete(u);
    cJSON *s = cJSON_CreateString("x");
    assert_ptr_equal(kube_pack(s), s);
    cJSON_Delete(s);
    assert_null(kube_pack(NULL));
}

/* The pod pruner keeps every field the controller reads (same usage, phase,
 * labels, annotations, owner, node, deletion) and drops the rest. */
static void test_prune_pod(void **st)
{
    static const char pod[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"j-1-0\",\"namespace\":\"ns\",\"uid\":\"u1\","
        "\"resourceVersion\":\"7\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\",\"creationTimestamp\":\"2025-12-31T00:00:00Z\","
        "\"labels\":{\"app\":\"x\",\"gangq.io/job\":\"j\",\"gangq.io/replica\":\"0\",\"gangq.io/attempt\":\"1\"},"
        "\"annotations\":{\"gangq.io/gpu-milli\":\"250\",\"gangq.io/gpu-devices\":\"1,3\","
        "\"kubectl.kubernetes.io/last-applied-configuration\":\"{...}\"},"
        "\"ownerReferences\":[{\"kind\":\"GPUJob\",\"name\":\"j\",\"uid\":\"uj\"}],"
        "\"managedFields\":[{\"manager\":\"kubelet\",\"fieldsV1\":{\"f:status\":{}}}]},"
        "\"spec\":{\"nodeName\":\"n1\",\"volumes\":[{\"name\":\"v\"}],\"tolerations\":[],"
        "\"containers\":[{\"name\":\"c\",\"image\":\"img\",\"env\":[{\"name\":\"A\",\"value\":\"b\"}],"
        "\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"1Gi\"},\"limits\":{\"nvidia.com/gpu\":\"2\"}}}],"
        "\"initContainers\":[{\"name\":\"i\",\"command\":[\"x\"],\"resources\":{\"requests\":{\"cpu\":\"4\"}}}]},"
        "\"status\":{\"phase\":\"Running\",\"reason\":\"X\",\"containerStatuses\":[{\"name\":\"c\"}],"
        "\"conditions\":[{\"type\":\"Ready\"}]}}";
    cJSON *a = cJSON_Parse(pod), *p = cJSON_Parse(pod), *n;
    struct ctl_podusage ua, up;
    char *before, *after;
    (void)st;
    kube_prune_pod(p);
    ctl_pod_usage(a, &ua);
    ctl_pod_usage(p, &up);
    assert_int_equal(ua.cpu_milli, 4000);
    assert_memory_equal(&ua, &up, sizeof ua);
    assert_int_equal(ctl_pod_terminal(p), 0);
    assert_string_equal(ctl_obj_str(p, "status", "reason"), "X");
    assert_string_equal(ctl_obj_label(p, CTL_LABEL_JOB), "j");
    assert_string_equal(ctl_obj_label(p, CTL_LABEL_REPLICA), "0");
    assert_string_equal(ctl_obj_label(p, CTL_LABEL_ATTEMPT), "1");
    assert_string_equal(ctl_obj_annotation(p, CTL_ANN_GPU_DEVICES), "1,3");
    assert_string_equal(ctl_obj_str(p, "spec", "nodeName"), "n1");
    assert_string_equal(ctl_obj_str(p, "metadata", "deletionTimestamp"), "2026-01-01T00:00:00Z");
    assert_string_equal(ctl_obj_str(p, "metadata", "uid"), "u1");
    assert_string_equal(ctl_obj_str(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"),
                                                                            "ownerReferences"), 0), "uid", NULL), "uj");
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"),
                                                                            "ownerReferences"), 0), "kind"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "creationTimestamp"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "managedFields"));
    assert_null(ctl_obj_annotation(p, "kubectl.kubernetes.io/last-applied-configuration"));
    assert_null(ctl_obj_label(p, "app"));
    assert_string_equal(ctl_obj_label(a, "app"), "x");
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "volumes"));
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"),
                                                                            "containers"), 0), "env"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "status"), "containerStatuses"));
    before = cJSON_PrintUnformatted(a);
    after = cJSON_PrintUnformatted(p);
    assert_true(strlen(after) < strlen(before) * 3 / 4);
    free(before);
    free(after);
    /* terminated (Failed, Succeeded): the containers go too (it holds
     * nothing); what identifies it, its node and its devices stay */
    for (int k = 0; k < 2; k++) {
        cJSON *f = cJSON_Parse(pod);
        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItem(f, "status"), "phase",
                                               cJSON_CreateString(k ? "Succeeded" : "Failed"));
        kube_prune_pod(f);
        assert_int_equal(ctl_pod_terminal(f), 1);
        assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(f, "spec"), "containers"));
        assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(f, "spec"), "initContainers"));
        assert_string_equal(ctl_obj_str(f, "spec", "nodeName"), "n1");
        assert_string_equal(ctl_obj_label(f, CTL_LABEL_ATTEMPT), "1");
        struct ctl_podusage uf;
        ctl_pod_usage(f, &uf);
        assert_int_equal(uf.cpu_milli, 0);
        assert_int_equal(uf.gpus, 0);
        assert_int_equal(uf.devs, up.devs);
        cJSON_Delete(f);
    }
    /* node: images go, everything else stays; common: managedFields go */
    n = cJSON_Parse("{\"metadata\":{\"name\":\"n1\",\"managedFields\":[]},\"spec\":{\"taints\":[]},"
                    "\"status\":{\"images\":[{\"names\":[\"x\"]}],\"allocatable\":{\"cpu\":\"8\"}}}");
    kube_prune_node(n);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(n, "status"), "images"));
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(n, "status"), "allocatable"));
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(n, "spec"), "taints"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "managedFields"));
    kube_prune_pod(NULL); /* harmless */
    kube_prune_node(NULL);
    /* member names are interned: two pruned objects share one "metadata",
     * and copies, replacements and deletes of interned members are safe */
    cJSON *q = cJSON_Parse(pod);
    kube_prune_pod(q);
    assert_ptr_equal(cJSON_GetObjectItem(p, "metadata")->string, cJSON_GetObjectItem(q, "metadata")->string);
    assert_ptr_equal(cJSON_GetObjectItem(n, "metadata")->string, cJSON_GetObjectItem(q, "metadata")->string);
    assert_true(cJSON_GetObjectItem(q, "metadata")->type & cJSON_StringIsConst);
    cJSON *dup = cJSON_Duplicate(q, 1);
    assert_true(cJSON_Compare(dup, q, 1));
    cJSON_ReplaceItemInObjectCaseSensitive(dup, "status", cJSON_CreateString("x"));
    cJSON_DeleteItemFromObjectCaseSensitive(dup, "spec");
    cJSON_AddItemToObject(dup, "spec", cJSON_DetachItemFromObjectCaseSensitive(q, "spec"));
    assert_string_equal(ctl_obj_str(dup, "spec", "nodeName"), "n1");
    cJSON_Delete(dup);
    cJSON_Delete(q);
    assert_ptr_equal(kube_intern("metadata"), cJSON_GetObjectItem(p, "metadata")->string);
    char longname[80];
    memset(longname, 'k', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = 0;
    assert_null(kube_intern(longname)); /* too long: the object keeps its own copy */
    cJSON_Delete(n);
    cJSON_Delete(a);
    cJSON_Delete(p);
}

/* The intern table stops at KUBE_INTERN_MAX names (a tenant's random keys
 * cost at most that much); names interned before still resolve, others are
 * left to their objects. */
static void test_intern_cap(void **st)
{
    (void)st;
    char k[32];
    const char *first = kube_intern("intern-cap-first");
    assert_non_null(first);
    int got = 0;
    for (int i = 0; i < KUBE_INTERN_MAX + 100; i++) {
        snprintf(k, sizeof(k), "intern-cap-%d", i);
        if (kube_intern(k))
            got++;
    }
    assert_true(got < KUBE_INTERN_MAX);
    assert_true(got > KUBE_INTERN_MAX / 2);
    assert_ptr_equal(kube_intern("intern-cap-first"), first);
    assert_null(kube_intern("intern-cap-never-seen"));
    cJSON *o = cJSON_Parse("{\"intern-cap-never-seen\":{\"intern-cap-first\":1}}");
    kube_intern_names(o);
    assert_false(o->child->type & cJSON_StringIsConst);
    assert_ptr_equal(o->child->child->string, first);
    cJSON_Delete(o);
}

/* ------------------------------------------------------ request priorities */

static struct step lane_steps[320];

static void lane_steps_init(int hold_ms)
{
    for (size_t i = 0; i < sizeof lane_steps / sizeof lane_steps[0]; i++) {
        memset(&lane_steps[i], 0, sizeof lane_steps[i]);
        lane_steps[i].status = 200;
        lane_steps[i].chunks[0] = "{}";
        lane_steps[i].hold_ms = hold_ms;
    }
}

static struct kube_client *lane_client(struct ev_loop *loop, const struct server *srv,
                                       size_t max_inflight, size_t max_inflight_low,
                                       size_t max_queued_low)
{
    struct kube_config cfg;
    struct kube_client_opts o = {0};
    struct kube_client *c;
    char url[64], err[200];
    kube_config_init(&cfg);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv->port);
    cfg.server = url;
    o.log_level = GQ_LOG_ERROR + 1;
    o.request_timeout_ms = 20000;
    o.max_inflight = max_inflight;
    o.max_inflight_low = max_inflight_low;
    o.max_queued_low = max_queued_low;
    c = kube_client_new(loop, &cfg, &o, err, sizeof err);
    assert_non_null(c);
    return c;
}

/* Every logged request line (in accept order) that contains `what`: how
 * many, and the accept index and time of the first and last. */
struct seen {
    int n;
    int first, last;
    double t_first, t_last;
    char last_line[512];
};

static void server_scan(const struct server *srv, const char *what, struct seen *s)
{
    FILE *f = fopen(srv->log, "r");
    char line[4096];
    int maxk = -1;
    memset(s, 0, sizeof *s);
    s->first = s->last = -1;
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        int k, off = 0;
        double t;
        if (sscanf(line, "%d %lf %n", &k, &t, &off) < 2 || !strstr(line + off, what))
            continue;
        s->n++;
        if (s->first < 0 || k < s->first) {
            s->first = k;
            s->t_first = t;
        }
        if (k > maxk) {
            maxk = k;
            s->last = k;
            s->t_last = t;
            gq_strlcpy(s->last_line, line + off, sizeof s->last_line);
        }
    }
    fclose(f);
}

struct lane_res {
    int done, rc, not_sent;
    int order; /* completion order (1-based) */
};
static int lane_done_seq;

static void lane_cb(const struct kube_response *r, void *ud)
{
    struct lane_res *res = ud;
    res->done = 1;
    res->rc = r->rc;
    res->not_sent = r->not_sent;
    res->order = ++lane_done_seq;
}

struct lane_wait {
    struct lane_res *v;
    int n;
};
static int lane_all_done(void *ud)
{
    struct lane_wait *w = ud;
    for (int i = 0; i < w->n; i++)
        if (!w->v[i].done)
            return 0;
    return 1;
}

static cJSON *status_patch(int n)
{
    cJSON *p = cJSON_CreateObject(), *s = cJSON_AddObjectToObject(p, "status");
    assert_non_null(s);
    assert_non_null(cJSON_AddNumberToObject(s, "n", n));
    return p;
}

/* A low status patch {"status":{"n":n}} of path: kube_patch_status_would_refuse,
 * asked first, must say `refused`; the patch is then refused (GQ_EBUSY, no
 * callback) or taken (its callback into res). */
static void low_patch(struct kube_client *c, const char *path, int n, int refused, struct lane_res *res)
{
    cJSON *p = status_patch(n);
    assert_int_equal(kube_patch_status_would_refuse(c, KUBE_PRIO_LOW, path), refused);
    assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_LOW, path, p, lane_cb, res), refused ? GQ_EBUSY : 0);
    cJSON_Delete(p);
}

/* 200 cosmetic status patches wait in the low lane; a pod create submitted
 * after them is sent at once, and finishes long before they do. */
static void test_lanes_critical_first(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_client_stats ks;
    static struct lane_res low[200];
    struct lane_res crit = {0};
    struct lane_wait w = {low, 200};
    struct seen sp, sl;
    cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p1\"}}");
    char path[128];
    (void)st;
    memset(low, 0, sizeof low);
    lane_done_seq = 0;
    lane_steps_init(20);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 8, 2, 0);
    for (int i = 0; i < 200; i++) {
        cJSON *p = status_patch(i);
        snprintf(path, sizeof path, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/j%d", i);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_LOW, path, p, lane_cb, &low[i]), 0);
        cJSON_Delete(p);
    }
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.inflight[KUBE_PRIO_LOW], 2); /* the low lane's own budget */
    assert_int_equal(ks.queued[KUBE_PRIO_LOW], 198);
    assert_int_equal(kube_create_p(c, KUBE_PRIO_CRITICAL, "/api/v1/namespaces/ns/pods", pod, lane_cb,
                                   &crit),
                     0);
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.inflight[KUBE_PRIO_CRITICAL], 1); /* no wait behind the 198 */
    run_until(loop, NULL, lane_all_done, &w, 30);
    assert_true(crit.done);
    assert_int_equal(crit.rc, 0);
    for (int i = 0; i < 200; i++) {
        assert_true(low[i].done);
        assert_int_equal(low[i].rc, 0);
    }
    /* the create completed among the first, not after the 200 */
    assert_true(crit.order <= 20);
    server_scan(&srv, "POST /api/v1/namespaces/ns/pods|", &sp);
    server_scan(&srv, "PATCH /apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/", &sl);
    assert_int_equal(sp.n, 1);
    assert_int_equal(sl.n, 200);
    assert_true(sp.first <= 3);      /* arrived among the first connections */
    assert_true(sl.last > sp.first + 150);
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.started[KUBE_PRIO_LOW], 200);
    assert_int_equal(ks.started[KUBE_PRIO_CRITICAL], 1);
    assert_int_equal(ks.dropped[KUBE_PRIO_LOW], 0);
    assert_int_equal(kube_client_pending(c), 0);
    cJSON_Delete(pod);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* Ranks within a lane: one request at a time; while the first is on the
 * wire, creates of ranks 50, 200, 50 and 100 wait. They are sent highest rank
 * first, first come first served among equals, and never ahead of the one in
 * flight. A status patch that replaces its key's waiting one with a higher
 * rank moves up to its rank's place (never back); the rank in force is the
 * one set last. */
static void test_lanes_ranked(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    static struct lane_res r[16], sp[4];
    struct lane_wait w = {r, 16}, ws = {sp, 4};
    /* sent in this order: rank, and the expected completion position */
    static const int rank[16] = {50, 50, 50, 50, 200, 200, 50, 100, 50, 50, 50, 50, 50, 50, 50, 50};
    static const int want[16] = {1, 5, 6, 7, 2, 3, 8, 4, 9, 10, 11, 12, 13, 14, 15, 16};
    cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\"}}");
    (void)st;
    memset(r, 0, sizeof r);
    memset(sp, 0, sizeof sp);
    lane_done_seq = 0;
    lane_steps_init(30);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 1, 1, 0);
    assert_int_equal(kube_client_set_rank(c, 7), 0);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(kube_client_set_rank(c, rank[i]), i ? rank[i - 1] : 7);
        assert_int_equal(kube_create_p(c, KUBE_PRIO_CRITICAL, "/api/v1/namespaces/ns/pods", pod, lane_cb, &r[i]),
                         0);
    }
    assert_int_equal(kube_client_set_rank(c, 0), 50);
    run_until(loop, NULL, lane_all_done, &w, 30);
    for (int i = 0; i < 16; i++) {
        assert_true(r[i].done);
        assert_int_equal(r[i].rc, 0);
        assert_int_equal(r[i].order, want[i]);
    }

    /* coalescing: x waits at rank 0 behind a and b (rank 0) after the one in
     * flight; x's newer patch at rank 1 goes ahead of a and b, x's at rank 0
     * after that keeps rank 1 and the place */
    lane_done_seq = 0;
    const char *gj = "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/";
    char path[128];
    const char *names[4] = {"f", "a", "b", "x"};
    static struct lane_res x1;
    for (int i = 0; i < 4; i++) {
        cJSON *p = status_patch(i);
        snprintf(path, sizeof path, "%s%s", gj, names[i]);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_NORMAL, path, p, lane_cb, i == 3 ? &x1 : &sp[i]), 0);
        cJSON_Delete(p);
    }
    snprintf(path, sizeof path, "%sx", gj);
    cJSON *p = status_patch(9);
    assert_int_equal(kube_client_set_rank(c, 1), 0);
    assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_NORMAL, path, p, lane_cb, &sp[3]), 0);
    assert_int_equal(kube_client_set_rank(c, 0), 1);
    static struct lane_res x3;
    assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_NORMAL, path, p, lane_cb, &x3), 0);
    cJSON_Delete(p);
    run_until(loop, NULL, lane_all_done, &ws, 30);
    run_until(loop, NULL, lane_all_done, &(struct lane_wait){&x3, 1}, 30);
    assert_true(x1.done && x1.not_sent == KUBE_NOT_SENT_SUPERSEDED);
    assert_true(sp[3].done && sp[3].not_sent == KUBE_NOT_SENT_SUPERSEDED);
    assert_int_equal(sp[0].order, 3);  /* f: in flight first (the two supersedings end before) */
    assert_int_equal(x3.order, 4);     /* x: rank 1 kept, ahead of a and b */
    assert_int_equal(sp[1].order, 5);
    assert_int_equal(sp[2].order, 6);
    assert_int_equal(kube_client_pending(c), 0);
    cJSON_Delete(pod);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* 50 status patches of one object: one goes out, the rest replace each other
 * while it is on the wire; the second (last) request carries the latest. The
 * same in the lane: a waiting patch is replaced in its place. */
static void test_lanes_coalesce(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_client_stats ks;
    struct lane_res r[50], y[10], x = {0};
    struct lane_wait w = {r, 50}, wy = {y, 10};
    struct seen s;
    const char *obj = "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/j";
    (void)st;
    memset(r, 0, sizeof r);
    memset(y, 0, sizeof y);
    lane_done_seq = 0;
    lane_steps_init(100);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 8, 1, 0);
    for (int i = 0; i < 50; i++) {
        cJSON *p = status_patch(i);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_LOW, obj, p, lane_cb, &r[i]), 0);
        cJSON_Delete(p);
    }
    for (int i = 0; i < 50; i++)
        assert_false(r[i].done); /* never called back from inside the submission */
    run_until(loop, NULL, lane_all_done, &w, 10);
    for (int i = 0; i < 50; i++) {
        assert_true(r[i].done);
        if (i == 0 || i == 49) {
            assert_int_equal(r[i].rc, 0);
            assert_int_equal(r[i].not_sent, 0);
        } else {
            assert_int_equal(r[i].rc, GQ_ELIMIT);
            assert_int_equal(r[i].not_sent, KUBE_NOT_SENT_SUPERSEDED);
        }
    }
    assert_true(r[49].order > r[0].order); /* in order: one write per object on the wire */
    server_scan(&srv, "PATCH /apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/j/status|", &s);
    assert_int_equal(s.n, 2);
    assert_non_null(strstr(s.last_line, "{\"status\":{\"n\":49}}"));
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.coalesced, 48);

    /* in the lane: x holds the one low slot; y's patches wait and replace
     * each other in place */
    {
        cJSON *p = status_patch(-1);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_LOW, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/x",
                                             p, lane_cb, &x),
                         0);
        cJSON_Delete(p);
    }
    for (int i = 0; i < 10; i++) {
        cJSON *p = status_patch(100 + i);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_LOW, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/y",
                                             p, lane_cb, &y[i]),
                         0);
        cJSON_Delete(p);
    }
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.queued[KUBE_PRIO_LOW], 1);
    run_until(loop, NULL, lane_all_done, &wy, 10);
    assert_true(y[9].done);
    assert_int_equal(y[9].rc, 0);
    for (int i = 0; i < 9; i++)
        assert_int_equal(y[i].not_sent, KUBE_NOT_SENT_SUPERSEDED);
    server_scan(&srv, "gpujobs/y/status|", &s);
    assert_int_equal(s.n, 1);
    assert_non_null(strstr(s.last_line, "{\"status\":{\"n\":109}}"));
    run_until(loop, &x.done, NULL, NULL, 5);
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.coalesced, 48 + 9);
    assert_int_equal(kube_client_pending(c), 0);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* A full low lane makes room with its least important request: the oldest
 * of the lowest rank waiting, never a higher-ranked one (nor, when the new
 * request ranks below all, anything but the new one itself). */
static void test_lanes_low_drop_rank(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_client_stats ks;
    static struct lane_res e[9];
    struct lane_wait we = {e, 9};
    struct kube_objref ref = {"gangq.io/v1alpha1", "GPUJob", "ns", "j", "uid-1", "1"};
    /* the rank of each Event in submission order: e[0] takes the one slot */
    static const int rank[9] = {0, 7, 7, 0, 0, 0, 0, 9, -1};
    (void)st;
    memset(e, 0, sizeof e);
    lane_steps_init(100);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 8, 1, 5); /* 1 low in flight, 5 low waiting */
    for (int i = 0; i < 9; i++) {
        (void)kube_client_set_rank(c, rank[i]);
        assert_int_equal(kube_event_create_p(c, KUBE_PRIO_LOW, &ref, "Normal", "Waiting", "m", "ctl-0", lane_cb, &e[i]),
                         0);
        kube_client_get_stats(c, &ks);
        assert_true(ks.queued[KUBE_PRIO_LOW] <= 5);
    }
    (void)kube_client_set_rank(c, 0);
    /* waiting after e[5]: 7 7 0 0 0 (e1 e2 e3 e4 e5). e[6] (rank 0) drops e3,
     * the oldest rank 0; e[7] (rank 9) drops e4; e[8] (rank -1, below all)
     * drops itself. Left: e7 e1 e2 e5 e6 */
    run_until(loop, NULL, lane_all_done, &we, 20);
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.dropped[KUBE_PRIO_LOW], 3);
    for (int i = 0; i < 9; i++) {
        int dropped = i == 3 || i == 4 || i == 8;
        assert_int_equal(e[i].not_sent, dropped ? KUBE_NOT_SENT_DROPPED : 0);
        assert_int_equal(e[i].rc, dropped ? GQ_ELIMIT : 0);
    }
    /* sent in rank order after the first: e7 (9), e1, e2 (7), e5, e6 (0) */
    assert_true(e[0].order < e[7].order && e[7].order < e[1].order && e[1].order < e[2].order);
    assert_true(e[2].order < e[5].order && e[5].order < e[6].order);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* The low lane holds at most max_queued_low waiting requests: beyond, the
 * oldest is dropped (its callback says so, from the loop) and counted;
 * kube_client_drop_queued empties the lane (shutdown). */
static void test_lanes_low_bounded(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_client_stats ks;
    struct lane_res r[12], e[4];
    struct lane_wait we = {e, 4};
    struct kube_objref ref = {"gangq.io/v1alpha1", "GPUJob", "ns", "j", "uid-1", "1"};
    struct seen s;
    char path[128];
    (void)st;
    memset(r, 0, sizeof r);
    memset(e, 0, sizeof e);
    lane_steps_init(50);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 8, 1, 5);
    /* keyed (status) writes: one in flight, five wait, the rest are refused
     * at once (the caller writes them later) and the waiting ones keep their
     * place (a namespace each: a namespace's share of 5 is 1, test_lanes_low_ns_share) */
    for (int i = 0; i < 12; i++) {
        snprintf(path, sizeof path, "/apis/gangq.io/v1alpha1/namespaces/n%d/gpujobs/b%d", i, i);
        low_patch(c, path, i, i > 5, &r[i]); /* asked first, the client says what the write will meet */
    }
    /* full: only a low write that replaces a waiting one of its key is taken;
     * other lanes never refuse */
    assert_false(kube_patch_status_would_refuse(c, KUBE_PRIO_LOW, "/apis/gangq.io/v1alpha1/namespaces/n3/gpujobs/b3"));
    assert_true(kube_patch_status_would_refuse(c, KUBE_PRIO_LOW, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/zz"));
    assert_false(kube_patch_status_would_refuse(c, KUBE_PRIO_NORMAL, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/zz"));
    assert_false(kube_client_would_refuse(c, KUBE_PRIO_LOW, NULL)); /* unkeyed: the oldest makes room */
    /* (asking is not counted as refused: 6 below) */
    /* a newer write of a waiting one's object is still taken: it replaces it */
    {
        cJSON *p = status_patch(33);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_LOW, "/apis/gangq.io/v1alpha1/namespaces/n3/gpujobs/b3",
                                             p, lane_cb, &r[6]),
                         0);
        cJSON_Delete(p);
    }
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.inflight[KUBE_PRIO_LOW], 1);
    assert_int_equal(ks.queued[KUBE_PRIO_LOW], 5);
    assert_int_equal(ks.dropped[KUBE_PRIO_LOW], 0);
    assert_int_equal(ks.refused, 6);
    /* waiting requests hold no curl handle: at most the one in flight does */
    assert_true(ks.handles <= 1);
    for (int i = 0; i < 12; i++)
        assert_false(r[i].done);
    struct lane_wait w7 = {r, 7};
    run_until(loop, NULL, lane_all_done, &w7, 10);
    for (int i = 0; i < 7; i++) {
        assert_true(r[i].done);
        if (i == 3) { /* replaced by the newer write of b3 */
            assert_int_equal(r[i].rc, GQ_ELIMIT);
            assert_int_equal(r[i].not_sent, KUBE_NOT_SENT_SUPERSEDED);
        } else {
            assert_int_equal(r[i].rc, 0);
        }
    }
    for (int i = 7; i < 12; i++)
        assert_false(r[i].done); /* refused: no callback */
    server_scan(&srv, "/gpujobs/b", &s);
    assert_int_equal(s.n, 6);
    server_scan(&srv, "gpujobs/b3/status|", &s);
    assert_int_equal(s.n, 1);
    assert_non_null(strstr(s.last_line, "{\"status\":{\"n\":33}}"));
    server_scan(&srv, "gpujobs/b7/status|", &s);
    assert_int_equal(s.n, 0);

    /* Events in the low lane, then dropped at shutdown (the one in flight stays) */
    for (int i = 0; i < 4; i++)
        assert_int_equal(kube_event_create_p(c, KUBE_PRIO_LOW, &ref, "Normal", "Waiting", "m", "ctl-0",
                                             lane_cb, &e[i]),
                         0);
    assert_int_equal(kube_client_drop_queued(c, KUBE_PRIO_LOW), 3);
    assert_int_equal(kube_client_drop_queued(c, KUBE_PRIO_EXEMPT), 0);
    run_until(loop, NULL, lane_all_done, &we, 10);
    assert_int_equal(e[0].rc, 0);
    for (int i = 1; i < 4; i++)
        assert_int_equal(e[i].not_sent, KUBE_NOT_SENT_DROPPED);
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.dropped[KUBE_PRIO_LOW], 3);
    assert_int_equal(ks.started[KUBE_PRIO_LOW], 7);
    assert_int_equal(kube_client_pending(c), 0);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* One namespace holds at most a quarter of the low lane's waiting keyed
 * writes: a flood of cosmetic statuses from one namespace is refused beyond
 * its share while the lane keeps room for other namespaces; a write that
 * replaces a waiting one of its key is still taken; unkeyed writes and other
 * lanes are not counted; the share comes back as the namespace's writes go. */
static void test_lanes_low_ns_share(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_client_stats ks;
    struct lane_res a[8], b[3];
    struct lane_wait wa = {a, 5}, wb = {b, 3};
    char path[128];
    (void)st;
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    lane_steps_init(50);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 8, 1, 16); /* a namespace's share: 4 */
    /* namespace "flood": one goes in flight, four wait, the rest are refused */
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "/apis/gangq.io/v1alpha1/namespaces/flood/gpujobs/f%d", i);
        low_patch(c, path, i, i > 4, &a[i]);
    }
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.queued[KUBE_PRIO_LOW], 4); /* 4 of 16: the lane is not full */
    assert_int_equal(ks.refused, 3);
    /* its own waiting write is replaced, not refused; an unkeyed write and the
     * normal lane are not its share's */
    assert_false(kube_patch_status_would_refuse(c, KUBE_PRIO_LOW, "/apis/gangq.io/v1alpha1/namespaces/flood/gpujobs/f2"));
    assert_false(kube_patch_status_would_refuse(c, KUBE_PRIO_NORMAL, "/apis/gangq.io/v1alpha1/namespaces/flood/gpujobs/f9"));
    assert_false(kube_client_would_refuse(c, KUBE_PRIO_LOW, NULL));
    /* another namespace still gets in */
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "/apis/gangq.io/v1alpha1/namespaces/calm/gpujobs/c%d", i);
        low_patch(c, path, 100 + i, 0, &b[i]);
    }
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.queued[KUBE_PRIO_LOW], 7);
    assert_int_equal(ks.refused, 3);
    /* everything taken is sent; then the flood's share is free again */
    run_until(loop, NULL, lane_all_done, &wa, 10);
    run_until(loop, NULL, lane_all_done, &wb, 10);
    for (int i = 0; i < 5; i++)
        assert_int_equal(a[i].rc, 0);
    for (int i = 5; i < 8; i++)
        assert_false(a[i].done); /* refused: no callback */
    for (int i = 0; i < 3; i++)
        assert_int_equal(b[i].rc, 0);
    assert_false(kube_patch_status_would_refuse(c, KUBE_PRIO_LOW, "/apis/gangq.io/v1alpha1/namespaces/flood/gpujobs/f7"));
    struct seen s;
    server_scan(&srv, "/namespaces/flood/gpujobs/f", &s);
    assert_int_equal(s.n, 5);
    server_scan(&srv, "/namespaces/calm/gpujobs/c", &s);
    assert_int_equal(s.n, 3);
    assert_int_equal(kube_client_pending(c), 0);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* A steady stream of pod creates does not starve the state transitions:
 * 60 creates fill the 8 slots and wait, then 10 status transitions (normal)
 * come. While they wait, the creates leave them 2 slots (reserved_normal, a
 * quarter), so all 10 finish while most creates still wait; with critical
 * strictly first they would all finish after the 60th create. */
static void test_lanes_normal_not_starved(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_client_stats ks;
    static struct lane_res cr[60], tr[10];
    struct lane_wait wc = {cr, 60}, wt = {tr, 10};
    cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\"}}");
    char path[96];
    (void)st;
    memset(cr, 0, sizeof cr);
    memset(tr, 0, sizeof tr);
    lane_done_seq = 0;
    lane_steps_init(20);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 8, 0, 0);
    for (int i = 0; i < 60; i++)
        assert_int_equal(kube_create_p(c, KUBE_PRIO_CRITICAL, "/api/v1/namespaces/ns/pods", pod, lane_cb,
                                       &cr[i]),
                         0);
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.inflight[KUBE_PRIO_CRITICAL], 8); /* nothing else waits: every slot */
    for (int i = 0; i < 10; i++) {
        cJSON *p = status_patch(i);
        snprintf(path, sizeof path, "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/t%d", i);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_NORMAL, path, p, lane_cb, &tr[i]), 0);
        cJSON_Delete(p);
    }
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.queued[KUBE_PRIO_NORMAL], 10);
    run_until(loop, NULL, lane_all_done, &wt, 30);
    kube_client_get_stats(c, &ks);
    /* the transitions took their 2 slots, never more while creates waited */
    assert_int_equal(ks.started[KUBE_PRIO_NORMAL], 10);
    assert_true(ks.queued[KUBE_PRIO_CRITICAL] > 0); /* creates still wait */
    run_until(loop, NULL, lane_all_done, &wc, 30);
    int tlast = 0, clast = 0;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(tr[i].rc, 0);
        tlast = tr[i].order > tlast ? tr[i].order : tlast;
    }
    for (int i = 0; i < 60; i++) {
        assert_int_equal(cr[i].rc, 0);
        clast = cr[i].order > clast ? cr[i].order : clast;
    }
    assert_int_equal(clast, 70); /* the creates' tail is last */
    assert_true(tlast < 60);     /* 8 in flight first, then 2 slots of 8 */
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.started[KUBE_PRIO_CRITICAL], 60);
    /* where the time went: every request counted once; the creates waited
     * for slots more than they spent on the wire (52 of 60 queued behind 8),
     * and the transitions, with their share, waited less than the creates */
    assert_int_equal(ks.finished[KUBE_PRIO_CRITICAL], 60);
    assert_int_equal(ks.finished[KUBE_PRIO_NORMAL], 10);
    assert_int_equal(ks.finished[KUBE_PRIO_LOW], 0);
    assert_true(ks.wire_s[KUBE_PRIO_CRITICAL] > 0 && ks.wire_s[KUBE_PRIO_NORMAL] > 0);
    assert_true(ks.wait_s[KUBE_PRIO_CRITICAL] > ks.wire_s[KUBE_PRIO_CRITICAL]);
    assert_true(ks.wait_s[KUBE_PRIO_NORMAL] / 10 < ks.wait_s[KUBE_PRIO_CRITICAL] / 60);
    assert_int_equal(kube_client_pending(c), 0);
    cJSON_Delete(pod);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

/* Lower lanes never take the critical lane's reserved slots; a critical
 * request waits only behind critical ones, an exempt one (Lease) behind
 * nothing; a status patch that carries a transition (critical) replaces a
 * waiting cosmetic one and keeps the higher priority. */
static void test_lanes_critical_not_starved(void **st)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct server srv;
    struct kube_client *c;
    struct kube_client_stats ks;
    struct lane_res n[10], cr[6], ex = {0}, lo = {0}, tr = {0};
    struct lane_wait wn = {n, 10}, wc = {cr, 6};
    struct kube_req_opts exempt = {KUBE_PRIO_EXEMPT, NULL, 0, 0};
    struct seen s0, sc, sx;
    cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\"}}");
    char path[64];
    (void)st;
    memset(n, 0, sizeof n);
    memset(cr, 0, sizeof cr);
    lane_steps_init(400);
    server_start(&srv, lane_steps, 320);
    c = lane_client(loop, &srv, 4, 0, 0); /* 4 slots: 1 reserved for critical */
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof path, "/normal/%d", i);
        assert_int_equal(kube_request_h(c, "GET", path, NULL, NULL, lane_cb, &n[i], NULL), 0);
    }
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.inflight[KUBE_PRIO_NORMAL], 3);
    assert_int_equal(ks.queued[KUBE_PRIO_NORMAL], 7);
    run_until(loop, NULL, NULL, NULL, 0.15); /* the normal ones are on the wire */
    assert_int_equal(kube_create_p(c, KUBE_PRIO_CRITICAL, "/api/v1/namespaces/ns/pods", pod, lane_cb, &cr[0]),
                     0);
    kube_client_get_stats(c, &ks);
    assert_int_equal(ks.inflight[KUBE_PRIO_CRITICAL], 1);
    /* critical ones beyond the free slot wait only for slots, ahead of the 7 */
    for (int i = 1; i < 6; i++)
        assert_int_equal(kube_create_p(c, KUBE_PRIO_CRITICAL, "/api/v1/namespaces/ns/pods", pod, lane_cb,
                                       &cr[i]),
                         0);
    /* the Lease: no slot, no wait */
    assert_int_equal(kube_request_ex(c, &exempt, "PUT", "/lease", "application/json", "{}", lane_cb, &ex,
                                     NULL),
                     0);
    assert_int_equal(kube_request_ex(c, &(struct kube_req_opts){KUBE_PRIO_EXEMPT, "/k", 0, 0}, "PUT", "/lease",
                                     NULL, "{}", lane_cb, &ex, NULL),
                     GQ_EINVAL);
    run_until(loop, NULL, lane_all_done, &wc, 10);
    run_until(loop, NULL, lane_all_done, &wn, 10);
    run_until(loop, &ex.done, NULL, NULL, 5);
    server_scan(&srv, "GET /normal/", &s0);
    server_scan(&srv, "POST /api/v1/namespaces/ns/pods|", &sc);
    server_scan(&srv, "PUT /lease|", &sx);
    assert_int_equal(sc.n, 6);
    assert_int_equal(s0.n, 10);
    assert_int_equal(sx.n, 1);
    /* the first critical and the Lease went out while the first three normal
     * ones were held (connections 3 and 4; a FIFO would have sent them after
     * the 10 normal ones) */
    assert_true(sc.first <= 4);
    assert_true(sx.first <= 4);
    /* all six critical before the last normal one: they never wait behind it */
    assert_true(sc.last < s0.last);
    for (int i = 0; i < 6; i++)
        assert_int_equal(cr[i].rc, 0);

    /* transition over a waiting cosmetic write of the same object */
    {
        struct lane_res hold[3];
        struct lane_wait wh = {hold, 3};
        const char *obj = "/apis/gangq.io/v1alpha1/namespaces/ns/gpujobs/t";
        cJSON *p1 = status_patch(1), *p2 = status_patch(2);
        memset(hold, 0, sizeof hold);
        for (int i = 0; i < 3; i++) { /* fill the normal+low budget */
            snprintf(path, sizeof path, "/busy/%d", i);
            assert_int_equal(kube_request_h(c, "GET", path, NULL, NULL, lane_cb, &hold[i], NULL), 0);
        }
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_LOW, obj, p1, lane_cb, &lo), 0);
        kube_client_get_stats(c, &ks);
        assert_int_equal(ks.queued[KUBE_PRIO_LOW], 1);
        assert_int_equal(kube_patch_status_p(c, KUBE_PRIO_CRITICAL, obj, p2, lane_cb, &tr), 0);
        kube_client_get_stats(c, &ks);
        assert_int_equal(ks.queued[KUBE_PRIO_LOW], 0);
        assert_int_equal(ks.inflight[KUBE_PRIO_CRITICAL], 1);
        run_until(loop, &tr.done, NULL, NULL, 5);
        assert_int_equal(tr.rc, 0);
        assert_true(lo.done);
        assert_int_equal(lo.not_sent, KUBE_NOT_SENT_SUPERSEDED);
        assert_false(hold[0].done && hold[1].done && hold[2].done);
        run_until(loop, NULL, lane_all_done, &wh, 5);
        server_scan(&srv, "gpujobs/t/status|", &sc);
        assert_int_equal(sc.n, 1);
        assert_non_null(strstr(sc.last_line, "{\"status\":{\"n\":2}}"));
        cJSON_Delete(p1);
        cJSON_Delete(p2);
    }
    assert_int_equal(kube_client_pending(c), 0);
    cJSON_Delete(pod);
    kube_client_free(c);
    server_stop(&srv);
    ev_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubeconfig_inline),
        cmocka_unit_test(test_http_token_refused),
        cmocka_unit_test(test_kubeconfig_files),
        cmocka_unit_test(test_kubeconfig_errors),
        cmocka_unit_test(test_incluster),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_watch_events),
        cmocka_unit_test(test_cache_relist_diff),
        cmocka_unit_test(test_path_time_event),
        cmocka_unit_test(test_client_writers),
        cmocka_unit_test(test_client_patch_status_sstr),
        cmocka_unit_test(test_client_transport),
        cmocka_unit_test(test_token_rotation),
        cmocka_unit_test(test_body_limit),
        cmocka_unit_test(test_max_inflight),
        cmocka_unit_test(test_informer_flow),
        cmocka_unit_test(test_informer_error_event),
        cmocka_unit_test(test_informer_event_delay),
        cmocka_unit_test(test_informer_long_line_and_free),
        cmocka_unit_test(test_leader),
        cmocka_unit_test(test_list_page_hostile),
        cmocka_unit_test(test_watch_event_hostile),
        cmocka_unit_test(test_parse_drop_managed),
        cmocka_unit_test(test_informer_hostile),
        cmocka_unit_test(test_informer_list_shrink),
        cmocka_unit_test(test_prune_pod),
        cmocka_unit_test(test_pack),
        cmocka_unit_test(test_parse_arena),
        cmocka_unit_test(test_intern_cap),
        cmocka_unit_test(test_lanes_critical_first),
        cmocka_unit_test(test_lanes_ranked),
        cmocka_unit_test(test_lanes_coalesce),
        cmocka_unit_test(test_lanes_low_bounded),
        cmocka_unit_test(test_lanes_low_drop_rank),
        cmocka_unit_test(test_lanes_low_ns_share),
        cmocka_unit_test(test_lanes_critical_not_starved),
        cmocka_unit_test(test_lanes_normal_not_starved),
    };
    int rc;
    signal(SIGPIPE, SIG_IGN);
    kube_global_init();
    rc = cmocka_run_group_tests_name("kube", tests, setup_tmp, teardown_tmp);
    kube_global_cleanup();
    return rc;
}
