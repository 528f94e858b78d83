/* The wire form of the records a network peer's stand-in doorbell shows:
 * a collective call (struct tutti_call) and a communicator's failure, as
 * the TCP proxy and the network transport carry them (big-endian). Both
 * proxies speak it, so it lives with the records, below them. */
#ifndef TUTTI_CALL_RECORDS_H
#define TUTTI_CALL_RECORDS_H

#include <stdint.h>

#include "call/doorbell.h"

#define TUTTI_REC_CALL_BYTES 24
#define TUTTI_REC_FAIL_BYTES 500

static inline void tutti_rec_put32(unsigned char* p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static inline uint32_t tutti_rec_get32(const unsigned char* p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void tutti_rec_put64(unsigned char* p, uint64_t v) {
  tutti_rec_put32(p, (uint32_t)(v >> 32));
  tutti_rec_put32(p + 4, (uint32_t)v);
}

static inline uint64_t tutti_rec_get64(const unsigned char* p) {
  return ((uint64_t)tutti_rec_get32(p) << 32) | tutti_rec_get32(p + 4);
}

/* The call to send after call `after`: after + 1 once the rank made it (0
 * until then); the oldest it still keeps if it is further ahead than its
 * history. */
uint64_t tutti_rec_call_after(const struct tutti_doorbell* bell, uint64_t after);
/* Writes call `c` into out[TUTTI_REC_CALL_BYTES]. */
void tutti_rec_put_call(unsigned char* out, const struct tutti_call* c);
/* A received call into a peer's stand-in bell; the first copy of a number
 * is kept (several connections may each bring it). */
void tutti_rec_apply_call(struct tutti_doorbell* bell, const unsigned char* in);
/* The failure recorded in `bell` into out[TUTTI_REC_FAIL_BYTES]. */
void tutti_rec_put_fail(unsigned char* out, const struct tutti_doorbell* bell);
/* A received failure into a peer's stand-in bell, unless it has one. */
void tutti_rec_apply_fail(struct tutti_doorbell* bell, const unsigned char* in);

/* Why this rank leaves, if the job lost a rank: what its own connections
 * saw, else what a peer reported (a broken connection, or the reason it
 * left); recorded in this rank's doorbell too (the first cause stays), for
 * the local ranks that see it depart. 0: nobody was lost. */
uint32_t tutti_rec_leave_reason(struct tutti_bells b);

#endif
