/* The per-thread record of why the last call failed: tutti_error fills it
 * where a failure starts (and logs it as a warning), ncclGetLastError and
 * the communicator's own record read it (api/error.c). */
#include <stdarg.h>
#include <stdio.h>

#include "util/check.h"
#include "util/log.h"

static __thread char last_error[1024];

ncclResult_t tutti_error(ncclResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  WARN("%s", last_error);
  return res;
}

const char* tutti_last_error(void) {
  return last_error;
}

void tutti_clear_error(void) {
  last_error[0] = '\0';
}

void tutti_set_last_error(const char* text) {
  snprintf(last_error, sizeof last_error, "%s", text);
}
