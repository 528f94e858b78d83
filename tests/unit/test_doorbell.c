/* The doorbell's words that ranks and proxies exchange: the `lost` word's
 * encoding (one atomic 32-bit value, also carried in goodbyes). */
#include <errno.h>

#include "harness.h"
#include "transport/transport.h"

static void test_lost_word(void) {
  CHECK(tutti_lost_errno(0) == 0 && tutti_lost_rank(0) == -1 && !tutti_lost_is_self(0),
        "0 names nothing");
  const int ranks[] = {0, 1, 7, 1000, 0xFFFFFD};
  const int errs[] = {0, ETIME, ETIMEDOUT, ECONNRESET, 255};
  for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
    for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++) {
      const uint32_t v = tutti_lost_make(errs[e], ranks[i]);
      CHECK(v != 0, "rank %d, errno %d: a non-zero word", ranks[i], errs[e]);
      CHECK(tutti_lost_rank(v) == ranks[i] && tutti_lost_errno(v) == errs[e] &&
                !tutti_lost_is_self(v),
            "rank %d, errno %d: read back rank %d errno %d", ranks[i], errs[e], tutti_lost_rank(v),
            tutti_lost_errno(v));
    }
  }
  const uint32_t self = tutti_lost_make(ECONNRESET, TUTTI_LOST_SELF);
  CHECK(tutti_lost_is_self(self) && tutti_lost_rank(self) == -1 &&
            tutti_lost_errno(self) == ECONNRESET,
        "the bell's own connection: %#x", self);
  CHECK(tutti_lost_is_self(tutti_lost_make(0, TUTTI_LOST_SELF)), "closed without a goodbye");
  CHECK(tutti_lost_errno(tutti_lost_make(300, 2)) == EIO &&
            tutti_lost_rank(tutti_lost_make(-4, 2)) == 2 &&
            tutti_lost_errno(tutti_lost_make(-4, 2)) == EIO,
        "an errno beyond 8 bits reads as EIO");
  /* The word as the original hand-packed layout had it: errno high, rank + 1 low. */
  CHECK(tutti_lost_make(ETIME, 3) == (((uint32_t)ETIME << 24) | 4u), "the layout is unchanged");
}

int main(void) {
  test_lost_word();
  return test_summary("doorbell");
}
