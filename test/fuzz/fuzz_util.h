// What every fuzz target of a line reader does with its bytes: splits them into lines the way
// ingest's LineReader hands them to a RecordParser (IngestFile's loop), and uses records the
// parser completes as the store and the job page would (to JSON and back). Header-only, for the
// *_fuzz.cc targets (test/fuzz/fuzz.cmake); a crash, leak or sanitizer report is a bug in src/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "ingest/ingest.h"
#include "ingest/line_reader.h"

namespace rightsize::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A record as the store keeps it and `rightsize job --json` prints it: it must encode, and what
// it encodes to must read back.
inline void UseRecord(const JobRecord& record) {
  nlohmann::json j = record;
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto back = JobRecordFromJson(nlohmann::json::parse(text, nullptr, false));
  (void)back.ok();
}

// UseRecord on the first and the last of `records` (the one after a header, the one Finish
// flushed): every record comes out of the same parser code, and the JSON round trip costs more
// than the parse (half of a target's time when every record of a 40-line input took it), so
// two per input keep the campaign at millions of executions.
inline void UseSomeRecords(const std::vector<JobRecord>& records) {
  if (records.empty()) return;
  UseRecord(records.front());
  if (records.size() > 1) UseRecord(records.back());
}

// IngestFile's loop over `text`: lines split on '\n' without a trailing '\r', a line over
// LineReader::kMaxLineBytes skipped (one bad line), a NUL byte ends the input (binary data),
// a malformed line counted and skipped; Finish at the end; UseSomeRecords on what came out.
// Returns the records.
inline std::vector<JobRecord> FeedLines(RecordParser& parser, std::string_view text) {
  std::vector<JobRecord> out;
  size_t pos = 0;
  bool stopped = false;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, end - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.size() > LineReader::kMaxLineBytes) continue;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos) {
      stopped = true;
      break;
    }
    Status st = parser.ParseLine(line, out);
    (void)st.message().size();
  }
  if (!stopped) {
    Status st = parser.Finish(out);
    (void)st.message().size();
  }
  UseSomeRecords(out);
  (void)parser.metadata().size();
  (void)parser.notes().size();
  return out;
}

}  // namespace rightsize::fuzz
