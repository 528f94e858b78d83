/* TUTTI_DUMP_ON_SIGNAL: rank 0 waits in an allreduce for rank 1, which is
 * late; SIGUSR1 sent to rank 0 makes it log what it waits for (the
 * collective and the peer). The allreduce then completes as usual.
 * Prints "N passed, N failed". */
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

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static int rank_main(int r, ncclUniqueId id) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) {
    return 1;
  }
  if (r == 1) {
    sleep_s(2.0); /* late: rank 0 waits for it */
  }
  int32_t buf[4096];
  for (int i = 0; i < 4096; i++) {
    buf[i] = r + i;
  }
  ncclResult_t res = ncclAllReduce(buf, buf, 4096, ncclInt32, ncclSum, comm, NULL);
  int ok = res == ncclSuccess && buf[7] == 1 + 2 * 7;
  ncclCommDestroy(comm);
  return ok ? 0 : 1;
}

int main(void) {
  char dir[] = "/tmp/tutti-dump-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    return 1;
  }
  char pattern[128];
  snprintf(pattern, sizeof pattern, "%s/rank-%%p.log", dir);
  setenv("TUTTI_DUMP_ON_SIGNAL", "1", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  if (procs_comm_id() != 0) { /* rank 0 runs the root: no thread here while forking */
    return 1;
  }
  fflush(NULL);
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      ncclUniqueId id;
      _exit(ncclGetUniqueId(&id) != ncclSuccess ? 1 : rank_main(r, id));
    }
  }
  sleep_s(1.0);
  kill(pids[0], SIGUSR1);
  int ok = 1;
  for (int r = 0; r < 2; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d failed (status %d)\n", r, st);
      ok = 0;
    }
  }
  /* The log file is named when the library first logs, which may be in this
   * process (before the fork): read every file the ranks wrote. */
  int found = 0;
  char path[320], line[512];
  DIR* d = opendir(dir);
  for (struct dirent* e = d ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
    if (e->d_name[0] == '.') {
      continue;
    }
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE* f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
      if (strstr(line, "dump: rank 0 of 2 in AllReduce") != NULL &&
          strstr(line, "rank 1") != NULL) {
        printf("rank 0 logged: %s", strstr(line, "dump:"));
        found = 1;
      }
    }
    if (f != NULL) {
      fclose(f);
    }
    unlink(path);
  }
  if (d != NULL) {
    closedir(d);
  }
  rmdir(dir);
  if (!found) {
    fprintf(stderr, "no log line of rank 0 names the allreduce and rank 1 it waits for\n");
    ok = 0;
  }
  printf("%d passed, %d failed\n", ok, !ok);
  return ok ? 0 : 1;
}
