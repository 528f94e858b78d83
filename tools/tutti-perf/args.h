/* Command line (nccl-tests' flags plus --lib, --json, --device, --label) and
 * the launcher's environment (which process of how many this is). */
#ifndef TUTTI_PERF_ARGS_H
#define TUTTI_PERF_ARGS_H

#include "perf.h"

/* Fills `o`. Prints usage and exits 0 for -h, 2 for a bad command line. */
void perf_args_parse(int argc, char** argv, struct perf_opts* o);

/* RANK/WORLD_SIZE/LOCAL_RANK (torchrun, tuttirun), OMPI_COMM_WORLD_* (Open
 * MPI's mpirun), PMI_RANK/PMI_SIZE (MPICH, Intel MPI) or SLURM_PROCID/
 * SLURM_NTASKS/SLURM_LOCALID (srun); one process when none is set. */
void perf_args_world(int* nprocs, int* proc, int* local_rank);

#endif
