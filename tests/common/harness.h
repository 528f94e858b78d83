/* A tiny test harness: CHECK records a failure with file:line and goes on;
 * tests end with `return test_summary("name");`, which prints
 * "N passed, N failed" and returns the exit status. */
#ifndef TUTTI_TEST_HARNESS_H
#define TUTTI_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>

extern int test_passed;
extern int test_failed;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (cond) {                                                       \
      test_passed++;                                                  \
    } else {                                                          \
      test_failed++;                                                  \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
    }                                                                 \
  } while (0)

#define CHECK_NCCL(call)                                                                    \
  do {                                                                                      \
    ncclResult_t r_ = (call);                                                               \
    CHECK(r_ == ncclSuccess, "%s returned %d: %s", #call, (int)r_, ncclGetLastError(NULL)); \
  } while (0)

int test_summary(const char* name);

/* xorshift64: a reproducible stream of test inputs from the state at `s`. */
static inline uint64_t test_xorshift(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

#endif
