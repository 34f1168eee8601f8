/*
 * cmd.h — the gangq subcommands. Each takes argv after the subcommand name
 * (argv[0] is the subcommand) and returns the process exit code: 0 ok, 1 error,
 * 2 usage error.
 */
#ifndef GQ_CMD_H
#define GQ_CMD_H

int cmd_controller(int argc, char **argv); /* controller/ctl_main.c */
int cmd_simulate(int argc, char **argv);   /* controller/sim/sim_cmd.c */
int cmd_bench(int argc, char **argv);      /* controller/bench.c */
int cmd_audit(int argc, char **argv);      /* controller/audit_cmd.c */
int cmd_validate(int argc, char **argv);   /* controller/validate_cmd.c */
int cmd_kubectl_gangq(int argc, char **argv); /* controller/plugin/plugin_main.c */

/* bench subcommands */
int bench_sched(int argc, char **argv);    /* controller/scheduler/sched_bench.c */
int bench_store(int argc, char **argv);    /* store/store_bench.c */
int bench_cache(int argc, char **argv);    /* controller/kube/kube_bench.c */
int bench_reconcile(int argc, char **argv); /* controller/ctl_bench.c */

#define GANGQ_VERSION "0.1.0"

#endif
