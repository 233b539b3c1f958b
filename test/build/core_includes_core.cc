// Built only by the build.wrong_way_include test, with the same setup as core_includes_store.cc,
// which must compile: the failure of the other probe is the include, nothing else.
#include "core/job.h"

namespace rightsize {
int RightWayIncludeProbe() { return 0; }
}  // namespace rightsize
