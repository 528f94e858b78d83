/* Shared-memory transport: ranks of one host, as processes or as threads.
 * One segment per communicator and host holds every rank's doorbell, the
 * board (two slots per rank) and a slot queue for each ordered pair of local
 * ranks (pages are only touched when used). The lowest local rank creates
 * it; once every local rank has mapped it, it is unlinked, so nothing
 * outlives the processes, however they end. */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/cma.h"
#include "transport/fifo.h"
#include "util/check.h"
#include "util/param.h"

static TUTTI_PARAM(shm_disable, "NCCL_SHM_DISABLE", 0,
                   "1: ranks of one host do not share memory (no board): they connect over TCP "
                   "or the network");

#define SHM_BELL_STRIDE 1024
_Static_assert(sizeof(struct tutti_doorbell) <= SHM_BELL_STRIDE, "a doorbell fits its stride");
_Static_assert(offsetof(struct tutti_doorbell, status) == 64,
               "what the owner writes at every call starts a cache line of its own");
_Static_assert(sizeof(struct tutti_board_header) <= TUTTI_BOARD_HEADER, "a board header fits");

struct shm_state {
  void* base;
  size_t bytes;
  int nlocal;
  int* local_of;                /* [nranks] local index, -1 if on another host */
  struct tutti_fifo_conn* ends; /* [nlocal] send ends, then [nlocal] recv ends */
  struct tutti_doorbell private_bell;
};

static int shm_can_connect(const struct tutti_transport_comm* tc, int peer) {
  return !tutti_param_shm_disable() || peer == tc->rank
             ? tc->peers[peer].host_hash == tc->peers[tc->rank].host_hash
             : 0;
}

/* NCCL_SHM_DISABLE: peers talk over other transports; no board either. */
static int shm_disable_all(const struct tutti_transport_comm* tc) {
  return tutti_param_shm_disable() && tc->nranks > 1;
}

static void segment_name(const struct tutti_transport_comm* tc, int leader, char* buf, size_t len) {
  char hex[33];
  for (int i = 0; i < 16; i++) {
    snprintf(hex + 2 * i, 3, "%02x", tc->secret[i]);
  }
  snprintf(buf, len, "/tutti-%.16s-%016llx-%d", hex, (unsigned long long)tc->comm_hash, leader);
}

static void warn_if_small(size_t bytes) {
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) == 0) {
    unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    if (avail < bytes / 4) {
      WARN(
          "/dev/shm has %llu MB free and this communicator may use up to %zu MB of it: "
          "give the container more (docker run --shm-size=8g) or lower NCCL_BUFFSIZE",
          avail >> 20, bytes >> 20);
    }
  }
}

static ncclResult_t map_segment(const struct tutti_transport_comm* tc, struct shm_state* st,
                                int leader, int create) {
  char name[96];
  segment_name(tc, leader, name, sizeof name);
  int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
  if (fd < 0) {
    return tutti_error(ncclSystemError,
                       "rank %d could not %s shared memory %s: %s (is /dev/shm mounted and "
                       "writable?)",
                       tc->rank, create ? "create" : "open", name, strerror(errno));
  }
  struct stat sb;
  if (!create && fstat(fd, &sb) == 0 && (size_t)sb.st_size != st->bytes) {
    close(fd);
    return tutti_error(ncclInvalidUsage,
                       "rank %d: this host's shared memory %s holds %zu bytes where this rank "
                       "expects %zu: were the ranks started with different NCCL_BUFFSIZE or "
                       "TUTTI_TUNE (board.slot)? Give every rank the same values",
                       tc->rank, name, (size_t)sb.st_size, st->bytes);
  }
  if (create && ftruncate(fd, (off_t)st->bytes) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name);
    return tutti_error(ncclSystemError, "rank %d could not size shared memory %s to %zu bytes: %s",
                       tc->rank, name, st->bytes, strerror(e));
  }
  st->base = mmap(NULL, st->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (st->base == MAP_FAILED) {
    st->base = NULL;
    return tutti_error(ncclSystemError, "rank %d could not map shared memory %s (%zu bytes): %s",
                       tc->rank, name, st->bytes, strerror(e));
  }
  return ncclSuccess;
}

static ncclResult_t shm_setup(struct tutti_transport_comm* tc) {
  ncclResult_t res = ncclSuccess;
  struct shm_state* st = calloc(1, sizeof *st);
  if (st == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  tc->priv[tutti_transport_shm.index] = st;
  st->local_of = malloc((size_t)tc->nranks * sizeof(int));
  if (st->local_of == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  int leader = -1, me = -1;
  for (int r = 0; r < tc->nranks; r++) {
    st->local_of[r] = -1;
    if (tc->peers[r].host_hash == tc->peers[tc->rank].host_hash) {
      st->local_of[r] = st->nlocal++;
      leader = leader < 0 ? r : leader;
    }
  }
  me = st->local_of[tc->rank];
  uint32_t nslots;
  size_t slot;
  tutti_fifo_geometry(tc->buffsize, &nslots, &slot);
  const size_t qbytes = tutti_fifo_bytes(nslots, slot);
  const size_t bells = ((size_t)st->nlocal * SHM_BELL_STRIDE + 4095) & ~(size_t)4095;
  const size_t board_slot = shm_disable_all(tc) ? 0 : (tc->board_slot_bytes + 63) & ~(size_t)63;
  const size_t board =
      board_slot == 0
          ? 0
          : (2 * (size_t)st->nlocal * (TUTTI_BOARD_HEADER + board_slot) + 4095) & ~(size_t)4095;
  st->bytes = bells + board + (size_t)st->nlocal * (size_t)st->nlocal * qbytes;
  int creator = tc->rank == leader;
  if (creator) {
    warn_if_small(st->bytes);
    NCCLCHECKGOTO(map_segment(tc, st, leader, 1), res, sync);
  }
sync:
  /* Everyone waits for the creator (and learns whether it failed through
   * its own error). Ranks of other hosts join the barriers too. */
  NCCLCHECK(tutti_bootstrap_barrier(tc->boot));
  if (res != ncclSuccess) {
    return res;
  }
  if (!creator) {
    res = map_segment(tc, st, leader, 0);
  }
  if (res == ncclSuccess) {
    /* Published before the barrier: peers probe it right after setup. */
    struct tutti_doorbell* b =
        (struct tutti_doorbell*)((char*)st->base + (size_t)me * SHM_BELL_STRIDE);
    b->self_addr = (uint64_t)(uintptr_t)b;
  }
  ncclResult_t bres = tutti_bootstrap_barrier(tc->boot);
  if (creator) {
    char name[96];
    segment_name(tc, leader, name, sizeof name);
    shm_unlink(name);
  }
  NCCLCHECK(res);
  NCCLCHECK(bres);

  char* base = st->base;
  struct tutti_doorbell* my_bell = (struct tutti_doorbell*)(base + (size_t)me * SHM_BELL_STRIDE);
  my_bell->pid = tc->peers[tc->rank].pid;
  __atomic_store_n(&my_bell->shows_calls, 1, __ATOMIC_RELEASE); /* peers compare calls here */
  tc->bell = my_bell;
  st->ends = calloc(2 * (size_t)st->nlocal, sizeof *st->ends);
  if (st->ends == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  for (int r = 0; r < tc->nranks; r++) {
    int lp = st->local_of[r];
    if (lp < 0) {
      continue;
    }
    struct tutti_doorbell* peer_bell =
        (struct tutti_doorbell*)(base + (size_t)lp * SHM_BELL_STRIDE);
    tc->peer_bells[r] = peer_bell;
    if (!shm_can_connect(tc, r)) {
      continue;
    }
    char* queues = base + bells + board;
    char* to_peer = queues + ((size_t)me * (size_t)st->nlocal + (size_t)lp) * qbytes;
    char* from_peer = queues + ((size_t)lp * (size_t)st->nlocal + (size_t)me) * qbytes;
    struct tutti_fifo_conn* s = &st->ends[lp];
    struct tutti_fifo_conn* rv = &st->ends[st->nlocal + lp];
    tutti_fifo_conn_init(s, NULL, to_peer, nslots, slot, r, -1, peer_bell, NULL);
    tutti_fifo_conn_init(NULL, rv, from_peer, nslots, slot, -1, r, NULL, peer_bell);
    s->base.via = rv->base.via = "SHM";
    s->base.mem = rv->base.mem = tutti_cma_ops(tc->peers[r].pid);
    tc->send[r] = &s->base;
    tc->recv[r] = &rv->base;
  }
  if (board_slot > 0) {
    /* Indexed by local rank, which is the rank when every rank is local:
     * the only case the communicator uses it (api/init.c). */
    tc->board.base = base + bells;
    tc->board.slot_bytes = board_slot;
    tc->board.nranks = st->nlocal;
  }
  INFO(TUTTI_INIT | TUTTI_SHM,
       "rank %d: %d local ranks share %zu MB of /dev/shm (%u slots of %zu KB per pair)", tc->rank,
       st->nlocal, st->bytes >> 20, nslots, slot >> 10);
  return ncclSuccess;
}

static void shm_teardown(struct tutti_transport_comm* tc) {
  struct shm_state* st = tc->priv[tutti_transport_shm.index];
  if (st == NULL) {
    return;
  }
  if (st->base != NULL) {
    if (tc->bell != NULL && (char*)tc->bell >= (char*)st->base &&
        (char*)tc->bell < (char*)st->base + st->bytes) {
      __atomic_store_n(&tc->bell->departed, 1, __ATOMIC_RELEASE);
      tutti_doorbell_ring(tc->bell);
      tc->bell = NULL;
    }
    munmap(st->base, st->bytes);
  }
  free(st->ends);
  free(st->local_of);
  free(st);
  tc->priv[tutti_transport_shm.index] = NULL;
}

const struct tutti_transport tutti_transport_shm = {
    .name = "SHM",
    .index = 0,
    .can_connect = shm_can_connect,
    .setup = shm_setup,
    .teardown = shm_teardown,
};
