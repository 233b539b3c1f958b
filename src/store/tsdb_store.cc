#include "store/tsdb_store.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "remote_write/remote_write.h"

namespace rightsize {
namespace {

constexpr std::string_view kPrefix = "rightsize_job_";
// The latest time a query is evaluated at (2200-01-01): ReadSamples' "up to now" is INT64_MAX.
constexpr int64_t kMaxQueryMs = 7258118400000;
// ReadBuckets: connections to the query API used at once, and the most buckets one range query
// asks for (Prometheus refuses more than 11,000 points a series).
constexpr int kReadConnections = 4;
constexpr int64_t kMaxEngineBuckets = 10000;
// The label that tells a bucket query's series apart ("<metric's index>/<aggregate>"), and the
// longest query sent at once (VictoriaMetrics refuses more than 16 KiB: -search.maxQueryLen).
constexpr const char* kBucketLabel = "rightsize_bucket";
constexpr size_t kMaxQueryChars = 12000;

// A PromQL string literal (double quotes, Go escapes).
std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Selector(const std::string& name, const std::string& cluster,
                     const std::string& job_id) {
  return fmt::format("{}{{cluster={},job_id={}}}", name, Quoted(cluster), Quoted(job_id));
}

std::string Excerpt(const std::string& body) {
  std::string s = body.substr(0, 300);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// Prometheus' JSON numbers are strings ("1.5", "NaN", "+Inf").
bool ParseValue(const std::string& s, double* out) {
  if (s == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else if (s == "+Inf" || s == "Inf") {
    *out = std::numeric_limits<double>::infinity();
  } else if (s == "-Inf") {
    *out = -std::numeric_limits<double>::infinity();
  } else {
    // from_chars: several times strtod's speed (a job page reads tens of thousands of these).
    const char* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, *out);
    if (ec != std::errc() || p != end) return false;
  }
  return true;
}

bool ParseValue(const nlohmann::json& v, double* out) {
  if (v.is_number()) {
    *out = v.get<double>();
    return true;
  }
  return v.is_string() && ParseValue(v.get_ref<const std::string&>(), out);
}

// One series of a matrix answer: the value of the label asked for (empty when absent) and its
// samples, in the answer's order.
struct MatrixSeries {
  std::string label;
  std::vector<Sample> samples;
};

// The series of a successful /api/v1/query or /api/v1/query_range answer of resultType "matrix",
// read without building a JSON tree (the tree of a job page's 23 answers was two thirds of the
// page's CPU). False for anything else (an error, another shape): the caller then reads the
// answer as a tree, which says what is wrong. Samples outside [from_ms, to_ms] are left out.
class MatrixSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  MatrixSax(int64_t from_ms, int64_t to_ms, std::vector<MatrixSeries>* out, std::string label = "")
      : from_ms_(from_ms), to_ms_(to_ms), out_(out), label_(std::move(label)) {}

  bool ok() const { return ok_ && status_ok_ && matrix_; }

  bool null() override { return Value(nullptr, nullptr); }
  bool boolean(bool /*b*/) override { return Value(nullptr, nullptr); }
  bool number_integer(number_integer_t v) override {
    double d = static_cast<double>(v);
    return Value(&d, nullptr);
  }
  bool number_unsigned(number_unsigned_t v) override {
    double d = static_cast<double>(v);
    return Value(&d, nullptr);
  }
  bool number_float(number_float_t v, const string_t& /*s*/) override { return Value(&v, nullptr); }
  bool string(string_t& v) override { return Value(nullptr, &v); }
  bool binary(binary_t& /*v*/) override { return Fail(); }
  bool start_object(std::size_t /*n*/) override {
    Kind kind = Kind::kOther;
    if (stack_.empty()) {
      kind = Kind::kRoot;
    } else if (Top().kind == Kind::kResult) {
      kind = Kind::kSeries;
      out_->emplace_back();
    } else if (Top().kind == Kind::kValues || Top().kind == Kind::kPair) {
      return Fail();  // a sample is [t, "v"]
    } else if (Top().kind == Kind::kRoot && Top().key == Key::kData) {
      kind = Kind::kData;
    } else if (Top().kind == Kind::kSeries && Top().key == Key::kMetric) {
      kind = Kind::kMetric;
    }
    stack_.push_back({kind, Key::kNone, 0});
    return true;
  }
  bool key(string_t& k) override {
    Frame& f = Top();
    f.key = Key::kNone;
    switch (f.kind) {
      case Kind::kRoot:
        f.key = k == "status" ? Key::kStatus : k == "data" ? Key::kData : Key::kNone;
        break;
      case Kind::kData:
        f.key = k == "resultType" ? Key::kResultType : k == "result" ? Key::kResult : Key::kNone;
        break;
      case Kind::kSeries:
        f.key = k == "metric" ? Key::kMetric : k == "values" ? Key::kValues : Key::kNone;
        break;
      case Kind::kMetric:
        f.key = !label_.empty() && k == label_ ? Key::kLabel : Key::kNone;
        break;
      default:
        break;
    }
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    Advance();
    return true;
  }
  bool start_array(std::size_t /*n*/) override {
    Kind kind = Kind::kOther;
    if (!stack_.empty()) {
      const Frame& f = Top();
      if (f.kind == Kind::kPair) return Fail();
      if (f.kind == Kind::kValues) {
        kind = Kind::kPair;
        have_t_ = have_v_ = false;
      } else if (f.kind == Kind::kData && f.key == Key::kResult) {
        kind = Kind::kResult;
      } else if (f.kind == Kind::kSeries && f.key == Key::kValues) {
        kind = Kind::kValues;
      }
    }
    stack_.push_back({kind, Key::kNone, 0});
    return true;
  }
  bool end_array() override {
    if (Top().kind == Kind::kPair) {
      if (!have_t_ || !have_v_ || Top().index != 2 || out_->empty()) return Fail();
      auto t_ms = static_cast<int64_t>(std::llround(t_s_ * 1000));
      if (t_ms >= from_ms_ && t_ms <= to_ms_) out_->back().samples.push_back({t_ms, v_});
    }
    stack_.pop_back();
    Advance();
    return true;
  }
  bool parse_error(std::size_t /*pos*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*e*/) override {
    return Fail();
  }

 private:
  // Where a frame is: the root object, its "data", data's "result" array, a series of it, the
  // series' "metric" and "values", one [t, "v"] of those; anything else is kOther.
  enum class Kind : uint8_t { kRoot, kData, kResult, kSeries, kMetric, kValues, kPair, kOther };
  // An object's last key, where it matters.
  enum class Key : uint8_t {
    kNone,
    kStatus,
    kData,
    kResultType,
    kResult,
    kMetric,
    kValues,
    kLabel
  };
  struct Frame {
    Kind kind = Kind::kOther;
    Key key = Key::kNone;  // of an object: its last key
    size_t index = 0;      // of an array: the element being read
  };
  Frame& Top() { return stack_.back(); }
  void Advance() {
    if (!stack_.empty()) ++stack_.back().index;
  }
  bool Fail() {
    ok_ = false;
    return false;  // stops the parse
  }
  bool Value(const double* number, const std::string* text) {
    if (stack_.empty()) return Fail();  // a bare value
    const Frame& f = Top();
    switch (f.kind) {
      case Kind::kPair:
        if (f.index == 0 && number != nullptr) {
          t_s_ = *number;
          have_t_ = true;
        } else if (f.index == 1 && text != nullptr && ParseValue(*text, &v_)) {
          have_v_ = true;
        } else if (f.index == 1 && number != nullptr) {
          v_ = *number;
          have_v_ = true;
        } else {
          return Fail();
        }
        break;
      case Kind::kValues:
        return Fail();  // a sample is [t, "v"]
      case Kind::kRoot:
        if (f.key == Key::kStatus) status_ok_ = text != nullptr && *text == "success";
        break;
      case Kind::kData:
        if (f.key == Key::kResultType) matrix_ = text != nullptr && *text == "matrix";
        break;
      case Kind::kMetric:
        if (f.key == Key::kLabel && text != nullptr && !out_->empty()) out_->back().label = *text;
        break;
      default:
        break;
    }
    Advance();
    return true;
  }

  int64_t from_ms_, to_ms_;
  std::vector<MatrixSeries>* out_;
  std::string label_;
  std::vector<Frame> stack_;
  bool ok_ = true, status_ok_ = false, matrix_ = false;
  bool have_t_ = false, have_v_ = false;
  double t_s_ = 0, v_ = 0;
};

class TsdbStore final : public Store {
 public:
  TsdbStore(std::unique_ptr<Store> inner, const StoreOptions& options,
            std::unique_ptr<RemoteWriteClient> writer, HttpUrl query)
      : inner_(std::move(inner)),
        query_url_(options.tsdb_query_url),
        query_prefix_(std::move(query.path)),
        writer_(std::move(writer)) {
    for (int i = 0; i < kReadConnections; ++i) {
      auto& reader =
          readers_.emplace_back(std::make_unique<httplib::Client>(query.scheme_host_port));
      reader->set_connection_timeout(std::chrono::seconds(5));
      reader->set_read_timeout(std::chrono::seconds(30));
      reader->set_write_timeout(std::chrono::seconds(30));
      reader->set_keep_alive(true);
      reader->set_tcp_nodelay(true);  // else a kept-alive request waits for a delayed ACK
    }
  }

  Status UpsertJobs(std::span<const JobRecord> jobs) override { return inner_->UpsertJobs(jobs); }
  Status ScanJobs(const JobFilter& filter,
                  const std::function<bool(const JobRecord&)>& fn) override {
    return inner_->ScanJobs(filter, fn);
  }
  StatusOr<JobRecord> GetJob(const std::string& cluster, const std::string& job_id) override {
    return inner_->GetJob(cluster, job_id);
  }
  StatusOr<int64_t> CountJobs(const JobFilter& filter) override {
    return inner_->CountJobs(filter);
  }
  StatusOr<JobList> ListJobs(const JobFilter& filter, const JobPage& page) override {
    return inner_->ListJobs(filter, page);
  }
  StatusOr<std::vector<std::string>> Clusters() override { return inner_->Clusters(); }
  Status PutClusterMeta(const std::string& cluster,
                        const std::map<std::string, std::string>& meta) override {
    return inner_->PutClusterMeta(cluster, meta);
  }
  StatusOr<std::map<std::string, std::string>> GetClusterMeta(const std::string& cluster) override {
    return inner_->GetClusterMeta(cluster);
  }
  Status SetBulkLoad(bool on) override { return inner_->SetBulkLoad(on); }
  bool HistoryChangedSinceLastAsked() override { return inner_->HistoryChangedSinceLastAsked(); }
  StatusOr<int64_t> PutModel(const std::string& cluster, int64_t trained_at, int64_t jobs,
                             const std::string& blob) override {
    return inner_->PutModel(cluster, trained_at, jobs, blob);
  }
  StatusOr<StoredModel> GetModel(const std::string& cluster, int64_t version) override {
    return inner_->GetModel(cluster, version);
  }
  StatusOr<int64_t> LatestModelVersion(const std::string& cluster) override {
    return inner_->LatestModelVersion(cluster);
  }
  Status PutDiagnosis(const StoredDiagnosis& diagnosis) override {
    return inner_->PutDiagnosis(diagnosis);
  }
  StatusOr<StoredDiagnosis> GetDiagnosis(const std::string& cluster,
                                         const std::string& job_id) override {
    return inner_->GetDiagnosis(cluster, job_id);
  }
  StatusOr<int64_t> LastTelemetrySeq(const std::string& agent) override {
    return inner_->LastTelemetrySeq(agent);
  }
  StatusOr<std::map<std::string, int64_t>> GetStacks(const std::string& cluster,
                                                     const std::string& job_id) override {
    return inner_->GetStacks(cluster, job_id);
  }
  Status PutJobCode(const StoredJobCode& code) override { return inner_->PutJobCode(code); }
  StatusOr<StoredJobCode> GetJobCode(const std::string& cluster,
                                     const std::string& job_id) override {
    return inner_->GetJobCode(cluster, job_id);
  }
  Status ScanJobCode(const std::string& cluster,
                     const std::function<bool(const StoredJobCode&)>& fn) override {
    return inner_->ScanJobCode(cluster, fn);
  }
  StatusOr<bool> TryLead(const std::string& role) override { return inner_->TryLead(role); }
  Status PutPrediction(const StoredPrediction& prediction) override {
    return inner_->PutPrediction(prediction);
  }
  StatusOr<StoredPrediction> GetPrediction(const std::string& cluster,
                                           const std::string& job_id) override {
    return inner_->GetPrediction(cluster, job_id);
  }

  StatusOr<bool> WriteTelemetry(const std::string& agent, int64_t seq,
                                std::span<const JobTelemetry> jobs) override {
    TelemetryWrite w{agent, seq, jobs};
    RS_ASSIGN_OR_RETURN(auto stored, WriteTelemetryGroup(std::span(&w, 1)));
    return static_cast<bool>(stored.at(0));
  }

  StatusOr<std::vector<bool>> WriteTelemetryGroup(std::span<const TelemetryWrite> writes) override {
    // Which batches are new: the inner store's last seq per agent, and the group's own (an
    // agent's second batch in one group is new only above its first).
    std::map<std::string, int64_t> last_seq;
    std::vector<bool> fresh(writes.size(), false);
    for (size_t i = 0; i < writes.size(); ++i) {
      auto it = last_seq.find(writes[i].agent);
      if (it == last_seq.end()) {
        RS_ASSIGN_OR_RETURN(int64_t last, inner_->LastTelemetrySeq(writes[i].agent));
        it = last_seq.emplace(writes[i].agent, last).first;
      }
      if (writes[i].seq > it->second) {
        fresh[i] = true;
        it->second = writes[i].seq;
      }
    }
    RS_RETURN_IF_ERROR(RemoteWrite(writes, fresh));
    // The rest, without samples, in one transaction of the inner store (which decides replays
    // for good: another replica may have stored one meanwhile, and then the TSDB merely got
    // the same samples twice).
    std::vector<std::vector<JobTelemetry>> stripped(writes.size());
    std::vector<TelemetryWrite> inner_writes;
    inner_writes.reserve(writes.size());
    for (size_t i = 0; i < writes.size(); ++i) {
      if (fresh[i]) {
        stripped[i].reserve(writes[i].jobs.size());
        for (const JobTelemetry& jt : writes[i].jobs) {
          JobTelemetry& s = stripped[i].emplace_back();
          s.job = jt.job;
          s.stacks = jt.stacks;
          s.diagnosis = jt.diagnosis;
        }
      }
      inner_writes.push_back({writes[i].agent, writes[i].seq, stripped[i]});
    }
    return inner_->WriteTelemetryGroup(inner_writes);
  }

  Status ReadSamples(const std::string& cluster, const std::string& job_id,
                     const std::string& metric, int64_t from_ms, int64_t to_ms,
                     const std::function<void(const Sample&)>& fn) override {
    from_ms = std::max<int64_t>(from_ms, 0);
    int64_t at_ms = std::min(to_ms, kMaxQueryMs);
    if (at_ms < from_ms) return Status::Ok();
    // A raw range selector evaluated at `to` gives the stored samples themselves on every
    // engine (Prometheus: [at - range, at]; VictoriaMetrics: (at - range, at]).
    std::string query = fmt::format("{}[{}ms]", Selector(TsdbMetricName(metric), cluster, job_id),
                                    at_ms - from_ms + 1);
    httplib::Params params{{"query", query},
                           {"time", fmt::format("{}.{:03}", at_ms / 1000, at_ms % 1000)},
                           // VictoriaMetrics hides the last 30 s (-search.latencyOffset) of a
                           // query at "now" unless told not to; Prometheus ignores both.
                           {"nocache", "1"},
                           {"latency_offset", "0s"}};
    std::vector<Sample> samples;
    std::vector<MatrixSeries> series;
    auto fast = [&](const std::string& body) {
      MatrixSax sax(from_ms, to_ms, &series);
      nlohmann::json::sax_parse(body, &sax, nlohmann::json::input_format_t::json,
                                /*strict=*/true, /*ignore_comments=*/false);
      return sax.ok();
    };
    RS_ASSIGN_OR_RETURN(nlohmann::json data,
                        Get(*readers_[0], "/api/v1/query", params, "samples", fast));
    if (data.is_discarded()) {
      if (series.size() == 1) return Emit(&series[0].samples, false, fn);
      for (auto& one : series) {
        samples.insert(samples.end(), one.samples.begin(), one.samples.end());
      }
      return Emit(&samples, series.size() > 1, fn);
    }
    auto shape = [&] {
      return Status::IoError(
          fmt::format("{}/api/v1/query answered an unexpected shape for {}", query_url_, query));
    };
    if (!data.is_object() || data.value("resultType", "") != "matrix") return shape();
    const nlohmann::json& result = data["result"];
    if (!result.is_array()) return shape();
    // Several series (the same one through replicas, or with labels a receiver added) merge.
    for (const auto& series : result) {
      auto values = series.find("values");
      if (values == series.end() || !values->is_array()) return shape();
      for (const auto& p : *values) {
        double t_s = 0, v = 0;
        if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !ParseValue(p[1], &v)) {
          return shape();
        }
        t_s = p[0].get<double>();
        auto t_ms = static_cast<int64_t>(std::llround(t_s * 1000));
        if (t_ms >= from_ms && t_ms <= to_ms) samples.push_back({t_ms, v});
      }
    }
    return Emit(&samples, result.size() > 1, fn);
  }

  // The engine aggregates: one range query per metric at the grid's step, its evaluation times
  // the buckets' last milliseconds and its window the step, so each answers a mean and a max a
  // bucket instead of every sample (docs/scale-tsdb.md, "The job page"). The metrics are asked
  // on kReadConnections connections at once. A metric the engine answers with several series
  // (copies through replicas, labels a receiver added), or with an answer this does not expect,
  // is read raw and folded here, as a grid that is not whole milliseconds or too fine for one
  // range query is.
  Status ReadBuckets(const std::string& cluster, const std::string& job_id,
                     const std::vector<std::string>& metrics, const BucketGrid& grid,
                     std::vector<std::vector<SampleBucket>>* out) override {
    EngineGrid eg;
    if (!grid.WholeMs() || grid.from_ms < 0 || grid.to_ms < grid.from_ms ||
        grid.to_ms > kMaxQueryMs) {
      return Store::ReadBuckets(cluster, job_id, metrics, grid, out);
    }
    eg.step_ms = grid.StepMs();
    eg.from_ms = grid.from_ms;
    eg.to_ms = grid.to_ms;
    int64_t span = eg.to_ms + 1 - eg.from_ms;
    eg.tail = span % eg.step_ms != 0;
    eg.last = span / eg.step_ms - (eg.tail ? 0 : 1);
    if (eg.last + 1 > kMaxEngineBuckets) {
      return Store::ReadBuckets(cluster, job_id, metrics, grid, out);
    }
    RS_ASSIGN_OR_RETURN(bool closed, ClosedWindows());
    if (closed) return Store::ReadBuckets(cluster, job_id, metrics, grid, out);

    // The metrics in groups, a range query each, asked on the connections at once: as many
    // groups as connections, each query at most kMaxQueryChars long. A last bucket cut short
    // (the tail) is one more query of one step per group: in the range query it would be
    // evaluated at every step, which doubled the engine's work.
    std::vector<Aggregates> aggs(metrics.size());
    std::vector<std::string> exprs(metrics.size()), tails(metrics.size());
    for (size_t i = 0; i < metrics.size(); ++i) {
      const std::string sel = Selector(TsdbMetricName(metrics[i]), cluster, job_id);
      exprs[i] = BucketExpr(sel, i, eg);
      if (eg.tail) tails[i] = TailExpr(sel, i, eg);
    }
    struct Query {
      bool tail = false;
      std::vector<size_t> metrics;
    };
    std::vector<Query> queries;
    const size_t per_group = (metrics.size() + readers_.size() - 1) / readers_.size();
    for (bool tail : {false, true}) {
      if (tail && !eg.tail) break;
      if (!tail && eg.tail && eg.last == 0) continue;  // the tail is the only bucket
      const auto& text = tail ? tails : exprs;
      size_t chars = 0, first = queries.size();
      for (size_t i = 0; i < metrics.size(); ++i) {
        if (queries.size() == first || queries.back().metrics.size() >= per_group ||
            chars + text[i].size() > kMaxQueryChars) {
          queries.push_back({tail, {}});
          chars = 0;
        }
        queries.back().metrics.push_back(i);
        chars += text[i].size() + 4;
      }
    }
    std::vector<Status> errors(queries.size());
    std::atomic<size_t> next{0};
    auto work = [&](httplib::Client& reader) {
      for (size_t k = next++; k < queries.size(); k = next++) {
        errors[k] = EngineBuckets(reader, queries[k].metrics, queries[k].tail ? tails : exprs,
                                  queries[k].tail, eg, &aggs);
      }
    };
    size_t workers = std::min(readers_.size(), queries.size());
    {
      std::vector<std::jthread> threads;
      for (size_t w = 1; w < workers; ++w) threads.emplace_back(work, std::ref(*readers_[w]));
      if (workers > 0) work(*readers_[0]);
    }
    for (const Status& e : errors) RS_RETURN_IF_ERROR(e);
    out->assign(metrics.size(), {});
    std::vector<char> raw(metrics.size(), 0);
    for (size_t i = 0; i < metrics.size(); ++i) {
      raw[i] = aggs[i].raw || !FromAggregates(aggs[i], eg, &(*out)[i]);
    }
    for (size_t i = 0; i < metrics.size(); ++i) {
      if (!raw[i]) continue;
      (*out)[i].clear();
      BucketFolder fold(grid, &(*out)[i]);
      RS_RETURN_IF_ERROR(ReadSamples(cluster, job_id, metrics[i], grid.from_ms, grid.to_ms,
                                     [&](const Sample& s) { fold.Add(s); }));
      fold.Finish();
    }
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> SampleMetrics(const std::string& cluster,
                                                   const std::string& job_id) override {
    std::string match = fmt::format("{{__name__=~\"{}.+\",cluster={},job_id={}}}", kPrefix,
                                    Quoted(cluster), Quoted(job_id));
    // start=0: VictoriaMetrics' default is the last day only (Prometheus': all time).
    httplib::Params params{{"match[]", match}, {"start", "0"}};
    RS_ASSIGN_OR_RETURN(nlohmann::json data,
                        Get(*readers_[0], "/api/v1/series", params, "a job's metrics"));
    if (!data.is_array()) {
      return Status::IoError(
          fmt::format("{}/api/v1/series answered an unexpected shape for {}", query_url_, match));
    }
    std::vector<std::string> out;
    for (const auto& labels : data) {
      if (!labels.is_object() || !labels.contains("__name__")) continue;
      const auto& name = labels["__name__"];
      if (!name.is_string()) continue;
      if (auto m = MetricOfTsdbName(name.get<std::string>())) out.push_back(std::move(*m));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

 private:
  // A grid of whole milliseconds as range queries see it: bucket i is evaluated at its last
  // millisecond, from_ms + (i + 1) * step_ms - 1, over the window [step_ms] (left-open: exactly
  // the bucket). `tail`: the last bucket, `last`, is cut at to_ms before its end.
  struct EngineGrid {
    int64_t from_ms = 0, to_ms = 0, step_ms = 1, last = 0;
    bool tail = false;
    int64_t EvalMs(int64_t i) const { return from_ms + (i + 1) * step_ms - 1; }
  };

  // Whether the engine's range windows [d] at t include t - d (Prometheus before 3.0: [t - d, t];
  // VictoriaMetrics and Prometheus 3: (t - d, t]). Asked once: a subquery over a constant
  // counts 3 points in [t - 2 ms, t] and 2 in (t - 2 ms, t]; VictoriaMetrics refuses it (its
  // lookbehind adds 5 minutes of 1 ms points), which counts as not closed.
  StatusOr<bool> ClosedWindows() {
    if (closed_windows_) return *closed_windows_;
    const std::string api = "/api/v1/query";
    httplib::Params params{{"query", "count_over_time(vector(1)[2ms:1ms])"}, {"time", "1000"}};
    auto res = readers_[0]->Get(query_prefix_ + api, params, httplib::Headers{});
    if (!res) {
      return Status::IoError(fmt::format("cannot read a job's series from the TSDB at {}{}: {}",
                                         query_url_, api, httplib::to_string(res.error())));
    }
    bool closed = false;
    auto doc = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    // {"data": {"result": [{"value": [1000, "3"]}]}}
    const nlohmann::json* at = &doc;
    for (const char* key : {"data", "result", "0", "value", "1"}) {
      if (at->is_object() && at->contains(key)) {
        at = &(*at)[key];
      } else if (at->is_array() && !at->empty() && key[0] >= '0' && key[0] <= '1' &&
                 at->size() > static_cast<size_t>(key[0] - '0')) {
        at = &(*at)[static_cast<size_t>(key[0] - '0')];
      } else {
        at = nullptr;
        break;
      }
    }
    closed = res->status == 200 && at != nullptr && *at == "3";
    closed_windows_ = closed;
    return closed;
  }

  // What the engine answered for one metric: its mean and max per step, the tail's mean and
  // max (series in a query's answer: absent when it has none); raw when it cannot be used.
  struct Aggregates {
    std::array<std::optional<std::vector<Sample>>, 4> series;  // mean, max, tail mean, tail max
    bool raw = false;
  };

  // Metric i's mean and max per step in a bucket query, labelled kBucketLabel="<i>/<aggregate>".
  static std::string BucketExpr(const std::string& sel, size_t i, const EngineGrid& g) {
    return fmt::format("{} or {}",
                       Tagged(fmt::format("avg_over_time({}[{}ms])", sel, g.step_ms), i, "mean"),
                       Tagged(fmt::format("max_over_time({}[{}ms])", sel, g.step_ms), i, "max"));
  }
  // Metric i's tail, asked at the last bucket's evaluation time: a window ending at to_ms (an
  // offset from that time) that starts where the bucket starts.
  static std::string TailExpr(const std::string& sel, size_t i, const EngineGrid& g) {
    const int64_t last_ms = g.EvalMs(g.last), start_ms = g.from_ms + g.last * g.step_ms;
    std::string window =
        fmt::format("[{}ms] offset {}ms", g.to_ms - start_ms + 1, last_ms - g.to_ms);
    return fmt::format("{} or {}",
                       Tagged(fmt::format("avg_over_time({}{})", sel, window), i, "tail_mean"),
                       Tagged(fmt::format("max_over_time({}{})", sel, window), i, "tail_max"));
  }
  static std::string Tagged(const std::string& expr, size_t i, const char* tag) {
    return fmt::format("label_replace({}, \"{}\", \"{}/{}\", \"\", \"\")", expr, kBucketLabel, i,
                       tag);
  }

  // One range query on `reader` for the metrics `group` (indexes into exprs and aggs): their
  // steps, or (tail) their last bucket alone. A metric the engine answers with several series
  // of one aggregate, or all of the group when the engine refuses the query or answers another
  // shape, is marked raw (the caller reads its samples raw). An error only when the engine
  // cannot be reached.
  Status EngineBuckets(httplib::Client& reader, const std::vector<size_t>& group,
                       const std::vector<std::string>& exprs, bool tail, const EngineGrid& g,
                       std::vector<Aggregates>* aggs) {
    std::string query;
    for (size_t i : group) {
      if (!query.empty()) query += " or ";
      query += exprs[i];
    }
    // The steps up to the tail, or the tail's alone.
    const int64_t last_ms = g.EvalMs(g.last);
    const int64_t end_ms = tail || !g.tail ? last_ms : g.EvalMs(g.last - 1);
    auto seconds = [](int64_t ms) { return fmt::format("{}.{:03}", ms / 1000, ms % 1000); };
    httplib::Params params{
        {"query", query},         {"start", seconds(tail ? last_ms : g.EvalMs(0))},
        {"end", seconds(end_ms)}, {"step", fmt::format("{}ms", g.step_ms)},
        {"nocache", "1"},         {"latency_offset", "0s"}};
    const std::string api = "/api/v1/query_range";
    auto res = reader.Post(query_prefix_ + api, params);
    if (!res) {
      return Status::IoError(fmt::format("cannot read a job's series from the TSDB at {}{}: {}",
                                         query_url_, api, httplib::to_string(res.error())));
    }
    auto all_raw = [&] {
      for (size_t i : group) (*aggs)[i].raw = true;
      return Status::Ok();
    };
    // An engine that refuses the query or answers another shape: the samples are read raw,
    // which reports a failure of the engine itself.
    if (res->status / 100 != 2) return all_raw();
    std::vector<MatrixSeries> series;
    MatrixSax sax(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &series,
                  kBucketLabel);
    nlohmann::json::sax_parse(res->body, &sax, nlohmann::json::input_format_t::json,
                              /*strict=*/true, /*ignore_comments=*/false);
    if (!sax.ok()) return all_raw();
    for (MatrixSeries& one : series) {
      size_t slash = one.label.find('/');
      size_t i = 0;
      if (slash == std::string::npos) return all_raw();
      auto [p, ec] = std::from_chars(one.label.data(), one.label.data() + slash, i);
      if (ec != std::errc() || std::find(group.begin(), group.end(), i) == group.end()) {
        return all_raw();
      }
      std::string_view tag = std::string_view(one.label).substr(slash + 1);
      int slot = tag == "mean"        ? 0
                 : tag == "max"       ? 1
                 : tag == "tail_mean" ? 2
                 : tag == "tail_max"  ? 3
                                      : -1;
      if (slot < 0 || (slot >= 2) != tail) return all_raw();
      auto& into = (*aggs)[i].series[static_cast<size_t>(slot)];
      if (into) (*aggs)[i].raw = true;  // several series: the raw read merges them
      into = std::move(one.samples);
    }
    return Status::Ok();
  }

  // One metric's buckets from its aggregates. False when they are not on the grid, a mean for
  // every max.
  static bool FromAggregates(const Aggregates& agg, const EngineGrid& g,
                             std::vector<SampleBucket>* out) {
    const int64_t last_ms = g.EvalMs(g.last);
    // Bucket i's aggregates at EvalMs(i).
    auto index = [&](int64_t t_ms) -> int64_t {
      int64_t d = t_ms + 1 - g.from_ms;
      if (d <= 0 || d % g.step_ms != 0 || d / g.step_ms - 1 > g.last) return -1;
      return d / g.step_ms - 1;
    };
    static const std::vector<Sample> kNone;
    auto get = [&](size_t slot) -> const std::vector<Sample>& {
      return agg.series[slot] ? *agg.series[slot] : kNone;
    };
    const auto& means = get(0);
    const auto& maxes = get(1);
    if (means.size() != maxes.size()) return false;
    out->clear();
    out->reserve(means.size() + 1);
    for (size_t k = 0; k < means.size(); ++k) {
      int64_t i = index(means[k].t_ms);
      if (i < 0 || maxes[k].t_ms != means[k].t_ms) return false;
      if (g.tail && i == g.last) continue;  // not asked: the tail's query has it
      if (!out->empty() && out->back().index >= i) return false;
      out->push_back({i, means[k].value, maxes[k].value});
    }
    const auto& tail_means = get(2);
    const auto& tail_maxes = get(3);
    if (tail_means.size() != tail_maxes.size() || tail_means.size() > 1) return false;
    if (!tail_means.empty()) {
      if (tail_means[0].t_ms != last_ms || tail_maxes[0].t_ms != last_ms) return false;
      out->push_back({g.last, tail_means[0].value, tail_maxes[0].value});
    }
    return true;
  }

  // Sends the samples of the `fresh` batches, in requests of at most kMaxRemoteWriteSamples.
  Status RemoteWrite(std::span<const TelemetryWrite> writes, const std::vector<bool>& fresh) {
    for (size_t i = 0; i < writes.size(); ++i) {
      if (!fresh[i]) continue;
      for (const JobTelemetry& jt : writes[i].jobs) {
        encoder_.Add(jt);
        if (encoder_.pending() >= kMaxRemoteWriteSamples) RS_RETURN_IF_ERROR(Send());
      }
    }
    if (encoder_.pending() > 0) RS_RETURN_IF_ERROR(Send());
    return Status::Ok();
  }

  Status Send() {
    size_t samples = encoder_.pending();
    RS_ASSIGN_OR_RETURN(std::string body, encoder_.Take());
    return writer_->Post(body, samples);
  }

  // GET the query API; its "data" on success.
  // Several series of one metric (the same one through replicas, or with labels a receiver
  // added) merge: in time order, a time once.
  static Status Emit(std::vector<Sample>* samples, bool several_series,
                     const std::function<void(const Sample&)>& fn) {
    if (several_series) {
      std::stable_sort(samples->begin(), samples->end(),
                       [](const Sample& a, const Sample& b) { return a.t_ms < b.t_ms; });
    }
    int64_t last = std::numeric_limits<int64_t>::min();
    for (const Sample& s : *samples) {
      if (s.t_ms == last) continue;  // sent twice (a retried batch) or through two replicas
      last = s.t_ms;
      fn(s);
    }
    return Status::Ok();
  }

  // GET the query API; its "data" on success. `fast`, when given, reads a 2xx answer first:
  // when it says it did, the result is a discarded JSON value (nothing more to read).
  StatusOr<nlohmann::json> Get(httplib::Client& reader, const std::string& api,
                               const httplib::Params& params, const std::string& what,
                               const std::function<bool(const std::string&)>& fast = nullptr) {
    std::string where = query_url_ + api;
    auto res = reader.Get(query_prefix_ + api, params, httplib::Headers{});
    if (!res) {
      return Status::IoError(fmt::format("cannot read {} from the TSDB at {}: {}", what, where,
                                         httplib::to_string(res.error())));
    }
    if (fast && res->status / 100 == 2 && fast(res->body)) {
      return nlohmann::json(nlohmann::json::value_t::discarded);
    }
    nlohmann::json doc = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("status")) {
      return Status::IoError(
          fmt::format("cannot read {}: {} answered HTTP {} and not the Prometheus API's JSON: {}",
                      what, where, res->status, Excerpt(res->body)));
    }
    if (doc["status"] != "success" || !doc.contains("data")) {
      std::string error = doc.contains("error") && doc["error"].is_string()
                              ? doc["error"].get<std::string>()
                              : Excerpt(res->body);
      return Status::IoError(
          fmt::format("cannot read {}: {} answered HTTP {}: {}", what, where, res->status, error));
    }
    return std::move(doc["data"]);
  }

  std::unique_ptr<Store> inner_;
  std::string query_url_;
  std::string query_prefix_;
  std::unique_ptr<RemoteWriteClient> writer_;
  RemoteWriteEncoder encoder_;
  // The query API's connections: ReadSamples and SampleMetrics use the first, ReadBuckets all
  // of them at once (one thread each, for the duration of the call).
  std::vector<std::unique_ptr<httplib::Client>> readers_;
  std::optional<bool> closed_windows_;  // ClosedWindows(), once asked
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenTsdbStore(std::unique_ptr<Store> inner,
                                               const StoreOptions& options) {
  if (options.tsdb_write_url.empty() || options.tsdb_query_url.empty()) {
    return Status::InvalidArgument(
        "a TSDB for samples needs both its remote-write URL and its query URL");
  }
  RS_ASSIGN_OR_RETURN(auto writer, RemoteWriteClient::Create(options.tsdb_write_url));
  RS_ASSIGN_OR_RETURN(HttpUrl query, ParseHttpUrl("the TSDB's query URL", options.tsdb_query_url));
  return std::unique_ptr<Store>(
      std::make_unique<TsdbStore>(std::move(inner), options, std::move(writer), std::move(query)));
}

}  // namespace rightsize
