/* NCCL_DEBUG / NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE logging (see log.h). Lines
 * look like NCCL's ("host:pid:tid [dev] NCCL INFO ...") so existing log
 * filters keep working. */
#include "util/log.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "util/param.h"

/* Read here with getenv, from the environment only: param.c logs through
 * this file, so this one cannot read through it. */
TUTTI_PARAM_STR_ENV(debug, "NCCL_DEBUG", NULL, "NONE, VERSION, WARN, INFO, ABORT, TRACE (any case)",
                    "how much the library logs (unset: nothing)");
TUTTI_PARAM_STR_ENV(debug_subsys, "NCCL_DEBUG_SUBSYS", NULL,
                    "a comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, "
                    "PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, ALL; a leading ^ leaves them out",
                    "which parts of the library log at INFO (unset: INIT, BOOTSTRAP, ENV)");
TUTTI_PARAM_STR_ENV(debug_file, "NCCL_DEBUG_FILE", NULL,
                    "a file name; %h: the host name, %p: the process id",
                    "where the log goes when NCCL_DEBUG is set (unset: stdout)");

int tutti_log_level_v = -1;
static unsigned long log_mask = TUTTI_LOG_DEFAULT_SUBSYS;
static FILE* log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char host_name[64];
static struct timespec log_epoch;
static _Thread_local int log_dev = -1;

static const struct {
  const char* name;
  unsigned long bit;
} subsys_names[] = {
    {"INIT", TUTTI_INIT},
    {"COLL", TUTTI_COLL},
    {"P2P", TUTTI_P2P},
    {"SHM", TUTTI_SHM},
    {"NET", TUTTI_NET},
    {"GRAPH", TUTTI_GRAPH},
    {"TUNING", TUTTI_TUNING},
    {"ENV", TUTTI_ENV},
    {"ALLOC", TUTTI_ALLOC},
    {"CALL", TUTTI_CALL},
    {"PROXY", TUTTI_PROXY},
    {"NVLS", TUTTI_NVLS},
    {"BOOTSTRAP", TUTTI_BOOTSTRAP},
    {"REG", TUTTI_REG},
    {"PROFILE", TUTTI_PROFILE},
    {"RAS", TUTTI_RAS},
    {"ALL", (unsigned long)TUTTI_ALL},
};

static const char* level_names[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};

const char* tutti_hostname(void) {
  if (host_name[0] == '\0') {
    char buf[64];
    if (gethostname(buf, sizeof buf) != 0) {
      snprintf(buf, sizeof buf, "unknown");
    }
    buf[sizeof buf - 1] = '\0';
    buf[strcspn(buf, ".")] = '\0';
    memcpy(host_name, buf, sizeof host_name);
  }
  return host_name;
}

void tutti_log_set_device(int dev) {
  log_dev = dev;
}

int tutti_log_parse_level(const char* text) {
  if (text == NULL || *text == '\0') {
    return TUTTI_LOG_NONE;
  }
  for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++) {
    if (strcasecmp(text, level_names[i]) == 0) {
      return i;
    }
  }
  return -1;
}

unsigned long tutti_log_parse_subsys(const char* text, char* unknown, size_t unknown_len) {
  if (unknown != NULL && unknown_len > 0) {
    unknown[0] = '\0';
  }
  if (text == NULL) {
    return TUTTI_LOG_DEFAULT_SUBSYS;
  }
  while (isspace((unsigned char)*text)) {
    text++;
  }
  const int invert = *text == '^';
  unsigned long mask = 0;
  const char* p = text + invert;
  while (*p != '\0') {
    size_t n = strcspn(p, ",");
    const char* tok = p;
    p += n + (p[n] == ',');
    while (n > 0 && isspace((unsigned char)*tok)) {
      tok++;
      n--;
    }
    while (n > 0 && isspace((unsigned char)tok[n - 1])) {
      n--;
    }
    if (n == 0) {
      continue;
    }
    int known = 0;
    for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++) {
      if (strlen(subsys_names[i].name) == n && strncasecmp(tok, subsys_names[i].name, n) == 0) {
        mask |= subsys_names[i].bit;
        known = 1;
      }
    }
    if (!known && unknown != NULL && unknown_len > 0 && unknown[0] == '\0') {
      snprintf(unknown, unknown_len, "%.*s", (int)n, tok);
    }
  }
  return invert ? ~mask : mask;
}

size_t tutti_log_file_name(const char* pattern, const char* host, int pid, char* out, size_t len) {
  size_t o = 0;
  char piece[32];
  for (const char* p = pattern; *p != '\0'; p++) {
    const char* add = NULL;
    size_t addn = 1;
    if (p[0] == '%' && p[1] == 'h') {
      add = host;
      addn = strlen(host);
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      addn = (size_t)snprintf(piece, sizeof piece, "%d", pid);
      add = piece;
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      add = p;
      p++;
    } else {
      add = p;
    }
    for (size_t i = 0; i < addn; i++, o++) {
      if (o + 1 < len) {
        out[o] = add[i];
      }
    }
  }
  if (len > 0) {
    out[o < len ? o : len - 1] = '\0';
  }
  return o;
}

/* The part of a source path below the tree's src/ ("util/param.c"), or
 * the file name for files elsewhere. */
static const char* short_file(const char* file) {
  if (file == NULL) {
    return "?";
  }
  const char* best = NULL;
  for (const char* p = strstr(file, "src/"); p != NULL; p = strstr(p + 1, "src/")) {
    if (p == file || p[-1] == '/') {
      best = p + 4;
    }
  }
  if (best == NULL) {
    const char* slash = strrchr(file, '/');
    best = slash != NULL ? slash + 1 : file;
  }
  return best;
}

size_t tutti_log_prefix(char* buf, size_t len, enum tutti_log_level level, const char* host,
                        int pid, int tid, int dev, const char* file, int line, double ms) {
  int n;
  if (level == TUTTI_LOG_WARN) {
    n = snprintf(buf, len, "%s:%d:%d [%d] %s:%d NCCL WARN ", host, pid, tid, dev, short_file(file),
                 line);
  } else if (level == TUTTI_LOG_TRACE) {
    n = snprintf(buf, len, "%s:%d:%d [%d] %.6f %s:%d NCCL TRACE ", host, pid, tid, dev, ms,
                 short_file(file), line);
  } else {
    n = snprintf(buf, len, "%s:%d:%d [%d] NCCL INFO ", host, pid, tid, dev);
  }
  return n < 0 ? 0 : (size_t)n;
}

static FILE* open_log_file(const char* pattern) {
  char path[1024];
  if (tutti_log_file_name(pattern, tutti_hostname(), (int)getpid(), path, sizeof path) >=
      sizeof path) {
    fprintf(stderr,
            "tutti: NCCL_DEBUG_FILE=\"%s\" makes a name that is too long: logging to "
            "stdout\n",
            pattern);
    return NULL;
  }
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "tutti: cannot open NCCL_DEBUG_FILE \"%s\" for writing: logging to stdout\n",
            path);
    return NULL;
  }
  setvbuf(f, NULL, _IOLBF, 0);
  return f;
}

static int wanted(enum tutti_log_level level, unsigned long subsys);
static void emit(enum tutti_log_level level, const char* file, int line, const char* fmt,
                 va_list ap);

/* tutti_log without the initialization: for log_init_once itself. */
__attribute__((format(printf, 5, 6))) static void emitf(enum tutti_log_level level,
                                                        unsigned long subsys, const char* file,
                                                        int line, const char* fmt, ...) {
  if (wanted(level, subsys)) {
    va_list ap;
    va_start(ap, fmt);
    emit(level, file, line, fmt, ap);
    va_end(ap);
  }
}

/* Reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE and starts logging
 * with them; `banner`: print the version line when the level asks for it. */
static void log_load(int banner) {
  const char* lvl = getenv("NCCL_DEBUG");
  int level = tutti_log_parse_level(lvl);
  if (level < 0) {
    fprintf(stderr,
            "tutti: NCCL_DEBUG=\"%s\" is not one of VERSION, WARN, INFO, TRACE: logging stays "
            "off\n",
            lvl);
    level = TUTTI_LOG_NONE;
  }
  char unknown[32];
  const char* sub = getenv("NCCL_DEBUG_SUBSYS");
  const unsigned long mask = tutti_log_parse_subsys(sub, unknown, sizeof unknown);
  FILE* out = stdout;
  const char* file = getenv("NCCL_DEBUG_FILE");
  if (file != NULL && *file != '\0' && level > TUTTI_LOG_NONE) {
    FILE* f = open_log_file(file);
    if (f != NULL) {
      out = f;
    }
  }
  tutti_hostname();
  /* Lines being written finish on the old file; later ones go to the new. */
  pthread_mutex_lock(&log_lock);
  FILE* old = log_file;
  log_mask = mask;
  log_file = out;
  clock_gettime(CLOCK_MONOTONIC, &log_epoch);
  __atomic_store_n(&tutti_log_level_v, level, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&log_lock);
  if (old != NULL && old != stdout && old != out) {
    fclose(old);
  }
  if (banner && level >= TUTTI_LOG_VERSION) {
    pthread_mutex_lock(&log_lock);
    fprintf(log_file, "NCCL version %d.%d.%d (tutti %s)\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
            TUTTI_VERSION_STRING);
    fflush(log_file);
    pthread_mutex_unlock(&log_lock);
  }
  if (unknown[0] != '\0') {
    emitf(TUTTI_LOG_WARN, TUTTI_ALL, __FILE__, __LINE__,
          "NCCL_DEBUG_SUBSYS=\"%s\": \"%s\" is not a subsystem (INIT, COLL, P2P, SHM, NET, "
          "GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, ALL)",
          sub, unknown);
  }
}

static void log_init_once(void) {
  log_load(1);
}

void tutti_log_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, log_init_once);
}

void tutti_log_reload(void) {
  tutti_log_init();
  log_load(0);
}

/* Formats and writes one line; the caller has checked level and mask. */
static void emit(enum tutti_log_level level, const char* file, int line, const char* fmt,
                 va_list ap) {
  double ms = 0;
  if (level == TUTTI_LOG_TRACE) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ms = (double)(ts.tv_sec - log_epoch.tv_sec) * 1e3 +
         (double)(ts.tv_nsec - log_epoch.tv_nsec) * 1e-6;
  }
  char msg[2048];
  size_t n = tutti_log_prefix(msg, sizeof msg - 1, level, host_name, (int)getpid(),
                              (int)syscall(SYS_gettid), log_dev, file, line, ms);
  n = n < sizeof msg - 2 ? n : sizeof msg - 2;
  int m = vsnprintf(msg + n, sizeof msg - 1 - n, fmt, ap);
  n += m < 0 ? 0 : (size_t)m < sizeof msg - 1 - n ? (size_t)m : sizeof msg - 2 - n;
  msg[n++] = '\n';
  pthread_mutex_lock(&log_lock);
  fwrite(msg, 1, n, log_file);
  fflush(log_file);
  pthread_mutex_unlock(&log_lock);
}

static int wanted(enum tutti_log_level level, unsigned long subsys) {
  if (__atomic_load_n(&tutti_log_level_v, __ATOMIC_ACQUIRE) < (int)level) {
    return 0;
  }
  return !((level == TUTTI_LOG_INFO || level == TUTTI_LOG_TRACE) && (subsys & log_mask) == 0);
}

void tutti_logv(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
                const char* fmt, va_list ap) {
  tutti_log_init();
  if (wanted(level, subsys)) {
    emit(level, file, line, fmt, ap);
  }
}

void tutti_log(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tutti_logv(level, subsys, file, line, fmt, ap);
  va_end(ap);
}

int tutti_log_wants(enum tutti_log_level level, unsigned long subsys) {
  return TUTTI_LOG_ENABLED(level) && (log_mask & subsys) != 0;
}
