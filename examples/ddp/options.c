#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: tutti-ddp [flags]   (one rank, or N under tuttirun -n N)\n"
    "  --layers L         in,hidden...,classes (default 16,64,64,4)\n"
    "  --train-size N     training samples (default 4096)\n"
    "  --val-size N       held-out samples (default 1024; 0: none)\n"
    "  --epochs E         epochs (default 5)\n"
    "  --batch B          samples per rank per step (default 32)\n"
    "  --lr X             learning rate (default 0.02)\n"
    "  --momentum X       SGD momentum (default 0.9)\n"
    "  --seed S           data, sampler and initial parameters (default 1)\n"
    "  --bucket-mb X      gradient bucket size in MB, 1 MB = 2^20 bytes (default 25)\n"
    "  --no-overlap       all-reduce buckets only after backward\n"
    "  --grad float|fixed gradient sums as floats (default) or 64-bit fixed point\n"
    "                     (bit-identical results for any number of ranks)\n"
    "  --drop-last        skip the last partial batch of each epoch\n"
    "  --checkpoint FILE  rank 0 writes FILE after every epoch, on stop and at the end\n"
    "  --checkpoint-every K  also every K global steps\n"
    "  --resume FILE      continue from a checkpoint\n"
    "  --stop-after-step K   stop after global step K (writes the checkpoint)\n"
    "  --progress S       seconds between progress lines when stdout is not a tty\n"
    "                     (default 5; 0: none)\n"
    "  --no-sync          skip the gradient all-reduce (replicas drift: for tests)\n"
    "  -h, --help         this text\n";

static int bad(const char* flag, const char* value) {
  fprintf(stderr, "tutti-ddp: bad value '%s' for %s\n%s", value != NULL ? value : "", flag, usage);
  return 2;
}

static int parse_long(const char* s, long lo, long hi, long* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_double(const char* s, double lo, double hi, double* out) {
  char* end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_layers(const char* s, struct ddp_options* o) {
  int n = 0;
  const char* p = s;
  while (*p != '\0') {
    char* end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno != 0 || end == p || v < 1 || v > (1 << 16) || n > DDP_MAX_LAYERS) {
      return -1;
    }
    o->size[n++] = (int)v;
    if (*end == ',') {
      end++;
    } else if (*end != '\0') {
      return -1;
    }
    p = end;
  }
  if (n < 2 || o->size[n - 1] < 2) {
    return -1;
  }
  o->nlayers = n - 1;
  return 0;
}

int ddp_options_parse(struct ddp_options* o, int argc, char** argv) {
  memset(o, 0, sizeof *o);
  parse_layers("16,64,64,4", o);
  o->train_size = 4096;
  o->val_size = 1024;
  o->epochs = 5;
  o->batch = 32;
  o->lr = 0.02f;
  o->momentum = 0.9f;
  o->seed = 1;
  o->bucket_mb = 25;
  o->overlap = 1;
  o->sync = 1;
  o->grad_mode = DDP_GRAD_FLOAT;
  o->stop_after_step = -1;
  o->progress_s = 5;
  for (int i = 1; i < argc; i++) {
    const char* f = argv[i];
    if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
      fputs(usage, stdout);
      return 1;
    }
    if (strcmp(f, "--no-overlap") == 0) {
      o->overlap = 0;
      continue;
    }
    if (strcmp(f, "--no-sync") == 0) {
      o->sync = 0;
      continue;
    }
    if (strcmp(f, "--drop-last") == 0) {
      o->drop_last = 1;
      continue;
    }
    static const char* const with_value[] = {
        "--layers",     "--train-size", "--val-size", "--epochs",           "--batch",
        "--lr",         "--momentum",   "--seed",     "--bucket-mb",        "--grad",
        "--checkpoint", "--resume",     "--progress", "--checkpoint-every", "--stop-after-step"};
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
      known |= strcmp(f, with_value[k]) == 0;
    }
    if (!known) {
      fprintf(stderr, "tutti-ddp: unknown flag %s\n%s", f, usage);
      return 2;
    }
    if (i + 1 >= argc) {
      return bad(f, NULL);
    }
    const char* v = argv[++i];
    long l = 0;
    double d = 0;
    int ok = 0;
    if (strcmp(f, "--layers") == 0) {
      ok = parse_layers(v, o) == 0;
    } else if (strcmp(f, "--train-size") == 0 && (ok = !parse_long(v, 1, 1L << 28, &l))) {
      o->train_size = (int)l;
    } else if (strcmp(f, "--val-size") == 0 && (ok = !parse_long(v, 0, 1L << 28, &l))) {
      o->val_size = (int)l;
    } else if (strcmp(f, "--epochs") == 0 && (ok = !parse_long(v, 1, 1L << 20, &l))) {
      o->epochs = (int)l;
    } else if (strcmp(f, "--batch") == 0 && (ok = !parse_long(v, 1, 1L << 16, &l))) {
      o->batch = (int)l;
    } else if (strcmp(f, "--lr") == 0 && (ok = !parse_double(v, 0, 1e3, &d))) {
      o->lr = (float)d;
    } else if (strcmp(f, "--momentum") == 0 && (ok = !parse_double(v, 0, 0.9999, &d))) {
      o->momentum = (float)d;
    } else if (strcmp(f, "--seed") == 0 && (ok = !parse_long(v, 0, (1L << 62), &l))) {
      o->seed = (uint64_t)l;
    } else if (strcmp(f, "--bucket-mb") == 0 && (ok = !parse_double(v, 1e-6, 1 << 20, &d))) {
      o->bucket_mb = d;
    } else if (strcmp(f, "--grad") == 0) {
      ok = strcmp(v, "float") == 0 || strcmp(v, "fixed") == 0;
      o->grad_mode = strcmp(v, "fixed") == 0 ? DDP_GRAD_FIXED : DDP_GRAD_FLOAT;
    } else if (strcmp(f, "--checkpoint") == 0) {
      o->checkpoint = v;
      ok = *v != '\0';
    } else if (strcmp(f, "--checkpoint-every") == 0 && (ok = !parse_long(v, 0, 1L << 40, &l))) {
      o->checkpoint_every = l;
    } else if (strcmp(f, "--resume") == 0) {
      o->resume = v;
      ok = *v != '\0';
    } else if (strcmp(f, "--stop-after-step") == 0 && (ok = !parse_long(v, 1, 1L << 40, &l))) {
      o->stop_after_step = l;
    } else if (strcmp(f, "--progress") == 0 && (ok = !parse_double(v, 0, 1e6, &d))) {
      o->progress_s = d;
    }
    if (!ok) {
      return bad(f, v);
    }
  }
  if (o->stop_after_step >= 0 && o->checkpoint == NULL) {
    fprintf(stderr, "tutti-ddp: --stop-after-step needs --checkpoint FILE\n");
    return 2;
  }
  return 0;
}
