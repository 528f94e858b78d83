/* Local registration (NCCL_LOCAL_REGISTER): a communicator's registration
 * cache (device/peer/regcache.h), filled by ncclCommRegister, ncclMemAlloc,
 * windows and first use. Every function is a no-op on a communicator
 * without a cache (NCCL_LOCAL_REGISTER=0, no device executor). */
#ifndef TUTTI_API_REGISTER_H
#define TUTTI_API_REGISTER_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct ncclComm;
struct tutti_reg_entry;

/* At init, after the device communicator: makes the cache when asked. */
void tutti_reg_open(struct ncclComm* comm);
/* At destroy, before the device communicator goes: releases everything. */
void tutti_reg_close(struct ncclComm* comm);
/* ncclCommSuspend: imports unmapped, exports the cache alone holds dropped. */
void tutti_reg_suspend(struct ncclComm* comm);
/* ncclCommRegister: a reference on the allocation holding (buff, size), or
 * *e NULL when it stays staged (the INFO line says why). */
ncclResult_t tutti_reg_register(struct ncclComm* comm, const void* buff, size_t size,
                                struct tutti_reg_entry** e);
void tutti_reg_deregister(struct ncclComm* comm, struct tutti_reg_entry* e);
/* Windows: a reference held under the key `win` until released. */
void tutti_reg_window(struct ncclComm* comm, const void* win, const void* buff, size_t size);
void tutti_reg_window_release(struct ncclComm* comm, const void* win);
/* ncclMemAlloc / ncclMemFree: every live communicator on the current GPU
 * caches the allocation ahead, and forgets it before it is freed. */
void tutti_reg_mem_alloc(const void* ptr, size_t size);
void tutti_reg_mem_free(const void* ptr);
/* A device call: its buffers looked up (first use registers them) and one
 * INFO line (COLL, REG) saying whether the call could run in place or is
 * staged, and why. Costs one branch with the cache off and INFO off. */
void tutti_reg_call(struct ncclComm* comm, const char* fn, uint64_t seq, const void* send,
                    size_t send_bytes, const void* recv, size_t recv_bytes);
/* Bytes of peers' GPU memory this rank maps through the cache. */
uint64_t tutti_reg_peer_mapped(struct ncclComm* comm);

#endif
