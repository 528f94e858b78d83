/* What the files of src/ras/ share: the registry, the wire protocol between
 * processes, the document made from their answers, and the listener's poll
 * set (docs/ras.md). */
#ifndef TUTTI_RAS_INTERNAL_H
#define TUTTI_RAS_INTERNAL_H

#include <poll.h>
#include <pthread.h>

#include "ras/ras.h"
#include "util/socket.h"

/* Two processes of a job: the asker sends REQ (magic, the communicator's
 * hash, its nonce); the answerer, if it holds that communicator, CHAL (magic,
 * its nonce, its MAC); the asker checks it and sends its own MAC; only then
 * does the answerer send its lines and close. Both MACs are HMAC-SHA256
 * keyed by the communicator's secret over a label naming the side, the
 * hash, the answerer's address as the asker dialed it and both nonces: the
 * secret never travels, a MAC is good for one connection to one address, and
 * a process squatting on a dead rank's port gets no answer it could relay. */
#define TUTTI_RAS_MAGIC "tRA2"
#define TUTTI_RAS_NONCE 16
#define TUTTI_RAS_MAC_LEN 32
#define TUTTI_RAS_REQ (4 + 8 + TUTTI_RAS_NONCE)
#define TUTTI_RAS_CHAL (4 + TUTTI_RAS_NONCE + TUTTI_RAS_MAC_LEN)
#define TUTTI_RAS_ASKER "tutti ras v2 asker"
#define TUTTI_RAS_ANSWERER "tutti ras v2 answerer"

/* The gather waits this long for the other processes, so that the whole
 * answer leaves within 1 s even when one of them never answers. */
#define TUTTI_RAS_DEADLINE_S 0.8
/* One peer's exchange, from accept to its last byte. */
#define TUTTI_RAS_PEER_S 1.0

/* What one process's answer may hold: more, and it is dropped whole. */
#define TUTTI_RAS_REPLY_BYTES (16u << 20)
#define TUTTI_RAS_REPLY_LINES 1024
#define TUTTI_RAS_LINE_MAX (1u << 20)

extern pthread_mutex_t tutti_ras_lock; /* guards the list and `dumped` */
extern struct tutti_ras_comm* tutti_ras_comms;

/* A growing text buffer (malloc'd; `failed` once a growth failed, after
 * which nothing more is added). */
struct tutti_ras_buf {
  char* text;
  size_t len, cap;
  int failed;
};
void tutti_ras_buf_add(struct tutti_ras_buf* b, const char* s, size_t n);
void tutti_ras_buf_str(struct tutti_ras_buf* b, const char* s);
/* s as a quoted JSON string (util/json.h). */
void tutti_ras_buf_json(struct tutti_ras_buf* b, const char* s);
void tutti_ras_buf_free(struct tutti_ras_buf* b);

/* ras/lines.c, under tutti_ras_lock: this process's ranks (only `only`'s
 * when not NULL), one line each: "HASH SIZE MADE {rank object}\n". */
void tutti_ras_local_lines(struct tutti_ras_buf* b, const struct tutti_ras_comm* only);

/* ras/doc.c: the document of docs/ras.md, made from lines of this process
 * and of others. Lines are checked (sizes, ranks, JSON) and looked up by
 * hash, never under the lock but for the two _locked steps. */
struct tutti_ras_doc;
/* Under tutti_ras_lock: a new document knowing this process's
 * communicators (only `only` when not NULL) and holding their lines. */
struct tutti_ras_doc* tutti_ras_doc_new_locked(const struct tutti_ras_comm* only);
/* Adds the answer of the process at `from` (packed, as dialed): the number
 * of its lines kept, or -1 when the answer breaks a bound (then nothing of
 * it is kept). */
int tutti_ras_doc_add(struct tutti_ras_doc* d, const char* text, size_t len,
                      const unsigned char* from);
/* Under tutti_ras_lock: what this process knows of the ranks no line gave. */
void tutti_ras_doc_fill_locked(struct tutti_ras_doc* d, const struct tutti_ras_comm* only);
/* The document (reason: a flight record's cause, NULL for a live answer). */
void tutti_ras_doc_write(struct tutti_ras_doc* d, const char* reason, struct tutti_ras_buf* out);
void tutti_ras_doc_free(struct tutti_ras_doc* d);

/* ras/auth.c */
int tutti_ras_nonce(unsigned char out[TUTTI_RAS_NONCE]);
void tutti_ras_mac(const unsigned char secret[16], const char* label, uint64_t hash,
                   const unsigned char addr[TUTTI_SOCKET_ADDR_WIRE],
                   const unsigned char asker[TUTTI_RAS_NONCE],
                   const unsigned char answerer[TUTTI_RAS_NONCE],
                   unsigned char out[TUTTI_RAS_MAC_LEN]);

/* ras/io.c: the listener's poll set. Each module adds its sockets with the
 * function to call when they are ready, and the time it next needs to run
 * (its deadlines). */
struct tutti_ras_poll {
  struct pollfd* fds;
  void (**on)(void* arg, short revents);
  void** arg;
  int n, cap;
  double wake; /* tutti_socket_now() seconds: the loop runs again by then */
};
void tutti_ras_poll_add(struct tutti_ras_poll* ps, int fd, short events,
                        void (*on)(void* arg, short revents), void* arg);
void tutti_ras_poll_wake(struct tutti_ras_poll* ps, double when);
/* Non-blocking transfers through the record layer (util/seal.h): 1 done,
 * 0 not yet, -1 failed or closed. */
int tutti_ras_read(int fd, void* buf, size_t want, size_t* got);
int tutti_ras_write(int fd, const void* buf, size_t len, size_t* off);
/* Drives fd's encryption handshake: 1 done (or none), 0 not yet, -1 failed. */
int tutti_ras_sealed(int fd);

/* ras/peer.c: answering the other processes on the peer port. */
void tutti_ras_peer_accept(int listen_fd);
void tutti_ras_peer_arm(struct tutti_ras_poll* ps, double now);
void tutti_ras_peer_close_all(int in_child);

/* ras/gather.c: asking every other process of this one's communicators. */
struct tutti_ras_gather;
/* Under tutti_ras_lock: starts asking (NULL when out of memory). */
struct tutti_ras_gather* tutti_ras_gather_start_locked(void);
/* Adds its sockets; returns 1 once every process answered or the deadline
 * passed. */
int tutti_ras_gather_arm(struct tutti_ras_gather* g, struct tutti_ras_poll* ps, double now);
/* The whole job's document (takes the lock for a moment); frees g. */
void tutti_ras_gather_finish(struct tutti_ras_gather* g, struct tutti_ras_buf* out);
void tutti_ras_gather_free(struct tutti_ras_gather* g, int in_child);

/* ras/client.c: the port clients ask on, and their connections. */
void tutti_ras_client_open(void);
void tutti_ras_client_arm(struct tutti_ras_poll* ps, double now);
void tutti_ras_client_close_all(int in_child);

/* ras/dump.c, under tutti_ras_lock. */
const char* tutti_ras_dump_locked(struct tutti_ras_comm* rc, const char* why);

#endif
