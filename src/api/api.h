/* What every file of the api layer shares. */
#ifndef TUTTI_API_API_H
#define TUTTI_API_API_H

#include "nccl.h"

/* Exported: the only symbols the shared library shows. */
#define NCCL_API __attribute__((visibility("default")))

#include "util/param.h" /* tutti_timeout_s */

#endif
