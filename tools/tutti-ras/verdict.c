/* Verdicts on a RAS document: which rank holds a communicator up (behind
 * the others' call), which is slow (last into most recent calls), which
 * is dead or unreachable. The same for a live answer and for merged flight
 * records (docs/ras.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ras.h"

/* One rank as the verdicts see it. */
struct rk {
  const struct jv* obj;
  int rank, pid;
  const char* state;
  const char* host;
  double calls; /* -1: no record (dead, unreachable) */
  int in_call;  /* in a collective now, or its last one failed (a flight record) */
  double call, count, waited;
  const char* op;
  const char* dtype;
  int waits_for;
};

static void read_rank(const struct jv* r, struct rk* k) {
  memset(k, 0, sizeof *k);
  k->obj = r;
  k->rank = (int)json_num(r, "rank", -1);
  k->pid = (int)json_num(r, "pid", 0);
  k->state = json_str(r, "state", "unreachable");
  k->host = json_str(r, "host", "?");
  k->calls = json_num(r, "calls", -1);
  k->waits_for = -1;
  const struct jv* cur = json_get(r, "current");
  const struct jv* recent = json_get(r, "recent");
  const struct jv* last =
      recent != NULL && recent->t == J_ARR && recent->n > 0 ? recent->items[recent->n - 1] : NULL;
  if (cur != NULL && cur->t == J_OBJ) {
    k->in_call = 1;
    k->waited = json_num(cur, "waited_s", 0);
    k->waits_for = (int)json_num(cur, "waits_for", -1);
  } else if (last != NULL && json_num(last, "failed", 0) != 0) {
    cur = last;
    k->in_call = 1;
    k->waited = (json_num(last, "exit_ns", 0) - json_num(last, "enter_ns", 0)) / 1e9;
  }
  if (k->in_call) {
    k->call = json_num(cur, "call", 0);
    k->count = json_num(cur, "count", 0);
    k->op = json_str(cur, "op", "?");
    k->dtype = json_str(cur, "datatype", "?");
  }
}

static void add_verdict(struct jv* out, int severity, const char* kind, const char* hash,
                        const int* ranks, int nranks, const char* text) {
  struct jv* v = json_new(J_OBJ);
  json_add(v, "severity", json_new_num(severity));
  json_add(v, "kind", json_new_str(kind));
  json_add(v, "communicator", json_new_str(hash));
  struct jv* rs = json_new(J_ARR);
  for (int i = 0; i < nranks; i++) {
    json_add(rs, NULL, json_new_num(ranks[i]));
  }
  json_add(v, "ranks", rs);
  json_add(v, "text", json_new_str(text));
  json_add(out, NULL, v);
}

/* "0, 1, 3" */
static void list(char* buf, size_t len, const int* r, int n) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && at < len; i++) {
    at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "", r[i]);
  }
}

/* Whether one rank entered recent calls last, far behind the others. */
static int slow_rank(const struct rk* ks, int n, double* lag_out, int* last_out, int* of_out) {
  const struct jv* rec0 = NULL;
  int ref = -1;
  for (int i = 0; i < n && ref < 0; i++) {
    if (ks[i].calls >= 0) {
      ref = i;
      rec0 = json_get(ks[i].obj, "recent");
    }
  }
  if (rec0 == NULL || rec0->t != J_ARR) {
    return -1;
  }
  int* lastc = calloc((size_t)n, sizeof *lastc);
  double* lag = calloc((size_t)n, sizeof *lag);
  int calls = 0;
  for (int c = 0; c < rec0->n && lastc != NULL && lag != NULL; c++) {
    const double call = json_num(rec0->items[c], "call", 0);
    if (call <= 0) {
      continue;
    }
    double first = 1e30, latest = -1, sum = 0;
    int who = -1, have = 0, alive = 0;
    for (int i = 0; i < n; i++) {
      const struct jv* rec = json_get(ks[i].obj, "recent");
      if (ks[i].calls < 0 || rec == NULL) {
        continue;
      }
      alive++;
      for (int j = 0; j < rec->n; j++) {
        if (json_num(rec->items[j], "call", 0) == call) {
          const double t = json_num(rec->items[j], "enter_ns", 0) / 1e9;
          have++;
          sum += t;
          first = t < first ? t : first;
          if (t > latest) {
            latest = t;
            who = i;
          }
          break;
        }
      }
    }
    if (have != alive || have < 2) {
      continue;
    }
    calls++;
    lastc[who]++;
    lag[who] += latest - (sum - latest) / (have - 1);
  }
  int best = -1;
  for (int i = 0; i < n && lastc != NULL && lag != NULL; i++) {
    if (calls >= 3 && lastc[i] * 3 >= calls * 2 && lag[i] / lastc[i] >= 0.05) {
      best = i;
      *lag_out = lag[i] / lastc[i];
      *last_out = lastc[i];
      *of_out = calls;
    }
  }
  free(lastc);
  free(lag);
  return best;
}

void ras_verdicts(const struct jv* comm, struct jv* out) {
  const char* hash = json_str(comm, "hash", "?");
  const struct jv* ranks = json_get(comm, "ranks");
  const int n = ranks != NULL && ranks->t == J_ARR ? ranks->n : 0;
  struct rk* ks = calloc((size_t)n + 1, sizeof *ks);
  int* sel = calloc((size_t)n + 1, sizeof *sel);
  int* sel2 = calloc((size_t)n + 1, sizeof *sel2);
  if (ks == NULL || sel == NULL || sel2 == NULL) {
    free(ks), free(sel), free(sel2);
    return;
  }
  char head[160], text[2048], a[256], b[256];
  snprintf(head, sizeof head, "communicator %.8s… (%d ranks)", hash, n);
  double top = 0;
  int said = 0;
  for (int i = 0; i < n; i++) {
    read_rank(ranks->items[i], &ks[i]);
    if (ks[i].in_call && ks[i].call > top) {
      top = ks[i].call;
    }
  }
  /* Dead ranks. */
  int nd = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(ks[i].state, "dead") == 0) {
      sel[nd++] = ks[i].rank;
    }
  }
  if (nd > 0) {
    const struct rk* d = &ks[sel[0] < n ? sel[0] : 0];
    int o = snprintf(text, sizeof text, "%s: rank %d (host %s, pid %d) is dead%s", head, d->rank,
                     d->host, d->pid, nd > 1 ? ", and others: see the ranks" : "");
    /* What the survivors were doing when it died: in (or failed in) which call. */
    int nw = 0, failed = 0;
    const struct rk* w0 = NULL;
    for (int i = 0; i < n && top > 0; i++) {
      if (ks[i].in_call && ks[i].call == top) {
        sel2[nw++] = ks[i].rank;
        w0 = w0 != NULL ? w0 : &ks[i];
        failed |=
            json_get(ks[i].obj, "current") == NULL || json_get(ks[i].obj, "current")->t != J_OBJ;
      }
    }
    if (w0 != NULL && o > 0 && (size_t)o < sizeof text) {
      list(a, sizeof a, sel2, nw);
      snprintf(text + o, sizeof text - (size_t)o, "; rank%s %s %s call %.0f (%s %.0f %s)",
               nw > 1 ? "s" : "", a,
               failed   ? "failed in"
               : nw > 1 ? "wait in"
                        : "waits in",
               top, w0->op, w0->count, w0->dtype);
    }
    add_verdict(out, 0, "dead", hash, sel, nd, text);
    said++;
  }
  /* Ranks behind the call the others wait in. */
  int nw = 0, nb = 0;
  double waited = 0;
  const struct rk* w0 = NULL;
  for (int i = 0; i < n && top > 0; i++) {
    if (ks[i].in_call && ks[i].call == top) {
      sel2[nw++] = ks[i].rank;
      waited = ks[i].waited > waited ? ks[i].waited : waited;
      w0 = w0 != NULL ? w0 : &ks[i];
    } else if (ks[i].calls >= 0 && ks[i].calls < top) {
      sel[nb++] = ks[i].rank;
    }
  }
  if (nw > 0 && nb > 0) {
    const struct rk* h = &ks[sel[0] < n ? sel[0] : 0];
    list(a, sizeof a, sel, nb);
    list(b, sizeof b, sel2, nw);
    snprintf(text, sizeof text,
             "%s: rank%s %s (host %s, pid %d) %s entered %.0f calls; rank%s %s wait%s in call %.0f "
             "(%s %.0f %s) for %.1f s",
             head, nb > 1 ? "s" : "", a, h->host, h->pid, nb > 1 ? "have" : "has", h->calls,
             nw > 1 ? "s" : "", b, nw > 1 ? "" : "s", top, w0->op, w0->count, w0->dtype, waited);
    add_verdict(out, 1, "stalled", hash, sel, nb, text);
    said++;
  } else if (nw == 0) {
    /* Nobody in a call (device calls leave at launch), yet some entered
     * fewer: those are behind. */
    double most = 0;
    for (int i = 0; i < n; i++) {
      most = ks[i].calls > most ? ks[i].calls : most;
    }
    nb = 0;
    for (int i = 0; i < n; i++) {
      if (ks[i].calls >= 0 && ks[i].calls < most) {
        sel[nb++] = ks[i].rank;
      }
    }
    if (nb > 0) {
      const struct rk* h = &ks[sel[0] < n ? sel[0] : 0];
      list(a, sizeof a, sel, nb);
      snprintf(text, sizeof text,
               "%s: rank%s %s (host %s, pid %d) %s entered %.0f calls, others %.0f; none is in a "
               "call (calls on device buffers leave at launch, or ranks between calls)",
               head, nb > 1 ? "s" : "", a, h->host, h->pid, nb > 1 ? "have" : "has", h->calls,
               most);
      add_verdict(out, 2, "behind", hash, sel, nb, text);
      said++;
    }
  }
  double lag = 0;
  int lastc = 0, of = 0;
  const int s = slow_rank(ks, n, &lag, &lastc, &of);
  if (s >= 0) {
    snprintf(text, sizeof text,
             "%s: rank %d (host %s, pid %d) is slow: it entered %d of the last %d calls last, "
             "%.2f s on average after the others",
             head, ks[s].rank, ks[s].host, ks[s].pid, lastc, of, lag);
    add_verdict(out, 2, "slow", hash, &ks[s].rank, 1, text);
    said++;
  }
  int nu = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(ks[i].state, "unreachable") == 0) {
      sel[nu++] = ks[i].rank;
    }
  }
  if (nu > 0) {
    list(a, sizeof a, sel, nu);
    snprintf(text, sizeof text, "%s: rank%s %s did not answer (unreachable)", head,
             nu > 1 ? "s" : "", a);
    add_verdict(out, 3, "unreachable", hash, sel, nu, text);
    said++;
  }
  if (said == 0) {
    double most = 0;
    for (int i = 0; i < n; i++) {
      most = ks[i].calls > most ? ks[i].calls : most;
    }
    snprintf(text, sizeof text, "%s: no rank holds the others up (%.0f calls entered)", head, most);
    add_verdict(out, 4, "ok", hash, NULL, 0, text);
  }
  free(ks);
  free(sel);
  free(sel2);
}

void ras_print_rank(FILE* f, const struct jv* r) {
  struct rk k;
  read_rank(r, &k);
  fprintf(f, "  rank %-3d host %-12s pid %-7d gpu %-2d %-11s", k.rank, k.host, k.pid,
          (int)json_num(r, "gpu", -1), k.state);
  if (k.calls >= 0) {
    fprintf(f, " calls %-5.0f", k.calls);
  }
  const struct jv* cur = json_get(r, "current");
  if (cur != NULL && cur->t == J_OBJ) {
    const int root = (int)json_num(cur, "root", -1);
    fprintf(f, " in %s #%.0f (%.0f %s", k.op, k.call, k.count, k.dtype);
    if (root >= 0) {
      fprintf(f, ", %s %d", k.call > 0 ? "root" : "peer", root);
    }
    fprintf(f, ", %s) for %.1f s", json_str(cur, "algorithm", "no algorithm"), k.waited);
    const struct jv* moved = json_get(cur, "bytes_moved");
    if (moved != NULL && moved->t == J_NUM) {
      fprintf(f, ", %.0f bytes moved", moved->num);
    }
    if (k.waits_for >= 0) {
      fprintf(f, ", waiting for rank %d", k.waits_for);
    }
  } else if (k.in_call) {
    fprintf(f, " failed in %s #%.0f after %.1f s", k.op, k.call, k.waited);
  }
  fprintf(f, "\n");
}
