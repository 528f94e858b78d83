/* The collective checks on host memory: one rank, two ranks made by
 * ncclCommInitAll, four ranks made by ncclCommInitRank inside a group; each
 * an allreduce whose result is compared bit for bit. A watchdog turns a
 * hang into a reported failure. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "nccl.h"

#define FIX_HOST                                                                               \
  "run again with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=ALL) to see which step fails; check " \
  "the shared-memory and network checks above"

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond = PTHREAD_COND_INITIALIZER;
static const char* wd_what;
static int wd_started;

static void* watchdog_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&wd_lock);
  for (;;) {
    while (wd_what == NULL) {
      pthread_cond_wait(&wd_cond, &wd_lock);
    }
    const char* what = wd_what;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)check_opts.run_timeout_s;
    while (wd_what == what) {
      if (pthread_cond_timedwait(&wd_cond, &wd_lock, &until) != 0 && wd_what == what) {
        report_abort(what);
      }
    }
  }
  return NULL;
}

void watchdog_arm(const char* what) {
  pthread_mutex_lock(&wd_lock);
  if (!wd_started) {
    pthread_t t;
    wd_started = pthread_create(&t, NULL, watchdog_main, NULL) == 0;
    if (wd_started) {
      pthread_detach(t);
    }
  }
  wd_what = what;
  pthread_cond_broadcast(&wd_cond);
  pthread_mutex_unlock(&wd_lock);
}

void watchdog_disarm(void) {
  pthread_mutex_lock(&wd_lock);
  wd_what = NULL;
  pthread_cond_broadcast(&wd_cond);
  pthread_mutex_unlock(&wd_lock);
}

/* Values below 2^11 times a rank number: every partial sum is an exact
 * integer in float, whatever order the ranks are added in. */
void fill_rank(float* buf, size_t n, int rank) {
  for (size_t i = 0; i < n; i++) {
    buf[i] = (float)((rank + 1) * (int)((i * 7919) % 1021));
  }
}

size_t count_wrong(const float* buf, size_t n, int nranks) {
  const int sum = nranks * (nranks + 1) / 2;
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) {
    wrong += buf[i] != (float)(sum * (int)((i * 7919) % 1021));
  }
  return wrong;
}

struct run {
  int nranks;
  size_t count;
  ncclComm_t comms[8];
  float* bufs[8];
};

static void run_free(struct run* r) {
  for (int i = 0; i < r->nranks; i++) {
    if (r->comms[i] != NULL) {
      ncclCommDestroy(r->comms[i]);
    }
    free(r->bufs[i]);
  }
}

/* The allreduce of every rank of `r` in one group, in place; "" or why not. */
static void allreduce_all(struct run* r, char* why, size_t len) {
  why[0] = '\0';
  for (int i = 0; i < r->nranks; i++) {
    r->bufs[i] = malloc(r->count * sizeof(float));
    if (r->bufs[i] == NULL) {
      snprintf(why, len, "out of host memory");
      return;
    }
    fill_rank(r->bufs[i], r->count, i);
  }
  ncclResult_t res = ncclGroupStart();
  for (int i = 0; i < r->nranks && res == ncclSuccess; i++) {
    res = ncclAllReduce(r->bufs[i], r->bufs[i], r->count, ncclFloat, ncclSum, r->comms[i], NULL);
  }
  ncclResult_t end = ncclGroupEnd();
  res = res != ncclSuccess ? res : end;
  if (res != ncclSuccess) {
    snprintf(why, len, "ncclAllReduce: %s: %s", ncclGetErrorString(res), ncclGetLastError(NULL));
    return;
  }
  for (int i = 0; i < r->nranks; i++) {
    size_t wrong = count_wrong(r->bufs[i], r->count, r->nranks);
    if (wrong > 0) {
      snprintf(why, len, "rank %d has %zu wrong values of %zu", i, wrong, r->count);
      return;
    }
  }
}

static void host_check(const char* name, int nranks, int by_group, size_t count) {
  struct run r;
  memset(&r, 0, sizeof r);
  r.nranks = nranks;
  r.count = count;
  char why[768] = "";
  watchdog_arm(name);
  ncclResult_t res;
  if (!by_group) {
    res = ncclCommInitAll(r.comms, nranks, NULL);
  } else {
    ncclUniqueId id;
    res = ncclGetUniqueId(&id);
    if (res == ncclSuccess) {
      res = ncclGroupStart();
      for (int i = 0; i < nranks && res == ncclSuccess; i++) {
        res = ncclCommInitRank(&r.comms[i], nranks, id, i);
      }
      ncclResult_t end = ncclGroupEnd();
      res = res != ncclSuccess ? res : end;
    }
  }
  if (res != ncclSuccess) {
    snprintf(why, sizeof why, "%s: %s: %s", by_group ? "ncclCommInitRank" : "ncclCommInitAll",
             ncclGetErrorString(res), ncclGetLastError(NULL));
  } else {
    allreduce_all(&r, why, sizeof why);
  }
  run_free(&r);
  watchdog_disarm();
  if (why[0] != '\0') {
    report_check(name, CHECK_FAIL, FIX_HOST, "%s", why);
  } else {
    report_check(name, CHECK_PASS, NULL, "%zu floats summed over %d rank%s, bit-exact", count,
                 nranks, nranks > 1 ? "s" : "");
  }
}

void run_host_allreduces(void) {
  host_check("allreduce, 1 rank, host memory", 1, 0, 4099);
  host_check("allreduce, 2 ranks (ncclCommInitAll), host memory", 2, 0, 1 << 20);
  host_check("allreduce, 4 ranks (group of ncclCommInitRank), host memory", 4, 1, (1 << 20) + 3);
}
