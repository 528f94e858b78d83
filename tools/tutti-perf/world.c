/* Ranks, communicators and the rendezvous between them (see world.h). */
#include "world.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colls.h"
#include "gpu.h"
#include "lib.h"

/* Made once by the main thread before any rank's init. */
static ncclUniqueId world_id;

static void setup_rank(struct perf_world* w, struct perf_rank* r, int thread, int g) {
  const struct perf_opts* o = w->o;
  int local = thread * o->ngpus + g;
  r->rank = (w->proc * o->nthreads + thread) * o->ngpus + g;
  /* As nccl-tests: the processes of a host take consecutive GPUs. */
  r->dev = w->gpu ? (w->local_rank * o->nthreads * o->ngpus + local) % w->ndev : -1;
  perf_set_device(w->gpu, r->dev);
  r->send = perf_buf_alloc(w->gpu, o->maxbytes);
  r->recv = perf_buf_alloc(w->gpu, o->maxbytes);
  r->xbuf = perf_buf_alloc(w->gpu, sizeof(double));
  if (!w->gpu) {
    r->send_img = r->send;
    r->recv_img = r->recv;
  } else if (o->check) {
    r->send_img = perf_buf_alloc(0, o->maxbytes);
    r->recv_img = perf_buf_alloc(0, o->maxbytes);
  }
  r->stream = perf_stream_create(w->gpu, o->stream_null);
  r->free_before = w->gpu ? perf_cuda_mem_free(r->dev) : 0;
}

static void init_group(struct perf_world* w, struct perf_rank* ranks, int n) {
  PERF_NCCL(perf_nccl.GroupStart(), NULL, ranks[0].rank);
  for (int i = 0; i < n; i++) {
    perf_set_device(w->gpu, ranks[i].dev);
    PERF_NCCL(perf_nccl.CommInitRank(&ranks[i].comm, w->nranks, world_id, ranks[i].rank), NULL,
              ranks[i].rank);
  }
  PERF_NCCL(perf_nccl.GroupEnd(), NULL, ranks[0].rank);
}

void perf_world_setup(struct perf_world* w, struct perf_thread* threads) {
  const struct perf_opts* o = w->o;
  int local = o->nthreads * o->ngpus;
  /* One array for every local rank, so that ncclCommInitAll can fill it. */
  struct perf_rank* all = calloc((size_t)local, sizeof *all);
  w->slots = calloc((size_t)o->nthreads, sizeof *w->slots);
  if (all == NULL || w->slots == NULL) {
    perf_die("out of host memory");
  }
  for (int t = 0; t < o->nthreads; t++) {
    threads[t].w = w;
    threads[t].index = t;
    threads[t].ranks = all + t * o->ngpus;
    for (int g = 0; g < o->ngpus; g++) {
      setup_rank(w, &threads[t].ranks[g], t, g);
    }
  }
  pthread_barrier_init(&w->barrier, NULL, (unsigned)o->nthreads);
  PERF_NCCL(perf_nccl.GetUniqueId(&world_id), NULL, all[0].rank);
  if (o->parallel_init) {
    return;
  }
  if (w->nprocs == 1 && perf_nccl.CommInitAll != NULL) {
    ncclComm_t* comms = calloc((size_t)local, sizeof *comms);
    int* devs = calloc((size_t)local, sizeof *devs);
    if (comms == NULL || devs == NULL) {
      perf_die("out of host memory");
    }
    for (int i = 0; i < local; i++) {
      devs[i] = all[i].dev;
    }
    PERF_NCCL(perf_nccl.CommInitAll(comms, local, w->gpu ? devs : NULL), NULL, 0);
    for (int i = 0; i < local; i++) {
      all[i].comm = comms[i];
    }
    free(comms);
    free(devs);
  } else {
    init_group(w, all, local);
  }
}

void perf_world_init_thread(struct perf_thread* t) {
  init_group(t->w, t->ranks, t->w->o->ngpus);
}

void perf_world_teardown(struct perf_world* w, struct perf_thread* threads) {
  const struct perf_opts* o = w->o;
  for (int t = 0; t < o->nthreads; t++) {
    for (int g = 0; g < o->ngpus; g++) {
      struct perf_rank* r = &threads[t].ranks[g];
      perf_set_device(w->gpu, r->dev);
      PERF_NCCL(perf_nccl.CommDestroy(r->comm), NULL, r->rank);
      perf_stream_destroy(w->gpu, r->stream);
      perf_buf_free(w->gpu, r->send);
      perf_buf_free(w->gpu, r->recv);
      perf_buf_free(w->gpu, r->xbuf);
      if (w->gpu) {
        free(r->send_img);
        free(r->recv_img);
      }
    }
  }
  pthread_barrier_destroy(&w->barrier);
  free(threads[0].ranks);
  free(w->slots);
}

void perf_world_complete(struct perf_thread* t) {
  struct perf_world* w = t->w;
  int n = w->o->ngpus, left = n;
  unsigned char done[1024] = {0};
  while (left > 0) {
    for (int g = 0; g < n; g++) {
      struct perf_rank* r = &t->ranks[g];
      if (done[g]) {
        continue;
      }
      if (perf_stream_done(w->gpu, r->stream)) {
        done[g] = 1;
        left--;
        continue;
      }
      /* A failed peer shows up here rather than as a stream that never
       * finishes, as nccl-tests checks. */
      ncclResult_t async = ncclSuccess;
      if (perf_nccl.CommGetAsyncError != NULL) {
        PERF_NCCL(perf_nccl.CommGetAsyncError(r->comm, &async), r->comm, r->rank);
        PERF_NCCL(async, r->comm, r->rank);
      }
    }
    if (left > 0) {
      sched_yield();
    }
  }
  __atomic_add_fetch(&w->progress, 1, __ATOMIC_RELAXED);
}

/* An in-place allreduce of one double per rank through the library. */
static double lib_allreduce(struct perf_thread* t, double v, int rank0_only, ncclRedOp_t op) {
  struct perf_world* w = t->w;
  int n = w->o->ngpus;
  for (int g = 0; g < n; g++) {
    double mine = rank0_only && t->ranks[g].rank != 0 ? 0.0 : v;
    perf_set_device(w->gpu, t->ranks[g].dev);
    perf_buf_copy(w->gpu, t->ranks[g].xbuf, &mine, sizeof mine, t->ranks[g].stream);
  }
  PERF_NCCL(perf_nccl.GroupStart(), NULL, t->ranks[0].rank);
  for (int g = 0; g < n; g++) {
    struct perf_rank* r = &t->ranks[g];
    PERF_NCCL(perf_nccl.AllReduce(r->xbuf, r->xbuf, 1, ncclFloat64, op, r->comm, r->stream),
              r->comm, r->rank);
  }
  PERF_NCCL(perf_nccl.GroupEnd(), NULL, t->ranks[0].rank);
  perf_world_complete(t);
  double out = 0;
  perf_buf_copy(w->gpu, &out, t->ranks[0].xbuf, sizeof out, t->ranks[0].stream);
  return out;
}

void perf_world_windows(struct perf_thread* t, int on) {
  struct perf_world* w = t->w;
  const int n = w->o->ngpus;
  if (perf_nccl.CommWindowRegister == NULL || perf_nccl.PutSignal == NULL ||
      perf_nccl.WaitSignal == NULL) {
    perf_die("%s: %s has no windows or one-sided operations (NCCL 2.29 or later has them)",
             w->o->coll->name, perf_nccl.path);
  }
  if (!on) {
    for (int g = 0; g < n; g++) {
      struct perf_rank* r = &t->ranks[g];
      PERF_NCCL(perf_nccl.CommWindowDeregister(r->comm, r->recv_win), r->comm, r->rank);
      PERF_NCCL(perf_nccl.CommWindowDeregister(r->comm, r->send_win), r->comm, r->rank);
    }
    return;
  }
  /* Collective: this thread's ranks in one group, other threads at once.
   * Symmetric (every rank the same size), as NCCL wants of a put's source. */
  PERF_NCCL(perf_nccl.GroupStart(), NULL, t->ranks[0].rank);
  for (int g = 0; g < n; g++) {
    struct perf_rank* r = &t->ranks[g];
    perf_set_device(w->gpu, r->dev);
    PERF_NCCL(perf_nccl.CommWindowRegister(r->comm, r->recv, w->o->maxbytes, &r->recv_win,
                                           NCCL_WIN_COLL_SYMMETRIC),
              r->comm, r->rank);
    PERF_NCCL(perf_nccl.CommWindowRegister(r->comm, r->send, w->o->maxbytes, &r->send_win,
                                           NCCL_WIN_COLL_SYMMETRIC),
              r->comm, r->rank);
  }
  PERF_NCCL(perf_nccl.GroupEnd(), NULL, t->ranks[0].rank);
  for (int g = 0; g < n; g++) {
    if (t->ranks[g].recv_win == NULL || t->ranks[g].send_win == NULL) {
      perf_die(
          "%s: %s gave no window on rank %d (its buffers cannot be windows here: NCCL "
          "wants ncclMemAlloc'd device memory)",
          w->o->coll->name, perf_nccl.path, t->ranks[g].rank);
    }
  }
  perf_set_device(w->gpu, t->ranks[0].dev);
}

void perf_world_barrier(struct perf_thread* t) {
  pthread_barrier_wait(&t->w->barrier);
  if (t->w->nprocs > 1) {
    lib_allreduce(t, 0.0, 0, ncclSum);
  }
}

double perf_world_reduce(struct perf_thread* t, double v, enum perf_reduce mode) {
  struct perf_world* w = t->w;
  if (w->nprocs > 1) {
    ncclRedOp_t op = mode == PERF_RED_MIN ? ncclMin : mode == PERF_RED_MAX ? ncclMax : ncclSum;
    double r = lib_allreduce(t, v, mode == PERF_RED_RANK0, op);
    return mode == PERF_RED_AVG ? r / w->nranks : r;
  }
  /* One process: no library call, so a broken library cannot corrupt the
   * numbers that judge it. */
  w->slots[t->index] = v;
  pthread_barrier_wait(&w->barrier);
  int n = w->o->nthreads;
  double r = w->slots[0];
  for (int i = 1; i < n; i++) {
    double s = w->slots[i];
    switch (mode) {
      case PERF_RED_MIN:
        r = s < r ? s : r;
        break;
      case PERF_RED_MAX:
        r = s > r ? s : r;
        break;
      case PERF_RED_AVG:
      case PERF_RED_SUM:
        r += s;
        break;
      default:
        break; /* rank 0: thread 0's value */
    }
  }
  pthread_barrier_wait(&w->barrier); /* nobody refills a slot before all have read */
  return mode == PERF_RED_AVG ? r / n : r;
}

static void cpu_model(char* out, size_t len) {
  snprintf(out, len, "%s", "");
  FILE* f = fopen("/proc/cpuinfo", "r");
  char line[512];
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    char* colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
      colon += strspn(colon + 1, " \t") + 1;
      colon[strcspn(colon, "\n")] = '\0';
      snprintf(out, len, " %s", colon);
      break;
    }
  }
  if (f != NULL) {
    fclose(f);
  }
}

static void describe_rank(struct perf_world* w, const struct perf_rank* r, char* line) {
  char desc[160];
  if (w->gpu) {
    perf_cuda_describe(r->dev, desc, sizeof desc);
  } else {
    char cpu[128];
    cpu_model(cpu, sizeof cpu);
    snprintf(desc, sizeof desc, "[host]%s", cpu);
  }
  snprintf(line, PERF_LINE, "#  Rank %2d Group %2d Pid %6d on %10.40s device %2d %.60s", r->rank, 0,
           (int)getpid(), w->host, r->dev, desc);
}

void perf_world_device_lines(struct perf_thread* t, char* all) {
  struct perf_world* w = t->w;
  int n = w->o->ngpus;
  if (w->nprocs == 1) {
    for (int g = 0; g < n; g++) {
      describe_rank(w, &t->ranks[g], all + (size_t)t->ranks[g].rank * PERF_LINE);
    }
    pthread_barrier_wait(&w->barrier);
    return;
  }
  /* Several processes: an allgather of fixed-size lines through the library. */
  char line[PERF_LINE];
  void* send[1024];
  void* recv[1024];
  for (int g = 0; g < n; g++) {
    struct perf_rank* r = &t->ranks[g];
    memset(line, 0, sizeof line);
    describe_rank(w, r, line);
    perf_set_device(w->gpu, r->dev);
    send[g] = perf_buf_alloc(w->gpu, PERF_LINE);
    recv[g] = perf_buf_alloc(w->gpu, (size_t)w->nranks * PERF_LINE);
    perf_buf_copy(w->gpu, send[g], line, PERF_LINE, r->stream);
  }
  PERF_NCCL(perf_nccl.GroupStart(), NULL, t->ranks[0].rank);
  for (int g = 0; g < n; g++) {
    struct perf_rank* r = &t->ranks[g];
    PERF_NCCL(perf_nccl.AllGather(send[g], recv[g], PERF_LINE, ncclInt8, r->comm, r->stream),
              r->comm, r->rank);
  }
  PERF_NCCL(perf_nccl.GroupEnd(), NULL, t->ranks[0].rank);
  perf_world_complete(t);
  if (t->index == 0) {
    perf_buf_copy(w->gpu, all, recv[0], (size_t)w->nranks * PERF_LINE, t->ranks[0].stream);
  }
  for (int g = 0; g < n; g++) {
    perf_set_device(w->gpu, t->ranks[g].dev);
    perf_buf_free(w->gpu, send[g]);
    perf_buf_free(w->gpu, recv[g]);
  }
  pthread_barrier_wait(&w->barrier);
}
