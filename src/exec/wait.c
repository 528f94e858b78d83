/* Spin, yield, then sleep on a futex (see exec.h). Ranks may outnumber
 * cores, so spinning stays short: a rank that burns its core delays the very
 * peer it waits for. */
#define _GNU_SOURCE 1
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"
#include "util/log.h"

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

void tutti_doorbell_ring(struct tutti_doorbell* bell) {
  if (bell == NULL) {
    return;
  }
  /* The caller's store to a queue (seq_cst) then this load (seq_cst) pair
   * with the waiter's store of `sleeping` then its loads of the queues:
   * either it sees our data, or we see it sleeping. */
  if (__atomic_load_n(&bell->sleeping, __ATOMIC_SEQ_CST)) {
    __atomic_fetch_add(&bell->ring, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &bell->ring, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  }
}

void tutti_wait_prepare(struct tutti_waiter* w) {
  w->armed = 0;
  w->idle_passes = 0;
}

void tutti_wait_reset(struct tutti_waiter* w) {
  if (w->armed) {
    __atomic_store_n(&w->bell->sleeping, 0, __ATOMIC_RELAXED);
    w->armed = 0;
  }
  /* Adaptive spinning, as adaptive mutexes do: a wait that ended while
   * spinning, or right after the first yields, says the peer was running and
   * spinning pays; one that needed long yielding or a sleep says it did not
   * (a loaded machine), and spinning only burnt the core the peer needed. */
  if (w->idle_passes > 0) {
    if (w->idle_passes <= w->spin + 2) {
      w->spin = w->spin * 2 > w->spin_max ? w->spin_max : w->spin * 2;
    } else if (w->spin > 4) {
      w->spin /= 2;
    }
  }
  w->idle_passes = 0;
}

int tutti_wait_idle(struct tutti_waiter* w) {
  const int spin = w->spin;
  const int yield = spin + w->yield;
  w->idle_passes++;
  if (w->idle_passes <= spin) {
    cpu_relax();
    return 0;
  }
  if (w->idle_passes <= yield) {
    sched_yield();
    return 0;
  }
  if (w->bell == NULL) {
    long us = 20L << (w->idle_passes - yield < 6 ? w->idle_passes - yield : 6);
    struct timespec ts = {0, (us > 1000 ? 1000 : us) * 1000};
    nanosleep(&ts, NULL);
    return 1;
  }
  if (!w->armed) {
    w->seen = __atomic_load_n(&w->bell->ring, __ATOMIC_SEQ_CST);
    __atomic_store_n(&w->bell->sleeping, 1, __ATOMIC_SEQ_CST);
    w->armed = 1;
    return 1; /* one more pass before sleeping */
  }
  /* Bounded, so that aborts, dead peers and timeouts are noticed. */
  struct timespec ts = {0, 100 * 1000 * 1000};
  syscall(SYS_futex, &w->bell->ring, FUTEX_WAIT, w->seen, &ts, NULL, 0);
  __atomic_store_n(&w->bell->sleeping, 0, __ATOMIC_RELAXED);
  w->armed = 0;
  return 1;
}
