/* The bootstrap ring: what arrives on a rank's listener while it waits for
 * its predecessor (a preamble and a RING frame, then a MAC answering the
 * rank's proof: pending_step; with bit 7 of byte 3, a valid MAC follows a
 * hello that was whole), and what
 * arrives from the predecessor during all-gathers and barriers (frame
 * headers, then blocks).
 *
 * The target compiles ring.c itself. Input: byte 0 picks the part (even:
 * the listener's handshake, in pieces of byte 3 % 16 + 1 bytes; odd: an
 * all-gather of byte 2 % 64 bytes per rank then a barrier), byte 1 the rank
 * and ring size; the rest is what the peer sends. */
#include "bootstrap/ring.c"

#include "fuzz.h"

static const unsigned char fuzz_secret[TUTTI_BS_SECRET] = {
    0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f};

static void init_rank(struct tutti_bootstrap* b, uint8_t shape) {
  memset(b, 0, sizeof *b);
  b->nranks = 2 + shape % 7;
  b->rank = (shape >> 4) % b->nranks;
  b->timeout_s = 5;
  b->listen_fd = b->next_fd = b->prev_fd = -1;
  memcpy(b->secret, fuzz_secret, sizeof fuzz_secret);
  static union tutti_socket_addr addrs[8];
  for (int r = 0; r < b->nranks; r++) {
    memset(&addrs[r], 0, sizeof addrs[r]);
    addrs[r].sin.sin_family = AF_INET;
    tutti_socket_set_port(&addrs[r], 30000 + r);
  }
  b->addrs = addrs;
  snprintf(b->next_desc, sizeof b->next_desc, "rank %d at next", (b->rank + 1) % b->nranks);
  snprintf(b->prev_desc, sizeof b->prev_desc, "rank %d at prev",
           (b->rank - 1 + b->nranks) % b->nranks);
}

static void handshake(struct tutti_bootstrap* b, uint8_t piece, struct fuzz_in* in) {
  int fds[2];
  fuzz_pair(fds);
  struct pending p = {.fd = fds[0], .stage = PEND_HELLO};
  unsigned char mac[TUTTI_BS_MAC]; /* outlives the loop's step: it is sent from there */
  int st = 0;
  while (st == 0 && fuzz_left(in)) {
    size_t got;
    const uint8_t* bytes = fuzz_take(in, (size_t)(piece % 16 + 1), &got);
    if (p.stage == PEND_MAC && (piece & 0x80)) { /* a peer holding the secret answers */
      unsigned char packed[TUTTI_SOCKET_ADDR_WIRE];
      const struct tutti_bs_proof_of pf = proof_of(b, b->rank, p.in, packed);
      if (tutti_bs_answer(&pf, fuzz_secret, p.proof, mac) == 0) {
        bytes = mac;
        got = sizeof mac;
      }
    }
    fuzz_write(fds[1], bytes, got);
    st = pending_step(b, &p);
    FUZZ_ASSERT(p.got <= RING_HELLO_BYTES, "got %zu", p.got);
  }
  if (st == 1) {
    /* Accepted: it must be exactly a genuine hello from rank-1 (any nonce). */
    unsigned char want[RING_HELLO_BYTES];
    memcpy(want, p.in, TUTTI_BS_PREAMBLE);
    tutti_socket_put32(want + TUTTI_BS_PREAMBLE, TUTTI_BS_RING);
    tutti_socket_put32(want + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_RING_LEN);
    tutti_socket_put32(want + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER,
                       (uint32_t)((b->rank - 1 + b->nranks) % b->nranks));
    tutti_socket_put32(want + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + 4, (uint32_t)b->nranks);
    FUZZ_ASSERT(
        p.stage == PEND_MAC && p.got == TUTTI_BS_MAC && memcmp(p.in, want, sizeof want) == 0,
        "accepted something else than rank-1's hello");
  }
  close(fds[0]);
  close(fds[1]);
}

static void frames(struct tutti_bootstrap* b, uint8_t bytes_sel, struct fuzz_in* in) {
  int next[2], prev[2];
  fuzz_pair(next);
  fuzz_pair(prev);
  b->next_fd = next[0];
  b->prev_fd = prev[0];
  size_t got;
  const uint8_t* stream = fuzz_take(in, in->n, &got);
  fuzz_write(prev[1], stream, got);
  shutdown(prev[1], SHUT_WR); /* then end of file: nothing waits */
  size_t bytes = bytes_sel % 64;
  unsigned char* data = calloc((size_t)b->nranks, bytes + 1);
  ncclResult_t r = tutti_bootstrap_allgather(b, data, bytes);
  FUZZ_ASSERT(
      r == ncclSuccess || r == ncclRemoteError || r == ncclInvalidUsage || r == ncclSystemError,
      "all-gather result %d", (int)r);
  FUZZ_ASSERT((r == ncclSuccess) == !b->broken, "broken flag after %d", (int)r);
  ncclResult_t r2 = tutti_bootstrap_barrier(b);
  FUZZ_ASSERT(r != ncclSuccess ? r2 == ncclRemoteError : 1, "a broken ring stays broken");
  fuzz_drain(next[1]);
  free(data);
  close(next[0]);
  close(next[1]);
  close(prev[0]);
  close(prev[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct fuzz_in in = {data, size};
  uint8_t part = fuzz_u8(&in), shape = fuzz_u8(&in), bytes = fuzz_u8(&in), piece = fuzz_u8(&in);
  struct tutti_bootstrap b;
  init_rank(&b, shape);
  if (part % 2 == 0) {
    handshake(&b, piece, &in);
  } else {
    frames(&b, bytes, &in);
  }
  return 0;
}
