/* Logging inside the plugin library: the util and net files it reuses log
 * through util/log.h (and fail through util/error.c's tutti_error, which
 * logs its warning the same way); here lines go to the logger NCCL passed
 * to init, which filters them by its own
 * NCCL_DEBUG and NCCL_DEBUG_SUBSYS (nothing is parsed here). Lines before
 * the first init, or with a NULL logger, are dropped. */
#include <stdarg.h>
#include <stdio.h>

#include "plugin.h"
#include "util/check.h"
#include "util/log.h"

static tutti_net_abi_logger logger; /* atomic */

/* Every line reaches the logger, which decides. */
int tutti_log_level_v = TUTTI_LOG_TRACE;

void tutti_log_init(void) {}

void tutti_netexport_set_logger(tutti_net_abi_logger log) {
  if (log != NULL) {
    __atomic_store_n(&logger, log, __ATOMIC_RELEASE);
  }
}

static void emit(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
                 const char* fmt, va_list ap) {
  tutti_net_abi_logger log = __atomic_load_n(&logger, __ATOMIC_ACQUIRE);
  if (log == NULL) {
    return;
  }
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  log((int)level, subsys, file, line, "%s", msg);
}

void tutti_log(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(level, subsys, file, line, fmt, ap);
  va_end(ap);
}

int tutti_log_wants(enum tutti_log_level level, unsigned long subsys) {
  TUTTI_UNUSED(level);
  TUTTI_UNUSED(subsys);
  return __atomic_load_n(&logger, __ATOMIC_ACQUIRE) != NULL;
}
