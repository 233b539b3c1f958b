#include "predict/eval.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/json_text.h"
#include "core/scoped_path.h"
#include "core/units.h"
#include "model/target.h"
#include "predict/cluster.h"

namespace rightsize {

namespace {

std::string Pct(double v) { return fmt::format("{:.1f}%", 100 * v); }

}  // namespace

StatusOr<EvalOutput> EvalHistory(Store* store, EvalRequest request) {
  EvalOutput out;
  std::vector<JobRecord> jobs;
  ClusterContext context;
  if (!request.trace.empty()) {
    RS_ASSIGN_OR_RETURN(LoadedTrace loaded,
                        LoadTrace(request.trace, request.format, request.cluster));
    out.skipped_note = std::move(loaded.skipped_note);
    jobs = std::move(loaded.jobs);
    context = std::move(loaded.context);
    out.what = request.trace;
  } else {
    if (store == nullptr) return Status::InvalidArgument("eval: give a trace or a store");
    RS_ASSIGN_OR_RETURN(std::string cluster, PickCluster(*store, request.cluster));
    RS_ASSIGN_OR_RETURN(jobs, LoadJobs(*store, cluster));
    context = ContextFor(*store, cluster);
    out.what = fmt::format("cluster {}", cluster);
    // Each job's own code, read at its submission: the replay compares it with its program's
    // previous run's.
    RS_RETURN_IF_ERROR(store->ScanJobCode(cluster, [&](const StoredJobCode& c) {
      request.options.code.emplace(c.job_id, ReadCode(c.facts, c.estimate, c.program, c.code_hash));
      return true;
    }));
  }
  std::ofstream jobs_out;
  std::string jobs_tmp = request.jobs_path + ".partial";
  if (!request.jobs_path.empty()) {
    jobs_out.open(jobs_tmp, std::ios::trunc);
    if (!jobs_out) {
      return Status::IoError(
          fmt::format("--jobs {}: cannot write: {}", request.jobs_path, std::strerror(errno)));
    }
  }
  // The partial --jobs file goes unless the replay finished and renamed it.
  ScopedPath partial(jobs_out.is_open() ? jobs_tmp : std::string());
  if (jobs_out.is_open()) {
    request.options.on_scored_job = [&jobs_out](const nlohmann::ordered_json& j) {
      // A user or job name that is not UTF-8 must not end the replay.
      jobs_out << JsonText(j) << '\n';
    };
  }
  RS_ASSIGN_OR_RETURN(out.doc, Replay(std::move(jobs), context, request.options));
  if (jobs_out.is_open()) {
    jobs_out.close();
    if (!jobs_out) {
      return Status::IoError(fmt::format("--jobs {}: write failed", request.jobs_path));
    }
    std::error_code ec;
    std::filesystem::rename(jobs_tmp, request.jobs_path, ec);
    if (ec) return Status::IoError(fmt::format("--jobs {}: {}", request.jobs_path, ec.message()));
    partial.Release();
  }
  out.doc["input"] = out.what;
  return out;
}

std::string EvalText(const std::string& what, const nlohmann::json& r) {
  std::string out;
  out += fmt::format(
      "Replay of {}: {} jobs, scored on the later {:.0f}%, retrained every {} ({} "
      "retrains, risk correction {}, {:.1f} s)\n",
      what, r["jobs"].get<int64_t>(), 100 * r["test_fraction"].get<double>(),
      FormatDuration(r["retrain_every_s"].get<double>()), r["retrains"].get<int>(),
      r["correct_every_s"].get<double>() > 0
          ? "every " + FormatDuration(r["correct_every_s"].get<double>())
          : std::string("at retrains"),
      r["seconds"].get<double>());
  for (const auto& item : r["targets"].items()) {
    const std::string& name = item.key();
    const nlohmann::json& t = item.value();
    auto target = TargetFromName(name);
    auto fmt_v = [&](double v) {
      return target && std::string_view(t["unit"].get<std::string>()) != "%"
                 ? FormatTargetValue(*target, v)
                 : fmt::format("{:.1f}", v);
    };
    out += fmt::format("\n{} ({} jobs scored)\n", name, t["n"].get<int64_t>());
    out += fmt::format("  {:<12} {:>14} {:>7} {:>9}\n", "predictor", "MAE", "AEA", "under");
    auto row = [&](const std::string& label, const nlohmann::json& m) {
      out += fmt::format("  {:<12} {:>14} {:>7.3f} {:>9}\n", label, fmt_v(m["mae"].get<double>()),
                         m["aea"].get<double>(), Pct(m["underestimation"].get<double>()));
    };
    row("rightsize", t["model"]);
    row("  trees only", t["learned"]);
    for (const auto& [b, m] : t["baselines"].items()) row(b, m);
    if (!t["model"]["coverage80"].is_null()) {
      const auto& m = t["model"];
      std::string pinball = "none (no job had a bounded 80% interval)";
      if (!m["pinball"].is_null()) {
        pinball = fmt_v(m["pinball"].get<double>());
        int64_t with_interval = 0;
        for (const auto& g : m["by_history"]) with_interval += g["n"].get<int64_t>();
        if (m["pinball_n"].get<int64_t>() < with_interval) {
          pinball += fmt::format(" (over the {} jobs whose 80% interval was bounded)",
                                 m["pinball_n"].get<int64_t>());
        }
      }
      out += fmt::format("  interval coverage: 80% -> {}, 95% -> {}; pinball loss {}\n",
                         Pct(m["coverage80"].get<double>()), Pct(m["coverage95"].get<double>()),
                         pinball);
      std::string groups;
      for (const auto& g : t["model"]["by_history"]) {
        groups += fmt::format("{}{} {} / {} ({} jobs)", groups.empty() ? "" : "; ",
                              g["history"].get<std::string>(), Pct(g["coverage80"].get<double>()),
                              Pct(g["coverage95"].get<double>()), g["n"].get<int64_t>());
      }
      out += fmt::format("  by the user's past jobs of this target: {}\n", groups);
    }
    if (!t["saving_curve"].empty()) {
      out += fmt::format(
          "  saving curve (net share of requested resource-time freed / jobs killed):\n");
      out += fmt::format("  {:>6} {:>20} {:>20}\n", "risk", "rightsize", "last2");
      for (const auto& c : t["saving_curve"]) {
        out += fmt::format("  {:>6} {:>20} {:>20}\n", Pct(c["risk"].get<double>()),
                           fmt::format("{} / {}", Pct(c["model_saved"].get<double>()),
                                       Pct(c["model_killed"].get<double>())),
                           fmt::format("{} / {}", Pct(c["last2_saved"].get<double>()),
                                       Pct(c["last2_killed"].get<double>())));
      }
    }
  }
  return out;
}

}  // namespace rightsize
