/* ncclSetEncryption's handshake (util/seal.h): hellos with random nonces,
 * the keys HKDF derives from them and the pre-shared key, and the
 * key-confirming first record each way. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "util/log.h"
#include "util/seal_state.h"

/* Keeps fd's peer address for the sentences, once it is connected
 * (formatted here: util/socket.c calls this file, not the other way). */
static void name_peer(struct seal* s, int fd) {
  struct sockaddr_storage a;
  socklen_t len = sizeof a;
  char host[INET6_ADDRSTRLEN];
  if (s->peer[0] != '\0' || getpeername(fd, (struct sockaddr*)&a, &len) != 0) {
    return;
  }
  if (a.ss_family == AF_INET) {
    const struct sockaddr_in* v4 = (const struct sockaddr_in*)&a;
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    snprintf(s->peer, sizeof s->peer, "%s:%d", host, ntohs(v4->sin_port));
  } else if (a.ss_family == AF_INET6) {
    const struct sockaddr_in6* v6 = (const struct sockaddr_in6*)&a;
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    snprintf(s->peer, sizeof s->peer, "[%s]:%d", host, ntohs(v6->sin6_port));
  }
}

int tutti_seal_fail(struct seal* s, int fd, int err, const char* fmt, ...) {
  char what[256];
  name_peer(s, fd);
  const char* peer = s->peer[0] != '\0' ? s->peer : "(unknown)";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&s->lock); /* recursive: the handshake holds it already */
  if (__atomic_load_n(&s->err, __ATOMIC_ACQUIRE) == 0) {
    snprintf(s->why, sizeof s->why, "encrypted connection with %s: %s", peer, what);
    __atomic_store_n(&s->err, err, __ATOMIC_RELEASE);
    WARN("%s", s->why);
  }
  pthread_mutex_unlock(&s->lock);
  return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
}

static int derive_dir(struct seal* s, struct tutti_crypto_dir* d, int both, const char* label,
                      int encrypt) {
  unsigned char salt[2 * NONCE], key_iv[TUTTI_CRYPTO_KEY + TUTTI_CRYPTO_IV];
  memcpy(salt, s->nonce[0], NONCE);
  memcpy(salt + NONCE, s->nonce[1], NONCE);
  int rc = tutti_crypto_hkdf((unsigned char*)s->psk, strlen(s->psk), salt, both ? 2 * NONCE : NONCE,
                             label, key_iv, sizeof key_iv) != 0 ||
           tutti_crypto_dir_init(d, key_iv, encrypt) != 0;
  tutti_crypto_wipe(key_iv, sizeof key_iv);
  tutti_crypto_wipe(salt, sizeof salt);
  return rc ? -1 : 0;
}

/* Key confirmation: the first record each way is a fixed text, which
 * authenticates only under the same key. */
static int confirm(struct seal* s) {
  unsigned char* r = s->hs_out + HELLO;
  struct iovec v = {(void*)CONFIRM_TEXT, CONFIRM_LEN};
  tutti_socket_put32(r, CONFIRM_LEN);
  s->hs_out_len = HELLO + CONFIRM;
  return tutti_crypto_seal(&s->tx, r, 4, &v, 1, CONFIRM_LEN, r + 4, r + 4 + CONFIRM_LEN);
}

/* The initiator's direction is keyed from its own nonce alone, so that it
 * may send before the responder's process has even accepted (a ring of
 * ranks each connecting before accepting relies on it); the responder's
 * from both nonces. */
#define I2R "tutti enc v1 initiator to responder"
#define R2I "tutti enc v1 responder to initiator"
int tutti_seal_derive_first(struct seal* s) {
  return s->initiator ? (derive_dir(s, &s->tx, 0, I2R, 1) || confirm(s)) : 0;
}

static int derive(struct seal* s) {
  int rc = s->initiator
               ? derive_dir(s, &s->rx, 1, R2I, 0)
               : derive_dir(s, &s->rx, 0, I2R, 0) || derive_dir(s, &s->tx, 1, R2I, 1) || confirm(s);
  tutti_crypto_wipe(s->psk, strlen(s->psk));
  return rc ? -1 : 0;
}

/* Drives the handshake until `need` holds: KEYED (the peer's hello came and
 * our confirmation is on the wire: records may be sent) or CONFIRMED (the
 * peer's confirmation authenticated: records may be read). Never waits. */
static int handshake(struct seal* s, int fd, int need) {
  while (__atomic_load_n(&s->err, __ATOMIC_ACQUIRE) == 0 && s->open < need) {
    int moved = 0;
    while (s->hs_out_off < s->hs_out_len) {
      ssize_t n = send(fd, s->hs_out + s->hs_out_off, s->hs_out_len - s->hs_out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        if (errno == EPIPE || errno == ECONNRESET) {
          return tutti_seal_fail(
              s, fd, errno,
              "the peer closed the connection during the encryption handshake: its "
              "pre-shared key or its encryption setting (ncclSetEncryption) likely "
              "differs");
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) {
          return errno; /* the caller's sentence names it */
        }
        break;
      }
      s->hs_out_off += (size_t)n;
      moved = 1;
    }
    if (s->hs_out_off == s->hs_out_len && s->hs_out_len == HELLO + CONFIRM) {
      const int now = s->hs_in_got == HELLO + CONFIRM ? CONFIRMED : KEYED;
      __atomic_store_n(&s->open, now, __ATOMIC_RELEASE);
      if (now >= need) {
        break;
      }
    }
    if (s->hs_in_got == HELLO + CONFIRM) {
      if (!moved) {
        return EAGAIN;
      }
      continue;
    }
    const size_t want = (s->hs_in_got < HELLO ? HELLO : HELLO + CONFIRM) - s->hs_in_got;
    ssize_t n = recv(fd, s->hs_in + s->hs_in_got, want, MSG_DONTWAIT);
    if (n == 0) {
      return tutti_seal_fail(
          s, fd, ECONNRESET,
          "the peer closed the connection during the encryption handshake: its "
          "pre-shared key or its encryption setting (ncclSetEncryption) likely differs");
    }
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) {
        return errno;
      }
      if (!moved) {
        return EAGAIN;
      }
      continue;
    }
    const size_t had = s->hs_in_got;
    s->hs_in_got += (size_t)n;
    name_peer(s, fd);
    if (had < MAGIC_LEN) {
      const size_t k = s->hs_in_got < MAGIC_LEN ? s->hs_in_got : MAGIC_LEN;
      if (memcmp(s->hs_in, MAGIC, k) != 0) {
        return tutti_seal_fail(
            s, fd, EPROTO,
            "the peer does not encrypt (it sent no encryption hello): every process "
            "must call ncclSetEncryption with the same pre-shared key");
      }
    }
    if (had < HELLO && s->hs_in_got == HELLO) {
      memcpy(s->nonce[s->initiator ? 1 : 0], s->hs_in + MAGIC_LEN, NONCE);
      if (derive(s) != 0) {
        return tutti_seal_fail(s, fd, EIO, "OpenSSL failed to derive the connection's keys");
      }
    }
    if (s->hs_in_got == HELLO + CONFIRM) {
      unsigned char* r = s->hs_in + HELLO;
      unsigned char text[CONFIRM_LEN];
      if (tutti_socket_get32(r) != CONFIRM_LEN ||
          tutti_crypto_open(&s->rx, r, 4, r + 4, CONFIRM_LEN, r + 4 + CONFIRM_LEN, text) != 0 ||
          memcmp(text, CONFIRM_TEXT, CONFIRM_LEN) != 0) {
        return tutti_seal_fail(
            s, fd, EKEYREJECTED,
            "its key confirmation does not authenticate: the pre-shared keys differ "
            "(ncclSetEncryption)");
      }
    }
  }
  return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
}

/* 0 when s may be used for `need`, else an errno value (EAGAIN: the
 * handshake goes on). */
int tutti_seal_ready(struct seal* s, int fd, int need) {
  if (__atomic_load_n(&s->open, __ATOMIC_ACQUIRE) >= need) {
    return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
  }
  pthread_mutex_lock(&s->lock);
  int rc = handshake(s, fd, need);
  pthread_mutex_unlock(&s->lock);
  return rc;
}
