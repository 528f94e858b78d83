/* Command-line flags of tutti-ddp. */
#ifndef DDP_OPTIONS_H
#define DDP_OPTIONS_H

#include <stdint.h>

#include "model.h"

struct ddp_options {
  int nlayers;                  /* weight layers */
  int size[DDP_MAX_LAYERS + 1]; /* --layers in,hidden...,classes */
  int train_size, val_size;
  int epochs;
  int batch; /* per rank */
  float lr, momentum;
  uint64_t seed;
  double bucket_mb;
  int overlap;
  int sync; /* all-reduce gradients (off only to show what the tests catch) */
  enum ddp_grad_mode grad_mode;
  int drop_last;
  const char* checkpoint;
  long checkpoint_every;
  const char* resume;
  long stop_after_step;
  double progress_s;
};

/* Fills o from argv. Returns 0 to run, 1 after printing the usage on stdout
 * (--help), 2 after printing an error and the usage on stderr. */
int ddp_options_parse(struct ddp_options* o, int argc, char** argv);

#endif
