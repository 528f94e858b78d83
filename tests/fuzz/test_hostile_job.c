/* A 4-rank job (processes, NCCL_COMM_ID=127.0.0.1:PORT, every pair over
 * TCP) while strangers attack every port it listens on: the bootstrap root,
 * each rank's bootstrap listener, and the TCP transport's listeners (of the
 * first communicator and of a split). Each listener gets random bytes, a
 * wrong secret, the right preamble with an oversized or wrong frame, half a
 * frame, a connection that says nothing, and one that trickles a byte at a
 * time. The job must complete with bit-exact results.
 *
 * Ranks 0-2 start first; once their listeners are up they are attacked,
 * then rank 3 starts. While the job runs, new listeners (found through
 * /proc: sockets of the ranks' processes in LISTEN state) are attacked as
 * they appear; rank 3 is held at each bootstrap all-gather it enters (the
 * TCP setup's is one) until no new listener opens, so that listeners that
 * live for milliseconds are reached too. Only loopback addresses are ever
 * contacted. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "harness.h"
#include "nccl.h"

#define NRANKS 4
#define MAX_LISTENERS 64
#define MAX_FDS 1024

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the job, in each child ---- */

static int check_allreduce(ncclComm_t comm, int rank, int nranks, const int* members, size_t n) {
  float* buf = malloc(n * sizeof *buf);
  for (size_t i = 0; i < n; i++) {
    buf[i] = (float)((rank + 1) * (int)(i % 1000));
  }
  int bad = 0;
  if (ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
    fprintf(stderr, "rank %d: allreduce failed: %s\n", rank, ncclGetLastError(comm));
    bad = 1;
  }
  int sum = 0;
  for (int m = 0; m < nranks; m++) {
    sum += members[m] + 1;
  }
  for (size_t i = 0; i < n && !bad; i++) {
    bad = buf[i] != (float)(sum * (int)(i % 1000));
  }
  free(buf);
  return bad ? 0 : 1;
}

static int child(int rank, int go_fd) {
  if (go_fd >= 0) {
    char c;
    if (read(go_fd, &c, 1) != 1) {
      return 3;
    }
  }
  ncclUniqueId id;
  ncclComm_t comm = NULL, sub = NULL;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, NRANKS, id, rank) != 0) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, ncclGetLastError(comm));
    return 1;
  }
  const int all[NRANKS] = {0, 1, 2, 3};
  int ok = 0, checks = 0;
  for (int it = 0; it < 12; it++, checks++) {
    ok += check_allreduce(comm, rank, NRANKS, all, 1 + (size_t)it * 4099);
  }
  /* A split: a new bootstrap root and new TCP listeners to attack. */
  if (ncclCommSplit(comm, rank % 2, rank, &sub, NULL) != ncclSuccess) {
    fprintf(stderr, "rank %d: split failed: %s\n", rank, ncclGetLastError(comm));
    return 1;
  }
  const int half[2] = {rank % 2, rank % 2 + 2};
  for (int it = 0; it < 4; it++, checks++) {
    ok += check_allreduce(sub, rank, 2, half, 1 + (size_t)it * 3001);
  }
  ncclCommDestroy(sub);
  ncclCommDestroy(comm);
  printf("rank %d: %d of %d results exact\n", rank, ok, checks);
  fflush(stdout);
  return ok == checks ? 0 : 2;
}

/* ---- the strangers, in the parent ---- */

struct listener {
  union tutti_socket_addr addr;
};

static pid_t pids[NRANKS];
static struct listener seen[MAX_LISTENERS];
static int nseen;
static int attack_fds[MAX_FDS], nattack;
static int trickle_fds[MAX_FDS], ntrickle;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int job_over;
static int pauses;
static unsigned char job_secret[TUTTI_BS_SECRET];

static int socket_inode_of(pid_t pid, unsigned long inode) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
  DIR* d = opendir(dir);
  int found = 0;
  for (struct dirent* e = d ? readdir(d) : NULL; e != NULL && !found; e = readdir(d)) {
    char path[sizeof dir + sizeof e->d_name + 2], link[64];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n > 0) {
      link[n] = '\0';
      unsigned long ino;
      found = sscanf(link, "socket:[%lu]", &ino) == 1 && ino == inode;
    }
  }
  if (d) {
    closedir(d);
  }
  return found;
}

/* Loopback IPv4 listeners owned by the job's processes, not yet in seen[]. */
static int new_listeners(struct listener* out, int max) {
  int n = 0;
  FILE* f = fopen("/proc/net/tcp", "r");
  char line[512];
  while (f != NULL && fgets(line, sizeof line, f) != NULL && n < max) {
    unsigned addr, port, state;
    unsigned long inode;
    if (sscanf(line, " %*d: %8X:%4X %*X:%*X %X %*X:%*X %*X:%*X %*X %*u %*u %lu", &addr, &port,
               &state, &inode) != 4 ||
        state != 0x0A || (ntohl(addr) >> 24) != 127) {
      continue;
    }
    struct listener l;
    memset(&l, 0, sizeof l);
    l.addr.sin.sin_family = AF_INET;
    l.addr.sin.sin_addr.s_addr = addr; /* the kernel prints it in host order of the bytes */
    tutti_socket_set_port(&l.addr, (int)port);
    int known = 0;
    for (int i = 0; i < nseen && !known; i++) {
      known = memcmp(&seen[i].addr, &l.addr, sizeof l.addr) == 0;
    }
    int ours = 0;
    for (int r = 0; r < NRANKS && !known && !ours; r++) {
      ours = pids[r] > 0 && socket_inode_of(pids[r], inode);
    }
    if (ours) {
      out[n++] = l;
    }
  }
  if (f) {
    fclose(f);
  }
  return n;
}

enum {
  GARBAGE,
  WRONG_SECRET,
  RIGHT_SECRET_HUGE,
  RIGHT_SECRET_WRONG_TYPE,
  HALF_FRAME,
  TCP_HELLO_WRONG,
  SILENT,
  TRICKLE,
  KINDS
};

/* A connection to `l`, or -1 (it closed already: the job moved on). */
static int stranger_connect(const struct listener* l) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  if (connect(fd, &l->addr.sa, sizeof l->addr.sin) != 0 && errno == EINPROGRESS) {
    struct pollfd p = {fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
        err == 0) {
      return fd;
    }
  } else if (errno == 0 || errno == EISCONN) {
    return fd;
  }
  close(fd);
  return -1;
}

static void attack(const struct listener* l) {
  for (int kind = 0; kind < KINDS; kind++) {
    errno = 0;
    int fd = stranger_connect(l);
    if (fd < 0) {
      break;
    }
    unsigned char m[256], bad[TUTTI_BS_SECRET];
    size_t len = 0;
    memcpy(bad, job_secret, sizeof bad);
    bad[3] ^= 0x40;
    switch (kind) {
      case GARBAGE:
        for (len = 0; len < sizeof m; len++) {
          m[len] = (unsigned char)rand();
        }
        break;
      case WRONG_SECRET:
      case RIGHT_SECRET_HUGE:
      case RIGHT_SECRET_WRONG_TYPE:
      case HALF_FRAME:
        /* No secret travels any more: a whole hello is answered by a proof
         * that the stranger cannot answer (WRONG_SECRET sends half). */
        tutti_bootstrap_preamble(m);
        tutti_socket_put32(m + 24,
                           kind == RIGHT_SECRET_WRONG_TYPE ? TUTTI_BS_TABLE : TUTTI_BS_HELLO);
        tutti_socket_put32(m + 28, kind == RIGHT_SECRET_HUGE ? 0xfffffff0u : TUTTI_BS_HELLO_LEN);
        len = kind == HALF_FRAME ? 30 : 32;
        break;
      case TCP_HELLO_WRONG: /* the TCP transport's hello, then a MAC of a wrong secret */
        memset(m, 0, 48 + 32);
        memcpy(m, "tuttiTC2", 8);
        memcpy(m + 8, bad, sizeof bad);
        memcpy(m + 48, bad, sizeof bad);
        len = 48 + 32;
        break;
      default:
        break;
    }
    if (len > 0) {
      (void)send(fd, m, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    pthread_mutex_lock(&lock);
    if (nattack < MAX_FDS) {
      attack_fds[nattack++] = fd;
      if (kind == TRICKLE && ntrickle < MAX_FDS) {
        trickle_fds[ntrickle++] = fd;
      }
    } else {
      close(fd);
    }
    pthread_mutex_unlock(&lock);
  }
}

static int scan_and_attack(void) {
  struct listener fresh[MAX_LISTENERS];
  int n = new_listeners(fresh, MAX_LISTENERS);
  for (int i = 0; i < n && nseen < MAX_LISTENERS; i++) {
    seen[nseen++] = fresh[i];
    attack(&fresh[i]);
  }
  return n;
}

/* Rank 3 stops at each bootstrap all-gather it enters (the TCP transport's
 * setup is one: every rank's TCP listener is open while it waits there) and
 * reports it; the strangers then attack every listener that opens while it
 * waits, and let it go on. */
static int pause_fds[2] = {-1, -1}, resume_fds[2] = {-1, -1};
static int rank_pauses = -1; /* rank 3's process: where it reports a pause */

ncclResult_t __real_tutti_bootstrap_allgather(struct tutti_bootstrap* b, void* data, size_t bytes);
ncclResult_t __wrap_tutti_bootstrap_allgather(struct tutti_bootstrap* b, void* data, size_t bytes) {
  if (rank_pauses >= 0) {
    char c = 'p';
    if (write(rank_pauses, &c, 1) != 1 || read(resume_fds[0], &c, 1) != 1) {
      rank_pauses = -1;
    }
  }
  return __real_tutti_bootstrap_allgather(b, data, bytes);
}

/* Attacks listeners as they open, until none has opened for a while. */
static void attack_while_paused(void) {
  for (int quiet = 0, tries = 0; quiet < 20 && tries < 400; tries++) {
    quiet = scan_and_attack() > 0 ? 0 : quiet + 1;
    sleep_ms(5);
  }
}

static void* attacker_main(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&job_over, __ATOMIC_RELAXED)) {
    struct pollfd p = {pause_fds[0], POLLIN, 0};
    char c;
    if (pause_fds[0] >= 0 && poll(&p, 1, 2) > 0) {
      if (read(pause_fds[0], &c, 1) != 1) {
        close(pause_fds[0]);
        pause_fds[0] = -1; /* rank 3 is done */
        continue;
      }
      attack_while_paused();
      pauses++;
      if (write(resume_fds[1], "r", 1) != 1) {
        break;
      }
    } else {
      scan_and_attack();
      sleep_ms(1);
    }
  }
  return NULL;
}

/* One byte of a genuine preamble at a time, never finishing it. */
static void* trickle_main(void* arg) {
  (void)arg;
  unsigned char pre[TUTTI_BS_PREAMBLE];
  tutti_bootstrap_preamble(pre);
  for (int k = 0; !__atomic_load_n(&job_over, __ATOMIC_RELAXED); k = (k + 1) % 20) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntrickle; i++) {
      (void)send(trickle_fds[i], &pre[k], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    pthread_mutex_unlock(&lock);
    sleep_ms(200);
  }
  return NULL;
}

static int free_port(void) {
  union tutti_socket_addr a;
  memset(&a, 0, sizeof a);
  a.sin.sin_family = AF_INET;
  a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = -1;
  if (tutti_socket_listen(&a, &fd) != ncclSuccess) {
    return -1;
  }
  close(fd);
  return tutti_socket_port(&a);
}

int main(void) {
  srand(7);
  signal(SIGPIPE, SIG_IGN);
  int port = free_port();
  CHECK(port > 0, "a free port");
  char comm_id[64];
  snprintf(comm_id, sizeof comm_id, "127.0.0.1:%d", port);
  setenv("NCCL_COMM_ID", comm_id, 1);
  setenv("TUTTI_JOB_SECRET", "hostile-job-test", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("TUTTI_TIMEOUT", "60", 0);
  ncclUniqueId id; /* the same id the ranks build: to know the job's secret */
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id");
  tutti_bootstrap_id_secret(&id, job_secret);
  int go[2];
  CHECK(pipe(go) == 0 && pipe(pause_fds) == 0 && pipe(resume_fds) == 0, "pipes");
  for (int r = 0; r < NRANKS; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      close(go[1]);
      if (r == NRANKS - 1) {
        rank_pauses = pause_fds[1];
        close(pause_fds[0]);
        close(resume_fds[1]);
      } else {
        close(pause_fds[1]);
        close(resume_fds[0]);
        close(resume_fds[1]);
        close(pause_fds[0]);
      }
      _exit(child(r, r == NRANKS - 1 ? go[0] : -1));
    }
  }
  close(go[0]);
  close(pause_fds[1]);
  close(resume_fds[0]);
  /* Ranks 0-2 are up: the root and three bootstrap listeners. */
  int before = 0;
  for (int i = 0; i < 1000 && nseen < NRANKS; i++) {
    scan_and_attack();
    sleep_ms(10);
  }
  before = nseen;
  CHECK(before >= NRANKS, "found the root and the first ranks' listeners (%d)", before);
  pthread_t attacker, trickler;
  pthread_create(&trickler, NULL, trickle_main, NULL);
  sleep_ms(300); /* the slow strangers are mid-preamble when the last rank comes */
  pthread_create(&attacker, NULL, attacker_main, NULL);
  CHECK(write(go[1], "g", 1) == 1, "start rank 3");
  close(go[1]);
  int ok = 0;
  for (int r = 0; r < NRANKS; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d exited with status %d", r, st);
    ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  __atomic_store_n(&job_over, 1, __ATOMIC_RELAXED);
  pthread_join(attacker, NULL);
  pthread_join(trickler, NULL);
  for (int i = 0; i < nattack; i++) {
    close(attack_fds[i]);
  }
  printf(
      "hostile job: %d of %d ranks exact; %d listeners attacked (%d before the last rank "
      "came, the others while it was held at %d all-gathers), %d stranger connections\n",
      ok, NRANKS, nseen, before, pauses, nattack);
  /* The root, the first three ranks' bootstrap listeners, and at least rank
   * 3's own TCP listener (open while it is held in the TCP setup). */
  CHECK(nseen > NRANKS, "the TCP transport's listeners were attacked too (%d listeners)", nseen);
  return test_summary("hostile_job");
}
