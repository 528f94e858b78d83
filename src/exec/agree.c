/* Call agreement (see agree.h); the records themselves live in the
 * doorbells (transport/transport.c). */
#include "exec/agree.h"

#include <stdio.h>
#include <string.h>

#include "reduce/reduce.h"
#include "util/check.h"

static const char* red_name(int red) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  if (red >= 0 && red < 5) {
    return names[red];
  }
  return red == TUTTI_CALL_RED_PREMUL_HOST  ? "PreMulSum (host scalar)"
         : red == TUTTI_CALL_RED_PREMUL_DEV ? "PreMulSum (device scalar)"
                                            : NULL;
}

void tutti_call_describe(const struct tutti_call* c, char* buf, size_t len) {
  int o = snprintf(buf, len, "%s #%llu of %llu %s", tutti_coll_name((enum tutti_coll)c->coll),
                   (unsigned long long)c->seq, (unsigned long long)c->count,
                   tutti_type_name((ncclDataType_t)c->type));
  const char* red = red_name(c->red);
  if (red != NULL && o > 0 && (size_t)o < len) {
    o += snprintf(buf + o, len - (size_t)o, ", %s", red);
  }
  if (c->root >= 0 && o > 0 && (size_t)o < len) {
    o += snprintf(buf + o, len - (size_t)o, ", root %d", (int)c->root);
  }
  if (o > 0 && (size_t)o < len) {
    snprintf(buf + o, len - (size_t)o, ", %s buffers", c->device ? "device" : "host");
  }
}

ncclResult_t tutti_call_mismatch(int me, const struct tutti_call* a, int peer,
                                 const struct tutti_call* b) {
  char mine[160], theirs[160];
  tutti_call_describe(a, mine, sizeof mine);
  tutti_call_describe(b, theirs, sizeof theirs);
  return tutti_error(ncclInvalidUsage,
                     "mismatched collective calls: rank %d called %s; rank %d called %s. Every "
                     "rank must make the same collective calls in the same order",
                     me, mine, peer, theirs);
}

int tutti_agree_visible(const struct tutti_exec_rank* er, int p) {
  return p != er->rank && er->peer_bells != NULL && er->peer_bells[p] != NULL &&
         __atomic_load_n(&er->peer_bells[p]->shows_calls, __ATOMIC_ACQUIRE) != 0;
}

ncclResult_t tutti_agree_check(const struct tutti_op* op, int* pending) {
  const struct tutti_exec_rank* er = op->er;
  *pending = 0;
  if (op->call.seq == 0) {
    return ncclSuccess;
  }
  for (int p = 0; p < er->nranks; p++) {
    if (!tutti_agree_visible(er, p)) {
      continue;
    }
    struct tutti_call theirs;
    if (!tutti_doorbell_get_call(er->peer_bells[p], op->call.seq, &theirs)) {
      ++*pending;
    } else if (!tutti_call_same(&op->call, &theirs)) {
      return tutti_call_mismatch(er->rank, &op->call, p, &theirs);
    }
  }
  return ncclSuccess;
}

int tutti_agree_missing(const struct tutti_op* op) {
  const struct tutti_exec_rank* er = op->er;
  struct tutti_call theirs;
  for (int p = 0; p < er->nranks && op->call.seq != 0; p++) {
    if (tutti_agree_visible(er, p) &&
        !tutti_doorbell_get_call(er->peer_bells[p], op->call.seq, &theirs)) {
      return p;
    }
  }
  return -1;
}

ncclResult_t tutti_agree_explain(const struct tutti_op* op, int peer) {
  const struct tutti_exec_rank* er = op->er;
  struct tutti_call theirs;
  if (op->call.seq != 0 && peer >= 0 && peer < er->nranks && tutti_agree_visible(er, peer) &&
      tutti_doorbell_get_call(er->peer_bells[peer], op->call.seq, &theirs) &&
      !tutti_call_same(&op->call, &theirs)) {
    return tutti_call_mismatch(er->rank, &op->call, peer, &theirs);
  }
  return ncclSuccess;
}

int tutti_agree_peer_failed(const struct tutti_exec_rank* er, uint64_t seq, ncclResult_t* res,
                            int* first) {
  for (int p = 0; p < er->nranks && er->peer_bells != NULL; p++) {
    const struct tutti_doorbell* b = er->peer_bells[p];
    if (p == er->rank || b == NULL) {
      continue;
    }
    const uint32_t code = __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE);
    /* A peer that failed in a later call did its part of this one; one
     * that gave up waiting in this very call leaves this rank its own view. */
    const uint64_t at = b->failed_seq;
    if (code == 0 || (seq != 0 && at != 0 && (at > seq || (b->failed_wait && at == seq)))) {
      continue;
    }
    /* The cause as it was first told, unchanged on every rank. */
    char why[sizeof b->failed_why + 1];
    memcpy(why, b->failed_why, sizeof b->failed_why);
    why[sizeof b->failed_why] = '\0';
    *first = (int)b->failed_rank;
    *res = tutti_error((ncclResult_t)code, "%s", why);
    return p;
  }
  return -1;
}

void tutti_agree_fail(struct tutti_exec_rank* er, ncclResult_t res, int first, uint64_t seq,
                      int wait) {
  struct tutti_doorbell* b = er->bell;
  if (b == NULL || res == ncclSuccess || __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) != 0) {
    return;
  }
  snprintf(b->failed_why, sizeof b->failed_why, "%s", tutti_last_error());
  /* The call that failed tells the cause as every later one will. */
  tutti_set_last_error(b->failed_why);
  b->failed_rank = (uint32_t)(first >= 0 ? first : er->rank);
  b->failed_seq = seq;
  b->failed_wait = (uint32_t)wait;
  __atomic_store_n(&b->failed, (uint32_t)res, __ATOMIC_RELEASE);
  for (int p = 0; p < er->nranks && er->peer_bells != NULL; p++) {
    if (p != er->rank && er->peer_bells[p] != NULL) {
      tutti_doorbell_ring(er->peer_bells[p]);
    }
  }
}

ncclResult_t tutti_agree_device(struct tutti_op* op, int* first) {
  struct tutti_exec_rank* er = op->er;
  ncclResult_t res;
  if (tutti_agree_peer_failed(er, op->call.seq, &res, first) >= 0) {
    return res;
  }
  if (op->call.seq == 0 || er->bell == NULL) {
    return ncclSuccess;
  }
  /* Published, then read, both sequentially consistent (the record's
   * number): of two ranks making different calls at once, at least one
   * sees the other's. */
  tutti_doorbell_put_call(er->bell, &op->call);
  /* This call and the earlier ones whose peers' records have come since,
   * in one pass: a launch reads each peer's newest record once. */
  if (er->peer_bells != NULL &&
      tutti_agree_scan(er->bell, er->peer_bells, er->nranks, er->rank, &er->call_checked)) {
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t tutti_agree_sticky(const struct tutti_exec_rank* er) {
  const struct tutti_doorbell* b = er->bell;
  const uint32_t code = b != NULL ? __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) : 0;
  if (code == 0) {
    return ncclSuccess;
  }
  char why[sizeof b->failed_why + 1];
  memcpy(why, b->failed_why, sizeof b->failed_why);
  why[sizeof b->failed_why] = '\0';
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
