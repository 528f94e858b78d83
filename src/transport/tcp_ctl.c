/* The TCP proxy's control records (see tcp_proxy.h's wire format): the
 * rank's calls and its failure, sent to a peer ahead of the slots, and the
 * peer's, written into its stand-in doorbell (call/agree.c compares them). */
#include "transport/tcp_proxy.h"
#include "util/socket.h"

/* A control record is due on socket k: the failure (socket 0), a call.
 * Every socket carries every call ahead of the slots posted after it, so
 * the peer has a call's record before any of its data. */
int tutti_tcp_ctl_due(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k) {
  const struct tutti_doorbell* b = p->base.px->rank_bell;
  return (k == &p->socks[0] && !p->fail_sent &&
          __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) != 0) ||
         tutti_rec_call_after(b, k->call_sent) != 0;
}

/* Fills socket k's next record with the control record due, if any: the
 * rank's failure first, then its oldest call not sent yet. */
int tutti_tcp_ctl_next(struct tutti_tcp_peer* p, struct tutti_tcp_sock* k) {
  const struct tutti_doorbell* b = p->base.px->rank_bell;
  const uint32_t failed = __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE);
  if (k == &p->socks[0] && !p->fail_sent && failed != 0) {
    tutti_socket_put32(k->shdr, TUTTI_TCP_FAIL);
    tutti_rec_put_fail(k->sctl, b);
    k->spayload_len = TUTTI_TCP_FAIL_BYTES;
    p->fail_sent = 1;
    return 1;
  }
  struct tutti_call c;
  /* Also while leaving: slots still flushed need their call ahead of them. */
  if (tutti_rec_next_call(b, &k->call_sent, &c)) {
    tutti_rec_put_call(k->sctl, &c);
    tutti_socket_put32(k->shdr, TUTTI_TCP_CALL);
    k->spayload_len = TUTTI_TCP_CALL_BYTES;
    return 1;
  }
  return 0;
}

/* A control record from the peer, into its stand-in doorbell. */
void tutti_tcp_ctl_apply(struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k) {
  if (k->rsize == TUTTI_TCP_CALL) {
    tutti_rec_apply_call(&p->base.bell, k->rctl);
  } else {
    tutti_rec_apply_fail(&p->base.bell, k->rctl);
  }
  tutti_doorbell_ring(p->base.px->rank_bell);
}

int tutti_tcp_ctl_is(uint32_t size) {
  return size == TUTTI_TCP_CALL || size == TUTTI_TCP_FAIL;
}

size_t tutti_tcp_ctl_bytes(uint32_t size) {
  return size == TUTTI_TCP_CALL ? TUTTI_TCP_CALL_BYTES : TUTTI_TCP_FAIL_BYTES;
}
