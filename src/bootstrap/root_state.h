/* The bootstrap root's state, shared by root.c (the state machine) and
 * root_thread.c (the thread that polls the sockets), and compiled into the
 * fuzz target that drives the state machine without a thread. */
#ifndef TUTTI_BOOTSTRAP_ROOT_STATE_H
#define TUTTI_BOOTSTRAP_ROOT_STATE_H

#include <poll.h>
#include <stddef.h>

#include "bootstrap/internal.h"

#define ROOT_MAX_PENDING 256 /* connections still presenting themselves */
#define ROOT_ACCEPT_BURST 64
#define ROOT_FLUSH_S 2.0 /* past its life, the root waits this long for replies to drain */
#define HELLO_BYTES (TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN)

/* A connection presents itself (HELLO), is sent the root's proof (PROOF),
 * proves the secret (MAC), and only then joins. */
enum conn_state { CONN_HELLO, CONN_PROOF, CONN_MAC, CONN_JOINED, CONN_REPLY, CONN_DEAD };

/* Still presenting itself: bounded by its deadline, counted as pending. */
static inline int tutti_bs_conn_presenting(enum conn_state s) {
  return s == CONN_HELLO || s == CONN_PROOF || s == CONN_MAC;
}

struct conn {
  int fd;
  enum conn_state state;
  double deadline; /* presenting: by when the handshake must be complete */
  size_t got;
  unsigned char in[HELLO_BYTES];
  unsigned char proof[TUTTI_BS_PROOF]; /* sent: the root's nonce and MACs */
  unsigned char mac[TUTTI_BS_MAC];     /* received: the connector's */
  size_t proof_off, mac_got;
  unsigned char keys[2][TUTTI_BS_SECRET]; /* what the proof was of: admitted, the id's */
  unsigned char* out;
  size_t out_len, out_off;
  int rank;
  int intruder; /* presents the identity-less secret to a root whose job has its token */
  char where[TUTTI_SOCKET_ADDR_STRLEN]; /* peer address, then the rank's listen address */
};

struct root {
  int lfd;
  double lfd_pause_until;       /* out of fds: stop accepting for a moment */
  struct tutti_bs_root_pub pub; /* address, admitted secret, ranks joined */
  unsigned flags;               /* the id's: TUTTI_ID_FLAG_LEARN */
  unsigned char derived[TUTTI_BS_SECRET];
  struct tutti_bs_job* job; /* TUTTI_ID_FLAG_LEARN, once the job has its token */
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  unsigned char packed[TUTTI_SOCKET_ADDR_WIRE]; /* the bound address, as the id holds it */
  double life_s, deadline;                      /* TUTTI_TIMEOUT bounds the root's own life */
  struct conn** conns;
  struct pollfd* pfd;
  int nconns, cap;
  int nranks, first_rank; /* nranks is -1 until the first hello */
  unsigned char* present;
  unsigned char* table; /* nranks packed listen addresses */
  double job_deadline;  /* the earliest deadline of a joined rank */
  double job_timeout_s; /* that rank's timeout, for the sentence */
  double linger_until;  /* after a failure, late ranks are told why until then */
  int complete, failed;
  uint32_t err_code;
  char err[TUTTI_BS_MAX_ERROR];
  char refused[320]; /* the last connection encryption refused (util/seal.c) */
};

void tutti_bs_root_conn_drop(struct root* r, int i);
int tutti_bs_root_conn_add(struct root* r, int fd, const union tutti_socket_addr* peer, double now);
/* The connection that has been presenting itself the longest, or -1;
 * *count: how many are presenting themselves. */
int tutti_bs_root_oldest_pending(const struct root* r, int* count);
/* Progress on one connection; returns -1 when it should be closed. */
int tutti_bs_root_serve(struct root* r, struct conn* c, short revents, double now);
/* Advances the clock-driven state; returns 1 when the root is done. */
int tutti_bs_root_tick(struct root* r, double now);

#endif
