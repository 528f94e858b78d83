/* Socket toolkit: NCCL_SOCKET_IFNAME matching on made-up names, address
 * parsing and formatting, interface choice, transfers with deadlines, and
 * the heartbeat's view of a peer that stopped reading. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util/check.h"
#include "topo/ifaces.h"
#include "util/socket.h"

static void test_match(void) {
  static const struct {
    const char* spec;
    const char* name;
    int want;
  } cases[] = {
      {NULL, "eth0", 1},
      {NULL, "enp1s0", 1},
      {NULL, "ib0", 1},
      {NULL, "bridge0", 1},
      {NULL, "docker0", 0},
      {NULL, "veth12ab", 0},
      {NULL, "virbr0", 0},
      {NULL, "br-1a2b", 0},
      {NULL, "lo", 0},
      {"", "eth0", 1},
      {"", "lo", 0},
      {"eth", "eth0", 1},
      {"eth", "eth10", 1},
      {"eth", "ib0", 0},
      {"eth", "lo", 0},
      {"eth,ib", "ib0", 1},
      {"eth,ib", "enp1", 0},
      {"eth,", "eth1", 1},
      {"lo", "lo", 1},
      {"^eth", "eth0", 0},
      {"^eth", "ib0", 1},
      {"^eth", "lo", 1},
      {"^eth,ib", "ib3", 0},
      {"^docker", "eth0", 1},
      {"=eth0", "eth0", 1},
      {"=eth0", "eth01", 0},
      {"=eth0", "eth", 0},
      {"=eth0,ib1", "ib1", 1},
      {"=eth0,ib1", "ib10", 0},
      {"^=eth0", "eth0", 0},
      {"^=eth0", "eth01", 1},
      {"^=eth0,lo", "lo", 0},
      {"^", "eth0", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = tutti_iface_match(cases[i].spec, cases[i].name);
    CHECK(got == cases[i].want, "match(\"%s\", \"%s\") = %d, want %d",
          cases[i].spec ? cases[i].spec : "(null)", cases[i].name, got, cases[i].want);
  }
}

static void test_parse(void) {
  static const struct {
    const char* in;
    const char* out;
  } good[] = {{"127.0.0.1:1234", "127.0.0.1:1234"},
              {"[::1]:80", "[::1]:80"},
              {"[fd00::2]:65535", "[fd00::2]:65535"},
              {"localhost:99", "127.0.0.1:99"},
              {"10.1.2.3:0", "10.1.2.3:0"}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    union tutti_socket_addr a;
    char buf[TUTTI_SOCKET_ADDR_STRLEN] = "";
    ncclResult_t r = tutti_socket_parse(good[i].in, AF_UNSPEC, &a);
    CHECK(r == ncclSuccess, "parse %s: %s", good[i].in, tutti_last_error());
    if (r == ncclSuccess) {
      tutti_socket_format(&a, buf, sizeof buf);
      CHECK(strcmp(buf, good[i].out) == 0, "%s formats as %s", good[i].in, buf);
      unsigned char w[TUTTI_SOCKET_ADDR_WIRE];
      union tutti_socket_addr b;
      tutti_socket_addr_pack(&a, w);
      CHECK(tutti_socket_addr_unpack(w, &b) == 0 && memcmp(&a, &b, sizeof a) == 0,
            "%s survives pack/unpack", good[i].in);
    }
  }
  const char* bad[] = {"127.0.0.1", "::1:80",   "1.2.3.4:99999", "1.2.3.4:x", "[::1]80",
                       ":80",       "1.2.3.4:", "[]:80",         "[::1:80",   "1.2.3.4:-1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    union tutti_socket_addr a;
    ncclResult_t r = tutti_socket_parse(bad[i], AF_UNSPEC, &a);
    CHECK(r == ncclInvalidArgument, "parse \"%s\" gave %d", bad[i], (int)r);
    CHECK(strstr(tutti_last_error(), bad[i]) != NULL, "sentence names the input: %s",
          tutti_last_error());
  }
  union tutti_socket_addr a;
  CHECK(tutti_socket_parse("[::1]:5", AF_INET6, &a) == ncclSuccess && a.sa.sa_family == AF_INET6,
        "AF_INET6 asked for gives IPv6 (%s)", tutti_last_error());
  CHECK(tutti_socket_parse("127.0.0.1:5", AF_INET6, &a) == ncclSuccess && a.sa.sa_family == AF_INET,
        "a literal IPv4 address is taken even when IPv6 is preferred");
  unsigned char junk[TUTTI_SOCKET_ADDR_WIRE] = {0, 9};
  CHECK(tutti_socket_addr_unpack(junk, &a) == -1, "a family of 9 is refused");
}

static void test_ifaces(void) {
  struct tutti_iface list[16], it;
  int n = tutti_iface_list(list, 16);
  CHECK(n >= 1, "at least one candidate interface (%d)", n);
  CHECK(tutti_iface_pick(&it) == ncclSuccess, "pick: %s", tutti_last_error());
  for (int i = 1; i < n && i < 16; i++) {
    CHECK(list[i - 1].loopback <= list[i].loopback, "loopback sorted last");
  }
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  CHECK(tutti_iface_pick(&it) == ncclSuccess && strcmp(it.name, "lo") == 0 && it.loopback,
        "=lo picks lo (%s)", it.name);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  CHECK(tutti_iface_pick(&it) == ncclSuccess && it.addr.sa.sa_family == AF_INET6,
        "AF_INET6 on lo gives ::1 (%s)", tutti_last_error());
  setenv("NCCL_SOCKET_IFNAME", "nosuchif", 1);
  CHECK(tutti_iface_pick(&it) == ncclSystemError &&
            strstr(tutti_last_error(), "NCCL_SOCKET_IFNAME=\"nosuchif\"") != NULL,
        "no match is an error naming the variable: %s", tutti_last_error());
  unsetenv("NCCL_SOCKET_FAMILY");
  setenv("NCCL_SOCKET_IFNAME", "^lo", 1);
  CHECK(tutti_iface_list(list, 16) == 0 || strcmp(list[0].name, "lo") != 0, "^lo excludes lo");
  unsetenv("NCCL_SOCKET_IFNAME");
}

struct peer_arg {
  int fd;
  size_t len;
  int close_early;
};

static void* echo_peer(void* p) {
  struct peer_arg* a = p;
  struct tutti_socket_io io = {tutti_socket_now() + 10, NULL, "the test", "echo"};
  char* buf = malloc(a->len);
  if (a->close_early) {
    close(a->fd);
  } else {
    /* Send everything before reading anything: the other side must not deadlock. */
    memset(buf, 0x5a, a->len);
    if (tutti_socket_send_all(a->fd, buf, a->len, &io) == ncclSuccess) {
      (void)tutti_socket_recv_all(a->fd, buf, a->len, &io);
    }
  }
  free(buf);
  return NULL;
}

static void test_transfers(void) {
  union tutti_socket_addr addr;
  int lfd = -1, cfd = -1, sfd = -1;
  tutti_socket_parse("127.0.0.1:0", AF_INET, &addr);
  CHECK(tutti_socket_listen(&addr, &lfd) == ncclSuccess && tutti_socket_port(&addr) != 0,
        "listen on an ephemeral port");
  struct tutti_socket_io io = {tutti_socket_now() + 5, NULL, "the test peer", "test"};
  CHECK(tutti_socket_connect(&addr, &io, NULL, &cfd) == ncclSuccess, "connect");
  CHECK(tutti_socket_accept(lfd, &io, &sfd, NULL) == ncclSuccess, "accept");
  /* Both sides send 8 MiB at once: exchange must interleave or it deadlocks. */
  struct peer_arg pa = {sfd, 8u << 20, 0};
  pthread_t t;
  pthread_create(&t, NULL, echo_peer, &pa);
  char* out = calloc(1, pa.len);
  char* in = calloc(1, pa.len);
  CHECK(tutti_socket_exchange(cfd, out, pa.len, &io, cfd, in, pa.len, &io) == ncclSuccess,
        "exchange 8 MiB both ways: %s", tutti_last_error());
  CHECK(in[0] == 0x5a && in[pa.len - 1] == 0x5a, "data arrived");
  pthread_join(t, NULL);
  /* Nothing comes: the deadline ends the wait. */
  double t0 = tutti_socket_now();
  io.deadline = t0 + 0.3;
  char c;
  CHECK(tutti_socket_recv_all(cfd, &c, 1, &io) == ncclRemoteError, "timeout is an error");
  CHECK(tutti_socket_now() - t0 < 1.0, "timeout on time");
  /* An abort flag already set ends the wait at once. */
  volatile int flag = 1;
  io.deadline = tutti_socket_now() + 10;
  io.abort_flag = &flag;
  CHECK(tutti_socket_recv_all(cfd, &c, 1, &io) == ncclRemoteError &&
            strstr(tutti_last_error(), "aborted") != NULL,
        "abort: %s", tutti_last_error());
  io.abort_flag = NULL;
  close(sfd);
  CHECK(tutti_socket_recv_all(cfd, &c, 1, &io) == ncclRemoteError &&
            strstr(tutti_last_error(), "the test peer closed") != NULL,
        "peer closed: %s", tutti_last_error());
  close(cfd);
  free(out);
  free(in);
  /* Nobody listens any more: connect retries until its deadline, then names the peer. */
  close(lfd);
  io.deadline = tutti_socket_now() + 0.5;
  t0 = tutti_socket_now();
  CHECK(tutti_socket_connect(&addr, &io, "is it up?", &cfd) == ncclSystemError &&
            strstr(tutti_last_error(), "could not reach the test peer") != NULL,
        "unreachable: %s", tutti_last_error());
  CHECK(tutti_socket_now() - t0 >= 0.4 && tutti_socket_now() - t0 < 1.5, "retried until deadline");
}

/* A peer that stops reading (a stopped process) shuts its TCP window; its
 * kernel still answers, so the heartbeat must not call it unanswered, even
 * after more than TUTTI_SOCKET_MISSED heartbeats. */
static void test_heartbeat(void) {
  union tutti_socket_addr addr;
  memset(&addr, 0, sizeof addr);
  int lfd = -1, cfd = -1, sfd = -1;
  struct tutti_socket_io io = {tutti_socket_now() + 5, NULL, "the test peer", "heartbeat test"};
  CHECK(tutti_socket_parse("127.0.0.1:0", AF_INET, &addr) == ncclSuccess &&
            tutti_socket_listen(&addr, &lfd) == ncclSuccess &&
            tutti_socket_connect(&addr, &io, NULL, &cfd) == ncclSuccess &&
            tutti_socket_accept(lfd, &io, &sfd, NULL) == ncclSuccess,
        "a connected pair: %s", tutti_last_error());
  CHECK(tutti_socket_heartbeat_s() == 1, "TUTTI_HEARTBEAT_S defaults to 1");
  static char buf[1 << 16];
  int silent = 0;
  const double end = tutti_socket_now() + TUTTI_SOCKET_MISSED + 1.0;
  while (cfd >= 0 && tutti_socket_now() < end) {
    while (send(cfd, buf, sizeof buf, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
    }
    silent |= tutti_socket_unanswered(cfd);
    usleep(50 * 1000);
  }
  CHECK(!silent, "a peer that only stopped reading is never unanswered");
  close(cfd);
  close(sfd);
  close(lfd);
}

int main(void) {
  test_match();
  test_parse();
  test_ifaces();
  test_transfers();
  test_heartbeat();
  return test_summary("socket");
}
