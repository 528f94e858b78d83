/* The process's communicators, as RAS reads them (see ras/internal.h). The
 * call path never takes this lock: only init, destroy, the listener and a
 * failing call's flight record do. */
#include <pthread.h>

#include "ras/internal.h"

pthread_mutex_t tutti_ras_lock = PTHREAD_MUTEX_INITIALIZER;
struct tutti_ras_comm* tutti_ras_comms;

void tutti_ras_register(struct tutti_ras_comm* rc) {
  pthread_mutex_lock(&tutti_ras_lock);
  rc->next = tutti_ras_comms;
  tutti_ras_comms = rc;
  pthread_mutex_unlock(&tutti_ras_lock);
}

void tutti_ras_unregister(struct tutti_ras_comm* rc) {
  pthread_mutex_lock(&tutti_ras_lock);
  for (struct tutti_ras_comm** p = &tutti_ras_comms; *p != NULL; p = &(*p)->next) {
    if (*p == rc) {
      *p = rc->next;
      break;
    }
  }
  pthread_mutex_unlock(&tutti_ras_lock);
}
