// Energy per job and per window: kWh from the job record's joules, CO2-equivalent at the price
// file's grid factor, and what the unused GPU reservation cost while those GPUs idled.
//
// Rules (the README and docs/report-schema.md copy them):
//   A job's energy is what its record measured: `node_energy_j` (SLURM's ConsumedEnergyRaw,
//   whole nodes) when known, else its GPUs' plus its CPU share's (the agent: NVML, RAPL), each
//   part only when known. A job with none of them is counted in jobs_without_energy, never as 0.
//   CO2e = kWh x PriceTable::grid_gco2e_per_kwh / 1000 (kg); with no grid factor in the price
//   file, CO2e is unknown and not shown.
//   Unused reservation: for each GPU job with a known utilisation, its unused GPU-hours
//   (GPUs x hours x (1 - util)) x the idle power of its GPU type (PriceTable gpus.<type>.idle_w,
//   the site's own NVML reading of an idle GPU) / 1000. A type without an idle figure leaves
//   those hours' energy unknown: listed, never guessed.
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "report/prices.h"

namespace rightsize {

inline constexpr double kJoulesPerKwh = 3.6e6;

// A job's measured energy in joules by the rule above; nullopt when nothing was measured.
std::optional<double> JobEnergyJ(const JobRecord& job);
// kg CO2e of `kwh` at the table's grid factor; nullopt without one.
std::optional<double> Co2eKg(double kwh, const PriceTable& prices);

struct EnergySummary {
  int64_t jobs_with_energy = 0, jobs_without_energy = 0;
  int64_t jobs_with_gpu_energy = 0, jobs_with_cpu_energy = 0, jobs_with_node_energy = 0;
  std::optional<double> kwh;  // every job with energy, by JobEnergyJ
  std::optional<double> gpu_kwh, cpu_kwh, node_kwh;
  std::optional<double> co2e_kg;
  std::optional<double> grid_gco2e_per_kwh;
  std::string grid_source;
  // The unused GPU reservation at idle power.
  std::optional<double> unused_gpu_hours;  // over GPU jobs with a known utilisation
  std::optional<double> unused_gpu_kwh;    // those whose type has an idle power
  std::optional<double> unused_gpu_co2e_kg;
  double unused_gpu_hours_idle_unknown = 0;  // hours of types without an idle figure
  std::vector<std::string> gpu_types_without_idle_power;
};

class EnergyAccumulator {
 public:
  explicit EnergyAccumulator(const PriceTable& prices) : prices_(prices) {}
  // A job that passed the report's checks, with elapsed_s > 0.
  void Add(const JobRecord& job);
  EnergySummary Finish() const;

 private:
  const PriceTable& prices_;
  EnergySummary s_;
  double kwh_ = 0, gpu_kwh_ = 0, cpu_kwh_ = 0, node_kwh_ = 0;
  double unused_h_ = 0, unused_kwh_ = 0;
  int64_t unused_jobs_ = 0, unused_known_jobs_ = 0;
  std::set<std::string> no_idle_types_;
};

// "0.0123 kWh", "4.56 kWh", "1,234 kWh", "1.2M kWh".
std::string FormatKwh(double kwh);

// The job card's energy: one text line ("  Energy: 1.00 kWh (GPUs 0.80 kWh, …), 0.35 kg CO2e
// at 350 g/kWh.\n") and its "energy" object (joules, kWh and CO2e; null when unknown).
std::string JobEnergyText(const JobRecord& job, const PriceTable& prices);
nlohmann::json JobEnergyJson(const JobRecord& job, const PriceTable& prices);

// The report's "energy" object (docs/report-schema.md) and its text: one sentence each for the
// measured energy, the CO2e, and the unused GPU reservation.
nlohmann::json EnergyJson(const EnergySummary& e);
std::vector<std::string> EnergySentences(const EnergySummary& e);

}  // namespace rightsize
