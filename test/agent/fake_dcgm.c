/* A stand-in for NVIDIA's libdcgm.so.4, for testing rightsize's DCGM collector on machines without
 * a GPU. It exports the real DCGM symbol names with the real C ABI (dcgm_agent.h, dcgm_structs.h
 * of DCGM 3.x/4.x) and answers from a script, so a test can describe GPUs and their profiling
 * counters and watch the collector report them. Only the entry points src/agent/dcgm.cc uses are
 * here. It checks the versioned structs it is handed (dcgmConnectV2Params_v2, dcgmFieldValue_v1)
 * as DCGM does, so a wrong layout on the caller's side fails here too.
 *
 * The script is the file named by the environment variable RIGHTSIZE_FAKE_DCGM, read by the first
 * dcgmInit. Without the variable, or with a file that cannot be opened, dcgmInit fails with
 * DCGM_ST_INIT_ERROR.
 *
 * One directive a line; '#' starts a comment; keys are key=value without spaces.
 *
 *   init_error -7             dcgmInit fails with this code
 *   hostengine absent         dcgmConnect_v2 fails with DCGM_ST_CONNECTION_NOT_VALID, as with no
 *                             nv-hostengine listening (default: one answers)
 *   embedded_error -7         dcgmStartEmbedded fails with this code
 *   prof_error -33            every watch of profiling fields (ids 1001 and up) fails with this
 *                             code (-33: DCGM_ST_MODULE_NOT_LOADED, the profiling module absent)
 *   lose_hostengine_after 3   after 3 calls of dcgmGetLatestValuesForFields, every call fails
 *                             with DCGM_ST_CONNECTION_NOT_VALID (the host engine went away)
 *   gpu 0 uuid=GPU-1 nvml_index=0 gr=0.9 sm=0.62 occupancy=0.31 tensor=0.45 dram=0.27
 *         pcie_tx=1000 pcie_rx=2000 nvlink_tx=3000 nvlink_rx=4000 [profiling=na]
 *       (one line; the number after "gpu" is DCGM's GPU id, which need not be the NVML index.
 *       Ratios are doubles, byte rates int64, as DCGM types them; any number is passed through,
 *       so a test can script garbage. A value "na", or a key left out, answers DCGM's "not
 *       supported" sentinel (status OK, a blank value); "err" answers the value with status
 *       DCGM_ST_NOT_SUPPORTED. profiling=na makes a watch of profiling fields on any group
 *       holding this GPU fail with DCGM_ST_PROFILING_NOT_SUPPORTED.)
 *
 * A line the fake does not understand makes dcgmInit fail with DCGM_ST_BADPARAM and a message on
 * stderr, so a typo in a test script cannot pass silently.
 *
 * For tests of the caller's cleanup and settings, rightsize_fake_dcgm_state(NAME) (not a DCGM
 * symbol) reports "init_refs", "connections", "embedded", "groups", "field_groups", "watches" (open
 * now), "update_usec" (of the last watch) and "connect_timeout_ms" (of the last connection).
 * Not thread-safe: tests drive it from one thread. */

#define _POSIX_C_SOURCE 200809L /* strtok_r */ /* NOLINT(bugprone-reserved-identifier) */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- DCGM's ABI, as in dcgm_structs.h and dcgm_fields.h. --- */
typedef int dcgmReturn_t;
typedef uintptr_t dcgmHandle_t;
typedef uintptr_t dcgmGpuGrp_t;
typedef uintptr_t dcgmFieldGrp_t;
enum {
  DCGM_ST_OK = 0,
  DCGM_ST_BADPARAM = -1,
  DCGM_ST_NOT_SUPPORTED = -6,
  DCGM_ST_INIT_ERROR = -7,
  DCGM_ST_UNINITIALIZED = -10,
  DCGM_ST_VER_MISMATCH = -12,
  DCGM_ST_NOT_WATCHED = -16,
  DCGM_ST_CONNECTION_NOT_VALID = -21,
  DCGM_ST_MAX_LIMIT = -24,
  DCGM_ST_MODULE_NOT_LOADED = -33,
  DCGM_ST_PROFILING_NOT_SUPPORTED = -36
};
#define DCGM_GROUP_EMPTY 1
#define DCGM_FT_DOUBLE 'd'
#define DCGM_FT_INT64 'i'
#define DCGM_FT_STRING 's'
#define DCGM_INT64_BLANK 0x7ffffffffffffff0LL
#define DCGM_FP64_BLANK 140737488355328.0
#define DCGM_INT64_NOT_SUPPORTED (DCGM_INT64_BLANK + 2)
#define DCGM_FP64_NOT_SUPPORTED (DCGM_FP64_BLANK + 2.0)
#define DCGM_MAX_STR_LENGTH 256
#define DCGM_MAX_BLOB_LENGTH 4096
#define DCGM_MAX_NUM_DEVICES 32
#define DCGM_MAX_NUM_GROUPS 64
#define MAKE_DCGM_VERSION(typeName, ver) \
  (unsigned int)(sizeof(typeName) | ((unsigned long)(ver) << 24U))

typedef struct {
  unsigned int version;
  unsigned short fieldId;
  unsigned short fieldType;
  int status;
  int64_t ts;
  union {
    int64_t i64;
    double dbl;
    char str[DCGM_MAX_STR_LENGTH];
    char blob[DCGM_MAX_BLOB_LENGTH];
  } value;
} dcgmFieldValue_v1;
#define dcgmFieldValue_version1 MAKE_DCGM_VERSION(dcgmFieldValue_v1, 1)

typedef struct {
  unsigned int version;
  unsigned int persistAfterDisconnect;
  unsigned int timeoutMs;
  unsigned int addressIsUnixSocket;
} dcgmConnectV2Params_v2;
#define dcgmConnectV2Params_version2 MAKE_DCGM_VERSION(dcgmConnectV2Params_v2, 2)

/* --- The script, parsed. --- */
#define MAX_LINE 1024
#define MAX_FIELDS 16
#define MAX_WATCHES 256
#define NUM_PROF 9

/* The profiling fields the fake knows, in script-key order. */
static const struct {
  const char* key;
  unsigned short id;
  char type;
} kProf[NUM_PROF] = {
    {"gr", 1001, DCGM_FT_DOUBLE},        {"sm", 1002, DCGM_FT_DOUBLE},
    {"occupancy", 1003, DCGM_FT_DOUBLE}, {"tensor", 1004, DCGM_FT_DOUBLE},
    {"dram", 1005, DCGM_FT_DOUBLE},      {"pcie_tx", 1009, DCGM_FT_INT64},
    {"pcie_rx", 1010, DCGM_FT_INT64},    {"nvlink_tx", 1011, DCGM_FT_INT64},
    {"nvlink_rx", 1012, DCGM_FT_INT64},
};

enum { VALUE_NA = 0, VALUE_SET, VALUE_ERR };
typedef struct {
  int kind;
  double v;
} value_t;

typedef struct {
  unsigned int id;
  char uuid[96];
  long long nvml_index; /* -1: not scripted */
  value_t prof[NUM_PROF];
  int profiling_unsupported;
} gpu_t;

typedef struct {
  int used;
  unsigned long long members; /* bit per GPU id */
} group_t;

typedef struct {
  int used;
  int n;
  unsigned short ids[MAX_FIELDS];
} field_group_t;

typedef struct {
  int used;
  dcgmGpuGrp_t group;
  dcgmFieldGrp_t field_group;
} watch_t;

static int g_init_refs;
static int g_connections, g_embedded;
static int g_hostengine_absent;
static dcgmReturn_t g_embedded_error, g_prof_error;
static long long g_lose_after = -1, g_value_calls;
static long long g_update_usec, g_connect_timeout_ms;
static gpu_t g_gpus[DCGM_MAX_NUM_DEVICES];
static int g_ngpus;
static group_t g_groups[DCGM_MAX_NUM_GROUPS];
static field_group_t g_field_groups[DCGM_MAX_NUM_GROUPS];
static watch_t g_watches[MAX_WATCHES];

/* Handles: one value per kind, so a caller that mixes them up is caught. */
#define HANDLE_CONNECTION ((dcgmHandle_t)0x1000)
#define HANDLE_EMBEDDED ((dcgmHandle_t)0x2000)

static void reset(void) {
  memset(g_gpus, 0, sizeof g_gpus);
  memset(g_groups, 0, sizeof g_groups);
  memset(g_field_groups, 0, sizeof g_field_groups);
  memset(g_watches, 0, sizeof g_watches);
  g_ngpus = 0;
  g_hostengine_absent = 0;
  g_embedded_error = DCGM_ST_OK;
  g_prof_error = DCGM_ST_OK;
  g_lose_after = -1;
  g_value_calls = 0;
}

static int parse_value(const char* s, value_t* out) {
  char* end = NULL;
  if (strcmp(s, "na") == 0) {
    out->kind = VALUE_NA;
    return 1;
  }
  if (strcmp(s, "err") == 0) {
    out->kind = VALUE_ERR;
    return 1;
  }
  out->kind = VALUE_SET;
  out->v = strtod(s, &end);
  return end != s && *end == '\0';
}

static int parse_gpu(char* save_rest, char** save) {
  gpu_t g;
  char* tok;
  char* end = NULL;
  int i;
  memset(&g, 0, sizeof g);
  g.nvml_index = -1;
  if (save_rest == NULL) return 0;
  g.id = (unsigned int)strtoul(save_rest, &end, 10);
  if (end == save_rest || *end != '\0' || g.id >= 64 || g_ngpus == DCGM_MAX_NUM_DEVICES) return 0;
  for (tok = strtok_r(NULL, " \t", save); tok != NULL; tok = strtok_r(NULL, " \t", save)) {
    char* eq = strchr(tok, '=');
    const char* v;
    int known = 0;
    if (eq == NULL) return 0;
    *eq = '\0';
    v = eq + 1;
    if (strcmp(tok, "uuid") == 0) {
      if (strlen(v) >= sizeof g.uuid) return 0;
      memcpy(g.uuid, v, strlen(v) + 1);
      known = 1;
    } else if (strcmp(tok, "nvml_index") == 0) {
      g.nvml_index = strtoll(v, NULL, 10);
      known = 1;
    } else if (strcmp(tok, "profiling") == 0 && strcmp(v, "na") == 0) {
      g.profiling_unsupported = 1;
      known = 1;
    }
    for (i = 0; !known && i < NUM_PROF; ++i) {
      if (strcmp(tok, kProf[i].key) == 0) {
        if (!parse_value(v, &g.prof[i])) return 0;
        known = 1;
      }
    }
    if (!known) return 0;
  }
  g_gpus[g_ngpus++] = g;
  return 1;
}

/* Returns 1 on success; on failure prints why. */
static int parse_line(char* line, const char* path, int lineno, dcgmReturn_t* init_error) {
  char* save = NULL;
  char* kind;
  char* arg;
  char* hash = strchr(line, '#');
  if (hash != NULL) *hash = '\0';
  line[strcspn(line, "\r\n")] = '\0';
  kind = strtok_r(line, " \t", &save);
  if (kind == NULL) return 1; /* blank */
  arg = strtok_r(NULL, " \t", &save);
  if (strcmp(kind, "gpu") == 0) {
    if (parse_gpu(arg, &save)) return 1;
  } else if (arg != NULL && strtok_r(NULL, " \t", &save) == NULL) {
    if (strcmp(kind, "init_error") == 0) {
      *init_error = atoi(arg);
      return 1;
    }
    if (strcmp(kind, "hostengine") == 0 && strcmp(arg, "absent") == 0) {
      g_hostengine_absent = 1;
      return 1;
    }
    if (strcmp(kind, "embedded_error") == 0) {
      g_embedded_error = atoi(arg);
      return 1;
    }
    if (strcmp(kind, "prof_error") == 0) {
      g_prof_error = atoi(arg);
      return 1;
    }
    if (strcmp(kind, "lose_hostengine_after") == 0) {
      g_lose_after = atoll(arg);
      return 1;
    }
  }
  fprintf(stderr, "fake_dcgm: %s:%d: cannot parse this line\n", path, lineno);
  return 0;
}

static const gpu_t* find_gpu(unsigned int id) {
  int i;
  for (i = 0; i < g_ngpus; ++i) {
    if (g_gpus[i].id == id) return &g_gpus[i];
  }
  return NULL;
}

static int valid_handle(dcgmHandle_t h) {
  return g_init_refs > 0 && ((h == HANDLE_CONNECTION && g_connections > 0) ||
                             (h == HANDLE_EMBEDDED && g_embedded > 0));
}

/* Group and field-group ids are index + 1; 0 is never handed out. */
static group_t* find_group(dcgmGpuGrp_t id) {
  if (id == 0 || id > DCGM_MAX_NUM_GROUPS || !g_groups[id - 1].used) return NULL;
  return &g_groups[id - 1];
}

static field_group_t* find_field_group(dcgmFieldGrp_t id) {
  if (id == 0 || id > DCGM_MAX_NUM_GROUPS || !g_field_groups[id - 1].used) return NULL;
  return &g_field_groups[id - 1];
}

/* --- The exported API. --- */

long long rightsize_fake_dcgm_state(const char* what) {
  int i;
  long long n = 0;
  if (strcmp(what, "init_refs") == 0) return g_init_refs;
  if (strcmp(what, "connections") == 0) return g_connections;
  if (strcmp(what, "embedded") == 0) return g_embedded;
  if (strcmp(what, "update_usec") == 0) return g_update_usec;
  if (strcmp(what, "connect_timeout_ms") == 0) return g_connect_timeout_ms;
  for (i = 0; i < DCGM_MAX_NUM_GROUPS; ++i) {
    if (strcmp(what, "groups") == 0) n += g_groups[i].used;
    if (strcmp(what, "field_groups") == 0) n += g_field_groups[i].used;
  }
  for (i = 0; i < MAX_WATCHES; ++i) {
    if (strcmp(what, "watches") == 0) n += g_watches[i].used;
  }
  return n;
}

dcgmReturn_t dcgmInit(void) {
  const char* path = getenv("RIGHTSIZE_FAKE_DCGM");
  FILE* f;
  char line[MAX_LINE];
  int lineno = 0, ok = 1;
  dcgmReturn_t init_error = DCGM_ST_OK;
  if (g_init_refs > 0) {
    ++g_init_refs;
    return DCGM_ST_OK;
  }
  if (path == NULL || (f = fopen(path, "r")) == NULL) return DCGM_ST_INIT_ERROR;
  reset();
  while (ok && fgets(line, sizeof line, f) != NULL) {
    ok = parse_line(line, path, ++lineno, &init_error);
  }
  fclose(f);
  if (!ok) return DCGM_ST_BADPARAM;
  if (init_error != DCGM_ST_OK) return init_error;
  g_init_refs = 1;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmShutdown(void) {
  if (g_init_refs == 0) return DCGM_ST_UNINITIALIZED;
  --g_init_refs;
  return DCGM_ST_OK;
}

const char* errorString(dcgmReturn_t result) {
  switch (result) {
    case DCGM_ST_OK:
      return "Success";
    case DCGM_ST_BADPARAM:
      return "Bad parameter passed to function";
    case DCGM_ST_NOT_SUPPORTED:
      return "This request is not supported by the DCGM version";
    case DCGM_ST_INIT_ERROR:
      return "DCGM Initialization Error";
    case DCGM_ST_VER_MISMATCH:
      return "API version mismatch";
    case DCGM_ST_CONNECTION_NOT_VALID:
      return "Host engine connection invalid/disconnected";
    case DCGM_ST_MODULE_NOT_LOADED:
      return "This request is serviced by a module of DCGM that is not currently loaded";
    case DCGM_ST_PROFILING_NOT_SUPPORTED:
      return "Profiling is not supported for this group of GPUs or GPU.";
    default:
      return NULL; /* as DCGM does for a code it does not know */
  }
}

dcgmReturn_t dcgmConnect_v2(const char* address, dcgmConnectV2Params_v2* params,
                            dcgmHandle_t* handle) {
  if (g_init_refs == 0) return DCGM_ST_UNINITIALIZED;
  if (address == NULL || params == NULL || handle == NULL) return DCGM_ST_BADPARAM;
  if (params->version != dcgmConnectV2Params_version2) return DCGM_ST_VER_MISMATCH;
  g_connect_timeout_ms = params->timeoutMs;
  if (g_hostengine_absent) return DCGM_ST_CONNECTION_NOT_VALID;
  ++g_connections;
  *handle = HANDLE_CONNECTION;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmDisconnect(dcgmHandle_t handle) {
  if (handle != HANDLE_CONNECTION || g_connections == 0) return DCGM_ST_BADPARAM;
  --g_connections;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmStartEmbedded(int op_mode, dcgmHandle_t* handle) {
  if (g_init_refs == 0) return DCGM_ST_UNINITIALIZED;
  if (handle == NULL || (op_mode != 1 && op_mode != 2)) return DCGM_ST_BADPARAM;
  if (g_embedded_error != DCGM_ST_OK) return g_embedded_error;
  ++g_embedded;
  *handle = HANDLE_EMBEDDED;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmStopEmbedded(dcgmHandle_t handle) {
  if (handle != HANDLE_EMBEDDED || g_embedded == 0) return DCGM_ST_BADPARAM;
  --g_embedded;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmGetAllSupportedDevices(dcgmHandle_t handle,
                                        unsigned int gpu_ids[DCGM_MAX_NUM_DEVICES], int* count) {
  int i;
  if (!valid_handle(handle)) return DCGM_ST_BADPARAM;
  if (gpu_ids == NULL || count == NULL) return DCGM_ST_BADPARAM;
  for (i = 0; i < g_ngpus; ++i) gpu_ids[i] = g_gpus[i].id;
  *count = g_ngpus;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmGroupCreate(dcgmHandle_t handle, int type, const char* name, dcgmGpuGrp_t* id) {
  int i;
  if (!valid_handle(handle) || type != DCGM_GROUP_EMPTY || name == NULL || id == NULL) {
    return DCGM_ST_BADPARAM;
  }
  for (i = 0; i < DCGM_MAX_NUM_GROUPS; ++i) {
    if (!g_groups[i].used) {
      g_groups[i].used = 1;
      g_groups[i].members = 0;
      *id = (dcgmGpuGrp_t)i + 1;
      return DCGM_ST_OK;
    }
  }
  return DCGM_ST_MAX_LIMIT;
}

dcgmReturn_t dcgmGroupAddDevice(dcgmHandle_t handle, dcgmGpuGrp_t id, unsigned int gpu_id) {
  group_t* g = find_group(id);
  if (!valid_handle(handle) || g == NULL || find_gpu(gpu_id) == NULL) return DCGM_ST_BADPARAM;
  if (g->members & (1ULL << gpu_id)) return DCGM_ST_BADPARAM; /* already in it */
  g->members |= 1ULL << gpu_id;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmGroupDestroy(dcgmHandle_t handle, dcgmGpuGrp_t id) {
  group_t* g = find_group(id);
  if (!valid_handle(handle) || g == NULL) return DCGM_ST_BADPARAM;
  g->used = 0;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmFieldGroupCreate(dcgmHandle_t handle, int n, unsigned short* ids, const char* name,
                                  dcgmFieldGrp_t* id) {
  int i;
  if (!valid_handle(handle) || n < 1 || n > MAX_FIELDS || ids == NULL || name == NULL ||
      id == NULL) {
    return DCGM_ST_BADPARAM;
  }
  for (i = 0; i < DCGM_MAX_NUM_GROUPS; ++i) {
    if (!g_field_groups[i].used) {
      g_field_groups[i].used = 1;
      g_field_groups[i].n = n;
      memcpy(g_field_groups[i].ids, ids, (size_t)n * sizeof *ids);
      *id = (dcgmFieldGrp_t)i + 1;
      return DCGM_ST_OK;
    }
  }
  return DCGM_ST_MAX_LIMIT;
}

dcgmReturn_t dcgmFieldGroupDestroy(dcgmHandle_t handle, dcgmFieldGrp_t id) {
  field_group_t* fg = find_field_group(id);
  if (!valid_handle(handle) || fg == NULL) return DCGM_ST_BADPARAM;
  fg->used = 0;
  return DCGM_ST_OK;
}

dcgmReturn_t dcgmWatchFields(dcgmHandle_t handle, dcgmGpuGrp_t group, dcgmFieldGrp_t fields,
                             long long update_usec, double max_keep_age, int max_keep_samples) {
  group_t* g = find_group(group);
  field_group_t* fg = find_field_group(fields);
  int i, profiling = 0;
  if (!valid_handle(handle) || g == NULL || fg == NULL || update_usec <= 0 || max_keep_age < 0 ||
      max_keep_samples < 0) {
    return DCGM_ST_BADPARAM;
  }
  for (i = 0; i < fg->n; ++i) profiling |= fg->ids[i] >= 1001;
  if (profiling) {
    if (g_prof_error != DCGM_ST_OK) return g_prof_error;
    for (i = 0; i < g_ngpus; ++i) {
      if ((g->members & (1ULL << g_gpus[i].id)) && g_gpus[i].profiling_unsupported) {
        return DCGM_ST_PROFILING_NOT_SUPPORTED;
      }
    }
  }
  for (i = 0; i < MAX_WATCHES; ++i) {
    if (!g_watches[i].used) {
      g_watches[i].used = 1;
      g_watches[i].group = group;
      g_watches[i].field_group = fields;
      g_update_usec = update_usec;
      return DCGM_ST_OK;
    }
  }
  return DCGM_ST_MAX_LIMIT;
}

dcgmReturn_t dcgmUnwatchFields(dcgmHandle_t handle, dcgmGpuGrp_t group, dcgmFieldGrp_t fields) {
  int i;
  if (!valid_handle(handle)) return DCGM_ST_BADPARAM;
  for (i = 0; i < MAX_WATCHES; ++i) {
    if (g_watches[i].used && g_watches[i].group == group && g_watches[i].field_group == fields) {
      g_watches[i].used = 0;
      return DCGM_ST_OK;
    }
  }
  return DCGM_ST_NOT_WATCHED;
}

dcgmReturn_t dcgmUpdateAllFields(dcgmHandle_t handle, int wait) {
  (void)wait; /* the fake's values are always current */
  return valid_handle(handle) ? DCGM_ST_OK : DCGM_ST_BADPARAM;
}

/* Whether `field` is watched on GPU `gpu_id` through some group that holds it. */
static int watched(unsigned int gpu_id, unsigned short field) {
  int i, j;
  for (i = 0; i < MAX_WATCHES; ++i) {
    const group_t* g = g_watches[i].used ? find_group(g_watches[i].group) : NULL;
    const field_group_t* fg = g != NULL ? find_field_group(g_watches[i].field_group) : NULL;
    if (fg == NULL || (g->members & (1ULL << gpu_id)) == 0) continue;
    for (j = 0; j < fg->n; ++j) {
      if (fg->ids[j] == field) return 1;
    }
  }
  return 0;
}

static void answer(const gpu_t* g, unsigned short field, dcgmFieldValue_v1* out) {
  int i;
  out->fieldId = field;
  out->status = DCGM_ST_OK;
  out->ts = 1700000000000000LL;
  if (!watched(g->id, field)) {
    out->status = DCGM_ST_NOT_WATCHED;
    return;
  }
  if (field == 54) { /* DCGM_FI_DEV_UUID */
    out->fieldType = DCGM_FT_STRING;
    snprintf(out->value.str, sizeof out->value.str, "%s", g->uuid[0] ? g->uuid : "<<<NULL>>>");
    return;
  }
  if (field == 52) { /* DCGM_FI_DEV_NVML_INDEX */
    out->fieldType = DCGM_FT_INT64;
    out->value.i64 = g->nvml_index >= 0 ? g->nvml_index : DCGM_INT64_NOT_SUPPORTED;
    return;
  }
  for (i = 0; i < NUM_PROF; ++i) {
    if (kProf[i].id != field) continue;
    out->fieldType = (unsigned short)kProf[i].type;
    if (g->prof[i].kind == VALUE_ERR) {
      out->status = DCGM_ST_NOT_SUPPORTED;
    } else if (kProf[i].type == DCGM_FT_DOUBLE) {
      out->value.dbl = g->prof[i].kind == VALUE_SET ? g->prof[i].v : DCGM_FP64_NOT_SUPPORTED;
    } else {
      out->value.i64 =
          g->prof[i].kind == VALUE_SET ? (int64_t)g->prof[i].v : DCGM_INT64_NOT_SUPPORTED;
    }
    return;
  }
  out->status = DCGM_ST_NOT_WATCHED; /* a field the fake does not know */
}

dcgmReturn_t dcgmGetLatestValuesForFields(dcgmHandle_t handle, int gpu_id, unsigned short fields[],
                                          unsigned int count, dcgmFieldValue_v1 values[]) {
  const gpu_t* g;
  unsigned int i;
  if (!valid_handle(handle)) return DCGM_ST_BADPARAM;
  if (g_lose_after >= 0 && g_value_calls++ >= g_lose_after) return DCGM_ST_CONNECTION_NOT_VALID;
  g = gpu_id >= 0 ? find_gpu((unsigned int)gpu_id) : NULL;
  if (g == NULL || fields == NULL || values == NULL || count == 0) return DCGM_ST_BADPARAM;
  for (i = 0; i < count; ++i) {
    if (values[i].version != dcgmFieldValue_version1) {
      values[i].fieldId = fields[i];
      values[i].status = DCGM_ST_VER_MISMATCH;
      continue;
    }
    answer(g, fields[i], &values[i]);
  }
  return DCGM_ST_OK;
}
