/* Bootstrap internals shared by uid.c, root.c, bootstrap.c and ring.c: the
 * unique id layout, the wire protocol and the per-rank state.
 *
 * Wire protocol. The connecting end opens with a 24-byte preamble (the 8
 * bytes "tuttiBS2" and a fresh 16-byte nonce) and its first message; a
 * receiver drops a connection whose preamble or first header is wrong before
 * reading anything else. Then each end proves the job's secret without
 * sending it (util/hello.h): the listener answers with TUTTI_BS_PROOF bytes
 * (its nonce and two MACs: one per secret it admits, the same one twice
 * when it has one), the connector checks them and answers with its own MAC;
 * only then is the first message acted on, or anything else sent. Then
 * messages, each an 8-byte header {type, length} (big-endian u32) and
 * `length` payload bytes; the length is checked against what that type
 * allows before anything is read into memory. Addresses travel packed
 * (TUTTI_SOCKET_ADDR_WIRE bytes). */
#ifndef TUTTI_BOOTSTRAP_INTERNAL_H
#define TUTTI_BOOTSTRAP_INTERNAL_H

#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "util/hello.h"
#include "util/socket.h"

#define TUTTI_BS_SECRET 16
#define TUTTI_BS_PREAMBLE 24
#define TUTTI_BS_HEADER 8
#define TUTTI_BS_PROOF (TUTTI_HELLO_NONCE + 2 * TUTTI_HELLO_MAC) /* listener -> connector */
#define TUTTI_BS_MAC TUTTI_HELLO_MAC                             /* connector -> listener */
#define TUTTI_BS_MAX_RANKS (1 << 20)
#define TUTTI_BS_MAX_ERROR 1024  /* longest error text the root sends */
#define TUTTI_BS_HANDSHAKE_S 5.0 /* time a new connection has to present itself */

enum tutti_bs_type {
  TUTTI_BS_HELLO = 1,  /* rank -> root: rank, nranks, timeout ms, ms left, address */
  TUTTI_BS_TABLE = 2,  /* root -> rank: nranks packed listen addresses */
  TUTTI_BS_ERROR = 3,  /* root -> rank: u32 ncclResult_t, then the sentence */
  TUTTI_BS_RING = 4,   /* rank -> rank+1: rank, nranks */
  TUTTI_BS_GATHER = 5, /* one all-gather block */
  TUTTI_BS_ENTER = 6,  /* barrier token, first round */
  TUTTI_BS_LEAVE = 7   /* barrier token, second round */
};

#define TUTTI_BS_HELLO_LEN (16 + TUTTI_SOCKET_ADDR_WIRE)
#define TUTTI_BS_RING_LEN 8

/* Unique id layout (128 bytes, the rest zero):
 *   0  u32 magic "tUTi"   4  u16 version   6  u16 flags
 *   8  packed root address (24 bytes)       32  job secret (16 bytes) */
#define TUTTI_ID_MAGIC 0x74555469u
#define TUTTI_ID_VERSION 1
#define TUTTI_ID_FLAG_RANK0_ROOT 0x1 /* NCCL_COMM_ID: rank 0's init starts the root */
/* NCCL_COMM_ID with no job identity: the first table the root sends carries
 * a random token that the job's processes present from then on, and the root
 * stays to catch processes of another job (docs/design.md, "Bootstrap"). */
#define TUTTI_ID_FLAG_LEARN 0x2

struct tutti_bs_id {
  unsigned flags;
  union tutti_socket_addr root;
  unsigned char secret[TUTTI_BS_SECRET];
};

/* A job that started on NCCL_COMM_ID without an identity, as this process
 * learned it from its first table. Entries live as long as the process. */
struct tutti_bs_job {
  union tutti_socket_addr root;
  unsigned char derived[TUTTI_BS_SECRET]; /* the id's secret: what any such process presents */
  unsigned char token[TUTTI_BS_SECRET];   /* this job's own, presented from then on */
  int poisoned;                           /* atomic: another job's process came */
  char why[TUTTI_BS_MAX_ERROR];
};

/* What the rest of bootstrap sees of a root this process runs. */
struct tutti_bs_root_pub {
  union tutti_socket_addr addr;
  unsigned char secret[TUTTI_BS_SECRET]; /* the secret it admits now (under the registry lock) */
  int joined;                            /* ranks joined in the current round (atomic) */
};

struct tutti_bootstrap {
  int rank, nranks;
  double timeout_s;
  volatile int* abort_flag;
  unsigned char secret[TUTTI_BS_SECRET]; /* presented on every connection */
  unsigned flags;                        /* the id's */
  union tutti_socket_addr root;
  unsigned char derived[TUTTI_BS_SECRET]; /* the id's secret */
  struct tutti_bs_job* job;               /* TUTTI_ID_FLAG_LEARN: once learned */
  int listen_fd, next_fd, prev_fd;
  int broken; /* an operation failed half-way: the ring is out of step */
  union tutti_socket_addr* addrs;
  char (*addr_text)[TUTTI_SOCKET_ADDR_STRLEN];
  char next_desc[96], prev_desc[96]; /* "rank 3 at 10.0.0.1:41234" */
};

/* uid.c */
ncclResult_t tutti_bs_random_secret(unsigned char secret[TUTTI_BS_SECRET]);
/* The job as its launcher names it ("SLURM_JOB_ID=12,SLURM_STEP_ID=0"),
 * "" when no launcher said: what keeps two jobs on one NCCL_COMM_ID apart. */
void tutti_bootstrap_job_identity(char* out, size_t len);
/* The variables it reads, *n of them (for tests that clear them). */
const char* const* tutti_bootstrap_launcher_vars(size_t* n);
ncclResult_t tutti_bootstrap_id_decode(const ncclUniqueId* id, struct tutti_bs_id* out);

/* wire.c. The magic and a fresh nonce. */
ncclResult_t tutti_bootstrap_preamble(unsigned char out[TUTTI_BS_PREAMBLE]);
/* Checks the first `got` bytes of an incoming hello (preamble, then a header
 * of `type` and exactly `len`): -1 as soon as they are wrong. */
int tutti_bootstrap_handshake_check(const unsigned char* buf, size_t got, uint32_t type,
                                    uint32_t len);
/* What a proof is of: the protocol, the listener's packed address as the
 * connector dialled it, the connector's whole hello (preamble included). */
struct tutti_bs_proof_of {
  const char* label; /* TUTTI_HELLO_ROOT or TUTTI_HELLO_RING */
  const unsigned char* addr;
  const unsigned char* hello;
  size_t hello_len;
};
/* The listener's proof of keys[0] and keys[1]: 0, or -1 without a nonce. */
int tutti_bs_prove(const struct tutti_bs_proof_of* p, const unsigned char* keys[2],
                   unsigned char proof[TUTTI_BS_PROOF]);
/* The connector: 0 when proof proves `key` (in either slot), with its own
 * MAC in mac; -1 when the listener does not hold the key. */
int tutti_bs_answer(const struct tutti_bs_proof_of* p, const unsigned char key[TUTTI_BS_SECRET],
                    const unsigned char proof[TUTTI_BS_PROOF], unsigned char mac[TUTTI_BS_MAC]);
/* The listener: which of keys (0, 1) the connector's mac proves, or -1. */
int tutti_bs_which_key(const struct tutti_bs_proof_of* p, const unsigned char* keys[2],
                       const unsigned char nonce[TUTTI_HELLO_NONCE],
                       const unsigned char mac[TUTTI_BS_MAC]);

/* job.c: the roots this process runs, and the jobs it learned. */
void tutti_bs_registry_set(struct tutti_bs_root_pub* r, int add);
void tutti_bs_root_set_secret(struct tutti_bs_root_pub* r,
                              const unsigned char secret[TUTTI_BS_SECRET]);
/* How many ranks have joined the root of `secret` that this process runs,
 * or -1 when it runs none. */
int tutti_bootstrap_root_joined(const unsigned char secret[TUTTI_BS_SECRET]);
/* Whether a root of this process listens at `addr` admitting `secret`. */
int tutti_bs_root_serving(const union tutti_socket_addr* addr,
                          const unsigned char secret[TUTTI_BS_SECRET]);
struct tutti_bs_job* tutti_bs_job_find(const union tutti_socket_addr* root,
                                       const unsigned char derived[TUTTI_BS_SECRET]);
/* Records the job's token (the one already known wins); NULL when full. */
struct tutti_bs_job* tutti_bs_job_learn(const union tutti_socket_addr* root,
                                        const unsigned char derived[TUTTI_BS_SECRET],
                                        const unsigned char token[TUTTI_BS_SECRET]);
/* Every later call of the job's communicators in this process fails with `why`. */
void tutti_bs_job_poison(struct tutti_bs_job* j, const char* why);

/* root.c: listens on `addr` (port 0 allowed, the bound port written back)
 * and serves the job from a detached thread. `secret` is the id's; with
 * TUTTI_ID_FLAG_LEARN in `flags` the root teaches the job a token and stays
 * (see TUTTI_ID_FLAG_LEARN). On failure *in_use tells whether the address
 * was taken. */
ncclResult_t tutti_bootstrap_root_start(union tutti_socket_addr* addr,
                                        const unsigned char secret[TUTTI_BS_SECRET], unsigned flags,
                                        int* in_use);

/* ring.c: connects this rank to rank+1 and accepts rank-1. */
ncclResult_t tutti_bootstrap_ring_connect(struct tutti_bootstrap* b, double deadline);

#endif
