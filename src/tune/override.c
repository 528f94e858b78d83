/* TUTTI_TUNE, the one string that overrides tune's defaults: items
 * separated by ';', each either rows of the table,
 *   coll[,coll]:lo-hi:@algorithm[#lo-hi:@algorithm]...
 * (sizes in bytes of the call's buffer, count x element size; k, m, g,
 * inf), or one of the sizes that cut a call (knobs.c),
 *   name=size
 * e.g. "allreduce:0-64k:@board#64k-inf:@ring;allgather:0-inf:@pull;ce.piece=8m".
 * Parsed once per process, at its first use: the table's rows (table.c)
 * and the sizes (knobs.c) read what was parsed. */
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tune/internal.h"
#include "util/check.h"
#include "util/param.h"

static TUTTI_PARAM_STR(tune, "TUTTI_TUNE", NULL,
                       "items separated by ';': coll[,coll]:lo-hi:@algorithm[#lo-hi:@algorithm]... "
                       "or name=size (sizes in bytes; k, m, g, inf)",
                       "overrides the tuning table's rows and sizes (docs/tuning.md); its rows and "
                       "sizes are read once, checked at every communicator creation");

/* "64k", "1M", "0", "inf" -> bytes; -1 when malformed. */
static int parse_size(const char* s, size_t* out) {
  if (strcasecmp(s, "inf") == 0) {
    *out = SIZE_MAX;
    return 0;
  }
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *s == '-') {
    return -1;
  }
  const char u = (char)tolower((unsigned char)*end);
  const int shift = u == 'k' ? 10 : u == 'm' ? 20 : u == 'g' ? 30 : 0;
  end += shift != 0;
  if (*end == 'b' || *end == 'B') {
    end++;
  }
  if (*end != '\0' || (shift > 0 && v > (SIZE_MAX >> shift))) {
    return -1;
  }
  *out = (size_t)v << shift;
  return 0;
}

/* "name=size" into knobs[]. */
static int parse_knob(char* item, int64_t* knobs, char* err, size_t errlen) {
  char* eq = strchr(item, '=');
  *eq = '\0';
  const int k = tutti_tune_knob_find(item);
  size_t v = 0;
  if (k < 0) {
    snprintf(err, errlen, "\"%s\" is not a size tune knows (see docs/tuning.md)", item);
    return -1;
  }
  if (parse_size(eq + 1, &v) != 0 || v > INT64_MAX ||
      !tutti_tune_knob_fits((enum tutti_knob)k, (int64_t)v)) {
    snprintf(err, errlen, "%s=%s is not a size it takes", item, eq + 1);
    return -1;
  }
  if (knobs != NULL) {
    knobs[k] = (int64_t)v;
  }
  return 0;
}

/* "coll[,coll]:lo-hi:@algo[#...]" appended to rules[*n]. */
static int parse_rows(char* item, struct tutti_tune_rule* rules, int max, int* n, char* err,
                      size_t errlen) {
  char* colon = strchr(item, ':');
  if (colon == NULL) {
    snprintf(err, errlen, "\"%s\" is neither collective:range:@algorithm nor name=size", item);
    return -1;
  }
  *colon = '\0';
  unsigned colls = 0;
  char* s2 = NULL;
  for (char* c = strtok_r(item, ",", &s2); c != NULL; c = strtok_r(NULL, ",", &s2)) {
    int found = strcasecmp(c, "all") == 0;
    colls |= found ? ~0u : 0;
    for (int k = 0; k < TUTTI_COLL_COUNT && !found; k++) {
      if (strcasecmp(c, tutti_coll_name((enum tutti_coll)k)) == 0) {
        colls |= 1u << k;
        found = 1;
      }
    }
    if (!found) {
      snprintf(err, errlen, "\"%s\" is not a collective (allreduce, allgather, ... or all)", c);
      return -1;
    }
  }
  char* s3 = NULL;
  for (char* r = strtok_r(colon + 1, "#", &s3); r != NULL; r = strtok_r(NULL, "#", &s3)) {
    char* at = strstr(r, ":@");
    char* dash = strchr(r, '-');
    if (at == NULL || dash == NULL || dash > at) {
      snprintf(err, errlen, "\"%s\" is not lo-hi:@algorithm", r);
      return -1;
    }
    *at = '\0';
    *dash = '\0';
    struct tutti_tune_rule x = {colls, 0, 0, TUTTI_ALGO_COUNT};
    if (parse_size(r, &x.lo) != 0 || parse_size(dash + 1, &x.hi) != 0 || x.lo > x.hi) {
      snprintf(err, errlen, "\"%s-%s\" is not a size range (e.g. 0-64k, 1m-inf)", r, dash + 1);
      return -1;
    }
    for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
      if (strcasecmp(at + 2, tutti_algo_get((enum tutti_algo_id)id)->name) == 0) {
        x.algo = (enum tutti_algo_id)id;
      }
    }
    if (x.algo == TUTTI_ALGO_COUNT) {
      snprintf(err, errlen,
               "\"%s\" is not an algorithm (ring, direct, hier, tree, pull, board, mapped, ce)",
               at + 2);
      return -1;
    }
    if (rules != NULL && *n == max) {
      snprintf(err, errlen, "more than %d ranges", max);
      return -1;
    }
    if (rules != NULL) {
      rules[*n] = x;
    }
    (*n)++;
  }
  return 0;
}

int tutti_tune_parse_override(const char* spec, struct tutti_tune_rule* rules, int max,
                              int64_t knobs[TUTTI_KNOB_COUNT], char* err, size_t errlen) {
  int n = 0;
  err[0] = '\0';
  for (int k = 0; knobs != NULL && k < TUTTI_KNOB_COUNT; k++) {
    knobs[k] = -1;
  }
  if (spec == NULL || *spec == '\0') {
    return 0;
  }
  char buf[1024];
  if (strlen(spec) >= sizeof buf) {
    snprintf(err, errlen, "longer than %zu characters", sizeof buf - 1);
    return -1;
  }
  snprintf(buf, sizeof buf, "%s", spec);
  char* s1 = NULL;
  for (char* item = strtok_r(buf, ";", &s1); item != NULL; item = strtok_r(NULL, ";", &s1)) {
    const char* eq = strchr(item, '=');
    const char* colon = strchr(item, ':');
    const int rc = eq != NULL && (colon == NULL || eq < colon)
                       ? parse_knob(item, knobs, err, errlen)
                       : parse_rows(item, rules, max, &n, err, errlen);
    if (rc != 0) {
      return -1;
    }
  }
  return n;
}

/* The value parsed at the first use in this process (its rows, its sizes,
 * its verdict): every later use reads these, as for NCCL's cached
 * parameters. */
static struct tutti_tune_override parsed;
static int parsed_set;         /* the variable was set */
static int parsed_kept;        /* and its text is in parsed_spec */
static char parsed_spec[1024]; /* longer values fail to parse anyway */
static char parsed_err[256];
static int64_t values[TUTTI_KNOB_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  const char* spec = tutti_param_tune();
  parsed_set = spec != NULL;
  parsed_kept = spec != NULL && strlen(spec) < sizeof parsed_spec;
  if (parsed_kept) {
    snprintf(parsed_spec, sizeof parsed_spec, "%s", spec);
  }
  const int n = tutti_tune_parse_override(spec, parsed.rules, TUTTI_TUNE_MAX_RULES, parsed.knobs,
                                          parsed_err, sizeof parsed_err);
  /* A malformed value is refused at init (tutti_tune_check): then nothing
   * of it applies. */
  parsed.ok = n >= 0;
  parsed.nrules = n > 0 ? n : 0;
  for (int k = 0; k < TUTTI_KNOB_COUNT; k++) {
    parsed.knobs[k] = parsed.ok ? parsed.knobs[k] : -1;
    values[k] =
        parsed.knobs[k] >= 0 ? parsed.knobs[k] : tutti_tune_knob_default((enum tutti_knob)k);
  }
}

const struct tutti_tune_override* tutti_tune_override(void) {
  pthread_once(&once, load);
  return &parsed;
}

int64_t tutti_tune_knob(enum tutti_knob k) {
  pthread_once(&once, load);
  return values[k];
}

ncclResult_t tutti_tune_check(void) {
  pthread_once(&once, load);
  const char* spec = tutti_param_tune();
  /* The value parsed once; one set since (the process changed its
   * environment) is checked as every variable is at communicator creation,
   * though the first one stays in use. */
  const int same = spec == NULL ? !parsed_set : parsed_kept && strcmp(spec, parsed_spec) == 0;
  int ok = parsed.ok;
  char err[sizeof parsed_err];
  snprintf(err, sizeof err, "%s", parsed_err);
  if (!same) {
    struct tutti_tune_rule rules[TUTTI_TUNE_MAX_RULES];
    ok = tutti_tune_parse_override(spec, rules, TUTTI_TUNE_MAX_RULES, NULL, err, sizeof err) >= 0;
  }
  if (!ok) {
    return tutti_error(ncclInvalidArgument,
                       "TUTTI_TUNE=\"%s\": %s. The form is "
                       "\"allreduce:0-64k:@board#64k-inf:@ring;allgather:0-inf:@pull;ce.piece=8m\"",
                       spec, err);
  }
  return ncclSuccess;
}
