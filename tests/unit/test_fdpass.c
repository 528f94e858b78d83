/* Descriptors between processes (util/fdpass.h): a memfd handed to a child
 * process and one handed back, what the receiver can read through them,
 * tags, a full queue, a missing box, a taken name, timeouts, and no
 * descriptor left open. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util/fdpass.h"

static int count_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++) {
    n += fcntl(fd, F_GETFD) >= 0;
  }
  return n;
}

static int memfd_with(const char* text) {
  int fd = memfd_create("tutti-test", MFD_CLOEXEC);
  if (fd >= 0 && write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

static int reads(int fd, const char* want) {
  char buf[64] = {0};
  return pread(fd, buf, sizeof buf - 1, 0) == (ssize_t)strlen(want) && strcmp(buf, want) == 0;
}

static void names(char* parent, char* child, size_t len) {
  snprintf(parent, len, "tutti-test-fdpass-%d-parent", (int)getpid());
  snprintf(child, len, "tutti-test-fdpass-%d-child", (int)getpid());
}

/* The child: receives the parent's memfd, checks it, answers with its own. */
static int child_main(const char* parent, const char* child) {
  struct tutti_fdbox box;
  if (tutti_fdbox_open(&box, child) != 0) {
    return 10;
  }
  int fd = -1;
  uint64_t tag = 0;
  if (tutti_fdbox_recv(&box, &fd, &tag, 10000) != 0) {
    return 11;
  }
  if (tag != 0x1234567890abcdefull || !reads(fd, "from the parent")) {
    return 12;
  }
  if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC)) {
    return 13;
  }
  int mine = memfd_with("from the child");
  int err;
  while ((err = tutti_fdbox_send(&box, parent, mine, 7)) == ECONNREFUSED) {
    usleep(1000); /* the parent binds after forking */
  }
  close(mine);
  close(fd);
  tutti_fdbox_close(&box);
  return err == 0 ? 0 : 14;
}

static void test_two_processes(void) {
  char parent[100], child[100];
  names(parent, child, sizeof parent);
  const int before = count_fds();
  pid_t pid = fork();
  if (pid == 0) {
    _exit(child_main(parent, child));
  }
  struct tutti_fdbox box;
  CHECK(tutti_fdbox_open(&box, parent) == 0, "binding the parent's box");
  int fd = memfd_with("from the parent");
  int err;
  for (int i = 0;
       (err = tutti_fdbox_send(&box, child, fd, 0x1234567890abcdefull)) == ECONNREFUSED &&
       i < 10000;
       i++) {
    usleep(1000); /* until the child has bound its box */
  }
  CHECK(err == 0, "send to the child: %s", strerror(err));
  close(fd); /* the child holds its own reference */
  int got = -1;
  uint64_t tag = 0;
  err = tutti_fdbox_recv(&box, &got, &tag, 10000);
  CHECK(err == 0, "receive from the child: %s", strerror(err));
  CHECK(tag == 7, "tag %llu", (unsigned long long)tag);
  CHECK(got >= 0 && reads(got, "from the child"), "the child's memfd reads back");
  if (got >= 0) {
    close(got);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d", WEXITSTATUS(status));
  tutti_fdbox_close(&box);
  CHECK(count_fds() == before, "descriptors open: %d, before: %d", count_fds(), before);
}

static void test_errors(void) {
  char a[100], b[100];
  names(a, b, sizeof a);
  const int before = count_fds();
  struct tutti_fdbox box, twin;
  CHECK(tutti_fdbox_open(&box, a) == 0, "bind");
  CHECK(tutti_fdbox_open(&twin, a) == EADDRINUSE, "the same name twice");
  CHECK(twin.sock == -1, "a failed box holds no socket");
  int fd = memfd_with("x");
  CHECK(tutti_fdbox_send(&box, b, fd, 1) == ECONNREFUSED, "nobody has that box");
  /* A full queue says EAGAIN; receiving one makes room again. */
  int sent = 0, err = 0;
  while ((err = tutti_fdbox_send(&box, a, fd, (uint64_t)sent)) == 0 && sent < 100000) {
    sent++;
  }
  CHECK(err == EAGAIN && sent > 0, "queue full after %d: %s", sent, strerror(err));
  int got = -1;
  uint64_t tag = 99;
  CHECK(tutti_fdbox_recv(&box, &got, &tag, 1000) == 0 && tag == 0, "first in, first out");
  close(got);
  CHECK(tutti_fdbox_send(&box, a, fd, 5) == 0, "room after one was received");
  for (int i = 0; i < sent; i++) {
    if (tutti_fdbox_recv(&box, &got, &tag, 1000) == 0) {
      close(got);
    }
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK(tutti_fdbox_recv(&box, &got, &tag, 50) == ETIMEDOUT && got == -1, "empty box times out");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  CHECK(ms >= 45, "waited %.1f ms of 50", ms);
  close(fd);
  tutti_fdbox_close(&box);
  tutti_fdbox_close(&box); /* twice is harmless */
  CHECK(count_fds() == before, "descriptors open: %d, before: %d", count_fds(), before);
  /* The name is free again once its socket is closed. */
  CHECK(tutti_fdbox_open(&box, a) == 0, "rebind after close");
  tutti_fdbox_close(&box);
}

int main(void) {
  test_two_processes();
  test_errors();
  return test_summary("fdpass");
}
