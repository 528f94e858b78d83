/* A socket comm's requests: isend, irecv and test, and the control stream
 * they drive from the caller's thread: headers, and the payload of small
 * messages, which moves in the caller's own send and receive calls. A
 * striped message's chunks go to the workers (worker.c). */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "net/socket/comm.h"
#include "util/check.h"
#include "util/seal.h"

static struct tutti_socknet_req* req_alloc(struct tutti_socknet_comm* c) {
  if (c->inflight >= TUTTI_NET_MAX_REQUESTS) {
    return NULL;
  }
  for (int i = 0; i < TUTTI_NET_MAX_REQUESTS; i++) {
    struct tutti_socknet_req* r = &c->reqs[i];
    if (!r->used) {
      r->used = 1;
      r->matched = 0;
      r->inline_left = 0;
      r->ctrl_off = r->ctrl_len = 0;
      r->chunks_posted = 0;
      __atomic_store_n(&r->chunks_done, 0, __ATOMIC_RELAXED);
      c->inflight++;
      return r;
    }
  }
  return NULL;
}

static void req_free(struct tutti_socknet_req* r) {
  r->used = 0;
  r->comm->inflight--;
}

static void fifo_remove(struct tutti_socknet_comm* c, int i) {
  memmove(&c->fifo[i], &c->fifo[i + 1], sizeof c->fifo[0] * (size_t)(c->nfifo - i - 1));
  c->nfifo--;
}

/* Queues a striped message's chunks on the data sockets, from where the
 * last one left off. */
static ncclResult_t stripe(struct tutti_socknet_comm* c, struct tutti_socknet_req* r, char* ptr,
                           size_t size) {
  if (!c->started) {
    NCCLCHECK(tutti_socknet_workers_start(c));
  }
  const size_t chunk = tutti_socknet_chunk_bytes(size, c->nsocks);
  const uint32_t n = (uint32_t)((size + chunk - 1) / chunk);
  r->chunks_posted += n;
  for (uint32_t i = 0; i < n; i++) {
    const size_t off = (size_t)i * chunk;
    const size_t len = size - off < chunk ? size - off : chunk;
    NCCLCHECK(
        tutti_socknet_post(c, (int)((c->next_sock + i) % (uint32_t)c->nsocks), ptr + off, len, r));
  }
  c->next_sock = (c->next_sock + n) % (uint32_t)c->nsocks;
  return ncclSuccess;
}

/* Writes queued headers and inline payloads, several messages to one
 * sendmsg, until the socket is full. */
static void send_progress(struct tutti_socknet_comm* c) {
  while (c->nfifo > 0) {
    struct iovec iov[2 * TUTTI_NET_MAX_REQUESTS];
    int niov = 0;
    size_t want = 0;
    for (int i = 0; i < c->nfifo; i++) {
      struct tutti_socknet_req* r = c->fifo[i];
      const size_t hl = sizeof r->hdr;
      if (r->ctrl_off < hl) {
        iov[niov++] = (struct iovec){(char*)&r->hdr + r->ctrl_off, hl - r->ctrl_off};
      }
      if (r->ctrl_len > hl) {
        const size_t from = r->ctrl_off > hl ? r->ctrl_off - hl : 0;
        iov[niov++] = (struct iovec){(char*)r->data[0] + from, r->ctrl_len - hl - from};
      }
      want += r->ctrl_len - r->ctrl_off;
    }
    ssize_t n = tutti_seal_sendmsg(c->ctrl, iov, niov);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        tutti_socknet_fail_io(c, errno, "sending a message");
      }
      if (errno != EINTR) {
        return;
      }
      continue;
    }
    size_t left = (size_t)n;
    while (c->nfifo > 0 && left > 0) {
      struct tutti_socknet_req* r = c->fifo[0];
      const size_t take = r->ctrl_len - r->ctrl_off < left ? r->ctrl_len - r->ctrl_off : left;
      r->ctrl_off += take;
      left -= take;
      if (r->ctrl_off == r->ctrl_len) {
        fifo_remove(c, 0);
      }
    }
    if ((size_t)n < want) {
      return; /* the socket is full */
    }
  }
}

/* The oldest posted receive with a free buffer for `tag` (any tag for a
 * receive of one buffer). */
static int match(struct tutti_socknet_comm* c, int tag, int* fi, int* buf) {
  for (int i = 0; i < c->nfifo; i++) {
    const struct tutti_socknet_req* r = c->fifo[i];
    for (int b = 0; b < r->count; b++) {
      if (!(r->matched & (1u << b)) && (r->count == 1 || r->tag[b] == tag)) {
        *fi = i;
        *buf = b;
        return 1;
      }
    }
  }
  return 0;
}

/* Gives the header just read a buffer; 0 when none is posted for it yet
 * (the stream waits: nothing may overtake it). */
static int take_header(struct tutti_socknet_comm* c) {
  const uint64_t size = le64toh(c->rx_hdr.size);
  const int tag = (int)le32toh((uint32_t)c->rx_hdr.tag);
  const uint32_t flags = le32toh(c->rx_hdr.flags);
  int fi, b;
  if (!match(c, tag, &fi, &b)) {
    return 0;
  }
  struct tutti_socknet_req* r = c->fifo[fi];
  if (size > r->size[b]) {
    tutti_socknet_fail(
        c, ncclInvalidUsage,
        "socket network: a message of %llu bytes (tag %d) from %s arrived for a "
        "receive buffer of %zu bytes: every receive must be at least as large as the "
        "send it matches",
        (unsigned long long)size, tag, c->peer, r->size[b]);
    return 0;
  }
  r->matched |= 1u << b;
  r->got[b] = (size_t)size;
  if (r->matched == (1u << r->count) - 1) {
    fifo_remove(c, fi);
  }
  c->rx_off = 0;
  c->rx_hdr_off = 0; /* consumed: the next header may come in behind the payload */
  if ((flags & TUTTI_SOCKNET_STRIPED) && c->nsocks == 0) {
    tutti_socknet_fail(c, ncclRemoteError,
                       "socket network: %s striped a message over data sockets this connection "
                       "does not have: the peer is not a tutti socket comm of the same version",
                       c->peer);
    return 0;
  }
  if (flags & TUTTI_SOCKNET_STRIPED) {
    c->rx_have = 0;
    if (stripe(c, r, r->data[b], (size_t)size) != ncclSuccess) {
      tutti_socknet_fail(c, ncclSystemError, "%s", tutti_last_error());
      return 0;
    }
  } else if (size > 0) {
    r->inline_left++;
    c->rx_req = r;
    c->rx_buf = b;
  } else {
    c->rx_have = 0;
  }
  return 1;
}

/* One non-blocking receive on the control socket: the bytes that came, 0
 * when none did, -1 when the comm failed. */
static ssize_t ctrl_recv(struct tutti_socknet_comm* c, struct iovec* iov, int niov) {
  for (;;) {
    ssize_t n = tutti_seal_recvv(c->ctrl, iov, niov);
    if (n > 0) {
      return n;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    }
    /* A peer that closed after its last header is no failure of the
     * comm: what those headers announced still arrives on the data
     * sockets; only receives that wait for another message fail (test). */
    if (n == 0 && c->rx_hdr_off == 0 && c->rx_req == NULL && !c->rx_have) {
      c->eof = 1;
      return 0;
    }
    tutti_socknet_fail_io(c, n == 0 ? 0 : errno, "waiting for a message");
    return -1;
  }
}

/* Reads headers and inline payloads while they come and have buffers; a
 * payload's read also takes what is there of the next header. */
static void recv_progress(struct tutti_socknet_comm* c) {
  const size_t hl = sizeof c->rx_hdr;
  for (; !c->eof;) {
    if (!c->rx_have) {
      if (c->rx_hdr_off < hl) {
        struct iovec iov = {(char*)&c->rx_hdr + c->rx_hdr_off, hl - c->rx_hdr_off};
        ssize_t n = ctrl_recv(c, &iov, 1);
        if (n <= 0) {
          return;
        }
        c->rx_hdr_off += (size_t)n;
        continue;
      }
      if ((le32toh(c->rx_hdr.flags) & ~TUTTI_SOCKNET_STRIPED) != TUTTI_SOCKNET_HDR_CHECK) {
        tutti_socknet_fail(c, ncclRemoteError,
                           "socket network: the control stream from %s is out of step (a header "
                           "with flags 0x%x): the peer is not a tutti socket comm of the same "
                           "version",
                           c->peer, le32toh(c->rx_hdr.flags));
        return;
      }
      c->rx_have = 1;
      c->rx_req = NULL;
    }
    if (c->rx_req == NULL) {
      if (!take_header(c)) {
        return;
      }
      continue;
    }
    struct tutti_socknet_req* r = c->rx_req;
    const size_t size = r->got[c->rx_buf];
    struct iovec iov[2] = {{(char*)r->data[c->rx_buf] + c->rx_off, size - c->rx_off},
                           {&c->rx_hdr, hl}};
    ssize_t n = ctrl_recv(c, iov, 2);
    if (n <= 0) {
      return;
    }
    if ((size_t)n < size - c->rx_off) {
      c->rx_off += (size_t)n;
      continue;
    }
    c->rx_hdr_off = (size_t)n - (size - c->rx_off);
    c->rx_off = size;
    r->inline_left--;
    c->rx_req = NULL;
    c->rx_have = 0;
    /* Its test reports it now; looking for the next header first would
     * cost a receive that finds nothing. */
    if (r->inline_left == 0 && r->matched == (1u << r->count) - 1) {
      return;
    }
  }
}

ncclResult_t tutti_socknet_isend(struct tutti_socknet_comm* c, void* data, size_t size, int tag,
                                 void** request) {
  *request = NULL;
  struct tutti_socknet_req* r = req_alloc(c);
  if (r == NULL) {
    return ncclSuccess;
  }
  r->count = 1;
  r->data[0] = data;
  r->size[0] = size;
  r->tag[0] = tag;
  *request = r;
  if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) {
    return ncclSuccess; /* test reports it */
  }
  const int striped = size > TUTTI_SOCKNET_INLINE_MAX && c->nsocks > 0;
  r->hdr.size = htole64((uint64_t)size);
  r->hdr.tag = (int32_t)htole32((uint32_t)tag);
  r->hdr.flags = htole32(TUTTI_SOCKNET_HDR_CHECK | (striped ? TUTTI_SOCKNET_STRIPED : 0));
  r->ctrl_len = sizeof r->hdr + (striped ? 0 : size);
  if (striped) {
    ncclResult_t res = stripe(c, r, data, size);
    if (res != ncclSuccess) {
      req_free(r);
      *request = NULL;
      return res;
    }
  }
  c->fifo[c->nfifo++] = r;
  send_progress(c);
  return ncclSuccess;
}

ncclResult_t tutti_socknet_irecv(struct tutti_socknet_comm* c, int count, void** data,
                                 const size_t* sizes, const int* tags, void** request) {
  *request = NULL;
  if (count < 1 || count > TUTTI_NET_MAX_RECVS) {
    return tutti_error(ncclInvalidArgument,
                       "socket network: a grouped receive of %d buffers from %s: it takes 1 to "
                       "%d",
                       count, c->peer, TUTTI_NET_MAX_RECVS);
  }
  struct tutti_socknet_req* r = req_alloc(c);
  if (r == NULL) {
    return ncclSuccess;
  }
  r->count = count;
  for (int b = 0; b < count; b++) {
    r->data[b] = data[b];
    r->size[b] = sizes[b];
    r->tag[b] = tags != NULL ? tags[b] : 0;
    r->got[b] = 0;
  }
  *request = r;
  if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) {
    return ncclSuccess;
  }
  c->fifo[c->nfifo++] = r;
  recv_progress(c);
  return ncclSuccess;
}

static int complete(const struct tutti_socknet_req* r) {
  if (__atomic_load_n(&r->chunks_done, __ATOMIC_ACQUIRE) != r->chunks_posted) {
    return 0;
  }
  if (r->comm->send) {
    return r->ctrl_off == r->ctrl_len;
  }
  return r->matched == (1u << r->count) - 1 && r->inline_left == 0;
}

ncclResult_t tutti_socknet_test(struct tutti_socknet_req* r, int* done, int* sizes) {
  *done = 0;
  if (r == NULL || !r->used) {
    return tutti_error(ncclInternalError,
                       "socket network: test of a request that is not in flight (it completed "
                       "or failed already, or was never returned by isend / irecv)");
  }
  struct tutti_socknet_comm* c = r->comm;
  if (!__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) {
    if (c->send) {
      send_progress(c);
    } else {
      recv_progress(c);
    }
    tutti_socknet_heartbeat(c);
  }
  ncclResult_t res = tutti_socknet_failed(c);
  if (res != ncclSuccess) {
    req_free(r);
    return res;
  }
  if (!complete(r)) {
    if (c->eof && !c->send && r->matched != (1u << r->count) - 1) {
      for (int i = 0; i < c->nfifo; i++) {
        if (c->fifo[i] == r) {
          fifo_remove(c, i); /* it waits for no more messages */
          break;
        }
      }
      req_free(r);
      return tutti_error(ncclRemoteError,
                         "socket network: %s closed the connection while this receive comm was "
                         "waiting for a message: the peer process exited or closed its comm; "
                         "see its log",
                         c->peer);
    }
    return ncclSuccess;
  }
  *done = 1;
  if (sizes != NULL) {
    for (int b = 0; b < r->count; b++) {
      const size_t s = c->send ? r->size[b] : r->got[b];
      sizes[b] = s > INT_MAX ? INT_MAX : (int)s;
    }
  }
  req_free(r);
  return ncclSuccess;
}
