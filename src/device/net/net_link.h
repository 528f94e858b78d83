/* The device proxy's connections and messages, shared by its setup
 * (net_setup.cu) and its thread (net_proxy.cu). */
#ifndef TUTTI_DEVICE_NET_NET_LINK_H
#define TUTTI_DEVICE_NET_NET_LINK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "util/socket.h"
}

#define TD_NET_MAGIC 0x74646e31u /* "tdn1" */

enum { TD_MSG_SLOT = 1, TD_MSG_FREED = 2, TD_MSG_BYE = 3 };

/* Every message: a slot (value = its position, len bytes follow), freed
 * slots (value = the new head) or goodbye. */
struct td_msg {
  uint32_t kind;
  uint32_t ch;
  uint32_t len;
  uint32_t pad;
  uint64_t value;
};

struct td_hello {
  uint32_t magic;
  int32_t rank;
  uint64_t comm_hash;
  unsigned char secret[16];
};

struct td_rec {
  uint8_t forced; /* NCCL_SHM_DISABLE and NCCL_P2P_DISABLE */
  uint8_t ok;     /* set up so far, and listening when it has remote peers */
  uint8_t pad[6];
  unsigned char addr[TUTTI_SOCKET_ADDR_WIRE];
};

struct td_link {
  int peer;
  int fd;
  char hostname[64];
  char* sh_host; /* the shadow of the peer's region */
  char* sh_dev;
  uint64_t* fwd;    /* [nch] slots forwarded */
  uint64_t* freed;  /* [nch] head last forwarded */
  uint64_t* expect; /* [nch] next slot position to arrive */
  int s_busy, s_rr;
  struct td_msg s_msg;
  const char* s_pay;
  size_t s_done;
  struct td_msg r_msg;
  char* r_pay;
  size_t r_done;
  int r_taken;  /* the header was acted on */
  int departed; /* said goodbye */
  int broken;   /* errno + 1 of a failed connection, or 1000 for a protocol error */
};

struct td_net {
  int nlinks;
  struct td_link* links;
  pthread_t thread;
  int live;
  volatile int stop;
  int raised;
};

#endif
