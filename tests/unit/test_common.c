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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_i64),
        cmocka_unit_test(test_buf_limit),
        cmocka_unit_test(test_buf_json),
    };
    return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
