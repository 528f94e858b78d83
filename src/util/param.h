/* Tunables: each is declared once, next to its use, with TUTTI_PARAM, and read
 * from the environment once (NCCL_<name> or TUTTI_<name>), then cached. A
 * value can also come from a config file: /etc/nccl.conf and ~/.nccl.conf
 * (KEY=VALUE lines), the environment taking precedence, as NCCL does. */
#ifndef TUTTI_UTIL_PARAM_H
#define TUTTI_UTIL_PARAM_H

#include <stdint.h>

#include "nccl.h"

/* The value of environment variable `name` (or of the config file); NULL when unset. */
const char* tutti_getenv(const char* name);
int64_t tutti_param_load(const char* name, int64_t deflt, int64_t* cache, int* loaded);

/* Every parameter also leaves its name and valid range in the section
 * "tutti_params", so that communicator creation can check them all
 * (tutti_param_validate) before any is used. */
struct tutti_param_def {
  const char* env;
  int64_t deflt;
  int64_t lo;
  int64_t hi;
};

/* Declares `int64_t tutti_param_<fn>(void)` reading env var `env` (full
 * name); values outside [lo, hi] are refused by tutti_param_validate. */
#define TUTTI_PARAM_RANGE(fn, env, deflt, lo, hi)                                          \
  int64_t tutti_param_##fn(void) {                                                         \
    static int64_t cache_;                                                                 \
    static int loaded_;                                                                    \
    return tutti_param_load((env), (deflt), &cache_, &loaded_);                            \
  }                                                                                        \
  __attribute__((used, section("tutti_params"),                                            \
                 aligned(8))) static const struct tutti_param_def tutti_param_def_##fn = { \
      (env), (deflt), (lo), (hi)}
#define TUTTI_PARAM(fn, env, deflt) TUTTI_PARAM_RANGE(fn, env, deflt, INT64_MIN, INT64_MAX)

/* Seconds any blocking wait may last: TUTTI_TIMEOUT (default 300). */
double tutti_timeout_s(void);

/* ncclSuccess when every parameter set in the environment or a config
 * file is an integer in its range; else ncclInvalidArgument with a
 * sentence naming the variable, its value and what it takes. */
ncclResult_t tutti_param_validate(void);

#endif
