/* Parsing the command line and the launcher's environment (see args.h). */
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colls.h"
#include "data.h"

enum { OPT_LIB = 256, OPT_JSON, OPT_DEVICE, OPT_LABEL, OPT_SHARE };

static const struct option long_opts[] = {
    {"nthreads", required_argument, 0, 't'},
    {"ngpus", required_argument, 0, 'g'},
    {"minbytes", required_argument, 0, 'b'},
    {"maxbytes", required_argument, 0, 'e'},
    {"stepbytes", required_argument, 0, 'i'},
    {"stepfactor", required_argument, 0, 'f'},
    {"iters", required_argument, 0, 'n'},
    {"agg_iters", required_argument, 0, 'm'},
    {"warmup_iters", required_argument, 0, 'w'},
    {"parallel_init", required_argument, 0, 'p'},
    {"check", required_argument, 0, 'c'},
    {"op", required_argument, 0, 'o'},
    {"datatype", required_argument, 0, 'd'},
    {"root", required_argument, 0, 'r'},
    {"blocking", required_argument, 0, 'z'},
    {"stream_null", required_argument, 0, 'y'},
    {"timeout", required_argument, 0, 'T'},
    {"cudagraph", required_argument, 0, 'G'},
    {"report_cputime", required_argument, 0, 'C'},
    {"average", required_argument, 0, 'a'},
    {"lib", required_argument, 0, OPT_LIB},
    {"json", required_argument, 0, OPT_JSON},
    {"device", required_argument, 0, OPT_DEVICE},
    {"label", required_argument, 0, OPT_LABEL},
    {"share-gpus", no_argument, 0, OPT_SHARE},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

static void usage(FILE* f, const char* prog) {
  fprintf(
      f,
      "Usage: %s [COLLECTIVE] [options]\n"
      "Measures and verifies one NCCL-API collective, as nccl-tests does.\n"
      "COLLECTIVE: allreduce (default), allgather, reducescatter, broadcast, reduce,\n"
      "            alltoall, gather, scatter, sendrecv, putsignal (one-sided ring)\n"
      "  -t,--nthreads N         threads per process, each driving -g ranks [1]\n"
      "  -g,--ngpus N            ranks (GPUs) per thread [1]\n"
      "  -b,--minbytes SIZE      smallest size, e.g. 8, 64K, 1M [32M]\n"
      "  -e,--maxbytes SIZE      largest size [32M]\n"
      "  -i,--stepbytes SIZE     step between sizes when -f is 1 [1M]\n"
      "  -f,--stepfactor N       multiply the size by N at each step [1]\n"
      "  -n,--iters N            timed iterations [20]\n"
      "  -w,--warmup_iters N     warm-up iterations [5]\n"
      "  -m,--agg_iters N        operations aggregated in one group per iteration [1]\n"
      "  -c,--check N            verification passes per size, 0 to skip [1]\n"
      "  -o,--op OP              sum, prod, max, min, avg, mulsum or all [sum]\n"
      "  -d,--datatype TYPE      int8, uint8, int32, uint32, int64, uint64, half, float,\n"
      "                          double, bfloat16, f8e4m3, f8e5m2 or all [float]\n"
      "  -r,--root N             root of rooted collectives, -1 for every root [0]\n"
      "  -a,--average N          time reported: 0 rank 0, 1 average, 2 min, 3 max [1]\n"
      "  -p,--parallel_init 0/1  every thread creates its own communicators [0]\n"
      "  -z,--blocking 0/1       wait and barrier after every collective [0]\n"
      "  -y,--stream_null 0/1    GPU mode: use the default stream [0]\n"
      "  -T,--timeout SEC        give up when nothing completes for SEC seconds [0: never];\n"
      "                          TUTTI_TIMEOUT, unless set, becomes 2/3 of it\n"
      "  -G,--cudagraph N        GPU mode: capture the iterations and launch the graph N times\n"
      "  -C,--report_cputime 0/1 report the time to issue the calls rather than complete them\n"
      "  --lib PATH              NCCL-API library to load [libtutti.so.0 of this build]\n"
      "  --device host|gpu|auto  where buffers live [auto: gpu when CUDA sees a GPU]\n"
      "  --label NAME            library name in the output and JSON [from the file name]\n"
      "  --share-gpus            more ranks than visible GPUs: rank i uses GPU i mod count\n"
      "                          (tutti runs several ranks per GPU; NCCL refuses)\n"
      "  --json FILE             also write every row to FILE as JSON\n"
      "  -h,--help               this text\n"
      "Several processes (torchrun, tuttirun, mpirun, srun) each run -t threads; set\n"
      "NCCL_COMM_ID=host:port so that all of them agree on the unique id.\n",
      prog);
}

__attribute__((noreturn)) static void bad(const char* prog, const char* fmt, const char* a,
                                          const char* b) {
  fprintf(stderr, "%s: ", prog);
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\nUsage: %s [COLLECTIVE] [options]; %s --help lists them\n", prog, prog);
  exit(2);
}

static long parse_int(const char* prog, const char* flag, const char* s, long lo, long hi) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    bad(prog, "invalid value '%s' for %s", s, flag);
  }
  return v;
}

/* 8, 64K, 1.5M, 2G, 128MB: binary units, as nccl-tests. */
static size_t parse_size(const char* prog, const char* flag, const char* s) {
  char* end;
  errno = 0;
  double v = strtod(s, &end);
  double unit = 1;
  switch (*end) {
    case 'k':
    case 'K':
      unit = 1024.0;
      end++;
      break;
    case 'm':
    case 'M':
      unit = 1024.0 * 1024;
      end++;
      break;
    case 'g':
    case 'G':
      unit = 1024.0 * 1024 * 1024;
      end++;
      break;
    case 't':
    case 'T':
      unit = 1024.0 * 1024 * 1024 * 1024;
      end++;
      break;
    default:
      break;
  }
  if (unit > 1 && (*end == 'i' || *end == 'I')) {
    end++;
  }
  if (*end == 'b' || *end == 'B') {
    end++;
  }
  if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v * unit > 1e18) {
    bad(prog, "invalid size '%s' for %s", s, flag);
  }
  return (size_t)(v * unit);
}

static void parse_types(const char* prog, const char* s, struct perf_opts* o) {
  if (strcmp(s, "all") == 0) {
    /* nccl-tests' "all": the classic ten; 8-bit floats only when named. */
    o->ntypes = 0;
    for (int t = 0; t <= ncclBfloat16; t++) {
      o->types[o->ntypes++] = (ncclDataType_t)t;
    }
    return;
  }
  int t = perf_type_parse(s);
  if (t < 0) {
    bad(prog, "unknown datatype '%s'%s", s, "");
  }
  o->types[0] = (ncclDataType_t)t;
  o->ntypes = 1;
}

static void parse_ops(const char* prog, const char* s, struct perf_opts* o) {
  if (strcmp(s, "all") == 0) {
    o->nops = 0;
    for (int op = 0; op <= PERF_OP_MULSUM; op++) {
      o->ops[o->nops++] = op;
    }
    return;
  }
  int op = perf_op_parse(s);
  if (op < 0) {
    bad(prog, "unknown op '%s'%s", s, "");
  }
  o->ops[0] = op;
  o->nops = 1;
}

static void defaults(struct perf_opts* o) {
  memset(o, 0, sizeof *o);
  o->coll = &perf_colls[0];
  o->nthreads = o->ngpus = 1;
  o->minbytes = o->maxbytes = 32u << 20;
  o->stepbytes = 1u << 20;
  o->stepfactor = 1;
  o->iters = 20;
  o->warmup = 5;
  o->agg_iters = 1;
  o->check = 1;
  o->average = 1;
  o->types[0] = ncclFloat32;
  o->ntypes = 1;
  o->ops[0] = ncclSum;
  o->nops = 1;
  o->device = PERF_DEV_AUTO;
}

static void record_cmdline(int argc, char** argv, struct perf_opts* o) {
  size_t n = 0;
  for (int i = 0; i < argc && n + 2 < sizeof o->cmdline; i++) {
    int w = snprintf(o->cmdline + n, sizeof o->cmdline - n, "%s%s", i ? " " : "", argv[i]);
    n += w > 0 ? (size_t)w : 0;
  }
}

void perf_args_parse(int argc, char** argv, struct perf_opts* o) {
  defaults(o);
  record_cmdline(argc, argv, o);
  const char* prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  const struct perf_coll* by_name = perf_coll_find(prog);
  if (by_name != NULL) {
    o->coll = by_name; /* all_reduce_perf -> allreduce, like nccl-tests' binaries */
  }
  const char* ops = NULL;
  int c;
  opterr = 0; /* our own message, then the usage */
  while ((c = getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:G:C:a:h", long_opts,
                          NULL)) != -1) {
    char flag[3] = {'-', (char)c, '\0'};
    switch (c) {
      case 't':
        o->nthreads = (int)parse_int(prog, flag, optarg, 1, 1024);
        break;
      case 'g':
        o->ngpus = (int)parse_int(prog, flag, optarg, 1, 1024);
        break;
      case 'b':
        o->minbytes = parse_size(prog, flag, optarg);
        break;
      case 'e':
        o->maxbytes = parse_size(prog, flag, optarg);
        break;
      case 'i':
        o->stepbytes = parse_size(prog, flag, optarg);
        break;
      case 'f':
        o->stepfactor = (size_t)parse_int(prog, flag, optarg, 1, 1 << 20);
        break;
      case 'n':
        o->iters = (int)parse_int(prog, flag, optarg, 1, 1 << 30);
        break;
      case 'm':
        o->agg_iters = (int)parse_int(prog, flag, optarg, 1, 1 << 20);
        break;
      case 'w':
        o->warmup = (int)parse_int(prog, flag, optarg, 0, 1 << 30);
        break;
      case 'p':
        o->parallel_init = (int)parse_int(prog, flag, optarg, 0, 1);
        break;
      case 'c':
        o->check = (int)parse_int(prog, flag, optarg, 0, 1 << 20);
        break;
      case 'o':
        ops = optarg;
        break;
      case 'd':
        parse_types(prog, optarg, o);
        break;
      case 'r':
        o->root = (int)parse_int(prog, flag, optarg, -1, 1 << 30);
        break;
      case 'z':
        o->blocking = (int)parse_int(prog, flag, optarg, 0, 1);
        break;
      case 'y':
        o->stream_null = (int)parse_int(prog, flag, optarg, 0, 1);
        break;
      case 'T':
        o->timeout_s = (int)parse_int(prog, flag, optarg, 0, 1 << 30);
        break;
      case 'G':
        o->graphs = (int)parse_int(prog, flag, optarg, 0, 1 << 20);
        break;
      case 'C':
        o->report_cputime = (int)parse_int(prog, flag, optarg, 0, 1);
        break;
      case 'a':
        o->average = (int)parse_int(prog, flag, optarg, 0, 3);
        break;
      case OPT_LIB:
        o->lib = optarg;
        break;
      case OPT_JSON:
        o->json = optarg;
        break;
      case OPT_SHARE:
        o->share_gpus = 1;
        break;
      case OPT_LABEL:
        o->label = optarg;
        break;
      case OPT_DEVICE:
        if (strcmp(optarg, "host") == 0 || strcmp(optarg, "cpu") == 0) {
          o->device = PERF_DEV_HOST;
        } else if (strcmp(optarg, "gpu") == 0 || strcmp(optarg, "cuda") == 0) {
          o->device = PERF_DEV_GPU;
        } else if (strcmp(optarg, "auto") == 0) {
          o->device = PERF_DEV_AUTO;
        } else {
          bad(prog, "invalid value '%s' for %s", optarg, "--device");
        }
        break;
      case 'h':
        usage(stdout, prog);
        exit(0);
      case ':':
        bad(prog, "option %s%s needs a value", argv[optind - 1], "");
      default:
        bad(prog, "unknown option '%s'%s", argv[optind - 1], "");
    }
  }
  if (optind < argc) {
    o->coll = perf_coll_find(argv[optind]);
    if (o->coll == NULL) {
      bad(prog, "unknown collective '%s'%s", argv[optind], "");
    }
    if (optind + 1 < argc) {
      bad(prog, "unexpected argument '%s'%s", argv[optind + 1], "");
    }
  }
  if (o->minbytes > o->maxbytes) {
    bad(prog, "minbytes (%s) is larger than maxbytes (%s)", "-b", "-e");
  }
  if (o->stepfactor <= 1 && o->stepbytes == 0 && o->minbytes < o->maxbytes) {
    bad(prog, "with -f 1 the step %s must be above 0%s", "-i", "");
  }
  if (o->blocking && o->graphs > 0) {
    bad(prog, "-z 1 waits inside the iterations, which %s cannot capture%s", "-G", "");
  }
  if (!o->coll->has_op) {
    o->ops[0] = PERF_OP_NONE;
    o->nops = 1;
  } else if (ops != NULL) {
    parse_ops(prog, ops, o);
  }
  if (!o->coll->has_root) {
    o->root = -1;
  }
}
