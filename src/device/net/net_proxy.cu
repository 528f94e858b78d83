/* The device executor across hosts, the proxy thread: forwards the slots
 * kernels post into remote peers' shadows and the slots they free, and
 * writes what arrives into this rank's own region (see net.h). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "device/dev_comm.h"
#include "device/net/net.h"
#include "device/net/net_link.h"

extern "C" {
#include "util/check.h"
#include "util/socket.h"
}

static void raise_error(struct tutti_dev_comm* dc, struct td_link* k) {
  struct td_net* nt = dc->netp;
  if (nt->raised) {
    return;
  }
  nt->raised = 1;
  td_raise_stop(dc, TD_STOP_NET, k->peer);
  WARN("rank %d: the connection to rank %d (host %s) broke while a device collective used it: %s",
       dc->rank, k->peer, k->hostname,
       k->broken >= 1000 ? "malformed data"
       : k->broken > 1   ? strerror(k->broken - 1)
                         : "closed");
}

static void breaks(struct td_link* k, int code) {
  k->broken = code;
  if (k->fd >= 0) {
    close(k->fd);
    k->fd = -1;
  }
}

static inline uint64_t ld(const char* p) {
  return __atomic_load_n((const uint64_t*)p, __ATOMIC_ACQUIRE);
}

/* Picks the next message for the peer: freed slots first (they unblock its
 * kernel), then posted slots, channels in turn. */
static int next_message(struct tutti_dev_comm* dc, struct td_link* k) {
  const struct td_layout& L = dc->lay;
  const int n = dc->nranks, me = dc->rank;
  for (int i = 0; i < dc->nch; i++) {
    const int ch = (k->s_rr + i) % dc->nch;
    const uint64_t head = ld(k->sh_host + td_ctr(L.head_off, ch, me, n));
    if (head != k->freed[ch]) {
      k->s_msg = {TD_MSG_FREED, (uint32_t)ch, 0, 0, head};
      k->s_pay = NULL;
    } else if (ld(k->sh_host + td_ctr(L.tail_off, ch, me, n)) > k->fwd[ch]) {
      const uint64_t pos = k->fwd[ch], sl = pos % TD_SLOTS;
      const uint32_t len =
          *(volatile uint32_t*)(k->sh_host + td_ctr(L.len_off, ch, me, n) + sl * sizeof(uint32_t));
      k->s_msg = {TD_MSG_SLOT, (uint32_t)ch, len, 0, pos};
      k->s_pay = k->sh_host + td_queue_off(&L, ch, me, k->peer, n) + sl * dc->slot_bytes;
    } else {
      continue;
    }
    k->s_rr = (ch + 1) % dc->nch;
    k->s_busy = 1;
    k->s_done = 0;
    return 1;
  }
  return 0;
}

static int pump_send(struct tutti_dev_comm* dc, struct td_link* k) {
  if (!k->s_busy && !next_message(dc, k)) {
    return 0;
  }
  const size_t total = sizeof k->s_msg + k->s_msg.len;
  int moved = 0;
  while (k->s_done < total) {
    struct iovec iov[2];
    int cnt = 0;
    if (k->s_done < sizeof k->s_msg) {
      iov[cnt++] = {(char*)&k->s_msg + k->s_done, sizeof k->s_msg - k->s_done};
      if (k->s_msg.len > 0) {
        iov[cnt++] = {(void*)k->s_pay, k->s_msg.len};
      }
    } else {
      const size_t o = k->s_done - sizeof k->s_msg;
      iov[cnt++] = {(void*)(k->s_pay + o), k->s_msg.len - o};
    }
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)cnt;
    ssize_t w = sendmsg(k->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        breaks(k, errno + 1);
      }
      return moved;
    }
    k->s_done += (size_t)w;
    moved = 1;
  }
  if (k->s_msg.kind == TD_MSG_SLOT) {
    k->fwd[k->s_msg.ch] = k->s_msg.value + 1;
  } else if (k->s_msg.kind == TD_MSG_FREED) {
    k->freed[k->s_msg.ch] = k->s_msg.value;
  }
  k->s_busy = 0;
  return 1;
}

/* A complete header: where its payload goes, or what it changes. */
static int take_header(struct tutti_dev_comm* dc, struct td_link* k) {
  const struct td_layout& L = dc->lay;
  const struct td_msg& m = k->r_msg;
  const int n = dc->nranks;
  char* mine = dc->hosts[dc->rank].host;
  if (m.kind == TD_MSG_BYE && m.len == 0) {
    k->departed = 1;
    return 1;
  }
  if (m.ch >= (uint32_t)dc->nch || m.len > dc->slot_bytes ||
      (m.kind == TD_MSG_SLOT && m.value != k->expect[m.ch]) ||
      (m.kind != TD_MSG_SLOT && (m.kind != TD_MSG_FREED || m.len != 0))) {
    breaks(k, 1000);
    return 0;
  }
  if (m.kind == TD_MSG_FREED) {
    __atomic_store_n((uint64_t*)(mine + td_ctr(L.head_off, m.ch, k->peer, n)), m.value,
                     __ATOMIC_RELEASE);
    return 1;
  }
  k->r_pay = mine + td_queue_off(&L, (int)m.ch, k->peer, dc->rank, n) +
             (m.value % TD_SLOTS) * dc->slot_bytes;
  return 1;
}

static int pump_recv(struct tutti_dev_comm* dc, struct td_link* k) {
  const struct td_layout& L = dc->lay;
  const size_t hdr = sizeof k->r_msg;
  int moved = 0;
  while (k->fd >= 0) {
    if (k->r_done >= hdr && !k->r_taken) {
      if (!take_header(dc, k)) {
        return moved;
      }
      k->r_taken = 1;
    }
    const size_t pay = k->r_taken && k->r_msg.kind == TD_MSG_SLOT ? k->r_msg.len : 0;
    if (k->r_taken && k->r_done == hdr + pay) {
      if (k->r_msg.kind == TD_MSG_SLOT) {
        const struct td_msg& m = k->r_msg;
        k->expect[m.ch] = m.value + 1;
        __atomic_store_n(
            (uint64_t*)(dc->hosts[dc->rank].host + td_ctr(L.tail_off, m.ch, k->peer, dc->nranks)),
            m.value + 1, __ATOMIC_RELEASE);
      }
      k->r_done = 0;
      k->r_taken = 0;
      continue;
    }
    char* to = k->r_done < hdr ? (char*)&k->r_msg + k->r_done : k->r_pay + (k->r_done - hdr);
    const size_t want = k->r_done < hdr ? hdr - k->r_done : hdr + pay - k->r_done;
    ssize_t got = recv(k->fd, to, want, MSG_DONTWAIT);
    if (got == 0) {
      breaks(k, 1);
      return moved;
    }
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        breaks(k, errno + 1);
      }
      return moved;
    }
    moved = 1;
    k->r_done += (size_t)got;
  }
  return moved;
}

static int owed(struct tutti_dev_comm* dc, struct td_link* k) {
  const struct td_layout& L = dc->lay;
  for (int ch = 0; ch < dc->nch && k->fd >= 0; ch++) {
    if (k->s_busy ||
        ld(k->sh_host + td_ctr(L.head_off, ch, dc->rank, dc->nranks)) != k->freed[ch] ||
        ld(k->sh_host + td_ctr(L.tail_off, ch, dc->rank, dc->nranks)) != k->fwd[ch]) {
      return 1;
    }
  }
  return 0;
}

static void idle_wait(struct td_net* nt, int usec) {
  struct pollfd fds[64];
  int c = 0;
  for (int i = 0; i < nt->nlinks && c < 64; i++) {
    if (nt->links[i].fd >= 0) {
      fds[c++] = {nt->links[i].fd, POLLIN, 0};
    }
  }
  struct timespec ts = {0, usec * 1000L};
  ppoll(fds, (nfds_t)c, &ts, NULL);
}

/* Forwards while kernels run (spinning) and shortly after; otherwise sleeps
 * in poll, woken by arriving data. */
static void* proxy_main(void* arg) {
  struct tutti_dev_comm* dc = (struct tutti_dev_comm*)arg;
  struct td_net* nt = dc->netp;
  volatile int* f = dc->host_flags;
  double last = tutti_socket_now(), stop_at = 0, next_check = last;
  for (;;) {
    int moved = 0;
    for (int i = 0; i < nt->nlinks; i++) {
      struct td_link* k = &nt->links[i];
      if (k->fd >= 0) {
        moved |= pump_recv(dc, k);
      }
      if (k->fd >= 0) {
        moved |= pump_send(dc, k);
      }
    }
    const int busy = f[TD_FLAG_STARTED] != f[TD_FLAG_FINISHED];
    for (int i = 0; busy && i < nt->nlinks; i++) {
      if (nt->links[i].broken && !nt->links[i].departed) {
        raise_error(dc, &nt->links[i]);
      }
    }
    const double now = tutti_socket_now();
    if (moved) {
      last = now;
    }
    if (now >= next_check) {
      /* The heartbeat's other half (util/socket.h): a host that stopped
       * acknowledging data in flight is lost, as keepalive finds idle ones. */
      for (int i = 0; i < nt->nlinks; i++) {
        struct td_link* k = &nt->links[i];
        if (k->fd >= 0 && !k->departed && tutti_socket_unanswered(k->fd)) {
          breaks(k, ETIMEDOUT + 1);
        }
      }
      next_check = now + 0.25;
    }
    if (nt->stop) {
      /* Forward what peers are still owed (bounded), then say goodbye. */
      stop_at = stop_at == 0 ? now : stop_at;
      int any = 0;
      for (int i = 0; i < nt->nlinks && !f[TD_FLAG_ABORT]; i++) {
        any |= owed(dc, &nt->links[i]);
      }
      if (!any || now - stop_at > 2.0) {
        break;
      }
    }
    if (!moved && !busy && now - last > 0.02) {
      idle_wait(nt, 200);
    } else if (!moved) {
      sched_yield();
    }
  }
  for (int i = 0; i < nt->nlinks; i++) {
    struct td_link* k = &nt->links[i];
    struct td_msg bye = {TD_MSG_BYE, 0, 0, 0, 0};
    if (k->fd >= 0 && !k->s_busy) {
      (void)!send(k->fd, &bye, sizeof bye, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }
  return NULL;
}

ncclResult_t td_net_start(struct tutti_dev_comm* dc) {
  struct td_net* nt = dc->netp;
  if (nt == NULL || nt->nlinks == 0) {
    return ncclSuccess;
  }
  if (pthread_create(&nt->thread, NULL, proxy_main, dc) != 0) {
    return tutti_error(ncclSystemError, "could not start the device proxy thread");
  }
  nt->live = 1;
  return ncclSuccess;
}

void td_net_free(struct tutti_dev_comm* dc) {
  struct td_net* nt = dc->netp;
  if (nt == NULL) {
    return;
  }
  if (nt->live) {
    nt->stop = 1;
    pthread_join(nt->thread, NULL);
  }
  for (int i = 0; nt->links != NULL && i < nt->nlinks; i++) {
    struct td_link* k = &nt->links[i];
    if (k->fd >= 0) {
      close(k->fd);
    }
    if (k->sh_host != NULL) {
      cudaFreeHost(k->sh_host);
    }
    free(k->fwd);
  }
  free(nt->links);
  free(nt);
  dc->netp = NULL;
}

ncclResult_t td_net_error(struct tutti_dev_comm* dc) {
  const int p = dc->host_flags[TD_FLAG_RANK];
  const char* host = "?";
  for (int i = 0; dc->netp != NULL && i < dc->netp->nlinks; i++) {
    if (dc->netp->links[i].peer == p) {
      host = dc->netp->links[i].hostname;
    }
  }
  return tutti_error(ncclRemoteError,
                     "rank %d on host %s was lost (its connection broke) while a device "
                     "collective of rank %d used it: the communicator is unusable; destroy it "
                     "(or shrink it without that rank)",
                     p, host, dc->rank);
}
