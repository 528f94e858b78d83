/* ncclSetEncryption's handshake (util/seal.h): each end sends a hello with
 * a random nonce, derives both directions' keys from the pre-shared key and
 * both nonces once the peer's hello is in, and sends a key-confirming first
 * record bound to both hellos. No record is sent before the peer's nonce is
 * known, none is read before the peer's confirmation authenticated: a
 * recorded stream replayed into a new connection meets a nonce it was not
 * made for and fails. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

#define I2R "tutti enc v2 initiator to responder"
#define R2I "tutti enc v2 responder to initiator"
#define CHECK_INFO "tutti enc v2 hello key check"

/* The hello's check value for `nonce`: only a holder of the key makes it. */
static int key_check(const struct seal* s, const unsigned char* nonce, unsigned char* out) {
  return tutti_crypto_hkdf((const unsigned char*)s->psk, strlen(s->psk), nonce, NONCE, CHECK_INFO,
                           out, KEY_CHECK);
}

int tutti_seal_hello(struct seal* s) {
  const unsigned char* mine = s->nonce[s->initiator ? 0 : 1];
  memcpy(s->hs_out, MAGIC, MAGIC_LEN);
  memcpy(s->hs_out + MAGIC_LEN, mine, NONCE);
  s->hs_out_len = HELLO;
  return key_check(s, mine, s->hs_out + MAGIC_LEN + NONCE);
}

/* One direction's key and IV: HKDF over the pre-shared key, salted with
 * both nonces (initiator's, responder's), the direction in the label. */
static int derive_dir(struct seal* s, struct tutti_crypto_dir* d, const char* label, int encrypt) {
  unsigned char salt[2 * NONCE], key_iv[TUTTI_CRYPTO_KEY + TUTTI_CRYPTO_IV];
  memcpy(salt, s->nonce[0], NONCE);
  memcpy(salt + NONCE, s->nonce[1], NONCE);
  int rc = tutti_crypto_hkdf((unsigned char*)s->psk, strlen(s->psk), salt, sizeof salt, label,
                             key_iv, sizeof key_iv) != 0 ||
           tutti_crypto_dir_init(d, key_iv, encrypt) != 0;
  tutti_crypto_wipe(key_iv, sizeof key_iv);
  tutti_crypto_wipe(salt, sizeof salt);
  return rc ? -1 : 0;
}

/* The confirmation's associated data: its header and both hellos, the
 * initiator's first, so that it authenticates for this handshake only. */
static void transcript(const struct seal* s, const unsigned char* hdr, unsigned char* aad) {
  memcpy(aad, hdr, 4);
  memcpy(aad + 4, s->initiator ? s->hs_out : s->hs_in, HELLO);
  memcpy(aad + 4 + HELLO, s->initiator ? s->hs_in : s->hs_out, HELLO);
}

/* Key confirmation: the first record each way is a fixed text, which
 * authenticates only under the same key, both nonces and both hellos. */
static int confirm(struct seal* s) {
  unsigned char* r = s->hs_out + HELLO;
  unsigned char aad[4 + 2 * HELLO];
  struct iovec v = {(void*)CONFIRM_TEXT, CONFIRM_LEN};
  tutti_socket_put32(r, CONFIRM_LEN);
  transcript(s, r, aad);
  s->hs_out_len = HELLO + CONFIRM;
  return tutti_crypto_seal(&s->tx, aad, sizeof aad, &v, 1, CONFIRM_LEN, r + 4, r + 4 + CONFIRM_LEN);
}

/* Both directions' keys, once the peer's nonce is in; the pre-shared key
 * is not needed after. */
static int derive(struct seal* s) {
  int rc = s->initiator ? derive_dir(s, &s->tx, I2R, 1) || derive_dir(s, &s->rx, R2I, 0)
                        : derive_dir(s, &s->rx, I2R, 0) || derive_dir(s, &s->tx, R2I, 1);
  rc = rc || confirm(s);
  tutti_crypto_wipe(s->psk, strlen(s->psk));
  free(s->psk);
  s->psk = NULL;
  return rc ? -1 : 0;
}

/* Compares without stopping at the first difference. */
static int differ(const unsigned char* a, const unsigned char* b, size_t n) {
  unsigned char d = 0;
  for (size_t i = 0; i < n; i++) {
    d |= a[i] ^ b[i];
  }
  return d != 0;
}

/* The peer's hello is in: its version and key check, then the keys. */
static int peer_hello(struct seal* s, int fd) {
  unsigned char want[KEY_CHECK];
  const unsigned char* nonce = s->hs_in + MAGIC_LEN;
  if (key_check(s, nonce, want) != 0) {
    return tutti_seal_fail(s, fd, EIO, "OpenSSL failed to check the peer's hello");
  }
  const int wrong = differ(want, s->hs_in + MAGIC_LEN + NONCE, KEY_CHECK);
  tutti_crypto_wipe(want, sizeof want);
  if (wrong) {
    return tutti_seal_fail(s, fd, EKEYREJECTED,
                           "its hello's key check does not match: the pre-shared keys differ "
                           "(ncclSetEncryption)");
  }
  memcpy(s->nonce[s->initiator ? 1 : 0], nonce, NONCE);
  if (derive(s) != 0) {
    return tutti_seal_fail(s, fd, EIO, "OpenSSL failed to derive the connection's keys");
  }
  return 0;
}

/* The peer's confirmation is in: it must open under this handshake's keys. */
static int peer_confirm(struct seal* s, int fd) {
  unsigned char* r = s->hs_in + HELLO;
  unsigned char text[CONFIRM_LEN], aad[4 + 2 * HELLO];
  transcript(s, r, aad);
  const int bad = tutti_socket_get32(r) != CONFIRM_LEN ||
                  tutti_crypto_open(&s->rx, aad, sizeof aad, r + 4, CONFIRM_LEN,
                                    r + 4 + CONFIRM_LEN, text) != 0 ||
                  memcmp(text, CONFIRM_TEXT, CONFIRM_LEN) != 0;
  tutti_crypto_wipe(text, sizeof text);
  if (bad) {
    /* Its hello proved the key, so the confirmation was made for other
     * nonces: a recording of another connection, or bytes altered. */
    return tutti_seal_fail(s, fd, EBADMSG,
                           "its key confirmation does not authenticate for this connection's "
                           "nonces although its hello proves the same pre-shared key: a recorded "
                           "handshake was replayed into a new connection, or the stream was "
                           "altered on the way; nothing it sent was delivered");
  }
  return 0;
}

/* The first bytes of the peer's hello: ours, of this version. */
static int peer_magic(struct seal* s, int fd) {
  const size_t k = s->hs_in_got < MAGIC_LEN - 1 ? s->hs_in_got : MAGIC_LEN - 1;
  if (memcmp(s->hs_in, MAGIC, k) != 0) {
    return tutti_seal_fail(s, fd, EPROTO,
                           "the peer does not encrypt (it sent no encryption hello): every "
                           "process must call ncclSetEncryption with the same pre-shared key");
  }
  const unsigned char v = s->hs_in[MAGIC_LEN - 1];
  if (s->hs_in_got >= MAGIC_LEN && v != (unsigned char)MAGIC[MAGIC_LEN - 1]) {
    return tutti_seal_fail(s, fd, EPROTO,
                           "the peer speaks version '%c' of tutti's encryption handshake and this "
                           "process version '%c': every process must run the same tutti build",
                           v >= 0x21 && v < 0x7f ? v : '?', MAGIC[MAGIC_LEN - 1]);
  }
  return 0;
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
    if (had < MAGIC_LEN && peer_magic(s, fd) != 0) {
      break;
    }
    if (had < HELLO && s->hs_in_got == HELLO && peer_hello(s, fd) != 0) {
      break;
    }
    if (s->hs_in_got == HELLO + CONFIRM && peer_confirm(s, fd) != 0) {
      break;
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

int tutti_seal_waits_peer(struct seal* s) {
  if (__atomic_load_n(&s->open, __ATOMIC_ACQUIRE) >= KEYED ||
      __atomic_load_n(&s->err, __ATOMIC_ACQUIRE) != 0) {
    return 0;
  }
  pthread_mutex_lock(&s->lock);
  /* All of ours is out and we are not keyed: the peer's hello is missing. */
  const int waits = s->open < KEYED && s->hs_out_off == s->hs_out_len;
  pthread_mutex_unlock(&s->lock);
  return waits;
}
