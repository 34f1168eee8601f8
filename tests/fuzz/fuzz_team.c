/* libFuzzer target: JSON bytes -> Team decode/default/validate, team status
 * encode, and PriorityClass decode on the same object. */
// fuzz-sources: common/gq.c common/buf.c api/*.c
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct api_errors errs;
    struct api_team t;
    struct api_priorityclass pc;
    struct api_team_status ts;
    cJSON *obj = NULL, *enc;
    int i;

    api_errors_init(&errs);
    if (api_json_parse((const char *)data, size, &obj, &errs))
        return 0;
    api_team_decode(obj, &t, &errs);
    api_team_default(&t);
    api_team_validate(&t, &errs);
    memset(&ts, 0, sizeof ts);
    for (i = 0; i < t.nquota; i++)
        ts.quota += t.quota[i].gpus > 0 && t.quota[i].gpus < 1000000 ? t.quota[i].gpus : 0;
    ts.used = ts.borrowed = ts.pending = ts.running = t.nquota;
    enc = api_team_status_encode(&ts);
    cJSON_Delete(enc);
    /* the status as read back (conditions, observedGeneration) encodes again */
    api_team_status_decode(obj, &ts, &errs);
    enc = api_team_status_encode(&ts);
    cJSON_Delete(enc);
    api_priorityclass_decode(obj, &pc, &errs);
    cJSON_Delete(obj);
    return 0;
}
