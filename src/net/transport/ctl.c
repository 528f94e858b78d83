/* The network transport's control messages (see nettr.h): the rank's
 * failure, its calls and its goodbye out to a peer, the peer's into its
 * stand-in doorbell; and the peer's loss or departure. */
#include <stdio.h>
#include <string.h>

#include "net/transport/nettr.h"
#include "call/records.h"
#include "util/check.h"
#include "util/socket.h"

/* The goodbye: u32 kind, u32 reason, u64 the slots sent before it. */
#define BYE_BYTES 16

void tutti_nettr_lost(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, const char* why,
                      int leaving) {
  if (p->base.gone || leaving || p->bye_got) {
    p->base.gone = 1;
    return;
  }
  tutti_proxy_peer_lost(&p->base, 0, px->net->name, why);
}

void tutti_nettr_check_left(struct tutti_nettr_peer* p) {
  if (!p->bye_got || p->r_head < p->bye_slots ||
      __atomic_load_n(&p->base.bell.departed, __ATOMIC_RELAXED)) {
    return;
  }
  tutti_proxy_peer_left(&p->base, p->bye_reason);
}

/* The next message due and its size, into buf; 0 when none. */
static size_t next_message(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p,
                           unsigned char* buf, int leaving) {
  const struct tutti_doorbell* b = px->base.rank_bell;
  if (!p->fail_sent && __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) != 0) {
    tutti_socket_put32(buf, TUTTI_NETTR_FAIL);
    tutti_rec_put_fail(buf + 4, b);
    p->fail_sent = 1;
    return 4 + TUTTI_REC_FAIL_BYTES;
  }
  struct tutti_call c;
  if (tutti_rec_next_call(b, &p->call_sent, &c)) {
    tutti_socket_put32(buf, TUTTI_NETTR_CALL);
    tutti_rec_put_call(buf + 4, &c);
    return 4 + TUTTI_REC_CALL_BYTES;
  }
  /* The goodbye once every slot has gone out: a peer that reads it may
   * close, which can drop what is still in flight. */
  if (leaving && !p->bye_sent && p->s_tail == p->s_head) {
    tutti_socket_put32(buf, TUTTI_NETTR_BYE);
    tutti_socket_put32(buf + 4, px->base.leave_reason);
    tutti_socket_put64(buf + 8, p->s_next);
    p->bye_sent = 1;
    return BYE_BYTES;
  }
  return 0;
}

int tutti_nettr_ctl_due(const struct tutti_nettr_proxy* px, const struct tutti_nettr_peer* p,
                        int leaving) {
  const struct tutti_doorbell* b = px->base.rank_bell;
  if (p->ctl_sdone < p->ctl_sposted) {
    return 1;
  }
  return (!p->fail_sent && __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) != 0) ||
         tutti_rec_call_after(b, p->call_sent) != 0 || (leaving && !p->bye_sent);
}

static int apply(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, const unsigned char* m,
                 int size, int leaving) {
  const uint32_t kind = size >= 4 ? tutti_socket_get32(m) : 0;
  if (kind == TUTTI_NETTR_CALL && size == 4 + TUTTI_REC_CALL_BYTES) {
    if (!leaving) {
      tutti_rec_apply_call(&p->base.bell, m + 4);
    }
  } else if (kind == TUTTI_NETTR_FAIL && size == 4 + TUTTI_REC_FAIL_BYTES) {
    if (!leaving) {
      tutti_rec_apply_fail(&p->base.bell, m + 4);
    }
  } else if (kind == TUTTI_NETTR_BYE && size == BYE_BYTES) {
    p->bye_got = 1;
    const uint32_t reason = tutti_socket_get32(m + 4);
    if (reason != 0 && !tutti_lost_is_self(reason)) {
      p->bye_reason = reason;
    }
    p->bye_slots = tutti_socket_get64(m + 8);
    tutti_nettr_check_left(p);
    return 1;
  } else {
    char why[96];
    snprintf(why, sizeof why, "a control message of %d bytes, kind %u, makes no sense", size, kind);
    tutti_nettr_lost(px, p, why, leaving);
    return 1;
  }
  tutti_doorbell_ring(px->base.rank_bell);
  return 1;
}

int tutti_nettr_suspect(struct tutti_nettr_peer* p, const char* doing) {
  if (p->suspect_at == 0) {
    snprintf(p->suspect_why, sizeof p->suspect_why, "%s failed: %s", doing, tutti_last_error());
    p->suspect_at = tutti_socket_now();
  }
  return 1;
}

/* Control messages go and come in order: the receives are posted in turn
 * and only the oldest is tested (each test may be a system call). */
static int pump_ctl_recvs(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, int leaving) {
  struct tutti_net* net = px->net;
  int moved = 0;
  while (!p->bye_got && p->ctl_rposted < p->ctl_rdone + TUTTI_NETTR_CTL_RECVS) {
    const int j = (int)(p->ctl_rposted % TUTTI_NETTR_CTL_RECVS);
    void* data = p->ctl_rbuf[j];
    size_t size = TUTTI_NETTR_CTL_BYTES;
    int tag = TUTTI_NETTR_TAG;
    void* req = NULL;
    if (net->ops->irecv(net, p->ctl.recv, 1, &data, &size, &tag, &p->ctl.recv_mh, &req) !=
        ncclSuccess) {
      return tutti_nettr_suspect(p, "posting a control receive");
    }
    if (req == NULL) {
      break;
    }
    p->ctl_rreq[j] = req;
    p->ctl_rposted++;
    moved = 1;
  }
  while (!p->base.gone && p->ctl_rdone < p->ctl_rposted) {
    const int j = (int)(p->ctl_rdone % TUTTI_NETTR_CTL_RECVS);
    int done = 0, size = 0;
    if (net->ops->test(net, p->ctl_rreq[j], &done, &size) != ncclSuccess) {
      p->ctl_rreq[j] = NULL; /* a failed request is gone: never test it again */
      return tutti_nettr_suspect(p, "a control receive");
    }
    if (!done) {
      break;
    }
    p->ctl_rreq[j] = NULL;
    p->ctl_rdone++;
    moved |= apply(px, p, p->ctl_rbuf[j], size, leaving);
  }
  return moved;
}

int tutti_nettr_ctl_pump(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, int leaving) {
  struct tutti_net* net = px->net;
  int moved = 0;
  while (!p->base.gone && p->ctl_sdone < p->ctl_sposted) {
    const int j = (int)(p->ctl_sdone % TUTTI_NETTR_CTL_SENDS);
    int done = 0;
    if (net->ops->test(net, p->ctl_sreq[j], &done, NULL) != ncclSuccess) {
      p->ctl_sreq[j] = NULL;
      return tutti_nettr_suspect(p, "a control send");
    }
    if (!done) {
      break;
    }
    p->ctl_sreq[j] = NULL;
    p->ctl_sdone++;
    moved = 1;
    if (p->bye_sent == 1 && tutti_socket_get32(p->ctl_sbuf[j]) == TUTTI_NETTR_BYE) {
      p->bye_sent = 2;
    }
  }
  while (!p->base.gone && p->ctl_sposted < p->ctl_sdone + TUTTI_NETTR_CTL_SENDS) {
    const int j = (int)(p->ctl_sposted % TUTTI_NETTR_CTL_SENDS);
    const uint64_t call_was = p->call_sent;
    const int fail_was = p->fail_sent, bye_was = p->bye_sent;
    const size_t bytes = next_message(px, p, p->ctl_sbuf[j], leaving);
    if (bytes == 0) {
      break;
    }
    void* req = NULL;
    if (net->ops->isend(net, p->ctl.send, p->ctl_sbuf[j], bytes, TUTTI_NETTR_TAG, p->ctl.send_mh,
                        &req) != ncclSuccess) {
      return tutti_nettr_suspect(p, "a control send");
    }
    if (req == NULL) { /* no room now: the same message next pass */
      p->call_sent = call_was;
      p->fail_sent = fail_was;
      p->bye_sent = bye_was;
      break;
    }
    p->ctl_sreq[j] = req;
    p->ctl_sposted++;
    moved = 1;
  }
  if (!p->base.gone) {
    moved |= pump_ctl_recvs(px, p, leaving);
  }
  return moved;
}
