// The Python grammar compiled into the build (tree-sitter-python's generated parser.c, from npm;
// see CMakeLists.txt), whose C entry point ships without a header of its own.
#pragma once

#include <tree_sitter/api.h>

extern "C" const TSLanguage* tree_sitter_python(void);  // NOLINT(readability-*)
