#include "agent/cri_log.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

namespace rightsize {

namespace {

// "2016-10-06T00:17:09.669794202Z" or "…+02:00": a digit, a 'T' and a zone, leniently.
bool LooksLikeTime(std::string_view s) {
  return s.size() >= 20 && s[4] == '-' && s[10] == 'T' &&
         std::isdigit(static_cast<unsigned char>(s[0]));
}

void ParseLine(std::string_view line, CriLog* log, std::string* open_partial) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  ++log->lines;
  if (line.front() == '{') {  // Docker json-file
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("log") && j["log"].is_string()) {
      log->text += j["log"].get<std::string>();  // carries its own "\n" when the line ended
      return;
    }
    ++log->bad_lines;
    return;
  }
  size_t s1 = line.find(' ');
  size_t s2 = s1 == std::string_view::npos ? s1 : line.find(' ', s1 + 1);
  if (s2 == std::string_view::npos || !LooksLikeTime(line.substr(0, s1))) {
    ++log->bad_lines;
    return;
  }
  std::string_view stream = line.substr(s1 + 1, s2 - s1 - 1);
  if (stream != "stdout" && stream != "stderr") {
    ++log->bad_lines;
    return;
  }
  size_t s3 = line.find(' ', s2 + 1);
  std::string_view tags = line.substr(s2 + 1, s3 == std::string_view::npos ? s3 : s3 - s2 - 1);
  std::string_view message = s3 == std::string_view::npos ? "" : line.substr(s3 + 1);
  std::string_view first_tag = tags.substr(0, tags.find(':'));
  if (first_tag == "P") {
    open_partial->append(message);
  } else if (first_tag == "F") {
    log->text += *open_partial;
    open_partial->clear();
    log->text.append(message);
    log->text += '\n';
  } else {
    ++log->bad_lines;
  }
}

struct GzClose {
  void operator()(gzFile f) const noexcept { gzclose(f); }
};

// The rotated file's timestamp ("0.log.20240102-030405[.gz]" → "20240102-030405").
std::string RotationStamp(const std::string& name, const std::string& base) {
  std::string rest = name.substr(base.size() + 1);
  if (rest.size() > 3 && rest.compare(rest.size() - 3, 3, ".gz") == 0) rest.resize(rest.size() - 3);
  return rest;
}

}  // namespace

void ParseCriLog(std::string_view content, CriLog* log, std::string* open_partial) {
  size_t at = 0;
  while (at < content.size()) {
    size_t end = content.find('\n', at);
    if (end == std::string_view::npos) end = content.size();
    ParseLine(content.substr(at, end - at), log, open_partial);
    at = end + 1;
  }
}

void FinishCriLog(CriLog* log, std::string* open_partial) {
  if (open_partial->empty()) return;
  log->text += *open_partial;
  log->text += '\n';
  open_partial->clear();
}

std::vector<std::string> ContainerLogFiles(const std::string& pod_logs_dir,
                                           const std::string& namespace_name,
                                           const std::string& pod, const std::string& pod_uid,
                                           const std::string& container, int restart) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(pod_logs_dir) / (namespace_name + "_" + pod + "_" + pod_uid) / container;
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  auto instance = [&](int n) {
    const std::string base = std::to_string(n) + ".log";
    std::vector<std::pair<std::string, std::string>> rotated;  // (stamp, name)
    bool current = false;
    for (const std::string& name : names) {
      if (name == base) {
        current = true;
      } else if (name.rfind(base + ".", 0) == 0 && name.find(".tmp") == std::string::npos) {
        rotated.emplace_back(RotationStamp(name, base), name);
      }
    }
    std::sort(rotated.begin(), rotated.end());
    std::vector<std::string> files;
    for (const auto& [stamp, name] : rotated) files.push_back((dir / name).string());
    if (current) files.push_back((dir / base).string());
    return files;
  };
  std::vector<std::string> files = instance(restart);
  if (!files.empty()) return files;
  int newest = -1;
  for (const std::string& name : names) {
    size_t dot = name.find(".log");
    if (dot == 0 || dot == std::string::npos) continue;
    if (name.find_first_not_of("0123456789") != dot) continue;
    newest = std::max(newest, std::stoi(name.substr(0, dot)));
  }
  return newest >= 0 ? instance(newest) : files;
}

StatusOr<CriLog> ReadCriLogs(const std::vector<std::string>& files) {
  if (files.empty()) return Status::NotFound("no container log files");
  CriLog log;
  std::string open_partial, pending;
  for (const std::string& file : files) {
    std::unique_ptr<gzFile_s, GzClose> in(gzopen(file.c_str(), "rb"));
    if (!in) return Status::IoError("cannot open container log " + file);
    char buf[1 << 16];
    int n = 0;
    while ((n = gzread(in.get(), buf, sizeof buf)) > 0) {
      pending.append(buf, static_cast<size_t>(n));
      size_t last = pending.rfind('\n');
      if (last == std::string::npos) continue;
      ParseCriLog(std::string_view(pending).substr(0, last + 1), &log, &open_partial);
      pending.erase(0, last + 1);
    }
    if (n < 0) return Status::IoError("cannot read container log " + file);
    // A file ends on a whole log line (the kubelet rotates between lines).
    ParseCriLog(pending, &log, &open_partial);
    pending.clear();
  }
  FinishCriLog(&log, &open_partial);
  return log;
}

}  // namespace rightsize
