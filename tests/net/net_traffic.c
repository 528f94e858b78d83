/* Connections and messages over a struct tutti_net for the loader's tests
 * (net_traffic.h). */
#include "net_traffic.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define SPINS 100000

void net_pair_open(struct tutti_net* n, int dev, struct net_pair* p) {
  char handle[TUTTI_NET_HANDLE_BYTES];
  memset(p, 0, sizeof *p);
  CHECK_NCCL(n->ops->listen(n, dev, handle, &p->listen));
  CHECK(p->listen != NULL, "listen gave a listening comm");
  int calls = 0;
  for (int i = 0; i < 100 && p->listen != NULL && (p->send == NULL || p->recv == NULL); i++) {
    if (p->recv == NULL) {
      CHECK_NCCL(n->ops->accept(n, p->listen, &p->recv));
      calls++;
    }
    if (p->send == NULL) {
      CHECK_NCCL(n->ops->connect(n, dev, handle, &p->send));
      calls++;
    }
  }
  CHECK(p->send != NULL && p->recv != NULL, "connect and accept came up on device %d", dev);
  /* The mock answers NULL first, each: the loop must have gone round. */
  CHECK(calls >= 4, "connect / accept took %d calls", calls);
}

void net_pair_close(struct tutti_net* n, struct net_pair* p) {
  if (p->send != NULL) {
    CHECK_NCCL(n->ops->close_send(n, p->send));
  }
  if (p->recv != NULL) {
    CHECK_NCCL(n->ops->close_recv(n, p->recv));
  }
  if (p->listen != NULL) {
    CHECK_NCCL(n->ops->close_listen(n, p->listen));
  }
  memset(p, 0, sizeof *p);
}

ncclResult_t net_wait(struct tutti_net* n, void* req, int* sizes) {
  int done = 0;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < SPINS && !done && res == ncclSuccess; i++) {
    res = n->ops->test(n, req, &done, sizes);
  }
  CHECK(done || res != ncclSuccess, "a request never completed");
  return res;
}

static unsigned char pattern(int dir, int msg, size_t i) {
  return (unsigned char)(i * 131u + (size_t)msg * 7u + (size_t)dir * 53u + 1u);
}

/* One direction's buffers: receives are 16 bytes larger than the sends, so
 * that test must report what arrived, not what was posted. */
struct way {
  const struct net_pair* p;
  unsigned char* sbuf;
  unsigned char* rbuf;
  size_t soff[TUTTI_NET_MAX_REQUESTS], roff[TUTTI_NET_MAX_REQUESTS];
  void* smh;
  void* rmh;
  void* sreq[TUTTI_NET_MAX_REQUESTS];
  void* rreq[TUTTI_NET_MAX_REQUESTS];
};

static void way_open(struct tutti_net* n, struct way* w, const struct net_pair* p, int dir,
                     const size_t* sizes, int count) {
  memset(w, 0, sizeof *w);
  w->p = p;
  size_t s = 0, r = 0;
  for (int i = 0; i < count; i++) {
    w->soff[i] = s;
    w->roff[i] = r;
    s += sizes[i];
    r += sizes[i] + 16;
  }
  w->sbuf = malloc(s + 1);
  w->rbuf = malloc(r + 1);
  for (int i = 0; i < count; i++) {
    for (size_t b = 0; b < sizes[i]; b++) {
      w->sbuf[w->soff[i] + b] = pattern(dir, i, b);
    }
  }
  memset(w->rbuf, 0xee, r + 1);
  CHECK_NCCL(n->ops->reg_mr(n, p->send, w->sbuf, s + 1, TUTTI_NET_PTR_HOST, &w->smh));
  CHECK_NCCL(n->ops->reg_mr(n, p->recv, w->rbuf, r + 1, TUTTI_NET_PTR_HOST, &w->rmh));
}

static void way_close(struct tutti_net* n, struct way* w) {
  CHECK_NCCL(n->ops->dereg_mr(n, w->p->send, w->smh));
  CHECK_NCCL(n->ops->dereg_mr(n, w->p->recv, w->rmh));
  free(w->sbuf);
  free(w->rbuf);
}

void net_round_trip(struct tutti_net* n, const struct net_pair* ab, const struct net_pair* ba,
                    const size_t* sizes, int count) {
  struct way w[2];
  way_open(n, &w[0], ab, 0, sizes, count);
  way_open(n, &w[1], ba, 1, sizes, count);
  for (int d = 0; d < 2; d++) {
    for (int i = 0; i < count; i++) {
      void* data = w[d].rbuf + w[d].roff[i];
      size_t size = sizes[i] + 16;
      int tag = i;
      CHECK_NCCL(n->ops->irecv(n, w[d].p->recv, 1, &data, &size, &tag, &w[d].rmh, &w[d].rreq[i]));
      CHECK(w[d].rreq[i] != NULL, "receive %d of %d was taken", i, count);
    }
  }
  for (int d = 0; d < 2; d++) {
    for (int i = 0; i < count; i++) {
      CHECK_NCCL(n->ops->isend(n, w[d].p->send, w[d].sbuf + w[d].soff[i], sizes[i], i, w[d].smh,
                               &w[d].sreq[i]));
      CHECK(w[d].sreq[i] != NULL, "send %d of %d was taken", i, count);
    }
  }
  for (int d = 0; d < 2; d++) {
    for (int i = 0; i < count; i++) {
      int got = -1;
      if (w[d].sreq[i] != NULL) {
        CHECK_NCCL(net_wait(n, w[d].sreq[i], &got));
        CHECK(got == (int)sizes[i], "send %d: test says %d bytes, not %zu", i, got, sizes[i]);
      }
      got = -1;
      if (w[d].rreq[i] != NULL) {
        CHECK_NCCL(net_wait(n, w[d].rreq[i], &got));
        CHECK(got == (int)sizes[i], "receive %d: test says %d bytes, not %zu", i, got, sizes[i]);
      }
      int same = 1;
      for (size_t b = 0; b < sizes[i] && same; b++) {
        same = w[d].rbuf[w[d].roff[i] + b] == pattern(d, i, b);
      }
      CHECK(same && w[d].rbuf[w[d].roff[i] + sizes[i]] == 0xee,
            "direction %d message %d (%zu bytes) arrived whole, and nothing more", d, i, sizes[i]);
    }
  }
  way_close(n, &w[0]);
  way_close(n, &w[1]);
}

void net_grouped(struct tutti_net* n, const struct net_pair* p) {
  enum { A = 100, B = 5000, C = 1 };
  static unsigned char src[A + B + C], dst[3][B + 8];
  for (size_t i = 0; i < sizeof src; i++) {
    src[i] = (unsigned char)(i * 29 + 3);
  }
  memset(dst, 0, sizeof dst);
  void *smh = NULL, *rmh = NULL, *rreq = NULL, *sreq[3] = {NULL};
  CHECK_NCCL(n->ops->reg_mr(n, p->send, src, sizeof src, TUTTI_NET_PTR_HOST, &smh));
  CHECK_NCCL(n->ops->reg_mr(n, p->recv, dst, sizeof dst, TUTTI_NET_PTR_HOST, &rmh));
  void* data[3] = {dst[0], dst[1], dst[2]};
  size_t sizes[3] = {A + 1, B + 2, C + 3}; /* each its own: a mixed-up size fails a send */
  int tags[3] = {7, 8, 9};
  void* mh[3] = {rmh, rmh, rmh};
  CHECK_NCCL(n->ops->irecv(n, p->recv, 3, data, sizes, tags, mh, &rreq));
  CHECK(rreq != NULL, "the grouped receive was taken");
  /* tag 9 first, then 7, then 8 */
  const struct {
    int tag;
    size_t off, len;
  } sends[3] = {{9, A + B, C}, {7, 0, A}, {8, A, B}};
  for (int i = 0; i < 3; i++) {
    CHECK_NCCL(
        n->ops->isend(n, p->send, src + sends[i].off, sends[i].len, sends[i].tag, smh, &sreq[i]));
    CHECK(sreq[i] != NULL, "send with tag %d was taken", sends[i].tag);
  }
  int got[3] = {-1, -1, -1};
  CHECK_NCCL(net_wait(n, rreq, got));
  CHECK(got[0] == A && got[1] == B && got[2] == C, "sizes per buffer: %d %d %d", got[0], got[1],
        got[2]);
  CHECK(memcmp(dst[0], src, A) == 0 && memcmp(dst[1], src + A, B) == 0 &&
            memcmp(dst[2], src + A + B, C) == 0,
        "each buffer holds the send of its tag");
  for (int i = 0; i < 3; i++) {
    if (sreq[i] != NULL) {
      CHECK_NCCL(net_wait(n, sreq[i], NULL));
    }
  }
  CHECK_NCCL(n->ops->dereg_mr(n, p->send, smh));
  CHECK_NCCL(n->ops->dereg_mr(n, p->recv, rmh));
}
