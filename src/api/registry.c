/* The set of live communicator handles, so that a destroyed or garbage
 * handle is reported as such instead of being dereferenced. */
#include <pthread.h>
#include <stdlib.h>

#include "api/comm.h"
#include "rma/rma.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct ncclComm** live;
static size_t nlive, cap;

void tutti_comm_register(struct ncclComm* comm) {
  pthread_mutex_lock(&reg_lock);
  if (nlive == cap) {
    size_t ncap = cap ? 2 * cap : 64;
    const struct ncclComm** n = realloc(live, ncap * sizeof *n);
    if (n == NULL) {
      pthread_mutex_unlock(&reg_lock);
      return;
    }
    live = n;
    cap = ncap;
  }
  live[nlive++] = comm;
  pthread_mutex_unlock(&reg_lock);
}

void tutti_comm_unregister(struct ncclComm* comm) {
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < nlive; i++) {
    if (live[i] == comm) {
      live[i] = live[--nlive];
      break;
    }
  }
  if (nlive == 0) {
    free(live);
    live = NULL;
    cap = 0;
  }
  pthread_mutex_unlock(&reg_lock);
}

int tutti_comm_is_live(const struct ncclComm* comm) {
  int found = 0;
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < nlive && !found; i++) {
    found = live[i] == comm;
  }
  pthread_mutex_unlock(&reg_lock);
  return found;
}

void tutti_comm_for_each(void (*fn)(struct ncclComm* comm, void* arg), void* arg) {
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < nlive; i++) {
    fn((struct ncclComm*)live[i], arg);
  }
  pthread_mutex_unlock(&reg_lock);
}

struct tutti_win* tutti_comm_find_window(const void* win, struct ncclComm** comm) {
  struct tutti_win* w = NULL;
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < nlive && w == NULL; i++) {
    struct ncclComm* c = (struct ncclComm*)live[i];
    if (c->rma != NULL && (w = tutti_rma_win_find(c->rma, win)) != NULL) {
      *comm = c;
    }
  }
  pthread_mutex_unlock(&reg_lock);
  return w;
}
