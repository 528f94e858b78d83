/* The TCP proxy's control records (see tcp_proxy.h's wire format): the
 * rank's calls and its failure, sent to a peer ahead of the slots, and the
 * peer's, written into its stand-in doorbell (call/agree.c compares them). */
#include "transport/tcp_proxy.h"
#include "util/socket.h"

/* Whether socket k takes the rank's calls now: every call before a slot
 * of k's that waits to go; a call no socket carried yet goes at once on
 * the socket of the oldest slot not sent, or of the next slot when all
 * went (so the peer learns of a call that sends it nothing, and a small
 * call's record and slot leave together in one segment). Every socket
 * still carries every call ahead of its slots posted after it. */
static int calls_go_on(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k) {
  return k->snext < p->s_head || (k == &p->socks[p->s_tail % (uint64_t)p->nsocks] &&
                                  tutti_rec_call_after(p->base.px->rank_bell, p->calls_out) != 0);
}

/* A control record is due on socket k: the failure (socket 0), a call. */
int tutti_tcp_ctl_due(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k) {
  const struct tutti_doorbell* b = p->base.px->rank_bell;
  return (k == &p->socks[0] && !p->fail_sent &&
          __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) != 0) ||
         (calls_go_on(p, k) && tutti_rec_call_after(b, k->call_sent) != 0);
}

/* Writes socket k's next control record due, if any and if it fits: the
 * rank's failure first, then its oldest call not sent yet. */
size_t tutti_tcp_ctl_next(struct tutti_tcp_peer* p, struct tutti_tcp_sock* k, unsigned char* out,
                          size_t room) {
  const struct tutti_doorbell* b = p->base.px->rank_bell;
  const uint32_t failed = __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE);
  if (k == &p->socks[0] && !p->fail_sent && failed != 0) {
    if (room < 4 + TUTTI_TCP_FAIL_BYTES) {
      return 0;
    }
    tutti_socket_put32(out, TUTTI_TCP_FAIL);
    tutti_rec_put_fail(out + 4, b);
    p->fail_sent = 1;
    return 4 + TUTTI_TCP_FAIL_BYTES;
  }
  struct tutti_call c;
  /* Also while leaving: slots still flushed need their call ahead of them. */
  if (room < 4 + TUTTI_TCP_CALL_BYTES || !calls_go_on(p, k) ||
      !tutti_rec_next_call(b, &k->call_sent, &c)) {
    return 0;
  }
  tutti_socket_put32(out, TUTTI_TCP_CALL);
  tutti_rec_put_call(out + 4, &c);
  if (c.seq > p->calls_out) {
    p->calls_out = c.seq;
  }
  return 4 + TUTTI_TCP_CALL_BYTES;
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
