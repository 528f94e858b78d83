/* Counts at the cut points of the chunked algorithms (cuts.h). */
#include "cuts.h"

#include "algo/pattern.h"
#include "transport/fifo.h"
#include "tune/tune.h"

ncclDataType_t cuts_type_of_size(size_t elem_size, size_t turn) {
  static const ncclDataType_t by_size[4][4] = {
      {ncclInt8, ncclUint8, ncclFloat8e4m3, ncclFloat8e5m2},
      {ncclFloat16, ncclBfloat16, ncclFloat16, ncclBfloat16},
      {ncclInt32, ncclUint32, ncclFloat32, ncclInt32},
      {ncclInt64, ncclUint64, ncclFloat64, ncclInt64}};
  const int row = elem_size == 1 ? 0 : elem_size == 2 ? 1 : elem_size == 4 ? 2 : 3;
  return by_size[row][turn % 4];
}

size_t cuts_chunk_of_queue(size_t buffsize) {
  uint32_t nslots;
  size_t slot;
  tutti_fifo_geometry(buffsize, &nslots, &slot);
  return tutti_tune_chunk((size_t)nslots * slot, slot);
}

size_t cuts_chunk_bytes(int nranks, int nhosts) {
  return cuts_chunk_of_queue(tutti_tune_queue_bytes(nranks, nhosts));
}

size_t cuts_board_bytes(void) {
  /* As transport/shm.c rounds the knob to whole cache lines. */
  return ((size_t)tutti_tune_knob(TUTTI_KNOB_BOARD_SLOT) + 63) & ~(size_t)63;
}

static void add(size_t* out, int* len, int cap, size_t c, size_t most, int* added) {
  if (*len >= cap || (most != 0 && c > most)) {
    return;
  }
  for (int i = 0; i < *len; i++) {
    if (out[i] == c) {
      return;
    }
  }
  out[(*len)++] = c;
  (*added)++;
}

int cuts_counts(size_t* out, int* len, int cap, size_t unit_bytes, size_t elem_size, int nranks,
                int kmax, unsigned shape, size_t most) {
  /* Rounds count whole elements, as the builders do. */
  const size_t u = tutti_chunk_elems(unit_bytes, elem_size);
  const size_t n = (size_t)nranks;
  int added = 0;
  for (size_t k = 1; u > 0 && k <= (size_t)kmax; k++) {
    for (size_t b = k * u - 1; b <= k * u + 1; b++) {
      if (shape & CUTS_WHOLE) {
        add(out, len, cap, b, most, &added);
      }
      if (!(shape & CUTS_SPLIT)) {
        continue;
      }
      /* count % n = m: the first m blocks are one longer than the rest. */
      const size_t ms[3] = {0, 1, n - 1};
      for (int i = 0; i < 3; i++) {
        if (ms[i] < n && (ms[i] == 0 || b > 0)) {
          add(out, len, cap, n * (b - (ms[i] > 0)) + ms[i], most, &added);
        }
      }
    }
  }
  return added;
}
