/* What a rank's host executor shows the peers of its host that wait on it:
 * the collective it is in, or the last one it was in. exec/host.c writes
 * it at every call, exec/stall.c reads a peer's to say what that peer is
 * doing. It lives in the rank's doorbell, which reserves it a cache line of
 * its own (struct tutti_doorbell, transport/transport.h); no transport code
 * reads or writes it. */
#ifndef TUTTI_EXEC_STATUS_H
#define TUTTI_EXEC_STATUS_H

#include <stdint.h>

struct tutti_exec_status {
  uint32_t active; /* non-zero while the owner is in the collective below */
  uint32_t coll;   /* enum tutti_coll */
  uint64_t seq;    /* its number among the communicator's operations */
};

#endif
