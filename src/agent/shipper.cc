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
#include "remote_write/remote_write.h"

namespace rightsize {
namespace {

// Writes `data` to a temporary name and renames it: a crash leaves the whole file or none.
bool WriteWhole(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

// The requests of a .rw spool file ("<bytes>\n<request>" each); nullopt when it is damaged.
std::optional<std::vector<std::string>> ParseRemoteWrites(const std::string& data) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < data.size()) {
    size_t nl = data.find('\n', at);
    if (nl == std::string::npos) return std::nullopt;
    auto n = ParseInt(data.substr(at, nl - at));
    if (!n || *n < 0 || static_cast<size_t>(*n) > data.size() - nl - 1) return std::nullopt;
    out.push_back(data.substr(nl + 1, static_cast<size_t>(*n)));
    at = nl + 1 + static_cast<size_t>(*n);
  }
  return out;
}

std::optional<std::string> ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream body;
  body << in.rdbuf();
  if (!in && !in.eof()) return std::nullopt;
  return body.str();
}

}  // namespace

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
  Batch b{last_seq_, "", "", 0, {}, "", 0, true};
  for (const auto& t : jobs) {
    for (const auto& [metric, points] : t.samples) {
      b.samples += std::count_if(points.begin(), points.end(),
                                 [](const Sample& p) { return std::isfinite(p.value); });
    }
  }
  if (!options_.tsdb_write_url.empty()) {
    // The samples by remote write, the rest to the server.
    auto bodies = EncodeRemoteWrite(jobs);
    if (bodies.ok()) {
      b.remote_writes = std::move(*bodies);
      for (auto& t : jobs) t.samples.clear();
      // Only what the server does not have yet: without a record to store it would not be
      // posted at all (agent/sent_records.h).
      sent_records_.Filter(&jobs, &energy_before_j, now_ms);
      b.post = !jobs.empty();
    } else {  // cannot happen short of memory: the server gets them as without a TSDB
      stats_.last_error = bodies.status().ToString();
    }
  }
  b.body = JsonText(TelemetryBatchJson(options_.agent, last_seq_, jobs, energy_before_j));
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
  std::unique_ptr<RemoteWriteClient> tsdb;
  if (!options_.tsdb_write_url.empty()) {
    auto created = RemoteWriteClient::Create(options_.tsdb_write_url, options_.timeout_s);
    if (created.ok()) tsdb = std::move(created.value());  // Create() checked the URL
  }
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
    // The samples first: the server's batch waits until the TSDB has them.
    Status written = Status::Ok();
    size_t bodies_sent = 0;
    for (const std::string& body : batch.remote_writes) {
      if (tsdb == nullptr) break;
      written = tsdb->Post(body, static_cast<size_t>(batch.samples));
      if (!written.ok()) break;
      ++bodies_sent;
    }
    bool refused = !written.ok() && tsdb->refused_for_good();
    std::optional<httplib::Result> posted;
    if (written.ok() || refused) {
      // Done with the TSDB whatever the server answers.
      lock.Lock();
      if (!queue_.empty() && queue_.front().seq == batch.seq) {
        Batch& front = queue_.front();
        ForgetSamples(front);
        if (refused) front.samples = 0;
      }
      if (refused) {
        stats_.last_error = written.ToString();
        fmt::print(stderr, "rightsize agent: {}; its samples are dropped\n", stats_.last_error);
      }
      if (!batch.post) {
        // Nothing for the server: done once the TSDB has the samples.
        in_flight_ = false;
        if (!queue_.empty() && queue_.front().seq == batch.seq) {
          Forget(queue_.front());
          queue_.pop_front();
        }
        ++stats_.sent;
        stats_.samples_delivered += refused ? 0 : batch.samples;
        backoff_s = 1;
        stats_.queued = static_cast<int64_t>(queue_.size());
        cv_.NotifyAll();
        continue;
      }
      lock.Unlock();
      posted = clients[current]->Post("/api/v1/telemetry", headers, batch.body, "application/json");
    }
    lock.Lock();
    in_flight_ = false;
    if (!posted) {
      // The TSDB cannot take them now: keep the ones it has out of the next try.
      if (!queue_.empty() && queue_.front().seq == batch.seq) {
        auto& rw = queue_.front().remote_writes;
        rw.erase(rw.begin(), rw.begin() + static_cast<ptrdiff_t>(bodies_sent));
      }
      stats_.last_error = written.ToString();
      ++stats_.failed_attempts;
      auto until = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(backoff_s));
      while (!stop_ && cv_.WaitUntil(lock, until)) {
      }
      backoff_s = std::min(backoff_s * 2, 60.0);
      stats_.queued = static_cast<int64_t>(queue_.size());
      cv_.NotifyAll();
      continue;
    }
    if (refused) batch.samples = 0;
    httplib::Result& res = *posted;
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
    if (p.extension() == ".rw" && !fs::exists(fs::path(p).replace_extension(".json"), ec)) {
      fs::remove(p, ec);  // a batch whose .json a crash did not let be written
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
    auto body = ReadWhole(path);
    if (!body) continue;
    Batch b{seq, std::move(*body), path.string(), 0, {}, "", 0, true};
    spool_bytes_ += static_cast<int64_t>(b.body.size());
    // Its samples, when the TSDB did not have them yet.
    fs::path rw_path = fs::path(path).replace_extension(".rw");
    if (auto rw = ReadWhole(rw_path)) {
      auto requests = ParseRemoteWrites(*rw);
      if (requests) {
        b.remote_writes = std::move(*requests);
        b.rw_file = rw_path.string();
        b.rw_bytes = static_cast<int64_t>(rw->size());
        spool_bytes_ += b.rw_bytes;
      } else {
        fmt::print(stderr, "rightsize agent: {} is damaged; the samples in it are dropped\n",
                   rw_path.string());
        fs::remove(rw_path, ec);
      }
    }
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
  if (!batch.remote_writes.empty()) {
    // Each request as "<bytes>\n<request>", before the .json that names the batch.
    std::string rw;
    for (const std::string& body : batch.remote_writes) {
      rw += fmt::format("{}\n", body.size()) + body;
    }
    std::string rw_path = fmt::format("{}/{}.rw", options_.spool_dir, batch.seq);
    if (!WriteWhole(rw_path, rw)) {
      ++stats_.spool_errors;
      return;
    }
    batch.rw_file = rw_path;
    batch.rw_bytes = static_cast<int64_t>(rw.size());
    spool_bytes_ += batch.rw_bytes;
  }
  std::string path = fmt::format("{}/{}.json", options_.spool_dir, batch.seq);
  if (!WriteWhole(path, batch.body)) {
    ++stats_.spool_errors;
    return;
  }
  batch.file = path;
  spool_bytes_ += static_cast<int64_t>(batch.body.size());
}

void Shipper::Forget(const Batch& batch) {
  std::error_code ec;
  if (!batch.rw_file.empty()) {
    std::filesystem::remove(batch.rw_file, ec);
    spool_bytes_ -= batch.rw_bytes;
  }
  if (batch.file.empty()) return;
  std::filesystem::remove(batch.file, ec);
  spool_bytes_ -= static_cast<int64_t>(batch.body.size());
}

void Shipper::ForgetSamples(Batch& batch) {
  batch.remote_writes.clear();
  if (batch.rw_file.empty()) return;
  std::error_code ec;
  std::filesystem::remove(batch.rw_file, ec);
  spool_bytes_ -= batch.rw_bytes;
  batch.rw_file.clear();
  batch.rw_bytes = 0;
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
