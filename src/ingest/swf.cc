#include "ingest/swf.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/plausible.h"

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

// Ids, codes and numbers of things (fields 1, 11-18) are whole numbers below 2^53, so they
// convert to int64 exactly and print as they were written.
constexpr double kMaxSwfId = 9007199254740992.0;

// Alea's extended SWF appends a node list "{12,12,13}", a queue name and a node spec (the
// wagap-2013 trace): up to three fields after the 18th, the first in braces. Anything else
// after the 18th field is not SWF.
constexpr int kMaxAleaExtraFields = 3;

// The range checks of one row's 18 numbers; -1 (any negative) is "unknown" and passes.
Status CheckSwfRow(const std::array<double, 18>& f, std::array<std::string_view, 18> text,
                   int64_t unix_start_time) {
  for (size_t k = 0; k < f.size(); ++k) {
    if (!std::isfinite(f[k])) {
      return Status::BadInput(fmt::format("field {}: expected a number (-1 for unknown), got {}",
                                          kSwfFields[k], Quote(text[k])));
    }
  }
  auto known = [&](size_t k) { return f[k] >= 0; };
  auto check = [&](size_t k, Plausible kind, double value) -> Status {
    if (!known(k)) return Status::Ok();
    return CheckPlausible(kSwfFields[k], kind, value, text[k]);
  };
  for (size_t k : {0, 10, 11, 12, 13, 14, 15, 16, 17}) {
    if (known(k) && (f[k] > kMaxSwfId || f[k] != std::floor(f[k]))) {
      return Status::BadInput(
          fmt::format("field {}: expected a whole number from 0 to 2^53 (-1 "
                      "for unknown), got {}",
                      kSwfFields[k], Quote(text[k])));
    }
  }
  // Times are offsets from UnixStartTime (0 without it): the sum must be a plausible time.
  RS_RETURN_IF_ERROR(check(1, Plausible::kUnixTime, static_cast<double>(unix_start_time) + f[1]));
  RS_RETURN_IF_ERROR(check(2, Plausible::kDuration, f[2]));
  RS_RETURN_IF_ERROR(check(3, Plausible::kDuration, f[3]));
  RS_RETURN_IF_ERROR(check(4, Plausible::kCpus, f[4]));
  RS_RETURN_IF_ERROR(check(5, Plausible::kDuration, f[5]));
  RS_RETURN_IF_ERROR(check(7, Plausible::kCpus, f[7]));
  RS_RETURN_IF_ERROR(check(8, Plausible::kTimeLimit, f[8]));
  // Memory fields are KB per processor: the job's total must be plausible too.
  for (size_t k : {6, 9}) {
    double procs = k == 9 && known(7) ? f[7] : (known(4) ? f[4] : 1);
    RS_RETURN_IF_ERROR(check(k, Plausible::kMemoryBytes, f[k] * 1024 * std::max(1.0, procs)));
  }
  if (known(5) && known(4) && known(3)) {
    RS_RETURN_IF_ERROR(CheckCpuEfficiency(kSwfFields[5], f[5] * f[4], f[4], f[3]));
  }
  return Status::Ok();
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
          auto v = ParseInt(value);
          if (!v || *v < kMinPlausibleUnixTime || *v > kMaxPlausibleUnixTime) {
            return Status::BadInput(
                fmt::format("field UnixStartTime: expected Unix seconds from 1970 to 2200, got {}",
                            Quote(value)));
          }
          unix_start_time_ = *v;
        }
        metadata_["swf." + key] = value;
      }
    }
    return Status::Ok();
  }
  // Parse the 18 numbers without allocating.
  std::array<double, 18> f{};
  std::array<std::string_view, 18> text{};
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
    text[k] = std::string_view(tok, static_cast<size_t>(p - tok));
    auto [q, ec] = std::from_chars(tok, p, f[k]);
    if (ec == std::errc::result_out_of_range && q == p) {
      // from_chars leaves f[k] unset for 1e999: it is as implausible as inf.
      f[k] = std::numeric_limits<double>::infinity();
    } else if (ec != std::errc() || q != p) {
      return Status::BadInput(fmt::format("field {}: expected a number (-1 for unknown), got {}",
                                          kSwfFields[k], Quote(text[k])));
    }
  }
  int extra = 0;
  while (true) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p == end) break;
    const char* tok = p;
    while (p < end && *p != ' ' && *p != '\t') ++p;
    ++extra;
    bool alea_nodes = extra == 1 && p - tok >= 2 && *tok == '{' && *(p - 1) == '}';
    if ((extra == 1 && !alea_nodes) || extra > kMaxAleaExtraFields) {
      while (p < end) {  // count them all for the message
        while (p < end && (*p == ' ' || *p == '\t')) ++p;
        if (p == end) break;
        while (p < end && *p != ' ' && *p != '\t') ++p;
        ++extra;
      }
      return Status::BadInput(fmt::format(
          "expected 18 fields, got {} (after the 18th only Alea's extended SWF is read: a node "
          "list in braces, a queue and a node spec)",
          18 + extra));
    }
  }
  RS_RETURN_IF_ERROR(CheckSwfRow(f, text, unix_start_time_));
  auto known = [](double v) { return v >= 0; };
  // Checked above: every known value is within its plausible range, so these sums and
  // conversions cannot overflow.
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
