/* The loop that lets each transport of a list connect the pairs it can. */
#include "transport/transport.h"

#include "util/check.h"

ncclResult_t tutti_transport_setup(struct tutti_transport_comm* tc,
                                   const struct tutti_transport* const* list, int n) {
  for (int i = 0; i < n; i++) {
    NCCLCHECK(list[i]->setup(tc));
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

void tutti_transport_teardown(struct tutti_transport_comm* tc,
                              const struct tutti_transport* const* list, int n) {
  for (int i = n; i-- > 0;) {
    if (list[i]->teardown != NULL) {
      list[i]->teardown(tc);
    }
  }
}
