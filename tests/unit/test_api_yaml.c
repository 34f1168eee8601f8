/* Unit tests for common/yamljson: YAML 1.2 core schema scalars, structure,
 * multi-document streams, limits and error positions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "buf.h"
#include "gq.h"
#include "yamljson.h"

static cJSON *doc1(const char *y)
{
    cJSON *d = NULL;
    char err[256] = "";
    int rc = gq_yaml_parse_doc(y, strlen(y), "t.yaml", &d, err, sizeof err);
    if (rc)
        fprintf(stderr, "unexpected error: %s\n", err);
    assert_int_equal(rc, 0);
    assert_non_null(d);
    return d;
}

static void expect_err(const char *y, int want_rc, const char *want_msg)
{
    cJSON *d = NULL;
    char err[256] = "";
    int rc = gq_yaml_parse_stream(y, strlen(y), "x.yaml", &d, err, sizeof err);
    assert_int_equal(rc, want_rc);
    assert_null(d);
    if (strncmp(err, want_msg, strlen(want_msg)) != 0)
        fprintf(stderr, "got error: %s\nwant prefix: %s\n", err, want_msg);
    assert_true(strncmp(err, want_msg, strlen(want_msg)) == 0);
}

static void test_scalars(void **st)
{
    (void)st;
    cJSON *d = doc1("a: ~\nb: null\nc: NULL\nd:\ne: true\nf: False\ng: 12\nh: -3\n"
                    "i: 1.5\nj: 1e3\nk: 0x1F\nl: 0o17\nm: .inf\nn: -.Inf\no: .nan\n"
                    "p: \"12\"\nq: 'true'\nr: yes\ns: 500m\nt: 16Gi\nu: !!str 42\n"
                    "v: |\n  line1\n  line2\nw: 1.2.3\nx: +7\ny: .5\nz: on\n");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "a")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "b")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "c")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "d")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(d, "e")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(d, "f")));
    assert_true(cJSON_GetObjectItem(d, "g")->valuedouble == 12);
    assert_true(cJSON_GetObjectItem(d, "h")->valuedouble == -3);
    assert_true(cJSON_GetObjectItem(d, "i")->valuedouble == 1.5);
    assert_true(cJSON_GetObjectItem(d, "j")->valuedouble == 1000);
    assert_true(cJSON_GetObjectItem(d, "k")->valuedouble == 31);
    assert_true(cJSON_GetObjectItem(d, "l")->valuedouble == 15);
    assert_true(isinf(cJSON_GetObjectItem(d, "m")->valuedouble));
    assert_true(cJSON_GetObjectItem(d, "n")->valuedouble < 0);
    assert_true(isnan(cJSON_GetObjectItem(d, "o")->valuedouble));
    assert_string_equal(cJSON_GetObjectItem(d, "p")->valuestring, "12");
    assert_string_equal(cJSON_GetObjectItem(d, "q")->valuestring, "true");
    assert_string_equal(cJSON_GetObjectItem(d, "r")->valuestring, "yes"); /* 1.2: not a bool */
    assert_string_equal(cJSON_GetObjectItem(d, "s")->valuestring, "500m");
    assert_string_equal(cJSON_GetObjectItem(d, "t")->valuestring, "16Gi");
    assert_string_equal(cJSON_GetObjectItem(d, "u")->valuestring, "42");
    assert_string_equal(cJSON_GetObjectItem(d, "v")->valuestring, "line1\nline2\n");
    assert_string_equal(cJSON_GetObjectItem(d, "w")->valuestring, "1.2.3");
    assert_true(cJSON_GetObjectItem(d, "x")->valuedouble == 7);
    assert_true(cJSON_GetObjectItem(d, "y")->valuedouble == 0.5);
    assert_string_equal(cJSON_GetObjectItem(d, "z")->valuestring, "on");
    cJSON_Delete(d);
}

static void test_structure(void **st)
{
    (void)st;
    cJSON *d = doc1("spec:\n  list: [1, two, {k: v}]\n  map: {a: [], b: {}}\n  seq:\n  - x\n  - - y\n");
    char *txt = cJSON_PrintUnformatted(d);
    assert_string_equal(txt, "{\"spec\":{\"list\":[1,\"two\",{\"k\":\"v\"}],\"map\":{\"a\":[],\"b\":{}},"
                             "\"seq\":[\"x\",[\"y\"]]}}");
    free(txt);
    cJSON_Delete(d);
    /* keys stay strings even when they look like numbers or booleans */
    d = doc1("1: a\ntrue: b\n");
    assert_string_equal(cJSON_GetObjectItem(d, "1")->valuestring, "a");
    assert_string_equal(cJSON_GetObjectItem(d, "true")->valuestring, "b");
    cJSON_Delete(d);
}

static void test_multidoc(void **st)
{
    (void)st;
    const char *y = "a: 1\n---\nb: 2\n---\n---\n# only a comment\nc: 3\n";
    cJSON *docs = NULL;
    int lines[8] = {0};
    char err[256];
    assert_int_equal(gq_yaml_parse_stream_lines(y, strlen(y), "m.yaml", &docs, lines, 8, err, sizeof err), 0);
    assert_int_equal(cJSON_GetArraySize(docs), 4);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(docs, 0), "a")->valuedouble == 1);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(docs, 1), "b")->valuedouble == 2);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(docs, 2)));
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(docs, 3), "c")->valuedouble == 3);
    assert_int_equal(lines[0], 1);
    assert_int_equal(lines[1], 3);
    assert_int_equal(lines[3], 7);
    cJSON_Delete(docs);
    /* empty stream: no documents */
    assert_int_equal(gq_yaml_parse_stream("", 0, "e", &docs, err, sizeof err), 0);
    assert_int_equal(cJSON_GetArraySize(docs), 0);
    cJSON_Delete(docs);
    /* parse_doc refuses several documents */
    assert_int_equal(gq_yaml_parse_doc("a: 1\n---\nb: 2\n", 14, "two.yaml", &docs, err, sizeof err), GQ_EPARSE);
    assert_string_equal(err, "two.yaml: expected one YAML document, found 2");
    assert_null(docs);
}

static void test_errors(void **st)
{
    (void)st;
    expect_err("a: 1\nb: [1, 2\n", GQ_EPARSE, "x.yaml:3:1: did not find expected ',' or ']'");
    expect_err("a: 1\n  b: 2\n", GQ_EPARSE, "x.yaml:2:4: mapping values are not allowed in this context");
    expect_err("a: 1\na: 2\n", GQ_EPARSE, "x.yaml:2:1: duplicate mapping key \"a\"");
    expect_err("a: &x 1\nb: *x\n", GQ_EPARSE, "x.yaml:1:4: anchors and aliases are not supported");
    expect_err("? [a]\n: 1\n", GQ_EPARSE, "x.yaml:1:3: mapping keys must be scalars");
    expect_err("a: \"\\0\"\n", GQ_EPARSE, "x.yaml:1:4: scalar contains a NUL character");
    expect_err("a: \"unterminated\n", GQ_EPARSE, "x.yaml:2:1: found unexpected end of stream");
    expect_err("\tkey: v\n", GQ_EPARSE, "x.yaml:1:1: found character that cannot start any token");
}

static void test_depth_limit(void **st)
{
    (void)st;
    struct gq_buf b;
    int i;
    cJSON *d = NULL;
    char err[256];
    gq_buf_init(&b, 1 << 16);
    for (i = 0; i < GQ_YAML_MAX_DEPTH; i++)
        assert_int_equal(gq_buf_puts(&b, "["), 0);
    for (i = 0; i < GQ_YAML_MAX_DEPTH; i++)
        assert_int_equal(gq_buf_puts(&b, "]"), 0);
    assert_int_equal(gq_yaml_parse_stream(b.p, b.len, "deep", &d, err, sizeof err), 0);
    cJSON_Delete(d);
    gq_buf_reset(&b);
    for (i = 0; i < GQ_YAML_MAX_DEPTH + 1; i++)
        assert_int_equal(gq_buf_puts(&b, "["), 0);
    for (i = 0; i < GQ_YAML_MAX_DEPTH + 1; i++)
        assert_int_equal(gq_buf_puts(&b, "]"), 0);
    assert_int_equal(gq_yaml_parse_stream(b.p, b.len, "deep", &d, err, sizeof err), GQ_ELIMIT);
    assert_string_equal(err, "deep:1:65: nesting deeper than 64");
    assert_null(d);
    gq_buf_release(&b);
    /* size limit is checked before parsing */
    assert_int_equal(gq_yaml_parse_stream("a", (size_t)GQ_YAML_MAX_BYTES + 1, "big", &d, err, sizeof err), GQ_ELIMIT);
}

static void test_load_file(void **st)
{
    (void)st;
    cJSON *d = NULL;
    char err[256];
    char path[] = "/tmp/gq_yaml_test_XXXXXX";
    int fd = mkstemp(path);
    FILE *f;
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fputs("kind: Team\nmetadata:\n  name: a\n", f);
    fclose(f);
    assert_int_equal(gq_yaml_load_file(path, &d, err, sizeof err), 0);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(d, 0), "kind")->valuestring, "Team");
    cJSON_Delete(d);
    remove(path);
    assert_int_equal(gq_yaml_load_file("/nonexistent/file.yaml", &d, err, sizeof err), GQ_ENOTFOUND);
    assert_string_equal(err, "/nonexistent/file.yaml: No such file or directory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_multidoc),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_load_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
