/* tutti-ras: asks a running job where every rank is, or reads the flight
 * records its ranks wrote (docs/ras.md). */
#ifndef TUTTI_RAS_TOOL_RAS_H
#define TUTTI_RAS_TOOL_RAS_H

#include <stdio.h>

#include "json.h"

/* Appends the verdicts on one communicator of a document to array `out`. */
void ras_verdicts(const struct jv* comm, struct jv* out);
/* One line on a rank. */
void ras_print_rank(FILE* f, const struct jv* rank);

#endif
