/* Unit tests for the controller's lookup structures added for CPU per
 * admission: node lookup by name in a snapshot (controller/ctl_snapshot.c;
 * hashed index) must give the same answers as a scan, for nodes given in
 * any order, including unknown names and a name given twice (the first); the event-kept object sets and pod
 * lists of the event-driven reconcile (controller/ctl_memo.c) must equal
 * what a walk of the cache would find after any sequence of events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctl.h"
#include "ctl_int.h"

#define NN 200

static void test_snap_node_lookup(void **state)
{
    (void)state;
    cJSON *objs[NN];
    const cJSON *nodes[NN];
    char name[64];
    /* names in a scrambled order: n-<(i*7919) mod NN> */
    for (int i = 0; i < NN; i++) {
        snprintf(name, sizeof(name), "n-%d", (i * 7919) % NN);
        char json[512];
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/hostname\":\"%s\"}},"
                 "\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":\"16Gi\",\"nvidia.com/gpu\":\"4\"},"
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                 name, name);
        objs[i] = cJSON_Parse(json);
        assert_non_null(objs[i]);
        nodes[i] = objs[i];
    }
    struct sched_config cfg;
    sched_config_default(&cfg);
    struct ctl_snapin in = {&cfg, 1, nodes, NN, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0, 0, 0};
    struct ctl_snap s;
    memset(&s, 0, sizeof(s)); /* no kept arrays yet */
    char err[256];
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
    assert_non_null(s.node_ix);
    for (int i = 0; i < NN; i++) {
        int idx = ctl_snap_node(&s, s.nodes[i].name);
        assert_int_equal(idx, i);
        snprintf(name, sizeof(name), "n-%d", (i * 7919) % NN);
        assert_string_equal(s.nodes[idx].name, name);
    }
    assert_int_equal(ctl_snap_node(&s, "n-"), -1);
    assert_int_equal(ctl_snap_node(&s, "n-200"), -1);
    assert_int_equal(ctl_snap_node(&s, ""), -1);
    assert_int_equal(ctl_snap_node(&s, "zz"), -1);
    ctl_snap_release(&s);
    assert_null(s.node_ix);
    for (int i = 0; i < NN; i++)
        cJSON_Delete(objs[i]);
}

static void test_snap_node_dup(void **state)
{
    (void)state;
    static const char *const names[] = {"x", "y", "x", "z"};
    cJSON *objs[4];
    const cJSON *nodes[4];
    for (int i = 0; i < 4; i++) {
        char json[256];
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"%s\"},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"1\"},"
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                 names[i]);
        nodes[i] = objs[i] = cJSON_Parse(json);
        assert_non_null(objs[i]);
    }
    struct sched_config cfg;
    sched_config_default(&cfg);
    struct ctl_snapin in = {&cfg, 1, nodes, 4, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0, 0, 0};
    struct ctl_snap s;
    memset(&s, 0, sizeof(s)); /* no kept arrays yet */
    char err[256];
    assert_int_equal(ctl_snap_build(&s, &in, err, sizeof(err)), 0);
    assert_int_equal(ctl_snap_node(&s, "x"), 0); /* the first, as a scan */
    assert_int_equal(ctl_snap_node(&s, "y"), 1);
    assert_int_equal(ctl_snap_node(&s, "z"), 3);
    assert_int_equal(ctl_snap_node(&s, "w"), -1);
    ctl_snap_release(&s);
    for (int i = 0; i < 4; i++)
        cJSON_Delete(objs[i]);
}

static cJSON *mkpod(const char *ns, const char *name, const char *job, const char *node, const char *phase)
{
    char json[1024];
    char labels[256] = "{}";
    if (job)
        snprintf(labels, sizeof(labels), "{\"%s\":\"%s\",\"%s\":\"0\",\"%s\":\"1\"}", CTL_LABEL_JOB, job,
                 CTL_LABEL_REPLICA, CTL_LABEL_ATTEMPT);
    snprintf(json, sizeof(json),
             "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"labels\":%s},"
             "\"spec\":{\"nodeName\":\"%s\"},\"status\":{\"phase\":\"%s\"}}",
             ns, name, labels, node, phase);
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    return o;
}

static void test_objset_order(void **state)
{
    (void)state;
    struct ctl_objset s = {0};
    char key[32];
    cJSON *dummy = cJSON_CreateObject();
    /* insert 500 keys in a scrambled order, delete every third, replace some */
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof(key), "ns/j%03d", (i * 7919) % 500);
        assert_int_equal(ctl_objset_put(&s, key, dummy), 0);
    }
    assert_int_equal(s.n, 500);
    for (int i = 0; i < 500; i += 3) {
        snprintf(key, sizeof(key), "ns/j%03d", i);
        ctl_objset_del(&s, key);
    }
    ctl_objset_del(&s, "ns/absent");
    assert_int_equal(s.n, 500 - 167);
    assert_int_equal(ctl_objset_put(&s, "ns/j001", NULL), 0); /* replace: no new entry */
    assert_int_equal(s.n, 500 - 167);
    for (int i = 1; i < s.n; i++)
        assert_true(strcmp(s.e[i - 1].key, s.e[i].key) < 0);
    int found = 0;
    for (int i = 0; i < s.n; i++)
        if (!strcmp(s.e[i].key, "ns/j001")) {
            assert_null(s.e[i].obj);
            found = 1;
        }
    assert_true(found);
    ctl_objset_release(&s);
    assert_int_equal(s.n, 0);
    cJSON_Delete(dummy);
}

static int memo_has(struct ctl_memo *m, const cJSON *pod)
{
    for (int i = 0; m && i < m->pods.npods; i++)
        if (m->pods.pods[i] == pod)
            return 1;
    return 0;
}

static void test_index_pod_events(void **state)
{
    (void)state;
    struct ctl_memo_table t = {0};
    struct ctl_objset foreign = {0};
    /* two replicas of job a, one foreign bound pod, one foreign pending pod */
    cJSON *a0 = mkpod("ns", "a-0", "a", "n1", "Running");
    cJSON *a1 = mkpod("ns", "a-1", "a", "", "Pending");
    cJSON *f = mkpod("ns", "web", NULL, "n2", "Running");
    cJSON *pend = mkpod("ns", "queued", NULL, "", "Pending");
    assert_int_equal(ctl_index_pod(&t, &foreign, NULL, a0, 5), 0);
    assert_int_equal(ctl_index_pod(&t, &foreign, NULL, a1, 5), 0);
    assert_int_equal(ctl_index_pod(&t, &foreign, NULL, f, 5), 0);
    assert_int_equal(ctl_index_pod(&t, &foreign, NULL, pend, 5), 0);
    struct ctl_memo *m = ctl_memo_get(&t, "ns/a", 0);
    assert_non_null(m);
    assert_int_equal(m->pods.npods, 2);
    assert_int_equal(m->dirty_upto, 5);
    assert_true(memo_has(m, a0) && memo_has(m, a1));
    for (int i = 0; i < m->pods.npods; i++)
        if (m->pods.pods[i] == a0) {
            assert_string_equal(m->pods.pf[i].name, "a-0");
            assert_string_equal(m->pods.pf[i].node, "n1");
            assert_string_equal(m->pods.pf[i].replica, "0");
            assert_false(m->pods.pf[i].terminal);
        }
    assert_int_equal(foreign.n, 1); /* an unbound pod uses nothing */
    assert_ptr_equal(foreign.e[0].obj, f);

    /* MODIFIED: a-1 bound and then Succeeded; the foreign pod finishes */
    cJSON *a1b = mkpod("ns", "a-1", "a", "n1", "Succeeded");
    assert_int_equal(ctl_index_pod(&t, &foreign, a1, a1b, 6), 0);
    cJSON_Delete(a1);
    assert_int_equal(m->pods.npods, 2);
    assert_true(memo_has(m, a1b));
    for (int i = 0; i < m->pods.npods; i++)
        if (m->pods.pods[i] == a1b)
            assert_true(m->pods.pf[i].terminal);
    assert_int_equal(m->dirty_upto, 6);
    cJSON *fdone = mkpod("ns", "web", NULL, "n2", "Succeeded");
    assert_int_equal(ctl_index_pod(&t, &foreign, f, fdone, 6), 0);
    cJSON_Delete(f);
    assert_int_equal(foreign.n, 0);
    /* a relabelled pod moves from one job to another */
    cJSON *moved = mkpod("ns", "a-0", "b", "n1", "Running");
    assert_int_equal(ctl_index_pod(&t, &foreign, a0, moved, 7), 0);
    cJSON_Delete(a0);
    struct ctl_memo *mb = ctl_memo_get(&t, "ns/b", 0);
    assert_non_null(mb);
    assert_int_equal(m->pods.npods, 1);
    assert_int_equal(mb->pods.npods, 1);
    assert_true(memo_has(mb, moved));
    /* DELETED */
    assert_int_equal(ctl_index_pod(&t, &foreign, a1b, NULL, 8), 0);
    assert_int_equal(m->pods.npods, 0);
    assert_int_equal(m->dirty_upto, 8);
    /* a memo with pods is not dropped as unseen; one without is */
    ctl_memo_drop_unseen(&t, 100, NULL);
    assert_null(ctl_memo_get(&t, "ns/a", 0));
    assert_non_null(ctl_memo_get(&t, "ns/b", 0));
    cJSON_Delete(a1b);
    cJSON_Delete(moved);
    cJSON_Delete(fdone);
    cJSON_Delete(pend);
    ctl_objset_release(&foreign);
    ctl_memo_table_release(&t);
}

static void test_index_job_events(void **state)
{
    (void)state;
    struct ctl_memo_table t = {0};
    struct ctl_objset jobs = {0};
    cJSON *j1 = cJSON_Parse("{\"metadata\":{\"namespace\":\"b\",\"name\":\"x\"}}");
    cJSON *j2 = cJSON_Parse("{\"metadata\":{\"namespace\":\"a\",\"name\":\"y\"}}");
    cJSON *j1b = cJSON_Parse("{\"metadata\":{\"namespace\":\"b\",\"name\":\"x\",\"generation\":2}}");
    cJSON *bad = cJSON_Parse("{\"metadata\":{\"name\":\"cluster-scoped\"}}");
    assert_int_equal(ctl_index_job(&t, &jobs, NULL, j1, 1), 0);
    assert_int_equal(ctl_index_job(&t, &jobs, NULL, j2, 1), 0);
    assert_int_equal(ctl_index_job(&t, &jobs, NULL, bad, 1), 0);
    assert_int_equal(jobs.n, 2);
    assert_string_equal(jobs.e[0].key, "a/y");
    assert_string_equal(jobs.e[1].key, "b/x");
    struct ctl_memo *m = ctl_memo_get(&t, "b/x", 1);
    assert_non_null(m);
    assert_int_equal(ctl_index_job(&t, &jobs, j1, j1b, 9), 0);
    assert_int_equal(jobs.n, 2);
    assert_ptr_equal(jobs.e[1].obj, j1b);
    assert_int_equal(m->dirty_upto, 9);
    assert_int_equal(ctl_index_job(&t, &jobs, j1b, NULL, 10), 0);
    assert_int_equal(jobs.n, 1);
    assert_string_equal(jobs.e[0].key, "a/y");
    assert_int_equal(m->dirty_upto, 10);

    /* the memo hint: a new entry has none; the entry of a dropped memo loses it,
     * an entry whose memo stays keeps it; a name longer than the API allows is
     * never indexed (never truncated into another job's key) */
    assert_null(jobs.e[0].memo);
    struct ctl_memo *my = ctl_memo_get(&t, "a/y", 1);
    jobs.e[0].memo = my;
    assert_int_equal(ctl_index_job(&t, &jobs, NULL, j1, 11), 0); /* b/x again */
    assert_int_equal(jobs.n, 2);
    assert_null(jobs.e[1].memo);
    jobs.e[1].memo = m;
    my->seen_cycle = 50;
    m->seen_cycle = 10;
    ctl_memo_drop_unseen(&t, 50, &jobs); /* b/x unseen since 10: dropped */
    assert_null(ctl_memo_get(&t, "b/x", 0));
    assert_null(jobs.e[1].memo);
    assert_ptr_equal(jobs.e[0].memo, my);
    assert_ptr_equal(ctl_memo_get(&t, "a/y", 0), my);
    char longname[CTL_KEY_MAX + 8];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    cJSON *lj = cJSON_CreateObject();
    cJSON *lmd = cJSON_AddObjectToObject(lj, "metadata");
    cJSON_AddStringToObject(lmd, "namespace", "a");
    cJSON_AddStringToObject(lmd, "name", longname);
    assert_int_equal(ctl_index_job(&t, &jobs, NULL, lj, 12), 0);
    assert_int_equal(jobs.n, 2);
    cJSON_Delete(lj);
    cJSON_Delete(j1);
    cJSON_Delete(j2);
    cJSON_Delete(j1b);
    cJSON_Delete(bad);
    ctl_objset_release(&jobs);
    ctl_memo_table_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snap_node_lookup),
        cmocka_unit_test(test_snap_node_dup),
        cmocka_unit_test(test_objset_order),
        cmocka_unit_test(test_index_pod_events),
        cmocka_unit_test(test_index_job_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
