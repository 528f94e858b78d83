/* Which launcher started this process (tuttirun / torchrun, Open MPI's
 * mpirun, MPICH's mpiexec, Slurm's srun) and what it tells: rank, sizes and
 * the rendezvous address that NCCL_COMM_ID can be made of. */
#ifndef TUTTI_BOOTSTRAP_LAUNCHER_H
#define TUTTI_BOOTSTRAP_LAUNCHER_H

#include <stddef.h>

struct tutti_launcher {
  int found;            /* 1 when a launcher's variables were read */
  const char* launcher; /* "tuttirun", "torchrun", "mpirun", "mpiexec", "srun"; "" if none */
  int rank, world_size; /* -1 when unknown */
  int local_rank, local_world_size; /* -1 when the launcher does not say */
  /* NCCL_COMM_ID when set; else "host:port" from the launcher (MASTER_ADDR and
   * MASTER_PORT + 1, or Slurm's first host and a port derived from the job
   * id); else "" (the program must hand the unique id around itself). */
  char comm_id[300];
};

/* A getenv: returns the value of `name` or NULL. */
typedef const char* (*tutti_launcher_get_fn)(const char* name, void* ctx);

/* Reads the variables through `get`. Returns 1 when a launcher was found,
 * 0 when none (out->found = 0), -1 when a launcher's variables are
 * inconsistent or not numbers (the sentence is in tutti_last_error()).
 * Precedence when several are present, innermost launcher first:
 * tuttirun/torchrun, mpirun, mpiexec, srun. */
int tutti_launcher_read_from(tutti_launcher_get_fn get, void* ctx, struct tutti_launcher* out);
/* The same on this process's environment. */
int tutti_launcher_read(struct tutti_launcher* out);

/* NCCL_COMM_ID's value now (environment or config file), NULL when unset. */
const char* tutti_param_comm_id(void);

/* Sets NCCL_COMM_ID to env->comm_id unless NCCL_COMM_ID is already set or
 * comm_id is empty, so that every rank's ncclGetUniqueId returns the same
 * id. Returns 1 when it set it, 0 when there was nothing to do, -1 on error. */
int tutti_launcher_export_comm_id(const struct tutti_launcher* env);

/* The first host of a Slurm hostlist: "node[03-05,07],gpu1" -> "node03".
 * Returns 0, or -1 when the list is malformed or `out` too small. */
int tutti_launcher_hostlist_first(const char* list, char* out, size_t len);
/* Tasks on node `node` of a Slurm tasks-per-node list ("4(x2),3": 4, 4, 3);
 * -1 when malformed or out of range. */
int tutti_launcher_tasks_on_node(const char* spec, int node);
/* The NCCL_COMM_ID port of a Slurm job step without MASTER_PORT: outside
 * the ephemeral range, different for neighbouring jobs and for the steps of
 * one job. */
int tutti_launcher_slurm_port(long job_id, long step_id);

#endif
