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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "store.h"

#define TR_STORES_MAX 4
#define TR_KEY_MAX (1 << 20)
#define TR_VALUE_MAX (256u << 20)
#define TR_KEYS_PER_QUERY 100000

/* torch 2.x query numbers (torch/csrc/distributed/c10d/TCPStoreBackend.hpp). */
enum {
  Q_VALIDATE,
  Q_SET,
  Q_CAS,
  Q_GET,
  Q_ADD,
  Q_CHECK,
  Q_WAIT,
  Q_NUMKEYS,
  Q_DELETE,
  Q_APPEND,
  Q_MULTI_GET,
  Q_MULTI_SET,
  Q_CANCEL_WAIT,
  Q_PING,
  Q_QPUSH,
  Q_QPOP,
  Q_QLEN
};
enum { D_UNKNOWN, D_V1, D_V2 };

struct conn {
  int fd;
  int dialect;
  struct tr_buf in, out;
  char** waits; /* keys this connection waits for (WAIT), NULL once set */
  size_t nwaits, left;
};

struct tr_store {
  int listen_fd, port;
  struct tr_kv_table table;
  struct conn* conns;
  size_t nconns, cap;
};

static struct tr_store* stores[TR_STORES_MAX];

static void conn_free_waits(struct conn* c) {
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
  conn_free_waits(c);
  s->conns[i] = s->conns[--s->nconns];
}

/* Queues a reply; it leaves from the poll loop (the socket is non-blocking). */
static void reply(struct conn* c, const void* p, size_t n) {
  if (tr_buf_put(&c->out, p, n) != 0) {
    c->dialect = -1; /* out of memory: drop the client */
  }
}

static void reply_u8(struct conn* c, uint8_t v) {
  reply(c, &v, 1);
}

static void reply_i64(struct conn* c, int64_t v) {
  reply(c, &v, sizeof v);
}

static void reply_bytes(struct conn* c, const void* p, size_t n) {
  uint64_t len = n;
  reply(c, &len, sizeof len);
  reply(c, p, n);
}

/* A value changed: wake the connections waiting for it. */
static void wake(struct tr_store* s, const char* key) {
  for (size_t i = 0; i < s->nconns; i++) {
    struct conn* c = &s->conns[i];
    for (size_t k = 0; k < c->nwaits && c->left > 0; k++) {
      if (c->waits[k] != NULL && strcmp(c->waits[k], key) == 0) {
        free(c->waits[k]);
        c->waits[k] = NULL;
        if (--c->left == 0) {
          reply_u8(c, 0); /* STOP_WAITING */
          conn_free_waits(c);
        }
      }
    }
  }
}

/* The parser: each reader returns 1 with the field taken, 0 when the bytes
 * are not all there yet, -1 on a malformed query. */
struct rd {
  const uint8_t* p;
  size_t n, off;
};

static int rd_raw(struct rd* r, void* out, size_t n) {
  if (r->n - r->off < n) {
    return 0;
  }
  memcpy(out, r->p + r->off, n);
  r->off += n;
  return 1;
}

/* A length-prefixed string or payload, returned NUL-terminated (malloc'd). */
static int rd_str(struct rd* r, char** out, size_t* len, size_t max) {
  uint64_t n;
  int got = rd_raw(r, &n, sizeof n);
  if (got <= 0) {
    return got;
  }
  if (n > max) {
    return -1;
  }
  if (r->n - r->off < n) {
    return 0;
  }
  char* s = malloc(n + 1);
  if (s == NULL) {
    return -1;
  }
  memcpy(s, r->p + r->off, n);
  s[n] = '\0';
  r->off += n;
  *out = s;
  if (len != NULL) {
    *len = n;
  }
  return 1;
}

#define TAKE(expr)     \
  do {                 \
    int got_ = (expr); \
    if (got_ <= 0) {   \
      rc = got_;       \
      goto done;       \
    }                  \
  } while (0)

/* Runs one query from the front of `r`; returns 1 done, 0 incomplete, -1 bad. */
static int run_query(struct tr_store* s, struct conn* c, struct rd* r) {
  struct tr_kv_table* t = &s->table;
  uint8_t q;
  char *key = NULL, *val = NULL, *val2 = NULL;
  char** keys = NULL;
  uint64_t nkeys = 0, got_keys = 0;
  size_t vlen = 0, v2len = 0;
  int rc = 1;
  TAKE(rd_raw(r, &q, 1));
  if (c->dialect == D_V1) { /* 1.x: no VALIDATE, SET..GETNUMKEYS one lower; 7 was WATCH_KEY */
    if (q == 7 || q > Q_CANCEL_WAIT) {
      return -1;
    }
    q = q < 7 ? (uint8_t)(q + 1) : q;
  }
  switch (q) {
    case Q_VALIDATE: {
      uint32_t magic;
      TAKE(rd_raw(r, &magic, sizeof magic));
      rc = magic == TR_STORE_MAGIC ? 1 : -1;
      break;
    }
    case Q_PING: {
      uint32_t nonce;
      TAKE(rd_raw(r, &nonce, sizeof nonce));
      reply(c, &nonce, sizeof nonce);
      break;
    }
    case Q_SET:
    case Q_APPEND:
    case Q_QPUSH:
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      TAKE(rd_str(r, &val, &vlen, TR_VALUE_MAX));
      if (q == Q_QPUSH) {
        rc = tr_kv_qpush(t, key, val, vlen) == 0 ? 1 : -1;
      } else if (q == Q_SET) {
        rc = tr_kv_set(t, key, val, vlen) == 0 ? 1 : -1;
      } else {
        rc = tr_kv_append(t, key, val, vlen) == 0 ? 1 : -1;
      }
      wake(s, key);
      break;
    case Q_CAS: {
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      TAKE(rd_str(r, &val, &vlen, TR_VALUE_MAX));
      TAKE(rd_str(r, &val2, &v2len, TR_VALUE_MAX));
      const struct tr_kv* e = tr_kv_cas(t, key, val, vlen, val2, v2len);
      if (e != NULL) {
        reply_bytes(c, e->val, e->vlen);
      } else { /* missing key, non-empty expectation: torch answers the expectation */
        reply_bytes(c, val, vlen);
      }
      wake(s, key);
      break;
    }
    case Q_GET:
    case Q_QLEN:
    case Q_QPOP:
    case Q_DELETE: {
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      if (q == Q_GET) {
        const struct tr_kv* e = tr_kv_find(t, key);
        reply_bytes(c, e != NULL ? (const void*)e->val : "", e != NULL ? e->vlen : 0);
      } else if (q == Q_QLEN) {
        reply_i64(c, (int64_t)tr_kv_qlen(t, key));
      } else if (q == Q_QPOP) {
        size_t n = tr_kv_qlen(t, key);
        reply_i64(c, (int64_t)n);
        if (n > 0) {
          val = tr_kv_qpop(t, key, &vlen);
          reply_bytes(c, val, vlen);
        }
      } else {
        reply_i64(c, tr_kv_delete(t, key));
      }
      break;
    }
    case Q_ADD: {
      int64_t delta, now;
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      TAKE(rd_raw(r, &delta, sizeof delta));
      if (tr_kv_add(t, key, delta, &now) != 0) {
        rc = -1;
        break;
      }
      reply_i64(c, now);
      wake(s, key);
      break;
    }
    case Q_NUMKEYS:
      reply_i64(c, (int64_t)t->count);
      break;
    case Q_CANCEL_WAIT:
      conn_free_waits(c);
      reply_u8(c, 1); /* WAIT_CANCELED */
      break;
    case Q_CHECK:
    case Q_WAIT:
    case Q_MULTI_GET:
    case Q_MULTI_SET: {
      TAKE(rd_raw(r, &nkeys, sizeof nkeys));
      if (nkeys > TR_KEYS_PER_QUERY) {
        rc = -1;
        break;
      }
      keys = calloc(nkeys + 1, sizeof *keys);
      if (keys == NULL) {
        rc = -1;
        break;
      }
      /* Parse everything before acting: a half-received query is retried whole. */
      char** vals = q == Q_MULTI_SET ? calloc(nkeys + 1, sizeof *vals) : NULL;
      size_t* lens = q == Q_MULTI_SET ? calloc(nkeys + 1, sizeof *lens) : NULL;
      for (; got_keys < nkeys && rc == 1; got_keys++) {
        int g = rd_str(r, &keys[got_keys], NULL, TR_KEY_MAX);
        if (g > 0 && q == Q_MULTI_SET) {
          g = vals != NULL && lens != NULL
                  ? rd_str(r, &vals[got_keys], &lens[got_keys], TR_VALUE_MAX)
                  : -1;
          if (g <= 0) {
            free(keys[got_keys]);
            keys[got_keys] = NULL;
          }
        }
        if (g <= 0) {
          rc = g;
          break;
        }
      }
      if (rc == 1) {
        size_t missing = 0;
        for (uint64_t k = 0; k < nkeys; k++) {
          if (q == Q_MULTI_SET) {
            rc = tr_kv_set(t, keys[k], vals[k], lens[k]) == 0 ? rc : -1;
            wake(s, keys[k]);
          } else if (q == Q_MULTI_GET) {
            const struct tr_kv* e = tr_kv_find(t, keys[k]);
            reply_bytes(c, e != NULL ? (const void*)e->val : "", e != NULL ? e->vlen : 0);
          } else if (tr_kv_find(t, keys[k]) == NULL && tr_kv_qlen(t, keys[k]) == 0) {
            missing++;
          }
        }
        if (q == Q_CHECK) {
          reply_u8(c, missing == 0 ? 0 : 1); /* READY / NOT_READY */
        } else if (q == Q_WAIT && missing == 0) {
          reply_u8(c, 0); /* STOP_WAITING */
        } else if (q == Q_WAIT) {
          conn_free_waits(c);
          for (uint64_t k = 0; k < nkeys; k++) {
            if (tr_kv_find(t, keys[k]) != NULL || tr_kv_qlen(t, keys[k]) > 0) {
              free(keys[k]);
              keys[k] = NULL;
            }
          }
          c->waits = keys;
          c->nwaits = nkeys;
          c->left = missing;
          keys = NULL;
        }
      }
      for (uint64_t k = 0; vals != NULL && k < got_keys; k++) {
        free(vals[k]);
      }
      free(vals);
      free(lens);
      break;
    }
    default:
      rc = -1;
  }
done:
  for (uint64_t k = 0; keys != NULL && k < nkeys; k++) {
    free(keys[k]);
  }
  free(keys);
  free(key);
  free(val);
  free(val2);
  return rc;
}

/* Runs every complete query the connection has sent. -1: drop it. */
static int serve_input(struct tr_store* s, struct conn* c) {
  for (;;) {
    if (c->left > 0) {
      return 0; /* a client blocked in WAIT sends nothing but CANCEL_WAIT */
    }
    struct rd r = {c->in.p, c->in.len, 0};
    if (c->dialect == D_UNKNOWN) { /* 2.x starts with VALIDATE (0) + magic; 1.x SET is 0 too */
      uint8_t head[5] = {0};
      if (rd_raw(&r, head, 1) == 0 || (head[0] == Q_VALIDATE && rd_raw(&r, head + 1, 4) == 0)) {
        return 0;
      }
      uint32_t magic;
      memcpy(&magic, head + 1, 4);
      c->dialect = head[0] == Q_VALIDATE && magic == TR_STORE_MAGIC ? D_V2 : D_V1;
      r.off = 0;
    }
    int rc = run_query(s, c, &r);
    if (rc < 0 || c->dialect < 0) {
      return -1;
    }
    if (rc == 0) {
      return 0;
    }
    tr_buf_drop(&c->in, r.off);
  }
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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
  /* Like torch: IPv6 on every address (IPv4 too, mapped), else IPv4. */
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  if (fd >= 0) {
    struct sockaddr_in6 a6 = {
        .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(fd, (struct sockaddr*)&a6, sizeof a6) != 0) {
      int e = errno;
      close(fd);
      fd = e == EADDRINUSE || e == EACCES ? -2 - e : -1;
    }
  }
  if (fd == -1) { /* no IPv6 here */
    struct sockaddr_in a4 = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind(fd, (struct sockaddr*)&a4, sizeof a4) != 0) {
        int e = errno;
        close(fd);
        fd = -2 - e;
      }
    }
  }
  if (fd < -1) {
    errno = -2 - fd;
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
  wake(s, key);
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
    if (serve_input(s, c) < 0) {
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
  struct pollfd fds[512];
  size_t n = tr_store_pollfds(fds, sizeof fds / sizeof fds[0]);
  if (n == 0) {
    if (timeout_ms > 0) {
      usleep((useconds_t)timeout_ms * 1000);
    }
    return;
  }
  if (poll(fds, n, timeout_ms) > 0) {
    tr_store_handle(fds, n);
  }
}
