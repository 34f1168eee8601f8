/* libFuzzer target: Kubernetes quantity parser. Besides not crashing, checks
 * that units and milli-units agree: value == ceil(milli / 1000) whenever both
 * parse (nested ceilings), and that a failure leaves the output untouched. */
// fuzz-sources: common/gq.c api/quantity.c
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t ceil_div1000(int64_t m)
{
    int64_t q = m / 1000, r = m % 1000;
    return r > 0 ? q + 1 : q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[128], err[256];
    int64_t milli = 12345, value = 12345;
    int rm, rv;
    if (size >= sizeof s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    rm = api_quantity_milli(s, &milli, err, sizeof err);
    rv = api_quantity_value(s, &value, err, sizeof err);
    if (rm && milli != 12345)
        abort();
    if (rv && value != 12345)
        abort();
    if (!rm && !rv && ceil_div1000(milli) != value)
        abort();
    /* a valid milli value always has a valid unit value */
    if (!rm && rv)
        abort();
    return 0;
}
