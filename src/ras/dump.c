/* The flight record: when a rank's communicator fails (TUTTI_TIMEOUT, a
 * dead peer, or a failure published by another rank), the rank writes its
 * record, the query's JSON with only itself, to a file whose name the
 * error carries; tutti-ras --read merges several ranks' files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ras/internal.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

static TUTTI_PARAM_STR(ras_dir, "TUTTI_RAS_DIR", NULL, "a directory",
                       "where a rank writes its flight record when its communicator fails "
                       "(unset: $TMPDIR, else /tmp)");

const char* tutti_ras_dump_locked(struct tutti_ras_comm* rc, const char* why) {
  if (rc->dumped) {
    return rc->dump_path[0] != '\0' ? rc->dump_path : NULL;
  }
  rc->dumped = 1;
  const char* dir = tutti_param_ras_dir();
  if (dir == NULL || *dir == '\0') {
    dir = getenv("TMPDIR");
  }
  if (dir == NULL || *dir == '\0') {
    dir = "/tmp";
  }
  char path[sizeof rc->dump_path];
  snprintf(path, sizeof path, "%s/tutti-ras-%016llx-r%d-p%d.json", dir,
           (unsigned long long)rc->hash, rc->rank, (int)getpid());
  /* Only this communicator's line: the record is this rank's. */
  struct tutti_ras_comm* next = rc->next;
  struct tutti_ras_comm* head = tutti_ras_comms;
  rc->next = NULL;
  tutti_ras_comms = rc;
  struct tutti_ras_buf lines = {0}, doc = {0};
  tutti_ras_local_lines(&lines);
  tutti_ras_document(lines.text, why, &doc);
  tutti_ras_comms = head;
  rc->next = next;
  FILE* f = doc.text != NULL ? fopen(path, "w") : NULL;
  if (f != NULL && fwrite(doc.text, 1, doc.len, f) == doc.len && fclose(f) == 0) {
    snprintf(rc->dump_path, sizeof rc->dump_path, "%s", path);
    INFO(TUTTI_RAS, "rank %d: flight record in %s", rc->rank, path);
  } else if (f != NULL) {
    fclose(f);
  }
  free(lines.text);
  free(doc.text);
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
