// Binding a library's functions after dlopen, for the collectors that load vendor libraries at
// run time (NVML in gpu.cc, DCGM in dcgm.cc): a missing symbol is a state to report, not a crash.
#pragma once

#include <dlfcn.h>

#include <string>

namespace rightsize::dl {

// dlerror() text, or a fallback when the loader left none (it always should).
inline std::string Error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dynamic loader error";
}

// An optional symbol: `fn` is null when the library lacks it.
template <typename Fn>
void Bind(void* lib, const char* symbol, Fn*& fn) {
  // POSIX guarantees a dlsym result converts to a function pointer.
  fn = reinterpret_cast<Fn*>(dlsym(lib, symbol));
}

// A symbol the caller cannot work without; on failure `error` gets the loader's words.
template <typename Fn>
bool BindRequired(void* lib, const char* symbol, Fn*& fn, std::string* error) {
  dlerror();  // clear any stale message, so the one reported is about this symbol
  Bind(lib, symbol, fn);
  if (fn == nullptr) *error = Error();
  return fn != nullptr;
}

}  // namespace rightsize::dl
