/* The device communicator's host-side guards: the watchdog thread that
 * stops kernels waiting for a peer process that died, and the drain before
 * teardown. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "device/dev_comm.h"

extern "C" {
#include "call/agree.h"
#include "util/check.h"
#include "util/proc.h"
}

/* While a kernel of this communicator is in flight, checks a few times a
 * second that the peers' processes on this host are alive; a dead one stops
 * the kernels (through the abort flag they watch) and is named in the error,
 * instead of the kernels waiting out TUTTI_TIMEOUT. */
extern "C" const struct tutti_ras_dev* tutti_dev_ras_view(struct tutti_dev_comm* dc) {
  return dc != NULL && dc->host_flags != NULL ? &dc->ras_view : NULL;
}

/* RAS's stamp: since when no kernel started or finished (a look every
 * 200 ms, so a wait shows within a fifth of a second of the truth). */
static void ras_stamp(struct tutti_dev_comm* dc, volatile int* f) {
  const int s = f[TD_FLAG_STARTED], e = f[TD_FLAG_FINISHED];
  if (s != dc->seen_started || e != dc->seen_finished || dc->ras_view.still_since_ns == 0) {
    dc->seen_started = s;
    dc->seen_finished = e;
    __atomic_store_n(&dc->ras_view.still_since_ns, tutti_ras_now_ns(), __ATOMIC_RELEASE);
  }
}

void* td_watch_main(void* arg) {
  struct tutti_dev_comm* dc = (struct tutti_dev_comm*)arg;
  volatile int* f = dc->host_flags;
  while (!dc->watch_stop) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ras_stamp(dc, f);
    /* Device calls compared late, with the records network peers sent
     * after the launch: an error instead of a silent wrong result. */
    if (f[TD_FLAG_STOP] == 0 && dc->own_bell != NULL && dc->bells != NULL &&
        tutti_agree_scan(dc->own_bell, dc->bells, dc->nranks, dc->rank, &dc->scan_checked)) {
      snprintf(dc->scan_why, sizeof dc->scan_why, "%s", tutti_last_error());
      td_raise_stop(dc, TD_STOP_MISMATCH, -1);
    }
    if (f[TD_FLAG_STARTED] == f[TD_FLAG_FINISHED] || f[TD_FLAG_STOP] != 0) {
      continue;
    }
    /* A peer whose communicator failed (a mismatched call, a timeout) will
     * never answer: stop with its cause (peers on other hosts tell theirs
     * through the host transport's proxy, call/agree.c). */
    for (int p = 0; p < dc->nranks && dc->bells != NULL; p++) {
      if (p != dc->rank && dc->bells[p] != NULL &&
          __atomic_load_n(&dc->bells[p]->failed, __ATOMIC_ACQUIRE) != 0) {
        td_raise_stop(dc, TD_STOP_PEER_FAILED, p);
        break;
      }
    }
    if (f[TD_FLAG_STOP] != 0) {
      continue;
    }
    for (int p = 0; p < dc->nranks; p++) {
      if (p != dc->rank && dc->pids[p] > 0 && dc->pids[p] != (int32_t)getpid() &&
          tutti_process_gone(dc->pids[p])) {
        td_raise_stop(dc, TD_STOP_PEER_EXITED, p);
        WARN(
            "rank %d: rank %d (pid %d) exited while a device collective waited for it: "
            "stopping this communicator's kernels",
            dc->rank, p, (int)dc->pids[p]);
        break;
      }
    }
  }
  return NULL;
}

/* Waits until every slot this rank sent was freed by its receiver, so no
 * peer writes into the region after it is gone (bounded: a dead peer never frees). */
void td_drain(struct tutti_dev_comm* dc) {
  const size_t lines = (size_t)dc->nch * (size_t)dc->nranks;
  uint64_t* head = (uint64_t*)malloc(lines * TD_LINE);
  uint64_t* sent = (uint64_t*)malloc(lines * TD_LINE);
  for (int tries = 0; head != NULL && sent != NULL && tries < 200; tries++) {
    if (cudaMemcpyAsync(head, dc->region + dc->lay.head_off, lines * TD_LINE, cudaMemcpyDefault,
                        dc->side) != cudaSuccess ||
        cudaMemcpyAsync(sent, dc->priv + dc->lay.sent_off, lines * TD_LINE, cudaMemcpyDefault,
                        dc->side) != cudaSuccess ||
        cudaStreamSynchronize(dc->side) != cudaSuccess) {
      break;
    }
    int pending = 0;
    for (size_t i = 0; i < lines; i++) {
      pending |= head[i * TD_LINE / 8] != sent[i * TD_LINE / 8];
    }
    if (!pending) {
      break;
    }
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  free(head);
  free(sent);
}
