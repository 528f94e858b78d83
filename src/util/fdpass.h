/* Handing file descriptors to other processes of this host (SCM_RIGHTS):
 * each process binds a datagram socket in the abstract namespace under a
 * name of its choosing; a sender needs only the receiver's name. Used to
 * share GPU memory exported as a POSIX file descriptor (device/peer/region.cu).
 * Abstract names live in the network namespace: processes in different
 * namespaces cannot reach each other's box. */
#ifndef TUTTI_UTIL_FDPASS_H
#define TUTTI_UTIL_FDPASS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tutti_fdbox {
  int sock; /* -1 when closed */
};

/* Binds this process's box under `name` (at most 100 bytes). Returns 0 or
 * an errno (EADDRINUSE: another box has that name). */
int tutti_fdbox_open(struct tutti_fdbox* box, const char* name);
/* Sends `fd` with the 64-bit `tag` to the box called `name`. Returns 0,
 * EAGAIN when the receiver's queue is full (try again after receiving), or
 * another errno (ECONNREFUSED: no such box). */
int tutti_fdbox_send(struct tutti_fdbox* box, const char* name, int fd, uint64_t tag);
/* Receives one descriptor and its tag, waiting at most `timeout_ms`.
 * Returns 0, ETIMEDOUT, or another errno. The caller owns *fd. */
int tutti_fdbox_recv(struct tutti_fdbox* box, int* fd, uint64_t* tag, int timeout_ms);
void tutti_fdbox_close(struct tutti_fdbox* box);

#ifdef __cplusplus
}
#endif

#endif
