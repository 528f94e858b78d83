/* Forwarding of the ranks' output: whole lines only, each with its
 * "[rank%d]: " prefix, so that lines of different ranks never interleave. */
#define _GNU_SOURCE /* memrchr */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuttirun.h"

/* A line longer than this is forwarded in pieces, each with the prefix: a
 * rank printing megabytes without a newline must not grow tuttirun without
 * bound. */
#define TR_LINE_MAX (64 * 1024)
#define TR_OUT_CAP (2 * TR_LINE_MAX + 64)

static int dest_broken[3]; /* EPIPE seen on fd 1 / 2: stop writing there */

void tr_write_all(int fd, const char* buf, size_t len) {
  while (len > 0 && !(fd >= 0 && fd < 3 && dest_broken[fd])) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        /* Someone made our stdout non-blocking; wait instead of losing lines. */
        usleep(1000);
        continue;
      }
      if (fd >= 0 && fd < 3) {
        dest_broken[fd] = 1;
      }
      return;
    }
    buf += n;
    len -= (size_t)n;
  }
}

void tr_say(const char* fmt, ...) {
  char msg[1024];
  int o = snprintf(msg, sizeof msg, "tuttirun: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + o, sizeof msg - (size_t)o - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(msg);
  msg[len++] = '\n';
  tr_write_all(2, msg, len);
}

/* Forwards `n` bytes of whole lines (the last byte is '\n'), prefixing each. */
static void forward_lines(const struct tr_stream* s, const char* p, size_t n, int prefix) {
  if (s->dest == 0) { /* --redirects, or left out by --local_ranks_filter */
    return;
  }
  if (!prefix) {
    tr_write_all(s->dest, p, n);
    return;
  }
  static char out[TR_OUT_CAP];
  char pre[32];
  size_t plen = (size_t)snprintf(pre, sizeof pre, "[rank%d]: ", s->rank);
  size_t o = 0;
  while (n > 0) {
    const char* nl = memchr(p, '\n', n);
    size_t l = (size_t)(nl - p) + 1;
    if (o + plen + l > sizeof out) {
      tr_write_all(s->dest, out, o);
      o = 0;
    }
    memcpy(out + o, pre, plen);
    memcpy(out + o + plen, p, l);
    o += plen + l;
    p += l;
    n -= l;
  }
  tr_write_all(s->dest, out, o);
}

/* Forwards the incomplete tail as a line of its own (end of file, or a line
 * longer than TR_LINE_MAX). */
static void forward_partial(struct tr_stream* s, int prefix) {
  if (s->len == 0) {
    return;
  }
  s->buf[s->len++] = '\n'; /* cap keeps one byte spare for this */
  forward_lines(s, s->buf, s->len, prefix);
  s->len = 0;
}

void tr_stream_close(struct tr_stream* s, int prefix) {
  if (s->fd >= 0) {
    close(s->fd);
    s->fd = -1;
  }
  forward_partial(s, prefix);
  if (s->log_fd >= 0) {
    close(s->log_fd);
    s->log_fd = -1;
  }
  if (s->tee_fd >= 0) {
    close(s->tee_fd);
    s->tee_fd = -1;
  }
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
}

int tr_stream_pump(struct tr_stream* s, int prefix) {
  /* Bounded, so that one rank printing without pause cannot starve the others. */
  for (int round = 0; round < 16 && s->fd >= 0; round++) {
    if (s->cap - s->len < 4096 + 1 && s->cap < TR_LINE_MAX + 1) {
      size_t cap = s->cap == 0 ? 8192 : s->cap * 2;
      cap = cap > TR_LINE_MAX + 1 ? TR_LINE_MAX + 1 : cap;
      char* nb = realloc(s->buf, cap);
      if (nb == NULL) {
        forward_partial(s, prefix); /* keep going with what we have */
        continue;
      }
      s->buf = nb;
      s->cap = cap;
    }
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - 1 - s->len);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && errno == EAGAIN) {
      return 1;
    }
    if (n <= 0) { /* end of file, or an error that ends the stream the same way */
      tr_stream_close(s, prefix);
      return 0;
    }
    if (s->log_fd >= 0) {
      tr_write_all(s->log_fd, s->buf + s->len, (size_t)n);
    }
    if (s->tee_fd >= 0) {
      tr_write_all(s->tee_fd, s->buf + s->len, (size_t)n);
    }
    s->len += (size_t)n;
    char* last = memrchr(s->buf, '\n', s->len);
    if (last != NULL) {
      size_t whole = (size_t)(last - s->buf) + 1;
      forward_lines(s, s->buf, whole, prefix);
      memmove(s->buf, s->buf + whole, s->len - whole);
      s->len -= whole;
    } else if (s->len >= s->cap - 1 && s->cap >= TR_LINE_MAX + 1) {
      forward_partial(s, prefix);
    }
  }
  return 1;
}
