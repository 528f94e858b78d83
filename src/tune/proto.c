/* NCCL_PROTO: the protocols device calls may use, read once for the process
 * (NCCL's names: LL, LL128, Simple; "^" excludes). The device paths ask
 * here; nothing else parses the variable. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tune/tune.h"
#include "util/log.h"
#include "util/param.h"

int tutti_tune_parse_proto(const char* spec) {
  if (spec == NULL || *spec == '\0') {
    return TUTTI_PROTO_ALL;
  }
  const int invert = spec[0] == '^';
  int named = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", spec + invert);
  char* save = NULL;
  for (char* t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    if (strcasecmp(t, "LL") == 0) {
      named |= TUTTI_PROTO_LL;
    } else if (strcasecmp(t, "LL128") == 0) {
      named |= TUTTI_PROTO_LL128;
    } else if (strcasecmp(t, "Simple") == 0) {
      named |= TUTTI_PROTO_SIMPLE;
    } else {
      WARN("NCCL_PROTO names \"%s\", which tutti does not know: use LL, LL128 or Simple", t);
    }
  }
  const int m = invert ? (TUTTI_PROTO_ALL & ~named) : named;
  return m == 0 ? TUTTI_PROTO_ALL : m; /* nothing usable left: as if unset, as NCCL does */
}

static TUTTI_PARAM_STR(proto, "NCCL_PROTO", NULL,
                       "a comma list of LL, LL128, Simple (any case); a leading ^ leaves them out",
                       "the protocols device calls may use, read once (unset: all)");

static int protocols;
static pthread_once_t proto_once = PTHREAD_ONCE_INIT;

static void load_proto(void) {
  protocols = tutti_tune_parse_proto(tutti_param_proto());
}

int tutti_tune_protocols(void) {
  pthread_once(&proto_once, load_proto);
  return protocols;
}
