/* The store: a key-value table (kv.c), a server for it that speaks torch's
 * TCPStore protocol (store.c), and a client of that protocol (store_client.c)
 * with which the agents of a job meet (rdzv.c). */
#ifndef TUTTIRUN_STORE_H
#define TUTTIRUN_STORE_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

/* torch's validationMagicNumber: a 2.x client's first query carries it. */
#define TR_STORE_MAGIC 0x3C85F7CEu

/* A growable byte buffer. */
struct tr_buf {
  uint8_t* p;
  size_t len, cap;
};
int tr_buf_reserve(struct tr_buf* b, size_t more); /* 0, or -1 out of memory */
int tr_buf_put(struct tr_buf* b, const void* p, size_t n);
void tr_buf_drop(struct tr_buf* b, size_t n); /* removes n bytes from the front */

/* The table: keys to values, and keys to queues of values. */
struct tr_kv {
  char* key;
  uint8_t* val;
  size_t vlen;
  struct tr_kv* next;
};
struct tr_kv_queue;
struct tr_kv_table {
  struct tr_kv** buckets;
  size_t nbuckets, count;
  struct tr_kv_queue* queues;
};
const struct tr_kv* tr_kv_find(const struct tr_kv_table* t, const char* key);
int tr_kv_set(struct tr_kv_table* t, const char* key, const void* v, size_t n);
int tr_kv_append(struct tr_kv_table* t, const char* key, const void* v, size_t n);
/* torch's ADD: the value is a decimal integer; a non-number counts as 0. */
int tr_kv_add(struct tr_kv_table* t, const char* key, int64_t delta, int64_t* now);
/* torch's COMPARE_SET: returns the entry as it is afterwards, or NULL when the
 * key is missing and `expect` not empty (nothing is set then). */
const struct tr_kv* tr_kv_cas(struct tr_kv_table* t, const char* key, const void* expect,
                              size_t elen, const void* desired, size_t dlen);
int64_t tr_kv_delete(struct tr_kv_table* t, const char* key);
int tr_kv_qpush(struct tr_kv_table* t, const char* key, const void* v, size_t n);
size_t tr_kv_qlen(const struct tr_kv_table* t, const char* key);
char* tr_kv_qpop(struct tr_kv_table* t, const char* key, size_t* n); /* malloc'd */
void tr_kv_clear(struct tr_kv_table* t);

/* A served store, on every address of this host. Port 0: any free port. */
struct tr_store;
/* A TCP socket bound to `port` (0: any) on every address, as the store and
 * tutti's bootstrap root bind (SO_REUSEADDR; IPv6 with IPv4 mapped, else
 * IPv4), not yet listening; or -errno. */
int tr_bind_any(int port);
struct tr_store* tr_store_listen(int port, char* err, size_t errlen);
int tr_store_port(const struct tr_store* s);
/* The hosting agent's own access, in process; after a change through the
 * table, tr_store_changed wakes the clients waiting for that key. */
struct tr_kv_table* tr_store_table(struct tr_store* s);
void tr_store_changed(struct tr_store* s, const char* key);
size_t tr_store_nclients(const struct tr_store* s);
void tr_store_close(struct tr_store* s);
/* Every served store, in the caller's poll loop: the descriptors to watch
 * (tr_store_nfds of them at most), then the handling of what poll found. */
size_t tr_store_nfds(void);
size_t tr_store_pollfds(struct pollfd* fds, size_t max);
void tr_store_handle(const struct pollfd* fds, size_t n);
/* Serves the stores alone for up to timeout_ms. */
void tr_store_serve(int timeout_ms);

/* A store to read and write: the one this agent serves, or a remote one
 * (a TCPStore client of the 2.x protocol). Every call returns 0 on success,
 * -1 on a failure (tr_kv_error says why); a remote store is reconnected on
 * the next call after a failure. */
struct tr_kvc {
  struct tr_store* local;
  char host[256];
  int port;
  int fd;
  double timeout_s; /* per call, and for connecting */
  char error[256];
};
void tr_kvc_init_local(struct tr_kvc* c, struct tr_store* s);
void tr_kvc_init_remote(struct tr_kvc* c, const char* host, int port, double timeout_s);
/* Connects now, retrying until `deadline` (a tr_now() time): the store may
 * not be up yet. */
int tr_kvc_connect(struct tr_kvc* c, double deadline);
int tr_kvc_set(struct tr_kvc* c, const char* key, const char* val);
/* *found = 0 and val = "" when the key is missing. */
int tr_kvc_get(struct tr_kvc* c, const char* key, char* val, size_t cap, int* found);
int tr_kvc_add(struct tr_kvc* c, const char* key, int64_t delta, int64_t* now);
/* Sets key to `desired` if it holds `expect` ("" also matches a missing key);
 * `now` gets the value afterwards. */
int tr_kvc_cas(struct tr_kvc* c, const char* key, const char* expect, const char* desired,
               char* now, size_t cap);
void tr_kvc_close(struct tr_kvc* c);

double tr_now(void); /* CLOCK_MONOTONIC seconds */

#endif
