/* A stand-in for NVIDIA's libnvidia-ml.so.1, for testing rightsize's GPU collector on machines
 * without a GPU. It exports the real NVML symbol names with the real C ABI (NVML API version 12)
 * and answers from a script, so a test can describe GPUs, processes and Xid events and watch the
 * collector report them. Only the entry points src/agent/gpu.cc uses are here.
 *
 * The script is the file named by the environment variable RIGHTSIZE_FAKE_NVML, read by the first
 * nvmlInit_v2. Without the variable, or with a file that cannot be opened, nvmlInit_v2 fails with
 * NVML_ERROR_DRIVER_NOT_LOADED, as the real library does on a node without the kernel module.
 *
 * Time is counted in samples. The fake counts calls of nvmlDeviceGetCount_v2 since nvmlInit_v2;
 * rightsize makes one when it opens NVML and one at the start of every Sample(), so call 1 is
 * sample 0 (the open) and the Nth Sample() sees sample N.
 *
 * One directive a line; '#' starts a comment; keys are key=value, and a value may contain spaces
 * (words up to the next key=value belong to it). Numbers may be negative: they reach the caller
 * through NVML's unsigned fields as the huge values a broken driver would produce. A numeric key
 * that is absent, or "na", makes its query answer NVML_ERROR_NOT_SUPPORTED.
 *
 *   driver 550.54.15                  nvmlSystemGetDriverVersion (default 550.54.15)
 *   init_error 18                     nvmlInit_v2 fails with this code (a broken driver)
 *   count_error 15 from_sample=3      nvmlDeviceGetCount_v2 fails with this code from sample 3
 *   gpu 0 uuid=GPU-1 name=NVIDIA H100 80GB HBM3 bus=00000000:3B:00.0 util=87 memutil=40
 *         used=41943040000 total=85899345920 power=350000 sm=1980 mem=2619 temp=66 ecc=0
 *         [energy=123456789] [xid_events=na] [undercount=N] [from_sample=N]
 *       (one line; power in mW; energy is nvmlDeviceGetTotalEnergyConsumption's counter in mJ,
 *       absent: NOT_SUPPORTED, as on GPUs before Volta. The last gpu line for an index whose
 * from_sample has been reached gives its values, so values can change over time. undercount=N makes
 * the "how many processes?" query answer N, as if processes started before the list was read.) proc
 * 1 pid=1234 used=1073741824 [from_sample=2] [until_sample=5] [repeat=K] proc 1
 * pidfile=/tmp/job.pid used=…   (the pid read from that file at every query) (a compute process on
 * GPU 1 from sample 2 up to, not including, sample 5; used=na is NVML_VALUE_NOT_AVAILABLE; repeat=K
 * adds K processes with pids pid, pid+1, ...) xid 0 79 at_sample=3              an Xid 79 on GPU 0,
 * pending from sample 3, delivered once process_entry_bytes 32
 * nvmlDeviceGetComputeRunningProcesses_v3 writes entries this wide: 24 as nvml.h says (default), 32
 * as drivers 535.43 to 535.86 did (usedGpuCcProtectedMemory), 16 (the v1 layout)
 *
 * A line the fake does not understand makes nvmlInit_v2 fail with NVML_ERROR_UNKNOWN and a
 * message on stderr, so a typo in a test script cannot pass silently.
 *
 * Built with FAKE_NVML_MINIMAL, it plays an old or stripped-down library: no
 * nvmlDeviceGetClockInfo, nvmlDeviceGetTotalEccErrors, nvmlDeviceGetTotalEnergyConsumption or
 * nvmlEventSetWait_v2, and the process
 * query only as nvmlDeviceGetComputeRunningProcesses_v2 (as on drivers before R510, and 535.98).
 *
 * For tests of the caller's cleanup, rightsize_fake_nvml_state() (not an NVML symbol) reports the
 * open nvmlInit references and event sets. Not thread-safe: tests drive it from one thread. */

#define _POSIX_C_SOURCE 200809L /* strtok_r */ /* NOLINT(bugprone-reserved-identifier) */

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- NVML's ABI, as in nvml.h (NVML API version 12). --- */
typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_UNKNOWN = 999
};
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x8ULL
#define NVML_NOT_MIG 0xFFFFFFFFu

typedef struct nvmlDevice_st {
  int index;
} * nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

/* --- The script, parsed. --- */
#define MAX_GPUS 64
#define MAX_LINE 1024
#define MAX_PAIRS 32

typedef struct {
  int present; /* 0: absent or "na" */
  long long v;
} num_t;

typedef struct {
  int index;
  long long from_sample;
  char uuid[96], name[96], bus[32];
  num_t util, memutil, used, total, power, sm, mem, temp, ecc, undercount, energy;
  int xid_events_unsupported;
} gpu_line_t;

typedef struct {
  int dev;
  unsigned int pid;
  char pidfile[256]; /* when set, the pid is read from this file at each query */
  num_t used;
  long long from_sample, until_sample; /* until 0: forever */
} proc_t;

typedef struct {
  int dev;
  long long code, at_sample;
  int delivered;
} xid_t;

struct nvmlEventSet_st {
  unsigned long long mask[MAX_GPUS];
};

static int g_init_refs;
static int g_open_event_sets;
static long long g_count_calls;
static int g_gpu_count;
static char g_driver[80];
static size_t g_entry_bytes;
static nvmlReturn_t g_count_error;
static long long g_count_error_from;
static gpu_line_t* g_gpus;
static size_t g_ngpus;
static proc_t* g_procs;
static size_t g_nprocs;
static xid_t* g_xids;
static size_t g_nxids;
static struct nvmlDevice_st g_devices[MAX_GPUS];

static void free_script(void) {
  free(g_gpus);
  free(g_procs);
  free(g_xids);
  g_gpus = NULL;
  g_procs = NULL;
  g_xids = NULL;
  g_ngpus = g_nprocs = g_nxids = 0;
  g_gpu_count = 0;
  g_count_error = NVML_SUCCESS;
  g_count_error_from = 0;
  g_count_calls = 0;
  g_entry_bytes = sizeof(nvmlProcessInfo_t);
  snprintf(g_driver, sizeof g_driver, "%s", "550.54.15");
}

static void* grow(void* p, size_t n, size_t size) {
  void* q = realloc(p, (n + 1) * size);
  if (q == NULL) abort(); /* a test fake out of memory: nothing sensible to do */
  return q;
}

typedef struct {
  char key[32];
  char value[256];
} pair_t;

static int parse_num(const char* s, num_t* out) {
  char* end = NULL;
  if (strcmp(s, "na") == 0) {
    out->present = 0;
    return 1;
  }
  out->v = strtoll(s, &end, 10);
  out->present = 1;
  return end != s && *end == '\0';
}

static num_t* gpu_num_field(gpu_line_t* g, const char* key) {
  static const struct {
    const char* key;
    size_t offset;
  } kFields[] = {
      {"util", offsetof(gpu_line_t, util)},     {"memutil", offsetof(gpu_line_t, memutil)},
      {"used", offsetof(gpu_line_t, used)},     {"total", offsetof(gpu_line_t, total)},
      {"power", offsetof(gpu_line_t, power)},   {"sm", offsetof(gpu_line_t, sm)},
      {"mem", offsetof(gpu_line_t, mem)},       {"temp", offsetof(gpu_line_t, temp)},
      {"ecc", offsetof(gpu_line_t, ecc)},       {"undercount", offsetof(gpu_line_t, undercount)},
      {"energy", offsetof(gpu_line_t, energy)},
  };
  size_t i;
  for (i = 0; i < sizeof kFields / sizeof kFields[0]; ++i) {
    if (strcmp(kFields[i].key, key) == 0) return (num_t*)((char*)g + kFields[i].offset);
  }
  return NULL;
}

/* Splits "a b key=v w x key2=y" after the first `fixed` words into key=value pairs, where words
 * without '=' continue the previous value. Returns the number of pairs, or -1. */
static int split(char* line, char** fixed, int nfixed, pair_t* pairs) {
  int n = 0, i = 0;
  char* save = NULL;
  char* tok;
  for (tok = strtok_r(line, " \t", &save); tok != NULL; tok = strtok_r(NULL, " \t", &save)) {
    char* eq = strchr(tok, '=');
    if (i < nfixed) {
      fixed[i++] = tok;
    } else if (eq != NULL) {
      if (n == MAX_PAIRS || (size_t)(eq - tok) >= sizeof pairs[n].key) return -1;
      memcpy(pairs[n].key, tok, (size_t)(eq - tok));
      pairs[n].key[eq - tok] = '\0';
      snprintf(pairs[n].value, sizeof pairs[n].value, "%s", eq + 1);
      ++n;
    } else if (n > 0) {
      size_t len = strlen(pairs[n - 1].value);
      snprintf(pairs[n - 1].value + len, sizeof pairs[n - 1].value - len, " %s", tok);
    } else {
      return -1;
    }
  }
  return i == nfixed ? n : -1;
}

/* Copies a script value into a fixed NVML-sized field; a value that does not fit is a script error
 * rather than something to truncate quietly. */
static int set_string(char* dst, size_t size, const char* value) {
  size_t len = strlen(value);
  if (len >= size) return 0;
  memcpy(dst, value, len + 1);
  return 1;
}

static int parse_index(const char* s, int* out) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v >= MAX_GPUS) return 0;
  *out = (int)v;
  return 1;
}

/* Returns 1 on success; on failure prints why. */
static int parse_line(char* line, const char* path, int lineno, nvmlReturn_t* init_error) {
  char* fixed[3] = {NULL, NULL, NULL};
  pair_t pairs[MAX_PAIRS];
  char* hash = strchr(line, '#');
  char kind[32];
  int npairs, i, nfixed;
  if (hash != NULL) *hash = '\0';
  line[strcspn(line, "\r\n")] = '\0';
  if (sscanf(line, "%31s", kind) != 1) return 1; /* blank */

  nfixed = strcmp(kind, "xid") == 0 ? 3 : 2;
  npairs = split(line, fixed, nfixed, pairs);
  if (npairs < 0) goto bad;

  if (strcmp(kind, "driver") == 0) {
    if (npairs != 0) goto bad;
    if (!set_string(g_driver, sizeof g_driver, fixed[1])) goto bad;
    return 1;
  }
  if (strcmp(kind, "init_error") == 0) {
    if (npairs != 0) goto bad;
    *init_error = atoi(fixed[1]);
    return 1;
  }
  if (strcmp(kind, "process_entry_bytes") == 0) {
    g_entry_bytes = (size_t)atoi(fixed[1]);
    if (npairs != 0 || (g_entry_bytes != 16 && g_entry_bytes != 24 && g_entry_bytes != 32)) {
      goto bad;
    }
    return 1;
  }
  if (strcmp(kind, "count_error") == 0) {
    g_count_error = atoi(fixed[1]);
    for (i = 0; i < npairs; ++i) {
      if (strcmp(pairs[i].key, "from_sample") != 0) goto bad;
      g_count_error_from = atoll(pairs[i].value);
    }
    return 1;
  }
  if (strcmp(kind, "gpu") == 0) {
    gpu_line_t g;
    memset(&g, 0, sizeof g);
    if (!parse_index(fixed[1], &g.index)) goto bad;
    for (i = 0; i < npairs; ++i) {
      const char* k = pairs[i].key;
      const char* v = pairs[i].value;
      num_t* field = gpu_num_field(&g, k);
      if (field != NULL) {
        if (!parse_num(v, field)) goto bad;
      } else if (strcmp(k, "uuid") == 0) {
        if (!set_string(g.uuid, sizeof g.uuid, v)) goto bad;
      } else if (strcmp(k, "name") == 0) {
        if (!set_string(g.name, sizeof g.name, v)) goto bad;
      } else if (strcmp(k, "bus") == 0) {
        if (!set_string(g.bus, sizeof g.bus, v)) goto bad;
      } else if (strcmp(k, "from_sample") == 0) {
        g.from_sample = atoll(v);
      } else if (strcmp(k, "xid_events") == 0 && strcmp(v, "na") == 0) {
        g.xid_events_unsupported = 1;
      } else {
        goto bad;
      }
    }
    g_gpus = grow(g_gpus, g_ngpus, sizeof *g_gpus);
    g_gpus[g_ngpus++] = g;
    if (g.index + 1 > g_gpu_count) g_gpu_count = g.index + 1;
    return 1;
  }
  if (strcmp(kind, "proc") == 0) {
    proc_t p;
    long long repeat = 1, j;
    memset(&p, 0, sizeof p);
    if (!parse_index(fixed[1], &p.dev)) goto bad;
    for (i = 0; i < npairs; ++i) {
      const char* k = pairs[i].key;
      const char* v = pairs[i].value;
      if (strcmp(k, "pid") == 0) {
        p.pid = (unsigned int)strtoul(v, NULL, 10);
      } else if (strcmp(k, "pidfile") == 0) {
        snprintf(p.pidfile, sizeof p.pidfile, "%s", v);
      } else if (strcmp(k, "used") == 0) {
        if (!parse_num(v, &p.used)) goto bad;
      } else if (strcmp(k, "from_sample") == 0) {
        p.from_sample = atoll(v);
      } else if (strcmp(k, "until_sample") == 0) {
        p.until_sample = atoll(v);
      } else if (strcmp(k, "repeat") == 0) {
        repeat = atoll(v);
      } else {
        goto bad;
      }
    }
    for (j = 0; j < repeat; ++j) {
      g_procs = grow(g_procs, g_nprocs, sizeof *g_procs);
      g_procs[g_nprocs] = p;
      g_procs[g_nprocs].pid = p.pid + (unsigned int)j;
      ++g_nprocs;
    }
    return 1;
  }
  if (strcmp(kind, "xid") == 0) {
    xid_t x;
    memset(&x, 0, sizeof x);
    if (!parse_index(fixed[1], &x.dev)) goto bad;
    x.code = atoll(fixed[2]);
    for (i = 0; i < npairs; ++i) {
      if (strcmp(pairs[i].key, "at_sample") != 0) goto bad;
      x.at_sample = atoll(pairs[i].value);
    }
    g_xids = grow(g_xids, g_nxids, sizeof *g_xids);
    g_xids[g_nxids++] = x;
    return 1;
  }
bad:
  fprintf(stderr, "fake_nvml: %s:%d: cannot parse this line\n", path, lineno);
  return 0;
}

static long long current_sample(void) { return g_count_calls > 0 ? g_count_calls - 1 : 0; }

static const gpu_line_t* current_gpu(nvmlDevice_t device) {
  const gpu_line_t* found = NULL;
  size_t i;
  if (device == NULL || device < g_devices || device >= g_devices + g_gpu_count) return NULL;
  for (i = 0; i < g_ngpus; ++i) {
    if (g_gpus[i].index == device->index && g_gpus[i].from_sample <= current_sample()) {
      found = &g_gpus[i];
    }
  }
  return found;
}

#define REQUIRE_INIT()                                     \
  do {                                                     \
    if (g_init_refs == 0) return NVML_ERROR_UNINITIALIZED; \
  } while (0)

/* --- The exported API. --- */

void rightsize_fake_nvml_state(int* init_refs, int* open_event_sets) {
  *init_refs = g_init_refs;
  *open_event_sets = g_open_event_sets;
}

nvmlReturn_t nvmlInit_v2(void) {
  const char* path = getenv("RIGHTSIZE_FAKE_NVML");
  FILE* f;
  char line[MAX_LINE];
  int lineno = 0, ok = 1, i;
  nvmlReturn_t init_error = NVML_SUCCESS;
  if (g_init_refs > 0) {
    ++g_init_refs;
    return NVML_SUCCESS;
  }
  if (path == NULL || (f = fopen(path, "r")) == NULL) return NVML_ERROR_DRIVER_NOT_LOADED;
  free_script();
  while (ok && fgets(line, sizeof line, f) != NULL) {
    ok = parse_line(line, path, ++lineno, &init_error);
  }
  fclose(f);
  if (!ok || init_error != NVML_SUCCESS) {
    free_script();
    return ok ? init_error : NVML_ERROR_UNKNOWN;
  }
  for (i = 0; i < MAX_GPUS; ++i) g_devices[i].index = i;
  g_init_refs = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  REQUIRE_INIT();
  if (--g_init_refs == 0) free_script();
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case 15:
      return "GPU is lost";
    case 18:
      return "RM has detected an NVML/RM version mismatch.";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  REQUIRE_INIT();
  if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(g_driver) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(version, length, "%s", g_driver);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  REQUIRE_INIT();
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  ++g_count_calls;
  if (g_count_error != NVML_SUCCESS && current_sample() >= g_count_error_from) return g_count_error;
  *count = (unsigned int)g_gpu_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  REQUIRE_INIT();
  if (device == NULL || index >= (unsigned int)g_gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char* value, char* out, unsigned int length) {
  if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (value[0] == '\0') return NVML_ERROR_NOT_SUPPORTED;
  if (strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(out, length, "%s", value);
  return NVML_SUCCESS;
}

/* The script line that describes `device` now, or why there is none. */
static nvmlReturn_t lookup(nvmlDevice_t device, const gpu_line_t** g) {
  if (g_init_refs == 0) return NVML_ERROR_UNINITIALIZED;
  *g = current_gpu(device);
  return *g != NULL ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  return copy_string(g->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  return copy_string(g->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->bus[0] == '\0') return NVML_ERROR_NOT_SUPPORTED;
  memset(pci, 0, sizeof *pci);
  snprintf(pci->busId, sizeof pci->busId, "%s", g->bus);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (u == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->util.present) return NVML_ERROR_NOT_SUPPORTED;
  u->gpu = (unsigned int)g->util.v;
  u->memory = g->memutil.present ? (unsigned int)g->memutil.v : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (m == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->total.present) return NVML_ERROR_NOT_SUPPORTED;
  m->total = (unsigned long long)g->total.v;
  m->used = g->used.present ? (unsigned long long)g->used.v : 0;
  m->free = m->used <= m->total ? m->total - m->used : 0;
  return NVML_SUCCESS;
}

static nvmlReturn_t answer_uint(const num_t* n, unsigned int* out) {
  if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!n->present) return NVML_ERROR_NOT_SUPPORTED;
  *out = (unsigned int)n->v;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  return answer_uint(&g->power, power_mw);
}

#ifndef FAKE_NVML_MINIMAL
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, unsigned int type, unsigned int* mhz) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (type == 1) return answer_uint(&g->sm, mhz);  /* NVML_CLOCK_SM */
  if (type == 2) return answer_uint(&g->mem, mhz); /* NVML_CLOCK_MEM */
  return NVML_ERROR_NOT_SUPPORTED;
}
#endif

#ifndef FAKE_NVML_MINIMAL
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* mj) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (mj == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->energy.present) return NVML_ERROR_NOT_SUPPORTED;
  *mj = (unsigned long long)g->energy.v;
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, unsigned int sensor, unsigned int* c) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT; /* NVML_TEMPERATURE_GPU is the only one */
  return answer_uint(&g->temp, c);
}

#ifndef FAKE_NVML_MINIMAL
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, unsigned int error_type,
                                         unsigned int counter_type, unsigned long long* count) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (count == NULL || error_type > 1 || counter_type > 1) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->ecc.present) return NVML_ERROR_NOT_SUPPORTED;
  /* The script's count is the volatile uncorrected one; the other counters read 0. */
  *count = (error_type == 1 && counter_type == 0) ? (unsigned long long)g->ecc.v : 0;
  return NVML_SUCCESS;
}
#endif

static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int* count,
                                      nvmlProcessInfo_t* infos) {
  unsigned int n = 0, asked;
  size_t i;
  long long s = current_sample();
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  for (i = 0; i < g_nprocs; ++i) {
    const proc_t* p = &g_procs[i];
    if (p->dev == device->index && p->from_sample <= s &&
        (p->until_sample == 0 || s < p->until_sample)) {
      ++n;
    }
  }
  asked = *count;
  if (asked < n) {
    /* NVML's protocol: say how many are needed. undercount plays processes starting between
     * the size query and the read. */
    *count = (asked == 0 && g->undercount.present && g->undercount.v < (long long)n)
                 ? (unsigned int)g->undercount.v
                 : n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = n;
  if (n == 0) return NVML_SUCCESS;
  if (infos == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  n = 0;
  for (i = 0; i < g_nprocs; ++i) {
    const proc_t* p = &g_procs[i];
    if (p->dev == device->index && p->from_sample <= s &&
        (p->until_sample == 0 || s < p->until_sample)) {
      /* Written field by field at the scripted stride, as a driver with another idea of the
       * struct would; pid and usedGpuMemory sit at the same offsets in every layout. */
      unsigned char* e = (unsigned char*)infos + (size_t)n * g_entry_bytes;
      unsigned long long used = p->used.present ? (unsigned long long)p->used.v : ~0ULL;
      unsigned int not_mig = NVML_NOT_MIG;
      unsigned long long cc_protected = 0;
      unsigned int pid = p->pid;
      if (p->pidfile[0] != '\0') {
        /* A process whose pid the test only learns when it starts (it writes it here). */
        FILE* f = fopen(p->pidfile, "r");
        pid = 0;
        if (f != NULL) {
          if (fscanf(f, "%u", &pid) != 1) pid = 0;
          fclose(f);
        }
      }
      memset(e, 0, g_entry_bytes);
      memcpy(e + offsetof(nvmlProcessInfo_t, pid), &pid, sizeof pid);
      memcpy(e + offsetof(nvmlProcessInfo_t, usedGpuMemory), &used, sizeof used);
      if (g_entry_bytes >= 24) {
        memcpy(e + offsetof(nvmlProcessInfo_t, gpuInstanceId), &not_mig, sizeof not_mig);
        memcpy(e + offsetof(nvmlProcessInfo_t, computeInstanceId), &not_mig, sizeof not_mig);
      }
      if (g_entry_bytes == 32) memcpy(e + 24, &cc_protected, sizeof cc_protected);
      ++n;
    }
  }
  return NVML_SUCCESS;
}

/* The old-driver build has only _v2, which takes the same entries. */
#ifdef FAKE_NVML_MINIMAL
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return running_processes(device, count, infos);
}
#else
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return running_processes(device, count, infos);
}
#endif

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  REQUIRE_INIT();
  if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *set = calloc(1, sizeof **set);
  if (*set == NULL) return NVML_ERROR_UNKNOWN;
  ++g_open_event_sets;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
  const gpu_line_t* g = NULL;
  nvmlReturn_t rc = lookup(device, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->xid_events_unsupported) return NVML_ERROR_NOT_SUPPORTED;
  set->mask[device->index] |= types;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_MINIMAL
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeout_ms) {
  size_t i;
  (void)timeout_ms; /* never sleeps: a pending event is returned, otherwise TIMEOUT at once */
  REQUIRE_INIT();
  if (set == NULL || data == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  for (i = 0; i < g_nxids; ++i) {
    xid_t* x = &g_xids[i];
    if (!x->delivered && x->at_sample <= current_sample() && x->dev < g_gpu_count &&
        (set->mask[x->dev] & NVML_EVENT_TYPE_XID_CRITICAL_ERROR) != 0) {
      x->delivered = 1;
      data->device = &g_devices[x->dev];
      data->eventType = NVML_EVENT_TYPE_XID_CRITICAL_ERROR;
      data->eventData = (unsigned long long)x->code;
      data->gpuInstanceId = NVML_NOT_MIG;
      data->computeInstanceId = NVML_NOT_MIG;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_TIMEOUT;
}
#endif

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  REQUIRE_INIT();
  if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  free(set);
  --g_open_event_sets;
  return NVML_SUCCESS;
}
