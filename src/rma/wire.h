/* What one-sided operations put in a queue slot of the service
 * communicator: a record header, then the payload. */
#ifndef TUTTI_RMA_WIRE_H
#define TUTTI_RMA_WIRE_H

#include <stdint.h>

#define TUTTI_RMA_MAGIC 0x726d6131u /* "rma1" */

enum tutti_rma_rec_kind {
  TUTTI_RMA_REC_PUT = 1,    /* `bytes` of payload for window `win_id` at `offset` */
  TUTTI_RMA_REC_SIGNAL = 2, /* no payload: only the signal */
};

/* One record per slot. A put larger than a slot travels as pieces in issue
 * order, each naming its own offset; only the last piece carries `last`,
 * which applies the signal once its data is in place. Records of one
 * origin reach one target in the order they were posted (the queue is
 * FIFO), so data lands before its signal and puts in issue order. The
 * header takes 64 bytes, so that the payload after it starts on a cache
 * line, as the slot does. */
struct tutti_rma_rec {
  uint32_t magic; /* TUTTI_RMA_MAGIC: anything else is not a record */
  uint8_t kind;   /* enum tutti_rma_rec_kind */
  uint8_t last;   /* 1: this piece ends the operation: apply its signal */
  uint16_t sig;   /* sigIdx */
  uint16_t ctx;
  uint16_t pad;
  uint32_t win_id; /* the window's number, alike on every rank (PUT) */
  uint64_t offset; /* bytes from the start of the target's part of the window */
  uint64_t bytes;  /* payload bytes in this slot */
  uint64_t op_seq; /* the operation's number from this origin to this target, from 1 */
  uint8_t reserved[24];
};

#define TUTTI_RMA_REC_BYTES 64

_Static_assert(sizeof(struct tutti_rma_rec) == TUTTI_RMA_REC_BYTES, "record header is 64 bytes");

#endif
