/* Fault trials: ranks as processes run a seeded random mix of collectives;
 * at a random moment one random rank is killed (SIGKILL). Every survivor
 * must return an error (not hang) and then abort cleanly; nothing may stay
 * in /dev/shm. Prints each trial's detection time (kill to the survivor's
 * error) and "N passed, N failed". Usage: test_kill [trials] [nranks] [seed] */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "procs.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int shm_entries(void) {
  int n = 0;
  DIR* d = opendir("/dev/shm");
  for (struct dirent* e = d ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
    n += strncmp(e->d_name, "tutti", 5) == 0;
  }
  if (d != NULL) {
    closedir(d);
  }
  return n;
}

/* Runs collectives until one fails; reports the failure's time on `fd`. */
static void rank_main(int r, int n, ncclUniqueId id, unsigned seed, int fd) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
    _exit(3);
  }
  const size_t maxc = 1 << 18;
  float* a = malloc(maxc * (size_t)n * sizeof *a);
  float* b = malloc(maxc * (size_t)n * sizeof *b);
  for (size_t i = 0; i < maxc * (size_t)n; i++) {
    a[i] = (float)(i % 7);
  }
  unsigned s = seed; /* the same sequence on every rank */
  ncclResult_t res = ncclSuccess;
  for (long it = 0; res == ncclSuccess; it++) {
    s = s * 1103515245u + 12345u;
    size_t count = 1 + (s >> 8) % maxc;
    switch ((s >> 4) % 4) {
      case 0:
        res = ncclAllReduce(a, b, count, ncclFloat32, ncclSum, comm, NULL);
        break;
      case 1:
        res = ncclAllGather(a, b, count, ncclFloat32, comm, NULL);
        break;
      case 2:
        res = ncclBroadcast(a, b, count, ncclFloat32, (int)(it % n), comm, NULL);
        break;
      default:
        res = ncclReduceScatter(a, b, count, ncclFloat32, ncclSum, comm, NULL);
        break;
    }
  }
  double t = now_s();
  char line[640];
  int len =
      snprintf(line, sizeof line, "%d %.6f %d %.500s\n", r, t, (int)res, ncclGetLastError(comm));
  for (int i = 0; i < len; i++) {
    if (line[i] == '\n' && i != len - 1) {
      line[i] = ' ';
    }
  }
  if (write(fd, line, (size_t)len) != len) {
    _exit(4);
  }
  ncclCommAbort(comm);
  free(a);
  free(b);
  _exit(0);
}

int main(int argc, char** argv) {
  int trials = argc > 1 ? atoi(argv[1]) : 6;
  int n = argc > 2 ? atoi(argv[2]) : 4;
  unsigned seed = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 12345u;
  int passed = 0, failed = 0;
  int shm_before = shm_entries();
  printf("fault trials: %d, %d ranks, seed %u\n", trials, n, seed);
  srand(seed);
  double worst = 0;
  for (int t = 0; t < trials; t++) {
    if (procs_comm_id() != 0) { /* rank 0 runs the root: no thread here while forking */
      return 1;
    }
    int fds[2];
    if (pipe(fds) != 0) {
      return 1;
    }
    fflush(NULL);
    pid_t pids[64];
    unsigned tseed = seed + (unsigned)t * 7919u;
    for (int r = 0; r < n; r++) {
      pids[r] = fork();
      if (pids[r] == 0) {
        close(fds[0]);
        ncclUniqueId id;
        if (ncclGetUniqueId(&id) != ncclSuccess) {
          _exit(1);
        }
        rank_main(r, n, id, tseed, fds[1]);
      }
    }
    close(fds[1]);
    int victim = rand() % n;
    struct timespec pause = {0, (long)(200 + rand() % 800) * 1000000L};
    nanosleep(&pause, NULL);
    double t_kill = now_s();
    kill(pids[victim], SIGKILL);
    int ok = 1, reports = 0;
    FILE* in = fdopen(fds[0], "r");
    char line[640];
    while (fgets(line, sizeof line, in) != NULL) {
      int r = -1, code = 0;
      double te = 0;
      char msg[520] = "";
      if (sscanf(line, "%d %lf %d %519[^\n]", &r, &te, &code, msg) < 3) {
        continue;
      }
      reports++;
      double dt = te - t_kill;
      worst = dt > worst ? dt : worst;
      printf("trial %d: rank %d killed; rank %d saw it after %.2f s (error %d): %s\n", t, victim, r,
             dt, code, msg);
    }
    fclose(in);
    for (int r = 0; r < n; r++) {
      int st = 0;
      waitpid(pids[r], &st, 0);
      if (r != victim && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
        printf("trial %d: survivor rank %d ended badly (status %d)\n", t, r, st);
        ok = 0;
      }
    }
    if (reports != n - 1) {
      printf("trial %d: %d of %d survivors reported an error\n", t, reports, n - 1);
      ok = 0;
    }
    ok ? passed++ : failed++;
  }
  int shm_after = shm_entries();
  if (shm_after > shm_before) {
    printf("/dev/shm holds %d more tutti segments than before the trials\n",
           shm_after - shm_before);
    failed++;
  }
  printf("slowest detection: %.2f s\n", worst);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
