/* The one-sided landing's protocol (src/device/rma/land.h) on the CPU: the
 * producer (land.c) against a reader thread that follows the wait kernel's
 * rules (land.cuh: the tail's acquire, the record at the cursor, its data
 * copied, a signal counted, a jump followed, the head released). Records
 * of every size in random order, more chunks than the first allocation
 * holds, chunks reused, a reader that pauses (the producer waits within
 * its limit, then goes on), one that never comes back (the put fails at
 * the timeout naming rma.landing), an abort, and records dropped for a
 * window being deregistered. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/rma/land.h"
#include "harness.h"
#include "nccl.h"

static int allocs, releases;

static int fake_alloc(uint64_t bytes, char** host, char** dev) {
  *host = aligned_alloc(64, (size_t)bytes);
  *dev = *host;
  __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
  return *host == NULL ? -1 : 0;
}

static void fake_release(char* host) {
  free(host);
  __atomic_add_fetch(&releases, 1, __ATOMIC_RELAXED);
}

struct reader {
  struct td_land* l;
  struct td_land_cursor cur;
  uint64_t landed[64];
  uint64_t applied; /* records */
  int stop;         /* 1: return once nothing is left (atomics: the main thread sets them) */
  int pause;
};

/* One record at the cursor applied, as the wait kernel does: 1 when there was one. */
static int read_one(struct reader* rd) {
  struct td_land* l = rd->l;
  if (__atomic_load_n(&l->ctl->tail, __ATOMIC_ACQUIRE) <= rd->cur.pos) {
    return 0;
  }
  const struct td_land_rec* r = (const struct td_land_rec*)(uintptr_t)rd->cur.ptr;
  const uint32_t kind = __atomic_load_n(&r->kind, __ATOMIC_RELAXED);
  if (kind == TD_LAND_DATA) {
    memcpy((char*)(uintptr_t)r->dst, (const char*)r + TD_LAND_REC + r->lead, r->bytes);
  } else if (kind == TD_LAND_SIGNAL) {
    rd->landed[r->index]++;
  }
  if (kind == TD_LAND_JUMP) {
    rd->cur.pos = r->next_pos;
    rd->cur.ptr = r->next;
  } else {
    rd->cur.pos += r->size;
    rd->cur.ptr += r->size;
  }
  rd->applied++;
  __atomic_store_n(&l->ctl->head, rd->cur.pos, __ATOMIC_RELEASE);
  return 1;
}

static void* reader_main(void* arg) {
  struct reader* rd = arg;
  for (;;) {
    if (__atomic_load_n(&rd->pause, __ATOMIC_ACQUIRE)) {
      usleep(1000);
      continue;
    }
    if (!read_one(rd)) {
      if (__atomic_load_n(&rd->stop, __ATOMIC_ACQUIRE)) {
        return NULL;
      }
      usleep(50);
    }
  }
}

static void land_make(struct td_land* l, struct td_land_ctl* ctl, uint64_t limit, const int* abort,
                      double timeout_s) {
  memset(l, 0, sizeof *l);
  memset(ctl, 0, sizeof *ctl);
  l->alloc = fake_alloc;
  l->release = fake_release;
  l->abort_flag = abort;
  l->timeout_s = timeout_s;
  l->rank = 3;
  l->limit = limit;
  l->ctl = ctl;
  CHECK(td_land_start(l, (512u << 10) - 64) == ncclSuccess, "start");
}

/* Random records into a 64 MB destination, with signals; the reader
 * checks every byte and count at the end. */
static void random_stream(void) {
  const size_t span = 64u << 20;
  unsigned char* dst = calloc(span, 1);
  unsigned char* want = calloc(span, 1);
  unsigned char* src = malloc(600u << 10);
  uint64_t want_sig[64] = {0};
  int abort_flag = 0;
  struct td_land l;
  struct td_land_ctl ctl;
  land_make(&l, &ctl, 64u << 20, &abort_flag, 20);
  const int made = l.nchunks;
  struct reader rd = {&l, {0, (uint64_t)(uintptr_t)l.chunks[0].dev}, {0}, 0, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, reader_main, &rd);
  uint64_t s = 12345;
  int ok = 1;
  long refused = 0;
  for (int i = 0; i < 3000 && ok; i++) {
    const uint64_t r = test_xorshift(&s);
    /* Data alone, data with its signal, or a signal alone. */
    const int kind = (int)(r % 5);
    const int64_t k = kind >= 3 ? (int64_t)((r >> 8) % 64) : -1;
    size_t bytes = 0, off = 0;
    if (kind != 4) {
      /* Mostly small, some of a service slot's size (512 KB less a header). */
      bytes = r % 7 == 0 ? (512u << 10) - 64 : (size_t)((r >> 12) % 20000) + 1;
      off = (size_t)((r >> 32) % (span - bytes));
      for (size_t b = 0; b < bytes; b++) {
        src[b] = (unsigned char)(i * 131 + b * 7);
      }
    }
    int got;
    while ((got = td_land_offer(&l, 1, (char*)dst + off, src, bytes, k)) == 0) {
      refused++;
      __atomic_store_n(&rd.pause, 0, __ATOMIC_RELEASE); /* full: the reader comes back */
      usleep(100);                                      /* as the service thread offers it again */
    }
    ok = got == 1;
    memcpy(want + off, src, bytes);
    want_sig[k >= 0 ? k : 0] += k >= 0;
    /* Now and then the reader stops until the landing is full and refuses. */
    if (i % 700 == 350) {
      __atomic_store_n(&rd.pause, 1, __ATOMIC_RELEASE);
    }
  }
  CHECK(refused > 0, "a full landing refused records (%ld times)", refused);
  CHECK(ok, "every record landed: %s", ncclGetLastError(NULL));
  /* A pause near the end may never have met a full landing: the reader
   * comes back to read what is left before it stops. */
  __atomic_store_n(&rd.pause, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&rd.stop, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  CHECK(memcmp(dst, want, span) == 0, "the destination holds what was put, in order");
  CHECK(memcmp(rd.landed, want_sig, sizeof want_sig) == 0, "every signal counted once");
  CHECK(l.nchunks == 16 && l.held == (64u << 20), "its chunks made at the start: %d, %llu bytes",
        l.nchunks, (unsigned long long)l.held);
  CHECK(l.tail > 2 * l.held, "each chunk reused many times (%llu bytes through %llu)",
        (unsigned long long)l.tail, (unsigned long long)l.held);
  CHECK(rd.cur.pos == l.tail && ctl.head == l.tail, "the reader read everything");
  const int before = releases;
  td_land_stop(&l);
  CHECK(releases - before == made, "every chunk released (%d of %d)", releases - before, made);
  free(dst);
  free(want);
  free(src);
}

/* Nobody reads: offers fill the landing, then are refused with nothing
 * written; after TUTTI_TIMEOUT of refusals one fails, naming rma.landing;
 * an abort fails the next at once. A data piece and its signal never land
 * apart. */
static void full_landing(void) {
  int abort_flag = 0;
  struct td_land l;
  struct td_land_ctl ctl;
  land_make(&l, &ctl, 8u << 20, &abort_flag, 1);
  static char buf[256u << 10];
  static char dst[256u << 10];
  int got = 1, n = 0;
  uint64_t tail = 0;
  for (; n < 100 && got == 1; n++) {
    tail = l.tail;
    got = td_land_offer(&l, 2, dst, buf, sizeof buf, n);
  }
  CHECK(got == 0 && n > 20 && n < 40, "a full landing refuses (%d after %d offers)", got, n);
  CHECK(l.tail == tail && ctl.tail == tail, "nothing written when refused");
  got = 0;
  for (int i = 0; i < 400 && got == 0; i++) {
    usleep(5000);
    got = td_land_offer(&l, 2, dst, buf, sizeof buf, 1);
  }
  CHECK(got == -1 && strstr(ncclGetLastError(NULL), "rma.landing") != NULL &&
            strstr(ncclGetLastError(NULL), "rank 2") != NULL,
        "after the timeout a refusal fails, naming the knob and the origin: %s",
        ncclGetLastError(NULL));
  abort_flag = 1;
  l.full_since = 0;
  CHECK(td_land_offer(&l, 2, dst, buf, sizeof buf, 1) == -1 &&
            strstr(ncclGetLastError(NULL), "stopped") != NULL,
        "an abort fails it at once: %s", ncclGetLastError(NULL));
  /* Every data record written so far is followed by its signal. */
  struct reader rd = {&l, {0, (uint64_t)(uintptr_t)l.chunks[0].dev}, {0}, 0, 1, 0};
  int pairs = 1;
  while (read_one(&rd)) {
  }
  for (int k = 0; k < 64 && k < n - 1; k++) {
    pairs &= rd.landed[k] == 1;
  }
  CHECK(pairs, "each offered piece's signal landed with it");
  td_land_stop(&l);
}

/* Records for a window being deregistered are dropped; the others stay. */
static void dropped(void) {
  int abort_flag = 0;
  struct td_land l;
  struct td_land_ctl ctl;
  land_make(&l, &ctl, 64u << 20, &abort_flag, 5);
  static char win_a[4096], win_b[4096], src[4096];
  memset(src, 7, sizeof src);
  for (int i = 0; i < 5; i++) {
    td_land_offer(&l, 0, win_a + i * 100, src, 50, -1);
    td_land_offer(&l, 0, win_b + i * 100, src, 50, -1);
  }
  CHECK(td_land_drop(&l, win_a, win_a + sizeof win_a) == 5, "the five records for window a");
  struct reader rd = {&l, {0, (uint64_t)(uintptr_t)l.chunks[0].dev}, {0}, 0, 1, 0};
  reader_main(&rd);
  CHECK(win_a[0] == 0 && win_a[400] == 0, "nothing written into the dropped window");
  CHECK(win_b[0] == 7 && win_b[449] == 7, "the other window's data applied");
  CHECK(rd.applied == 10, "every record stepped over or applied (%llu)",
        (unsigned long long)rd.applied);
  td_land_stop(&l);
}

int main(void) {
  random_stream();
  full_landing();
  dropped();
  return test_summary("land");
}
