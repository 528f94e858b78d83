/* The order of a communicator's launches: every launch waits for the one
 * issued before it, whatever the streams (NCCL's guarantee), and the streams
 * of a group wait for each other around the group's launch. Host-side waits
 * for the launches are bounded by TUTTI_TIMEOUT. Why this order cannot
 * deadlock is in docs/design.md ("Issue order across streams"). */
#include <time.h>

#include "device/dev_comm.h"

extern "C" {
#include "util/check.h"
#include "util/log.h"
}

static ncclResult_t order_fail(cudaError_t e, const char* what) {
  return tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

/* Makes `to` wait for what `from` holds now (`ev` is scratch). */
static cudaError_t wait_stream(cudaStream_t to, cudaStream_t from, cudaEvent_t ev) {
  cudaError_t e = cudaEventRecord(ev, from);
  return e == cudaSuccess ? cudaStreamWaitEvent(to, ev, 0) : e;
}

/* The group's streams other than the first, each once: calls `fn` on them. */
template <class F>
static cudaError_t each_other_stream(const struct tutti_dev_op* ops, int nops, F fn) {
  cudaError_t e = cudaSuccess;
  for (int i = 1; i < nops && e == cudaSuccess; i++) {
    int seen = ops[i].stream == ops[0].stream;
    for (int j = 1; j < i && !seen; j++) {
      seen = ops[j].stream == ops[i].stream;
    }
    if (!seen) {
      e = fn(ops[i].stream);
    }
  }
  return e;
}

ncclResult_t td_order_begin(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops,
                            struct td_order_at* at) {
  cudaStream_t s0 = ops[0].stream;
  at->stream = s0;
  at->capture = 0;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t e = cudaStreamGetCaptureInfo(s0, &cs, &id);
  if (e != cudaSuccess) {
    return order_fail(e, "cudaStreamGetCaptureInfo");
  }
  if (cs == cudaStreamCaptureStatusInvalidated) {
    return tutti_error(ncclInvalidUsage,
                       "the stream's graph capture was already invalidated by an earlier error: "
                       "end the capture and check the calls made while capturing");
  }
  at->capture = cs == cudaStreamCaptureStatusActive ? id : 0;
  /* Every stream of the group reaches the group's start before it runs. */
  e = each_other_stream(ops, nops, [&](cudaStream_t si) { return wait_stream(s0, si, dc->ev); });
  /* Then the communicator's previous launch: in the same capture when
   * capturing (a graph replays in its own order; the user orders replays),
   * else the previous launch outside any capture, unless that was on this
   * very stream. The stream is known by its id, which CUDA never gives
   * twice (a handle can come back as a new stream). */
  unsigned long long sid = 0; /* not asked while capturing: it would end the capture */
  if (e == cudaSuccess && at->capture == 0 && cudaStreamGetId(s0, &sid) != cudaSuccess) {
    sid = 0; /* unknown: always wait */
    (void)cudaGetLastError();
  }
  at->stream_id = sid;
  if (e == cudaSuccess && at->capture != 0 && dc->cap_id == at->capture) {
    e = cudaStreamWaitEvent(s0, dc->cap_ev, 0);
  } else if (e == cudaSuccess && at->capture == 0 && dc->ord_set &&
             (sid == 0 || sid != dc->ord_stream_id)) {
    e = cudaStreamWaitEvent(s0, dc->ord_ev, 0);
  }
  return e == cudaSuccess ? ncclSuccess : order_fail(e, "ordering the launch after the last one");
}

ncclResult_t td_order_end(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops,
                          const struct td_order_at* at) {
  cudaStream_t s0 = at->stream;
  cudaError_t e;
  if (at->capture != 0) {
    e = cudaEventRecord(dc->cap_ev, s0);
    dc->cap_id = at->capture;
  } else {
    e = cudaEventRecord(dc->ord_ev, s0);
    dc->ord_set = e == cudaSuccess;
    dc->ord_stream_id = at->stream_id;
  }
  /* Every stream of the group waits for the whole group. */
  if (e == cudaSuccess) {
    e = each_other_stream(ops, nops, [&](cudaStream_t si) {
      return cudaStreamWaitEvent(si, at->capture != 0 ? dc->cap_ev : dc->ord_ev, 0);
    });
  }
  return e == cudaSuccess ? ncclSuccess : order_fail(e, "recording the launch's end");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls `done` until it says yes, `limit` seconds pass, or (with
 * `abortable`) the communicator is aborted: spins briefly, then sleeps, so
 * a waiting rank leaves the CPU to the ranks it waits for. Returns 1 when
 * done. */
template <class F>
static int poll_until(struct tutti_dev_comm* dc, double limit, int abortable, F done) {
  const double t0 = now_s();
  for (int i = 0;; i++) {
    const int r = done();
    if (r != 0) {
      return r;
    }
    if ((abortable && __atomic_load_n(&dc->host_flags[TD_FLAG_ABORT], __ATOMIC_SEQ_CST)) ||
        now_s() - t0 > limit) {
      return 0;
    }
    if (i > 64) {
      struct timespec ts = {0, i < 1000 ? 20 * 1000 : 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

ncclResult_t tutti_dev_comm_wait(struct tutti_dev_comm* dc) {
  if (dc == NULL || !dc->ord_set) {
    return dc == NULL ? ncclSuccess : tutti_dev_comm_error(dc);
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  /* Event queries are safe while another thread captures (relaxed mode). */
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  cudaError_t qe = cudaSuccess;
  /* The kernels give up at TUTTI_TIMEOUT and say why; the host waits a
   * little longer so that their reason, not this wait's, is the one told. */
  const int ok = poll_until(dc, dc->timeout_s + 5, 1, [&]() {
    qe = cudaEventQuery(dc->ord_ev);
    return qe != cudaErrorNotReady;
  });
  cudaThreadExchangeStreamCaptureMode(&mode);
  td_dev_leave(&g);
  NCCLCHECK(tutti_dev_comm_error(dc));
  if (ok && qe != cudaSuccess) {
    return order_fail(qe, "waiting for the communicator's device collectives");
  }
  if (!ok) {
    return tutti_error(ncclSystemError,
                       "rank %d: the communicator's last device collective did not start within "
                       "%.0f s (TUTTI_TIMEOUT): its stream waits for work that never finishes",
                       dc->rank, dc->timeout_s + 5);
  }
  return ncclSuccess;
}

int td_order_quiesce(struct tutti_dev_comm* dc, double limit) {
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  volatile int* f = dc->host_flags;
  /* Launches outside capture end with the event; graph replays count
   * themselves in flight (started, finished), until a kernel fails: its
   * stopped blocks count nothing more. */
  const int ok = poll_until(dc, limit, 0, [&]() {
    const int ev_done = !dc->ord_set || cudaEventQuery(dc->ord_ev) != cudaErrorNotReady;
    return ev_done && (f[TD_FLAG_STARTED] == f[TD_FLAG_FINISHED] || f[TD_FLAG_STOP] != 0);
  });
  cudaThreadExchangeStreamCaptureMode(&mode);
  (void)cudaGetLastError();
  td_dev_leave(&g);
  return ok;
}
