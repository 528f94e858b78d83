/* The proxy's control records (see proxy.h's wire format): the rank's
 * calls and its failure, sent to a peer ahead of the slots, and the peer's,
 * written into its stand-in doorbell (call/agree.c compares them). */
#include <string.h>

#include "transport/proxy.h"
#include "call/records.h"
#include "util/check.h"

/* The oldest of the rank's calls not sent on socket k yet, 0 none. Every
 * socket carries every call ahead of the slots posted after it, so the
 * peer has a call's record before any of its data. */
static uint64_t call_due(const struct tutti_proxy* px, const struct tutti_proxy_sock* k) {
  return tutti_rec_call_after(px->rank_bell, k->call_sent);
}

/* A control record is due on socket k: the failure (socket 0), a call. */
int tutti_proxy_ctl_due(const struct tutti_proxy* px, const struct tutti_proxy_peer* p,
                        const struct tutti_proxy_sock* k) {
  return (k == &p->socks[0] && !p->fail_sent &&
          __atomic_load_n(&px->rank_bell->failed, __ATOMIC_ACQUIRE) != 0) ||
         call_due(px, k) != 0;
}

/* Fills socket k's next record with the control record due, if any: the
 * rank's failure first, then its oldest call not sent yet. */
int tutti_proxy_ctl_next(struct tutti_proxy* px, struct tutti_proxy_peer* p,
                         struct tutti_proxy_sock* k) {
  const struct tutti_doorbell* b = px->rank_bell;
  const uint32_t failed = __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE);
  if (k == &p->socks[0] && !p->fail_sent && failed != 0) {
    tutti_proxy_put32(k->shdr, TUTTI_PROXY_FAIL);
    tutti_rec_put_fail(k->sctl, b);
    k->spayload_len = TUTTI_PROXY_FAIL_BYTES;
    p->fail_sent = 1;
    return 1;
  }
  struct tutti_call c;
  /* Also while leaving: slots still flushed need their call ahead of them. */
  for (uint64_t seq = call_due(px, k); seq != 0; seq = call_due(px, k)) {
    k->call_sent = seq;
    if (tutti_doorbell_get_call(b, seq, &c)) { /* else rewritten meanwhile: the next one */
      tutti_rec_put_call(k->sctl, &c);
      tutti_proxy_put32(k->shdr, TUTTI_PROXY_CALL);
      k->spayload_len = TUTTI_PROXY_CALL_BYTES;
      return 1;
    }
  }
  return 0;
}

/* A control record from the peer, into its stand-in doorbell. */
void tutti_proxy_ctl_apply(struct tutti_proxy* px, struct tutti_proxy_peer* p,
                           const struct tutti_proxy_sock* k) {
  if (k->rsize == TUTTI_PROXY_CALL) {
    tutti_rec_apply_call(&p->bell, k->rctl);
  } else {
    tutti_rec_apply_fail(&p->bell, k->rctl);
  }
  tutti_doorbell_ring(px->rank_bell);
}

int tutti_proxy_is_ctl(uint32_t size) {
  return size == TUTTI_PROXY_CALL || size == TUTTI_PROXY_FAIL;
}

size_t tutti_proxy_ctl_bytes(uint32_t size) {
  return size == TUTTI_PROXY_CALL ? TUTTI_PROXY_CALL_BYTES : TUTTI_PROXY_FAIL_BYTES;
}
