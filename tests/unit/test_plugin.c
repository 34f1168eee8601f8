/* Unit tests for controller/plugin's pure parts: GPUJob decoding, queue order and
 * estimated positions, the queue table, quota arithmetic in a cohort, node free GPUs,
 * error texts, YAML output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "gq.h"
#include "plugin.h"

static cJSON *parse(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    return j;
}

static void job(struct pl_job *j, const char *json)
{
    cJSON *o = parse(json);
    assert_int_equal(pl_job_from_json(o, j), 0);
    cJSON_Delete(o);
}

static void test_job_decode(void **st)
{
    (void)st;
    struct pl_job j;
    job(&j, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},"
            "\"spec\":{\"replicas\":2,\"gpu\":{\"count\":4,\"types\":[\"A100\",\"H100\"]},\"class\":\"Training\"},"
            "\"status\":{\"state\":\"Queued\",\"team\":\"t\",\"priority\":50,\"position\":3,"
            "\"waitReason\":\"Quota\",\"message\":\"team t quota 8/8\"}}");
    assert_string_equal(j.name, "a");
    assert_string_equal(j.ns, "ns");
    assert_string_equal(j.team, "t");
    assert_string_equal(j.cls, "Training");
    assert_string_equal(j.gpus, "8 (2x4)");
    assert_string_equal(j.types, "A100,H100");
    assert_int_equal(j.need_milli, 8000);
    assert_int_equal(j.priority, 50);
    assert_int_equal(j.position, 3);
    assert_int_equal(j.gpos, -1);
    assert_true(pl_job_waiting(&j));
    assert_true(j.created > 1.7e9);

    job(&j, "{\"metadata\":{\"name\":\"s\"},\"spec\":{\"replicas\":3,\"gpu\":{\"shares\":250},\"suspend\":true},"
            "\"status\":{\"state\":\"Queued\",\"globalPosition\":7}}");
    assert_string_equal(j.gpus, "3x250m");
    assert_int_equal(j.need_milli, 750);
    assert_string_equal(j.cls, "Batch");
    assert_int_equal(j.gpos, 7);
    assert_false(pl_job_waiting(&j)); /* suspended */

    job(&j, "{\"metadata\":{\"name\":\"c\"},\"spec\":{},\"status\":{\"state\":\"Succeeded\"}}");
    assert_string_equal(j.gpus, "-");
    assert_true(pl_job_finished(&j));
    assert_false(pl_job_waiting(&j));

    cJSON *bad = parse("{\"metadata\":{}}");
    assert_int_equal(pl_job_from_json(bad, &j), GQ_EINVAL);
    cJSON_Delete(bad);
}

/* jobs of two teams, some with published positions (pendingHead or own status) */
static void test_queue_order(void **st)
{
    (void)st;
    struct pl_job js[5];
    job(&js[0], "{\"metadata\":{\"name\":\"low\",\"namespace\":\"a\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},"
                "\"spec\":{\"gpu\":{\"count\":1}},\"status\":{\"state\":\"Queued\",\"priority\":10}}");
    job(&js[1], "{\"metadata\":{\"name\":\"high\",\"namespace\":\"a\",\"creationTimestamp\":\"2026-01-01T00:00:05Z\"},"
                "\"spec\":{\"gpu\":{\"count\":1}},\"status\":{\"state\":\"Queued\",\"priority\":100}}");
    job(&js[2], "{\"metadata\":{\"name\":\"old\",\"namespace\":\"b\",\"creationTimestamp\":\"2025-12-31T00:00:00Z\"},"
                "\"spec\":{\"gpu\":{\"count\":1}},\"status\":{\"state\":\"Queued\",\"priority\":10}}");
    job(&js[3], "{\"metadata\":{\"name\":\"head\",\"namespace\":\"b\",\"creationTimestamp\":\"2026-01-02T00:00:00Z\"},"
                "\"spec\":{\"gpu\":{\"count\":1}},\"status\":{\"state\":\"Queued\",\"priority\":0}}");
    job(&js[4], "{\"metadata\":{\"name\":\"mid\",\"namespace\":\"a\",\"creationTimestamp\":\"2026-01-01T00:00:01Z\"},"
                "\"spec\":{\"gpu\":{\"count\":1}},\"status\":{\"state\":\"Queued\",\"priority\":10}}");
    /* teams: A owns namespace a (the older of two listing it), B owns b and
     * publishes head's position (1, global 1) */
    cJSON *teams = parse(
        "[{\"metadata\":{\"name\":\"A2\",\"creationTimestamp\":\"2026-01-05T00:00:00Z\"},\"spec\":{\"namespaces\":[\"a\"]}},"
        " {\"metadata\":{\"name\":\"A\",\"creationTimestamp\":\"2025-01-01T00:00:00Z\"},\"spec\":{\"namespaces\":[\"a\"]},"
        "  \"status\":{\"pendingHead\":[{\"name\":\"high\",\"namespace\":\"a\",\"position\":1}]}},"
        " {\"metadata\":{\"name\":\"B\",\"creationTimestamp\":\"2025-01-01T00:00:00Z\"},\"spec\":{\"namespaces\":[\"b\"]},"
        "  \"status\":{\"pendingHead\":[{\"name\":\"head\",\"namespace\":\"b\",\"position\":1,\"globalPosition\":1}]}}]");
    pl_jobs_apply_teams(js, 5, teams);
    cJSON_Delete(teams);
    assert_string_equal(js[0].team, "A");
    assert_string_equal(js[2].team, "B");
    assert_int_equal(js[1].position, 1);
    assert_int_equal(js[3].gpos, 1);
    pl_queue_order(js, 5);
    /* the published global head first, then priority desc, then age */
    const char *want[] = {"head", "high", "old", "low", "mid"};
    for (int i = 0; i < 5; i++)
        assert_string_equal(js[i].name, want[i]);
    /* head: B 1 published; high: A 1 published; old: B ~2; low: A ~2; mid: A ~3 */
    int tp[] = {1, 1, 2, 2, 3}, est[] = {0, 0, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(js[i].team_pos, tp[i]);
        assert_int_equal(js[i].team_pos_est, est[i]);
    }

    struct gq_buf b;
    gq_buf_init(&b, 1 << 20);
    double now = js[0].created + 90;
    assert_int_equal(pl_render_queue(js, 5, now, &b), 0);
    const char *lines = b.p;
    assert_non_null(strstr(lines, "POS   TEAM-POS   TEAM   NAMESPACE/NAME"));
    assert_non_null(strstr(lines, "\n1     1          B      b/head"));
    assert_non_null(strstr(lines, "\n-     1          A      a/high"));
    assert_non_null(strstr(lines, "\n-     ~3         A      a/mid"));
    assert_non_null(strstr(lines, "90s"));
    assert_true(strstr(lines, "b/head") < strstr(lines, "a/high"));
    gq_buf_release(&b);

    cJSON *arr = pl_queue_json(js, 5, now);
    assert_int_equal(cJSON_GetArraySize(arr), 5);
    cJSON *first = cJSON_GetArrayItem(arr, 0), *second = cJSON_GetArrayItem(arr, 1);
    assert_int_equal(cJSON_GetObjectItem(first, "globalPosition")->valueint, 1);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(second, "globalPosition")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 4), "teamPositionEstimated")));
    cJSON_Delete(arr);
}

static void test_age_and_milli(void **st)
{
    (void)st;
    char a[16];
    pl_age(1000, 0, a, sizeof a);
    assert_string_equal(a, "-");
    pl_age(1000, 958, a, sizeof a);
    assert_string_equal(a, "42s");
    pl_age(10000, 10000 - 600, a, sizeof a);
    assert_string_equal(a, "10m");
    pl_age(1e6, 1e6 - 5 * 3600, a, sizeof a);
    assert_string_equal(a, "5h");
    pl_age(1e7, 1e7 - 3 * 86400, a, sizeof a);
    assert_string_equal(a, "3d");
    pl_fmt_milli(8000, a, sizeof a);
    assert_string_equal(a, "8");
    pl_fmt_milli(500, a, sizeof a);
    assert_string_equal(a, "0.5");
    pl_fmt_milli(12250, a, sizeof a);
    assert_string_equal(a, "12.25");
    pl_fmt_milli(1, a, sizeof a);
    assert_string_equal(a, "0.001");
}

/* Cohort ml: t1 nominal 8 lend 4 (guaranteed 4); t2 nominal 8 lends all, borrow limit 6;
 * t3 nominal 4 in no cohort. */
static void test_quota(void **st)
{
    (void)st;
    cJSON *teams = parse(
        "[{\"metadata\":{\"name\":\"t1\"},\"spec\":{\"cohort\":\"ml\",\"quota\":[{\"gpuType\":\"A100\",\"gpus\":8,\"lendingLimit\":4}]},"
        "  \"status\":{\"gpuTypes\":[{\"gpuType\":\"A100\",\"nominal\":8,\"used\":2.5,\"borrowed\":0}]}},"
        " {\"metadata\":{\"name\":\"t2\"},\"spec\":{\"cohort\":\"ml\",\"quota\":[{\"gpuType\":\"A100\",\"gpus\":8,\"borrowingLimit\":6},"
        "   {\"gpuType\":\"*\",\"gpus\":2}]}},"
        " {\"metadata\":{\"name\":\"t3\"},\"spec\":{\"quota\":[{\"gpuType\":\"A100\",\"gpus\":4}]}}]");
    /* t2's usage from pods: 10 A100 on n1 (one pod of 8, one of 2), 1 share pod on an H100
     * node (charged to "*"), one finished pod ignored, one pod of another team */
    cJSON *nodes = parse(
        "[{\"metadata\":{\"name\":\"n1\",\"labels\":{\"nvidia.com/gpu.product\":\"A100\"}},"
        "  \"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"16\"}}},"
        " {\"metadata\":{\"name\":\"n2\",\"labels\":{\"nvidia.com/gpu.product\":\"H100\"}},"
        "  \"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}},"
        " {\"metadata\":{\"name\":\"n3\",\"labels\":{\"nvidia.com/gpu.product\":\"A100\"}},"
        "  \"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}},"
        " {\"metadata\":{\"name\":\"cpu\"},\"status\":{\"allocatable\":{\"cpu\":\"8\"}}}]");
    cJSON *pods = parse(
        "[{\"metadata\":{\"name\":\"p1\",\"labels\":{\"gangq.io/team\":\"t2\",\"gangq.io/job\":\"j\"}},"
        "  \"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"8\"}}}]},\"status\":{\"phase\":\"Running\"}},"
        " {\"metadata\":{\"name\":\"p2\",\"labels\":{\"gangq.io/team\":\"t2\"}},"
        "  \"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]},\"status\":{\"phase\":\"Pending\"}},"
        " {\"metadata\":{\"name\":\"p3\",\"labels\":{\"gangq.io/team\":\"t2\"},\"annotations\":{\"gangq.io/gpu-milli\":\"500\"}},"
        "  \"spec\":{\"nodeName\":\"n2\",\"containers\":[{}]},\"status\":{\"phase\":\"Running\"}},"
        " {\"metadata\":{\"name\":\"p4\",\"labels\":{\"gangq.io/team\":\"t2\"}},"
        "  \"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"4\"}}}]},\"status\":{\"phase\":\"Succeeded\"}},"
        " {\"metadata\":{\"name\":\"p5\",\"labels\":{\"gangq.io/team\":\"t3\"}},"
        "  \"spec\":{\"nodeName\":\"n3\",\"containers\":[{\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"3\"}}}]},\"status\":{\"phase\":\"Running\"}}]");
    struct pl_nodeinfo *nd;
    int nn;
    assert_int_equal(pl_nodes_build(nodes, pods, &nd, &nn), 0);
    assert_int_equal(nn, 4);
    assert_string_equal(nd[0].name, "n1");
    assert_int_equal(nd[0].alloc, 16000);
    assert_int_equal(nd[0].used, 10000);
    assert_int_equal(nd[1].used, 500);

    struct pl_qentry *en;
    int nq;
    assert_int_equal(pl_qentries_build(teams, nd, nn, pods, &en, &nq), 0);
    assert_int_equal(nq, 4);
    /* t1 from status (fractional exact), t2 from pods, t3 from pods */
    assert_string_equal(en[0].team, "t1");
    assert_int_equal(en[0].used, 2500);
    assert_int_equal(en[0].lend_limit, 4000);
    assert_string_equal(en[1].type, "A100");
    assert_int_equal(en[1].used, 10000);
    assert_int_equal(en[1].borrow_limit, 6000);
    assert_string_equal(en[2].type, "*");
    assert_int_equal(en[2].used, 500);
    assert_int_equal(en[3].used, 3000);

    struct pl_quota q;
    /* group ml/A100: lendable 4 (t1) + 8 (t2) = 12; over: t1 max(0, 2.5-4)=0, t2 10-0=10;
     * room 2. t2: borrowed 2, own unused 0, may borrow min(2, 6-2) = 2 */
    pl_quota_compute(en, nq, 1, &q);
    assert_int_equal(q.borrowed, 2000);
    assert_int_equal(q.may_borrow, 2000);
    assert_int_equal(q.available, 2000);
    assert_int_equal(q.cohort_lendable, 12000);
    /* t1: own unused = 8 - max(2.5, 4) = 4, room 2 - 4 < 0: nothing to borrow;
     * available = its own 5.5 */
    pl_quota_compute(en, nq, 0, &q);
    assert_int_equal(q.may_borrow, 0);
    assert_int_equal(q.available, 5500);
    /* t3 alone: nothing to borrow */
    pl_quota_compute(en, nq, 3, &q);
    assert_int_equal(q.may_borrow, 0);
    assert_int_equal(q.available, 1000);

    /* closest nodes for an A100 job: n1 (6 free) then n3 (5 free); others excluded */
    assert_int_equal(pl_nodes_closest(nd, nn, "A100"), 2);
    assert_string_equal(nd[0].name, "n1");
    assert_string_equal(nd[1].name, "n3");
    assert_int_equal(pl_nodes_closest(nd, nn, ""), 3);
    assert_string_equal(nd[0].name, "n2"); /* 7.5 free */
    free(nd);
    free(en);
    cJSON_Delete(teams);
    cJSON_Delete(nodes);
    cJSON_Delete(pods);
}

static void test_errors(void **st)
{
    (void)st;
    char err[512];
    struct pl_what w = {"get", "gpujobs.gangq.io", "ns1", "nope"};
    pl_http_error_text(404, "{\"kind\":\"Status\",\"message\":\"not found\"}", &w, err, sizeof err);
    assert_string_equal(err, "gpujob ns1/nope not found");
    struct pl_what wl = {"list", "gpujobs.gangq.io", NULL, NULL};
    pl_http_error_text(403, "{\"message\":\"gpujobs.gangq.io is forbidden: User \\\"alice\\\" cannot list\"}",
                       &wl, err, sizeof err);
    assert_non_null(strstr(err, "forbidden: you may not list gpujobs.gangq.io at the cluster scope"));
    assert_non_null(strstr(err, "User \"alice\" cannot list"));
    struct pl_what wp = {"patch", "gpujobs.gangq.io", "ns1", "j"};
    pl_http_error_text(403, "not json", &wp, err, sizeof err);
    assert_string_equal(err, "forbidden: you may not patch gpujobs.gangq.io j in namespace ns1");
}

static void test_table_and_yaml(void **st)
{
    (void)st;
    static const char *const h[] = {"A", "LONGER", "C"};
    struct pl_table t;
    struct gq_buf b;
    gq_buf_init(&b, 1 << 16);
    assert_int_equal(pl_table_init(&t, 3, h), 0);
    const char *r1[] = {"xxxxx", "y", "multi\nline"};
    const char *r2[] = {"1", "2", ""};
    assert_int_equal(pl_table_add(&t, r1), 0);
    assert_int_equal(pl_table_add(&t, r2), 0);
    assert_int_equal(pl_table_render(&t, "  ", &b), 0);
    assert_string_equal(b.p, "  A       LONGER   C\n"
                             "  xxxxx   y        multi line\n"
                             "  1       2\n");
    pl_table_release(&t);

    gq_buf_reset(&b);
    cJSON *v = parse("{\"a\":1,\"b\":\"x: y\",\"c\":[1,{\"d\":true,\"e\":[]},[2]],\"f\":{},\"g key\":null,"
                     "\"h\":{\"i\":0.5}}");
    assert_int_equal(pl_yaml_emit(v, &b), 0);
    assert_string_equal(b.p, "a: 1\n"
                             "b: \"x: y\"\n"
                             "c:\n"
                             "- 1\n"
                             "- d: true\n"
                             "  e: []\n"
                             "-\n"
                             "  - 2\n"
                             "f: {}\n"
                             "\"g key\": null\n"
                             "h:\n"
                             "  i: 0.5\n");
    cJSON_Delete(v);
    gq_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_decode),   cmocka_unit_test(test_queue_order),
        cmocka_unit_test(test_age_and_milli), cmocka_unit_test(test_quota),
        cmocka_unit_test(test_errors),       cmocka_unit_test(test_table_and_yaml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
