// Helpers for the ingest tests: run a parser over a fixture file or a string.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ingest/ingest.h"
#include "ingest/line_reader.h"

namespace rightsize {

struct ParseResult {
  std::vector<JobRecord> jobs;
  std::vector<std::string> errors;  // "LINE: message"
};

inline ParseResult ParseFile(RecordParser& parser, const std::string& path) {
  ParseResult r;
  auto reader = LineReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return r;
  std::string_view line;
  while (true) {
    auto more = (*reader)->Next(&line);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    Status st = parser.ParseLine(line, r.jobs);
    if (!st.ok())
      r.errors.push_back(std::to_string((*reader)->line_number()) + ": " + st.message());
  }
  EXPECT_TRUE(parser.Finish(r.jobs).ok());
  return r;
}

inline ParseResult ParseText(RecordParser& parser, const std::string& text) {
  ParseResult r;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    ++line_no;
    Status st = parser.ParseLine(line, r.jobs);
    if (!st.ok()) r.errors.push_back(std::to_string(line_no) + ": " + st.message());
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  EXPECT_TRUE(parser.Finish(r.jobs).ok());
  return r;
}

inline const JobRecord* FindJob(const std::vector<JobRecord>& jobs, const std::string& id) {
  for (const auto& j : jobs) {
    if (j.job_id == id) return &j;
  }
  return nullptr;
}

inline std::string DataPath(const std::string& rel) {
  return std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/" + rel;
}

}  // namespace rightsize
