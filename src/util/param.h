/* Tunables: each is declared once per reader, next to its use, with one macro
 * that leaves its name, type, default, range and description in a linker
 * section (the registry, util/param_registry.c, and ncclParam* read them).
 * Values come from the environment, else from a config file (NCCL_CONF_FILE,
 * or ~/.nccl.conf, then /etc/nccl.conf: KEY=VALUE lines), as NCCL does. */
#ifndef TUTTI_UTIL_PARAM_H
#define TUTTI_UTIL_PARAM_H

#include <stdint.h>

#include "nccl.h"

/* What a parameter holds. Integers are kept as int64; INT32 ones have a range
 * inside int32 and ncclParamGet gives their 4 bytes. */
enum tutti_param_type { TUTTI_PARAM_INT32 = 1, TUTTI_PARAM_INT64 = 2, TUTTI_PARAM_STRING = 3 };
/* Where a value came from. */
enum tutti_param_source { TUTTI_PARAM_DEFAULT = 0, TUTTI_PARAM_ENV = 1, TUTTI_PARAM_FILE = 2 };
/* A string read from the environment only, never from a config file
 * (the logging variables, NCCL_CONF_FILE itself). */
#define TUTTI_PARAM_ENV_ONLY 1

/* The value of environment variable `name` (or of the config file); NULL when unset. */
const char* tutti_getenv(const char* name);
/* As tutti_getenv (environment only with TUTTI_PARAM_ENV_ONLY in `flags`),
 * also saying where the value is from: *file is the config file's path
 * when *source is TUTTI_PARAM_FILE, else NULL. */
const char* tutti_param_lookup(const char* name, int flags, enum tutti_param_source* source,
                               const char** file);

/* An integer's value once read: kept for the life of the process. */
struct tutti_param_state {
  int64_t value;
  const char* file; /* the config file it came from, or NULL */
  int source;       /* enum tutti_param_source */
  int loaded;
};
int64_t tutti_param_load(const char* name, int64_t deflt, struct tutti_param_state* st);
/* A string's value now (read again at every call): `deflt` when unset. */
const char* tutti_param_str(const char* name, const char* deflt, int flags);

/* An integer's declaration, in the section "tutti_params": communicator
 * creation checks every one (tutti_param_validate) before any is used. */
struct tutti_param_def {
  const char* env;
  int64_t deflt;
  int64_t lo;
  int64_t hi;
  const char* desc;
  const char* file; /* the declaring source file (__FILE__) */
  struct tutti_param_state* state;
  int type; /* TUTTI_PARAM_INT32 or TUTTI_PARAM_INT64 */
};

/* A string's declaration, in the section "tutti_params_str". */
struct tutti_param_str_def {
  const char* env;
  const char* deflt;    /* NULL: none (unset) */
  const char* accepted; /* the values it takes, in words */
  const char* desc;
  const char* file;
  int flags; /* TUTTI_PARAM_ENV_ONLY */
};

/* Declares `int64_t tutti_param_<fn>(void)` reading env var `env` (full
 * name) once, then cached; values outside [lo, hi] are refused by
 * tutti_param_validate. Written after `static` (or `static inline`): the
 * first line is the prototype that takes it. */
#define TUTTI_PARAM_TYPED(fn, env, type, deflt, lo, hi, desc)                              \
  int64_t tutti_param_##fn(void);                                                          \
  static struct tutti_param_state tutti_param_state_##fn;                                  \
  int64_t tutti_param_##fn(void) {                                                         \
    return tutti_param_load((env), (deflt), &tutti_param_state_##fn);                      \
  }                                                                                        \
  __attribute__((used, section("tutti_params"),                                            \
                 aligned(8))) static const struct tutti_param_def tutti_param_def_##fn = { \
      (env), (deflt), (lo), (hi), (desc), __FILE__, &tutti_param_state_##fn, (type)}
#define TUTTI_PARAM_RANGE(fn, env, deflt, lo, hi, desc) \
  TUTTI_PARAM_TYPED(fn, env, TUTTI_PARAM_INT64, deflt, lo, hi, desc)
#define TUTTI_PARAM(fn, env, deflt, desc) \
  TUTTI_PARAM_RANGE(fn, env, deflt, INT64_MIN, INT64_MAX, desc)
/* An int32 one: [lo, hi] must lie inside int32 (unit.param_api checks). */
#define TUTTI_PARAM_INT32(fn, env, deflt, lo, hi, desc) \
  TUTTI_PARAM_TYPED(fn, env, TUTTI_PARAM_INT32, deflt, lo, hi, desc)

/* Declares `const char* tutti_param_<fn>(void)`: the value of `env` now, or
 * `deflt` when unset; `accepted` says in words what it takes. */
#define TUTTI_PARAM_STR(fn, env, deflt, accepted, desc)                                            \
  const char* tutti_param_##fn(void);                                                              \
  const char* tutti_param_##fn(void) {                                                             \
    return tutti_param_str((env), (deflt), 0);                                                     \
  }                                                                                                \
  __attribute__((used, section("tutti_params_str"),                                                \
                 aligned(8))) static const struct tutti_param_str_def tutti_param_str_def_##fn = { \
      (env), (deflt), (accepted), (desc), __FILE__, 0}
/* Only the declaration, for a reader below this file (util/log.c, which
 * param.c logs through) that keeps its own getenv: environment only. */
#define TUTTI_PARAM_STR_ENV(id, env, deflt, accepted, desc)                                        \
  __attribute__((used, section("tutti_params_str"),                                                \
                 aligned(8))) static const struct tutti_param_str_def tutti_param_str_def_##id = { \
      (env), (deflt), (accepted), (desc), __FILE__, TUTTI_PARAM_ENV_ONLY}

/* Seconds any blocking wait may last: TUTTI_TIMEOUT (default 300). */
double tutti_timeout_s(void);

/* ncclSuccess when every parameter set in the environment or a config
 * file is an integer in its range; else ncclInvalidArgument with a
 * sentence naming the variable, its value and what it takes. */
ncclResult_t tutti_param_validate(void);

/* Both sections' bounds (empty when nothing of the program declares one). */
void tutti_param_defs(const struct tutti_param_def** ints, int* nints,
                      const struct tutti_param_str_def** strs, int* nstrs);

#endif
