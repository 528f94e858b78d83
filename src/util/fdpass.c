/* File descriptors between processes of one host (see fdpass.h). */
#define _GNU_SOURCE
#include "util/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* "\0name": an abstract address, gone with the last socket bound to it. */
static socklen_t abstract_addr(struct sockaddr_un* a, const char* name) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  size_t len = strnlen(name, sizeof a->sun_path - 2);
  memcpy(a->sun_path + 1, name, len);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

int tutti_fdbox_open(struct tutti_fdbox* box, const char* name) {
  box->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (box->sock < 0) {
    box->sock = -1;
    return errno;
  }
  struct sockaddr_un a;
  socklen_t len = abstract_addr(&a, name);
  if (bind(box->sock, (struct sockaddr*)&a, len) != 0) {
    int err = errno;
    tutti_fdbox_close(box);
    return err;
  }
  return 0;
}

int tutti_fdbox_send(struct tutti_fdbox* box, const char* name, int fd, uint64_t tag) {
  struct sockaddr_un a;
  socklen_t alen = abstract_addr(&a, name);
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct iovec iov = {&tag, sizeof tag};
  struct msghdr m = {0};
  m.msg_name = &a;
  m.msg_namelen = alen;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl.buf;
  m.msg_controllen = sizeof ctl.buf;
  struct cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  for (;;) {
    if (sendmsg(box->sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof tag) {
      return 0;
    }
    if (errno != EINTR) {
      return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
  }
}

int tutti_fdbox_recv(struct tutti_fdbox* box, int* fd, uint64_t* tag, int timeout_ms) {
  *fd = -1;
  struct pollfd p = {box->sock, POLLIN, 0};
  int r;
  while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (r < 0) {
    return errno;
  }
  if (r == 0) {
    return ETIMEDOUT;
  }
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  struct iovec iov = {tag, sizeof *tag};
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl.buf;
  m.msg_controllen = sizeof ctl.buf;
  ssize_t got;
  while ((got = recvmsg(box->sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (got < 0) {
    return errno;
  }
  struct cmsghdr* c = CMSG_FIRSTHDR(&m);
  int have = c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
             c->cmsg_len == CMSG_LEN(sizeof(int));
  if (have) {
    memcpy(fd, CMSG_DATA(c), sizeof *fd);
  }
  if (got != (ssize_t)sizeof *tag || !have || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    if (have) {
      close(*fd);
      *fd = -1;
    }
    return EPROTO;
  }
  return 0;
}

void tutti_fdbox_close(struct tutti_fdbox* box) {
  if (box->sock >= 0) {
    close(box->sock);
  }
  box->sock = -1;
}
