/* Host identity set by the user: ranks of one machine with different
 * NCCL_HOSTID (NCCL's variable, NCCL's meaning) or TUTTI_HOSTID values are
 * different hosts and meet over TCP; equal values make one host; when both
 * are set, TUTTI_HOSTID decides. Two ranks as processes, host buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/comm.h"
#include "nccl.h"
#include "procs.h"

struct hostid_case {
  const char* nccl[2]; /* NCCL_HOSTID of rank 0 and 1, NULL: unset */
  const char* tutti[2];
  int hosts; /* how many hosts the communicator must see */
};

static void set_or_unset(const char* name, const char* v) {
  if (v != NULL) {
    setenv(name, v, 1);
  } else {
    unsetenv(name);
  }
}

static void rank_body(int r, void* arg, long* passed, long* failed) {
  const struct hostid_case* c = arg;
  set_or_unset("NCCL_HOSTID", c->nccl[r]);
  set_or_unset("TUTTI_HOSTID", c->tutti[r]);
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", r, ncclGetLastError(NULL));
    (*failed)++;
    return;
  }
  const int hosts = ((struct ncclComm*)comm)->nhosts;
  if (hosts == c->hosts) {
    (*passed)++;
  } else {
    fprintf(stderr, "rank %d: NCCL_HOSTID %s/%s TUTTI_HOSTID %s/%s: %d host(s), expected %d\n", r,
            c->nccl[0] ? c->nccl[0] : "-", c->nccl[1] ? c->nccl[1] : "-",
            c->tutti[0] ? c->tutti[0] : "-", c->tutti[1] ? c->tutti[1] : "-", hosts, c->hosts);
    (*failed)++;
  }
  /* Whatever the transport, the sum is exact. */
  const size_t count = 300007;
  float* buf = malloc(count * sizeof *buf);
  for (size_t i = 0; buf != NULL && i < count; i++) {
    buf[i] = (float)(r + 1) * (float)(i % 1000);
  }
  int ok =
      buf != NULL && ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL) == ncclSuccess;
  for (size_t i = 0; ok && i < count; i++) {
    ok = buf[i] == 3.0f * (float)(i % 1000);
  }
  if (ok) {
    (*passed)++;
  } else {
    fprintf(stderr, "rank %d: allreduce across %d host(s) failed: %s\n", r, hosts,
            ncclGetLastError(comm));
    (*failed)++;
  }
  free(buf);
  ncclCommDestroy(comm);
}

int main(void) {
  const struct hostid_case cases[] = {
      {{"node-a", "node-b"}, {NULL, NULL}, 2},     /* NCCL_HOSTID splits one machine */
      {{"node-a", "node-a"}, {NULL, NULL}, 1},     /* equal ids: one host */
      {{NULL, NULL}, {"x", "y"}, 2},               /* TUTTI_HOSTID alone */
      {{"node-a", "node-b"}, {"same", "same"}, 1}, /* TUTTI_HOSTID decides */
      {{NULL, NULL}, {NULL, NULL}, 1},             /* neither: the machine itself */
  };
  long passed = 0, failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (procs_comm_id() != 0) {
      fprintf(stderr, "no free loopback port\n");
      return 1;
    }
    procs_run(2, rank_body, (void*)&cases[i], &passed, &failed);
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
