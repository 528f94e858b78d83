/* The report: human lines on stdout as facts arrive, checks with their
 * fixes, the verdict, and the same facts as one JSON document. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "util/json.h"

struct check_opts check_opts = {NULL, 0, "/dev/shm", 120};

#define MAX_CHECKS 32
#define MAX_DEPTH 8

struct check {
  char name[96];
  enum check_status st;
  char detail[768];
  char fix[512];
};

static struct check checks[MAX_CHECKS];
static int nchecks;

static struct {
  char* buf;
  size_t len, cap;
  int depth;
  char kind[MAX_DEPTH]; /* '{' or '[' */
  int first[MAX_DEPTH];
} js;

static void jraw(const char* s, size_t n) {
  if (js.len + n + 1 > js.cap) {
    size_t cap = js.cap ? js.cap * 2 : 4096;
    while (cap < js.len + n + 1) {
      cap *= 2;
    }
    char* nb = realloc(js.buf, cap);
    if (nb == NULL) {
      return;
    }
    js.buf = nb;
    js.cap = cap;
  }
  memcpy(js.buf + js.len, s, n);
  js.len += n;
  js.buf[js.len] = '\0';
}

static void jput(const char* s) {
  jraw(s, strlen(s));
}

/* Through the library's one JSON escaper (util/json.h). */
static void jstring(const char* s) {
  char chunk[512];
  size_t n = s != NULL ? strlen(s) : 0;
  jput("\"");
  while (n > 0) {
    size_t used = 0;
    jraw(chunk, tutti_json_escape(s, n, &used, chunk, sizeof chunk));
    s += used;
    n -= used;
  }
  jput("\"");
}

static void jopen(char kind) {
  if (js.depth + 1 < MAX_DEPTH) {
    char s[2] = {kind, '\0'};
    jput(s);
    js.depth++;
    js.kind[js.depth] = kind;
    js.first[js.depth] = 1;
  }
}

static void jclose(void) {
  if (js.depth > 0) {
    jput(js.kind[js.depth] == '{' ? "}" : "]");
    js.depth--;
  }
}

static void jsep(void) {
  if (!js.first[js.depth]) {
    jput(", ");
  }
  js.first[js.depth] = 0;
}

static void jkey(const char* key) {
  if (js.len == 0) {
    js.depth = 0;
    js.kind[0] = '{';
    js.first[0] = 1;
    jput("{");
  }
  jsep();
  jstring(key);
  jput(": ");
}

void report_json_begin(const char* section, int array) {
  jkey(section);
  jopen(array ? '[' : '{');
}

void report_json_item(void) {
  if (js.kind[js.depth] == '{' && js.depth > 1 && js.kind[js.depth - 1] == '[') {
    jclose();
  }
  if (js.kind[js.depth] == '[') {
    jsep();
    jopen('{');
  }
}

void report_json_end(void) {
  if (js.kind[js.depth] == '{' && js.depth > 1 && js.kind[js.depth - 1] == '[') {
    jclose();
  }
  jclose();
}

void report_json_str(const char* key, const char* value) {
  jkey(key);
  jstring(value);
}

void report_json_num(const char* key, double value) {
  char s[64];
  if (value == (double)(long long)value) {
    snprintf(s, sizeof s, "%lld", (long long)value); /* byte counts stay exact */
  } else {
    snprintf(s, sizeof s, "%.6g", value);
  }
  jkey(key);
  jput(s);
}

void report_json_int(const char* key, long long value) {
  char s[32];
  snprintf(s, sizeof s, "%lld", value);
  jkey(key);
  jput(s);
}

void report_json_bool(const char* key, int value) {
  jkey(key);
  jput(value ? "true" : "false");
}

void report_line(const char* section, const char* fmt, ...) {
  if (check_opts.quiet) {
    return;
  }
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  printf("%-10s %s\n", section, text);
  fflush(stdout);
}

void report_check(const char* name, enum check_status st, const char* fix, const char* fmt, ...) {
  if (nchecks == MAX_CHECKS) {
    return;
  }
  struct check* c = &checks[nchecks++];
  snprintf(c->name, sizeof c->name, "%s", name);
  c->st = st;
  snprintf(c->fix, sizeof c->fix, "%s", st == CHECK_FAIL && fix != NULL ? fix : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap);
  va_end(ap);
  if (st == CHECK_FAIL || !check_opts.quiet) {
    static const char* tag[] = {"[ ok ]", "[FAIL]", "[skip]"};
    printf("%s %s: %s\n", tag[st], c->name, c->detail);
    if (c->fix[0] != '\0') {
      printf("       fix: %s\n", c->fix);
    }
    fflush(stdout);
  }
}

static void write_json(int passed, int failed, int skipped) {
  if (check_opts.json_path == NULL) {
    return;
  }
  while (js.depth > 0) {
    jclose();
  }
  report_json_begin("checks", 1);
  for (int i = 0; i < nchecks; i++) {
    static const char* word[] = {"pass", "fail", "skip"};
    report_json_item();
    report_json_str("name", checks[i].name);
    report_json_str("status", word[checks[i].st]);
    report_json_str("detail", checks[i].detail);
    if (checks[i].fix[0] != '\0') {
      report_json_str("fix", checks[i].fix);
    }
  }
  report_json_end();
  report_json_str("verdict", failed ? "FAILED" : "OK");
  report_json_int("passed", passed);
  report_json_int("failed", failed);
  report_json_int("skipped", skipped);
  jput("}\n"); /* the document itself */
  FILE* f = fopen(check_opts.json_path, "w");
  if (f == NULL || fwrite(js.buf, 1, js.len, f) != js.len) {
    fprintf(stderr, "tutti-check: cannot write %s\n", check_opts.json_path);
  }
  if (f != NULL) {
    fclose(f);
  }
}

int report_finish(void) {
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < nchecks; i++) {
    passed += checks[i].st == CHECK_PASS;
    failed += checks[i].st == CHECK_FAIL;
    skipped += checks[i].st == CHECK_SKIP;
  }
  char extra[64] = "";
  if (skipped > 0) {
    snprintf(extra, sizeof extra, ", %d skipped", skipped);
  }
  if (failed == 0) {
    printf("tutti-check: OK (%d checks passed%s)\n", passed, extra);
  } else {
    printf("tutti-check: FAILED (%d of %d checks failed%s)\n", failed, passed + failed, extra);
  }
  fflush(stdout);
  write_json(passed, failed, skipped);
  free(js.buf);
  js.buf = NULL;
  return failed == 0 ? 0 : 1;
}

void report_abort(const char* why) {
  report_check(why, CHECK_FAIL,
               "run the check again with NCCL_DEBUG=INFO to see where it stops, and report it",
               "did not finish within %.0f s: a hang", check_opts.run_timeout_s);
  _exit(report_finish() == 0 ? 1 : 1);
}
