/* A collective call as every rank of a communicator must make it: the
 * record ranks publish in their doorbells (call/doorbell.h), carry to
 * network peers (call/records.h) and compare (call/agree.h), and how an
 * error tells one (call/call.c). */
#ifndef TUTTI_CALL_CALL_H
#define TUTTI_CALL_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* What must agree (in or out of place need not), and the call's number
 * among the communicator's collectives (point-to-point calls are not
 * counted: ranks make different ones). */
struct tutti_call {
  uint64_t seq; /* 1-based; 0: no record */
  uint64_t count;
  int32_t root;   /* -1: the collective has none */
  uint8_t coll;   /* enum tutti_coll */
  uint8_t type;   /* ncclDataType_t */
  uint8_t red;    /* TUTTI_CALL_RED_*, or the ncclRedOp_t built-in */
  uint8_t device; /* 1: device buffers, 0: host buffers */
  /* ncclCollConfig_t.userProfilerTag (0: none): shown with the call, never
   * compared (a rank's own label). */
  uint64_t tag;
};
#define TUTTI_CALL_RED_NONE 0xff      /* a collective without a reduction */
#define TUTTI_CALL_RED_PREMUL_HOST 16 /* ncclRedOpCreatePreMulSum, host scalar */
#define TUTTI_CALL_RED_PREMUL_DEV 17  /* ... device scalar */
#define TUTTI_CALL_HISTORY 8          /* records a rank keeps for peers behind it */

/* Whether two records describe the same call. */
static inline int tutti_call_same(const struct tutti_call* a, const struct tutti_call* b) {
  return a->seq == b->seq && a->count == b->count && a->root == b->root && a->coll == b->coll &&
         a->type == b->type && a->red == b->red && a->device == b->device;
}

/* "AllReduce #17 of 1024 float, sum, on device buffers" */
void tutti_call_describe(const struct tutti_call* c, char* buf, size_t len);
/* Records ncclInvalidUsage for ranks `me` and `peer` having made calls `a`
 * and `b` under one number, and returns it. */
ncclResult_t tutti_call_mismatch(int me, const struct tutti_call* a, int peer,
                                 const struct tutti_call* b);

#endif
