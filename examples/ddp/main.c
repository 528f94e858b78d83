/* tutti-ddp: data-parallel training of a small MLP on tutti.
 *
 * Every rank holds the whole model. Rank 0's initial parameters are
 * broadcast (or every rank loads the same checkpoint); each step every rank
 * runs forward and backward on its shard of the global batch, the gradient
 * buckets are summed across ranks while backward continues, and every rank
 * applies the same SGD update, so the replicas stay identical (checked after
 * every epoch). Run it as `tuttirun -n N tutti-ddp ...`, or alone. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buckets.h"
#include "checkpoint.h"
#include "data.h"
#include "model.h"
#include "nccl.h"
#include "options.h"
#include "sampler.h"

struct run {
  struct ddp_options o;
  int rank, nranks, tty;
  ncclComm_t comm;
  struct ddp_dataset train, val;
  struct ddp_sampler sampler;
  struct ddp_mlp m;
  float* velocity;
  int32_t* labels;
  struct ddp_buckets bk;
  int have_buckets;
  struct ddp_ckpt st; /* position and the epoch's running sums (this rank's share) */
  /* This process's part of the current epoch, for rates and times. */
  long samples;
  int steps;
  double t_start, fwd_s, bwd_s, opt_s, t_progress;
  struct ddp_overlap ov;
  /* Over the timed epochs (all but the first this process ran, if several). */
  double sum_samples, sum_s, sum_comm_s, sum_hidden_s, sum_exposed_s, sum_steps;
  int sum_epochs, epochs_run;
};

static int fail(const struct run* r, const char* what, const char* why) {
  fprintf(stderr, "tutti-ddp: rank %d: %s: %s\n", r->rank, what, why);
  return 1;
}

static int nccl_fail(const struct run* r, const char* what, ncclResult_t res) {
  char why[1200];
  snprintf(why, sizeof why, "%s (%s)", ncclGetErrorString(res), ncclGetLastError(r->comm));
  return fail(r, what, why);
}

static int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

/* Sums n doubles over all ranks, in place. */
static int allreduce_doubles(struct run* r, double* v, int n) {
  ncclResult_t res = ncclAllReduce(v, v, (size_t)n, ncclFloat64, ncclSum, r->comm, NULL);
  return res == ncclSuccess ? 0 : nccl_fail(r, "ncclAllReduce of the run's sums", res);
}

/* Every replica must hold the same parameters and momentum: the largest hash
 * and the largest complement give the smallest, in one all-reduce. */
static int check_replicas(struct run* r, uint64_t* hash_out) {
  uint64_t h = ddp_fnv(DDP_FNV_INIT, r->m.params, sizeof(float) * r->m.nparams);
  h = ddp_fnv(h, r->velocity, sizeof(float) * r->m.nparams);
  uint64_t v[2] = {h, ~h};
  ncclResult_t res = ncclAllReduce(v, v, 2, ncclUint64, ncclMax, r->comm, NULL);
  if (res != ncclSuccess) {
    return nccl_fail(r, "ncclAllReduce of the parameter hashes", res);
  }
  *hash_out = h;
  if (v[0] == h && ~v[1] == h) {
    return 0;
  }
  if (!r->o.sync) { /* expected: every rank trains alone */
    if (r->rank == 0) {
      printf("replicas differ (--no-sync)\n");
    }
    return 0;
  }
  return fail(r, "replicas differ", "the parameters are not the same on every rank");
}

/* Rank 0 writes the checkpoint; every rank takes part in summing the epoch's
 * running sums into it and then learns whether the write succeeded, so that
 * all ranks go on (or stop) together. */
static int save_checkpoint(struct run* r) {
  struct ddp_ckpt h = r->st;
  double sums[3] = {h.loss_sum, (double)h.correct, (double)h.seen};
  if (allreduce_doubles(r, sums, 3) != 0) {
    return 1;
  }
  h.loss_sum = sums[0];
  h.correct = (int64_t)sums[1];
  h.seen = (int64_t)sums[2];
  char why[4200];
  double failed = 0;
  if (r->rank == 0 &&
      ddp_ckpt_save(r->o.checkpoint, &h, r->m.params, r->velocity, why, sizeof why) != 0) {
    fail(r, "checkpoint", why);
    failed = 1;
  }
  if (allreduce_doubles(r, &failed, 1) != 0) {
    return 1;
  }
  if (failed != 0 && r->rank != 0) {
    return fail(r, "checkpoint", "rank 0 could not write it");
  }
  return failed != 0;
}

static int resume(struct run* r) {
  struct ddp_ckpt h;
  float *p, *v;
  char why[4200];
  if (ddp_ckpt_load(r->o.resume, &h, &p, &v, why, sizeof why) != 0) {
    return fail(r, "resume", why);
  }
  const char* what = NULL;
  if (h.nlayers != r->st.nlayers || h.nparams != r->m.nparams ||
      memcmp(h.size, r->st.size, sizeof h.size) != 0) {
    what = "the checkpoint's layers differ from --layers";
  } else if (h.seed != r->st.seed || h.train_size != r->st.train_size) {
    what = "the checkpoint's --seed or --train-size differ";
  } else if (h.global_batch != r->st.global_batch || h.drop_last != r->st.drop_last) {
    what = "the checkpoint's global batch (ranks x --batch) or --drop-last differ";
  } else if (h.grad_mode != r->st.grad_mode) {
    what = "the checkpoint was written with the other --grad mode";
  }
  if (what == NULL) {
    memcpy(r->m.params, p, sizeof(float) * h.nparams);
    memcpy(r->velocity, v, sizeof(float) * h.nparams);
    r->st = h;
    if (r->rank != 0) { /* the epoch's sums so far count once, on rank 0 */
      r->st.loss_sum = 0;
      r->st.correct = r->st.seen = 0;
    }
  }
  free(p);
  free(v);
  return what == NULL ? 0 : fail(r, "resume", what);
}

static void progress(struct run* r, int epoch, int step, int steps) {
  double now = ddp_now();
  int last = step == steps;
  if (r->rank != 0 ||
      (r->tty ? now - r->t_progress < 0.1 && !last
              : r->o.progress_s <= 0 || now - r->t_progress < r->o.progress_s || last)) {
    return;
  }
  r->t_progress = now;
  double rate = (double)r->samples / (now - r->t_start);
  double loss = r->st.seen > 0 ? r->st.loss_sum / (double)r->st.seen : 0;
  printf("%sepoch %d/%d  step %d/%d  loss %.4f (rank 0)  %.0f samples/s%s", r->tty ? "\r" : "",
         epoch + 1, r->o.epochs, step, steps, loss, rate, r->tty ? "  " : "\n");
  fflush(stdout);
}

static void on_grads_ready(void* bk, size_t end) {
  ddp_buckets_ready(bk, end);
}

static int train_step(struct run* r, int step) {
  const int* idx;
  int global;
  int n = ddp_sampler_batch(&r->sampler, step, &idx, &global);
  int dim = r->train.dim;
  for (int k = 0; k < n; k++) {
    memcpy(r->m.act[0] + (size_t)k * dim, r->train.x + (size_t)idx[k] * dim,
           sizeof(float) * (size_t)dim);
    r->labels[k] = r->train.y[idx[k]];
  }
  double t0 = ddp_now();
  long correct = 0;
  ddp_mlp_forward(&r->m, n);
  ddp_mlp_loss(&r->m, n, r->labels, &r->st.loss_sum, &correct);
  double t1 = ddp_now();
  if (r->o.sync) {
    ddp_buckets_begin(&r->bk);
    ddp_mlp_backward(&r->m, n, on_grads_ready, &r->bk);
  } else {
    ddp_mlp_backward(&r->m, n, NULL, NULL);
  }
  double t2 = ddp_now();
  if (r->o.sync && ddp_buckets_finish(&r->bk, &r->ov) != 0) {
    return fail(r, "gradient all-reduce", r->bk.why);
  }
  double t3 = ddp_now();
  ddp_mlp_sgd(&r->m, r->velocity, r->o.sync ? global : n, r->o.lr, r->o.momentum);
  r->fwd_s += t1 - t0;
  r->bwd_s += t2 - t1;
  r->opt_s += ddp_now() - t3;
  r->st.correct += correct;
  r->st.seen += n;
  r->samples += global;
  r->steps++;
  return 0;
}

static long val_correct(struct run* r) {
  int b, e;
  long correct = 0;
  ddp_sampler_share(r->val.n, r->nranks, r->rank, &b, &e);
  for (int s = b; s < e; s += r->m.bmax) {
    int n = e - s < r->m.bmax ? e - s : r->m.bmax;
    memcpy(r->m.act[0], r->val.x + (size_t)s * r->val.dim,
           sizeof(float) * (size_t)n * (size_t)r->val.dim);
    correct += ddp_mlp_correct(&r->m, n, r->val.y + s);
  }
  return correct;
}

static int end_epoch(struct run* r, int epoch) {
  double train_s = ddp_now() - r->t_start;
  double v[8] = {r->st.loss_sum,     (double)r->st.correct,
                 (double)r->st.seen, r->val.n > 0 ? (double)val_correct(r) : 0,
                 r->ov.comm_s,       r->ov.hidden_s,
                 r->ov.exposed_s,    r->bwd_s};
  uint64_t hash;
  if (allreduce_doubles(r, v, 8) != 0 || check_replicas(r, &hash) != 0) {
    return 1;
  }
  if (r->rank == 0) {
    /* Milliseconds per step; summed times are divided by the ranks too. */
    double ms = 1e3 / (r->steps > 0 ? r->steps : 1), mean_ms = ms / r->nranks;
    printf("%sepoch %d/%d  loss %.4f  acc %.2f%%", r->tty ? "\r\033[K" : "", epoch + 1, r->o.epochs,
           v[0] / v[2], 100.0 * v[1] / v[2]);
    if (r->val.n > 0) {
      printf("  val_acc %.2f%%", 100.0 * v[3] / r->val.n);
    }
    printf("  %.0f samples/s  step %.3f ms (fwd %.3f bwd %.3f wait %.3f opt %.3f)",
           (double)r->samples / train_s, ms * train_s, ms * r->fwd_s, mean_ms * v[7],
           mean_ms * v[6], ms * r->opt_s);
    if (r->o.sync && r->nranks > 1) {
      printf("  comm %.3f ms/step, %.0f%% hidden", mean_ms * v[4],
             v[4] > 0 ? 100.0 * v[5] / v[4] : 0.0);
    }
    printf("  [params %016llx]\n", (unsigned long long)hash);
    fflush(stdout);
    if (r->epochs_run > 0 || epoch + 1 == r->o.epochs) { /* the first is a warm-up */
      r->sum_epochs++;
      r->sum_samples += (double)r->samples;
      r->sum_s += train_s;
      r->sum_steps += r->steps;
      r->sum_comm_s += v[4] / r->nranks;
      r->sum_hidden_s += v[5] / r->nranks;
      r->sum_exposed_s += v[6] / r->nranks;
    }
  }
  r->epochs_run++;
  r->st.epoch = epoch + 1;
  r->st.step_in_epoch = 0;
  r->st.loss_sum = 0;
  r->st.correct = r->st.seen = 0;
  return r->o.checkpoint != NULL ? save_checkpoint(r) : 0;
}

static void start_epoch(struct run* r, int epoch) {
  ddp_sampler_set_epoch(&r->sampler, epoch);
  r->samples = 0;
  r->steps = 0;
  r->fwd_s = r->bwd_s = r->opt_s = 0;
  memset(&r->ov, 0, sizeof r->ov);
  r->t_start = r->t_progress = ddp_now();
}

static int train(struct run* r) {
  for (int e = r->st.epoch; e < r->o.epochs; e++) {
    start_epoch(r, e);
    int steps = ddp_sampler_steps(&r->sampler);
    for (int s = r->st.step_in_epoch; s < steps; s++) {
      if (train_step(r, s) != 0) {
        return 1;
      }
      r->st.step++;
      r->st.step_in_epoch = s + 1;
      progress(r, e, s + 1, steps);
      int stop = r->o.stop_after_step >= 0 && r->st.step >= (uint64_t)r->o.stop_after_step;
      if (s + 1 == steps) {
        if (end_epoch(r, e) != 0) {
          return 1;
        }
      } else if (stop || (r->o.checkpoint != NULL && r->o.checkpoint_every > 0 &&
                          r->st.step % (uint64_t)r->o.checkpoint_every == 0)) {
        if (save_checkpoint(r) != 0) {
          return 1;
        }
      }
      if (stop) {
        if (r->rank == 0) {
          printf("%sstopped after step %llu; checkpoint %s\n", r->tty ? "\r\033[K" : "",
                 (unsigned long long)r->st.step, r->o.checkpoint);
        }
        return 0;
      }
    }
  }
  if (r->rank == 0 && r->sum_s > 0) {
    double ms = 1e3 / r->sum_steps;
    printf("summary: %d rank%s  %.0f samples/s  step %.3f ms", r->nranks, r->nranks > 1 ? "s" : "",
           r->sum_samples / r->sum_s, ms * r->sum_s);
    if (r->o.sync && r->nranks > 1) {
      printf("  comm %.3f ms/step  hidden %.3f ms/step (%.0f%%)  exposed wait %.3f ms/step",
             ms * r->sum_comm_s, ms * r->sum_hidden_s,
             r->sum_comm_s > 0 ? 100.0 * r->sum_hidden_s / r->sum_comm_s : 0.0,
             ms * r->sum_exposed_s);
    }
    printf("  (%d epoch%s timed)\n", r->sum_epochs, r->sum_epochs > 1 ? "s" : "");
  }
  return 0;
}

static int setup(struct run* r) {
  const struct ddp_options* o = &r->o;
  if (r->nranks > 1 && getenv("NCCL_COMM_ID") == NULL) {
    return fail(r, "setup", "WORLD_SIZE > 1 but NCCL_COMM_ID is unset: start with tuttirun");
  }
  ncclUniqueId id; /* with NCCL_COMM_ID set, every rank gets the same id */
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res == ncclSuccess) {
    res = ncclCommInitRank(&r->comm, r->nranks, id, r->rank);
  }
  if (res != ncclSuccess) {
    return nccl_fail(r, "communicator", res);
  }
  int dim = o->size[0], classes = o->size[o->nlayers];
  if (ddp_data_make(&r->train, o->train_size, dim, classes, o->seed, DDP_SPLIT_TRAIN) != 0 ||
      ddp_data_make(&r->val, o->val_size, dim, classes, o->seed, DDP_SPLIT_VAL) != 0 ||
      ddp_sampler_init(&r->sampler, o->train_size, r->nranks, r->rank, o->batch, o->drop_last,
                       o->seed) != 0 ||
      ddp_mlp_init(&r->m, o->nlayers, o->size, o->batch, o->grad_mode) != 0 ||
      (r->velocity = calloc(r->m.nparams, sizeof(float))) == NULL ||
      (r->labels = malloc(sizeof(int32_t) * (size_t)o->batch)) == NULL) {
    return fail(r, "setup", "out of memory");
  }
  if (ddp_sampler_steps(&r->sampler) == 0) {
    return fail(r, "setup", "--drop-last leaves no step: the global batch exceeds the data set");
  }
  struct ddp_ckpt* st = &r->st;
  st->nlayers = o->nlayers;
  memcpy(st->size, o->size, sizeof st->size);
  st->seed = o->seed;
  st->train_size = o->train_size;
  st->global_batch = r->nranks * o->batch;
  st->drop_last = o->drop_last;
  st->grad_mode = o->grad_mode;
  st->nparams = r->m.nparams;
  if (o->resume != NULL) {
    if (resume(r) != 0) {
      return 1;
    }
  } else {
    /* Each rank draws its own parameters, as independent processes would;
     * rank 0's win. */
    ddp_mlp_init_params(&r->m, o->seed, r->rank);
    res = ncclBroadcast(r->m.params, r->m.params, r->m.nparams, ncclFloat32, 0, r->comm, NULL);
    if (res != ncclSuccess) {
      return nccl_fail(r, "ncclBroadcast of the parameters", res);
    }
  }
  if (o->stop_after_step >= 0 && st->step >= (uint64_t)o->stop_after_step) {
    return fail(r, "resume", "--stop-after-step is not after the checkpoint's step");
  }
  uint64_t hash;
  if (check_replicas(r, &hash) != 0) {
    return 1;
  }
  size_t ends[DDP_MAX_LAYERS];
  for (int l = o->nlayers - 1, k = 0; l >= 0; l--, k++) {
    ends[k] = r->m.off[l] + r->m.len[l];
  }
  int fixed = o->grad_mode == DDP_GRAD_FIXED;
  if (ddp_buckets_init(&r->bk, r->comm, r->m.grads, fixed ? ncclInt64 : ncclFloat32,
                       ddp_mlp_grad_elem(&r->m), ends, o->nlayers,
                       (size_t)(o->bucket_mb * 1048576.0), o->overlap) != 0) {
    return fail(r, "setup", r->bk.why);
  }
  r->have_buckets = 1;
  if (r->rank == 0) {
    printf("tutti-ddp: %d rank%s, layers", r->nranks, r->nranks > 1 ? "s" : "");
    for (int l = 0; l <= o->nlayers; l++) {
      printf("%c%d", l ? '-' : ' ', o->size[l]);
    }
    printf(
        " (%zu params), batch %d per rank (global %d), %d steps/epoch, %d bucket%s "
        "(--bucket-mb %g), grad %s, overlap %s%s\n",
        r->m.nparams, o->batch, st->global_batch, ddp_sampler_steps(&r->sampler), r->bk.n,
        r->bk.n > 1 ? "s" : "", o->bucket_mb, fixed ? "fixed" : "float", o->overlap ? "on" : "off",
        o->sync ? "" : ", NO gradient sync");
    if (o->resume != NULL) {
      printf("resumed from %s at epoch %d, step %d of it (global step %llu)\n", o->resume,
             st->epoch + 1, st->step_in_epoch, (unsigned long long)st->step);
    }
    fflush(stdout);
  }
  return 0;
}

static void teardown(struct run* r) {
  if (r->have_buckets) {
    ddp_buckets_destroy(&r->bk);
  }
  if (r->comm != NULL) {
    ncclCommDestroy(r->comm);
  }
  ddp_mlp_free(&r->m);
  ddp_sampler_free(&r->sampler);
  ddp_data_free(&r->train);
  ddp_data_free(&r->val);
  free(r->velocity);
  free(r->labels);
}

int main(int argc, char** argv) {
  static struct run r;
  int rc = ddp_options_parse(&r.o, argc, argv);
  if (rc != 0) {
    return rc == 1 ? 0 : 2;
  }
  r.rank = env_int("RANK", 0);
  r.nranks = env_int("WORLD_SIZE", 1);
  if (r.nranks < 1 || r.rank < 0 || r.rank >= r.nranks) {
    fprintf(stderr, "tutti-ddp: RANK %d / WORLD_SIZE %d make no sense\n", r.rank, r.nranks);
    return 2;
  }
  r.tty = r.rank == 0 && isatty(STDOUT_FILENO);
  setvbuf(stdout, NULL, _IOLBF, 0);
  rc = setup(&r);
  if (rc == 0) {
    rc = train(&r);
  }
  teardown(&r);
  return rc;
}
