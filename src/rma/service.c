/* The service thread: one per rank with windows. It owns the receiving end
 * of every connection of the service communicator (shared, under a lock,
 * with user threads waiting for a signal or a slot), applies each record (data into
 * the window, then the signal) and frees its slot, sends what CUDA host
 * functions posted (outbox.c), and sleeps on the rank's doorbell there when
 * nothing moves. Since it never waits for a peer, a put waits only for the
 * target's service thread, never for its user thread. */
#define _GNU_SOURCE 1
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "call/doorbell.h"
#include "rma/internal.h"
#include "rma/wire.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/proc.h"
#include "util/socket.h"

/* Slots taken from one origin before looking at the next: no origin that
 * streams a large put holds up a signal from another for long. */
#define SLOTS_PER_TURN 4

int tutti_rma_fail(struct tutti_rma* r, ncclResult_t res, const char* why) {
  uint32_t none = 0;
  /* 1 while the first failure writes its cause, 2 once readable. */
  const int first =
      __atomic_compare_exchange_n(&r->failed, &none, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  if (first) {
    r->failed_res = res;
    snprintf(r->failed_why, sizeof r->failed_why, "%s", why);
    __atomic_store_n(&r->failed, 2, __ATOMIC_SEQ_CST);
    if (r->on_device) {
      /* Waits on streams read no host word: stop the device work instead. */
      tutti_dev_rma_fail(r->s.dev, -1, why);
    }
  }
  __atomic_add_fetch(&r->s.bell->ring, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &r->s.bell->ring, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  return first;
}

ncclResult_t tutti_rma_raise(struct tutti_rma* r, int origin, int sig, int ctx) {
  if (r->on_device) {
    return tutti_dev_rma_signal(r->s.dev, origin, sig, ctx);
  }
  /* Sequentially consistent: releases the data written before, and pairs
   * with a waiter counting itself in (tutti_rma_wake). */
  __atomic_add_fetch(&r->arrived[tutti_rma_sig_index(r, ctx, sig, origin)], 1, __ATOMIC_SEQ_CST);
  tutti_rma_wake(&r->s.bell->ring, &r->s.bell->sleeping);
  return ncclSuccess;
}

/* Records a failure of the receiving side; the first is also a warning
 * (the pieces of one dropped put would repeat it). */
static void fail(struct tutti_rma* r, ncclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct tutti_rma* r, ncclResult_t res, const char* fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (tutti_rma_fail(r, res, why)) {
    WARN("%s", why);
  }
}

/* Copies a piece into this rank's part of window `id` (a device window:
 * hands it to the device layer with its signal, `sig` >= 0, which then sets
 * *sig_done), holding the window lock so that a deregistration waits for
 * it: 0, 1 (no room on the device now: offer it again), or -1 (failure
 * recorded). */
static int deliver(struct tutti_rma* r, int origin, const struct tutti_rma_rec* rec,
                   const void* data, int sig, int* sig_done) {
  pthread_mutex_lock(&r->win_lock);
  struct tutti_win* w = tutti_rma_win_by_id(r, rec->win_id);
  ncclResult_t res = ncclSuccess;
  if (w != NULL && (rec->offset > w->size || rec->bytes > w->size - rec->offset)) {
    const size_t size = w->size;
    pthread_mutex_unlock(&r->win_lock);
    fail(r, ncclInvalidUsage,
         "rank %d dropped %llu bytes from rank %d at offset %llu of window #%u: they end beyond "
         "this rank's part of it (%zu bytes)",
         r->s.rank, (unsigned long long)rec->bytes, origin, (unsigned long long)rec->offset,
         rec->win_id, size);
    return -1;
  }
  if (w != NULL && rec->bytes > 0) {
    if (w->kind == TUTTI_MEM_DEVICE) {
      res = tutti_dev_rma_deliver(r->s.dev, w->dev, origin, rec->offset, data, rec->bytes, sig,
                                  rec->ctx);
      *sig_done = res == ncclSuccess && sig >= 0;
    } else {
      memcpy((char*)w->buff + rec->offset, data, rec->bytes); /* again on a retry: the same */
    }
  }
  pthread_mutex_unlock(&r->win_lock);
  if (w == NULL) {
    fail(r, ncclInvalidUsage,
         "rank %d dropped a put of rank %d (operation #%llu, %llu bytes at offset %llu) into "
         "window #%u, which this rank has deregistered or never registered: deregister a window "
         "only once every peer's puts into it are done",
         r->s.rank, origin, (unsigned long long)rec->op_seq, (unsigned long long)rec->bytes,
         (unsigned long long)rec->offset, rec->win_id);
    return -1;
  }
  if (res == ncclInProgress) {
    return 1;
  }
  if (res != ncclSuccess) {
    char cause[512];
    snprintf(cause, sizeof cause, "%s", tutti_last_error());
    fail(r, res, "rank %d could not copy a put of rank %d into window #%u: %s", r->s.rank, origin,
         rec->win_id, cause);
    return -1;
  }
  return 0;
}

/* Applies one record from `origin`: its data, then (last piece) its
 * signal. 0 when it is done with (applied, or dropped with its failure
 * recorded); 1 when the device has no room for it now: it stays in its
 * queue, to be offered again (whatever it did is done again then, alike). */
static int apply(struct tutti_rma* r, int origin, const void* slot, size_t bytes) {
  const struct tutti_rma_rec* rec = slot;
  struct tutti_rma_in* in = &r->in[origin];
  if (bytes < TUTTI_RMA_REC_BYTES || rec->magic != TUTTI_RMA_MAGIC ||
      rec->bytes != bytes - TUTTI_RMA_REC_BYTES ||
      (rec->kind != TUTTI_RMA_REC_PUT && rec->kind != TUTTI_RMA_REC_SIGNAL)) {
    fail(r, ncclInternalError,
         "rank %d received %zu bytes from rank %d that are no one-sided record (magic 0x%x): "
         "the service communicator carries nothing else",
         r->s.rank, bytes, origin, bytes >= 4 ? rec->magic : 0);
    return 0;
  }
  /* Pieces of one operation share its number; the next one takes the next. */
  if (rec->op_seq != in->seq && rec->op_seq != in->seq + 1) {
    fail(r, ncclInternalError,
         "rank %d received operation #%llu from rank %d after #%llu: records were lost or "
         "reordered",
         r->s.rank, (unsigned long long)rec->op_seq, origin, (unsigned long long)in->seq);
  }
  in->seq = rec->op_seq;
  if (rec->last && (rec->sig >= TUTTI_RMA_SIGNALS || rec->ctx >= r->s.num_ctx)) {
    fail(r, ncclInvalidUsage,
         "rank %d dropped a signal of rank %d with sigIdx %u, ctx %u: this rank has %d contexts "
         "of %d signals (numRmaCtx must be the same on every rank)",
         r->s.rank, origin, rec->sig, rec->ctx, r->s.num_ctx, TUTTI_RMA_SIGNALS);
    return 0;
  }
  int sig_done = 0;
  if (rec->kind == TUTTI_RMA_REC_PUT) {
    const int d = deliver(r, origin, rec, (const char*)slot + TUTTI_RMA_REC_BYTES,
                          rec->last ? (int)rec->sig : -1, &sig_done);
    if (d != 0) {
      return d > 0; /* no signal for data that did not land */
    }
  }
  if (!rec->last || sig_done) {
    return 0;
  }
  const ncclResult_t res = tutti_rma_raise(r, origin, rec->sig, rec->ctx);
  if (res == ncclInProgress) {
    return 1;
  }
  if (res != ncclSuccess) {
    char cause[512];
    snprintf(cause, sizeof cause, "%s", tutti_last_error());
    fail(r, ncclInternalError, "rank %d could not raise a signal of rank %d: %s", r->s.rank, origin,
         cause);
  }
  return 0;
}

/* Marks origins gone once seen gone twice, an idle look apart: what they
 * sent just before leaving has been read by then, so a wait for them that
 * is still short can never be met. */
static void check_gone(struct tutti_rma* r) {
  for (int p = 0; p < r->s.nranks; p++) {
    if (p == r->s.rank || r->s.peer_bells[p] == NULL ||
        __atomic_load_n(&r->gone[p], __ATOMIC_RELAXED)) {
      continue;
    }
    const char* why = tutti_doorbell_gone(r->s.peer_bells[p]);
    if (why == NULL) {
      r->in[p].strikes = 0;
    } else if (++r->in[p].strikes >= 2) {
      snprintf(r->gone_why[p], sizeof r->gone_why[p], "%s", why);
      __atomic_store_n(&r->gone[p], 1, __ATOMIC_RELEASE);
      tutti_rma_wake(&r->s.bell->ring, &r->s.bell->sleeping);
    }
  }
}

/* Applies what has arrived, a few slots per origin in turn: 1 when
 * anything was. Holds rx_lock. */
static int poll_all(struct tutti_rma* r) {
  int moved = 0;
  for (int p = 0; p < r->s.nranks; p++) {
    struct tutti_conn* c = r->s.recv[p];
    for (int k = 0; p != r->s.rank && k < SLOTS_PER_TURN; k++) {
      size_t bytes;
      const void* slot = c->ops->recv_begin(c, &bytes);
      if (slot == NULL) {
        break;
      }
      if (apply(r, p, slot, bytes)) {
        /* The device's landing is full: the record waits in its queue, and
         * the thread keeps looking (a wait kernel frees room, and rings no bell). */
        __atomic_store_n(&r->held_back, 1, __ATOMIC_RELAXED);
        break;
      }
      c->ops->recv_end(c);
      r->in[p].strikes = 0;
      moved = 1;
    }
  }
  return moved;
}

int tutti_rma_receive(struct tutti_rma* r) {
  if (r->s.nranks == 1 || pthread_mutex_trylock(&r->rx_lock) != 0) {
    return 0;
  }
  const int moved = poll_all(r);
  pthread_mutex_unlock(&r->rx_lock);
  return moved;
}

int tutti_rma_pass(struct tutti_rma* r, struct tutti_rma_nap* n, int receive) {
  if (receive && tutti_rma_receive(r)) {
    tutti_rma_nap_reset(n);
    return 1;
  }
  return !tutti_rma_nap_idle(n);
}

static void* service_main(void* arg) {
  struct tutti_rma* r = arg;
  struct tutti_rma_nap nap = {
      &r->s.bell->ring, &r->s.bell->sleeping, r->spin, r->spin_max, r->yield, 0, 0, 0};
  double last_check = 0, held_since = 0;
  while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
    /* What host functions posted goes out (outbox.c), then what came in. */
    const int sent = tutti_rma_pump_out(r);
    if (sent) {
      tutti_rma_nap_reset(&nap);
    }
    if (tutti_rma_pass(r, &nap, 1) || sent) {
      continue;
    }
    if (__atomic_exchange_n(&r->held_back, 0, __ATOMIC_RELAXED)) {
      /* No long sleep while a record waits for room (a wait kernel frees
       * it and rings no bell): yield, then nap 50 us at a time. */
      tutti_rma_nap_reset(&nap);
      const double t = tutti_socket_now();
      held_since = held_since == 0 ? t : held_since;
      if (t - held_since < 0.001) {
        sched_yield();
      } else {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
      }
      continue;
    }
    held_since = 0;
    const double t = tutti_socket_now();
    if (t - last_check >= 0.05) {
      last_check = t;
      char why[512];
      if (tutti_rma_out_check(r, t, why, sizeof why)) {
        fail(r, ncclRemoteError, "%s", why);
      }
      /* Drained right before, in one hold of the lock: an origin seen gone
       * has nothing left in its queue. */
      pthread_mutex_lock(&r->rx_lock);
      if (!poll_all(r)) {
        check_gone(r);
      }
      pthread_mutex_unlock(&r->rx_lock);
    }
  }
  tutti_rma_nap_reset(&nap);
  return NULL;
}

ncclResult_t tutti_rma_create(const struct tutti_rma_setup* s, struct tutti_rma** out) {
  const int n = s->nranks;
  /* numRmaCtx 0 leaves windows without signals: puts are refused. */
  const size_t nsig = (size_t)(s->num_ctx > 0 ? s->num_ctx : 1) * TUTTI_RMA_SIGNALS * (size_t)n;
  struct tutti_rma* r = calloc(1, sizeof *r);
  *out = NULL;
  if (r == NULL) {
    return tutti_error(ncclSystemError, "out of host memory for one-sided state");
  }
  r->s = *s;
  r->spin = s->spin;
  r->spin_max = s->spin_max > s->spin ? s->spin_max : s->spin;
  r->wait_spin = s->spin;
  r->yield = s->yield;
  pthread_mutex_init(&r->win_lock, NULL);
  pthread_mutex_init(&r->consume_lock, NULL);
  pthread_mutex_init(&r->rx_lock, NULL);
  r->out = calloc((size_t)n, sizeof *r->out);
  r->in = calloc((size_t)n, sizeof *r->in);
  r->arrived = calloc(nsig, sizeof *r->arrived);
  r->consumed = calloc(nsig, sizeof *r->consumed);
  r->gone = calloc((size_t)n, sizeof *r->gone);
  r->gone_why = calloc((size_t)n, sizeof *r->gone_why);
  if (r->out == NULL || r->in == NULL || r->arrived == NULL || r->consumed == NULL ||
      r->gone == NULL || r->gone_why == NULL) {
    tutti_rma_destroy(r);
    return tutti_error(ncclSystemError, "out of host memory for the one-sided state of %d ranks",
                       n);
  }
  for (int p = 0; p < n; p++) {
    pthread_mutex_init(&r->out[p].lock, NULL);
  }
  /* A record and its payload fill one slot: the smallest slot decides. */
  r->payload = 0;
  for (int p = 0; p < n; p++) {
    const size_t slot = p != s->rank && s->send[p] != NULL ? s->send[p]->slot_bytes : 0;
    if (slot > TUTTI_RMA_REC_BYTES &&
        (r->payload == 0 || slot - TUTTI_RMA_REC_BYTES < r->payload)) {
      r->payload = slot - TUTTI_RMA_REC_BYTES;
    }
  }
  ncclResult_t res = ncclSuccess;
  if (s->dev != NULL) {
    res = tutti_dev_rma_start(s->dev, n, s->num_ctx, TUTTI_RMA_SIGNALS, r->payload, &r->on_device);
    r->dev_started = res == ncclSuccess;
  }
  /* With no peer nothing arrives: no thread. */
  if (res == ncclSuccess && n > 1) {
    int err = tutti_thread_start(&r->thread, service_main, r, "tutti-rma");
    if (err != 0) {
      res = tutti_error(ncclSystemError, "could not start the one-sided service thread: %s",
                        strerror(err));
    }
    r->thread_live = err == 0;
  }
  if (res != ncclSuccess) {
    tutti_rma_destroy(r);
    return res;
  }
  INFO(TUTTI_INIT,
       "rank %d: one-sided operations over a service communicator, %zu bytes of "
       "data per record, %d contexts, signals in %s memory",
       s->rank, r->payload, s->num_ctx, r->on_device ? "device" : "host");
  *out = r;
  return ncclSuccess;
}

void tutti_rma_destroy(struct tutti_rma* r) {
  if (r == NULL) {
    return;
  }
  if (r->thread_live) {
    /* Puts host functions handed over reach their peers first (bounded). */
    tutti_rma_out_drain(r);
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&r->s.bell->ring, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &r->s.bell->ring, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    pthread_join(r->thread, NULL);
    r->thread_live = 0;
  }
  tutti_rma_win_free_all(r);
  if (r->dev_started) {
    tutti_dev_rma_stop(r->s.dev);
  }
  for (int p = 0; r->out != NULL && p < r->s.nranks; p++) {
    while (r->out[p].head != NULL) { /* no thread: nothing can send them */
      struct tutti_rma_msg* m = r->out[p].head;
      r->out[p].head = m->next;
      free(m);
    }
    pthread_mutex_destroy(&r->out[p].lock);
  }
  pthread_mutex_destroy(&r->win_lock);
  pthread_mutex_destroy(&r->consume_lock);
  pthread_mutex_destroy(&r->rx_lock);
  free(r->out);
  free(r->in);
  free(r->arrived);
  free(r->consumed);
  free(r->gone);
  free(r->gone_why);
  free(r);
}
