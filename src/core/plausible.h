// Plausible ranges of the numbers in a job record, and the checks every reader shares.
//
// A value outside these ranges is not a measurement but a corrupt or hostile input (a run time
// of 1e30 s, a submit time of 2^64, memory of 1e308 bytes): readers reject its line with
// "field NAME: expected …, got …" (ingest.h adds "FILE:LINE: "), skip it and count it, and the
// report leaves a stored record that fails CheckJobRecord out (an older store may hold one).
// Inside the ranges, sums and products of any two fields stay far below 2^63 and exact enough
// in double, so nothing downstream can overflow or wrap. The bounds are deliberately generous:
// each sits an order of magnitude or more above the largest real value known, so no real job is
// ever rejected. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/job.h"
#include "core/status.h"

namespace rightsize {

// Times: Unix seconds from 1970-01-01 to 2200-01-01. Accounting starts after 1970 (no
// negative times) and nothing is scheduled two centuries ahead; int64 holds 2.9e11 years.
inline constexpr int64_t kMinPlausibleUnixTime = 0;
inline constexpr int64_t kMaxPlausibleUnixTime = 7258118400;  // 2200-01-01T00:00:00Z
// Durations (run time, wait, CPU time per processor): at most 10 years. The
// longest batch limits are a few weeks to a year; a Kubernetes pod can live for years, but
// not for a decade of one container.
inline constexpr double kMaxPlausibleDurationS = 10 * 365.25 * 86400;  // 315,576,000 s
// Time limits: at most 100 years. Some schedulers write "no limit" as a large number rather
// than UNLIMITED (LLNL-Atlas-2006: 738,738,720 s, 23 years), which is no corruption.
inline constexpr double kMaxPlausibleTimeLimitS = 100 * 365.25 * 86400;  // 3,155,760,000 s
// CPUs per job: at most 100 million. The largest machines have 8-42 million cores (Frontier,
// Fugaku, Sunway OceanLight); a whole-machine job must still pass.
inline constexpr double kMaxPlausibleCpus = 1e8;
// Nodes per job: at most a million (the largest machines have about 160,000).
inline constexpr double kMaxPlausibleNodes = 1e6;
// GPUs per job: at most a million (the largest training clusters hold 100,000-200,000).
inline constexpr double kMaxPlausibleGpus = 1e6;
// Memory per job (requested, allocated, peak or average, host or GPU): at most 64 PiB. The
// largest machines hold about 5 PiB in all (El Capitan, Frontier); some traces also write
// bytes where the format says KB (Alea's wagap-2013: 4 PiB for a 64-core job), kept as they are.
inline constexpr double kMaxPlausibleMemoryBytes = 64.0 * 1024 * 1024 * 1024 * 1024 * 1024;
// I/O per job: at most 1 EiB (2^60 bytes), a thousand times the largest parallel file
// systems' daily traffic, and still 8x below int64's limit.
inline constexpr double kMaxPlausibleIoBytes = 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024;
// Energy per job: at most 1e17 J (28 TWh). The largest machine draws about 30 MW; a
// whole-machine job for the longest plausible run (10 years) uses 9.5e15 J.
inline constexpr double kMaxPlausibleEnergyJ = 1e17;
// CPU efficiency (CPU time / (CPUs x run time)): at most 10 (1,000%). SMT can run up to 8
// hardware threads per allocated core (POWER); beyond that the CPU time is not real. Short jobs
// get kCpuTimeSlackS on top, as accounting rounds run time to seconds and charges startup.
inline constexpr double kMaxPlausibleCpuEfficiency = 10;
inline constexpr double kCpuTimeSlackS = 3600;

// What a value measures; each kind has one range above (percent: 0 to 100).
enum class Plausible {
  kUnixTime,
  kDuration,
  kTimeLimit,
  kCpuTime,  // CPU seconds over all cores: up to kMaxPlausibleCpus x kMaxPlausibleDurationS
  kCpus,
  kNodes,
  kGpus,
  kMemoryBytes,
  kIoBytes,
  kEnergyJ,
  kPercent
};

// Ok when `value` is finite and within the range of `kind`; else BadInput
// "field NAME: expected <the range>, got <value>". `text`, when given, is the value as the
// input wrote it ("99999999-00:00:00") and is quoted in the message instead of the number.
Status CheckPlausible(std::string_view field, Plausible kind, double value,
                      std::string_view text = {});

// True when `value` is finite and within the range of `kind`: CheckPlausible without its
// message, for a caller that builds the field's name only for a value that fails.
bool IsPlausible(Plausible kind, double value);

// The CPU time against CPUs x run time (see kMaxPlausibleCpuEfficiency); Ok when any is unknown
// (pass NaN or a negative number) or zero CPUs.
Status CheckCpuEfficiency(std::string_view field, double cpu_time_s, double cpus, double elapsed_s);

// Every numeric field of the record (names as in the JSON schema: "usage.elapsed_s"), and its
// CPU efficiency against alloc.cpus (a request, as Kubernetes has, is no limit: not checked). For
// records that did not come from a line (a store, an API) and as the readers' last check of what
// they built.
Status CheckJobRecord(const JobRecord& job);

}  // namespace rightsize
