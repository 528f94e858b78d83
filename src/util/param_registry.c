/* The registry of parameters (see param_registry.h): built once from the
 * linker sections of util/param.h's declarations. */
#include "util/param_registry.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

/* One declaration, either kind, while they are sorted into entries. */
struct decl {
  const char* key;
  const char* file;
  const struct tutti_param_def* i;
  const struct tutti_param_str_def* s;
};

static struct {
  struct tutti_param_entry* entries;
  const char** keys;
  const struct tutti_param_def** ints;
  int n;
  ncclResult_t res;
  char why[512];
} reg;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

/* A growing string; `p` NULL after a failed allocation. */
struct text {
  char* p;
  size_t len, cap;
  int failed;
};

__attribute__((format(printf, 2, 3))) static void text_add(struct text* t, const char* fmt, ...) {
  if (t->failed) {
    return;
  }
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n =
        vsnprintf(t->p != NULL ? t->p + t->len : NULL, t->p != NULL ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if (t->p != NULL && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap + (size_t)n + 64) * 2;
    char* p = realloc(t->p, cap);
    if (p == NULL) {
      t->failed = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
}

/* "src/transport/tcp.c" -> "transport/tcp.c": what a reader of the dump can find. */
static const char* short_file(const char* f) {
  const char* best = f;
  for (const char* p = strstr(f, "src/"); p != NULL; p = strstr(p + 1, "src/")) {
    if (p == f || p[-1] == '/') {
      best = p + 4;
    }
  }
  return best;
}

static int decl_cmp(const void* a, const void* b) {
  const struct decl* x = a;
  const struct decl* y = b;
  int c = strcmp(x->key, y->key);
  if (c == 0) {
    c = strcmp(short_file(x->file), short_file(y->file));
  }
  return c;
}

static void range_text(struct text* t, int64_t lo, int64_t hi) {
  if (lo == INT64_MIN && hi == INT64_MAX) {
    text_add(t, "any integer");
  } else if (hi == INT64_MAX) {
    text_add(t, "%" PRId64 " or more", lo);
  } else if (lo == INT64_MIN) {
    text_add(t, "%" PRId64 " or less", hi);
  } else {
    text_add(t, "%" PRId64 " to %" PRId64, lo, hi);
  }
}

/* An integer's texts: its readers' descriptions (each once), defaults and
 * ranges (each declaration's where they differ). */
static ncclResult_t int_texts(struct tutti_param_entry* e) {
  const struct tutti_param_def* const* d = e->ints;
  struct text desc = {0}, deflt = {0}, accepts = {0};
  int same_deflt = 1, same_range = 1;
  for (int k = 1; k < e->nints; k++) {
    same_deflt &= d[k]->deflt == d[0]->deflt;
    same_range &= d[k]->lo == d[0]->lo && d[k]->hi == d[0]->hi;
  }
  for (int k = 0; k < e->nints; k++) {
    int seen = 0;
    for (int j = 0; j < k && !seen; j++) {
      seen = strcmp(d[j]->desc, d[k]->desc) == 0;
    }
    if (!seen) {
      text_add(&desc, "%s%s", desc.len > 0 ? "; " : "", d[k]->desc);
    }
    const int dup = k > 0 && strcmp(d[k - 1]->file, d[k]->file) == 0;
    if (!same_deflt && !dup) {
      text_add(&deflt, "%s%" PRId64 " (%s)", k > 0 ? ", " : "", d[k]->deflt,
               short_file(d[k]->file));
    }
    if (!same_range && !dup) {
      text_add(&accepts, "%s", k > 0 ? ", " : "");
      range_text(&accepts, d[k]->lo, d[k]->hi);
      text_add(&accepts, " (%s)", short_file(d[k]->file));
    }
  }
  if (same_deflt) {
    text_add(&deflt, "%" PRId64, d[0]->deflt);
  }
  if (same_range) {
    range_text(&accepts, d[0]->lo, d[0]->hi);
  }
  e->desc = desc.p;
  e->deflt = deflt.p;
  e->accepts = accepts.p;
  if (desc.failed || deflt.failed || accepts.failed) {
    return ncclSystemError;
  }
  return ncclSuccess;
}

static ncclResult_t refuse(ncclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ncclResult_t refuse(ncclResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reg.why, sizeof reg.why, fmt, ap);
  va_end(ap);
  reg.res = res;
  return res;
}

/* One entry from declarations [first, first + count) of one key. */
static ncclResult_t make_entry(const struct decl* first, int count,
                               const struct tutti_param_def** ints, struct tutti_param_entry* e) {
  e->key = first->key;
  int strings = 0;
  for (int k = 0; k < count; k++) {
    strings += first[k].s != NULL;
  }
  if (strings > 0) {
    if (count > 1) {
      return refuse(ncclInternalError,
                    "%s is declared %d times (%s, %s), %s: a string is declared once, its "
                    "tutti_param_<fn> shared by its readers",
                    first->key, count, short_file(first[0].file), short_file(first[1].file),
                    strings < count ? "as a string and as an integer" : "as a string each time");
    }
    e->type = TUTTI_PARAM_STRING;
    e->str = first->s;
    e->desc = first->s->desc;
    e->deflt = first->s->deflt;
    e->accepts = first->s->accepted != NULL ? first->s->accepted : "any text";
    return ncclSuccess;
  }
  for (int k = 0; k < count; k++) {
    if (first[k].i->type != first[0].i->type) {
      return refuse(ncclInternalError, "%s is declared with two types (%s, %s)", first->key,
                    short_file(first[0].file), short_file(first[k].file));
    }
    ints[k] = first[k].i;
  }
  e->type = first[0].i->type;
  e->ints = ints;
  e->nints = count;
  if (int_texts(e) != ncclSuccess) {
    return refuse(ncclSystemError, "out of memory describing %s", e->key);
  }
  return ncclSuccess;
}

static void build(void) {
  const struct tutti_param_def* idefs;
  const struct tutti_param_str_def* sdefs;
  int ni = 0, ns = 0;
  tutti_param_defs(&idefs, &ni, &sdefs, &ns);
  const int nd = ni + ns;
  struct decl* d = calloc((size_t)(nd > 0 ? nd : 1), sizeof *d);
  reg.entries = calloc((size_t)(nd > 0 ? nd : 1), sizeof *reg.entries);
  reg.keys = calloc((size_t)(nd > 0 ? nd : 1), sizeof *reg.keys);
  reg.ints = calloc((size_t)(ni > 0 ? ni : 1), sizeof *reg.ints);
  if (d == NULL || reg.entries == NULL || reg.keys == NULL || reg.ints == NULL) {
    refuse(ncclSystemError, "out of memory for the parameters' registry");
    free(d);
    return;
  }
  for (int k = 0; k < ni; k++) {
    d[k] = (struct decl){idefs[k].env, idefs[k].file, &idefs[k], NULL};
  }
  for (int k = 0; k < ns; k++) {
    d[ni + k] = (struct decl){sdefs[k].env, sdefs[k].file, NULL, &sdefs[k]};
  }
  qsort(d, (size_t)nd, sizeof *d, decl_cmp);
  int used_ints = 0;
  for (int k = 0; k < nd && reg.res == ncclSuccess;) {
    int count = 1;
    while (k + count < nd && strcmp(d[k + count].key, d[k].key) == 0) {
      count++;
    }
    struct tutti_param_entry* e = &reg.entries[reg.n];
    if (make_entry(&d[k], count, &reg.ints[used_ints], e) == ncclSuccess) {
      used_ints += e->nints;
      reg.keys[reg.n++] = e->key;
    }
    k += count;
  }
  free(d);
}

ncclResult_t tutti_param_registry(const struct tutti_param_entry** entries,
                                  const char* const** keys, int* n) {
  pthread_once(&reg_once, build);
  if (reg.res != ncclSuccess) {
    return tutti_error(reg.res, "the parameters' registry cannot be built: %s", reg.why);
  }
  *entries = reg.entries;
  *keys = reg.keys;
  *n = reg.n;
  return ncclSuccess;
}

static int key_cmp(const void* key, const void* entry) {
  return strcmp(key, ((const struct tutti_param_entry*)entry)->key);
}

const struct tutti_param_entry* tutti_param_find(const char* key) {
  const struct tutti_param_entry* entries = NULL;
  const char* const* keys = NULL;
  int n = 0;
  if (tutti_param_registry(&entries, &keys, &n) != ncclSuccess) {
    return NULL;
  }
  return bsearch(key, entries, (size_t)n, sizeof *entries, key_cmp);
}

void tutti_param_value_of(const struct tutti_param_entry* e, struct tutti_param_value* v) {
  memset(v, 0, sizeof *v);
  if (e->type != TUTTI_PARAM_STRING) {
    const struct tutti_param_def* d = e->ints[0];
    v->i = tutti_param_load(d->env, d->deflt, d->state);
    v->source = (enum tutti_param_source)__atomic_load_n(&d->state->source, __ATOMIC_RELAXED);
    v->file = __atomic_load_n(&d->state->file, __ATOMIC_RELAXED);
    return;
  }
  v->s = tutti_param_lookup(e->key, e->str->flags, &v->source, &v->file);
  if (v->s == NULL) {
    v->s = e->str->deflt;
  }
}

const char* tutti_param_type_name(int type) {
  switch (type) {
    case TUTTI_PARAM_INT32:
      return "int32";
    case TUTTI_PARAM_INT64:
      return "int64";
    default:
      return "string";
  }
}
