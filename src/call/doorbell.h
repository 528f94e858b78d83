/* A rank's doorbell: where it sleeps when it has nothing to do, how others
 * wake it, and what its peers read of it (liveness, lost connections, what
 * it is doing, its calls, its failure). The executors, the transports'
 * proxies and the one-sided service all ring and read doorbells, so the
 * doorbell lives below them all (call/doorbell.c). */
#ifndef TUTTI_CALL_DOORBELL_H
#define TUTTI_CALL_DOORBELL_H

#include <errno.h>
#include <stdint.h>

#include "call/call.h"

/* What a rank's host executor shows the peers of its host that wait on it:
 * the collective it is in, or the last one it was in. exec/host.c writes
 * it at every call, exec/stall.c reads a peer's to say what that peer is
 * doing. */
struct tutti_call_status {
  uint32_t active; /* non-zero while the owner is in the collective below */
  uint32_t coll;   /* enum tutti_coll */
  uint64_t seq;    /* its number among the communicator's operations */
};

/* In shared memory when a shared-memory transport exists, mapped by
 * processes of one library build: the layout may change from one build to
 * the next, never the reasons for its offsets. The first cache line is
 * read by every peer that posts (waking, liveness); `status` is the host
 * executor's; the call and failure records are written by the executors
 * and also by the proxies, which carry them to network peers' stand-in
 * bells in the wire form of call/records.h. */
struct tutti_doorbell {
  uint32_t ring;     /* futex word: bumped by peers that post or free a slot */
  uint32_t sleeping; /* non-zero while the owner may sleep on `ring` */
  int32_t pid;
  uint32_t departed; /* set when the owner destroyed its communicator */
  /* A broken network connection, 0 while none: a cause and a rank in one
   * atomic word, written and read only through tutti_lost_* (below). */
  uint32_t lost;
  /* This doorbell's address in the owner's own address space, so that a
   * peer process can check that it may read the owner's memory (cma.c). */
  uint64_t self_addr;
  /* Non-zero when `calls` below shows the owner's calls: a shared bell, or
   * a network peer's stand-in that its proxy keeps up to date. */
  uint32_t shows_calls;
  /* The fields above are read by every peer that posts (`sleeping`) and
   * change rarely; the owner writes the ones below at every call, so they
   * live in the next cache line (in shared memory, where bells are 64-byte
   * aligned): a post does not miss on a line its owner just wrote. */
  uint8_t pad_[64 - 36];
  /* What the owner is doing, for peers that wait on it to report. */
  struct tutti_call_status status;
  uint8_t pad2_[64 - sizeof(struct tutti_call_status)];
  /* The owner's recent collective calls, [seq % TUTTI_CALL_HISTORY]: peers
   * compare them with their own (call/agree.c). */
  struct tutti_call calls[TUTTI_CALL_HISTORY];
  /* Non-zero once a collective of the owner's communicator failed, and why:
   * every later call there fails with this cause, and peers that wait for
   * the owner stop with it too. */
  uint32_t failed;
  uint32_t failed_rank; /* who found the cause first */
  uint64_t failed_seq;  /* in which call (struct tutti_call.seq; 0: not in one) */
  uint32_t failed_wait; /* it gave up waiting (TUTTI_TIMEOUT): the others of that
                           call may still be waiting for their own diagnosis */
  char failed_why[480];
};

/* A rank's doorbell among its peers': what agreement reads and rings, and
 * what a leaving rank reads for its reason (call/agree.h, call/records.h). */
struct tutti_bells {
  struct tutti_doorbell* own;          /* this rank's (NULL: none) */
  struct tutti_doorbell* const* peers; /* [nranks], NULL where not reachable (NULL: none) */
  int rank;
  int nranks;
};

/* The doorbell's `lost` word: bits 24-31 an errno (0: closed without a
 * goodbye; ETIMEDOUT: the far host stopped answering; ETIME: no connection
 * broke, the owner gave up on a rank that made no progress for
 * TUTTI_TIMEOUT); bits 0-23 all ones (TUTTI_LOST_SELF) when this bell is a
 * private copy for a network peer whose own connection broke, else 1 + the
 * rank the owner lost its connection to (or gave up on). One word, so that
 * a compare-and-swap keeps the first cause and a goodbye carries it whole. */
#define TUTTI_LOST_SELF (-1) /* `who` of tutti_lost_make: this bell's own connection */
#define TUTTI_LOST_WHO_MASK 0xFFFFFFu

/* The word for errno `err` (one that does not fit 8 bits counts as EIO) and
 * rank `who`, or TUTTI_LOST_SELF. */
static inline uint32_t tutti_lost_make(int err, int who) {
  const uint32_t e = err > 0 && err < 256 ? (uint32_t)err : (err != 0 ? (uint32_t)EIO : 0);
  return (e << 24) | (who < 0 ? TUTTI_LOST_WHO_MASK : (uint32_t)who + 1);
}
static inline int tutti_lost_errno(uint32_t v) {
  return (int)(v >> 24);
}
/* Whether `v` marks the bell's own connection as broken. */
static inline int tutti_lost_is_self(uint32_t v) {
  return (v & TUTTI_LOST_WHO_MASK) == TUTTI_LOST_WHO_MASK;
}
/* The rank `v` names, or -1 (none, or the bell's own connection). */
static inline int tutti_lost_rank(uint32_t v) {
  const uint32_t who = v & TUTTI_LOST_WHO_MASK;
  return who == 0 || who == TUTTI_LOST_WHO_MASK ? -1 : (int)(who - 1);
}

/* The owner's call records in its doorbell (struct tutti_call): put writes
 * one (the owner, or the proxy that stands in for a network peer), at every
 * call, so inline; get reads call `seq`, 1 when present, 0 when not made
 * yet or long gone. A record is written field by field, its number last
 * (release); a reader takes the number, the fields, then the number again,
 * and trusts the fields only when both match: a record is rewritten only
 * TUTTI_CALL_HISTORY calls later. */
static inline void tutti_doorbell_put_call(struct tutti_doorbell* bell,
                                           const struct tutti_call* c) {
  struct tutti_call* rec = &bell->calls[c->seq % TUTTI_CALL_HISTORY];
  /* Release stores keep the blanked number ahead of the fields; the last
   * store is sequentially consistent, so that of two ranks publishing and
   * then reading each other's records, at least one sees the other's. */
  __atomic_store_n(&rec->seq, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->count, c->count, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->root, c->root, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->coll, c->coll, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->type, c->type, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->red, c->red, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->device, c->device, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->tag, c->tag, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->seq, c->seq, __ATOMIC_SEQ_CST);
}

/* Reads the record of call `seq` into *out: 1 when it is there whole, 0
 * when its place holds another call or is being rewritten. */
static inline int tutti_doorbell_get_call(const struct tutti_doorbell* bell, uint64_t seq,
                                          struct tutti_call* out) {
  const struct tutti_call* rec = &bell->calls[seq % TUTTI_CALL_HISTORY];
  /* Sequentially consistent against the writer's last store; the fields
   * with acquire, so the second look at the number comes after them. */
  if (__atomic_load_n(&rec->seq, __ATOMIC_SEQ_CST) != seq) {
    return 0;
  }
  out->seq = seq;
  out->count = __atomic_load_n(&rec->count, __ATOMIC_ACQUIRE);
  out->root = __atomic_load_n(&rec->root, __ATOMIC_ACQUIRE);
  out->coll = __atomic_load_n(&rec->coll, __ATOMIC_ACQUIRE);
  out->type = __atomic_load_n(&rec->type, __ATOMIC_ACQUIRE);
  out->red = __atomic_load_n(&rec->red, __ATOMIC_ACQUIRE);
  out->device = __atomic_load_n(&rec->device, __ATOMIC_ACQUIRE);
  out->tag = __atomic_load_n(&rec->tag, __ATOMIC_ACQUIRE);
  return __atomic_load_n(&rec->seq, __ATOMIC_RELAXED) == seq;
}

/* Waking and sleeping (call/doorbell.c). Whoever posts or frees a slot, or
 * publishes anything the owner may wait for, stores it (sequentially
 * consistent) and then rings: the ring loads `sleeping` after that store,
 * and the owner stores `sleeping` (arm) before its last look, so either the
 * owner sees the news or the ring sees it asleep and wakes it. */

/* Wakes the owner of `bell` if it may be asleep (NULL: nothing). */
void tutti_doorbell_ring(struct tutti_doorbell* bell);
/* The owner announces that it may sleep, and gets the ring count to sleep
 * on; it looks for news once more before tutti_doorbell_sleep. */
uint32_t tutti_doorbell_arm(struct tutti_doorbell* bell);
/* Sleeps until the bell rings after `seen` (bounded, 100 ms, so that
 * aborts, dead peers and timeouts are noticed), then withdraws the
 * announcement. */
void tutti_doorbell_sleep(struct tutti_doorbell* bell, uint32_t seen);
/* Withdraws the announcement without sleeping. */
static inline void tutti_doorbell_disarm(struct tutti_doorbell* bell) {
  __atomic_store_n(&bell->sleeping, 0, __ATOMIC_RELAXED);
}

/* Why the owner of a peer's bell can no longer answer ("exited",
 * "destroyed its communicator", a lost connection with its cause), or
 * NULL while it can. The text lives until the calling thread's next call. */
const char* tutti_doorbell_gone(const struct tutti_doorbell* bell);

#endif
