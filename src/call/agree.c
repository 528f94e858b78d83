/* Call agreement (see agree.h); the records themselves live in the
 * doorbells (call/doorbell.h). */
#include "call/agree.h"

#include <stdio.h>
#include <string.h>

#include "util/check.h"

int tutti_agree_visible(struct tutti_bells b, int p) {
  return p != b.rank && b.peers != NULL && b.peers[p] != NULL &&
         __atomic_load_n(&b.peers[p]->shows_calls, __ATOMIC_ACQUIRE) != 0;
}

ncclResult_t tutti_agree_check(struct tutti_bells b, const struct tutti_call* call, int* pending) {
  *pending = 0;
  if (call->seq == 0) {
    return ncclSuccess;
  }
  for (int p = 0; p < b.nranks; p++) {
    if (!tutti_agree_visible(b, p)) {
      continue;
    }
    struct tutti_call theirs;
    if (!tutti_doorbell_get_call(b.peers[p], call->seq, &theirs)) {
      ++*pending;
    } else if (!tutti_call_same(call, &theirs)) {
      return tutti_call_mismatch(b.rank, call, p, &theirs);
    }
  }
  return ncclSuccess;
}

int tutti_agree_missing(struct tutti_bells b, const struct tutti_call* call) {
  struct tutti_call theirs;
  for (int p = 0; p < b.nranks && call->seq != 0; p++) {
    if (tutti_agree_visible(b, p) && !tutti_doorbell_get_call(b.peers[p], call->seq, &theirs)) {
      return p;
    }
  }
  return -1;
}

ncclResult_t tutti_agree_explain(struct tutti_bells b, const struct tutti_call* call, int peer) {
  struct tutti_call theirs;
  if (call->seq != 0 && peer >= 0 && peer < b.nranks && tutti_agree_visible(b, peer) &&
      tutti_doorbell_get_call(b.peers[peer], call->seq, &theirs) &&
      !tutti_call_same(call, &theirs)) {
    return tutti_call_mismatch(b.rank, call, peer, &theirs);
  }
  return ncclSuccess;
}

int tutti_agree_peer_failed(struct tutti_bells b, uint64_t seq, ncclResult_t* res, int* first) {
  for (int p = 0; p < b.nranks && b.peers != NULL; p++) {
    const struct tutti_doorbell* pb = b.peers[p];
    if (p == b.rank || pb == NULL) {
      continue;
    }
    const uint32_t code = __atomic_load_n(&pb->failed, __ATOMIC_ACQUIRE);
    /* A peer that failed in a later call did its part of this one; one
     * that gave up waiting in this very call leaves this rank its own view. */
    const uint64_t at = pb->failed_seq;
    if (code == 0 || (seq != 0 && at != 0 && (at > seq || (pb->failed_wait && at == seq)))) {
      continue;
    }
    /* The cause as it was first told, unchanged on every rank. */
    char why[sizeof pb->failed_why + 1];
    memcpy(why, pb->failed_why, sizeof pb->failed_why);
    why[sizeof pb->failed_why] = '\0';
    *first = (int)pb->failed_rank;
    *res = tutti_error((ncclResult_t)code, "%s", why);
    return p;
  }
  return -1;
}

void tutti_agree_fail(struct tutti_bells b, ncclResult_t res, int first, uint64_t seq, int wait) {
  struct tutti_doorbell* own = b.own;
  if (own == NULL || res == ncclSuccess || __atomic_load_n(&own->failed, __ATOMIC_ACQUIRE) != 0) {
    return;
  }
  snprintf(own->failed_why, sizeof own->failed_why, "%s", tutti_last_error());
  /* The call that failed tells the cause as every later one will. */
  tutti_set_last_error(own->failed_why);
  own->failed_rank = (uint32_t)(first >= 0 ? first : b.rank);
  own->failed_seq = seq;
  own->failed_wait = (uint32_t)wait;
  __atomic_store_n(&own->failed, (uint32_t)res, __ATOMIC_RELEASE);
  for (int p = 0; p < b.nranks && b.peers != NULL; p++) {
    if (p != b.rank && b.peers[p] != NULL) {
      tutti_doorbell_ring(b.peers[p]);
    }
  }
}

ncclResult_t tutti_agree_device(struct tutti_bells b, const struct tutti_call* call,
                                uint64_t* checked, int* first) {
  ncclResult_t res;
  if (tutti_agree_peer_failed(b, call->seq, &res, first) >= 0) {
    return res;
  }
  if (call->seq == 0 || b.own == NULL) {
    return ncclSuccess;
  }
  /* Published, then read, both sequentially consistent (the record's
   * number): of two ranks making different calls at once, at least one
   * sees the other's. */
  tutti_doorbell_put_call(b.own, call);
  /* This call and the earlier ones whose peers' records have come since,
   * in one pass: a launch reads each peer's newest record once. */
  if (b.peers != NULL && tutti_agree_scan(b.own, b.peers, b.nranks, b.rank, checked)) {
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t tutti_agree_sticky(const struct tutti_doorbell* own) {
  const uint32_t code = own != NULL ? __atomic_load_n(&own->failed, __ATOMIC_ACQUIRE) : 0;
  if (code == 0) {
    return ncclSuccess;
  }
  char why[sizeof own->failed_why + 1];
  memcpy(why, own->failed_why, sizeof own->failed_why);
  why[sizeof own->failed_why] = '\0';
  tutti_set_last_error(why); /* told once, when it happened: no warning again */
  return (ncclResult_t)code;
}

int tutti_agree_scan(const struct tutti_doorbell* own, struct tutti_doorbell* const* bells,
                     int nranks, int me, uint64_t* checked) {
  for (;;) {
    /* The oldest of this rank's device calls after *checked still held. */
    uint64_t next = 0;
    for (int i = 0; i < TUTTI_CALL_HISTORY; i++) {
      const uint64_t seq = __atomic_load_n(&own->calls[i].seq, __ATOMIC_ACQUIRE);
      if (seq > *checked && (next == 0 || seq < next)) {
        next = seq;
      }
    }
    struct tutti_call mine, theirs;
    if (next == 0 || !tutti_doorbell_get_call(own, next, &mine)) {
      return 0;
    }
    for (int p = 0; p < nranks && mine.device; p++) {
      const struct tutti_doorbell* b = bells[p];
      if (p == me || b == NULL || !__atomic_load_n(&b->shows_calls, __ATOMIC_ACQUIRE)) {
        continue;
      }
      if (!tutti_doorbell_get_call(b, next, &theirs)) {
        return 0; /* not seen yet: later */
      }
      if (!tutti_call_same(&mine, &theirs)) {
        tutti_call_mismatch(me, &mine, p, &theirs);
        return 1;
      }
    }
    *checked = next;
  }
}
