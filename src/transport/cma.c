/* Reaching a peer's memory (see cma.h). Cross-memory attach
 * (process_vm_readv) needs the same user and the ptrace access check
 * (Yama's ptrace_scope 0, or 1 with a ptracer relationship, or
 * CAP_SYS_PTRACE); containers' seccomp profiles may refuse it outright. The
 * probe finds out before any collective relies on it. */
#define _GNU_SOURCE
#include "transport/cma.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/check.h"
#include "util/param.h"

/* TUTTI_CMA_DISABLE=1: never read another process's memory (threads of one
 * process still read each other's buffers). */
static TUTTI_PARAM(cma_disable, "TUTTI_CMA_DISABLE", 0,
                   "1: never read peers' memory with cross-memory attach");

/* A thread of this process: the offered address is ours. */
static const void* same_local(const struct tutti_peer_buf* b) {
  return (const void*)(uintptr_t)b->addr;
}

static int same_read(const struct tutti_peer_buf* b, uint64_t off, void* dst, size_t bytes) {
  memcpy(dst, (const char*)(uintptr_t)b->addr + off, bytes);
  return 0;
}

static int same_write(const struct tutti_peer_buf* b, uint64_t off, const void* src, size_t bytes) {
  memcpy((char*)(uintptr_t)b->addr + off, src, bytes);
  return 0;
}

/* Moves `bytes` between this process's `local` and `addr` in process `pid`
 * (to `addr` when `out`), in as many system calls as the kernel needs. */
static int cma_move(int32_t pid, void* local, uint64_t addr, size_t bytes, int out) {
  size_t done = 0;
  while (done < bytes) {
    struct iovec l = {(char*)local + done, bytes - done};
    struct iovec r = {(void*)(uintptr_t)(addr + done), bytes - done};
    ssize_t moved =
        out ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (moved < 0 && errno == EINTR) {
      continue;
    }
    if (moved <= 0) {
      return moved < 0 ? errno : EFAULT;
    }
    done += (size_t)moved;
  }
  return 0;
}

/* Another process: nothing to read in place. */
static const void* other_local(const struct tutti_peer_buf* b) {
  (void)b;
  return NULL;
}

static int other_read(const struct tutti_peer_buf* b, uint64_t off, void* dst, size_t bytes) {
  return cma_move(b->pid, dst, b->addr + off, bytes, 0);
}

static int other_write(const struct tutti_peer_buf* b, uint64_t off, const void* src,
                       size_t bytes) {
  return cma_move(b->pid, (void*)src, b->addr + off, bytes, 1);
}

static const struct tutti_peer_mem_ops same_process = {same_local, same_read, same_write};
static const struct tutti_peer_mem_ops other_process = {other_local, other_read, other_write};

const struct tutti_peer_mem_ops* tutti_cma_ops(int32_t peer_pid) {
  return peer_pid == (int32_t)getpid() ? &same_process : &other_process;
}

int tutti_cma_probe(const struct tutti_transport_comm* tc) {
  const int32_t me = tc->peers[tc->rank].pid;
  for (int r = 0; r < tc->nranks; r++) {
    const struct tutti_doorbell* b = tc->peer_bells[r];
    if (r == tc->rank || tc->peers[r].pid == me) {
      continue;
    }
    if (b == NULL || b->self_addr == 0) {
      return 0; /* not on this host, or no shared memory to learn addresses from */
    }
    if (tutti_param_cma_disable()) {
      INFO(TUTTI_INIT, "rank %d: TUTTI_CMA_DISABLE: peers' buffers are not read directly",
           tc->rank);
      return 0;
    }
    uint64_t got = 0;
    int err = cma_move(tc->peers[r].pid, &got,
                       b->self_addr + offsetof(struct tutti_doorbell, self_addr), sizeof got, 0);
    if (err != 0 || got != b->self_addr) {
      INFO(TUTTI_INIT,
           "rank %d cannot read the memory of rank %d (pid %d): %s; large messages go through the "
           "shared-memory queues (two copies)",
           tc->rank, r, (int)tc->peers[r].pid,
           err != 0 ? strerror(err) : "it read back something else");
      return 0;
    }
  }
  return 1;
}
