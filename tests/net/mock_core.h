/* The mock plugin's network (mock_core.c), in size_t sizes whatever the ABI
 * version; mock_plugin.c puts it behind one version's table. */
#ifndef TUTTI_TEST_MOCK_CORE_H
#define TUTTI_TEST_MOCK_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "mock_net.h"

extern int mock_max_recvs;    /* buffers one irecv may take */
extern size_t mock_max_bytes; /* the largest message */

struct mock_net_stats* mock_stats(void);
ncclResult_t mock_listen(int dev, void* handle, void** listen_comm);
ncclResult_t mock_connect(void* handle, void** send_comm);
ncclResult_t mock_accept(void* listen_comm, void** recv_comm);
ncclResult_t mock_close_listen(void* listen_comm);
ncclResult_t mock_close(void* comm);
ncclResult_t mock_reg(void* comm, void* data, size_t size, int dmabuf, int fd, uint64_t offset,
                      void** mhandle);
ncclResult_t mock_dereg(void* comm, void* mhandle);
ncclResult_t mock_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
ncclResult_t mock_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                        void** mhandles, void** request);
ncclResult_t mock_test(void* request, int* done, int* sizes);

#endif
