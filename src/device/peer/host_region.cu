/* Shared regions in host memory, for ranks whose GPUs cannot reach each
 * other's memory (NCCL_P2P_DISABLE, no peer access): each rank's region is a
 * POSIX shared-memory segment that every local rank maps and registers with
 * CUDA, so kernels reach it over PCIe. The segment is unlinked as soon as
 * every rank has mapped it: nothing is left behind if a process dies. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/peer/host_region.h"

extern "C" {
#include "util/check.h"
}

void td_host_region_name(char* out, size_t len, const unsigned char* secret, uint64_t comm_hash,
                         int rank) {
  snprintf(out, len, "/tutti-dev-%02x%02x%02x%02x%02x%02x-%016llx-%d", secret[0], secret[1],
           secret[2], secret[3], secret[4], secret[5], (unsigned long long)comm_hash, rank);
}

ncclResult_t td_host_region_map(const char* name, size_t bytes, int create,
                                struct td_host_region* r) {
  memset(r, 0, sizeof *r);
  r->bytes = bytes;
  int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) {
    return tutti_error(ncclSystemError, "shm_open(%s) for GPU queues in host memory failed: %s",
                       name, strerror(errno));
  }
  if (create && ftruncate(fd, (off_t)bytes) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name);
    return tutti_error(ncclSystemError,
                       "sizing %zu bytes of /dev/shm for GPU queues failed: %s (is /dev/shm "
                       "large enough? containers: --shm-size)",
                       bytes, strerror(err));
  }
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (create) {
      shm_unlink(name);
    }
    return tutti_error(ncclSystemError, "mmap of %zu bytes of GPU queues failed: %s", bytes,
                       strerror(errno));
  }
  r->host = (char*)p;
  if (create) {
    memset(p, 0, bytes);
  }
  ncclResult_t res = td_host_region_repin(r);
  if (res != ncclSuccess) {
    td_host_region_unmap(r);
    if (create) {
      shm_unlink(name);
    }
  }
  return res;
}

ncclResult_t td_host_region_repin(struct td_host_region* r) {
  cudaError_t e =
      cudaHostRegister(r->host, r->bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e == cudaSuccess) {
    r->registered = 1;
    e = cudaHostGetDevicePointer((void**)&r->dev, r->host, 0);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return tutti_error(ncclUnhandledCudaError,
                       "registering %zu bytes of host memory for GPU queues failed: %s (%s)",
                       r->bytes, cudaGetErrorString(e), cudaGetErrorName(e));
  }
  return ncclSuccess;
}

void td_host_region_unpin(struct td_host_region* r) {
  if (r->registered) {
    cudaHostUnregister(r->host);
    r->registered = 0;
  }
}

ncclResult_t td_host_region_punch(struct td_host_region* r) {
  /* Frees the shared memory file's pages, and so every process's view of
   * them (the file was unlinked at setup: only the mappings hold it). */
  if (r->host != NULL && madvise(r->host, r->bytes, MADV_REMOVE) != 0) {
    return tutti_error(ncclSystemError,
                       "giving back %zu bytes of host memory of GPU queues failed: %s", r->bytes,
                       strerror(errno));
  }
  return ncclSuccess;
}

void td_host_region_unmap(struct td_host_region* r) {
  if (r->registered) {
    cudaHostUnregister(r->host);
  }
  if (r->host != NULL) {
    munmap(r->host, r->bytes);
  }
  memset(r, 0, sizeof *r);
}
