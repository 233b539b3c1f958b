#include "ingest/ingest.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <iterator>
#include <thread>

#include "core/mutex.h"
#include "core/plausible.h"
#include "core/units.h"
#include "ingest/line_reader.h"

namespace rightsize {

std::string IngestError::ToString() const { return fmt::format("{}:{}: {}", file, line, message); }

namespace {

// Stores batches on its own thread, so parsing the next batch overlaps with the SQLite
// transaction of the previous one (the two halves cost about the same). At most two batches
// wait, which bounds memory. The first store error is kept and ends all further writes.
class BatchWriter {
 public:
  explicit BatchWriter(Store& store) : store_(store), thread_([this] { Run(); }) {}
  BatchWriter(const BatchWriter&) = delete;
  BatchWriter& operator=(const BatchWriter&) = delete;
  ~BatchWriter() { (void)Close(); }

  // Queues a batch; blocks while two are already waiting.
  void Push(std::vector<JobRecord> batch) {
    MutexLock lock(mu_);
    while (queue_.size() >= 2 && error_.ok()) space_.Wait(lock);
    if (!error_.ok()) return;
    queue_.push_back(std::move(batch));
    ready_.NotifyOne();
  }

  // Waits until everything queued is stored; returns the first error.
  Status Close() {
    {
      MutexLock lock(mu_);
      closing_ = true;
      ready_.NotifyOne();
    }
    if (thread_.joinable()) thread_.join();
    MutexLock lock(mu_);
    return error_;
  }

  int64_t stored() const {
    MutexLock lock(mu_);
    return stored_;
  }

 private:
  void Run() {
    while (true) {
      std::vector<JobRecord> batch;
      {
        MutexLock lock(mu_);
        while (queue_.empty() && !closing_) ready_.Wait(lock);
        if (queue_.empty()) return;
        batch = std::move(queue_.front());
        queue_.pop_front();
        space_.NotifyOne();
      }
      Status st = store_.UpsertJobs(batch);
      MutexLock lock(mu_);
      if (!st.ok()) {
        error_ = st;
        queue_.clear();
        space_.NotifyAll();
        return;
      }
      stored_ += static_cast<int64_t>(batch.size());
    }
  }

  Store& store_;  // used only by thread_
  mutable Mutex mu_;
  CondVar ready_;  // a batch is queued, or closing
  CondVar space_;  // the queue has room, or an error ended it
  std::deque<std::vector<JobRecord>> queue_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;
  Status error_ GUARDED_BY(mu_);
  int64_t stored_ GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts after the members above
};

// The jobs in the store, to tell new jobs from replaced ones; -1 when the store cannot count.
int64_t CountAllJobs(Store& store) {
  auto n = store.CountJobs(JobFilter{});
  return n.ok() ? *n : -1;
}

void SetNewJobs(IngestStats& s, int64_t before, int64_t after) {
  // Another writer (serve, an agent) may add jobs meanwhile: keep the figure within what
  // this ingest stored.
  if (before >= 0 && after >= 0) s.new_jobs = std::clamp<int64_t>(after - before, 0, s.stored);
}

}  // namespace

// Files larger than this (as stored, so gzip counts compressed) are bulk loads.
constexpr int64_t kBulkLoadBytes = kMiB;

Status IngestFile(const std::string& path, RecordParser& parser, Store& store,
                  const std::string& cluster, const IngestOptions& options, IngestStats* stats) {
  auto t0 = std::chrono::steady_clock::now();
  IngestStats local;
  IngestStats& s = stats != nullptr ? *stats : local;
  s = IngestStats();
  s.file = path == "-" ? "<stdin>" : path;
  s.cluster = cluster;

  RS_ASSIGN_OR_RETURN(auto reader, LineReader::Open(path));
  const int64_t jobs_before = CountAllJobs(store);
  // A large file loads faster without the secondary indexes, rebuilt once at the end.
  const bool bulk = reader->total_bytes() > kBulkLoadBytes;
  if (bulk) RS_RETURN_IF_ERROR(store.SetBulkLoad(true));
  BatchWriter writer(store);
  std::vector<JobRecord> batch;
  batch.reserve(options.batch_size);
  // The first batch is small and each next one twice as large, up to batch_size: the store
  // starts writing once a thousand records are parsed instead of ten thousand, while the parser
  // goes on (BatchWriter), so less of the ingest is parsing alone.
  size_t batch_limit = std::min<size_t>(options.batch_size, 1000);
  Status fatal;

  auto flush = [&](bool final_flush) {
    if (batch.empty()) return;
    for (auto& job : batch) {
      if (job.cluster.empty() || options.override_cluster) job.cluster = cluster;
      s.clusters.insert(job.cluster);
    }
    s.records += static_cast<int64_t>(batch.size());
    writer.Push(std::move(batch));
    batch = std::vector<JobRecord>();
    if (!final_flush) batch.reserve(options.batch_size);
    if (options.progress) options.progress(reader->bytes_consumed(), reader->total_bytes());
  };
  auto record_error = [&](int64_t line, const Status& st) {
    IngestError e{reader->name(), line, st.message()};
    ++s.skipped;
    if (s.errors.size() < options.max_kept_errors) s.errors.push_back(e);
    if (options.on_error) options.on_error(e);
  };
  // Every record the parser built from this line gets the last check (parsers check their
  // fields by the input's names; this catches what they combine, such as a job's steps).
  auto drop_implausible = [&](size_t first) -> Status {
    for (size_t i = first; i < batch.size();) {
      Status st = CheckJobRecord(batch[i]);
      if (st.ok()) {
        ++i;
        continue;
      }
      st = st.WithContext(fmt::format("job {}", batch[i].job_id));
      record_error(reader->line_number(), st);
      batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(i));
      if (options.strict) return st;
    }
    return Status::Ok();
  };

  std::string_view line;
  while (true) {
    auto more = reader->Next(&line);
    if (!more.ok()) {
      // An over-long line is one bad line; a truncated or unreadable stream ends the file.
      if (reader->last_error_was_overlong_line()) {
        record_error(reader->line_number(), Status::BadInput("line longer than 1 MiB"));
        if (options.strict) {
          fatal = more.status();
          break;
        }
        continue;
      }
      fatal = more.status();
      break;
    }
    if (!*more) break;
    ++s.lines;
    const size_t first_new = batch.size();
    Status st = parser.ParseLine(line, batch);
    if (!st.ok()) {
      record_error(reader->line_number(), st);
    } else {
      st = drop_implausible(first_new);
    }
    if (!st.ok()) {
      if (options.strict) {
        fatal = Status::BadInput(fmt::format("{}:{}: {} (--strict stops at the first error)",
                                             reader->name(), reader->line_number(), st.message()));
        break;
      }
    }
    if (batch.size() >= batch_limit) {
      flush(false);
      batch_limit = std::min(options.batch_size, batch_limit * 2);
    }
  }
  if (fatal.ok()) {
    const size_t first_new = batch.size();
    Status st = parser.Finish(batch);
    if (!st.ok()) record_error(reader->line_number(), st);
    (void)drop_implausible(first_new);
  }
  s.notes = parser.notes();
  flush(true);
  Status write_status = writer.Close();
  if (bulk) {
    Status rebuilt = store.SetBulkLoad(false);
    if (write_status.ok()) write_status = rebuilt;
  }
  s.stored = writer.stored();
  SetNewJobs(s, jobs_before, CountAllJobs(store));
  if (options.progress) options.progress(reader->bytes_consumed(), reader->total_bytes());
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!write_status.ok()) return write_status;
  if (!fatal.ok()) return fatal;
  if (options.allow_empty && s.records == 0 && s.skipped == 0) return Status::Ok();
  if (s.lines == 0) {
    return Status::BadInput(fmt::format("{}: the file is empty; expected job records", s.file));
  }
  if (s.records == 0 && s.skipped == 0) {
    return Status::BadInput(fmt::format("{}: no job records in {} lines ({})", s.file, s.lines,
                                        s.notes.empty() ? "only headers or comments" : s.notes[0]));
  }
  if (s.records == 0) {
    return Status::BadInput(fmt::format("{}: none of its {} lines is a job record; first error: {}",
                                        s.file, s.lines, s.errors.front().ToString()));
  }
  if (!parser.metadata().empty()) {
    RS_RETURN_IF_ERROR(store.PutClusterMeta(cluster, parser.metadata()));
  }
  return Status::Ok();
}

Status IngestRecords(const std::string& name, std::vector<JobRecord> records,
                     std::vector<std::string> notes, Store& store, const std::string& cluster,
                     const IngestOptions& options, IngestStats* stats) {
  auto t0 = std::chrono::steady_clock::now();
  IngestStats local;
  IngestStats& s = stats != nullptr ? *stats : local;
  s = IngestStats();
  s.file = name;
  s.cluster = cluster;
  s.notes = std::move(notes);
  s.lines = static_cast<int64_t>(records.size());
  // Records read some other way get the same last check as lines: "NAME:INDEX: job …".
  int64_t index = 0;
  std::erase_if(records, [&](const JobRecord& job) {
    ++index;
    Status st = CheckJobRecord(job);
    if (st.ok()) return false;
    IngestError e{name, index, st.WithContext(fmt::format("job {}", job.job_id)).message()};
    ++s.skipped;
    if (s.errors.size() < options.max_kept_errors) s.errors.push_back(e);
    if (options.on_error) options.on_error(e);
    return true;
  });
  const int64_t jobs_before = CountAllJobs(store);
  Status write_status;
  {
    BatchWriter writer(store);
    const size_t batch_size = std::max<size_t>(options.batch_size, 1);
    for (size_t begin = 0; begin < records.size(); begin += batch_size) {
      size_t end = std::min(records.size(), begin + batch_size);
      std::vector<JobRecord> batch(std::make_move_iterator(records.begin() + begin),
                                   std::make_move_iterator(records.begin() + end));
      for (auto& job : batch) {
        if (job.cluster.empty() || options.override_cluster) job.cluster = cluster;
        s.clusters.insert(job.cluster);
      }
      s.records += static_cast<int64_t>(batch.size());
      writer.Push(std::move(batch));
      if (options.progress) options.progress(s.records, static_cast<int64_t>(records.size()));
    }
    write_status = writer.Close();
    s.stored = writer.stored();
  }
  SetNewJobs(s, jobs_before, CountAllJobs(store));
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RS_RETURN_IF_ERROR(write_status);
  if (s.records == 0 && !options.allow_empty) {
    return Status::BadInput(fmt::format("{}: no job records{}", s.file,
                                        s.notes.empty() ? "" : " (" + s.notes[0] + ")"));
  }
  return Status::Ok();
}

nlohmann::json IngestStatsJson(const IngestStats& s, const Status& st) {
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : s.errors) {
    errors.push_back({{"file", e.file}, {"line", e.line}, {"message", e.message}});
  }
  return {{"file", s.file},
          {"cluster", s.cluster},
          {"clusters", s.clusters},
          {"lines", s.lines},
          {"records", s.records},
          {"stored", s.stored},
          {"new_jobs", s.new_jobs >= 0 ? nlohmann::json(s.new_jobs) : nlohmann::json(nullptr)},
          {"skipped", s.skipped},
          {"errors", errors},
          {"notes", s.notes},
          {"seconds", s.seconds},
          {"error", st.ok() ? nlohmann::json(nullptr) : nlohmann::json(st.message())}};
}

std::string IngestSummaryText(const IngestStats& stats) {
  // Where the jobs went: records that name their cluster (sacct's Cluster column) keep it.
  std::string where =
      stats.clusters.size() > 1
          ? fmt::format("clusters '{}'", fmt::join(stats.clusters, "', '"))
          : fmt::format("cluster '{}'",
                        stats.clusters.empty() ? stats.cluster : *stats.clusters.begin());
  // Re-ingesting (or a file that repeats a job) replaces jobs rather than adding them: say so,
  // or "1,000,000 jobs stored" would read as a million jobs.
  std::string replaced;
  if (stats.new_jobs >= 0 && stats.new_jobs < stats.stored) {
    replaced = fmt::format(" ({} new, {} replaced jobs already stored)",
                           FormatThousands(static_cast<double>(stats.new_jobs), 0),
                           FormatThousands(static_cast<double>(stats.stored - stats.new_jobs), 0));
  }
  std::string out =
      fmt::format("{}: {} lines, {} jobs stored in {}{}, {} malformed lines skipped ({:.2f} s)\n",
                  stats.file, FormatThousands(static_cast<double>(stats.lines), 0),
                  FormatThousands(static_cast<double>(stats.stored), 0), where, replaced,
                  FormatThousands(static_cast<double>(stats.skipped), 0), stats.seconds);
  for (const auto& note : stats.notes) out += fmt::format("{}: note: {}\n", stats.file, note);
  return out;
}

}  // namespace rightsize
