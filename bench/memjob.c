/* The memory benchmarks' ranks, barrier, loader and tallies (memjob.h). */
#define _GNU_SOURCE
#include "memjob.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long passed, failed;

double memjob_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int memjob_barrier(struct memjob_sync* s, double limit_s) {
  const int g = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&s->arrived, 1, __ATOMIC_ACQ_REL) == s->n) {
    __atomic_store_n(&s->arrived, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->gen, g + 1, __ATOMIC_RELEASE);
    return 1;
  }
  const double t0 = memjob_now();
  while (__atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) == g) {
    if (memjob_now() - t0 > limit_s) {
      FAILF("a rank did not reach the barrier within %.0f s", limit_s);
      return 0;
    }
    usleep(200);
  }
  return 1;
}

int memjob_load(const char* path, const struct memjob_sym* syms, size_t n) {
  void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    *syms[i].fn = dlsym(h, syms[i].name);
    if (*syms[i].fn == NULL && !syms[i].optional) {
      fprintf(stderr, "%s has no %s: not an NCCL this benchmark can measure\n", path, syms[i].name);
      return 0;
    }
  }
  return 1;
}

void memjob_as_host(const char* prefix, int r) {
  char id[64];
  snprintf(id, sizeof id, "%s-%d", prefix, r);
  setenv("NCCL_HOSTID", id, 1);
  setenv("TUTTI_HOSTID", id, 1);
}

void memjob_fork(int n, void (*body)(void* arg, int r), void* arg) {
  int fds[2];
  if (pipe(fds) != 0) {
    FAILF("pipe failed");
    return;
  }
  fflush(NULL);
  int started = 0;
  for (int r = 0; r < n; r++) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      passed = failed = 0;
      alarm(600);
      body(arg, r);
      char line[64];
      const int len = snprintf(line, sizeof line, "%ld %ld\n", passed, failed);
      _exit(write(fds[1], line, (size_t)len) == len ? 0 : 2);
    }
    if (pid < 0) {
      FAILF("rank %d: fork failed", r);
    } else {
      started++;
    }
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  long p, f;
  int got = 0;
  while (in != NULL && fscanf(in, "%ld %ld", &p, &f) == 2) {
    passed += p;
    failed += f;
    got++;
  }
  if (in != NULL) {
    fclose(in);
  } else {
    close(fds[0]);
  }
  for (int r = 0; r < started; r++) {
    int st;
    wait(&st);
  }
  if (got < started) {
    FAILF("%d rank(s) died before reporting", started - got);
    failed += started - got - 1; /* one failure per rank */
  }
}
