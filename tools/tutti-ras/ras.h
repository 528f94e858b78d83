/* tutti-ras: asks a running job where every rank is, or reads the flight
 * records its ranks wrote (docs/ras.md). */
#ifndef TUTTI_RAS_TOOL_RAS_H
#define TUTTI_RAS_TOOL_RAS_H

#include <stddef.h>
#include <stdio.h>

#include "json.h"

/* ask.c: the job's answer at `addr` (NULL: the user's Unix socket), over
 * ncclSetEncryption's records when key_file is given; `where` gets the
 * address asked. NULL, with the reason printed, when none came. */
char* ras_ask(const char* addr, const char* key_file, char* where, size_t where_len);
/* Appends the verdicts on one communicator of a document to array `out`. */
void ras_verdicts(const struct jv* comm, struct jv* out);
/* One line on a rank. */
void ras_print_rank(FILE* f, const struct jv* rank);

#endif
