/* Attacks on ncclSetEncryption's record layer (util/seal.c), each played as
 * an attacker on the wire would: a recorded stream replayed into a new
 * connection (into a responder, and into an initiator), a record with one
 * byte flipped received into a buffer holding a sentinel (recv, recvmsg and
 * the TCP transport's slot receive), a peer of another handshake version,
 * and data sent before the responder's nonce came. No timing is involved:
 * every step is driven by hand over socket pairs. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "seal_link.h"
#include "util/seal.h"
#include "util/seal_state.h"

#define KEY "0123456789abcdef0123456789abcdef-attack-key"
#define SENTINEL 0xa5

static unsigned char pattern(size_t i) {
  return (unsigned char)(1 + (i * 131 + (i >> 9)) % 200); /* never 0, never the sentinel */
}

static int all_sentinel(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != SENTINEL) {
      return 0;
    }
  }
  return 1;
}

/* A genuine exchange whose bytes the attacker records: the initiator sends
 * `len` bytes (several records), the responder answers "ok". Returns the
 * recordings of both directions. */
static void record_session(size_t len, struct tape* ab, struct tape* ba) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, KEY);
  shake_rec(&l, &ra, &rb, ab, ba);
  CHECK(ra == 0 && rb == 0, "the recorded handshake: %d %d", ra, rb);
  unsigned char* src = malloc(len);
  unsigned char* dst = malloc(len);
  for (size_t i = 0; i < len; i++) {
    src[i] = pattern(i);
  }
  size_t sent = 0, got = 0;
  while (got < len) {
    if (sent < len) {
      ssize_t n = tutti_seal_send(l.a, src + sent, len - sent);
      sent += n > 0 ? (size_t)n : 0;
    }
    relay_both(&l, ab, ba);
    ssize_t n = tutti_seal_recv(l.b, dst + got, len - got);
    if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
      CHECK(0, "the recorded session's receive: %zd %s", n, strerror(errno));
      break;
    }
    got += n > 0 ? (size_t)n : 0;
  }
  CHECK(got == len && memcmp(src, dst, len) == 0, "the recorded session delivered its bytes");
  send_all_rec(&l, l.b, "ok", 2, ab, ba);
  char ok[2];
  CHECK(tutti_seal_recv(l.a, ok, 2) == 2 && memcmp(ok, "ok", 2) == 0, "the recorded answer");
  free(src);
  free(dst);
  close_link(&l);
}

/* Plays `t` into a fresh end (`initiator` or responder) holding the same
 * key, as the attacker who connects to it (or is connected to) would, and
 * reads as long as anything moves. Returns the error the end gives; *n the
 * bytes it delivered; buf keeps what was delivered. */
static int replay_into(const struct tape* t, int initiator, unsigned char* buf, size_t len,
                       size_t* n, char* why, size_t why_len) {
  int q[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, q) == 0, "socketpair");
  const int victim = q[0], attacker = q[1];
  link_attach(victim, KEY, initiator);
  size_t off = 0;
  int err = 0;
  *n = 0;
  for (int rounds = 0; rounds < 10000 && err == 0; rounds++) {
    ssize_t w = off < t->len ? send(attacker, t->bytes + off, t->len - off, MSG_DONTWAIT) : 0;
    off += w > 0 ? (size_t)w : 0;
    char sink[4096]; /* the victim's own hello and confirmation go nowhere */
    while (recv(attacker, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    ssize_t r = tutti_seal_recv(victim, buf + *n, len - *n);
    if (r > 0) {
      *n += (size_t)r;
    } else if (r == 0 || errno != EAGAIN) {
      err = r == 0 ? -1 : errno;
    } else if (off == t->len && w <= 0) {
      break; /* all played, nothing more to read */
    }
  }
  snprintf(why, why_len, "%s", err > 0 ? tutti_seal_strerror(victim, err) : "(no error)");
  tutti_seal_close(victim);
  close(attacker);
  return err;
}

/* A recorded initiator->responder stream replayed into a new responder
 * with the same key: its plaintext must not be delivered. */
static void replay_streams(void) {
  const size_t len = TUTTI_SEAL_RECORD + 5000; /* two records */
  struct tape ab = {0}, ba = {0};
  record_session(len, &ab, &ba);
  CHECK(ab.len > len && ba.len > 0, "recorded %zu and %zu bytes", ab.len, ba.len);
  unsigned char* buf = malloc(len);
  memset(buf, SENTINEL, len);
  char why[512];
  size_t n = 0;
  int err = replay_into(&ab, 0, buf, len, &n, why, sizeof why);
  CHECK(err == EBADMSG && strstr(why, "replayed") != NULL,
        "the responder refuses the replayed stream: %d %s", err, why);
  CHECK(n == 0 && all_sentinel(buf, len), "the responder delivered %zu replayed bytes", n);

  /* The other way: the responder's recording played to a new initiator. */
  memset(buf, SENTINEL, len);
  err = replay_into(&ba, 1, buf, len, &n, why, sizeof why);
  CHECK(err == EBADMSG && strstr(why, "replayed") != NULL,
        "the initiator refuses the replayed stream: %d %s", err, why);
  CHECK(n == 0 && all_sentinel(buf, len), "the initiator delivered %zu replayed bytes", n);
  free(ab.bytes);
  free(ba.bytes);
  free(buf);
}

enum how { BY_RECV, BY_RECVV, BY_SLOT };

/* One record of `len` bytes with byte `flip` (counted from the record's
 * start, header included) flipped on the wire, received by `how` into a
 * buffer holding the sentinel. */
static void flipped(size_t len, long flip, enum how how) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, KEY);
  shake(&l, &ra, &rb);
  CHECK(ra == 0 && rb == 0, "handshake: %d %d", ra, rb);
  unsigned char* src = malloc(len);
  for (size_t i = 0; i < len; i++) {
    src[i] = pattern(i);
  }
  const size_t room = len + 64;
  unsigned char* buf = malloc(room);
  memset(buf, SENTINEL, room);
  size_t moved = 0;
  ssize_t s = -1, n = -1;
  int err = EAGAIN;
  for (int i = 0; i < 100000 && err == EAGAIN; i++) {
    if (s < 0) { /* sealed once; retried with the same bytes until all is out */
      s = tutti_seal_send(l.a, src, len);
      if (s < 0 && errno != EAGAIN) {
        CHECK(0, "send: %s", strerror(errno));
        break;
      }
    }
    moved += relay_rec(l.x, l.y, flip - (long)moved, NULL);
    if (how == BY_RECVV) {
      struct iovec v[2] = {{buf, room / 3}, {buf + room / 3, room - room / 3}};
      n = tutti_seal_recvv(l.b, v, 2);
    } else if (how == BY_SLOT) {
      n = tutti_seal_recv_slot(l.b, buf, room);
    } else {
      n = tutti_seal_recv(l.b, buf, room);
    }
    err = n < 0 ? errno : 0;
  }
  const char* why = tutti_seal_strerror(l.b, err);
  size_t left = 0; /* bytes neither the sentinel nor wiped */
  for (size_t i = 0; i < room; i++) {
    left += buf[i] != 0 && buf[i] != SENTINEL;
  }
  if (flip < 0) { /* untouched: the same receive delivers the record */
    CHECK(n == (ssize_t)len && memcmp(buf, src, len) == 0 && all_sentinel(buf + len, room - len),
          "%zu bytes untouched, receive %d: %zd %s", len, how, n, why);
  } else {
    CHECK(n < 0 && err == EBADMSG && strstr(why, "altered") != NULL,
          "%zu bytes, byte %ld flipped, receive %d: %zd %d %s", len, flip, how, n, err, why);
    /* The slot receive opens in place, then wipes: none of the forged
     * plaintext stays. Every other receive leaves the buffer as it was. */
    CHECK(how == BY_SLOT ? left == 0 : all_sentinel(buf, room),
          "%zu bytes, byte %ld flipped, receive %d: the buffer changed (%zu bytes of the forged "
          "record in it)",
          len, flip, how, left);
  }
  free(src);
  free(buf);
  close_link(&l);
}

static void flipped_records(void) {
  const size_t sizes[] = {1, 4096, 200000};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    const size_t len = sizes[k];
    /* untouched, body start, middle, tag */
    const long at[] = {-1, 4, 4 + (long)len / 2, 4 + (long)len + 3};
    for (int i = 0; i < 4; i++) {
      flipped(len, at[i], BY_RECV);
      flipped(len, at[i], BY_RECVV);
      flipped(len, at[i], BY_SLOT);
    }
  }
}

/* A peer of another build: its hello has another version; it is named. */
static void other_version(void) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, NULL);
  unsigned char hello[HELLO + CONFIRM];
  memset(hello, 0x11, sizeof hello);
  memcpy(hello, "tuttiEN1", MAGIC_LEN);
  CHECK(send(l.b, hello, sizeof hello, 0) == (ssize_t)sizeof hello, "an old build's hello");
  shake(&l, &ra, &rb);
  const char* why = tutti_seal_strerror(l.a, ra);
  CHECK(ra == EPROTO && strstr(why, "version '1'") != NULL && strstr(why, "same tutti build"),
        "another handshake version is named: %d %s", ra, why);
  close_link(&l);
}

/* The initiator sends no record before the responder's nonce came (only
 * then is its key bound to this connection), and a poll for that send
 * waits for the peer, not for room. */
static void waits_for_nonce(void) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, NULL); /* b's process has not accepted yet */
  relay_all(&l);
  ssize_t n = tutti_seal_send(l.a, "early", 5);
  CHECK(n < 0 && errno == EAGAIN, "a send before the responder's hello waits: %zd %s", n,
        strerror(errno));
  CHECK(tutti_seal_events(l.a, POLLOUT) == POLLIN, "its poll waits for POLLIN");
  relay_all(&l);
  unsigned char wire[256];
  n = recv(l.b, wire, sizeof wire, MSG_DONTWAIT | MSG_PEEK);
  CHECK(n == HELLO, "only the hello went out (%zd bytes)", n);
  link_attach(l.b, KEY, 0); /* the responder accepts now */
  shake(&l, &ra, &rb);
  CHECK(ra == 0 && rb == 0, "then the handshake completes: %d %d", ra, rb);
  CHECK(tutti_seal_events(l.a, POLLOUT) == POLLOUT, "and sends wait for room again");
  send_all(&l, l.a, "early", 5);
  char got[5];
  CHECK(tutti_seal_recv(l.b, got, 5) == 5 && memcmp(got, "early", 5) == 0, "the data follows");
  close_link(&l);
}

int main(void) {
  replay_streams();
  flipped_records();
  other_version();
  waits_for_nonce();
  return test_summary("seal_attack");
}
