/* The rank side of bootstrap: joins the job through the root, learns every
 * rank's listening address, then hands over to ring.c for the ring. */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/seal.h"
#include "topo/ifaces.h"
#include "util/param.h"

/* A rank tells the root a deadline this much earlier than its own (at most
 * a quarter of the timeout), so that the root's sentence naming the missing
 * ranks arrives before the rank gives up on its own. */
#define ROOT_MARGIN_S 1.0
/* How long a root made by ncclGetUniqueId may take to answer a connection,
 * and a rank of its own process may wait there alone (check_not_alone). */
#define ROOT_ANSWER_S 5.0

static ncclResult_t open_listener(struct tutti_bootstrap* b, const union tutti_socket_addr* root,
                                  union tutti_socket_addr* me) {
  const char* spec = tutti_param_socket_ifname();
  memset(me, 0, sizeof *me);
  if (tutti_socket_is_loopback(root) && (spec == NULL || *spec == '\0')) {
    /* A root on loopback means a single-host job: the ranks stay on it too. */
    if (root->sa.sa_family == AF_INET6) {
      me->sin6.sin6_family = AF_INET6;
      me->sin6.sin6_addr = in6addr_loopback;
    } else {
      me->sin.sin_family = AF_INET;
      me->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
  } else {
    struct tutti_iface iface;
    NCCLCHECK(tutti_iface_pick(&iface));
    *me = iface.addr;
  }
  return tutti_socket_listen(me, &b->listen_fd);
}

static ncclResult_t read_table(struct tutti_bootstrap* b, int fd,
                               const struct tutti_socket_io* io) {
  size_t len = (size_t)b->nranks * TUTTI_SOCKET_ADDR_WIRE;
  unsigned char* table = malloc(len);
  b->addrs = calloc((size_t)b->nranks, sizeof *b->addrs);
  b->addr_text = calloc((size_t)b->nranks, sizeof *b->addr_text);
  if (table == NULL || b->addrs == NULL || b->addr_text == NULL) {
    free(table);
    return tutti_error(ncclSystemError, "rank %d: out of memory for the addresses of %d ranks",
                       b->rank, b->nranks);
  }
  ncclResult_t res = tutti_socket_recv_all(fd, table, len, io);
  for (int r = 0; r < b->nranks && res == ncclSuccess; r++) {
    if (tutti_socket_addr_unpack(table + (size_t)r * TUTTI_SOCKET_ADDR_WIRE, &b->addrs[r]) != 0) {
      res = tutti_error(ncclRemoteError,
                        "%s sent rank %d an address table with a damaged entry "
                        "for rank %d",
                        io->peer, b->rank, r);
    }
    tutti_socket_format(&b->addrs[r], b->addr_text[r], sizeof b->addr_text[r]);
  }
  free(table);
  return res;
}

/* An ERROR reply ({u32 result}{sentence}, `len` bytes in text, which has
 * room for one more): the result the root gave, and its sentence made safe
 * to print. Only the results a root sends are taken as they are: anything
 * else (ncclSuccess, ncclInProgress, unknown values) is ncclRemoteError. */
static ncclResult_t reply_error(const struct tutti_bootstrap* b, unsigned char* text, size_t len,
                                const struct tutti_socket_io* io) {
  text[len] = '\0';
  uint32_t code = tutti_socket_get32(text);
  if (code != ncclSystemError && code != ncclInvalidArgument && code != ncclInvalidUsage &&
      code != ncclRemoteError) {
    code = ncclRemoteError;
  }
  char* msg = (char*)text + 4;
  for (char* c = msg; *c != '\0'; c++) {
    if ((unsigned char)*c < 0x20 || *c == 0x7f) {
      *c = '?'; /* no control characters into logs and terminals */
    }
  }
  if (*msg == '\0') {
    return tutti_error((ncclResult_t)code,
                       "%s refused rank %d without saying why: is it the root of another job, or "
                       "a different tutti version?",
                       io->peer, b->rank);
  }
  return tutti_error((ncclResult_t)code, "%s", msg);
}

/* What a failed read from the root means: a connection it closed before
 * answering is explained (keys, secrets, a root that ended); anything else
 * (deadline, abort) keeps its own sentence. */
static ncclResult_t root_closed(const struct tutti_bootstrap* b, int fd, ncclResult_t res,
                                const struct tutti_socket_io* io) {
  if (res != ncclRemoteError || tutti_socket_now() >= io->deadline ||
      (b->abort_flag != NULL && __atomic_load_n(b->abort_flag, __ATOMIC_RELAXED) != 0)) {
    return res;
  }
  if (tutti_seal_enabled()) {
    const char* why = tutti_seal_why(fd);
    if (why != NULL) { /* the record layer knows: a wrong key, an altered record */
      return tutti_error(ncclRemoteError, "rank %d could not read the answer of %s: %s", b->rank,
                         io->peer, why);
    }
    return tutti_error(ncclRemoteError,
                       "%s closed rank %d's connection without an answer: the pre-shared keys "
                       "(ncclSetEncryption) differ, or the job secrets do",
                       io->peer, b->rank);
  }
  return tutti_error(ncclRemoteError,
                     "%s closed rank %d's connection without an answer: the job secrets may "
                     "differ (every rank must get the same unique id; with NCCL_COMM_ID also the "
                     "same TUTTI_JOB_SECRET), or that root's job already ended",
                     io->peer, b->rank);
}

/* The root proves the job's secret before this rank sends anything more
 * (util/hello.h); then this rank proves it. A root proves at once, so one
 * silent for ROOT_ANSWER_S is no root of this job. */
static ncclResult_t prove(const struct tutti_bootstrap* b, int fd,
                          const struct tutti_bs_proof_of* pf, const struct tutti_socket_io* io) {
  unsigned char proof[TUTTI_BS_PROOF], mac[TUTTI_BS_MAC];
  struct tutti_socket_io pio = *io;
  if (tutti_socket_now() + ROOT_ANSWER_S < pio.deadline) {
    pio.deadline = tutti_socket_now() + ROOT_ANSWER_S;
  }
  ncclResult_t res = tutti_socket_recv_all(fd, proof, sizeof proof, &pio);
  if (res != ncclSuccess) {
    return root_closed(b, fd, res, &pio);
  }
  if (tutti_bs_answer(pf, b->secret, proof, mac) != 0) {
    return tutti_error(ncclRemoteError,
                       "rank %d: %s did not prove this job's secret, so nothing more was sent to "
                       "it: it is another job's root (two jobs on one NCCL_COMM_ID address, or a "
                       "program on a dead root's port), or the ranks were given different unique "
                       "ids (with NCCL_COMM_ID also check TUTTI_JOB_SECRET)",
                       b->rank, io->peer);
  }
  res = tutti_socket_send_all(fd, mac, sizeof mac, io);
  tutti_sha256_wipe(mac, sizeof mac);
  return res;
}

static ncclResult_t read_reply(struct tutti_bootstrap* b, int fd,
                               const struct tutti_socket_io* io) {
  unsigned char hdr[TUTTI_BS_HEADER];
  ncclResult_t res = tutti_socket_recv_all(fd, hdr, sizeof hdr, io);
  if (res != ncclSuccess) {
    return root_closed(b, fd, res, io);
  }
  uint32_t type = tutti_socket_get32(hdr), len = tutti_socket_get32(hdr + 4);
  const uint32_t table = (uint32_t)b->nranks * TUTTI_SOCKET_ADDR_WIRE;
  if (type == TUTTI_BS_TABLE && len == table) {
    return read_table(b, fd, io);
  }
  if (type == TUTTI_BS_TABLE && len == table + TUTTI_BS_SECRET &&
      (b->flags & TUTTI_ID_FLAG_LEARN)) {
    /* The job's token, presented by its processes from now on. */
    unsigned char token[TUTTI_BS_SECRET];
    NCCLCHECK(read_table(b, fd, io));
    NCCLCHECK(tutti_socket_recv_all(fd, token, sizeof token, io));
    b->job = tutti_bs_job_learn(&b->root, b->derived, token);
    return ncclSuccess;
  }
  if (type == TUTTI_BS_ERROR && len >= 4 && len <= 4 + TUTTI_BS_MAX_ERROR) {
    unsigned char text[4 + TUTTI_BS_MAX_ERROR + 1];
    NCCLCHECK(tutti_socket_recv_all(fd, text, len, io));
    return reply_error(b, text, len, io);
  }
  return tutti_error(ncclRemoteError,
                     "%s sent rank %d an unexpected reply (type %u, %u bytes): is it the root of "
                     "another job, or a different tutti version?",
                     io->peer, b->rank, type, len);
}

/* A rank other than 0 that joined a root its own process started, and is
 * still alone there after a few seconds: every rank called
 * ncclGetUniqueId itself, so each waits at a root of its own. */
static ncclResult_t check_not_alone(const struct tutti_bootstrap* b, int fd, const char* where) {
  if (tutti_bootstrap_root_joined(b->secret) < 0) {
    return ncclSuccess; /* another process's root: it cannot be told apart from a slow job */
  }
  struct pollfd p = {.fd = fd, .events = POLLIN};
  const double until = tutti_socket_now() + ROOT_ANSWER_S;
  while (tutti_socket_now() < until) {
    /* An encrypted root's handshake bytes come at once: they are no answer. */
    const int hs = tutti_seal_handshake(fd);
    if (hs != 0 && hs != EAGAIN) {
      return ncclSuccess; /* read_reply says what failed */
    }
    if ((poll(&p, 1, 100) != 0 && hs == 0) ||
        (b->abort_flag != NULL && __atomic_load_n(b->abort_flag, __ATOMIC_RELAXED) != 0)) {
      return ncclSuccess; /* an answer, or an abort: read_reply says which */
    }
  }
  if (tutti_bootstrap_root_joined(b->secret) <= 1 && b->nranks > 1) {
    return tutti_error(ncclInvalidUsage,
                       "rank %d of %d joined the bootstrap root at %s, which its own process "
                       "started with ncclGetUniqueId, and no other rank came in %.0f s: it looks "
                       "as if every rank called ncclGetUniqueId itself. Call it on one rank "
                       "(rank 0) and give that id to every rank",
                       b->rank, b->nranks, where, ROOT_ANSWER_S);
  }
  return ncclSuccess;
}

static ncclResult_t join_root(struct tutti_bootstrap* b, const struct tutti_bs_id* id,
                              const union tutti_socket_addr* me, double deadline) {
  char where[TUTTI_SOCKET_ADDR_STRLEN], peer[96], doing[64];
  snprintf(peer, sizeof peer, "the bootstrap root at %s",
           tutti_socket_format(&id->root, where, sizeof where));
  snprintf(doing, sizeof doing, "bootstrap init of rank %d", b->rank);
  struct tutti_socket_io io = {deadline, b->abort_flag, peer, doing};
  int fd = -1;
  /* With NCCL_COMM_ID rank 0 starts the root, maybe after the others: they
   * wait for it. Otherwise the root ran when the id was made: a root that
   * does not answer within seconds is gone, or the id is not this job's. */
  const int comm_id = (id->flags & TUTTI_ID_FLAG_RANK0_ROOT) != 0;
  struct tutti_socket_io cio = io;
  if (!comm_id && tutti_socket_now() + ROOT_ANSWER_S < deadline) {
    cio.deadline = tutti_socket_now() + ROOT_ANSWER_S;
  }
  ncclResult_t cres = tutti_socket_connect(
      &id->root, &cio, "is rank 0 running, and is NCCL_SOCKET_IFNAME right?", &fd);
  if (cres != ncclSuccess && !comm_id &&
      (b->abort_flag == NULL || __atomic_load_n(b->abort_flag, __ATOMIC_RELAXED) == 0)) {
    char why[512]; /* copied: tutti_error rewrites the buffer it is read from */
    snprintf(why, sizeof why, "%s", tutti_last_error());
    return tutti_error(ncclInvalidUsage,
                       "rank %d: no bootstrap root answers at %s within %.0f s (%s): the unique "
                       "id names a root that is gone (did the process that called "
                       "ncclGetUniqueId exit?) or that this host cannot reach; give every rank "
                       "the id of one live ncclGetUniqueId call",
                       b->rank, where, ROOT_ANSWER_S, why);
  }
  NCCLCHECK(cres);
  unsigned char msg[TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN];
  unsigned char* p = msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  double margin = b->timeout_s * 0.25 < ROOT_MARGIN_S ? b->timeout_s * 0.25 : ROOT_MARGIN_S;
  double left = deadline - margin - tutti_socket_now();
  unsigned char packed[TUTTI_SOCKET_ADDR_WIRE];
  tutti_socket_addr_pack(&id->root, packed);
  const struct tutti_bs_proof_of pf = {TUTTI_HELLO_ROOT, packed, msg, sizeof msg};
  ncclResult_t res = tutti_bootstrap_preamble(msg);
  tutti_socket_put32(msg + TUTTI_BS_PREAMBLE, TUTTI_BS_HELLO);
  tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_HELLO_LEN);
  tutti_socket_put32(p, (uint32_t)b->rank);
  tutti_socket_put32(p + 4, (uint32_t)b->nranks);
  tutti_socket_put32(p + 8, (uint32_t)(b->timeout_s < 4e6 ? b->timeout_s * 1e3 : 4e9));
  tutti_socket_put32(p + 12, (uint32_t)(left <= 0 ? 0 : left < 4e6 ? left * 1e3 : 4e9));
  tutti_socket_addr_pack(me, p + 16);
  if (res == ncclSuccess) {
    res = tutti_socket_send_all(fd, msg, sizeof msg, &io);
  }
  if (res == ncclSuccess) {
    res = prove(b, fd, &pf, &io);
  }
  if (res == ncclSuccess && !comm_id && b->rank != 0) {
    res = check_not_alone(b, fd, where);
  }
  if (res == ncclSuccess) {
    res = read_reply(b, fd, &io);
  }
  tutti_seal_close(fd);
  return res;
}

/* NCCL_COMM_ID: rank 0 runs the root at the address. A job without an
 * identity (TUTTI_ID_FLAG_LEARN) may find its own root already there (one
 * stays after the job's first communicator), here or in another of its
 * processes; a rank 0 without the job's token that finds the address taken
 * joins too, and the root there tells it (and its own job) that two jobs
 * met. *taken says the address was held by another process. */
static ncclResult_t start_root(const struct tutti_bootstrap* b, const struct tutti_bs_id* f,
                               int* taken) {
  const int learn = (f->flags & TUTTI_ID_FLAG_LEARN) != 0;
  if (learn && tutti_bs_root_serving(&f->root, b->secret)) {
    return ncclSuccess;
  }
  union tutti_socket_addr root = f->root;
  ncclResult_t res = tutti_bootstrap_root_start(&root, f->secret, f->flags, taken);
  if (res == ncclSuccess || (learn && *taken)) {
    return ncclSuccess;
  }
  char why[512]; /* copied: tutti_error rewrites the buffer it is read from */
  snprintf(why, sizeof why, "%s", tutti_last_error());
  return tutti_error(res, "rank 0 cannot run the bootstrap root named by NCCL_COMM_ID: %s", why);
}

ncclResult_t tutti_bootstrap_init(const ncclUniqueId* id, int rank, int nranks, double timeout_s,
                                  volatile int* abort_flag, struct tutti_bootstrap** out) {
  if (out == NULL) {
    return tutti_error(ncclInvalidArgument, "bootstrap init: the output pointer is NULL");
  }
  *out = NULL;
  struct tutti_bs_id f;
  NCCLCHECK(tutti_bootstrap_id_decode(id, &f));
  if (nranks < 1 || nranks > TUTTI_BS_MAX_RANKS) {
    return tutti_error(ncclInvalidArgument, "nranks %d is out of range: it must be 1 to %d", nranks,
                       TUTTI_BS_MAX_RANKS);
  }
  if (rank < 0 || rank >= nranks) {
    return tutti_error(ncclInvalidArgument,
                       "rank %d is out of range: with nranks %d it must be 0 to %d", rank, nranks,
                       nranks - 1);
  }
  struct tutti_bootstrap* b = calloc(1, sizeof *b);
  if (b == NULL) {
    return tutti_error(ncclSystemError, "rank %d: out of memory for bootstrap", rank);
  }
  b->rank = rank;
  b->nranks = nranks;
  b->timeout_s = timeout_s > 0 ? timeout_s : 1e7; /* 0 or less: no limit worth the name */
  b->abort_flag = abort_flag;
  b->listen_fd = b->next_fd = b->prev_fd = -1;
  b->flags = f.flags;
  b->root = f.root;
  memcpy(b->derived, f.secret, TUTTI_BS_SECRET);
  b->job = (f.flags & TUTTI_ID_FLAG_LEARN) ? tutti_bs_job_find(&f.root, f.secret) : NULL;
  memcpy(b->secret, b->job != NULL ? b->job->token : f.secret, TUTTI_BS_SECRET);
  double deadline = tutti_socket_now() + b->timeout_s;
  union tutti_socket_addr me;
  ncclResult_t res = ncclSuccess;
  int taken = 0;
  if ((f.flags & TUTTI_ID_FLAG_RANK0_ROOT) && rank == 0) {
    NCCLCHECKGOTO(start_root(b, &f, &taken), res, fail);
  }
  NCCLCHECKGOTO(open_listener(b, &f.root, &me), res, fail);
  res = join_root(b, &f, &me, deadline);
  if (res != ncclSuccess && taken) {
    char why[512]; /* copied: tutti_error rewrites the buffer it is read from */
    snprintf(why, sizeof why, "%s", tutti_last_error());
    res = tutti_error(res,
                      "rank 0 cannot run the bootstrap root named by NCCL_COMM_ID: the address is "
                      "taken, and joining what listens there failed: %s",
                      why);
  }
  NCCLCHECKGOTO(res, res, fail);
  NCCLCHECKGOTO(tutti_bootstrap_ring_connect(b, deadline), res, fail);
  INFO(TUTTI_INIT | TUTTI_BOOTSTRAP, "bootstrap: rank %d of %d at %s joined", rank, nranks,
       b->addr_text[rank]);
  *out = b;
  return ncclSuccess;
fail:
  tutti_bootstrap_close(b);
  return res;
}

void tutti_bootstrap_secret(const struct tutti_bootstrap* b, unsigned char secret[16]) {
  memcpy(secret, b->secret, TUTTI_BS_SECRET);
}

const char* tutti_bootstrap_address(const struct tutti_bootstrap* b, int rank) {
  if (b == NULL || b->addr_text == NULL || rank < 0 || rank >= b->nranks) {
    return "";
  }
  return b->addr_text[rank];
}

void tutti_bootstrap_close(struct tutti_bootstrap* b) {
  if (b == NULL) {
    return;
  }
  int fds[3] = {b->listen_fd, b->next_fd, b->prev_fd};
  for (int i = 0; i < 3; i++) {
    if (fds[i] >= 0) {
      tutti_seal_close(fds[i]);
    }
  }
  free(b->addrs);
  free(b->addr_text);
  free(b);
}
