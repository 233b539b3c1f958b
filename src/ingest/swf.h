// SwfParser: Standard Workload Format traces (the Parallel Workloads Archive format).
//
// 18 whitespace-separated fields per job, -1 for unknown; header lines start with ';' and hold
// "Key: Value" metadata (kept, e.g. MaxProcs, UnixStartTime). Submit times are offsets from the
// header's UnixStartTime when it is present. After the 18th field only Alea's extended SWF is
// read (a node list in braces, a queue and a node spec, ignored); any other extra field makes
// the line malformed. Every number is checked against core/plausible.h (a run time of 1e30 or
// inf, a submit time of 2^64, memory of 1e308 KB are malformed lines, named by field). Not
// thread-safe.
#pragma once

#include <map>
#include <string>

#include "ingest/ingest.h"

namespace rightsize {

class SwfParser final : public RecordParser {
 public:
  Status ParseLine(std::string_view line, std::vector<JobRecord>& out) override;
  Status Finish(std::vector<JobRecord>& /*out*/) override { return Status::Ok(); }
  int64_t non_record_lines() const override { return non_record_lines_; }
  std::map<std::string, std::string> metadata() const override { return metadata_; }

 private:
  std::map<std::string, std::string> metadata_;
  int64_t unix_start_time_ = 0;
  int64_t non_record_lines_ = 0;
};

// The cluster name a trace file implies: its base name without .gz and .swf
// ("KTH-SP2-1996-2.1-cln.swf.gz" -> "KTH-SP2-1996-2.1-cln").
std::string ClusterNameFromPath(const std::string& path);

}  // namespace rightsize
