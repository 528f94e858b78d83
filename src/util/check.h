/* Error propagation used everywhere: every function returns ncclResult_t and
 * the place where a failure starts records the sentence that explains it. */
#ifndef TUTTI_UTIL_CHECK_H
#define TUTTI_UTIL_CHECK_H

#include <errno.h>
#include <string.h>

#include "nccl.h"
#include "util/log.h"

/* Records `fmt` as this thread's last error (ncclGetLastError) and logs it
 * as a warning. Returns `res` so callers can `return tutti_error(...)`. */
ncclResult_t tutti_error(ncclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The text recorded by the last tutti_error on this thread ("" when none). */
const char* tutti_last_error(void);
void tutti_clear_error(void);
/* Sets this thread's last error text without logging (errors carried across threads). */
void tutti_set_last_error(const char* text);

#define NCCLCHECK(call)               \
  do {                                \
    ncclResult_t tutti_res_ = (call); \
    if (tutti_res_ != ncclSuccess) {  \
      return tutti_res_;              \
    }                                 \
  } while (0)

#define NCCLCHECKGOTO(call, res, label) \
  do {                                  \
    (res) = (call);                     \
    if ((res) != ncclSuccess) {         \
      goto label;                       \
    }                                   \
  } while (0)

/* A failed system call: names the call and the errno text. */
#define SYSCHECK(call, name)                                                         \
  do {                                                                               \
    if ((call) == -1) {                                                              \
      return tutti_error(ncclSystemError, "%s failed: %s", (name), strerror(errno)); \
    }                                                                                \
  } while (0)

#define TUTTI_UNUSED(x) ((void)(x))

#endif
