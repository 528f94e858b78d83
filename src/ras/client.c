/* Where tutti-ras asks: by default a Unix socket in the user's private
 * directory (ras/dirs.c), which only processes of the job's user may open
 * and whose every client's uid is checked again (SO_PEERCRED); or, when the
 * user names one in NCCL_RAS_ADDR, a TCP address, as NCCL's RAS has it:
 * whoever reaches it may ask, unless ncclSetEncryption set a key, which the
 * client must then hold. One process per host serves it (the Unix socket's
 * lock file, or the port, decides which); the others try again each second.
 * A client's answer is the whole job's (ras/gather.c). */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ras/internal.h"
#include "util/log.h"
#include "util/param.h"
#include "util/seal.h"

static TUTTI_PARAM_STR(ras_addr, "NCCL_RAS_ADDR", NULL, "host:port",
                       "a TCP address tutti-ras may ask the job at (anyone who reaches it may, "
                       "unless ncclSetEncryption set a key); unset: a Unix socket only the "
                       "job's user can open");

#define CLIENTS 16
#define REQ_S 1.0  /* from accept to the request */
#define SEND_S 5.0 /* to send the answer */
#define PEEK_AGAIN_S 0.02

enum { FREE, REQ, SEAL, GATHER, SEND };

struct client {
  int fd, state, tcp;
  int foreign;  /* a Unix client of another uid: refused */
  double again; /* a TCP client sent part of its first bytes: looked at again then */
  double deadline;
  unsigned char req[4];
  size_t got, off;
  struct tutti_ras_gather* g;
  struct tutti_ras_buf out;
};

static struct client clients[CLIENTS];
static int listen_fd = -1, lock_fd = -1, is_tcp, warned;
static union tutti_socket_addr tcp_addr;
static int tcp_parsed; /* 1 parsed, -1 unusable */

static void finish(struct client* c) {
  tutti_seal_close(c->fd);
  tutti_ras_gather_free(c->g, 0);
  tutti_ras_buf_free(&c->out);
  c->g = NULL;
  c->fd = -1;
  __atomic_store_n(&c->state, FREE, __ATOMIC_RELEASE);
}

static void refuse(struct client* c, const char* why) {
  INFO(TUTTI_RAS, "RAS: a client was refused: %s", why);
  tutti_ras_buf_str(&c->out, "{\"tutti_ras\":1,\"refused\":");
  tutti_ras_buf_json(&c->out, why);
  tutti_ras_buf_str(&c->out, "}\n");
  c->state = SEND;
  c->off = 0;
  c->deadline = tutti_socket_now() + SEND_S;
}

static void start_gather(struct client* c) {
  pthread_mutex_lock(&tutti_ras_lock);
  c->g = tutti_ras_gather_start_locked();
  pthread_mutex_unlock(&tutti_ras_lock);
  c->state = c->g != NULL ? GATHER : FREE;
}

/* The first bytes tell a plaintext request from an encrypted client's hello
 * (only a TCP client may encrypt, and must, when a key is set). */
static void request(struct client* c) {
  if (!c->tcp) {
    const int r = tutti_ras_read(c->fd, c->req, sizeof c->req, &c->got);
    if (r < 0 || (r > 0 && memcmp(c->req, TUTTI_RAS_CLIENT_REQ, 4) != 0)) {
      c->state = FREE;                /* not a RAS client */
    } else if (r > 0 && c->foreign) { /* told why once its request is read (no reset) */
      char why[96];
      snprintf(why, sizeof why, "this job answers only its own user (uid %u)", (unsigned)geteuid());
      refuse(c, why);
    } else if (r > 0) {
      start_gather(c);
    }
    return;
  }
  const ssize_t n = recv(c->fd, c->req, sizeof c->req, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    c->state = FREE;
    return;
  }
  if (n < (ssize_t)sizeof c->req) {
    /* Peeked bytes stay readable: polling for them again would spin until
     * the rest comes. Looked at again a little later instead. */
    c->again = tutti_socket_now() + PEEK_AGAIN_S;
    return;
  }
  c->again = 0;
  const int plain = memcmp(c->req, TUTTI_RAS_CLIENT_REQ, 4) == 0;
  if (!plain && tutti_seal_enabled()) {
    tutti_seal_attach(c->fd, 0);
    c->state = SEAL;
    return;
  }
  /* What the client sent is read before an answer: a socket closed with
   * bytes unread resets the connection, and the answer with it. */
  char drain[512];
  (void)recv(c->fd, drain, plain ? sizeof c->req : sizeof drain, MSG_DONTWAIT);
  if (plain && tutti_seal_enabled()) {
    refuse(c,
           "this job encrypts its connections (ncclSetEncryption): ask with its key "
           "(tutti-ras --key-file FILE)");
  } else if (plain) {
    start_gather(c);
  } else {
    refuse(c, "this job does not encrypt its connections: ask without a key");
  }
}

static void on_ready(void* arg, short revents) {
  struct client* c = arg;
  (void)revents;
  if (c->state == REQ) {
    request(c);
  }
  if (c->state == SEAL) {
    const int r = tutti_ras_sealed(c->fd);
    if (r < 0) {
      c->state = FREE; /* the record layer's WARN names the peer and why */
    } else if (r > 0) {
      start_gather(c);
    }
  }
  if (c->state == SEND) {
    const int r = tutti_ras_write(c->fd, c->out.text, c->out.len, &c->off);
    c->state = r != 0 ? FREE : SEND;
  }
  if (c->state == FREE && c->fd >= 0) {
    finish(c);
  }
}

/* Another user's client learns nothing. */
static int same_user(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

static void on_accept(void* arg, short revents) {
  (void)arg;
  (void)revents;
  for (;;) {
    struct client* c = NULL;
    for (int i = 0; i < CLIENTS && c == NULL; i++) {
      c = clients[i].state == FREE ? &clients[i] : NULL;
    }
    /* The longest silent makes room: a client that just came and speaks
     * at once is never the one. */
    for (int i = 0; i < CLIENTS; i++) {
      const int silent = clients[i].state == REQ || clients[i].state == SEAL;
      c = c == NULL && silent                                        ? &clients[i]
          : c != NULL && silent && clients[i].deadline < c->deadline ? &clients[i]
                                                                     : c;
    }
    if (c != NULL && c->state != FREE) {
      finish(c);
    }
    if (c == NULL) {
      return; /* every slot gathers or sends: the others wait in the backlog */
    }
    const int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      return;
    }
    tutti_seal_detach(fd); /* no state of an earlier socket of that number */
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->tcp = is_tcp;
    c->deadline = tutti_socket_now() + REQ_S;
    __atomic_store_n(&c->state, REQ, __ATOMIC_RELEASE);
    c->foreign = !is_tcp && !same_user(fd);
    on_ready(c, 0);
  }
}

static void warn_once(const char* fmt, const char* what) {
  if (!warned) {
    warned = 1;
    WARN(fmt, what);
  }
}

static int take_unix(void) {
  char dir[200], path[sizeof dir + 16], why[512];
  if (lock_fd < 0) {
    if (tutti_ras_private_dir(1, dir, sizeof dir, why, sizeof why) != 0) {
      warn_once("RAS: no socket for tutti-ras: %s", why);
      return -1;
    }
    snprintf(path, sizeof path, "%s/ras.lock", dir);
    lock_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock_fd < 0) {
      warn_once("RAS: no socket for tutti-ras: %s", strerror(errno));
      return -1;
    }
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return -1; /* another process of this user serves this host's clients */
  }
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (tutti_ras_private_dir(0, dir, sizeof dir, why, sizeof why) != 0 ||
      snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", dir, TUTTI_RAS_SOCKET) >=
          (int)sizeof a.sun_path) {
    flock(lock_fd, LOCK_UN);
    warn_once("RAS: no socket for tutti-ras: %s",
              why[0] != '\0' ? why : "its path is longer than a Unix socket's may be");
    return -1;
  }
  (void)unlink(a.sun_path); /* a socket left by the process that held the lock before */
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  /* 0600 besides the 0700 directory: either alone keeps other users out. */
  if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0 || chmod(a.sun_path, 0600) != 0 ||
      listen(s, 64) != 0) {
    snprintf(why, sizeof why, "%s: %s", a.sun_path, strerror(errno));
    if (s >= 0) {
      close(s);
    }
    flock(lock_fd, LOCK_UN);
    warn_once("RAS: no socket for tutti-ras: %s", why);
    return -1;
  }
  return s;
}

static int take_tcp(const char* where) {
  if (tcp_parsed == 0) { /* parsed once: a wrong address is told once, not at every retry */
    tcp_parsed = tutti_socket_parse(where, AF_UNSPEC, &tcp_addr) == ncclSuccess ? 1 : -1;
  }
  if (tcp_parsed < 0) {
    return -1;
  }
  union tutti_socket_addr a = tcp_addr;
  const int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (s >= 0) {
    (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  if (s < 0 || bind(s, &a.sa, tutti_socket_addr_len(&a)) != 0 || listen(s, 64) != 0) {
    if (s >= 0) {
      close(s);
    }
    return -1; /* taken: another process of this host serves it */
  }
  return s;
}

void tutti_ras_client_open(void) {
  if (listen_fd >= 0) {
    return;
  }
  const char* where = tutti_param_ras_addr();
  is_tcp = where != NULL && *where != '\0';
  listen_fd = is_tcp ? take_tcp(where) : take_unix();
  if (listen_fd >= 0) {
    INFO(TUTTI_RAS, "RAS: this process answers tutti-ras at %s",
         is_tcp ? where : "the user's private socket");
  }
}

void tutti_ras_client_arm(struct tutti_ras_poll* ps, double now) {
  if (listen_fd >= 0) {
    tutti_ras_poll_add(ps, listen_fd, POLLIN, on_accept, NULL);
  }
  for (int i = 0; i < CLIENTS; i++) {
    struct client* c = &clients[i];
    if (c->state == GATHER && tutti_ras_gather_arm(c->g, ps, now)) {
      tutti_ras_gather_finish(c->g, &c->out);
      c->g = NULL;
      c->state = c->out.failed || c->out.text == NULL ? FREE : SEND;
      c->off = 0;
      c->deadline = now + SEND_S;
      on_ready(c, 0);
    }
    if (c->state == FREE) {
      continue;
    }
    if (c->state != GATHER && now >= c->deadline) {
      finish(c);
      continue;
    }
    if (c->state == REQ && c->again != 0 && now >= c->again) {
      on_ready(c, 0);
      if (c->state == FREE) {
        continue;
      }
    }
    if (c->state == REQ && c->again != 0) {
      tutti_ras_poll_wake(ps, c->again);
    } else if (c->state != GATHER) {
      tutti_ras_poll_add(ps, c->fd, c->state == SEND ? POLLOUT : POLLIN, on_ready, c);
      tutti_ras_poll_wake(ps, c->deadline);
    }
  }
}

void tutti_ras_client_close_all(int in_child) {
  for (int i = 0; i < CLIENTS; i++) {
    struct client* c = &clients[i];
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == FREE) {
      continue;
    }
    if (in_child) { /* only the fds: the parent's listener may have been mid-change */
      close(c->fd);
      tutti_ras_gather_free(c->g, 1);
      c->state = FREE;
    } else {
      finish(c);
    }
  }
  if (listen_fd >= 0) {
    close(listen_fd);
  }
  if (lock_fd >= 0) {
    close(lock_fd); /* a child's copy: the lock stays the parent's */
  }
  listen_fd = lock_fd = -1;
  tcp_parsed = 0;
}
