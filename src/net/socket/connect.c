/* The connecting side of a socket connection: the control socket and every
 * data socket connect at once, each sends its hello, and the send comm
 * exists once all of them are through. Never waits: the progress stays in
 * the caller's handle between calls. */
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

struct tutti_socknet_connecting {
  char peer[TUTTI_SOCKET_ADDR_STRLEN];
  int nsocks;
  int fd[TUTTI_SOCKNET_MAX_SOCKS + 1]; /* [0]: control */
  int connected[TUTTI_SOCKNET_MAX_SOCKS + 1];
  size_t sent[TUTTI_SOCKNET_MAX_SOCKS + 1]; /* bytes of its hello */
  struct tutti_socknet_hello hello;         /* index filled per socket */
  double deadline;
};

static void drop(struct tutti_socknet_connecting* st) {
  for (int i = 0; i <= st->nsocks; i++) {
    if (st->fd[i] >= 0) {
      tutti_seal_close(st->fd[i]);
    }
  }
  free(st);
}

static ncclResult_t start(const struct tutti_socknet_handle* h,
                          struct tutti_socknet_connecting** out) {
  union tutti_socket_addr addr;
  if (tutti_socket_addr_unpack(h->addr, &addr) != 0) {
    return tutti_error(ncclInvalidArgument,
                       "socket network: the handle given to connect holds no IPv4 or IPv6 "
                       "address: it was damaged on its way from the listening peer");
  }
  struct tutti_socknet_connecting* st = calloc(1, sizeof *st);
  if (st == NULL) {
    return tutti_error(ncclSystemError, "socket network: out of memory connecting");
  }
  tutti_socket_format(&addr, st->peer, sizeof st->peer);
  st->nsocks = tutti_socknet_nsocks();
  st->deadline = tutti_socket_now() + tutti_timeout_s();
  uint64_t conn = 0;
  if (getrandom(&conn, sizeof conn, 0) != (ssize_t)sizeof conn) {
    ncclResult_t res =
        tutti_error(ncclSystemError, "socket network: getrandom failed connecting to %s: %s",
                    st->peer, strerror(errno));
    free(st);
    return res;
  }
  st->hello = (struct tutti_socknet_hello){.magic = htole64(TUTTI_SOCKNET_MAGIC),
                                           .nonce = h->nonce,
                                           .conn = conn,
                                           .nsocks = htole16((uint16_t)st->nsocks),
                                           .version = htole16(TUTTI_SOCKNET_VERSION)};
  for (int i = 0; i <= st->nsocks; i++) {
    st->fd[i] = -1;
  }
  for (int i = 0; i <= st->nsocks; i++) {
    int err = tutti_socket_connect_start(&addr, &st->fd[i]);
    if (err != 0) {
      st->fd[i] = -1;
      ncclResult_t res =
          tutti_error(ncclSystemError, "socket network: cannot open socket %d of %d to %s: %s",
                      i + 1, st->nsocks + 1, st->peer, strerror(err));
      drop(st);
      return res;
    }
  }
  *out = st;
  return ncclSuccess;
}

/* One look at every socket: 1 all through, 0 not yet, or an errno value
 * (negated) with *which the socket that failed. */
static int step(struct tutti_socknet_connecting* st, int* which) {
  int through = 0;
  for (int i = 0; i <= st->nsocks; i++) {
    *which = i;
    if (!st->connected[i]) {
      int err = tutti_socket_connect_poll(st->fd[i]);
      if (err == EINPROGRESS) {
        continue;
      }
      if (err != 0) {
        return -err;
      }
      st->connected[i] = 1;
    }
    struct tutti_socknet_hello hello = st->hello;
    hello.index = htole16((uint16_t)i);
    while (st->sent[i] < sizeof hello) {
      ssize_t n =
          tutti_seal_send(st->fd[i], (char*)&hello + st->sent[i], sizeof hello - st->sent[i]);
      if (n > 0) {
        st->sent[i] += (size_t)n;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else if (n < 0 && errno != EINTR) {
        return -errno;
      }
    }
    through += st->sent[i] == sizeof hello;
  }
  return through == st->nsocks + 1;
}

ncclResult_t tutti_socknet_connect(int dev, void* handle, struct tutti_socknet_comm** out) {
  *out = NULL;
  NCCLCHECK(tutti_socknet_dev_check(dev, "connect"));
  struct tutti_socknet_handle* h = handle;
  if (le64toh(h->magic) != TUTTI_SOCKNET_MAGIC) {
    return tutti_error(ncclInvalidArgument,
                       "socket network: connect was given a handle that no listen of tutti's "
                       "socket network made (it starts with 0x%016llx): the two sides use "
                       "different networks or the handle was damaged",
                       (unsigned long long)le64toh(h->magic));
  }
  if (h->stage == NULL) {
    NCCLCHECK(start(h, &h->stage));
  }
  struct tutti_socknet_connecting* st = h->stage;
  int which = 0;
  const int rc = step(st, &which);
  if (rc < 0 || (rc == 0 && tutti_socket_now() > st->deadline)) {
    ncclResult_t res =
        rc < 0 ? tutti_error(ncclRemoteError,
                             "socket network: cannot connect socket %d of %d to %s: %s (is the "
                             "peer's listen comm still open?)",
                             which + 1, st->nsocks + 1, st->peer, strerror(-rc))
               : tutti_error(ncclRemoteError,
                             "socket network: the connection to %s was not through after %.0f s "
                             "(TUTTI_TIMEOUT): the peer's host does not answer",
                             st->peer, tutti_timeout_s());
    h->stage = NULL;
    drop(st);
    return res;
  }
  if (rc == 0) {
    return ncclSuccess;
  }
  ncclResult_t res = tutti_socknet_comm_new(1, st->fd[0], st->fd + 1, st->nsocks, st->peer, out);
  if (res == ncclSuccess) {
    st->nsocks = -1; /* the comm owns the sockets now */
  }
  h->stage = NULL;
  drop(st);
  return res;
}
