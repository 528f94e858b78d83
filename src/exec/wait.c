/* Spin, yield, then sleep on a futex (see exec.h). Ranks may outnumber
 * cores, so spinning stays short: a rank that burns its core delays the very
 * peer it waits for. */
#define _GNU_SOURCE 1
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"
#include "util/log.h"
#include "util/param.h"

static TUTTI_PARAM(spin_passes, "TUTTI_SPIN", -1,
                   "idle passes a waiting rank spins before yielding (-1: 8, or 0 when ranks "
                   "outnumber cores)");
static TUTTI_PARAM(yield_passes, "TUTTI_YIELD", -1,
                   "passes a waiting rank then yields before sleeping on a futex (-1: 200, or "
                   "1000 when ranks outnumber cores)");

void tutti_wait_policy(struct tutti_exec_rank* er, int local_ranks) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  /* Spinning answers fastest only while the peer is running; on a loaded
   * machine (other jobs, or more ranks than cores) it burns the time slice
   * the peer needs. sched_yield costs little when nobody else wants the core
   * and hands it over at once when someone does, so spin only briefly, then
   * yield for a good while before sleeping on the futex. */
  int oversubscribed = local_ranks > cpus;
  int64_t spin = tutti_param_spin_passes(), yield = tutti_param_yield_passes();
  /* More ranks than cores: yield from the first idle pass. A pass that
   * found nothing says the peer is not running, and on this core it may be
   * the very rank that must run (4 ranks on 2 cores: 32 B allreduce 4.12
   * against 6.13 us spinning 8 passes first, 2 KB 5.79 against 6.79;
   * docs/history/results-diary.md, "Decisions"). */
  er->spin_max = spin >= 0 ? (int)spin : (oversubscribed ? 0 : 4096);
  er->spin_passes = spin >= 0 ? (int)spin : (oversubscribed ? 0 : 8);
  er->yield_passes = yield >= 0 ? (int)yield : (oversubscribed ? 1000 : 200);
  INFO(TUTTI_INIT, "rank %d: %d ranks on this host's %d cores: spin up to %d, yield %d, then sleep",
       er->rank, local_ranks, cpus, er->spin_max, er->yield_passes);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

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
    w->seen = tutti_doorbell_arm(w->bell);
    w->armed = 1;
    return 1; /* one more pass before sleeping */
  }
  tutti_doorbell_sleep(w->bell, w->seen);
  w->armed = 0;
  return 1;
}
