/* The whole job's answer: this process's ranks, the other processes' (asked
 * on their peer ports, all at once, for at most TUTTI_RAS_DEADLINE_S), and
 * for the ranks that did not answer what this process knows: dead or
 * unreachable. Lines travel between processes; the document is made once,
 * by the process the client asked. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ras/internal.h"

#define RANK_JSON_MAX (32 * 1024)
#define MAX_TARGETS 256

void tutti_ras_buf_add(struct tutti_ras_buf* b, const char* s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) {
      cap *= 2;
    }
    char* t = realloc(b->text, cap);
    if (t == NULL) {
      return;
    }
    b->text = t;
    b->cap = cap;
  }
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->text[b->len] = '\0';
}

static void add_str(struct tutti_ras_buf* b, const char* s) {
  tutti_ras_buf_add(b, s, strlen(s));
}

void tutti_ras_local_lines(struct tutti_ras_buf* b) {
  char* json = malloc(RANK_JSON_MAX);
  for (struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL && json != NULL; rc = rc->next) {
    char head[96];
    snprintf(head, sizeof head, "%016llx %d %s ", (unsigned long long)rc->hash, rc->nranks,
             rc->made);
    add_str(b, head);
    const size_t n = tutti_ras_rank_json(rc, json, RANK_JSON_MAX);
    tutti_ras_buf_add(b, json, n);
    add_str(b, "\n");
  }
  free(json);
}

/* One rank's line, split in place. */
struct entry {
  unsigned long long hash;
  int size, rank;
  char made[16];
  const char* json;
  size_t json_len;
};

static int parse_line(char* line, struct entry* e) {
  int at = 0;
  if (sscanf(line, "%llx %d %15s %n", &e->hash, &e->size, e->made, &at) != 3 || at == 0 ||
      e->size <= 0 || sscanf(line + at, "{\"rank\":%d", &e->rank) != 1 || e->rank < 0 ||
      e->rank >= e->size) {
    return 0;
  }
  e->json = line + at;
  e->json_len = strlen(line + at);
  return 1;
}

/* Every communicator of the lines, in the order first seen, each rank
 * once: its own line, else this process's view of it. */
void tutti_ras_document(const char* lines, const char* reason, struct tutti_ras_buf* out) {
  char* copy = strdup(lines != NULL ? lines : "");
  size_t max = 1;
  for (const char* p = copy; p != NULL && *p != '\0'; p++) {
    max += *p == '\n';
  }
  struct entry* es = calloc(max, sizeof *es);
  int n = 0;
  for (char *save = NULL, *l = copy != NULL ? strtok_r(copy, "\n", &save) : NULL;
       l != NULL && es != NULL; l = strtok_r(NULL, "\n", &save)) {
    n += parse_line(l, &es[n]);
  }
  char head[256];
  snprintf(head, sizeof head, "{\"tutti_ras\":1,\"time_ns\":%llu,\"from_pid\":%d,\"reason\":",
           (unsigned long long)tutti_ras_now_ns(), (int)getpid());
  add_str(out, head);
  add_str(out, reason != NULL ? "\"" : "null");
  if (reason != NULL) {
    for (const char* c = reason; *c != '\0'; c++) {
      /* Quotes as apostrophes, control characters as spaces: still one line. */
      tutti_ras_buf_add(out, *c == '"' || *c == '\\' ? "'" : (unsigned char)*c < 0x20 ? " " : c, 1);
    }
    add_str(out, "\"");
  }
  add_str(out, ",\"communicators\":[");
  int ncomms = 0;
  for (int i = 0; i < n && es != NULL; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) {
      seen = es[j].hash == es[i].hash;
    }
    if (seen) {
      continue;
    }
    const struct tutti_ras_comm* local = NULL;
    for (struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL && local == NULL; rc = rc->next) {
      local = rc->hash == es[i].hash ? rc : NULL;
    }
    snprintf(head, sizeof head, "%s{\"hash\":\"%016llx\",\"size\":%d,\"made\":\"%s\",\"ranks\":[",
             ncomms++ ? "," : "", es[i].hash, es[i].size, es[i].made);
    add_str(out, head);
    for (int r = 0; r < es[i].size; r++) {
      const struct entry* e = NULL;
      for (int j = i; j < n && e == NULL; j++) {
        e = es[j].hash == es[i].hash && es[j].rank == r ? &es[j] : NULL;
      }
      add_str(out, r ? "," : "");
      if (e != NULL) {
        tutti_ras_buf_add(out, e->json, e->json_len);
      } else if (local != NULL && r < local->nranks) {
        const struct tutti_peer_info* pi = &local->peers[r];
        snprintf(head, sizeof head,
                 "{\"rank\":%d,\"host\":\"%s\",\"pid\":%d,\"gpu\":%d,\"state\":\"%s\"}", r,
                 pi->hostname, (int)pi->pid, pi->cuda_dev, tutti_ras_peer_state(local, r));
        add_str(out, head);
      } else {
        snprintf(head, sizeof head, "{\"rank\":%d,\"state\":\"unreachable\"}", r);
        add_str(out, head);
      }
    }
    add_str(out, "]}");
  }
  add_str(out, "]}\n");
  free(es);
  free(copy);
}

int tutti_ras_send(int fd, const char* buf, size_t len, double deadline) {
  size_t at = 0;
  while (at < len) {
    const ssize_t k = send(fd, buf + at, len - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      at += (size_t)k;
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return -1;
    }
    const double left = deadline - tutti_socket_now();
    struct pollfd p = {fd, POLLOUT, 0};
    if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) < 0) {
      return -1;
    }
  }
  return 0;
}

void tutti_ras_serve_peer(int listen_fd) {
  const int fd = tutti_socket_try_accept(listen_fd, NULL);
  if (fd < 0) {
    return;
  }
  const double deadline = tutti_socket_now() + TUTTI_RAS_DEADLINE_S / 2;
  unsigned char req[TUTTI_RAS_PEER_REQ];
  size_t got = 0;
  while (got < sizeof req && tutti_socket_now() < deadline) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 50) < 0) {
      break;
    }
    const ssize_t k = recv(fd, req + got, sizeof req - got, MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      break;
    }
    got += k > 0 ? (size_t)k : 0;
  }
  struct tutti_ras_buf b = {0};
  pthread_mutex_lock(&tutti_ras_lock);
  int known = 0;
  if (got == sizeof req && memcmp(req, TUTTI_RAS_MAGIC, 4) == 0) {
    const uint64_t hash = tutti_socket_get64(req + 4);
    for (struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL && !known; rc = rc->next) {
      known = rc->hash == hash && memcmp(rc->secret, req + 12, 16) == 0;
    }
  }
  if (known) { /* a stranger learns nothing */
    tutti_ras_local_lines(&b);
  }
  pthread_mutex_unlock(&tutti_ras_lock);
  if (b.text != NULL) {
    (void)tutti_ras_send(fd, b.text, b.len, deadline);
  }
  free(b.text);
  close(fd);
}

/* One other process to ask, and what it answered so far. */
struct target {
  union tutti_socket_addr addr;
  unsigned char packed[TUTTI_SOCKET_ADDR_WIRE];
  unsigned char req[TUTTI_RAS_PEER_REQ];
  int fd;
  int sent;
  struct tutti_ras_buf got;
};

/* The other processes of this process's communicators, each once. */
static int targets(struct target* t, int max) {
  int n = 0;
  unsigned char none[TUTTI_SOCKET_ADDR_WIRE] = {0};
  for (struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL; rc = rc->next) {
    const unsigned char* self = rc->peers[rc->rank].ras;
    for (int p = 0; p < rc->nranks && n < max; p++) {
      const unsigned char* a = rc->peers[p].ras;
      int dup = memcmp(a, none, sizeof none) == 0 || memcmp(a, self, sizeof none) == 0;
      for (int i = 0; i < n && !dup; i++) {
        dup = memcmp(t[i].packed, a, sizeof none) == 0;
      }
      if (dup || tutti_socket_addr_unpack(a, &t[n].addr) != 0) {
        continue;
      }
      memcpy(t[n].packed, a, sizeof none);
      memcpy(t[n].req, TUTTI_RAS_MAGIC, 4);
      tutti_socket_put64(t[n].req + 4, rc->hash);
      memcpy(t[n].req + 12, rc->secret, 16);
      t[n].fd = -1;
      t[n].sent = 0;
      memset(&t[n].got, 0, sizeof t[n].got);
      n++;
    }
  }
  return n;
}

/* Asks every target at once until each answered whole (it closes) or the
 * deadline passes, serving peers that ask this process meanwhile. */
static void ask_all(struct target* t, int n, int peer_fd, double deadline) {
  for (int i = 0; i < n; i++) {
    if (tutti_socket_connect_start(&t[i].addr, &t[i].fd) != 0) {
      t[i].fd = -1;
    }
  }
  struct pollfd fds[MAX_TARGETS + 1];
  for (;;) {
    int live = 0;
    for (int i = 0; i < n; i++) {
      fds[i].fd = t[i].fd;
      fds[i].events = t[i].sent ? POLLIN : POLLOUT;
      fds[i].revents = 0;
      live += t[i].fd >= 0;
    }
    fds[n] = (struct pollfd){peer_fd, POLLIN, 0};
    const double left = deadline - tutti_socket_now();
    if (live == 0 || left <= 0) {
      break;
    }
    if (poll(fds, (nfds_t)n + 1, (int)(left * 1000) + 1) <= 0) {
      continue;
    }
    if (fds[n].revents & POLLIN) {
      tutti_ras_serve_peer(peer_fd);
    }
    for (int i = 0; i < n; i++) {
      struct target* x = &t[i];
      if (x->fd < 0 || fds[i].revents == 0) {
        continue;
      }
      if (!x->sent) {
        const int st = tutti_socket_connect_poll(x->fd);
        if (st == EINPROGRESS) {
          continue;
        }
        if (st != 0 || tutti_ras_send(x->fd, (const char*)x->req, sizeof x->req, deadline) != 0) {
          close(x->fd);
          x->fd = -1;
          continue;
        }
        x->sent = 1;
        continue;
      }
      char chunk[8192];
      const ssize_t k = recv(x->fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (k > 0) {
        tutti_ras_buf_add(&x->got, chunk, (size_t)k);
      } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        close(x->fd);
        x->fd = -2; /* answered whole */
      }
    }
  }
}

void tutti_ras_answer_client(int fd, int peer_fd) {
  const double deadline = tutti_socket_now() + TUTTI_RAS_DEADLINE_S;
  struct target* t = calloc(MAX_TARGETS, sizeof *t);
  struct tutti_ras_buf lines = {0}, doc = {0};
  pthread_mutex_lock(&tutti_ras_lock);
  tutti_ras_local_lines(&lines);
  const int n = t != NULL ? targets(t, MAX_TARGETS) : 0;
  pthread_mutex_unlock(&tutti_ras_lock);
  ask_all(t, n, peer_fd, deadline);
  for (int i = 0; i < n; i++) {
    if (t[i].fd >= 0) {
      close(t[i].fd); /* late: its ranks count as unreachable */
    } else if (t[i].fd == -2 && t[i].got.text != NULL) {
      tutti_ras_buf_add(&lines, t[i].got.text, t[i].got.len);
    }
    free(t[i].got.text);
  }
  free(t);
  pthread_mutex_lock(&tutti_ras_lock);
  tutti_ras_document(lines.text, NULL, &doc);
  pthread_mutex_unlock(&tutti_ras_lock);
  if (doc.text != NULL) {
    (void)tutti_ras_send(fd, doc.text, doc.len, tutti_socket_now() + TUTTI_RAS_DEADLINE_S);
  }
  free(lines.text);
  free(doc.text);
}
