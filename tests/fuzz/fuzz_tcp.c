/* The TCP transport's setup: the all-gathered records every rank publishes
 * (check_table), what strangers and peers send to a rank's TCP listener (a
 * 48-byte hello with a nonce: service, on_hello, bad_hello; then their MAC:
 * on_mac), and the proofs that come back on the connections a rank opened
 * (on_proof).
 *
 * The target compiles tcp_connect.c itself. Input: byte 0 the ring size, byte 1
 * the rank, byte 2 sockets per peer, byte 3 bit 0: the records come from
 * the input; then a script:
 *   0 a stranger connects             1 c n bytes   send n raw bytes on c
 *   2 c f t i   a genuine hello from rank f to rank t, socket i
 *   3 c   the proof (outgoing) or MAC (incoming) c expects   4 c   close c */
#include "transport/tcp_connect.c"

#include "fuzz.h"

#define LINKS 24

static const unsigned char fuzz_secret[16] = {0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87,
                                              0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f};
static const uint64_t fuzz_hash = 0x1122334455667788ull;

struct link {
  int near, far; /* near: the code's end, -1 once it dropped or kept it */
  int out, peer, idx;
};

struct world {
  struct tutti_tcp_setup su;
  struct link links[LINKS];
  int nlinks;
  int failed;
};

static int pend_index(const struct tutti_tcp_setup* su, int fd) {
  for (int i = 0; i < su->npend; i++) {
    if (su->pend[i].fd == fd) {
      return i;
    }
  }
  return -1;
}

static void sync_links(struct world* w) {
  for (int l = 0; l < w->nlinks; l++) {
    if (w->links[l].near >= 0 && pend_index(&w->su, w->links[l].near) < 0) {
      w->links[l].near = -1;
    }
  }
}

static void check(const struct world* w) {
  const struct tutti_tcp_setup* su = &w->su;
  FUZZ_ASSERT(su->npend >= 0 && su->npend <= su->cap, "npend %d", su->npend);
  FUZZ_ASSERT(su->left >= 0, "left %d", su->left);
  int n = su->tc->nranks * su->nsocks, open = 0;
  for (int k = 0; k < n; k++) {
    if (su->fds[k] >= 0) {
      open++;
      int r = k / su->nsocks, s = k % su->nsocks;
      FUZZ_ASSERT(r != su->tc->rank && s < tutti_tcp_pair_socks(su, r), "socket %d of rank %d", s,
                  r);
      for (int j = 0; j < k; j++) {
        FUZZ_ASSERT(su->fds[j] != su->fds[k], "fd %d twice", su->fds[k]);
      }
    }
  }
  FUZZ_ASSERT(open + su->left == w->links[0].peer, "%d connected + %d left", open, su->left);
}

static void serve(struct world* w, struct link* k) {
  int i = k->near >= 0 ? pend_index(&w->su, k->near) : -1;
  if (i >= 0 && service(&w->su, i) != ncclSuccess) {
    FUZZ_ASSERT(k->out, "an incoming connection failed the setup");
    w->failed = 1;
  }
  sync_links(w);
}

static void link_add(struct world* w, int out, int peer, int idx) {
  if (w->nlinks == LINKS) {
    return;
  }
  int fds[2];
  fuzz_pair(fds);
  static const unsigned char hello[HELLO_LEN]; /* never sent: the script plays the wire */
  add_pending(&w->su, fds[0], out, peer, idx, hello);
  w->links[w->nlinks++] = (struct link){fds[0], fds[1], out, peer, idx};
  sync_links(w);
}

static struct link* pick(struct world* w, struct fuzz_in* in) {
  uint8_t b = fuzz_u8(in);
  return w->nlinks > 1 ? &w->links[1 + b % (w->nlinks - 1)] : NULL;
}

static void step(struct world* w, struct fuzz_in* in) {
  const struct tutti_transport_comm* tc = w->su.tc;
  struct link* k;
  unsigned char m[HELLO_LEN];
  switch (fuzz_u8(in) % 5) {
    case 0:
      link_add(w, 0, -1, -1);
      break;
    case 1: {
      k = pick(w, in);
      size_t got;
      const uint8_t* bytes = fuzz_take(in, fuzz_u8(in), &got);
      if (k != NULL && k->far >= 0) {
        fuzz_write(k->far, bytes, got);
        serve(w, k);
      }
      break;
    }
    case 2: {
      k = pick(w, in);
      int from = fuzz_u8(in) % tc->nranks, to = fuzz_u8(in) % 4 == 0 ? from : tc->rank;
      int idx = fuzz_u8(in) % 5;
      memcpy(m, "tuttiTC2", 8);
      memset(m + 8, 0x5a, TUTTI_HELLO_NONCE);
      put64(m + 24, fuzz_hash);
      tutti_socket_put32(m + 32, (uint32_t)from);
      tutti_socket_put32(m + 36, (uint32_t)to);
      tutti_socket_put32(m + 40, (uint32_t)idx);
      tutti_socket_put32(m + 44, (uint32_t)w->su.nsocks);
      if (k != NULL && k->far >= 0) {
        fuzz_write(k->far, m, HELLO_LEN);
        serve(w, k);
      }
      break;
    }
    case 3: {
      k = pick(w, in);
      const int i = k != NULL && k->near >= 0 ? pend_index(&w->su, k->near) : -1;
      if (i >= 0 && k->far >= 0 && (k->out || w->su.pend[i].proved)) {
        const struct tutti_tcp_pending* p = &w->su.pend[i];
        /* What a peer holding the secret sends: the listener's proof, the
         * connector's MAC, both of the hello and nonce the code holds. */
        memset(m, 0xa5, TUTTI_HELLO_NONCE);
        const struct tutti_hello_transcript t = transcript(&w->su, p, k->out ? m : p->nonce);
        if (k->out) {
          tutti_hello_mac(fuzz_secret, TUTTI_HELLO_LISTENER, &t, m + TUTTI_HELLO_NONCE);
          fuzz_write(k->far, m, PROOF_LEN);
        } else {
          tutti_hello_mac(fuzz_secret, TUTTI_HELLO_CONNECTOR, &t, m);
          fuzz_write(k->far, m, MAC_LEN);
        }
        serve(w, k);
      }
      break;
    }
    default:
      k = pick(w, in);
      if (k != NULL && k->far >= 0) {
        close(k->far);
        k->far = -1;
        serve(w, k);
      }
      break;
  }
  check(w);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static struct world w;
  static struct tutti_peer_info peers[8];
  static struct tutti_transport_comm tc;
  static unsigned char recs[8 * TUTTI_TCP_REC_LEN];
  struct fuzz_in in = {data, size};
  memset(&w, 0, sizeof w);
  memset(&tc, 0, sizeof tc);
  tc.nranks = 2 + fuzz_u8(&in) % 7;
  tc.rank = fuzz_u8(&in) % tc.nranks;
  tc.peers = peers;
  tc.secret = fuzz_secret;
  tc.comm_hash = fuzz_hash;
  const int nsocks = 1 + fuzz_u8(&in) % 4;
  const uint8_t flags = fuzz_u8(&in);
  for (int r = 0; r < tc.nranks; r++) {
    peers[r] = (struct tutti_peer_info){.rank = r, .host_hash = (uint64_t)r + 1};
    snprintf(peers[r].hostname, sizeof peers[r].hostname, "host%d", r);
    unsigned char* rec = recs + (size_t)r * TUTTI_TCP_REC_LEN;
    memset(rec, 0, TUTTI_TCP_REC_LEN);
    rec[0] = 1;
    rec[2] = 1;
    tutti_socket_put32(rec + 4, (uint32_t)nsocks);
    union tutti_socket_addr a;
    memset(&a, 0, sizeof a);
    a.sin.sin_family = AF_INET;
    tutti_socket_set_port(&a, 30000 + r);
    tutti_socket_addr_pack(&a, rec + 8);
    snprintf((char*)rec + 32, 16, "fz%d", r);
  }
  if (flags & 1) {
    size_t got;
    const uint8_t* bytes = fuzz_take(&in, (size_t)tc.nranks * TUTTI_TCP_REC_LEN, &got);
    memcpy(recs, bytes, got);
  }
  struct tutti_tcp_setup* su = &w.su;
  *su = (struct tutti_tcp_setup){&tc, recs, nsocks, NULL, NULL, 0, 0, 0};
  if (tutti_tcp_check_table(su) != ncclSuccess) {
    return 0;
  }
  for (int r = 0; r < tc.nranks; r++) {
    su->left += tutti_tcp_pair(&tc, recs, tc.rank, r) ? tutti_tcp_pair_socks(su, r) : 0;
  }
  su->cap = su->left + 32;
  su->pend = calloc((size_t)su->cap, sizeof *su->pend);
  su->fds = malloc((size_t)tc.nranks * (size_t)nsocks * sizeof *su->fds);
  for (int k = 0; k < tc.nranks * nsocks; k++) {
    su->fds[k] = -1;
  }
  /* links[0] is a placeholder that remembers how many sockets the setup needs. */
  w.links[0] = (struct link){-1, -1, 0, su->left, 0};
  w.nlinks = 1;
  for (int r = tc.rank + 1; r < tc.nranks; r++) {
    for (int s = 0; tutti_tcp_pair(&tc, recs, tc.rank, r) && s < tutti_tcp_pair_socks(su, r); s++) {
      link_add(&w, 1, r, s);
    }
  }
  for (int steps = 0; fuzz_left(&in) && !w.failed && su->left > 0 && steps < 256; steps++) {
    step(&w, &in);
  }
  for (int i = 0; i < su->npend; i++) {
    close(su->pend[i].fd);
  }
  for (int k = 0; k < tc.nranks * nsocks; k++) {
    if (su->fds[k] >= 0) {
      close(su->fds[k]);
    }
  }
  for (int l = 1; l < w.nlinks; l++) {
    if (w.links[l].far >= 0) {
      close(w.links[l].far);
    }
  }
  free(su->pend);
  free(su->fds);
  return 0;
}
