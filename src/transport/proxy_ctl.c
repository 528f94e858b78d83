/* The proxy's control records (see proxy.h's wire format): the rank's
 * calls and its failure, sent to a peer ahead of the slots, and the peer's,
 * written into its stand-in doorbell (exec/agree.c compares them). */
#include <string.h>

#include "transport/proxy.h"
#include "util/check.h"

static void put64(unsigned char* p, uint64_t v) {
  tutti_proxy_put32(p, (uint32_t)(v >> 32));
  tutti_proxy_put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const unsigned char* p) {
  return ((uint64_t)tutti_proxy_get32(p) << 32) | tutti_proxy_get32(p + 4);
}

/* The oldest of the rank's calls not sent on socket k yet, 0 none. Every
 * socket carries every call ahead of the slots posted after it, so the
 * peer has a call's record before any of its data. */
static uint64_t call_due(const struct tutti_proxy* px, const struct tutti_proxy_sock* k) {
  uint64_t next = 0;
  for (int i = 0; i < TUTTI_CALL_HISTORY; i++) {
    const uint64_t seq = __atomic_load_n(&px->rank_bell->calls[i].seq, __ATOMIC_ACQUIRE);
    if (seq > k->call_sent && (next == 0 || seq < next)) {
      next = seq;
    }
  }
  return next;
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
    tutti_proxy_put32(k->sctl, failed);
    tutti_proxy_put32(k->sctl + 4, b->failed_rank);
    put64(k->sctl + 8, b->failed_seq);
    tutti_proxy_put32(k->sctl + 16, b->failed_wait);
    memcpy(k->sctl + 20, b->failed_why, TUTTI_PROXY_FAIL_BYTES - 20);
    k->spayload_len = TUTTI_PROXY_FAIL_BYTES;
    p->fail_sent = 1;
    return 1;
  }
  struct tutti_call c;
  /* Also while leaving: slots still flushed need their call ahead of them. */
  for (uint64_t seq = call_due(px, k); seq != 0; seq = call_due(px, k)) {
    k->call_sent = seq;
    if (tutti_doorbell_get_call(b, seq, &c)) { /* else rewritten meanwhile: the next one */
      put64(k->sctl, c.seq);
      put64(k->sctl + 8, c.count);
      tutti_proxy_put32(k->sctl + 16, (uint32_t)c.root);
      k->sctl[20] = c.coll;
      k->sctl[21] = c.type;
      k->sctl[22] = c.red;
      k->sctl[23] = c.device;
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
    struct tutti_call c;
    c.seq = get64(k->rctl);
    c.count = get64(k->rctl + 8);
    c.root = (int32_t)tutti_proxy_get32(k->rctl + 16);
    c.coll = k->rctl[20];
    c.type = k->rctl[21];
    c.red = k->rctl[22];
    c.device = k->rctl[23];
    /* Every socket brings every call: the first copy is kept (a rewrite
     * would blank the record for a moment, while the rank may read it). */
    struct tutti_call had;
    if (c.seq != 0 && !tutti_doorbell_get_call(&p->bell, c.seq, &had)) {
      tutti_doorbell_put_call(&p->bell, &c);
    }
  } else if (__atomic_load_n(&p->bell.failed, __ATOMIC_ACQUIRE) == 0) {
    p->bell.failed_rank = tutti_proxy_get32(k->rctl + 4);
    p->bell.failed_seq = get64(k->rctl + 8);
    p->bell.failed_wait = tutti_proxy_get32(k->rctl + 16);
    memcpy(p->bell.failed_why, k->rctl + 20, sizeof p->bell.failed_why);
    p->bell.failed_why[sizeof p->bell.failed_why - 1] = '\0';
    const uint32_t code = tutti_proxy_get32(k->rctl);
    __atomic_store_n(&p->bell.failed, code != 0 ? code : (uint32_t)ncclRemoteError,
                     __ATOMIC_RELEASE);
  }
  tutti_doorbell_ring(px->rank_bell);
}

int tutti_proxy_is_ctl(uint32_t size) {
  return size == TUTTI_PROXY_CALL || size == TUTTI_PROXY_FAIL;
}

size_t tutti_proxy_ctl_bytes(uint32_t size) {
  return size == TUTTI_PROXY_CALL ? TUTTI_PROXY_CALL_BYTES : TUTTI_PROXY_FAIL_BYTES;
}
