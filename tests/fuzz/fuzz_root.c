/* The bootstrap root's connection handling: what any process that can reach
 * the root's port sends it (a preamble with a nonce, a HELLO frame, then a
 * MAC answering the root's proof), over several connections at once, in
 * any pieces, with the clock moving.
 *
 * The target compiles root.c itself, so that it drives the root's own
 * functions (serve, on_hello, tick) without its thread; each connection is a
 * socket pair whose far end the input writes into. The input is a script:
 *   0 open a connection           1 c n bytes   send n raw bytes on c
 *   2 c r n t addr   send a HELLO (rank r, nranks n) and answer the root's
 *                    proof with the job's secret (bit 7 of addr's kind:
 *                    the learned token, if any; bit 6: a wrong MAC)
 *   3 c  half-close c             4 d   advance the clock d x 50 ms
 *   5 flush the replies and check they are well formed
 *   6 c  close c                  7 serve every connection */
#include "bootstrap/root.c"

#include "fuzz.h"

#define LINKS 16

static const unsigned char fuzz_secret[TUTTI_BS_SECRET] = {
    0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f};

struct link {
  int far;        /* our end, -1 once closed */
  struct conn* c; /* the root's connection, NULL once the root dropped it */
  int proved;     /* the root's proof was read off far */
  unsigned char proof[TUTTI_BS_PROOF];
};

struct world {
  struct root* r;
  struct link links[LINKS];
  int nlinks;
  double now;
  int done;
};

static int index_of(const struct root* r, const struct conn* c) {
  for (int i = 0; i < r->nconns; i++) {
    if (r->conns[i] == c) {
      return i;
    }
  }
  return -1;
}

/* Forgets connections the root dropped (before anything can reuse their memory). */
static void sync_links(struct world* w) {
  for (int l = 0; l < w->nlinks; l++) {
    if (w->links[l].c != NULL && index_of(w->r, w->links[l].c) < 0) {
      w->links[l].c = NULL;
    }
  }
}

static void check_invariants(const struct root* r) {
  FUZZ_ASSERT(r->nranks == -1 || (r->nranks >= 1 && r->nranks <= TUTTI_BS_MAX_RANKS), "nranks %d",
              r->nranks);
  FUZZ_ASSERT(r->pub.joined >= 0 && r->pub.joined <= (r->nranks > 0 ? r->nranks : 0),
              "joined %d of %d", r->pub.joined, r->nranks);
  FUZZ_ASSERT(!(r->complete && r->failed), "complete and failed");
  FUZZ_ASSERT(r->nconns >= 0 && r->nconns <= r->cap, "nconns %d cap %d", r->nconns, r->cap);
  int joined = 0;
  for (int i = 0; i < r->nconns; i++) {
    const struct conn* c = r->conns[i];
    FUZZ_ASSERT(c->got <= HELLO_BYTES, "got %zu", c->got);
    FUZZ_ASSERT(c->state != CONN_REPLY || (c->out != NULL && c->out_off <= c->out_len),
                "reply state");
    if (c->state == CONN_JOINED) {
      FUZZ_ASSERT(c->rank >= 0 && c->rank < r->nranks && r->present[c->rank], "joined rank %d",
                  c->rank);
      joined++;
    }
  }
  FUZZ_ASSERT(r->failed || r->complete || joined == r->pub.joined,
              "%d joined connections, %d counted", joined, r->pub.joined);
}

static void serve_one(struct world* w, struct link* k, short revents) {
  int i = k->c != NULL ? index_of(w->r, k->c) : -1;
  if (i >= 0 && tutti_bs_root_serve(w->r, w->r->conns[i], revents, w->now) != 0) {
    tutti_bs_root_conn_drop(w->r, i);
  }
  sync_links(w);
  /* The root's proof comes first on every connection that sent a whole
   * hello: taken off here, so that check_reply sees only replies. */
  if (k->c != NULL && k->far >= 0 && !k->proved && k->c->state == CONN_MAC) {
    FUZZ_ASSERT(recv(k->far, k->proof, sizeof k->proof, MSG_DONTWAIT) == TUTTI_BS_PROOF,
                "the root's proof");
    k->proved = 1;
  }
}

static struct link* pick(struct world* w, struct fuzz_in* in) {
  uint8_t b = fuzz_u8(in);
  return w->nlinks == 0 ? NULL : &w->links[b % w->nlinks];
}

/* A reply the root sent must be a TABLE of nranks addresses or an ERROR. */
static void check_reply(const struct root* r, int fd) {
  unsigned char buf[8 + 4 + TUTTI_BS_MAX_ERROR + 64];
  ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK);
  if (n < TUTTI_BS_HEADER) {
    fuzz_drain(fd);
    return;
  }
  uint32_t type = tutti_socket_get32(buf), len = tutti_socket_get32(buf + 4);
  if (type == TUTTI_BS_TABLE && (r->flags & TUTTI_ID_FLAG_LEARN)) {
    /* Any round's table (a later round may have begun), with the token. */
    FUZZ_ASSERT(r->job != NULL && len > TUTTI_BS_SECRET &&
                    (len - TUTTI_BS_SECRET) % TUTTI_SOCKET_ADDR_WIRE == 0,
                "learning table of %u bytes", len);
  } else if (type == TUTTI_BS_TABLE) {
    FUZZ_ASSERT(r->complete && len == (uint32_t)r->nranks * TUTTI_SOCKET_ADDR_WIRE,
                "table of %u bytes for %d ranks", len, r->nranks);
  } else {
    FUZZ_ASSERT(type == TUTTI_BS_ERROR && len >= 4 && len <= 4 + TUTTI_BS_MAX_ERROR,
                "reply type %u len %u", type, len);
    uint32_t code = tutti_socket_get32(buf + 8);
    FUZZ_ASSERT(code > ncclSuccess && code < ncclNumResults, "error code %u", code);
  }
  fuzz_drain(fd);
}

static void hello(struct world* w, struct link* k, struct fuzz_in* in) {
  unsigned char m[HELLO_BYTES];
  int8_t rank = (int8_t)fuzz_u8(in), nranks = (int8_t)fuzz_u8(in);
  uint8_t t = fuzz_u8(in), kind = fuzz_u8(in);
  /* A learning root's job proves its token; the id's secret is then an intruder's. */
  const unsigned char* key = w->r->job != NULL && (kind & 0x80) ? w->r->job->token : fuzz_secret;
  memcpy(m, "tuttiBS2", 8);
  memset(m + 8, kind, TUTTI_HELLO_NONCE);
  tutti_socket_put32(m + TUTTI_BS_PREAMBLE, TUTTI_BS_HELLO);
  tutti_socket_put32(m + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_HELLO_LEN);
  unsigned char* p = m + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  tutti_socket_put32(p, (uint32_t)(int32_t)rank);
  tutti_socket_put32(p + 4, (uint32_t)(int32_t)nranks);
  tutti_socket_put32(p + 8, (uint32_t)t * 1000u);
  tutti_socket_put32(p + 12, (uint32_t)t * 900u);
  union tutti_socket_addr a;
  memset(&a, 0, sizeof a);
  if (kind & 1) {
    a.sin6.sin6_family = AF_INET6;
    a.sin6.sin6_addr.s6_addr[15] = 1;
  } else {
    a.sin.sin_family = AF_INET;
    a.sin.sin_addr.s_addr = htonl(0x7f000001u);
  }
  tutti_socket_set_port(&a, 20000 + rank);
  tutti_socket_addr_pack(&a, p + 16);
  if (kind & 2) {
    p[16] = kind; /* a damaged address */
  }
  fuzz_write(k->far, m, sizeof m);
  serve_one(w, k, POLLIN);
  if (k->c != NULL && k->proved && k->c->state == CONN_MAC && k->far >= 0) {
    unsigned char mac[TUTTI_BS_MAC];
    const struct tutti_bs_proof_of pf = proof_of(w->r, k->c);
    if (tutti_bs_answer(&pf, key, k->proof, mac) != 0 || (kind & 0x40)) {
      memset(mac, kind, sizeof mac); /* a stranger's guess */
    }
    fuzz_write(k->far, mac, sizeof mac);
    serve_one(w, k, POLLIN);
  }
}

static void step(struct world* w, struct fuzz_in* in) {
  struct root* r = w->r;
  struct link* k;
  switch (fuzz_u8(in) % 8) {
    case 0: {
      if (w->nlinks == LINKS || (r->complete && r->lfd < 0 && !(r->flags & TUTTI_ID_FLAG_LEARN))) {
        break; /* complete() closed the listener: nobody else connects */
      }
      int fds[2];
      fuzz_pair(fds);
      union tutti_socket_addr peer;
      memset(&peer, 0, sizeof peer);
      peer.sin.sin_family = AF_INET;
      if (tutti_bs_root_conn_add(r, fds[0], &peer, w->now) != 0) {
        close(fds[0]);
        close(fds[1]);
        break;
      }
      w->links[w->nlinks++] = (struct link){fds[1], r->conns[r->nconns - 1], 0, {0}};
      break;
    }
    case 1: {
      k = pick(w, in);
      size_t want = fuzz_u8(in), got;
      const uint8_t* bytes = fuzz_take(in, want, &got);
      if (k != NULL && k->far >= 0) {
        fuzz_write(k->far, bytes, got);
        serve_one(w, k, POLLIN);
      }
      break;
    }
    case 2:
      k = pick(w, in);
      if (k != NULL && k->far >= 0) {
        hello(w, k, in);
      }
      break;
    case 3:
      k = pick(w, in);
      if (k != NULL && k->far >= 0) {
        shutdown(k->far, SHUT_WR);
        serve_one(w, k, POLLIN | POLLHUP);
      }
      break;
    case 4:
      w->now += fuzz_u8(in) * 0.05;
      w->done = tutti_bs_root_tick(r, w->now);
      sync_links(w);
      break;
    case 5:
      for (int l = 0; l < w->nlinks; l++) {
        k = &w->links[l];
        for (int tries = 0; tries < 4 && k->c != NULL && k->c->state == CONN_REPLY; tries++) {
          serve_one(w, k, POLLOUT);
        }
        if (k->far >= 0) {
          check_reply(r, k->far);
        }
      }
      break;
    case 6:
      k = pick(w, in);
      if (k != NULL && k->far >= 0) {
        close(k->far);
        k->far = -1;
        serve_one(w, k, POLLIN | POLLHUP);
      }
      break;
    default:
      for (int l = 0; l < w->nlinks; l++) {
        serve_one(w, &w->links[l], POLLIN);
      }
      break;
  }
  check_invariants(r);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static struct world w;
  memset(&w, 0, sizeof w);
  struct root* r = calloc(1, sizeof *r);
  r->lfd = -1;
  r->life_s = 30;
  w.now = 1000;
  r->deadline = w.now + r->life_s;
  r->job_deadline = 1e300;
  r->nranks = -1;
  memcpy(r->pub.secret, fuzz_secret, sizeof fuzz_secret);
  memcpy(r->derived, fuzz_secret, sizeof fuzz_secret);
  /* Odd-sized inputs: a job with no identity, whose root learns a token,
   * stays, starts new rounds and turns intruders away. */
  r->flags = (size & 1) ? TUTTI_ID_FLAG_LEARN : 0;
  snprintf(r->where, sizeof r->where, "fuzz-root");
  r->pfd = malloc(sizeof *r->pfd);
  w.r = r;
  struct fuzz_in in = {data, size};
  for (int steps = 0; fuzz_left(&in) && !w.done && steps < 256; steps++) {
    step(&w, &in);
  }
  while (r->nconns > 0) {
    tutti_bs_root_conn_drop(r, r->nconns - 1);
  }
  for (int l = 0; l < w.nlinks; l++) {
    if (w.links[l].far >= 0) {
      close(w.links[l].far);
    }
  }
  free(r->conns);
  free(r->pfd);
  free(r->present);
  free(r->table);
  free(r);
  return 0;
}
