/* Tune: the NCCL_ALGO and NCCL_PROTO parsers, the plan and its reason for
 * host and device calls, TUTTI_TUNE's ranges, NCCL_DEBUG_SUBSYS=TUNING
 * printing each distinct call shape once, and a call's own configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tune/tune.h"
#include "util/check.h"

/* What a device communicator of two GPUs that map each other offers, with
 * the device executor's limits as built: the mapped kernel's inboxes,
 * LL128's, the copy engines'. */
static struct tutti_dev_caps caps_of(int mapped, int ll128, int ce) {
  struct tutti_dev_caps c;
  memset(&c, 0, sizeof c);
  c.lim = (struct tutti_dev_limits){64, 4, 512, 128, 8, 128, 8, 128, 128, 8192, 128, 120};
  c.colls = 1u << TUTTI_COLL_ALLREDUCE | 1u << TUTTI_COLL_BROADCAST | 1u << TUTTI_COLL_REDUCE |
            1u << TUTTI_COLL_ALLGATHER | 1u << TUTTI_COLL_REDUCESCATTER;
  c.channels = 64;
  c.threads = 512;
  c.ctas = 132;
  c.mapped_ctas = 132;
  c.mapped_chan_bytes = mapped ? 512 << 10 : 0;
  c.ll128_chan_bytes = ll128 ? 128 << 10 : 0;
  c.ce_slot_bytes = ce ? 16 << 20 : 0;
  return c;
}

/* The plan of `a` launched with nops - 1 more calls like it. */
static void plan_launch(const struct tutti_coll_args* a, int premulsum, int nops,
                        const struct tutti_dev_caps* c, struct tutti_plan* p) {
  struct tutti_tune_call calls[8];
  struct tutti_plan plans[8];
  for (int i = 0; i < nops && i < 8; i++) {
    calls[i].args = a;
    calls[i].premulsum = premulsum;
  }
  tutti_tune_launch(calls, nops, c, plans);
  *p = plans[0];
}

static struct tutti_coll_args args(enum tutti_coll coll, size_t bytes, int nranks) {
  struct tutti_coll_args a;
  memset(&a, 0, sizeof a);
  a.coll = coll;
  a.count = bytes / 4;
  a.elem_size = 4;
  a.nranks = nranks;
  a.nhosts = 1;
  a.max_local = nranks;
  return a;
}

static void test_parsers(void) {
  const struct {
    const char* spec;
    int mask;
  } protos[] = {{NULL, TUTTI_PROTO_ALL},
                {"", TUTTI_PROTO_ALL},
                {"LL", TUTTI_PROTO_LL},
                {"ll128", TUTTI_PROTO_LL128},
                {"^LL", TUTTI_PROTO_SIMPLE | TUTTI_PROTO_LL128},
                {"Simple,LL128", TUTTI_PROTO_SIMPLE | TUTTI_PROTO_LL128},
                {"^LL,Simple,LL128", TUTTI_PROTO_ALL}, /* nothing left: as if unset */
                {"bogus", TUTTI_PROTO_ALL}};
  for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++) {
    int m = tutti_tune_parse_proto(protos[i].spec);
    CHECK(m == protos[i].mask, "NCCL_PROTO=\"%s\": mask %d, expected %d",
          protos[i].spec ? protos[i].spec : "(unset)", m, protos[i].mask);
  }
  unsigned allowed[TUTTI_COLL_COUNT];
  tutti_tune_parse_algo("Ring", allowed);
  CHECK(allowed[TUTTI_COLL_ALLREDUCE] == 1u << TUTTI_ALGO_RING, "NCCL_ALGO=Ring: ring only");
  tutti_tune_parse_algo("allreduce:direct;broadcast:^ring", allowed);
  CHECK(allowed[TUTTI_COLL_ALLREDUCE] == 1u << TUTTI_ALGO_DIRECT, "per collective: allreduce");
  CHECK(!(allowed[TUTTI_COLL_BROADCAST] & (1u << TUTTI_ALGO_RING)) &&
            (allowed[TUTTI_COLL_BROADCAST] & (1u << TUTTI_ALGO_DIRECT)),
        "per collective: broadcast without the ring");
  CHECK(allowed[TUTTI_COLL_ALLGATHER] == (1u << TUTTI_ALGO_COUNT) - 1, "others untouched");
}

static void test_plans(void) {
  struct tutti_plan p;
  struct tutti_coll_args a = args(TUTTI_COLL_ALLREDUCE, 64, 4);
  a.board_bytes = 64 * 1024;
  tutti_tune_plan(&a, &p);
  CHECK(p.algo == TUTTI_ALGO_BOARD && strstr(p.why, "board") != NULL,
        "64 B allreduce on one host's board: %s (%s)", tutti_algo_get(p.algo)->name, p.why);
  a = args(TUTTI_COLL_ALLREDUCE, 64 << 20, 4);
  tutti_tune_plan(&a, &p);
  CHECK(p.algo == TUTTI_ALGO_RING && strstr(p.why, "ring") != NULL, "64 MB allreduce: %s (%s)",
        tutti_algo_get(p.algo)->name, p.why);
  a.nhosts = 2;
  a.max_local = 2;
  tutti_tune_plan(&a, &p);
  CHECK(p.algo == TUTTI_ALGO_HIER && strstr(p.why, "hier") != NULL,
        "64 MB allreduce, 2 hosts of 2 ranks: %s (%s)", tutti_algo_get(p.algo)->name, p.why);
  a = args(TUTTI_COLL_ALLREDUCE, 64 << 20, 2);
  a.device = 1;
  const struct tutti_dev_caps none = caps_of(0, 0, 0);
  plan_launch(&a, 0, 1, &none, &p);
  CHECK(p.path == TUTTI_PATH_SCHEDULE && p.algo == TUTTI_ALGO_RING &&
            strstr(p.why, "schedule") != NULL,
        "device allreduce: %s (%s)", tutti_algo_get(p.algo)->name, p.why);
  a = args(TUTTI_COLL_ALLTOALL, 64 << 20, 4);
  tutti_tune_plan(&a, &p);
  CHECK(p.algo == TUTTI_ALGO_DIRECT && p.why != NULL && p.why[0] != '\0',
        "all-to-all has no ring: %s (%s)", tutti_algo_get(p.algo)->name, p.why);
}

/* Device launches: the path and protocol for what the communicator offers
 * (two GPUs mapping each other, LL128 inboxes off, copy-engine slots), and
 * how each path cuts the call. */
static void test_device_paths(void) {
  const struct {
    enum tutti_coll coll;
    size_t bytes;
    int nranks, nops, one_process, premulsum, capturing;
    int path, proto;
  } cases[] = {
      {TUTTI_COLL_ALLREDUCE, 8, 2, 1, 0, 0, 0, TUTTI_PATH_MAPPED, TUTTI_PROTO_LL},
      {TUTTI_COLL_ALLREDUCE, 1 << 20, 2, 1, 0, 0, 0, TUTTI_PATH_MAPPED, TUTTI_PROTO_LL},
      {TUTTI_COLL_ALLREDUCE, 8 << 20, 2, 1, 0, 0, 0, TUTTI_PATH_MAPPED, TUTTI_PROTO_SIMPLE},
      {TUTTI_COLL_ALLREDUCE, 32 << 20, 2, 1, 0, 0, 0, TUTTI_PATH_SCHEDULE, -1},
      {TUTTI_COLL_ALLREDUCE, 64 << 20, 2, 1, 1, 0, 0, TUTTI_PATH_COPY_ENGINES, TUTTI_PROTO_SIMPLE},
      {TUTTI_COLL_ALLREDUCE, 64 << 20, 2, 1, 1, 0, 1, TUTTI_PATH_SCHEDULE, -1},
      {TUTTI_COLL_ALLREDUCE, 64 << 20, 2, 1, 1, 1, 0, TUTTI_PATH_SCHEDULE, -1},
      {TUTTI_COLL_REDUCESCATTER, 32 << 20, 2, 1, 0, 0, 0, TUTTI_PATH_COPY_ENGINES, -1},
      {TUTTI_COLL_REDUCESCATTER, 16 << 20, 2, 1, 0, 0, 0, TUTTI_PATH_MAPPED, -1},
      {TUTTI_COLL_BROADCAST, 4 << 20, 2, 1, 0, 0, 0, TUTTI_PATH_MAPPED, -1},
      {TUTTI_COLL_BROADCAST, 8 << 20, 2, 1, 0, 0, 0, TUTTI_PATH_SCHEDULE, -1},
      {TUTTI_COLL_ALLREDUCE, 1 << 20, 4, 1, 0, 0, 0, TUTTI_PATH_MAPPED, TUTTI_PROTO_LL},
      {TUTTI_COLL_ALLREDUCE, 2 << 20, 4, 1, 0, 0, 0, TUTTI_PATH_SCHEDULE, -1},
      {TUTTI_COLL_ALLREDUCE, 64 << 20, 4, 1, 1, 0, 0, TUTTI_PATH_SCHEDULE, -1},
      {TUTTI_COLL_ALLREDUCE, 8, 16, 1, 0, 0, 0, TUTTI_PATH_SCHEDULE, -1},
      {TUTTI_COLL_ALLREDUCE, 8, 2, 2, 0, 0, 0, TUTTI_PATH_SCHEDULE, -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct tutti_coll_args a = args(cases[i].coll, cases[i].bytes, cases[i].nranks);
    a.device = 1;
    struct tutti_dev_caps c = caps_of(1, 0, 1);
    c.one_process = cases[i].one_process;
    c.capturing = cases[i].capturing;
    struct tutti_plan p;
    plan_launch(&a, cases[i].premulsum, cases[i].nops, &c, &p);
    CHECK(p.path == cases[i].path && (cases[i].proto < 0 || p.proto == cases[i].proto),
          "device %s of %zu bytes, %d ranks, %d ops: path %d proto %d (%s), expected %d / %d",
          tutti_coll_name(cases[i].coll), cases[i].bytes, cases[i].nranks, cases[i].nops, p.path,
          p.proto, p.why, cases[i].path, cases[i].proto);
  }
  /* The schedules' kernel: LL at 4 KB in 256 threads, not through a
   * network proxy; simple at 16 KB on one channel; 16 channels for 1 MB. */
  const struct tutti_dev_caps none = caps_of(0, 0, 0);
  struct tutti_dev_caps net = none;
  net.net = 1;
  struct tutti_plan p;
  struct tutti_coll_args a = args(TUTTI_COLL_ALLREDUCE, 4096, 4);
  a.device = 1;
  plan_launch(&a, 0, 1, &none, &p);
  CHECK(p.proto == TUTTI_PROTO_LL && p.threads == 256 && p.channels == 1,
        "4 KB: LL, 256 threads, one channel (%d, %d, %d)", p.proto, p.threads, p.channels);
  plan_launch(&a, 0, 1, &net, &p);
  CHECK(p.proto == TUTTI_PROTO_SIMPLE && p.threads == 512, "through the proxy: simple lines");
  a = args(TUTTI_COLL_ALLREDUCE, 16384, 4);
  a.device = 1;
  plan_launch(&a, 0, 1, &none, &p);
  CHECK(p.proto == TUTTI_PROTO_SIMPLE && p.channels == 1, "16 KB: simple, one channel");
  a = args(TUTTI_COLL_ALLREDUCE, 1 << 20, 4);
  a.device = 1;
  plan_launch(&a, 0, 1, &none, &p);
  CHECK(p.channels == 16, "1 MB: 16 channels (%d)", p.channels);
  /* Eight such calls in one launch share its 128 blocks. */
  plan_launch(&a, 0, 8, &none, &p);
  CHECK(p.channels == 8, "1 MB, eight in a launch: 8 channels each (%d)", p.channels);
  /* The mapped kernel: 8 MB in blocks of 32 KB, at most 128; 64 KB rounds. */
  const struct tutti_dev_caps all = caps_of(1, 0, 1);
  a = args(TUTTI_COLL_ALLREDUCE, 8 << 20, 2);
  a.device = 1;
  plan_launch(&a, 0, 1, &all, &p);
  CHECK(p.path == TUTTI_PATH_MAPPED && p.blocks == 128 && p.round_bytes == 64 << 10 &&
            p.slots == 8 && p.threads == 512,
        "8 MB mapped: %d blocks, %zu-byte rounds, %d slots, %d threads", p.blocks, p.round_bytes,
        p.slots, p.threads);
  /* The copy engines: 40 MB reduce-scatter in 16 MB pieces, the last 8 MB. */
  a = args(TUTTI_COLL_REDUCESCATTER, 40 << 20, 2);
  a.device = 1;
  plan_launch(&a, 0, 1, &all, &p);
  CHECK(p.path == TUTTI_PATH_COPY_ENGINES && p.piece_bytes == 16 << 20 && p.blocks == 132 &&
            p.last_blocks == 132,
        "40 MB copy engines: pieces of %zu, %d / %d blocks", p.piece_bytes, p.blocks,
        p.last_blocks);
}

static void test_override_parse(void) {
  struct tutti_tune_rule r[8];
  char err[256];
  int n = tutti_tune_parse_override(
      "allreduce:0-64k:@board#64k-inf:@Ring;allgather,broadcast:1m-"
      "inf:@pull;all:0-0:@direct",
      r, 8, NULL, err, sizeof err);
  CHECK(n == 4, "four ranges: %d (%s)", n, err);
  CHECK(n == 4 && r[0].colls == 1u << TUTTI_COLL_ALLREDUCE && r[0].lo == 0 &&
            r[0].hi == 64 * 1024 && r[0].algo == TUTTI_ALGO_BOARD,
        "allreduce 0-64k board");
  CHECK(n == 4 && r[1].lo == 64 * 1024 && r[1].hi == SIZE_MAX && r[1].algo == TUTTI_ALGO_RING,
        "64k-inf ring (names are case-insensitive)");
  CHECK(n == 4 && r[2].colls == ((1u << TUTTI_COLL_ALLGATHER) | (1u << TUTTI_COLL_BROADCAST)) &&
            r[2].lo == 1 << 20 && r[2].algo == TUTTI_ALGO_PULL,
        "two collectives, 1m-inf pull");
  CHECK(n == 4 && r[3].colls == ~0u && r[3].algo == TUTTI_ALGO_DIRECT, "all: every collective");
  int64_t k[TUTTI_KNOB_COUNT];
  n = tutti_tune_parse_override("ce.piece=8m;allreduce:1m-inf:@CE;Mapped.LL=256k;ll=0", r, 8, k,
                                err, sizeof err);
  CHECK(n == 1 && r[0].algo == TUTTI_ALGO_CE && k[TUTTI_KNOB_CE_PIECE] == 8 << 20 &&
            k[TUTTI_KNOB_MAPPED_LL] == 256 << 10 && k[TUTTI_KNOB_LL] == 0 &&
            k[TUTTI_KNOB_CE_BLOCK] == -1,
        "sizes beside rows: %d (%s)", n, err);
  const char* bad[] = {"allreduce:0-64k:@bogus",
                       "nope:0-1k:@ring",
                       "allreduce:64k-1k:@ring",
                       "allreduce:0-64k",
                       "allreduce:1x-2:@ring",
                       "allreduce",
                       "ce.piece=1",
                       "nosuch=4k",
                       "mapped.ll_threads=4k",
                       "mapped.round=-1",
                       "ce.piece=8q"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    CHECK(tutti_tune_parse_override(bad[i], r, 8, k, err, sizeof err) < 0 && err[0] != '\0',
          "\"%s\" refused: %s", bad[i], err);
  }
  setenv("TUTTI_TUNE", "allreduce:0-64k:@bogus", 1);
  CHECK(tutti_tune_check() == ncclInvalidArgument && strstr(tutti_last_error(), "TUTTI_TUNE") &&
            strstr(tutti_last_error(), "bogus"),
        "a bad TUTTI_TUNE fails the init: %s", tutti_last_error());
  unsetenv("TUTTI_TUNE");
  CHECK(tutti_tune_check() == ncclSuccess, "no TUTTI_TUNE: fine");
}

/* TUTTI_TUNE is parsed once per process: a child applies one, and keeps
 * it when the variable changes. */
static void test_override_applied(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TUTTI_TUNE", "allreduce:0-64k:@ring#64k-inf:@direct;reducescatter:0-inf:@pull", 1);
    struct tutti_plan p;
    struct tutti_coll_args a = args(TUTTI_COLL_ALLREDUCE, 64, 4);
    a.board_bytes = 64 * 1024;
    int bad = 0;
    tutti_tune_plan(&a, &p);
    bad += p.algo != TUTTI_ALGO_RING || strcmp(p.why, "TUTTI_TUNE") != 0;
    a = args(TUTTI_COLL_ALLREDUCE, 1 << 20, 4);
    tutti_tune_plan(&a, &p);
    bad += p.algo != TUTTI_ALGO_DIRECT;
    a = args(TUTTI_COLL_REDUCESCATTER, 1 << 20, 2);
    a.can_pull = 1; /* between processes: not worth it by default, named here */
    tutti_tune_plan(&a, &p);
    bad += p.algo != TUTTI_ALGO_PULL;
    a.can_pull = 0; /* cannot run: the default rows */
    tutti_tune_plan(&a, &p);
    bad += p.algo != TUTTI_ALGO_RING;
    /* Parsed once: a value set later changes no plan, and is only checked. */
    setenv("TUTTI_TUNE", "allreduce:0-inf:@direct", 1);
    a = args(TUTTI_COLL_ALLREDUCE, 64, 4);
    tutti_tune_plan(&a, &p);
    bad += p.algo != TUTTI_ALGO_RING || tutti_tune_check() != ncclSuccess;
    setenv("TUTTI_TUNE", "allreduce:0-inf:@nope", 1);
    bad += tutti_tune_check() != ncclInvalidArgument || strstr(tutti_last_error(), "nope") == NULL;
    _exit(bad);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "TUTTI_TUNE's ranges applied (%d wrong)",
        WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* TUTTI_TUNE and NCCL_ALGO choose device paths as they choose schedules,
 * and its sizes cut the call. */
static void test_override_device(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TUTTI_TUNE",
           "broadcast:0-inf:@ring;all:1-inf:@ce;allgather:0-inf:@mapped;"
           "mapped.block=64k;ce.piece=8m;ce.block=16k",
           1);
    setenv("NCCL_ALGO", "^Mapped", 1);
    const struct tutti_dev_caps c = caps_of(1, 0, 1);
    struct tutti_plan p;
    int bad = 0;
    struct tutti_coll_args a = args(TUTTI_COLL_ALLREDUCE, 4096, 4);
    a.device = 1;
    plan_launch(&a, 0, 1, &c, &p); /* forced: also on 4 ranks, small */
    bad += p.path != TUTTI_PATH_COPY_ENGINES || p.piece_bytes != 8 << 20 || p.last_blocks != 1;
    a = args(TUTTI_COLL_ALLREDUCE, 24 << 20, 2);
    a.device = 1;
    plan_launch(&a, 0, 1, &c, &p); /* 8 MB pieces, 16 KB blocks */
    bad += p.path != TUTTI_PATH_COPY_ENGINES || p.piece_bytes != 8 << 20 || p.blocks != 132 ||
           p.last_blocks != 132;
    a.coll = TUTTI_COLL_BROADCAST;
    plan_launch(&a, 0, 1, &c, &p); /* the first row: a schedule */
    bad += p.path != TUTTI_PATH_SCHEDULE;
    a = args(TUTTI_COLL_ALLGATHER, 4096, 2);
    a.device = 1;
    const struct tutti_dev_caps c2 = caps_of(1, 0, 0); /* the ce row cannot run; */
    plan_launch(&a, 0, 1, &c2, &p);                    /* Mapped is left out by NCCL_ALGO */
    bad += p.path != TUTTI_PATH_SCHEDULE;
    _exit(bad);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "device paths forced and left out (%d wrong)",
        WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  pid = fork();
  if (pid == 0) {
    setenv("TUTTI_TUNE", "mapped.block=64k;mapped.round=16k", 1);
    const struct tutti_dev_caps c = caps_of(1, 0, 0);
    struct tutti_plan p;
    struct tutti_coll_args a = args(TUTTI_COLL_ALLREDUCE, 4 << 20, 2);
    a.device = 1;
    plan_launch(&a, 0, 1, &c, &p);
    _exit(p.path != TUTTI_PATH_MAPPED || p.proto != TUTTI_PROTO_SIMPLE || p.blocks != 64 ||
          p.round_bytes != 16 << 10 || p.slots != 32);
  }
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the mapped kernel's cut from TUTTI_TUNE");
}

static void test_first_sight(void) {
  struct tutti_coll_args a = args(TUTTI_COLL_ALLGATHER, 1000, 3);
  uint64_t s = tutti_tune_shape(&a, TUTTI_PATH_SCHEDULE);
  CHECK(tutti_tune_first_sight(s) == 1 && tutti_tune_first_sight(s) == 0, "a shape is new once");
  a.count++;
  CHECK(tutti_tune_shape(&a, TUTTI_PATH_SCHEDULE) != s, "another size, another shape");
  struct tutti_coll_args b = args(TUTTI_COLL_ALLGATHER, 1000, 3);
  CHECK(tutti_tune_shape(&b, TUTTI_PATH_MAPPED) != s, "another path, another shape");
}

/* A child with TUNING on plans one shape five times and another once: two
 * lines. Logging reads its variables once per process, so this runs before
 * anything in this process logs. */
static void test_tuning_lines(void) {
  char path[] = "/tmp/tutti-tune-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "temporary file");
  close(fd);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
    setenv("NCCL_DEBUG_FILE", path, 1);
    struct tutti_plan p;
    struct tutti_coll_args a = args(TUTTI_COLL_REDUCESCATTER, 12345 * 4, 5);
    for (int i = 0; i < 5; i++) {
      tutti_tune_plan(&a, &p);
    }
    a.in_place = 1;
    tutti_tune_plan(&a, &p);
    /* A device launch: one line naming its path, however often it runs. */
    struct tutti_coll_args d = args(TUTTI_COLL_ALLREDUCE, 4096, 2);
    d.device = 1;
    const struct tutti_dev_caps caps = caps_of(1, 0, 0);
    struct tutti_plan dp;
    for (int i = 0; i < 3; i++) {
      plan_launch(&d, 0, 1, &caps, &dp);
    }
    _exit(0);
  }
  waitpid(pid, NULL, 0);
  FILE* f = fopen(path, "r");
  char line[512];
  int lines = 0, placed = 0, device = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    device +=
        strstr(line, "AllReduce of 4096 bytes, 2 ranks, device buffers: mapped kernel, LL") != NULL;
    if (strstr(line, "ReduceScatter of 49380 bytes") != NULL) {
      lines++;
      placed += strstr(line, "in place") != NULL;
    }
  }
  if (f != NULL) {
    fclose(f);
  }
  unlink(path);
  CHECK(lines == 2 && placed == 1, "TUNING: one line per distinct shape (%d lines, %d in place)",
        lines, placed);
  CHECK(device == 1, "TUNING: one line for three launches of one device shape (%d)", device);
}

/* A call's own configuration (ncclCollConfig_t): algSelection's grammar,
 * the plan kept within it, the device channels within minCTAs/maxCTAs. */
static void test_call_config(void) {
  unsigned m = 0;
  char err[256];
  const unsigned ring = 1u << TUTTI_ALGO_RING, direct = 1u << TUTTI_ALGO_DIRECT;
  const unsigned all = (1u << TUTTI_ALGO_COUNT) - 1;
  CHECK(tutti_tune_parse_selection("Ring", &m, err, sizeof err) == 0 && m == ring, "Ring: %x", m);
  CHECK(tutti_tune_parse_selection(" ring_simple , DIRECT ", &m, err, sizeof err) == 0 &&
            m == (ring | direct),
        "RING_SIMPLE,Direct: %x", m);
  CHECK(tutti_tune_parse_selection("TREE", &m, err, sizeof err) == 0 &&
            m == (1u << TUTTI_ALGO_TREE | 1u << TUTTI_ALGO_HIER),
        "TREE: %x", m);
  CHECK(tutti_tune_parse_selection("^Ring", &m, err, sizeof err) == 0 && m == (all & ~ring),
        "^Ring: %x", m);
  CHECK(tutti_tune_parse_selection("NVLS+^Mapped", &m, err, sizeof err) == 0 && m == direct,
        "NVLS+^Mapped: %x", m);
  CHECK(tutti_tune_parse_selection("Ring+^Ring", &m, err, sizeof err) != 0 &&
            strstr(err, "selects nothing") != NULL,
        "Ring+^Ring: %s", err);
  CHECK(tutti_tune_parse_selection("Bogus", &m, err, sizeof err) != 0 &&
            strstr(err, "\"Bogus\"") != NULL,
        "Bogus: %s", err);
  CHECK(tutti_tune_parse_selection("^", &m, err, sizeof err) != 0, "a bare ^");

  /* Host: the plan takes what the call allows. */
  struct tutti_plan p;
  struct tutti_coll_args a = args(TUTTI_COLL_ALLREDUCE, 64, 4);
  a.call_algos = ring;
  tutti_tune_plan(&a, &p);
  CHECK(p.algo == TUTTI_ALGO_RING, "64 B allreduce within Ring: %s (%s)",
        tutti_algo_get(p.algo)->name, p.why);
  CHECK(tutti_tune_runnable(&a, 1u << TUTTI_ALGO_MAPPED) == 0, "no mapped kernel on the host");
  CHECK((tutti_tune_implements(TUTTI_COLL_ALLTOALL) & ring) == 0, "no ring all-to-all");

  /* Device: channels within the call's bounds, the algorithm within its
   * selection. */
  const struct tutti_dev_caps none = caps_of(0, 0, 0);
  a = args(TUTTI_COLL_ALLREDUCE, 64 << 20, 2);
  a.device = 1;
  plan_launch(&a, 0, 1, &none, &p);
  const int wide = p.channels;
  a.max_channels = 2;
  plan_launch(&a, 0, 1, &none, &p);
  CHECK(wide > 2 && p.channels == 2, "maxCTAs 2: %d channels (%d without)", p.channels, wide);
  a = args(TUTTI_COLL_ALLREDUCE, 4096, 2);
  a.device = 1;
  plan_launch(&a, 0, 1, &none, &p);
  const int narrow = p.channels;
  a.min_channels = 8;
  plan_launch(&a, 0, 1, &none, &p);
  CHECK(narrow < 8 && p.channels == 8, "minCTAs 8: %d channels (%d without)", p.channels, narrow);
  a.min_channels = 0;
  a.call_algos = direct;
  plan_launch(&a, 0, 1, &none, &p);
  CHECK(p.path == TUTTI_PATH_SCHEDULE && p.algo == TUTTI_ALGO_DIRECT, "device within Direct: %s",
        tutti_algo_get(p.algo)->name);
}

int main(void) {
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  /* First: their children must read the variables themselves (read once
   * per process, and a child inherits what its parent read). */
  test_tuning_lines();
  test_override_applied();
  test_override_device();
  test_parsers();
  test_plans();
  test_device_paths();
  test_override_parse();
  test_first_sight();
  test_call_config();
  return test_summary("tune");
}
