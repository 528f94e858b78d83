/* Helpers shared by the fuzz targets: reading an input as a script of
 * operations, socket pairs that stand in for a network connection, and a
 * check that aborts (a crash, for the driver and libFuzzer alike). */
#ifndef TUTTI_FUZZ_H
#define TUTTI_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_ASSERT(cond, ...)                                                 \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      abort();                                                                 \
    }                                                                          \
  } while (0)

struct fuzz_in {
  const uint8_t* p;
  size_t n;
};

static inline int fuzz_left(const struct fuzz_in* in) {
  return in->n > 0;
}

static inline uint8_t fuzz_u8(struct fuzz_in* in) {
  if (in->n == 0) {
    return 0;
  }
  in->n--;
  return *in->p++;
}

static inline uint32_t fuzz_u32(struct fuzz_in* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    v = (v << 8) | fuzz_u8(in);
  }
  return v;
}

/* Up to `want` bytes of the input; *got says how many there were. */
static inline const uint8_t* fuzz_take(struct fuzz_in* in, size_t want, size_t* got) {
  const uint8_t* p = in->p;
  *got = want < in->n ? want : in->n;
  in->p += *got;
  in->n -= *got;
  return p;
}

/* A connected pair of non-blocking stream sockets: fds[0] is handed to the
 * code under test, fds[1] is the far end the input is written into. */
static inline void fuzz_pair(int fds[2]) {
  FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0,
              "socketpair");
  int big = 1 << 20;
  (void)setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  (void)setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
}

/* Writes all of buf (the socket buffers are far larger than any input);
 * nothing when the code under test already closed its end. */
static inline void fuzz_write(int fd, const void* buf, size_t len) {
  if (len > 0) {
    ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    FUZZ_ASSERT(w == (ssize_t)len || (w < 0 && (errno == EPIPE || errno == ECONNRESET)),
                "wrote %zd of %zu bytes: %s", w, len, strerror(errno));
  }
}

/* Reads and forgets whatever is waiting on fd; returns how much. */
static inline size_t fuzz_drain(int fd) {
  char buf[4096];
  size_t total = 0;
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
    total += (size_t)n;
  }
  return total;
}

#endif
