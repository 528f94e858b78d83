/* Answering the other processes of this one's communicators on the peer
 * port (ras/internal.h has the exchange): each connection is a small state
 * machine the listener's poll loop drives, so a slow or silent one holds
 * only its own slot until its deadline, never another's answer. When every
 * slot is taken the oldest connection makes room. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ras/internal.h"
#include "util/log.h"
#include "util/seal.h"
#include "util/sha256.h"

#define CONNS 64
#define ACCEPTS_PER_WAKE 64

enum { FREE, SEAL, REQ, CHAL, MAC, LINES };

struct conn {
  int fd, state;
  double deadline;
  unsigned char in[TUTTI_RAS_REQ];
  size_t got, off;
  unsigned char chal[TUTTI_RAS_CHAL];
  uint64_t hash;
  unsigned char secret[16], addr[TUTTI_SOCKET_ADDR_WIRE];
  unsigned char asker[TUTTI_RAS_NONCE], answerer[TUTTI_RAS_NONCE];
  struct tutti_ras_buf out;
};

static struct conn conns[CONNS];

static void finish(struct conn* c) {
  tutti_seal_close(c->fd);
  tutti_ras_buf_free(&c->out);
  tutti_sha256_wipe(c->secret, sizeof c->secret);
  c->fd = -1;
  __atomic_store_n(&c->state, FREE, __ATOMIC_RELEASE);
}

/* The request names a communicator this process holds: its secret and the
 * address its peers know this process by. 0, or -1 when none. */
static int lookup(struct conn* c) {
  int found = 0;
  pthread_mutex_lock(&tutti_ras_lock);
  for (const struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL && !found; rc = rc->next) {
    if (rc->hash == c->hash) {
      memcpy(c->secret, rc->secret, sizeof c->secret);
      memcpy(c->addr, rc->peers[rc->rank].ras, sizeof c->addr);
      found = 1;
    }
  }
  pthread_mutex_unlock(&tutti_ras_lock);
  return found ? 0 : -1;
}

/* Runs c until it must wait; returns the events it waits for (0: ended). */
static short run(struct conn* c) {
  for (;;) {
    int r;
    switch (c->state) {
      case SEAL:
        if ((r = tutti_ras_sealed(c->fd)) <= 0) {
          return r == 0 ? POLLIN : 0;
        }
        c->state = REQ;
        c->got = 0;
        break;
      case REQ:
        if ((r = tutti_ras_read(c->fd, c->in, TUTTI_RAS_REQ, &c->got)) <= 0) {
          return r == 0 ? POLLIN : 0;
        }
        c->hash = tutti_socket_get64(c->in + 4);
        memcpy(c->asker, c->in + 12, TUTTI_RAS_NONCE);
        if (memcmp(c->in, TUTTI_RAS_MAGIC, 4) != 0 || lookup(c) != 0 ||
            tutti_ras_nonce(c->answerer) != 0) {
          return 0; /* not a peer of this process's: it learns nothing */
        }
        memcpy(c->chal, TUTTI_RAS_MAGIC, 4);
        memcpy(c->chal + 4, c->answerer, TUTTI_RAS_NONCE);
        tutti_ras_mac(c->secret, TUTTI_RAS_ANSWERER, c->hash, c->addr, c->asker, c->answerer,
                      c->chal + 4 + TUTTI_RAS_NONCE);
        c->state = CHAL;
        c->off = 0;
        break;
      case CHAL:
        if ((r = tutti_ras_write(c->fd, c->chal, sizeof c->chal, &c->off)) <= 0) {
          return r == 0 ? POLLOUT : 0;
        }
        c->state = MAC;
        c->got = 0;
        break;
      case MAC: {
        if ((r = tutti_ras_read(c->fd, c->in, TUTTI_RAS_MAC_LEN, &c->got)) <= 0) {
          return r == 0 ? POLLIN : 0;
        }
        unsigned char want[TUTTI_RAS_MAC_LEN];
        tutti_ras_mac(c->secret, TUTTI_RAS_ASKER, c->hash, c->addr, c->asker, c->answerer, want);
        const int bad = tutti_sha256_differ(want, c->in, sizeof want);
        tutti_sha256_wipe(want, sizeof want);
        tutti_sha256_wipe(c->secret, sizeof c->secret);
        if (bad) {
          INFO(TUTTI_RAS,
               "RAS: a process asking for communicator %016llx did not prove its secret: "
               "it gets no answer",
               (unsigned long long)c->hash);
          return 0;
        }
        pthread_mutex_lock(&tutti_ras_lock);
        tutti_ras_local_lines(&c->out, NULL);
        pthread_mutex_unlock(&tutti_ras_lock);
        if (c->out.failed || c->out.text == NULL) {
          return 0;
        }
        c->state = LINES;
        c->off = 0;
        break;
      }
      case LINES:
        if ((r = tutti_ras_write(c->fd, c->out.text, c->out.len, &c->off)) <= 0) {
          return r == 0 ? POLLOUT : 0;
        }
        return 0;
      default:
        return 0;
    }
  }
}

static void on_ready(void* arg, short revents) {
  struct conn* c = arg;
  (void)revents;
  if (c->state != FREE && run(c) == 0) {
    finish(c);
  }
}

void tutti_ras_peer_accept(int listen_fd) {
  for (int k = 0; k < ACCEPTS_PER_WAKE; k++) {
    const int fd = tutti_socket_try_accept(listen_fd, NULL);
    if (fd < 0) {
      return;
    }
    struct conn* slot = NULL;
    for (int i = 0; i < CONNS && slot == NULL; i++) {
      slot = conns[i].state == FREE ? &conns[i] : NULL;
    }
    if (slot == NULL) { /* all taken: the connection closest to its deadline goes */
      slot = &conns[0];
      for (int i = 1; i < CONNS; i++) {
        slot = conns[i].deadline < slot->deadline ? &conns[i] : slot;
      }
      finish(slot);
    }
    memset(slot, 0, sizeof *slot);
    slot->fd = fd;
    slot->deadline = tutti_socket_now() + TUTTI_RAS_PEER_S;
    __atomic_store_n(&slot->state, SEAL, __ATOMIC_RELEASE);
    on_ready(slot, 0);
  }
}

void tutti_ras_peer_arm(struct tutti_ras_poll* ps, double now) {
  for (int i = 0; i < CONNS; i++) {
    struct conn* c = &conns[i];
    if (c->state == FREE) {
      continue;
    }
    if (now >= c->deadline) {
      finish(c);
      continue;
    }
    const short ev = c->state == CHAL || c->state == LINES ? POLLOUT : POLLIN;
    tutti_ras_poll_add(ps, c->fd, ev, on_ready, c);
    tutti_ras_poll_wake(ps, c->deadline);
  }
}

void tutti_ras_peer_close_all(int in_child) {
  for (int i = 0; i < CONNS; i++) {
    struct conn* c = &conns[i];
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == FREE) {
      continue;
    }
    if (in_child) { /* the parent's listener may have been mid-change: only the fd */
      close(c->fd);
      c->fd = -1;
      c->state = FREE;
    } else {
      finish(c);
    }
  }
}
