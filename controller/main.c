/* main.c — the gangq binary: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gangq <command> [options]\n"
            "\n"
            "commands:\n"
            "  controller  run the controller against a Kubernetes API server\n"
            "  simulate    run the scheduler on a simulated cluster and job trace\n"
            "  bench       benchmarks: `gangq bench sched|store|cache|reconcile`\n"
            "  audit       read the audit log from a gangq database\n"
            "  validate    decode and validate GPUJob/Team/GPUPool manifests\n"
            "  kubectl     the kubectl plugin (`gangq kubectl queue`; installed as\n"
            "              kubectl-gangq it serves `kubectl gangq ...`)\n"
            "  version     print the version\n"
            "\n"
            "`gangq <command> --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    /* called as kubectl-gangq (the kubectl plugin, usually a symlink) */
    const char *base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : argc > 0 && argv[0] ? argv[0] : "";
    if (!strcmp(base, "kubectl-gangq"))
        return cmd_kubectl_gangq(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "controller"))
        return cmd_controller(argc - 1, argv + 1);
    if (!strcmp(c, "simulate"))
        return cmd_simulate(argc - 1, argv + 1);
    if (!strcmp(c, "bench"))
        return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(c, "audit"))
        return cmd_audit(argc - 1, argv + 1);
    if (!strcmp(c, "validate"))
        return cmd_validate(argc - 1, argv + 1);
    if (!strcmp(c, "kubectl"))
        return cmd_kubectl_gangq(argc - 1, argv + 1);
    if (!strcmp(c, "version") || !strcmp(c, "--version")) {
        printf("gangq %s\n", GANGQ_VERSION);
        return 0;
    }
    if (!strcmp(c, "help") || !strcmp(c, "--help") || !strcmp(c, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "gangq: unknown command \"%s\"\n\n", c);
    usage(stderr);
    return 2;
}
