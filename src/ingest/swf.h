// SwfParser: Standard Workload Format traces (the Parallel Workloads Archive format).
//
// 18 whitespace-separated fields per job, -1 for unknown; header lines start with ';' and hold
// "Key: Value" metadata (kept, e.g. MaxProcs, UnixStartTime). Submit times are offsets from the
// header's UnixStartTime when it is present. Extra fields after the 18th (as in Alea's extended
// SWF) are ignored. Not thread-safe.
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
