/* The user's private directory (ras/ras.h): where RAS's client socket and
 * the flight records live by default, so that no other user can read them,
 * plant a link where they will be written, or answer in the job's name. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ras/ras.h"

/* 0 when `path` is a directory (not a link) owned by this user that no
 * one else may enter; else -1 and the reason. */
static int private_enough(const char* path, char* why, size_t why_len) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    snprintf(why, why_len, "%s cannot be read: %s", path, strerror(errno));
    return -1;
  }
  if (S_ISLNK(st.st_mode)) {
    snprintf(why, why_len,
             "%s is a symbolic link, not a directory of this user's: someone may have planted "
             "it; remove it, or set TUTTI_RECORD_DIR",
             path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, why_len, "%s is not a directory", path);
    return -1;
  }
  if (st.st_uid != geteuid()) {
    snprintf(why, why_len,
             "%s belongs to uid %u, not to this user (uid %u): another user may have made "
             "it; remove it, or set TUTTI_RECORD_DIR",
             path, (unsigned)st.st_uid, (unsigned)geteuid());
    return -1;
  }
  if ((st.st_mode & 077) != 0) {
    snprintf(why, why_len, "%s is open to other users (mode %04o): make it 0700 (chmod 700 %s)",
             path, (unsigned)(st.st_mode & 07777), path);
    return -1;
  }
  return 0;
}

/* One candidate: made (when `make`) and checked. */
static int try_dir(int make, const char* path, char* why, size_t why_len) {
  if (make && mkdir(path, 0700) != 0 && errno != EEXIST) {
    snprintf(why, why_len, "cannot make %s: %s", path, strerror(errno));
    return -1;
  }
  return private_enough(path, why, why_len);
}

int tutti_ras_private_dir(int make, char* path, size_t len, char* why, size_t why_len) {
  const char* run = getenv("XDG_RUNTIME_DIR");
  const char* tmp = getenv("TMPDIR");
  struct stat st;
  /* $XDG_RUNTIME_DIR is the user's own by definition (pam_systemd makes it
   * 0700); one inherited from another user (sudo) is passed over, and the
   * folder in the shared temp directory taken, itself checked. */
  if (run != NULL && run[0] == '/' && stat(run, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == geteuid() && snprintf(path, len, "%s/tutti", run) < (int)len) {
    /* A client looks where this user's jobs make it: none made it yet
     * means none answers, not a look in the temp directory's (which
     * another of this user's jobs, started without $XDG_RUNTIME_DIR, may
     * serve). */
    if (!make && lstat(path, &st) != 0 && errno == ENOENT) {
      return 0;
    }
    if (try_dir(make, path, why, why_len) == 0) {
      return 0;
    }
  }
  const int n = snprintf(path, len, "%s/tutti-%u", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp",
                         (unsigned)geteuid());
  if (n < 0 || (size_t)n >= len) {
    snprintf(why, why_len, "the private directory's path is longer than %zu bytes", len - 1);
    return -1;
  }
  return try_dir(make, path, why, why_len);
}
