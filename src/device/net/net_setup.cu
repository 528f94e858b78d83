/* The device executor across hosts, setup: which peers are remote, their
 * shadows in pinned host memory, and one TCP connection per remote pair,
 * introduced with the job's secret (see net.h). */
#include <errno.h>
#include <netinet/in.h>
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
#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/ifaces.h"
#include "util/param.h"
#include "util/socket.h"
}

static TUTTI_PARAM(net_p2p_disable, "NCCL_P2P_DISABLE", 0);
static TUTTI_PARAM(net_shm_disable, "NCCL_SHM_DISABLE", 0);

static int is_forced(void) {
  return tutti_param_net_p2p_disable() != 0 && tutti_param_net_shm_disable() != 0;
}

int td_net_remote(const struct tutti_dev_setup* s, unsigned char* remote) {
  int k = 0;
  for (int p = 0; p < s->nranks; p++) {
    remote[p] = p != s->rank && (is_forced() || s->host_of[p] != s->host_of[s->rank]);
    k += remote[p];
  }
  return k;
}

/* Lower ranks connect and introduce themselves; higher ranks accept and
 * check the introduction (a stranger is dropped and the wait goes on). */
static ncclResult_t connect_links(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                                  const struct td_rec* recs, int lfd) {
  struct td_net* nt = dc->netp;
  const double deadline = tutti_socket_now() + s->timeout_s;
  int lower = 0;
  for (int i = 0; i < nt->nlinks; i++) {
    struct td_link* k = &nt->links[i];
    if (k->peer < dc->rank) {
      lower++;
      continue;
    }
    union tutti_socket_addr a;
    tutti_socket_addr_unpack(recs[k->peer].addr, &a);
    char who[96], at[TUTTI_SOCKET_ADDR_STRLEN];
    snprintf(who, sizeof who, "rank %d at %s", k->peer, tutti_socket_format(&a, at, sizeof at));
    struct tutti_socket_io io = {deadline, NULL, who, "device proxy connection"};
    NCCLCHECK(
        tutti_socket_connect(&a, &io, "is the peer's host reachable on that interface?", &k->fd));
    struct td_hello h = {TD_NET_MAGIC, dc->rank, s->comm_hash, {0}};
    memcpy(h.secret, s->secret, 16);
    NCCLCHECK(tutti_socket_send_all(k->fd, &h, sizeof h, &io));
  }
  while (lower > 0) {
    struct tutti_socket_io io = {deadline, NULL, "a lower rank", "device proxy accept"};
    int fd = -1;
    NCCLCHECK(tutti_socket_accept(lfd, &io, &fd, NULL));
    struct td_hello h;
    io.deadline = tutti_socket_now() + 5.0 < deadline ? tutti_socket_now() + 5.0 : deadline;
    struct td_link* k = NULL;
    if (tutti_socket_recv_all(fd, &h, sizeof h, &io) == ncclSuccess && h.magic == TD_NET_MAGIC &&
        h.comm_hash == s->comm_hash && memcmp(h.secret, s->secret, 16) == 0) {
      for (int i = 0; i < nt->nlinks; i++) {
        if (nt->links[i].peer == h.rank && h.rank < dc->rank && nt->links[i].fd < 0) {
          k = &nt->links[i];
        }
      }
    }
    if (k == NULL) {
      INFO(TUTTI_NET, "rank %d dropped a connection to its device proxy listener: not a peer",
           dc->rank);
      close(fd);
      continue;
    }
    k->fd = fd;
    lower--;
  }
  return ncclSuccess;
}

static ncclResult_t alloc_links(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s) {
  struct td_net* nt = (struct td_net*)calloc(1, sizeof *nt);
  if (nt == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  dc->netp = nt;
  for (int p = 0; p < dc->nranks; p++) {
    nt->nlinks += dc->remote[p];
  }
  nt->links = (struct td_link*)calloc((size_t)nt->nlinks, sizeof *nt->links);
  if (nt->links == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  int i = 0;
  for (int p = 0; p < dc->nranks; p++) {
    if (!dc->remote[p]) {
      continue;
    }
    struct td_link* k = &nt->links[i++];
    k->peer = p;
    k->fd = -1;
    snprintf(k->hostname, sizeof k->hostname, "%s", s->peers[p].hostname);
    k->fwd = (uint64_t*)calloc((size_t)dc->nch * 3, sizeof(uint64_t));
    if (k->fwd == NULL) {
      return tutti_error(ncclSystemError, "out of host memory");
    }
    k->freed = k->fwd + dc->nch;
    k->expect = k->freed + dc->nch;
    cudaError_t e = cudaHostAlloc((void**)&k->sh_host, dc->lay.total,
                                  cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess) {
      memset(k->sh_host, 0, dc->lay.total);
      e = cudaHostGetDevicePointer((void**)&k->sh_dev, k->sh_host, 0);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return tutti_error(ncclSystemError,
                         "pinning %.1f MB of host memory for rank %d's queues failed: %s",
                         (double)dc->lay.total / 1e6, p, cudaGetErrorString(e));
    }
    dc->base[p] = k->sh_dev;
  }
  return ncclSuccess;
}

ncclResult_t td_net_connect(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s, char* why,
                            size_t why_len) {
  const int n = dc->nranks;
  struct td_rec* recs = (struct td_rec*)calloc((size_t)n, sizeof *recs);
  if (recs == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  int lfd = -1;
  struct tutti_iface iface;
  memset(&iface, 0, sizeof iface);
  if (why[0] == '\0' && dc->net) {
    if (alloc_links(dc, s) != ncclSuccess || tutti_iface_pick(&iface) != ncclSuccess ||
        tutti_socket_listen(&iface.addr, &lfd) != ncclSuccess) {
      snprintf(why, why_len, "rank %d could not set up its device proxy: %s", dc->rank,
               tutti_last_error());
    }
  }
  struct td_rec* mine = &recs[dc->rank];
  mine->forced = (uint8_t)is_forced();
  mine->ok = why[0] == '\0';
  tutti_socket_addr_pack(&iface.addr, mine->addr);
  ncclResult_t res = tutti_bootstrap_allgather(s->boot, recs, sizeof *recs);
  for (int p = 0; p < n && res == ncclSuccess && why[0] == '\0'; p++) {
    if (!recs[p].ok) {
      snprintf(why, why_len, "rank %d could not set up its device path (its log says why)", p);
    } else if (recs[p].forced != mine->forced) {
      snprintf(why, why_len,
               "ranks %d and %d disagree on NCCL_SHM_DISABLE / NCCL_P2P_DISABLE: set them alike "
               "on every rank",
               dc->rank, p);
    }
  }
  if (res == ncclSuccess && why[0] == '\0' && dc->net) {
    if (connect_links(dc, s, recs, lfd) != ncclSuccess) {
      snprintf(why, why_len, "rank %d could not connect its device proxy: %s", dc->rank,
               tutti_last_error());
    }
    for (int i = 0; dc->netp != NULL && i < dc->netp->nlinks; i++) {
      struct td_link* k = &dc->netp->links[i];
      if (k->fd >= 0) { /* no delay and the heartbeat: set by util/socket.c */
        INFO(TUTTI_INIT | TUTTI_NET, "Channel 00-%02d : %d[%d] -> %d via NET/Socket/%s (proxy)",
             dc->nch - 1, dc->rank, dc->dev, k->peer, iface.name);
      }
    }
  }
  if (lfd >= 0) {
    close(lfd);
  }
  free(recs);
  return res;
}
