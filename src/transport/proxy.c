/* A proxy's thread (see proxy.h): its start, its loop and its stop. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "transport/proxy.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/check.h"
#include "util/proc.h"
#include "util/socket.h"

void tutti_proxy_poke(struct tutti_proxy* px) {
  uint64_t one = 1;
  ssize_t n = write(px->evfd, &one, sizeof one);
  (void)n; /* a full counter already means "wake up" */
}

void tutti_proxy_wake(struct tutti_proxy* px) {
  if (__atomic_load_n(&px->sleeping, __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&px->sleeping, 0, __ATOMIC_SEQ_CST);
    tutti_proxy_poke(px);
  }
}

static void* proxy_main(void* arg) {
  struct tutti_proxy* px = arg;
  const struct tutti_proxy_ops* o = px->ops;
  double last_move = tutti_socket_now();
  for (;;) {
    const int leaving = (int)__atomic_load_n(&px->stop, __ATOMIC_SEQ_CST);
    if (leaving == 2 && o->abort != NULL) {
      o->abort(px);
      break;
    }
    const int moved = o->pump(px, leaving);
    const double now = tutti_socket_now();
    if (moved) {
      last_move = now;
    }
    if (o->tick != NULL) {
      o->tick(px, leaving, now);
    }
    if (leaving && (leaving == 2 || o->flushed(px) || now - last_move > px->flush_s)) {
      if (o->finish != NULL) {
        o->finish(px);
      }
      break;
    }
    if (moved || now - last_move < o->spin_s || (o->busy != NULL && o->busy(px, leaving))) {
      continue;
    }
    /* Announce, look once more, then sleep: a poke after the announcement
     * is never lost (the eventfd keeps it). */
    __atomic_store_n(&px->sleeping, 1, __ATOMIC_SEQ_CST);
    if (o->idle(px, leaving, now - last_move)) {
      last_move = tutti_socket_now();
    }
    __atomic_store_n(&px->sleeping, 0, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

ncclResult_t tutti_proxy_start(struct tutti_proxy* px) {
  px->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (px->evfd < 0) {
    return tutti_error(ncclSystemError, "rank %d: cannot prepare the %s proxy thread: %s", px->rank,
                       px->ops->what, strerror(errno));
  }
  const int err = tutti_thread_start(&px->thread, proxy_main, px, px->ops->thread);
  if (err != 0) {
    return tutti_error(ncclSystemError, "rank %d: cannot start the %s proxy thread: %s", px->rank,
                       px->ops->what, strerror(err));
  }
  px->started = 1;
  return ncclSuccess;
}

void tutti_proxy_stop(struct tutti_proxy* px, int abort) {
  if (px->started) {
    /* 2: aborting, nothing is flushed to peers that may never read it. */
    __atomic_store_n(&px->stop, abort ? 2 : 1, __ATOMIC_SEQ_CST);
    tutti_proxy_poke(px);
    pthread_join(px->thread, NULL);
    px->started = 0;
  }
  if (px->evfd >= 0) {
    close(px->evfd);
    px->evfd = -1;
  }
}
