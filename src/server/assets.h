// The dashboard's files (web/), built into the binary at build time (see CMakeLists.txt), so
// the server needs no files beside it and the browser fetches nothing from elsewhere.
#pragma once

#include <map>
#include <string_view>

namespace rightsize {

struct Asset {
  std::string_view content_type;
  std::string_view data;
};

// By URL path ("/" for index.html, "/assets/app.js", …).
const std::map<std::string_view, Asset>& EmbeddedAssets();

}  // namespace rightsize
