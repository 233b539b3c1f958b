// CPython 3.11's structure layout, taken from python3.11-dev's headers at build time (see
// py311_layout.h). Compiled only when CMake found the internal headers; py311_layout_none.c
// stands in otherwise.
#define Py_BUILD_CORE 1
#include "agent/py311_layout.h"

#include <Python.h>
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <string.h>

#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION != 11
#error "py311_layout.c needs Python 3.11's headers"
#endif

static uint32_t StateMask(void (*set)(PyASCIIObject*)) {
  PyASCIIObject object;
  memset(&object, 0, sizeof(object));
  set(&object);
  uint32_t word = 0;
  memcpy(&word, (const char*)&object + offsetof(PyASCIIObject, state), sizeof(word));
  return word;
}
static void SetKind(PyASCIIObject* o) { o->state.kind = 7; }
static void SetCompact(PyASCIIObject* o) { o->state.compact = 1; }
static void SetAscii(PyASCIIObject* o) { o->state.ascii = 1; }
static void SetReady(PyASCIIObject* o) { o->state.ready = 1; }

int RsPy311GetLayout(RsPy311Layout* layout) {
  memset(layout, 0, sizeof(*layout));
  layout->version_hex = PY_VERSION_HEX;
  layout->runtime_interpreters_head = offsetof(_PyRuntimeState, interpreters.head);
  layout->interp_next = offsetof(PyInterpreterState, next);
  layout->interp_threads_head = offsetof(PyInterpreterState, threads.head);
  layout->tstate_next = offsetof(PyThreadState, next);
  layout->tstate_cframe = offsetof(PyThreadState, cframe);
  layout->tstate_native_thread_id = offsetof(PyThreadState, native_thread_id);
  layout->cframe_current_frame = offsetof(_PyCFrame, current_frame);
  layout->frame_code = offsetof(_PyInterpreterFrame, f_code);
  layout->frame_previous = offsetof(_PyInterpreterFrame, previous);
  layout->frame_prev_instr = offsetof(_PyInterpreterFrame, prev_instr);
  layout->frame_is_entry = offsetof(_PyInterpreterFrame, is_entry);
  layout->frame_owner = offsetof(_PyInterpreterFrame, owner);
  layout->frame_bytes = offsetof(_PyInterpreterFrame, localsplus);
  layout->object_type = offsetof(PyObject, ob_type);
  layout->code_firstlineno = offsetof(PyCodeObject, co_firstlineno);
  layout->code_filename = offsetof(PyCodeObject, co_filename);
  layout->code_qualname = offsetof(PyCodeObject, co_qualname);
  layout->code_linetable = offsetof(PyCodeObject, co_linetable);
  layout->code_code_adaptive = offsetof(PyCodeObject, co_code_adaptive);
  layout->var_size = offsetof(PyVarObject, ob_size);
  layout->bytes_data = offsetof(PyBytesObject, ob_sval);
  layout->str_length = offsetof(PyASCIIObject, length);
  layout->str_state = offsetof(PyASCIIObject, state);
  layout->str_ascii_data = sizeof(PyASCIIObject);
  layout->str_compact_data = sizeof(PyCompactUnicodeObject);
  layout->str_kind_mask = StateMask(SetKind);
  layout->str_kind_shift = (uint32_t)__builtin_ctz(layout->str_kind_mask);
  layout->str_compact_mask = StateMask(SetCompact);
  layout->str_ascii_mask = StateMask(SetAscii);
  layout->str_ready_mask = StateMask(SetReady);
  return 1;
}
