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

/* n items of size sz at a and b: equal, and not the same memory unless empty. */
static void same_part(const void *a, const void *b, int n, size_t sz)
{
    if (n <= 0) {
        if (a || b)
            __builtin_trap();
        return;
    }
    if (!a || !b || a == b || memcmp(a, b, (size_t)n * sz))
        __builtin_trap();
}

/* The copy holds the source's out-of-line parts, in memory of its own. */
static void check_copy(const struct api_gpujob *c, const struct api_gpujob *j)
{
    const struct api_node_affinity *ca = c->spec.node_affinity, *ja = j->spec.node_affinity;
    if (c->spec.gpu.ntypes != j->spec.gpu.ntypes || c->spec.nselector != j->spec.nselector ||
        c->spec.ntolerations != j->spec.ntolerations || !ca != !ja)
        __builtin_trap();
    same_part(c->spec.gpu.types, j->spec.gpu.types, j->spec.gpu.ntypes, sizeof *j->spec.gpu.types);
    same_part(c->spec.node_selector, j->spec.node_selector, j->spec.nselector,
              sizeof *j->spec.node_selector);
    same_part(c->spec.tolerations, j->spec.tolerations, j->spec.ntolerations,
              sizeof *j->spec.tolerations);
    if (!ja)
        return;
    if (ca == ja || ca->nterms != ja->nterms || ca->nexprs != ja->nexprs ||
        ca->nvalues != ja->nvalues || ja->nterms < 1)
        __builtin_trap();
    same_part(ca->terms, ja->terms, ja->nterms, sizeof *ja->terms);
    same_part(ca->exprs, ja->exprs, ja->nexprs, sizeof *ja->exprs);
    same_part(ca->values, ja->values, ja->nvalues, sizeof *ja->values);
}

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
    if (api_gpujob_copy(&copy, &job) == GQ_OK)
        check_copy(&copy, &job);
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
