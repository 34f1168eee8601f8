/* libFuzzer target: JSON bytes -> cJSON -> GPUJob decode, default, validate,
 * Team rules, pod template sanitizing, status decode + encode. Must never
 * crash, leak or trip a sanitizer. */
// fuzz-sources: common/gq.c common/buf.c api/*.c
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api.h"
#include "gq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct api_errors errs;
    struct api_gpujob job, copy;
    struct api_gpujob_status st;
    struct api_team team;
    struct api_priorityclass pc;
    struct api_lookup lk;
    cJSON *obj = NULL, *enc;
    char line[512];
    int i;

    api_errors_init(&errs);
    if (api_json_parse((const char *)data, size, &obj, &errs))
        return 0;
    memset(&team, 0, sizeof team);
    gq_strlcpy(team.meta.name, "t", sizeof team.meta.name);
    team.nnamespaces = 1;
    gq_strlcpy(team.namespaces[0], "default", sizeof team.namespaces[0]);
    memset(&pc, 0, sizeof pc);
    gq_strlcpy(pc.name, "high", sizeof pc.name);
    pc.value = 7;
    lk.teams = &team;
    lk.nteams = 1;
    lk.pcs = &pc;
    lk.npcs = 1;

    api_gpujob_init(&job);
    api_gpujob_init(&copy);
    api_gpujob_decode(obj, &job, &errs);
    api_gpujob_default(&job, &lk);
    api_gpujob_validate(&job, NULL, &errs);
    (void)api_gpujob_tenancy(&job, &lk, &errs);
    if (job.template) {
        cJSON *t = cJSON_Duplicate(job.template, 1);
        api_pod_template_sanitize(t, 5);
        cJSON_Delete(t);
    }
    (void)api_gpujob_gpus(&job);
    api_gpujob_copy(&copy, &job);
    for (i = 0; i < errs.n; i++)
        api_error_format(&errs, i, line, sizeof line);
    api_gpujob_status_decode(obj, &st, &errs);
    enc = api_gpujob_status_encode(&st);
    cJSON_Delete(enc);
    api_gpujob_release(&copy);
    api_gpujob_release(&job);
    cJSON_Delete(obj);
    return 0;
}
