// Small builders for the report tests: JobRecords with only the fields a test cares about,
// and a price table with round numbers so expected dollars can be computed by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/job.h"
#include "core/units.h"
#include "report/prices.h"

namespace rightsize::testing {

inline PriceTable RoundPrices() {
  PriceTable p;
  p.cpu_core_hour = 0.1;
  p.memory_gb_hour = 0.01;
  p.default_gpu_hour = 1.0;
  p.gpu_hour_by_type["a100"] = 2.0;
  p.gpu_memory_gb_by_type["a100"] = {40};
  p.source_note = "test prices";
  return p;
}

// A finished job on cluster "c1": `cpus` CPUs and `mem_gib` GiB allocated, ran `elapsed_s`
// seconds, ending at `end`.
inline JobRecord Job(const std::string& id, const std::string& user, double cpus, double mem_gib,
                     double elapsed_s, int64_t end) {
  JobRecord j;
  j.cluster = "c1";
  j.job_id = id;
  j.source = "test";
  j.request.user = user;
  j.request.cpus = cpus;
  j.alloc.cpus = cpus;
  j.alloc.memory_bytes = static_cast<int64_t>(mem_gib * static_cast<double>(kGiB));
  j.usage.elapsed_s = elapsed_s;
  j.end_time = end;
  j.start_time = end - static_cast<int64_t>(elapsed_s);
  j.submit_time = j.start_time;
  j.outcome.state = "COMPLETED";
  return j;
}

inline int64_t GiB(double g) { return static_cast<int64_t>(g * static_cast<double>(kGiB)); }

}  // namespace rightsize::testing
