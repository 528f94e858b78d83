/* See harness.h. */
#include "harness.h"

int test_passed;
int test_failed;

int test_summary(const char* name) {
  printf("%s: %d passed, %d failed\n", name, test_passed, test_failed);
  return test_failed == 0 ? 0 : 1;
}
