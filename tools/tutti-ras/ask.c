/* Asking a running job (docs/ras.md): by default the Unix socket in the
 * user's private directory, where only the job's user's processes answer;
 * or a TCP address (-a, NCCL_RAS_ADDR), encrypted with the job's
 * ncclSetEncryption key when one is given (--key-file). */
#define _GNU_SOURCE 1
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ras.h"
#include "ras/ras.h"
#include "util/check.h"
#include "util/seal.h"
#include "util/sha256.h"

#define ANSWER_MAX (256u << 20) /* more is not a RAS answer */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static char* slurp(int fd, double timeout_s) {
  size_t cap = 65536, n = 0;
  char* buf = malloc(cap);
  const double end = now_s() + timeout_s;
  while (buf != NULL && n < ANSWER_MAX) {
    struct pollfd p = {fd, POLLIN, 0};
    const double left = end - now_s();
    if (!tutti_seal_has_pending(fd) && (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)) {
      break;
    }
    if (n + 4096 > cap) {
      char* b = realloc(buf, cap *= 2);
      if (b == NULL) {
        break;
      }
      buf = b;
    }
    const ssize_t k = tutti_seal_recv(fd, buf + n, cap - n - 1);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      continue;
    }
    if (k <= 0) {
      if (k < 0 && tutti_seal_why(fd) != NULL) {
        fprintf(stderr, "tutti-ras: %s\n", tutti_seal_why(fd));
        free(buf);
        return NULL;
      }
      break;
    }
    n += (size_t)k;
  }
  if (buf != NULL) {
    buf[n] = '\0';
  }
  return buf;
}

/* The key of ncclSetEncryption, from the first line of `file`. */
static int set_key(const char* file) {
  FILE* f = fopen(file, "r");
  char key[4096];
  if (f == NULL) {
    fprintf(stderr, "tutti-ras: %s: %s\n", file, strerror(errno));
    return -1;
  }
  const int got = fgets(key, sizeof key, f) != NULL;
  fclose(f);
  key[strcspn(key, "\r\n")] = '\0';
  if (!got || strlen(key) < 32) {
    fprintf(stderr, "tutti-ras: %s does not hold a key of 32 bytes or more on its first line\n",
            file);
    tutti_sha256_wipe(key, sizeof key);
    return -1;
  }
  const ncclResult_t r = tutti_seal_set_key(key);
  tutti_sha256_wipe(key, sizeof key);
  if (r != ncclSuccess) {
    fprintf(stderr, "tutti-ras: cannot encrypt: %s\n", tutti_last_error());
    return -1;
  }
  return 0;
}

static int connect_tcp(const char* addr) {
  char host[256];
  snprintf(host, sizeof host, "%s", addr);
  char* colon = strrchr(host, ':');
  if (colon == NULL) {
    fprintf(stderr, "tutti-ras: %s is neither HOST:PORT nor a socket's path\n", addr);
    return -1;
  }
  *colon = '\0';
  char* h = host;
  if (h[0] == '[' && colon > host && colon[-1] == ']') {
    h++;
    colon[-1] = '\0';
  }
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = getaddrinfo(h, colon + 1, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "tutti-ras: %s: %s\n", addr, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo* a = ai; a != NULL && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    fprintf(stderr,
            "tutti-ras: nothing answers at %s: is a job running there, with NCCL_RAS_ENABLE=1 "
            "and this NCCL_RAS_ADDR?\n",
            addr);
  }
  return fd;
}

static int connect_unix(const char* path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (snprintf(a.sun_path, sizeof a.sun_path, "%s", path) >= (int)sizeof a.sun_path) {
    fprintf(stderr, "tutti-ras: %s is longer than a Unix socket's path may be\n", path);
    return -1;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    fprintf(stderr,
            "tutti-ras: nothing answers at %s (%s): is a job of this user running on this "
            "host, with NCCL_RAS_ENABLE=1? (a job given NCCL_RAS_ADDR answers there instead: "
            "tutti-ras -a HOST:PORT)\n",
            path, strerror(errno));
    close(fd);
    return -1;
  }
  /* Only the user's own processes may answer in the job's name. */
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (fd >= 0 &&
      (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid())) {
    fprintf(stderr, "tutti-ras: %s is served by uid %u, not by this user (uid %u): refused\n", path,
            (unsigned)cred.uid, (unsigned)geteuid());
    close(fd);
    return -1;
  }
  return fd;
}

char* ras_ask(const char* addr, const char* key_file, char* where, size_t where_len) {
  int fd, is_unix = 1;
  if (addr == NULL || *addr == '\0') {
    char dir[200], why[512];
    if (tutti_ras_private_dir(0, dir, sizeof dir, why, sizeof why) != 0) {
      fprintf(stderr,
              "tutti-ras: nothing answers: %s (is a job of this user running on this host, "
              "with NCCL_RAS_ENABLE=1?)\n",
              why);
      return NULL;
    }
    snprintf(where, where_len, "%s/%s", dir, TUTTI_RAS_SOCKET);
    fd = connect_unix(where);
  } else {
    snprintf(where, where_len, "%s", addr);
    is_unix = strchr(addr, '/') != NULL;
    fd = is_unix ? connect_unix(addr) : connect_tcp(addr);
  }
  if (fd < 0) {
    return NULL;
  }
  /* A Unix socket is the user's alone: it carries no encryption. */
  if (key_file != NULL && !is_unix) {
    if (set_key(key_file) != 0) {
      close(fd);
      return NULL;
    }
    tutti_seal_attach(fd, 1); /* the hello says who we are: no request to send */
  } else if (send(fd, TUTTI_RAS_CLIENT_REQ, 4, MSG_NOSIGNAL) != 4) {
    fprintf(stderr, "tutti-ras: %s: %s\n", where, strerror(errno));
    close(fd);
    return NULL;
  }
  char* text = slurp(fd, 10.0);
  tutti_seal_close(fd);
  return text;
}
