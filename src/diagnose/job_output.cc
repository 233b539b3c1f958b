#include "diagnose/job_output.h"

#include <filesystem>

namespace rightsize {

std::string ResolveOutputPattern(const std::string& pattern, const JobOutputHints& hints) {
  const std::string& raw = hints.job_id_raw.empty() ? hints.job_id : hints.job_id_raw;
  std::string array_id, task_id;
  if (size_t us = hints.job_id.find('_'); us != std::string::npos) {
    array_id = hints.job_id.substr(0, us);
    task_id = hints.job_id.substr(us + 1);
  }
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    switch (c) {
      case 'j':
        out += raw;
        break;
      case 'A':
        out += array_id.empty() ? raw : array_id;
        break;
      case 'a':
        out += task_id.empty() ? "4294967294" : task_id;  // SLURM's NO_VAL for a non-array job
        break;
      case 'x':
        out += hints.name;
        break;
      case 'u':
        out += hints.user;
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += c;
    }
  }
  return out;
}

std::string FindJobOutput(const JobOutputHints& hints) {
  const std::string& raw = hints.job_id_raw.empty() ? hints.job_id : hints.job_id_raw;
  std::vector<std::string> candidates;
  if (!hints.out_pattern.empty()) {
    candidates.push_back(ResolveOutputPattern(hints.out_pattern, hints));
  }
  if (!hints.stdout_path.empty()) candidates.push_back(hints.stdout_path);
  candidates.insert(candidates.end(), hints.known.begin(), hints.known.end());
  // An array task's default output is slurm-<array>_<task>.out.
  std::string dashed = hints.job_id.find('_') != std::string::npos ? hints.job_id : raw;
  for (const std::string& dir : hints.dirs) {
    if (dir.empty() || raw.empty()) continue;
    candidates.push_back(dir + "/slurm-" + raw + ".out");
    candidates.push_back(dir + "/slurm-" + dashed + ".out");
  }
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!c.empty() && std::filesystem::is_regular_file(c, ec)) return c;
  }
  return "";
}

}  // namespace rightsize
