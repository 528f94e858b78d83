/* Stands in for PyTorch's libtorch_cuda.so in the tests of tutti.torch: a
 * library loaded with RTLD_LOCAL that needs libnccl.so.2 (DT_NEEDED, found
 * through its RUNPATH) and calls it. */
const char* ncclGetErrorString(int result);
const char* fake_torch_nccl_says(void);

const char* fake_torch_nccl_says(void) {
  return ncclGetErrorString(3);
}

int ncclGetVersion(int* version);
int fake_torch_nccl_version(int* version);

int fake_torch_nccl_version(int* version) {
  return ncclGetVersion(version);
}
