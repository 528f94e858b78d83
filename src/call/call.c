/* How an error tells a call, and two calls that differ (see call.h). */
#include "call/call.h"

#include <stdio.h>

#include "algo/algo.h"
#include "reduce/reduce.h"
#include "util/check.h"

static const char* red_name(int red) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  if (red >= 0 && red < 5) {
    return names[red];
  }
  return red == TUTTI_CALL_RED_PREMUL_HOST  ? "PreMulSum (host scalar)"
         : red == TUTTI_CALL_RED_PREMUL_DEV ? "PreMulSum (device scalar)"
                                            : NULL;
}

void tutti_call_describe(const struct tutti_call* c, char* buf, size_t len) {
  int o = snprintf(buf, len, "%s #%llu of %llu %s", tutti_coll_name((enum tutti_coll)c->coll),
                   (unsigned long long)c->seq, (unsigned long long)c->count,
                   tutti_type_name((ncclDataType_t)c->type));
  const char* red = red_name(c->red);
  if (red != NULL && o > 0 && (size_t)o < len) {
    o += snprintf(buf + o, len - (size_t)o, ", %s", red);
  }
  if (c->root >= 0 && o > 0 && (size_t)o < len) {
    o += snprintf(buf + o, len - (size_t)o, ", root %d", (int)c->root);
  }
  if (o > 0 && (size_t)o < len) {
    o += snprintf(buf + o, len - (size_t)o, ", %s buffers", c->device ? "device" : "host");
  }
  if (c->tag != 0 && o > 0 && (size_t)o < len) {
    snprintf(buf + o, len - (size_t)o, ", profiler tag %llu", (unsigned long long)c->tag);
  }
}

ncclResult_t tutti_call_mismatch(int me, const struct tutti_call* a, int peer,
                                 const struct tutti_call* b) {
  char mine[160], theirs[160];
  tutti_call_describe(a, mine, sizeof mine);
  tutti_call_describe(b, theirs, sizeof theirs);
  return tutti_error(ncclInvalidUsage,
                     "mismatched collective calls: rank %d called %s; rank %d called %s. Every "
                     "rank must make the same collective calls in the same order",
                     me, mine, peer, theirs);
}
