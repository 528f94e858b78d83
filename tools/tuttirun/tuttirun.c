/* tuttirun's command line (torchrun's flags): turns it into a job (ranks,
 * rendezvous address, job secret) and hands that to the supervisor. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tuttirun.h"

#define TR_DEFAULT_PORT 29500 /* torchrun's */

static const char usage_text[] =
    "usage: tuttirun [options] [--] program [args...]\n"
    "\n"
    "Starts `program` once per local rank with RANK, LOCAL_RANK, WORLD_SIZE,\n"
    "LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, NCCL_COMM_ID and\n"
    "TUTTI_JOB_SECRET set, and prints each rank's output as \"[rank<r>]: line\".\n"
    "When a rank fails, the others are stopped and its status is tuttirun's.\n"
    "\n"
    "  -n N, --nproc_per_node N  ranks on this host (default 1); -n means one host\n"
    "  --nnodes M                hosts in the job (default 1)\n"
    "  --node_rank K             this host's index, 0 to M-1 (default 0)\n"
    "  --master_addr A           host of rank 0 (default 127.0.0.1)\n"
    "  --master_port P           port there (default: a free one on one host,\n"
    "                            29500 on several); NCCL_COMM_ID is A:P+1\n"
    "  --standalone              one host, free port (as torchrun)\n"
    "  --job_secret S            job secret; all hosts must agree (or export\n"
    "                            TUTTI_JOB_SECRET alike on every host)\n"
    "  --rdzv_id ID              several hosts: derive the job secret from ID\n"
    "  --log_dir DIR             also write DIR/rank_<r>.stdout and .stderr\n"
    "  --no_prefix               print the ranks' lines without \"[rank<r>]: \"\n"
    "  --grace_period S          seconds from SIGTERM to SIGKILL (default 5)\n"
    "  -h, --help                this text\n"
    "\n"
    "Long flags also take '-' for '_' (--nproc-per-node) and --flag=value.\n"
    "Exit status: 0; the failed rank's exit code, or 128+signal; 130 / 143\n"
    "after SIGINT / SIGTERM; 127 program not found; 2 bad usage.\n";

enum opt_id {
  O_NPROC,
  O_NNODES,
  O_NODE_RANK,
  O_ADDR,
  O_PORT,
  O_STANDALONE,
  O_SECRET,
  O_RDZV_ID,
  O_LOG_DIR,
  O_NO_PREFIX,
  O_GRACE,
  O_HELP
};

static const struct {
  const char* name;
  enum opt_id id;
  int has_arg;
} options[] = {
    {"nproc_per_node", O_NPROC, 1}, {"nnodes", O_NNODES, 1},      {"node_rank", O_NODE_RANK, 1},
    {"master_addr", O_ADDR, 1},     {"master_port", O_PORT, 1},   {"standalone", O_STANDALONE, 0},
    {"job_secret", O_SECRET, 1},    {"rdzv_id", O_RDZV_ID, 1},    {"log_dir", O_LOG_DIR, 1},
    {"no_prefix", O_NO_PREFIX, 0},  {"grace_period", O_GRACE, 1}, {"help", O_HELP, 0},
};

static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tuttirun: %s\n\n%s", msg, usage_text);
  exit(2);
}

static int parse_int(const char* flag, const char* s, int lo, int hi) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
    usage_error("%s wants a whole number from %d to %d, not \"%s\"", flag, lo, hi, s);
  }
  return (int)v;
}

/* --nnodes N, or torchrun's elastic form MIN:MAX when MIN == MAX. */
static int parse_nnodes(const char* s) {
  const char* colon = strchr(s, ':');
  if (colon == NULL) {
    return parse_int("--nnodes", s, 1, 1 << 20);
  }
  char lo[32];
  snprintf(lo, sizeof lo, "%.*s", (int)(colon - s), s);
  int a = parse_int("--nnodes", lo, 1, 1 << 20);
  if (parse_int("--nnodes", colon + 1, 1, 1 << 20) != a) {
    usage_error("--nnodes %s: elastic node ranges are not supported, give one number", s);
  }
  return a;
}

/* Binds `port` on `ai`'s address; returns the fd (held so that the pair
 * probe cannot find the same port twice) or -1. */
static int bind_port(const struct addrinfo* ai, int port, int* got) {
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  struct sockaddr_storage ss;
  memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
  in_port_t* p = ai->ai_family == AF_INET6 ? &((struct sockaddr_in6*)&ss)->sin6_port
                                           : &((struct sockaddr_in*)&ss)->sin_port;
  *p = htons((uint16_t)port);
  socklen_t len = ai->ai_addrlen;
  if (bind(fd, (struct sockaddr*)&ss, len) != 0 || getsockname(fd, (struct sockaddr*)&ss, &len)) {
    close(fd);
    return -1;
  }
  *got = ntohs(*p);
  return fd;
}

/* A port P with P and P+1 both free on `addr`: MASTER_PORT stays free for
 * the program's own use (PyTorch's TCPStore binds it) and the tutti
 * bootstrap root binds P+1. */
static int free_port_pair(const char* addr) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(addr, NULL, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "tuttirun: cannot resolve --master_addr %s: %s\n", addr, gai_strerror(rc));
    exit(1);
  }
  int port = -1;
  for (int attempt = 0; attempt < 64 && port < 0; attempt++) {
    int p, q;
    int a = bind_port(res, 0, &p);
    if (a < 0) {
      fprintf(stderr, "tuttirun: cannot bind a port on --master_addr %s: %s\n", addr,
              strerror(errno));
      exit(1);
    }
    int b = p < 65535 ? bind_port(res, p + 1, &q) : -1;
    if (b >= 0) {
      port = p;
      close(b);
    }
    close(a);
  }
  freeaddrinfo(res);
  if (port < 0) {
    fprintf(stderr, "tuttirun: found no two free neighbouring ports on %s\n", addr);
    exit(1);
  }
  return port;
}

static void random_secret(char* out, size_t len) {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno != EINTR) {
      fprintf(stderr, "tuttirun: getrandom failed: %s\n", strerror(errno));
      exit(1);
    }
    got += n > 0 ? (size_t)n : 0;
  }
  for (size_t i = 0; i < sizeof b && 2 * i + 2 < len; i++) {
    snprintf(out + 2 * i, 3, "%02x", b[i]);
  }
}

/* Every host of a job must compute the same secret, without talking to
 * each other: see docs/launching.md for the order. */
static void choose_secret(struct tr_job* j, const char* flag_secret, const char* rdzv_id) {
  const char* env = getenv("TUTTI_JOB_SECRET");
  const char* given = flag_secret != NULL ? flag_secret : env;
  if (given != NULL && strlen(given) >= sizeof j->secret) {
    usage_error("the job secret is longer than %d characters", (int)sizeof j->secret - 1);
  }
  if (flag_secret != NULL) {
    snprintf(j->secret, sizeof j->secret, "%s", flag_secret);
  } else if (env != NULL && *env != '\0') {
    snprintf(j->secret, sizeof j->secret, "%s", env);
  } else if (j->nnodes == 1) {
    random_secret(j->secret, sizeof j->secret);
  } else if (rdzv_id != NULL) {
    snprintf(j->secret, sizeof j->secret, "tuttirun-rdzv:%s", rdzv_id);
  } else {
    snprintf(j->secret, sizeof j->secret, "tuttirun:%s", j->comm_id);
    fprintf(stderr,
            "tuttirun: warning: the job secret is derived from %s, which anyone can guess; "
            "pass the same --job_secret (or TUTTI_JOB_SECRET) on every host\n",
            j->comm_id);
  }
}

static void mkdir_p(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s", dir);
  for (char* p = path + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char c = *p;
      *p = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tuttirun: cannot create --log_dir %s: %s\n", path, strerror(errno));
        exit(1);
      }
      *p = c;
      if (c == '\0') {
        return;
      }
    }
  }
}

/* Two descriptors per rank stay open here, two more for --log_dir. */
static void raise_fd_limit(int nlocal) {
  struct rlimit rl;
  rlim_t need = (rlim_t)nlocal * 4 + 64;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
    rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char** argv) {
  /* A closed 0/1/2 would make a pipe land there and be handed on by mistake. */
  for (int fd = open("/dev/null", O_RDWR); fd >= 0 && fd <= 2; fd = open("/dev/null", O_RDWR)) {
  }
  struct tr_job j = {.nlocal = 1, .nnodes = 1, .prefix = 1, .grace_s = 5, .master_port = -1};
  snprintf(j.master_addr, sizeof j.master_addr, "127.0.0.1");
  const char *flag_secret = NULL, *rdzv_id = NULL;
  int short_n = 0, standalone = 0;
  int i = 1;
  while (i < argc && argv[i][0] == '-') {
    const char* a = argv[i++];
    if (strcmp(a, "--") == 0) {
      break;
    }
    if (strcmp(a, "-h") == 0) {
      a = "--help";
    }
    if (strncmp(a, "-n", 2) == 0) {
      const char* v = a[2] != '\0' ? a + 2 : (i < argc ? argv[i++] : NULL);
      if (v == NULL) {
        usage_error("-n needs a number of ranks");
      }
      j.nlocal = parse_int("-n", v, 1, TR_MAX_LOCAL_RANKS);
      short_n = 1;
      continue;
    }
    if (a[1] != '-') {
      usage_error("unknown flag %s", a);
    }
    char name[64];
    size_t nlen = strcspn(a + 2, "=");
    snprintf(name, sizeof name, "%.*s", (int)nlen, a + 2);
    for (char* p = name; *p != '\0'; p++) {
      *p = *p == '-' ? '_' : *p;
    }
    char flag[70]; /* for messages: "--nproc_per_node", whatever the spelling */
    snprintf(flag, sizeof flag, "--%s", name);
    const char* inline_val = a[2 + nlen] == '=' ? a + 3 + nlen : NULL;
    size_t k = 0;
    while (k < sizeof options / sizeof options[0] && strcmp(options[k].name, name) != 0) {
      k++;
    }
    if (k == sizeof options / sizeof options[0]) {
      usage_error("unknown flag %s", a);
    }
    const char* v = NULL;
    if (options[k].has_arg) {
      v = inline_val != NULL ? inline_val : (i < argc ? argv[i++] : NULL);
      if (v == NULL) {
        usage_error("%s needs a value", flag);
      }
    } else if (inline_val != NULL) {
      usage_error("%s takes no value", flag);
    }
    switch (options[k].id) {
      case O_NPROC:
        j.nlocal = parse_int(flag, v, 1, TR_MAX_LOCAL_RANKS);
        break;
      case O_NNODES:
        j.nnodes = parse_nnodes(v);
        break;
      case O_NODE_RANK:
        j.node_rank = parse_int(flag, v, 0, 1 << 20);
        break;
      case O_ADDR: {
        size_t l = strlen(v); /* "[v6]" -> "v6": brackets belong to host:port text only */
        int br = l >= 2 && v[0] == '[' && v[l - 1] == ']';
        if (l == 0 || l - (size_t)(2 * br) >= sizeof j.master_addr) {
          usage_error("--master_addr \"%s\" is empty or too long", v);
        }
        snprintf(j.master_addr, sizeof j.master_addr, "%.*s", (int)(l - (size_t)(2 * br)), v + br);
        break;
      }
      case O_PORT:
        j.master_port = parse_int(flag, v, 1, 65534);
        break;
      case O_STANDALONE:
        standalone = 1;
        break;
      case O_SECRET:
        flag_secret = v;
        break;
      case O_RDZV_ID:
        rdzv_id = v;
        break;
      case O_LOG_DIR:
        j.log_dir = v;
        break;
      case O_NO_PREFIX:
        j.prefix = 0;
        break;
      case O_GRACE: {
        char* end = NULL;
        j.grace_s = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || !(j.grace_s >= 0 && j.grace_s <= 86400)) {
          usage_error("--grace_period wants seconds from 0 to 86400, not \"%s\"", v);
        }
        break;
      }
      case O_HELP:
        fputs(usage_text, stdout);
        return 0;
    }
  }
  if (i >= argc) {
    usage_error("no program to run");
  }
  j.argv = argv + i;
  if ((short_n || standalone) && j.nnodes != 1) {
    usage_error("%s is for one host, but --nnodes is %d", short_n ? "-n" : "--standalone",
                j.nnodes);
  }
  if (j.node_rank >= j.nnodes) {
    usage_error("--node_rank %d is not below --nnodes %d", j.node_rank, j.nnodes);
  }
  if ((long)j.nnodes * j.nlocal > (1L << 30)) {
    usage_error("%d hosts x %d ranks is too many", j.nnodes, j.nlocal);
  }
  if (j.master_port < 0) {
    j.master_port = j.nnodes == 1 ? free_port_pair(j.master_addr) : TR_DEFAULT_PORT;
  }
  int v6 = strchr(j.master_addr, ':') != NULL;
  snprintf(j.comm_id, sizeof j.comm_id, v6 ? "[%s]:%d" : "%s:%d", j.master_addr, j.master_port + 1);
  choose_secret(&j, flag_secret, rdzv_id);
  if (j.log_dir != NULL) {
    mkdir_p(j.log_dir);
  }
  raise_fd_limit(j.nlocal);
  return tr_job_run(&j);
}
