/* The TCP transport's proxy threads (transport/proxy.h's, over sockets):
 * each owns the far end of its peers' private slot queues and moves slots
 * between them and the sockets. */
#ifndef TUTTI_TRANSPORT_TCP_PROXY_H
#define TUTTI_TRANSPORT_TCP_PROXY_H

#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "call/records.h"
#include "transport/proxy.h"

/* Wire format, per socket and direction: records {u32 size}{size bytes},
 * big-endian, slot k of a peer on socket k % nsocks; a size of
 * TUTTI_TCP_BYE (larger than any slot) is the last record, followed by a
 * u32 reason: 0, or a doorbell `lost` word naming a rank the job lost,
 * which is why the sender leaves. Socket 0 also carries control records
 * between slots, ahead of them when due: TUTTI_TCP_CALL and 24 bytes, a
 * collective call the sender's rank made (call/agree.c), on every socket
 * before the slots posted after it (at once on the socket of the next
 * slot, tcp_ctl.c); TUTTI_TCP_FAIL
 * and 500 bytes, its communicator failed (u32 code, u32 the rank that
 * found the cause, u64 the call, u32 whether it gave up waiting, 480 bytes
 * of text), on socket 0. They go into the peer's stand-in
 * doorbell, where the rank compares calls as with a peer on its host
 * (the records' wire form is call/records.h's). */
#define TUTTI_TCP_BYE 0xFFFFFFFFu
#define TUTTI_TCP_CALL 0xFFFFFFFDu
#define TUTTI_TCP_FAIL 0xFFFFFFFCu
#define TUTTI_TCP_CALL_BYTES TUTTI_REC_CALL_BYTES
#define TUTTI_TCP_FAIL_BYTES TUTTI_REC_FAIL_BYTES

struct tutti_tcp_proxy;

/* Bytes a socket gathers before a slot's payload: its control records due
 * (a failure, calls) and the slot's header or the goodbye, sent with the
 * payload in one sendmsg. */
#define TUTTI_TCP_SBUF 1024
/* A socket's receive staging: a record whose rest is smaller than this is
 * read together with what follows it (tcp_wire.c). */
#define TUTTI_TCP_STAGE 4096
/* A leaving proxy reads what still comes into a sink of this size. */
#define TUTTI_TCP_DISCARD (1 << 16)

/* One socket of a peer. Socket s carries slots s, s + nsocks, ... both ways. */
struct tutti_tcp_sock {
  int fd;
  int dead;     /* failed or closed: no more I/O */
  int hup;      /* poll saw a hang-up while no I/O was wanted */
  int ready_in; /* the last poll (or an optimistic guess) says recv may not block */
  int ready_out;
  /* Sending: `sbuf` (`shdr_len` bytes: control records, then the slot's
   * header or the goodbye), then the payload; `soff` bytes out. */
  uint64_t snext;
  int sbusy;
  int sslot;    /* the record being sent carries slot `snext` */
  int bye_sent; /* 1: the goodbye is going out; 2: it went, with a FIN after it */
  int send_err; /* a send failed with this errno */
  size_t soff;
  uint64_t call_sent; /* the rank's calls sent on this socket so far (by number) */
  size_t shdr_len;
  const char* spayload;
  size_t spayload_len;
  unsigned char sbuf[TUTTI_TCP_SBUF];
  /* Receiving: the record of slot `rnext`, `roff` bytes in (header first). */
  uint64_t rnext;
  int bye_got;
  size_t roff;
  unsigned char rhdr[8];
  uint32_t rsize;
  unsigned char rctl[TUTTI_TCP_FAIL_BYTES]; /* a control record's body being received */
  /* Bytes read ahead: stage[stage_off, stage_len) not parsed yet. */
  size_t stage_off, stage_len;
  unsigned char* stage; /* TUTTI_TCP_STAGE bytes */
};

struct tutti_tcp_peer {
  struct tutti_proxy_peer base; /* queues, the executor's ends, the stand-in bell */
  /* Held by whoever drives the sockets below: the proxy (it waits for it)
   * or the calling thread's own path (it only tries). Everything below is
   * read and written under it. */
  pthread_mutex_t lock;
  int lock_made;
  int nsocks;
  struct tutti_tcp_sock* socks;
  uint64_t s_head, s_tail; /* posted by the rank (cached); fully sent, in order */
  uint64_t r_head, r_tail; /* fully received, in order; freed by the rank (cached) */
  uint8_t sdone[TUTTI_FIFO_MAX_SLOTS];
  uint8_t rdone[TUTTI_FIFO_MAX_SLOTS];
  int byes;            /* sockets that brought a goodbye */
  uint32_t bye_reason; /* the first non-zero reason among them */
  int fail_sent;       /* the rank's failure was sent */
  size_t direct_bytes; /* the calling thread moves slots up to this size (0: none) */
  /* Non-zero while the calling thread reads this peer's sockets itself:
   * the proxy leaves POLLIN out, so that bytes the caller takes do not
   * wake it too (on two busy cores, a woken proxy that held the lock when
   * preempted stalled the caller for milliseconds). Set by the caller's
   * receive, cleared by it once it announced it may sleep or when it meets
   * a record for the proxy, and by the proxy when the caller was not seen
   * reading since its last check (tcp_direct.c). */
  uint32_t caller_reads;
  uint64_t caller_seen; /* the caller's receives so far, and at the last check */
  uint64_t caller_checked;
  uint64_t calls_out; /* the rank's last call sent on any socket (by number) */
};

/* One thread serving some of the communicator's TCP peers. */
struct tutti_tcp_proxy {
  struct tutti_proxy base; /* the thread, its eventfd, stop and bells */
  struct tutti_tcp_peer** served;
  int nserved;
  struct pollfd* pfds;
  struct tutti_tcp_sock** pfd_sock; /* [i]: the socket of pfds[i], NULL for evfd */
  struct tutti_tcp_peer** pfd_peer; /* [i]: its peer */
  char* discard;                    /* sink for data that arrives while leaving */
  int check_ms;                     /* how often the heartbeat is read (and the longest poll) */
  double next_check;                /* when it is read next */
};

/* Control records (tcp_ctl.c). Whether a header's size names one, and
 * the bytes of its body; whether one is due on socket k of peer p; writes
 * k's next one, header and body, into out[room] and returns its bytes (0:
 * none due, or it does not fit); applies one received on k. */
int tutti_tcp_ctl_is(uint32_t size);
size_t tutti_tcp_ctl_bytes(uint32_t size);
int tutti_tcp_ctl_due(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k);
size_t tutti_tcp_ctl_next(struct tutti_tcp_peer* p, struct tutti_tcp_sock* k, unsigned char* out,
                          size_t room);
void tutti_tcp_ctl_apply(struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k);

/* One socket's records (tcp_wire.c), with the peer's lock held, by the
 * proxy (`leaving` as its pass) or the caller (0). Sends, or receives, some
 * of k's current record; 1 when bytes moved. The receive reads into the
 * slots (or, leaving, discards into px->discard). Whether I/O is wanted on
 * k; whether k holds bytes read ahead that poll() cannot see. */
int tutti_tcp_sock_send(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p,
                        struct tutti_tcp_sock* k, int leaving);
int tutti_tcp_sock_recv(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p,
                        struct tutti_tcp_sock* k, int leaving);
int tutti_tcp_want_out(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k, int leaving);
int tutti_tcp_want_in(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k, int leaving);
int tutti_tcp_sock_pending(const struct tutti_tcp_sock* k);
/* k failed with `err` (0: closed): dead, and the peer lost or departed. */
void tutti_tcp_sock_fail(struct tutti_tcp_peer* p, struct tutti_tcp_sock* k, int err, int leaving);
/* The record k is receiving: a slot's data (after its header), not a
 * control record or goodbye, and its size. */
static inline int tutti_tcp_sock_in_data(const struct tutti_tcp_sock* k) {
  return k->roff >= 4 && k->rsize != TUTTI_TCP_BYE && !tutti_tcp_ctl_is(k->rsize);
}

/* The caller's own path (tcp_direct.c): installed in the peer's
 * tutti_proxy_peer hooks by tutti_tcp_peer_init. */
void tutti_tcp_direct_install(struct tutti_tcp_peer* p);
/* The proxy's heartbeat check, the lock held: a caller not seen reading
 * since the last check has left; the proxy reads again. */
void tutti_tcp_direct_reclaim(struct tutti_tcp_peer* p);

/* Makes `p` serve `rank` over the connected sockets `fds` (taken over, even
 * on failure): private queues of the geometry of `buffsize`, and the two
 * connections the executor uses. */
ncclResult_t tutti_tcp_peer_init(struct tutti_tcp_peer* p, int rank, size_t buffsize, int nsocks,
                                 const int* fds);
/* Closes the sockets and frees the queues (the thread must be stopped). */
void tutti_tcp_peer_free(struct tutti_tcp_peer* p);

/* Starts a thread serving `px->served` (transport/proxy.h's loop). */
ncclResult_t tutti_tcp_proxy_start(struct tutti_tcp_proxy* px);
/* Sends what the rank posted and a goodbye on every socket (for at most
 * flush_s without progress), then ends the thread; with `abort` set it
 * flushes nothing: the job is being torn down. */
void tutti_tcp_proxy_stop(struct tutti_tcp_proxy* px, int abort);

#endif
