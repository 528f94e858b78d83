/* A small stand-alone fuzzing driver for LLVMFuzzerTestOneInput targets, for
 * compilers without libFuzzer (gcc). It runs every file of the corpus, then
 * mutated inputs until a time or run limit, from a fixed seed.
 *
 *   fuzz_<target> [-t SECONDS] [-n RUNS] [-s SEED] [-o DIR] CORPUS...
 *
 * CORPUS is a directory of inputs or a single file (a crash reproducer runs
 * with -n 0). When the target was compiled with -fsanitize-coverage=trace-pc,
 * inputs that reach new code (or a block a new number of times) are kept and
 * mutated further; without it the mutations stay blind. A crash (a failed
 * check, a sanitizer report with abort_on_error=1, a signal) writes the input
 * to DIR/crash-<target>-<run> (DIR: the working directory) and prints its
 * path. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define FUZZ_MAX_INPUT 4096
#define MAX_POOL 4096
#define MAP_BITS 16
#define MAP_SIZE (1u << MAP_BITS)

/* Coverage: a hit counter per (hashed) basic block of this run, and the
 * hit-count classes seen so far by any run. */
static uint8_t cov_run[MAP_SIZE];
static uint8_t cov_seen[MAP_SIZE];
static int cov_live;

void __sanitizer_cov_trace_pc(void) {
  uintptr_t pc = (uintptr_t)__builtin_return_address(0);
  uint32_t h = (uint32_t)((pc ^ (pc >> MAP_BITS) ^ (pc >> 2 * MAP_BITS)) & (MAP_SIZE - 1));
  cov_live = 1;
  if (cov_run[h] != 255) {
    cov_run[h]++;
  }
}

static uint8_t bucket(uint8_t n) {
  return n == 0 ? 0 : n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : n <= 16 ? 8 : n <= 64 ? 16 : 32;
}

/* Whether the last run reached anything new; records it. */
static int cov_new(void) {
  int found = 0;
  for (uint32_t i = 0; i < MAP_SIZE; i++) {
    if (cov_run[i] != 0) {
      uint8_t b = bucket(cov_run[i]);
      if ((cov_seen[i] & b) == 0) {
        cov_seen[i] |= b;
        found = 1;
      }
      cov_run[i] = 0;
    }
  }
  return found;
}

struct input {
  uint8_t* data;
  size_t size;
};

static struct input pool[MAX_POOL];
static int npool;
static uint64_t rng_state;
static const char* target = "fuzz";
static const char* crash_dir = ".";
static const uint8_t* cur_data;
static size_t cur_size;
static unsigned long long cur_run;

static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static size_t below(size_t n) {
  return n == 0 ? 0 : (size_t)(rnd() % n);
}

static void on_crash(int sig) {
  char path[512];
  int n = snprintf(path, sizeof path, "%s/crash-%s-%llu", crash_dir, target, cur_run);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t w = write(fd, cur_data, cur_size);
    (void)w;
    close(fd);
  }
  const char msg[] = "\nfuzz driver: the input that crashed is in ";
  ssize_t w = write(2, msg, sizeof msg - 1);
  w = write(2, path, (size_t)n);
  w = write(2, "\n", 1);
  (void)w;
  signal(sig, SIG_DFL);
  raise(sig);
}

static void run_one(const uint8_t* data, size_t size) {
  /* An exact-size copy, so that the sanitizers see any read past the end. */
  uint8_t* copy = malloc(size ? size : 1);
  memcpy(copy, data, size);
  cur_data = copy;
  cur_size = size;
  cur_run++;
  LLVMFuzzerTestOneInput(copy, size);
  free(copy);
}

static void keep(const uint8_t* data, size_t size) {
  if (npool < MAX_POOL) {
    pool[npool].data = malloc(size ? size : 1);
    memcpy(pool[npool].data, data, size);
    pool[npool].size = size;
    npool++;
  }
}

static int cmp_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static void load_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    return;
  }
  uint8_t buf[FUZZ_MAX_INPUT];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  run_one(buf, n);
  cov_new();
  keep(buf, n);
}

/* Every regular file of `dir`, in name order (so runs repeat exactly). */
static void load_corpus(const char* dir) {
  struct stat st;
  if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
    load_file(dir);
    return;
  }
  DIR* d = opendir(dir);
  if (d == NULL) {
    fprintf(stderr, "fuzz driver: cannot read corpus %s\n", dir);
    return;
  }
  char** names = NULL;
  size_t n = 0;
  for (struct dirent* e = readdir(d); e != NULL; e = readdir(d)) {
    if (e->d_name[0] != '.') {
      names = realloc(names, (n + 1) * sizeof *names);
      names[n++] = strdup(e->d_name);
    }
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  for (size_t i = 0; i < n; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      load_file(path);
    }
    free(names[i]);
  }
  free(names);
}

static const uint32_t interesting32[] = {
    0,    1,    2,    8,     16,     24,      32,         40,         48,         56,        64,
    0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};

/* One random edit of buf[0..*size) (capacity FUZZ_MAX_INPUT). */
static void mutate_once(uint8_t* buf, size_t* size) {
  size_t n = *size;
  switch (below(10)) {
    case 0: /* flip a bit */
      if (n > 0) {
        buf[below(n)] ^= (uint8_t)(1u << below(8));
      }
      break;
    case 1: /* a random byte */
      if (n > 0) {
        buf[below(n)] = (uint8_t)rnd();
      }
      break;
    case 2: /* a small change to a byte */
      if (n > 0) {
        buf[below(n)] += (uint8_t)(below(33) - 16);
      }
      break;
    case 3: /* an interesting big-endian u32 (the wire's integers) */
      if (n >= 4) {
        uint32_t v = interesting32[below(sizeof interesting32 / sizeof interesting32[0])];
        size_t at = below(n - 3);
        buf[at] = (uint8_t)(v >> 24);
        buf[at + 1] = (uint8_t)(v >> 16);
        buf[at + 2] = (uint8_t)(v >> 8);
        buf[at + 3] = (uint8_t)v;
      }
      break;
    case 4: { /* insert random bytes */
      size_t k = 1 + below(16), at = below(n + 1);
      if (n + k <= FUZZ_MAX_INPUT) {
        memmove(buf + at + k, buf + at, n - at);
        for (size_t i = 0; i < k; i++) {
          buf[at + i] = (uint8_t)rnd();
        }
        *size = n + k;
      }
      break;
    }
    case 5: { /* delete a range */
      if (n > 0) {
        size_t at = below(n), k = 1 + below(n - at < 32 ? n - at : 32);
        memmove(buf + at, buf + at + k, n - at - k);
        *size = n - k;
      }
      break;
    }
    case 6: { /* duplicate a range */
      if (n > 0) {
        size_t at = below(n), k = 1 + below(n - at < 64 ? n - at : 64), to = below(n + 1);
        if (n + k <= FUZZ_MAX_INPUT) {
          uint8_t tmp[64];
          memcpy(tmp, buf + at, k);
          memmove(buf + to + k, buf + to, n - to);
          memcpy(buf + to, tmp, k);
          *size = n + k;
        }
      }
      break;
    }
    case 7: { /* splice in a piece of another input */
      const struct input* o = &pool[below((size_t)npool)];
      if (o->size > 0 && n > 0) {
        size_t from = below(o->size), k = 1 + below(o->size - from), at = below(n);
        k = k < n - at ? k : n - at;
        memcpy(buf + at, o->data + from, k);
      }
      break;
    }
    case 8: /* cut the end off */
      if (n > 0) {
        *size = below(n);
      }
      break;
    default: /* an interesting byte */
      if (n > 0) {
        static const uint8_t b[] = {0, 1, 2, 3, 4, 5, 6, 7, 0x7f, 0x80, 0xfe, 0xff};
        buf[below(n)] = b[below(sizeof b)];
      }
      break;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = 10;
  unsigned long long max_runs = ~0ull;
  unsigned long long seed = 1;
  int opt;
  const char* slash = strrchr(argv[0], '/');
  target = slash != NULL ? slash + 1 : argv[0];
  while ((opt = getopt(argc, argv, "t:n:s:o:")) != -1) {
    switch (opt) {
      case 't':
        seconds = atof(optarg);
        break;
      case 'n':
        max_runs = strtoull(optarg, NULL, 0);
        break;
      case 's':
        seed = strtoull(optarg, NULL, 0);
        break;
      case 'o':
        crash_dir = optarg;
        break;
      default:
        fprintf(stderr, "usage: %s [-t seconds] [-n runs] [-s seed] [-o crash-dir] corpus...\n",
                target);
        return 2;
    }
  }
  rng_state = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
  signal(SIGABRT, on_crash);
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGFPE, on_crash);
  signal(SIGILL, on_crash);
  signal(SIGPIPE, SIG_IGN);
  for (int i = optind; i < argc; i++) {
    load_corpus(argv[i]);
  }
  const unsigned long long corpus_runs = cur_run;
  if (npool == 0) {
    keep((const uint8_t*)"", 0);
  }
  const double end = now_s() + seconds;
  uint8_t buf[FUZZ_MAX_INPUT];
  unsigned long long runs = 0;
  int found = 0;
  while (runs < max_runs && ((runs & 63) != 0 || now_s() < end)) {
    const struct input* parent = &pool[below((size_t)npool)];
    size_t size = parent->size;
    memcpy(buf, parent->data, size);
    for (size_t k = 1 + below(4); k > 0; k--) {
      mutate_once(buf, &size);
    }
    run_one(buf, size);
    runs++;
    if (cov_new()) {
      keep(buf, size);
      found++;
    }
  }
  printf(
      "%s: %llu corpus inputs and %llu mutated runs, %d kept for new coverage (%s), seed %llu: "
      "no crash\n",
      target, corpus_runs, runs, found, cov_live ? "coverage-guided" : "blind", seed);
  for (int i = 0; i < npool; i++) {
    free(pool[i].data);
  }
  return 0;
}
