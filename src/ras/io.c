/* The listener's poll set and its non-blocking transfers, all through the
 * record layer (util/seal.h): encrypted when ncclSetEncryption set a key,
 * plain send and recv otherwise. */
#include <errno.h>
#include <stdlib.h>

#include "ras/internal.h"
#include "util/seal.h"

void tutti_ras_poll_add(struct tutti_ras_poll* ps, int fd, short events,
                        void (*on)(void* arg, short revents), void* arg) {
  if (ps->n == ps->cap) {
    const int cap = ps->cap ? 2 * ps->cap : 64;
    struct pollfd* fds = realloc(ps->fds, (size_t)cap * sizeof *fds);
    void (**ons)(void*, short) = realloc(ps->on, (size_t)cap * sizeof *ons);
    void** args = realloc(ps->arg, (size_t)cap * sizeof *args);
    ps->fds = fds != NULL ? fds : ps->fds;
    ps->on = ons != NULL ? ons : ps->on;
    ps->arg = args != NULL ? args : ps->arg;
    if (fds == NULL || ons == NULL || args == NULL) {
      return; /* not watched this round; its deadline still ends it */
    }
    ps->cap = cap;
  }
  ps->fds[ps->n] = (struct pollfd){fd, events, 0};
  ps->on[ps->n] = on;
  ps->arg[ps->n] = arg;
  ps->n++;
  /* Bytes the record layer already holds wake no poll: run again at once. */
  if ((events & POLLIN) && tutti_seal_has_pending(fd)) {
    ps->wake = 0;
  }
}

void tutti_ras_poll_wake(struct tutti_ras_poll* ps, double when) {
  if (when < ps->wake) {
    ps->wake = when;
  }
}

static int again(void) {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

int tutti_ras_read(int fd, void* buf, size_t want, size_t* got) {
  while (*got < want) {
    const ssize_t n = tutti_seal_recv(fd, (char*)buf + *got, want - *got);
    if (n > 0) {
      *got += (size_t)n;
    } else if (n == 0 || !again()) {
      return -1;
    } else {
      return 0;
    }
  }
  return 1;
}

int tutti_ras_write(int fd, const void* buf, size_t len, size_t* off) {
  while (*off < len) {
    const ssize_t n = tutti_seal_send(fd, (const char*)buf + *off, len - *off);
    if (n > 0) {
      *off += (size_t)n;
    } else if (n == 0 || !again()) {
      return -1;
    } else {
      return 0;
    }
  }
  return 1;
}

int tutti_ras_sealed(int fd) {
  const int rc = tutti_seal_handshake(fd);
  return rc == 0 ? 1 : rc == EAGAIN ? 0 : -1;
}
