/* The tcp transport's proxy threads: each owns the far end of its peers'
 * private slot queues and moves slots between them and the sockets. */
#ifndef TUTTI_TRANSPORT_PROXY_H
#define TUTTI_TRANSPORT_PROXY_H

#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/fifo.h"

/* Wire format, per socket and direction: records {u32 size}{size bytes},
 * big-endian, slot k of a peer on socket k % nsocks; a size of
 * TUTTI_PROXY_BYE (larger than any slot) is the last record, followed by a
 * u32 reason: 0, or a doorbell `lost` word naming a rank the job lost,
 * which is why the sender leaves. Socket 0 also carries control records
 * between slots, ahead of them when due: TUTTI_PROXY_CALL and 24 bytes, a
 * collective call the sender's rank made (call/agree.c), on every socket
 * before the slots posted after it; TUTTI_PROXY_FAIL
 * and 500 bytes, its communicator failed (u32 code, u32 the rank that
 * found the cause, u64 the call, u32 whether it gave up waiting, 480 bytes
 * of text), on socket 0. They go into the peer's stand-in
 * doorbell, where the rank compares calls as with a peer on its host. */
#define TUTTI_PROXY_BYE 0xFFFFFFFFu
#define TUTTI_PROXY_CALL 0xFFFFFFFDu
#define TUTTI_PROXY_FAIL 0xFFFFFFFCu
#define TUTTI_PROXY_CALL_BYTES 24
#define TUTTI_PROXY_FAIL_BYTES 500

struct tutti_proxy;

static inline void tutti_proxy_put32(unsigned char* p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static inline uint32_t tutti_proxy_get32(const unsigned char* p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* One socket of a peer. Socket s carries slots s, s + nsocks, ... both ways. */
struct tutti_proxy_sock {
  int fd;
  int dead;     /* failed or closed: no more I/O */
  int hup;      /* poll saw a hang-up while no I/O was wanted */
  int ready_in; /* the last poll (or an optimistic guess) says recv may not block */
  int ready_out;
  /* Sending: the record of slot `snext` (or the goodbye), `soff` bytes out. */
  uint64_t snext;
  int sbusy;
  int bye_sent; /* 1: the goodbye is going out; 2: it went, with a FIN after it */
  int send_err; /* a send failed with this errno */
  size_t soff;
  unsigned char shdr[8];
  unsigned char sctl[TUTTI_PROXY_FAIL_BYTES]; /* a control record's body being sent */
  int sctl_on;                                /* the record being sent is that one */
  uint64_t call_sent; /* the rank's calls sent on this socket so far (by number) */
  size_t shdr_len;
  const char* spayload;
  size_t spayload_len;
  /* Receiving: the record of slot `rnext`, `roff` bytes in (header first). */
  uint64_t rnext;
  int bye_got;
  size_t roff;
  unsigned char rhdr[8];
  uint32_t rsize;
  unsigned char rctl[TUTTI_PROXY_FAIL_BYTES]; /* a control record's body being received */
};

struct tutti_proxy_peer {
  int rank;
  int nsocks;
  struct tutti_proxy_sock* socks;
  struct tutti_proxy* px; /* the thread that serves this peer */
  /* The executor's ends of the two queues; their ops wrap the fifo's. */
  struct tutti_fifo_conn send_end;
  struct tutti_fifo_conn recv_end;
  const struct tutti_conn_ops* fifo_ops;
  void* mem; /* both queues, one private mapping */
  size_t mem_bytes;
  struct tutti_fifo* sq; /* rank -> wire */
  struct tutti_fifo* rq; /* wire -> rank */
  uint32_t nslots;
  size_t slot_bytes;
  uint64_t s_head, s_tail; /* posted by the rank (cached); fully sent, in order */
  uint64_t r_head, r_tail; /* fully received, in order; freed by the rank (cached) */
  uint8_t sdone[TUTTI_FIFO_MAX_SLOTS];
  uint8_t rdone[TUTTI_FIFO_MAX_SLOTS];
  int byes;            /* sockets that brought a goodbye */
  uint32_t bye_reason; /* the first non-zero reason among them */
  int gone;            /* reported lost or departed: nothing more to report */
  int fail_sent;       /* the rank's failure was sent */
  /* The executor's view of this peer (tc->peer_bells[rank]): lost / departed. */
  struct tutti_doorbell bell;
};

struct tutti_proxy {
  pthread_t thread;
  int started;
  int evfd;          /* the rank pokes it when it posts or frees a slot */
  uint32_t sleeping; /* set while the thread may block in poll() */
  uint32_t stop;
  uint32_t leave_reason; /* the goodbyes' reason, set before stop */
  double flush_s;        /* on stop: give up flushing after this long without progress */
  int rank;
  const struct tutti_peer_info* peers;
  struct tutti_doorbell* rank_bell;
  struct tutti_proxy_peer** served;
  int nserved;
  struct pollfd* pfds;
  struct tutti_proxy_sock** pfd_sock; /* [i]: the socket of pfds[i], NULL for evfd */
  char* discard;                      /* sink for data that arrives while leaving */
};

/* Control records (proxy_ctl.c). Whether a header's size names one, and
 * the bytes of its body; whether one is due on socket k of peer p; fills k's
 * next record with it (1) or leaves it (0); applies one received on k. */
int tutti_proxy_is_ctl(uint32_t size);
size_t tutti_proxy_ctl_bytes(uint32_t size);
int tutti_proxy_ctl_due(const struct tutti_proxy* px, const struct tutti_proxy_peer* p,
                        const struct tutti_proxy_sock* k);
int tutti_proxy_ctl_next(struct tutti_proxy* px, struct tutti_proxy_peer* p,
                         struct tutti_proxy_sock* k);
void tutti_proxy_ctl_apply(struct tutti_proxy* px, struct tutti_proxy_peer* p,
                           const struct tutti_proxy_sock* k);

/* Makes `p` serve `rank` over the connected sockets `fds` (taken over, even
 * on failure): private queues of the geometry of `buffsize`, and the two
 * connections the executor uses. */
ncclResult_t tutti_proxy_peer_init(struct tutti_proxy_peer* p, int rank, size_t buffsize,
                                   int nsocks, const int* fds);
/* Closes the sockets and frees the queues (the thread must be stopped). */
void tutti_proxy_peer_free(struct tutti_proxy_peer* p);

/* Wakes the thread if it sleeps in poll(). */
void tutti_proxy_poke(struct tutti_proxy* px);

/* Starts a thread serving `px->served`. */
ncclResult_t tutti_proxy_start(struct tutti_proxy* px);
/* Sends what the rank posted and a goodbye on every socket (for at most
 * px->flush_s without progress), then ends the thread; with `abort` set it
 * flushes nothing: the job is being torn down. */
void tutti_proxy_stop(struct tutti_proxy* px, int abort);

#endif
