/* Two ends of the record layer (util/seal.c) on socket pairs with a relay
 * in the middle that can alter, record or hold back bytes, as a network
 * under an attacker's control would: shared by unit.seal and
 * unit.seal_attack. Header-only: each test is one file. */
#ifndef TUTTI_TEST_SEAL_LINK_H
#define TUTTI_TEST_SEAL_LINK_H

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"
#include "util/seal.h"

/* a <-> x  (relay)  y <-> b; a is the initiator, b the responder */
struct link {
  int a, x, y, b;
};

/* What a relay keeps of the bytes it moved (a recording of the wire). */
struct tape {
  unsigned char* bytes;
  size_t len, cap;
};

/* Attaches fd with `key` set for that moment only (NULL: plaintext). */
static inline void link_attach(int fd, const char* key, int initiator) {
  CHECK_NCCL(tutti_seal_set_key(key));
  if (key != NULL) {
    tutti_seal_attach(fd, initiator);
  }
  CHECK_NCCL(tutti_seal_set_key(NULL));
}

static inline void open_link(struct link* l, const char* key_a, const char* key_b) {
  int p[2], q[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, p) == 0, "socketpair");
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, q) == 0, "socketpair");
  l->a = p[0];
  l->x = p[1];
  l->y = q[0];
  l->b = q[1];
  link_attach(l->a, key_a, 1);
  link_attach(l->b, key_b, 0);
}

static inline void close_link(struct link* l) {
  tutti_seal_close(l->a);
  tutti_seal_close(l->b);
  close(l->x);
  close(l->y);
}

/* Moves what waits at `from` to `to`; flips byte `flip` of it (-1: none);
 * appends what moved to `rec` (NULL: nothing kept). */
static inline size_t relay_rec(int from, int to, long flip, struct tape* rec) {
  unsigned char buf[1 << 16];
  ssize_t n = recv(from, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK);
  if (n <= 0) {
    return 0;
  }
  if (flip >= 0 && flip < n) {
    buf[flip] ^= 0x20;
  }
  ssize_t m = send(to, buf, (size_t)n, MSG_DONTWAIT); /* what fits; the rest waits */
  if (m <= 0) {
    return 0;
  }
  if (rec != NULL) {
    if (rec->len + (size_t)m > rec->cap) {
      rec->cap = 2 * (rec->len + (size_t)m);
      rec->bytes = realloc(rec->bytes, rec->cap);
      CHECK(rec->bytes != NULL, "tape memory");
    }
    memcpy(rec->bytes + rec->len, buf, (size_t)m);
    rec->len += (size_t)m;
  }
  CHECK(recv(from, buf, (size_t)m, MSG_DONTWAIT) == m, "relay consume");
  return (size_t)m;
}

/* Relays both ways until nothing moves, recording a->b into ab and b->a
 * into ba (either NULL). */
static inline void relay_both(struct link* l, struct tape* ab, struct tape* ba) {
  while (relay_rec(l->x, l->y, -1, ab) + relay_rec(l->y, l->x, -1, ba) > 0) {
  }
}

static inline void relay_all(struct link* l) {
  relay_both(l, NULL, NULL);
}

/* Drives both ends' handshakes until both are done or one failed. */
static inline void shake_rec(struct link* l, int* ra, int* rb, struct tape* ab, struct tape* ba) {
  for (int i = 0; i < 100; i++) {
    *ra = tutti_seal_handshake(l->a);
    *rb = tutti_seal_handshake(l->b);
    relay_both(l, ab, ba);
    if ((*ra != EAGAIN && *rb != EAGAIN) || (*ra != 0 && *ra != EAGAIN) ||
        (*rb != 0 && *rb != EAGAIN)) {
      *ra = tutti_seal_handshake(l->a);
      *rb = tutti_seal_handshake(l->b);
      return;
    }
  }
}

static inline void shake(struct link* l, int* ra, int* rb) {
  shake_rec(l, ra, rb, NULL, NULL);
}

/* Sends all of buf from fd, relaying (and recording) as it goes. */
static inline void send_all_rec(struct link* l, int fd, const void* buf, size_t len,
                                struct tape* ab, struct tape* ba) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = tutti_seal_send(fd, (const char*)buf + off, len - off);
    if (n > 0) {
      off += (size_t)n;
    } else {
      CHECK(n < 0 && errno == EAGAIN, "send: %s", strerror(errno));
      if (n >= 0 || errno != EAGAIN) {
        return;
      }
    }
    relay_both(l, ab, ba);
  }
  relay_both(l, ab, ba);
}

static inline void send_all(struct link* l, int fd, const void* buf, size_t len) {
  send_all_rec(l, fd, buf, len, NULL, NULL);
}

#endif
