// Built only by the build.wrong_way_include test, which expects it NOT to compile: a core source
// may not include the store (the arrows between components point down; docs/architecture.md).
#include "core/job.h"
#include "store/store.h"

namespace rightsize {
int WrongWayIncludeProbe() { return 0; }
}  // namespace rightsize
