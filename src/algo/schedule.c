/* Schedule storage: lanes and steps as builders add them; collective names. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "util/check.h"

static const char* const coll_names[TUTTI_COLL_COUNT] = {
    "AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
    "AlltoAll",  "Gather",    "Scatter", "Send",      "Recv",
};

const char* tutti_coll_name(enum tutti_coll coll) {
  return (coll >= 0 && coll < TUTTI_COLL_COUNT) ? coll_names[coll] : "?";
}

ncclResult_t tutti_sched_lane(struct tutti_schedule* s) {
  if (s->nlanes == s->cap_lanes) {
    int cap = s->cap_lanes ? 2 * s->cap_lanes : 8;
    struct tutti_lane* l = realloc(s->lanes, (size_t)cap * sizeof *l);
    if (l == NULL) {
      return tutti_error(ncclSystemError, "out of host memory building a schedule");
    }
    s->lanes = l;
    s->cap_lanes = cap;
  }
  s->lanes[s->nlanes].first_step = s->nsteps;
  s->lanes[s->nlanes].nsteps = 0;
  s->nlanes++;
  return ncclSuccess;
}

ncclResult_t tutti_sched_step(struct tutti_schedule* s, const struct tutti_step* step) {
  if (s->nlanes == 0) {
    NCCLCHECK(tutti_sched_lane(s));
  }
  if (s->nsteps == s->cap_steps) {
    int cap = s->cap_steps ? 2 * s->cap_steps : 32;
    struct tutti_step* st = realloc(s->steps, (size_t)cap * sizeof *st);
    if (st == NULL) {
      return tutti_error(ncclSystemError, "out of host memory building a schedule");
    }
    s->steps = st;
    s->cap_steps = cap;
  }
  s->steps[s->nsteps++] = *step;
  s->lanes[s->nlanes - 1].nsteps++;
  return ncclSuccess;
}

void tutti_schedule_free(struct tutti_schedule* s) {
  free(s->lanes);
  free(s->steps);
  memset(s, 0, sizeof *s);
}
