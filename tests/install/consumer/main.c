/* Links to an installed tutti and runs a one-rank allreduce. */
#include <nccl.h>
#include <stdio.h>

int main(void) {
  int v = 0;
  ncclComm_t comm;
  float x[3] = {1, 2, 3}, y[3];
  if (ncclGetVersion(&v) != ncclSuccess || v != NCCL_VERSION_CODE)
    return 1;
  if (ncclCommInitAll(&comm, 1, NULL) != ncclSuccess)
    return 2;
  if (ncclAllReduce(x, y, 3, ncclFloat, ncclSum, comm, NULL) != ncclSuccess)
    return 3;
  ncclCommDestroy(comm);
  printf("consumer: version %d, %g %g %g\n", v, y[0], y[1], y[2]);
  return y[2] == 3 ? 0 : 4;
}
