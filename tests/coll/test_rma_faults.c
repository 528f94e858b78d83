/* One-sided operations when things go wrong; every wait and put must end
 * with an error naming the peer, within the bound:
 *   timeout    rank 1 sends 1 of the 3 signals rank 0 waits for, then idles:
 *              rank 0's wait fails after TUTTI_TIMEOUT (set small) saying
 *              1 of 3 arrived from rank 1 (processes)
 *   kill       3 ranks; rank 2 is killed (SIGKILL) while rank 0 waits for its
 *              signal and rank 1 puts to it: both fail naming rank 2 within
 *              5 s (TUTTI_TIMEOUT stays large), then still put to each other
 *   abort      ncclCommAbort from another thread ends rank 0's wait; rank 1,
 *              waiting for rank 0, fails naming it (threads or processes)
 *   dropped    rank 0 deregisters its window; rank 1's later put into it is
 *              dropped and rank 0's wait for its signal fails saying so
 *   abort_put  rank 1 is stopped (SIGSTOP) so rank 0's puts fill the queue;
 *              an abort from another thread ends the blocked put; rank 1,
 *              continued, fails its wait naming rank 0 (processes)
 * Usage: test_rma_faults MODE [threads|procs] */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/comm.h"
#include "procs.h"
#include "ranks.h"
#include "rma_common.h"

#define WIN_BYTES (1 << 20)

struct fx {
  struct rma_rank k;
  char* buf;
  char* src;
  ncclWindow_t win;
};

static int setup(struct fx* f, int n, int r, const ncclUniqueId* id) {
  memset(f, 0, sizeof *f);
  f->k.n = n;
  f->k.r = r;
  f->buf = calloc(1, WIN_BYTES);
  f->src = calloc(1, WIN_BYTES);
  ncclUniqueId own;
  if (id == NULL && ncclGetUniqueId(&own) == ncclSuccess) {
    id = &own;
  }
  if (id == NULL || rma_comm(&f->k.comm, n, *id, r, 1) != ncclSuccess ||
      ncclCommWindowRegister(f->k.comm, f->buf, WIN_BYTES, &f->win, 0) != ncclSuccess ||
      rma_barrier(f->k.comm) != ncclSuccess) {
    RFAIL(&f->k, "setup failed: %s", ncclGetLastError(NULL));
    return 0;
  }
  return 1;
}

static void teardown(struct fx* f, int destroy) {
  if (destroy && f->k.comm != NULL) {
    ncclCommDestroy(f->k.comm);
  }
  free(f->buf);
  free(f->src);
}

/* Expects `res` to be `want` with every word of `words` (a
 * NULL-ended list) in the text, `dt` seconds after the cause, within [lo, hi]. */
static void expect_code(struct fx* f, ncclResult_t res, ncclResult_t want, const char* const* words,
                        double dt, double lo, double hi, const char* what) {
  const char* why = ncclGetLastError(NULL);
  int has = 1;
  for (int i = 0; words[i] != NULL; i++) {
    has = has && strstr(why, words[i]) != NULL;
  }
  RCHECK(&f->k, res == want && has && dt >= lo && dt <= hi,
         "%s: returned %d after %.2f s (expected %d within [%.1f, %.1f] s) with \"%s\"", what,
         (int)res, dt, (int)want, lo, hi, why);
  printf("rank %d: %s: %.2f s: %s\n", f->k.r, what, dt, why);
}

static void expect_fail(struct fx* f, ncclResult_t res, const char* const* words, double dt,
                        double lo, double hi, const char* what) {
  expect_code(f, res, ncclRemoteError, words, dt, lo, hi, what);
}

/* A put into a window its owner has deregistered is dropped, and the
 * owner's wait for it fails, naming the origin and the window. */
static void dropped_rank(struct fx* f) {
  if (f->k.r == 0) {
    RCHECK(&f->k, ncclCommWindowDeregister(f->k.comm, f->win) == ncclSuccess, "deregister");
    f->win = NULL;
  }
  RCHECK(&f->k, rma_barrier(f->k.comm) == ncclSuccess, "barrier");
  if (f->k.r == 1) {
    RCHECK(&f->k,
           ncclPutSignal(f->src, 1000, ncclInt8, 0, f->win, 0, 0, 0, 0, f->k.comm, NULL) ==
               ncclSuccess,
           "the put into a window its owner deregistered failed at the origin");
  } else {
    ncclWaitSignalDesc_t d = {1, 1, 0, 0};
    const double t0 = rma_now();
    ncclResult_t res = ncclWaitSignal(1, &d, f->k.comm, NULL);
    const char* words[] = {"dropped a put of rank 1", "window #1", NULL};
    expect_code(f, res, ncclInvalidUsage, words, rma_now() - t0, 0, 2, "a put dropped");
  }
  RCHECK(&f->k, rma_barrier(f->k.comm) == ncclSuccess, "barrier");
}

static void timeout_rank(struct fx* f) {
  const double limit = atof(getenv("TUTTI_TIMEOUT") ? getenv("TUTTI_TIMEOUT") : "300");
  if (f->k.r == 1) {
    RCHECK(&f->k, ncclSignal(0, 0, 0, 0, f->k.comm, NULL) == ncclSuccess, "signal failed");
    /* Alive, not gone, while rank 0 gives up. */
    usleep((useconds_t)((limit + 2.5) * 1e6));
    return;
  }
  ncclWaitSignalDesc_t d = {3, 1, 0, 0};
  const double t0 = rma_now();
  ncclResult_t res = ncclWaitSignal(1, &d, f->k.comm, NULL);
  const char* words[] = {"rank 1", "TUTTI_TIMEOUT", "1 of 3 arrived", NULL};
  expect_fail(f, res, words, rma_now() - t0, limit - 0.5, limit + 2, "wait for a silent rank");
}

/* Rank 2 of the kill mode: the rank runs in a child of this process, which
 * kills it once it has joined the others' barrier. */
static void victim(int n, long* p, long* f) {
  int ready[2];
  if (pipe(ready) != 0) {
    (*f)++;
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    struct fx x;
    if (setup(&x, n, 2, NULL)) {
      char one = 1;
      if (write(ready[1], &one, 1) == 1) {
        for (;;) {
          pause(); /* its service thread serves until the kill */
        }
      }
    }
    _exit(1);
  }
  char one = 0;
  const int ok = read(ready[0], &one, 1) == 1;
  usleep(100 * 1000); /* the survivors are in their wait and puts by now */
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  *p += ok;
  *f += !ok;
}

static void kill_rank(struct fx* f) {
  const double t0 = rma_now();
  if (f->k.r == 0) {
    ncclWaitSignalDesc_t d = {1, 2, 0, 0};
    ncclResult_t res = ncclWaitSignal(1, &d, f->k.comm, NULL);
    const char* words[] = {"rank 2", NULL};
    expect_fail(f, res, words, rma_now() - t0, 0, 5, "wait for a killed rank");
  } else {
    ncclResult_t res = ncclSuccess;
    while (res == ncclSuccess && rma_now() - t0 < 20) {
      res = ncclPutSignal(f->src, 256 << 10, ncclInt8, 2, f->win, 0, 0, 0, 0, f->k.comm, NULL);
    }
    const char* words[] = {"rank 2", "while rank 1 puts to it", NULL};
    expect_fail(f, res, words, rma_now() - t0, 0, 5, "puts to a killed rank");
  }
  /* The survivors still reach each other. */
  const int peer = 1 - f->k.r;
  rma_fill(f->src, f->k.r, peer, 77, 4099);
  ncclWaitSignalDesc_t d = {1, peer, 0, 0};
  RCHECK(&f->k,
         ncclPutSignal(f->src, 4099, ncclInt8, peer, f->win, 13, 0, 0, 0, f->k.comm, NULL) ==
                 ncclSuccess &&
             ncclWaitSignal(1, &d, f->k.comm, NULL) == ncclSuccess,
         "survivors' put and wait failed: %s", ncclGetLastError(NULL));
  int same = 1;
  for (size_t i = 0; i < 4099; i++) {
    same = same && (uint8_t)f->buf[13 + i] == rma_pat(peer, f->k.r, 77, i);
  }
  RCHECK(&f->k, same, "the survivors' put arrived wrong");
}

struct aborter {
  ncclComm_t comm;
  double delay, at;
};

static void* abort_main(void* p) {
  struct aborter* a = p;
  usleep((useconds_t)(a->delay * 1e6));
  a->at = rma_now();
  ncclCommAbort(a->comm);
  return NULL;
}

/* Rank 0 is aborted from another thread while it waits (put: 0) or puts
 * into a stopped rank 1 (put: 1); rank 1 then fails naming rank 0. */
static void abort_rank(struct fx* f, int put) {
  if (f->k.r == 1) {
    if (put) {
      raise(SIGSTOP); /* until rank 0's put was aborted */
    }
    ncclWaitSignalDesc_t d = {1000000, 0, 0, 0};
    const double t0 = rma_now();
    ncclResult_t res = ncclWaitSignal(1, &d, f->k.comm, NULL);
    const char* words[] = {"rank 0", NULL};
    expect_fail(f, res, words, rma_now() - t0, 0, 5, "wait for an aborted rank");
    return;
  }
  const pid_t peer_pid = ((struct ncclComm*)f->k.comm)->peers[1].pid;
  struct aborter a = {f->k.comm, put ? 1.0 : 0.5, 0};
  pthread_t th;
  pthread_create(&th, NULL, abort_main, &a);
  ncclResult_t res;
  if (put) {
    do {
      res = ncclPutSignal(f->src, WIN_BYTES, ncclInt8, 1, f->win, 0, 0, 0, 0, f->k.comm, NULL);
    } while (res == ncclSuccess);
  } else {
    ncclWaitSignalDesc_t d = {1, 1, 0, 0};
    res = ncclWaitSignal(1, &d, f->k.comm, NULL);
  }
  const double end = rma_now();
  pthread_join(th, NULL);
  const char* words[] = {"aborted", NULL};
  expect_fail(f, res, words, end - a.at, 0, 1.5,
              put ? "a blocked put, aborted" : "a wait, aborted");
  f->k.comm = NULL; /* freed by the abort */
  if (put) {
    kill(peer_pid, SIGCONT);
  }
}

static const char* mode;

static long run_rank(int n, int r, const ncclUniqueId* id) {
  struct fx f;
  if (!setup(&f, n, r, id)) {
    teardown(&f, 1);
    return 1;
  }
  if (strcmp(mode, "timeout") == 0) {
    timeout_rank(&f);
  } else if (strcmp(mode, "kill") == 0) {
    kill_rank(&f);
  } else if (strcmp(mode, "dropped") == 0) {
    dropped_rank(&f);
  } else {
    abort_rank(&f, strcmp(mode, "abort_put") == 0);
  }
  teardown(&f, 1);
  printf("rank %d/%d: %ld passed, %ld failed\n", r, n, f.k.passed, f.k.failed);
  return f.k.failed + (f.k.passed == 0);
}

static void proc_body(int rank, void* arg, long* p, long* f) {
  const int n = *(int*)arg;
  if (strcmp(mode, "kill") == 0 && rank == 2) {
    victim(n, p, f);
    return;
  }
  long bad = run_rank(n, rank, NULL);
  *p += bad == 0;
  *f += bad;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long thread_bad;

static void thread_body(struct rank_ctx* c) {
  long bad = run_rank(c->nranks, c->rank, &c->id);
  pthread_mutex_lock(&lock);
  thread_bad += bad;
  pthread_mutex_unlock(&lock);
  c->result = bad == 0;
}

int main(int argc, char** argv) {
  mode = argc > 1 ? argv[1] : "timeout";
  const char* how = argc > 2 ? argv[2] : "procs";
  setvbuf(stdout, NULL, _IOLBF, 0);
  setenv("NCCL_BUFFSIZE", "65536", 0);
  int n = strcmp(mode, "kill") == 0 ? 3 : 2;
  long passed = 0, failed = 0;
  if (strcmp(how, "threads") == 0) {
    int ok = run_ranks(n, thread_body, NULL);
    passed = ok;
    failed = thread_bad + (ok < n && thread_bad == 0);
  } else {
    if (procs_comm_id() != 0) {
      fprintf(stderr, "no free port\n");
      return 1;
    }
    procs_run(n, proc_body, &n, &passed, &failed);
  }
  printf("%s %s: %ld passed, %ld failed\n", mode, how, passed, failed);
  return failed == 0 ? 0 : 1;
}
