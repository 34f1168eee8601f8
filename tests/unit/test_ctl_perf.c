/* Unit tests for the controller's lookup structures added for CPU per
 * admission (controller/ctl_snapshot.c): node lookup by name in a snapshot
 * (sorted index) must give the same answers as a scan, for nodes given in
 * any order, including unknown names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctl.h"

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
    struct ctl_snapin in = {&cfg, 1, nodes, NN, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0};
    struct ctl_snap s;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snap_node_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
