/* What every file of the api layer shares. */
#ifndef TUTTI_API_API_H
#define TUTTI_API_API_H

#include "nccl.h"

/* Exported: the only symbols the shared library shows. */
#define NCCL_API __attribute__((visibility("default")))

/* Seconds any blocking wait may last (TUTTI_TIMEOUT, default 300). */
double tutti_timeout_s(void);

#endif
