/* The TCPStore protocol: parsing a client's queries and answering them.
 * Numbers are little-endian as torch sends them (x86, Arm); strings and
 * values are a uint64 length and the bytes. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

#define TR_KEY_MAX (1 << 20)
#define TR_VALUE_MAX (256u << 20)
#define TR_KEYS_PER_QUERY 100000

/* torch 2.x query numbers (torch/csrc/distributed/c10d/TCPStoreBackend.hpp). */
enum {
  Q_VALIDATE,
  Q_SET,
  Q_CAS,
  Q_GET,
  Q_ADD,
  Q_CHECK,
  Q_WAIT,
  Q_NUMKEYS,
  Q_DELETE,
  Q_APPEND,
  Q_MULTI_GET,
  Q_MULTI_SET,
  Q_CANCEL_WAIT,
  Q_PING,
  Q_QPUSH,
  Q_QPOP,
  Q_QLEN
};
/* Queues a reply; it leaves from the poll loop (the socket is non-blocking). */
static void reply(struct conn* c, const void* p, size_t n) {
  if (tr_buf_put(&c->out, p, n) != 0) {
    c->dialect = -1; /* out of memory: drop the client */
  }
}

static void reply_u8(struct conn* c, uint8_t v) {
  reply(c, &v, 1);
}

static void reply_i64(struct conn* c, int64_t v) {
  reply(c, &v, sizeof v);
}

static void reply_bytes(struct conn* c, const void* p, size_t n) {
  uint64_t len = n;
  reply(c, &len, sizeof len);
  reply(c, p, n);
}

/* A value changed: wake the connections waiting for it. */
void tr_store_wake(struct tr_store* s, const char* key) {
  for (size_t i = 0; i < s->nconns; i++) {
    struct conn* c = &s->conns[i];
    for (size_t k = 0; k < c->nwaits && c->left > 0; k++) {
      if (c->waits[k] != NULL && strcmp(c->waits[k], key) == 0) {
        free(c->waits[k]);
        c->waits[k] = NULL;
        if (--c->left == 0) {
          reply_u8(c, 0); /* STOP_WAITING */
          tr_store_conn_free_waits(c);
        }
      }
    }
  }
}

/* The parser: each reader returns 1 with the field taken, 0 when the bytes
 * are not all there yet, -1 on a malformed query. */
struct rd {
  const uint8_t* p;
  size_t n, off;
};

static int rd_raw(struct rd* r, void* out, size_t n) {
  if (r->n - r->off < n) {
    return 0;
  }
  memcpy(out, r->p + r->off, n);
  r->off += n;
  return 1;
}

/* A length-prefixed string or payload, returned NUL-terminated (malloc'd). */
static int rd_str(struct rd* r, char** out, size_t* len, size_t max) {
  uint64_t n;
  int got = rd_raw(r, &n, sizeof n);
  if (got <= 0) {
    return got;
  }
  if (n > max) {
    return -1;
  }
  if (r->n - r->off < n) {
    return 0;
  }
  char* s = malloc(n + 1);
  if (s == NULL) {
    return -1;
  }
  memcpy(s, r->p + r->off, n);
  s[n] = '\0';
  r->off += n;
  *out = s;
  if (len != NULL) {
    *len = n;
  }
  return 1;
}

#define TAKE(expr)     \
  do {                 \
    int got_ = (expr); \
    if (got_ <= 0) {   \
      rc = got_;       \
      goto done;       \
    }                  \
  } while (0)

/* Runs one query from the front of `r`; returns 1 done, 0 incomplete, -1 bad. */
static int run_query(struct tr_store* s, struct conn* c, struct rd* r) {
  struct tr_kv_table* t = &s->table;
  uint8_t q;
  char *key = NULL, *val = NULL, *val2 = NULL;
  char** keys = NULL;
  uint64_t nkeys = 0, got_keys = 0;
  size_t vlen = 0, v2len = 0;
  int rc = 1;
  TAKE(rd_raw(r, &q, 1));
  if (c->dialect == D_V1) { /* 1.x: no VALIDATE, SET..GETNUMKEYS one lower; 7 was WATCH_KEY */
    if (q == 7 || q > Q_CANCEL_WAIT) {
      return -1;
    }
    q = q < 7 ? (uint8_t)(q + 1) : q;
  }
  switch (q) {
    case Q_VALIDATE: {
      uint32_t magic;
      TAKE(rd_raw(r, &magic, sizeof magic));
      rc = magic == TR_STORE_MAGIC ? 1 : -1;
      break;
    }
    case Q_PING: {
      uint32_t nonce;
      TAKE(rd_raw(r, &nonce, sizeof nonce));
      reply(c, &nonce, sizeof nonce);
      break;
    }
    case Q_SET:
    case Q_APPEND:
    case Q_QPUSH:
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      TAKE(rd_str(r, &val, &vlen, TR_VALUE_MAX));
      if (q == Q_QPUSH) {
        rc = tr_kv_qpush(t, key, val, vlen) == 0 ? 1 : -1;
      } else if (q == Q_SET) {
        rc = tr_kv_set(t, key, val, vlen) == 0 ? 1 : -1;
      } else {
        rc = tr_kv_append(t, key, val, vlen) == 0 ? 1 : -1;
      }
      tr_store_wake(s, key);
      break;
    case Q_CAS: {
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      TAKE(rd_str(r, &val, &vlen, TR_VALUE_MAX));
      TAKE(rd_str(r, &val2, &v2len, TR_VALUE_MAX));
      const struct tr_kv* e = tr_kv_cas(t, key, val, vlen, val2, v2len);
      if (e != NULL) {
        reply_bytes(c, e->val, e->vlen);
      } else { /* missing key, non-empty expectation: torch answers the expectation */
        reply_bytes(c, val, vlen);
      }
      tr_store_wake(s, key);
      break;
    }
    case Q_GET:
    case Q_QLEN:
    case Q_QPOP:
    case Q_DELETE: {
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      if (q == Q_GET) {
        const struct tr_kv* e = tr_kv_find(t, key);
        reply_bytes(c, e != NULL ? (const void*)e->val : "", e != NULL ? e->vlen : 0);
      } else if (q == Q_QLEN) {
        reply_i64(c, (int64_t)tr_kv_qlen(t, key));
      } else if (q == Q_QPOP) {
        size_t n = tr_kv_qlen(t, key);
        reply_i64(c, (int64_t)n);
        if (n > 0) {
          val = tr_kv_qpop(t, key, &vlen);
          reply_bytes(c, val, vlen);
        }
      } else {
        reply_i64(c, tr_kv_delete(t, key));
      }
      break;
    }
    case Q_ADD: {
      int64_t delta, now;
      TAKE(rd_str(r, &key, NULL, TR_KEY_MAX));
      TAKE(rd_raw(r, &delta, sizeof delta));
      if (tr_kv_add(t, key, delta, &now) != 0) {
        rc = -1;
        break;
      }
      reply_i64(c, now);
      tr_store_wake(s, key);
      break;
    }
    case Q_NUMKEYS:
      reply_i64(c, (int64_t)t->count);
      break;
    case Q_CANCEL_WAIT:
      tr_store_conn_free_waits(c);
      reply_u8(c, 1); /* WAIT_CANCELED */
      break;
    case Q_CHECK:
    case Q_WAIT:
    case Q_MULTI_GET:
    case Q_MULTI_SET: {
      TAKE(rd_raw(r, &nkeys, sizeof nkeys));
      if (nkeys > TR_KEYS_PER_QUERY) {
        rc = -1;
        break;
      }
      keys = calloc(nkeys + 1, sizeof *keys);
      if (keys == NULL) {
        rc = -1;
        break;
      }
      /* Parse everything before acting: a half-received query is retried whole. */
      char** vals = q == Q_MULTI_SET ? calloc(nkeys + 1, sizeof *vals) : NULL;
      size_t* lens = q == Q_MULTI_SET ? calloc(nkeys + 1, sizeof *lens) : NULL;
      for (; got_keys < nkeys && rc == 1; got_keys++) {
        int g = rd_str(r, &keys[got_keys], NULL, TR_KEY_MAX);
        if (g > 0 && q == Q_MULTI_SET) {
          g = vals != NULL && lens != NULL
                  ? rd_str(r, &vals[got_keys], &lens[got_keys], TR_VALUE_MAX)
                  : -1;
          if (g <= 0) {
            free(keys[got_keys]);
            keys[got_keys] = NULL;
          }
        }
        if (g <= 0) {
          rc = g;
          break;
        }
      }
      if (rc == 1) {
        size_t missing = 0;
        for (uint64_t k = 0; k < nkeys; k++) {
          if (q == Q_MULTI_SET) {
            rc = tr_kv_set(t, keys[k], vals[k], lens[k]) == 0 ? rc : -1;
            tr_store_wake(s, keys[k]);
          } else if (q == Q_MULTI_GET) {
            const struct tr_kv* e = tr_kv_find(t, keys[k]);
            reply_bytes(c, e != NULL ? (const void*)e->val : "", e != NULL ? e->vlen : 0);
          } else if (tr_kv_find(t, keys[k]) == NULL && tr_kv_qlen(t, keys[k]) == 0) {
            missing++;
          }
        }
        if (q == Q_CHECK) {
          reply_u8(c, missing == 0 ? 0 : 1); /* READY / NOT_READY */
        } else if (q == Q_WAIT && missing == 0) {
          reply_u8(c, 0); /* STOP_WAITING */
        } else if (q == Q_WAIT) {
          tr_store_conn_free_waits(c);
          for (uint64_t k = 0; k < nkeys; k++) {
            if (tr_kv_find(t, keys[k]) != NULL || tr_kv_qlen(t, keys[k]) > 0) {
              free(keys[k]);
              keys[k] = NULL;
            }
          }
          c->waits = keys;
          c->nwaits = nkeys;
          c->left = missing;
          keys = NULL;
        }
      }
      for (uint64_t k = 0; vals != NULL && k < got_keys; k++) {
        free(vals[k]);
      }
      free(vals);
      free(lens);
      break;
    }
    default:
      rc = -1;
  }
done:
  for (uint64_t k = 0; keys != NULL && k < nkeys; k++) {
    free(keys[k]);
  }
  free(keys);
  free(key);
  free(val);
  free(val2);
  return rc;
}

int tr_store_serve_input(struct tr_store* s, struct conn* c) {
  for (;;) {
    if (c->left > 0) {
      return 0; /* a client blocked in WAIT sends nothing but CANCEL_WAIT */
    }
    struct rd r = {c->in.p, c->in.len, 0};
    if (c->dialect == D_UNKNOWN) { /* 2.x starts with VALIDATE (0) + magic; 1.x SET is 0 too */
      uint8_t head[5] = {0};
      if (rd_raw(&r, head, 1) == 0 || (head[0] == Q_VALIDATE && rd_raw(&r, head + 1, 4) == 0)) {
        return 0;
      }
      uint32_t magic;
      memcpy(&magic, head + 1, 4);
      c->dialect = head[0] == Q_VALIDATE && magic == TR_STORE_MAGIC ? D_V2 : D_V1;
      r.off = 0;
    }
    int rc = run_query(s, c, &r);
    if (rc < 0 || c->dialect < 0) {
      return -1;
    }
    if (rc == 0) {
      return 0;
    }
    tr_buf_drop(&c->in, r.off);
  }
}
