/* Unit tests for controller/metrics: exact exposition text, labels, escaping,
 * histograms, registration rules and limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "buf.h"
#include "metrics.h"

static char *render(struct gq_metrics *m, struct gq_buf *b)
{
    gq_buf_reset(b);
    assert_int_equal(gq_metrics_render(m, b), 0);
    return b->p ? b->p : (char *)"";
}

static void test_counter_gauge(void **st)
{
    (void)st;
    struct gq_metrics *m = gq_metrics_new();
    struct gq_metric *c = NULL, *g = NULL, *c2 = NULL;
    struct gq_buf b;
    char err[128];
    gq_buf_init(&b, 1 << 16);
    assert_non_null(m);
    assert_int_equal(gq_metrics_counter(m, "gangq_cycles_total", "Scheduling cycles run.",
                                        NULL, &c, err, sizeof err), 0);
    assert_int_equal(gq_metrics_gauge(m, "gangq_queue_depth", "Jobs waiting.", NULL, &g,
                                      err, sizeof err), 0);
    /* same name + labels again: same handle */
    assert_int_equal(gq_metrics_counter(m, "gangq_cycles_total", "ignored", NULL, &c2, err,
                                        sizeof err), 0);
    assert_ptr_equal(c, c2);
    gq_metrics_inc(c);
    gq_metrics_inc(c);
    gq_metrics_add(c, 0.5);
    gq_metrics_add(c, -10); /* ignored: counters only go up */
    gq_metrics_set(c, 99);  /* ignored: not a gauge */
    gq_metrics_set(g, 7);
    gq_metrics_dec(g);
    gq_metrics_add(g, -0.25);
    gq_metrics_inc(NULL); /* no-op */
    assert_true(gq_metrics_value(c) == 2.5);
    assert_string_equal(render(m, &b),
                        "# HELP gangq_cycles_total Scheduling cycles run.\n"
                        "# TYPE gangq_cycles_total counter\n"
                        "gangq_cycles_total 2.5\n"
                        "# HELP gangq_queue_depth Jobs waiting.\n"
                        "# TYPE gangq_queue_depth gauge\n"
                        "gangq_queue_depth 5.75\n");
    gq_metrics_set(g, 0.1);
    gq_metrics_set(g, INFINITY);
    assert_non_null(strstr(render(m, &b), "gangq_queue_depth +Inf\n"));
    gq_metrics_set(g, 1e20);
    assert_non_null(strstr(render(m, &b), "gangq_queue_depth 1e+20\n"));
    gq_metrics_set(g, 0.1);
    assert_non_null(strstr(render(m, &b), "gangq_queue_depth 0.1\n"));
    gq_buf_release(&b);
    gq_metrics_free(m);
}

static void test_labels_grouped_and_escaped(void **st)
{
    (void)st;
    struct gq_metrics *m = gq_metrics_new();
    struct gq_metric *q = NULL, *r = NULL, *other = NULL, *odd = NULL;
    struct gq_buf b;
    char err[128];
    gq_buf_init(&b, 1 << 16);
    assert_int_equal(gq_metrics_gauge(m, "gangq_jobs", "Jobs by state.",
                                      (const char *[]){"state", "Queued", NULL}, &q, err,
                                      sizeof err), 0);
    assert_int_equal(gq_metrics_counter(m, "gangq_other_total", "Line1\nback\\slash \"q\"",
                                        (const char *[]){"team", "a\"b\\c\nd", "x", "y",
                                                         NULL}, &other, err, sizeof err), 0);
    /* registered after another family: still rendered with its family */
    assert_int_equal(gq_metrics_gauge(m, "gangq_jobs", "Jobs by state.",
                                      (const char *[]){"state", "Running", NULL}, &r, err,
                                      sizeof err), 0);
    assert_ptr_not_equal(q, r);
    gq_metrics_set(q, 3);
    gq_metrics_set(r, 12);
    gq_metrics_inc(other);
    assert_string_equal(render(m, &b),
                        "# HELP gangq_jobs Jobs by state.\n"
                        "# TYPE gangq_jobs gauge\n"
                        "gangq_jobs{state=\"Queued\"} 3\n"
                        "gangq_jobs{state=\"Running\"} 12\n"
                        "# HELP gangq_other_total Line1\\nback\\\\slash \"q\"\n"
                        "# TYPE gangq_other_total counter\n"
                        "gangq_other_total{team=\"a\\\"b\\\\c\\nd\",x=\"y\"} 1\n");
    /* same family with another type is refused */
    assert_int_equal(gq_metrics_counter(m, "gangq_jobs", "x",
                                        (const char *[]){"state", "Failed", NULL}, &odd,
                                        err, sizeof err), GQ_EINVAL);
    assert_null(odd);
    assert_non_null(strstr(err, "gangq_jobs"));
    gq_buf_release(&b);
    gq_metrics_free(m);
}

static void test_histogram(void **st)
{
    (void)st;
    struct gq_metrics *m = gq_metrics_new();
    struct gq_metric *h = NULL, *d = NULL;
    struct gq_buf b;
    char err[128];
    const double bounds[] = {0.1, 1, 10};
    gq_buf_init(&b, 1 << 16);
    assert_int_equal(gq_metrics_histogram(m, "gangq_cycle_seconds", "Cycle time.",
                                          (const char *[]){"kind", "full", NULL}, bounds, 3,
                                          &h, err, sizeof err), 0);
    gq_metrics_observe(h, 0.05);
    gq_metrics_observe(h, 0.1); /* le is inclusive */
    gq_metrics_observe(h, 0.5);
    gq_metrics_observe(h, 100);
    gq_metrics_observe(h, NAN); /* ignored */
    gq_metrics_inc(h);          /* ignored: not a counter */
    assert_true(gq_metrics_value(h) == 4);
    assert_string_equal(render(m, &b),
                        "# HELP gangq_cycle_seconds Cycle time.\n"
                        "# TYPE gangq_cycle_seconds histogram\n"
                        "gangq_cycle_seconds_bucket{kind=\"full\",le=\"0.1\"} 2\n"
                        "gangq_cycle_seconds_bucket{kind=\"full\",le=\"1\"} 3\n"
                        "gangq_cycle_seconds_bucket{kind=\"full\",le=\"10\"} 3\n"
                        "gangq_cycle_seconds_bucket{kind=\"full\",le=\"+Inf\"} 4\n"
                        "gangq_cycle_seconds_sum{kind=\"full\"} 100.65\n"
                        "gangq_cycle_seconds_count{kind=\"full\"} 4\n");
    /* default bounds, no labels */
    gq_metrics_free(m);
    m = gq_metrics_new();
    assert_int_equal(gq_metrics_histogram(m, "d_seconds", "D.", NULL, NULL, 0, &d, err,
                                          sizeof err), 0);
    gq_metrics_observe(d, 0.003);
    render(m, &b);
    assert_non_null(strstr(b.p, "d_seconds_bucket{le=\"0.001\"} 0\n"
                                "d_seconds_bucket{le=\"0.0025\"} 0\n"
                                "d_seconds_bucket{le=\"0.005\"} 1\n"));
    assert_non_null(strstr(b.p, "d_seconds_bucket{le=\"10\"} 1\n"
                                "d_seconds_bucket{le=\"+Inf\"} 1\n"
                                "d_seconds_sum 0.003\n"
                                "d_seconds_count 1\n"));
    /* bad bounds and a clash of bounds within a family */
    assert_int_equal(gq_metrics_histogram(m, "e_seconds", "", NULL, (double[]){1, 1}, 2,
                                          &h, err, sizeof err), GQ_EINVAL);
    assert_int_equal(gq_metrics_histogram(m, "d_seconds", "D.",
                                          (const char *[]){"a", "b", NULL}, bounds, 3, &h,
                                          err, sizeof err), GQ_EINVAL);
    gq_buf_release(&b);
    gq_metrics_free(m);
}

static void test_validation_and_limits(void **st)
{
    (void)st;
    struct gq_metrics *m = gq_metrics_new();
    struct gq_metric *h = NULL;
    struct gq_buf b;
    char err[128], name[64], longv[GQ_METRICS_LABEL_MAX + 2];
    double many[GQ_METRICS_MAX_BUCKETS + 1];
    int i, rc;

    assert_int_equal(gq_metrics_counter(m, "9bad", "", NULL, &h, err, sizeof err), GQ_EINVAL);
    assert_int_equal(gq_metrics_counter(m, "bad-name", "", NULL, &h, err, sizeof err),
                     GQ_EINVAL);
    assert_int_equal(gq_metrics_counter(m, "ok:name_1", "", NULL, &h, err, sizeof err), 0);
    assert_int_equal(gq_metrics_counter(m, "x", "", (const char *[]){"le", "1", NULL}, &h,
                                        err, sizeof err), GQ_EINVAL);
    assert_int_equal(gq_metrics_counter(m, "x", "", (const char *[]){"__x", "1", NULL}, &h,
                                        err, sizeof err), GQ_EINVAL);
    assert_int_equal(gq_metrics_counter(m, "x", "", (const char *[]){"a:b", "1", NULL}, &h,
                                        err, sizeof err), GQ_EINVAL);
    assert_int_equal(gq_metrics_counter(m, "x", "", (const char *[]){"a", NULL}, &h, err,
                                        sizeof err), GQ_EINVAL);
    assert_int_equal(gq_metrics_counter(m, "x", "",
                                        (const char *[]){"a", "1", "a", "2", NULL}, &h, err,
                                        sizeof err), GQ_EINVAL);
    assert_int_equal(gq_metrics_counter(m, "x", "",
                                        (const char *[]){"a", "1", "b", "2", "c", "3", "d",
                                                         "4", "e", "5", NULL}, &h, err,
                                        sizeof err), GQ_ELIMIT);
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    assert_int_equal(gq_metrics_counter(m, "x", "", (const char *[]){"a", longv, NULL}, &h,
                                        err, sizeof err), GQ_ELIMIT);
    longv[GQ_METRICS_LABEL_MAX] = '\0'; /* exactly the maximum: accepted */
    assert_int_equal(gq_metrics_counter(m, "x", "", (const char *[]){"a", longv, NULL}, &h,
                                        err, sizeof err), 0);
    for (i = 0; i <= GQ_METRICS_MAX_BUCKETS; i++)
        many[i] = i;
    assert_int_equal(gq_metrics_histogram(m, "hh", "", NULL, many, GQ_METRICS_MAX_BUCKETS + 1,
                                          &h, err, sizeof err), GQ_ELIMIT);
    assert_int_equal(gq_metrics_histogram(m, "hh", "", NULL, many, GQ_METRICS_MAX_BUCKETS, &h,
                                          err, sizeof err), 0);

    /* series cap: fill up with one family's label sets */
    for (i = 0, rc = 0; rc == 0 && i < GQ_METRICS_MAX_SERIES + 5; i++) {
        snprintf(name, sizeof name, "s%d", i);
        rc = gq_metrics_gauge(m, "series", "", (const char *[]){"i", name, NULL}, &h, err,
                              sizeof err);
    }
    assert_int_equal(rc, GQ_ELIMIT);
    assert_null(h);
    /* 3 series registered before the loop, so the loop added MAX-3 */
    assert_int_equal(i - 1, GQ_METRICS_MAX_SERIES - 3);

    /* no help text: no HELP line */
    gq_buf_init(&b, 1 << 20);
    render(m, &b);
    assert_non_null(strstr(b.p, "# TYPE ok:name_1 counter\nok:name_1 0\n# TYPE x counter\n"));
    assert_null(strstr(b.p, "# HELP ok:name_1"));
    gq_buf_release(&b);
    /* render into a too-small buffer reports the limit */
    gq_buf_init(&b, 100);
    assert_int_equal(gq_metrics_render(m, &b), GQ_ELIMIT);
    gq_buf_release(&b);
    gq_metrics_free(m);

    /* family cap */
    m = gq_metrics_new();
    for (i = 0, rc = 0; rc == 0 && i < GQ_METRICS_MAX_FAMILIES + 5; i++) {
        snprintf(name, sizeof name, "f%d", i);
        rc = gq_metrics_counter(m, name, "", NULL, &h, err, sizeof err);
    }
    assert_int_equal(rc, GQ_ELIMIT);
    assert_int_equal(i - 1, GQ_METRICS_MAX_FAMILIES);
    gq_metrics_free(m);
    gq_metrics_free(NULL);
}

/* Label values from objects (team names, GPU types): escaped, invalid UTF-8
 * replaced, found again by hash, bounded per family with refusals counted. */
static void test_tenant_labels(void **st)
{
    (void)st;
    struct gq_metrics *m = gq_metrics_new();
    struct gq_metric *a = NULL, *a2 = NULL, *h = NULL;
    struct gq_buf b;
    char err[128], team[32];
    int i, rc;
    gq_buf_init(&b, 1 << 20);
    assert_non_null(m);
    /* a declared family renders HELP and TYPE before it has a series */
    assert_int_equal(gq_metrics_family(m, GQ_METRIC_GAUGE, "gangq_team_used_gpus",
                                       "GPUs used.", NULL, 0, 3, err, sizeof err), 0);
    assert_string_equal(render(m, &b), "# HELP gangq_team_used_gpus GPUs used.\n"
                                       "# TYPE gangq_team_used_gpus gauge\n");
    /* declaring it again with another type is refused */
    assert_int_equal(gq_metrics_family(m, GQ_METRIC_COUNTER, "gangq_team_used_gpus", "",
                                       NULL, 0, 3, err, sizeof err), GQ_EINVAL);
    /* escaping: quote, backslash, newline; a stray 0xff and a truncated
     * sequence become U+FFFD; valid multibyte text stays */
    assert_int_equal(gq_metrics_gauge(m, "gangq_team_used_gpus", "",
                                      (const char *[]){"team", "q\"b\\s\nn", "gpu_type",
                                                       "H\xff" "100 \xc3\xa9\xe2\x82", NULL},
                                      &a, err, sizeof err), 0);
    gq_metrics_set(a, 2.5);
    assert_string_equal(render(m, &b),
                        "# HELP gangq_team_used_gpus GPUs used.\n"
                        "# TYPE gangq_team_used_gpus gauge\n"
                        "gangq_team_used_gpus{team=\"q\\\"b\\\\s\\nn\",gpu_type=\"H\xef\xbf\xbd"
                        "100 \xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\"} 2.5\n");
    assert_int_equal(gq_metrics_gauge(m, "gangq_team_used_gpus", "",
                                      (const char *[]){"team", "q\"b\\s\nn", "gpu_type",
                                                       "H\xff" "100 \xc3\xa9\xe2\x82", NULL},
                                      &a2, err, sizeof err), 0);
    assert_ptr_equal(a, a2);
    /* the family bound: 3 series, then refusals, counted and rendered */
    for (i = 0, rc = 0; i < 5; i++) {
        snprintf(team, sizeof team, "t%d", i);
        h = NULL;
        rc = gq_metrics_gauge(m, "gangq_team_used_gpus", "",
                              (const char *[]){"team", team, "gpu_type", "A100", NULL}, &h,
                              err, sizeof err);
        if (i < 2)
            assert_int_equal(rc, 0);
        else
            assert_int_equal(rc, GQ_ELIMIT);
    }
    assert_null(h);
    assert_non_null(strstr(err, "more than 3 series"));
    assert_int_equal(gq_metrics_series(m, "gangq_team_used_gpus"), 3);
    assert_int_equal(gq_metrics_dropped(m, "gangq_team_used_gpus"), 3);
    render(m, &b);
    assert_non_null(strstr(b.p, "# TYPE gangq_metrics_series_dropped_total counter\n"
                                "gangq_metrics_series_dropped_total{metric=\"gangq_team_used_gpus\"} 3\n"));
    assert_null(strstr(b.p, "team=\"t2\""));
    /* clear: the series go, the family stays, new ones fit again */
    gq_metrics_clear(m, "gangq_team_used_gpus");
    gq_metrics_clear(m, "no_such_family");
    assert_int_equal(gq_metrics_series(m, "gangq_team_used_gpus"), 0);
    render(m, &b);
    assert_non_null(strstr(b.p, "# TYPE gangq_team_used_gpus gauge\n# HELP"));
    assert_null(strstr(b.p, "team=\"t0\""));
    assert_int_equal(gq_metrics_gauge(m, "gangq_team_used_gpus", "",
                                      (const char *[]){"team", "t4", "gpu_type", "A100", NULL},
                                      &h, err, sizeof err), 0);
    gq_metrics_set(h, 1);
    assert_non_null(strstr(render(m, &b), "gangq_team_used_gpus{team=\"t4\",gpu_type=\"A100\"} 1\n"));
    /* an invalid label set does not leave an empty family behind */
    assert_int_equal(gq_metrics_counter(m, "gangq_new_total", "",
                                        (const char *[]){"le", "1", NULL}, &h, err, sizeof err),
                     GQ_EINVAL);
    assert_null(strstr(render(m, &b), "gangq_new_total"));
    /* many label sets: found again (hash), total bound still holds */
    gq_metrics_free(m);
    m = gq_metrics_new();
    for (i = 0; i < 2000; i++) {
        snprintf(team, sizeof team, "team-%d", i);
        assert_int_equal(gq_metrics_counter(m, "gangq_admissions_total", "",
                                            (const char *[]){"team", team, NULL}, &h, err,
                                            sizeof err), 0);
        gq_metrics_add(h, i);
    }
    assert_int_equal(gq_metrics_counter(m, "gangq_admissions_total", "",
                                        (const char *[]){"team", "team-1234", NULL}, &h, err,
                                        sizeof err), 0);
    assert_true(gq_metrics_value(h) == 1234);
    gq_buf_release(&b);
    gq_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_gauge),
        cmocka_unit_test(test_labels_grouped_and_escaped),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_validation_and_limits),
        cmocka_unit_test(test_tenant_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
