/* Every example manifest decodes and validates; the sample cluster has the
 * labels the scheduler needs; every CRD parses and is structurally sound.
 * Run from the repository root (paths are relative to it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api.h"
#include "gq.h"
#include "yamljson.h"

#define MAX_DOCS 256

struct docset {
    int n;
    cJSON *files[64];
    char names[64][256];
};

static void load_dir(const char *dir, struct docset *ds)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    assert_non_null(d);
    ds->n = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        char path[512], err[512];
        if (n < 6 || strcmp(e->d_name + n - 5, ".yaml"))
            continue;
        assert_true(ds->n < 64);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (gq_yaml_load_file(path, &ds->files[ds->n], err, sizeof err))
            fail_msg("%s", err);
        gq_strlcpy(ds->names[ds->n], path, sizeof ds->names[0]);
        ds->n++;
    }
    closedir(d);
}

static void free_docset(struct docset *ds)
{
    int i;
    for (i = 0; i < ds->n; i++)
        cJSON_Delete(ds->files[i]);
}

static const char *kind_of(const cJSON *doc)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "kind");
    return cJSON_IsString(k) ? k->valuestring : "";
}

static void report(const char *file, const struct api_errors *errs)
{
    int i;
    char line[512];
    for (i = 0; i < errs->n; i++) {
        api_error_format(errs, i, line, sizeof line);
        fprintf(stderr, "%s: %s\n", file, line);
    }
}

static void test_manifests(void **st)
{
    (void)st;
    static struct api_team teams[MAX_DOCS];
    static struct api_priorityclass pcs[MAX_DOCS];
    struct docset ds;
    struct api_lookup lk;
    int i, njobs = 0, npools = 0, protected_pools = 0;
    int classes[API_CLASS_COUNT] = {0};
    int req = 0, pref = 0, spread = 0, shares = 0, cpuonly = 0, pcname = 0, susp = 0, cohort = 0;
    const cJSON *doc;

    load_dir("examples/manifests", &ds);
    assert_true(ds.n >= 5);
    memset(&lk, 0, sizeof lk);
    for (i = 0; i < ds.n; i++) {
        cJSON_ArrayForEach(doc, ds.files[i])
        {
            struct api_errors errs;
            api_errors_init(&errs);
            if (!strcmp(kind_of(doc), "Team")) {
                assert_true(lk.nteams < MAX_DOCS);
                assert_int_equal(api_team_decode(doc, &teams[lk.nteams], &errs), 0);
                lk.nteams++;
            } else if (!strcmp(kind_of(doc), "PriorityClass")) {
                assert_true(lk.npcs < MAX_DOCS);
                assert_int_equal(api_priorityclass_decode(doc, &pcs[lk.npcs], &errs), 0);
                lk.npcs++;
            }
        }
    }
    lk.teams = teams;
    lk.pcs = pcs;
    assert_true(lk.nteams >= 3);
    assert_true(lk.npcs >= 1);

    for (i = 0; i < ds.n; i++) {
        cJSON_ArrayForEach(doc, ds.files[i])
        {
            struct api_errors errs;
            const char *kind = kind_of(doc);
            api_errors_init(&errs);
            if (!strcmp(kind, "GPUJob")) {
                struct api_gpujob job;
                api_gpujob_init(&job);
                api_gpujob_decode(doc, &job, &errs);
                api_gpujob_default(&job, &lk);
                api_gpujob_validate(&job, NULL, &errs);
                report(ds.names[i], &errs);
                assert_int_equal(errs.n, 0);
                /* every example job belongs to a team and resolves its priority class */
                assert_true(job.spec.team[0] != '\0');
                if (job.spec.priority_class_name[0]) {
                    assert_true(job.spec.priority_class_found);
                    pcname++;
                }
                classes[job.spec.class]++;
                req += job.spec.topology.required[0] != '\0';
                pref += job.spec.topology.preferred[0] != '\0';
                spread += job.spec.topology.spread[0] != '\0';
                shares += job.spec.gpu.has_shares;
                cpuonly += !job.spec.gpu.present;
                susp += job.spec.suspend;
                njobs++;
                api_gpujob_release(&job);
            } else if (!strcmp(kind, "Team")) {
                struct api_team t;
                api_team_decode(doc, &t, &errs);
                api_team_default(&t);
                api_team_validate(&t, &errs);
                report(ds.names[i], &errs);
                assert_int_equal(errs.n, 0);
                cohort += t.cohort[0] != '\0';
            } else if (!strcmp(kind, "GPUPool")) {
                struct api_gpupool p;
                api_gpupool_decode(doc, &p, &errs);
                api_gpupool_validate(&p, &errs);
                report(ds.names[i], &errs);
                assert_int_equal(errs.n, 0);
                npools++;
                if (p.protect && p.reserve_gpus > 0 && (p.classes & (1u << API_CLASS_INFERENCE)))
                    protected_pools++;
            } else if (!strcmp(kind, "PriorityClass")) {
                struct api_priorityclass pc;
                assert_int_equal(api_priorityclass_decode(doc, &pc, &errs), 0);
            } else if (strcmp(kind, "Namespace")) {
                fail_msg("%s: unexpected kind \"%s\"", ds.names[i], kind);
            }
        }
    }
    /* coverage the examples promise */
    assert_true(njobs >= 6);
    assert_true(classes[API_CLASS_INFERENCE] > 0);
    assert_true(classes[API_CLASS_BATCH] > 0);
    assert_true(classes[API_CLASS_TRAINING] > 0);
    assert_true(req > 0 && pref > 0 && spread > 0 && shares > 0 && cpuonly > 0 && pcname > 0 && susp > 0);
    assert_true(npools >= 3);
    assert_true(protected_pools >= 1);
    assert_true(cohort >= 2);
    free_docset(&ds);
}

static const char *label(const cJSON *node, const char *key)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "metadata"), "labels"), key);
    return cJSON_IsString(l) ? l->valuestring : NULL;
}

static int seen(char list[][64], int *n, const char *s)
{
    int i;
    for (i = 0; i < *n; i++)
        if (!strcmp(list[i], s))
            return 1;
    gq_strlcpy(list[(*n)++], s, 64);
    return 0;
}

static void test_cluster(void **st)
{
    (void)st;
    cJSON *docs = NULL;
    const cJSON *n;
    char err[512], zones[16][64], racks[16][64], names[64][64];
    int nz = 0, nr = 0, nn = 0, nodes = 0;
    static const char *const keys[] = {"kubernetes.io/hostname", "topology.kubernetes.io/zone",
                                       "topology.gangq.io/block", "topology.gangq.io/rack",
                                       "nvidia.com/gpu.product", "nvidia.com/gpu.memory", "gangq.io/pool"};
    if (gq_yaml_load_file("examples/cluster/nodes.yaml", &docs, err, sizeof err))
        fail_msg("%s", err);
    cJSON_ArrayForEach(n, docs)
    {
        size_t k;
        const cJSON *stt, *cap, *alloc, *g;
        int64_t v;
        assert_string_equal(kind_of(n), "Node");
        for (k = 0; k < GQ_ARRAY_LEN(keys); k++)
            if (!label(n, keys[k]))
                fail_msg("node %d lacks label %s", nodes, keys[k]);
        assert_int_equal(gq_parse_i64(label(n, "nvidia.com/gpu.memory"), (size_t)-1, &v), 0);
        assert_true(v > 1000);
        assert_false(seen(names, &nn, label(n, "kubernetes.io/hostname")));
        seen(zones, &nz, label(n, "topology.kubernetes.io/zone"));
        seen(racks, &nr, label(n, "topology.gangq.io/rack"));
        stt = cJSON_GetObjectItemCaseSensitive(n, "status");
        cap = cJSON_GetObjectItemCaseSensitive(stt, "capacity");
        alloc = cJSON_GetObjectItemCaseSensitive(stt, "allocatable");
        assert_non_null(cap);
        assert_non_null(alloc);
        g = cJSON_GetObjectItemCaseSensitive(alloc, "nvidia.com/gpu");
        assert_true(cJSON_IsString(g));
        assert_non_null(cJSON_GetObjectItemCaseSensitive(alloc, "cpu"));
        assert_non_null(cJSON_GetObjectItemCaseSensitive(alloc, "memory"));
        nodes++;
    }
    assert_true(nodes >= 12 && nodes <= 24);
    assert_int_equal(nz, 2);
    assert_true(nr >= 4);
    cJSON_Delete(docs);
}

/* Structural schema: every node typed (or preserve-unknown-fields). */
static void check_schema(const char *file, const char *path, const cJSON *s, int *nodes)
{
    const cJSON *props, *p, *items, *addl, *t;
    char sub[512];
    (*nodes)++;
    t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!cJSON_IsString(t) && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "x-kubernetes-preserve-unknown-fields")))
        fail_msg("%s: %s has no type", file, path);
    props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && addl)
        fail_msg("%s: %s has both properties and additionalProperties", file, path);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "x-kubernetes-embedded-resource")))
        fail_msg("%s: %s: a PodTemplateSpec is not an embedded resource", file, path);
    cJSON_ArrayForEach(p, props)
    {
        snprintf(sub, sizeof sub, "%s.%s", path, p->string);
        check_schema(file, sub, p, nodes);
    }
    if ((items = cJSON_GetObjectItemCaseSensitive(s, "items"))) {
        snprintf(sub, sizeof sub, "%s[]", path);
        check_schema(file, sub, items, nodes);
    }
    if (cJSON_IsObject(addl)) {
        snprintf(sub, sizeof sub, "%s{}", path);
        check_schema(file, sub, addl, nodes);
    }
    if (!strcmp(path, ".metadata") && props)
        fail_msg("%s: metadata may not declare properties", file);
}

static void check_crd(const char *file, const char *plural, const char *kind, const char *scope,
                      const char *shortname, const char *const *columns, int ncol)
{
    cJSON *doc = NULL, *docs = NULL;
    const cJSON *spec, *names, *vers, *v, *cols, *c;
    char err[512], want[128];
    int i, nodes = 0;
    if (gq_yaml_load_file(file, &docs, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(cJSON_GetArraySize(docs), 1);
    doc = cJSON_GetArrayItem(docs, 0);
    assert_string_equal(cJSON_GetObjectItem(doc, "apiVersion")->valuestring, "apiextensions.k8s.io/v1");
    assert_string_equal(kind_of(doc), "CustomResourceDefinition");
    snprintf(want, sizeof want, "%s.gangq.io", plural);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "metadata"), "name")->valuestring, want);
    spec = cJSON_GetObjectItem(doc, "spec");
    assert_string_equal(cJSON_GetObjectItem(spec, "group")->valuestring, "gangq.io");
    assert_string_equal(cJSON_GetObjectItem(spec, "scope")->valuestring, scope);
    names = cJSON_GetObjectItem(spec, "names");
    assert_string_equal(cJSON_GetObjectItem(names, "plural")->valuestring, plural);
    assert_string_equal(cJSON_GetObjectItem(names, "kind")->valuestring, kind);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(names, "shortNames"), 0)->valuestring, shortname);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(names, "categories"), 0)->valuestring, "gangq");
    vers = cJSON_GetObjectItem(spec, "versions");
    assert_int_equal(cJSON_GetArraySize(vers), 1);
    v = cJSON_GetArrayItem(vers, 0);
    assert_string_equal(cJSON_GetObjectItem(v, "name")->valuestring, "v1alpha1");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "served")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "storage")));
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(cJSON_GetObjectItem(v, "subresources"), "status")));
    cols = cJSON_GetObjectItem(v, "additionalPrinterColumns");
    for (i = 0; i < ncol; i++) {
        int found = 0;
        cJSON_ArrayForEach(c, cols)
        {
            const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
            if (!strcasecmp(name, columns[i])) {
                const cJSON *jp = cJSON_GetObjectItem(c, "jsonPath");
                assert_true(cJSON_IsString(jp) && jp->valuestring[0] == '.');
                assert_true(cJSON_IsString(cJSON_GetObjectItem(c, "type")));
                found = 1;
            }
        }
        if (!found)
            fail_msg("%s: printer column %s missing", file, columns[i]);
    }
    v = cJSON_GetObjectItem(cJSON_GetObjectItem(v, "schema"), "openAPIV3Schema");
    assert_non_null(v);
    check_schema(file, "", v, &nodes);
    assert_true(nodes > 10);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(v, "properties"), "spec"));
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(v, "properties"), "status"));
    cJSON_Delete(docs);
}

static void test_crds(void **st)
{
    (void)st;
    static const char *const jcols[] = {"TEAM", "CLASS", "PRIORITY", "GPUS", "STATE", "POSITION", "AGE"};
    static const char *const tcols[] = {"QUOTA", "USED", "BORROWED", "PENDING", "RUNNING"};
    static const char *const pcols[] = {"GPUS", "ALLOCATED", "FREE", "LARGEST-FREE", "PENDING"};
    check_crd("crds/gpujobs.yaml", "gpujobs", "GPUJob", "Namespaced", "gj", jcols, 7);
    check_crd("crds/teams.yaml", "teams", "Team", "Cluster", "tm", tcols, 5);
    check_crd("crds/gpupools.yaml", "gpupools", "GPUPool", "Cluster", "gp", pcols, 5);
}

/* The CRD defaults must themselves validate against our decoder: the
 * GPUJob's template is preserved whole and the class default is a known class. */
static void test_crd_defaults(void **st)
{
    (void)st;
    cJSON *docs = NULL;
    char err[512];
    const cJSON *spec;
    enum api_class c;
    assert_int_equal(gq_yaml_load_file("crds/gpujobs.yaml", &docs, err, sizeof err), 0);
    spec = cJSON_GetObjectItem(cJSON_GetArrayItem(docs, 0), "spec");
    spec = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "versions"), 0);
    spec = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "schema"), "openAPIV3Schema");
    spec = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "properties"), "spec");
    spec = cJSON_GetObjectItem(spec, "properties");
    assert_int_equal(api_class_parse(cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "class"), "default")->valuestring, &c), 0);
    assert_int_equal(c, API_CLASS_BATCH);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "template"), "x-kubernetes-preserve-unknown-fields")));
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "replicas"), "default")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "gpu"), "properties"), "count"), "maximum")->valueint,
                     API_GPU_COUNT_MAX);
    cJSON_Delete(docs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifests),
        cmocka_unit_test(test_cluster),
        cmocka_unit_test(test_crds),
        cmocka_unit_test(test_crd_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
