#include "ingest/swf.h"

#include <fmt/format.h>

#include <array>
#include <charconv>

namespace rightsize {

namespace {

// The 18 SWF fields, 1-based in the format's documentation.
constexpr std::array<const char*, 18> kSwfFields = {
    "job number",       "submit time",   "wait time",       "run time",       "allocated procs",
    "average CPU time", "used memory",   "requested procs", "requested time", "requested memory",
    "status",           "user id",       "group id",        "executable id",  "queue",
    "partition",        "preceding job", "think time"};

const char* StatusName(int64_t status) {
  switch (status) {
    case 0:
      return "FAILED";
    case 1:
      return "COMPLETED";
    case 5:
      return "CANCELLED";
    case 2:
    case 3:
    case 4:
      return "PARTIAL";  // checkpointed or swapped parts of a job
    default:
      return "UNKNOWN";
  }
}

}  // namespace

Status SwfParser::ParseLine(std::string_view line, std::vector<JobRecord>& out) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i == line.size()) {
    ++non_record_lines_;
    return Status::Ok();
  }
  if (line[i] == ';') {
    ++non_record_lines_;
    std::string_view body = Trim(line.substr(i + 1));
    auto colon = body.find(':');
    if (colon != std::string_view::npos && colon > 0) {
      std::string key(Trim(body.substr(0, colon)));
      std::string value(Trim(body.substr(colon + 1)));
      if (key.find(' ') == std::string::npos && !value.empty()) {
        if (key == "UnixStartTime") {
          if (auto v = ParseInt(value)) unix_start_time_ = *v;
        }
        metadata_["swf." + key] = value;
      }
    }
    return Status::Ok();
  }
  // Parse the 18 numbers without allocating.
  std::array<double, 18> f{};
  const char* p = line.data() + i;
  const char* end = line.data() + line.size();
  for (size_t k = 0; k < f.size(); ++k) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p == end) {
      return Status::BadInput(
          fmt::format("expected 18 fields, got {} (field {} is missing)", k, kSwfFields[k]));
    }
    const char* tok = p;
    while (p < end && *p != ' ' && *p != '\t') ++p;
    auto [q, ec] = std::from_chars(tok, p, f[k]);
    if (ec != std::errc() || q != p) {
      return Status::BadInput(
          fmt::format("field {}: expected a number (-1 for unknown), got {}", kSwfFields[k],
                      Quote(std::string_view(tok, static_cast<size_t>(p - tok)))));
    }
  }
  auto known = [](double v) { return v >= 0; };
  auto as_int = [](double v) { return static_cast<int64_t>(v); };

  if (!known(f[0])) return Status::BadInput("field job number: expected a job number >= 0");
  JobRecord& job = out.emplace_back();  // filled in place: this is the hot path of an ingest
  job.source = "swf";
  job.job_id = fmt::format("{}", as_int(f[0]));
  if (known(f[1])) job.submit_time = unix_start_time_ + as_int(f[1]);
  if (job.submit_time && known(f[2])) job.start_time = *job.submit_time + as_int(f[2]);
  if (known(f[3])) {
    job.usage.elapsed_s = f[3];
    // Without a wait time, the end is taken as submit + run (traces such as LLNL-Atlas have
    // no wait): a window filter on end time then errs by the unknown wait only.
    if (job.start_time) {
      job.end_time = *job.start_time + as_int(f[3]);
    } else if (job.submit_time) {
      job.end_time = *job.submit_time + as_int(f[3]);
    }
  }
  if (known(f[4])) job.alloc.cpus = f[4];
  if (known(f[5]) && known(f[4])) job.usage.cpu_time_s = f[5] * f[4];  // per-processor average
  if (known(f[6]) && known(f[4])) {
    job.usage.avg_rss_bytes = static_cast<int64_t>(f[6] * 1024 * f[4]);  // KB per processor
  }
  if (known(f[7])) job.request.cpus = f[7];
  if (known(f[8])) job.request.time_limit_s = as_int(f[8]);
  if (known(f[9])) {
    job.request.memory_per_unit_bytes = static_cast<int64_t>(f[9] * 1024);  // KB per processor
    job.request.memory_scope = MemoryScope::kPerCpu;
    double procs = known(f[7]) ? f[7] : (known(f[4]) ? f[4] : 0);
    if (procs > 0) job.request.memory_bytes = static_cast<int64_t>(f[9] * 1024 * procs);
  }
  job.outcome.state = StatusName(known(f[10]) ? as_int(f[10]) : -1);
  if (known(f[11])) job.request.user = fmt::format("user{}", as_int(f[11]));
  if (known(f[12])) job.request.group = fmt::format("group{}", as_int(f[12]));
  if (known(f[13])) job.request.job_name = fmt::format("exe{}", as_int(f[13]));
  if (known(f[15])) {
    job.request.partition = fmt::format("{}", as_int(f[15]));
  } else if (known(f[14])) {
    job.request.partition = fmt::format("queue{}", as_int(f[14]));
  }
  return Status::Ok();
}

std::string ClusterNameFromPath(const std::string& path) {
  if (path == "-") return "default";
  std::string base =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  for (const char* ext : {".gz", ".swf", ".psv", ".txt", ".log"}) {
    std::string e(ext);
    if (base.size() > e.size() && base.compare(base.size() - e.size(), e.size(), e) == 0) {
      base.resize(base.size() - e.size());
    }
  }
  return base.empty() ? "default" : base;
}

}  // namespace rightsize
