/* Signals counted in host memory: ncclWaitSignal on the calling thread
 * waits until every awaited signal arrived, receiving what has come itself
 * while it spins (no hop through the service thread), then consumes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rma/internal.h"
#include "util/check.h"
#include "util/proc.h"
#include "util/socket.h"

/* One awaited signal: descs naming the same one are added up. */
struct awaited {
  size_t idx;
  int peer, sig, ctx;
  uint64_t need;
};

static int by_index(const void* x, const void* y) {
  const size_t a = ((const struct awaited*)x)->idx, b = ((const struct awaited*)y)->idx;
  return a < b ? -1 : a > b;
}

/* Consumes every awaited signal when all have arrived: 1, else 0. */
static int try_consume(struct tutti_rma* r, const struct awaited* a, int n) {
  pthread_mutex_lock(&r->consume_lock);
  int all = 1;
  for (int i = 0; i < n && all; i++) {
    all = __atomic_load_n(&r->arrived[a[i].idx], __ATOMIC_SEQ_CST) >=
          r->consumed[a[i].idx] + a[i].need;
  }
  for (int i = 0; i < n && all; i++) {
    r->consumed[a[i].idx] += a[i].need;
  }
  pthread_mutex_unlock(&r->consume_lock);
  return all;
}

/* How many of a's signals are there to take now. */
static uint64_t available(struct tutti_rma* r, const struct awaited* a) {
  pthread_mutex_lock(&r->consume_lock);
  const uint64_t got = __atomic_load_n(&r->arrived[a->idx], __ATOMIC_SEQ_CST) - r->consumed[a->idx];
  pthread_mutex_unlock(&r->consume_lock);
  return got;
}

/* The first awaited signal that has not all arrived, or -1. */
static int first_short(struct tutti_rma* r, const struct awaited* a, int n) {
  for (int i = 0; i < n; i++) {
    if (available(r, &a[i]) < a[i].need) {
      return i;
    }
  }
  return -1;
}

/* Why a wait gives up, when it must: the receiving side failed, the
 * communicator was aborted, an awaited origin is gone (after the service
 * thread read everything it sent), or nothing arrived for TUTTI_TIMEOUT. */
static ncclResult_t slow_checks(struct tutti_rma* r, const struct awaited* a, int n, double since,
                                double now) {
  char who[192];
  if (__atomic_load_n(&r->failed, __ATOMIC_ACQUIRE) == 2) {
    return tutti_error(r->failed_res, "ncclWaitSignal on rank %d: %s", r->s.rank, r->failed_why);
  }
  if (__atomic_load_n(r->s.abort_flag, __ATOMIC_ACQUIRE)) {
    return tutti_error(ncclRemoteError,
                       "ncclWaitSignal on rank %d stopped: the communicator was aborted",
                       r->s.rank);
  }
  for (int i = 0; i < n; i++) {
    if (!__atomic_load_n(&r->gone[a[i].peer], __ATOMIC_ACQUIRE)) {
      continue;
    }
    const uint64_t got = available(r, &a[i]);
    if (got < a[i].need) {
      tutti_rma_name_peer(r, a[i].peer, who, sizeof who);
      return tutti_error(ncclRemoteError,
                         "%s %s while rank %d waits for its signal (sigIdx %d, ctx %d): %llu of "
                         "%llu arrived",
                         who, r->gone_why[a[i].peer], r->s.rank, a[i].sig, a[i].ctx,
                         (unsigned long long)got, (unsigned long long)a[i].need);
    }
  }
  if (now - since > r->s.timeout_s) {
    const int i = first_short(r, a, n);
    if (i >= 0) {
      tutti_rma_name_peer(r, a[i].peer, who, sizeof who);
      const char* how = tutti_process_stopped(r->s.peers[a[i].peer].pid) &&
                                r->s.peers[a[i].peer].host_hash == r->s.peers[r->s.rank].host_hash
                            ? "it is alive but stopped (SIGSTOP or a debugger)"
                            : "is it alive, and does it put to this rank what this wait expects?";
      return tutti_error(ncclRemoteError,
                         "ncclWaitSignal on rank %d made no progress for %.0f s (TUTTI_TIMEOUT) "
                         "waiting for %s's signal (sigIdx %d, ctx %d): %llu of %llu arrived; %s",
                         r->s.rank, r->s.timeout_s, who, a[i].sig, a[i].ctx,
                         (unsigned long long)available(r, &a[i]), (unsigned long long)a[i].need,
                         how);
    }
  }
  return ncclSuccess;
}

ncclResult_t tutti_rma_wait_host(struct tutti_rma* r, const ncclWaitSignalDesc_t* descs, int n) {
  struct awaited stack[16];
  struct awaited* a = n <= 16 ? stack : malloc((size_t)n * sizeof *a);
  if (a == NULL) {
    return tutti_error(ncclSystemError, "ncclWaitSignal: out of host memory for %d descs", n);
  }
  /* Sorted by signal, descs naming the same one added up: n log n, as an
   * all-to-all's wait names every rank. */
  for (int i = 0; i < n; i++) {
    const ncclWaitSignalDesc_t* d = &descs[i];
    a[i] = (struct awaited){tutti_rma_sig_index(r, d->ctx, d->sigIdx, d->peer), d->peer, d->sigIdx,
                            d->ctx, (uint64_t)d->opCnt};
  }
  qsort(a, (size_t)n, sizeof *a, by_index);
  int na = 0;
  for (int i = 0; i < n; i++) {
    if (na > 0 && a[na - 1].idx == a[i].idx) {
      a[na - 1].need += a[i].need;
    } else {
      a[na++] = a[i];
    }
  }
  struct tutti_rma_nap nap = {&r->s.bell->ring,
                              &r->s.bell->sleeping,
                              __atomic_load_n(&r->wait_spin, __ATOMIC_RELAXED),
                              r->spin_max,
                              r->yield,
                              0,
                              0,
                              0};
  ncclResult_t res = ncclSuccess;
  double since = 0, last_check = 0;
  uint64_t seen_total = 0;
  while (!try_consume(r, a, na)) {
    /* While spinning, receive what came (when the service thread is not
     * at it): the signal is seen without waking another thread. */
    if (tutti_rma_pass(r, &nap, 1)) {
      continue;
    }
    const double t = tutti_socket_now();
    if (since == 0) {
      since = t;
    }
    if (t - last_check < 0.05) {
      continue;
    }
    last_check = t;
    /* Progress is any awaited signal arriving: the bound is on a wait that
     * sees nothing arrive for TUTTI_TIMEOUT, not on a long wait. */
    uint64_t total = 0;
    for (int i = 0; i < na; i++) {
      total += __atomic_load_n(&r->arrived[a[i].idx], __ATOMIC_ACQUIRE);
    }
    if (total != seen_total) {
      seen_total = total;
      since = t;
    }
    res = slow_checks(r, a, na, since, t);
    if (res != ncclSuccess) {
      break;
    }
  }
  tutti_rma_nap_reset(&nap);
  __atomic_store_n(&r->wait_spin, nap.spin, __ATOMIC_RELAXED); /* for the next wait */
  if (a != stack) {
    free(a);
  }
  return res;
}
