/* The unique id: root address, job secret, flags (NCCL_COMM_ID, a job
 * that learns its identity), and the job identity launchers provide. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "topo/ifaces.h"
#include "bootstrap/launcher.h"
#include "util/param.h"

/* A 16-byte digest of a string. Not cryptographic: a secret typed into
 * TUTTI_JOB_SECRET is only as strong as the string, and one derived from
 * NCCL_COMM_ID only keeps apart jobs that did not mean to meet. */
static void hash16(const char* s, unsigned char out[TUTTI_BS_SECRET]) {
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (int k = 0; k < 2; k++) {
    for (const unsigned char* p = (const unsigned char*)s; *p != '\0'; p++) {
      h[k] = (h[k] ^ *p) * 0x100000001b3ull;
    }
    uint64_t z = h[k] + 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1); /* splitmix64 finish */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    h[k] = z ^ (z >> 31);
    for (int i = 0; i < 8; i++) {
      out[k * 8 + i] = (unsigned char)(h[k] >> (8 * i));
    }
  }
}

static void encode(ncclUniqueId* id, unsigned flags, const union tutti_socket_addr* root,
                   const unsigned char secret[TUTTI_BS_SECRET]) {
  unsigned char* p = (unsigned char*)id->internal;
  memset(id, 0, sizeof *id);
  tutti_socket_put32(p, TUTTI_ID_MAGIC);
  tutti_socket_put32(p + 4, (TUTTI_ID_VERSION << 16) | (flags & 0xffff));
  tutti_socket_addr_pack(root, p + 8);
  memcpy(p + 32, secret, TUTTI_BS_SECRET);
}

ncclResult_t tutti_bootstrap_new_root(ncclUniqueId* id) {
  if (id == NULL) {
    return tutti_error(ncclInvalidArgument, "bootstrap: the unique id pointer is NULL");
  }
  struct tutti_iface iface;
  union tutti_socket_addr root;
  unsigned char secret[TUTTI_BS_SECRET];
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  NCCLCHECK(tutti_iface_pick(&iface));
  root = iface.addr;
  NCCLCHECK(tutti_bs_random_secret(secret));
  NCCLCHECK(tutti_bootstrap_root_start(&root, secret, 0, NULL));
  encode(id, 0, &root, secret);
  INFO(TUTTI_INIT | TUTTI_BOOTSTRAP, "bootstrap root listening at %s (interface %s)",
       tutti_socket_format(&root, where, sizeof where), iface.name);
  return ncclSuccess;
}

/* Each launcher's own name for the job (and, for Slurm, the step): the
 * same in every rank of one launch, different between launches. */
static const char* const launcher_vars[] = {"TORCHELASTIC_RUN_ID",
                                            "SLURM_JOB_ID",
                                            "SLURM_STEP_ID",
                                            "PMIX_NAMESPACE",
                                            "OMPI_MCA_ess_base_jobid",
                                            "OMPI_MCA_orte_ess_jobid",
                                            "PMI_KVSNAME",
                                            "LSB_JOBID",
                                            "PBS_JOBID",
                                            "FLUX_JOB_ID"};

const char* const* tutti_bootstrap_launcher_vars(size_t* n) {
  *n = sizeof launcher_vars / sizeof launcher_vars[0];
  return launcher_vars;
}

void tutti_bootstrap_job_identity(char* out, size_t len) {
  size_t o = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++) {
    const char* v = tutti_getenv(launcher_vars[i]);
    /* torchrun says "none" when no rendezvous id was given. */
    if (v == NULL || *v == '\0' || (i == 0 && strcmp(v, "none") == 0) || o + 2 >= len) {
      continue;
    }
    int w = snprintf(out + o, len - o, "%s%s=%s", o > 0 ? "," : "", launcher_vars[i], v);
    o += w > 0 ? (size_t)w : 0;
    o = o < len ? o : len - 1;
  }
}

void tutti_bootstrap_rank0_id(const union tutti_socket_addr* root,
                              const unsigned char secret[TUTTI_BS_SECRET], ncclUniqueId* id) {
  encode(id, TUTTI_ID_FLAG_RANK0_ROOT, root, secret);
}

static TUTTI_PARAM_STR(job_secret, "TUTTI_JOB_SECRET", NULL, "any text",
                       "a job's identity when no launcher gives one, mixed into the secret of "
                       "an id made from NCCL_COMM_ID (docs/launching.md)");

ncclResult_t tutti_bootstrap_get_unique_id(ncclUniqueId* id) {
  const char* comm_id = tutti_param_comm_id();
  if (id == NULL || comm_id == NULL || *comm_id == '\0') {
    return tutti_bootstrap_new_root(id);
  }
  union tutti_socket_addr root;
  unsigned char secret[TUTTI_BS_SECRET];
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  ncclResult_t res = tutti_socket_parse(comm_id, tutti_iface_family(), &root);
  if (res != ncclSuccess) {
    char why[512]; /* copied: tutti_error rewrites the buffer it is read from */
    snprintf(why, sizeof why, "%s", tutti_last_error());
    return tutti_error(res, "NCCL_COMM_ID=\"%s\" is not usable: %s", comm_id, why);
  }
  tutti_socket_format(&root, where, sizeof where);
  const char* job = tutti_param_job_secret();
  unsigned flags = TUTTI_ID_FLAG_RANK0_ROOT;
  if (job != NULL && *job != '\0') {
    hash16(job, secret);
  } else {
    /* The canonical text, so that "node1:2000" and "10.0.0.1:2000" agree,
     * and the job as its launcher names it: two jobs on one address then
     * have different secrets, and cannot join each other's root. */
    char job_id[256], text[TUTTI_SOCKET_ADDR_STRLEN + 300];
    tutti_bootstrap_job_identity(job_id, sizeof job_id);
    snprintf(text, sizeof text, "tutti-comm-id:%s/%s", where, job_id);
    hash16(text, secret);
    /* Nothing tells this job from another on the address: its first
     * communicator gives it an identity (TUTTI_ID_FLAG_LEARN). */
    flags |= job_id[0] == '\0' ? TUTTI_ID_FLAG_LEARN : 0;
    INFO(TUTTI_INIT | TUTTI_BOOTSTRAP, "job identity from the launcher: %s",
         job_id[0] != '\0' ? job_id : "none: learned from the job's first communicator");
  }
  encode(id, flags, &root, secret);
  INFO(TUTTI_INIT | TUTTI_BOOTSTRAP, "unique id from NCCL_COMM_ID: rank 0 will run the root at %s",
       where);
  return ncclSuccess;
}

ncclResult_t tutti_bootstrap_id_decode(const ncclUniqueId* id, struct tutti_bs_id* out) {
  const char* what = "it is not an id from ncclGetUniqueId";
  if (id == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "the unique id is not a tutti/NCCL id from ncclGetUniqueId: the pointer is "
                       "NULL");
  }
  const unsigned char* p = (const unsigned char*)id->internal;
  uint32_t magic = tutti_socket_get32(p);
  uint32_t version = tutti_socket_get32(p + 4) >> 16;
  if (magic != TUTTI_ID_MAGIC) {
    what = "bad magic (an id from another library, or bytes damaged in transit?)";
  } else if (version != TUTTI_ID_VERSION) {
    what = "made by a different tutti version";
  } else if (tutti_socket_addr_unpack(p + 8, &out->root) != 0) {
    what = "the root address is neither IPv4 nor IPv6";
  } else if (tutti_socket_port(&out->root) == 0) {
    what = "the root port is 0";
  } else {
    out->flags = tutti_socket_get32(p + 4) & 0xffff;
    memcpy(out->secret, p + 32, TUTTI_BS_SECRET);
    return ncclSuccess;
  }
  return tutti_error(ncclInvalidArgument,
                     "the unique id is not a tutti/NCCL id from ncclGetUniqueId: %s; pass every "
                     "rank the 128 bytes rank 0 got from ncclGetUniqueId, unchanged",
                     what);
}

ncclResult_t tutti_bootstrap_check_id(const ncclUniqueId* id) {
  struct tutti_bs_id f;
  return tutti_bootstrap_id_decode(id, &f);
}

void tutti_bootstrap_id_secret(const ncclUniqueId* id, unsigned char secret[16]) {
  memcpy(secret, (const unsigned char*)id->internal + 32, TUTTI_BS_SECRET);
}
