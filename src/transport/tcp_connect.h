/* The tcp transport's connection setup (tcp_connect.c): from the
 * all-gathered records of every rank to authenticated sockets, one per pair
 * and index; tcp.c turns them into peers served by proxy threads. */
#ifndef TUTTI_TRANSPORT_TCP_CONNECT_H
#define TUTTI_TRANSPORT_TCP_CONNECT_H

#include "transport/transport.h"

#define TUTTI_TCP_MAX_SOCKS 64
#define TUTTI_TCP_REC_LEN \
  48 /* all-gathered: version, shm off, listening, nsocks, address, ifname */

struct tutti_tcp_pending;

/* Everything setup needs in one place. */
struct tutti_tcp_setup {
  struct tutti_transport_comm* tc;
  const unsigned char* recs;
  int nsocks;
  int* fds; /* [rank * nsocks + index], -1 until established */
  struct tutti_tcp_pending* pend;
  int npend, cap;
  int left;
  char refused[384]; /* the last connection encryption refused (util/seal.c) */
};

/* Whether ranks a and b talk over TCP, from the all-gathered records (so
 * both ends agree even if their environments differ). */
int tutti_tcp_pair(const struct tutti_transport_comm* tc, const unsigned char* recs, int a, int b);
/* Sockets between this rank and rank r: the smaller of both counts. */
int tutti_tcp_pair_socks(const struct tutti_tcp_setup* su, int r);
/* The table must describe one consistent job before anyone connects. */
ncclResult_t tutti_tcp_check_table(const struct tutti_tcp_setup* su);
/* Connects every TCP pair (lower ranks connect, higher ones accept on
 * `lfd`), checking hellos and acknowledgements, bounded by TUTTI_TIMEOUT;
 * fills su->fds. */
ncclResult_t tutti_tcp_connect_all(struct tutti_tcp_setup* su, int lfd);

#endif
