/* Init/destroy cycles leave nothing behind: open file descriptors, threads,
 * shared-memory segments and resident memory are the same after many cycles
 * as after a warm-up. Every cycle runs one allreduce so that connections
 * are really used. Usage:
 *   test_leaks [thread_cycles] [process_cycles]     (defaults: 2000 and 500)
 * Thread cycles: 2 ranks as threads of this process (ncclCommInitAll).
 * Counted: /proc/self/fd, /proc/self/task, /dev/shm/tutti-* entries, mappings
 * of them in /proc/self/maps, and VmRSS.
 * Process cycles: 2 ranks as processes, each running its own cycles.
 * Resident memory may grow by at most RSS_SLACK_KB after the warm-up (not
 * checked when built with a sanitizer, whose allocator keeps freed memory).
 * With a third argument "windows", every cycle also registers a window on
 * each rank (which starts the one-sided service communicator and thread),
 * puts into the peer's and waits for its put; odd cycles deregister the
 * window, even ones leave it to ncclCommDestroy. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"
#include "rundir.h"

#define WARMUP 50
#define RSS_SLACK_KB (8 * 1024)
#define COUNT 4099

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int use_windows;

struct usage {
  long fds, threads, shm, maps, rss_kb;
};

static long count_dir(const char* path, const char* prefix) {
  DIR* d = opendir(path);
  if (d == NULL)
    return -1;
  long n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (prefix == NULL || strncmp(e->d_name, prefix, strlen(prefix)) == 0)
      n++;
  }
  closedir(d);
  return n;
}

static long rss_kb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kb = strtol(line + 6, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kb;
}

/* Mappings of shared-memory segments (unlinked once every rank has mapped
 * them, so they no longer show in /dev/shm). */
static long shm_maps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL)
    return -1;
  char line[512];
  long n = 0;
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, "/dev/shm/tutti-") != NULL)
      n++;
  }
  fclose(f);
  return n;
}

static struct usage measure(void) {
  struct usage u;
  u.fds = count_dir("/proc/self/fd", NULL) - 1; /* the directory stream's own fd */
  u.threads = count_dir("/proc/self/task", NULL);
  u.shm = count_dir("/dev/shm", "tutti-");
  u.maps = shm_maps();
  u.rss_kb = rss_kb();
  return u;
}

static void print_usage(const char* who, const char* when, struct usage u) {
  printf("%s %-13s fds %ld threads %ld shm %ld shm-maps %ld rss %ld kB\n", who, when, u.fds,
         u.threads, u.shm, u.maps, u.rss_kb);
}

/* The end's counts once what the last destroy let go of has gone: a
 * thread on its way out or a socket being closed may still count for a
 * moment on busy cores; a leak stays. At most 3 s. */
static struct usage settle(struct usage base) {
  struct usage u = measure();
  for (int i = 0; i < 30 && (u.fds > base.fds || u.threads > base.threads || u.maps > base.maps);
       i++) {
    usleep(100 * 1000);
    u = measure();
  }
  return u;
}

/* What each open descriptor of this process refers to, for a failure's
 * message: a grown count alone does not say which part leaked. */
static void list_fds(const char* who) {
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL)
    return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char path[300], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    fprintf(stderr, "%s:   fd %s -> %s\n", who, e->d_name, target);
  }
  closedir(d);
}

/* 0 when `end` has not grown past `base`; shm only where `check_shm`. */
static int compare(const char* who, struct usage base, struct usage end, int check_shm) {
  int bad = 0;
  if (end.fds > base.fds) {
    fprintf(stderr, "%s: open file descriptors grew from %ld to %ld\n", who, base.fds, end.fds);
    list_fds(who);
    bad = 1;
  }
  if (end.threads > base.threads) {
    fprintf(stderr, "%s: threads grew from %ld to %ld\n", who, base.threads, end.threads);
    bad = 1;
  }
  if (check_shm && end.shm > base.shm) {
    fprintf(stderr, "%s: /dev/shm/tutti-* segments grew from %ld to %ld\n", who, base.shm, end.shm);
    bad = 1;
  }
  if (end.maps > base.maps) {
    fprintf(stderr, "%s: shared-memory mappings grew from %ld to %ld\n", who, base.maps, end.maps);
    bad = 1;
  }
  if (!SANITIZED && end.rss_kb > base.rss_kb + RSS_SLACK_KB) {
    fprintf(stderr, "%s: resident memory grew from %ld kB to %ld kB (slack %d kB)\n", who,
            base.rss_kb, end.rss_kb, RSS_SLACK_KB);
    bad = 1;
  }
  return bad;
}

static int check_sum(const float* buf, int nranks, int cycle) {
  for (int i = 0; i < COUNT; i++) {
    float want = 0;
    for (int r = 0; r < nranks; r++)
      want += (float)(r + 1 + (i + cycle) % 7);
    if (buf[i] != want) {
      fprintf(stderr, "cycle %d: element %d is %g, expected %g\n", cycle, i, buf[i], want);
      return 1;
    }
  }
  return 0;
}

static void fill(float* buf, int rank, int cycle) {
  for (int i = 0; i < COUNT; i++)
    buf[i] = (float)(rank + 1 + (i + cycle) % 7);
}

/* The bytes rank `from` puts into rank `to`'s window in cycle `cycle`. */
static unsigned char put_byte(int from, int to, int cycle, int i) {
  return (unsigned char)(from * 37 + to * 11 + cycle * 7 + i * 13 + (i >> 8));
}

static int check_window(const unsigned char* win, int from, int to, int cycle) {
  for (int i = 0; i < COUNT; i++) {
    if (win[i] != put_byte(from, to, cycle, i)) {
      fprintf(stderr, "cycle %d: window byte %d from rank %d is %u, expected %u\n", cycle, i, from,
              win[i], put_byte(from, to, cycle, i));
      return 1;
    }
  }
  return 0;
}

/* Rank `rank`'s put into its peer's window, with a signal. */
static ncclResult_t put_peer(ncclComm_t comm, ncclWindow_t w, unsigned char* src, int rank,
                             int cycle) {
  for (int i = 0; i < COUNT; i++) {
    src[i] = put_byte(rank, 1 - rank, cycle, i);
  }
  return ncclPutSignal(src, COUNT, ncclUint8, 1 - rank, w, 0, 0, 0, 0, comm, NULL);
}

/* One cycle with both ranks as threads of this process. */
static int thread_cycle(int cycle, float bufs[2][COUNT]) {
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    fprintf(stderr, "cycle %d: ncclCommInitAll failed: %s\n", cycle, ncclGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < 2; r++)
    fill(bufs[r], r, cycle);
  ncclGroupStart();
  for (int r = 0; r < 2; r++)
    ncclAllReduce(bufs[r], bufs[r], COUNT, ncclFloat32, ncclSum, comms[r], NULL);
  ncclResult_t res = ncclGroupEnd();
  int bad = 0;
  if (res != ncclSuccess) {
    fprintf(stderr, "cycle %d: allreduce failed (%d): %s\n", cycle, (int)res,
            ncclGetLastError(comms[0]));
    bad = 1;
  }
  for (int r = 0; r < 2 && !bad; r++)
    bad = check_sum(bufs[r], 2, cycle);
  static unsigned char wins[2][COUNT], srcs[2][COUNT];
  ncclWindow_t w[2] = {NULL, NULL};
  if (use_windows && !bad) {
    /* Registration is collective: both ranks in one group (one thread each). */
    ncclGroupStart();
    for (int r = 0; r < 2; r++)
      ncclCommWindowRegister(comms[r], wins[r], COUNT, &w[r], 0);
    res = ncclGroupEnd();
    /* Puts need only the target's service thread: one thread drives both. */
    for (int r = 0; r < 2 && res == ncclSuccess; r++)
      res = put_peer(comms[r], w[r], srcs[r], r, cycle);
    for (int r = 0; r < 2 && res == ncclSuccess; r++) {
      ncclWaitSignalDesc_t d = {1, 1 - r, 0, 0};
      res = ncclWaitSignal(1, &d, comms[r], NULL);
    }
    if (res != ncclSuccess) {
      fprintf(stderr, "cycle %d: one-sided exchange failed (%d): %s\n", cycle, (int)res,
              ncclGetLastError(NULL));
      bad = 1;
    }
    for (int r = 0; r < 2 && !bad; r++)
      bad = check_window(wins[r], 1 - r, r, cycle);
    for (int r = 0; r < 2 && cycle % 2 == 1; r++)
      if (w[r] != NULL && ncclCommWindowDeregister(comms[r], w[r]) != ncclSuccess)
        bad = 1;
  }
  if (cycle == 0)
    print_usage("threads", "while open", measure()); /* what the counts see */
  for (int r = 0; r < 2; r++) {
    if (ncclCommDestroy(comms[r]) != ncclSuccess) {
      fprintf(stderr, "cycle %d: ncclCommDestroy failed\n", cycle);
      bad = 1;
    }
  }
  return bad;
}

static int run_threads(int cycles) {
  static float bufs[2][COUNT];
  struct usage base = measure();
  print_usage("threads", "start", base);
  for (int c = 0; c < cycles; c++) {
    if (thread_cycle(c, bufs))
      return 1;
    if (c + 1 == WARMUP || (c + 1 == cycles && cycles < WARMUP)) {
      base = measure();
      print_usage("threads", "after warm-up", base);
    }
  }
  struct usage end = settle(base);
  print_usage("threads", "end", end);
  return compare("threads", base, end, 1);
}

/* The cycles of one rank process. Rank 0 makes each cycle's id and hands
 * it to rank 1 through `idpipe`. Returns 0 when nothing grew. */
static int process_rank(int rank, int cycles, int idpipe[2]) {
  char who[32];
  snprintf(who, sizeof who, "process rank %d", rank);
  float* buf = malloc(COUNT * sizeof(float));
  struct usage base = measure();
  int bad = 0;
  for (int c = 0; c < cycles && !bad; c++) {
    ncclUniqueId id;
    if (rank == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess ||
          write(idpipe[1], &id, sizeof id) != (ssize_t)sizeof id) {
        fprintf(stderr, "%s cycle %d: could not make or hand over the id\n", who, c);
        bad = 1;
        break;
      }
    } else if (read(idpipe[0], &id, sizeof id) != (ssize_t)sizeof id) {
      fprintf(stderr, "%s cycle %d: no id from rank 0\n", who, c);
      bad = 1;
      break;
    }
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
      fprintf(stderr, "%s cycle %d: init failed: %s\n", who, c, ncclGetLastError(NULL));
      bad = 1;
      break;
    }
    fill(buf, rank, c);
    if (ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess) {
      fprintf(stderr, "%s cycle %d: allreduce failed: %s\n", who, c, ncclGetLastError(comm));
      bad = 1;
    } else {
      bad = check_sum(buf, 2, c);
    }
    if (use_windows && !bad) {
      static unsigned char win[COUNT], src[COUNT];
      ncclWindow_t w = NULL;
      ncclWaitSignalDesc_t d = {1, 1 - rank, 0, 0};
      ncclResult_t res = ncclCommWindowRegister(comm, win, COUNT, &w, 0);
      res = res == ncclSuccess ? put_peer(comm, w, src, rank, c) : res;
      res = res == ncclSuccess ? ncclWaitSignal(1, &d, comm, NULL) : res;
      if (res != ncclSuccess) {
        fprintf(stderr, "%s cycle %d: one-sided exchange failed: %s\n", who, c,
                ncclGetLastError(comm));
        bad = 1;
      } else {
        bad = check_window(win, 1 - rank, rank, c);
      }
      /* The peer may still read nothing of it: its put into us is done. */
      if (w != NULL && c % 2 == 1 && ncclCommWindowDeregister(comm, w) != ncclSuccess)
        bad = 1;
    }
    if (ncclCommDestroy(comm) != ncclSuccess)
      bad = 1;
    if (c + 1 == WARMUP || (c + 1 == cycles && cycles < WARMUP))
      base = measure();
  }
  free(buf);
  if (bad)
    return 1;
  struct usage end = settle(base);
  print_usage(who, "after warm-up", base);
  print_usage(who, "end", end);
  fflush(stdout);
  /* Segments are shared by the two ranks: counted by the parent instead. */
  return compare(who, base, end, 0);
}

static int run_processes(int cycles) {
  struct usage before = measure();
  int idpipe[2];
  if (pipe(idpipe) != 0)
    return 1;
  fflush(NULL);
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      /* Rank 1 only reads: with rank 0 gone its read ends instead of waiting. */
      if (r == 1)
        close(idpipe[1]);
      _exit(process_rank(r, cycles, idpipe));
    }
  }
  close(idpipe[0]);
  close(idpipe[1]);
  int bad = 0;
  for (int r = 0; r < 2; r++) {
    int st;
    if (waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "process rank %d failed\n", r);
      bad = 1;
    }
  }
  struct usage after = measure();
  printf("processes: /dev/shm/tutti-* segments %ld before, %ld after\n", before.shm, after.shm);
  if (after.shm > before.shm) {
    fprintf(stderr, "processes: /dev/shm/tutti-* segments grew from %ld to %ld\n", before.shm,
            after.shm);
    bad = 1;
  }
  return bad;
}

int main(int argc, char** argv) {
  int tcycles = argc > 1 ? atoi(argv[1]) : 2000;
  int pcycles = argc > 2 ? atoi(argv[2]) : 500;
  use_windows = argc > 3 && strcmp(argv[3], "windows") == 0;
  if (SANITIZED)
    printf("built with a sanitizer: resident memory is reported, not checked\n");
  /* A runtime directory of its own (rundir.h): the RAS host role stays
   * here from the first communicator on. */
  char run_dir[] = "/tmp/tutti-leaks-XXXXXX";
  if (test_rundir_make(run_dir) != 0) {
    perror("test_leaks: a private runtime directory");
    return 1;
  }
  /* The process ranks first, from a parent that has not initialised the
   * library (fork before any init). */
  int pbad = pcycles > 0 ? run_processes(pcycles) : 0;
  int tbad = tcycles > 0 ? run_threads(tcycles) : 0;
  printf("threads: %d cycles %s; processes: %d cycles %s\n", tcycles, tbad ? "FAILED" : "ok",
         pcycles, pbad ? "FAILED" : "ok");
  test_rundir_remove(run_dir);
  return pbad || tbad ? 1 : 0;
}
