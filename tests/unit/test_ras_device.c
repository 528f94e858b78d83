/* RAS's reading of a rank whose GPU is still in a call (ras/ras.h, struct
 * tutti_ras_dev), fed from a host-side stand-in for the device executor:
 * calls on device buffers enter and leave the record at their launch, and
 * the counts and tag the kernels write say which one still runs. A kernel
 * that moved nothing for a second shows "waiting" with its call and the
 * peer whose doorbell shows it never got there; a kernel just started
 * shows "in-call"; no kernel in flight, or one that runs no call of the
 * record (a one-sided wait), shows "idle". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nccl.h"
#include "ras/ras.h"
#include "util/json.h"

static struct tutti_peer_info peers[3];
static struct tutti_doorbell bells[3];
static struct tutti_doorbell* peer_bells[3];
static struct tutti_ras_comm rc;
static volatile int started, finished;
static volatile uint64_t running;
static struct tutti_ras_dev view;

/* Rank r's doorbell shows its calls 1..newest. */
static void calls_to(int r, uint64_t newest) {
  memset(bells[r].calls, 0, sizeof bells[r].calls);
  for (uint64_t s = newest > TUTTI_CALL_HISTORY ? newest - TUTTI_CALL_HISTORY + 1 : 1;
       s <= newest && s != 0; s++) {
    bells[r].calls[s % TUTTI_CALL_HISTORY].seq = s;
  }
  bells[r].shows_calls = 1;
}

static char doc[16384];

static const char* rank_doc(void) {
  const size_t n = tutti_ras_rank_json(&rc, doc, sizeof doc);
  CHECK(n > 0 && n < sizeof doc && tutti_json_valid(doc, n, 16), "one JSON object: %s", doc);
  return doc;
}

static void setup(void) {
  for (int r = 0; r < 3; r++) {
    peers[r].rank = r;
    peers[r].pid = 1 << 22; /* no such process: never read as this host's live one */
    peers[r].cuda_dev = 0;
    snprintf(peers[r].hostname, sizeof peers[r].hostname, "gpu-host-%d", r);
    peer_bells[r] = &bells[r];
  }
  rc.hash = 0x1234;
  rc.rank = 0;
  rc.nranks = 3;
  rc.made = "init";
  rc.peers = peers;
  rc.bell = &bells[0];
  rc.peer_bells = peer_bells;
  rc.waits_for = -1;
  view.started = &started;
  view.finished = &finished;
  view.running = &running;
  rc.dev = &view;
  /* Five device allreduces launched: each entered and left at its launch. */
  for (uint64_t call = 1; call <= 5; call++) {
    const uint64_t t = tutti_ras_now_ns();
    tutti_ras_exit(&rc, tutti_ras_enter(&rc, call, 0, 65536, ncclFloat32, -1, 0xff, t), 0, t);
  }
  calls_to(0, 5);
  calls_to(1, 5);
  calls_to(2, 4); /* rank 2 never launched call 5 */
}

int main(void) {
  setup();
  /* The fifth call's kernel started three seconds ago and moved nothing since. */
  started = 5;
  finished = 4;
  running = 5;
  view.still_since_ns = tutti_ras_now_ns() - 3000000000ull;
  const char* d = rank_doc();
  CHECK(strstr(d, "\"state\":\"waiting\"") != NULL, "a stalled kernel is waiting: %s", d);
  CHECK(strstr(d, "\"current\":{\"seq\":5,\"call\":5") != NULL, "in call 5: %s", d);
  CHECK(strstr(d, "\"waits_for\":2") != NULL, "for rank 2, which never got there: %s", d);
  CHECK(strstr(d, "\"device\":true") != NULL && strstr(d, "\"bytes_moved\":null") != NULL,
        "marked as the GPU's: %s", d);
  const char* w = strstr(d, "\"waited_s\":");
  CHECK(w != NULL && atof(w + 11) > 2.5 && atof(w + 11) < 60, "for about 3 s: %s", d);

  /* Every peer reached call 5: a wait, but for nobody known. */
  calls_to(2, 5);
  d = rank_doc();
  CHECK(strstr(d, "\"waits_for\":-1") != NULL, "no peer behind: %s", d);
  calls_to(2, 4);

  /* A kernel that just started: in the call, not waiting. */
  view.still_since_ns = tutti_ras_now_ns();
  d = rank_doc();
  CHECK(strstr(d, "\"state\":\"in-call\"") != NULL && strstr(d, "\"call\":5") != NULL,
        "a running kernel is in its call: %s", d);

  /* An earlier call's kernel still runs (calls queued behind it). */
  running = 3;
  view.still_since_ns = tutti_ras_now_ns() - 2000000000ull;
  d = rank_doc();
  CHECK(strstr(d, "\"current\":{\"seq\":3,\"call\":3") != NULL &&
            strstr(d, "\"state\":\"waiting\"") != NULL,
        "the call the GPU is in, not the newest launched: %s", d);
  CHECK(strstr(d, "\"waits_for\":-1") != NULL, "every peer reached call 3: %s", d);

  /* Kernels all done: idle, whatever the tag says. */
  finished = 5;
  d = rank_doc();
  CHECK(strstr(d, "\"state\":\"idle\"") != NULL && strstr(d, "\"current\":null") != NULL,
        "no kernel in flight: idle: %s", d);

  /* A kernel that runs no call of the record (a one-sided wait, tag 0), or
   * one the record no longer holds. */
  started = 6;
  running = 0;
  d = rank_doc();
  CHECK(strstr(d, "\"state\":\"idle\"") != NULL, "a one-sided wait is no call: %s", d);
  running = 99;
  d = rank_doc();
  CHECK(strstr(d, "\"state\":\"idle\"") != NULL, "an unknown tag is ignored: %s", d);

  /* Without a device executor nothing changes. */
  rc.dev = NULL;
  running = 5;
  d = rank_doc();
  CHECK(strstr(d, "\"state\":\"idle\"") != NULL && strstr(d, "\"device\"") == NULL,
        "a host-only rank: %s", d);
  return test_summary("ras_device");
}
