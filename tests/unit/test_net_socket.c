/* The socket network (net/socket/socknet.h) within one process over loopback:
 * messages of every size class arrive whole and are reported with their
 * sizes, 32 requests in flight both ways, grouped receives matched by tag,
 * a receive too small, several connections through one listen comm, the
 * device properties and registration; no fd or thread is left behind. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "net/socket/socknet.h"
#include "net_pair.h"
#include "nccl.h"
#include "util/check.h"
#include "util/seal.h"

static struct tutti_net* net;

static void fill(unsigned char* p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    p[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  }
}

static size_t mismatch(const unsigned char* p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != (unsigned char)((i * 131 + seed * 7 + (i >> 12)) & 0xff)) {
      return i;
    }
  }
  return n;
}

static void test_props(void) {
  int ndev = 0;
  CHECK_NCCL(net->ops->devices(net, &ndev));
  CHECK(ndev >= 1, "%d devices with NCCL_SOCKET_IFNAME=lo", ndev);
  struct tutti_net_props p;
  CHECK_NCCL(net->ops->props(net, 0, &p));
  CHECK(strcmp(p.name, "lo") == 0, "device 0 is %s", p.name);
  CHECK(p.pci_path[0] == '\0', "lo has no PCI path, got %s", p.pci_path);
  CHECK(p.speed == 10000, "lo's unknown speed reads as 10000, got %d", p.speed);
  CHECK(p.ptr_support == TUTTI_NET_PTR_HOST && p.reg_is_global == 1, "ptr %d reg %d", p.ptr_support,
        p.reg_is_global);
  CHECK(p.max_recvs == TUTTI_NET_MAX_RECVS && p.max_p2p_bytes >= ((size_t)1 << 30),
        "max_recvs %d max_p2p %zu", p.max_recvs, p.max_p2p_bytes);
  CHECK(net->ops->props(net, ndev, &p) == ncclInvalidArgument, "a device past the last");
  void* mh = NULL;
  char buf[64];
  CHECK(
      net->ops->reg_mr(net, NULL, buf, sizeof buf, TUTTI_NET_PTR_CUDA, &mh) == ncclInvalidArgument,
      "GPU memory refused");
  CHECK(strstr(tutti_last_error(), "host memory") != NULL, "the sentence: %s", tutti_last_error());
  CHECK_NCCL(net->ops->reg_mr(net, NULL, buf, sizeof buf, TUTTI_NET_PTR_HOST, &mh));
  CHECK_NCCL(net->ops->dereg_mr(net, NULL, mh));
}

/* One message each of `n` sizes, verified, the receive `extra` bytes larger. */
static void test_sizes(void* s, void* r) {
  static const size_t sizes[] = {0, 1, 4095, 65 << 10, (1 << 20) + 7, 64 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    const size_t n = sizes[k], room = n + (k % 2 ? 100 : 0);
    unsigned char* in = malloc(n + 1);
    unsigned char* out = malloc(room + 1);
    fill(in, n, k);
    memset(out, 0xee, room + 1);
    void* reqs[2] = {NULL, NULL};
    int got[16];
    memset(got, 0xff, sizeof got);
    void* data = out;
    int tag = 5;
    CHECK_NCCL(net->ops->irecv(net, r, 1, &data, (size_t[]){room}, &tag, NULL, &reqs[1]));
    CHECK_NCCL(net->ops->isend(net, s, in, n, tag, NULL, &reqs[0]));
    CHECK(reqs[0] != NULL && reqs[1] != NULL, "requests for %zu bytes", n);
    CHECK_NCCL(np_wait(net, reqs, 2, got, 30));
    CHECK(got[0] == (int)n && got[8] == (int)n, "%zu bytes: test reported %d sent, %d received", n,
          got[0], got[8]);
    size_t bad = mismatch(out, n, k);
    CHECK(bad == n, "%zu bytes: byte %zu differs", n, bad);
    CHECK(out[n] == 0xee, "%zu bytes: the byte after the message was written", n);
    free(in);
    free(out);
  }
}

/* 32 requests in flight on both directions at once, small and striped. */
static void test_inflight(void* s1, void* r1, void* s2, void* r2) {
  enum { N = TUTTI_NET_MAX_REQUESTS };
  const size_t sz[4] = {8, 3000, 200 << 10, 1 << 20};
  unsigned char *in[2][N], *out[2][N];
  void* reqs[4 * N];
  void* send_comm[2] = {s1, s2};
  void* recv_comm[2] = {r1, r2};
  int got[4 * N * 8];
  for (int d = 0; d < 2; d++) {
    for (int i = 0; i < N; i++) {
      const size_t n = sz[i % 4];
      in[d][i] = malloc(n);
      out[d][i] = malloc(n);
      fill(in[d][i], n, (uint64_t)(d * 100 + i));
      memset(out[d][i], 0, n);
      void* data = out[d][i];
      int tag = i;
      CHECK_NCCL(net->ops->irecv(net, recv_comm[d], 1, &data, (size_t[]){n}, &tag, NULL,
                                 &reqs[(2 * d + 1) * N + i]));
      CHECK_NCCL(net->ops->isend(net, send_comm[d], in[d][i], n, i, NULL, &reqs[2 * d * N + i]));
      CHECK(reqs[2 * d * N + i] != NULL && reqs[(2 * d + 1) * N + i] != NULL, "request %d/%d", d,
            i);
    }
    void* extra = (void*)1;
    CHECK_NCCL(net->ops->isend(net, send_comm[d], in[d][0], 8, 0, NULL, &extra));
    CHECK(extra == NULL, "a 33rd isend gets no request");
    void* data = out[d][0];
    extra = (void*)1;
    CHECK_NCCL(
        net->ops->irecv(net, recv_comm[d], 1, &data, (size_t[]){8}, (int[]){0}, NULL, &extra));
    CHECK(extra == NULL, "a 33rd irecv gets no request");
  }
  CHECK_NCCL(np_wait(net, reqs, 4 * N, got, 60));
  for (int d = 0; d < 2; d++) {
    for (int i = 0; i < N; i++) {
      const size_t n = sz[i % 4];
      CHECK(got[((2 * d + 1) * N + i) * 8] == (int)n, "direction %d message %d: size %d", d, i,
            got[((2 * d + 1) * N + i) * 8]);
      CHECK(mismatch(out[d][i], n, (uint64_t)(d * 100 + i)) == n, "direction %d message %d", d, i);
      free(in[d][i]);
      free(out[d][i]);
    }
  }
}

/* A receive of 3 buffers, matched by tag while the sends come in another order. */
static void test_grouped(void* s, void* r) {
  const int tags[3] = {7, 8, 9};
  const size_t room[3] = {100, 300 << 10, 5000};
  const size_t len[3] = {100, 200 << 10, 17}; /* sent sizes for tags 7, 8, 9 */
  unsigned char* out[3];
  unsigned char* in[3];
  for (int b = 0; b < 3; b++) {
    out[b] = calloc(1, room[b]);
    in[b] = malloc(len[b]);
    fill(in[b], len[b], (uint64_t)tags[b]);
  }
  void* reqs[4] = {NULL, NULL, NULL, NULL};
  int got[32];
  CHECK_NCCL(net->ops->irecv(net, r, 3, (void**)out, (size_t*)room, (int*)tags, NULL, &reqs[0]));
  const int order[3] = {2, 0, 1};
  for (int k = 0; k < 3; k++) {
    const int b = order[k];
    CHECK_NCCL(net->ops->isend(net, s, in[b], len[b], tags[b], NULL, &reqs[1 + k]));
  }
  CHECK_NCCL(np_wait(net, reqs, 4, got, 30));
  for (int b = 0; b < 3; b++) {
    CHECK(got[b] == (int)len[b], "buffer %d (tag %d) reported %d bytes, want %zu", b, tags[b],
          got[b], len[b]);
    CHECK(mismatch(out[b], len[b], (uint64_t)tags[b]) == len[b], "buffer %d holds tag %d's message",
          b, tags[b]);
    free(out[b]);
    free(in[b]);
  }
}

static void test_too_small(void) {
  void *s = NULL, *r = NULL;
  CHECK_NCCL(np_pair(net, &s, &r));
  char in[1000] = {0}, out[500];
  void* reqs[2] = {NULL, NULL};
  void* data = out;
  CHECK_NCCL(net->ops->irecv(net, r, 1, &data, (size_t[]){500}, (int[]){0}, NULL, &reqs[1]));
  CHECK_NCCL(net->ops->isend(net, s, in, 1000, 0, NULL, &reqs[0]));
  ncclResult_t res = np_wait(net, reqs, 2, NULL, 10);
  CHECK(res == ncclInvalidUsage, "a receive too small: %d", (int)res);
  CHECK(strstr(tutti_last_error(), "1000 bytes") && strstr(tutti_last_error(), "500 bytes"),
        "the sentence names both sizes: %s", tutti_last_error());
  net->ops->close_send(net, s);
  net->ops->close_recv(net, r);
}

/* Three connections through one listen comm, each carrying its own message. */
static void test_several(void) {
  char handle[TUTTI_NET_HANDLE_BYTES], copy[3][TUTTI_NET_HANDLE_BYTES];
  void* l = NULL;
  CHECK_NCCL(net->ops->listen(net, 0, handle, &l));
  void *s[3] = {NULL}, *r[3] = {NULL};
  for (int i = 0; i < 3; i++) {
    memcpy(copy[i], handle, sizeof handle);
  }
  /* All connect at once, then the accepts come. */
  const double end = np_now() + 10;
  int have = 0;
  while (have < 3 && np_now() < end) {
    for (int i = 0; i < 3; i++) {
      if (s[i] == NULL) {
        CHECK_NCCL(net->ops->connect(net, 0, copy[i], &s[i]));
      }
    }
    if (r[have] == NULL) {
      CHECK_NCCL(net->ops->accept(net, l, &r[have]));
    }
    have += r[have] != NULL;
  }
  CHECK(have == 3, "accepted %d of 3 connections", have);
  /* Each send comm sends its index; each receive comm learns whose it is. */
  int seen = 0;
  for (int i = 0; i < 3 && have == 3; i++) {
    int v = 40 + i;
    void* reqs[2] = {NULL, NULL};
    CHECK_NCCL(net->ops->isend(net, s[i], &v, sizeof v, 0, NULL, &reqs[0]));
    CHECK_NCCL(np_wait(net, reqs, 1, NULL, 10));
  }
  for (int j = 0; j < 3 && have == 3; j++) {
    int v = -1;
    void* data = &v;
    void* reqs[1] = {NULL};
    CHECK_NCCL(net->ops->irecv(net, r[j], 1, &data, (size_t[]){sizeof v}, (int[]){0}, NULL, reqs));
    CHECK_NCCL(np_wait(net, reqs, 1, NULL, 10));
    CHECK(v >= 40 && v < 43, "receive comm %d got %d", j, v);
    seen |= 1 << (v - 40);
  }
  CHECK(seen == 7, "every connection carried its own message (mask %d)", seen);
  for (int i = 0; i < 3; i++) {
    net->ops->close_send(net, s[i]);
    net->ops->close_recv(net, r[i]);
  }
  net->ops->close_listen(net, l);
}

int main(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  /* Workers whatever the cores (none by default below 4); the suite also
   * runs this with NCCL_SOCKET_NTHREADS=0 (tests/net/tests.cmake). */
  setenv("NCCL_SOCKET_NTHREADS", "4", 0);
  if (getenv("TEST_PSK") != NULL) { /* net.socket.encrypted: every socket through util/seal.c */
    CHECK_NCCL(tutti_seal_set_key(getenv("TEST_PSK")));
  }
  CHECK_NCCL(tutti_socknet_open(7, &net));
  np_settle();
  const int fds0 = np_count("fd"), tasks0 = np_count("task");
  test_props();
  void *s1 = NULL, *r1 = NULL, *s2 = NULL, *r2 = NULL;
  CHECK_NCCL(np_pair(net, &s1, &r1));
  CHECK_NCCL(np_pair(net, &s2, &r2));
  if (s1 && r1 && s2 && r2) {
    test_sizes(s1, r1);
    test_inflight(s1, r1, s2, r2);
    test_grouped(s2, r2);
  }
  net->ops->close_send(net, s1);
  net->ops->close_recv(net, r1);
  net->ops->close_send(net, s2);
  net->ops->close_recv(net, r2);
  test_too_small();
  test_several();
  CHECK(np_count("fd") == fds0, "fds: %d before, %d after", fds0, np_count("fd"));
  CHECK(np_count("task") == tasks0, "threads: %d before, %d after", tasks0, np_count("task"));
  net->ops->finalize(net);
  return test_summary("net_socket");
}
