/* Logging with NCCL's names and line format.
 *
 *   NCCL_DEBUG        VERSION | WARN | INFO | TRACE (ABORT is accepted as NCCL does)
 *   NCCL_DEBUG_SUBSYS comma list of INIT COLL P2P SHM NET GRAPH TUNING ENV ALLOC CALL
 *                     PROXY NVLS BOOTSTRAP REG PROFILE RAS ALL; a leading ^ excludes
 *                     the listed ones; default INIT,BOOTSTRAP,ENV
 *   NCCL_DEBUG_FILE   file to write to instead of stdout; %h is the host name,
 *                     %p the pid, %% a percent sign
 *
 * Lines: "host:pid:tid [dev] NCCL INFO text", where dev is the CUDA device the
 * calling thread works for (-1 on host-only threads). WARN and TRACE lines add
 * the source file and line after [dev], as NCCL's do. */
#ifndef TUTTI_UTIL_LOG_H
#define TUTTI_UTIL_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum tutti_log_level {
  TUTTI_LOG_NONE = 0,
  TUTTI_LOG_VERSION = 1,
  TUTTI_LOG_WARN = 2,
  TUTTI_LOG_INFO = 3,
  TUTTI_LOG_ABORT = 4,
  TUTTI_LOG_TRACE = 5
};

/* NCCL's subsystem bits (same values, so masks read the same). */
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
  TUTTI_NVLS = 0x800,
  TUTTI_BOOTSTRAP = 0x1000,
  TUTTI_REG = 0x2000,
  TUTTI_PROFILE = 0x4000,
  TUTTI_RAS = 0x8000,
  TUTTI_ALL = ~0
};

#define TUTTI_LOG_DEFAULT_SUBSYS (TUTTI_INIT | TUTTI_BOOTSTRAP | TUTTI_ENV)

extern int tutti_log_level_v; /* -1 until the environment has been read */
void tutti_log_init(void);
/* Reads the logging variables again (ncclResetDebugInit): a program that
 * changed NCCL_DEBUG, NCCL_DEBUG_SUBSYS or NCCL_DEBUG_FILE logs by the new
 * values from here on. */
void tutti_log_reload(void);
void tutti_log(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) __attribute__((format(printf, 5, 6)));
/* tutti_log with the arguments as a va_list: for callers that relay other
 * code's messages (a network plugin's logger, net/plugin/callbacks.c). */
void tutti_logv(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
                const char* fmt, va_list ap) __attribute__((format(printf, 5, 0)));

#define TUTTI_LOG_ENABLED(lvl) \
  ((tutti_log_level_v < 0 ? (tutti_log_init(), 0) : 0), tutti_log_level_v >= (int)(lvl))

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

/* Whether a line of `level` about `subsys` would be printed: for callers
 * that must work to compose it. */
int tutti_log_wants(enum tutti_log_level level, unsigned long subsys);

/* The short host name (up to the first dot), as in every line's prefix. */
const char* tutti_hostname(void);

/* The CUDA device shown in this thread's lines ([dev]); -1: none. */
void tutti_log_set_device(int dev);

/* Pure pieces of the above, for tests and tools. */

/* An NCCL_DEBUG value as a level (case-insensitive); NULL or "" is
 * TUTTI_LOG_NONE, anything unknown is -1. */
int tutti_log_parse_level(const char* text);
/* An NCCL_DEBUG_SUBSYS value as a mask; names are case-insensitive and may be
 * padded with spaces. `unknown`, when not NULL, receives the first name that
 * is not a subsystem (empty when all were known). */
unsigned long tutti_log_parse_subsys(const char* text, char* unknown, size_t unknown_len);
/* NCCL_DEBUG_FILE's pattern with %h, %p and %% replaced; other % sequences
 * are kept as they are. Returns the length the full name needs (like
 * snprintf): a result >= len means `out` holds a truncated name. */
size_t tutti_log_file_name(const char* pattern, const char* host, int pid, char* out, size_t len);
/* Writes the prefix of one line ("host:pid:tid [dev] NCCL INFO ") into buf;
 * `file` is shortened to its part below src/. Returns its length. */
size_t tutti_log_prefix(char* buf, size_t len, enum tutti_log_level level, const char* host,
                        int pid, int tid, int dev, const char* file, int line, double ms);

#endif
