#include "agent/shipper.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "core/json_text.h"
#include "core/units.h"

namespace rightsize {

nlohmann::json TelemetryBatchJson(
    const std::string& agent, int64_t seq, const std::vector<JobTelemetry>& jobs,
    const std::vector<std::map<std::string, double>>& energy_before_j) {
  nlohmann::json entries = nlohmann::json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobTelemetry& t = jobs[i];
    nlohmann::json samples = nlohmann::json::object();
    for (const auto& [metric, points] : t.samples) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& p : points) {
        if (std::isfinite(p.value)) arr.push_back({static_cast<double>(p.t_ms) / 1000.0, p.value});
      }
      samples[metric] = std::move(arr);
    }
    nlohmann::json e = {{"job", t.job}, {"samples", std::move(samples)}};
    if (!t.stacks.empty()) e["stacks"] = t.stacks;
    if (i < energy_before_j.size() && !energy_before_j[i].empty()) {
      e["energy_before_j"] = energy_before_j[i];
    }
    if (t.diagnosis) {
      auto doc = nlohmann::json::parse(t.diagnosis->document, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_discarded()) e["diagnosis"] = std::move(doc);
    }
    entries.push_back(std::move(e));
  }
  return {{"schema", "rightsize.telemetry/v1"}, {"agent", agent}, {"seq", seq}, {"jobs", entries}};
}

StatusOr<std::unique_ptr<Shipper>> Shipper::Create(ShipperOptions options) {
  auto check = [](std::string& url) -> Status {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return Status::InvalidArgument(
          "--server: expected http://HOST:PORT or https://HOST:PORT, got " + url);
    }
    while (!url.empty() && url.back() == '/') url.pop_back();
    return Status::Ok();
  };
  RS_RETURN_IF_ERROR(check(options.url));
  for (auto& url : options.more_urls) RS_RETURN_IF_ERROR(check(url));
  std::unique_ptr<Shipper> s(new Shipper(std::move(options)));
  if (!s->options_.spool_dir.empty()) {
    MutexLock lock(s->mu_);
    RS_RETURN_IF_ERROR(s->LoadSpool());
  }
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  return s;
}

Shipper::Shipper(ShipperOptions options) : options_(std::move(options)) {}

Shipper::~Shipper() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void Shipper::Enqueue(std::vector<JobTelemetry> jobs, int64_t now_ms) {
  if (jobs.empty()) return;
  MutexLock lock(mu_);
  // Strictly increasing across restarts too (the server keeps each agent's last one).
  last_seq_ = std::max(last_seq_ + 1, now_ms);
  std::vector<std::map<std::string, double>> energy_before_j(jobs.size());
  if (energy_sent_.size() > kMaxEnergyJobs) energy_sent_.clear();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobTelemetry& t = jobs[i];
    std::pair<std::string, std::string> key{t.job.cluster, t.job.job_id};
    auto sent = energy_sent_.find(key);
    if (sent != energy_sent_.end()) energy_before_j[i] = sent->second;
    for (const auto& [metric, points] : t.samples) {
      if (!metric.ends_with("_energy_j") || points.empty()) continue;
      if (!std::isfinite(points.back().value)) continue;
      energy_sent_[key][metric] = points.back().value;
    }
    if (t.job.end_time) energy_sent_.erase(key);
  }
  Batch b{last_seq_, JsonText(TelemetryBatchJson(options_.agent, last_seq_, jobs, energy_before_j)),
          ""};
  for (const auto& t : jobs) {
    for (const auto& [metric, points] : t.samples) {
      b.samples += std::count_if(points.begin(), points.end(),
                                 [](const Sample& p) { return std::isfinite(p.value); });
    }
  }
  stats_.samples_made += b.samples;
  Spool(b);
  queue_.push_back(std::move(b));
  while (queue_.size() > options_.max_queued) {
    Forget(queue_.front());
    queue_.pop_front();
    ++stats_.dropped;
  }
  TrimSpool();
  stats_.queued = static_cast<int64_t>(queue_.size());
  cv_.NotifyAll();
}

Shipper::Stats Shipper::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

bool Shipper::Flush(double timeout_s) {
  auto until = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(timeout_s));
  MutexLock lock(mu_);
  while (!queue_.empty() || in_flight_) {
    if (!cv_.WaitUntil(lock, until)) return queue_.empty() && !in_flight_;
  }
  return true;
}

void Shipper::Run() {
  std::vector<std::string> urls = {options_.url};
  urls.insert(urls.end(), options_.more_urls.begin(), options_.more_urls.end());
  std::vector<std::unique_ptr<httplib::Client>> clients;
  auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(options_.timeout_s));
  for (const auto& url : urls) {
    auto client = std::make_unique<httplib::Client>(url);
    client->set_compress(true);  // gzip request bodies (Content-Encoding: gzip)
    client->set_connection_timeout(timeout);
    client->set_read_timeout(timeout);
    client->set_write_timeout(timeout);
    client->set_keep_alive(true);
    client->set_tcp_nodelay(true);  // else each batch on a kept-alive connection waits for an ACK
    clients.push_back(std::move(client));
  }
  httplib::Headers headers;
  if (!options_.token.empty()) headers.emplace("Authorization", "Bearer " + options_.token);
  double backoff_s = 1;
  size_t current = 0;         // the server the batches go to
  size_t failed_in_turn = 0;  // servers that failed one after the other (all: back off)
  MutexLock lock(mu_);
  while (true) {
    while (!stop_ && queue_.empty()) cv_.Wait(lock);
    if (stop_) break;
    Batch batch = queue_.front();
    in_flight_ = true;
    lock.Unlock();
    auto res = clients[current]->Post("/api/v1/telemetry", headers, batch.body, "application/json");
    lock.Lock();
    in_flight_ = false;
    bool done = false;
    if (!res) {
      stats_.last_error =
          fmt::format("cannot reach {}: {}", urls[current], httplib::to_string(res.error()));
    } else if (res->status == 409) {
      // Refused for its number. Either the batch had arrived before (a retry after a lost
      // answer) or the agent's number is behind the server's (another agent with this name, a
      // clock set back, a forged batch) or too far ahead: the server says where it stands.
      switch (Resync(batch, res->body)) {
        case Refusal::kStoredBefore:
          done = true;
          ++stats_.sent;
          stats_.samples_delivered += batch.samples;
          break;
        case Refusal::kRenumbered:
          backoff_s = 1;
          stats_.queued = static_cast<int64_t>(queue_.size());
          continue;  // at once, with its new number
        case Refusal::kWait:
          break;
      }
    } else if (res->status < 300 || res->status == 422) {
      done = true;  // stored (422: the valid part)
      ++stats_.sent;
      stats_.samples_delivered += batch.samples;
      if (res->status == 422) stats_.last_error = "server kept part of a batch: " + res->body;
    } else if (res->status >= 400 && res->status < 500) {
      done = true;  // retrying would fail the same way
      ++stats_.dropped;
      stats_.last_error = fmt::format("server refused a batch ({}): {}", res->status, res->body);
      fmt::print(stderr, "rightsize agent: {}\n", stats_.last_error);
    } else {
      stats_.last_error =
          fmt::format("server error {} from {}: {}", res->status, urls[current], res->body);
    }
    bool unavailable = !done && (!res || res->status >= 500);
    if (unavailable && urls.size() > 1) {
      // Another replica may take it at once; the backoff waits for the whole round.
      size_t next = (current + 1) % urls.size();
      fmt::print(stderr, "rightsize agent: {}; sending to {}\n", stats_.last_error, urls[next]);
      current = next;
      ++stats_.failovers;
      if (++failed_in_turn < urls.size()) {
        ++stats_.failed_attempts;
        continue;
      }
    }
    if (!unavailable) failed_in_turn = 0;
    if (done) {
      if (!queue_.empty() && queue_.front().seq == batch.seq) {
        Forget(queue_.front());
        queue_.pop_front();
      }
      backoff_s = 1;
    } else {
      ++stats_.failed_attempts;
      auto until = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(backoff_s));
      while (!stop_ && cv_.WaitUntil(lock, until)) {
      }
      backoff_s = std::min(backoff_s * 2, 60.0);
      failed_in_turn = 0;
    }
    stats_.queued = static_cast<int64_t>(queue_.size());
    cv_.NotifyAll();
  }
}

Shipper::Refusal Shipper::Resync(const Batch& sent, const std::string& answer) {
  auto j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  auto number = [&](const char* key) -> std::optional<int64_t> {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
    return j[key].get<int64_t>();
  };
  std::string reason = j.is_object() ? j.value("reason", "") : "";
  std::string error = j.is_object() ? j.value("error", answer) : answer;
  auto last = number("last_seq"), most = number("max_seq");
  if (!last || !most) {
    // A server from before resync: all it says is that it had the batch.
    stats_.last_error = fmt::format("server refused batch {} as a replay: {}", sent.seq, error);
    fmt::print(stderr, "rightsize agent: {}; dropped\n", stats_.last_error);
    return Refusal::kStoredBefore;
  }
  if (reason == "replayed" && *last == sent.seq) {
    return Refusal::kStoredBefore;  // this very batch: it arrived, its answer did not
  }
  // Above the server's last and, if the agent's clock runs ahead, no higher than it accepts.
  int64_t seq = *last < std::numeric_limits<int64_t>::max() ? *last + 1 : *last;
  if (sent.seq > *most) seq = std::max(seq, *most);
  if (seq > *most || seq <= *last) {
    stats_.last_error = fmt::format(
        "server refused batch {} ({}): {}; its last is {} and it takes at most {}: retrying later",
        sent.seq, reason, error, *last, *most);
    fmt::print(stderr, "rightsize agent: {}\n", stats_.last_error);
    return Refusal::kWait;
  }
  ++stats_.resynced;
  stats_.last_error = fmt::format("server refused batch {} ({}): {}; sending it as {}", sent.seq,
                                  reason, error, seq);
  fmt::print(stderr, "rightsize agent: {}\n", stats_.last_error);
  // This batch and those queued behind it, renumbered in order above the server's last.
  for (Batch& b : queue_) {
    if (b.seq >= seq) break;
    Renumber(b, seq++);
  }
  if (!queue_.empty()) last_seq_ = std::max(last_seq_, queue_.back().seq);
  return Refusal::kRenumbered;
}

void Shipper::Renumber(Batch& batch, int64_t seq) {
  auto j = nlohmann::json::parse(batch.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    j["seq"] = seq;
    batch.body = JsonText(j);
  }
  Forget(batch);
  batch.file.clear();
  batch.seq = seq;
  Spool(batch);
}

Status Shipper::LoadSpool() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(options_.spool_dir, ec);
  if (ec) {
    return Status::IoError(
        fmt::format("cannot make the spool folder {}: {}", options_.spool_dir, ec.message()));
  }
  std::vector<std::pair<int64_t, fs::path>> files;
  for (fs::directory_iterator it(options_.spool_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".tmp") {
      fs::remove(p, ec);  // a write that a crash interrupted: never sent, never complete
      continue;
    }
    if (p.extension() != ".json") continue;
    auto seq = ParseInt(p.stem().string());
    if (seq && *seq > 0) files.emplace_back(*seq, p);
  }
  if (ec) {
    return Status::IoError(
        fmt::format("cannot read the spool folder {}: {}", options_.spool_dir, ec.message()));
  }
  std::sort(files.begin(), files.end());
  for (const auto& [seq, path] : files) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream body;
    body << in.rdbuf();
    if (!in && !in.eof()) continue;
    Batch b{seq, body.str(), path.string()};
    spool_bytes_ += static_cast<int64_t>(b.body.size());
    last_seq_ = std::max(last_seq_, seq);
    queue_.push_back(std::move(b));
    ++stats_.recovered;
  }
  stats_.queued = static_cast<int64_t>(queue_.size());
  TrimSpool();
  return Status::Ok();
}

void Shipper::Spool(Batch& batch) {
  if (options_.spool_dir.empty()) return;
  std::string path = fmt::format("{}/{}.json", options_.spool_dir, batch.seq);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(batch.body.data(), static_cast<std::streamsize>(batch.body.size()));
    out.flush();
    if (!out) {
      ++stats_.spool_errors;
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    ++stats_.spool_errors;
    std::filesystem::remove(tmp, ec);
    return;
  }
  batch.file = path;
  spool_bytes_ += static_cast<int64_t>(batch.body.size());
}

void Shipper::Forget(const Batch& batch) {
  if (batch.file.empty()) return;
  std::error_code ec;
  std::filesystem::remove(batch.file, ec);
  spool_bytes_ -= static_cast<int64_t>(batch.body.size());
}

void Shipper::TrimSpool() {
  // The oldest batches go first; the one being sent (the front, maybe in flight) too if need
  // be: the send still completes, its file is just gone.
  while (spool_bytes_ > options_.max_spool_bytes && !queue_.empty()) {
    Forget(queue_.front());
    queue_.pop_front();
    ++stats_.dropped;
  }
  stats_.queued = static_cast<int64_t>(queue_.size());
}

}  // namespace rightsize
