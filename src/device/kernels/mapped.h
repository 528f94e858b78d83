/* The mapped kernel: one collective at a time, between GPUs that map each
 * other's memory, without schedules or ring steps. Every rank pushes its
 * data straight into an inbox in each peer's region, and each rank combines
 * what arrived with its own data into its output; one handshake per round
 * instead of one per ring step (mapped.cu, chosen in launch/mapped.cu).
 *
 * Blocks are channels: block b of a launch always uses inbox chan b, whose
 * rounds are counted in dseq[b] on every rank (all ranks launch the same
 * grid for the same call), so a flag or acknowledgement names the round it
 * belongs to. A chan's inbox has slots for several rounds (simple; two for
 * LL, in an inbox of their own): a sender writes round s after its
 * receiver finished round s - slots, which every rank acknowledges to every
 * peer, data or not. */
#ifndef TUTTI_DEVICE_KERNELS_MAPPED_H
#define TUTTI_DEVICE_KERNELS_MAPPED_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "device/work.h"
#include "nccl.h"

#define TD_MAPPED_CHANNELS 128 /* inbox channels per peer: the most blocks of a launch */
#define TD_MAPPED_MAX_RANKS 8  /* the combine folds every rank's contribution at once */
/* LL rounds have inboxes of their own: a flag must never be read from
 * bytes that a simple round left there. 16 KB lines carry 8 KB of data. */
#define TD_MAPPED_LL_CHANNELS 128
#define TD_MAPPED_LL_CHANNEL_BYTES (16 * 1024)
/* LL128 rounds (mapped_ll128.cuh) too: 128-byte lines of 120 data bytes and
 * the round as their flag, in mapped.ll128_memory of inboxes (tune/knobs.c). */
#define TD_LL128_LINE 128
#define TD_LL128_DATA 120

enum td_dcoll { TD_D_ALLREDUCE, TD_D_REDUCESCATTER, TD_D_ALLGATHER, TD_D_BROADCAST, TD_D_REDUCE };

struct td_mapped {
  struct td_devcomm* comm;
  uint64_t tag; /* the launch's RAS operation (td_kernel_started) */
  const char* in;
  char* out;
  const void* scalar_dev; /* PreMulSum scalar read on the device, or NULL */
  uint64_t scalar_bits;
  uint64_t divisor;
  /* The bytes the blocks split: each rank's part (reducescatter's output,
   * allgather's input) or the whole buffer (allreduce, broadcast, reduce). */
  uint64_t bytes;
  uint32_t nb;         /* blocks = channels used */
  uint32_t round;      /* data bytes per chan and round */
  uint32_t slots;      /* simple and LL128 rounds: a chan's inbox holds this many rounds */
  uint32_t slot_bytes; /* LL128: bytes of lines per slot */
  uint8_t coll;        /* enum td_dcoll */
  uint8_t type;        /* ncclDataType_t */
  uint8_t kind;        /* enum tutti_red_kind */
  uint8_t elem_size;
  uint8_t ll;    /* low-latency lines instead of data + flag */
  uint8_t ll128; /* LL128 lines instead of data + flag */
  uint8_t pad[2];
  int32_t root;
};

#ifdef __cplusplus
extern "C" {
#endif
/* Who sends to whom in the mapped and copy-engine paths: every rank to
 * every other, but in broadcast (the root only) and reduce (to the root). */
__host__ __device__ static inline int td_dsends(int coll, int root, int from, int to) {
  return coll == TD_D_BROADCAST ? from == root : coll == TD_D_REDUCE ? to == root : 1;
}

/* The mapped and copy-engine kernels' name (enum td_dcoll) of a
 * collective (enum tutti_coll), or -1 for one they do not run. */
int td_dcoll(int coll);
/* Launches the mapped kernel; returns the cudaError_t. */
int td_mapped_launch(const struct td_mapped* w, int nthreads, cudaStream_t stream);
/* How many mapped kernels of `nthreads` threads one SM holds at once. */
int td_mapped_occupancy(int nthreads, int* per_sm);
/* The attributes of the mapped kernel of protocol `p` (0 simple, 1 LL, 2 LL128). */
int td_mapped_attributes(int p, struct cudaFuncAttributes* a);
struct tutti_dev_comm;
struct tutti_dev_op;
/* Runs `op` on the mapped kernel as its plan says (its lines, blocks,
 * rounds and threads: tune/device.c). */
ncclResult_t td_mapped_run(struct tutti_dev_comm* dc, const struct tutti_dev_op* op);
#ifdef __cplusplus
}
#endif

#endif
