/* Call shapes already explained: NCCL_DEBUG_SUBSYS=TUNING prints the plan
 * of each distinct shape once, not once per call. */
#include <stdint.h>

#include "tune/tune.h"

#define SEEN_ENTRIES 4096 /* shapes remembered; later new ones are not printed */

static uint64_t seen[SEEN_ENTRIES];

uint64_t tutti_tune_shape(const struct tutti_coll_args* a, unsigned path) {
  const uint64_t parts[] = {
      (uint64_t)a->coll, a->count * a->elem_size, (uint64_t)a->nranks, (uint64_t)a->nhosts,
      (uint64_t)a->in_place, (uint64_t)a->device, (uint64_t)a->max_local, (uint64_t)path,
      /* a call's own configuration plans it apart */
      (uint64_t)a->call_algos, (uint64_t)a->min_channels << 32 | (uint32_t)a->max_channels};
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    h ^= parts[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
  }
  return h == 0 ? 1 : h; /* 0 marks a free entry */
}

int tutti_tune_first_sight(uint64_t shape) {
  shape = shape == 0 ? 1 : shape;
  for (unsigned i = 0; i < SEEN_ENTRIES; i++) {
    uint64_t* entry = &seen[(shape + i) % SEEN_ENTRIES];
    uint64_t cur = __atomic_load_n(entry, __ATOMIC_RELAXED);
    if (cur == shape) {
      return 0;
    }
    if (cur == 0) {
      uint64_t expected = 0;
      if (__atomic_compare_exchange_n(entry, &expected, shape, 0, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        return 1;
      }
      if (expected == shape) {
        return 0;
      }
    }
  }
  return 0;
}
