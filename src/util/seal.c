/* Encrypted connections' records (the handshake before them is
 * util/seal_handshake.c's) and each socket's state, by fd: AES-256-GCM
 * records {u32 plaintext length, ciphertext, 16-byte tag}, the length
 * authenticated as associated data and each direction's nonce its own
 * record counter, so an altered, dropped, replayed or reordered record
 * fails authentication. Keys come from HKDF over the pre-shared key and
 * both ends' random nonces: every connection has its own. A record is
 * opened in this file's own buffer and copied out only once its tag
 * authenticated: a forged record's bytes never reach the caller. */
#include "util/seal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/check.h"
#include "util/crypto.h"
#include "util/log.h"
#include "util/param.h"
#include "util/seal_state.h"

#define CHUNK_BITS 10
#define NCHUNKS 1024 /* fds up to 2^20 */

int tutti_seal_active;
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
  if (key != NULL) {
    tutti_crypto_wipe(key, strlen(key));
    free(key);
  }
  __atomic_store_n(&key, copy, __ATOMIC_RELEASE);
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
  if (s->psk != NULL) {
    tutti_crypto_wipe(s->psk, strlen(s->psk));
    free(s->psk);
  }
  free(s->out); /* ciphertext only */
  if (s->in != NULL) {
    tutti_crypto_wipe(s->in, TUTTI_SEAL_RECORD + OVERHEAD); /* plaintext was opened there */
    free(s->in);
  }
  pthread_mutex_destroy(&s->lock);
  tutti_crypto_wipe(s, sizeof *s); /* nonces, IVs */
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
  if (!__atomic_load_n(&tutti_seal_active, __ATOMIC_ACQUIRE) && !tutti_seal_enabled()) {
    return; /* never encrypted: no state to drop, none to make */
  }
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
  if (tutti_crypto_random(s->nonce[initiator ? 0 : 1], NONCE) != 0) {
    s->err = EIO;
    snprintf(s->why, sizeof s->why, "OpenSSL's RAND_bytes failed: no nonce for the handshake");
  } else if (tutti_seal_hello(s) != 0) {
    s->err = EIO;
    snprintf(s->why, sizeof s->why, "OpenSSL failed to make the handshake's hello");
  }
  __atomic_store_n(&tutti_seal_active, 1, __ATOMIC_RELEASE);
  put(fd, s);
  /* The hello leaves at once (an empty socket takes it), so the other end
   * can derive its keys and confirm them before this process next touches
   * fd. No key exists yet: both wait for the peer's nonce. */
  (void)tutti_seal_ready(s, fd, KEYED);
}

void tutti_seal_detach(int fd) {
  destroy(put(fd, NULL));
}

void tutti_seal_close(int fd) {
  if (__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED)) {
    tutti_seal_detach(fd);
  }
  close(fd);
}

int tutti_seal_handshake(int fd) {
  struct seal* s = get(fd);
  return s == NULL ? 0 : tutti_seal_ready(s, fd, CONFIRMED);
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
  int rc = tutti_seal_ready(s, fd, KEYED);
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
      errno = tutti_seal_fail(s, fd, EIO, "OpenSSL failed to encrypt a record");
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
        errno = tutti_seal_fail(
            s, fd, errno,
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

/* One record's bytes at most into buf. With `slot`, a whole record that
 * fits is opened straight into buf (tutti_seal_recv_slot); otherwise it is
 * opened in place in s->in and copied out only once authenticated. */
static ssize_t recv_record(int fd, void* buf, size_t len, int slot) {
  struct seal* s = get(fd);
  if (s == NULL) {
    return recv(fd, buf, len, MSG_DONTWAIT);
  }
  int rc = tutti_seal_ready(s, fd, CONFIRMED);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  if (s->plain_off < s->plain_len) {
    size_t n = s->plain_len - s->plain_off < len ? s->plain_len - s->plain_off : len;
    memcpy(buf, s->in + 4 + s->plain_off, n);
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
        errno = tutti_seal_fail(
            s, fd, EBADMSG,
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
  unsigned char* body = s->in + 4;
  unsigned char* dst = slot && len >= rec ? buf : body;
  if (tutti_crypto_open(&s->rx, s->in, 4, body, rec, body + rec, dst) != 0) {
    tutti_crypto_wipe(dst, rec); /* GCM wrote before it checked */
    errno = tutti_seal_fail(
        s, fd, EBADMSG,
        "record %llu does not authenticate: it was altered, replayed or reordered on the "
        "way; nothing of it was delivered",
        (unsigned long long)(s->rx.seq - 1));
    return -1;
  }
  if (dst == buf) {
    return (ssize_t)rec;
  }
  const size_t n = len < rec ? len : rec;
  memcpy(buf, body, n);
  s->plain_off = n;
  s->plain_len = rec;
  return (ssize_t)n;
}

ssize_t tutti_seal_recv_slow(int fd, void* buf, size_t len) {
  return recv_record(fd, buf, len, 0);
}

ssize_t tutti_seal_recv_slot_slow(int fd, void* slot, size_t len) {
  return recv_record(fd, slot, len, 1);
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

short tutti_seal_events_slow(int fd, short events) {
  struct seal* s = get(fd);
  if (s != NULL && (events & POLLOUT) && tutti_seal_waits_peer(s)) {
    events = (short)((events & ~POLLOUT) | POLLIN);
  }
  return events;
}
