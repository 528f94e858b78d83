/* NCCL_DEBUG / NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE logging. Lines look like
 * NCCL's ("host:pid:tid NCCL INFO ...") so existing log filters keep working. */
#include "util/log.h"

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

int tutti_log_level_v = -1;
static unsigned long log_mask = TUTTI_INIT | TUTTI_ENV; /* NCCL's default mask */
static FILE* log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char host_name[64];

static const struct {
  const char* name;
  unsigned long bit;
} subsys_names[] = {
    {"INIT", TUTTI_INIT},     {"COLL", TUTTI_COLL},   {"P2P", TUTTI_P2P},
    {"SHM", TUTTI_SHM},       {"NET", TUTTI_NET},     {"GRAPH", TUTTI_GRAPH},
    {"TUNING", TUTTI_TUNING}, {"ENV", TUTTI_ENV},     {"ALLOC", TUTTI_ALLOC},
    {"CALL", TUTTI_CALL},     {"PROXY", TUTTI_PROXY}, {"BOOTSTRAP", TUTTI_BOOTSTRAP},
    {"ALL", TUTTI_ALL},
};

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

static unsigned long parse_mask(const char* s) {
  int invert = (*s == '^');
  if (invert) {
    s++;
  }
  unsigned long mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++) {
      if (strcasecmp(tok, subsys_names[i].name) == 0) {
        mask |= subsys_names[i].bit;
      }
    }
  }
  return invert ? ~mask : mask;
}

static FILE* open_log_file(const char* pattern) {
  char path[1024];
  size_t o = 0;
  for (const char* p = pattern; *p != '\0' && o + 32 < sizeof path; p++) {
    if (p[0] == '%' && p[1] == 'h') {
      o += (size_t)snprintf(path + o, sizeof path - o, "%s", tutti_hostname());
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
      p++;
    } else {
      path[o++] = *p;
    }
  }
  path[o] = '\0';
  FILE* f = fopen(path, "w");
  if (f != NULL) {
    setvbuf(f, NULL, _IOLBF, 0);
  }
  return f;
}

static void log_init_once(void) {
  const char* lvl = getenv("NCCL_DEBUG");
  int level = TUTTI_LOG_NONE;
  if (lvl != NULL) {
    if (strcasecmp(lvl, "VERSION") == 0) {
      level = TUTTI_LOG_VERSION;
    } else if (strcasecmp(lvl, "WARN") == 0) {
      level = TUTTI_LOG_WARN;
    } else if (strcasecmp(lvl, "INFO") == 0) {
      level = TUTTI_LOG_INFO;
    } else if (strcasecmp(lvl, "ABORT") == 0) {
      level = TUTTI_LOG_ABORT;
    } else if (strcasecmp(lvl, "TRACE") == 0) {
      level = TUTTI_LOG_TRACE;
    }
  }
  const char* sub = getenv("NCCL_DEBUG_SUBSYS");
  if (sub != NULL) {
    log_mask = parse_mask(sub);
  }
  log_file = stdout;
  const char* file = getenv("NCCL_DEBUG_FILE");
  if (file != NULL && level > TUTTI_LOG_NONE) {
    FILE* f = open_log_file(file);
    if (f != NULL) {
      log_file = f;
    }
  }
  tutti_hostname();
  __atomic_store_n(&tutti_log_level_v, level, __ATOMIC_RELEASE);
  if (level >= TUTTI_LOG_VERSION) {
    fprintf(log_file, "NCCL version %d.%d.%d (tutti %s)\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
            TUTTI_VERSION_STRING);
    fflush(log_file);
  }
}

void tutti_log_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, log_init_once);
}

void tutti_log(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) {
  tutti_log_init();
  if (__atomic_load_n(&tutti_log_level_v, __ATOMIC_ACQUIRE) < (int)level) {
    return;
  }
  if (level == TUTTI_LOG_INFO && (subsys & log_mask) == 0) {
    return;
  }
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int tid = (int)syscall(SYS_gettid);
  pthread_mutex_lock(&log_lock);
  if (level == TUTTI_LOG_WARN) {
    fprintf(log_file, "%s:%d:%d NCCL WARN %s\n", host_name, (int)getpid(), tid, msg);
  } else if (level == TUTTI_LOG_TRACE) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(log_file, "%s:%d:%d %ld.%06ld %s:%d NCCL TRACE %s\n", host_name, (int)getpid(), tid,
            (long)ts.tv_sec, ts.tv_nsec / 1000, file, line, msg);
  } else {
    fprintf(log_file, "%s:%d:%d NCCL INFO %s\n", host_name, (int)getpid(), tid, msg);
  }
  fflush(log_file);
  pthread_mutex_unlock(&log_lock);
}
