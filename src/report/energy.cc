#include "report/energy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/render.h"

namespace rightsize {

std::optional<double> JobEnergyJ(const JobRecord& job) {
  const ResourceUsage& u = job.usage;
  if (u.node_energy_j) return u.node_energy_j;
  if (!u.gpu_energy_j && !u.cpu_energy_j) return std::nullopt;
  return u.gpu_energy_j.value_or(0) + u.cpu_energy_j.value_or(0);
}

std::optional<double> Co2eKg(double kwh, const PriceTable& prices) {
  if (!prices.grid_gco2e_per_kwh) return std::nullopt;
  return kwh * *prices.grid_gco2e_per_kwh / 1000.0;
}

void EnergyAccumulator::Add(const JobRecord& job) {
  const ResourceUsage& u = job.usage;
  if (auto j = JobEnergyJ(job)) {
    ++s_.jobs_with_energy;
    kwh_ += *j / kJoulesPerKwh;
  } else {
    ++s_.jobs_without_energy;
  }
  if (u.gpu_energy_j) {
    ++s_.jobs_with_gpu_energy;
    gpu_kwh_ += *u.gpu_energy_j / kJoulesPerKwh;
  }
  if (u.cpu_energy_j) {
    ++s_.jobs_with_cpu_energy;
    cpu_kwh_ += *u.cpu_energy_j / kJoulesPerKwh;
  }
  if (u.node_energy_j) {
    ++s_.jobs_with_node_energy;
    node_kwh_ += *u.node_energy_j / kJoulesPerKwh;
  }
  auto gpus = job.AllocatedGpus();
  if (!gpus || *gpus <= 0 || !u.gpu_util_pct || !u.elapsed_s) return;
  const double util = std::clamp(*u.gpu_util_pct, 0.0, 100.0) / 100.0;
  const double unused_h = *gpus * (*u.elapsed_s / 3600.0) * (1 - util);
  ++unused_jobs_;
  unused_h_ += unused_h;
  if (auto idle_w = prices_.GpuIdleW(job.GpuType())) {
    ++unused_known_jobs_;
    unused_kwh_ += unused_h * *idle_w / 1000.0;
  } else {
    s_.unused_gpu_hours_idle_unknown += unused_h;
    no_idle_types_.insert(job.GpuType().empty() ? "(untyped)" : LowerAscii(job.GpuType()));
  }
}

EnergySummary EnergyAccumulator::Finish() const {
  EnergySummary s = s_;
  auto known = [](int64_t n, double v) { return n > 0 ? std::optional<double>(v) : std::nullopt; };
  s.kwh = known(s.jobs_with_energy, kwh_);
  s.gpu_kwh = known(s.jobs_with_gpu_energy, gpu_kwh_);
  s.cpu_kwh = known(s.jobs_with_cpu_energy, cpu_kwh_);
  s.node_kwh = known(s.jobs_with_node_energy, node_kwh_);
  s.grid_gco2e_per_kwh = prices_.grid_gco2e_per_kwh;
  if (auto it = prices_.sources.find("grid_gco2e_per_kwh"); it != prices_.sources.end()) {
    s.grid_source = it->second;
  }
  if (s.kwh) s.co2e_kg = Co2eKg(*s.kwh, prices_);
  s.unused_gpu_hours = known(unused_jobs_, unused_h_);
  s.unused_gpu_kwh = known(unused_known_jobs_, unused_kwh_);
  if (s.unused_gpu_kwh) s.unused_gpu_co2e_kg = Co2eKg(*s.unused_gpu_kwh, prices_);
  s.gpu_types_without_idle_power.assign(no_idle_types_.begin(), no_idle_types_.end());
  return s;
}

std::string FormatKwh(double kwh) {
  if (std::fabs(kwh) >= 100) return FormatAmount(kwh) + " kWh";
  if (std::fabs(kwh) >= 1 || kwh == 0) return fmt::format("{:.2f} kWh", kwh);
  return fmt::format("{:.3g} kWh", kwh);
}

namespace {

nlohmann::json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string Kg(double kg) {
  return kg >= 100 ? FormatAmount(kg) + " kg" : fmt::format("{:.3g} kg", kg);
}

}  // namespace

std::string JobEnergyText(const JobRecord& job, const PriceTable& prices) {
  std::optional<double> j = JobEnergyJ(job);
  if (!j) {
    return "\n  Energy: unknown (no NVML energy or RAPL reading from the agent, and no SLURM "
           "ConsumedEnergyRaw).\n";
  }
  const ResourceUsage& u = job.usage;
  std::string parts;
  auto part = [&](const char* what, const std::optional<double>& joules) {
    if (joules) {
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", what,
                           FormatKwh(*joules / kJoulesPerKwh));
    }
  };
  part("GPUs", u.gpu_energy_j);
  part("CPU share", u.cpu_energy_j);
  part("nodes (SLURM)", u.node_energy_j);
  const double kwh = *j / kJoulesPerKwh;
  std::string out = fmt::format("\n  Energy: {} ({})", FormatKwh(kwh), parts);
  if (auto kg = Co2eKg(kwh, prices)) {
    out += fmt::format(", {} CO2e at {:g} g/kWh", Kg(*kg), *prices.grid_gco2e_per_kwh);
  }
  return out + ".\n";
}

nlohmann::json JobEnergyJson(const JobRecord& job, const PriceTable& prices) {
  std::optional<double> j = JobEnergyJ(job);
  auto kwh = [](const std::optional<double>& joules) {
    return joules ? nlohmann::json(*joules / kJoulesPerKwh) : nlohmann::json(nullptr);
  };
  std::optional<double> kg = j ? Co2eKg(*j / kJoulesPerKwh, prices) : std::nullopt;
  return {{"joules", OrNull(j)},
          {"kwh", kwh(j)},
          {"gpu_kwh", kwh(job.usage.gpu_energy_j)},
          {"cpu_kwh", kwh(job.usage.cpu_energy_j)},
          {"node_kwh", kwh(job.usage.node_energy_j)},
          {"grid_gco2e_per_kwh", OrNull(prices.grid_gco2e_per_kwh)},
          {"co2e_kg", OrNull(kg)}};
}

nlohmann::json EnergyJson(const EnergySummary& e) {
  return {
      {"jobs_with_energy", e.jobs_with_energy},
      {"jobs_without_energy", e.jobs_without_energy},
      {"jobs_with_gpu_energy", e.jobs_with_gpu_energy},
      {"jobs_with_cpu_energy", e.jobs_with_cpu_energy},
      {"jobs_with_node_energy", e.jobs_with_node_energy},
      {"kwh", OrNull(e.kwh)},
      {"gpu_kwh", OrNull(e.gpu_kwh)},
      {"cpu_kwh", OrNull(e.cpu_kwh)},
      {"node_kwh", OrNull(e.node_kwh)},
      {"grid_gco2e_per_kwh", OrNull(e.grid_gco2e_per_kwh)},
      {"grid_source", e.grid_source},
      {"co2e_kg", OrNull(e.co2e_kg)},
      {"unused_gpu_hours", OrNull(e.unused_gpu_hours)},
      {"unused_gpu_kwh", OrNull(e.unused_gpu_kwh)},
      {"unused_gpu_co2e_kg", OrNull(e.unused_gpu_co2e_kg)},
      {"unused_gpu_hours_idle_power_unknown", e.unused_gpu_hours_idle_unknown},
      {"gpu_types_without_idle_power", e.gpu_types_without_idle_power},
  };
}

std::vector<std::string> EnergySentences(const EnergySummary& e) {
  std::vector<std::string> out;
  if (!e.kwh) {
    out.push_back(
        "Energy: unknown: no job in the window has a measured energy (the agent's NVML and "
        "RAPL readings, or SLURM's ConsumedEnergyRaw).");
  } else {
    std::string parts;
    auto part = [&](const char* what, const std::optional<double>& kwh, int64_t jobs) {
      if (!kwh) return;
      parts += fmt::format("{}{} {} over {} job{}", parts.empty() ? "" : ", ", what,
                           FormatKwh(*kwh), jobs, jobs == 1 ? "" : "s");
    };
    part("GPUs (NVML)", e.gpu_kwh, e.jobs_with_gpu_energy);
    part("CPU share (RAPL)", e.cpu_kwh, e.jobs_with_cpu_energy);
    part("nodes (SLURM)", e.node_kwh, e.jobs_with_node_energy);
    out.push_back(fmt::format("Energy: {} measured for {} of {} jobs ({}).", FormatKwh(*e.kwh),
                              e.jobs_with_energy, e.jobs_with_energy + e.jobs_without_energy,
                              parts));
  }
  if (!e.grid_gco2e_per_kwh) {
    out.push_back("CO2e: not shown: the price file gives no grid_gco2e_per_kwh.");
  } else if (e.co2e_kg) {
    out.push_back(fmt::format("CO2e: {} at {:g} g/kWh{}.", Kg(*e.co2e_kg), *e.grid_gco2e_per_kwh,
                              e.grid_source.empty() ? "" : " (" + e.grid_source + ")"));
  }
  if (!e.unused_gpu_hours) return out;
  std::string idle =
      e.unused_gpu_kwh
          ? fmt::format(
                "cost {} where the GPUs idled{}", FormatKwh(*e.unused_gpu_kwh),
                e.unused_gpu_co2e_kg ? fmt::format(" ({} CO2e)", Kg(*e.unused_gpu_co2e_kg)) : "")
          : std::string("cost an unknown energy where the GPUs idled");
  std::string unknown;
  if (!e.gpu_types_without_idle_power.empty()) {
    std::string types;
    for (const auto& t : e.gpu_types_without_idle_power) {
      types += (types.empty() ? "" : ", ") + SafeTerminalText(t, 24);
    }
    unknown = fmt::format(
        "; {} GPU-hours of types without an idle power ({}) are left unknown: give "
        "gpus.<type>.idle_w in the price file",
        FormatAmount(e.unused_gpu_hours_idle_unknown), types);
  }
  out.push_back(fmt::format("The unused GPU reservation ({} GPU-hours) {}{}.",
                            FormatAmount(*e.unused_gpu_hours), idle, unknown));
  return out;
}

}  // namespace rightsize
