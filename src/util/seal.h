/* The record layer of ncclSetEncryption: once a pre-shared key is set, every
 * TCP connection util/socket.c makes or accepts is attached here, does a
 * handshake proving both ends hold the key, and then carries AES-256-GCM
 * records. The bootstrap, the TCP transport and the socket network move
 * bytes through tutti_seal_send / _sendmsg / _recv, which behave as the
 * non-blocking send / sendmsg / recv they replace (docs/design.md, "NCCL
 * 2.32"). With no key set they are those calls plus one load and branch. */
#ifndef TUTTI_UTIL_SEAL_H
#define TUTTI_UTIL_SEAL_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "nccl.h"

#define TUTTI_SEAL_RECORD (256u << 10) /* the most plaintext one record holds */

/* Non-zero once any connection was ever attached: only then do the wrappers
 * look for a connection's state. */
extern int tutti_seal_active;

/* Sets the key for connections made from now on (NULL: none). Fails with
 * ncclSystemError and a sentence saying what to install when OpenSSL 3
 * cannot be loaded. */
ncclResult_t tutti_seal_set_key(const char* psk);
/* Whether new connections are encrypted. */
int tutti_seal_enabled(void);
/* Starts the handshake on a new connection (initiator: the connecting end)
 * when a key is set; any state left from an earlier socket of that number
 * is dropped. */
void tutti_seal_attach(int fd, int initiator);
/* Drops a connection's state (before or after close). */
void tutti_seal_detach(int fd);
/* Closes a connection and drops its state (buffers wiped, keys freed):
 * nothing of it may be in use. Every socket util/socket.c connected or
 * accepted is closed through this: a plain close() leaves its state (key
 * material, buffers) until the fd number is reused. */
void tutti_seal_close(int fd);
/* Drives fd's handshake without waiting: 0 done (or fd not encrypted),
 * EAGAIN not yet, or an errno value (tutti_seal_strerror says why). */
int tutti_seal_handshake(int fd);
/* The sentence for err on fd: the record layer's own when it failed the
 * connection (wrong key, plaintext peer, altered record), else strerror. */
const char* tutti_seal_strerror(int fd, int err);

/* The record layer's sentence for a connection it failed, or NULL. */
const char* tutti_seal_why(int fd);

ssize_t tutti_seal_sendmsg_slow(int fd, const struct iovec* iov, int iovcnt);
ssize_t tutti_seal_recv_slow(int fd, void* buf, size_t len);
ssize_t tutti_seal_recv_slot_slow(int fd, void* slot, size_t len);
int tutti_seal_pending_slow(int fd);
short tutti_seal_events_slow(int fd, short events);

/* Non-blocking send / sendmsg / recv (MSG_DONTWAIT, MSG_NOSIGNAL). On an
 * encrypted connection a send takes at most one record and reports its
 * bytes once all of it is on the wire (EAGAIN until then: the caller
 * retries with the same bytes, as it would after a short send). The first
 * send waits (EAGAIN) for the peer's hello, so the peer's process must
 * accept and be driven meanwhile: a caller must not wait for that send to
 * finish before it accepts the connection its own sender waits on. A
 * receive gives only authenticated bytes: a record that fails leaves buf
 * as it was. */
static inline ssize_t tutti_seal_sendmsg(int fd, const struct iovec* iov, int iovcnt) {
  if (__builtin_expect(!__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED), 1)) {
    struct msghdr m = {0};
    m.msg_iov = (struct iovec*)iov;
    m.msg_iovlen = (size_t)iovcnt;
    return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return tutti_seal_sendmsg_slow(fd, iov, iovcnt);
}

static inline ssize_t tutti_seal_send(int fd, const void* buf, size_t len) {
  if (__builtin_expect(!__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED), 1)) {
    return send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  struct iovec v = {(void*)buf, len};
  return tutti_seal_sendmsg_slow(fd, &v, 1);
}

static inline ssize_t tutti_seal_recv(int fd, void* buf, size_t len) {
  if (__builtin_expect(!__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED), 1)) {
    return recv(fd, buf, len, MSG_DONTWAIT);
  }
  return tutti_seal_recv_slow(fd, buf, len);
}

/* recvmsg over iov: one record's bytes at most, as a recv may give. */
ssize_t tutti_seal_recvv_slow(int fd, const struct iovec* iov, int iovcnt);
static inline ssize_t tutti_seal_recvv(int fd, const struct iovec* iov, int iovcnt) {
  if (__builtin_expect(!__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED), 1)) {
    struct msghdr m = {0};
    m.msg_iov = (struct iovec*)iov;
    m.msg_iovlen = (size_t)iovcnt;
    return recvmsg(fd, &m, MSG_DONTWAIT);
  }
  return tutti_seal_recvv_slow(fd, iov, iovcnt);
}

/* tutti_seal_recv for the TCP transport's receive slots only, to save a
 * copy: a whole record that fits is opened straight into slot. GCM writes
 * the plaintext before it checks the tag, so a record that fails leaves
 * those bytes of slot wiped (never the forged plaintext, but not as they
 * were): only for memory nobody reads before this call has returned its
 * bytes, as a slot that is published once its last byte came. */
static inline ssize_t tutti_seal_recv_slot(int fd, void* slot, size_t len) {
  if (__builtin_expect(!__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED), 1)) {
    return recv(fd, slot, len, MSG_DONTWAIT);
  }
  return tutti_seal_recv_slot_slow(fd, slot, len);
}

/* The poll() events that wait for `events` on fd: a send that waits for
 * the peer's hello waits for POLLIN, not POLLOUT (which an idle socket
 * always has: a poll loop would spin). */
static inline short tutti_seal_events(int fd, short events) {
  return __builtin_expect(!__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED), 1)
             ? events
             : tutti_seal_events_slow(fd, events);
}

/* Non-zero when a received record still holds bytes the caller has not
 * taken: poll() would not wake for them, so a poll loop must not sleep. */
static inline int tutti_seal_has_pending(int fd) {
  return __builtin_expect(!__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED), 1)
             ? 0
             : tutti_seal_pending_slow(fd);
}

#endif
