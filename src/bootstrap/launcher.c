/* Reading the launchers' variables (see launcher.h). Pure functions of a
 * getenv callback, so that tests can feed them any variable set. */
#include "bootstrap/launcher.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/param.h"

struct reader {
  tutti_launcher_get_fn get;
  void* ctx;
  const char* launcher;
  int bad; /* a value was set but unusable; the error is recorded */
};

/* The value of `name` as an int >= `lo`: -1 when unset, -2 when malformed. */
static int get_int(struct reader* r, const char* name, int lo) {
  const char* s = r->get(name, r->ctx);
  if (s == NULL || *s == '\0') {
    return -1;
  }
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*end != '\0' || errno != 0 || v < lo || v > 0x7fffffff) {
    tutti_error(ncclInvalidUsage, "%s=\"%s\" (from %s) is not a whole number >= %d", name, s,
                r->launcher, lo);
    r->bad = 1;
    return -2;
  }
  return (int)v;
}

/* A job or step id (any size; only mixed into a port number), 0 if unset. */
static long get_id(struct reader* r, const char* name) {
  const char* s = r->get(name, r->ctx);
  return s != NULL ? (long)strtoul(s, NULL, 10) : 0;
}

/* "host:port", bracketing an IPv6 literal (tutti_socket_parse wants that). */
static int format_comm_id(char* out, size_t len, const char* host, int port) {
  int v6 = strchr(host, ':') != NULL && host[0] != '[';
  int n = snprintf(out, len, v6 ? "[%s]:%d" : "%s:%d", host, port);
  if (n < 0 || (size_t)n >= len) {
    out[0] = '\0';
    return -1;
  }
  return 0;
}

/* MASTER_ADDR:MASTER_PORT+1. Not MASTER_PORT itself: torchrun's agent and
 * PyTorch's env:// TCPStore already listen there, and the bootstrap root
 * that rank 0 starts for NCCL_COMM_ID must bind its own port. */
static void comm_id_from_master(struct reader* r, struct tutti_launcher* out) {
  const char* addr = r->get("MASTER_ADDR", r->ctx);
  int port = get_int(r, "MASTER_PORT", 1);
  if (addr != NULL && *addr != '\0' && port > 0 && port < 65535) {
    format_comm_id(out->comm_id, sizeof out->comm_id, addr, port + 1);
  }
}

/* Launchers that give the four numbers in four variables. */
static const struct {
  const char* name;
  const char *rank, *size, *local_rank, *local_size;
} simple[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpiexec", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

static int is_set(struct reader* r, const char* name) {
  const char* v = r->get(name, r->ctx);
  return v != NULL && *v != '\0';
}

static void read_slurm(struct reader* r, struct tutti_launcher* out) {
  out->rank = get_int(r, "SLURM_PROCID", 0);
  out->world_size = get_int(r, "SLURM_STEP_NUM_TASKS", 1);
  if (out->world_size == -1) {
    out->world_size = get_int(r, "SLURM_NTASKS", 1);
  }
  out->local_rank = get_int(r, "SLURM_LOCALID", 0);
  int node = get_int(r, "SLURM_NODEID", 0);
  const char* per_node[] = {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE",
                            "SLURM_TASKS_PER_NODE"};
  for (int i = 0; i < 3 && out->local_world_size < 0; i++) {
    const char* spec = r->get(per_node[i], r->ctx);
    if (spec != NULL && *spec != '\0') {
      /* SLURM_NTASKS_PER_NODE is one number for every node; the others list nodes. */
      int at = i == 1 || node < 0 ? 0 : node;
      out->local_world_size = tutti_launcher_tasks_on_node(spec, at);
      if (out->local_world_size < 0) {
        tutti_error(ncclInvalidUsage, "%s=\"%s\" (from srun) is not a tasks-per-node list%s",
                    per_node[i], spec, node > 0 ? " long enough for SLURM_NODEID" : "");
        r->bad = 1;
      }
    }
  }
  if (is_set(r, "MASTER_ADDR") && is_set(r, "MASTER_PORT")) {
    comm_id_from_master(r, out);
    return;
  }
  const char* lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
  char host[256] = "";
  for (int i = 0; i < 3 && host[0] == '\0'; i++) {
    const char* l = r->get(lists[i], r->ctx);
    if (l != NULL && *l != '\0' && tutti_launcher_hostlist_first(l, host, sizeof host) != 0) {
      tutti_error(ncclInvalidUsage, "%s=\"%s\" (from srun) is not a Slurm hostlist", lists[i], l);
      r->bad = 1;
      return;
    }
  }
  if (host[0] == '\0') {
    return;
  }
  if (is_set(r, "MASTER_ADDR")) { /* an address without a port: keep the address */
    snprintf(host, sizeof host, "%s", r->get("MASTER_ADDR", r->ctx));
  }
  long step = get_id(r, is_set(r, "SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID");
  format_comm_id(out->comm_id, sizeof out->comm_id, host,
                 tutti_launcher_slurm_port(get_id(r, "SLURM_JOB_ID"), step));
}

int tutti_launcher_read_from(tutti_launcher_get_fn get, void* ctx, struct tutti_launcher* out) {
  memset(out, 0, sizeof *out);
  out->launcher = "";
  out->rank = out->world_size = out->local_rank = out->local_world_size = -1;
  struct reader r = {get, ctx, "", 0};
  size_t k = 0;
  while (k < sizeof simple / sizeof simple[0] &&
         !(is_set(&r, simple[k].rank) && is_set(&r, simple[k].size))) {
    k++;
  }
  /* srun's step variables: a program started directly in a batch script
   * also sees SLURM_PROCID=0 and SLURM_NTASKS, and is not rank 0 of them. */
  int slurm = is_set(&r, "SLURM_PROCID") &&
              (is_set(&r, "SLURM_STEP_ID") || is_set(&r, "SLURM_STEPID") ||
               is_set(&r, "SLURM_STEP_NUM_TASKS")) &&
              (is_set(&r, "SLURM_STEP_NUM_TASKS") || is_set(&r, "SLURM_NTASKS"));
  if (k < sizeof simple / sizeof simple[0]) {
    const char* tl = get("TUTTI_LAUNCHER", ctx);
    r.launcher = k == 0 && tl != NULL && strcmp(tl, "tuttirun") == 0 ? "tuttirun" : simple[k].name;
    out->rank = get_int(&r, simple[k].rank, 0);
    out->world_size = get_int(&r, simple[k].size, 1);
    out->local_rank = get_int(&r, simple[k].local_rank, 0);
    out->local_world_size = get_int(&r, simple[k].local_size, 1);
    comm_id_from_master(&r, out);
  } else if (slurm) {
    r.launcher = "srun";
    read_slurm(&r, out);
  }
  const char* id = get("NCCL_COMM_ID", ctx);
  if (id != NULL && *id != '\0') {
    snprintf(out->comm_id, sizeof out->comm_id, "%s", id);
  }
  if (r.launcher[0] == '\0') {
    return 0;
  }
  out->launcher = r.launcher;
  if (!r.bad && out->rank >= out->world_size) {
    tutti_error(ncclInvalidUsage, "%s says rank %d of %d ranks: the rank is out of range",
                r.launcher, out->rank, out->world_size);
    r.bad = 1;
  }
  if (!r.bad && out->local_rank >= 0 && out->local_world_size > 0 &&
      out->local_rank >= out->local_world_size) {
    tutti_error(ncclInvalidUsage, "%s says local rank %d of %d local ranks: out of range",
                r.launcher, out->local_rank, out->local_world_size);
    r.bad = 1;
  }
  if (r.bad) {
    return -1;
  }
  out->found = 1;
  return 1;
}

TUTTI_PARAM_STR(comm_id, "NCCL_COMM_ID", NULL, "host:port, [IPv6]:port",
                "the bootstrap root's address: rank 0 starts it there, ncclGetUniqueId's id "
                "names it (unset: tuttirun, torchrun, srun and mpirun's variables may set it)");

/* NCCL_* through tutti_getenv (config files count, as for the library's
 * other parameters); launcher variables only from the real environment. */
static const char* process_getenv(const char* name, void* ctx) {
  TUTTI_UNUSED(ctx);
  return strncmp(name, "NCCL_", 5) == 0 ? tutti_getenv(name) : getenv(name);
}

int tutti_launcher_read(struct tutti_launcher* out) {
  int rc = tutti_launcher_read_from(process_getenv, NULL, out);
  if (rc > 0) {
    INFO(TUTTI_INIT | TUTTI_ENV, "launched by %s: rank %d of %d, local rank %d of %d%s%s",
         out->launcher, out->rank, out->world_size, out->local_rank, out->local_world_size,
         out->comm_id[0] != '\0' ? ", rendezvous " : "", out->comm_id);
  }
  return rc;
}

int tutti_launcher_export_comm_id(const struct tutti_launcher* env) {
  const char* cur = tutti_param_comm_id();
  if (env == NULL || env->comm_id[0] == '\0' || (cur != NULL && *cur != '\0')) {
    return 0;
  }
  if (setenv("NCCL_COMM_ID", env->comm_id, 1) != 0) {
    tutti_error(ncclSystemError, "setenv NCCL_COMM_ID=%s failed: %s", env->comm_id,
                strerror(errno));
    return -1;
  }
  INFO(TUTTI_INIT | TUTTI_ENV, "NCCL_COMM_ID=%s set from %s's variables", env->comm_id,
       env->launcher[0] != '\0' ? env->launcher : "the launcher");
  return 1;
}

int tutti_launcher_hostlist_first(const char* list, char* out, size_t len) {
  size_t o = 0;
  const char* p = list;
  if (p == NULL || len == 0) {
    return -1;
  }
  while (*p != '\0' && *p != ',') {
    const char* piece = p;
    size_t n = 1;
    if (*p == '[') { /* "[03-05,07]": the first number of the first range */
      piece = p + 1;
      n = strcspn(piece, "-,]");
      const char* close = strchr(piece, ']');
      if (n == 0 || close == NULL) {
        return -1;
      }
      p = close + 1;
    } else if (*p == ']') {
      return -1;
    } else {
      p++;
    }
    if (o + n >= len) {
      return -1;
    }
    memcpy(out + o, piece, n);
    o += n;
  }
  out[o] = '\0';
  return o > 0 ? 0 : -1;
}

int tutti_launcher_tasks_on_node(const char* spec, int node) {
  const char* p = spec;
  while (p != NULL && *p != '\0' && node >= 0) {
    char* end = NULL;
    long tasks = strtol(p, &end, 10);
    long reps = 1;
    if (end == p || tasks < 0 || tasks > 0x7fffffff) {
      return -1;
    }
    p = end;
    if (strncmp(p, "(x", 2) == 0) {
      reps = strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || reps < 1) {
        return -1;
      }
      p = end + 1;
    }
    if (node < reps) {
      return (int)tasks;
    }
    node -= (int)(reps < 0x7fffffff ? reps : 0x7fffffff);
    if (*p != ',' && *p != '\0') {
      return -1;
    }
    p += *p == ',';
  }
  return -1;
}

int tutti_launcher_slurm_port(long job_id, long step_id) {
  /* 12000-31999: below Linux's ephemeral range (32768-60999), where
   * outgoing connections would take it. 16 steps of a job differ, and
   * neighbouring jobs too; MASTER_PORT overrides it when they collide. */
  unsigned long h = (unsigned long)job_id * 16u + (unsigned long)(step_id & 15);
  return 12000 + (int)(h % 20000u);
}
