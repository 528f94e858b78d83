/* Tunables: each is declared once, next to its use, with TUTTI_PARAM, and read
 * from the environment once (NCCL_<name> or TUTTI_<name>), then cached. A
 * value can also come from a config file: /etc/nccl.conf and ~/.nccl.conf
 * (KEY=VALUE lines), the environment taking precedence, as NCCL does. */
#ifndef TUTTI_UTIL_PARAM_H
#define TUTTI_UTIL_PARAM_H

#include <stdint.h>

/* The value of environment variable `name` (or of the config file); NULL when unset. */
const char* tutti_getenv(const char* name);
int64_t tutti_param_load(const char* name, int64_t deflt, int64_t* cache, int* loaded);

/* Declares `int64_t tutti_param_<fn>(void)` reading env var `env` (full name). */
#define TUTTI_PARAM(fn, env, deflt)                             \
  int64_t tutti_param_##fn(void) {                              \
    static int64_t cache_;                                      \
    static int loaded_;                                         \
    return tutti_param_load((env), (deflt), &cache_, &loaded_); \
  }

#endif
