/* A thread's group state, below the group's other files: how deep its
 * ncclGroupStart calls nest, and the first error of its open group. */
#include "api/group.h"

static __thread int depth;
static __thread ncclResult_t error;

int tutti_group_depth(void) {
  return depth;
}

ncclResult_t tutti_group_fail(ncclResult_t res) {
  if (depth > 0 && error == ncclSuccess) {
    error = res;
  }
  return res;
}

void tutti_group_open(void) {
  if (depth == 0) {
    error = ncclSuccess;
  }
  depth++;
}

int tutti_group_close(void) {
  return depth == 0 ? -1 : --depth;
}

ncclResult_t tutti_group_error(void) {
  return error;
}

void tutti_group_clear_error(void) {
  error = ncclSuccess;
}
