/* The CUDA runtime loaded at run time (see gpu.h): the tool builds and runs
 * on machines without CUDA, and picks up whichever runtime a GPU box has. */
#include "gpu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

/* Values of the CUDA runtime's enums that the tool uses; stable ABI. */
#define CUDA_MEMCPY_DEFAULT 4
#define CUDA_STREAM_NON_BLOCKING 0x1
#define CUDA_CAPTURE_THREAD_LOCAL 1
#define CUDA_ERROR_NOT_READY 600
#define CUDA_DEV_ATTR_PCI_BUS_ID 33

static struct {
  int (*GetDeviceCount)(int*);
  int (*SetDevice)(int);
  int (*Malloc)(void**, size_t);
  int (*Free)(void*);
  int (*MemcpyAsync)(void*, const void*, size_t, int, cudaStream_t);
  int (*StreamSynchronize)(cudaStream_t);
  int (*StreamCreateWithFlags)(cudaStream_t*, unsigned);
  int (*StreamDestroy)(cudaStream_t);
  int (*StreamQuery)(cudaStream_t);
  int (*StreamBeginCapture)(cudaStream_t, int);
  int (*StreamEndCapture)(cudaStream_t, void**);
  int (*GraphInstantiateWithFlags)(void**, void*, unsigned long long);
  int (*GraphLaunch)(void*, cudaStream_t);
  int (*GraphExecDestroy)(void*);
  int (*GraphDestroy)(void*);
  int (*DeviceGetAttribute)(int*, int, int);
  int (*MemGetInfo)(size_t*, size_t*);
  const char* (*GetErrorString)(int);
} rt;

struct rt_sym {
  const char* name;
  void** slot;
};

#define RT(field) \
  { "cuda" #field, (void**)&rt.field }

static const struct rt_sym rt_syms[] = {
    RT(GetDeviceCount),
    RT(SetDevice),
    RT(Malloc),
    RT(Free),
    RT(MemcpyAsync),
    RT(StreamSynchronize),
    RT(StreamCreateWithFlags),
    RT(StreamDestroy),
    RT(StreamQuery),
    RT(StreamBeginCapture),
    RT(StreamEndCapture),
    RT(GraphInstantiateWithFlags),
    RT(GraphLaunch),
    RT(GraphExecDestroy),
    RT(GraphDestroy),
    RT(DeviceGetAttribute),
    RT(MemGetInfo),
    RT(GetErrorString),
};

static void cuda_check(int err, const char* what) {
  if (err != 0) {
    perf_die("%s failed: CUDA error %d (%s)", what, err,
             rt.GetErrorString ? rt.GetErrorString(err) : "?");
  }
}

int perf_cuda_load(char* why, size_t len) {
  static const char* names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                "libcudart.so.11.0"};
  const char* env = getenv("TUTTI_PERF_CUDART");
  void* h = NULL;
  if (env != NULL && *env != '\0') {
    h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
  }
  for (size_t i = 0; h == NULL && env == NULL && i < sizeof names / sizeof names[0]; i++) {
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  }
  if (h == NULL) {
    snprintf(why, len, "no CUDA runtime (%s not found%s)", env ? env : "libcudart.so",
             env ? "" : "; set TUTTI_PERF_CUDART=/path/libcudart.so.N");
    return 0;
  }
  for (size_t i = 0; i < sizeof rt_syms / sizeof rt_syms[0]; i++) {
    *rt_syms[i].slot = dlsym(h, rt_syms[i].name);
    if (*rt_syms[i].slot == NULL) {
      snprintf(why, len, "the CUDA runtime lacks %s (CUDA 11.4 or later is needed)",
               rt_syms[i].name);
      return 0;
    }
  }
  int n = 0;
  int err = rt.GetDeviceCount(&n);
  if (err != 0 || n <= 0) {
    snprintf(why, len, "the CUDA runtime sees no GPU (%s)",
             err ? rt.GetErrorString(err) : "0 devices");
    return 0;
  }
  return n;
}

void perf_cuda_describe(int dev, char* out, size_t len) {
  int bus = 0;
  rt.DeviceGetAttribute(&bus, CUDA_DEV_ATTR_PCI_BUS_ID, dev);
  /* The runtime's device-properties struct changes layout between CUDA
   * versions; the driver's cuDeviceGetName does not. */
  char name[128] = "GPU";
  void* drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (drv != NULL) {
    int (*get)(int*, int) = (int (*)(int*, int))dlsym(drv, "cuDeviceGet");
    int (*get_name)(char*, int, int) = (int (*)(char*, int, int))dlsym(drv, "cuDeviceGetName");
    int d = 0;
    if (get != NULL && get_name != NULL && get(&d, dev) == 0) {
      get_name(name, (int)sizeof name, d);
    }
  }
  snprintf(out, len, "[0x%02x] %s", bus, name);
}

/* Free (want_total 0) or total device memory of `dev`, 0 if unknown. */
static size_t mem_info(int dev, int want_total) {
  size_t free_b = 0, total = 0;
  if (rt.SetDevice(dev) != 0 || rt.MemGetInfo(&free_b, &total) != 0) {
    return 0;
  }
  return want_total ? total : free_b;
}

size_t perf_cuda_mem_total(int dev) {
  return mem_info(dev, 1);
}

size_t perf_cuda_mem_free(int dev) {
  return mem_info(dev, 0);
}

void perf_set_device(int gpu, int dev) {
  if (gpu) {
    cuda_check(rt.SetDevice(dev), "cudaSetDevice");
  }
}

void* perf_buf_alloc(int gpu, size_t bytes) {
  void* p = NULL;
  size_t n = bytes ? bytes : 1;
  if (gpu) {
    cuda_check(rt.Malloc(&p, n), "cudaMalloc");
    return p;
  }
  /* Page-aligned like cudaMalloc, and touched now so that page faults do
   * not land in the first timed iterations. */
  if (posix_memalign(&p, 4096, n) != 0) {
    perf_die("out of host memory allocating %zu bytes", n);
  }
  memset(p, 0, n);
  return p;
}

void perf_buf_free(int gpu, void* p) {
  if (gpu) {
    cuda_check(rt.Free(p), "cudaFree");
  } else {
    free(p);
  }
}

void perf_buf_copy(int gpu, void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0 || dst == src) {
    return;
  }
  if (gpu) {
    /* On the rank's own stream, waiting for that stream only: with several
     * ranks on one GPU (--share-gpus) a device-wide wait would wait for a
     * peer's collective, which waits for this rank's next call. */
    cuda_check(rt.MemcpyAsync(dst, src, bytes, CUDA_MEMCPY_DEFAULT, stream), "cudaMemcpyAsync");
    cuda_check(rt.StreamSynchronize(stream), "cudaStreamSynchronize");
  } else {
    memmove(dst, src, bytes);
  }
}

cudaStream_t perf_stream_create(int gpu, int null_stream) {
  cudaStream_t s = NULL;
  if (gpu && !null_stream) {
    cuda_check(rt.StreamCreateWithFlags(&s, CUDA_STREAM_NON_BLOCKING), "cudaStreamCreate");
  }
  return s;
}

void perf_stream_destroy(int gpu, cudaStream_t s) {
  if (gpu && s != NULL) {
    cuda_check(rt.StreamDestroy(s), "cudaStreamDestroy");
  }
}

int perf_stream_done(int gpu, cudaStream_t s) {
  if (!gpu) {
    return 1; /* host-buffer collectives have finished when the call returns */
  }
  int err = rt.StreamQuery(s);
  if (err == CUDA_ERROR_NOT_READY) {
    return 0;
  }
  cuda_check(err, "cudaStreamQuery");
  return 1;
}

void perf_graph_begin(cudaStream_t s) {
  cuda_check(rt.StreamBeginCapture(s, CUDA_CAPTURE_THREAD_LOCAL), "cudaStreamBeginCapture");
}

void perf_graph_end(cudaStream_t s, struct perf_graph* g) {
  cuda_check(rt.StreamEndCapture(s, &g->graph), "cudaStreamEndCapture");
}

void perf_graph_instantiate(struct perf_graph* g) {
  cuda_check(rt.GraphInstantiateWithFlags(&g->exec, g->graph, 0), "cudaGraphInstantiate");
}

void perf_graph_launch(const struct perf_graph* g, cudaStream_t s) {
  cuda_check(rt.GraphLaunch(g->exec, s), "cudaGraphLaunch");
}

void perf_graph_destroy(struct perf_graph* g) {
  cuda_check(rt.GraphExecDestroy(g->exec), "cudaGraphExecDestroy");
  cuda_check(rt.GraphDestroy(g->graph), "cudaGraphDestroy");
  g->exec = g->graph = NULL;
}
