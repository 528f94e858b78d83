/* The values of tuttirun's flags: numbers, seconds, host:port, torchrun's
 * 0-3 stream maps, worker counts (gpu, cpu, auto) and Python targets. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opts.h"
#include "tuttirun.h"

void tr_usage_error(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tuttirun: %s\n\n%s", msg, tr_usage_text);
  exit(2);
}

int tr_parse_int(const char* flag, const char* s, int lo, int hi) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
    tr_usage_error("%s wants a whole number from %d to %d, not \"%s\"", flag, lo, hi, s);
  }
  return (int)v;
}

double tr_parse_seconds(const char* flag, const char* s, double lo, double hi) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
    tr_usage_error("%s wants seconds from %g to %g, not \"%s\"", flag, lo, hi, s);
  }
  return v;
}

void tr_copy_arg(char* dst, size_t cap, const char* flag, const char* v) {
  if (strlen(v) >= cap) {
    tr_usage_error("%s \"%.40s...\" is too long", flag, v);
  }
  snprintf(dst, cap, "%s", v);
}

/* host[:port], host may be "[v6]"; brackets belong to host:port text only. */
void tr_parse_endpoint(const char* flag, const char* s, char* host, size_t cap, int* port) {
  const char* colon = NULL;
  const char* h = s;
  size_t hl;
  if (s[0] == '[') {
    const char* close = strchr(s, ']');
    if (close == NULL) {
      tr_usage_error("%s \"%s\": no closing ]", flag, s);
    }
    h = s + 1;
    hl = (size_t)(close - h);
    colon = close[1] == ':' ? close + 1 : NULL;
  } else {
    colon = strchr(s, ':');
    colon = colon != NULL && strchr(colon + 1, ':') == NULL ? colon : NULL; /* bare IPv6 */
    hl = colon != NULL ? (size_t)(colon - s) : strlen(s);
  }
  if (hl == 0 || hl >= cap) {
    tr_usage_error("%s \"%s\": the host is empty or too long", flag, s);
  }
  snprintf(host, cap, "%.*s", (int)hl, h);
  if (colon != NULL) {
    *port = tr_parse_int(flag, colon + 1, 0, 65535);
  }
}

/* torchrun's Std.from_str: "0".."3" for every local rank, or "i:v,j:w". */
void tr_parse_std(const char* flag, const char* s, unsigned char* per_rank, int n) {
  if (strlen(s) == 1 && s[0] >= '0' && s[0] <= '3') {
    memset(per_rank, s[0] - '0', (size_t)n);
    return;
  }
  memset(per_rank, 0, (size_t)n);
  char buf[1024];
  tr_copy_arg(buf, sizeof buf, flag, s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    char* colon = strchr(tok, ':');
    if (colon == NULL || strlen(colon + 1) != 1 || colon[1] < '0' || colon[1] > '3') {
      tr_usage_error("%s \"%s\": want 0-3, or local_rank:0-3 pairs like 0:1,1:2", flag, s);
    }
    *colon = '\0';
    int r = tr_parse_int(flag, tok, 0, TR_MAX_LOCAL_RANKS);
    if (r < n) {
      per_rank[r] = (unsigned char)(colon[1] - '0');
    }
  }
}

void tr_note(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tr_say("note: %s", msg);
}

/* torchrun's determine_local_world_size. */
int tr_local_world_size(const char* v) {
  if (strcmp(v, "gpu") == 0) {
    int n = tr_gpu_count();
    if (n == 0) {
      tr_usage_error("--nproc_per_node gpu: no GPU is visible (CUDA is not available)");
    }
    return n;
  }
  if (strcmp(v, "auto") == 0) {
    int n = tr_gpu_count();
    return n > 0 ? n : tr_cpu_count();
  }
  if (strcmp(v, "cpu") == 0) {
    return tr_cpu_count();
  }
  if (!isdigit((unsigned char)v[0])) {
    tr_usage_error("--nproc_per_node %s: want a number, gpu, cpu or auto", v);
  }
  return tr_parse_int("--nproc_per_node", v, 1, TR_MAX_LOCAL_RANKS);
}

const char* tr_find_python(void) {
  const char* p = getenv("PYTHON_EXEC"); /* torchrun's override of sys.executable */
  if (p != NULL && *p != '\0') {
    return p;
  }
  const char* path = getenv("PATH");
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path != NULL ? path : "/usr/bin:/bin");
  for (char *save = NULL, *d = strtok_r(buf, ":", &save); d != NULL;
       d = strtok_r(NULL, ":", &save)) {
    char exe[4200];
    snprintf(exe, sizeof exe, "%s/python3", d);
    if (access(exe, X_OK) == 0) {
      return "python3";
    }
  }
  return "python";
}

/* A target tuttirun hands to Python: a module, a .py file, or a file that
 * exists but cannot be executed itself. */
int tr_is_python_target(const char* t) {
  size_t l = strlen(t);
  const char* dot = strrchr(t, '.');
  if (dot != NULL &&
      (strcmp(dot, ".py") == 0 || strcmp(dot, ".pyc") == 0 || strcmp(dot, ".pyz") == 0) && l > 3) {
    return 1;
  }
  struct stat st;
  return strchr(t, '/') != NULL && stat(t, &st) == 0 && S_ISREG(st.st_mode) && access(t, X_OK) != 0;
}
