/* Environment and config-file parameters (see param.h). */
#include "util/param.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

#define TUTTI_CONF_MAX 128

struct conf_entry {
  char key[64];
  char value[192];
};

static struct conf_entry conf_entries[TUTTI_CONF_MAX];
static int conf_count;
static pthread_once_t conf_once = PTHREAD_ONCE_INIT;

static void conf_read_file(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    return;
  }
  char line[320];
  while (conf_count < TUTTI_CONF_MAX && fgets(line, sizeof line, f) != NULL) {
    char* s = line;
    while (*s == ' ' || *s == '\t') {
      s++;
    }
    if (*s == '#' || *s == '\n' || *s == '\0') {
      continue;
    }
    char* eq = strchr(s, '=');
    if (eq == NULL) {
      continue;
    }
    *eq = '\0';
    char* v = eq + 1;
    v[strcspn(v, "\r\n")] = '\0';
    struct conf_entry* e = &conf_entries[conf_count++];
    snprintf(e->key, sizeof e->key, "%.63s", s);
    snprintf(e->value, sizeof e->value, "%.191s", v);
  }
  fclose(f);
}

static void conf_load(void) {
  const char* home = getenv("HOME");
  const char* explicit_path = getenv("NCCL_CONF_FILE");
  if (explicit_path != NULL) {
    conf_read_file(explicit_path);
  } else if (home != NULL) {
    char path[512];
    snprintf(path, sizeof path, "%s/.nccl.conf", home);
    conf_read_file(path);
  }
  conf_read_file("/etc/nccl.conf");
}

const char* tutti_getenv(const char* name) {
  const char* v = getenv(name);
  if (v != NULL) {
    return v;
  }
  pthread_once(&conf_once, conf_load);
  for (int i = 0; i < conf_count; i++) {
    if (strcmp(conf_entries[i].key, name) == 0) {
      return conf_entries[i].value;
    }
  }
  return NULL;
}

int64_t tutti_param_load(const char* name, int64_t deflt, int64_t* cache, int* loaded) {
  if (__atomic_load_n(loaded, __ATOMIC_ACQUIRE)) {
    return __atomic_load_n(cache, __ATOMIC_RELAXED);
  }
  int64_t value = deflt;
  const char* s = tutti_getenv(name);
  if (s != NULL && *s != '\0') {
    char* end = NULL;
    long long v = strtoll(s, &end, 0);
    if (end == s || *end != '\0') {
      /* tutti_param_validate refuses it at init; a use outside any
       * communicator takes the default. */
      INFO(TUTTI_ENV, "%s=\"%s\" is not an integer: using the default %lld", name, s,
           (long long)deflt);
    } else {
      value = v;
      INFO(TUTTI_ENV, "%s set by environment to %lld", name, v);
    }
  }
  __atomic_store_n(cache, value, __ATOMIC_RELAXED);
  __atomic_store_n(loaded, 1, __ATOMIC_RELEASE);
  return value;
}

/* The section the linker gathers every TUTTI_PARAM_RANGE definition into. */
extern const struct tutti_param_def __start_tutti_params[]
    __attribute__((weak, visibility("hidden")));
extern const struct tutti_param_def __stop_tutti_params[]
    __attribute__((weak, visibility("hidden")));

static int parse_int64(const char* s, int64_t* out) {
  char* end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (end == s || errno != 0) {
    return 0;
  }
  *out = v;
  return *end == '\0';
}

ncclResult_t tutti_param_validate(void) {
  for (const struct tutti_param_def* d = __start_tutti_params; d != NULL && d < __stop_tutti_params;
       d++) {
    const char* s = tutti_getenv(d->env);
    if (s == NULL || *s == '\0') {
      continue;
    }
    int64_t v = 0;
    if (!parse_int64(s, &v)) {
      return tutti_error(ncclInvalidArgument,
                         "%s=\"%s\" is not an integer: set it to one (its default is %lld) or "
                         "unset it",
                         d->env, s, (long long)d->deflt);
    }
    if (v < d->lo || v > d->hi) {
      if (d->hi == INT64_MAX) {
        return tutti_error(ncclInvalidArgument,
                           "%s=%s is out of range: it takes %lld or more (its default is %lld)",
                           d->env, s, (long long)d->lo, (long long)d->deflt);
      }
      return tutti_error(ncclInvalidArgument,
                         "%s=%s is out of range: it takes %lld to %lld (its default is %lld)",
                         d->env, s, (long long)d->lo, (long long)d->hi, (long long)d->deflt);
    }
  }
  return ncclSuccess;
}

/* Seconds; at least 1 (tutti_param_validate refuses others at init). */
static TUTTI_PARAM_RANGE(timeout, "TUTTI_TIMEOUT", 300, 1, INT64_MAX);

double tutti_timeout_s(void) {
  int64_t t = tutti_param_timeout();
  return t > 0 ? (double)t : 300.0;
}
