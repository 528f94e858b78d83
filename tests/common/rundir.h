/* A runtime directory of the test's own, for tests that count descriptors.
 * One process of a user's answers tutti-ras for the host (it holds
 * $XDG_RUNTIME_DIR/tutti/ras.lock): with the shared directory the role
 * passes to a test whenever another test that held it ends, and the
 * listener it then opens would count as a descriptor grown mid-run. */
#ifndef TUTTI_TEST_RUNDIR_H
#define TUTTI_TEST_RUNDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Makes dir (a "/tmp/NAME-XXXXXX" template, rewritten) and points
 * XDG_RUNTIME_DIR at it; 0 on success. */
static inline int test_rundir_make(char* dir) {
  return mkdtemp(dir) != NULL && setenv("XDG_RUNTIME_DIR", dir, 1) == 0 ? 0 : -1;
}

/* Removes what the library left in it (RAS's socket and lock), and it. */
static inline void test_rundir_remove(const char* dir) {
  const char* const left[] = {"tutti/ras.sock", "tutti/ras.lock"};
  char path[512];
  for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, left[i]);
    (void)unlink(path);
  }
  snprintf(path, sizeof path, "%s/tutti", dir);
  (void)rmdir(path);
  (void)rmdir(dir);
}

#endif
