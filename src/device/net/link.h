/* The device proxy's connections, shared by its setup (setup.cu) and
 * its thread (proxy.cu). Every remote pair has, per channel, one comm
 * each way of the network (a plugin, or tutti's own sockets: net/net.h):
 * slot k of the channel is message k on it, exactly the bytes the kernel
 * posted, sent from the shadow and received into the receiver's own
 * queue. The shadow's slots are free again once their sends are done (the
 * network lands data only in receives the peer posted into slots its
 * kernels freed), so no word flows back; one more comm each way carries
 * the goodbye. */
#ifndef TUTTI_DEVICE_NET_LINK_H
#define TUTTI_DEVICE_NET_LINK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "device/net/devnet.h"
#include "device/net/trace.h"
#include "device/work.h"

extern "C" {
#include "net/net.h"
}

#define TD_NET_TAG 0x7464
#define TD_NET_CTL_RECVS 4
#define TD_NET_CTL_SENDS 4

enum { TD_MSG_BYE = 2 };

/* A control message: the goodbye (with room for per-channel words). */
struct td_ctl {
  uint32_t kind;
  uint32_t nch;
  uint64_t heads[TD_NET_CHANNELS];
};

/* One channel to one peer. Counts are slot positions since setup. */
struct td_chan {
  void* send;
  void* recv;
  void* send_mh;
  void* recv_mh;
  uint64_t fwd;        /* slots handed to the network */
  uint64_t sent;       /* ... of which done, in order */
  uint64_t head_shown; /* written into this rank's region: `sent` */
  uint64_t posted;     /* receives posted (into slots the kernel freed) */
  uint64_t arrived;    /* ... of which done, in order: this rank's tail */
  uint64_t seen;       /* slots the trace has seen posted (TUTTI_NET_TRACE) */
  void* sreq[TD_SLOTS];
  void* rreq[TD_SLOTS];
};

struct td_link {
  int peer;
  char hostname[64];
  char* sh_host; /* the shadow of the peer's region */
  char* sh_dev;
  struct td_chan ch[TD_NET_CHANNELS];
  void* csend;
  void* crecv;
  void* csend_mh;
  void* crecv_mh;
  struct td_ctl* cbuf; /* [TD_NET_CTL_SENDS] to send, then [TD_NET_CTL_RECVS] to receive */
  void* cs_req[TD_NET_CTL_SENDS]; /* [posted % TD_NET_CTL_SENDS], in order */
  void* cr_req[TD_NET_CTL_RECVS];
  uint64_t cs_posted, cs_done; /* control sends handed to the network, and done */
  uint64_t cr_posted, cr_done; /* control receives posted, and done */
  int bye_sent;
  int departed; /* said goodbye */
  int broken;   /* a network operation failed: `why` says which */
  char why[256];
};

struct td_net {
  struct tutti_net* net;
  int nlinks;
  struct td_link* links;
  pthread_t thread;
  int live;
  volatile int stop;
  int raised;
  char via[96];
  struct td_trace* trace; /* TUTTI_NET_TRACE (trace.h), else NULL */
  int hint;  /* TUTTI_TUNE net.poll: receives tested only on the running kernel's channels */
  int yield; /* TUTTI_TUNE net.yield: gives the core up between passes that moved nothing */
};

#endif
