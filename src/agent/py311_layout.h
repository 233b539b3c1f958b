// The memory layout of CPython 3.11's interpreter structures that PythonStacks reads from other
// processes: offsets into _PyRuntimeState, PyInterpreterState, PyThreadState, _PyCFrame,
// _PyInterpreterFrame, PyCodeObject, bytes and str objects. Filled in at build time by
// py311_layout.c, compiled against python3.11-dev's internal headers (Py_BUILD_CORE), so no
// offset is written by hand; a build without those headers has none (RsPy311LayoutAvailable()
// is 0) and Python 3.11 processes get native frames only. The layout holds for every 3.11.x
// (CPython freezes these structures within a minor version); PythonStacks checks the target's
// Py_Version before using it. Plain data, thread-safe to read.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct RsPy311Layout {
  uint32_t version_hex;  // PY_VERSION_HEX of the headers
  size_t runtime_interpreters_head;
  size_t interp_next;
  size_t interp_threads_head;
  size_t tstate_next;
  size_t tstate_cframe;
  size_t tstate_native_thread_id;
  size_t cframe_current_frame;
  size_t frame_code;
  size_t frame_previous;
  size_t frame_prev_instr;
  size_t frame_is_entry;
  size_t frame_owner;
  size_t frame_bytes;  // enough to cover the fields above
  size_t object_type;
  size_t code_firstlineno;
  size_t code_filename;
  size_t code_qualname;
  size_t code_linetable;
  size_t code_code_adaptive;  // the bytecode, inline in the code object
  size_t var_size;            // PyVarObject.ob_size
  size_t bytes_data;          // PyBytesObject.ob_sval
  size_t str_length;
  size_t str_state;
  size_t str_ascii_data;    // where a compact ASCII string's characters start
  size_t str_compact_data;  // where a compact non-ASCII string's characters start
  uint32_t str_kind_shift;  // str state bit fields, as masks and shifts of the state word
  uint32_t str_kind_mask;
  uint32_t str_compact_mask;
  uint32_t str_ascii_mask;
  uint32_t str_ready_mask;
} RsPy311Layout;

// 1 and `*layout` filled in when this build has the 3.11 layout, else 0.
int RsPy311GetLayout(RsPy311Layout* layout);

#ifdef __cplusplus
}
#endif
