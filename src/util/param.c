/* Environment and config-file parameters: reading, caching and checking them
 * (see param.h). */
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
  const char* file; /* one of conf_paths */
};

static struct conf_entry conf_entries[TUTTI_CONF_MAX];
static int conf_count;
static char conf_paths[2][512]; /* NCCL_CONF_FILE or ~/.nccl.conf; /etc/nccl.conf */
static pthread_once_t conf_once = PTHREAD_ONCE_INIT;

/* NCCL_CONF_FILE is read here, from the environment only, before any file. */
TUTTI_PARAM_STR_ENV(conf_file, "NCCL_CONF_FILE", NULL, "a file's path",
                    "the config file read instead of ~/.nccl.conf (/etc/nccl.conf is read "
                    "after it); environment only");

static void conf_read_file(const char* path, char* keep, size_t keep_len) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    return;
  }
  snprintf(keep, keep_len, "%s", path);
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
    e->file = keep;
  }
  fclose(f);
}

static void conf_load(void) {
  const char* home = getenv("HOME");
  const char* explicit_path = getenv("NCCL_CONF_FILE");
  if (explicit_path != NULL) {
    conf_read_file(explicit_path, conf_paths[0], sizeof conf_paths[0]);
  } else if (home != NULL) {
    char path[512];
    snprintf(path, sizeof path, "%s/.nccl.conf", home);
    conf_read_file(path, conf_paths[0], sizeof conf_paths[0]);
  }
  conf_read_file("/etc/nccl.conf", conf_paths[1], sizeof conf_paths[1]);
}

const char* tutti_param_lookup(const char* name, int flags, enum tutti_param_source* source,
                               const char** file) {
  *source = TUTTI_PARAM_ENV;
  *file = NULL;
  const char* v = getenv(name);
  if (v != NULL) {
    return v;
  }
  *source = TUTTI_PARAM_DEFAULT;
  if (flags & TUTTI_PARAM_ENV_ONLY) {
    return NULL;
  }
  pthread_once(&conf_once, conf_load);
  for (int i = 0; i < conf_count; i++) {
    if (strcmp(conf_entries[i].key, name) == 0) {
      *source = TUTTI_PARAM_FILE;
      *file = conf_entries[i].file;
      return conf_entries[i].value;
    }
  }
  return NULL;
}

const char* tutti_getenv(const char* name) {
  enum tutti_param_source source;
  const char* file;
  return tutti_param_lookup(name, 0, &source, &file);
}

const char* tutti_param_str(const char* name, const char* deflt, int flags) {
  enum tutti_param_source source;
  const char* file;
  const char* v = tutti_param_lookup(name, flags, &source, &file);
  return v != NULL ? v : deflt;
}

int64_t tutti_param_load(const char* name, int64_t deflt, struct tutti_param_state* st) {
  if (__atomic_load_n(&st->loaded, __ATOMIC_ACQUIRE)) {
    return __atomic_load_n(&st->value, __ATOMIC_RELAXED);
  }
  int64_t value = deflt;
  enum tutti_param_source source = TUTTI_PARAM_DEFAULT;
  const char* file = NULL;
  const char* s = tutti_param_lookup(name, 0, &source, &file);
  if (s != NULL && *s != '\0') {
    char* end = NULL;
    long long v = strtoll(s, &end, 0);
    if (end == s || *end != '\0') {
      /* tutti_param_validate refuses it at init; a use outside any
       * communicator takes the default. */
      INFO(TUTTI_ENV, "%s=\"%s\" is not an integer: using the default %lld", name, s,
           (long long)deflt);
      source = TUTTI_PARAM_DEFAULT;
      file = NULL;
    } else {
      value = v;
      INFO(TUTTI_ENV, "%s set by %s%s to %lld", name,
           source == TUTTI_PARAM_FILE ? "config file " : "environment",
           source == TUTTI_PARAM_FILE ? file : "", v);
    }
  } else {
    source = TUTTI_PARAM_DEFAULT;
    file = NULL;
  }
  /* Threads that race here read the same variable and store the same
   * values (atomically: TSan); the flag's release publishes them. */
  __atomic_store_n(&st->value, value, __ATOMIC_RELAXED);
  __atomic_store_n(&st->file, file, __ATOMIC_RELAXED);
  __atomic_store_n(&st->source, (int)source, __ATOMIC_RELAXED);
  __atomic_store_n(&st->loaded, 1, __ATOMIC_RELEASE);
  return value;
}

/* The sections the linker gathers every declaration into (weak: a program
 * may link none of either kind). */
extern const struct tutti_param_def __start_tutti_params[]
    __attribute__((weak, visibility("hidden")));
extern const struct tutti_param_def __stop_tutti_params[]
    __attribute__((weak, visibility("hidden")));
extern const struct tutti_param_str_def __start_tutti_params_str[]
    __attribute__((weak, visibility("hidden")));
extern const struct tutti_param_str_def __stop_tutti_params_str[]
    __attribute__((weak, visibility("hidden")));

void tutti_param_defs(const struct tutti_param_def** ints, int* nints,
                      const struct tutti_param_str_def** strs, int* nstrs) {
  *ints = __start_tutti_params;
  *nints = __start_tutti_params != NULL ? (int)(__stop_tutti_params - __start_tutti_params) : 0;
  *strs = __start_tutti_params_str;
  *nstrs = __start_tutti_params_str != NULL
               ? (int)(__stop_tutti_params_str - __start_tutti_params_str)
               : 0;
}

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
static TUTTI_PARAM_RANGE(timeout, "TUTTI_TIMEOUT", 300, 1, INT64_MAX,
                         "seconds any wait may last before it fails naming whom it waited for");

double tutti_timeout_s(void) {
  int64_t t = tutti_param_timeout();
  return t > 0 ? (double)t : 300.0;
}
