/* A socket comm's failure: the first cause is kept, whichever thread saw
 * it, and every request of the comm, pending or later, fails with it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net/socket/comm.h"
#include "util/check.h"
#include "util/seal.h"

void tutti_socknet_kick(struct tutti_socknet_worker* w) {
  uint64_t one = 1;
  /* A full counter (never, in practice) still leaves the worker awake. */
  ssize_t n = write(w->efd, &one, sizeof one);
  (void)n;
}

ncclResult_t tutti_socknet_fail(struct tutti_socknet_comm* c, ncclResult_t code, const char* fmt,
                                ...) {
  pthread_mutex_lock(&c->fail_lock);
  if (__atomic_load_n(&c->failed, __ATOMIC_RELAXED) == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fail_text, sizeof c->fail_text, fmt, ap);
    va_end(ap);
    __atomic_store_n(&c->failed, (int)code, __ATOMIC_RELEASE);
    INFO(TUTTI_NET, "%s", c->fail_text);
  }
  pthread_mutex_unlock(&c->fail_lock);
  /* Workers waiting on a socket that will never move must drop their chunks. */
  if (__atomic_load_n(&c->started, __ATOMIC_ACQUIRE)) {
    for (int t = 0; t < c->nthreads; t++) {
      tutti_socknet_kick(&c->workers[t]);
    }
  }
  return code;
}

/* The record layer's sentence when it failed one of c's sockets (a wrong
 * key, an altered record), else strerror. */
static const char* why(const struct tutti_socknet_comm* c, int err) {
  const char* w = tutti_seal_why(c->ctrl);
  for (int i = 0; w == NULL && i < c->nsocks; i++) {
    w = tutti_seal_why(c->data[i]);
  }
  return w != NULL ? w : strerror(err);
}

ncclResult_t tutti_socknet_fail_io(struct tutti_socknet_comm* c, int err, const char* doing) {
  const char* side = c->send ? "send" : "receive";
  if (err == 0) {
    return tutti_socknet_fail(c, ncclRemoteError,
                              "socket network: %s closed the connection while this %s comm was %s: "
                              "the peer process exited or closed its comm; see its log",
                              c->peer, side, doing);
  }
  if (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH ||
      err == ENETUNREACH || err == ECONNABORTED) {
    return tutti_socknet_fail(
        c, ncclRemoteError,
        "socket network: the connection to %s broke while this %s comm was %s "
        "(%s): the peer process or its host died, or the network between "
        "them failed",
        c->peer, side, doing, why(c, err));
  }
  return tutti_socknet_fail(c, ncclSystemError,
                            "socket network: %s on the connection to %s failed: %s", doing, c->peer,
                            why(c, err));
}

ncclResult_t tutti_socknet_failed(struct tutti_socknet_comm* c) {
  int code = __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);
  if (code == 0) {
    return ncclSuccess;
  }
  /* The text is final once `failed` is set. */
  if (!c->reported) {
    c->reported = 1;
    return tutti_error((ncclResult_t)code, "%s", c->fail_text);
  }
  tutti_set_last_error(c->fail_text);
  return (ncclResult_t)code;
}
