/* Links to an installed tutti and sums one value over the ranks a launcher
 * started (tuttirun -n N sets RANK, WORLD_SIZE and NCCL_COMM_ID). */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  const char* rank_s = getenv("RANK");
  const char* size_s = getenv("WORLD_SIZE");
  if (rank_s == NULL || size_s == NULL) {
    fprintf(stderr, "ranks: RANK and WORLD_SIZE are not set: start it under a launcher\n");
    return 1;
  }
  int rank = atoi(rank_s), nranks = atoi(size_s);
  ncclUniqueId id; /* the same on every rank: NCCL_COMM_ID names the root */
  ncclComm_t comm;
  float x = (float)(rank + 1), y = 0;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    return 2;
  }
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    return 3;
  }
  if (ncclAllReduce(&x, &y, 1, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
    return 4;
  }
  ncclCommDestroy(comm);
  printf("ranks: rank %d of %d, sum %g\n", rank, nranks, y);
  return y == (float)(nranks * (nranks + 1) / 2) ? 0 : 5;
}
