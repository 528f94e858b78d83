#include "checkpoint.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char magic[8] = {'T', 'U', 'T', 'T', 'I', 'D', 'D', 'P'};
static const uint32_t version = 1, byte_order = 0x01020304u;

uint64_t ddp_fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* c = p;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ c[i]) * 0x100000001b3ull;
  }
  return h;
}

/* Writes n bytes and folds them into the checksum. */
static int put(FILE* f, uint64_t* sum, const void* p, size_t n) {
  *sum = ddp_fnv(*sum, p, n);
  return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static int get(FILE* f, uint64_t* sum, void* p, size_t n) {
  if (fread(p, 1, n, f) != n) {
    return -1;
  }
  *sum = ddp_fnv(*sum, p, n);
  return 0;
}

/* The header, field by field (no struct padding in the file). */
#define FIELD(name) \
  { offsetof(struct ddp_ckpt, name), sizeof(((struct ddp_ckpt*)0)->name) }
static const struct {
  size_t off, size;
} fields[] = {FIELD(nlayers),       FIELD(size),      FIELD(seed),      FIELD(train_size),
              FIELD(global_batch),  FIELD(drop_last), FIELD(grad_mode), FIELD(epoch),
              FIELD(step_in_epoch), FIELD(step),      FIELD(loss_sum),  FIELD(correct),
              FIELD(seen),          FIELD(nparams)};
#undef FIELD
enum { NFIELDS = sizeof fields / sizeof fields[0] };

int ddp_ckpt_save(const char* path, const struct ddp_ckpt* h, const float* params,
                  const float* velocity, char* why, size_t whylen) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  if (f == NULL) {
    snprintf(why, whylen, "cannot create %s: %s", tmp, strerror(errno));
    return -1;
  }
  uint64_t sum = DDP_FNV_INIT;
  /* One statement each: the order of the writes is the file's layout. */
  int bad = put(f, &sum, magic, sizeof magic);
  bad |= put(f, &sum, &version, sizeof version);
  bad |= put(f, &sum, &byte_order, sizeof byte_order);
  for (int k = 0; k < NFIELDS; k++) {
    bad |= put(f, &sum, (const char*)h + fields[k].off, fields[k].size);
  }
  bad |= put(f, &sum, params, sizeof(float) * h->nparams);
  bad |= put(f, &sum, velocity, sizeof(float) * h->nparams);
  bad |= fwrite(&sum, sizeof sum, 1, f) != 1;
  bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

int ddp_ckpt_load(const char* path, struct ddp_ckpt* h, float** params, float** velocity, char* why,
                  size_t whylen) {
  *params = *velocity = NULL;
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  uint64_t sum = DDP_FNV_INIT, stored = 0;
  char m[8];
  uint32_t v = 0, bo = 0;
  int bad = get(f, &sum, m, sizeof m);
  bad |= get(f, &sum, &v, sizeof v);
  bad |= get(f, &sum, &bo, sizeof bo);
  const char* what = NULL;
  if (bad || memcmp(m, magic, sizeof m) != 0) {
    what = "not a tutti-ddp checkpoint";
  } else if (v != version || bo != byte_order) {
    what = "written by another version or on a machine of another byte order";
  }
  memset(h, 0, sizeof *h);
  if (what == NULL) {
    for (int k = 0; k < NFIELDS; k++) {
      bad |= get(f, &sum, (char*)h + fields[k].off, fields[k].size);
    }
    if (bad || h->nlayers < 1 || h->nlayers > DDP_MAX_LAYERS || h->nparams == 0 ||
        h->nparams > ((uint64_t)1 << 34)) {
      what = "damaged header";
    }
  }
  if (what == NULL) {
    *params = malloc(sizeof(float) * h->nparams);
    *velocity = malloc(sizeof(float) * h->nparams);
    if (*params == NULL || *velocity == NULL) {
      what = "out of memory";
    } else if (get(f, &sum, *params, sizeof(float) * h->nparams) != 0 ||
               get(f, &sum, *velocity, sizeof(float) * h->nparams) != 0 ||
               fread(&stored, sizeof stored, 1, f) != 1) {
      what = "truncated";
    } else if (stored != sum || fgetc(f) != EOF) {
      what = "checksum mismatch (damaged)";
    }
  }
  fclose(f);
  if (what != NULL) {
    snprintf(why, whylen, "%s: %s", path, what);
    free(*params);
    free(*velocity);
    *params = *velocity = NULL;
    return -1;
  }
  return 0;
}
