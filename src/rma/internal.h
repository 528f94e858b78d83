/* The one-sided state of a communicator, as the files of src/rma/ share it. */
#ifndef TUTTI_RMA_INTERNAL_H
#define TUTTI_RMA_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "rma/rma.h"

/* A put (or a piece, or a signal) a CUDA host function handed over, waiting
 * for the service thread to send it (outbox.c). */
struct tutti_rma_msg {
  struct tutti_rma_msg* next;
  uint64_t seq; /* its operation number toward the peer */
  uint64_t offset;
  size_t bytes;
  size_t done; /* bytes sent so far */
  uint32_t win_id;
  int sig, ctx;
  int with_signal;
  int is_signal; /* a signal alone (no data) */
  char data[];
};

/* This rank's sending side toward one peer: producers (user threads, CUDA
 * host functions, the service thread) take turns, since a queue has one
 * producer. */
struct tutti_rma_out {
  pthread_mutex_t lock;
  uint64_t seq;                     /* operations sent to this peer so far */
  struct tutti_rma_msg *head, *end; /* the outbox, oldest first */
  double since;                     /* when the oldest message last moved */
};

/* The service thread's view of one origin. */
struct tutti_rma_in {
  uint64_t seq; /* the operation whose pieces arrive now (0: none yet) */
  int strikes;  /* idle checks that found the origin gone */
};

struct tutti_rma {
  struct tutti_rma_setup s;
  size_t payload;  /* payload bytes one slot carries after its record header */
  int on_device;   /* signals live on the device (tutti_dev_rma_start) */
  int dev_started; /* tutti_dev_rma_start succeeded: tutti_dev_rma_stop at the end */
  int spin;        /* idle passes spent spinning (adapted, as the executor's: */
  int spin_max;    /* up to this), then yielding, before sleeping */
  int yield;
  int wait_spin; /* what waits learnt so far (any thread: relaxed atomics) */

  /* Windows, by registration order; the service thread looks them up under
   * the lock and copies into them holding it, so deregistration waits for
   * a copy in progress. */
  pthread_mutex_t win_lock;
  struct tutti_win** wins;
  int nwins, cap_wins;
  uint32_t next_win_id; /* the last id given (ids from 1, alike on every rank) */
  int dev_wins;         /* this rank's registered windows in device memory */

  struct tutti_rma_out* out; /* [nranks] */

  pthread_t thread;
  int thread_live;
  uint32_t stop;
  /* The receiving end of every connection has one consumer at a time: the
   * service thread, or a waiting user thread (tutti_rma_receive). */
  pthread_mutex_t rx_lock;
  struct tutti_rma_in* in; /* [nranks]: under rx_lock */
  int held_back;           /* a record waits in its queue for room on the device */

  /* Signals in host memory (on_device 0), [(ctx * SIGNALS + sig) * nranks +
   * origin]: raised by the service thread after the data is in place,
   * consumed by waits under consume_lock. */
  uint64_t* arrived;
  uint64_t* consumed;
  pthread_mutex_t consume_lock;

  /* Origins the service thread found gone after reading all they sent,
   * and why, for waits on them. */
  uint32_t* gone;        /* [nranks] */
  char (*gone_why)[256]; /* [nranks], written before gone is set */
  /* The receiving side failed (a record for an unknown window, a copy that
   * failed): every later wait fails with this. */
  uint32_t failed;
  ncclResult_t failed_res;
  char failed_why[512];
};

static inline size_t tutti_rma_sig_index(const struct tutti_rma* r, int ctx, int sig, int origin) {
  return ((size_t)ctx * TUTTI_RMA_SIGNALS + (size_t)sig) * (size_t)r->s.nranks + (size_t)origin;
}

/* Waiting (wait.c): spin, yield, then sleep on a futex word that several
 * threads may sleep on at once; wakers bump the word and wake every sleeper
 * when the count of sleepers is non-zero. Every thread of a rank sleeps on
 * its doorbell in the service communicator (`ring`, counted in `sleeping`):
 * the service thread, waits and puts waiting for a slot; whatever happens
 * (a slot posted or freed by a peer, a signal raised, a failure, the stop)
 * rings it, so that a sleeping wait wakes at the peer's post and receives
 * it itself, one wake-up per hop rather than two. A waiter counts itself in, then
 * looks at its condition once more before it sleeps, so a raise that raced
 * with it is never missed (both sides sequentially consistent). */
struct tutti_rma_nap {
  uint32_t* word;
  uint32_t* sleepers;
  int spin, spin_max, yield;
  uint32_t seen;
  int armed;
  int idle;
};
/* One idle pass; non-zero once past spinning and yielding (slow checks
 * are due, and the condition must be looked at again before the next). */
int tutti_rma_nap_idle(struct tutti_rma_nap* n);
/* Ends a wait (or an idle spell after progress), adapting the spin: a
 * wait that ended while spinning or just after says the peer runs and
 * spinning pays; one that needed long yields or a sleep says it does not. */
void tutti_rma_nap_reset(struct tutti_rma_nap* n);
/* One pass of a wait with nothing to show: receives what came (when
 * `receive`), else idles. Non-zero when the caller should look at its
 * condition again at once; zero when the slow checks are due. */
int tutti_rma_pass(struct tutti_rma* r, struct tutti_rma_nap* n, int receive);
/* Bumps `word` and wakes its sleepers, if any. */
void tutti_rma_wake(uint32_t* word, const uint32_t* sleepers);

/* Raises signal (sig, ctx) from `origin` by one, after the put's data is in
 * place (service.c). */
ncclResult_t tutti_rma_raise(struct tutti_rma* r, int origin, int sig, int ctx);
/* Records the receiving side's failure (the first stays: 1 when this was
 * it) and wakes waiters. */
int tutti_rma_fail(struct tutti_rma* r, ncclResult_t res, const char* why);
/* Applies what has arrived from every origin, unless another thread is at
 * it: non-zero when anything was applied (service.c). */
int tutti_rma_receive(struct tutti_rma* r);
/* Blocks until every desc's signal arrived, then consumes them (signal.c). */
ncclResult_t tutti_rma_wait_host(struct tutti_rma* r, const ncclWaitSignalDesc_t* descs, int n);

/* The outbox (outbox.c): what host functions posted goes out, a few slots
 * per peer in turn; 1 when anything moved. The service thread's. */
int tutti_rma_pump_out(struct tutti_rma* r);
/* Drops the first outbox whose peer is gone or took nothing for
 * TUTTI_TIMEOUT, saying why in `why` (1), for the service thread to fail
 * the rank's puts with; on an abort, drops every outbox. */
int tutti_rma_out_check(struct tutti_rma* r, double now, char* why, size_t len);
/* Waits (bounded by TUTTI_TIMEOUT) until every outbox is empty, then frees
 * what is left (destroy). */
void tutti_rma_out_drain(struct tutti_rma* r);
/* Fills a record header and payload into `slot` for `piece` bytes of `src`
 * (outbox.c). */
void tutti_rma_write_record(void* slot, int is_signal, int last, int sig, int ctx, uint32_t win_id,
                            uint64_t offset, const void* src, size_t piece, uint64_t seq);

/* Windows (window.c): the registered window numbered `id`, or NULL; call
 * with win_lock held. Frees every window (destroy). */
struct tutti_win* tutti_rma_win_by_id(struct tutti_rma* r, uint32_t id);
void tutti_rma_win_free_all(struct tutti_rma* r);

/* What a peer is (for errors): "rank 3 (pid 1234 on host h)" (wait.c). */
void tutti_rma_name_peer(const struct tutti_rma* r, int peer, char* buf, size_t len);

#endif
