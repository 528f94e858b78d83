/* tutti's own network over TCP sockets, with the operations of a network
 * plugin (net/net.h): built into libtutti, where the device executor uses it
 * for GPU buffers across hosts when no plugin is loaded, and exported under
 * NCCL's ABI by libnccl-net-tutti.so (plugin/net), so that NVIDIA's NCCL and
 * tutti itself can load it as a plugin. One device per usable interface
 * (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY); each connection stripes its
 * large messages over several sockets served by threads of their own
 * (NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD), and carries the heartbeat of
 * util/socket.h: a peer that dies or is cut off fails the requests waiting
 * on it within a few TUTTI_HEARTBEAT_S. */
#ifndef TUTTI_NET_SOCKET_SOCKNET_H
#define TUTTI_NET_SOCKET_SOCKNET_H

#include <stdint.h>

#include "net/net.h"

/* Opens the socket network for one communicator (every call its own
 * struct; the devices are the process's, the threads each comm's). */
ncclResult_t tutti_socknet_open(uint64_t comm_id, struct tutti_net** out);

#endif
