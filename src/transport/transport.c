/* The list of transports, in order of preference, and the loop that lets
 * each connect the pairs it can. */
#include "transport/transport.h"

#include "util/check.h"

static const struct tutti_transport* const transports[] = {
    &tutti_transport_shm,
    &tutti_transport_net, /* a network plugin, when every rank loaded the same one */
    &tutti_transport_tcp,
};

#define NTRANSPORTS (sizeof transports / sizeof transports[0])

ncclResult_t tutti_transport_setup(struct tutti_transport_comm* tc) {
  for (size_t i = 0; i < NTRANSPORTS; i++) {
    NCCLCHECK(transports[i]->setup(tc));
  }
  if (tc->bell == NULL) {
    /* No shared segment: the rank still needs a doorbell its proxies can ring. */
    tc->bell = &tc->private_bell;
  }
  for (int r = 0; r < tc->nranks; r++) {
    if (tc->send[r] == NULL || tc->recv[r] == NULL) {
      return tutti_error(ncclSystemError,
                         "no transport can join rank %d (host %s) and rank %d (host %s): check "
                         "that a network interface is usable on both (NCCL_SOCKET_IFNAME) and "
                         "that NCCL_SHM_DISABLE is the same on every rank",
                         tc->rank, tc->peers[tc->rank].hostname, r, tc->peers[r].hostname);
    }
  }
  return ncclSuccess;
}

void tutti_transport_teardown(struct tutti_transport_comm* tc) {
  for (size_t i = NTRANSPORTS; i-- > 0;) {
    if (transports[i]->teardown != NULL) {
      transports[i]->teardown(tc);
    }
  }
}
