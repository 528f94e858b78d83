/* The listening side of socket connections: accepts sockets as they come,
 * reads their hellos, groups them by connection and hands out a receive
 * comm once a connection's control and data sockets are all in. A
 * connection that is not ours (bad hello) is dropped; one that says
 * nothing is dropped after TUTTI_TIMEOUT or when others need its place. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/socket/dev.h"
#include "net/socket/setup.h"
#include "util/check.h"
#include "util/seal.h"
#include "util/param.h"

#define MAX_PENDING 64 /* sockets whose hello is not in yet */
#define MAX_PARTS 16   /* connections with some sockets in */

struct pending {
  int fd;
  union tutti_socket_addr peer;
  struct tutti_socknet_hello hello;
  size_t got;
  double since;
};

struct part {
  uint64_t conn;
  int nsocks, have;
  int fd[TUTTI_SOCKNET_MAX_SOCKS + 1];
  union tutti_socket_addr peer; /* the control socket's */
  double since;
};

struct tutti_socknet_listen {
  int fd;
  uint64_t nonce;
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  struct pending pend[MAX_PENDING];
  int npend;
  struct part parts[MAX_PARTS];
  int nparts;
};

ncclResult_t tutti_socknet_listen(int dev, void* handle, struct tutti_socknet_listen** out) {
  *out = NULL;
  NCCLCHECK(tutti_socknet_dev_check(dev, "listen"));
  struct tutti_socknet_listen* l = calloc(1, sizeof *l);
  if (l == NULL) {
    return tutti_error(ncclSystemError, "socket network: out of memory for a listen comm");
  }
  union tutti_socket_addr addr = tutti_socknet_dev(dev)->addr;
  ncclResult_t res = tutti_socket_listen(&addr, &l->fd);
  if (res != ncclSuccess) {
    free(l);
    return res;
  }
  if (getrandom(&l->nonce, sizeof l->nonce, 0) != (ssize_t)sizeof l->nonce) {
    close(l->fd);
    free(l);
    return tutti_error(ncclSystemError, "socket network: getrandom failed for a listen: %s",
                       strerror(errno));
  }
  tutti_socket_format(&addr, l->where, sizeof l->where);
  struct tutti_socknet_handle* h = handle;
  memset(handle, 0, TUTTI_NET_HANDLE_BYTES);
  h->magic = htole64(TUTTI_SOCKNET_MAGIC);
  h->nonce = l->nonce;
  tutti_socket_addr_pack(&addr, h->addr);
  INFO(TUTTI_NET, "socket network: listening on %s (%s)", l->where, tutti_socknet_dev(dev)->name);
  *out = l;
  return ncclSuccess;
}

static void drop_pending(struct tutti_socknet_listen* l, int i, const char* why) {
  char who[TUTTI_SOCKET_ADDR_STRLEN];
  INFO(TUTTI_NET, "socket network: dropped a connection from %s to %s: %s",
       tutti_socket_format(&l->pend[i].peer, who, sizeof who), l->where, why);
  tutti_seal_close(l->pend[i].fd);
  l->pend[i] = l->pend[--l->npend];
}

static void drop_part(struct tutti_socknet_listen* l, int i, const char* why) {
  char who[TUTTI_SOCKET_ADDR_STRLEN];
  INFO(TUTTI_NET, "socket network: dropped a connection from %s to %s (%d of %d sockets in): %s",
       tutti_socket_format(&l->parts[i].peer, who, sizeof who), l->where, l->parts[i].have,
       l->parts[i].nsocks + 1, why);
  for (int s = 0; s <= l->parts[i].nsocks; s++) {
    if (l->parts[i].fd[s] >= 0) {
      tutti_seal_close(l->parts[i].fd[s]);
    }
  }
  l->parts[i] = l->parts[--l->nparts];
}

static int oldest_pending(const struct tutti_socknet_listen* l) {
  int o = 0;
  for (int i = 1; i < l->npend; i++) {
    o = l->pend[i].since < l->pend[o].since ? i : o;
  }
  return o;
}

/* Takes every connection waiting on the listening socket. */
static ncclResult_t take_new(struct tutti_socknet_listen* l, double now) {
  for (;;) {
    union tutti_socket_addr peer;
    int fd = tutti_socket_try_accept(l->fd, &peer);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return ncclSuccess;
      }
      if (errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      return tutti_error(ncclSystemError, "socket network: accepting on %s failed: %s", l->where,
                         strerror(errno));
    }
    if (l->npend == MAX_PENDING) {
      drop_pending(l, oldest_pending(l), "its hello did not come while newer connections waited");
    }
    l->pend[l->npend++] = (struct pending){.fd = fd, .peer = peer, .since = now};
  }
}

/* A hello that is all in: why it is refused, or NULL once its socket is in
 * its connection's part (which takes the fd). */
static const char* place(struct tutti_socknet_listen* l, const struct pending* p) {
  const struct tutti_socknet_hello* h = &p->hello;
  const int nsocks = le16toh(h->nsocks), index = le16toh(h->index);
  if (le64toh(h->magic) != TUTTI_SOCKNET_MAGIC) {
    return "it is not a tutti socket network peer (bad magic)";
  }
  if (le16toh(h->version) != TUTTI_SOCKNET_VERSION) {
    return "it speaks another version of tutti's socket network";
  }
  if (h->nonce != l->nonce) {
    return "it did not read this listen's handle (wrong nonce)";
  }
  if (nsocks > TUTTI_SOCKNET_MAX_SOCKS || index > nsocks || h->zero != 0) {
    return "its hello is malformed";
  }
  int i = 0;
  while (i < l->nparts && l->parts[i].conn != h->conn) {
    i++;
  }
  if (i == l->nparts) {
    if (l->nparts == MAX_PARTS) {
      int o = 0;
      for (int k = 1; k < l->nparts; k++) {
        o = l->parts[k].since < l->parts[o].since ? k : o;
      }
      drop_part(l, o, "its other sockets did not come while newer connections waited");
      i = l->nparts;
    }
    struct part* n = &l->parts[l->nparts++];
    memset(n, 0, sizeof *n);
    n->conn = h->conn;
    n->nsocks = nsocks;
    n->since = p->since;
    for (int s = 0; s <= TUTTI_SOCKNET_MAX_SOCKS; s++) {
      n->fd[s] = -1;
    }
  }
  struct part* t = &l->parts[i];
  if (t->nsocks != nsocks || t->fd[index] >= 0) {
    return "its hello contradicts the other sockets of its connection";
  }
  t->fd[index] = p->fd;
  t->have++;
  if (index == 0) {
    t->peer = p->peer;
  }
  return NULL;
}

/* Reads what came of the pending sockets' hellos. */
static void read_hellos(struct tutti_socknet_listen* l, double now) {
  for (int i = l->npend - 1; i >= 0; i--) {
    struct pending* p = &l->pend[i];
    ssize_t n = tutti_seal_recv(p->fd, (char*)&p->hello + p->got, sizeof p->hello - p->got);
    if (n > 0) {
      p->got += (size_t)n;
    } else if (n == 0) {
      drop_pending(l, i, "it closed before its hello was in");
      continue;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      drop_pending(l, i, tutti_seal_strerror(p->fd, errno));
      continue;
    }
    if (p->got == sizeof p->hello) {
      const char* why = place(l, p);
      if (why != NULL) {
        drop_pending(l, i, why);
      } else {
        l->pend[i] = l->pend[--l->npend];
      }
    } else if (now - p->since > tutti_timeout_s()) {
      drop_pending(l, i, "its hello did not come within TUTTI_TIMEOUT");
    }
  }
}

ncclResult_t tutti_socknet_accept(struct tutti_socknet_listen* l, struct tutti_socknet_comm** out) {
  *out = NULL;
  const double now = tutti_socket_now();
  NCCLCHECK(take_new(l, now));
  read_hellos(l, now);
  for (int i = l->nparts - 1; i >= 0; i--) {
    struct part* t = &l->parts[i];
    if (t->have == t->nsocks + 1) {
      char peer[TUTTI_SOCKET_ADDR_STRLEN];
      tutti_socket_format(&t->peer, peer, sizeof peer);
      NCCLCHECK(tutti_socknet_comm_new(0, t->fd[0], t->fd + 1, t->nsocks, peer, out));
      l->parts[i] = l->parts[--l->nparts];
      return ncclSuccess;
    }
    if (now - t->since > tutti_timeout_s()) {
      drop_part(l, i, "its other sockets did not come within TUTTI_TIMEOUT");
    }
  }
  return ncclSuccess;
}

void tutti_socknet_listen_close(struct tutti_socknet_listen* l) {
  if (l == NULL) {
    return;
  }
  while (l->npend > 0) {
    tutti_seal_close(l->pend[l->npend - 1].fd);
    l->npend--;
  }
  while (l->nparts > 0) {
    drop_part(l, l->nparts - 1, "the listen comm was closed");
  }
  close(l->fd);
  free(l);
}
