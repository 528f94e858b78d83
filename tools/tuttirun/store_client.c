/* The store as its users see it: the agent that serves it reads and writes
 * its table directly; the others are TCPStore clients (torch 2.x protocol:
 * VALIDATE, PING, then queries), one blocking call at a time. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

enum { Q_VALIDATE, Q_SET, Q_CAS, Q_GET, Q_ADD, Q_CHECK, Q_PING = 13 };

double tr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(struct tr_kvc* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct tr_kvc* c, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
  if (c->fd >= 0) {
    close(c->fd);
    c->fd = -1;
  }
  return -1;
}

void tr_kvc_init_local(struct tr_kvc* c, struct tr_store* s) {
  memset(c, 0, sizeof *c);
  c->local = s;
  c->fd = -1;
}

void tr_kvc_init_remote(struct tr_kvc* c, const char* host, int port, double timeout_s) {
  memset(c, 0, sizeof *c);
  snprintf(c->host, sizeof c->host, "%s", host);
  c->port = port;
  c->fd = -1;
  c->timeout_s = timeout_s;
}

void tr_kvc_close(struct tr_kvc* c) {
  if (c->fd >= 0) {
    close(c->fd);
  }
  c->fd = -1;
}

static int io(struct tr_kvc* c, void* p, size_t n, int out, double deadline) {
  uint8_t* b = p;
  while (n > 0) {
    int ms = (int)((deadline - tr_now()) * 1e3);
    struct pollfd pfd = {.fd = c->fd, .events = out ? POLLOUT : POLLIN};
    if (ms <= 0 || poll(&pfd, 1, ms) == 0) {
      return fail(c, "no answer from the store at %s:%d within %g s", c->host, c->port,
                  c->timeout_s);
    }
    ssize_t got = out ? send(c->fd, b, n, MSG_NOSIGNAL) : recv(c->fd, b, n, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (got <= 0) {
      return fail(c, "the store at %s:%d closed the connection%s%s", c->host, c->port,
                  got < 0 ? ": " : "", got < 0 ? strerror(errno) : "");
    }
    b += got;
    n -= (size_t)got;
  }
  return 0;
}

static int connect_once(struct tr_kvc* c, double deadline) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  char port[16];
  snprintf(port, sizeof port, "%d", c->port);
  int rc = getaddrinfo(c->host, port, &hints, &res);
  if (rc != 0) {
    return fail(c, "cannot resolve %s: %s", c->host, gai_strerror(rc));
  }
  int fd = -1, e = ECONNREFUSED;
  for (struct addrinfo* ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno == EINPROGRESS) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      int ms = (int)((deadline - tr_now()) * 1e3);
      socklen_t len = sizeof e;
      e = ETIMEDOUT;
      if (ms > 0 && poll(&pfd, 1, ms > 2000 ? 2000 : ms) == 1) {
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
      }
    } else {
      e = errno == EISCONN ? 0 : errno;
    }
    if (e != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return fail(c, "cannot connect to the store at %s:%d: %s", c->host, c->port, strerror(e));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->fd = fd;
  /* VALIDATE, then PING: the nonce must come back. */
  uint8_t hello[10] = {Q_VALIDATE};
  uint32_t magic = TR_STORE_MAGIC, nonce = (uint32_t)getpid(), back = 0;
  memcpy(hello + 1, &magic, 4);
  hello[5] = Q_PING;
  memcpy(hello + 6, &nonce, 4);
  double d = tr_now() + c->timeout_s;
  if (io(c, hello, sizeof hello, 1, d) != 0 || io(c, &back, sizeof back, 0, d) != 0) {
    return -1;
  }
  return back == nonce ? 0 : fail(c, "%s:%d is not a store (bad ping)", c->host, c->port);
}

int tr_kvc_connect(struct tr_kvc* c, double deadline) {
  if (c->local != NULL || c->fd >= 0) {
    return 0;
  }
  for (;;) {
    if (connect_once(c, deadline) == 0) {
      return 0;
    }
    if (tr_now() + 0.2 >= deadline) {
      return -1;
    }
    tr_store_serve(200); /* what this agent serves meanwhile still answers */
  }
}

/* Sends one query: the type byte and length-prefixed strings, then an
 * optional 8-byte integer. */
static int send_query(struct tr_kvc* c, uint8_t q, const char* a, const char* b, const char* d,
                      const int64_t* num) {
  if (tr_kvc_connect(c, tr_now() + c->timeout_s) != 0) {
    return -1;
  }
  struct tr_buf m = {0};
  int rc = tr_buf_put(&m, &q, 1);
  if (q == Q_CHECK) {
    uint64_t one = 1;
    rc |= tr_buf_put(&m, &one, sizeof one);
  }
  const char* s[3] = {a, b, d};
  for (int i = 0; i < 3 && s[i] != NULL; i++) {
    uint64_t n = strlen(s[i]);
    rc |= tr_buf_put(&m, &n, sizeof n);
    rc |= tr_buf_put(&m, s[i], n);
  }
  if (num != NULL) {
    rc |= tr_buf_put(&m, num, sizeof *num);
  }
  rc = rc != 0 ? fail(c, "out of memory") : io(c, m.p, m.len, 1, tr_now() + c->timeout_s);
  free(m.p);
  return rc;
}

static int recv_bytes(struct tr_kvc* c, char* val, size_t cap) {
  uint64_t n;
  double d = tr_now() + c->timeout_s;
  if (io(c, &n, sizeof n, 0, d) != 0) {
    return -1;
  }
  char tmp[256];
  size_t keep = n < cap - 1 ? (size_t)n : cap - 1;
  if (io(c, val, keep, 0, d) != 0) {
    return -1;
  }
  val[keep] = '\0';
  for (uint64_t rest = n - keep; rest > 0;) { /* longer than the caller's buffer: cut */
    size_t k = rest < sizeof tmp ? (size_t)rest : sizeof tmp;
    if (io(c, tmp, k, 0, d) != 0) {
      return -1;
    }
    rest -= k;
  }
  return 0;
}

int tr_kvc_set(struct tr_kvc* c, const char* key, const char* val) {
  if (c->local != NULL) {
    int rc = tr_kv_set(tr_store_table(c->local), key, val, strlen(val));
    tr_store_changed(c->local, key);
    return rc;
  }
  return send_query(c, Q_SET, key, val, NULL, NULL);
}

int tr_kvc_get(struct tr_kvc* c, const char* key, char* val, size_t cap, int* found) {
  val[0] = '\0';
  *found = 0;
  if (c->local != NULL) {
    const struct tr_kv* e = tr_kv_find(tr_store_table(c->local), key);
    if (e != NULL) {
      snprintf(val, cap, "%s", (const char*)e->val);
      *found = 1;
    }
    return 0;
  }
  uint8_t ready = 1;
  if (send_query(c, Q_CHECK, key, NULL, NULL, NULL) != 0 ||
      io(c, &ready, 1, 0, tr_now() + c->timeout_s) != 0) {
    return -1;
  }
  if (ready != 0) {
    return 0;
  }
  *found = 1;
  return send_query(c, Q_GET, key, NULL, NULL, NULL) != 0 ? -1 : recv_bytes(c, val, cap);
}

int tr_kvc_add(struct tr_kvc* c, const char* key, int64_t delta, int64_t* now) {
  if (c->local != NULL) {
    int rc = tr_kv_add(tr_store_table(c->local), key, delta, now);
    tr_store_changed(c->local, key);
    return rc;
  }
  return send_query(c, Q_ADD, key, NULL, NULL, &delta) != 0
             ? -1
             : io(c, now, sizeof *now, 0, tr_now() + c->timeout_s);
}

int tr_kvc_cas(struct tr_kvc* c, const char* key, const char* expect, const char* desired,
               char* now, size_t cap) {
  if (c->local != NULL) {
    const struct tr_kv* e =
        tr_kv_cas(tr_store_table(c->local), key, expect, strlen(expect), desired, strlen(desired));
    snprintf(now, cap, "%s", e != NULL ? (const char*)e->val : expect);
    tr_store_changed(c->local, key);
    return 0;
  }
  return send_query(c, Q_CAS, key, expect, desired, NULL) != 0 ? -1 : recv_bytes(c, now, cap);
}
