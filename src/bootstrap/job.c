/* What this process knows of its jobs: the roots it runs (so that its ranks
 * can find them) and the identities learned by jobs that started on
 * NCCL_COMM_ID without one (docs/design.md, "Bootstrap"). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "util/check.h"

#define ROOT_REGISTRY 64
#define JOBS_MAX 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tutti_bs_root_pub* registry[ROOT_REGISTRY];
static struct tutti_bs_job jobs[JOBS_MAX];
static int njobs;

static int same_addr(const union tutti_socket_addr* a, const union tutti_socket_addr* b) {
  unsigned char pa[TUTTI_SOCKET_ADDR_WIRE], pb[TUTTI_SOCKET_ADDR_WIRE];
  tutti_socket_addr_pack(a, pa);
  tutti_socket_addr_pack(b, pb);
  return memcmp(pa, pb, sizeof pa) == 0;
}

void tutti_bs_registry_set(struct tutti_bs_root_pub* r, int add) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < ROOT_REGISTRY; i++) {
    if (add ? registry[i] == NULL : registry[i] == r) {
      registry[i] = add ? r : NULL;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
}

void tutti_bs_root_set_secret(struct tutti_bs_root_pub* r,
                              const unsigned char secret[TUTTI_BS_SECRET]) {
  pthread_mutex_lock(&lock);
  memcpy(r->secret, secret, TUTTI_BS_SECRET);
  pthread_mutex_unlock(&lock);
}

int tutti_bootstrap_root_joined(const unsigned char secret[TUTTI_BS_SECRET]) {
  int joined = -1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < ROOT_REGISTRY && joined < 0; i++) {
    if (registry[i] != NULL && memcmp(registry[i]->secret, secret, TUTTI_BS_SECRET) == 0) {
      joined = __atomic_load_n(&registry[i]->joined, __ATOMIC_RELAXED);
    }
  }
  pthread_mutex_unlock(&lock);
  return joined;
}

int tutti_bs_root_serving(const union tutti_socket_addr* addr,
                          const unsigned char secret[TUTTI_BS_SECRET]) {
  int found = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < ROOT_REGISTRY && !found; i++) {
    found = registry[i] != NULL && same_addr(&registry[i]->addr, addr) &&
            memcmp(registry[i]->secret, secret, TUTTI_BS_SECRET) == 0;
  }
  pthread_mutex_unlock(&lock);
  return found;
}

static struct tutti_bs_job* find_locked(const union tutti_socket_addr* root,
                                        const unsigned char derived[TUTTI_BS_SECRET]) {
  for (int i = 0; i < njobs; i++) {
    if (same_addr(&jobs[i].root, root) && memcmp(jobs[i].derived, derived, TUTTI_BS_SECRET) == 0) {
      return &jobs[i];
    }
  }
  return NULL;
}

struct tutti_bs_job* tutti_bs_job_find(const union tutti_socket_addr* root,
                                       const unsigned char derived[TUTTI_BS_SECRET]) {
  pthread_mutex_lock(&lock);
  struct tutti_bs_job* j = find_locked(root, derived);
  pthread_mutex_unlock(&lock);
  return j;
}

struct tutti_bs_job* tutti_bs_job_learn(const union tutti_socket_addr* root,
                                        const unsigned char derived[TUTTI_BS_SECRET],
                                        const unsigned char token[TUTTI_BS_SECRET]) {
  pthread_mutex_lock(&lock);
  struct tutti_bs_job* j = find_locked(root, derived);
  if (j == NULL && njobs < JOBS_MAX) {
    j = &jobs[njobs++];
    j->root = *root;
    memcpy(j->derived, derived, TUTTI_BS_SECRET);
    memcpy(j->token, token, TUTTI_BS_SECRET);
  }
  pthread_mutex_unlock(&lock);
  return j;
}

void tutti_bs_job_poison(struct tutti_bs_job* j, const char* why) {
  pthread_mutex_lock(&lock);
  if (__atomic_load_n(&j->poisoned, __ATOMIC_RELAXED) == 0) {
    snprintf(j->why, sizeof j->why, "%s", why); /* the first cause is the one told */
    __atomic_store_n(&j->poisoned, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
}

ncclResult_t tutti_bootstrap_job_check(const struct tutti_bootstrap* b) {
  const struct tutti_bs_job* j = b != NULL ? b->job : NULL;
  if (j == NULL || __atomic_load_n(&j->poisoned, __ATOMIC_ACQUIRE) == 0) {
    return ncclSuccess;
  }
  return tutti_error(ncclInvalidUsage, "%s", j->why);
}
