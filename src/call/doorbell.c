/* Waking a doorbell's owner, its sleep, and what a peer's bell says of its
 * owner (see doorbell.h). */
#define _GNU_SOURCE 1
#include "call/doorbell.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/proc.h"
#include "util/socket.h"

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

uint32_t tutti_doorbell_arm(struct tutti_doorbell* bell) {
  const uint32_t seen = __atomic_load_n(&bell->ring, __ATOMIC_SEQ_CST);
  __atomic_store_n(&bell->sleeping, 1, __ATOMIC_SEQ_CST);
  return seen;
}

void tutti_doorbell_sleep(struct tutti_doorbell* bell, uint32_t seen) {
  struct timespec ts = {0, 100 * 1000 * 1000};
  syscall(SYS_futex, &bell->ring, FUTEX_WAIT, seen, &ts, NULL, 0);
  tutti_doorbell_disarm(bell);
}

const char* tutti_doorbell_gone(const struct tutti_doorbell* bell) {
  static __thread char why[192];
  const char* left = NULL;
  if (__atomic_load_n(&bell->departed, __ATOMIC_ACQUIRE)) {
    left = "destroyed its communicator";
  } else if (tutti_process_gone(bell->pid)) {
    left = "exited";
  }
  /* A network peer's broken connection (see struct tutti_doorbell). */
  const uint32_t lost = __atomic_load_n(&bell->lost, __ATOMIC_ACQUIRE);
  const int err = tutti_lost_errno(lost);
  const int who = tutti_lost_rank(lost);
  if (tutti_lost_is_self(lost) && left == NULL && err == ETIMEDOUT) {
    const int hb = tutti_socket_heartbeat_s();
    snprintf(why, sizeof why,
             "lost its connection (its host answered nothing for %d s, %d heartbeats of "
             "TUTTI_HEARTBEAT_S=%d: is it down, or its network link cut?)",
             hb * TUTTI_SOCKET_MISSED, TUTTI_SOCKET_MISSED, hb);
    return why;
  }
  if (tutti_lost_is_self(lost) && left == NULL && (err == EBADMSG || err == EKEYREJECTED)) {
    /* util/seal.c's refusals; the WARN before this names the connection. */
    snprintf(why, sizeof why, "lost its connection (%s)",
             err == EBADMSG ? "an encrypted record does not authenticate: it was altered, "
                              "replayed or reordered on the way, and was not delivered"
                            : "the encryption handshake failed: the pre-shared keys differ "
                              "(ncclSetEncryption)");
    return why;
  }
  if (tutti_lost_is_self(lost) && left == NULL) {
    snprintf(why, sizeof why, "lost its connection (%s)",
             err != 0 ? strerror(err)
                      : "closed without leaving the communicator: it exited, was killed or "
                        "its host went down");
    return why;
  }
  /* Only once the owner has left: a broken link elsewhere is its reason. */
  if (who >= 0 && left != NULL && err == ETIME) {
    snprintf(why, sizeof why,
             "%s after rank %d made no progress for TUTTI_TIMEOUT (stopped, or stuck in its own "
             "code)",
             left, who);
    return why;
  }
  if (who >= 0 && left != NULL) {
    snprintf(why, sizeof why, "%s after losing rank %d (%s)", left, who,
             err == ETIMEDOUT ? "its host stopped answering: down, or its link cut"
             : err != 0       ? strerror(err)
                              : "that rank left the job without a goodbye");
    return why;
  }
  return left;
}
