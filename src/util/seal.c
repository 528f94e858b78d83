/* Encrypted connections: a key-confirming handshake, then AES-256-GCM
 * records {u32 plaintext length, ciphertext, 16-byte tag}, the length
 * authenticated as associated data and each direction's nonce its own
 * record counter, so an altered, dropped, replayed or reordered record
 * fails authentication. Keys come from HKDF over the pre-shared key and
 * both ends' random nonces: every connection has its own. */
#include "util/seal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/crypto.h"
#include "util/log.h"
#include "util/param.h"
#include "util/socket.h"

#define MAGIC "tuttiEN1"
#define MAGIC_LEN 8
#define NONCE 32
#define HELLO (MAGIC_LEN + NONCE)
#define OVERHEAD (4 + TUTTI_CRYPTO_TAG)
#define CONFIRM_TEXT "tutti key confirm" /* 16 bytes and its NUL */
#define CONFIRM_LEN 16
#define CONFIRM (4 + CONFIRM_LEN + TUTTI_CRYPTO_TAG)
#define CHUNK_BITS 10
#define NCHUNKS 1024 /* fds up to 2^20 */
#define KEYED 1      /* records may be sent */
#define CONFIRMED 2  /* records may be read */

struct seal {
  pthread_mutex_t lock; /* the handshake only: afterwards each direction has one user */
  int initiator, open, err;
  char* psk;
  char peer[TUTTI_SOCKET_ADDR_STRLEN]; /* kept: a reset connection has no peer name */
  char why[384];
  unsigned char nonce[2][NONCE]; /* the initiator's, the responder's */
  unsigned char hs_out[HELLO + CONFIRM], hs_in[HELLO + CONFIRM];
  size_t hs_out_len, hs_out_off, hs_in_got;
  struct tutti_crypto_dir tx, rx;
  unsigned char *out, *in, *plain;
  size_t out_len, out_off, out_plain, in_got, plain_off, plain_len;
};

int tutti_seal_active;
static int ready(struct seal* s, int fd, int need);
static int derive_first(struct seal* s);
static struct seal** chunks[NCHUNKS];
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;
static char* key; /* NULL: new connections are plaintext */

ncclResult_t tutti_seal_set_key(const char* psk) {
  char why[256];
  if (psk != NULL && tutti_crypto_load(why, sizeof why) != 0) {
    return tutti_error(ncclSystemError, "ncclSetEncryption: %s", why);
  }
  char* copy = psk != NULL ? strdup(psk) : NULL;
  pthread_mutex_lock(&key_lock);
  free(key);
  key = copy;
  pthread_mutex_unlock(&key_lock);
  return ncclSuccess;
}

int tutti_seal_enabled(void) {
  return __atomic_load_n(&key, __ATOMIC_ACQUIRE) != NULL;
}

static struct seal* get(int fd) {
  if (fd < 0 || fd >= (NCHUNKS << CHUNK_BITS)) {
    return NULL;
  }
  struct seal** c = __atomic_load_n(&chunks[fd >> CHUNK_BITS], __ATOMIC_ACQUIRE);
  return c == NULL ? NULL : __atomic_load_n(&c[fd & ((1 << CHUNK_BITS) - 1)], __ATOMIC_ACQUIRE);
}

static void destroy(struct seal* s) {
  if (s == NULL) {
    return;
  }
  tutti_crypto_dir_free(&s->tx);
  tutti_crypto_dir_free(&s->rx);
  free(s->psk);
  free(s->out);
  free(s->in);
  free(s->plain);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* Installs s (or NULL) for fd; returns the state it replaces. */
static struct seal* put(int fd, struct seal* s) {
  if (fd < 0 || fd >= (NCHUNKS << CHUNK_BITS)) {
    return NULL;
  }
  struct seal*** slot = &chunks[fd >> CHUNK_BITS];
  struct seal** c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (c == NULL) {
    struct seal** fresh = calloc(1u << CHUNK_BITS, sizeof *fresh);
    if (fresh == NULL) {
      return NULL;
    }
    if (__atomic_compare_exchange_n(slot, &c, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      c = fresh;
    } else {
      free(fresh);
    }
  }
  return __atomic_exchange_n(&c[fd & ((1 << CHUNK_BITS) - 1)], s, __ATOMIC_ACQ_REL);
}

void tutti_seal_attach(int fd, int initiator) {
  destroy(put(fd, NULL));
  pthread_mutex_lock(&key_lock);
  char* psk = key != NULL ? strdup(key) : NULL;
  pthread_mutex_unlock(&key_lock);
  if (psk == NULL) {
    return;
  }
  struct seal* s = calloc(1, sizeof *s);
  if (s == NULL) {
    free(psk);
    return;
  }
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&s->lock, &ma);
  pthread_mutexattr_destroy(&ma);
  s->initiator = initiator;
  s->psk = psk;
  memcpy(s->hs_out, MAGIC, MAGIC_LEN);
  if (tutti_crypto_random(s->nonce[initiator ? 0 : 1], NONCE) != 0) {
    s->err = EIO;
    snprintf(s->why, sizeof s->why, "OpenSSL's RAND_bytes failed: no nonce for the handshake");
  }
  memcpy(s->hs_out + MAGIC_LEN, s->nonce[initiator ? 0 : 1], NONCE);
  s->hs_out_len = HELLO;
  if (s->err == 0 && derive_first(s) != 0) {
    s->err = EIO;
    snprintf(s->why, sizeof s->why, "OpenSSL failed to derive the connection's keys");
  }
  __atomic_store_n(&tutti_seal_active, 1, __ATOMIC_RELEASE);
  put(fd, s);
  /* The hello leaves at once (an empty socket takes it), so the other end
   * can derive its keys and send before this process next touches fd. */
  (void)ready(s, fd, KEYED);
}

void tutti_seal_detach(int fd) {
  destroy(put(fd, NULL));
}

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

static int fail(struct seal* s, int fd, int err, const char* fmt, ...) {
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
  memset(key_iv, 0, sizeof key_iv);
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
static int derive_first(struct seal* s) {
  return s->initiator ? (derive_dir(s, &s->tx, 0, I2R, 1) || confirm(s)) : 0;
}

static int derive(struct seal* s) {
  int rc = s->initiator
               ? derive_dir(s, &s->rx, 1, R2I, 0)
               : derive_dir(s, &s->rx, 0, I2R, 0) || derive_dir(s, &s->tx, 1, R2I, 1) || confirm(s);
  memset(s->psk, 0, strlen(s->psk));
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
          return fail(s, fd, errno,
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
      return fail(s, fd, ECONNRESET,
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
        return fail(s, fd, EPROTO,
                    "the peer does not encrypt (it sent no encryption hello): every process "
                    "must call ncclSetEncryption with the same pre-shared key");
      }
    }
    if (had < HELLO && s->hs_in_got == HELLO) {
      memcpy(s->nonce[s->initiator ? 1 : 0], s->hs_in + MAGIC_LEN, NONCE);
      if (derive(s) != 0) {
        return fail(s, fd, EIO, "OpenSSL failed to derive the connection's keys");
      }
    }
    if (s->hs_in_got == HELLO + CONFIRM) {
      unsigned char* r = s->hs_in + HELLO;
      unsigned char text[CONFIRM_LEN];
      if (tutti_socket_get32(r) != CONFIRM_LEN ||
          tutti_crypto_open(&s->rx, r, 4, r + 4, CONFIRM_LEN, r + 4 + CONFIRM_LEN, text) != 0 ||
          memcmp(text, CONFIRM_TEXT, CONFIRM_LEN) != 0) {
        return fail(s, fd, EKEYREJECTED,
                    "its key confirmation does not authenticate: the pre-shared keys differ "
                    "(ncclSetEncryption)");
      }
    }
  }
  return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
}

/* 0 when s may be used for `need`, else an errno value (EAGAIN: the
 * handshake goes on). */
static int ready(struct seal* s, int fd, int need) {
  if (__atomic_load_n(&s->open, __ATOMIC_ACQUIRE) >= need) {
    return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
  }
  pthread_mutex_lock(&s->lock);
  int rc = handshake(s, fd, need);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int tutti_seal_handshake(int fd) {
  struct seal* s = get(fd);
  return s == NULL ? 0 : ready(s, fd, CONFIRMED);
}

const char* tutti_seal_why(int fd) {
  struct seal* s = get(fd);
  return s != NULL && __atomic_load_n(&s->err, __ATOMIC_ACQUIRE) != 0 ? s->why : NULL;
}

const char* tutti_seal_strerror(int fd, int err) {
  struct seal* s = get(fd);
  if (s != NULL && err != 0 && __atomic_load_n(&s->err, __ATOMIC_ACQUIRE) == err) {
    return s->why;
  }
  return strerror(err);
}

/* Tests only: every connection of this process flips one bit of the N-th
 * record it sends, after sealing it, as a faulty or hostile network would. */
static TUTTI_PARAM_RANGE(flip, "TUTTI_TEST_FLIP_RECORD", 0, 0, INT64_MAX,
                         "tests only: N > 0 alters each connection's N-th encrypted record");

/* The counter value after sealing that record (UINT64_MAX: none). */
static uint64_t flip_record(void) {
  const int64_t n = tutti_param_flip();
  return n > 0 ? (uint64_t)n + 1 : UINT64_MAX;
}

ssize_t tutti_seal_sendmsg_slow(int fd, const struct iovec* iov, int iovcnt) {
  struct seal* s = get(fd);
  if (s == NULL) {
    struct msghdr m = {0};
    m.msg_iov = (struct iovec*)iov;
    m.msg_iovlen = (size_t)iovcnt;
    return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  int rc = ready(s, fd, KEYED);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  size_t total = 0;
  for (int i = 0; i < iovcnt; i++) {
    total += iov[i].iov_len;
  }
  if (s->out_plain == 0) {
    if (total == 0) {
      return 0;
    }
    if (s->out == NULL && (s->out = malloc(TUTTI_SEAL_RECORD + OVERHEAD)) == NULL) {
      errno = ENOMEM;
      return -1;
    }
    const size_t take = total < TUTTI_SEAL_RECORD ? total : TUTTI_SEAL_RECORD;
    tutti_socket_put32(s->out, (uint32_t)take);
    if (tutti_crypto_seal(&s->tx, s->out, 4, iov, iovcnt, take, s->out + 4, s->out + 4 + take)) {
      errno = fail(s, fd, EIO, "OpenSSL failed to encrypt a record");
      return -1;
    }
    if (s->tx.seq == flip_record()) { /* a test's byte altered on the wire */
      s->out[4 + take / 2] ^= 0x01;
    }
    s->out_len = take + OVERHEAD;
    s->out_off = 0;
    s->out_plain = take;
  } else if (total < s->out_plain) {
    errno = EINVAL; /* a retry must offer at least the bytes of the record on the way */
    return -1;
  }
  while (s->out_off < s->out_len) {
    ssize_t n = send(fd, s->out + s->out_off, s->out_len - s->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if ((errno == EPIPE || errno == ECONNRESET) &&
          __atomic_load_n(&s->open, __ATOMIC_ACQUIRE) < CONFIRMED) {
        errno = fail(s, fd, errno,
                     "the peer closed the connection before confirming the key: its pre-shared "
                     "key or its encryption setting (ncclSetEncryption) likely differs");
      }
      return -1; /* EAGAIN: the record stays, the caller retries */
    }
    s->out_off += (size_t)n;
  }
  const size_t done = s->out_plain;
  s->out_plain = 0;
  return (ssize_t)done;
}

ssize_t tutti_seal_recv_slow(int fd, void* buf, size_t len) {
  struct seal* s = get(fd);
  if (s == NULL) {
    return recv(fd, buf, len, MSG_DONTWAIT);
  }
  int rc = ready(s, fd, CONFIRMED);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  if (s->plain_off < s->plain_len) {
    size_t n = s->plain_len - s->plain_off < len ? s->plain_len - s->plain_off : len;
    memcpy(buf, s->plain + s->plain_off, n);
    s->plain_off += n;
    return (ssize_t)n;
  }
  if (s->in == NULL && (s->in = malloc(TUTTI_SEAL_RECORD + OVERHEAD)) == NULL) {
    errno = ENOMEM;
    return -1;
  }
  /* Exactly one record at a time: nothing of the next stays in user space
   * where poll() could not see it. */
  size_t rec = 0;
  for (;;) {
    size_t want;
    if (s->in_got < 4) {
      want = 4 - s->in_got;
    } else {
      rec = tutti_socket_get32(s->in);
      if (rec == 0 || rec > TUTTI_SEAL_RECORD) {
        errno = fail(s, fd, EBADMSG,
                     "a record header says %zu bytes (at most %u): the stream was altered on the "
                     "way; nothing of it was delivered",
                     rec, TUTTI_SEAL_RECORD);
        return -1;
      }
      want = rec + OVERHEAD - s->in_got;
    }
    if (want == 0) {
      break;
    }
    ssize_t n = recv(fd, s->in + s->in_got, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return n; /* EAGAIN, an error, or the end of the stream */
    }
    s->in_got += (size_t)n;
  }
  s->in_got = 0;
  unsigned char* dst = buf;
  if (len < rec) {
    if (s->plain == NULL && (s->plain = malloc(TUTTI_SEAL_RECORD)) == NULL) {
      errno = ENOMEM;
      return -1;
    }
    dst = s->plain;
  }
  if (tutti_crypto_open(&s->rx, s->in, 4, s->in + 4, rec, s->in + 4 + rec, dst) != 0) {
    errno = fail(s, fd, EBADMSG,
                 "record %llu does not authenticate: it was altered, replayed or reordered on the "
                 "way; nothing of it was delivered",
                 (unsigned long long)(s->rx.seq - 1));
    return -1;
  }
  if (dst == buf) {
    return (ssize_t)rec;
  }
  memcpy(buf, s->plain, len);
  s->plain_off = len;
  s->plain_len = rec;
  return (ssize_t)len;
}

ssize_t tutti_seal_recvv_slow(int fd, const struct iovec* iov, int iovcnt) {
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; i++) {
    if (iov[i].iov_len == 0) {
      continue;
    }
    if (total > 0 && !tutti_seal_pending_slow(fd)) {
      break; /* no second read from the socket: as recvmsg, what is there */
    }
    ssize_t n = tutti_seal_recv_slow(fd, iov[i].iov_base, iov[i].iov_len);
    if (n <= 0) {
      return total > 0 ? total : n;
    }
    total += n;
    if ((size_t)n < iov[i].iov_len) {
      break;
    }
  }
  return total;
}

int tutti_seal_pending_slow(int fd) {
  struct seal* s = get(fd);
  return s != NULL && s->plain_off < s->plain_len;
}
