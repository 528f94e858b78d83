/* Helpers for tests of a network (net/net.h) within one process: a send
 * and a receive comm joined through listen / connect / accept, and a loop
 * that tests a set of requests until all are done, one fails or a
 * deadline passes. */
#ifndef TUTTI_TEST_NET_PAIR_H
#define TUTTI_TEST_NET_PAIR_H

#include <dirent.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "net/net.h"

static inline double np_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Connects and accepts in turn until both comms exist (10 s at most). */
static inline ncclResult_t np_join(struct tutti_net* n, void* listen_comm, void* handle,
                                   void** send_comm, void** recv_comm) {
  *send_comm = *recv_comm = NULL;
  const double end = np_now() + 10;
  while ((*send_comm == NULL || *recv_comm == NULL) && np_now() < end) {
    if (*send_comm == NULL) {
      ncclResult_t r = n->ops->connect(n, 0, handle, send_comm);
      if (r != ncclSuccess) {
        return r;
      }
    }
    if (*recv_comm == NULL) {
      ncclResult_t r = n->ops->accept(n, listen_comm, recv_comm);
      if (r != ncclSuccess) {
        return r;
      }
    }
  }
  return *send_comm != NULL && *recv_comm != NULL ? ncclSuccess : ncclInternalError;
}

/* Listens on device 0 and joins one pair; the listen comm is closed. */
static inline ncclResult_t np_pair(struct tutti_net* n, void** send_comm, void** recv_comm) {
  char handle[TUTTI_NET_HANDLE_BYTES];
  void* l = NULL;
  ncclResult_t r = n->ops->listen(n, 0, handle, &l);
  if (r != ncclSuccess) {
    return r;
  }
  r = np_join(n, l, handle, send_comm, recv_comm);
  n->ops->close_listen(n, l);
  return r;
}

/* Tests reqs[0..count) (NULL entries are done) until every one is done;
 * sizes[i * 8 ...] receive what test reports. Returns the first failure
 * (its request is then gone: set to NULL), or ncclInternalError after
 * `seconds`. */
static inline ncclResult_t np_wait(struct tutti_net* n, void** reqs, int count, int* sizes,
                                   double seconds) {
  const double end = np_now() + seconds;
  for (;;) {
    int left = 0;
    for (int i = 0; i < count; i++) {
      if (reqs[i] == NULL) {
        continue;
      }
      int done = 0;
      ncclResult_t r = n->ops->test(n, reqs[i], &done, sizes != NULL ? sizes + 8 * i : NULL);
      if (r != ncclSuccess) {
        reqs[i] = NULL;
        return r;
      }
      if (done) {
        reqs[i] = NULL;
      } else {
        left++;
      }
    }
    if (left == 0) {
      return ncclSuccess;
    }
    if (np_now() > end) {
      return ncclInternalError;
    }
  }
}

static inline void* np_nothing(void* arg) {
  return arg;
}

/* Starts and joins a thread, so that helpers the runtime starts with the
 * first thread (a sanitizer's) exist before a count is taken. */
static inline void np_settle(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, np_nothing, NULL) == 0) {
    pthread_join(t, NULL);
  }
}

/* Entries of a /proc/self directory ("fd", "task"). */
static inline int np_count(const char* what) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/%s", what);
  DIR* d = opendir(path);
  int n = 0;
  if (d == NULL) {
    return -1;
  }
  for (struct dirent* e = readdir(d); e != NULL; e = readdir(d)) {
    n += e->d_name[0] != '.';
  }
  closedir(d);
  return n;
}

#endif
