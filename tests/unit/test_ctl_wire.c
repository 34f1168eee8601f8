/* Unit tests of the controller's status lane rule (controller/ctl_wire.c,
 * ctl_status_lane_state): a status patch goes in the normal lane, never
 * refused by a full low lane, when what it says for the lanes differs from
 * what the object shows. A state change does; so does an invalid spec
 * reported on a job that stays Queued or Preempted (the user's error is a
 * decision); a new wait message or position of the same state does not.
 * (The actuator ranks lane states ending in CTL_ACT_STATE_INVALID after
 * other state changes: test_ctl_act.c, test_status_patch.) */
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

static int transition(const char *known_state, const char *known_reason, const char *state, const char *reason)
{
    char a[32], b[32];
    ctl_status_lane_state(known_state, known_reason && !strcmp(known_reason, "Invalid"), a, sizeof(a));
    ctl_status_lane_state(state, reason && !strcmp(reason, "Invalid"), b, sizeof(b));
    return strcmp(a, b) != 0;
}

static void test_lane_state_rule(void **st)
{
    (void)st;
    /* a wait reason of the same state is cosmetic */
    assert_false(transition("Queued", NULL, "Queued", "Quota"));
    assert_false(transition("Queued", "Quota", "Queued", "Nodes"));
    assert_false(transition("Preempted", "Nodes", "Preempted", "Preempting"));
    /* a state change is a transition */
    assert_true(transition("Queued", "Quota", "Admitted", NULL));
    assert_true(transition("Running", NULL, "Succeeded", NULL));
    /* an invalid spec on a job that stays Queued or Preempted is one too, and
     * so is its repair; the same invalid spec again is not */
    assert_true(transition("Queued", NULL, "Queued", "Invalid"));
    assert_true(transition("Queued", "Quota", "Queued", "Invalid"));
    assert_true(transition("Preempted", "Nodes", "Preempted", "Invalid"));
    assert_true(transition("Queued", "Invalid", "Queued", "Quota"));
    assert_false(transition("Queued", "Invalid", "Queued", "Invalid"));
    /* a job failed for its spec: Failed, reported as invalid by the caller's
     * flag; after a restart the object shows plain Failed (one more write,
     * which the unchanged status then skips) */
    assert_true(transition("Queued", "Invalid", "Failed", NULL));
    assert_true(transition("Queued", "Invalid", "Failed", "Invalid"));
    assert_false(transition("Failed", "Invalid", "Failed", "Invalid"));
}

static void test_lane_state_bounded(void **st)
{
    (void)st;
    char out[32];
    ctl_status_lane_state("Preempted", 1, out, sizeof(out));
    assert_string_equal(out, "Preempted/Invalid"); /* the longest fits the memo's 32 bytes */
    ctl_status_lane_state(NULL, 1, out, sizeof(out));
    assert_string_equal(out, "");
    char small[8];
    memset(small, 'x', sizeof(small));
    ctl_status_lane_state("Queued", 1, small, sizeof(small));
    assert_int_equal(strlen(small), sizeof(small) - 1); /* cut, terminated */
    assert_memory_equal(small, "Queued/", 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lane_state_rule),
        cmocka_unit_test(test_lane_state_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
