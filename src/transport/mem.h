/* In-process queues joining every pair of N simulated ranks (tests). */
#ifndef TUTTI_TRANSPORT_MEM_H
#define TUTTI_TRANSPORT_MEM_H

#include "transport/transport.h"

struct tutti_mem_world;

ncclResult_t tutti_mem_world_create(int nranks, size_t buffsize, struct tutti_mem_world** out);
struct tutti_conn** tutti_mem_world_send(struct tutti_mem_world* w, int rank); /* [nranks] */
struct tutti_conn** tutti_mem_world_recv(struct tutti_mem_world* w, int rank); /* [nranks] */
size_t tutti_mem_world_piece(const struct tutti_mem_world* w);
void tutti_mem_world_destroy(struct tutti_mem_world* w);

#endif
