/* The call records a network peer's stand-in doorbell shows (call/records.c):
 * a call travels on every socket ahead of that socket's slots, so a socket
 * that carried no slot for a while brings calls the bell has long had; an
 * older call must never replace a newer one in its place of the history
 * (the rank waiting for the newer one would wait forever: a TCP socket that
 * lagged 8 calls did that once, transport/tcp_ctl.c). */
#include <string.h>

#include "call/records.h"
#include "harness.h"

static struct tutti_call make(uint64_t seq) {
  struct tutti_call c;
  memset(&c, 0, sizeof c);
  c.seq = seq;
  c.count = 1000 + seq;
  c.root = -1;
  c.coll = 1;
  c.type = 7;
  c.red = 0;
  return c;
}

static void deliver(struct tutti_doorbell* bell, uint64_t seq) {
  unsigned char wire[TUTTI_REC_CALL_BYTES];
  struct tutti_call c = make(seq);
  tutti_rec_put_call(wire, &c);
  tutti_rec_apply_call(bell, wire);
}

int main(void) {
  static struct tutti_doorbell bell;
  struct tutti_call got;
  /* In order, then each again (the other sockets' copies): kept. */
  for (uint64_t s = 1; s <= 2 * TUTTI_CALL_HISTORY; s++) {
    deliver(&bell, s);
    deliver(&bell, s);
    CHECK(tutti_doorbell_get_call(&bell, s, &got) && got.count == 1000 + s, "call %llu",
          (unsigned long long)s);
  }
  /* A lagging socket brings calls the history has moved past. */
  const uint64_t newest = 2 * TUTTI_CALL_HISTORY;
  for (uint64_t s = 1; s < newest; s++) {
    deliver(&bell, s);
  }
  for (uint64_t s = newest - TUTTI_CALL_HISTORY + 1; s <= newest; s++) {
    CHECK(tutti_doorbell_get_call(&bell, s, &got) && got.count == 1000 + s,
          "call %llu was replaced by an older one", (unsigned long long)s);
  }
  /* A newer call still takes an older one's place. */
  deliver(&bell, newest + 1);
  CHECK(tutti_doorbell_get_call(&bell, newest + 1, &got), "call %llu",
        (unsigned long long)(newest + 1));
  CHECK(!tutti_doorbell_get_call(&bell, newest + 1 - TUTTI_CALL_HISTORY, &got),
        "the call it replaced is still shown");
  return test_summary("records");
}
