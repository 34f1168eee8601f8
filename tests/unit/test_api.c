/* Unit tests for api/: GPUJob/Team/GPUPool decode, defaulting, validation and
 * status encode, with a table of malformed inputs each checked for its exact
 * field path and message. JSON in this file is written with single quotes
 * and converted to double quotes before parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api.h"
#include "buf.h"
#include "gq.h"

#define HEAD "'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'train-a','namespace':'ml'},"
#define TPL "'template':{'spec':{'containers':[{'name':'m','resources':{'requests':{'cpu':'2','memory':'8Gi'}}}]}}"
#define JOB(spec) "{" HEAD "'spec':{" spec "}}"
#define JOBT(spec) JOB(spec TPL)
#define TEAM(spec) "{'apiVersion':'gangq.io/v1alpha1','kind':'Team','metadata':{'name':'vision'},'spec':{" spec "}}"
#define POOL(spec) "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUPool','metadata':{'name':'inference'},'spec':{" spec "}}"

#define REQAFF "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
#define NSTERMS REQAFF ".nodeSelectorTerms"
/* a CPU-only template whose required node affinity is raw / has these terms */
#define AFFRAW(req) "'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}]," \
                    "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':" req "}}}}"
#define AFF(terms) AFFRAW("{'nodeSelectorTerms':[" terms "]}")

enum kind { K_JOB, K_TEAM, K_POOL, K_PC };

static char *dq(const char *s)
{
    char *d = strdup(s), *p;
    assert_non_null(d);
    for (p = d; *p; p++)
        if (*p == '\'')
            *p = '"';
    return d;
}

/* Parse, decode, default and validate; the caller releases errs only. */
static int run(enum kind k, const char *json, struct api_errors *errs)
{
    char *txt = dq(json);
    cJSON *obj = NULL;
    int rc = 0;
    api_errors_init(errs);
    if (api_json_parse(txt, strlen(txt), &obj, errs) == 0) {
        if (k == K_JOB) {
            struct api_gpujob job;
            api_gpujob_init(&job);
            rc = api_gpujob_decode(obj, &job, errs);
            assert_true(rc == 0 || rc == GQ_EINVAL);
            api_gpujob_default(&job, NULL);
            api_gpujob_validate(&job, NULL, errs);
            api_gpujob_release(&job);
        } else if (k == K_TEAM) {
            struct api_team t;
            api_team_decode(obj, &t, errs);
            api_team_default(&t);
            api_team_validate(&t, errs);
        } else if (k == K_POOL) {
            struct api_gpupool p;
            api_gpupool_decode(obj, &p, errs);
            api_gpupool_validate(&p, errs);
        } else {
            struct api_priorityclass pc;
            api_priorityclass_decode(obj, &pc, errs);
        }
    }
    cJSON_Delete(obj);
    free(txt);
    return errs->n;
}

static void dump(const struct api_errors *errs)
{
    int i;
    char line[API_ERR_PATH_MAX + API_ERR_MSG_MAX + 4];
    for (i = 0; i < errs->n; i++) {
        api_error_format(errs, i, line, sizeof line);
        fprintf(stderr, "  got: %s\n", line);
    }
}

struct bad {
    enum kind k;
    const char *json;
    const char *path;
    const char *msg;
};

static const struct bad bad_cases[] = {
    /* spec.gpu */
    {K_JOB, JOBT("'gpu':{'count':0},"), "spec.gpu.count", "must be 1..16, got 0"},
    {K_JOB, JOBT("'gpu':{'count':17},"), "spec.gpu.count", "must be 1..16, got 17"},
    {K_JOB, JOBT("'gpu':{'count':'4'},"), "spec.gpu.count", "must be an integer, got string"},
    {K_JOB, JOBT("'gpu':{'count':1.5},"), "spec.gpu.count", "must be an integer, got 1.5"},
    {K_JOB, JOBT("'gpu':{'count':1e30},"), "spec.gpu.count", "must be 1..16, got 1e+30"},
    {K_JOB, JOBT("'gpu':{'count':-99999999999},"), "spec.gpu.count", "must be 1..16, got -99999999999"},
    {K_JOB, JOBT("'gpu':{'count':[[[[[[[[[[1]]]]]]]]]]},"), "spec.gpu.count", "must be an integer, got array"},
    {K_JOB, JOBT("'gpu':{'count':2,'shares':500},"), "spec.gpu", "set count or shares, not both"},
    {K_JOB, JOBT("'gpu':{'types':['NVIDIA-L4']},"), "spec.gpu", "set count or shares"},
    {K_JOB, JOBT("'gpu':{'shares':1000},"), "spec.gpu.shares", "must be 1..999, got 1000"},
    {K_JOB, JOBT("'gpu':{'shares':0},"), "spec.gpu.shares", "must be 1..999, got 0"},
    {K_JOB, JOBT("'gpu':[4],"), "spec.gpu", "must be an object, got array"},
    {K_JOB, JOBT("'gpu':{'count':1,'types':'NVIDIA-L4'},"), "spec.gpu.types", "must be an array, got string"},
    {K_JOB, JOBT("'gpu':{'count':1,'types':[1]},"), "spec.gpu.types[0]", "must be a string, got number"},
    {K_JOB, JOBT("'gpu':{'count':1,'types':['NVIDIA-L4','NVIDIA-L4']},"), "spec.gpu.types[1]", "duplicate \"NVIDIA-L4\""},
    {K_JOB, JOBT("'gpu':{'count':1,'types':['a','b','c','d','e','f','g','h','i']},"), "spec.gpu.types", "at most 8 entries, got 9"},
    {K_JOB, JOBT("'gpu':{'count':1,'types':['H100 80GB']},"), "spec.gpu.types[0]",
     "must be a GPU product label value (e.g. NVIDIA-H100-80GB-HBM3), got \"H100 80GB\""},
    {K_JOB, JOBT("'gpu':{'count':1,'minMemoryGiB':-1},"), "spec.gpu.minMemoryGiB", "must be 0..1024, got -1"},
    {K_JOB, JOBT("'gpu':{'cnt':1},"), "spec.gpu.cnt", "unknown field"},
    /* class, replicas, booleans, priority */
    {K_JOB, JOBT("'class':'Foo',"), "spec.class", "unknown class \"Foo\"; known: Inference, Batch, Training"},
    {K_JOB, JOBT("'class':'training',"), "spec.class", "unknown class \"training\"; known: Inference, Batch, Training"},
    {K_JOB, JOBT("'class':3,"), "spec.class", "must be a string, got number"},
    {K_JOB, JOBT("'replicas':0,"), "spec.replicas", "must be 1..1024, got 0"},
    {K_JOB, JOBT("'replicas':5000,"), "spec.replicas", "must be 1..1024, got 5000"},
    {K_JOB, JOBT("'replicas':'2',"), "spec.replicas", "must be an integer, got string"},
    {K_JOB, JOBT("'replicas':null,"), "spec.replicas", "must be an integer, got null"},
    {K_JOB, JOBT("'replicas':1e300,"), "spec.replicas", "must be 1..1024, got 1e+300"},
    {K_JOB, JOBT("'preemptible':'yes',"), "spec.preemptible", "must be a boolean, got string"},
    {K_JOB, JOBT("'gang':1,"), "spec.gang", "must be a boolean, got number"},
    {K_JOB, JOBT("'suspend':'true',"), "spec.suspend", "must be a boolean, got string"},
    {K_JOB, JOBT("'masterPort':0,"), "spec.masterPort", "must be 1..65535, got 0"},
    {K_JOB, JOBT("'masterPort':65536,"), "spec.masterPort", "must be 1..65535, got 65536"},
    {K_JOB, JOBT("'masterPort':'29500',"), "spec.masterPort", "must be an integer, got string"},
    {K_JOB, JOBT("'ttlSecondsAfterFinished':-1,"), "spec.ttlSecondsAfterFinished", "must be 0..31536000 (seconds), got -1"},
    {K_JOB, JOBT("'ttlSecondsAfterFinished':31536001,"), "spec.ttlSecondsAfterFinished",
     "must be 0..31536000 (seconds), got 31536001"},
    {K_JOB, JOBT("'ttlSecondsAfterFinished':1.5,"), "spec.ttlSecondsAfterFinished", "must be an integer, got 1.5"},
    {K_JOB, JOBT("'maxRunSeconds':0,"), "spec.maxRunSeconds", "must be 1..31536000 (seconds), got 0"},
    {K_JOB, JOBT("'maxRunSeconds':31536001,"), "spec.maxRunSeconds", "must be 1..31536000 (seconds), got 31536001"},
    {K_JOB, JOBT("'maxRunSeconds':'1h',"), "spec.maxRunSeconds", "must be an integer, got string"},
    {K_JOB, JOBT("'priority':5,'priorityClassName':'high',"), "spec.priority", "set priority or priorityClassName, not both"},
    {K_JOB, JOBT("'priority':2000000000,"), "spec.priority", "must be at most 1000000000, got 2000000000"},
    {K_JOB, JOBT("'priority':1e10,"), "spec.priority", "must be -2147483648..1000000000, got 10000000000"},
    {K_JOB, JOBT("'priorityClassName':'High_Prio',"), "spec.priorityClassName",
     "must be a lowercase DNS name (a-z, 0-9, '-', '.'), got \"High_Prio\""},
    /* topology */
    {K_JOB, JOBT("'topology':{'required':'rak'},"), "spec.topology.required", "unknown level \"rak\"; known: zone, block, rack, node"},
    {K_JOB, JOBT("'topology':{'required':'rack','preferred':'zone'},"), "spec.topology.preferred",
     "level \"zone\" is wider than required level \"rack\""},
    {K_JOB, JOBT("'topology':{'required':'rack','spread':'zone'},"), "spec.topology.spread",
     "level \"zone\" must be narrower than required level \"rack\""},
    {K_JOB, JOBT("'topology':{'preferred':'node','spread':'node'},"), "spec.topology.preferred",
     "level \"node\" packs replicas that spread level \"node\" keeps apart"},
    {K_JOB, JOBT("'topology':'rack',"), "spec.topology", "must be an object, got string"},
    {K_JOB, JOBT("'topology':{'required':5},"), "spec.topology.required", "must be a string, got number"},
    {K_JOB, JOBT("'topology':{'requierd':'rack'},"), "spec.topology.requierd", "unknown field"},
    /* names */
    {K_JOB, JOBT("'team':5,"), "spec.team", "must be a string, got number"},
    {K_JOB, JOBT("'team':'Team A',"), "spec.team", "must be a lowercase DNS name (a-z, 0-9, '-', '.'), got \"Team A\""},
    {K_JOB, JOBT("'pool':'ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp',"),
     "spec.pool", "must be at most 253 characters, got 300"},
    /* template and quantities */
    {K_JOB, JOB("'class':'Batch'"), "spec.template", "required"},
    {K_JOB, JOB("'template':{}"), "spec.template.spec", "required"},
    {K_JOB, JOB("'template':[]"), "spec.template", "must be an object, got array"},
    {K_JOB, JOB("'template':{'spec':{}}"), "spec.template.spec.containers", "required"},
    {K_JOB, JOB("'template':{'spec':{'containers':[]}}"), "spec.template.spec.containers", "must have at least one container"},
    {K_JOB, JOB("'template':{'spec':{'containers':{}}}"), "spec.template.spec.containers", "must be an array, got object"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':'abc'}}}]}}"),
     "spec.template.spec.containers[0].resources.requests.cpu", "invalid quantity \"abc\": must start with a number"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':'1','memory':'16GB'}}}]}}"),
     "spec.template.spec.containers[0].resources.requests.memory", "invalid quantity \"16GB\": unknown suffix \"GB\""},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'memory':'-1Gi'}}}]}}"),
     "spec.template.spec.containers[0].resources.requests.memory", "must not be negative, got \"-1Gi\""},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':'1e100'}}}]}}"),
     "spec.template.spec.containers[0].resources.requests.cpu", "quantity \"1e100\" is too large"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'limits':{'cpu':[]}}}]}}"),
     "spec.template.spec.containers[0].resources.limits.cpu", "must be a quantity (string or number), got array"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':'cpu=1'}}]}}"),
     "spec.template.spec.containers[0].resources.requests", "must be an object, got string"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':'6E','memory':'1'}}},"
                "{'resources':{'requests':{'cpu':'6E'}}}]}}"),
     "spec.template.spec.containers[0].resources.requests.cpu", "quantity \"6E\" is too large"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'name':'c'}]}}"), "spec.template.spec.containers",
     "a job without spec.gpu must request cpu or memory"},
    /* GPU devices only through spec.gpu: one asked for in the template would reach the kubelet
     * unbooked and uncharged */
    {K_JOB, JOB("'gpu':{'count':1},'template':{'spec':{'containers':[{'name':'a'},"
                "{'name':'b','resources':{'limits':{'nvidia.com/gpu':7}}}]}}"),
     "spec.template.spec.containers[1].resources.limits[\"nvidia.com/gpu\"]",
     "GPUs are asked for with spec.gpu (gangq books them and sets them on the pods it creates), not in the template"},
    {K_JOB, JOB("'gpu':{'count':1},'template':{'spec':{'initContainers':[{'resources':{'requests':{'nvidia.com/gpu':'8'}}}],"
                "'containers':[{'name':'a'}]}}"),
     "spec.template.spec.initContainers[0].resources.requests[\"nvidia.com/gpu\"]",
     "GPUs are asked for with spec.gpu (gangq books them and sets them on the pods it creates), not in the template"},
    {K_JOB, JOB("'gpu':{'shares':100},'template':{'spec':{'containers':[{'resources':{'requests':{'nvidia.com/gpu':8}}}]}}"),
     "spec.template.spec.containers[0].resources.requests[\"nvidia.com/gpu\"]",
     "GPUs are asked for with spec.gpu (gangq books them and sets them on the pods it creates), not in the template"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1,'nvidia.com/mig-1g.10gb':1}}}]}}"),
     "spec.template.spec.containers[0].resources.requests[\"nvidia.com/mig-1g.10gb\"]",
     "GPUs are asked for with spec.gpu (gangq books them and sets them on the pods it creates), not in the template"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
                "'tolerations':[{'key':'gpu','operator':'In'}]}}"),
     "spec.template.spec.tolerations[0].operator", "unknown operator \"In\"; known: Equal, Exists"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
                "'tolerations':[{'key':'gpu','operator':'Exists','effect':'NoRun'}]}}"),
     "spec.template.spec.tolerations[0].effect", "unknown effect \"NoRun\"; known: NoSchedule, PreferNoSchedule, NoExecute"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
                "'tolerations':[{'key':'gpu','operator':'Exists','value':'x'}]}}"),
     "spec.template.spec.tolerations[0].value", "must be empty when operator is Exists"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
                "'nodeSelector':{'pool':7}}}"),
     "spec.template.spec.nodeSelector.pool", "must be a string, got number"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
                "'nodeSelector':{'a':'1','b':'2','c':'3','d':'4','e':'5','f':'6','g':'7','h':'8','i':'9'}}}"),
     "spec.template.spec.nodeSelector", "at most 8 entries, got 9"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],'tolerations':["
                "{'operator':'Exists'},{'operator':'Exists'},{'operator':'Exists'},{'operator':'Exists'},"
                "{'operator':'Exists'},{'operator':'Exists'},{'operator':'Exists'},{'operator':'Exists'},"
                "{'operator':'Exists'}]}}"),
     "spec.template.spec.tolerations", "at most 8 entries, got 9"},
    /* required node affinity */
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'zone','operator':'In','values':['a']},"
                    "{'key':'gen','operator':'Near','values':['1']}]}")),
     NSTERMS "[0].matchExpressions[1].operator",
     "unknown operator \"Near\"; known: In, NotIn, Exists, DoesNotExist, Gt, Lt"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'gen','operator':'Gt','values':['4.5']}]}")),
     NSTERMS "[0].matchExpressions[0].values[0]", "must be an integer for operator Gt, got \"4.5\""},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'gen','operator':'Lt','values':['1','2']}]}")),
     NSTERMS "[0].matchExpressions[0].values", "must hold exactly one integer for operator Lt, got 2 values"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'gen','operator':'Gt','values':['99999999999999999999']}]}")),
     NSTERMS "[0].matchExpressions[0].values[0]",
     "must be an integer for operator Gt, got \"99999999999999999999\""},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'zone','operator':'In'}]}")),
     NSTERMS "[0].matchExpressions[0].values", "required (at least one value) for operator In"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'zone','operator':'NotIn','values':[]}]}")),
     NSTERMS "[0].matchExpressions[0].values", "required (at least one value) for operator NotIn"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'zone','operator':'Exists','values':['a']}]}")),
     NSTERMS "[0].matchExpressions[0].values", "must be empty for operator Exists"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'operator':'Exists'}]}")),
     NSTERMS "[0].matchExpressions[0].key", "required"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'bad key','operator':'Exists'}]}")),
     NSTERMS "[0].matchExpressions[0].key", "invalid label key \"bad key\""},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'zone'}]}")),
     NSTERMS "[0].matchExpressions[0].operator", "required"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'zone','operator':'In','values':[1]}]}")),
     NSTERMS "[0].matchExpressions[0].values[0]", "must be a string, got number"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'zone','operator':'Exists','value':'a'}]}")),
     NSTERMS "[0].matchExpressions[0].value", "unknown field"},
    {K_JOB, JOB(AFF("{},{'matchFields':[{'key':'metadata.uid','operator':'In','values':['n1']}]}")),
     NSTERMS "[1].matchFields[0].key", "unknown field \"metadata.uid\"; known: metadata.name"},
    {K_JOB, JOB(AFF("{'matchFields':[{'key':'metadata.name','operator':'Exists'}]}")),
     NSTERMS "[0].matchFields[0].operator", "unknown operator \"Exists\"; known: In, NotIn"},
    {K_JOB, JOB(AFF("")), NSTERMS, "must have at least one term"},
    {K_JOB, JOB(AFF("{},{},{},{},{},{},{},{},{}")), NSTERMS, "at most 8 entries, got 9"},
    {K_JOB, JOB(AFF("'zone'")), NSTERMS "[0]", "must be an object, got string"},
    {K_JOB, JOB(AFFRAW("{'nodeSelectorTerms':[{}],'nodeSelector':{}}")), REQAFF ".nodeSelector", "unknown field"},
    {K_JOB, JOB(AFFRAW("{}")), NSTERMS, "required"},
    {K_JOB, JOB(AFFRAW("[]")), REQAFF, "must be an object, got array"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'a','operator':'Exists'},{'key':'b','operator':'Exists'},"
                    "{'key':'c','operator':'Exists'},{'key':'d','operator':'Exists'},{'key':'e','operator':'Exists'},"
                    "{'key':'f','operator':'Exists'},{'key':'g','operator':'Exists'},{'key':'h','operator':'Exists'},"
                    "{'key':'i','operator':'Exists'},{'key':'j','operator':'Exists'},{'key':'k','operator':'Exists'},"
                    "{'key':'l','operator':'Exists'},{'key':'m','operator':'Exists'},{'key':'n','operator':'Exists'},"
                    "{'key':'o','operator':'Exists'},{'key':'p','operator':'Exists'},{'key':'q','operator':'Exists'}]}")),
     NSTERMS "[0].matchExpressions[16]", "at most 16 expressions in all terms together"},
    {K_JOB, JOB(AFF("{'matchExpressions':[{'key':'a','operator':'In','values':['1','2','3','4','5','6','7','8',"
                    "'9','10','11','12','13','14','15','16','17','18','19','20','21','22','23','24','25','26','27',"
                    "'28','29','30','31','32','33']}]}")),
     NSTERMS "[0].matchExpressions[0].values", "at most 32 values in all expressions together"},
    {K_JOB, JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],'affinity':[]}}"),
     "spec.template.spec.affinity", "must be an object, got array"},
    /* object head and metadata */
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'namespace':'ml'},'spec':{" TPL "}}",
     "metadata.name", "required"},
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'Bad_Name'},'spec':{" TPL "}}",
     "metadata.name", "must be a lowercase DNS name (a-z, 0-9, '-', '.'), got \"Bad_Name\""},
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'a','namespace':'ML'},'spec':{" TPL "}}",
     "metadata.namespace", "must be a lowercase DNS label (a-z, 0-9, '-'), got \"ML\""},
    /* a job name is the gangq.io/job label value of its pods: at most 63 characters */
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','namespace':'ml'},'spec':{" TPL "}}",
     "metadata.name", "must be at most 63 characters (it is the gangq.io/job label value of the job's pods, "
     "named <name>-<attempt>-<replica>), got 64"},
    {K_JOB, "{'apiVersion':'v1','kind':'GPUJob','metadata':{'name':'a'},'spec':{" TPL "}}",
     "apiVersion", "must be \"gangq.io/v1alpha1\", got \"v1\""},
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'Job','metadata':{'name':'a'},'spec':{" TPL "}}",
     "kind", "must be \"GPUJob\", got \"Job\""},
    {K_JOB, "{'kind':'GPUJob','metadata':{'name':'a'},'spec':{" TPL "}}", "apiVersion", "required"},
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','spec':{" TPL "}}", "metadata", "required"},
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':'a','spec':{" TPL "}}", "metadata",
     "must be an object, got string"},
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'a'}}", "spec", "required"},
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'a'},'spec':[]}", "spec",
     "must be an object, got array"},
    {K_JOB, "[1,2]", "", "must be a JSON object, got array"},
    {K_JOB, "null", "", "must be a JSON object, got null"},
    {K_JOB, JOBT("'topolgy':{},"), "spec.topolgy", "unknown field"},
    {K_JOB, "{" HEAD "'extra':1,'spec':{" TPL "}}", "extra", "unknown field"},
    /* truncated and broken JSON */
    {K_JOB, "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJ", "", "invalid JSON at byte 42"},
    {K_JOB, "{'spec':{'gpu':{'count':4}}", "", "invalid JSON at byte 26"},
    {K_JOB, "{'a':1,}", "", "invalid JSON at byte 7"},
    {K_JOB, "", "", "invalid JSON at byte 0"},
    /* Team */
    {K_TEAM, TEAM("'quota':[{'gpuType':'*'}]"), "spec.quota[0].gpus", "required"},
    {K_TEAM, TEAM("'quota':[{'gpus':4}]"), "spec.quota[0].gpuType", "required"},
    {K_TEAM, TEAM("'quota':[{'gpuType':'*','gpus':8,'lendingLimit':10}]"), "spec.quota[0].lendingLimit",
     "must be at most gpus (8), got 10"},
    {K_TEAM, TEAM("'quota':[{'gpuType':'*','gpus':8},{'gpuType':'*','gpus':2}]"), "spec.quota[1].gpuType", "duplicate \"*\""},
    {K_TEAM, TEAM("'quota':[{'gpuType':'*','gpus':-8}]"), "spec.quota[0].gpus", "must be 0..1000000, got -8"},
    {K_TEAM, TEAM("'quota':{'gpuType':'*','gpus':8}"), "spec.quota", "must be an array, got object"},
    {K_TEAM, TEAM("'quota':[{'gpuType':'*','gpus':8,'borrowingLimit':4}]"), "spec.quota[0].borrowingLimit",
     "only meaningful with spec.cohort"},
    {K_TEAM, TEAM("'namespaces':'ml'"), "spec.namespaces", "must be an array, got string"},
    {K_TEAM, TEAM("'namespaces':['ml','ml']"), "spec.namespaces[1]", "duplicate \"ml\""},
    {K_TEAM, TEAM("'namespaces':['ml.team']"), "spec.namespaces[0]", "must be a lowercase DNS label (a-z, 0-9, '-'), got \"ml.team\""},
    {K_TEAM, TEAM("'weight':0"), "spec.weight", "must be 1..1000, got 0"},
    /* Team tenancy fields */
    {K_TEAM, TEAM("'maxPriority':2000000000"), "spec.maxPriority", "must be at most 1000000000, got 2000000000"},
    {K_TEAM, TEAM("'maxPriority':'high'"), "spec.maxPriority", "must be an integer, got string"},
    {K_TEAM, TEAM("'priorityClasses':'a'"), "spec.priorityClasses", "must be an array, got string"},
    {K_TEAM, TEAM("'priorityClasses':['a','a']"), "spec.priorityClasses[1]", "duplicate \"a\""},
    {K_TEAM, TEAM("'priorityClasses':['System_Critical']"), "spec.priorityClasses[0]",
     "must be a lowercase DNS name (a-z, 0-9, '-', '.'), got \"System_Critical\""},
    {K_TEAM, TEAM("'podPolicy':{'allowHostNetwork':true}"), "spec.podPolicy.allowHostNetwork", "unknown field"},
    {K_TEAM, TEAM("'podPolicy':{'allowPrivileged':'yes'}"), "spec.podPolicy.allowPrivileged", "must be a boolean, got string"},
    {K_TEAM, TEAM("'podPolicy':[]"), "spec.podPolicy", "must be an object, got array"},
    {K_TEAM, "{'apiVersion':'gangq.io/v1alpha1','kind':'Team','metadata':{'name':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'},'spec':{}}",
     "metadata.name", "must be at most 63 characters (it is the gangq.io/team label value of the Team's pods), got 64"},
    {K_TEAM, TEAM("'cohort':'Research'"), "spec.cohort", "must be a lowercase DNS name (a-z, 0-9, '-', '.'), got \"Research\""},
    {K_TEAM, "{'apiVersion':'gangq.io/v1alpha1','kind':'Team','metadata':{'name':'v','namespace':'ml'},'spec':{}}",
     "metadata.namespace", "must be empty: Team is cluster-scoped"},
    /* GPUPool */
    {K_POOL, POOL("'nodeSelector':{'gangq.io/pool':'inference'},'classes':['Foo']"), "spec.classes[0]",
     "unknown class \"Foo\"; known: Inference, Batch, Training"},
    {K_POOL, POOL("'nodeSelector':{'gangq.io/pool':'inference'},'classes':['Batch','Batch']"), "spec.classes[1]",
     "duplicate \"Batch\""},
    {K_POOL, POOL("'classes':['Inference']"), "spec.nodeSelector", "required"},
    {K_POOL, POOL("'nodeSelector':{}"), "spec.nodeSelector", "must select nodes with at least one label"},
    {K_POOL, POOL("'nodeSelector':{'bad key':'x'}"), "spec.nodeSelector.bad key", "invalid label key"},
    {K_POOL, POOL("'nodeSelector':{'gangq.io/pool':'has space'}"), "spec.nodeSelector.gangq.io/pool",
     "invalid label value \"has space\""},
    {K_POOL, POOL("'nodeSelector':{'gangq.io/pool':'i'},'protected':'yes'"), "spec.protected", "must be a boolean, got string"},
    {K_POOL, POOL("'nodeSelector':{'gangq.io/pool':'i'},'reserveGPUs':-1,'classes':['Inference']"), "spec.reserveGPUs",
     "must be 0..100000, got -1"},
    {K_POOL, POOL("'nodeSelector':{'gangq.io/pool':'i'},'protected':true"), "spec.classes",
     "a protected pool needs at least one home class"},
    /* PriorityClass */
    {K_PC, "{'apiVersion':'scheduling.k8s.io/v1','kind':'PriorityClass','metadata':{'name':'high'}}", "value", "required"},
    {K_PC, "{'apiVersion':'scheduling.k8s.io/v1','kind':'PriorityClass','metadata':{'name':'high'},'value':'9'}", "value",
     "must be an integer, got string"},
};

static void test_malformed(void **st)
{
    (void)st;
    size_t i;
    assert_true(GQ_ARRAY_LEN(bad_cases) >= 40);
    for (i = 0; i < GQ_ARRAY_LEN(bad_cases); i++) {
        struct api_errors errs;
        int idx;
        run(bad_cases[i].k, bad_cases[i].json, &errs);
        idx = api_errors_find(&errs, bad_cases[i].path);
        if (idx < 0 || strcmp(errs.e[idx].msg, bad_cases[i].msg)) {
            fprintf(stderr, "case %zu: want %s: %s\n", i, bad_cases[i].path, bad_cases[i].msg);
            dump(&errs);
        }
        assert_true(idx >= 0);
        assert_string_equal(errs.e[idx].msg, bad_cases[i].msg);
    }
}

/* A fully valid job of each shape produces no error at all. */
static void test_valid_shapes(void **st)
{
    (void)st;
    static const char *const ok[] = {
        JOBT(""),
        JOBT("'class':'Training','replicas':8,'gpu':{'count':8,'types':['NVIDIA-H100-80GB-HBM3'],'minMemoryGiB':80},"
             "'topology':{'required':'rack','preferred':'node'},'priority':1000,"),
        JOBT("'class':'Inference','replicas':3,'gpu':{'count':1},'topology':{'spread':'node'},'pool':'inference',"),
        JOBT("'class':'Inference','gpu':{'shares':250,'types':['NVIDIA-L4']},"),
        JOBT("'class':'Batch','gpu':{'count':2},'priorityClassName':'batch-low','suspend':true,'preemptible':true,"),
        JOBT("'topology':{'required':'zone','spread':'rack'},'gpu':{'count':1},'replicas':4,"),
        JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':4}}}],"
            "'nodeSelector':{'gangq.io/pool':'batch'},"
            "'tolerations':[{'key':'nvidia.com/gpu','operator':'Exists','effect':'NoSchedule'},{'operator':'Exists'}]}}"),
    };
    size_t i;
    for (i = 0; i < GQ_ARRAY_LEN(ok); i++) {
        struct api_errors errs;
        if (run(K_JOB, ok[i], &errs)) {
            fprintf(stderr, "valid case %zu rejected\n", i);
            dump(&errs);
        }
        assert_int_equal(errs.n, 0);
    }
}

static void decode_job(const char *json, struct api_gpujob *job)
{
    char *txt = dq(json);
    struct api_errors errs;
    cJSON *obj;
    api_errors_init(&errs);
    assert_int_equal(api_json_parse(txt, strlen(txt), &obj, &errs), 0);
    api_gpujob_init(job);
    if (api_gpujob_decode(obj, job, &errs))
        dump(&errs);
    assert_int_equal(errs.n, 0);
    cJSON_Delete(obj);
    free(txt);
}

static void test_decode_fields(void **st)
{
    (void)st;
    struct api_gpujob job, copy;
    decode_job(JOB("'team':'vision','class':'Training','replicas':4,'gang':true,'preemptible':false,"
                   "'gpu':{'count':8,'types':['NVIDIA-H100-80GB-HBM3','NVIDIA-A100-SXM4-40GB'],'minMemoryGiB':40},"
                   "'topology':{'required':'block','preferred':'rack','spread':'node'},'pool':'training',"
                   "'priority':500,'suspend':true,'masterPort':23456,'ttlSecondsAfterFinished':600,'maxRunSeconds':7200,"
                   "'template':{'metadata':{'labels':{'app':'x'}},'spec':{"
                   "'initContainers':[{'resources':{'requests':{'cpu':'8','memory':'1Gi'}}}],"
                   "'containers':[{'resources':{'requests':{'cpu':'500m','memory':'16Gi'}}},"
                   "{'resources':{'limits':{'cpu':'1.5','memory':'512Mi'}}}],"
                   "'nodeSelector':{'topology.kubernetes.io/zone':'zone-a'},"
                   "'tolerations':[{'key':'dedicated','value':'ml','effect':'NoExecute','tolerationSeconds':30}]}}"),
               &job);
    assert_string_equal(job.meta.name, "train-a");
    assert_string_equal(job.meta.namespace, "ml");
    assert_string_equal(job.spec.team, "vision");
    assert_int_equal(job.spec.class, API_CLASS_TRAINING);
    assert_int_equal(job.spec.replicas, 4);
    assert_int_equal(job.spec.master_port, 23456);
    assert_true(job.spec.ttl_set && job.spec.ttl_after_finished == 600);
    assert_int_equal(job.spec.max_run_s, 7200);
    assert_int_equal(job.spec.gang, API_TRUE);
    assert_int_equal(job.spec.preemptible, API_FALSE);
    assert_int_equal(job.spec.gpu.count, 8);
    assert_int_equal(job.spec.gpu.ntypes, 2);
    assert_string_equal(job.spec.gpu.types[1], "NVIDIA-A100-SXM4-40GB");
    assert_int_equal(job.spec.gpu.min_memory_gib, 40);
    assert_string_equal(job.spec.topology.required, "block");
    assert_string_equal(job.spec.topology.preferred, "rack");
    assert_string_equal(job.spec.topology.spread, "node");
    assert_string_equal(job.spec.pool, "training");
    assert_int_equal(job.spec.priority, 500);
    assert_int_equal(job.spec.suspend, 1);
    /* containers: 0.5 + 1.5 (limit fallback) = 2 CPUs < init 8 CPUs -> 8;
     * memory 16Gi + 512Mi > init 1Gi */
    assert_true(job.spec.cpu_milli == 8000);
    assert_true(job.spec.memory_bytes == 16LL * 1024 * 1024 * 1024 + 512LL * 1024 * 1024);
    assert_int_equal(job.spec.nselector, 1);
    assert_string_equal(job.spec.node_selector[0].key, "topology.kubernetes.io/zone");
    assert_string_equal(job.spec.node_selector[0].value, "zone-a");
    assert_int_equal(job.spec.ntolerations, 1);
    assert_string_equal(job.spec.tolerations[0].op, "Equal");
    assert_string_equal(job.spec.tolerations[0].effect, "NoExecute");
    assert_true(job.spec.tolerations[0].has_seconds && job.spec.tolerations[0].seconds == 30);
    assert_non_null(job.template);
    assert_int_equal(api_gpujob_gpus(&job), 32);
    /* deep copy owns its own template */
    api_gpujob_init(&copy);
    assert_int_equal(api_gpujob_copy(&copy, &job), 0);
    assert_true(copy.template != job.template);
    api_gpujob_release(&job);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(copy.template, "metadata"),
                                                                "labels"), "app")->valuestring, "x");
    api_gpujob_release(&copy);
}

/* Required node affinity: terms, expressions and values in order; the
 * preferred part and pod (anti-)affinity are accepted and not decoded. */
static void test_decode_affinity(void **st)
{
    (void)st;
    struct api_gpujob job;
    decode_job(JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
                   "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':["
                   "{'matchExpressions':[{'key':'zone','operator':'In','values':['a','b']},"
                   "{'key':'example.com/gen','operator':'Gt','values':['-3']}],"
                   "'matchFields':[{'key':'metadata.name','operator':'NotIn','values':['n9']}]},"
                   "{'matchExpressions':[{'key':'zone','operator':'DoesNotExist'}]},"
                   "{}]},"
                   "'preferredDuringSchedulingIgnoredDuringExecution':[{'weight':1,'preference':"
                   "{'matchExpressions':[{'key':'x','operator':'Bogus'}]}}]},"
                   "'podAntiAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':[]}}}}"),
               &job);
    const struct api_node_affinity *na = job.spec.node_affinity;
    assert_non_null(na);
    assert_int_equal(na->nterms, 3);
    assert_int_equal(na->terms[0].x0, 0);
    assert_int_equal(na->terms[0].nexprs, 3);
    assert_int_equal(na->terms[1].x0, 3);
    assert_int_equal(na->terms[1].nexprs, 1);
    assert_int_equal(na->terms[2].nexprs, 0); /* matches no node */
    assert_int_equal(na->nexprs, 4);
    assert_string_equal(na->exprs[0].key, "zone");
    assert_int_equal(na->exprs[0].op, API_OP_IN);
    assert_int_equal(na->exprs[0].field, 0);
    assert_int_equal(na->exprs[0].nvalues, 2);
    assert_string_equal(na->values[na->exprs[0].v0 + 1], "b");
    assert_int_equal(na->exprs[1].op, API_OP_GT);
    assert_string_equal(na->values[na->exprs[1].v0], "-3");
    assert_int_equal(na->exprs[2].field, 1);
    assert_int_equal(na->exprs[2].op, API_OP_NOT_IN);
    assert_string_equal(na->exprs[2].key, "metadata.name");
    assert_string_equal(na->values[na->exprs[2].v0], "n9");
    assert_int_equal(na->exprs[3].op, API_OP_DOES_NOT_EXIST);
    assert_int_equal(na->exprs[3].nvalues, 0);
    assert_int_equal(na->nvalues, 4);
    api_gpujob_release(&job);
    /* no affinity, only a preferred one, or a null required one: no terms */
    static const char *const none[] = {
        JOBT(""),
        JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
            "'affinity':{'nodeAffinity':{'preferredDuringSchedulingIgnoredDuringExecution':[]}}}}"),
        JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
            "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':null}}}}"),
        JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
            "'affinity':{'podAffinity':{}}}}"),
    };
    for (size_t i = 0; i < GQ_ARRAY_LEN(none); i++) {
        decode_job(none[i], &job);
        assert_null(job.spec.node_affinity);
        api_gpujob_release(&job);
    }
}

/* A job with every optional part: two GPU types, a two-entry nodeSelector,
 * two tolerations and a two-term required node affinity. */
#define JOB_PARTS JOB("'gpu':{'count':1,'types':['NVIDIA-H100-80GB-HBM3','NVIDIA-L4']}," \
    "'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}]," \
    "'nodeSelector':{'gangq.io/pool':'batch','topology.kubernetes.io/zone':'z1'}," \
    "'tolerations':[{'key':'nvidia.com/gpu','operator':'Exists','effect':'NoSchedule'}," \
    "{'key':'dedicated','value':'ml','effect':'NoExecute','tolerationSeconds':30}]," \
    "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':[" \
    "{'matchExpressions':[{'key':'zone','operator':'In','values':['a','b']}]," \
    "'matchFields':[{'key':'metadata.name','operator':'NotIn','values':['n9']}]}," \
    "{'matchExpressions':[{'key':'gen','operator':'Exists'}]}]}}}}}")

/* Everything JOB_PARTS decodes, read back. */
static void check_parts(const struct api_gpujob *job)
{
    const struct api_gpujob_spec *sp = &job->spec;
    const struct api_node_affinity *na = sp->node_affinity;
    assert_int_equal(sp->gpu.ntypes, 2);
    assert_non_null(sp->gpu.types);
    assert_string_equal(sp->gpu.types[0], "NVIDIA-H100-80GB-HBM3");
    assert_string_equal(sp->gpu.types[1], "NVIDIA-L4");
    assert_int_equal(sp->nselector, 2);
    assert_string_equal(sp->node_selector[0].key, "gangq.io/pool");
    assert_string_equal(sp->node_selector[0].value, "batch");
    assert_string_equal(sp->node_selector[1].key, "topology.kubernetes.io/zone");
    assert_string_equal(sp->node_selector[1].value, "z1");
    assert_int_equal(sp->ntolerations, 2);
    assert_string_equal(sp->tolerations[0].key, "nvidia.com/gpu");
    assert_string_equal(sp->tolerations[0].op, "Exists");
    assert_string_equal(sp->tolerations[0].effect, "NoSchedule");
    assert_false(sp->tolerations[0].has_seconds);
    assert_string_equal(sp->tolerations[1].key, "dedicated");
    assert_string_equal(sp->tolerations[1].op, "Equal");
    assert_string_equal(sp->tolerations[1].value, "ml");
    assert_true(sp->tolerations[1].has_seconds && sp->tolerations[1].seconds == 30);
    assert_non_null(na);
    assert_int_equal(na->nterms, 2);
    assert_int_equal(na->nexprs, 3);
    assert_int_equal(na->nvalues, 3);
    assert_int_equal(na->terms[0].x0, 0);
    assert_int_equal(na->terms[0].nexprs, 2);
    assert_int_equal(na->terms[1].x0, 2);
    assert_int_equal(na->terms[1].nexprs, 1);
    assert_string_equal(na->exprs[0].key, "zone");
    assert_int_equal(na->exprs[0].op, API_OP_IN);
    assert_int_equal(na->exprs[0].nvalues, 2);
    assert_string_equal(na->values[na->exprs[0].v0], "a");
    assert_string_equal(na->values[na->exprs[0].v0 + 1], "b");
    assert_string_equal(na->exprs[1].key, "metadata.name");
    assert_int_equal(na->exprs[1].field, 1);
    assert_int_equal(na->exprs[1].op, API_OP_NOT_IN);
    assert_string_equal(na->values[na->exprs[1].v0], "n9");
    assert_string_equal(na->exprs[2].key, "gen");
    assert_int_equal(na->exprs[2].op, API_OP_EXISTS);
    assert_int_equal(na->exprs[2].nvalues, 0);
}

static void check_no_parts(const struct api_gpujob *job)
{
    assert_int_equal(job->spec.gpu.ntypes, 0);
    assert_null(job->spec.gpu.types);
    assert_int_equal(job->spec.nselector, 0);
    assert_null(job->spec.node_selector);
    assert_int_equal(job->spec.ntolerations, 0);
    assert_null(job->spec.tolerations);
    assert_null(job->spec.node_affinity);
}

/* The optional parts live out of line: nothing is allocated for a job
 * without them (empty ones included), and the decoded job stays small. */
static void test_optional_parts(void **st)
{
    (void)st;
    struct api_gpujob job;
    static const char *const none[] = {
        JOBT(""),
        JOBT("'gpu':{'count':1},"),
        JOB("'gpu':{'count':1,'types':[]},'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
            "'nodeSelector':{},'tolerations':[],'affinity':{}}}"),
        JOB("'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
            "'affinity':{'nodeAffinity':null,'podAntiAffinity':{}}}}"),
    };
    assert_true(sizeof(struct api_gpujob) <= 2048);
    api_gpujob_init(&job);
    check_no_parts(&job);
    api_gpujob_release(&job);
    for (size_t i = 0; i < GQ_ARRAY_LEN(none); i++) {
        decode_job(none[i], &job);
        check_no_parts(&job);
        api_gpujob_release(&job);
        check_no_parts(&job);
    }
    decode_job(JOB_PARTS, &job);
    check_parts(&job);
    /* release clears the counts with the pointers; releasing twice is fine */
    api_gpujob_release(&job);
    check_no_parts(&job);
    api_gpujob_release(&job);
}

/* api_gpujob_copy is deep: the copy shares nothing with its source and reads
 * the same after the source is gone (ASan would see a use after free); dst's
 * old parts are released (a leak otherwise). */
static void test_copy_deep(void **st)
{
    (void)st;
    struct api_gpujob job, copy;
    decode_job(JOB_PARTS, &job);
    decode_job(JOB_PARTS, &copy); /* old content to be released by the copy */
    assert_int_equal(api_gpujob_copy(&copy, &job), 0);
    assert_ptr_not_equal(copy.spec.gpu.types, job.spec.gpu.types);
    assert_ptr_not_equal(copy.spec.node_selector, job.spec.node_selector);
    assert_ptr_not_equal(copy.spec.tolerations, job.spec.tolerations);
    assert_ptr_not_equal(copy.spec.node_affinity, job.spec.node_affinity);
    assert_ptr_not_equal(copy.spec.node_affinity->exprs, job.spec.node_affinity->exprs);
    assert_ptr_not_equal(copy.spec.node_affinity->values, job.spec.node_affinity->values);
    assert_ptr_not_equal(copy.template, job.template);
    /* scribble over the source's parts, then free them: the copy is unmoved */
    job.spec.node_selector[0].value[0] = 'X';
    job.spec.node_affinity->values[0][0] = 'X';
    api_gpujob_release(&job);
    check_parts(&copy);
    assert_int_equal(api_gpujob_copy(&copy, &copy), 0); /* self: no-op */
    check_parts(&copy);
    /* copying a job without parts over one with them leaves none */
    decode_job(JOBT(""), &job);
    assert_int_equal(api_gpujob_copy(&copy, &job), 0);
    check_no_parts(&copy);
    assert_string_equal(copy.meta.name, "train-a");
    api_gpujob_release(&job);
    api_gpujob_release(&copy);
}

/* The spec's names are owned copies sized to what was given, "" (never
 * NULL) when absent: a 253-character pool is kept whole, one character more
 * is refused by name; defaulting replaces the team with the namespace's Team
 * and keeps spec.team as written; a copy owns its own names (ASan sees a use
 * after free otherwise), and release frees them (the leak checker). */
static void test_names_owned(void **st)
{
    (void)st;
    struct api_gpujob job, copy;
    struct api_team team;
    char pool[300], json[1024];
    api_gpujob_init(&job);
    assert_non_null(job.spec.team);
    assert_string_equal(job.spec.team, "");
    assert_string_equal(job.spec.priority_class_name, "");
    assert_string_equal(job.spec.pool, "");
    assert_string_equal(job.spec.team_requested, "");
    api_gpujob_release(&job);
    assert_string_equal(job.spec.pool, ""); /* released: absent again, not dangling */

    memset(pool, 'p', 253);
    pool[253] = '\0';
    snprintf(json, sizeof(json), JOBT("'team':'nlp','priorityClassName':'high','pool':'%s',"), pool);
    decode_job(json, &job);
    assert_string_equal(job.spec.team, "nlp");
    assert_string_equal(job.spec.team_requested, "nlp");
    assert_string_equal(job.spec.priority_class_name, "high");
    assert_string_equal(job.spec.pool, pool);
    memset(&team, 0, sizeof(team));
    gq_strlcpy(team.meta.name, "vision", sizeof(team.meta.name));
    team.nnamespaces = 1;
    gq_strlcpy(team.namespaces[0], "ml", sizeof(team.namespaces[0]));
    struct api_lookup lk = {&team, 1, NULL, 0};
    assert_int_equal(api_gpujob_default(&job, &lk), 0);
    assert_string_equal(job.spec.team, "vision");
    assert_string_equal(job.spec.team_requested, "nlp");

    api_gpujob_init(&copy);
    assert_int_equal(api_gpujob_copy(&copy, &job), 0);
    assert_ptr_not_equal(copy.spec.team, job.spec.team);
    assert_ptr_not_equal(copy.spec.pool, job.spec.pool);
    api_gpujob_release(&job);
    assert_string_equal(copy.spec.team, "vision");
    assert_string_equal(copy.spec.team_requested, "nlp");
    assert_string_equal(copy.spec.priority_class_name, "high");
    assert_string_equal(copy.spec.pool, pool);
    api_gpujob_release(&copy);

    /* one character past a DNS subdomain: refused with the field's name */
    memset(pool, 'p', 254);
    pool[254] = '\0';
    snprintf(json, sizeof(json), JOBT("'pool':'%s',"), pool);
    char *txt = dq(json);
    struct api_errors errs;
    cJSON *obj;
    api_errors_init(&errs);
    assert_int_equal(api_json_parse(txt, strlen(txt), &obj, &errs), 0);
    api_gpujob_init(&job);
    assert_int_equal(api_gpujob_decode(obj, &job, &errs), GQ_EINVAL);
    assert_int_equal(errs.n, 1);
    assert_string_equal(errs.e[0].path, "spec.pool");
    assert_string_equal(job.spec.pool, "");
    api_gpujob_release(&job);
    cJSON_Delete(obj);
    free(txt);
}

/* A decode that fails still owns what it decoded (release frees it: the
 * leak checker proves it), and decoding again into the same job first
 * releases the previous parts. */
static void test_failed_decode_releases(void **st)
{
    (void)st;
    static const char *const bad[] = {
        /* an error outside the parts: they are decoded all the same */
        JOB("'class':'Nope','gpu':{'count':1,'types':['NVIDIA-L4']},"
            "'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
            "'nodeSelector':{'zone':'z1'},'tolerations':[{'operator':'Exists'}],"
            "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':["
            "{'matchExpressions':[{'key':'zone','operator':'In','values':['a']}]}]}}}}}"),
        /* errors inside them: what did decode is kept */
        JOB("'gpu':{'count':1,'types':['NVIDIA-L4',7]},"
            "'template':{'spec':{'containers':[{'resources':{'requests':{'cpu':1}}}],"
            "'nodeSelector':{'zone':'z1','bad key':'x'},"
            "'tolerations':[{'operator':'Exists'},{'operator':'In'}],"
            "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':["
            "{'matchExpressions':[{'key':'zone','operator':'In','values':['a']},{'key':'z','operator':'Gt','values':['x']}]},"
            "{'matchExpressions':[{'key':'b','operator':'Bogus'}]}]}}}}}"),
        /* no template: nothing beyond the GPU types */
        JOB("'gpu':{'count':1,'types':['NVIDIA-L4']}"),
    };
    struct api_gpujob job;
    api_gpujob_init(&job);
    for (size_t i = 0; i < GQ_ARRAY_LEN(bad); i++) {
        char *txt = dq(bad[i]);
        struct api_errors errs;
        cJSON *obj;
        api_errors_init(&errs);
        assert_int_equal(api_json_parse(txt, strlen(txt), &obj, &errs), 0);
        for (int round = 0; round < 2; round++) /* the second decode releases the first */
            assert_int_equal(api_gpujob_decode(obj, &job, &errs), GQ_EINVAL);
        assert_int_equal(job.spec.gpu.ntypes, 1);
        assert_string_equal(job.spec.gpu.types[0], "NVIDIA-L4");
        if (i < 2) {
            assert_int_equal(job.spec.nselector, 1);
            assert_string_equal(job.spec.node_selector[0].key, "zone");
            assert_int_equal(job.spec.ntolerations, 1);
            assert_non_null(job.spec.node_affinity);
            assert_int_equal(job.spec.node_affinity->nterms, i == 0 ? 1 : 2);
            assert_int_equal(job.spec.node_affinity->nexprs, 1);
            assert_string_equal(job.spec.node_affinity->values[0], "a");
        } else {
            assert_null(job.spec.node_selector);
            assert_null(job.spec.tolerations);
            assert_null(job.spec.node_affinity);
        }
        api_gpujob_release(&job);
        cJSON_Delete(obj);
        free(txt);
    }
}

static void test_defaults(void **st)
{
    (void)st;
    struct api_gpujob job;
    struct api_team teams[2];
    struct api_priorityclass pcs[2];
    struct api_lookup lk;
    memset(teams, 0, sizeof teams);
    gq_strlcpy(teams[0].meta.name, "nlp", sizeof teams[0].meta.name);
    teams[0].nnamespaces = 1;
    gq_strlcpy(teams[0].namespaces[0], "nlp", sizeof teams[0].namespaces[0]);
    gq_strlcpy(teams[1].meta.name, "vision", sizeof teams[1].meta.name);
    teams[1].nnamespaces = 2;
    gq_strlcpy(teams[1].namespaces[0], "cv", sizeof teams[1].namespaces[0]);
    gq_strlcpy(teams[1].namespaces[1], "ml", sizeof teams[1].namespaces[1]);
    memset(pcs, 0, sizeof pcs);
    gq_strlcpy(pcs[0].name, "high", sizeof pcs[0].name);
    pcs[0].value = 1000;
    gq_strlcpy(pcs[1].name, "default", sizeof pcs[1].name);
    pcs[1].value = 10;
    pcs[1].global_default = 1;
    lk.teams = teams;
    lk.nteams = 2;
    lk.pcs = pcs;
    lk.npcs = 2;

    /* Batch by default; gang and preemptible true; team from namespace; globalDefault priority */
    decode_job(JOBT(""), &job);
    assert_int_equal(job.spec.class, API_CLASS_NONE);
    assert_int_equal(job.spec.gang, API_UNSET);
    api_gpujob_default(&job, &lk);
    assert_int_equal(job.spec.class, API_CLASS_BATCH);
    assert_int_equal(job.spec.gang, API_TRUE);
    assert_int_equal(job.spec.preemptible, API_TRUE);
    assert_int_equal(job.spec.replicas, 1);
    assert_int_equal(job.spec.master_port, 0); /* not given: the controller's default */
    assert_false(job.spec.ttl_set); /* not given: kept until deleted */
    assert_string_equal(job.spec.team, "vision");
    assert_int_equal(job.spec.effective_priority, 10);
    api_gpujob_release(&job);

    /* Inference: gang false, not preemptible; named priority class */
    decode_job(JOBT("'class':'Inference','priorityClassName':'high','team':'nlp',"), &job);
    api_gpujob_default(&job, &lk);
    assert_int_equal(job.spec.gang, API_FALSE);
    assert_int_equal(job.spec.preemptible, API_FALSE);
    assert_string_equal(job.spec.team, "vision"); /* the namespace's Team, whatever spec.team says */
    assert_string_equal(job.spec.team_requested, "nlp"); /* refused by api_gpujob_tenancy */
    assert_int_equal(job.spec.effective_priority, 1000);
    assert_int_equal(job.spec.priority_class_found, 1);
    api_gpujob_release(&job);

    /* Training keeps explicit overrides; unknown class name leaves priority 0, not found */
    decode_job(JOBT("'class':'Training','gang':false,'preemptible':false,'priorityClassName':'nope',"), &job);
    api_gpujob_default(&job, &lk);
    assert_int_equal(job.spec.gang, API_FALSE);
    assert_int_equal(job.spec.preemptible, API_FALSE);
    assert_int_equal(job.spec.effective_priority, 0);
    assert_int_equal(job.spec.priority_class_found, 0);
    api_gpujob_release(&job);

    /* no namespace: "default"; no team matches; explicit priority */
    decode_job("{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'x'},"
               "'spec':{'priority':-5,'gpu':{'shares':500}," TPL "}}", &job);
    api_gpujob_default(&job, &lk);
    assert_string_equal(job.meta.namespace, "default");
    assert_string_equal(job.spec.team, "");
    assert_int_equal(job.spec.effective_priority, -5);
    assert_int_equal(api_gpujob_gpus(&job), 1); /* 500 milli-GPU rounds up */
    api_gpujob_release(&job);

    /* NULL lookup is fine */
    decode_job(JOBT("'replicas':3,'gpu':{'shares':400},"), &job);
    api_gpujob_default(&job, NULL);
    assert_int_equal(job.spec.effective_priority, 0);
    assert_int_equal(api_gpujob_gpus(&job), 2); /* 3 x 0.4 = 1.2 -> 2 */
    api_gpujob_release(&job);
}

/* ---- tenancy ---- */

static void decode_team_json(const char *json, struct api_team *t)
{
    char *txt = dq(json);
    cJSON *obj = NULL;
    struct api_errors errs;
    api_errors_init(&errs);
    assert_int_equal(api_json_parse(txt, strlen(txt), &obj, &errs), 0);
    assert_int_equal(api_team_decode(obj, t, &errs), 0);
    api_team_default(t);
    assert_int_equal(api_team_validate(t, &errs), 0);
    cJSON_Delete(obj);
    free(txt);
}

#define TEAMT(name, ts, spec)                                                                      \
    "{'apiVersion':'gangq.io/v1alpha1','kind':'Team','metadata':{'name':'" name "',"              \
    "'creationTimestamp':'" ts "'},'spec':{" spec "}}"
#define PODSPEC(extra) "'template':{'spec':{" extra "'containers':[{'name':'m','resources':{'requests':{'cpu':'1'}}}]}}"

struct tenancy_fixture {
    struct api_team teams[3];
    struct api_priorityclass pcs[4];
    struct api_lookup lk;
};

static void tenancy_setup(struct tenancy_fixture *f)
{
    memset(f, 0, sizeof *f);
    /* ml is claimed by vision (older) and by grabber (newer): vision owns it */
    decode_team_json(TEAMT("grabber", "2026-06-01T00:00:00Z", "'namespaces':['ml','other'],'maxPriority':1000000000"),
                     &f->teams[0]);
    decode_team_json(TEAMT("vision", "2026-01-01T00:00:00Z",
                           "'namespaces':['ml'],'maxPriority':5000,'priorityClasses':['low','mid','huge']"),
                     &f->teams[1]);
    decode_team_json(TEAMT("nlp", "2026-02-01T00:00:00Z", "'namespaces':['nlp']"), &f->teams[2]);
    gq_strlcpy(f->pcs[0].name, "low", sizeof f->pcs[0].name);
    f->pcs[0].value = 10;
    gq_strlcpy(f->pcs[1].name, "mid", sizeof f->pcs[1].name);
    f->pcs[1].value = 5000;
    gq_strlcpy(f->pcs[2].name, "huge", sizeof f->pcs[2].name);
    f->pcs[2].value = 100000;
    gq_strlcpy(f->pcs[3].name, "system-node-critical", sizeof f->pcs[3].name);
    f->pcs[3].value = 2000001000;
    f->lk.teams = f->teams;
    f->lk.nteams = 3;
    f->lk.pcs = f->pcs;
    f->lk.npcs = 4;
}

/* Decode, default and validate (clean) a job of namespace ns; run the Team rules. */
static const char *tenancy_of(const struct tenancy_fixture *f, const char *ns, const char *spec,
                              struct api_gpujob *job, struct api_errors *errs)
{
    char json[4096];
    snprintf(json, sizeof json,
             "{'apiVersion':'gangq.io/v1alpha1','kind':'GPUJob','metadata':{'name':'j','namespace':'%s'},"
             "'spec':{%s}}", ns, spec);
    decode_job(json, job);
    api_gpujob_default(job, &f->lk);
    api_errors_init(errs);
    assert_int_equal(api_gpujob_validate(job, NULL, errs), 0);
    return api_gpujob_tenancy(job, &f->lk, errs);
}

struct tenancy_case {
    const char *ns, *spec, *reason, *path, *msg;
};

static void test_tenancy_rules(void **st)
{
    (void)st;
    static const struct tenancy_case cases[] = {
        /* the namespace's Team, never another */
        {"ml", "'gpu':{'count':1}," TPL, NULL, NULL, NULL},
        {"ml", "'team':'vision','gpu':{'count':1}," TPL, NULL, NULL, NULL},
        {"ml", "'team':'nlp','gpu':{'count':1}," TPL, "WrongTeam", "spec.team",
         "namespace ml belongs to Team vision: spec.team must be vision or unset, got nlp"},
        {"ml", "'team':'grabber','gpu':{'count':1}," TPL, "WrongTeam", "spec.team",
         "namespace ml belongs to Team vision: spec.team must be vision or unset, got grabber"},
        {"lost", "'gpu':{'count':1}," TPL, "NoTeam", "metadata.namespace",
         "no Team lists namespace lost and spec.team is not set"},
        {"lost", "'team':'ghost','gpu':{'count':1}," TPL, "UnknownTeam", "spec.team", "team ghost does not exist"},
        {"lost", "'team':'nlp','gpu':{'count':1}," TPL, "WrongTeam", "spec.team",
         "Team nlp does not list namespace lost (no Team does): a job is charged to its namespace's Team"},
        /* priority ceiling and classes */
        {"ml", "'priority':5000," TPL, NULL, NULL, NULL},
        {"ml", "'priority':5001," TPL, "PriorityAboveCeiling", "spec.priority",
         "must be at most 5000 (Team vision's maxPriority), got 5001"},
        {"nlp", "'priority':1001," TPL, "PriorityAboveCeiling", "spec.priority",
         "must be at most 1000 (Team nlp's maxPriority), got 1001"},
        {"ml", "'priorityClassName':'mid'," TPL, NULL, NULL, NULL},
        {"ml", "'priorityClassName':'huge'," TPL, "PriorityAboveCeiling", "spec.priorityClassName",
         "PriorityClass huge has value 100000, above Team vision's maxPriority 5000"},
        {"ml", "'priorityClassName':'system-node-critical'," TPL, "PriorityClassNotAllowed", "spec.priorityClassName",
         "PriorityClass system-node-critical is not one Team vision allows (spec.priorityClasses)"},
        {"nlp", "'priorityClassName':'system-node-critical'," TPL, "PriorityAboveCeiling", "spec.priorityClassName",
         "PriorityClass system-node-critical has value 2000001000, above Team nlp's maxPriority 1000"},
        {"ml", "'priorityClassName':'nope'," TPL, "UnknownPriorityClass", "spec.priorityClassName",
         "PriorityClass nope does not exist"},
        {"ml", PODSPEC("'priorityClassName':'system-node-critical',"), "PriorityClassNotAllowed",
         "spec.template.spec.priorityClassName",
         "PriorityClass system-node-critical is not one Team vision allows (spec.priorityClasses)"},
        /* pod policy */
        {"ml", PODSPEC("'hostNetwork':true,"), "PodPolicy", "spec.template.spec.hostNetwork",
         "host namespaces are not allowed for Team vision (spec.podPolicy.allowHostNamespaces)"},
        {"ml", PODSPEC("'hostPID':true,"), "PodPolicy", "spec.template.spec.hostPID",
         "host namespaces are not allowed for Team vision (spec.podPolicy.allowHostNamespaces)"},
        {"ml", PODSPEC("'hostIPC':true,"), "PodPolicy", "spec.template.spec.hostIPC",
         "host namespaces are not allowed for Team vision (spec.podPolicy.allowHostNamespaces)"},
        {"ml", PODSPEC("'hostNetwork':false,'hostPID':false,"), NULL, NULL, NULL},
        {"ml", "'template':{'spec':{'containers':[{'name':'m','securityContext':{'privileged':true},"
               "'resources':{'requests':{'cpu':'1'}}}]}}",
         "PodPolicy", "spec.template.spec.containers[0].securityContext.privileged",
         "privileged containers are not allowed for Team vision (spec.podPolicy.allowPrivileged)"},
        {"ml", PODSPEC("'initContainers':[{'name':'i'},{'name':'j','securityContext':{'privileged':true}}],"),
         "PodPolicy", "spec.template.spec.initContainers[1].securityContext.privileged",
         "privileged containers are not allowed for Team vision (spec.podPolicy.allowPrivileged)"},
        {"ml", PODSPEC("'ephemeralContainers':[{'name':'e','securityContext':{'privileged':true}}],"),
         "PodPolicy", "spec.template.spec.ephemeralContainers[0].securityContext.privileged",
         "privileged containers are not allowed for Team vision (spec.podPolicy.allowPrivileged)"},
        {"ml", PODSPEC("'initContainers':[{'name':'i','securityContext':{'capabilities':{'add':['NET_ADMIN']}}}],"),
         "PodPolicy", "spec.template.spec.initContainers[0].securityContext.capabilities.add",
         "added capabilities are not allowed for Team vision (spec.podPolicy.allowCapabilities)"},
        {"ml", PODSPEC("'initContainers':[{'name':'i','securityContext':{'capabilities':{'add':[],'drop':['ALL']}}}],"),
         NULL, NULL, NULL},
        {"ml", PODSPEC("'volumes':[{'name':'a','emptyDir':{}},{'name':'b','hostPath':{'path':'/'}}],"), "PodPolicy",
         "spec.template.spec.volumes[1].hostPath",
         "hostPath volumes are not allowed for Team vision (spec.podPolicy.allowHostPath)"},
        {"ml", PODSPEC("'serviceAccountName':'gangq',"), "PodPolicy", "spec.template.spec.serviceAccountName",
         "service account \"gangq\" is not allowed for Team vision (spec.podPolicy.allowServiceAccounts)"},
        {"ml", PODSPEC("'serviceAccount':'admin',"), "PodPolicy", "spec.template.spec.serviceAccount",
         "service account \"admin\" is not allowed for Team vision (spec.podPolicy.allowServiceAccounts)"},
        {"ml", PODSPEC("'serviceAccountName':'default','serviceAccount':'',"), NULL, NULL, NULL},
    };
    struct tenancy_fixture f;
    struct api_gpujob job;
    struct api_errors errs;
    size_t i;
    tenancy_setup(&f);
    for (i = 0; i < GQ_ARRAY_LEN(cases); i++) {
        const struct tenancy_case *c = &cases[i];
        const char *why = tenancy_of(&f, c->ns, c->spec, &job, &errs);
        if (!c->reason) {
            if (why) {
                dump(&errs);
                fail_msg("case %zu (%s): refused (%s), expected admissible", i, c->spec, why);
            }
        } else {
            if (!why || strcmp(why, c->reason) || errs.n < 1 || strcmp(errs.e[0].path, c->path) ||
                strcmp(errs.e[0].msg, c->msg)) {
                dump(&errs);
                fail_msg("case %zu (%s): expected %s at %s: %s; got %s", i, c->spec, c->reason, c->path, c->msg,
                         why ? why : "(admissible)");
            }
        }
        api_gpujob_release(&job);
    }

    /* several problems: every one reported, the first one's reason returned */
    assert_string_equal(tenancy_of(&f, "ml", "'team':'nlp','priority':9999,"
                                              PODSPEC("'hostNetwork':true,'serviceAccountName':'x',"),
                                   &job, &errs),
                        "WrongTeam");
    assert_int_equal(errs.n, 4);
    assert_string_equal(errs.e[1].path, "spec.priority");
    assert_string_equal(errs.e[2].path, "spec.template.spec.hostNetwork");
    assert_string_equal(errs.e[3].path, "spec.template.spec.serviceAccountName");
    api_gpujob_release(&job);

    /* a Team that allows it: the pod policy flags */
    decode_team_json(TEAMT("nlp", "2026-02-01T00:00:00Z",
                           "'namespaces':['nlp'],'podPolicy':{'allowHostNamespaces':true,'allowPrivileged':true,"
                           "'allowCapabilities':true,'allowHostPath':true,'allowServiceAccounts':true}"),
                     &f.teams[2]);
    assert_null(tenancy_of(&f, "nlp", PODSPEC("'hostNetwork':true,'hostPID':true,'serviceAccountName':'x',"
                                              "'volumes':[{'name':'b','hostPath':{'path':'/'}}],"
                                              "'initContainers':[{'name':'i','securityContext':{'privileged':true,"
                                              "'capabilities':{'add':['SYS_ADMIN']}}}],"),
                           &job, &errs));
    api_gpujob_release(&job);
}

static void test_tenancy_team_owner(void **st)
{
    (void)st;
    struct tenancy_fixture f;
    struct api_gpujob job;
    struct api_errors errs;
    int nsi = -1;
    tenancy_setup(&f);
    /* the older Team owns ml, whatever the order of the list */
    assert_ptr_equal(api_namespace_team(f.teams, 3, "ml"), &f.teams[1]);
    assert_ptr_equal(api_namespace_team(f.teams, 3, "other"), &f.teams[0]);
    assert_null(api_namespace_team(f.teams, 3, "lost"));
    assert_ptr_equal(api_team_conflict(f.teams, 3, &f.teams[0], &nsi), &f.teams[1]);
    assert_int_equal(nsi, 0);
    assert_null(api_team_conflict(f.teams, 3, &f.teams[1], NULL));
    assert_null(api_team_conflict(f.teams, 3, &f.teams[2], NULL));
    /* equal creation times: the name decides; no timestamp counts as the newest */
    gq_strlcpy(f.teams[0].meta.creation_timestamp, f.teams[1].meta.creation_timestamp,
               sizeof f.teams[0].meta.creation_timestamp);
    assert_ptr_equal(api_namespace_team(f.teams, 3, "ml"), &f.teams[0]); /* "grabber" < "vision" */
    f.teams[0].meta.creation_timestamp[0] = '\0';
    assert_ptr_equal(api_namespace_team(f.teams, 3, "ml"), &f.teams[1]);
    assert_true(api_team_older(&f.teams[1], &f.teams[0]));
    assert_false(api_team_older(&f.teams[0], &f.teams[1]));

    /* defaulting: the job's team is the owner's; its priority is capped at the ceiling */
    tenancy_setup(&f);
    decode_job(JOBT("'team':'grabber','priorityClassName':'huge',"), &job);
    api_gpujob_default(&job, &f.lk);
    assert_string_equal(job.spec.team, "vision");
    assert_string_equal(job.spec.team_requested, "grabber");
    assert_int_equal(job.spec.effective_priority, 5000);
    assert_int_equal(job.spec.priority_class_found, 1);
    api_gpujob_release(&job);
    /* the default ceiling, 1000, also caps a globalDefault class (not refused: not asked for) */
    f.pcs[2].global_default = 1;
    assert_null(tenancy_of(&f, "nlp", TPL, &job, &errs));
    assert_int_equal(job.spec.effective_priority, API_DEFAULT_MAX_PRIORITY);
    assert_int_equal(api_team_max_priority(&f.teams[2]), 1000);
    api_gpujob_release(&job);
}

static void test_pod_template_sanitize(void **st)
{
    (void)st;
    char *txt = dq("{'metadata':{'labels':{'app':'x','gangq.io/team':'other','gangq.io/job':'j',"
                   "'rack.topology.gangq.io/x':'1','notgangq.io/y':'2','gangq.iox/z':'3'},"
                   "'annotations':{'gangq.io/gpu-milli':'999','gangq.io/gpu-devices':'0,1,2,3,4,5,6,7',"
                   "'GANGQ.IO/shout':'1','keep.example.com/a':'b'},"
                   "'finalizers':['example.com/hold'],'name':'n'},"
                   "'spec':{'terminationGracePeriodSeconds':999999999,'containers':[{'name':'c'}]}}");
    cJSON *t = cJSON_Parse(txt), *t2;
    char *out;
    assert_non_null(t);
    assert_int_equal(api_pod_template_sanitize(t, 30), 0);
    out = cJSON_PrintUnformatted(t);
    assert_string_equal(out, "{\"metadata\":{\"labels\":{\"app\":\"x\",\"notgangq.io/y\":\"2\",\"gangq.iox/z\":\"3\"},"
                             "\"annotations\":{\"keep.example.com/a\":\"b\"},\"name\":\"n\"},"
                             "\"spec\":{\"containers\":[{\"name\":\"c\"}],\"terminationGracePeriodSeconds\":30}}");
    free(out);
    /* within the cap: kept; absent: the cap when it is below the Kubernetes default of 30 s */
    t2 = cJSON_Parse("{\"spec\":{\"terminationGracePeriodSeconds\":10}}");
    assert_int_equal(api_pod_template_sanitize(t2, 30), 0);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(t2, "spec"), "terminationGracePeriodSeconds")->valueint, 10);
    cJSON_Delete(t2);
    t2 = cJSON_Parse("{\"spec\":{}}");
    assert_int_equal(api_pod_template_sanitize(t2, 30), 0);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(t2, "spec"), "terminationGracePeriodSeconds"));
    assert_int_equal(api_pod_template_sanitize(t2, 5), 0);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(t2, "spec"), "terminationGracePeriodSeconds")->valueint, 5);
    cJSON_Delete(t2);
    t2 = cJSON_Parse("{\"spec\":{\"terminationGracePeriodSeconds\":\"forever\"}}");
    assert_int_equal(api_pod_template_sanitize(t2, 7), 0);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(t2, "spec"), "terminationGracePeriodSeconds")->valueint, 7);
    cJSON_Delete(t2);
    t2 = cJSON_Parse("[1]");
    assert_int_equal(api_pod_template_sanitize(t2, 7), GQ_EINVAL);
    cJSON_Delete(t2);
    assert_true(api_is_gangq_key("gangq.io/job"));
    assert_true(api_is_gangq_key("topology.gangq.io/rack"));
    assert_false(api_is_gangq_key("gangq.io"));
    assert_false(api_is_gangq_key("xgangq.io/job"));
    assert_false(api_is_gangq_key("app"));
    cJSON_Delete(t);
    free(txt);
}

static void test_custom_levels(void **st)
{
    (void)st;
    struct api_config cfg;
    struct api_gpujob job;
    struct api_errors errs;
    memset(&cfg, 0, sizeof cfg);
    cfg.nlevels = 2;
    gq_strlcpy(cfg.levels[0], "superpod", sizeof cfg.levels[0]);
    gq_strlcpy(cfg.levels[1], "host", sizeof cfg.levels[1]);
    decode_job(JOBT("'topology':{'required':'superpod','spread':'host'},"), &job);
    api_errors_init(&errs);
    assert_int_equal(api_gpujob_validate(&job, &cfg, &errs), 0);
    api_gpujob_release(&job);
    decode_job(JOBT("'topology':{'required':'rack'},"), &job);
    assert_int_equal(api_gpujob_validate(&job, &cfg, &errs), GQ_EINVAL);
    assert_string_equal(errs.e[0].msg, "unknown level \"rack\"; known: superpod, host");
    api_gpujob_release(&job);
}

static void test_errors_bounded(void **st)
{
    (void)st;
    struct api_errors errs;
    struct gq_buf b;
    int i;
    char line[400];
    gq_buf_init(&b, 1 << 16);
    assert_int_equal(gq_buf_puts(&b, "{" HEAD "'spec':{"), 0);
    for (i = 0; i < 50; i++)
        assert_int_equal(gq_buf_printf(&b, "'bogus%d':1,", i), 0);
    assert_int_equal(gq_buf_puts(&b, TPL "}}"), 0);
    run(K_JOB, b.p, &errs);
    assert_int_equal(errs.n, API_MAX_ERRORS);
    assert_int_equal(errs.dropped, 50 - API_MAX_ERRORS);
    api_error_format(&errs, 0, line, sizeof line);
    assert_string_equal(line, "spec.bogus0: unknown field");
    gq_buf_release(&b);
    /* whole-object errors format without a path */
    run(K_JOB, "7", &errs);
    api_error_format(&errs, 0, line, sizeof line);
    assert_string_equal(line, "must be a JSON object, got number");
    /* several problems at once, all reported */
    run(K_JOB, JOBT("'class':'X','replicas':0,'gpu':{'count':0},'topology':{'required':'rak'},"), &errs);
    assert_int_equal(errs.n, 4);
}

static void test_team_pool_ok(void **st)
{
    (void)st;
    char *txt;
    cJSON *obj;
    struct api_errors errs;
    struct api_team t;
    struct api_gpupool p;
    struct api_priorityclass pc;

    api_errors_init(&errs);
    txt = dq(TEAM("'namespaces':['cv','ml'],'cohort':'research','weight':3,"
                  "'quota':[{'gpuType':'NVIDIA-H100-80GB-HBM3','gpus':16,'borrowingLimit':8,'lendingLimit':4},"
                  "{'gpuType':'*','gpus':4}]"));
    assert_int_equal(api_json_parse(txt, strlen(txt), &obj, &errs), 0);
    assert_int_equal(api_team_decode(obj, &t, &errs), 0);
    assert_int_equal(api_team_validate(&t, &errs), 0);
    assert_int_equal(t.nnamespaces, 2);
    assert_string_equal(t.cohort, "research");
    assert_int_equal(t.weight, 3);
    assert_int_equal(t.nquota, 2);
    assert_int_equal(t.quota[0].gpus, 16);
    assert_int_equal(t.quota[0].borrowing_limit, 8);
    assert_int_equal(t.quota[0].lending_limit, 4);
    assert_int_equal(t.quota[1].borrowing_limit, -1);
    assert_int_equal(t.quota[1].lending_limit, -1);
    cJSON_Delete(obj);
    free(txt);

    txt = dq(POOL("'nodeSelector':{'gangq.io/pool':'inference'},'classes':['Inference'],'protected':true,'reserveGPUs':2"));
    assert_int_equal(api_json_parse(txt, strlen(txt), &obj, &errs), 0);
    assert_int_equal(api_gpupool_decode(obj, &p, &errs), 0);
    assert_int_equal(api_gpupool_validate(&p, &errs), 0);
    assert_int_equal(p.classes, 1u << API_CLASS_INFERENCE);
    assert_int_equal(p.protect, 1);
    assert_int_equal(p.reserve_gpus, 2);
    assert_string_equal(p.node_selector[0].key, "gangq.io/pool");
    cJSON_Delete(obj);
    free(txt);

    txt = dq("{'apiVersion':'scheduling.k8s.io/v1','kind':'PriorityClass','metadata':{'name':'high'},"
             "'value':100000,'globalDefault':false,'description':'x'}");
    assert_int_equal(api_json_parse(txt, strlen(txt), &obj, &errs), 0);
    assert_int_equal(api_priorityclass_decode(obj, &pc, &errs), 0);
    assert_string_equal(pc.name, "high");
    assert_int_equal(pc.value, 100000);
    cJSON_Delete(obj);
    free(txt);
    assert_int_equal(errs.n, 0);
}

static void test_status_encode(void **st)
{
    (void)st;
    struct api_gpujob_status s;
    const char *nodes[] = {"gpu-a1", "gpu-a2"};
    cJSON *j, *back;
    char *txt;
    struct api_gpujob_status d;
    struct api_errors errs;

    memset(&s, 0, sizeof s);
    s.state = API_STATE_ADMITTED;
    gq_strlcpy(s.team, "vision", sizeof s.team);
    s.priority = 100;
    s.gpus = 16;
    s.admission.present = 1;
    gq_strlcpy(s.admission.time, "2026-01-02T03:04:05Z", sizeof s.admission.time);
    gq_strlcpy(s.admission.domain, "rack=r1", sizeof s.admission.domain);
    gq_strlcpy(s.admission.deadline, "2026-01-02T05:04:05Z", sizeof s.admission.deadline);
    s.admission.nnodes = 2;
    s.admission.nodes = nodes;
    s.preemptions = 1;
    s.last_preemption.present = 1;
    gq_strlcpy(s.last_preemption.by, "ml/serve", sizeof s.last_preemption.by);
    gq_strlcpy(s.last_preemption.reason, "Inference needs the GPUs", sizeof s.last_preemption.reason);
    gq_strlcpy(s.last_preemption.time, "2026-01-01T00:00:00Z", sizeof s.last_preemption.time);
    s.nconditions = 1;
    gq_strlcpy(s.conditions[0].type, "Admitted", sizeof s.conditions[0].type);
    gq_strlcpy(s.conditions[0].status, "True", sizeof s.conditions[0].status);
    gq_strlcpy(s.conditions[0].reason, "Placed", sizeof s.conditions[0].reason);
    gq_strlcpy(s.conditions[0].message, "2 nodes in rack r1", sizeof s.conditions[0].message);
    gq_strlcpy(s.conditions[0].last_transition_time, "2026-01-02T03:04:05Z",
               sizeof s.conditions[0].last_transition_time);
    j = api_gpujob_status_encode(&s);
    assert_non_null(j);
    txt = cJSON_PrintUnformatted(j);
    assert_string_equal(txt,
        "{\"status\":{\"state\":\"Admitted\",\"position\":null,\"message\":null,\"team\":\"vision\","
        "\"priority\":100,\"gpus\":16,\"admission\":{\"time\":\"2026-01-02T03:04:05Z\",\"domain\":\"rack=r1\","
        "\"deadline\":\"2026-01-02T05:04:05Z\",\"nodes\":[\"gpu-a1\",\"gpu-a2\"]},\"preemptions\":1,\"lastPreemption\":{\"by\":\"ml/serve\","
        "\"reason\":\"Inference needs the GPUs\",\"time\":\"2026-01-01T00:00:00Z\"},"
        "\"conditions\":[{\"type\":\"Admitted\",\"status\":\"True\",\"reason\":\"Placed\","
        "\"message\":\"2 nodes in rack r1\",\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}],"
        "\"startTime\":null,\"completionTime\":null,\"observedGeneration\":null,\"attempt\":0,"
        "\"retries\":0,\"enqueueTime\":null,\"arrival\":null,\"waitReason\":null}}");
    /* decode it back */
    api_errors_init(&errs);
    back = cJSON_Parse(txt);
    assert_int_equal(api_gpujob_status_decode(back, &d, &errs), 0);
    assert_int_equal(d.state, API_STATE_ADMITTED);
    assert_int_equal(d.gpus, 16);
    assert_int_equal(d.preemptions, 1);
    assert_string_equal(d.admission.domain, "rack=r1");
    assert_string_equal(d.admission.deadline, "2026-01-02T05:04:05Z");
    assert_string_equal(d.last_preemption.by, "ml/serve");
    assert_int_equal(d.nconditions, 1);
    assert_string_equal(d.conditions[0].message, "2 nodes in rack r1");
    cJSON_Delete(back);
    free(txt);
    cJSON_Delete(j);

    /* queued job: position set, admission cleared */
    memset(&s, 0, sizeof s);
    s.state = API_STATE_QUEUED;
    s.position = 3;
    gq_strlcpy(s.message, "0/12 nodes fit: 12 fewer than 8 free GPUs", sizeof s.message);
    j = api_gpujob_status_encode(&s);
    txt = cJSON_PrintUnformatted(j);
    assert_string_equal(txt,
        "{\"status\":{\"state\":\"Queued\",\"position\":3,\"message\":\"0/12 nodes fit: 12 fewer than 8 free GPUs\","
        "\"team\":null,\"priority\":0,\"gpus\":0,\"admission\":null,\"preemptions\":0,\"conditions\":[],"
        "\"startTime\":null,\"completionTime\":null,\"observedGeneration\":null,\"attempt\":0,"
        "\"retries\":0,\"enqueueTime\":null,\"arrival\":null,\"waitReason\":null}}");
    free(txt);
    cJSON_Delete(j);

    /* what a lost store is rebuilt from survives the round trip */
    memset(&s, 0, sizeof s);
    s.state = API_STATE_SUCCEEDED;
    s.observed_generation = 3;
    s.attempt = 2;
    s.retries = 1;
    gq_strlcpy(s.enqueue_time, "2026-01-02T03:04:05Z", sizeof s.enqueue_time);
    s.arrival = 123456789012345LL; /* 15 digits: cJSON prints it without an exponent */
    j = api_gpujob_status_encode(&s);
    txt = cJSON_PrintUnformatted(j);
    assert_non_null(strstr(txt, "\"observedGeneration\":3,\"attempt\":2,\"retries\":1,"
                                "\"enqueueTime\":\"2026-01-02T03:04:05Z\",\"arrival\":123456789012345,\"waitReason\":null}"));
    back = cJSON_Parse(txt);
    api_errors_init(&errs);
    assert_int_equal(api_gpujob_status_decode(back, &d, &errs), 0);
    assert_int_equal(d.state, API_STATE_SUCCEEDED);
    assert_int_equal(d.observed_generation, 3);
    assert_int_equal(d.attempt, 2);
    assert_int_equal(d.retries, 1);
    assert_string_equal(d.enqueue_time, "2026-01-02T03:04:05Z");
    assert_true(d.arrival == 123456789012345LL);
    cJSON_Delete(back);
    free(txt);
    cJSON_Delete(j);
    api_errors_init(&errs);
    back = cJSON_Parse("{\"status\":{\"arrival\":-1,\"observedGeneration\":1.5}}");
    assert_int_equal(api_gpujob_status_decode(back, &d, &errs), GQ_EINVAL);
    assert_int_equal(errs.n, 2);
    assert_string_equal(errs.e[0].path, "status.observedGeneration");
    assert_string_equal(errs.e[1].path, "status.arrival");
    cJSON_Delete(back);

    {
        struct api_team_status ts, tb;
        struct api_gpupool_status ps = {64, 40, 24, 8, 5};
        memset(&ts, 0, sizeof ts);
        ts.quota = 8, ts.used = 6, ts.borrowed = 2, ts.pending = 3, ts.running = 1;
        j = api_team_status_encode(&ts);
        txt = cJSON_PrintUnformatted(j);
        assert_string_equal(txt, "{\"status\":{\"quota\":8,\"used\":6,\"borrowed\":2,\"pending\":3,\"running\":1,"
                                 "\"observedGeneration\":null,\"conditions\":[],\"pendingHead\":[]}}");
        free(txt);
        cJSON_Delete(j);
        /* the head of the queue, as published */
        ts.npending_head = 1;
        gq_strlcpy(ts.pending_head[0].name, "j1", sizeof ts.pending_head[0].name);
        gq_strlcpy(ts.pending_head[0].namespace, "ml", sizeof ts.pending_head[0].namespace);
        ts.pending_head[0].position = 1;
        ts.pending_head[0].gpus = 8;
        j = api_team_status_encode(&ts);
        txt = cJSON_PrintUnformatted(j);
        assert_non_null(strstr(txt, "\"pendingHead\":[{\"name\":\"j1\",\"namespace\":\"ml\",\"position\":1,\"gpus\":8}]"));
        free(txt);
        cJSON_Delete(j);
        ts.npending_head = 0;
        /* an invalid edit is reported on a Valid condition; the generation in force stays */
        ts.observed_generation = 4;
        ts.nconditions = 1;
        gq_strlcpy(ts.conditions[0].type, "Valid", sizeof ts.conditions[0].type);
        gq_strlcpy(ts.conditions[0].status, "False", sizeof ts.conditions[0].status);
        gq_strlcpy(ts.conditions[0].reason, "InvalidSpec", sizeof ts.conditions[0].reason);
        gq_strlcpy(ts.conditions[0].message, "spec.quota[0].lendingLimit: bad", sizeof ts.conditions[0].message);
        gq_strlcpy(ts.conditions[0].last_transition_time, "2026-01-02T03:04:05Z",
                   sizeof ts.conditions[0].last_transition_time);
        j = api_team_status_encode(&ts);
        txt = cJSON_PrintUnformatted(j);
        assert_string_equal(txt, "{\"status\":{\"quota\":8,\"used\":6,\"borrowed\":2,\"pending\":3,\"running\":1,"
                                 "\"observedGeneration\":4,\"conditions\":[{\"type\":\"Valid\",\"status\":\"False\","
                                 "\"reason\":\"InvalidSpec\",\"message\":\"spec.quota[0].lendingLimit: bad\","
                                 "\"lastTransitionTime\":\"2026-01-02T03:04:05Z\"}],\"pendingHead\":[]}}");
        back = cJSON_Parse(txt);
        api_errors_init(&errs);
        assert_int_equal(api_team_status_decode(back, &tb, &errs), 0);
        assert_int_equal(tb.quota, 8);
        assert_int_equal(tb.running, 1);
        assert_int_equal(tb.observed_generation, 4);
        assert_int_equal(tb.nconditions, 1);
        assert_string_equal(tb.conditions[0].reason, "InvalidSpec");
        assert_string_equal(tb.conditions[0].last_transition_time, "2026-01-02T03:04:05Z");
        cJSON_Delete(back);
        free(txt);
        cJSON_Delete(j);
        j = api_gpupool_status_encode(&ps);
        txt = cJSON_PrintUnformatted(j);
        assert_string_equal(txt, "{\"status\":{\"gpus\":64,\"allocated\":40,\"free\":24,\"largestFree\":8,\"pending\":5}}");
        free(txt);
        cJSON_Delete(j);
    }
    /* bad status is reported, not trusted */
    api_errors_init(&errs);
    back = cJSON_Parse("{\"status\":{\"state\":\"Dancing\",\"position\":\"x\"}}");
    assert_int_equal(api_gpujob_status_decode(back, &d, &errs), GQ_EINVAL);
    assert_string_equal(errs.e[0].path, "status.state");
    assert_string_equal(errs.e[0].msg, "unknown state \"Dancing\"");
    assert_string_equal(errs.e[1].path, "status.position");
    cJSON_Delete(back);
}

static void test_enums(void **st)
{
    (void)st;
    enum api_class c;
    enum api_state s;
    assert_string_equal(api_class_name(API_CLASS_TRAINING), "Training");
    assert_string_equal(api_class_name((enum api_class)99), "");
    assert_int_equal(api_class_parse("Inference", &c), 0);
    assert_int_equal(c, API_CLASS_INFERENCE);
    assert_int_equal(api_class_parse("", &c), GQ_EINVAL);
    assert_string_equal(api_state_name(API_STATE_PREEMPTED), "Preempted");
    assert_int_equal(api_state_parse("Succeeded", &s), 0);
    assert_int_equal(s, API_STATE_SUCCEEDED);
    assert_int_equal(api_state_parse("Done", &s), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_valid_shapes),
        cmocka_unit_test(test_decode_fields),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_names_owned),
        cmocka_unit_test(test_tenancy_rules),
        cmocka_unit_test(test_tenancy_team_owner),
        cmocka_unit_test(test_pod_template_sanitize),
        cmocka_unit_test(test_custom_levels),
        cmocka_unit_test(test_errors_bounded),
        cmocka_unit_test(test_team_pool_ok),
        cmocka_unit_test(test_status_encode),
        cmocka_unit_test(test_enums),
        cmocka_unit_test(test_decode_affinity),
        cmocka_unit_test(test_optional_parts),
        cmocka_unit_test(test_copy_deep),
        cmocka_unit_test(test_failed_decode_releases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
