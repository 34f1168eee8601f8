/* PLACEHOLDER: replaced when this module lands. */
#include <stdio.h>
#include "cmd.h"

int bench_sched(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "gangq %s: not built yet\n", argv[0]);
    return 1;
}
