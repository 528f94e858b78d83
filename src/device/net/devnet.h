/* The device executor across hosts (setup.cu, proxy.cu). A peer on
 * another host cannot map this rank's queues, so each rank keeps, for every
 * remote peer, a shadow of that peer's region in pinned host memory:
 * kernels send into the shadow exactly as into a mapped peer (slots, then
 * the tail). A proxy thread moves posted slots over the network (a plugin,
 * or tutti's own socket network) into the receiver's own queue, then its
 * tail, and frees shadow slots whose sends are done. The kernels do not
 * know which of their peers are remote. */
#ifndef TUTTI_DEVICE_NET_DEVNET_H
#define TUTTI_DEVICE_NET_DEVNET_H

#include <stddef.h>

#include "device/device.h"

struct tutti_dev_comm;

#define TD_NET_CHANNELS 4 /* channels of a communicator with remote peers (at most) */

/* Which peers this rank reaches over the network: those on other hosts, and
 * every peer when NCCL_SHM_DISABLE and NCCL_P2P_DISABLE are both set (which
 * makes the network path testable on one host). Fills remote[nranks] and
 * returns how many peers are remote. */
int td_net_remote(const struct tutti_dev_setup* s, unsigned char* remote);

/* Collective over all ranks (after the peers are mapped, before the final
 * agreement): listens, all-gathers addresses, connects every remote pair and
 * points dc->base[p] of each remote peer at its shadow. `why` carries this
 * rank's earlier failure in and any new one out; when some rank failed,
 * nobody connects. */
ncclResult_t td_net_connect(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s, char* why,
                            size_t why_len);
/* Starts the proxy thread. */
ncclResult_t td_net_start(struct tutti_dev_comm* dc);
/* Stops the proxy (after forwarding what is still owed to peers, unless the
 * communicator was aborted), closes the connections, frees the shadows. */
void td_net_free(struct tutti_dev_comm* dc);
/* TUTTI_NET_TRACE's launch events (trace.h: E, L); nothing when untraced. */
void td_net_mark(struct tutti_dev_comm* dc, char kind);
/* The sentence for a connection that broke while kernels waited on it. */
ncclResult_t td_net_error(struct tutti_dev_comm* dc);

#endif
