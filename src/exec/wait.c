/* Spin, yield, then sleep on a futex (see exec.h). Ranks may outnumber
 * cores, so spinning stays short: a rank that burns its core delays the very
 * peer it waits for. */
#define _GNU_SOURCE 1
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"
#include "util/proc.h"
#include "util/log.h"

void tutti_wait_prepare(struct tutti_waiter* w) {
  w->armed = 0;
  w->idle_passes = 0;
}

void tutti_wait_reset(struct tutti_waiter* w) {
  if (w->armed) {
    tutti_doorbell_disarm(w->bell);
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
    tutti_cpu_relax();
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
    w->seen = tutti_doorbell_arm(w->bell);
    w->armed = 1;
    return 1; /* one more pass before sleeping */
  }
  tutti_doorbell_sleep(w->bell, w->seen);
  w->armed = 0;
  return 1;
}
