/* Unit tests for common/: error text, integer parsing, bounded buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "gq.h"

static void test_parse_i64(void **st)
{
    (void)st;
    int64_t v = 0;
    assert_int_equal(gq_parse_i64("42", (size_t)-1, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(gq_parse_i64("-9223372036854775808", (size_t)-1, &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(gq_parse_i64("9223372036854775808", (size_t)-1, &v), GQ_EINVAL);
    assert_int_equal(gq_parse_i64("12x", (size_t)-1, &v), GQ_EINVAL);
    assert_int_equal(gq_parse_i64("", (size_t)-1, &v), GQ_EINVAL);
    assert_int_equal(gq_parse_i64("-", (size_t)-1, &v), GQ_EINVAL);
    assert_int_equal(gq_parse_i64("123", 2, &v), 0);
    assert_int_equal(v, 12);
}

static void test_buf_limit(void **st)
{
    (void)st;
    struct gq_buf b;
    gq_buf_init(&b, 8);
    assert_int_equal(gq_buf_puts(&b, "abcd"), 0);
    assert_int_equal(gq_buf_puts(&b, "efgh"), 0);
    assert_int_equal(gq_buf_puts(&b, "i"), GQ_ELIMIT);
    assert_string_equal(b.p, "abcdefgh");
    gq_buf_consume(&b, 3);
    assert_string_equal(b.p, "defgh");
    assert_int_equal(gq_buf_printf(&b, "%d", 12345), GQ_ELIMIT);
    assert_int_equal(gq_buf_printf(&b, "%d", 123), 0);
    assert_string_equal(b.p, "defgh123");
    gq_buf_release(&b);
}

static void test_buf_json(void **st)
{
    (void)st;
    struct gq_buf b;
    gq_buf_init(&b, 100);
    assert_int_equal(gq_buf_json_str(&b, "a\"b\\c\n"), 0);
    assert_string_equal(b.p, "\"a\\\"b\\\\c\\u000a\"");
    gq_buf_release(&b);
}

static void test_parse_duration(void **st)
{
    (void)st;
    double d = 0;
    assert_int_equal(gq_parse_duration("90", &d), 0);
    assert_true(d == 90);
    assert_int_equal(gq_parse_duration("1.5h", &d), 0);
    assert_true(d == 5400);
    assert_int_equal(gq_parse_duration("1d2h3m4s5ms", &d), 0);
    assert_true(d > 93784.004 && d < 93784.006);
    assert_int_equal(gq_parse_duration("nan", &d), GQ_EINVAL);
    assert_int_equal(gq_parse_duration("inf", &d), GQ_EINVAL);
    assert_int_equal(gq_parse_duration("1e3s", &d), GQ_EINVAL);
    assert_int_equal(gq_parse_duration(".s", &d), GQ_EINVAL);
    assert_int_equal(gq_parse_duration("99999999999999999999d", &d), GQ_EINVAL);
}

static void test_parse_rfc3339(void **st)
{
    (void)st;
    double w = 0;
    assert_int_equal(gq_parse_rfc3339("1970-01-02T00:00:01.25Z", 0, &w), 0);
    assert_true(w == 86401.25);
    assert_int_equal(gq_parse_rfc3339("1970-01-01T02:00:00+02:00", 0, &w), 0);
    assert_true(w == 0);
    assert_int_equal(gq_parse_rfc3339("1970-01-02", 0, &w), GQ_EINVAL);
    assert_int_equal(gq_parse_rfc3339("1970-01-02", 1, &w), 0);
    assert_true(w == 86400);
    assert_int_equal(gq_parse_rfc3339("1970-01-01 00:00:10Z", 0, &w), GQ_EINVAL);
    assert_int_equal(gq_parse_rfc3339("1970-01-01 00:00:10Z", 1, &w), 0);
    assert_true(w == 10);
    assert_int_equal(gq_parse_rfc3339("1970-13-01T00:00:00Z", 1, &w), GQ_EINVAL);
    assert_int_equal(gq_parse_rfc3339("1970-01-01T00:00:00", 1, &w), GQ_EINVAL);
}

/* The events budget: burst at once, then rate per second; never above burst. */
static void test_rate(void **state)
{
    (void)state;
    struct gq_rate b;
    gq_rate_init(&b, 2, 3); /* 2 per second, burst 3 */
    int64_t t = 1000000;
    int n = 0;
    for (int i = 0; i < 10; i++)
        n += gq_rate_take(&b, t);
    assert_int_equal(n, 3);
    assert_int_equal(gq_rate_take(&b, t + 400), 0); /* 0.8 token */
    assert_int_equal(gq_rate_take(&b, t + 500), 1); /* 1.0 */
    assert_int_equal(gq_rate_take(&b, t + 500), 0);
    n = 0;
    for (int i = 0; i < 10; i++)
        n += gq_rate_take(&b, t + 60000); /* a minute idle refills to burst only */
    assert_int_equal(n, 3);
    assert_int_equal(gq_rate_take(&b, t), 0); /* the clock going back refills nothing */
    assert_int_equal(gq_rate_take(&b, t + 60400), 0);
    assert_int_equal(gq_rate_take(&b, t + 60500), 1); /* counted from the latest time seen */
    gq_rate_init(&b, 0, 0); /* no limit */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(gq_rate_take(&b, t), 1);
}

/* The write budget: decisions credit it, every write spends it, narrating
 * writes go out on credit or, with none, one per floor token. */
static void test_ledger(void **state)
{
    (void)state;
    struct gq_ledger l;
    struct gq_rate floor;
    int64_t t = 1000000;
    gq_ledger_init(&l, 10, 20); /* cap 10, debt at most 20 */
    gq_rate_init(&floor, 0.5, 1); /* a floor of 1 per 2 s */
    /* nothing credited: the floor lets one out, then none for 2 s */
    assert_int_equal(gq_ledger_take(&l, &floor, t), 1);
    gq_ledger_spend(&l, 1);
    assert_int_equal(gq_ledger_ready(&l, &floor, t + 1000), 0);
    assert_int_equal(gq_ledger_take(&l, &floor, t + 1000), 0);
    assert_int_equal(gq_ledger_wait_ms(&l, &floor, t + 1000), 1000);
    assert_int_equal(gq_ledger_take(&l, &floor, t + 2000), 1);
    gq_ledger_spend(&l, 1);
    /* an admission of one pod credits 3; its pod and status spend 2: the
     * two writes the floor let out are paid back first (credit -1), so
     * nothing narrates on credit yet */
    gq_ledger_credit(&l, 3);
    gq_ledger_spend(&l, 2);
    assert_true(l.credit < 1);
    assert_int_equal(gq_ledger_take(&l, &floor, t + 2500), 0); /* the floor's token was taken at 2000 */
    /* three more admissions whose writes spend 2 each: 2 to narrate */
    for (int i = 0; i < 3; i++) {
        gq_ledger_credit(&l, 3);
        gq_ledger_spend(&l, 2);
    }
    int n = 0;
    while (gq_ledger_take(&l, &floor, t + 2500) && n < 100) {
        gq_ledger_spend(&l, 1);
        n++;
    }
    assert_int_equal(n, 2);
    /* the credit stops at cap, the debt at debt_max */
    gq_ledger_credit(&l, 1000);
    assert_true(l.credit == 10);
    gq_ledger_spend(&l, 1000);
    assert_true(l.credit == -20);
    assert_int_equal(gq_ledger_wait_ms(&l, &floor, t + 3000), 1000); /* the floor's next token at 4000 */
    /* no floor: only credit lets a narrating write out */
    gq_ledger_init(&l, 10, 20);
    assert_int_equal(gq_ledger_take(&l, NULL, t), 0);
    assert_true(gq_ledger_wait_ms(&l, NULL, t) == INT64_MAX);
    gq_ledger_credit(&l, 1);
    assert_int_equal(gq_ledger_take(&l, NULL, t), 1);
    assert_int_equal(gq_ledger_wait_ms(&l, NULL, t), 0);
}

/* How long until the next token: 0 when one is there or there is no limit. */
/* A shared text: a copy of the given bytes (NUL added), readable as a C
 * string; freed with its last reference (ASan checks the block is freed
 * exactly once and not read after). */
static void test_sstr(void **state)
{
    (void)state;
    char src[] = "{\"status\":1}xyz";
    const char *a = gq_sstr_new(src, 12);
    assert_non_null(a);
    assert_string_equal(a, "{\"status\":1}");
    src[0] = 'X'; /* a copy, not the caller's bytes */
    assert_int_equal(a[0], '{');
    const char *b = gq_sstr_ref(a);
    assert_ptr_equal(a, b);
    gq_sstr_put(a);
    assert_string_equal(b, "{\"status\":1}"); /* one reference left */
    gq_sstr_put(b);
    gq_sstr_put(NULL);
    assert_null(gq_sstr_ref(NULL));
    const char *e = gq_sstr_new("", 0);
    assert_non_null(e);
    assert_string_equal(e, "");
    gq_sstr_put(e);
}

static void test_rate_wait(void **state)
{
    (void)state;
    struct gq_rate b;
    gq_rate_init(&b, 4, 1); /* 4 per second, burst 1 */
    int64_t t = 1000000;
    assert_int_equal(gq_rate_wait_ms(&b, t), 0);
    assert_int_equal(gq_rate_take(&b, t), 1);
    assert_int_equal(gq_rate_wait_ms(&b, t), 250);
    assert_int_equal(gq_rate_wait_ms(&b, t + 100), 150);
    assert_int_equal(gq_rate_wait_ms(&b, t + 250), 0);
    gq_rate_init(&b, 0, 0); /* no limit */
    assert_int_equal(gq_rate_take(&b, t), 1);
    assert_int_equal(gq_rate_wait_ms(&b, t), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_i64),
        cmocka_unit_test(test_buf_limit),
        cmocka_unit_test(test_buf_json),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_rfc3339),
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_rate_wait),
        cmocka_unit_test(test_sstr),
        cmocka_unit_test(test_ledger),
    };
    return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
