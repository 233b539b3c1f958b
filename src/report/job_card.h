// The job card (`rightsize job JOBID`): one job's request against its use, in the spirit of
// SLURM's seff and Princeton's jobstats — per resource what was asked, what was used, the
// efficiency, what the job cost, and a plain-language suggestion for the next submission
// ("ask for --mem=20G next time"). What the source did not record is listed as unknown, never
// shown as 0.
//
// Suggestions use the same headroom as the report's upper bound: memory 1.2x the peak rounded
// up to a whole GiB (256 MiB steps below 1 GiB; per node when the job spans nodes); CPUs
// ceil(1.2x mean cores used), at least 1; GPUs ceil(1.2x GPUs x utilisation), at least 1;
// time 1.5x elapsed rounded up to 5 minutes (15 minutes above an hour). A suggestion to ask for
// less is made only when it is below the allocation and the job was not stopped at a limit. A
// job that ran out of memory or time is told to ask for more first, with a figure (1.5x the
// memory it reached, 1.5x its time limit), and for nothing less: its run was cut short.
//
// Pure functions; thread-safe; never fail.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/job.h"
#include "report/prices.h"

namespace rightsize {

// What ended the job, in words: "exit 1", "hit its 02:00:00 time limit", "ran out of memory",
// "cancelled (signal 15)"; "" while it runs or when the record says nothing. The exit code is
// given only where it means something: SLURM records exit 0 for a job it stopped at its limit.
std::string OutcomeText(const JobRecord& job);

// `diagnosis_class`: the class of the job's stored diagnosis ("" for none); "host_oom" makes a
// FAILED job (a MemoryError) one that ran out of memory, as OUT_OF_MEMORY does.
std::string RenderJobCardText(const JobRecord& job, const PriceTable& prices,
                              std::string_view diagnosis_class = {});
// Schema "rightsize.job/v1" (docs/report-schema.md, "Job card").
nlohmann::json RenderJobCardJson(const JobRecord& job, const PriceTable& prices,
                                 std::string_view diagnosis_class = {});

}  // namespace rightsize
