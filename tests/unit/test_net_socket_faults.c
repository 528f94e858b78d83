/* The socket network's faults: strangers at the listen port do not break
 * accept, a connect to a closed listen fails, a peer killed mid-stream
 * fails pending and later requests naming its address (either direction),
 * and comms closed with requests pending neither hang nor leak. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "net/socket/socknet.h"
#include "net/socket/comm.h"
#include "net_pair.h"
#include "nccl.h"
#include "util/check.h"

static struct tutti_net* net;

#define BIG (16u << 20)

/* A raw socket to the address in a listen handle. */
static int raw_connect(const void* handle) {
  const struct tutti_socknet_handle* h = handle;
  union tutti_socket_addr a;
  if (tutti_socket_addr_unpack(h->addr, &a) != 0) {
    return -1;
  }
  int fd = socket(a.sa.sa_family, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, &a.sa, tutti_socket_addr_len(&a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void test_strangers(void) {
  char handle[TUTTI_NET_HANDLE_BYTES];
  void* l = NULL;
  CHECK_NCCL(net->ops->listen(net, 0, handle, &l));
  int garbage = raw_connect(handle), silent = raw_connect(handle), liar = raw_connect(handle);
  CHECK(garbage >= 0 && silent >= 0 && liar >= 0, "strangers connected");
  char junk[64];
  memset(junk, 'x', sizeof junk);
  CHECK(write(garbage, junk, sizeof junk) == (ssize_t)sizeof junk, "garbage written");
  /* A hello with the right magic but not this listen's nonce. */
  struct tutti_socknet_hello fake = {
      .magic = TUTTI_SOCKNET_MAGIC, .nonce = 12345, .nsocks = 1, .version = TUTTI_SOCKNET_VERSION};
  CHECK(write(liar, &fake, sizeof fake) == (ssize_t)sizeof fake, "lie written");
  void* r = NULL;
  for (int i = 0; i < 50 && r == NULL; i++) {
    CHECK_NCCL(net->ops->accept(net, l, &r));
    usleep(1000);
  }
  CHECK(r == NULL, "no stranger is taken as a peer");
  void* s = NULL;
  CHECK_NCCL(np_join(net, l, handle, &s, &r));
  if (s != NULL && r != NULL) {
    int v = 99, w = 0;
    void* data = &w;
    void* reqs[2] = {NULL, NULL};
    CHECK_NCCL(net->ops->irecv(net, r, 1, &data, (size_t[]){sizeof w}, (int[]){0}, NULL, &reqs[1]));
    CHECK_NCCL(net->ops->isend(net, s, &v, sizeof v, 0, NULL, &reqs[0]));
    CHECK_NCCL(np_wait(net, reqs, 2, NULL, 10));
    CHECK(w == 99, "the real peer's message arrived: %d", w);
  }
  char byte;
  CHECK(read(garbage, &byte, 1) <= 0, "the garbage connection was closed");
  net->ops->close_send(net, s);
  net->ops->close_recv(net, r);
  net->ops->close_listen(net, l);
  close(garbage);
  close(silent);
  close(liar);
  /* The listen is gone: a connect fails, naming where it tried. */
  void* s2 = NULL;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 1000 && res == ncclSuccess && s2 == NULL; i++) {
    res = net->ops->connect(net, 0, handle, &s2);
  }
  CHECK(res != ncclSuccess && strstr(tutti_last_error(), "127.0.0.1") != NULL,
        "connect to a closed listen: %d, %s", (int)res, tutti_last_error());
}

/* A child that sends one whole message, then half a chunk of the next
 * (written under the comm, as a sender dying in the middle would leave it)
 * and waits to be killed. */
static void child_sender(void* handle) {
  void* c = NULL;
  while (c == NULL) {
    if (net->ops->connect(net, 0, handle, &c) != ncclSuccess) {
      _exit(2);
    }
  }
  char* buf = malloc(BIG);
  memset(buf, 1, BIG);
  void* req = NULL;
  if (net->ops->isend(net, c, buf, BIG, 0, NULL, &req) != ncclSuccess ||
      np_wait(net, &req, 1, NULL, 60) != ncclSuccess) {
    _exit(3);
  }
  /* Striped over the data sockets, or whole on the control socket when
   * the connection has none. */
  struct tutti_socknet_comm* sc = c;
  struct tutti_socknet_hdr h = {BIG, 0,
                                TUTTI_SOCKNET_HDR_CHECK | (sc->nsocks ? TUTTI_SOCKNET_STRIPED : 0)};
  if (write(sc->ctrl, &h, sizeof h) != (ssize_t)sizeof h ||
      write(sc->nsocks ? sc->data[sc->next_sock] : sc->ctrl, buf, 1000) != 1000) {
    _exit(4);
  }
  for (;;) {
    pause();
  }
}

/* A child that listens (its handle goes up `pipefd`), receives one message
 * and then reads no more. */
static void child_receiver(int pipefd) {
  char h2[TUTTI_NET_HANDLE_BYTES];
  void *l2 = NULL, *r = NULL;
  if (net->ops->listen(net, 0, h2, &l2) != ncclSuccess ||
      write(pipefd, h2, sizeof h2) != (ssize_t)sizeof h2) {
    _exit(2);
  }
  while (r == NULL) {
    if (net->ops->accept(net, l2, &r) != ncclSuccess) {
      _exit(2);
    }
  }
  char* buf = malloc(BIG);
  void* req = NULL;
  void* data = buf;
  if (net->ops->irecv(net, r, 1, &data, (size_t[]){BIG}, (int[]){0}, NULL, &req) != ncclSuccess ||
      np_wait(net, &req, 1, NULL, 60) != ncclSuccess) {
    _exit(3);
  }
  for (;;) {
    pause();
  }
}

/* The peer (a child process) is killed in the middle of the stream: the
 * pending requests and a later one fail with ncclRemoteError naming it. */
static void test_peer_death(int parent_sends) {
  enum { NSEND = 8 }; /* more than the socket buffers hold */
  char handle[TUTTI_NET_HANDLE_BYTES];
  void* l = NULL;
  CHECK_NCCL(net->ops->listen(net, 0, handle, &l));
  int pipefd[2];
  CHECK(pipe(pipefd) == 0, "pipe");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    parent_sends ? child_receiver(pipefd[1]) : child_sender(handle);
  }
  void* c = NULL;
  const double end = np_now() + 10;
  char h2[TUTTI_NET_HANDLE_BYTES];
  CHECK(!parent_sends || read(pipefd[0], h2, sizeof h2) == (ssize_t)sizeof h2, "child's handle");
  while (c == NULL && np_now() < end) {
    CHECK_NCCL(parent_sends ? net->ops->connect(net, 0, h2, &c) : net->ops->accept(net, l, &c));
  }
  CHECK(c != NULL, "connected to the child");
  char* buf = malloc(BIG);
  memset(buf, 2, BIG);
  void* data = buf;
  void* reqs[NSEND] = {NULL};
  ncclResult_t res = ncclInternalError;
  if (c != NULL) {
    /* One message through, then the stream stops in the middle of the next. */
    for (int k = 0; k < 2; k++) {
      for (int i = 0; i < (parent_sends ? NSEND / 2 * k + 1 : 1); i++) {
        CHECK_NCCL(parent_sends ? net->ops->isend(net, c, buf, BIG, 0, NULL, &reqs[i])
                                : net->ops->irecv(net, c, 1, &data, (size_t[]){BIG}, (int[]){0},
                                                  NULL, &reqs[i]));
      }
      if (k == 0) {
        CHECK_NCCL(np_wait(net, reqs, NSEND, NULL, 20));
      }
    }
    CHECK(np_wait(net, reqs, NSEND, NULL, 0.3) == ncclInternalError, "the stream is stuck");
    kill(pid, SIGKILL);
    const double t0 = np_now();
    res = np_wait(net, reqs, NSEND, NULL, 20);
    CHECK(np_now() - t0 < 5, "the failure took %.1f s", np_now() - t0);
  }
  CHECK(res == ncclRemoteError, "%s: a pending request fails with ncclRemoteError: %d",
        parent_sends ? "sending" : "receiving", (int)res);
  CHECK(strstr(tutti_last_error(), "127.0.0.1") != NULL, "the sentence names the peer: %s",
        tutti_last_error());
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status), "the child was killed (status %d)", status);
  /* The other pending ones and a later one fail the same way. */
  if (c != NULL) {
    void* later = NULL;
    CHECK_NCCL(parent_sends
                   ? net->ops->isend(net, c, buf, 10, 0, NULL, &later)
                   : net->ops->irecv(net, c, 1, &data, (size_t[]){10}, (int[]){0}, NULL, &later));
    res = np_wait(net, &later, 1, NULL, 10);
    CHECK(res == ncclRemoteError, "a later request fails too: %d", (int)res);
    for (int i = 0; i < NSEND; i++) {
      if (reqs[i] != NULL) {
        res = np_wait(net, &reqs[i], 1, NULL, 10);
        CHECK(res == ncclRemoteError, "pending request %d fails too: %d", i, (int)res);
      }
    }
    parent_sends ? net->ops->close_send(net, c) : net->ops->close_recv(net, c);
  }
  free(buf);
  close(pipefd[0]);
  close(pipefd[1]);
  net->ops->close_listen(net, l);
}

/* Comms closed with receives nobody sends to, and sends nobody receives. */
static void test_close_pending(void) {
  void *s = NULL, *r = NULL;
  CHECK_NCCL(np_pair(net, &s, &r));
  char* big = malloc(BIG);
  char* small = malloc(100);
  memset(big, 3, BIG);
  void* reqs[8] = {NULL};
  void* data[2] = {big, small};
  for (int i = 0; i < 4; i++) {
    CHECK_NCCL(net->ops->isend(net, s, big, BIG, 0, NULL, &reqs[i]));
  }
  CHECK_NCCL(net->ops->irecv(net, r, 2, data, (size_t[]){BIG, 100}, (int[]){1, 2}, NULL, &reqs[4]));
  for (int i = 0; i < 20; i++) {
    int done;
    net->ops->test(net, reqs[0], &done, NULL);
    net->ops->test(net, reqs[4], &done, NULL);
  }
  const double t0 = np_now();
  CHECK_NCCL(net->ops->close_send(net, s));
  CHECK_NCCL(net->ops->close_recv(net, r));
  CHECK(np_now() - t0 < 2, "closing took %.2f s", np_now() - t0);
  free(big);
  free(small);
}

int main(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  /* Workers whatever the cores (none by default below 4); the suite also
   * runs this with NCCL_SOCKET_NTHREADS=0 (tests/net/tests.cmake). */
  setenv("NCCL_SOCKET_NTHREADS", "4", 0);
  signal(SIGPIPE, SIG_IGN);
  CHECK_NCCL(tutti_socknet_open(0, &net));
  np_settle();
  const int fds0 = np_count("fd"), tasks0 = np_count("task");
  test_strangers();
  test_peer_death(0);
  test_peer_death(1);
  test_close_pending();
  CHECK(np_count("fd") == fds0, "fds: %d before, %d after", fds0, np_count("fd"));
  CHECK(np_count("task") == tasks0, "threads: %d before, %d after", tasks0, np_count("task"));
  net->ops->finalize(net);
  return test_summary("net_socket_faults");
}
