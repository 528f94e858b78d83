/* A loopback TCP port for a test's NCCL_COMM_ID or rendezvous. */
#ifndef TUTTI_TEST_PORT_H
#define TUTTI_TEST_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/* Whether 127.0.0.1:port can be bound now (as the bootstrap root binds it). */
static inline int test_port_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
           bind(fd, (struct sockaddr*)&a, sizeof a) == 0;
  if (fd >= 0) {
    close(fd);
  }
  return ok;
}

/* A loopback port that is free now and lies below the kernel's ephemeral
 * range (ip_local_port_range), so that no connect() anywhere on the host is
 * handed it as its local port before the test listens there: a port picked
 * inside that range can be held by another test's long-lived connection,
 * and the root then finds its address taken with nobody listening. The
 * search starts at a place set by the pid and by how many ports this file
 * asked for before, so tests running side by side, and one test's
 * scenarios, pick apart. Returns 0 if no port is free. */
static inline int test_loopback_port(void) {
  int low = 32768;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f != NULL) {
    if (fscanf(f, "%d", &low) != 1) {
      low = 32768;
    }
    fclose(f);
  }
  const int base = low > 12000 ? low - 12000 : 1024, span = low > base ? low - base : 0;
  static unsigned asked;
  const unsigned start = (unsigned)getpid() * 2654435761u + 7919u * asked++;
  for (int k = 0; k < span; k++) {
    int port = base + (int)((start + (unsigned)k) % (unsigned)span);
    if (test_port_free(port)) {
      return port;
    }
  }
  return 0;
}

#endif
