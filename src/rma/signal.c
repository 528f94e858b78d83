/* Signals counted in host memory: raised by the service thread once a put's
 * data is in place, awaited and consumed by ncclWaitSignal on the calling
 * thread; and the waiting that puts and the service thread share. */
#define _GNU_SOURCE 1
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rma/internal.h"
#include "util/check.h"
#include "util/proc.h"
#include "util/socket.h"

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

int tutti_rma_nap_idle(struct tutti_rma_nap* n) {
  n->idle++;
  if (n->idle <= n->spin) {
    cpu_relax();
    return 0;
  }
  if (n->idle <= n->spin + n->yield) {
    sched_yield();
    return 0;
  }
  if (!n->armed) {
    n->seen = __atomic_load_n(n->word, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(n->sleepers, 1, __ATOMIC_SEQ_CST);
    n->armed = 1;
    return 1; /* one more look before sleeping */
  }
  /* Bounded, so that aborts, lost peers and the timeout are noticed. Not a
   * private futex: the word may be a doorbell in shared memory, which
   * peers' processes ring. */
  struct timespec ts = {0, 100 * 1000 * 1000};
  syscall(SYS_futex, n->word, FUTEX_WAIT, n->seen, &ts, NULL, 0);
  __atomic_sub_fetch(n->sleepers, 1, __ATOMIC_SEQ_CST);
  n->armed = 0;
  return 1;
}

void tutti_rma_nap_reset(struct tutti_rma_nap* n) {
  if (n->armed) {
    __atomic_sub_fetch(n->sleepers, 1, __ATOMIC_SEQ_CST);
    n->armed = 0;
  }
  n->idle = 0;
}

void tutti_rma_wake(uint32_t* word, const uint32_t* sleepers) {
  /* The caller's store (sequentially consistent) then this load pair with a
   * sleeper's count then its look at the condition. */
  if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) {
    __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  }
}

void tutti_rma_name_peer(const struct tutti_rma* r, int peer, char* buf, size_t len) {
  const struct tutti_peer_info* p = &r->s.peers[peer];
  snprintf(buf, len, "rank %d (pid %d on host %s)", peer, (int)p->pid, p->hostname);
}

void tutti_rma_fail(struct tutti_rma* r, ncclResult_t res, const char* why) {
  uint32_t none = 0;
  /* 1 while the first failure writes its cause, 2 once readable. */
  if (__atomic_compare_exchange_n(&r->failed, &none, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    r->failed_res = res;
    snprintf(r->failed_why, sizeof r->failed_why, "%s", why);
    __atomic_store_n(&r->failed, 2, __ATOMIC_SEQ_CST);
  }
  __atomic_add_fetch(&r->sig_word, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &r->sig_word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

ncclResult_t tutti_rma_raise(struct tutti_rma* r, int origin, int sig, int ctx) {
  if (r->on_device) {
    return tutti_dev_rma_signal(r->s.dev, origin, sig, ctx);
  }
  /* Sequentially consistent: releases the data written before, and pairs
   * with a waiter counting itself in (tutti_rma_wake). */
  __atomic_add_fetch(&r->arrived[tutti_rma_sig_index(r, ctx, sig, origin)], 1, __ATOMIC_SEQ_CST);
  tutti_rma_wake(&r->sig_word, &r->sig_sleepers);
  return ncclSuccess;
}

/* One awaited signal: descs naming the same one are added up. */
struct awaited {
  size_t idx;
  int peer, sig, ctx;
  uint64_t need;
};

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
  int na = 0;
  for (int i = 0; i < n; i++) {
    const ncclWaitSignalDesc_t* d = &descs[i];
    const size_t idx = tutti_rma_sig_index(r, d->ctx, d->sigIdx, d->peer);
    int k = 0;
    while (k < na && a[k].idx != idx) {
      k++;
    }
    if (k == na) {
      a[na++] = (struct awaited){idx, d->peer, d->sigIdx, d->ctx, 0};
    }
    a[k].need += (uint64_t)d->opCnt;
  }
  struct tutti_rma_nap nap = {&r->sig_word, &r->sig_sleepers, r->spin, r->yield, 0, 0, 0};
  ncclResult_t res = ncclSuccess;
  double since = 0, last_check = 0;
  uint64_t seen_total = 0;
  while (!try_consume(r, a, na)) {
    if (!tutti_rma_nap_idle(&nap)) {
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
  if (a != stack) {
    free(a);
  }
  return res;
}
