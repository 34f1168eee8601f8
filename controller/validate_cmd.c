/*
 * validate_cmd.c — `gangq validate FILE...`: check manifests offline.
 *
 * Reads every YAML stream (multi-document), decodes each document by kind
 * (GPUJob, Team, GPUPool, PriorityClass), applies defaults (team from the
 * Teams and priority from the PriorityClasses found in the same files) and
 * validates, GPUJobs also against their Team's rules (api_gpujob_tenancy). Prints
 * "file:line: Kind ns/name: ok" (the line where the document starts) or one line
 * per problem with its field path. Other kinds are reported as skipped. Exit 0 when all is
 * well, 1 on any error, 2 on usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cmd.h"
#include "yamljson.h"

#define VALIDATE_MAX_FILES 256

struct vfile {
    const char *path;
    cJSON *docs; /* owned; NULL when the file failed to load */
    int *lines;  /* owned: the line where each document starts (1-based) */
};


static const char *kind_of(const cJSON *doc)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "kind");
    return cJSON_IsString(k) ? k->valuestring : "";
}

static void obj_name(const cJSON *doc, char *buf, size_t len)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(md, "name");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(md, "namespace");
    const char *name = cJSON_IsString(n) ? n->valuestring : "?";
    if (cJSON_IsString(ns))
        snprintf(buf, len, "%s/%s", ns->valuestring, name);
    else
        snprintf(buf, len, "%s", name);
}

/* The Team rules the controller applies before admission (with the Teams and
 * PriorityClasses of these files; a class missing from them may exist in the
 * cluster: only a note). */
static void tenancy(const struct api_gpujob *job, const struct api_lookup *lk, struct api_errors *errs)
{
    struct api_errors te;
    api_errors_init(&te);
    api_gpujob_tenancy(job, lk, &te);
    for (int i = 0; i < te.n; i++) {
        size_t n = strlen(te.e[i].msg);
        if (!strncmp(te.e[i].msg, "PriorityClass ", 14) && n > 15 &&
            !strcmp(te.e[i].msg + n - 15, " does not exist"))
            continue;
        api_errors_add(errs, te.e[i].path, "%s", te.e[i].msg);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: gangq validate FILE...\n"
                    "  Checks GPUJob, Team, GPUPool and PriorityClass manifests (YAML, multi-document)\n"
                    "  and prints every problem with its field path. Exit 1 on any error.\n");
}

int cmd_validate(int argc, char **argv)
{
    struct vfile *files = NULL;
    struct api_team *teams = NULL;
    struct api_priorityclass *pcs = NULL;
    struct api_lookup lk;
    struct api_config cfg;
    struct api_gpujob job;
    size_t nfiles = 0, nteams = 0, npcs = 0, maxobjs = 0, f;
    int errors = 0, oks = 0, skipped = 0, rc = 1, i;
    char err[512];

    api_gpujob_init(&job);
    api_config_default(&cfg);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    if (argc - 1 > VALIDATE_MAX_FILES) {
        fprintf(stderr, "gangq validate: at most %d files\n", VALIDATE_MAX_FILES);
        return 2;
    }
    files = calloc((size_t)argc, sizeof *files);
    if (!files)
        goto oom;
    /* pass 1: load everything, count Teams and PriorityClasses */
    for (i = 1; i < argc; i++) {
        struct vfile *vf = &files[nfiles++];
        vf->path = argv[i];
        if (!(vf->lines = calloc(GQ_YAML_MAX_DOCS, sizeof *vf->lines)))
            goto oom;
        if (gq_yaml_load_file_lines(argv[i], &vf->docs, vf->lines, GQ_YAML_MAX_DOCS, err, sizeof err)) {
            printf("%s\n", err);
            errors++;
            continue;
        }
        maxobjs += (size_t)cJSON_GetArraySize(vf->docs);
    }
    teams = calloc(maxobjs + 1, sizeof *teams);
    pcs = calloc(maxobjs + 1, sizeof *pcs);
    if (!teams || !pcs)
        goto oom;
    for (f = 0; f < nfiles; f++) {
        const cJSON *doc;
        cJSON_ArrayForEach(doc, files[f].docs)
        {
            struct api_errors errs;
            api_errors_init(&errs);
            if (!strcmp(kind_of(doc), "Team") && api_team_decode(doc, &teams[nteams], &errs) == 0)
                nteams++;
            else if (!strcmp(kind_of(doc), "PriorityClass") &&
                     api_priorityclass_decode(doc, &pcs[npcs], &errs) == 0)
                npcs++;
        }
    }
    lk.teams = teams;
    lk.nteams = nteams;
    lk.pcs = pcs;
    lk.npcs = npcs;

    /* pass 2: decode, default, validate, report */
    for (f = 0; f < nfiles; f++) {
        const cJSON *doc;
        int d = 0;
        cJSON_ArrayForEach(doc, files[f].docs)
        {
            struct api_errors errs;
            const char *kind = kind_of(doc);
            char name[320], line[API_ERR_PATH_MAX + API_ERR_MSG_MAX + 4], note[300] = "";
            int e;
            int ln = files[f].lines[d++]; /* where the document starts */
            if (cJSON_IsNull(doc))
                continue;
            api_errors_init(&errs);
            obj_name(doc, name, sizeof name);
            if (!strcmp(kind, "GPUJob")) {
                int r = api_gpujob_decode(doc, &job, &errs);
                if (r == GQ_ENOMEM)
                    goto oom;
                if (api_gpujob_default(&job, &lk))
                    goto oom;
                api_gpujob_validate(&job, &cfg, &errs);
                if (!errs.n && job.spec.team[0] && nteams)
                    tenancy(&job, &lk, &errs);
                if (!job.spec.team[0])
                    snprintf(note, sizeof note, " (no Team owns namespace %s: the controller keeps it Queued)",
                             job.meta.namespace);
                else if (job.spec.priority_class_name[0] && !job.spec.priority_class_found && npcs)
                    snprintf(note, sizeof note, " (PriorityClass %s not in these files)",
                             job.spec.priority_class_name);
                api_gpujob_release(&job);
            } else if (!strcmp(kind, "Team")) {
                struct api_team t;
                const struct api_team *older;
                int nsi = -1;
                api_team_decode(doc, &t, &errs);
                api_team_default(&t);
                api_team_validate(&t, &errs);
                if (!errs.n && (older = api_team_conflict(teams, nteams, &t, &nsi))) {
                    char p[64];
                    snprintf(p, sizeof p, "spec.namespaces[%d]", nsi);
                    api_errors_add(&errs, p,
                                   "namespace %s is also listed by Team %s, which owns it (older, or "
                                   "first by name): a namespace belongs to one Team",
                                   t.namespaces[nsi], older->meta.name);
                }
            } else if (!strcmp(kind, "GPUPool")) {
                struct api_gpupool p;
                api_gpupool_decode(doc, &p, &errs);
                api_gpupool_validate(&p, &errs);
            } else if (!strcmp(kind, "PriorityClass")) {
                struct api_priorityclass pc;
                api_priorityclass_decode(doc, &pc, &errs);
            } else {
                printf("%s:%d: %s %s: skipped (not a gangq kind)\n", files[f].path, ln,
                       kind[0] ? kind : "(no kind)", name);
                skipped++;
                continue;
            }
            if (errs.n == 0) {
                printf("%s:%d: %s %s: ok%s\n", files[f].path, ln, kind, name, note);
                oks++;
                continue;
            }
            for (e = 0; e < errs.n; e++) {
                api_error_format(&errs, e, line, sizeof line);
                printf("%s:%d: %s %s: %s\n", files[f].path, ln, kind, name, line);
            }
            if (errs.dropped)
                printf("%s:%d: %s %s: ... and %d more problems\n", files[f].path, ln, kind, name,
                       errs.dropped);
            errors++;
        }
    }
    printf("validate: %d ok, %d with errors, %d skipped\n", oks, errors, skipped);
    rc = errors ? 1 : 0;
    goto out;
oom:
    fprintf(stderr, "gangq validate: out of memory\n");
    rc = 1;
out:
    api_gpujob_release(&job);
    for (f = 0; files && f < nfiles; f++) {
        cJSON_Delete(files[f].docs);
        free(files[f].lines);
    }
    free(files);
    free(teams);
    free(pcs);
    return rc;
}
