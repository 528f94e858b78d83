/* The wire form of the records a network peer's stand-in doorbell shows:
 * a collective call (struct tutti_call) and a communicator's failure, as
 * the TCP proxy and the network transport carry them (big-endian). Both
 * proxies speak it, so it lives with the records, below them. */
#ifndef TUTTI_CALL_RECORDS_H
#define TUTTI_CALL_RECORDS_H

#include <stdint.h>

#include "call/doorbell.h"
#include "util/socket.h" /* tutti_socket_put32 and the like */

#define TUTTI_REC_CALL_BYTES 24
#define TUTTI_REC_FAIL_BYTES 500

/* The call to send after call `after`: after + 1 once the rank made it (0
 * until then); the oldest it still keeps if it is further ahead than its
 * history. */
uint64_t tutti_rec_call_after(const struct tutti_doorbell* bell, uint64_t after);
/* The rank's next call to send after *sent (by number): 1 with its record
 * in *c, *sent advanced to it (past calls rewritten meanwhile), or 0 when
 * none is due. */
int tutti_rec_next_call(const struct tutti_doorbell* bell, uint64_t* sent, struct tutti_call* c);
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
