#include "store/tsdb_store.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "remote_write/remote_write.h"

namespace rightsize {
namespace {

constexpr std::string_view kPrefix = "rightsize_job_";
// The latest time a query is evaluated at (2200-01-01): ReadSamples' "up to now" is INT64_MAX.
constexpr int64_t kMaxQueryMs = 7258118400000;

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
    char* end = nullptr;
    *out = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0') return false;
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

// The samples of a successful /api/v1/query answer of resultType "matrix", read without building
// a JSON tree (the tree of a job page's 23 answers was two thirds of the page's CPU). False for
// anything else (an error, another shape): the caller then reads the answer as a tree, which
// says what is wrong.
class MatrixSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  MatrixSax(int64_t from_ms, int64_t to_ms, std::vector<Sample>* out)
      : from_ms_(from_ms), to_ms_(to_ms), out_(out) {}

  bool ok() const { return ok_ && status_ok_ && matrix_; }
  size_t series() const { return series_; }

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
    if (Depth() == 3 && stack_[0].key == "data" && stack_[1].key == "result") ++series_;
    if ((Depth() == 5 || Depth() == 6) && In5Values()) return Fail();  // a sample: [t, "v"]
    stack_.push_back({true, "", 0});
    return true;
  }
  bool key(string_t& k) override {
    stack_.back().key = k;
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    Advance();
    return true;
  }
  bool start_array(std::size_t /*n*/) override {
    if (Depth() == 6 && In5Values()) return Fail();
    if (Depth() == 5 && In5Values()) {
      have_t_ = have_v_ = false;
    }
    stack_.push_back({false, "", 0});
    return true;
  }
  bool end_array() override {
    if (Depth() == 6 && In5Values()) {
      if (!have_t_ || !have_v_ || stack_.back().index != 2) return Fail();
      auto t_ms = static_cast<int64_t>(std::llround(t_s_ * 1000));
      if (t_ms >= from_ms_ && t_ms <= to_ms_) out_->push_back({t_ms, v_});
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
  struct Frame {
    bool object = false;
    std::string key;   // of an object: the last key
    size_t index = 0;  // of an array: the element being read
  };
  size_t Depth() const { return stack_.size(); }
  bool In(const char* key) const { return stack_.back().object && stack_.back().key == key; }
  // Inside data.result[i].values[j]: the frames are root, data, result, series, values, pair.
  bool In5Values() const {
    return stack_.size() >= 5 && stack_[0].key == "data" && stack_[1].key == "result" &&
           stack_[3].key == "values";
  }
  void Advance() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
  }
  bool Fail() {
    ok_ = false;
    return false;  // stops the parse
  }
  bool Value(const double* number, const std::string* text) {
    if (Depth() == 1 && In("status")) status_ok_ = text != nullptr && *text == "success";
    if (Depth() == 2 && stack_[0].key == "data" && In("resultType")) {
      matrix_ = text != nullptr && *text == "matrix";
    }
    if (Depth() == 6 && In5Values()) {
      size_t i = stack_.back().index;
      if (i == 0 && number != nullptr) {
        t_s_ = *number;
        have_t_ = true;
      } else if (i == 1 && text != nullptr && ParseValue(*text, &v_)) {
        have_v_ = true;
      } else if (i == 1 && number != nullptr) {
        v_ = *number;
        have_v_ = true;
      } else {
        return Fail();
      }
    }
    Advance();
    return true;
  }

  int64_t from_ms_, to_ms_;
  std::vector<Sample>* out_;
  std::vector<Frame> stack_;
  bool ok_ = true, status_ok_ = false, matrix_ = false;
  size_t series_ = 0;
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
        writer_(std::move(writer)),
        reader_(query.scheme_host_port) {
    reader_.set_connection_timeout(std::chrono::seconds(5));
    reader_.set_read_timeout(std::chrono::seconds(30));
    reader_.set_write_timeout(std::chrono::seconds(30));
    reader_.set_keep_alive(true);
    reader_.set_tcp_nodelay(true);  // else a kept-alive request waits for a delayed ACK
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
    size_t series = 0;
    auto fast = [&](const std::string& body) {
      MatrixSax sax(from_ms, to_ms, &samples);
      nlohmann::json::sax_parse(body, &sax, nlohmann::json::input_format_t::json,
                                /*strict=*/true, /*ignore_comments=*/false);
      series = sax.series();
      if (!sax.ok()) samples.clear();
      return sax.ok();
    };
    RS_ASSIGN_OR_RETURN(nlohmann::json data, Get("/api/v1/query", params, "samples", fast));
    if (data.is_discarded()) return Emit(&samples, series > 1, fn);
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

  StatusOr<std::vector<std::string>> SampleMetrics(const std::string& cluster,
                                                   const std::string& job_id) override {
    std::string match = fmt::format("{{__name__=~\"{}.+\",cluster={},job_id={}}}", kPrefix,
                                    Quoted(cluster), Quoted(job_id));
    // start=0: VictoriaMetrics' default is the last day only (Prometheus': all time).
    httplib::Params params{{"match[]", match}, {"start", "0"}};
    RS_ASSIGN_OR_RETURN(nlohmann::json data, Get("/api/v1/series", params, "a job's metrics"));
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
  StatusOr<nlohmann::json> Get(const std::string& api, const httplib::Params& params,
                               const std::string& what,
                               const std::function<bool(const std::string&)>& fast = nullptr) {
    std::string where = query_url_ + api;
    auto res = reader_.Get(query_prefix_ + api, params, httplib::Headers{});
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
  httplib::Client reader_;
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
