/* The proof every connection of a job gives before anything else is read:
 * a challenge-response keyed by the job's 16-byte secret, which itself never
 * travels (docs/design.md, "Bootstrap", *Proving the secret*). The bootstrap
 * root, the bootstrap ring and the TCP transport each run it with a label of
 * their own:
 *
 *   connector -> listener   its hello: a magic, a fresh nonce, what it asks
 *   listener  -> connector  a fresh nonce, MAC(key, label, LISTENER, ...)
 *   connector -> listener   MAC(key, label, CONNECTOR, ...)
 *
 * Each MAC is HMAC-SHA256 over the label, the direction, the listener's
 * address as both know it (the one the connector dialled), the connector's
 * whole hello (its nonce included) and the listener's nonce. The listener
 * proves first, so a program squatting on a dead rank's port gets a nonce
 * and nothing it could check a guess against. */
#ifndef TUTTI_UTIL_HELLO_H
#define TUTTI_UTIL_HELLO_H

#include <stddef.h>

#include "util/sha256.h"
#include "util/socket.h"

#define TUTTI_HELLO_NONCE 16
#define TUTTI_HELLO_MAC TUTTI_SHA256_LEN

/* Which side a MAC proves: a MAC of one is no proof of the other. */
enum tutti_hello_dir { TUTTI_HELLO_LISTENER = 1, TUTTI_HELLO_CONNECTOR = 2 };

/* Labels: a MAC made for one protocol proves nothing to another. */
#define TUTTI_HELLO_ROOT "tutti bootstrap root v2"
#define TUTTI_HELLO_RING "tutti bootstrap ring v2"
#define TUTTI_HELLO_TCP "tutti tcp transport v2"

/* What both ends hash: everything but the key and the direction. */
struct tutti_hello_transcript {
  const char* label;
  const unsigned char* addr; /* TUTTI_SOCKET_ADDR_WIRE bytes: the listener's, as dialled */
  const unsigned char* hello;
  size_t hello_len;           /* the connector's hello, its nonce included */
  const unsigned char* nonce; /* the listener's, TUTTI_HELLO_NONCE bytes */
};

/* A fresh random nonce: 0, or -1 when getrandom fails. */
int tutti_hello_nonce(unsigned char out[TUTTI_HELLO_NONCE]);
void tutti_hello_mac(const unsigned char key[16], enum tutti_hello_dir dir,
                     const struct tutti_hello_transcript* t, unsigned char out[TUTTI_HELLO_MAC]);
/* 0 when `mac` is dir's MAC of t under key, compared in constant time. */
int tutti_hello_check(const unsigned char key[16], enum tutti_hello_dir dir,
                      const struct tutti_hello_transcript* t, const unsigned char* mac);

#endif
