/* Unit tests of the pod watch's delete hook (controller/ctl_cycle.c,
 * ctl_pod_deleted). A deleted gangq pod is remembered on its job's memo:
 * by name (gone_pod: a placed replica absent from the cache counts as lost
 * only when named so), and, when it had Succeeded, as a copy in gone_ok, so
 * that a replica which finished while its delete (a preemption, a suspend)
 * was on the way still completes its job (job_succeeded_meanwhile). The
 * copies are bounded (CTL_GONE_OK_MAX, the oldest dropped). Pods of no job,
 * or of a job the controller never looked at, leave nothing behind. */
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

static cJSON *pod(const char *ns, const char *job, const char *name, const char *phase)
{
    char text[512];
    if (job)
        snprintf(text, sizeof text,
                 "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"labels\":{\"" CTL_LABEL_JOB
                 "\":\"%s\"}},\"status\":{\"phase\":\"%s\"}}",
                 ns, name, job, phase);
    else
        snprintf(text, sizeof text, "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\"},\"status\":{\"phase\":\"%s\"}}",
                 ns, name, phase);
    cJSON *p = cJSON_Parse(text);
    assert_non_null(p);
    return p;
}

static void deleted(struct gq_ctl *c, const char *ns, const char *job, const char *name, const char *phase)
{
    cJSON *p = pod(ns, job, name, phase);
    ctl_pod_deleted(c, p);
    cJSON_Delete(p); /* the hook keeps copies, never the informer's object */
}

static void test_pod_deleted(void **st)
{
    (void)st;
    struct gq_ctl *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    struct ctl_memo *m = ctl_memo_get(&c->memo, "team-a/train", 1);
    assert_non_null(m);

    /* a running replica deleted: named, not kept */
    deleted(c, "team-a", "train", "train-1-0", "Running");
    assert_string_equal(m->pods.gone_pod, "train-1-0");
    assert_null(m->pods.gone_ok);

    /* a replica deleted after it Succeeded: named and kept as a copy */
    deleted(c, "team-a", "train", "train-1-1", "Succeeded");
    assert_string_equal(m->pods.gone_pod, "train-1-1");
    assert_non_null(m->pods.gone_ok);
    assert_int_equal(cJSON_GetArraySize(m->pods.gone_ok), 1);
    const cJSON *kept = cJSON_GetArrayItem(m->pods.gone_ok, 0);
    assert_string_equal(ctl_obj_str(kept, "metadata", "name"), "train-1-1");
    assert_string_equal(ctl_obj_str(kept, "status", "phase"), "Succeeded");

    /* another namespace's job of the same name, a pod of no job, a job never
     * looked at: nothing changes here, and no memo is made for them */
    deleted(c, "team-b", "train", "train-1-2", "Succeeded");
    deleted(c, "team-a", NULL, "loose", "Succeeded");
    deleted(c, "team-a", "other", "other-1-0", "Succeeded");
    assert_string_equal(m->pods.gone_pod, "train-1-1");
    assert_int_equal(cJSON_GetArraySize(m->pods.gone_ok), 1);
    assert_null(ctl_memo_get(&c->memo, "team-b/train", 0));
    assert_null(ctl_memo_get(&c->memo, "team-a/other", 0));
    assert_int_equal(c->memo.n, 1);

    /* bounded: past CTL_GONE_OK_MAX the oldest copies go */
    char name[64];
    for (int i = 0; i < CTL_GONE_OK_MAX + 5; i++) {
        snprintf(name, sizeof name, "train-2-%d", i);
        deleted(c, "team-a", "train", name, "Succeeded");
    }
    assert_int_equal(cJSON_GetArraySize(m->pods.gone_ok), CTL_GONE_OK_MAX);
    assert_string_equal(ctl_obj_str(cJSON_GetArrayItem(m->pods.gone_ok, 0), "metadata", "name"), "train-2-5");
    snprintf(name, sizeof name, "train-2-%d", CTL_GONE_OK_MAX + 4);
    assert_string_equal(ctl_obj_str(cJSON_GetArrayItem(m->pods.gone_ok, CTL_GONE_OK_MAX - 1), "metadata", "name"),
                        name);
    assert_string_equal(m->pods.gone_pod, name);

    ctl_memo_table_release(&c->memo);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_deleted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
