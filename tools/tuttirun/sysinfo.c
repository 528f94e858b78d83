/* What tuttirun asks of the host, the way torchrun's Python asks it: the
 * fully qualified name (socket.getfqdn), the GPUs CUDA would show
 * (torch.cuda.device_count, without CUDA), the CPUs (os.cpu_count), whether
 * a host name is this machine, and uuid4 / mkdtemp look-alikes. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tuttirun.h"

void tr_fqdn(char* out, size_t cap) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  snprintf(out, cap, "%s", host);
  /* Python: gethostbyaddr(hostname), then the first of its name and aliases
   * with a dot in it, else its name. */
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL) {
    return;
  }
  const void* addr = res->ai_family == AF_INET6
                         ? (const void*)&((struct sockaddr_in6*)res->ai_addr)->sin6_addr
                         : (const void*)&((struct sockaddr_in*)res->ai_addr)->sin_addr;
  socklen_t len = res->ai_family == AF_INET6 ? 16 : 4;
  struct hostent he, *r = NULL;
  char buf[8192];
  int herr;
  if (gethostbyaddr_r(addr, len, res->ai_family, &he, buf, sizeof buf, &r, &herr) == 0 &&
      r != NULL) {
    const char* pick = r->h_name;
    if (strchr(pick, '.') == NULL) {
      for (char** a = r->h_aliases; a != NULL && *a != NULL; a++) {
        if (strchr(*a, '.') != NULL) {
          pick = *a;
          break;
        }
      }
    }
    snprintf(out, cap, "%s", pick);
  }
  freeaddrinfo(res);
}

int tr_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* The GPUs' UUIDs as the driver lists them ("GPU UUID: GPU-..."). */
static int driver_gpus(char uuids[][64], int max) {
  int n = 0;
  DIR* d = opendir("/proc/driver/nvidia/gpus");
  if (d != NULL) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL && n < max) {
      if (e->d_name[0] == '.') {
        continue;
      }
      char path[512], line[256];
      snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", e->d_name);
      uuids[n][0] = '\0';
      FILE* f = fopen(path, "r");
      while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        char* u = strstr(line, "GPU UUID:");
        if (u != NULL) {
          u += 9;
          while (*u == ' ' || *u == '\t') {
            u++;
          }
          u[strcspn(u, " \t\n")] = '\0';
          snprintf(uuids[n], 64, "%s", u);
        }
      }
      if (f != NULL) {
        fclose(f);
      }
      n++;
    }
    closedir(d);
  }
  if (n == 0) { /* no /proc entries (containers): the device nodes */
    for (int i = 0; i < max; i++) {
      char path[64];
      snprintf(path, sizeof path, "/dev/nvidia%d", i);
      if (access(path, F_OK) == 0) {
        uuids[n++][0] = '\0';
      }
    }
  }
  return n;
}

int tr_gpu_count(void) {
  static char uuids[64][64];
  int n = driver_gpus(uuids, 64);
  const char* cvd = getenv("CUDA_VISIBLE_DEVICES");
  if (cvd == NULL || n == 0) {
    return n;
  }
  /* CUDA's reading: devices by index or UUID (prefix), up to the first entry
   * that names none or repeats one. */
  int used[64] = {0}, count = 0;
  char list[4096];
  snprintf(list, sizeof list, "%s", cvd);
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    while (isspace((unsigned char)*tok)) {
      tok++;
    }
    int idx = -1;
    if (isdigit((unsigned char)tok[0])) {
      char* end;
      long v = strtol(tok, &end, 10);
      idx = (*end == '\0' || isspace((unsigned char)*end)) && v < n ? (int)v : -1;
    } else if (strncmp(tok, "GPU-", 4) == 0 || strncmp(tok, "MIG-", 4) == 0) {
      for (int i = 0; i < n && idx < 0; i++) {
        if (uuids[i][0] != '\0' && strncmp(uuids[i], tok, strlen(tok)) == 0) {
          idx = i;
        }
      }
      if (idx < 0 && (strncmp(tok, "MIG-", 4) == 0 || uuids[0][0] == '\0')) {
        /* A MIG instance, or no UUIDs to check against (device nodes only). */
        idx = count < n ? count : -1;
      }
    }
    if (idx < 0 || used[idx]) {
      break;
    }
    used[idx] = 1;
    count++;
  }
  return count;
}

/* Python's _matches_machine_hostname: loopback, this host's names, or an
 * address of one of its interfaces. */
int tr_is_local_host(const char* host) {
  if (strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0) {
    return 1;
  }
  char name[256] = "", fq[256];
  gethostname(name, sizeof name - 1);
  tr_fqdn(fq, sizeof fq);
  if (strcmp(host, name) == 0 || strcmp(host, fq) == 0) {
    return 1;
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  struct ifaddrs* ifs = NULL;
  int match = 0;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || getifaddrs(&ifs) != 0) {
    freeaddrinfo(res);
    return 0;
  }
  for (struct addrinfo* a = res; a != NULL && !match; a = a->ai_next) {
    for (struct ifaddrs* i = ifs; i != NULL && !match; i = i->ifa_next) {
      if (i->ifa_addr == NULL || i->ifa_addr->sa_family != a->ai_family) {
        continue;
      }
      match = a->ai_family == AF_INET
                  ? memcmp(&((struct sockaddr_in*)a->ai_addr)->sin_addr,
                           &((struct sockaddr_in*)i->ifa_addr)->sin_addr, 4) == 0
                  : memcmp(&((struct sockaddr_in6*)a->ai_addr)->sin6_addr,
                           &((struct sockaddr_in6*)i->ifa_addr)->sin6_addr, 16) == 0;
    }
  }
  freeifaddrs(ifs);
  freeaddrinfo(res);
  return match;
}

void tr_random_bytes(void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = getrandom((char*)p + got, n - got, 0);
    if (k < 0 && errno != EINTR) {
      tr_say("getrandom failed: %s", strerror(errno));
      exit(1);
    }
    got += k > 0 ? (size_t)k : 0;
  }
}

void tr_uuid4(char* out, size_t cap) {
  unsigned char b[16];
  tr_random_bytes(b, sizeof b);
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, cap, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

/* tempfile.mkdtemp(prefix=..., dir=...): PREFIX + 8 of [a-z0-9_]. */
int tr_mkdtemp(const char* dir, const char* prefix, char* out, size_t cap) {
  static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned char r[8];
    char suffix[9];
    tr_random_bytes(r, sizeof r);
    for (int i = 0; i < 8; i++) {
      suffix[i] = chars[r[i] % (sizeof chars - 1)];
    }
    suffix[8] = '\0';
    snprintf(out, cap, "%s/%s%s", dir, prefix, suffix);
    if (mkdir(out, 0700) == 0) {
      return 0;
    }
    if (errno != EEXIST) {
      return -1;
    }
  }
  return -1;
}

int tr_mkdir_p(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s", dir);
  for (char* p = path + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char c = *p;
      *p = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return -1;
      }
      *p = c;
      if (c == '\0') {
        return 0;
      }
    }
  }
}
