/* One end of a socket-network connection between two hosts, for
 * tests/net/cut.sh: moves 16 MB messages until killed or the connection
 * fails, then says when and why.
 *   net_peer recv FILE   listens, writes its handle to FILE, receives
 *   net_peer send FILE   connects to the handle in FILE, sends
 * Lines: "<role>: N messages" every 16, and on failure
 * "<role>: failed at <epoch seconds>: <sentence>" (exit status 3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/socket/socknet.h"
#include "util/check.h"

#define SIZE (16u << 20)
#define INFLIGHT 4

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void failed(const char* role, const char* what) {
  printf("%s: failed at %.3f: %s: %s\n", role, wall(), what, tutti_last_error());
  fflush(stdout);
  exit(3);
}

static void* join(struct tutti_net* n, int recv, const char* file) {
  char h[TUTTI_NET_HANDLE_BYTES];
  void *l = NULL, *c = NULL;
  const char* role = recv ? "recv" : "send";
  if (recv) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE* f = fopen(tmp, "w");
    if (n->ops->listen(n, 0, h, &l) != ncclSuccess || f == NULL || fwrite(h, sizeof h, 1, f) != 1 ||
        fclose(f) != 0 || rename(tmp, file) != 0) {
      failed(role, "listen");
    }
  } else {
    FILE* f = NULL;
    for (int i = 0; i < 1000 && f == NULL; i++) {
      f = fopen(file, "r");
      if (f == NULL) {
        usleep(10000);
      }
    }
    if (f == NULL || fread(h, sizeof h, 1, f) != 1) {
      failed(role, "reading the handle");
    }
    fclose(f);
  }
  while (c == NULL) {
    if ((recv ? n->ops->accept(n, l, &c) : n->ops->connect(n, 0, h, &c)) != ncclSuccess) {
      failed(role, recv ? "accept" : "connect");
    }
  }
  return c;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "recv") != 0 && strcmp(argv[1], "send") != 0)) {
    fprintf(stderr, "usage: net_peer recv|send FILE\n");
    return 2;
  }
  const int recv = strcmp(argv[1], "recv") == 0;
  struct tutti_net* n = NULL;
  if (tutti_socknet_open(0, &n) != ncclSuccess) {
    failed(argv[1], "open");
  }
  void* c = join(n, recv, argv[2]);
  char* buf = malloc((size_t)SIZE * INFLIGHT);
  memset(buf, 1, (size_t)SIZE * INFLIGHT);
  void* req[INFLIGHT] = {NULL};
  long done = 0;
  for (;;) {
    for (int q = 0; q < INFLIGHT; q++) {
      if (req[q] == NULL) {
        void* data = buf + (size_t)q * SIZE;
        size_t size = SIZE;
        int tag = 0;
        ncclResult_t r = recv ? n->ops->irecv(n, c, 1, &data, &size, &tag, NULL, &req[q])
                              : n->ops->isend(n, c, data, SIZE, 0, NULL, &req[q]);
        if (r != ncclSuccess) {
          failed(argv[1], recv ? "irecv" : "isend");
        }
        continue;
      }
      int flag = 0;
      if (n->ops->test(n, req[q], &flag, NULL) != ncclSuccess) {
        failed(argv[1], "test");
      }
      if (flag) {
        req[q] = NULL;
        if (++done % 16 == 0) {
          printf("%s: %ld messages\n", argv[1], done);
          fflush(stdout);
        }
      }
    }
  }
}
