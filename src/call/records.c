/* Call and failure records on the wire (see records.h). */
#include "call/records.h"

#include <string.h>

#include "nccl.h"

uint64_t tutti_rec_call_after(const struct tutti_doorbell* bell, uint64_t after) {
  /* Calls are made in order, so the next is after + 1. Taking the smallest
   * number above `after` instead would skip one: a scan can read call n's
   * place before the rank writes it and call n + 1's after (a rank whose
   * peers' calls are all in finishes call n at once). */
  const uint64_t want = after + 1;
  const uint64_t at =
      __atomic_load_n(&bell->calls[want % TUTTI_CALL_HISTORY].seq, __ATOMIC_ACQUIRE);
  if (at <= want) {
    return at == want ? want : 0; /* not made yet, or being written */
  }
  /* The rank is more than the history ahead: the oldest call still kept. */
  uint64_t next = 0;
  for (int i = 0; i < TUTTI_CALL_HISTORY; i++) {
    const uint64_t seq = __atomic_load_n(&bell->calls[i].seq, __ATOMIC_ACQUIRE);
    if (seq > after && (next == 0 || seq < next)) {
      next = seq;
    }
  }
  return next;
}

int tutti_rec_next_call(const struct tutti_doorbell* bell, uint64_t* sent, struct tutti_call* c) {
  for (uint64_t seq = tutti_rec_call_after(bell, *sent); seq != 0;
       seq = tutti_rec_call_after(bell, *sent)) {
    *sent = seq;
    if (tutti_doorbell_get_call(bell, seq, c)) { /* else rewritten meanwhile: the next one */
      return 1;
    }
  }
  return 0;
}

void tutti_rec_put_call(unsigned char* out, const struct tutti_call* c) {
  tutti_socket_put64(out, c->seq);
  tutti_socket_put64(out + 8, c->count);
  tutti_socket_put32(out + 16, (uint32_t)c->root);
  out[20] = c->coll;
  out[21] = c->type;
  out[22] = c->red;
  out[23] = c->device;
}

void tutti_rec_apply_call(struct tutti_doorbell* bell, const unsigned char* in) {
  struct tutti_call c;
  c.seq = tutti_socket_get64(in);
  c.count = tutti_socket_get64(in + 8);
  c.root = (int32_t)tutti_socket_get32(in + 16);
  c.coll = in[20];
  c.type = in[21];
  c.red = in[22];
  c.device = in[23];
  c.tag = 0; /* a rank's profiler tag stays on its host: not on the wire */
  /* A rewrite would blank the record for a moment, while the rank may read
   * it. An older call never replaces a newer one in its place: a socket
   * that carried no slot for a while brings the calls it missed before its
   * next slot (transport/tcp_ctl.c), and the peer made the newer call only
   * after agreeing on the older one, so nobody waits for that any more. */
  struct tutti_call had;
  const uint64_t there =
      __atomic_load_n(&bell->calls[c.seq % TUTTI_CALL_HISTORY].seq, __ATOMIC_ACQUIRE);
  if (c.seq != 0 && there < c.seq && !tutti_doorbell_get_call(bell, c.seq, &had)) {
    tutti_doorbell_put_call(bell, &c);
  }
}

void tutti_rec_put_fail(unsigned char* out, const struct tutti_doorbell* bell) {
  tutti_socket_put32(out, __atomic_load_n(&bell->failed, __ATOMIC_ACQUIRE));
  tutti_socket_put32(out + 4, bell->failed_rank);
  tutti_socket_put64(out + 8, bell->failed_seq);
  tutti_socket_put32(out + 16, bell->failed_wait);
  memcpy(out + 20, bell->failed_why, TUTTI_REC_FAIL_BYTES - 20);
}

void tutti_rec_apply_fail(struct tutti_doorbell* bell, const unsigned char* in) {
  if (__atomic_load_n(&bell->failed, __ATOMIC_ACQUIRE) != 0) {
    return;
  }
  bell->failed_rank = tutti_socket_get32(in + 4);
  bell->failed_seq = tutti_socket_get64(in + 8);
  bell->failed_wait = tutti_socket_get32(in + 16);
  memcpy(bell->failed_why, in + 20, sizeof bell->failed_why);
  bell->failed_why[sizeof bell->failed_why - 1] = '\0';
  const uint32_t code = tutti_socket_get32(in);
  __atomic_store_n(&bell->failed, code != 0 ? code : (uint32_t)ncclRemoteError, __ATOMIC_RELEASE);
}

uint32_t tutti_rec_leave_reason(struct tutti_bells b) {
  uint32_t v = b.own != NULL ? __atomic_load_n(&b.own->lost, __ATOMIC_ACQUIRE) : 0;
  for (int r = 0; r < b.nranks && v == 0; r++) {
    if (b.peers[r] != NULL && r != b.rank) {
      v = __atomic_load_n(&b.peers[r]->lost, __ATOMIC_ACQUIRE);
      if (tutti_lost_is_self(v)) {
        v = tutti_lost_make(tutti_lost_errno(v), r);
      }
    }
  }
  uint32_t none = 0;
  if (v != 0 && b.own != NULL) {
    __atomic_compare_exchange_n(&b.own->lost, &none, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  }
  return v;
}
