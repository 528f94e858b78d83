/* Setting up the socket network's connections (listen.c,
 * connect.c): neither side ever waits; each call moves the setup
 * as far as it can and returns a comm once its sockets are through. */
#ifndef TUTTI_NET_SOCKET_SETUP_H
#define TUTTI_NET_SOCKET_SETUP_H

#include "net/socket/comm.h"

struct tutti_socknet_listen;

/* Fills `handle` (TUTTI_NET_HANDLE_BYTES) with what a peer's connect needs. */
ncclResult_t tutti_socknet_listen(int dev, void* handle, struct tutti_socknet_listen** out);
/* *out stays NULL until a whole connection arrived; strangers are dropped. */
ncclResult_t tutti_socknet_accept(struct tutti_socknet_listen* l, struct tutti_socknet_comm** out);
void tutti_socknet_listen_close(struct tutti_socknet_listen* l);

/* Called again with the same handle until *out is set; keeps its progress
 * in the handle. */
ncclResult_t tutti_socknet_connect(int dev, void* handle, struct tutti_socknet_comm** out);

#endif
