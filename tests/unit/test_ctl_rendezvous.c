/* Unit tests of the rendezvous a multi-replica job's pods get (controller/ctl_act.c,
 * ctl.h "rendezvous"): hostnames, environment, the headless Service, name limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctl.h"

static cJSON *parse(const char *json)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    return o;
}

/* "NAME=VALUE ..." of a container's env */
static void env_text(const cJSON *ct, char *out, size_t len)
{
    const cJSON *e;
    size_t off = 0;
    out[0] = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ct, "env"))
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "value");
        int w = snprintf(out + off, len - off, "%s%s=%s", off ? " " : "", n ? n->valuestring : "?",
                         cJSON_IsString(v) ? v->valuestring : "(ref)");
        assert_true(w > 0 && (size_t)w < len - off);
        off += (size_t)w;
    }
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_multi_replica(void **st)
{
    (void)st;
    char env[1024];
    cJSON *spec = parse("{\"hostname\":\"mine\",\"initContainers\":[{\"name\":\"i\"}],"
                        "\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"MASTER_PORT\",\"value\":\"1\"},"
                        "{\"name\":\"RANK\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"x\"}}}]},"
                        "{\"name\":\"b\",\"env\":null},{\"name\":\"c\",\"env\":\"bad\"}]}");
    assert_int_equal(ctl_rdv_apply(spec, "ml", "train", 2, 4, 29500), 0);
    assert_string_equal(str(spec, "hostname"), "train-2");
    assert_string_equal(str(spec, "subdomain"), "train");
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(spec, "containers");
    env_text(cJSON_GetArrayItem(cs, 0), env, sizeof(env));
    /* the template's MASTER_PORT and RANK (even a valueFrom) are kept, once */
    assert_string_equal(env, "MASTER_PORT=1 RANK=(ref) MASTER_ADDR=train-0.train.ml.svc WORLD_SIZE=4 NODE_RANK=2 "
                             "GANGQ_REPLICA_INDEX=2 GANGQ_REPLICA_COUNT=4 GANGQ_MASTER_ADDR=train-0.train.ml.svc "
                             "GANGQ_MASTER_PORT=29500 GANGQ_JOB_NAME=train");
    const char *all = "MASTER_ADDR=train-0.train.ml.svc MASTER_PORT=29500 WORLD_SIZE=4 RANK=2 NODE_RANK=2 "
                      "GANGQ_REPLICA_INDEX=2 GANGQ_REPLICA_COUNT=4 GANGQ_MASTER_ADDR=train-0.train.ml.svc "
                      "GANGQ_MASTER_PORT=29500 GANGQ_JOB_NAME=train";
    env_text(cJSON_GetArrayItem(cs, 1), env, sizeof(env));
    assert_string_equal(env, all); /* env: null replaced */
    assert_string_equal(str(cJSON_GetArrayItem(cs, 2), "env"), "bad"); /* not an array: untouched */
    env_text(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "initContainers"), 0), env, sizeof(env));
    assert_string_equal(env, all);
    /* applying twice adds nothing (same names) */
    assert_int_equal(ctl_rdv_apply(spec, "ml", "train", 2, 4, 29500), 0);
    env_text(cJSON_GetArrayItem(cs, 1), env, sizeof(env));
    assert_string_equal(env, all);
    cJSON_Delete(spec);
}

static void test_single_replica(void **st)
{
    (void)st;
    char env[1024];
    cJSON *spec = parse("{\"containers\":[{\"name\":\"a\"}]}");
    assert_int_equal(ctl_rdv_apply(spec, "ml", "solo", 0, 1, 12345), 0);
    assert_null(cJSON_GetObjectItemCaseSensitive(spec, "hostname"));
    assert_null(cJSON_GetObjectItemCaseSensitive(spec, "subdomain"));
    env_text(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0), env, sizeof(env));
    assert_string_equal(env, "MASTER_ADDR=localhost MASTER_PORT=12345 WORLD_SIZE=1 RANK=0 NODE_RANK=0 "
                             "GANGQ_REPLICA_INDEX=0 GANGQ_REPLICA_COUNT=1 GANGQ_MASTER_ADDR=localhost "
                             "GANGQ_MASTER_PORT=12345 GANGQ_JOB_NAME=solo");
    cJSON_Delete(spec);
}

static void test_names(void **st)
{
    (void)st;
    char why[256], env[1024], name[80];
    assert_true(ctl_rdv_dns_ok("train", 4, why, sizeof(why)));
    assert_string_equal(why, "");
    assert_false(ctl_rdv_dns_ok("1train", 4, why, sizeof(why))); /* a Service name starts with a letter */
    assert_non_null(strstr(why, "DNS-1035"));
    assert_false(ctl_rdv_dns_ok("train.v2", 4, why, sizeof(why)));
    assert_non_null(strstr(why, "'.' at 5"));
    assert_false(ctl_rdv_dns_ok("", 4, why, sizeof(why)));
    assert_false(ctl_rdv_dns_ok(NULL, 4, NULL, 0));
    /* 61 + "-9" = 63 fits; 61 + "-10" = 64 does not; 62 + "-1" = 64 does not */
    memset(name, 'a', 61);
    name[61] = 0;
    assert_true(ctl_rdv_dns_ok(name, 10, NULL, 0));
    assert_false(ctl_rdv_dns_ok(name, 11, why, sizeof(why)));
    assert_non_null(strstr(why, "would be 64 characters"));
    name[61] = 'a';
    name[62] = 0;
    assert_true(ctl_rdv_dns_ok(name, 1, NULL, 0)); /* a Service name: no hostname checked */
    assert_false(ctl_rdv_dns_ok(name, 2, NULL, 0));
    /* such a job: no hostname, no MASTER_ADDR, the rest */
    cJSON *spec = parse("{\"containers\":[{\"name\":\"a\"}]}");
    assert_int_equal(ctl_rdv_apply(spec, "ml", name, 1, 2, 29500), 0);
    assert_null(cJSON_GetObjectItemCaseSensitive(spec, "hostname"));
    assert_null(cJSON_GetObjectItemCaseSensitive(spec, "subdomain"));
    env_text(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0), env, sizeof(env));
    assert_null(strstr(env, "MASTER_ADDR"));
    assert_non_null(strstr(env, "WORLD_SIZE=2 RANK=1 NODE_RANK=1"));
    cJSON_Delete(spec);
}

static void test_service_and_port(void **st)
{
    (void)st;
    cJSON *svc = ctl_rdv_service("ml", "train", "u-1");
    assert_non_null(svc);
    char *txt = cJSON_PrintUnformatted(svc);
    assert_non_null(txt);
    assert_string_equal(txt, "{\"metadata\":{\"labels\":{\"gangq.io/job\":\"train\"},\"name\":\"train\",\"namespace\":\"ml\","
                             "\"ownerReferences\":[{\"apiVersion\":\"gangq.io/v1alpha1\",\"kind\":\"GPUJob\",\"name\":\"train\","
                             "\"uid\":\"u-1\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
                             "\"spec\":{\"selector\":{\"gangq.io/job\":\"train\"},\"clusterIP\":\"None\","
                             "\"publishNotReadyAddresses\":true},\"apiVersion\":\"v1\",\"kind\":\"Service\"}");
    free(txt);
    cJSON_Delete(svc);
    cJSON *job = parse("{\"spec\":{\"masterPort\":23456}}");
    assert_int_equal(ctl_rdv_port(job), 23456);
    cJSON_Delete(job);
    job = parse("{\"spec\":{\"masterPort\":70000}}");
    assert_int_equal(ctl_rdv_port(job), CTL_RDV_PORT_DEFAULT);
    cJSON_Delete(job);
    assert_int_equal(ctl_rdv_port(NULL), 29500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_replica),
        cmocka_unit_test(test_single_replica),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_service_and_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
