/* See proc.h. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "util/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>

/* The state letter of `pid` in /proc (R, S, D, T, t, Z, X, ...), or 0. */
static char proc_state(int pid) {
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
  return close_paren != NULL && close_paren[1] == ' ' ? close_paren[2] : 0;
}

int tutti_process_gone(int pid) {
  if (pid <= 0) {
    return 0;
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return 1;
  }
  char st = proc_state(pid);
  return st == 'Z' || st == 'X';
}

int tutti_process_stopped(int pid) {
  char st = pid > 0 ? proc_state(pid) : 0;
  return st == 'T' || st == 't';
}

unsigned long long tutti_host_mem_bytes(void) {
  struct sysinfo si;
  if (sysinfo(&si) != 0) {
    return 0;
  }
  return ((unsigned long long)si.totalram + (unsigned long long)si.totalswap) * si.mem_unit;
}

int tutti_thread_start(pthread_t* t, void* (*fn)(void*), void* arg, const char* name) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int err = pthread_create(t, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err == 0) {
    pthread_setname_np(*t, name);
  }
  return err;
}
