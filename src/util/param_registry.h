/* The registry of parameters: every declaration of util/param.h's macros
 * that the program links, one entry per variable, sorted by name. */
#ifndef TUTTI_UTIL_PARAM_REGISTRY_H
#define TUTTI_UTIL_PARAM_REGISTRY_H

#include <stdint.h>

#include "nccl.h"
#include "util/param.h"

/* One variable. An integer may be declared by several readers (each caches
 * its own value): the first by source file speaks for it; the texts name
 * every declaration where their defaults or ranges differ. */
struct tutti_param_entry {
  const char* key;
  int type;                                  /* enum tutti_param_type */
  const struct tutti_param_def* const* ints; /* [nints], by source file */
  int nints;
  const struct tutti_param_str_def* str; /* strings: the one declaration */
  const char* desc;                      /* one line */
  const char* deflt;                     /* as text; NULL: a string without one */
  const char* accepts;
};

/* A value as the library uses it now. */
struct tutti_param_value {
  int64_t i;     /* integers */
  const char* s; /* strings: NULL when unset and without a default */
  enum tutti_param_source source;
  const char* file; /* the config file when source is TUTTI_PARAM_FILE */
};

/* Every entry, sorted by key (strcmp), and the keys alone in the same
 * order; built once, kept for the life of the process. ncclInternalError
 * when a variable is declared with two types or as a string twice. */
ncclResult_t tutti_param_registry(const struct tutti_param_entry** entries,
                                  const char* const** keys, int* n);
/* The entry named exactly `key`, or NULL. */
const struct tutti_param_entry* tutti_param_find(const char* key);
/* Reads the value: an integer's first read caches it, as its reader would. */
void tutti_param_value_of(const struct tutti_param_entry* e, struct tutti_param_value* v);
/* "int32", "int64", "string". */
const char* tutti_param_type_name(int type);

#endif
