/* Mistakes in how ranks meet, each reported within seconds (not after
 * TUTTI_TIMEOUT) with a sentence that says what to do:
 *   - two jobs on one NCCL_COMM_ID, told apart by their launchers' job ids:
 *     the second job's ranks are refused at once, the first runs untouched;
 *   - every rank called ncclGetUniqueId itself (the id never shared): a rank
 *     other than 0, alone at the root of its own process, says so;
 *   - an id whose root is gone (its process exited): no root answers;
 *   - two jobs with no identity at all on one NCCL_COMM_ID: whichever
 *     ranks formed a communicator, every process of both jobs fails, none
 *     runs to the end with rc 0; one such job alone runs communicators
 *     whose rank 0 is any of its processes, and the next job on the
 *     address runs once the first has ended. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "harness.h"
#include "nccl.h"
#include "port.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A child's verdict: {result, seconds, sum of the allreduce} and the text. */
struct verdict {
  int res;
  double secs;
  float sum;
  char why[400];
};

static pid_t spawn(int pipefd, int rank, int nranks, const char* job, float value,
                   const ncclUniqueId* id) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid != 0) {
    return pid;
  }
  if (job != NULL) {
    setenv("SLURM_JOB_ID", job, 1);
  }
  struct verdict v = {0, 0, 0, ""};
  ncclUniqueId own;
  const double t0 = now();
  ncclComm_t comm;
  v.res = id != NULL ? ncclSuccess : ncclGetUniqueId(&own);
  if (v.res == ncclSuccess) {
    v.res = ncclCommInitRank(&comm, nranks, id != NULL ? *id : own, rank);
  }
  v.secs = now() - t0;
  snprintf(v.why, sizeof v.why, "%s", ncclGetLastError(NULL));
  if (v.res == ncclSuccess) {
    float x = value;
    v.res = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL);
    v.sum = x;
    ncclCommDestroy(comm);
  }
  if (write(pipefd, &v, sizeof v) != (ssize_t)sizeof v) {
    _exit(2);
  }
  _exit(0);
}

static struct verdict collect(int fd, pid_t pid) {
  struct verdict v;
  memset(&v, 0, sizeof v);
  v.res = -1;
  if (read(fd, &v, sizeof v) != (ssize_t)sizeof v) {
    v.res = -1;
  }
  waitpid(pid, NULL, 0);
  return v;
}

/* Job A (SLURM_JOB_ID=101, 3 ranks) and job B (202, 2 ranks) on one
 * NCCL_COMM_ID. A's rank 0 holds the port; B's ranks knock while A still
 * waits for its last ranks (which come 3 s later), so its root is there. */
static void two_jobs(void) {
  enum { N = 5 };
  int fds[N][2];
  pid_t pids[N];
  const char* jobs[N] = {"101", "202", "202", "101", "101"};
  const int ranks[N] = {0, 0, 1, 1, 2}, sizes[N] = {3, 2, 2, 3, 3};
  for (int i = 0; i < N; i++) {
    if (pipe(fds[i]) != 0) {
      return;
    }
  }
  for (int i = 0; i < N; i++) {
    if (i == 1 || i == 3) {
      usleep(i == 1 ? 200 * 1000 : 3000 * 1000);
    }
    pids[i] =
        spawn(fds[i][1], ranks[i], sizes[i], jobs[i], jobs[i][0] == '1' ? 1.0f : 100.0f, NULL);
  }
  struct verdict v[N];
  for (int i = 0; i < N; i++) {
    close(fds[i][1]);
    v[i] = collect(fds[i][0], pids[i]);
    close(fds[i][0]);
  }
  for (int i = 0; i < N; i++) {
    if (jobs[i][0] == '1') {
      CHECK(v[i].res == ncclSuccess && v[i].sum == 3.0f,
            "job A rank %d: %d, sum %g (3 expected: no rank of job B among its ranks): %s",
            ranks[i], v[i].res, (double)v[i].sum, v[i].why);
    } else {
      CHECK(v[i].res != ncclSuccess && v[i].secs < 3,
            "job B rank %d: refused (%d) within seconds (%.1f s): %s", ranks[i], v[i].res,
            v[i].secs, v[i].why);
    }
  }
  CHECK(strstr(v[1].why, "NCCL_COMM_ID") != NULL, "job B rank 0 names the address: %s", v[1].why);
  CHECK(strstr(v[2].why, "secret") != NULL || strstr(v[2].why, "another job") != NULL,
        "job B rank 1 says it met another job: %s", v[2].why);
}

/* A process of a job with no identity: makes `ncomms` communicators, the
 * k-th as rank ranks[k] of 2 (the earlier ones stay), then runs `calls`
 * allreduces of `value` on the last, `gap_ms` apart. The verdict: the first
 * failure (or success), the calls that succeeded, the last sum. A `late`
 * process starts once every other one has formed its first communicator
 * and run one allreduce on it (each says so on `ready`). */
struct script {
  int ncomms, ranks[3], calls, gap_ms;
  float value;
  int late;
};

static pid_t spawn_script(int pipefd, int ready, const struct script* sc) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid != 0) {
    return pid;
  }
  struct verdict v = {0, 0, 0, ""};
  const double t0 = now();
  ncclComm_t comms[3];
  int made = 0, ok = 0;
  for (; made < sc->ncomms && v.res == ncclSuccess; made++) {
    ncclUniqueId id;
    v.res = ncclGetUniqueId(&id);
    if (v.res == ncclSuccess) {
      v.res = ncclCommInitRank(&comms[made], 2, id, sc->ranks[made]);
    }
    if (v.res != ncclSuccess) {
      break;
    }
    float x = sc->value;
    v.res = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comms[made], NULL);
    v.sum = x;
    if (made == 0 && v.res == ncclSuccess && write(ready, "r", 1) != 1) {
      _exit(2);
    }
  }
  for (int i = 0; i < sc->calls && v.res == ncclSuccess; i++) {
    float x = sc->value;
    v.res = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comms[made - 1], NULL);
    v.sum = v.res == ncclSuccess ? x : v.sum;
    ok += v.res == ncclSuccess;
    usleep((useconds_t)sc->gap_ms * 1000);
  }
  v.secs = now() - t0;
  snprintf(v.why, sizeof v.why, "%s", v.res == ncclSuccess ? "" : ncclGetLastError(NULL));
  v.sum = v.res == ncclSuccess ? v.sum : (float)ok;
  for (int i = 0; i < made; i++) {
    ncclCommDestroy(comms[i]);
  }
  if (write(pipefd, &v, sizeof v) != (ssize_t)sizeof v) {
    _exit(2);
  }
  _exit(0);
}

static void run_scripts(const struct script* sc, int n, struct verdict* v) {
  int fds[4][2], ready[2];
  pid_t pids[4];
  if (pipe(ready) != 0) {
    return;
  }
  for (int late = 0; late < 2; late++) {
    int early = 0;
    for (int i = 0; i < n; i++) {
      early += !sc[i].late;
      if (sc[i].late != late) {
        continue;
      }
      if (pipe(fds[i]) != 0) {
        return;
      }
      pids[i] = spawn_script(fds[i][1], ready[1], &sc[i]);
    }
    /* The late ones come after the others formed (or 20 s, if they cannot). */
    for (int k = 0; late == 0 && early < n && k < early; k++) {
      struct pollfd p = {ready[0], POLLIN, 0};
      char c;
      if (poll(&p, 1, 20000) != 1 || read(ready[0], &c, 1) != 1) {
        break;
      }
    }
  }
  for (int i = 0; i < n; i++) {
    close(fds[i][1]);
    v[i] = collect(fds[i][0], pids[i]);
    close(fds[i][0]);
  }
  close(ready[0]);
  close(ready[1]);
}

/* Job A (value 1) and job B (value 100), 2 ranks each, no identity, one
 * address. A's rank 0 and B's rank 1 start first and form a communicator;
 * A's rank 1 and B's rank 0 come once it has run an allreduce. */
static void two_jobs_no_identity(void) {
  const struct script sc[4] = {
      {1, {0}, 60, 100, 1.0f, 0},   /* A0 */
      {1, {1}, 60, 100, 100.0f, 0}, /* B1 */
      {1, {1}, 60, 100, 1.0f, 1},   /* A1 */
      {1, {0}, 60, 100, 100.0f, 1}, /* B0 */
  };
  const char* names[4] = {"A0", "B1", "A1", "B0"};
  struct verdict v[4];
  run_scripts(sc, 4, v);
  for (int i = 0; i < 4; i++) {
    printf("%s: result %d after %.2f s of its own, %g calls done\n", names[i], v[i].res, v[i].secs,
           (double)v[i].sum);
    CHECK(v[i].res == ncclInvalidUsage && strstr(v[i].why, "two jobs") != NULL && v[i].secs < 8,
          "%s fails, saying two jobs met (%d after %.1f s, %g calls done): %s", names[i], v[i].res,
          v[i].secs, (double)v[i].sum, v[i].why);
  }
}

/* One job with no identity: communicators whose rank 0 is either process,
 * the earlier ones still alive. Then the next job on the same address. */
static void one_job_no_identity(void) {
  const struct script sc[2] = {{3, {0, 1, 0}, 3, 0, 1.0f, 0}, {3, {1, 0, 1}, 3, 0, 2.0f, 0}};
  struct verdict v[2];
  for (int job = 0; job < 2; job++) {
    run_scripts(sc, 2, v);
    for (int i = 0; i < 2; i++) {
      CHECK(v[i].res == ncclSuccess && v[i].sum == 3.0f,
            "job %d process %d: three communicators on one address (%d, sum %g): %s", job, i,
            v[i].res, (double)v[i].sum, v[i].why);
    }
  }
}

/* Every rank calls ncclGetUniqueId itself. */
static void own_ids(void) {
  int fds[2][2];
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    if (pipe(fds[i]) != 0) {
      return;
    }
    pids[i] = spawn(fds[i][1], i, 2, NULL, 1.0f, NULL);
  }
  struct verdict v[2];
  for (int i = 0; i < 2; i++) {
    close(fds[i][1]);
    v[i] = collect(fds[i][0], pids[i]);
    close(fds[i][0]);
  }
  CHECK(v[1].res == ncclInvalidUsage && v[1].secs < 8 && strstr(v[1].why, "ncclGetUniqueId"),
        "rank 1, at its own root, says every rank called ncclGetUniqueId (%d after %.1f s): %s",
        v[1].res, v[1].secs, v[1].why);
  CHECK(v[0].res != ncclSuccess, "rank 0 does not form a communicator alone: %d", v[0].res);
}

/* An id whose root's process has exited. */
static void dead_root(void) {
  int fd[2];
  if (pipe(fd) != 0) {
    return;
  }
  fflush(NULL);
  pid_t maker = fork();
  if (maker == 0) {
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    if (write(fd[1], &id, sizeof id) != (ssize_t)sizeof id) {
      _exit(2);
    }
    _exit(0); /* and its root with it */
  }
  ncclUniqueId id;
  ssize_t got = read(fd[0], &id, sizeof id);
  waitpid(maker, NULL, 0);
  close(fd[0]);
  close(fd[1]);
  CHECK(got == (ssize_t)sizeof id, "the id arrived");
  int vfd[2];
  if (pipe(vfd) != 0) {
    return;
  }
  pid_t pid = spawn(vfd[1], 1, 2, NULL, 1.0f, &id);
  close(vfd[1]);
  struct verdict v = collect(vfd[0], pid);
  close(vfd[0]);
  CHECK(v.res == ncclInvalidUsage && v.secs < 8 && strstr(v.why, "no bootstrap root answers"),
        "a rank given a dead root's id fails within seconds (%d after %.1f s): %s", v.res, v.secs,
        v.why);
}

int main(void) {
  setenv("TUTTI_TIMEOUT", "9", 1);
  unsetenv("NCCL_COMM_ID");
  unsetenv("TUTTI_JOB_SECRET");
  own_ids();
  dead_root();
  char port[64];
  snprintf(port, sizeof port, "127.0.0.1:%d", test_loopback_port());
  setenv("NCCL_COMM_ID", port, 1);
  two_jobs();
  size_t nvars;
  const char* const* launchers = tutti_bootstrap_launcher_vars(&nvars);
  for (size_t i = 0; i < nvars; i++) {
    unsetenv(launchers[i]); /* no launcher names these jobs */
  }
  snprintf(port, sizeof port, "127.0.0.1:%d", test_loopback_port());
  setenv("NCCL_COMM_ID", port, 1);
  one_job_no_identity();
  snprintf(port, sizeof port, "127.0.0.1:%d", test_loopback_port());
  setenv("NCCL_COMM_ID", port, 1);
  two_jobs_no_identity();
  return test_summary("join_mistakes");
}
