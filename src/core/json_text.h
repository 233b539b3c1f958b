// JSON as text, for every document rightsize prints, writes or sends.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace rightsize {

// `j` as text (`indent` < 0: one line). A string that is not UTF-8 — a Latin-1 user or job name
// in accounting, a process's command line — is written with U+FFFD where its bad bytes were:
// nlohmann's default throws, which ended the whole command with an internal error.
template <class Json>
std::string JsonText(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rightsize
