/* The c10d rendezvous: the agents of a job meet in a store at the endpoint
 * (served by the agent on that host), agree on who takes part in each round
 * and on group ranks (sorted by host name and pid, as torchrun sorts them),
 * and move to a new round together when a node fails (a restart) or the
 * job is given up. Keys, under tuttirun/<run_id>/:
 *   round, restarts, shutdown          the job's state
 *   <r>/joined, <r>/node/<i>           arrivals of round r and who they are
 *   <r>/closed                         how many take part (set once, by CAS)
 *   <r>/master                         "port\taddr\tsecret" from group rank 0
 *   <r>/failures, <r>/left             who failed first; who has gone */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "tuttirun.h"

static struct tr_kvc kv;
static struct tr_store* served; /* the rendezvous store, when this agent serves it */
static const struct tr_job* job;
static int round_no, participants, lost;

static const char* key(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static const char* key(const char* fmt, ...) {
  static char k[512];
  int o = snprintf(k, sizeof k, "tuttirun/%s/", job->run_id);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k + o, sizeof k - (size_t)o, fmt, ap);
  va_end(ap);
  return k;
}

/* The integer at k (missing: dflt); -1 with the error said on failure. */
static int get_int(const char* k, int dflt, long* out) {
  char v[64];
  int found;
  if (tr_kvc_get(&kv, k, v, sizeof v, &found) != 0) {
    return -1;
  }
  *out = found ? strtol(v, NULL, 10) : dflt;
  return 0;
}

static int store_error(const char* what) {
  tr_say("rendezvous: %s: %s", what, kv.error);
  return -1;
}

int tr_rdzv_open(const struct tr_job* j) {
  job = j;
  int host = j->is_host >= 0 ? j->is_host : tr_is_local_host(j->rdzv_host);
  char err[256] = "";
  if (host) {
    served = tr_store_listen(j->rdzv_port, err, sizeof err);
  }
  if (served != NULL) {
    tr_kvc_init_local(&kv, served);
    return 0;
  }
  if (host && (j->is_host == 1 || j->rdzv_port == 0)) {
    tr_say("rendezvous: cannot serve the store at %s:%d: %s", j->rdzv_host, j->rdzv_port, err);
    return -1;
  }
  /* Another agent serves it (on this host too, when the bind found it taken). */
  tr_kvc_init_remote(&kv, j->rdzv_host, j->rdzv_port, j->read_timeout);
  if (tr_kvc_connect(&kv, tr_now() + j->join_timeout) != 0) {
    return store_error("no store at the endpoint");
  }
  return 0;
}

struct node {
  char addr[256];
  long pid;
  int nlocal, idx;
};

static int by_addr_pid(const void* a, const void* b) {
  const struct node *x = a, *y = b;
  int c = strcmp(x->addr, y->addr);
  return c != 0 ? c : (x->pid > y->pid) - (x->pid < y->pid);
}

/* Waits until the round's members are known; returns how many, 0 when the
 * round moved on (join again), -1 on an error, -2 on a stop signal. */
static int await_close(int idx) {
  double deadline = tr_now() + job->join_timeout, min_at = 0;
  for (;;) {
    long r, n, closed;
    char v[64];
    int found;
    if (tr_stop_requested()) {
      return -2;
    }
    if (tr_kvc_get(&kv, key("shutdown"), v, sizeof v, &found) != 0 ||
        get_int(key("round"), 0, &r) != 0 || get_int(key("%d/closed", round_no), 0, &closed) != 0 ||
        get_int(key("%d/joined", round_no), 0, &n) != 0) {
      return store_error("lost the store");
    }
    if (found) {
      tr_say("rendezvous: the job was given up (%s)", v);
      return -1;
    }
    if (r != round_no) {
      return 0;
    }
    if (closed > 0 && idx <= closed) {
      return (int)closed;
    }
    if (closed > 0) { /* late: a new round, with this node in it (torchrun's scale-up) */
      char now[64], want[32], expect[32];
      snprintf(expect, sizeof expect, "%d", round_no);
      snprintf(want, sizeof want, "%d", round_no + 1);
      tr_kvc_cas(&kv, key("round"), round_no == 0 ? "" : expect, want, now, sizeof now);
      return 0;
    }
    const char* close_at = NULL;
    char count[32];
    if (n >= job->max_nodes) {
      snprintf(count, sizeof count, "%d", job->max_nodes);
      close_at = count;
    } else if (n >= job->min_nodes) {
      min_at = min_at == 0 ? tr_now() : min_at;
      if (tr_now() - min_at >= job->last_call_timeout) {
        snprintf(count, sizeof count, "%ld", n);
        close_at = count;
      }
    }
    if (close_at != NULL) {
      char now[64];
      if (tr_kvc_cas(&kv, key("%d/closed", round_no), "", close_at, now, sizeof now) != 0) {
        return store_error("lost the store");
      }
      continue;
    }
    if (tr_now() > deadline) {
      tr_say("rendezvous: %ld of %d nodes came within %g s (join_timeout)", n, job->min_nodes,
             job->join_timeout);
      return -1;
    }
    tr_store_serve(50);
  }
}

static int read_nodes(struct node* nodes, int n) {
  double deadline = tr_now() + job->join_timeout;
  for (int i = 0; i < n; i++) {
    char v[512];
    int found = 0;
    while (!found) {
      if (tr_kvc_get(&kv, key("%d/node/%d", round_no, i + 1), v, sizeof v, &found) != 0) {
        return store_error("lost the store");
      }
      if (!found && (tr_now() > deadline || tr_stop_requested())) {
        tr_say("rendezvous: node %d of round %d never said who it is", i + 1, round_no);
        return -1;
      }
      if (!found) {
        tr_store_serve(20);
      }
    }
    nodes[i].idx = i + 1;
    if (sscanf(v, "%255s %ld %d", nodes[i].addr, &nodes[i].pid, &nodes[i].nlocal) != 3) {
      tr_say("rendezvous: bad node entry \"%s\"", v);
      return -1;
    }
  }
  return 0;
}

static int await_master(struct tr_world* w) {
  double deadline = tr_now() + job->join_timeout;
  char v[1024];
  int found = 0;
  while (!found) {
    if (tr_kvc_get(&kv, key("%d/master", round_no), v, sizeof v, &found) != 0) {
      return store_error("lost the store");
    }
    if (!found && (tr_now() > deadline || tr_stop_requested())) {
      tr_say("rendezvous: group rank 0 never published its address");
      return -1;
    }
    if (!found) {
      tr_store_serve(20);
    }
  }
  char* t1 = strchr(v, '\t');
  char* t2 = t1 != NULL ? strchr(t1 + 1, '\t') : NULL;
  if (t2 == NULL) {
    tr_say("rendezvous: bad master entry \"%s\"", v);
    return -1;
  }
  *t2 = '\0';
  w->master_port = atoi(v);
  snprintf(w->master_addr, sizeof w->master_addr, "%s", t1 + 1);
  snprintf(w->secret, sizeof w->secret, "%s", t2 + 1);
  return 0;
}

int tr_rdzv_join(const struct tr_job* j, struct tr_world* w, int (*host)(struct tr_world* w)) {
  char me[256];
  if (j->local_addr[0] != '\0') {
    snprintf(me, sizeof me, "%s", j->local_addr);
  } else {
    tr_fqdn(me, sizeof me);
  }
  for (;;) {
    long r, restarts;
    int64_t idx;
    char desc[512];
    if (get_int(key("round"), 0, &r) != 0) {
      return store_error("lost the store");
    }
    round_no = (int)r;
    if (tr_kvc_add(&kv, key("%d/joined", round_no), 1, &idx) != 0) {
      return store_error("lost the store");
    }
    if (idx > j->max_nodes) {
      tr_say("rendezvous: more than %d nodes (--nnodes) joined run %s", j->max_nodes, j->run_id);
      return -1;
    }
    snprintf(desc, sizeof desc, "%s %ld %d", me, (long)getpid(), j->nlocal);
    if (tr_kvc_set(&kv, key("%d/node/%d", round_no, (int)idx), desc) != 0) {
      return store_error("lost the store");
    }
    int n = await_close((int)idx);
    if (n == 0) {
      continue;
    }
    if (n < 0) {
      return n == -2 ? 1 : -1;
    }
    struct node* nodes = calloc((size_t)n, sizeof *nodes);
    if (nodes == NULL || read_nodes(nodes, n) != 0) {
      free(nodes);
      return -1;
    }
    qsort(nodes, (size_t)n, sizeof *nodes, by_addr_pid);
    w->group_world_size = n;
    w->base_rank = w->world_size = 0;
    for (int i = 0; i < n; i++) {
      if (nodes[i].idx == idx) {
        w->group_rank = i;
        w->base_rank = w->world_size;
      }
      w->world_size += nodes[i].nlocal;
    }
    free(nodes);
    participants = n;
    if (get_int(key("restarts"), 0, &restarts) != 0) {
      return store_error("lost the store");
    }
    w->restart_count = (int)restarts;
    if (w->group_rank == 0) {
      char m[1024];
      if (host(w) != 0) {
        return -1;
      }
      snprintf(m, sizeof m, "%d\t%s\t%s", w->master_port, w->master_addr, w->secret);
      if (tr_kvc_set(&kv, key("%d/master", round_no), m) != 0) {
        return store_error("lost the store");
      }
    } else if (await_master(w) != 0) {
      return -1;
    }
    int v6 = strchr(w->master_addr, ':') != NULL;
    snprintf(w->comm_id, sizeof w->comm_id, v6 ? "[%s]:%d" : "%s:%d", w->master_addr,
             w->master_port + 1);
    return 0;
  }
}

int tr_rdzv_poll(void) {
  long r;
  char v[256];
  int found;
  if (lost) {
    return 0;
  }
  if (get_int(key("round"), 0, &r) != 0 ||
      tr_kvc_get(&kv, key("shutdown"), v, sizeof v, &found) != 0) {
    /* The agent serving the store is gone: the ranks may still finish. */
    tr_say("rendezvous: lost the store (%s); the ranks carry on", kv.error);
    lost = 1;
    return 0;
  }
  return found ? 2 : r != round_no ? 1 : 0;
}

static void give_up(const char* why) {
  char v[300];
  snprintf(v, sizeof v, "%s", why);
  tr_kvc_set(&kv, key("shutdown"), v);
}

int tr_rdzv_fail(const struct tr_job* j) {
  int64_t first, used;
  if (lost) {
    return 0;
  }
  if (tr_kvc_add(&kv, key("%d/failures", round_no), 1, &first) != 0) {
    return store_error("lost the store"), 0;
  }
  if (first == 1) { /* the first failure of the round decides */
    if (tr_kvc_add(&kv, key("restarts"), 1, &used) != 0) {
      return store_error("lost the store"), 0;
    }
    if (used > j->max_restarts) {
      char why[300];
      snprintf(why, sizeof why, "a rank failed and the %d restart%s are spent", j->max_restarts,
               j->max_restarts == 1 ? "" : "s");
      give_up(why);
      return 0;
    }
    char now[64], want[32], expect[32];
    snprintf(expect, sizeof expect, "%d", round_no);
    snprintf(want, sizeof want, "%d", round_no + 1);
    tr_kvc_cas(&kv, key("round"), round_no == 0 ? "" : expect, want, now, sizeof now);
    return 1;
  }
  /* Another node failed first: follow its decision. */
  double deadline = tr_now() + j->join_timeout;
  while (tr_now() < deadline && !tr_stop_requested()) {
    int p = tr_rdzv_poll();
    if (p != 0 || lost) {
      return p == 1;
    }
    tr_store_serve(50);
  }
  return 0;
}

void tr_rdzv_leave(double timeout_s) {
  int64_t left = 0;
  if (tr_stop_requested() || tr_rdzv_poll() == 2) {
    timeout_s = timeout_s < 30 ? timeout_s : 30;
  }
  /* Once counted out, the agent serving the store may be gone at any moment. */
  if (lost || tr_kvc_add(&kv, key("%d/left", round_no), 1, &left) != 0) {
    return;
  }
  if (served != NULL) { /* the others still need the store: serve until they left */
    double deadline = tr_now() + timeout_s;
    long n = left;
    while (n < participants && tr_now() < deadline &&
           get_int(key("%d/left", round_no), 0, &n) == 0) {
      tr_store_serve(100);
    }
  }
  tr_kvc_close(&kv);
}

void tr_rdzv_give_up(const char* why) {
  if (!lost) {
    give_up(why);
  }
}
