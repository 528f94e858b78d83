/* NCCL 2.30's parameter API (ncclParam*) over tutti's registry of every
 * NCCL_* and TUTTI_* variable the library reads (util/param_registry.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param_registry.h"

/* What this thread was handed: each valid until the same function's next
 * call on this thread (NCCL's promise), freed when the thread ends. */
struct returned {
  char* str; /* ncclParamGetStr */
  size_t str_cap;
  char* text; /* ncclParamGetParameter */
  size_t text_cap;
  const char** table; /* ncclParamGetAllParameterKeys */
};
static pthread_key_t returned_key;
static pthread_once_t returned_once = PTHREAD_ONCE_INIT;
static int returned_key_ok;
static __thread struct returned* returned;

static void returned_free(void* p) {
  struct returned* r = p;
  free(r->str);
  free(r->text);
  free(r->table);
  free(r);
  returned = NULL;
}

static void returned_init(void) {
  returned_key_ok = pthread_key_create(&returned_key, returned_free) == 0;
}

static ncclResult_t this_thread(const char* fn, struct returned** out) {
  pthread_once(&returned_once, returned_init);
  if (returned == NULL) {
    struct returned* r = returned_key_ok ? calloc(1, sizeof *r) : NULL;
    if (r == NULL || pthread_setspecific(returned_key, r) != 0) {
      free(r);
      return tutti_error(ncclSystemError, "%s: no memory for this thread's returned values", fn);
    }
    returned = r;
  }
  *out = returned;
  return ncclSuccess;
}

/* Copies `text` into this thread's buffer *buf and points *out at it. */
static ncclResult_t keep(const char* fn, char** buf, size_t* cap, const char* text,
                         const char** out) {
  const size_t need = strlen(text) + 1;
  if (need > *cap) {
    char* p = realloc(*buf, need);
    if (p == NULL) {
      return tutti_error(ncclSystemError, "%s: no memory for a value of %zu bytes", fn, need);
    }
    *buf = p;
    *cap = need;
  }
  memcpy(*buf, text, need);
  *out = *buf;
  return ncclSuccess;
}

/* An unknown key is how callers probe for a parameter: NCCL says so at
 * INFO, so the sentence is recorded for ncclGetLastError without a warning. */
static ncclResult_t lookup(const char* fn, const char* key, const struct tutti_param_entry** e) {
  const struct tutti_param_entry* entries = NULL;
  const char* const* keys = NULL;
  int n = 0;
  NCCLCHECK(tutti_param_registry(&entries, &keys, &n));
  *e = tutti_param_find(key);
  if (*e == NULL) {
    char text[512];
    snprintf(text, sizeof text,
             "%s: \"%.200s\" is not a parameter tutti reads: keys are whole variable names "
             "such as NCCL_DEBUG or TUTTI_TIMEOUT, in capitals (ncclParamGetAllParameterKeys "
             "lists them)",
             fn, key);
    tutti_set_last_error(text);
    INFO(TUTTI_ENV, "%s", text);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* The entry behind a handle, which must be one ncclParamBind gave. */
static ncclResult_t entry_of(const char* fn, ncclParamHandle_t h,
                             const struct tutti_param_entry** e) {
  if (h == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: the handle is NULL: get one from ncclParamBind",
                       fn);
  }
  const struct tutti_param_entry* entries = NULL;
  const char* const* keys = NULL;
  int n = 0;
  NCCLCHECK(tutti_param_registry(&entries, &keys, &n));
  const uintptr_t p = (uintptr_t)(const void*)h, base = (uintptr_t)entries;
  if (p < base || p >= base + (uintptr_t)n * sizeof *entries || (p - base) % sizeof *entries) {
    return tutti_error(ncclInvalidArgument, "%s: %p is not a handle ncclParamBind returned", fn,
                       (const void*)h);
  }
  *e = (const struct tutti_param_entry*)(const void*)h;
  return ncclSuccess;
}

/* The value as text: an integer's in decimal, an unset string's "". */
static const char* text_of(const struct tutti_param_entry* e, const struct tutti_param_value* v,
                           char* num, size_t len) {
  if (e->type == TUTTI_PARAM_STRING) {
    return v->s != NULL ? v->s : "";
  }
  snprintf(num, len, "%" PRId64, v->i);
  return num;
}

NCCL_API ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  if (out == NULL || key == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclParamBind: %s is NULL",
                       out == NULL ? "out" : "key");
  }
  const struct tutti_param_entry* e = NULL;
  NCCLCHECK(lookup("ncclParamBind", key, &e));
  *out = (ncclParamHandle_t)(void*)(uintptr_t)e;
  return ncclSuccess;
}

/* An integer whose value lies in [lo, hi], the getter's type. */
static ncclResult_t get_int(const char* fn, ncclParamHandle_t h, const void* out, const char* tname,
                            int64_t lo, int64_t hi, int64_t* value) {
  const struct tutti_param_entry* e = NULL;
  NCCLCHECK(entry_of(fn, h, &e));
  if (out == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: out is NULL", fn);
  }
  if (e->type == TUTTI_PARAM_STRING) {
    return tutti_error(ncclInvalidArgument,
                       "%s: %s is a string: read it with ncclParamGetStr, ncclParamGet or "
                       "ncclParamGetParameter",
                       fn, e->key);
  }
  struct tutti_param_value v;
  tutti_param_value_of(e, &v);
  if (v.i < lo || v.i > hi) {
    return tutti_error(ncclInvalidArgument,
                       "%s: %s (%s) is %" PRId64
                       ", which does not fit %s: read it with a "
                       "getter whose type holds it (ncclParamGetI64 holds every value)",
                       fn, e->key, tutti_param_type_name(e->type), v.i, tname);
  }
  *value = v.i;
  return ncclSuccess;
}

#define PARAM_GETTER(Name, T, tname, lo, hi)                                 \
  NCCL_API ncclResult_t ncclParamGet##Name(ncclParamHandle_t h, T* out) {    \
    int64_t v = 0;                                                           \
    NCCLCHECK(get_int("ncclParamGet" #Name, h, out, tname, (lo), (hi), &v)); \
    *out = (T)v;                                                             \
    return ncclSuccess;                                                      \
  }

PARAM_GETTER(I8, int8_t, "int8", INT8_MIN, INT8_MAX)
PARAM_GETTER(I16, int16_t, "int16", INT16_MIN, INT16_MAX)
PARAM_GETTER(I32, int32_t, "int32", INT32_MIN, INT32_MAX)
PARAM_GETTER(I64, int64_t, "int64", INT64_MIN, INT64_MAX)
PARAM_GETTER(U8, uint8_t, "uint8", 0, UINT8_MAX)
PARAM_GETTER(U16, uint16_t, "uint16", 0, UINT16_MAX)
PARAM_GETTER(U32, uint32_t, "uint32", 0, UINT32_MAX)
PARAM_GETTER(U64, uint64_t, "uint64", 0, INT64_MAX)

NCCL_API ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  const struct tutti_param_entry* e = NULL;
  struct returned* r = NULL;
  NCCLCHECK(entry_of("ncclParamGetStr", h, &e));
  if (out == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclParamGetStr: out is NULL");
  }
  NCCLCHECK(this_thread("ncclParamGetStr", &r));
  struct tutti_param_value v;
  char num[32];
  tutti_param_value_of(e, &v);
  return keep("ncclParamGetStr", &r->str, &r->str_cap, text_of(e, &v, num, sizeof num), out);
}

NCCL_API ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  const struct tutti_param_entry* e = NULL;
  NCCLCHECK(entry_of("ncclParamGet", h, &e));
  if (out == NULL || len == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclParamGet: %s is NULL",
                       out == NULL ? "out" : "len");
  }
  if (maxLen <= 0) {
    return tutti_error(ncclInvalidArgument, "ncclParamGet: maxLen is %d: it must be positive",
                       maxLen);
  }
  struct tutti_param_value v;
  tutti_param_value_of(e, &v);
  const int32_t i32 = (int32_t)v.i;
  const void* bytes = &v.i;
  size_t need = sizeof v.i;
  if (e->type == TUTTI_PARAM_STRING) {
    bytes = v.s != NULL ? v.s : "";
    need = strlen(bytes) + 1;
  } else if (e->type == TUTTI_PARAM_INT32) {
    if (v.i < INT32_MIN || v.i > INT32_MAX) {
      *len = 0;
      return tutti_error(ncclInvalidArgument,
                         "ncclParamGet: %s is %" PRId64
                         ", outside its type int32 (communicator "
                         "creation refuses it): set it to %s",
                         e->key, v.i, e->accepts);
    }
    bytes = &i32;
    need = sizeof i32;
  }
  if (need > (size_t)maxLen) {
    *len = 0;
    return tutti_error(ncclInvalidArgument,
                       "ncclParamGet: %s (%s) takes %zu bytes%s, maxLen is %d: pass a larger "
                       "buffer",
                       e->key, tutti_param_type_name(e->type), need,
                       e->type == TUTTI_PARAM_STRING ? " with its NUL" : "", maxLen);
  }
  memcpy(out, bytes, need);
  *len = (int)need;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  if (key == NULL || value == NULL || valueLen == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclParamGetParameter: %s is NULL",
                       key == NULL     ? "key"
                       : value == NULL ? "value"
                                       : "valueLen");
  }
  const struct tutti_param_entry* e = NULL;
  struct returned* r = NULL;
  NCCLCHECK(lookup("ncclParamGetParameter", key, &e));
  NCCLCHECK(this_thread("ncclParamGetParameter", &r));
  struct tutti_param_value v;
  char num[32];
  tutti_param_value_of(e, &v);
  NCCLCHECK(keep("ncclParamGetParameter", &r->text, &r->text_cap, text_of(e, &v, num, sizeof num),
                 value));
  *valueLen = (int)strlen(*value);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  if (table == NULL || tableLen == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclParamGetAllParameterKeys: %s is NULL",
                       table == NULL ? "table" : "tableLen");
  }
  const struct tutti_param_entry* entries = NULL;
  const char* const* keys = NULL;
  int n = 0;
  struct returned* r = NULL;
  NCCLCHECK(tutti_param_registry(&entries, &keys, &n));
  NCCLCHECK(this_thread("ncclParamGetAllParameterKeys", &r));
  /* The thread's own copy: a caller that writes into its table changes no
   * other thread's. The key set never changes, so its size does not. */
  if (r->table == NULL) {
    r->table = malloc((size_t)(n > 0 ? n : 1) * sizeof *r->table);
    if (r->table == NULL) {
      return tutti_error(ncclSystemError, "ncclParamGetAllParameterKeys: no memory for %d keys", n);
    }
  }
  memcpy(r->table, keys, (size_t)n * sizeof *keys);
  *table = r->table;
  *tableLen = n;
  return ncclSuccess;
}

static void dump_source(const struct tutti_param_value* v) {
  switch (v->source) {
    case TUTTI_PARAM_ENV:
      printf("  source: environment\n");
      break;
    case TUTTI_PARAM_FILE:
      printf("  source: config file %s\n", v->file != NULL ? v->file : "");
      break;
    default:
      printf("  source: default\n");
  }
}

/* One entry per key, a field per line, so that programs can read it back:
 * strings quoted, "(unset)" for a string without a value. */
NCCL_API void ncclParamDumpAll(void) {
  const struct tutti_param_entry* entries = NULL;
  const char* const* keys = NULL;
  int n = 0;
  if (tutti_param_registry(&entries, &keys, &n) != ncclSuccess) {
    printf("=== tutti parameters: none (%s) ===\n", tutti_last_error());
    fflush(stdout);
    return;
  }
  /* An integer's first read may log (NCCL_DEBUG_SUBSYS=ENV), to stdout too:
   * those lines come before the dump rather than inside an entry. */
  for (int k = 0; k < n; k++) {
    struct tutti_param_value v;
    tutti_param_value_of(&entries[k], &v);
  }
  flockfile(stdout);
  printf("=== tutti parameters: %d keys ===\n", n);
  for (int k = 0; k < n; k++) {
    const struct tutti_param_entry* e = &entries[k];
    struct tutti_param_value v;
    tutti_param_value_of(e, &v);
    printf("%s\n  type: %s\n", e->key, tutti_param_type_name(e->type));
    if (e->type != TUTTI_PARAM_STRING) {
      printf("  value: %" PRId64 "\n", v.i);
    } else if (v.s != NULL) {
      printf("  value: \"%s\"\n", v.s);
    } else {
      printf("  value: (unset)\n");
    }
    dump_source(&v);
    if (e->type != TUTTI_PARAM_STRING || e->deflt == NULL) {
      printf("  default: %s\n", e->deflt != NULL ? e->deflt : "(unset)");
    } else {
      printf("  default: \"%s\"\n", e->deflt);
    }
    printf("  accepts: %s\n  description: %s\n", e->accepts, e->desc);
  }
  funlockfile(stdout);
  fflush(stdout);
}
