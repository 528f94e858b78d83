/* The copy-engine path: single collectives between GPUs that map each
 * other's memory, where the link, not the SMs, moves the data. Each rank's
 * copy engine writes its contribution straight into an inbox in every peer
 * it sends to (cudaMemcpyAsync, peer to peer); then a kernel on each rank
 * tells its peers that its copies landed, waits to hear the same from
 * them, and combines (reductions, in rank order) or copies (allgather,
 * broadcast) what arrived into the output, at the speed of local memory.
 *
 * Pieces: a call moves in pieces (its plan's: ce.piece, tune/knobs.c; at
 * most an inbox slot: ce.memory split in TD_CE_SLOTS slots per peer);
 * each piece has a number, the same on every rank, that its flags carry,
 * and takes the slots in turn. Copies run on a stream of their own, ahead
 * of the kernels, so that the link moves piece k + 1 while the kernel
 * combines piece k. The copy of piece k into a peer's slot is issued after
 * this rank's kernel of piece k - TD_CE_SLOTS + 1 heard from that peer,
 * which the peer tells only once its kernel of piece k - TD_CE_SLOTS, the
 * last reader of the slot, finished: stream order and events do the rest,
 * so no acknowledgement crosses the link.
 *
 * Not taken: groups, PreMulSum (a sender's scalar would have to travel with
 * its data), and streams being captured into a graph (the slot of a piece
 * is fixed in a captured copy, but replays go on counting); these run on
 * the mapped or the schedules' kernels, whose counters live on the device. */
#ifndef TUTTI_DEVICE_LAUNCH_CE_H
#define TUTTI_DEVICE_LAUNCH_CE_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "device/work.h"
#include "nccl.h"

struct td_ce {
  struct td_devcomm* comm;
  uint64_t tag; /* the launch's RAS operation (td_kernel_started) */
  const char* in;
  char* out;
  uint64_t seq;  /* the piece's number */
  uint64_t slot; /* its inbox slot: seq % TD_CE_SLOTS */
  uint64_t off;  /* its offset in the buffer (allreduce, broadcast, reduce) or in each part */
  uint64_t len;  /* its bytes */
  uint64_t part; /* bytes per rank (reducescatter's output, allgather's input) */
  uint64_t divisor;
  uint8_t coll; /* enum td_dcoll */
  uint8_t type;
  uint8_t kind;
  uint8_t elem_size;
  int32_t root;
};

#ifdef __cplusplus
extern "C" {
#endif
/* Launches the combining kernel of one piece; returns the cudaError_t. */
int td_ce_launch(const struct td_ce* w, int nblocks, int nthreads, cudaStream_t stream);
/* The kernel's attributes (kernels/kernel.cu: tutti_dev_kernel_frames). */
int td_ce_attributes(struct cudaFuncAttributes* a);
struct tutti_dev_comm;
struct tutti_dev_op;
/* Runs `op` on the copy-engine path as its plan says (pieces, blocks,
 * threads: tune/device.c). */
ncclResult_t td_ce_run(struct tutti_dev_comm* dc, const struct tutti_dev_op* op);
#ifdef __cplusplus
}
#endif

#endif
