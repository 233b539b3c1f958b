#include "diagnose/log_scan.h"

#include <fcntl.h>
#include <re2/re2.h>
#include <re2/set.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/fd.h"
#include "core/mutex.h"
#include "diagnose/signatures.h"

namespace rightsize {
namespace {

// Lines longer than this are cut around the match before the per-signature regexes run, so
// a 100 MB progress-bar line costs no more than a short one.
constexpr size_t kMaxSegmentBytes = 4096;

RE2::Options Latin1Options() {
  RE2::Options o;
  o.set_encoding(RE2::Options::EncodingLatin1);  // every byte sequence is valid input
  o.set_log_errors(false);
  o.set_max_mem(int64_t{256} << 20);  // room for the combined DFA, so RE2 never falls back
  return o;
}

// Traceback lines are kept 16 times as generously as evidence: a traceback needs all its frames.
size_t KeepScale(const Signature& sig) {
  bool context = sig.kind == SignatureKind::kTraceback || sig.kind == SignatureKind::kFrame ||
                 sig.kind == SignatureKind::kException;
  return context ? 16 : 1;
}

// How many times `c` occurs in `text`: memchr is vectorised, a byte loop is not at -O2.
int64_t CountByte(std::string_view text, char c) {
  int64_t n = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    const void* hit = std::memchr(p, c, static_cast<size_t>(end - p));
    if (!hit) break;
    ++n;
    p = static_cast<const char*>(hit) + 1;
  }
  return n;
}

// The compiled signature table: one combined automaton to find candidate lines, a set to say
// which signatures a line matches, and each signature's fact pattern. Built once.
class CompiledSignatures {
 public:
  static const CompiledSignatures& Get() {
    static const CompiledSignatures* compiled = new CompiledSignatures();  // never destroyed
    return *compiled;
  }

  const RE2& any() const { return *any_; }
  const RE2::Set& set() const { return *set_; }
  const RE2* facts(int i) const { return facts_[static_cast<size_t>(i)].get(); }

 private:
  CompiledSignatures() : set_(std::make_unique<RE2::Set>(Latin1Options(), RE2::UNANCHORED)) {
    std::string combined;
    for (const Signature& s : AllSignatures()) {
      std::string p = "(?m:" + std::string(s.pattern) + ")";
      if (!combined.empty()) combined += '|';
      combined += p;
      std::string error;
      // The table is compiled into the binary: a pattern that does not compile is a bug.
      if (set_->Add(p, &error) < 0) {
        fprintf(stderr, "rightsize: signature %.*s: %s\n", static_cast<int>(s.id.size()),
                s.id.data(), error.c_str());
        abort();
      }
      std::unique_ptr<RE2> f;
      if (!s.facts.empty()) {
        f = std::make_unique<RE2>(s.facts, Latin1Options());
        if (!f->ok()) {
          fprintf(stderr, "rightsize: signature %.*s facts: %s\n", static_cast<int>(s.id.size()),
                  s.id.data(), f->error().c_str());
          abort();
        }
      }
      facts_.push_back(std::move(f));
    }
    any_ = std::make_unique<RE2>(combined, Latin1Options());
    if (!any_->ok() || !set_->Compile()) {
      fprintf(stderr, "rightsize: signature table: %s\n", any_->error().c_str());
      abort();
    }
  }

  std::unique_ptr<RE2> any_;
  std::unique_ptr<RE2::Set> set_;
  std::vector<std::unique_ptr<RE2>> facts_;
};

// The scanning state for one log.
class Scanner {
 public:
  Scanner(std::string name, const ScanOptions& options)
      : options_(options), sigs_(CompiledSignatures::Get()) {
    scan_.file = std::move(name);
    size_t n = AllSignatures().size();
    scan_.counts.assign(n, 0);
    first_.resize(n);
    for (const Signature& sig : AllSignatures()) keep_scale_.push_back(KeepScale(sig));
  }

  // Scans `block`, which ends at a line end unless `cut` (a line longer than a block).
  void Block(std::string_view block, bool cut) {
    scan_.bytes += static_cast<int64_t>(block.size());
    scan_.nul_bytes += CountByte(block, '\0');
    const RE2& any = sigs_.any();
    size_t pos = 0;
    size_t counted = 0;  // newlines before `counted` are in line_
    re2::StringPiece match;
    while (pos < block.size() && any.Match(block, pos, block.size(), RE2::UNANCHORED, &match, 1)) {
      size_t at = static_cast<size_t>(match.data() - block.data());
      size_t begin = block.rfind('\n', at == 0 ? 0 : at - 1);
      begin = (begin == std::string_view::npos || (at == 0 && block[0] == '\n')) ? 0 : begin + 1;
      if (begin < pos) begin = pos;
      size_t end = block.find('\n', at);
      if (end == std::string_view::npos) end = block.size();
      line_ += CountByte(block.substr(counted, begin - counted), '\n');
      counted = begin;
      Line(block.substr(begin, end - begin), at - begin);
      pos = end + 1;
    }
    line_ += CountByte(block.substr(counted), '\n');
    if (cut) ++scan_.long_lines;
    Tail(block);
  }

  LogScan Finish() {
    scan_.lines = line_ + (ends_without_newline_ ? 1 : 0);
    for (size_t i = 0; i < first_.size(); ++i) {
      for (auto& h : first_[i]) scan_.hits.push_back(std::move(h));
      if (auto it = last_.find(i); it != last_.end()) {
        for (auto& h : it->second) scan_.hits.push_back(std::move(h));
      }
    }
    std::stable_sort(scan_.hits.begin(), scan_.hits.end(),
                     [](const SignatureHit& a, const SignatureHit& b) { return a.line < b.line; });
    SplitTail();
    return std::move(scan_);
  }

  void set_ends_without_newline(bool v) { ends_without_newline_ = v; }

 private:
  // One line that the combined automaton matched at offset `at`.
  void Line(std::string_view line, size_t at) {
    std::string_view seg = line;
    if (seg.size() > kMaxSegmentBytes) {
      // A progress bar's "\r" updates or a huge line: keep the "\r" piece around the match.
      size_t b = seg.rfind('\r', at);
      b = b == std::string_view::npos ? 0 : b + 1;
      if (at - b > kMaxSegmentBytes / 2) b = at - kMaxSegmentBytes / 2;
      size_t e = seg.find('\r', at);
      if (e == std::string_view::npos || e - b > kMaxSegmentBytes) {
        e = std::min(seg.size(), b + kMaxSegmentBytes);
      }
      seg = seg.substr(b, e - b);
    }
    std::vector<int> which;
    if (!sigs_.set().Match(seg, &which)) return;
    std::sort(which.begin(), which.end());
    int64_t line_number = line_ + 1;
    for (int i : which) {
      auto idx = static_cast<size_t>(i);
      ++scan_.counts[idx];
      SignatureHit hit;
      hit.signature = i;
      hit.line = line_number;
      hit.text = CleanLogText(seg);
      if (const RE2* f = sigs_.facts(i)) Facts(*f, seg, &hit);
      size_t scale = keep_scale_[idx];
      if (first_[idx].size() < options_.keep_first * scale) {
        first_[idx].push_back(std::move(hit));
      } else {
        last_[idx].push_back(std::move(hit));
        if (last_[idx].size() > options_.keep_last * scale) last_[idx].pop_front();
      }
    }
  }

  static void Facts(const RE2& re, std::string_view seg, SignatureHit* hit) {
    int n = re.NumberOfCapturingGroups();
    std::vector<re2::StringPiece> groups(static_cast<size_t>(n) + 1);
    if (!re.Match(seg, 0, seg.size(), RE2::UNANCHORED, groups.data(), n + 1)) return;
    for (const auto& [name, index] : re.NamedCapturingGroups()) {
      const re2::StringPiece& g = groups[static_cast<size_t>(index)];
      if (g.data() == nullptr || g.empty()) continue;
      hit->facts.emplace_back(name, CleanLogText(std::string_view(g.data(), g.size()), 200));
    }
  }

  // Keeps the end of the log; Finish splits it into numbered lines.
  void Tail(std::string_view block) {
    size_t keep = options_.tail_lines * 512;
    if (block.size() >= keep) {
      tail_bytes_.assign(block.substr(block.size() - keep));
      tail_truncated_ = true;
    } else {
      tail_bytes_.append(block);
      if (tail_bytes_.size() > 2 * keep) {
        tail_bytes_.erase(0, tail_bytes_.size() - keep);
        tail_truncated_ = true;
      }
    }
  }

  void SplitTail() {
    std::string_view text = tail_bytes_;
    if (tail_truncated_) {
      size_t nl = text.find('\n');
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    }
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    // Number the lines backwards from the last one.
    std::vector<std::string_view> lines;
    size_t b = 0;
    for (;;) {
      size_t e = text.find('\n', b);
      lines.push_back(text.substr(b, e == std::string_view::npos ? text.size() - b : e - b));
      if (e == std::string_view::npos) break;
      b = e + 1;
    }
    int64_t number = scan_.lines - static_cast<int64_t>(lines.size()) + 1;
    std::deque<std::pair<int64_t, std::string>> tail;
    for (std::string_view line : lines) {
      size_t p = 0;
      for (;;) {
        size_t e = line.find('\r', p);
        std::string_view piece =
            line.substr(p, e == std::string_view::npos ? line.size() - p : e - p);
        std::string clean = CleanLogText(piece, 400);
        if (!clean.empty()) {
          tail.emplace_back(number, std::move(clean));
          if (tail.size() > options_.tail_lines) tail.pop_front();
        }
        if (e == std::string_view::npos) break;
        p = e + 1;
      }
      ++number;
    }
    scan_.tail.assign(tail.begin(), tail.end());
  }

  ScanOptions options_;
  const CompiledSignatures& sigs_;
  LogScan scan_;
  int64_t line_ = 0;  // newlines seen before the current position
  bool ends_without_newline_ = false;
  std::string tail_bytes_;
  bool tail_truncated_ = false;
  std::vector<std::vector<SignatureHit>> first_;
  // Made for a signature at its first hit past keep_first: a deque allocates even empty, and
  // a pasted log of four lines meets few of the hundreds of signatures.
  std::map<size_t, std::deque<SignatureHit>> last_;
  std::vector<size_t> keep_scale_;  // per signature: KeepScale()
};

struct GzCloser {
  void operator()(gzFile f) const noexcept { gzclose(f); }
};

}  // namespace

namespace {

// Reads up to `n` bytes into `buf`; 0 at the end.
using BlockSource = std::function<StatusOr<size_t>(char* buf, size_t n)>;

// Joins the scans of consecutive pieces of one log; every piece but the last ends with a
// newline (or is a cut through one enormous line), so line numbers continue from one piece
// to the next.
LogScan MergeScans(std::vector<LogScan> parts, const ScanOptions& options) {
  LogScan out = std::move(parts[0]);
  for (size_t p = 1; p < parts.size(); ++p) {
    LogScan& part = parts[p];
    int64_t offset = out.lines;
    out.bytes += part.bytes;
    out.lines += part.lines;
    out.nul_bytes += part.nul_bytes;
    out.long_lines += part.long_lines;
    for (size_t i = 0; i < out.counts.size(); ++i) out.counts[i] += part.counts[i];
    for (auto& h : part.hits) {
      h.line += offset;
      out.hits.push_back(std::move(h));
    }
    for (auto& t : part.tail) {
      t.first += offset;
      out.tail.push_back(std::move(t));
    }
  }
  // Keep the first and last few per signature, as one sequential scan would.
  std::stable_sort(out.hits.begin(), out.hits.end(),
                   [](const SignatureHit& a, const SignatureHit& b) { return a.line < b.line; });
  std::vector<size_t> seen(out.counts.size(), 0), total(out.counts.size(), 0);
  auto sigs = AllSignatures();
  for (const auto& h : out.hits) ++total[static_cast<size_t>(h.signature)];
  std::vector<SignatureHit> kept;
  for (auto& h : out.hits) {
    auto i = static_cast<size_t>(h.signature);
    size_t rank = seen[i]++;
    size_t scale = KeepScale(sigs[i]);
    if (rank < options.keep_first * scale || rank + options.keep_last * scale >= total[i]) {
      kept.push_back(std::move(h));
    }
  }
  out.hits = std::move(kept);
  if (out.tail.size() > options.tail_lines) {
    out.tail.erase(out.tail.begin(),
                   out.tail.end() - static_cast<std::ptrdiff_t>(options.tail_lines));
  }
  return out;
}

// Scans what `read` returns in blocks that end at a line end (unless one line is longer than
// a block): the calling thread reads and merges, `threads` workers scan blocks independently,
// or with `threads` 0 the calling thread scans each block itself (text already in memory: no
// worker to start). At most two blocks per worker are in flight, so memory stays bounded.
// `buffer_bytes` (at most options.block_bytes) sizes the read buffers: a text shorter than a
// block needs no 4 MiB of them, and is cut into the same pieces either way.
StatusOr<LogScan> ScanStream(const BlockSource& read, const std::string& name,
                             const ScanOptions& options, unsigned threads, size_t buffer_bytes) {
  struct Piece {
    uint64_t seq = 0;
    std::vector<char> buf;  // from `pool`, returned to it when scanned
    size_t size = 0;
    bool cut = false, last = false;
  };
  // What the reading thread and the workers share.
  struct Shared {
    Mutex mu;
    CondVar cv;
    std::deque<Piece> queue GUARDED_BY(mu);
    std::map<uint64_t, LogScan> finished GUARDED_BY(mu);
    bool closing GUARDED_BY(mu) = false;
    // Block buffers for reuse: fresh 4 MiB allocations cost a page fault per page.
    std::vector<std::vector<char>> pool GUARDED_BY(mu);
  } sh;
  // Scans one block and files its result for `drain`.
  auto scan_piece = [&](Piece piece) {
    std::string_view data(piece.buf.data(), piece.size);
    Scanner scanner(name, options);
    scanner.Block(data, piece.cut);
    if (piece.last) scanner.set_ends_without_newline(!data.empty() && data.back() != '\n');
    LogScan scan = scanner.Finish();
    MutexLock lock(sh.mu);
    sh.finished.emplace(piece.seq, std::move(scan));
    sh.pool.push_back(std::move(piece.buf));
    sh.cv.NotifyAll();
  };
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (;;) {
        Piece piece;
        {
          MutexLock lock(sh.mu);
          while (!sh.closing && sh.queue.empty()) sh.cv.Wait(lock);
          if (sh.queue.empty()) return;
          piece = std::move(sh.queue.front());
          sh.queue.pop_front();
        }
        scan_piece(std::move(piece));
      }
    });
  }
  std::optional<LogScan> merged;
  uint64_t submitted = 0, next = 0;
  // Merges the finished pieces that are next in order; waits while too many are in flight
  // (or, with `all`, until every piece is merged).
  auto drain = [&](bool all) {
    MutexLock lock(sh.mu);
    for (;;) {
      auto it = sh.finished.find(next);
      if (it != sh.finished.end()) {
        LogScan part = std::move(it->second);
        sh.finished.erase(it);
        ++next;
        lock.Unlock();
        if (merged) {
          std::vector<LogScan> two;
          two.push_back(std::move(*merged));
          two.push_back(std::move(part));
          merged = MergeScans(std::move(two), options);
        } else {
          merged = std::move(part);
        }
        lock.Lock();
        continue;
      }
      uint64_t in_flight = submitted - next;
      if (in_flight == 0 || (!all && in_flight < 2 * uint64_t{threads})) return;
      sh.cv.Wait(lock);
    }
  };
  auto stop = [&] {
    {
      MutexLock lock(sh.mu);
      sh.closing = true;
    }
    sh.cv.NotifyAll();
    for (auto& w : workers) w.join();
  };

  auto take = [&] {
    MutexLock lock(sh.mu);
    if (sh.pool.empty()) return std::vector<char>(buffer_bytes);
    std::vector<char> b = std::move(sh.pool.back());
    sh.pool.pop_back();
    return b;
  };
  std::vector<char> buf = take();
  size_t have = 0;  // bytes carried over from the previous block (a partial line)
  for (;;) {
    auto got = read(buf.data() + have, buf.size() - have);
    if (!got.ok()) {
      stop();
      return got.status();
    }
    size_t n = have + *got;
    bool eof = *got == 0;
    if (n == 0) break;
    std::string_view data(buf.data(), n);
    size_t use = n;
    bool cut = false;
    if (!eof) {
      size_t nl = data.rfind('\n');
      if (nl != std::string_view::npos) {
        use = nl + 1;
      } else if (n < buf.size()) {
        have = n;  // a short read: fill the block before cutting a line
        continue;
      } else {
        cut = true;  // a line longer than the block: search it in pieces
      }
    }
    std::vector<char> next = take();
    have = n - use;
    if (have > 0) std::memcpy(next.data(), buf.data() + use, have);
    Piece piece{submitted, std::move(buf), use, cut, eof && use == n};
    buf = std::move(next);
    if (threads == 0) {
      ++submitted;
      scan_piece(std::move(piece));
    } else {
      {
        MutexLock lock(sh.mu);
        sh.queue.push_back(std::move(piece));
        ++submitted;
      }
      sh.cv.NotifyAll();
    }
    drain(false);
    if (eof && have == 0) break;
  }
  drain(true);
  stop();
  if (!merged) {
    Scanner empty(name, options);
    return empty.Finish();
  }
  return std::move(*merged);
}

}  // namespace

LogScan ScanLogText(std::string_view text, std::string name, const ScanOptions& options) {
  // The same path as files and pipes (tests of text test it too), on this thread: the text is
  // in memory, and a pasted log of a few lines should not start a worker or fill 8 MiB.
  size_t pos = 0;
  auto scan = ScanStream(
      [&](char* buf, size_t n) -> StatusOr<size_t> {
        size_t got = std::min(n, text.size() - pos);
        std::memcpy(buf, text.data() + pos, got);
        pos += got;
        return got;
      },
      name, options, 0, std::min(options.block_bytes, text.size() + 1));
  return std::move(*scan);  // reading memory cannot fail
}

StatusOr<LogScan> ScanLogFile(const std::string& path, const ScanOptions& options) {
  std::string name = path == "-" ? "<stdin>" : path;
  UniqueFd owned(path == "-" ? dup(0) : open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!owned) return Status::IoError(name + ": cannot open: " + std::strerror(errno));
  const int fd = owned.get();
  struct stat st {};
  unsigned char magic[2] = {0, 0};
  bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular && st.st_size >= 2 && pread(fd, magic, 2, 0) != 2) magic[0] = 0;
  bool plain = regular && !(magic[0] == 0x1f && magic[1] == 0x8b);
  unsigned threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
  if (plain) {
    return ScanStream(
        [fd, &name](char* buf, size_t n) -> StatusOr<size_t> {
          for (;;) {
            ssize_t got = ::read(fd, buf, n);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) return Status::IoError(name + ": cannot read: " + std::strerror(errno));
            return static_cast<size_t>(got);
          }
        },
        name, options, threads, options.block_bytes);
  }
  // Compressed, or a pipe that may be: zlib reads plain data as is.
  std::unique_ptr<gzFile_s, GzCloser> file(gzdopen(dup(fd), "rb"));
  if (!file) return Status::IoError(name + ": cannot open: " + std::strerror(errno));
  gzbuffer(file.get(), 1 << 20);
  gzFile gz = file.get();
  return ScanStream(
      [gz, &name](char* buf, size_t n) -> StatusOr<size_t> {
        int got = gzread(gz, buf, static_cast<unsigned>(n));
        if (got < 0) {
          int err = 0;
          const char* msg = gzerror(gz, &err);
          return Status::IoError(name + ": cannot read: " + (msg ? msg : "error"));
        }
        return static_cast<size_t>(got);
      },
      name, options, threads, options.block_bytes);
}

std::string CleanLogText(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  size_t i = 0;
  while (i < text.size()) {
    if (out.size() >= max_bytes) {
      out += "\xe2\x80\xa6";  // …
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b) {  // ANSI escape: ESC [ params letter
      ++i;
      if (i < text.size() && text[i] == '[') {
        ++i;
        while (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
        ++i;
      }
      continue;
    }
    if (c < 0x80) {
      out += (c < 0x20 && c != '\t') || c == 0x7f ? ' ' : static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: copy it when valid, else one U+FFFD per bad byte.
    size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (ok && len == 3) {
      auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
    } else if (ok && len == 4) {
      auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  size_t lead = out.find_first_not_of(' ');
  return lead == std::string::npos ? std::string() : lead > 0 ? out.substr(lead) : out;
}

}  // namespace rightsize
