/* A key-value store that speaks PyTorch's TCPStore protocol, served from
 * tuttirun's own poll loop: the store torchrun's agent hosts for its
 * workers (TORCHELASTIC_USE_AGENT_STORE) and for the agents' rendezvous.
 * Clients of torch 1.x (no handshake, SET is query 0) and 2.x (VALIDATE and
 * a magic number first) are told apart by their first bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store_impl.h"

static struct tr_store* stores[TR_STORES_MAX];

void tr_store_conn_free_waits(struct conn* c) {
  for (size_t i = 0; i < c->nwaits; i++) {
    free(c->waits[i]);
  }
  free(c->waits);
  c->waits = NULL;
  c->nwaits = c->left = 0;
}

static void conn_close(struct tr_store* s, size_t i) {
  struct conn* c = &s->conns[i];
  close(c->fd);
  free(c->in.p);
  free(c->out.p);
  tr_store_conn_free_waits(c);
  s->conns[i] = s->conns[--s->nconns];
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int tr_bind_any(int port) {
  /* Like torch: IPv6 on every address (IPv4 too, mapped), else IPv4. */
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  if (fd >= 0) {
    struct sockaddr_in6 a6 = {
        .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(fd, (struct sockaddr*)&a6, sizeof a6) == 0) {
      return fd;
    }
    const int e = errno;
    close(fd);
    if (e == EADDRINUSE || e == EACCES) {
      return -e;
    }
  }
  /* No IPv6 here. */
  struct sockaddr_in a4 = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_ANY)};
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -errno;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr*)&a4, sizeof a4) != 0) {
    const int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

struct tr_store* tr_store_listen(int port, char* err, size_t errlen) {
  size_t slot = 0;
  while (slot < TR_STORES_MAX && stores[slot] != NULL) {
    slot++;
  }
  struct tr_store* s = calloc(1, sizeof *s);
  if (slot == TR_STORES_MAX || s == NULL) {
    snprintf(err, errlen, "too many stores");
    free(s);
    return NULL;
  }
  int fd = tr_bind_any(port);
  if (fd < 0) {
    errno = -fd;
    fd = -1;
  }
  if (fd < 0 || listen(fd, 4096) != 0 || set_nonblock(fd) != 0) {
    snprintf(err, errlen, "cannot listen on port %d: %s", port, strerror(errno));
    if (fd >= 0) {
      close(fd);
    }
    free(s);
    return NULL;
  }
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  getsockname(fd, (struct sockaddr*)&ss, &len);
  s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&ss)->sin6_port
                                           : ((struct sockaddr_in*)&ss)->sin_port);
  s->listen_fd = fd;
  stores[slot] = s;
  return s;
}

int tr_store_port(const struct tr_store* s) {
  return s->port;
}

struct tr_kv_table* tr_store_table(struct tr_store* s) {
  return &s->table;
}

void tr_store_changed(struct tr_store* s, const char* key) {
  tr_store_wake(s, key);
}

size_t tr_store_nclients(const struct tr_store* s) {
  return s->nconns;
}

void tr_store_close(struct tr_store* s) {
  if (s == NULL) {
    return;
  }
  while (s->nconns > 0) {
    conn_close(s, 0);
  }
  free(s->conns);
  close(s->listen_fd);
  tr_kv_clear(&s->table);
  for (size_t i = 0; i < TR_STORES_MAX; i++) {
    stores[i] = stores[i] == s ? NULL : stores[i];
  }
  free(s);
}

size_t tr_store_pollfds(struct pollfd* fds, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < TR_STORES_MAX; i++) {
    struct tr_store* s = stores[i];
    if (s == NULL) {
      continue;
    }
    if (n < max) {
      fds[n++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    }
    for (size_t k = 0; k < s->nconns && n < max; k++) {
      short ev = (short)(POLLIN | (s->conns[k].out.len > 0 ? POLLOUT : 0));
      fds[n++] = (struct pollfd){.fd = s->conns[k].fd, .events = ev};
    }
  }
  return n;
}

size_t tr_store_nfds(void) {
  size_t n = 0;
  for (size_t i = 0; i < TR_STORES_MAX; i++) {
    n += stores[i] != NULL ? 1 + stores[i]->nconns : 0;
  }
  return n;
}

static void accept_all(struct tr_store* s) {
  for (;;) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      return;
    }
    if (s->nconns == s->cap) {
      size_t cap = s->cap == 0 ? 16 : 2 * s->cap;
      struct conn* c = realloc(s->conns, cap * sizeof *c);
      if (c == NULL) {
        close(fd);
        return;
      }
      s->conns = c;
      s->cap = cap;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s->conns[s->nconns++] = (struct conn){.fd = fd};
  }
}

/* Reads, answers and writes for one connection; -1 when it is gone. */
static int pump_conn(struct tr_store* s, struct conn* c, short revents) {
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    for (;;) {
      if (tr_buf_reserve(&c->in, 65536) != 0) {
        return -1;
      }
      ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
      if (n > 0) {
        c->in.len += (size_t)n;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        break;
      }
      return -1; /* closed, or reset */
    }
    if (tr_store_serve_input(s, c) < 0) {
      return -1;
    }
  }
  while (c->out.len > 0) {
    ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL);
    if (n < 0) {
      return errno == EAGAIN || errno == EINTR ? 0 : -1;
    }
    tr_buf_drop(&c->out, (size_t)n);
  }
  return 0;
}

/* Replies queued by a wake-up from another connection (or from the host). */
static void flush_all(struct tr_store* s) {
  for (size_t k = 0; k < s->nconns;) {
    if (s->conns[k].out.len > 0 && pump_conn(s, &s->conns[k], 0) < 0) {
      conn_close(s, k);
    } else {
      k++;
    }
  }
}

void tr_store_handle(const struct pollfd* fds, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (fds[i].revents == 0) {
      continue;
    }
    for (size_t k = 0; k < TR_STORES_MAX; k++) {
      struct tr_store* s = stores[k];
      if (s == NULL) {
        continue;
      }
      if (fds[i].fd == s->listen_fd) {
        accept_all(s);
        break;
      }
      size_t c = 0;
      while (c < s->nconns && s->conns[c].fd != fds[i].fd) {
        c++;
      }
      if (c < s->nconns) {
        if (pump_conn(s, &s->conns[c], fds[i].revents) < 0) {
          conn_close(s, c);
        }
        break;
      }
    }
  }
  for (size_t k = 0; k < TR_STORES_MAX; k++) {
    if (stores[k] != NULL) {
      flush_all(stores[k]);
    }
  }
}

void tr_store_serve(int timeout_ms) {
  static struct pollfd* fds;
  static size_t cap;
  size_t need = tr_store_nfds();
  if (need > cap) {
    struct pollfd* p = realloc(fds, 2 * need * sizeof *p);
    if (p != NULL) {
      fds = p;
      cap = 2 * need;
    }
  }
  size_t n = fds != NULL ? tr_store_pollfds(fds, cap) : 0;
  struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  sigset_t none;
  sigemptyset(&none);
  /* tuttirun blocks its stop signals except while it waits: a SIGINT during
   * a rendezvous must be seen (tr_stop_requested). */
  if (ppoll(fds, n, &ts, &none) > 0) {
    tr_store_handle(fds, n);
  }
}
