/* The network transport (nettr.c): ranks on other hosts joined through a
 * network plugin (net/net.h) instead of tutti's own sockets. As with TCP,
 * the executor sees private slot queues and a proxy thread moves them
 * (proxy.c): slot k of a peer travels on data comm k % ncomms, as one
 * message of exactly its bytes, straight from and into the queues (both
 * registered with the plugin); a control comm per direction carries the
 * rank's calls, its failure and its goodbye (ctl.c). */
#ifndef TUTTI_NET_TRANSPORT_NETTR_H
#define TUTTI_NET_TRANSPORT_NETTR_H

#include <stdint.h>

#include "net/net.h"
#include "transport/proxy.h"

#define TUTTI_NETTR_MAX_COMMS 4 /* data comms per peer and direction (devices striped) */
#define TUTTI_NETTR_CTL_BYTES 512
#define TUTTI_NETTR_CTL_RECVS 4 /* control receives kept posted */
#define TUTTI_NETTR_CTL_SENDS 4 /* control sends in flight, at most */
#define TUTTI_NETTR_TAG 0x7475  /* every message's tag (matching is by order) */

/* Control messages: a u32 kind, then the record (call/records.h). */
enum { TUTTI_NETTR_CALL = 1, TUTTI_NETTR_FAIL = 2, TUTTI_NETTR_BYE = 3 };

/* One direction-pair to a peer over one device: what this rank sends on
 * and what it receives on, with the registrations of the memory each moves. */
struct tutti_nettr_link {
  void* send;
  void* recv;
  void* send_mh;
  void* recv_mh;
};

struct tutti_nettr_peer {
  /* Queues (rank -> network, network -> rank), the executor's ends, the
   * stand-in bell; the control buffers follow the queues (base.extra). */
  struct tutti_proxy_peer base;
  int ncomms;
  struct tutti_nettr_link data[TUTTI_NETTR_MAX_COMMS];
  struct tutti_nettr_link ctl;
  /* Sending: slots the rank posted (cached), handed to the network, and
   * done (in order: freed to the rank). */
  uint64_t s_head, s_next, s_tail;
  void* sreq[TUTTI_FIFO_MAX_SLOTS];
  uint8_t sdone[TUTTI_FIFO_MAX_SLOTS];
  /* Receiving: slots posted to the network, arrived (in order: shown to
   * the rank), freed by the rank (cached). */
  uint64_t r_next, r_head, r_tail;
  void* rreq[TUTTI_FIFO_MAX_SLOTS];
  uint8_t rdone[TUTTI_FIFO_MAX_SLOTS];
  uint32_t rsize[TUTTI_FIFO_MAX_SLOTS];
  /* Control: receives kept posted, sends in flight. */
  unsigned char (*ctl_rbuf)[TUTTI_NETTR_CTL_BYTES];
  unsigned char (*ctl_sbuf)[TUTTI_NETTR_CTL_BYTES];
  void* ctl_rreq[TUTTI_NETTR_CTL_RECVS]; /* [posted % RECVS]: in order */
  void* ctl_sreq[TUTTI_NETTR_CTL_SENDS];
  uint64_t ctl_rposted, ctl_rdone, ctl_sposted, ctl_sdone;
  uint64_t call_sent; /* the rank's calls sent so far (by number) */
  int fail_sent;
  int bye_sent;
  /* The peer's goodbye: its reason, and the slots it sent before it, which
   * must all arrive before it counts as departed. */
  int bye_got;
  uint32_t bye_reason;
  uint64_t bye_slots;
  /* A network operation failed at this time (0: none): the peer is lost
   * unless its goodbye turns up first (it may have left and closed). */
  double suspect_at;
  char suspect_why[300];
};

/* One thread serving every peer of a communicator (transport/proxy.h's). */
struct tutti_nettr_proxy {
  struct tutti_proxy base; /* the thread, its eventfd, stop and bells */
  struct tutti_net* net;
  struct tutti_nettr_peer* served;
  int nserved;
};

/* The peer's queues and the executor's two connections (proxy.c). */
ncclResult_t tutti_nettr_peer_init(struct tutti_nettr_peer* p, int rank, size_t buffsize);
/* Registers the peer's queues and control buffers with every comm. */
ncclResult_t tutti_nettr_peer_register(struct tutti_net* net, struct tutti_nettr_peer* p);
/* Closes the comms, drops registrations, frees the queues (thread stopped). */
void tutti_nettr_peer_free(struct tutti_net* net, struct tutti_nettr_peer* p);

ncclResult_t tutti_nettr_proxy_start(struct tutti_nettr_proxy* px);
void tutti_nettr_proxy_stop(struct tutti_nettr_proxy* px, int abort);

/* Control messages (ctl.c): posts what is due to the peer (the rank's
 * failure, its calls, the goodbye when leaving) and applies what arrived.
 * Non-zero when anything moved; a network error marks the peer lost. */
int tutti_nettr_ctl_pump(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, int leaving);
/* Whether a control message is due (the thread must not sleep). */
int tutti_nettr_ctl_due(const struct tutti_nettr_proxy* px, const struct tutti_nettr_peer* p,
                        int leaving);
/* A network operation `doing` failed (the plugin's error is the last one):
 * the peer is suspect (see suspect_at). Returns 1. */
int tutti_nettr_suspect(struct tutti_nettr_peer* p, const char* doing);
/* The peer broke its connection (a network error `why`): marks it lost for
 * the executor and this rank's bell, once; quiet while leaving. */
void tutti_nettr_lost(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, const char* why,
                      int leaving);
/* Once the goodbye and every slot before it have come: departed. */
void tutti_nettr_check_left(struct tutti_nettr_peer* p);

#endif
