/* See proc.h. */
#include "util/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int tutti_process_gone(int pid) {
  if (pid <= 0) {
    return 0;
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return 1;
  }
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    return 0;
  }
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close_paren = strrchr(buf, ')');
  return close_paren != NULL && close_paren[1] == ' ' &&
         (close_paren[2] == 'Z' || close_paren[2] == 'X');
}
