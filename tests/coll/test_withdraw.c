/* A rank that fails while it offers its buffer to a peer (the single-copy
 * steps) must take the offer back before it returns: the user then frees or
 * reuses that memory, and a peer that comes to the call late must fail
 * instead of reading the freed memory (a crash, between threads) or writing
 * into what the memory holds now (another allocation's bytes).
 *
 * Rank 0 makes the call alone and fails at TUTTI_TIMEOUT; it then unmaps
 * its buffers and maps a sentinel where its receive buffer was; only then
 * does rank 1 make the same call, which must fail naming rank 0, and leave
 * the sentinel untouched. Two calls: an all-reduce (rank 1 reads rank 0's
 * offers) and an in-place broadcast from rank 1 (rank 1 writes into rank
 * 0's offer), with the single-copy algorithm chosen by TUTTI_TUNE.
 * Usage: test_withdraw [threads|procs] (both by default) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "nccl.h"
#include "procs.h"
#include "ranks.h"

#define COUNT (3u << 20) /* floats: 12 MB, several pieces */
#define SENTINEL 0x5a

enum call { ALLREDUCE, BROADCAST, NCALLS };
static const char* const call_name[NCALLS] = {"all-reduce", "in-place broadcast from rank 1"};

/* Shared by the two ranks (threads, or processes after fork). */
struct stage {
  int phase; /* 1: rank 0 failed and remapped; 2: rank 1 made its call */
  enum call call;
};

static void wait_phase(const struct stage* st, int phase) {
  const struct timespec pause = {0, 1000000};
  for (int i = 0; i < 60000 && __atomic_load_n(&st->phase, __ATOMIC_ACQUIRE) < phase; i++) {
    nanosleep(&pause, NULL);
  }
}

static ncclResult_t make_call(enum call c, float* send, float* recv, ncclComm_t comm) {
  return c == ALLREDUCE ? ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL)
                        : ncclBroadcast(recv, recv, COUNT, ncclFloat, 1, comm, NULL);
}

static void* map_bytes(size_t bytes) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* One rank's side; returns the number of failed checks. */
static long run_rank(struct stage* st, int rank, const ncclUniqueId* id) {
  const size_t bytes = (size_t)COUNT * sizeof(float);
  long bad = 0;
  ncclUniqueId own; /* processes: every rank's is the same (NCCL_COMM_ID) */
  if (id == NULL && ncclGetUniqueId(&own) == ncclSuccess) {
    id = &own;
  }
  float* send = map_bytes(bytes);
  float* recv = map_bytes(bytes);
  ncclComm_t comm;
  if (send == NULL || recv == NULL || id == NULL ||
      ncclCommInitRank(&comm, 2, *id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: setup failed: %s\n", rank, ncclGetLastError(NULL));
    __atomic_store_n(&st->phase, 2, __ATOMIC_RELEASE);
    return 1;
  }
  for (size_t i = 0; i < COUNT; i++) {
    send[i] = (float)(rank + 1);
    recv[i] = (float)(rank + 1);
  }
  if (rank == 0) {
    if (make_call(st->call, send, recv, comm) == ncclSuccess) {
      fprintf(stderr, "%s: rank 0 alone succeeded\n", call_name[st->call]);
      bad++;
    }
    /* What the user does after a failed call: the memory goes, and other
     * memory comes where it was. */
    munmap(send, bytes);
    munmap(recv, bytes);
    void* again =
        mmap(recv, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (again != (void*)recv) {
      fprintf(stderr, "rank 0: cannot map the sentinel\n");
      bad++;
    } else {
      memset(again, SENTINEL, bytes);
    }
    __atomic_store_n(&st->phase, 1, __ATOMIC_RELEASE);
    wait_phase(st, 2);
    const unsigned char* b = (const unsigned char*)recv;
    for (size_t i = 0; again == (void*)recv && i < bytes; i++) {
      if (b[i] != SENTINEL) {
        fprintf(stderr, "%s: rank 1 wrote into rank 0's freed buffer (byte %zu is 0x%02x)\n",
                call_name[st->call], i, b[i]);
        bad++;
        break;
      }
    }
    munmap(recv, bytes);
  } else {
    wait_phase(st, 1);
    ncclResult_t r = make_call(st->call, send, recv, comm);
    const char* why = ncclGetLastError(comm);
    if (r == ncclSuccess || strstr(why, "rank 0") == NULL) {
      fprintf(stderr, "%s: rank 1 came late and returned %d: %s\n", call_name[st->call], (int)r,
              why);
      bad++;
    }
    __atomic_store_n(&st->phase, 2, __ATOMIC_RELEASE);
    munmap(send, bytes);
    munmap(recv, bytes);
  }
  ncclCommDestroy(comm);
  return bad;
}

static void proc_body(int rank, void* arg, long* p, long* f) {
  long bad = run_rank(arg, rank, NULL);
  *p += bad == 0;
  *f += bad;
}

static void thread_body(struct rank_ctx* c) {
  long bad = run_rank(c->user, c->rank, &c->id);
  c->result = bad == 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "both";
  long passed = 0, failed = 0;
  /* Shared across fork, for the processes' hand-offs. */
  struct stage* st =
      mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (st == MAP_FAILED) {
    return 1;
  }
  for (int c = 0; c < NCALLS; c++) {
    if (strcmp(mode, "threads") != 0) {
      *st = (struct stage){0, (enum call)c};
      if (procs_comm_id() != 0) {
        fprintf(stderr, "no free port\n");
        return 1;
      }
      procs_run(2, proc_body, st, &passed, &failed);
    }
    if (strcmp(mode, "procs") != 0) {
      *st = (struct stage){0, (enum call)c};
      unsetenv("NCCL_COMM_ID");
      int ok = run_ranks(2, thread_body, st);
      passed += ok == 2;
      failed += ok != 2;
    }
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
