/* The model: a multi-layer perceptron (fully connected layers, ReLU between
 * them, softmax cross-entropy on the last), its forward and backward passes,
 * and SGD with momentum.
 *
 * All parameters live in one flat vector, the layers in reverse order (the
 * last layer first) and each layer as W (in x out, row-major) then b (out):
 * backward produces gradients from offset 0 upwards, so a gradient bucket is a
 * contiguous range that is complete as soon as backward has passed its end.
 *
 * Gradients are sums over the samples of a step, never means; the optimizer
 * divides by the step's global sample count. They are kept either as floats
 * or, in fixed-point mode, as 64-bit integers: every per-sample product is
 * rounded to a multiple of 2^-32 before it is added, so sums are exact and do
 * not depend on how the samples are split among ranks or in which order the
 * all-reduce adds them. Per-sample arithmetic never depends on the batch:
 * a sample's activations and deltas have the same bits whatever batch it is
 * in. */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define DDP_MAX_LAYERS 16

enum ddp_grad_mode { DDP_GRAD_FLOAT = 0, DDP_GRAD_FIXED = 1 };

/* Fixed-point gradients: units of 2^-DDP_FIXED_SHIFT. */
#define DDP_FIXED_SHIFT 32

struct ddp_mlp {
  int nlayers;                  /* weight layers */
  int size[DDP_MAX_LAYERS + 1]; /* size[0]: inputs ... size[nlayers]: classes */
  size_t off[DDP_MAX_LAYERS];   /* start of layer l (W then b) in the flat vectors */
  size_t len[DDP_MAX_LAYERS];   /* in * out + out */
  size_t nparams;
  float* params;
  enum ddp_grad_mode mode;
  void* grads;                    /* nparams floats or int64 sums, same layout */
  int bmax;                       /* largest batch the buffers hold */
  float* act[DDP_MAX_LAYERS + 1]; /* act[0]: input batch; act[l]: output of layer l */
  float* delta[2];                /* dL/d(output) of the current layer, per sample */
};

/* Called during backward: gradients [0, end) of the flat vector are final. */
typedef void (*ddp_grads_ready_fn)(void* arg, size_t end);

/* sizes: nlayers + 1 entries. Returns 0, or -1 when out of memory. */
int ddp_mlp_init(struct ddp_mlp* m, int nlayers, const int* sizes, int bmax,
                 enum ddp_grad_mode mode);
void ddp_mlp_free(struct ddp_mlp* m);

/* Fresh parameters from (seed, stream): uniform in +-sqrt(6 / fan_in) for
 * W, zero for b. */
void ddp_mlp_init_params(struct ddp_mlp* m, uint64_t seed, int stream);

/* Bytes of one gradient element (4 or 8). */
size_t ddp_mlp_grad_elem(const struct ddp_mlp* m);

/* Forward over the n samples in act[0]; then loss and output deltas for
 * labels y. Adds the summed loss to *loss_sum and the number of correct
 * predictions to *correct. */
void ddp_mlp_forward(struct ddp_mlp* m, int n);
void ddp_mlp_loss(struct ddp_mlp* m, int n, const int32_t* y, double* loss_sum, long* correct);

/* Backward over the n samples of the last forward: writes the gradient sums
 * (zero when n is 0) and calls ready() after each layer's gradients. */
void ddp_mlp_backward(struct ddp_mlp* m, int n, ddp_grads_ready_fn ready, void* arg);

/* One SGD step with the summed gradients of `count` samples:
 * v = momentum * v + g / count; p -= lr * v. */
void ddp_mlp_sgd(struct ddp_mlp* m, float* velocity, int count, float lr, float momentum);

/* Correct predictions among n samples in act[0] (forward only). */
long ddp_mlp_correct(struct ddp_mlp* m, int n, const int32_t* y);

#endif
