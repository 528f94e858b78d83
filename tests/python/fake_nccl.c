/* Stands in for NVIDIA's libnccl.so.2 in the tests of tutti.torch: the same
 * soname, and NVIDIA's answer to ncclGetErrorString(ncclInternalError), by
 * which tutti.torch tells the libraries apart. */
int ncclGetVersion(int* version);
const char* ncclGetErrorString(int result);
int ncclCommInitRank(void);

int ncclGetVersion(int* version) {
  *version = 23007;
  return 0;
}

const char* ncclGetErrorString(int result) {
  return result == 3 ? "internal error - please report this issue to the NCCL developers"
                     : "not tutti";
}

int ncclCommInitRank(void) {
  return 5; /* ncclInvalidUsage: never meant to run */
}
