// Parsing of the units SLURM prints: memory sizes, durations, timestamps, TRES lists and job
// ids, exactly as `sacct -P` writes them across SLURM versions 2.x to 23.x.
//
// All functions are pure, thread-safe and never throw. On malformed text they return a
// BadInput status whose message says what was expected and what was found; callers add the
// file, line and field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rightsize {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;
constexpr int64_t kTiB = 1024 * kGiB;

// What a requested memory amount applies to. Old sacct (<= 20.11) marks ReqMem with a trailing
// `c` (per allocated CPU) or `n` (per node); newer versions print the plain amount.
enum class MemoryScope { kUnknown = 0, kPerCpu = 1, kPerNode = 2, kPerJob = 3, kPerGpu = 4 };
const char* MemoryScopeName(MemoryScope scope);

struct MemoryAmount {
  int64_t bytes = 0;
  MemoryScope scope = MemoryScope::kUnknown;
};

// The bytes of a SLURM size suffix: K, M, G, T, P (either case), binary; 0 for anything else.
int64_t SizeSuffixBytes(char suffix);

// Parses "4000M", "4G", "2.50T", "1294440K", "3000Mc", "191846Mn", "0", "16.00G".
// Units are binary (K = 1024), as SLURM prints them. `default_unit_bytes` applies when the
// number has no suffix (sacct: MaxRSS and TRES usage are bytes, ReqMem is MiB).
// Returns nullopt for an empty field. Old SLURM encoded "per CPU" as bit 31 of the MiB value
// and some sacct versions print it raw ("2147486648Mn" = 3000 MiB per CPU); that is decoded.
StatusOr<std::optional<MemoryAmount>> ParseSlurmMemory(std::string_view text,
                                                       int64_t default_unit_bytes);

// A duration as SLURM prints limits and elapsed times.
struct SlurmDuration {
  enum class Kind { kValue, kUnlimited, kPartitionLimit, kInvalid };
  Kind kind = Kind::kValue;
  double seconds = 0;
};

// Parses "D-HH:MM:SS", "D-HH:MM", "D-HH", "HH:MM:SS", "MM:SS", "MM:SS.mmm", "SS.mmm",
// "UNLIMITED", "Partition_Limit", "INVALID". Returns nullopt for an empty field.
StatusOr<std::optional<SlurmDuration>> ParseSlurmDuration(std::string_view text);

// Parses "2023-08-31T12:29:47" (taken as UTC: sacct prints the cluster's local time without a
// zone, and rightsize compares times within one cluster). "None", "Unknown" and "" give
// nullopt. Also accepts a plain integer of Unix seconds.
StatusOr<std::optional<int64_t>> ParseSlurmTimestamp(std::string_view text);

// Formats Unix seconds as "2023-08-31T12:29:47" (UTC).
std::string FormatTimestamp(int64_t unix_s);
// Formats seconds as SLURM does: "D-HH:MM:SS" or "HH:MM:SS".
std::string FormatDuration(double seconds);
// Formats bytes with a binary suffix the way --mem accepts it: "48G", "1.5T", "800M".
std::string FormatMemory(int64_t bytes);

// ---- Requests as people write them: the one rounding rule (docs/architecture.md, "Requests").
// Every suggested request, whatever suggests it (predict, submit, diagnose, the job card), is
// rounded up by these, never down, so a suggestion is never below what was computed.
// Memory: to 256 MiB steps below 4 GiB, to whole GiB from 4 GiB; at least 256 MiB.
int64_t RoundMemoryRequest(double bytes);
// Time: to whole minutes (sbatch's --time unit); at least one minute.
int64_t RoundTimeRequest(double seconds);
// CPUs: whole cores; at least one.
int64_t RoundCpuRequest(double cores);
// The value of --mem (and --mem-per-cpu): whole units, as sbatch takes no fractions: "48G"
// when a whole number of GiB, else "800M" (MiB, rounded up).
std::string MemoryFlagValue(int64_t bytes);
// The value of --time: "HH:MM:SS" or "D-HH:MM:SS" of the seconds rounded up to whole minutes.
std::string TimeFlagValue(double seconds);
// A count with thousands separators: 1234567.8 → "1,234,568" (decimals = 0); 12.345 → "12.35"
// (decimals = 2); "unknown" when not finite.
std::string FormatThousands(double value, int decimals);
// A size as a person reads it: "79.15 GiB" from 1 GiB, else "20.0 MiB".
std::string HumanBytes(double bytes);

// What a TRES list says about cores, memory, GPUs and GPU usage.
struct TresSummary {
  std::optional<double> cpus;
  std::optional<int64_t> memory_bytes;
  std::optional<int> nodes;
  std::optional<int> gpus;
  std::string gpu_type;  // "a100"; "mixed" when several types; "" when untyped
  // Usage TRES (TRESUsageInMax/Tot): "gres/gpumem", "gres/gpuutil", "fs/disk", "cpu" time.
  std::optional<int64_t> gpu_memory_bytes;
  std::optional<double> gpu_util_pct;
  std::optional<int64_t> disk_bytes;
  std::optional<double> cpu_seconds;
};
// `mem` values without a suffix are read with `default_mem_unit_bytes` (MiB in ReqTRES and
// AllocTRES, bytes in TRESUsage*). A value that does not parse is an error naming the item.
StatusOr<TresSummary> SummarizeTres(std::string_view text, int64_t default_mem_unit_bytes);

// A SLURM job id as sacct prints it in JobID or JobIDRaw.
struct JobIdParts {
  std::string job;   // the id of the whole job: "123", "123_4" (array task), "123+1" (het)
  std::string step;  // "" for the job line, else "batch", "extern", "interactive", "0", …
  int64_t base = 0;  // the leading number: 123
  std::optional<int64_t> array_task;  // 4 in "123_4"
  std::string array_spec;             // "[1-5%2]" in "123_[1-5%2]" (pending array)
  std::optional<int> het_offset;      // 1 in "123+1"
};
// Parses "123", "123_4", "123_[1-5]", "123+1", "123.batch", "123_4.extern", "123+1.0".
StatusOr<JobIdParts> ParseJobId(std::string_view text);

// Parses a plain integer or decimal, with no trailing garbage.
std::optional<int64_t> ParseInt(std::string_view text);
std::optional<double> ParseDouble(std::string_view text);

// ASCII letters compared without case ("Unlimited" == "UNLIMITED"); other bytes exactly.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Strips ASCII whitespace from both ends.
std::string_view Trim(std::string_view text);

// The pieces of `line` between occurrences of `delim` (n delimiters, n + 1 pieces). The first
// form reuses `out`'s storage, for hot loops.
void Split(std::string_view line, std::string_view delim, std::vector<std::string_view>* out);
std::vector<std::string_view> Split(std::string_view line, std::string_view delim);

// A short quoted rendering of untrusted text for error messages (escapes, cut at 40 chars).
std::string Quote(std::string_view text);

}  // namespace rightsize

namespace rightsize {
// Parses a point in time for --since/--until: an age relative to `now_s` ("14d", "12h", "30m",
// "2w", "90s") or a date ("2024-01-31", "2024-01-31T08:00:00", taken as UTC).
StatusOr<int64_t> ParseTimeSpec(std::string_view text, int64_t now_s);
}  // namespace rightsize
