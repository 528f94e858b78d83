/* Waiting as puts, waits and the service thread share it: spin, yield,
 * then sleep on a futex word several threads may sleep on at once. */
#define _GNU_SOURCE 1
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rma/internal.h"
#include "util/proc.h"

int tutti_rma_nap_idle(struct tutti_rma_nap* n) {
  n->idle++;
  if (n->idle <= n->spin) {
    tutti_cpu_relax();
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
  if (n->idle > 0 && n->idle <= n->spin + 2) {
    const int more = n->spin > 0 ? n->spin * 2 : 1;
    n->spin = more < n->spin_max ? more : n->spin_max;
  } else if (n->idle > n->spin + 2 && n->spin > 4) {
    n->spin /= 2;
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
