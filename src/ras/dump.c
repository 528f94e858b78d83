/* The flight record: when a rank's communicator fails (TUTTI_TIMEOUT, a
 * dead peer, or a failure published by another rank), the rank writes its
 * record, the query's JSON with only itself, to a file whose name the
 * error carries; tutti-ras --read merges several ranks' files. The file is
 * made new (never through a link or over another file), readable by the
 * user alone, in TUTTI_RECORD_DIR or the user's private directory. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ras/internal.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

static TUTTI_PARAM_STR(record_dir, "TUTTI_RECORD_DIR", NULL, "a directory",
                       "where a rank writes its flight record when its communicator fails "
                       "(unset: the user's private directory, $XDG_RUNTIME_DIR/tutti or "
                       "$TMPDIR/tutti-UID)");

/* A new file at `path` (O_EXCL: never an existing file or a planted link),
 * else one beside it with a random suffix; its path is left in `path`. */
static int create(char* path, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0 || errno != EEXIST || strlen(path) + 8 > len) {
    return fd;
  }
  /* Something is there already: a name nobody could have guessed. */
  char* dot = strrchr(path, '.');
  if (dot == NULL) {
    return -1;
  }
  memcpy(dot, "-XXXXXX.json", 13);
  return mkostemps(path, 5, O_CLOEXEC);
}

static int write_all(int fd, const char* text, size_t len) {
  for (size_t at = 0; at < len;) {
    const ssize_t k = write(fd, text + at, len - at);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      return -1;
    }
    at += (size_t)k;
  }
  return 0;
}

const char* tutti_ras_dump_locked(struct tutti_ras_comm* rc, const char* why) {
  if (rc->dumped) {
    return rc->dump_path[0] != '\0' ? rc->dump_path : NULL;
  }
  rc->dumped = 1;
  char dir[200], refused[512], path[sizeof rc->dump_path];
  const char* asked = tutti_param_record_dir();
  if (asked != NULL && *asked != '\0') {
    if (snprintf(dir, sizeof dir, "%s", asked) >= (int)sizeof dir) {
      WARN("rank %d: no flight record: TUTTI_RECORD_DIR is longer than %zu bytes", rc->rank,
           sizeof dir - 1);
      return NULL;
    }
  } else if (tutti_ras_private_dir(1, dir, sizeof dir, refused, sizeof refused) != 0) {
    WARN("rank %d: no flight record: %s", rc->rank, refused);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/tutti-ras-%016llx-r%d-p%d.json", dir,
           (unsigned long long)rc->hash, rc->rank, (int)getpid());
  /* Only this communicator's line: the record is this rank's. */
  struct tutti_ras_doc* d = tutti_ras_doc_new_locked(rc);
  struct tutti_ras_buf doc = {0};
  if (d != NULL) {
    tutti_ras_doc_fill_locked(d, rc);
    tutti_ras_doc_write(d, why, &doc);
  }
  tutti_ras_doc_free(d);
  const int fd = doc.text != NULL && !doc.failed ? create(path, sizeof path) : -1;
  if (fd >= 0 && write_all(fd, doc.text, doc.len) == 0 && close(fd) == 0) {
    snprintf(rc->dump_path, sizeof rc->dump_path, "%s", path);
    INFO(TUTTI_RAS, "rank %d: flight record in %s", rc->rank, path);
  } else {
    WARN("rank %d: no flight record in %s: %s", rc->rank, dir,
         doc.text == NULL ? "out of memory" : strerror(errno));
    if (fd >= 0) {
      close(fd);
    }
  }
  tutti_ras_buf_free(&doc);
  return rc->dump_path[0] != '\0' ? rc->dump_path : NULL;
}

const char* tutti_ras_dump(struct tutti_ras_comm* rc, const char* why) {
  if (rc == NULL) {
    return NULL;
  }
  pthread_mutex_lock(&tutti_ras_lock);
  const char* p = tutti_ras_dump_locked(rc, why);
  pthread_mutex_unlock(&tutti_ras_lock);
  return p;
}

void tutti_ras_dump_error(struct tutti_ras_comm* rc) {
  const char* path = tutti_ras_dump(rc, tutti_last_error());
  if (path != NULL && strstr(tutti_last_error(), path) == NULL) {
    char text[1400];
    snprintf(text, sizeof text, "%s; flight record: %s", tutti_last_error(), path);
    tutti_set_last_error(text);
  }
}
