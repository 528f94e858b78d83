/* What the files of src/ras/ share: the registry, the flight record's
 * writer under its lock, and the listener's two kinds of answers. */
#ifndef TUTTI_RAS_INTERNAL_H
#define TUTTI_RAS_INTERNAL_H

#include <pthread.h>

#include "ras/ras.h"
#include "util/socket.h"

#define TUTTI_RAS_MAGIC "tRAS"
#define TUTTI_RAS_PEER_REQ 28 /* magic, a communicator's hash and secret */
#define TUTTI_RAS_DEADLINE_S 1.0

extern pthread_mutex_t tutti_ras_lock; /* guards the list and `dumped` */
extern struct tutti_ras_comm* tutti_ras_comms;

/* A growing text buffer (malloc'd; NULL text after a failed growth). */
struct tutti_ras_buf {
  char* text;
  size_t len, cap;
};
void tutti_ras_buf_add(struct tutti_ras_buf* b, const char* s, size_t n);

/* This process's ranks, one line each: "HASH SIZE MADE {rank object}\n"
 * (called under tutti_ras_lock). */
void tutti_ras_local_lines(struct tutti_ras_buf* b);
/* The document of docs/ras.md from such lines and what this process knows
 * of the ranks that did not answer (called under tutti_ras_lock). */
void tutti_ras_document(const char* lines, const char* reason, struct tutti_ras_buf* out);

/* Answers one peer waiting on `listen_fd` with this process's lines. */
void tutti_ras_serve_peer(int listen_fd);
/* Answers a client on `fd` with the whole job, asking the other processes
 * (serving peers on `peer_fd` meanwhile). */
void tutti_ras_answer_client(int fd, int peer_fd);
/* Sends all of buf on non-blocking `fd` before `deadline`: 0, or -1. */
int tutti_ras_send(int fd, const char* buf, size_t len, double deadline);

/* ras/dump.c, under tutti_ras_lock. */
const char* tutti_ras_dump_locked(struct tutti_ras_comm* rc, const char* why);

#endif
