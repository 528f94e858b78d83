/* Numeric variables are checked when a communicator is created: a value
 * that is not an integer, or out of its range, fails the init at once with
 * ncclInvalidArgument and a sentence naming the variable and the value,
 * instead of being replaced by the default in silence. And a count whose
 * buffer cannot fit the machine's memory is refused at once, before
 * anything is sized from it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "nccl.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One rank alone: init with `name`=`value` set, then destroy. */
static ncclResult_t init_with(const char* name, const char* value, char* why, size_t len) {
  setenv(name, value, 1);
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) {
    r = ncclCommInitRank(&comm, 1, id, 0);
  }
  snprintf(why, len, "%s", ncclGetLastError(NULL));
  if (comm != NULL) {
    ncclCommDestroy(comm);
  }
  unsetenv(name);
  return r;
}

static void refused(const char* name, const char* value) {
  char why[1024];
  double t0 = now();
  ncclResult_t r = init_with(name, value, why, sizeof why);
  double dt = now() - t0;
  CHECK(r == ncclInvalidArgument, "%s=%s: init returned %d", name, value, (int)r);
  CHECK(strstr(why, name) != NULL && strstr(why, value) != NULL,
        "%s=%s: the error does not name the variable and the value: %s", name, value, why);
  CHECK(dt < 2, "%s=%s: refused only after %.1f s", name, value, dt);
}

int main(void) {
  unsetenv("NCCL_COMM_ID");
  refused("TUTTI_TIMEOUT", "abc");
  refused("TUTTI_TIMEOUT", "0");
  refused("TUTTI_TIMEOUT", "-3");
  refused("TUTTI_TIMEOUT", "30s");
  refused("TUTTI_HEARTBEAT_S", "-1");
  refused("NCCL_BUFFSIZE", "4MB");
  refused("TUTTI_TUNE", "board.slot=1x");
  char why[1024];
  CHECK(init_with("TUTTI_TIMEOUT", "30", why, sizeof why) == ncclSuccess, "a valid value: %s", why);
  CHECK(init_with("TUTTI_TIMEOUT", "0x20", why, sizeof why) == ncclSuccess, "hex: %s", why);
  /* A count that fits the address space but no machine's memory. */
  ncclUniqueId id;
  ncclComm_t comm;
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclCommInitRank(&comm, 1, id, 0));
  float x[4] = {0};
  const size_t huge[] = {SIZE_MAX / 4, SIZE_MAX / 8, (size_t)1 << 60};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    double t0 = now();
    ncclResult_t r = ncclAllReduce(x, x, huge[i], ncclFloat, ncclSum, comm, NULL);
    CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "memory") != NULL &&
              now() - t0 < 1,
          "count %zu: %d: %s", huge[i], (int)r, ncclGetLastError(comm));
  }
  CHECK(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, NULL) == ncclSuccess,
        "a valid call after the refused ones: %s", ncclGetLastError(comm));
  ncclCommDestroy(comm);
  return test_summary("params");
}
