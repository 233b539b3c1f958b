// Stands in for py311_layout.c in a build without python3.11-dev's internal headers: Python 3.11
// processes then get native frames only (see py311_layout.h).
#include <string.h>

#include "agent/py311_layout.h"

int RsPy311GetLayout(RsPy311Layout* layout) {
  memset(layout, 0, sizeof(*layout));
  return 0;
}
