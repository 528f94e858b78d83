/* GPUs, loaded at run time (never linked): the CUDA driver (libcuda.so.1)
 * for devices, peer access and device memory, the runtime (libcudart) for
 * its version only, NVML (libnvidia-ml.so.1) for NVLinks and the PCIe
 * distance between devices. Then one rank per GPU on device buffers. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nccl.h"

#define MAX_GPUS 64
#define NVML_NVLINK_MAX 18
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76

static struct {
  int (*Init)(unsigned);
  int (*DriverGetVersion)(int*);
  int (*DeviceGetCount)(int*);
  int (*DeviceGet)(int*, int);
  int (*DeviceGetName)(char*, int, int);
  int (*DeviceTotalMem)(size_t*, int);
  int (*DeviceGetAttribute)(int*, int, int);
  int (*DeviceGetPCIBusId)(char*, int, int);
  int (*DeviceCanAccessPeer)(int*, int, int);
  int (*DevicePrimaryCtxRetain)(void**, int);
  int (*CtxSetCurrent)(void*);
  int (*CtxSynchronize)(void);
  int (*MemAlloc)(unsigned long long*, size_t);
  int (*MemFree)(unsigned long long);
  int (*MemcpyHtoD)(unsigned long long, const void*, size_t);
  int (*MemcpyDtoH)(void*, unsigned long long, size_t);
  int (*GetErrorString)(int, const char**);
} cu;

/* nvmlPciInfo_t: NVML's stable layout. */
struct nvml_pci {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

static struct {
  int (*Init)(void);
  int (*Shutdown)(void);
  int (*HandleByPciBusId)(const char*, void**);
  int (*NvLinkState)(void*, unsigned, int*);
  int (*NvLinkRemotePci)(void*, unsigned, struct nvml_pci*);
  int (*TopologyCommonAncestor)(void*, void*, int*);
} nv;

static struct gpu {
  int dev;
  char name[256];
  char bus[64];
  unsigned domain, busno, devno;
  void* nvml;
  void* ctx;
} gpus[MAX_GPUS];

static const char* cu_err(int e) {
  const char* s = NULL;
  if (cu.GetErrorString == NULL || cu.GetErrorString(e, &s) != 0 || s == NULL) {
    return "unknown CUDA error";
  }
  return s;
}

static int load_all(void* h, const char* const* names, void** slots, int n) {
  for (int i = 0; i < n; i++) {
    slots[i] = h != NULL ? dlsym(h, names[i]) : NULL;
    if (slots[i] == NULL) {
      return 0;
    }
  }
  return 1;
}

static int load_cuda(char* why, size_t len) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(why, len, "no CUDA driver (libcuda.so.1 not found)");
    return 0;
  }
  static const char* const names[] = {"cuInit",
                                      "cuDriverGetVersion",
                                      "cuDeviceGetCount",
                                      "cuDeviceGet",
                                      "cuDeviceGetName",
                                      "cuDeviceTotalMem_v2",
                                      "cuDeviceGetAttribute",
                                      "cuDeviceGetPCIBusId",
                                      "cuDeviceCanAccessPeer",
                                      "cuDevicePrimaryCtxRetain",
                                      "cuCtxSetCurrent",
                                      "cuCtxSynchronize",
                                      "cuMemAlloc_v2",
                                      "cuMemFree_v2",
                                      "cuMemcpyHtoD_v2",
                                      "cuMemcpyDtoH_v2",
                                      "cuGetErrorString"};
  if (!load_all(h, names, (void**)&cu, (int)(sizeof names / sizeof names[0]))) {
    snprintf(why, len, "libcuda.so.1 lacks %s: the driver is too old", dlerror());
    return 0;
  }
  int e = cu.Init(0);
  if (e != 0) {
    snprintf(why, len, "the CUDA driver did not initialize (cuInit: %s)", cu_err(e));
    return 0;
  }
  return 1;
}

static void load_nvml(void) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  static const char* const names[] = {"nvmlInit_v2",
                                      "nvmlShutdown",
                                      "nvmlDeviceGetHandleByPciBusId_v2",
                                      "nvmlDeviceGetNvLinkState",
                                      "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                                      "nvmlDeviceGetTopologyCommonAncestor"};
  if (h == NULL || !load_all(h, names, (void**)&nv, (int)(sizeof names / sizeof names[0])) ||
      nv.Init() != 0) {
    memset(&nv, 0, sizeof nv);
  }
}

/* The CUDA runtime's version, or 0 when no libcudart loads. */
static int runtime_version(char* file, size_t len) {
  static const char* names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                "libcudart.so.11.0"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    int (*fn)(int*) = h != NULL ? (int (*)(int*))dlsym(h, "cudaRuntimeGetVersion") : NULL;
    int v = 0;
    if (fn != NULL && fn(&v) == 0) {
      snprintf(file, len, "%s", names[i]);
      return v;
    }
  }
  return 0;
}

static int nvlinks_between(const struct gpu* a, const struct gpu* b, int* via_switch) {
  int n = 0;
  *via_switch = 0;
  for (unsigned l = 0; nv.Init != NULL && a->nvml != NULL && l < NVML_NVLINK_MAX; l++) {
    int active = 0;
    struct nvml_pci pci;
    if (nv.NvLinkState(a->nvml, l, &active) != 0 || !active ||
        nv.NvLinkRemotePci(a->nvml, l, &pci) != 0) {
      continue;
    }
    if (pci.domain == b->domain && pci.bus == b->busno && pci.device == b->devno) {
      n++;
      continue;
    }
    int other_gpu = 0;
    for (int g = 0; gpus[g].name[0] != '\0' && g < MAX_GPUS; g++) {
      other_gpu |=
          pci.domain == gpus[g].domain && pci.bus == gpus[g].busno && pci.device == gpus[g].devno;
    }
    *via_switch += !other_gpu; /* a link to an NVSwitch */
  }
  return n;
}

static const char* pcie_distance(const struct gpu* a, const struct gpu* b) {
  int level = -1;
  if (nv.Init == NULL || a->nvml == NULL || b->nvml == NULL ||
      nv.TopologyCommonAncestor(a->nvml, b->nvml, &level) != 0) {
    return "PCIe";
  }
  switch (level) {
    case 0:
      return "same board";
    case 10:
      return "PCIe, one switch";
    case 20:
      return "PCIe, several switches";
    case 30:
      return "PCIe, through the host bridge";
    case 40:
      return "PCIe, through the CPU (same NUMA node)";
    default:
      return "PCIe, across CPU sockets";
  }
}

static void report_links(int n) {
  report_json_begin("links", 1);
  for (int i = 0; i < n; i++) {
    for (int j = i + 1; j < n; j++) {
      int peer_ij = 0, peer_ji = 0, sw_i = 0, sw_j = 0;
      cu.DeviceCanAccessPeer(&peer_ij, gpus[i].dev, gpus[j].dev);
      cu.DeviceCanAccessPeer(&peer_ji, gpus[j].dev, gpus[i].dev);
      int links = nvlinks_between(&gpus[i], &gpus[j], &sw_i);
      (void)nvlinks_between(&gpus[j], &gpus[i], &sw_j);
      char kind[96];
      if (links > 0) {
        snprintf(kind, sizeof kind, "NVLink x%d", links);
      } else if (sw_i > 0 && sw_j > 0) {
        snprintf(kind, sizeof kind, "NVLink x%d through NVSwitch", sw_i < sw_j ? sw_i : sw_j);
      } else {
        snprintf(kind, sizeof kind, "%s", pcie_distance(&gpus[i], &gpus[j]));
      }
      const int peer = peer_ij && peer_ji;
      report_json_item();
      report_json_int("a", i);
      report_json_int("b", j);
      report_json_str("link", kind);
      report_json_int("nvlinks", links);
      report_json_bool("peer_access", peer);
      report_line("link", "GPU %d <-> GPU %d: %s, peer access %s%s", i, j, kind,
                  peer ? "yes" : "no", nv.Init == NULL ? " (no NVML: NVLinks not counted)" : "");
    }
  }
  report_json_end();
}

int probe_gpus(void) {
  char why[256], rt_file[64] = "";
  const int rt = runtime_version(rt_file, sizeof rt_file);
  report_json_begin("cuda", 0);
  if (!load_cuda(why, sizeof why)) {
    report_json_bool("driver", 0);
    report_json_str("reason", why);
    report_json_int("runtime_version", rt);
    report_json_end();
    report_line("cuda", "%s: GPU checks skipped%s", why,
                rt ? " (a CUDA runtime is installed)" : "");
    report_check("allreduce, one rank per GPU, device memory", CHECK_SKIP, NULL, "%s: skipped",
                 why);
    return 0;
  }
  int drv = 0, n = 0;
  cu.DriverGetVersion(&drv);
  cu.DeviceGetCount(&n);
  n = n > MAX_GPUS ? MAX_GPUS : n;
  load_nvml();
  report_json_bool("driver", 1);
  report_json_int("driver_version", drv);
  report_json_int("runtime_version", rt);
  report_json_bool("nvml", nv.Init != NULL);
  report_json_int("devices", n);
  report_json_end();
  char rts[128] = "no CUDA runtime (libcudart) found";
  if (rt) {
    snprintf(rts, sizeof rts, "runtime %d.%d (%s)", rt / 1000, rt % 1000 / 10, rt_file);
  }
  report_line("cuda", "driver %d.%d, %s, %d GPU%s%s", drv / 1000, drv % 1000 / 10, rts, n,
              n == 1 ? "" : "s", nv.Init != NULL ? ", NVML loaded" : ", no NVML");
  report_json_begin("gpus", 1);
  for (int i = 0; i < n; i++) {
    struct gpu* g = &gpus[i];
    size_t mem = 0;
    int major = 0, minor = 0;
    cu.DeviceGet(&g->dev, i);
    cu.DeviceGetName(g->name, sizeof g->name, g->dev);
    cu.DeviceTotalMem(&mem, g->dev);
    cu.DeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, g->dev);
    cu.DeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, g->dev);
    cu.DeviceGetPCIBusId(g->bus, sizeof g->bus, g->dev);
    sscanf(g->bus, "%x:%x:%x", &g->domain, &g->busno, &g->devno);
    if (nv.Init != NULL && nv.HandleByPciBusId(g->bus, &g->nvml) != 0) {
      g->nvml = NULL;
    }
    report_json_item();
    report_json_int("index", i);
    report_json_str("name", g->name);
    report_json_num("memory_bytes", (double)mem);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", major, minor);
    report_json_str("compute_capability", cc);
    report_json_int("cc_major", major);
    report_json_int("cc_minor", minor);
    report_json_str("pci_bus_id", g->bus);
    report_line("gpu", "%d: %s, %.1f GiB, compute capability %d.%d, PCI %s", i, g->name,
                (double)mem / (1024.0 * 1024 * 1024), major, minor, g->bus);
  }
  report_json_end();
  report_links(n);
  if (n == 0) {
    report_check("allreduce, one rank per GPU, device memory", CHECK_SKIP, NULL,
                 "the CUDA driver sees no GPU: skipped");
  }
  return n;
}

void run_gpu_allreduce(int n) {
  const char* name = "allreduce, one rank per GPU, device memory";
  const size_t count = (1 << 20) + 5;
  const char* fix =
      "use host buffers with this tutti version, or run a tutti built with its device "
      "executor (nvcc present at build time); NCCL_DEBUG=INFO shows why it was refused";
  ncclComm_t comms[MAX_GPUS] = {0};
  unsigned long long dbuf[MAX_GPUS] = {0};
  int devs[MAX_GPUS];
  float* host = malloc(count * sizeof(float));
  char why[768] = "";
  watchdog_arm(name);
  for (int i = 0; i < n && why[0] == '\0'; i++) {
    int e = cu.DevicePrimaryCtxRetain(&gpus[i].ctx, gpus[i].dev);
    e = e ? e : cu.CtxSetCurrent(gpus[i].ctx);
    e = e ? e : cu.MemAlloc(&dbuf[i], count * sizeof(float));
    fill_rank(host, count, i);
    e = e ? e : cu.MemcpyHtoD(dbuf[i], host, count * sizeof(float));
    if (e != 0) {
      snprintf(why, sizeof why, "GPU %d: device memory: %s", i, cu_err(e));
    }
    devs[i] = i;
  }
  ncclResult_t res = ncclSuccess;
  if (why[0] == '\0') {
    res = ncclCommInitAll(comms, n, devs);
    if (res != ncclSuccess) {
      snprintf(why, sizeof why, "ncclCommInitAll on %d GPUs: %s: %s", n, ncclGetErrorString(res),
               ncclGetLastError(NULL));
    }
  }
  if (why[0] == '\0') {
    res = ncclGroupStart();
    for (int i = 0; i < n && res == ncclSuccess; i++) {
      cu.CtxSetCurrent(gpus[i].ctx);
      res = ncclAllReduce((void*)(uintptr_t)dbuf[i], (void*)(uintptr_t)dbuf[i], count, ncclFloat,
                          ncclSum, comms[i], NULL);
    }
    ncclResult_t end = ncclGroupEnd();
    res = res != ncclSuccess ? res : end;
    if (res != ncclSuccess) {
      snprintf(why, sizeof why, "ncclAllReduce on device buffers: %s: %s", ncclGetErrorString(res),
               ncclGetLastError(NULL));
    }
  }
  for (int i = 0; i < n && why[0] == '\0'; i++) {
    cu.CtxSetCurrent(gpus[i].ctx);
    int e = cu.CtxSynchronize();
    e = e ? e : cu.MemcpyDtoH(host, dbuf[i], count * sizeof(float));
    size_t wrong = e ? 0 : count_wrong(host, count, n);
    if (e != 0) {
      snprintf(why, sizeof why, "GPU %d: %s", i, cu_err(e));
    } else if (wrong > 0) {
      snprintf(why, sizeof why, "GPU %d has %zu wrong values of %zu", i, wrong, count);
    }
  }
  /* What a communicator holds, as ncclCommMemStats counts it (rank 0's). */
  uint64_t held = 0;
  if (why[0] == '\0' && ncclCommMemStats(comms[0], ncclStatGpuMemTotal, &held) != ncclSuccess) {
    held = 0;
  }
  for (int i = 0; i < n; i++) {
    if (comms[i] != NULL) {
      ncclCommDestroy(comms[i]);
    }
    if (dbuf[i] != 0) {
      cu.CtxSetCurrent(gpus[i].ctx);
      cu.MemFree(dbuf[i]);
    }
  }
  watchdog_disarm();
  free(host);
  if (why[0] != '\0') {
    report_check(name, CHECK_FAIL, fix, "%s", why);
  } else {
    report_check(name, CHECK_PASS, NULL,
                 "%zu floats summed over %d GPUs, bit-exact; a communicator holds %.1f MiB of GPU "
                 "memory per rank (ncclCommMemStats; TUTTI_COMM_MEMORY sets it)",
                 count, n, (double)held / (1024.0 * 1024.0));
  }
  if (nv.Shutdown != NULL) {
    nv.Shutdown();
  }
}
