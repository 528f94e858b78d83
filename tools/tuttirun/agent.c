/* The agent: what torchrun's LocalElasticAgent does around the workers. It
 * places this node in the job (static flags, or the c10d rendezvous), serves
 * the workers' store when it is node 0, runs attempts and restarts them up
 * to --max_restarts times, and lingers while other nodes still need it. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "store.h"
#include "tuttirun.h"

static const struct tr_job* job;
static struct tr_store* workers; /* the store at MASTER_ADDR:MASTER_PORT, if served here */

/* Whether `port` can be bound on every address (tutti's bootstrap root
 * takes MASTER_PORT+1), asked the way the root and the store bind. */
static int port_free(int port) {
  const int fd = tr_bind_any(port);
  if (fd >= 0) {
    close(fd);
  }
  return fd >= 0;
}

/* The first port the kernel hands out to bind(0) and connect(). */
static int ephemeral_low(void) {
  int lo = 32768;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f != NULL) {
    if (fscanf(f, "%d", &lo) != 1) {
      lo = 32768;
    }
    fclose(f);
  }
  return lo;
}

/* Serves the workers' store on `port`, or (0) on a free P with P+1 free too.
 * A pair always holds an even port, the pool connect() draws from: on a host
 * that opened and closed thousands of connections in the last minute, most of
 * them sit in TIME_WAIT and cannot be bound. So after a few pairs from the
 * kernel, P is drawn at random below the ephemeral range, where no
 * connection's own end ever lands. */
static int serve_workers(int port) {
  char err[256] = "";
  if (port != 0) {
    workers = tr_store_listen(port, err, sizeof err);
  }
  int low = 10000, high = ephemeral_low() - 2; /* P in [low, high] */
  for (int attempt = 0; port == 0 && attempt < 512 && workers == NULL; attempt++) {
    int want = 0;
    if (attempt >= 16 && high > low) {
      unsigned r;
      tr_random_bytes(&r, sizeof r);
      want = low + (int)(r % (unsigned)(high - low + 1));
    }
    workers = tr_store_listen(want, err, sizeof err);
    if (workers == NULL) {
      if (want == 0) {
        break;
      }
      continue; /* that one is taken: draw again */
    }
    err[0] = '\0';
    int p = tr_store_port(workers);
    if (p >= 65535 || !port_free(p + 1)) {
      tr_store_close(workers);
      workers = NULL;
    }
  }
  if (workers == NULL) {
    if (err[0] == '\0') {
      snprintf(err, sizeof err,
               "found no free pair of ports P, P+1 (P+1 is tutti's bootstrap "
               "root); pass a free pair as --master_port");
    }
    tr_say("cannot serve the workers' store: %s", err);
    return -1;
  }
  return 0;
}

static void random_secret(char* out, size_t len) {
  unsigned char b[16];
  tr_random_bytes(b, sizeof b);
  for (size_t i = 0; i < sizeof b && 2 * i + 2 < len; i++) {
    snprintf(out + 2 * i, 3, "%02x", b[i]);
  }
}

static void set_comm_id(struct tr_world* w) {
  int v6 = strchr(w->master_addr, ':') != NULL;
  snprintf(w->comm_id, sizeof w->comm_id, v6 ? "[%s]:%d" : "%s:%d", w->master_addr,
           w->master_port + 1);
}

/* The static rendezvous: ranks from --node_rank; node 0 serves the store. */
static int static_world(struct tr_world* w) {
  const struct tr_job* j = job;
  memset(w, 0, sizeof *w);
  w->group_rank = j->node_rank;
  w->group_world_size = j->max_nodes;
  w->base_rank = j->node_rank * j->nlocal;
  w->world_size = j->max_nodes * j->nlocal;
  snprintf(w->master_addr, sizeof w->master_addr, "%s", j->master_addr);
  w->master_port = j->master_port;
  if (j->node_rank == 0) {
    if (serve_workers(j->master_port > 0 ? j->master_port : 0) != 0) {
      return -1;
    }
    w->master_port = tr_store_port(workers);
  }
  set_comm_id(w);
  /* Every node must compute the same secret without talking to the others:
   * see docs/launching.md for the order. */
  if (j->secret[0] != '\0') {
    snprintf(w->secret, sizeof w->secret, "%s", j->secret);
  } else if (j->max_nodes == 1) {
    random_secret(w->secret, sizeof w->secret);
  } else if (j->run_id_given) {
    snprintf(w->secret, sizeof w->secret, "tuttirun-rdzv:%s", j->run_id);
  } else {
    snprintf(w->secret, sizeof w->secret, "tuttirun:%s", w->comm_id);
    tr_say(
        "warning: the job secret is derived from %s, which anyone can guess; pass the same "
        "--job_secret (or TUTTI_JOB_SECRET) on every host, or use --rdzv_backend c10d",
        w->comm_id);
  }
  return 0;
}

/* Group rank 0 of a c10d round: serves the workers' store, draws the secret. */
static int host_round(struct tr_world* w) {
  if (workers == NULL && serve_workers(0) != 0) {
    return -1;
  }
  if (job->local_addr[0] != '\0') {
    snprintf(w->master_addr, sizeof w->master_addr, "%s", job->local_addr);
  } else {
    tr_fqdn(w->master_addr, sizeof w->master_addr);
  }
  w->master_port = tr_store_port(workers);
  if (job->secret[0] != '\0') {
    snprintf(w->secret, sizeof w->secret, "%s", job->secret);
  } else {
    random_secret(w->secret, sizeof w->secret);
  }
  return 0;
}

static int poll_others(void) {
  return tr_rdzv_poll();
}

static int rm_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

/* After success: the workers of other nodes may still use the store served
 * here (node 0); serve it until they hung up, within the timeout. */
static void linger(double timeout_s) {
  double deadline = tr_now() + timeout_s;
  while (workers != NULL && tr_store_nclients(workers) > 0 && tr_now() < deadline &&
         !tr_stop_requested()) {
    tr_store_serve(100);
  }
}

int tr_agent_run(struct tr_job* j) {
  job = j;
  tr_job_setup(j);
  struct tr_world w;
  int status = 1, restarts = 0;
  if (j->c10d ? tr_rdzv_open(j) != 0 : static_world(&w) != 0) {
    return 1;
  }
  for (;;) {
    if (j->c10d) {
      memset(&w, 0, sizeof w);
      int rc = tr_rdzv_join(j, &w, host_round);
      if (rc != 0) {
        status = rc > 0 ? 128 + tr_stop_signal() : 1;
        break;
      }
      if (w.group_rank != 0 && workers != NULL) { /* another node serves it now */
        tr_store_close(workers);
        workers = NULL;
      }
    } else {
      w.restart_count = restarts;
    }
    if (workers != NULL) { /* each attempt starts with an empty store */
      tr_kv_clear(tr_store_table(workers));
    }
    struct tr_attempt a;
    tr_job_attempt(j, &w, j->c10d && j->max_nodes > 1 ? poll_others : NULL, &a);
    status = a.status;
    if (a.outcome == TR_SUCCEEDED || a.outcome == TR_SIGNALLED) {
      if (a.outcome == TR_SIGNALLED && j->c10d) {
        tr_rdzv_give_up("a node was stopped by a signal");
      }
      break;
    }
    if (a.outcome == TR_INTERRUPTED) {
      if (tr_rdzv_poll() == 2) {
        tr_say("another node gave the job up; stopping");
        status = 1;
        break;
      }
      tr_say("the nodes start a new round; restarting the workers");
      continue;
    }
    int again = j->c10d ? tr_rdzv_fail(j) : restarts < j->max_restarts;
    if (!again) {
      if (j->max_restarts > 0) {
        tr_say("no restarts left (--max_restarts %d)", j->max_restarts);
      }
      break;
    }
    restarts++;
    tr_say("restarting the workers (restart %d of %d)", j->c10d ? w.restart_count + 1 : restarts,
           j->max_restarts);
  }
  if (j->c10d) {
    tr_rdzv_leave(status == 0 ? 300 : 30);
  }
  if (status == 0 && w.group_world_size > 1) {
    linger(300);
  }
  tr_store_close(workers);
  if (j->run_dir_temp) { /* the temp folder above run_dir */
    char* slash = strrchr(j->run_dir, '/');
    if (slash != NULL) {
      *slash = '\0';
      nftw(j->run_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
  }
  return status;
}
