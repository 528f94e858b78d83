/* The whole job's answer: this process's ranks, the other processes' (asked
 * on their peer ports, all at once, for at most TUTTI_RAS_DEADLINE_S), and
 * for the ranks that did not answer what this process knows: dead or
 * unreachable. Each process asked must first prove it holds the
 * communicator's secret (ras/internal.h); its answer is then read within
 * bounds and checked by ras/doc.c, outside the registry's lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ras/internal.h"
#include "util/log.h"
#include "util/seal.h"
#include "util/sha256.h"

#define MAX_TARGETS 256
#define GATHER_BYTES (64u << 20) /* all answers held at once */

enum { CONNECT, SEAL, REQ, CHAL, MAC, LINES, DONE };

/* One other process to ask. */
struct ask {
  int fd, state;
  union tutti_socket_addr addr;
  unsigned char packed[TUTTI_SOCKET_ADDR_WIRE];
  uint64_t hash;
  unsigned char secret[16];
  unsigned char asker[TUTTI_RAS_NONCE];
  unsigned char msg[TUTTI_RAS_CHAL];
  size_t got, off, lines;
  struct tutti_ras_buf reply;
  struct tutti_ras_gather* g;
};

struct tutti_ras_gather {
  struct ask* asks;
  int n;
  double deadline;
  size_t held; /* bytes of answers received */
  struct tutti_ras_doc* doc;
};

static void say(const struct ask* a, const char* what) {
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  INFO(TUTTI_RAS, "RAS: the process at %s %s: its ranks count as not answering",
       tutti_socket_format(&a->addr, where, sizeof where), what);
}

static void end(struct ask* a) {
  if (a->fd >= 0) {
    tutti_seal_close(a->fd);
  }
  a->fd = -1;
  a->state = DONE;
  tutti_sha256_wipe(a->secret, sizeof a->secret);
  tutti_ras_buf_free(&a->reply);
}

/* Takes what the process sent of its lines; 1 at its end, 0 for more, -1
 * when it broke a bound or the connection. */
static int take_lines(struct ask* a) {
  char chunk[65536];
  for (;;) {
    const ssize_t k = tutti_seal_recv(a->fd, chunk, sizeof chunk);
    if (k == 0) {
      return 1;
    }
    if (k < 0) {
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    }
    for (const char* p = chunk; (p = memchr(p, '\n', (size_t)(chunk + k - p))) != NULL; p++) {
      a->lines++;
    }
    if (a->reply.len + (size_t)k > TUTTI_RAS_REPLY_BYTES || a->lines > TUTTI_RAS_REPLY_LINES) {
      say(a, "answered more than 16 MiB or 1024 lines"); /* never trusted whole */
      return -1;
    }
    if ((a->g->held += (size_t)k) > GATHER_BYTES) {
      say(a, "answered when the others' answers held 64 MiB already");
      return -1;
    }
    tutti_ras_buf_add(&a->reply, chunk, (size_t)k);
    if (a->reply.failed) {
      return -1;
    }
  }
}

/* Runs a until it must wait; returns the events it waits for (0: ended). */
static short run(struct ask* a) {
  for (;;) {
    int r;
    switch (a->state) {
      case CONNECT:
        r = tutti_socket_connect_poll(a->fd);
        if (r == EINPROGRESS) {
          return POLLOUT;
        }
        if (r != 0) {
          return 0; /* refused: nothing listens there any more */
        }
        a->state = SEAL;
        break;
      case SEAL:
        if ((r = tutti_ras_sealed(a->fd)) <= 0) {
          if (r < 0) {
            say(a, tutti_seal_why(a->fd) != NULL ? tutti_seal_why(a->fd) : "closed");
          }
          return r == 0 ? POLLIN : 0;
        }
        memcpy(a->msg, TUTTI_RAS_MAGIC, 4);
        tutti_socket_put64(a->msg + 4, a->hash);
        memcpy(a->msg + 12, a->asker, TUTTI_RAS_NONCE);
        a->state = REQ;
        a->off = 0;
        break;
      case REQ:
        if ((r = tutti_ras_write(a->fd, a->msg, TUTTI_RAS_REQ, &a->off)) <= 0) {
          return r == 0 ? POLLOUT : 0;
        }
        a->state = CHAL;
        a->got = 0;
        break;
      case CHAL: {
        if ((r = tutti_ras_read(a->fd, a->msg, TUTTI_RAS_CHAL, &a->got)) <= 0) {
          return r == 0 ? POLLIN : 0;
        }
        unsigned char want[TUTTI_RAS_MAC_LEN];
        const unsigned char* answerer = a->msg + 4;
        tutti_ras_mac(a->secret, TUTTI_RAS_ANSWERER, a->hash, a->packed, a->asker, answerer, want);
        const int bad = memcmp(a->msg, TUTTI_RAS_MAGIC, 4) != 0 ||
                        tutti_sha256_differ(want, a->msg + 4 + TUTTI_RAS_NONCE, sizeof want);
        if (bad) {
          say(a,
              "did not prove it holds the communicator's secret (a program on a dead "
              "rank's port?)");
          return 0;
        }
        /* Our proof, bound to its nonce: good for this connection only. */
        tutti_ras_mac(a->secret, TUTTI_RAS_ASKER, a->hash, a->packed, a->asker, answerer, a->msg);
        tutti_sha256_wipe(a->secret, sizeof a->secret);
        a->state = MAC;
        a->off = 0;
        break;
      }
      case MAC:
        if ((r = tutti_ras_write(a->fd, a->msg, TUTTI_RAS_MAC_LEN, &a->off)) <= 0) {
          return r == 0 ? POLLOUT : 0;
        }
        a->state = LINES;
        break;
      case LINES:
        if ((r = take_lines(a)) == 0) {
          return POLLIN;
        }
        if (r > 0 && a->reply.text != NULL &&
            tutti_ras_doc_add(a->g->doc, a->reply.text, a->reply.len, a->packed) < 0) {
          say(a, "answered beyond RAS's bounds");
        }
        return 0;
      default:
        return 0;
    }
  }
}

static void on_ready(void* arg, short revents) {
  struct ask* a = arg;
  (void)revents;
  if (a->state != DONE && run(a) == 0) {
    end(a);
  }
}

struct tutti_ras_gather* tutti_ras_gather_start_locked(void) {
  struct tutti_ras_gather* g = calloc(1, sizeof *g);
  if (g == NULL || (g->asks = calloc(MAX_TARGETS, sizeof *g->asks)) == NULL ||
      (g->doc = tutti_ras_doc_new_locked(NULL)) == NULL) {
    tutti_ras_gather_free(g, 0);
    return NULL;
  }
  g->deadline = tutti_socket_now() + TUTTI_RAS_DEADLINE_S;
  /* The other processes of this process's communicators, each once. */
  const unsigned char none[TUTTI_SOCKET_ADDR_WIRE] = {0};
  for (const struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL; rc = rc->next) {
    const unsigned char* self = rc->peers[rc->rank].ras;
    for (int p = 0; p < rc->nranks && g->n < MAX_TARGETS; p++) {
      const unsigned char* addr = rc->peers[p].ras;
      int dup = memcmp(addr, none, sizeof none) == 0 || memcmp(addr, self, sizeof none) == 0;
      for (int i = 0; i < g->n && !dup; i++) {
        dup = memcmp(g->asks[i].packed, addr, sizeof none) == 0;
      }
      struct ask* a = &g->asks[g->n];
      if (dup || tutti_socket_addr_unpack(addr, &a->addr) != 0 || tutti_ras_nonce(a->asker) != 0) {
        continue;
      }
      memcpy(a->packed, addr, sizeof none);
      memcpy(a->secret, rc->secret, sizeof a->secret);
      a->hash = rc->hash;
      a->g = g;
      a->fd = -1;
      a->state = CONNECT;
      g->n++;
    }
  }
  return g; /* the connections start outside the lock (tutti_ras_gather_arm) */
}

int tutti_ras_gather_arm(struct tutti_ras_gather* g, struct tutti_ras_poll* ps, double now) {
  int live = 0;
  for (int i = 0; i < g->n && now < g->deadline; i++) {
    struct ask* a = &g->asks[i];
    if (a->state == CONNECT && a->fd < 0 && tutti_socket_connect_start(&a->addr, &a->fd) != 0) {
      end(a); /* nothing listens there any more */
    }
    if (a->state == DONE) {
      continue;
    }
    const short ev = a->state == CONNECT || a->state == REQ || a->state == MAC ? POLLOUT : POLLIN;
    tutti_ras_poll_add(ps, a->fd, ev, on_ready, a);
    live++;
  }
  tutti_ras_poll_wake(ps, g->deadline);
  return live == 0;
}

void tutti_ras_gather_finish(struct tutti_ras_gather* g, struct tutti_ras_buf* out) {
  for (int i = 0; i < g->n; i++) {
    end(&g->asks[i]); /* late: its ranks count as unreachable */
  }
  pthread_mutex_lock(&tutti_ras_lock);
  tutti_ras_doc_fill_locked(g->doc, NULL);
  pthread_mutex_unlock(&tutti_ras_lock);
  tutti_ras_doc_write(g->doc, NULL, out);
  tutti_ras_gather_free(g, 0);
}

void tutti_ras_gather_free(struct tutti_ras_gather* g, int in_child) {
  if (g == NULL) {
    return;
  }
  if (in_child) { /* the parent's listener may have been mid-change: only the fds */
    for (int i = 0; g->asks != NULL && i < g->n; i++) {
      if (g->asks[i].fd >= 0) {
        close(g->asks[i].fd);
      }
    }
    return;
  }
  for (int i = 0; g->asks != NULL && i < g->n; i++) {
    end(&g->asks[i]);
  }
  free(g->asks);
  tutti_ras_doc_free(g->doc);
  free(g);
}
