/* libFuzzer target: JSON bytes -> GPUPool decode/validate and status encode. */
// fuzz-sources: common/gq.c common/buf.c api/*.c
#include <stddef.h>
#include <stdint.h>

#include "api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct api_errors errs;
    struct api_gpupool p;
    struct api_gpupool_status ps;
    cJSON *obj = NULL, *enc;

    api_errors_init(&errs);
    if (api_json_parse((const char *)data, size, &obj, &errs))
        return 0;
    api_gpupool_decode(obj, &p, &errs);
    api_gpupool_validate(&p, &errs);
    ps.gpus = p.reserve_gpus;
    ps.allocated = ps.free = ps.largest_free = ps.pending = p.nselector;
    enc = api_gpupool_status_encode(&ps);
    cJSON_Delete(enc);
    cJSON_Delete(obj);
    return 0;
}
