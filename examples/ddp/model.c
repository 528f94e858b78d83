#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

/* Rows of W a tile of the forward and weight-gradient loops keeps hot in
 * cache while it walks the samples. */
enum { TILE = 32 };

int ddp_mlp_init(struct ddp_mlp* m, int nlayers, const int* sizes, int bmax,
                 enum ddp_grad_mode mode) {
  memset(m, 0, sizeof *m);
  if (nlayers < 1 || nlayers > DDP_MAX_LAYERS || bmax < 1) {
    return -1;
  }
  m->nlayers = nlayers;
  m->bmax = bmax;
  m->mode = mode;
  int widest = 0;
  for (int l = 0; l <= nlayers; l++) {
    m->size[l] = sizes[l];
    widest = sizes[l] > widest ? sizes[l] : widest;
  }
  size_t at = 0;
  for (int l = nlayers - 1; l >= 0; l--) { /* the last layer first */
    m->off[l] = at;
    m->len[l] = (size_t)sizes[l] * (size_t)sizes[l + 1] + (size_t)sizes[l + 1];
    at += m->len[l];
  }
  m->nparams = at;
  m->params = calloc(at, sizeof(float));
  m->grads = calloc(at, ddp_mlp_grad_elem(m));
  int fail = m->params == NULL || m->grads == NULL;
  for (int l = 0; l <= nlayers; l++) {
    m->act[l] = malloc(sizeof(float) * (size_t)bmax * (size_t)sizes[l]);
    fail |= m->act[l] == NULL;
  }
  for (int k = 0; k < 2; k++) {
    m->delta[k] = malloc(sizeof(float) * (size_t)bmax * (size_t)widest);
    fail |= m->delta[k] == NULL;
  }
  if (fail) {
    ddp_mlp_free(m);
    return -1;
  }
  return 0;
}

void ddp_mlp_free(struct ddp_mlp* m) {
  free(m->params);
  free(m->grads);
  for (int l = 0; l <= m->nlayers && l <= DDP_MAX_LAYERS; l++) {
    free(m->act[l]);
  }
  free(m->delta[0]);
  free(m->delta[1]);
  memset(m, 0, sizeof *m);
}

size_t ddp_mlp_grad_elem(const struct ddp_mlp* m) {
  return m->mode == DDP_GRAD_FIXED ? sizeof(int64_t) : sizeof(float);
}

void ddp_mlp_init_params(struct ddp_mlp* m, uint64_t seed, int stream) {
  struct ddp_rng r;
  for (int l = 0; l < m->nlayers; l++) {
    int in = m->size[l], out = m->size[l + 1];
    float a = sqrtf(6.0f / (float)in);
    float* w = m->params + m->off[l];
    ddp_rng_seed(&r, seed, (3ull << 32) + 64 * (uint64_t)stream + (uint64_t)l);
    for (size_t k = 0; k < (size_t)in * (size_t)out; k++) {
      w[k] = a * (2.0f * ddp_rng_uniform(&r) - 1.0f);
    }
    memset(w + (size_t)in * (size_t)out, 0, sizeof(float) * (size_t)out);
  }
}

void ddp_mlp_forward(struct ddp_mlp* m, int n) {
  for (int l = 0; l < m->nlayers; l++) {
    int in = m->size[l], out = m->size[l + 1];
    const float* x = m->act[l];
    const float* w = m->params + m->off[l];
    const float* bias = w + (size_t)in * (size_t)out;
    float* y = m->act[l + 1];
    for (int b = 0; b < n; b++) {
      memcpy(y + (size_t)b * out, bias, sizeof(float) * (size_t)out);
    }
    /* Every output sums its bias, then x[i] * w[i] for i = 0, 1, ...: the
     * same order for every sample, whatever the tiling or the batch. */
    for (int i0 = 0; i0 < in; i0 += TILE) {
      int i1 = i0 + TILE < in ? i0 + TILE : in;
      for (int b = 0; b < n; b++) {
        float* yb = y + (size_t)b * out;
        for (int i = i0; i < i1; i++) {
          float xi = x[(size_t)b * in + i];
          if (xi == 0.0f) {
            continue; /* ReLU zeros: adding 0 * w changes nothing */
          }
          const float* wi = w + (size_t)i * out;
          for (int o = 0; o < out; o++) {
            yb[o] += xi * wi[o];
          }
        }
      }
    }
    if (l + 1 < m->nlayers) {
      for (size_t k = 0; k < (size_t)n * (size_t)out; k++) {
        y[k] = y[k] > 0.0f ? y[k] : 0.0f;
      }
    }
  }
}

void ddp_mlp_loss(struct ddp_mlp* m, int n, const int32_t* y, double* loss_sum, long* correct) {
  int c = m->size[m->nlayers];
  for (int b = 0; b < n; b++) {
    const float* z = m->act[m->nlayers] + (size_t)b * c;
    float* d = m->delta[0] + (size_t)b * c;
    int best = 0;
    for (int o = 1; o < c; o++) {
      best = z[o] > z[best] ? o : best;
    }
    float zmax = z[best], sum = 0.0f;
    for (int o = 0; o < c; o++) {
      d[o] = expf(z[o] - zmax);
      sum += d[o];
    }
    float inv = 1.0f / sum;
    for (int o = 0; o < c; o++) {
      d[o] = d[o] * inv - (o == y[b] ? 1.0f : 0.0f);
    }
    *loss_sum += (double)(logf(sum) + zmax - z[y[b]]);
    *correct += best == y[b];
  }
}

long ddp_mlp_correct(struct ddp_mlp* m, int n, const int32_t* y) {
  ddp_mlp_forward(m, n);
  int c = m->size[m->nlayers];
  long correct = 0;
  for (int b = 0; b < n; b++) {
    const float* z = m->act[m->nlayers] + (size_t)b * c;
    int best = 0;
    for (int o = 1; o < c; o++) {
      best = z[o] > z[best] ? o : best;
    }
    correct += best == y[b];
  }
  return correct;
}

/* A dot product with eight fixed partial sums: vectorizes, and the order of
 * the additions is the same on every machine and for every batch. */
static float dot(const float* a, const float* b, int n) {
  float acc[8] = {0};
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; j++) {
      acc[j] += a[k + j] * b[k + j];
    }
  }
  for (; k < n; k++) {
    acc[k & 7] += a[k] * b[k];
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* A per-sample product in fixed point, clamped to +-2^16 (a diverged run):
 * a sum over 2^14 samples then stays below 2^62. */
static inline int64_t fixed(float v) {
  const float scale = (float)(1ull << DDP_FIXED_SHIFT), lim = 65536.0f;
  v = v > lim ? lim : (v < -lim ? -lim : v);
  return (int64_t)llrintf(v * scale);
}

/* Gradient sums of one layer: dW[i][o] = sum_b x[b][i] d[b][o], db = sum_b d. */
static void layer_grads(struct ddp_mlp* m, int l, int n, const float* d) {
  int in = m->size[l], out = m->size[l + 1];
  const float* x = m->act[l];
  size_t nw = (size_t)in * (size_t)out;
  if (m->mode == DDP_GRAD_FIXED) {
    int64_t* g = (int64_t*)m->grads + m->off[l];
    memset(g, 0, sizeof(int64_t) * m->len[l]);
    for (int b = 0; b < n; b++) {
      const float* db = d + (size_t)b * out;
      for (int i = 0; i < in; i++) {
        float xi = x[(size_t)b * in + i];
        if (xi == 0.0f) {
          continue;
        }
        int64_t* gi = g + (size_t)i * out;
        for (int o = 0; o < out; o++) {
          gi[o] += fixed(xi * db[o]);
        }
      }
      for (int o = 0; o < out; o++) {
        g[nw + o] += fixed(db[o]);
      }
    }
    return;
  }
  float* g = (float*)m->grads + m->off[l];
  memset(g, 0, sizeof(float) * m->len[l]);
  for (int i0 = 0; i0 < in; i0 += TILE) {
    int i1 = i0 + TILE < in ? i0 + TILE : in;
    for (int b = 0; b < n; b++) {
      const float* db = d + (size_t)b * out;
      for (int i = i0; i < i1; i++) {
        float xi = x[(size_t)b * in + i];
        if (xi == 0.0f) {
          continue;
        }
        float* gi = g + (size_t)i * out;
        for (int o = 0; o < out; o++) {
          gi[o] += xi * db[o];
        }
      }
    }
  }
  for (int b = 0; b < n; b++) {
    for (int o = 0; o < out; o++) {
      g[nw + o] += d[(size_t)b * out + o];
    }
  }
}

void ddp_mlp_backward(struct ddp_mlp* m, int n, ddp_grads_ready_fn ready, void* arg) {
  int cur = 0; /* delta[cur] holds dL/d(output of layer l) */
  for (int l = m->nlayers - 1; l >= 0; l--) {
    layer_grads(m, l, n, m->delta[cur]);
    if (ready != NULL) {
      ready(arg, m->off[l] + m->len[l]);
    }
    if (l == 0) {
      break;
    }
    /* dL/d(input of layer l) = W d, through the ReLU of layer l - 1. */
    int in = m->size[l], out = m->size[l + 1];
    const float* w = m->params + m->off[l];
    const float* x = m->act[l];
    const float* d = m->delta[cur];
    float* dx = m->delta[1 - cur];
    for (int b = 0; b < n; b++) {
      for (int i = 0; i < in; i++) {
        size_t k = (size_t)b * in + i;
        dx[k] = x[k] > 0.0f ? dot(d + (size_t)b * out, w + (size_t)i * out, out) : 0.0f;
      }
    }
    cur = 1 - cur;
  }
}

void ddp_mlp_sgd(struct ddp_mlp* m, float* velocity, int count, float lr, float momentum) {
  float* p = m->params;
  if (count <= 0) {
    return;
  }
  if (m->mode == DDP_GRAD_FIXED) {
    const int64_t* g = m->grads;
    double unit = 1.0 / (double)(1ull << DDP_FIXED_SHIFT) / (double)count;
    for (size_t k = 0; k < m->nparams; k++) {
      velocity[k] = momentum * velocity[k] + (float)((double)g[k] * unit);
      p[k] -= lr * velocity[k];
    }
    return;
  }
  const float* g = m->grads;
  float inv = 1.0f / (float)count;
  for (size_t k = 0; k < m->nparams; k++) {
    velocity[k] = momentum * velocity[k] + g[k] * inv;
    p[k] -= lr * velocity[k];
  }
}
