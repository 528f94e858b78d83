/* The program test_tuttirun.sh starts under tuttirun: one behaviour per
 * mode (argv[1]), so that each of tuttirun's duties can be watched. Extra
 * trailing arguments are ignored: the driver adds a marker for pgrep. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"

static int env_int(const char* name) {
  const char* v = getenv(name);
  return v != NULL ? atoi(v) : -1;
}

static void __attribute__((noreturn)) sleep_forever(void) {
  for (;;) {
    pause();
  }
}

/* One line of "spam": its text is a function of (rank, i), so the driver can
 * tell a torn or mixed line from a whole one. */
static void spam_line(FILE* f, int rank, int i) {
  char payload[300];
  int len = 1 + (i * 37 + rank * 11) % 280;
  for (int k = 0; k < len; k++) {
    payload[k] = (char)('a' + (rank + i + k) % 26);
  }
  payload[len] = '\0';
  fprintf(f, "spam %d %d %d %s\n", rank, i, len, payload);
}

static int allreduce(int count) {
  int rank = env_int("RANK"), nranks = env_int("WORLD_SIZE");
  ncclUniqueId id;
  ncclComm_t comm;
  /* Every rank asks: with NCCL_COMM_ID set, every rank gets the same id. */
  if (ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    fprintf(stderr, "init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  float* send = malloc(sizeof(float) * (size_t)count);
  float* recv = malloc(sizeof(float) * (size_t)count);
  for (int i = 0; i < count; i++) {
    send[i] = (float)(rank + i % 7);
  }
  int bad = 0;
  for (int inplace = 0; inplace < 2; inplace++) {
    float* out = inplace ? send : recv;
    if (ncclAllReduce(send, out, (size_t)count, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
      fprintf(stderr, "allreduce failed: %s\n", ncclGetLastError(comm));
      return 1;
    }
    for (int i = 0; i < count; i++) {
      /* Small integers: exact whatever the order of the sum. */
      float want = (float)(nranks * (nranks - 1) / 2 + nranks * (i % 7));
      if (out[i] != want && bad++ < 5) {
        fprintf(stderr, "element %d: got %g, want %g\n", i, out[i], want);
      }
    }
  }
  ncclCommDestroy(comm);
  free(send);
  free(recv);
  printf("allreduce %s rank %d of %d\n", bad ? "FAILED" : "ok", rank, nranks);
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int rank = env_int("RANK");
  if (strcmp(mode, "env") == 0) {
    const char* names[] = {
        "RANK",        "LOCAL_RANK",  "WORLD_SIZE",   "LOCAL_WORLD_SIZE", "GROUP_RANK",
        "MASTER_ADDR", "MASTER_PORT", "NCCL_COMM_ID", "TUTTI_JOB_SECRET"};
    printf("env");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
      const char* v = getenv(names[i]);
      printf(" %s=%s", names[i], v != NULL ? v : "(unset)");
    }
    printf("\n");
    fprintf(stderr, "to stderr from %d\n", rank);
    return 0;
  }
  if (strcmp(mode, "torchenv") == 0) { /* the rest of torchrun's variables */
    const char* names[] = {"GROUP_WORLD_SIZE",
                           "ROLE_RANK",
                           "ROLE_NAME",
                           "ROLE_WORLD_SIZE",
                           "TORCHELASTIC_RESTART_COUNT",
                           "TORCHELASTIC_MAX_RESTARTS",
                           "TORCHELASTIC_RUN_ID",
                           "TORCHELASTIC_USE_AGENT_STORE",
                           "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                           "OMP_NUM_THREADS",
                           "TORCHELASTIC_ERROR_FILE"};
    printf("torchenv RANK=%d", rank);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
      const char* v = getenv(names[i]);
      printf(" %s=%s", names[i], v != NULL ? v : "(unset)");
    }
    printf("\n");
    return 0;
  }
  if (strcmp(mode, "failfirst") == 0 && argc > 3) { /* failfirst RANK CODE: only before a restart */
    int restart = env_int("TORCHELASTIC_RESTART_COUNT");
    printf("rank %d attempt %d\n", rank, restart);
    if (rank == atoi(argv[2]) && restart == 0) {
      return atoi(argv[3]);
    }
    return 0;
  }
  if (strcmp(mode, "fail") == 0 && argc > 3) { /* fail RANK CODE: others sleep */
    if (rank == atoi(argv[2])) {
      usleep(200 * 1000);
      fprintf(stderr, "rank %d failing on purpose\n", rank);
      return atoi(argv[3]);
    }
    sleep_forever();
  }
  if (strcmp(mode, "signal") == 0 && argc > 3) { /* signal RANK SIG: others sleep */
    if (rank == atoi(argv[2])) {
      usleep(200 * 1000);
      signal(atoi(argv[3]), SIG_DFL);
      raise(atoi(argv[3]));
    }
    sleep_forever();
  }
  if (strcmp(mode, "sleep") == 0) {
    sleep_forever();
  }
  if (strcmp(mode, "ignoreterm") == 0) { /* needs SIGKILL */
    signal(SIGTERM, SIG_IGN);
    printf("ignoring SIGTERM\n");
    fflush(stdout);
    sleep_forever();
  }
  if (strcmp(mode, "spawn") == 0) { /* leaves a child in its group and one outside */
    if (fork() == 0) {
      sleep_forever();
    }
    if (fork() == 0) {
      setsid();
      sleep_forever();
    }
    if (argc > 2 && strcmp(argv[2], "exit") == 0) {
      return 0; /* "spawn exit": succeed, leaving both behind */
    }
    sleep_forever();
  }
  if (strcmp(mode, "stdin") == 0) { /* stdin is /dev/null: EOF at once */
    int c = getchar();
    printf("stdin gave %s\n", c == EOF ? "EOF" : "data");
    return 0;
  }
  if (strcmp(mode, "spam") == 0 && argc > 2) {
    /* Fully buffered stdio: writes end in the middle of lines. */
    static char big[5000];
    setvbuf(stdout, big, _IOFBF, sizeof big);
    int n = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
      spam_line(stdout, rank, i);
      if (i % 10 == 0) {
        spam_line(stderr, rank, i);
      }
    }
    printf("tail without newline %d", rank);
    return 0;
  }
  if (strcmp(mode, "allreduce") == 0) {
    return allreduce(argc > 2 ? atoi(argv[2]) : 100003);
  }
  fprintf(stderr,
          "usage: test_child env|torchenv|fail R C|failfirst R C|signal R S|sleep|ignoreterm|"
          "spawn|stdin|spam N|allreduce [count]|spawn [exit]\n");
  return 2;
}
