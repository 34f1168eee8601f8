/* libFuzzer target: YAML stream -> cJSON (common/yamljson), then every
 * document through the decoder of its kind, as `gangq validate` does. */
// fuzz-sources: common/gq.c common/buf.c common/yamljson.c api/*.c
// fuzz-seeds: examples/manifests/*.yaml examples/cluster/*.yaml crds/*.yaml
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *docs = NULL;
    const cJSON *doc;
    char err[512];
    char *txt;
    if (gq_yaml_parse_stream((const char *)data, size, "fuzz", &docs, err, sizeof err)) {
        if (docs)
            abort(); /* no tree on error */
        return 0;
    }
    txt = cJSON_PrintUnformatted(docs);
    free(txt);
    cJSON_ArrayForEach(doc, docs)
    {
        struct api_errors errs;
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "kind");
        api_errors_init(&errs);
        if (!cJSON_IsString(k))
            continue;
        if (!strcmp(k->valuestring, "GPUJob")) {
            struct api_gpujob job;
            api_gpujob_init(&job);
            api_gpujob_decode(doc, &job, &errs);
            api_gpujob_default(&job, NULL);
            api_gpujob_validate(&job, NULL, &errs);
            api_gpujob_release(&job);
        } else if (!strcmp(k->valuestring, "Team")) {
            struct api_team t;
            api_team_decode(doc, &t, &errs);
            api_team_validate(&t, &errs);
        } else if (!strcmp(k->valuestring, "GPUPool")) {
            struct api_gpupool p;
            api_gpupool_decode(doc, &p, &errs);
            api_gpupool_validate(&p, &errs);
        }
    }
    cJSON_Delete(docs);
    return 0;
}
