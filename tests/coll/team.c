/* See team.h. */
#include "team.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct worker {
  struct team* t;
  team_fn fn;
  int w;
  long passed, failed;
};

static void* worker_main(void* p) {
  struct worker* k = p;
  k->fn(k->t, k->w, &k->passed, &k->failed);
  return NULL;
}

static void report(struct team* t, long passed, long failed) {
  char line[64];
  int len = snprintf(line, sizeof line, "%ld %ld\n", passed, failed);
  if (write(t->report[1], line, (size_t)len) != len) {
    _exit(2);
  }
}

static void run_procs(struct team* t, team_fn fn, long* passed, long* failed) {
  pid_t pids[TEAM_MAX];
  fflush(NULL);
  for (int w = 0; w < t->n; w++) {
    pids[w] = fork();
    if (pids[w] == 0) {
      close(t->report[0]);
      long p = 0, f = 0;
      fn(t, w, &p, &f);
      report(t, p, f);
      _exit(f ? 1 : 0);
    }
  }
  close(t->report[1]);
  int reported = 0;
  long cp, cf;
  FILE* in = fdopen(t->report[0], "r");
  while (in != NULL && fscanf(in, "%ld %ld", &cp, &cf) == 2) {
    *passed += cp;
    *failed += cf;
    reported++;
  }
  if (in != NULL) {
    fclose(in);
  }
  for (int w = 0; w < t->n; w++) {
    int st = 0;
    waitpid(pids[w], &st, 0);
  }
  *failed += t->n - reported;
}

void team_run(int threads, int n, team_fn fn, long* passed, long* failed) {
  struct team t;
  memset(&t, 0, sizeof t);
  t.threads = threads;
  t.n = n;
  for (int w = 0; w < n; w++) {
    if (pipe(t.inbox[w]) != 0) {
      (*failed)++;
      return;
    }
  }
  if (!threads && pipe(t.report) != 0) {
    (*failed)++;
    return;
  }
  if (threads) {
    struct worker k[TEAM_MAX];
    pthread_t th[TEAM_MAX];
    for (int w = 0; w < n; w++) {
      k[w] = (struct worker){&t, fn, w, 0, 0};
      pthread_create(&th[w], NULL, worker_main, &k[w]);
    }
    for (int w = 0; w < n; w++) {
      pthread_join(th[w], NULL);
      *passed += k[w].passed;
      *failed += k[w].failed;
    }
  } else {
    run_procs(&t, fn, passed, failed);
  }
  for (int w = 0; w < n; w++) {
    close(t.inbox[w][0]);
    close(t.inbox[w][1]);
  }
}

void team_send(struct team* t, int to, const ncclUniqueId* id) {
  if (write(t->inbox[to][1], id, sizeof *id) != (ssize_t)sizeof *id) {
    fprintf(stderr, "could not hand worker %d its id\n", to);
  }
}

int team_recv(struct team* t, int w, ncclUniqueId* id) {
  const char* s = getenv("TUTTI_TIMEOUT");
  /* Long enough for the steps before a worker's turn, which wait on TUTTI_TIMEOUT at most. */
  const double limit = (s != NULL ? atof(s) : 300) + 120;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t got = 0;
  while (got < sizeof *id) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double left =
        limit - ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    struct pollfd p = {.fd = t->inbox[w][0], .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)(left * 1e3) + 1) <= 0) {
      fprintf(stderr, "worker %d: no id came within %.0f s\n", w, limit);
      return -1;
    }
    ssize_t n = read(t->inbox[w][0], (char*)id + got, sizeof *id - got);
    if (n <= 0) {
      return -1;
    }
    got += (size_t)n;
  }
  return 0;
}

int team_die(struct team* t, long passed, long failed) {
  if (t->threads) {
    return 0;
  }
  report(t, passed, failed);
  _exit(0);
}
