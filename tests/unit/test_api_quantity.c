/* Table tests for api/quantity: Kubernetes quantity syntax, scaling with
 * round-up, and overflow refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gq.h"
#include "quantity.h"

struct qcase {
    const char *in;
    int64_t milli; /* expected milli value */
    int64_t value; /* expected unit value (rounded up) */
};

static const struct qcase good[] = {
    {"0", 0, 0},
    {"1", 1000, 1},
    {"500m", 500, 1},
    {"1.5", 1500, 2},
    {"0.1", 100, 1},
    {".5", 500, 1},
    {"1.", 1000, 1},
    {"+2", 2000, 2},
    {"1e3", 1000000, 1000},
    {"1E3", 1000000, 1000},
    {"1e-3", 1, 1},
    {"2k", 2000000, 2000},
    {"100M", 100000000000LL, 100000000},
    {"16Gi", 17179869184000LL, 17179869184LL},
    {"1Ki", 1024000, 1024},
    {"1.5Ki", 1536000, 1536},
    {"0.5Gi", 536870912000LL, 536870912},
    {"1Mi", 1048576000, 1048576},
    {"1Ti", 1099511627776000LL, 1099511627776LL},
    {"1Pi", 1125899906842624000LL, 1125899906842624LL},
    {"0.1m", 1, 1},          /* rounds up, like MilliValue() */
    {"100n", 1, 1},
    {"1u", 1, 1},
    {"250u", 1, 1},
    {"3000u", 3, 1},
    {"1G", 1000000000000LL, 1000000000},
    {"1T", 1000000000000000LL, 1000000000000LL},
    {"1P", 1000000000000000000LL, 1000000000000000LL},
    {"1E", -1, 1000000000000000000LL}, /* milli overflows: checked below */
    {"0.000000001", 1, 1},
    {"00012", 12000, 12},
    {"12.340", 12340, 13},
    {"0e2000", 0, 0},
    {"1e-2000", 1, 1},
    {"-1", -1000, -1},
    {"-1.5", -1500, -1},    /* ceiling of -1.5 is -1 */
};

static void test_good(void **st)
{
    (void)st;
    size_t i;
    for (i = 0; i < GQ_ARRAY_LEN(good); i++) {
        int64_t v = 0;
        char err[200] = "";
        int rc = api_quantity_value(good[i].in, &v, err, sizeof err);
        if (rc || v != good[i].value)
            fprintf(stderr, "value(%s): rc=%d v=%lld err=%s\n", good[i].in, rc, (long long)v, err);
        assert_int_equal(rc, 0);
        assert_true(v == good[i].value);
        if (good[i].milli == -1) {
            assert_int_equal(api_quantity_milli(good[i].in, &v, err, sizeof err), GQ_EINVAL);
            continue;
        }
        rc = api_quantity_milli(good[i].in, &v, err, sizeof err);
        if (rc || v != good[i].milli)
            fprintf(stderr, "milli(%s): rc=%d v=%lld err=%s\n", good[i].in, rc, (long long)v, err);
        assert_int_equal(rc, 0);
        assert_true(v == good[i].milli);
    }
}

struct bcase {
    const char *in;
    const char *msg;
};

static const struct bcase bad[] = {
    {"", "invalid quantity \"\": empty"},
    {"abc", "invalid quantity \"abc\": must start with a number"},
    {"m", "invalid quantity \"m\": must start with a number"},
    {".", "invalid quantity \".\": must start with a number"},
    {"-", "invalid quantity \"-\": must start with a number"},
    {"2kb", "invalid quantity \"2kb\": unknown suffix \"kb\""},
    {"2K", "invalid quantity \"2K\": unknown suffix \"K\""},
    {"1e", "invalid quantity \"1e\": unknown suffix \"e\""},
    {"1e+", "invalid quantity \"1e+\": unknown suffix \"e+\""},
    {"1ex", "invalid quantity \"1ex\": unknown suffix \"ex\""},
    {"1.2.3", "invalid quantity \"1.2.3\": unknown suffix \".3\""},
    {"1 Gi", "invalid quantity \"1 Gi\": unknown suffix \" Gi\""},
    {"1gi", "invalid quantity \"1gi\": unknown suffix \"gi\""},
    {"16GiB", "invalid quantity \"16GiB\": unknown suffix \"GiB\""},
    {"10000000000000000000", "quantity \"10000000000000000000\" is too large"},
    {"9999999999Ei", "quantity \"9999999999Ei\" is too large"},
    {"8Ei", "quantity \"8Ei\" is too large"},
    {"1e19", "quantity \"1e19\" is too large"},
    {"1e999999999999", "quantity \"1e999999999999\" is too large"},
    {"1e99999999999999999999", "invalid quantity \"1e99999999999999999999\": unknown suffix \"e99999999999999999999\""},
    {"123456789012345678901234567890123456789", "quantity \"123456789012345678901234567890123456789\" is too large"},
};

static void test_bad(void **st)
{
    (void)st;
    size_t i;
    for (i = 0; i < GQ_ARRAY_LEN(bad); i++) {
        int64_t v = 77;
        char err[200] = "";
        int rc = api_quantity_value(bad[i].in, &v, err, sizeof err);
        if (rc != GQ_EINVAL || strcmp(err, bad[i].msg))
            fprintf(stderr, "bad(%s): rc=%d err=%s\n", bad[i].in, rc, err);
        assert_int_equal(rc, GQ_EINVAL);
        assert_string_equal(err, bad[i].msg);
        assert_true(v == 77); /* output untouched on error */
    }
}

static void test_limits(void **st)
{
    (void)st;
    int64_t v;
    char err[200];
    assert_int_equal(api_quantity_value("9223372036854775807", &v, err, sizeof err), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(api_quantity_value("9223372036854775808", &v, err, sizeof err), GQ_EINVAL);
    assert_int_equal(api_quantity_value("-9223372036854775808", &v, err, sizeof err), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(api_quantity_milli("9223372036854775807m", &v, err, sizeof err), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(api_quantity_milli("9223372036854776", &v, err, sizeof err), GQ_EINVAL);
    assert_int_equal(api_quantity_value("7Ei", &v, err, sizeof err), 0);
    assert_true(v == 7LL * 1152921504606846976LL);
    /* long input refused before any arithmetic */
    assert_int_equal(api_quantity_value("00000000000000000000000000000000000000000000000000000000000000001", &v, err, sizeof err), GQ_EINVAL);
    assert_string_equal(err, "invalid quantity \"00000000000000000000...\": longer than 64 characters");
    assert_int_equal(api_quantity_value(NULL, &v, err, sizeof err), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
