/* What util/seal.c (the records) and util/seal_handshake.c (the keys)
 * share of a connection: private to the two. */
#ifndef TUTTI_UTIL_SEAL_STATE_H
#define TUTTI_UTIL_SEAL_STATE_H

#include <pthread.h>
#include <stddef.h>

#include "util/crypto.h"
#include "util/socket.h"

/* The hello: "tuttiEN" and the handshake's version (bumped whenever the
 * wire changes, so that mixed builds fail with a sentence), the sender's
 * random nonce, and a check value proving its key (HKDF of the key over
 * that nonce), which tells a wrong key from a replayed handshake. */
#define MAGIC "tuttiEN2"
#define MAGIC_LEN 8
#define NONCE 32
#define KEY_CHECK 16
#define HELLO (MAGIC_LEN + NONCE + KEY_CHECK)
#define OVERHEAD (4 + TUTTI_CRYPTO_TAG)
#define CONFIRM_TEXT "tutti key confirm" /* 16 bytes and its NUL */
#define CONFIRM_LEN 16
#define CONFIRM (4 + CONFIRM_LEN + TUTTI_CRYPTO_TAG)
#define KEYED 1     /* records may be sent */
#define CONFIRMED 2 /* records may be read */

struct seal {
  pthread_mutex_t lock; /* the handshake only: afterwards each direction has one user */
  int initiator, open, err;
  char* psk;                           /* until both keys are derived, then wiped and freed */
  char peer[TUTTI_SOCKET_ADDR_STRLEN]; /* kept: a reset connection has no peer name */
  char why[384];
  unsigned char nonce[2][NONCE]; /* the initiator's, the responder's */
  unsigned char hs_out[HELLO + CONFIRM], hs_in[HELLO + CONFIRM];
  size_t hs_out_len, hs_out_off, hs_in_got;
  struct tutti_crypto_dir tx, rx;
  unsigned char* out; /* a sealed record on its way out */
  /* One record in: its ciphertext, then the plaintext it opens to (in
   * place), which the caller gets only once the tag authenticated. */
  unsigned char* in;
  size_t out_len, out_off, out_plain, in_got, plain_off, plain_len;
};

/* Sets s's error (the first one stays) and its sentence, naming the peer;
 * returns the error that holds. */
int tutti_seal_fail(struct seal* s, int fd, int err, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fills s's hello (its own nonce must be set); 0, or -1 when OpenSSL failed. */
int tutti_seal_hello(struct seal* s);
/* 0 when s may be used for `need` (KEYED, CONFIRMED), else an errno value
 * (EAGAIN: the handshake goes on); never waits. */
int tutti_seal_ready(struct seal* s, int fd, int need);
/* Whether s waits for the peer's hello with nothing of its own to send. */
int tutti_seal_waits_peer(struct seal* s);

#endif
