/* Logging with NCCL's names: NCCL_DEBUG=VERSION|WARN|INFO|TRACE,
 * NCCL_DEBUG_SUBSYS=INIT,COLL,... (with ^ to exclude), NCCL_DEBUG_FILE. */
#ifndef TUTTI_UTIL_LOG_H
#define TUTTI_UTIL_LOG_H

enum tutti_log_level {
  TUTTI_LOG_NONE = 0,
  TUTTI_LOG_VERSION = 1,
  TUTTI_LOG_WARN = 2,
  TUTTI_LOG_INFO = 3,
  TUTTI_LOG_ABORT = 4,
  TUTTI_LOG_TRACE = 5
};

enum tutti_log_subsys {
  TUTTI_INIT = 0x1,
  TUTTI_COLL = 0x2,
  TUTTI_P2P = 0x4,
  TUTTI_SHM = 0x8,
  TUTTI_NET = 0x10,
  TUTTI_GRAPH = 0x20,
  TUTTI_TUNING = 0x40,
  TUTTI_ENV = 0x80,
  TUTTI_ALLOC = 0x100,
  TUTTI_CALL = 0x200,
  TUTTI_PROXY = 0x400,
  TUTTI_BOOTSTRAP = 0x1000,
  TUTTI_ALL = ~0
};

extern int tutti_log_level_v; /* -1 until the environment has been read */
void tutti_log_init(void);
void tutti_log(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) __attribute__((format(printf, 5, 6)));

#define TUTTI_LOG_ENABLED(lvl) \
  ((tutti_log_level_v < 0 ? (tutti_log_init(), 0) : 0), tutti_log_level_v >= (lvl))

#define WARN(...) tutti_log(TUTTI_LOG_WARN, TUTTI_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(subsys, ...)                                                   \
  do {                                                                      \
    if (TUTTI_LOG_ENABLED(TUTTI_LOG_INFO)) {                                \
      tutti_log(TUTTI_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
    }                                                                       \
  } while (0)
#define TRACE(subsys, ...)                                                   \
  do {                                                                       \
    if (TUTTI_LOG_ENABLED(TUTTI_LOG_TRACE)) {                                \
      tutti_log(TUTTI_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
    }                                                                        \
  } while (0)

/* "host:pid:tid" prefix pieces; the rank is added by callers that know it. */
const char* tutti_hostname(void);

#endif
