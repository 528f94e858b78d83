/* The mock plugin's network, the same for every ABI version (mock_plugin.c
 * adapts it): listeners in a process-wide table, a connection a pair of
 * comms over one channel, bytes moved by memcpy once a send and a receive
 * are both posted, in order, grouped receives matched by tag. It checks
 * what a real network would trip over: sizes, registrations, requests. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "mock_core.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC_COMM 0x434f4d4du
#define MAGIC_REG 0x52454721u
#define MAGIC_HANDLE 0x48414e44u
#define LISTENERS 64
#define MAX_N 8
#define RECV_REQS 32                  /* NCCL_NET_MAX_REQUESTS */
#define SEND_REQS (RECV_REQS * MAX_N) /* ... times the grouping, on the sending side */

int mock_max_recvs = 1;
size_t mock_max_bytes = 0x7fffffff;

struct handle {
  uint32_t magic;
  int listener;
};

struct req {
  int used;
  int send;
  struct comm* comm;
  int n;
  void* data[MAX_N];
  size_t size[MAX_N];
  int tag[MAX_N];
  int filled[MAX_N];
  size_t got[MAX_N];
  int done;
  int failed;
};

struct chan {
  struct req* sendq[SEND_REQS];
  int shead, scount;
  struct req* recvq[RECV_REQS];
  int rhead, rcount;
  int open;   /* comms still open on it */
  int closed; /* one end closed: the other's requests fail, as a peer's reset would */
};

struct comm {
  uint32_t magic;
  int send;
  struct chan* ch;
  struct req reqs[SEND_REQS];
};

struct reg {
  uint32_t magic;
  char* base;
  size_t size;
};

struct listener {
  int used;
  int connects, accepts;
  struct comm* pending; /* the receiving side of a connect, until accepted */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct listener listeners[LISTENERS];
static struct mock_net_stats own_stats;

struct mock_net_stats* mock_stats(void) {
  static struct mock_net_stats* s;
  if (s == NULL) {
    s = dlsym(RTLD_DEFAULT, "mock_net_stats");
    s = s != NULL ? s : &own_stats;
  }
  return s;
}

ncclResult_t mock_listen(int dev, void* handle, void** listen_comm) {
  (void)dev;
  pthread_mutex_lock(&mu);
  int i = 0;
  while (i < LISTENERS && listeners[i].used) {
    i++;
  }
  if (i == LISTENERS) {
    pthread_mutex_unlock(&mu);
    return ncclSystemError;
  }
  memset(&listeners[i], 0, sizeof listeners[i]);
  listeners[i].used = 1;
  pthread_mutex_unlock(&mu);
  struct handle h = {MAGIC_HANDLE, i};
  memset(handle, 0, 128);
  memcpy(handle, &h, sizeof h);
  *listen_comm = &listeners[i];
  return ncclSuccess;
}

static struct comm* new_comm(struct chan* ch, int send) {
  struct comm* c = calloc(1, sizeof *c);
  if (c != NULL) {
    c->magic = MAGIC_COMM;
    c->send = send;
    c->ch = ch;
  }
  return c;
}

/* The first call for a listener answers "not yet" (NULL), as a real
 * network does while the connection is being made. */
ncclResult_t mock_connect(void* handle, void** send_comm) {
  struct handle h;
  memcpy(&h, handle, sizeof h);
  *send_comm = NULL;
  if (h.magic != MAGIC_HANDLE || h.listener < 0 || h.listener >= LISTENERS) {
    return ncclInternalError;
  }
  pthread_mutex_lock(&mu);
  mock_stats()->connects++;
  struct listener* l = &listeners[h.listener];
  ncclResult_t res = ncclSuccess;
  if (!l->used || l->pending != NULL) {
    res = ncclInternalError;
  } else if (++l->connects > 1) {
    struct chan* ch = calloc(1, sizeof *ch);
    struct comm* s = ch != NULL ? new_comm(ch, 1) : NULL;
    struct comm* r = s != NULL ? new_comm(ch, 0) : NULL;
    if (r == NULL) {
      free(s);
      free(ch);
      res = ncclSystemError;
    } else {
      ch->open = 2;
      l->pending = r;
      *send_comm = s;
    }
  }
  pthread_mutex_unlock(&mu);
  return res;
}

ncclResult_t mock_accept(void* listen_comm, void** recv_comm) {
  struct listener* l = listen_comm;
  *recv_comm = NULL;
  pthread_mutex_lock(&mu);
  mock_stats()->accepts++;
  ncclResult_t res = l->used ? ncclSuccess : ncclInternalError;
  if (l->used && ++l->accepts > 1 && l->pending != NULL) {
    *recv_comm = l->pending;
    l->pending = NULL;
  }
  pthread_mutex_unlock(&mu);
  return res;
}

ncclResult_t mock_close_listen(void* listen_comm) {
  struct listener* l = listen_comm;
  pthread_mutex_lock(&mu);
  ncclResult_t res = l->used ? ncclSuccess : ncclInternalError;
  l->used = 0;
  pthread_mutex_unlock(&mu);
  return res;
}

static int is_comm(const struct comm* c) {
  return c != NULL && c->magic == MAGIC_COMM;
}

ncclResult_t mock_close(void* comm) {
  struct comm* c = comm;
  if (!is_comm(c)) {
    return ncclInternalError;
  }
  pthread_mutex_lock(&mu);
  /* A closed end's queued requests vanish with it; the other end's fail. */
  struct chan* ch = c->ch;
  for (; ch->scount > 0; ch->scount--, ch->shead = (ch->shead + 1) % SEND_REQS) {
    if (ch->sendq[ch->shead]->comm != c) {
      ch->sendq[ch->shead]->done = ch->sendq[ch->shead]->failed = 1;
    }
  }
  for (; ch->rcount > 0; ch->rcount--, ch->rhead = (ch->rhead + 1) % RECV_REQS) {
    if (ch->recvq[ch->rhead]->comm != c) {
      ch->recvq[ch->rhead]->done = ch->recvq[ch->rhead]->failed = 1;
    }
  }
  ch->closed = 1;
  if (--c->ch->open == 0) {
    free(c->ch);
  }
  c->magic = 0;
  free(c);
  pthread_mutex_unlock(&mu);
  return ncclSuccess;
}

ncclResult_t mock_reg(void* comm, void* data, size_t size, int dmabuf, int fd, uint64_t offset,
                      void** mhandle) {
  if (!is_comm(comm)) {
    return ncclInternalError;
  }
  struct reg* r = calloc(1, sizeof *r);
  if (r == NULL) {
    return ncclSystemError;
  }
  *r = (struct reg){MAGIC_REG, data, size};
  pthread_mutex_lock(&mu);
  struct mock_net_stats* s = mock_stats();
  s->regs++;
  if (dmabuf) {
    s->dmabuf_regs++;
    s->dmabuf_fd = fd;
    s->dmabuf_offset = offset;
  }
  pthread_mutex_unlock(&mu);
  *mhandle = r;
  return ncclSuccess;
}

ncclResult_t mock_dereg(void* comm, void* mhandle) {
  struct reg* r = mhandle;
  if (!is_comm(comm) || r == NULL || r->magic != MAGIC_REG) {
    return ncclInternalError;
  }
  r->magic = 0;
  free(r);
  pthread_mutex_lock(&mu);
  mock_stats()->deregs++;
  pthread_mutex_unlock(&mu);
  return ncclSuccess;
}

static int covers(const void* mhandle, const void* data, size_t size) {
  const struct reg* r = mhandle;
  const char* p = data;
  return size == 0 ||
         (r != NULL && r->magic == MAGIC_REG && p >= r->base && p + size <= r->base + r->size);
}

static struct req* new_req(struct comm* c) {
  const int cap = c->send ? SEND_REQS : RECV_REQS;
  for (int i = 0; i < cap; i++) {
    if (!c->reqs[i].used) {
      memset(&c->reqs[i], 0, sizeof c->reqs[i]);
      c->reqs[i].used = 1;
      c->reqs[i].comm = c;
      c->reqs[i].send = c->send;
      return &c->reqs[i];
    }
  }
  return NULL; /* all in flight: the caller tries again later */
}

/* Moves what both sides have posted: each send, in order, into a buffer of
 * the oldest receive with its tag; a send larger than that buffer (or with
 * no buffer of its tag) fails both. */
static void progress(struct chan* ch) {
  while (!ch->closed && ch->rcount > 0 && ch->scount > 0) {
    struct req* r = ch->recvq[ch->rhead];
    struct req* s = ch->sendq[ch->shead];
    int slot = -1;
    for (int i = 0; i < r->n && slot < 0; i++) {
      slot = !r->filled[i] && r->tag[i] == s->tag[0] ? i : -1;
    }
    if (slot < 0 || s->size[0] > r->size[slot]) {
      r->failed = s->failed = 1;
    } else {
      if (s->size[0] > 0) {
        memcpy(r->data[slot], s->data[0], s->size[0]);
      }
      r->got[slot] = s->size[0];
      r->filled[slot] = 1;
    }
    s->done = 1;
    ch->shead = (ch->shead + 1) % SEND_REQS;
    ch->scount--;
    int all = 1;
    for (int i = 0; i < r->n; i++) {
      all &= r->filled[i];
    }
    if (all || r->failed) {
      r->done = 1;
      ch->rhead = (ch->rhead + 1) % RECV_REQS;
      ch->rcount--;
    }
  }
}

ncclResult_t mock_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void** request) {
  struct comm* c = send_comm;
  *request = NULL;
  pthread_mutex_lock(&mu);
  struct mock_net_stats* st = mock_stats();
  st->isends++;
  ncclResult_t res = ncclSuccess;
  if (!is_comm(c) || !c->send) {
    res = ncclInternalError;
  } else if (size > mock_max_bytes) {
    res = ncclInvalidUsage; /* before touching data: it may not be that long */
  } else if (!covers(mhandle, data, size)) {
    st->bad_mhandle++;
    res = ncclInternalError;
  } else {
    struct req* q = new_req(c);
    if (q != NULL) {
      q->n = 1;
      q->data[0] = data;
      q->size[0] = size;
      q->tag[0] = tag;
      if (c->ch->closed) {
        q->done = q->failed = 1;
      } else {
        c->ch->sendq[(c->ch->shead + c->ch->scount++) % SEND_REQS] = q;
      }
      progress(c->ch);
      *request = q;
    }
  }
  pthread_mutex_unlock(&mu);
  return res;
}

ncclResult_t mock_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                        void** mhandles, void** request) {
  struct comm* c = recv_comm;
  *request = NULL;
  pthread_mutex_lock(&mu);
  struct mock_net_stats* st = mock_stats();
  st->irecvs++;
  ncclResult_t res = ncclSuccess;
  if (!is_comm(c) || c->send || n < 1 || n > mock_max_recvs) {
    res = ncclInternalError;
  }
  for (int i = 0; res == ncclSuccess && i < n; i++) {
    if (sizes[i] > mock_max_bytes) {
      res = ncclInvalidUsage;
    } else if (!covers(mhandles[i], data[i], sizes[i])) {
      st->bad_mhandle++;
      res = ncclInternalError;
    }
  }
  struct req* q = res == ncclSuccess ? new_req(c) : NULL;
  if (q != NULL) {
    st->largest_group = n > st->largest_group ? n : st->largest_group;
    q->n = n;
    for (int i = 0; i < n; i++) {
      q->data[i] = data[i];
      q->size[i] = sizes[i];
      q->tag[i] = tags[i];
    }
    if (c->ch->closed) {
      q->done = q->failed = 1;
    } else {
      c->ch->recvq[(c->ch->rhead + c->ch->rcount++) % RECV_REQS] = q;
    }
    progress(c->ch);
    *request = q;
  }
  pthread_mutex_unlock(&mu);
  return res;
}

ncclResult_t mock_test(void* request, int* done, int* sizes) {
  struct req* q = request;
  *done = 0;
  if (q == NULL || !q->used || !is_comm(q->comm)) {
    return ncclInternalError;
  }
  pthread_mutex_lock(&mu);
  progress(q->comm->ch);
  ncclResult_t res = ncclSuccess;
  if (q->done) {
    *done = 1;
    res = q->failed ? ncclInvalidUsage : ncclSuccess;
    for (int i = 0; sizes != NULL && !q->failed && i < q->n; i++) {
      sizes[i] = (int)(q->send ? q->size[i] : q->got[i]);
    }
    q->used = 0;
  }
  pthread_mutex_unlock(&mu);
  return res;
}
