/* Where every rank is, for a running job asked from outside (tutti-ras):
 * each communicator's record of its rank (the calls it entered, the one it
 * is in, how long it has waited and for whom, its last 64 operations), a
 * listener thread per process that answers clients and peers from those
 * records, and the flight-recorder file a rank writes when its job fails
 * (docs/ras.md). The call path only stores into the record (relaxed
 * atomics: plain stores); the listener only reads it. */
#ifndef TUTTI_RAS_RAS_H
#define TUTTI_RAS_RAS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "call/doorbell.h"
#include "topo/peer.h"

#define TUTTI_RAS_RING 64 /* operations a rank keeps per communicator */

/* One operation as the flight recorder keeps it. `op` is written last on
 * entry (a reader trusts fields framed by the same number). */
struct tutti_ras_slot {
  uint64_t op;       /* 1-based operation number on the communicator; 0: empty */
  uint64_t call;     /* collective number (struct tutti_call.seq; 0: send or receive) */
  uint64_t count;    /* elements */
  uint64_t enter_ns; /* CLOCK_REALTIME_COARSE (tutti_ras_stamp_ns) */
  uint64_t exit_ns;  /* 0 while in it */
  int32_t root;      /* root, or the peer of a send or receive; -1: none */
  uint8_t coll;      /* enum tutti_coll */
  uint8_t type;      /* ncclDataType_t */
  uint8_t algo;      /* enum tutti_algo_id, 0xff: none */
  uint8_t failed;    /* it ended with an error */
};

/* What a rank's device executor shows RAS, read by the listener and never
 * written by it: kernels started and finished (host memory the kernels
 * write as they start and end), the RAS operation of the last kernel
 * started, and since when no kernel started or finished (the device
 * watchdog's stamp, tutti_ras_now_ns). A call on device buffers enters and
 * leaves the record at its launch; this says which one the GPU is still in. */
struct tutti_ras_dev {
  const volatile int* started;
  const volatile int* finished;
  const volatile uint64_t* running;
  uint64_t still_since_ns;
};

/* A communicator's rank as the listener and the flight recorder see it.
 * The identity is set before tutti_ras_register and never changes; the
 * rest is written by the call path. */
struct tutti_ras_comm {
  uint64_t hash;
  int rank;
  int nranks;
  const char* made; /* "init", "split", "shrink", "grow" */
  unsigned char secret[16];
  const struct tutti_peer_info* peers; /* [nranks] */
  struct tutti_doorbell* bell;         /* this rank's (NULL: none) */
  struct tutti_doorbell* const* peer_bells;
  const struct tutti_ras_dev* dev; /* its device executor's (NULL: none) */

  uint64_t ops;           /* operations entered */
  uint64_t calls;         /* collectives entered */
  uint32_t active;        /* in an operation now: the newest slot */
  uint64_t wait_since_ns; /* no progress since (0: moving) */
  int32_t waits_for;      /* the rank the stuck operation waits for (-1: none known) */
  uint64_t moved;         /* bytes its steps had moved at the last idle check */
  struct tutti_ras_slot ring[TUTTI_RAS_RING];

  int dumped; /* the flight record was written (under the registry's lock) */
  char dump_path[256];
  struct tutti_ras_comm* next; /* the process's registry */
};

static inline uint64_t tutti_ras_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Release stores keep a slot's blanked number ahead of its fields, as call
 * records do (call/doorbell.h); on x86 they are plain stores. */
/* The flight recorder's stamps: the coarse clock (a tick of 1 to 4 ms, a
 * few ns to read; the precise one cost 40 ns a call on the 2-core VM),
 * which is fine enough for calls that hold a job up for milliseconds. */
static inline uint64_t tutti_ras_stamp_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define TUTTI_RAS_STORE(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)

/* The call path: an operation starts (returns its slot for tutti_ras_exit). */
static inline struct tutti_ras_slot* tutti_ras_enter(struct tutti_ras_comm* rc, uint64_t call,
                                                     int coll, uint64_t count, int type, int root,
                                                     int algo, uint64_t now_ns) {
  if (rc == NULL) {
    return NULL;
  }
  const uint64_t op = rc->ops + 1;
  struct tutti_ras_slot* s = &rc->ring[op % TUTTI_RAS_RING];
  TUTTI_RAS_STORE(s->op, 0);
  TUTTI_RAS_STORE(s->call, call);
  TUTTI_RAS_STORE(s->count, count);
  TUTTI_RAS_STORE(s->enter_ns, now_ns);
  TUTTI_RAS_STORE(s->exit_ns, 0);
  TUTTI_RAS_STORE(s->root, (int32_t)root);
  TUTTI_RAS_STORE(s->coll, (uint8_t)coll);
  TUTTI_RAS_STORE(s->type, (uint8_t)type);
  TUTTI_RAS_STORE(s->algo, (uint8_t)algo);
  TUTTI_RAS_STORE(s->failed, 0);
  __atomic_store_n(&s->op, op, __ATOMIC_RELEASE);
  TUTTI_RAS_STORE(rc->wait_since_ns, 0);
  TUTTI_RAS_STORE(rc->waits_for, -1);
  TUTTI_RAS_STORE(rc->moved, 0);
  if (call != 0) {
    TUTTI_RAS_STORE(rc->calls, call);
  }
  __atomic_store_n(&rc->ops, op, __ATOMIC_RELEASE);
  TUTTI_RAS_STORE(rc->active, 1);
  return s;
}

/* The operation of slot `s` ended (`failed`: with an error). */
static inline void tutti_ras_exit(struct tutti_ras_comm* rc, struct tutti_ras_slot* s, int failed,
                                  uint64_t now_ns) {
  if (rc == NULL || s == NULL) {
    return;
  }
  TUTTI_RAS_STORE(s->failed, (uint8_t)(failed != 0));
  TUTTI_RAS_STORE(s->exit_ns, now_ns);
  TUTTI_RAS_STORE(rc->active, 0);
}

/* The executor's idle check (a few times a second while nothing moves):
 * stuck since `since_ns` (0: moving again), waiting for rank `peer`,
 * `moved` bytes moved so far. */
static inline void tutti_ras_wait(struct tutti_ras_comm* rc, uint64_t since_ns, int peer,
                                  uint64_t moved) {
  if (rc != NULL) {
    TUTTI_RAS_STORE(rc->wait_since_ns, since_ns);
    TUTTI_RAS_STORE(rc->waits_for, (int32_t)peer);
    if (since_ns != 0) {
      TUTTI_RAS_STORE(rc->moved, moved);
    }
  }
}

/* ras/registry.c: the process's communicators; unregister returns once
 * the listener no longer reads `rc`. */
void tutti_ras_register(struct tutti_ras_comm* rc);
void tutti_ras_unregister(struct tutti_ras_comm* rc);
/* ras/listen.c: the address peers reach this process's listener at, packed (util/socket.h,
 * TUTTI_SOCKET_ADDR_WIRE bytes; all zero: none), on the interface of
 * `near` ("host:port", the bootstrap's own address). Starts the listener
 * the first time (NCCL_RAS_ENABLE). */
void tutti_ras_peer_address(const char* near, unsigned char* out);

/* ras/dump.c: writes the flight record of `rc` (once; TUTTI_RECORD_DIR,
 * else the user's private directory) and returns its path, or NULL. `why`
 * goes into it. */
const char* tutti_ras_dump(struct tutti_ras_comm* rc, const char* why);
/* Appends "; flight record: PATH" to the last error, when one was written. */
void tutti_ras_dump_error(struct tutti_ras_comm* rc);

/* ras/dirs.c: the user's private directory, for RAS's client socket and
 * flight records: $XDG_RUNTIME_DIR/tutti (when that is the user's), else
 * $TMPDIR/tutti-UID, else
 * /tmp/tutti-UID, made 0700 (when `make`) and used only when it is a
 * directory (not a link) this user owns and nobody else may enter. 0 with
 * its path, or -1 with a sentence saying why not. tutti-ras finds the job's
 * socket with it. */
int tutti_ras_private_dir(int make, char* path, size_t len, char* why, size_t why_len);
#define TUTTI_RAS_SOCKET "ras.sock" /* in that directory */
/* What a client sends first (a plaintext one; an encrypted one starts with
 * ncclSetEncryption's hello instead). */
#define TUTTI_RAS_CLIENT_REQ "tRAC"

/* ras/json.c: the JSON object of rank `rc->rank` ({"rank": ...}) into buf;
 * returns its length (truncated at len - 1). */
size_t tutti_ras_rank_json(const struct tutti_ras_comm* rc, char* buf, size_t len);
/* What this process knows of peer rank p of `rc` that did not answer:
 * "dead" when its doorbell or process says it is gone, else "unreachable". */
const char* tutti_ras_peer_state(const struct tutti_ras_comm* rc, int p);

#endif
