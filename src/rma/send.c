/* The origin's side of one-sided operations: records written into the
 * service communicator's queue to the target, from whichever thread puts;
 * puts to this rank itself; and the dispatch of a call to the host path or
 * the device layer. */
#include <stdio.h>
#include <string.h>

#include "call/doorbell.h"
#include "rma/internal.h"
#include "rma/wire.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/socket.h"

/* Whether applying what arrives stays on the host: no signals on the
 * device, no window of this rank in device memory. */
static int host_only(const struct tutti_rma* r) {
  return !r->on_device && __atomic_load_n(&r->dev_wins, __ATOMIC_ACQUIRE) == 0;
}

/* Waits until the queue to `peer` has a free slot (*slot), bounded: the
 * communicator aborted, the peer gone, or no slot freed for TUTTI_TIMEOUT
 * end it with an error naming the peer. A free slot needs only the peer's
 * service thread, never its user thread. */
static ncclResult_t wait_slot(struct tutti_rma* r, int peer, uint64_t seq, size_t done,
                              size_t bytes, void** slot) {
  struct tutti_conn* c = r->s.send[peer];
  struct tutti_rma_nap nap = {
      &r->s.bell->ring, &r->s.bell->sleeping, r->spin, r->spin_max, r->yield, 0, 0, 0};
  double since = 0, last_check = 0;
  ncclResult_t res = ncclSuccess;
  char who[192];
  while ((*slot = c->ops->send_begin(c)) == NULL) {
    /* Meanwhile receive what peers put here: two ranks putting to each
     * other then move both ways on their own threads, as an exchange of
     * sends and receives does, rather than wait on their service threads
     * (twice the rate on 2 cores). Not where receiving may call the device
     * layer: this may be a CUDA host function, which must not call CUDA. */
    if (tutti_rma_pass(r, &nap, host_only(r))) {
      continue;
    }
    const double t = tutti_socket_now();
    since = since == 0 ? t : since;
    if (t - last_check < 0.05) {
      continue;
    }
    last_check = t;
    if (__atomic_load_n(r->s.abort_flag, __ATOMIC_ACQUIRE)) {
      res = tutti_error(ncclRemoteError,
                        "a put from rank %d to rank %d stopped: the communicator was aborted",
                        r->s.rank, peer);
      break;
    }
    const char* why =
        r->s.peer_bells[peer] != NULL ? tutti_doorbell_gone(r->s.peer_bells[peer]) : NULL;
    if (why != NULL) {
      tutti_rma_name_peer(r, peer, who, sizeof who);
      res = tutti_error(ncclRemoteError,
                        "%s %s while rank %d puts to it (operation #%llu, %zu of %zu bytes sent)",
                        who, why, r->s.rank, (unsigned long long)seq, done, bytes);
      break;
    }
    if (t - since > r->s.timeout_s) {
      tutti_rma_name_peer(r, peer, who, sizeof who);
      res = tutti_error(ncclRemoteError,
                        "a put from rank %d made no progress for %.0f s (TUTTI_TIMEOUT): %s "
                        "read nothing of what this rank sent it (operation #%llu, %zu of %zu "
                        "bytes sent); is it alive?",
                        r->s.rank, r->s.timeout_s, who, (unsigned long long)seq, done, bytes);
      break;
    }
  }
  tutti_rma_nap_reset(&nap);
  return res;
}

ncclResult_t tutti_rma_send_put(struct tutti_rma* r, int peer, uint32_t win_id, uint64_t offset,
                                const void* src, size_t bytes, int sig, int ctx, int with_signal) {
  if (bytes == 0 && !with_signal) {
    return ncclSuccess;
  }
  struct tutti_rma_out* o = &r->out[peer];
  struct tutti_conn* c = r->s.send[peer];
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&o->lock);
  const uint64_t seq = ++o->seq;
  size_t done = 0;
  do {
    void* slot;
    res = wait_slot(r, peer, seq, done, bytes, &slot);
    if (res != ncclSuccess) {
      break;
    }
    const size_t piece = bytes - done < r->payload ? bytes - done : r->payload;
    tutti_rma_write_record(slot, src == NULL && bytes == 0, with_signal && done + piece == bytes,
                           sig, ctx, win_id, offset + done, (const char*)src + done, piece, seq);
    c->ops->send_end(c, TUTTI_RMA_REC_BYTES + piece);
    done += piece;
  } while (done < bytes);
  pthread_mutex_unlock(&o->lock);
  return res;
}

/* A put to this rank's own part of a window: copied in place (the source
 * may lie in the window itself), then the own signal raised. */
static ncclResult_t put_self(struct tutti_rma* r, const struct tutti_rma_call* c) {
  if (c->kind == TUTTI_RMA_PUT && c->bytes > 0) {
    pthread_mutex_lock(&r->win_lock);
    struct tutti_win* w = tutti_rma_win_by_id(r, c->win->id);
    if (w != NULL) {
      memmove((char*)w->buff + c->offset, c->src, c->bytes);
    }
    pthread_mutex_unlock(&r->win_lock);
    if (w == NULL) {
      return tutti_error(ncclInvalidArgument,
                         "%s on rank %d: the window was deregistered during the put to itself",
                         c->fn, r->s.rank);
    }
  }
  return tutti_rma_raise(r, r->s.rank, c->sig, c->ctx);
}

int tutti_rma_on_host(const struct tutti_rma* r, const struct tutti_rma_call* c) {
  if (r->on_device) {
    return 0;
  }
  if (c->kind != TUTTI_RMA_PUT) {
    return 1;
  }
  return (c->bytes == 0 || tutti_cuda_mem_kind(c->src) != TUTTI_MEM_DEVICE) &&
         c->win->peers[c->peer].kind != TUTTI_MEM_DEVICE;
}

ncclResult_t tutti_rma_check(struct tutti_rma* r, struct tutti_rma_call* c) {
  if (c->kind != TUTTI_RMA_PUT) {
    return ncclSuccess;
  }
  struct tutti_win* w = tutti_rma_win_find(r, c->win);
  if (w == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "%s: peerWin %p is not a window registered on this communicator "
                       "(deregistered, or another communicator's)",
                       c->fn, (void*)c->win);
  }
  const struct tutti_rma_peer_win* t = &w->peers[c->peer];
  if (c->offset > t->size || c->bytes > t->size - c->offset) {
    return tutti_error(ncclInvalidArgument,
                       "%s: peerWinOffset %llu + %zu bytes ends beyond rank %d's part of window "
                       "#%u, which holds %llu bytes",
                       c->fn, (unsigned long long)c->offset, c->bytes, c->peer, w->id,
                       (unsigned long long)t->size);
  }
  return ncclSuccess;
}

static ncclResult_t run_device(struct tutti_rma* r, const struct tutti_rma_call* c) {
  if (r->s.dev == NULL) {
    return tutti_error(ncclInvalidUsage,
                       "%s on rank %d: the buffer or the target's window is device memory but "
                       "this communicator has no device executor",
                       c->fn, r->s.rank);
  }
  if (c->kind == TUTTI_RMA_WAIT) {
    return tutti_dev_rma_wait(r->s.dev, c->descs, c->ndesc, c->stream);
  }
  const int put = c->kind == TUTTI_RMA_PUT;
  struct tutti_rma_dev_put p = {
      c->peer,
      put ? c->win->id : 0,
      put ? c->win->dev : NULL,
      put ? &c->win->peers[c->peer] : NULL,
      c->offset,
      c->src,
      c->bytes,
      put && c->bytes > 0 ? (uint32_t)tutti_cuda_mem_kind(c->src) : (uint32_t)TUTTI_MEM_HOST,
      c->sig,
      c->ctx,
      c->stream,
      r,
      tutti_rma_post_put,
  };
  return tutti_dev_rma_put(r->s.dev, &p);
}

ncclResult_t tutti_rma_run(struct tutti_rma* r, const struct tutti_rma_call* c) {
  /* Queued in a group, a put may find its window deregistered since. */
  if (c->kind == TUTTI_RMA_PUT && tutti_rma_win_find(r, c->win) == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "%s on rank %d: window %p was deregistered before the put ran", c->fn,
                       r->s.rank, (void*)c->win);
  }
  if (!tutti_rma_on_host(r, c)) {
    return run_device(r, c);
  }
  /* Host work: whatever the stream still has to do to the buffers first,
   * as host collectives do. */
  NCCLCHECK(tutti_cuda_stream_wait(c->stream, r->s.timeout_s + 5, r->s.abort_flag));
  if (c->kind == TUTTI_RMA_WAIT) {
    return tutti_rma_wait_host(r, c->descs, c->ndesc);
  }
  if (c->peer == r->s.rank) {
    return put_self(r, c);
  }
  return tutti_rma_send_put(r, c->peer, c->kind == TUTTI_RMA_PUT ? c->win->id : 0, c->offset,
                            c->src, c->bytes, c->sig, c->ctx, 1);
}
