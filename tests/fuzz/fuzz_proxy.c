/* The TCP transport's data stream as its proxy decodes it: records
 * {u32 size}{size bytes} into the peer's receive slots, and the goodbye
 * {0xFFFFFFFF}{u32 reason}, over several sockets, in any pieces, with the
 * connection closing at any point.
 *
 * The target compiles tcp_proxy.c itself (tcp_wire.c, tcp_direct.c and
 * proxy_peer.c come from the library) and turns the proxy's crank (pump) on
 * the calling thread, acting as the rank that reads the slots (whose
 * receives also read the sockets themselves, tcp_direct.c). Input: byte 0
 * sockets per peer (1 to 4); then a script:
 *   0 s n bytes   raw bytes on socket s     1 s hi lo   a record of that size
 *   2 s r         a goodbye with reason r   3 s         close socket s
 *   4             the rank posts a slot to send
 *   5             the proxy leaves (sends its goodbyes), then the run ends */
#include "transport/tcp_proxy.c"

#include "fuzz.h"

#define QUEUE_BYTES (8 * 4096) /* 8 slots of 4096 bytes */

struct world {
  struct tutti_tcp_proxy px;
  struct tutti_tcp_peer p;
  struct tutti_tcp_peer* served[1];
  struct tutti_peer_info peers[2];
  struct tutti_doorbell bell;
  int far[4];
  int nsocks;
  uint64_t delivered;
};

static void check(const struct world* w) {
  const struct tutti_tcp_peer* p = &w->p;
  FUZZ_ASSERT(p->r_head <= w->delivered + p->base.nslots, "head %llu, %llu read",
              (unsigned long long)p->r_head, (unsigned long long)w->delivered);
  for (int s = 0; s < p->nsocks; s++) {
    const struct tutti_tcp_sock* k = &p->socks[s];
    FUZZ_ASSERT(
        k->dead || k->roff < 4 || k->rsize == TUTTI_TCP_BYE || k->rsize <= p->base.slot_bytes,
        "record of %u bytes accepted", k->rsize);
    FUZZ_ASSERT(k->rsize != TUTTI_TCP_BYE || k->roff <= 8, "goodbye read past its end");
  }
  uint32_t lost = __atomic_load_n(&p->base.bell.lost, __ATOMIC_RELAXED);
  FUZZ_ASSERT(lost == 0 || p->base.gone || p->bye_reason != 0, "lost %x without a cause", lost);
}

/* What the proxy thread and the rank would do next, until nothing moves. */
static void settle(struct world* w, int leaving) {
  const struct tutti_conn_ops* ops = w->p.base.recv_end.base.ops;
  for (int round = 0; round < 64; round++) {
    int moved = pump(&w->px.base, leaving);
    size_t bytes;
    const unsigned char* slot;
    while (!leaving && (slot = ops->recv_begin(&w->p.base.recv_end.base, &bytes)) != NULL) {
      FUZZ_ASSERT(bytes <= w->p.base.slot_bytes, "a slot of %zu bytes", bytes);
      volatile unsigned char sink = bytes > 0 ? slot[0] ^ slot[bytes - 1] : 0;
      (void)sink;
      ops->recv_end(&w->p.base.recv_end.base);
      w->delivered++;
      moved = 1;
    }
    for (int s = 0; s < w->nsocks; s++) {
      if (w->far[s] >= 0) {
        fuzz_drain(w->far[s]);
      }
    }
    check(w);
    if (!moved) {
      break;
    }
  }
}

static void step(struct world* w, struct fuzz_in* in) {
  uint8_t op = fuzz_u8(in) % 6;
  int s = fuzz_u8(in) % w->nsocks;
  unsigned char hdr[8];
  switch (op) {
    case 0: {
      size_t got;
      const uint8_t* bytes = fuzz_take(in, fuzz_u8(in), &got);
      if (w->far[s] >= 0) {
        fuzz_write(w->far[s], bytes, got);
      }
      break;
    }
    case 1: {
      uint32_t size = ((uint32_t)fuzz_u8(in) << 8 | fuzz_u8(in)) % 4200;
      unsigned char* rec = calloc(1, 4 + size);
      tutti_socket_put32(rec, size);
      if (w->far[s] >= 0) {
        fuzz_write(w->far[s], rec, 4 + size);
      }
      free(rec);
      break;
    }
    case 2:
      tutti_socket_put32(hdr, TUTTI_TCP_BYE);
      tutti_socket_put32(hdr + 4, fuzz_u32(in));
      if (w->far[s] >= 0) {
        fuzz_write(w->far[s], hdr, 8);
      }
      break;
    case 3:
      if (w->far[s] >= 0) {
        close(w->far[s]);
        w->far[s] = -1;
      }
      break;
    case 4: {
      const struct tutti_conn_ops* ops = w->p.base.send_end.base.ops;
      void* slot = ops->send_begin(&w->p.base.send_end.base);
      if (slot != NULL) {
        size_t n = fuzz_u8(in);
        memset(slot, 0x5a, n);
        ops->send_end(&w->p.base.send_end.base, n);
      }
      break;
    }
    default:
      break;
  }
  settle(w, op == 5);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static struct world w;
  struct fuzz_in in = {data, size};
  memset(&w, 0, sizeof w);
  w.nsocks = 1 + fuzz_u8(&in) % 4;
  int near[4];
  for (int s = 0; s < w.nsocks; s++) {
    int fds[2];
    fuzz_pair(fds);
    near[s] = fds[0];
    w.far[s] = fds[1];
  }
  for (int r = 0; r < 2; r++) {
    w.peers[r] = (struct tutti_peer_info){.rank = r, .pid = 100 + r, .host_hash = (uint64_t)r};
    snprintf(w.peers[r].hostname, sizeof w.peers[r].hostname, "host%d", r);
  }
  FUZZ_ASSERT(tutti_tcp_peer_init(&w.p, 1, QUEUE_BYTES, w.nsocks, near) == ncclSuccess,
              "peer init");
  w.served[0] = &w.p;
  w.p.base.px = &w.px.base;
  w.px.base.rank = 0;
  w.px.base.evfd = -1;
  w.px.base.peers = w.peers;
  w.px.base.rank_bell = &w.bell;
  w.px.served = w.served;
  w.px.nserved = 1;
  w.px.discard = malloc(TUTTI_TCP_DISCARD);
  int steps = 0;
  for (; fuzz_left(&in) && steps < 128; steps++) {
    const uint8_t* at = in.p;
    step(&w, &in);
    if (at[0] % 6 == 5) {
      break;
    }
  }
  tutti_tcp_peer_free(&w.p);
  for (int s = 0; s < w.nsocks; s++) {
    if (w.far[s] >= 0) {
      close(w.far[s]);
    }
  }
  free(w.px.discard);
  return 0;
}
