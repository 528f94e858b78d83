/* A rank's record as JSON (the object of docs/ras.md's "ranks" list), read
 * from what the call path stores: every field with an atomic load, so the
 * listener never races the calls it describes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "ras/ras.h"
#include "reduce/reduce.h"
#include "util/json.h"
#include "util/proc.h"

#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
/* The fields of a slot with acquire, so that the second look at its number
 * comes after them (as call/doorbell.h reads call records). */
#define LOAD_ACQ(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

struct out {
  char* buf;
  size_t len, at;
};

static void put(struct out* o, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out* o, const char* fmt, ...) {
  if (o->at + 1 >= o->len) {
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(o->buf + o->at, o->len - o->at, fmt, ap);
  va_end(ap);
  if (n > 0) {
    o->at = o->at + (size_t)n < o->len ? o->at + (size_t)n : o->len - 1;
  }
}

/* A JSON string, through the one escaper (util/json.h). */
static void put_str(struct out* o, const char* s) {
  put(o, "\"");
  if (s != NULL && o->at + 1 < o->len) {
    o->at += tutti_json_escape(s, strlen(s), NULL, o->buf + o->at, o->len - o->at);
  }
  put(o, "\"");
}

static const char* algo_name(int id) {
  const struct tutti_algo* a = id == 0xff ? NULL : tutti_algo_get((enum tutti_algo_id)id);
  return a != NULL ? a->name : NULL;
}

/* Slot `s` read whole (its number before and after the fields), or 0. */
static int read_slot(const struct tutti_ras_slot* s, struct tutti_ras_slot* out) {
  out->op = __atomic_load_n(&s->op, __ATOMIC_ACQUIRE);
  if (out->op == 0) {
    return 0;
  }
  out->call = LOAD_ACQ(s->call);
  out->count = LOAD_ACQ(s->count);
  out->enter_ns = LOAD_ACQ(s->enter_ns);
  out->exit_ns = LOAD_ACQ(s->exit_ns);
  out->root = LOAD_ACQ(s->root);
  out->coll = LOAD_ACQ(s->coll);
  out->type = LOAD_ACQ(s->type);
  out->algo = LOAD_ACQ(s->algo);
  out->failed = LOAD_ACQ(s->failed);
  return LOAD(s->op) == out->op;
}

static void put_op(struct out* o, const struct tutti_ras_slot* s) {
  put(o, "{\"seq\":%llu,\"call\":%llu,\"op\":", (unsigned long long)s->op,
      (unsigned long long)s->call);
  put_str(o, tutti_coll_name((enum tutti_coll)s->coll));
  put(o, ",\"count\":%llu,\"datatype\":", (unsigned long long)s->count);
  put_str(o, tutti_type_name((ncclDataType_t)s->type));
  put(o, ",\"root\":%d,\"algorithm\":", (int)s->root);
  const char* a = algo_name(s->algo);
  if (a != NULL) {
    put_str(o, a);
  } else {
    put(o, "null");
  }
  put(o, ",\"enter_ns\":%llu,\"exit_ns\":%llu,\"failed\":%s}", (unsigned long long)s->enter_ns,
      (unsigned long long)s->exit_ns, s->failed ? "true" : "false");
}

const char* tutti_ras_peer_state(const struct tutti_ras_comm* rc, int p) {
  const struct tutti_doorbell* b = rc->peer_bells != NULL ? rc->peer_bells[p] : NULL;
  if (b != NULL && p != rc->rank) {
    const uint32_t lost = __atomic_load_n(&b->lost, __ATOMIC_ACQUIRE);
    if (tutti_lost_is_self(lost) && tutti_lost_errno(lost) != ETIME) {
      return "dead";
    }
  }
  const struct tutti_peer_info* me = &rc->peers[rc->rank];
  const struct tutti_peer_info* it = &rc->peers[p];
  if (it->host_hash == me->host_hash && tutti_process_gone(it->pid)) {
    return "dead";
  }
  return "unreachable";
}

/* The first peer whose calls, as its doorbell shows them, stop before
 * collective `call` (-1: none known). */
static int behind_peer(const struct tutti_ras_comm* rc, uint64_t call) {
  for (int p = 0; call != 0 && rc->peer_bells != NULL && p < rc->nranks; p++) {
    const struct tutti_doorbell* b = rc->peer_bells[p];
    if (p == rc->rank || b == NULL || !__atomic_load_n(&b->shows_calls, __ATOMIC_ACQUIRE)) {
      continue;
    }
    uint64_t newest = 0;
    for (int k = 0; k < TUTTI_CALL_HISTORY; k++) {
      const uint64_t seq = __atomic_load_n(&b->calls[k].seq, __ATOMIC_ACQUIRE);
      newest = seq > newest ? seq : newest;
    }
    if (newest < call) {
      return p;
    }
  }
  return -1;
}

/* A call on device buffers left the record at its launch: while a kernel
 * still runs one, the device executor says which (struct tutti_ras_dev).
 * 1 with its slot in *cur and how long no kernel started or finished. */
static int device_current(const struct tutti_ras_comm* rc, uint64_t ops, uint64_t now,
                          struct tutti_ras_slot* cur, uint64_t* still_ns) {
  const struct tutti_ras_dev* d = rc->dev;
  if (d == NULL || *d->started == *d->finished) {
    return 0;
  }
  const uint64_t op = *d->running;
  if (op == 0 || op > ops || ops - op >= TUTTI_RAS_RING ||
      !read_slot(&rc->ring[op % TUTTI_RAS_RING], cur) || cur->op != op) {
    return 0; /* not a call of the record (a one-sided wait), or long gone from it */
  }
  const uint64_t since = __atomic_load_n(&d->still_since_ns, __ATOMIC_ACQUIRE);
  *still_ns = since != 0 && now > since ? now - since : 0;
  return 1;
}

size_t tutti_ras_rank_json(const struct tutti_ras_comm* rc, char* buf, size_t len) {
  struct out o = {buf, len, 0};
  if (len > 0) {
    buf[0] = '\0';
  }
  const uint64_t now = tutti_ras_now_ns();
  const struct tutti_peer_info* me = &rc->peers[rc->rank];
  const uint64_t ops = __atomic_load_n(&rc->ops, __ATOMIC_ACQUIRE);
  const int active = (int)LOAD(rc->active);
  const uint64_t since = LOAD(rc->wait_since_ns);
  const int waits_for = (int)LOAD(rc->waits_for);
  struct tutti_ras_slot cur;
  const int have_cur =
      ops != 0 && read_slot(&rc->ring[ops % TUTTI_RAS_RING], &cur) && cur.op == ops;
  const char* state = !active || !have_cur ? "idle" : since != 0 ? "waiting" : "in-call";
  struct tutti_ras_slot dcur;
  uint64_t dstill = 0;
  const int on_gpu = !(active && have_cur) && device_current(rc, ops, now, &dcur, &dstill);
  if (on_gpu) {
    /* A kernel that moved nothing for a second waits for someone. */
    state = dstill >= 1000000000ull ? "waiting" : "in-call";
  }
  put(&o, "{\"rank\":%d,\"host\":", rc->rank);
  put_str(&o, me->hostname);
  put(&o, ",\"pid\":%d,\"gpu\":%d,\"state\":\"%s\",\"calls\":%llu,\"ops\":%llu,\"time_ns\":%llu",
      (int)me->pid, me->cuda_dev, state, (unsigned long long)LOAD(rc->calls),
      (unsigned long long)ops, (unsigned long long)now);
  put(&o, ",\"current\":");
  if (active && have_cur) {
    put_op(&o, &cur);
    o.at -= o.at > 0 && o.buf[o.at - 1] == '}'; /* reopen it for the wait */
    put(&o, ",\"waited_s\":%.3f,\"waits_for\":%d,\"bytes_moved\":",
        since != 0 && now > since ? (double)(now - since) / 1e9 : 0.0, since != 0 ? waits_for : -1);
    if (since != 0) { /* as of the executor's last idle check */
      put(&o, "%llu}", (unsigned long long)LOAD(rc->moved));
    } else {
      put(&o, "null}");
    }
  } else if (on_gpu) {
    put_op(&o, &dcur);
    o.at -= o.at > 0 && o.buf[o.at - 1] == '}';
    /* The device's bytes stay in GPU memory: not counted here. */
    put(&o, ",\"waited_s\":%.3f,\"waits_for\":%d,\"bytes_moved\":null,\"device\":true}",
        (double)dstill / 1e9, dstill >= 1000000000ull ? behind_peer(rc, dcur.call) : -1);
  } else {
    put(&o, "null");
  }
  put(&o, ",\"failed\":");
  if (rc->bell != NULL && __atomic_load_n(&rc->bell->failed, __ATOMIC_ACQUIRE) != 0) {
    char why[sizeof rc->bell->failed_why + 1];
    memcpy(why, rc->bell->failed_why, sizeof rc->bell->failed_why);
    why[sizeof rc->bell->failed_why] = '\0';
    put_str(&o, why);
  } else {
    put(&o, "null");
  }
  /* Peers this rank knows are gone, for readers of its record alone. */
  put(&o, ",\"dead\":[");
  int n = 0;
  for (int p = 0; p < rc->nranks; p++) {
    if (p != rc->rank && strcmp(tutti_ras_peer_state(rc, p), "dead") == 0) {
      put(&o, "%s%d", n++ ? "," : "", p);
    }
  }
  put(&o, "],\"recent\":[");
  n = 0;
  const uint64_t first = ops > TUTTI_RAS_RING ? ops - TUTTI_RAS_RING + 1 : 1;
  for (uint64_t k = first; k <= ops && k != 0; k++) {
    struct tutti_ras_slot s;
    if (read_slot(&rc->ring[k % TUTTI_RAS_RING], &s) && s.op == k) {
      put(&o, "%s", n++ ? "," : "");
      put_op(&o, &s);
    }
  }
  put(&o, "]}");
  return o.at;
}
