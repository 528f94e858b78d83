/* The store server's insides, shared by the connection handling (store.c)
 * and the protocol (store_query.c). */
#ifndef TUTTIRUN_STORE_IMPL_H
#define TUTTIRUN_STORE_IMPL_H

#include "store.h"

#define TR_STORES_MAX 4

enum { D_UNKNOWN, D_V1, D_V2 }; /* not yet known, torch 1.x, torch 2.x */

struct conn {
  int fd;
  int dialect;
  struct tr_buf in, out;
  char** waits; /* keys this connection waits for (WAIT), NULL once set */
  size_t nwaits, left;
};

struct tr_store {
  int listen_fd, port;
  struct tr_kv_table table;
  struct conn* conns;
  size_t nconns, cap;
};

/* Runs every complete query the connection has sent; -1: drop it. */
int tr_store_serve_input(struct tr_store* s, struct conn* c);
void tr_store_conn_free_waits(struct conn* c);
/* A value changed: wakes the connections waiting for it. */
void tr_store_wake(struct tr_store* s, const char* key);

#endif
