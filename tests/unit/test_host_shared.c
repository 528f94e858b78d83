/* What the ranks of a host share in memory, as transport.h lays it out: the
 * doorbell's `lost` word (one atomic 32-bit value, also carried in
 * goodbyes) and the board's slots. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

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

/* Slots of two generations for n ranks, each a header then its data, side
 * by side: generation g uses set g & 1. */
static void test_board_slots(void) {
  const int n = 3;
  const size_t slot = 4096;
  struct tutti_board b = {calloc(2 * (size_t)n, TUTTI_BOARD_HEADER + slot), slot, n};
  CHECK(b.base != NULL, "allocated");
  if (b.base == NULL) {
    return;
  }
  for (uint64_t g = 1; g <= 4; g++) {
    for (int r = 0; r < n; r++) {
      struct tutti_board_header* h = tutti_board_slot(&b, g, r);
      const size_t at = (size_t)((char*)h - b.base);
      const size_t want = ((size_t)(g & 1) * (size_t)n + (size_t)r) * (TUTTI_BOARD_HEADER + slot);
      CHECK(at == want, "generation %llu rank %d at %zu, expected %zu", (unsigned long long)g, r,
            at, want);
      CHECK((char*)tutti_board_data(h) == (char*)h + TUTTI_BOARD_HEADER, "data after the header");
    }
  }
  CHECK(tutti_board_slot(&b, 2, 0) == tutti_board_slot(&b, 4, 0) &&
            tutti_board_slot(&b, 1, 0) != tutti_board_slot(&b, 2, 0),
        "two sets, by parity");
  struct tutti_board_header* h = tutti_board_slot(&b, 5, 2);
  CHECK(tutti_board_posted(h) == 0, "nothing posted yet");
  tutti_board_post(h, 5);
  CHECK(tutti_board_posted(h) == 5 && tutti_board_posted(tutti_board_slot(&b, 5, 1)) == 0,
        "a post shows in its own slot only");
  free(b.base);
}

/* Where peers find each part of a doorbell: what they read when they post
 * alone on the first cache line, what the owner writes at every call after. */
static void test_doorbell_layout(void) {
  CHECK(offsetof(struct tutti_doorbell, sleeping) < 64 &&
            offsetof(struct tutti_doorbell, lost) < 64 &&
            offsetof(struct tutti_doorbell, shows_calls) < 64,
        "the transport's words share the first line");
  CHECK(offsetof(struct tutti_doorbell, status) == 64,
        "the executor's status starts the second line");
  CHECK(offsetof(struct tutti_doorbell, calls) == 128, "the calls start the third line");
}

int main(void) {
  test_lost_word();
  test_doorbell_layout();
  test_board_slots();
  return test_summary("host_shared");
}
