// Replays a fuzz corpus through LLVMFuzzerTestOneInput without libFuzzer, so that ctest (any
// compiler) catches a regression in the readers: every file of the corpus folder as it is, then
// a fixed number of deterministic mutations of each (bit flips, truncations, spliced tokens,
// values of the wrong type or out of range, gzip of the result), then a few hostile shapes that
// a short fuzzing run does not reach (deep nesting, long lines and strings, many entries). One
// driver for every target (test/fuzz/fuzz.cmake links it with each *_fuzz.cc).
//
// Usage: NAME_fuzz_replay [-v] [--hostile=telemetry|json|text] CORPUS_DIR [MUTATIONS_PER_FILE].
// Exits 0 when every input was read without a crash (a crash is the failure: the process dies);
// prints the input it is on with -v, so a crash names its input. --hostile picks the shapes:
// telemetry batches, any JSON document, or line-oriented text (the default).
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool verbose = false;

void Run(const std::string& name, const std::string& input) {
  if (verbose) std::fprintf(stderr, "%s (%zu bytes)\n", name.c_str(), input.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Gzip(const std::string& in) {
  z_stream strm{};
  if (deflateInit2(&strm, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&strm, static_cast<uLong>(in.size())) + 32, '\0');
  strm.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  strm.avail_in = static_cast<uInt>(in.size());
  strm.next_out = reinterpret_cast<Bytef*>(out.data());
  strm.avail_out = static_cast<uInt>(out.size());
  deflate(&strm, Z_FINISH);
  out.resize(strm.total_out);
  deflateEnd(&strm);
  return out;
}

// Tokens spliced over numbers, strings and brackets: wrong types, out-of-range and
// non-finite numbers, and structure that does not close.
const std::vector<std::string> kTokens = {
    "null", "true", "\"x\"", "\"\"", "[]", "{}", "[1]", "[\"x\",1]", "[1,2,3]", "0", "-1", "1e308",
    "1e309", "-1e309", "1.5", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "1e10", "1764750000000", "-0", "[[[[", "]]]]", "{\"a\":", "\"\\u0000\"",
    "\"\\ud800\"", "\"\xff\xfe\"", "\"a;b\\nc\"", "\"2024-01-31T08:00:00\"",
    "\"9999-99-99T99:99:99\"", "\"Unknown\"", "\"per_cpu\"",
    // Line formats: separators, SLURM and SWF values.
    "|", ",", ";", "\n", "\r\n", "\t", " ", "inf", "nan", "1e30", "-1e30", "99999999-00:00:00",
    "2147483648", "4294967296K", "1000000000000T", "gpu:-1", "gres/gpu=99999999999",
    "#SBATCH --mem=", "#SBATCH --array=0-4294967295%0", "\"\"\"", "Unknown", "None"};

std::string Mutate(const std::string& in, std::mt19937_64& rng) {
  std::string s = in;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  int kind = static_cast<int>(rng() % 8);
  switch (kind) {
    case 0:  // flip a few bits
      for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n && !s.empty(); ++i) {
        s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
      }
      break;
    case 1:  // truncate
      s.resize(pick(s.size() + 1));
      break;
    case 2:  // delete a span
      if (!s.empty()) {
        size_t at = pick(s.size());
        s.erase(at, 1 + pick(std::min<size_t>(16, s.size() - at)));
      }
      break;
    case 3: {  // replace a number or a string literal by a token of another type
      std::vector<size_t> starts;
      for (size_t i = 0; i < s.size(); ++i) {
        bool num = (s[i] >= '0' && s[i] <= '9') || s[i] == '-';
        if ((num && (i == 0 || !(s[i - 1] >= '0' && s[i - 1] <= '9'))) || s[i] == '"') {
          starts.push_back(i);
        }
      }
      if (starts.empty()) break;
      size_t at = starts[pick(starts.size())];
      size_t end = at + 1;
      if (s[at] == '"') {
        while (end < s.size() && s[end] != '"') end += s[end] == '\\' ? 2 : 1;
        end = std::min(end + 1, s.size());
      } else {
        while (end < s.size() &&
               std::string_view("0123456789.eE+-").find(s[end]) != std::string::npos)
          ++end;
      }
      s.replace(at, end - at, kTokens[pick(kTokens.size())]);
      break;
    }
    case 4:  // insert a token anywhere
      s.insert(pick(s.size() + 1), kTokens[pick(kTokens.size())]);
      break;
    case 5: {  // duplicate a span (repeated keys, longer arrays)
      if (s.empty()) break;
      size_t at = pick(s.size());
      size_t len = 1 + pick(std::min<size_t>(256, s.size() - at));
      s.insert(at, s.substr(at, len));
      break;
    }
    case 6:  // swap brackets
      for (char& c : s) {
        if (rng() % 16 != 0) continue;
        if (c == '[')
          c = '{';
        else if (c == '{')
          c = '[';
        else if (c == ']')
          c = '}';
        else if (c == '}')
          c = ']';
      }
      break;
    default:  // a valid mutation of another kind, then gzip (the Content-Encoding path)
      s = Gzip(Mutate(in, rng));
      if (!s.empty() && rng() % 2 == 0) s.resize(pick(s.size()));  // a cut-off stream
      break;
  }
  return s;
}

std::string Batch(const std::string& entries) {
  return R"({"schema":"rightsize.telemetry/v1","agent":"a","seq":1,"jobs":[)" + entries + "]}";
}
std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Shapes a short fuzzing run with a small -max_len does not reach. Depths stay far below what
// the server accepts (max_batch_bytes, 16 MiB: 8 million levels) yet above what a recursive
// walk survives on a thread's stack.
void RunHostileTelemetry() {
  const size_t depth = 200'000;
  std::string deep = Repeat("[", depth) + Repeat("]", depth);
  std::string deep_obj = Repeat("{\"a\":", depth) + "1" + Repeat("}", depth);
  const char* job = R"({"cluster":"c","job_id":"1"})";
  Run("hostile: deep array as a job entry", Batch(deep));
  Run("hostile: deep object as a job entry", Batch(deep_obj));
  Run("hostile: deep array as a sample",
      Batch(std::string(R"({"job":)") + job + R"(,"samples":{"cpu_cores":[)" + deep + "]}}"));
  Run("hostile: deep array as a stack count",
      Batch(std::string(R"({"job":)") + job + R"(,"stacks":{"a;b":)" + deep + "}}"));
  Run("hostile: deep array as the job record", Batch(R"({"job":)" + deep + "}"));
  Run("hostile: deep array as request.cpus",
      Batch(R"({"job":{"cluster":"c","job_id":"1","request":{"cpus":)" + deep + "}}}"));
  Run("hostile: deep array as the body", deep);
  Run("hostile: 1 MiB metric name", Batch(std::string(R"({"job":)") + job + R"(,"samples":{")" +
                                          std::string(1 << 20, 'm') + R"(":[[1,1]]}})"));
  Run("hostile: 100k entries",
      Batch(Repeat(std::string(R"({"job":)") + job + "},", 100'000) + R"({"job":)" + job + "}"));
}

// Any JSON document (admission reviews, config files, Prometheus answers).
void RunHostileJson() {
  const size_t depth = 200'000;
  Run("hostile: deep array", Repeat("[", depth) + Repeat("]", depth));
  Run("hostile: deep object", Repeat("{\"a\":", depth) + "1" + Repeat("}", depth));
  Run("hostile: deep request.object", R"({"request":{"uid":"u","operation":"CREATE","object":)" +
                                          Repeat("{\"spec\":", depth) + "1" + Repeat("}", depth) +
                                          "}}");
  Run("hostile: 1 MiB string", "{\"" + std::string(1 << 20, 'k') + "\":\"v\"}");
  Run("hostile: 100k keys", "{" + Repeat("\"k\":1,", 100'000) + "\"k\":1}");
}

// Line-oriented text (SWF, sacct, CSV, sinfo, scripts, logs).
void RunHostileText() {
  Run("hostile: a line over 1 MiB", std::string((1 << 20) + 1, 'x') + "\nx\n");
  Run("hostile: 100k empty lines", std::string(100'000, '\n'));
  Run("hostile: 100k short lines", Repeat("1 2 3|4,5\n", 100'000));
  Run("hostile: 100k fields", Repeat("1|", 100'000) + "\n" + Repeat("1,", 100'000) + "\n");
  Run("hostile: NUL bytes", std::string("a\0b\nc\0\n", 8));
  Run("hostile: carriage returns only", std::string(10'000, '\r'));
  Run("hostile: unclosed quote over many lines", "\"" + Repeat("a,b\n", 50'000));
  Run("hostile: invalid UTF-8 and colours", Repeat("\x1b[31m\xff\xfe\xc0 err\x1b[0m\n", 10'000));
}

std::vector<std::pair<std::string, std::string>> ReadCorpus(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    files.emplace_back(e.path().filename().string(), ss.str());
  }
  std::sort(files.begin(), files.end());  // the same order, and so the same mutations, each run
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string hostile = "text";
  while (!args.empty() && args[0].starts_with("-")) {
    if (args[0] == "-v") {
      verbose = true;
    } else if (args[0].starts_with("--hostile=")) {
      hostile = args[0].substr(10);
    } else {
      break;
    }
    args.erase(args.begin());
  }
  if (args.empty() || (hostile != "telemetry" && hostile != "json" && hostile != "text")) {
    std::fprintf(stderr,
                 "usage: %s [-v] [--hostile=telemetry|json|text] CORPUS_DIR "
                 "[MUTATIONS_PER_FILE]\n",
                 argv[0]);
    return 2;
  }
  int mutations = args.size() > 1 ? std::atoi(args[1].c_str()) : 300;
  auto files = ReadCorpus(args[0]);
  if (files.empty()) {
    std::fprintf(stderr, "no files in %s\n", args[0].c_str());
    return 2;
  }
  std::mt19937_64 rng(20261202);
  size_t runs = 0;
  for (const auto& [name, data] : files) {
    Run(name, data);
    ++runs;
    for (int i = 0; i < mutations; ++i, ++runs) {
      std::string m = Mutate(data, rng);
      // Stacked mutations reach further than single ones.
      for (int k = static_cast<int>(rng() % 3); k > 0; --k) m = Mutate(m, rng);
      Run(name + " mutation " + std::to_string(i), m);
    }
  }
  size_t hostile_runs = 0;
  if (hostile == "telemetry") {
    RunHostileTelemetry();
    hostile_runs = 9;
  } else if (hostile == "json") {
    RunHostileJson();
    hostile_runs = 5;
  } else {
    RunHostileText();
    hostile_runs = 8;
  }
  std::printf("%zu corpus files, %zu inputs read without a crash\n", files.size(),
              runs + hostile_runs);
  return 0;
}
