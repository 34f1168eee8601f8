/* bench.c — `gangq bench sched|store|cache|reconcile [--json]`. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gangq bench sched|store|cache|reconcile [--json] [options]\n");
        return 2;
    }
    if (!strcmp(argv[1], "sched"))
        return bench_sched(argc - 1, argv + 1);
    if (!strcmp(argv[1], "store"))
        return bench_store(argc - 1, argv + 1);
    if (!strcmp(argv[1], "cache"))
        return bench_cache(argc - 1, argv + 1);
    if (!strcmp(argv[1], "reconcile"))
        return bench_reconcile(argc - 1, argv + 1);
    fprintf(stderr, "gangq bench: unknown benchmark \"%s\" (known: sched, store, cache, reconcile)\n", argv[1]);
    return 2;
}
