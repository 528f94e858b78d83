/* The device executor across hosts, setup: which peers are remote, their
 * shadows in pinned host memory, and the network's comms for every remote
 * pair (see link.h): the plugin NCCL_NET_PLUGIN names, else tutti's own
 * sockets, on the devices nearest this rank's GPU, channels striped over
 * them. Handles travel over the bootstrap, which checked the job secret. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/dev_comm.h"
#include "device/net/devnet.h"
#include "device/net/link.h"

extern "C" {
#include "bootstrap/bootstrap.h"
#include "topo/nics.h"
#include "net/socket/socknet.h"
#include "util/check.h"
#include "util/socket.h"
}

#define NCONN (TD_NET_CHANNELS + 1) /* per peer: the channels, then the control comm */
#define MAX_DEVS TD_NET_CHANNELS

int td_net_remote(const struct tutti_dev_setup* s, unsigned char* remote) {
  int k = 0;
  for (int p = 0; p < s->nranks; p++) {
    remote[p] = p != s->rank && (s->sizes.net_all || s->host_of[p] != s->host_of[s->rank]);
    k += remote[p];
  }
  return k;
}

/* All-gathered first: whether the rank is ready, and on which network. */
struct td_rec {
  uint8_t forced; /* NCCL_SHM_DISABLE and NCCL_P2P_DISABLE */
  uint8_t ok;     /* set up so far, and its network open when it has remote peers */
  uint8_t pad[6];
  char net[56];
};

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
    snprintf(k->hostname, sizeof k->hostname, "%s", s->peers[p].hostname);
    const size_t cbytes = (TD_NET_CTL_SENDS + TD_NET_CTL_RECVS) * sizeof(struct td_ctl);
    cudaError_t e = cudaHostAlloc((void**)&k->sh_host, dc->lay.total + cbytes,
                                  cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess) {
      memset(k->sh_host, 0, dc->lay.total + cbytes);
      e = cudaHostGetDevicePointer((void**)&k->sh_dev, k->sh_host, 0);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return tutti_error(ncclSystemError,
                         "pinning %.1f MB of host memory for rank %d's queues failed: %s",
                         (double)dc->lay.total / 1e6, p, cudaGetErrorString(e));
    }
    k->cbuf = (struct td_ctl*)(k->sh_host + dc->lay.total);
    dc->base[p] = k->sh_dev;
  }
  return ncclSuccess;
}

/* The network and the devices this rank's channels stripe over. */
static ncclResult_t open_network(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                                 int* devs, int* ndevs) {
  struct td_net* nt = dc->netp;
  NCCLCHECK(tutti_net_open(s->comm_hash + 1, &nt->net));
  if (nt->net == NULL) {
    NCCLCHECK(tutti_socknet_open(s->comm_hash + 1, &nt->net));
  }
  struct tutti_net* net = nt->net;
  char busid[32] = "", path[256] = "";
  int local = 0;
  for (int p = 0; p < s->rank; p++) {
    local += s->host_of[p] == s->host_of[s->rank];
  }
  if (cudaDeviceGetPCIBusId(busid, sizeof busid, dc->dev) != cudaSuccess ||
      tutti_topo_pci_path(busid, path, sizeof path) != ncclSuccess) {
    (void)cudaGetLastError();
    path[0] = '\0';
  }
  char names[MAX_DEVS][64];
  NCCLCHECK(tutti_net_choose(net, path[0] ? path : NULL, local, devs, MAX_DEVS, ndevs, names));
  if (*ndevs == 0) {
    return tutti_error(ncclSystemError,
                       "the network %s has no device that moves host memory, so GPU buffers "
                       "cannot reach other hosts: check NCCL_SOCKET_IFNAME / NCCL_NET_PLUGIN",
                       net->name);
  }
  snprintf(nt->via, sizeof nt->via, "NET/%.40s/%.40s", net->name, names[0]);
  return ncclSuccess;
}

static unsigned char* handle_at(unsigned char* h, int n, int r, int p, int i) {
  return h + (((size_t)r * (size_t)n + (size_t)p) * NCONN + (size_t)i) * TUTTI_NET_HANDLE_BYTES;
}

static ncclResult_t listen_all(struct tutti_dev_comm* dc, const int* devs, int ndevs,
                               unsigned char* handles, void** listens) {
  struct td_net* nt = dc->netp;
  struct tutti_net* net = nt->net;
  for (int i = 0; i < nt->nlinks; i++) {
    const int p = nt->links[i].peer;
    for (int c = 0; c <= dc->nch; c++) {
      const int slot = c == dc->nch ? TD_NET_CHANNELS : c;
      if (net->ops->listen(net, devs[c % ndevs], handle_at(handles, dc->nranks, dc->rank, p, slot),
                           &listens[(size_t)p * NCONN + (size_t)slot]) != ncclSuccess) {
        return tutti_error(ncclSystemError,
                           "rank %d could not listen on the network %s for rank %d's device "
                           "proxy: %s",
                           dc->rank, net->name, p, tutti_last_error());
      }
    }
  }
  return ncclSuccess;
}

/* Drives every connect and accept until all are up, bounded by TUTTI_TIMEOUT. */
static ncclResult_t connect_all(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                                const int* devs, int ndevs, unsigned char* handles,
                                void** listens) {
  struct td_net* nt = dc->netp;
  struct tutti_net* net = nt->net;
  const double deadline = tutti_socket_now() + s->timeout_s;
  for (;;) {
    int left = 0, moved = 0, waiting_for = -1;
    for (int i = 0; i < nt->nlinks; i++) {
      struct td_link* k = &nt->links[i];
      for (int c = 0; c <= dc->nch; c++) {
        const int slot = c == dc->nch ? TD_NET_CHANNELS : c;
        void** snd = c == dc->nch ? &k->csend : &k->ch[c].send;
        void** rcv = c == dc->nch ? &k->crecv : &k->ch[c].recv;
        if (*snd == NULL) {
          NCCLCHECK(net->ops->connect(
              net, devs[c % ndevs], handle_at(handles, dc->nranks, k->peer, dc->rank, slot), snd));
          moved |= *snd != NULL;
        }
        if (*rcv == NULL) {
          NCCLCHECK(net->ops->accept(net, listens[(size_t)k->peer * NCONN + (size_t)slot], rcv));
          moved |= *rcv != NULL;
        }
        if (*snd == NULL || *rcv == NULL) {
          left++;
          waiting_for = k->peer;
        }
      }
    }
    if (left == 0) {
      return ncclSuccess;
    }
    if (tutti_socket_now() > deadline) {
      return tutti_error(ncclSystemError,
                         "rank %d could not connect its device proxy to rank %d (host %s) over "
                         "%s within TUTTI_TIMEOUT (%.0f s): is that rank alive and its network "
                         "reachable?",
                         dc->rank, waiting_for, s->peers[waiting_for].hostname, net->name,
                         s->timeout_s);
    }
    if (!moved) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
}

static ncclResult_t reg(struct tutti_net* net, void* comm, void* data, size_t bytes, void** mh) {
  if (net->ops->reg_mr(net, comm, data, bytes, TUTTI_NET_PTR_HOST, mh) != ncclSuccess) {
    return tutti_error(ncclSystemError,
                       "the network %s could not register %.1f MB of pinned host memory: %s",
                       net->name, (double)bytes / 1e6, tutti_last_error());
  }
  return ncclSuccess;
}

static ncclResult_t register_all(struct tutti_dev_comm* dc) {
  struct td_net* nt = dc->netp;
  struct tutti_net* net = nt->net;
  char* mine = dc->hosts[dc->rank].host;
  for (int i = 0; i < nt->nlinks; i++) {
    struct td_link* k = &nt->links[i];
    for (int c = 0; c < dc->nch; c++) {
      NCCLCHECK(reg(net, k->ch[c].send, k->sh_host, dc->lay.total, &k->ch[c].send_mh));
      NCCLCHECK(reg(net, k->ch[c].recv, mine, dc->lay.total, &k->ch[c].recv_mh));
    }
    NCCLCHECK(reg(net, k->csend, k->cbuf, TD_NET_CTL_SENDS * sizeof(struct td_ctl), &k->csend_mh));
    NCCLCHECK(reg(net, k->crecv, k->cbuf + TD_NET_CTL_SENDS,
                  TD_NET_CTL_RECVS * sizeof(struct td_ctl), &k->crecv_mh));
  }
  return ncclSuccess;
}

/* Listens, exchanges handles, connects, registers. */
static ncclResult_t wire_up(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                            const int* devs, int ndevs, const struct td_rec* recs) {
  const int n = dc->nranks;
  unsigned char* handles =
      (unsigned char*)calloc(1, (size_t)n * (size_t)n * NCONN * TUTTI_NET_HANDLE_BYTES);
  void** listens = (void**)calloc((size_t)n * NCONN, sizeof(void*));
  uint8_t* oks = (uint8_t*)calloc((size_t)n, 1);
  ncclResult_t res = handles == NULL || listens == NULL || oks == NULL
                         ? tutti_error(ncclSystemError, "out of host memory")
                         : ncclSuccess;
  const int mine_ok = res == ncclSuccess && recs[dc->rank].ok && dc->net &&
                      listen_all(dc, devs, ndevs, handles, listens) == ncclSuccess;
  if (oks != NULL) {
    oks[dc->rank] = (uint8_t)(mine_ok || !dc->net);
    res = tutti_bootstrap_allgather(s->boot, oks, 1);
  }
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (!oks[p]) {
      res = tutti_error(ncclSystemError, "rank %d could not listen for its device proxy", p);
    }
  }
  if (res == ncclSuccess) {
    res = tutti_bootstrap_allgather(s->boot, handles, (size_t)n * NCONN * TUTTI_NET_HANDLE_BYTES);
  }
  if (res == ncclSuccess && dc->net) {
    res = connect_all(dc, s, devs, ndevs, handles, listens);
  }
  if (res == ncclSuccess && dc->net) {
    res = register_all(dc);
  }
  for (size_t i = 0; listens != NULL && i < (size_t)n * NCONN; i++) {
    if (listens[i] != NULL) {
      dc->netp->net->ops->close_listen(dc->netp->net, listens[i]);
    }
  }
  free(oks);
  free(listens);
  free(handles);
  return res;
}

ncclResult_t td_net_connect(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s, char* why,
                            size_t why_len) {
  const int n = dc->nranks;
  struct td_rec* recs = (struct td_rec*)calloc((size_t)n, sizeof *recs);
  if (recs == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  int devs[MAX_DEVS], ndevs = 0;
  if (why[0] == '\0' && dc->net) {
    if (alloc_links(dc, s) != ncclSuccess || open_network(dc, s, devs, &ndevs) != ncclSuccess) {
      snprintf(why, why_len, "rank %d could not set up its device proxy: %s", dc->rank,
               tutti_last_error());
    }
  }
  struct td_rec* mine = &recs[dc->rank];
  mine->forced = (uint8_t)s->sizes.net_all;
  mine->ok = why[0] == '\0';
  if (dc->netp != NULL && dc->netp->net != NULL) {
    snprintf(mine->net, sizeof mine->net, "%.55s", dc->netp->net->name);
  }
  ncclResult_t res = tutti_bootstrap_allgather(s->boot, recs, sizeof *recs);
  for (int p = 0; p < n && res == ncclSuccess && why[0] == '\0'; p++) {
    if (!recs[p].ok) {
      snprintf(why, why_len, "rank %d could not set up its device path (its log says why)", p);
    } else if (recs[p].forced != mine->forced) {
      snprintf(why, why_len,
               "ranks %d and %d disagree on NCCL_SHM_DISABLE / NCCL_P2P_DISABLE: set them alike "
               "on every rank",
               dc->rank, p);
    } else if (dc->net && recs[p].net[0] != '\0' && strcmp(recs[p].net, mine->net) != 0) {
      snprintf(why, why_len,
               "ranks %d and %d use different networks for GPU buffers (%s and %s): load the "
               "same NCCL_NET_PLUGIN on every rank",
               dc->rank, p, mine->net, recs[p].net);
    }
  }
  /* Everyone wires up, or nobody: the all-gathers inside stay in step. */
  if (res == ncclSuccess && why[0] == '\0') {
    if (wire_up(dc, s, devs, ndevs, recs) != ncclSuccess) {
      snprintf(why, why_len, "rank %d could not connect its device proxy: %s", dc->rank,
               tutti_last_error());
    }
    for (int i = 0; dc->net && dc->netp != NULL && i < dc->netp->nlinks; i++) {
      INFO(TUTTI_INIT | TUTTI_NET, "Channel 00-%02d : %d[%d] -> %d via %s (proxy, %d device(s))",
           dc->nch - 1, dc->rank, dc->dev, dc->netp->links[i].peer, dc->netp->via, ndevs);
    }
  }
  free(recs);
  return res;
}
