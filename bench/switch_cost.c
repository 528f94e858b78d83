/* What one hand-over between two processes costs on this host: two
 * processes take turns through a flag in shared memory, (a) both pinned to
 * one core, each yielding (sched_yield) until its turn comes — a context
 * switch per turn, as when more ranks than cores wait for each other — and
 * (b) pinned to two cores, spinning — a cache line moving between cores.
 * Prints the time of one turn (half a round trip) for each.
 * Build: cc -O2 -o switch_cost bench/switch_cost.c */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

/* Turns: the parent waits for even values, the child for odd ones. */
static void play(atomic_long* turn, int me, long rounds, int yield) {
  for (long i = 0; i < rounds; i++) {
    const long mine = 2 * i + me;
    while (atomic_load_explicit(turn, memory_order_acquire) != mine) {
      if (yield) {
        sched_yield();
      }
    }
    atomic_store_explicit(turn, mine + 1, memory_order_release);
  }
}

static double measure(int cpu_child, int yield, long rounds) {
  atomic_long* turn =
      mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (turn == MAP_FAILED) {
    perror("mmap");
    return -1;
  }
  atomic_store(turn, 0);
  pid_t p = fork();
  if (p == 0) {
    pin(cpu_child);
    play(turn, 1, rounds, yield);
    _exit(0);
  }
  pin(0);
  double t0 = now_s();
  play(turn, 0, rounds, yield);
  while (atomic_load(turn) != 2 * rounds) {
    if (yield) {
      sched_yield();
    }
  }
  double t = now_s() - t0;
  waitpid(p, NULL, 0);
  munmap(turn, 4096);
  return t / (2.0 * (double)rounds);
}

int main(void) {
  const long rounds = 200000;
  const int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  for (int rep = 0; rep < 3; rep++) {
    printf("one core, yielding:  %.2f us per turn\n", measure(0, 1, rounds) * 1e6);
    if (cpus > 1) {
      printf("two cores, spinning: %.2f us per turn\n", measure(1, 0, rounds) * 1e6);
    }
  }
  return 0;
}
