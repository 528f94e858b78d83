/* The functions tutti hands network plugins at init: a logger that prints
 * their lines as tutti's own (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, the plugin's
 * file and line), and a profiler callback that profiles nothing. */
#include <stdarg.h>

#include "net/plugin/plugin.h"
#include "util/log.h"

void tutti_netplugin_log(int level, unsigned long flags, const char* file, int line,
                         const char* fmt, ...) {
  enum tutti_log_level l;
  switch (level) {
    case TUTTI_LOG_VERSION:
    case TUTTI_LOG_WARN:
    case TUTTI_LOG_INFO:
    case TUTTI_LOG_TRACE:
      l = (enum tutti_log_level)level;
      break;
    case TUTTI_LOG_ABORT:
      /* NCCL's "abort" is a plugin's fatal error: shown wherever warnings are. */
      l = TUTTI_LOG_WARN;
      break;
    default: /* none, or a level NCCL does not have */
      return;
  }
  if (fmt == NULL || !TUTTI_LOG_ENABLED(l)) {
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  tutti_logv(l, flags, file, line, fmt, ap);
  va_end(ap);
}

/* v10+ plugins ask for an event per operation when profiling; a NULL event
 * tells them there is none to fill. */
ncclResult_t tutti_netplugin_profile(void** event, int type, void* phandle, int64_t plugin_id,
                                     void* ext) {
  (void)type;
  (void)phandle;
  (void)plugin_id;
  (void)ext;
  if (event != NULL) {
    *event = NULL;
  }
  return ncclSuccess;
}
