#include "jobscript/job_script.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/plausible.h"

namespace rightsize {

namespace {

// ---------------------------------------------------------------------------------------------
// Small text helpers.

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view Basename(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// A count such as -c 4: a whole number of at least `min`.
std::optional<int> ParseCount(std::string_view text, int min) {
  auto v = ParseInt(Trim(text));
  if (!v || *v < min || *v > 1'000'000'000) return std::nullopt;
  return static_cast<int>(*v);
}

bool IsAssignment(std::string_view word) {
  auto eq = word.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  if (!(std::isalpha(static_cast<unsigned char>(word[0])) || word[0] == '_')) return false;
  for (size_t i = 1; i < eq; ++i) {
    auto c = static_cast<unsigned char>(word[i]);
    // `A+=x` appends; bash allows it in assignments too.
    if (!(std::isalnum(c) || c == '_' || (c == '+' && i + 1 == eq))) return false;
  }
  return true;
}

}  // namespace

bool IsPythonInterpreter(std::string_view name) {
  if (!name.starts_with("python")) return false;
  for (char c : name.substr(6)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

namespace {

// FNV-1a 64: tiny, portable and fixed forever, which is all a "same program" key needs.
class Fnv1a64 {
 public:
  void Add(std::string_view text) {
    for (char c : text) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ULL;
    }
  }
  std::string Hex() const { return fmt::format("{:016x}", hash_); }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// Trimmed, with runs of blanks collapsed, so re-indenting a script keeps its hash.
std::string Normalize(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : Trim(text)) {
    if (IsBlank(c)) {
      space = true;
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// sbatch's options.

enum class Arg { kNone, kRequired, kOptional };

enum class Field {
  kIgnored,
  kAccount,
  kArray,
  kConstraint,
  kCpusPerGpu,
  kCpusPerTask,
  kExclusive,
  kGpus,
  kGpusPerNode,
  kGpusPerTask,
  kGres,
  kJobName,
  kMem,
  kMemPerCpu,
  kMemPerGpu,
  kNodes,
  kNtasks,
  kNtasksPerNode,
  kPartition,
  kQos,
  kTime,
};

struct OptionSpec {
  std::string_view name;  // long name without dashes
  char short_name;        // 0 when none
  Arg arg;
  Field field;
  std::string_view canonical;  // for aliases: the name directives are normalised to
  std::string_view Canonical() const { return canonical.empty() ? name : canonical; }
};

// Every option of sbatch (23.x, plus old aliases still accepted), so that unique prefixes
// resolve as getopt_long resolves them and an unknown option can be reported.
constexpr OptionSpec kOptions[] = {
    {"account", 'A', Arg::kRequired, Field::kAccount, {}},
    {"acctg-freq", 0, Arg::kRequired, Field::kIgnored, {}},
    {"array", 'a', Arg::kRequired, Field::kArray, {}},
    {"batch", 0, Arg::kRequired, Field::kIgnored, {}},
    {"bb", 0, Arg::kRequired, Field::kIgnored, {}},
    {"bbf", 0, Arg::kRequired, Field::kIgnored, {}},
    {"begin", 'b', Arg::kRequired, Field::kIgnored, {}},
    {"chdir", 'D', Arg::kRequired, Field::kIgnored, {}},
    {"workdir", 0, Arg::kRequired, Field::kIgnored, "chdir"},
    {"cluster-constraint", 0, Arg::kRequired, Field::kIgnored, {}},
    {"clusters", 'M', Arg::kRequired, Field::kIgnored, {}},
    {"cluster", 0, Arg::kRequired, Field::kIgnored, "clusters"},
    {"comment", 0, Arg::kRequired, Field::kIgnored, {}},
    {"constraint", 'C', Arg::kRequired, Field::kConstraint, {}},
    {"container", 0, Arg::kRequired, Field::kIgnored, {}},
    {"container-id", 0, Arg::kRequired, Field::kIgnored, {}},
    {"contiguous", 0, Arg::kNone, Field::kIgnored, {}},
    {"core-spec", 'S', Arg::kRequired, Field::kIgnored, {}},
    {"cores-per-socket", 0, Arg::kRequired, Field::kIgnored, {}},
    {"cpu-freq", 0, Arg::kRequired, Field::kIgnored, {}},
    {"cpus-per-gpu", 0, Arg::kRequired, Field::kCpusPerGpu, {}},
    {"cpus-per-task", 'c', Arg::kRequired, Field::kCpusPerTask, {}},
    {"deadline", 0, Arg::kRequired, Field::kIgnored, {}},
    {"delay-boot", 0, Arg::kRequired, Field::kIgnored, {}},
    {"dependency", 'd', Arg::kRequired, Field::kIgnored, {}},
    {"distribution", 'm', Arg::kRequired, Field::kIgnored, {}},
    {"error", 'e', Arg::kRequired, Field::kIgnored, {}},
    {"exclude", 'x', Arg::kRequired, Field::kIgnored, {}},
    {"exclusive", 0, Arg::kOptional, Field::kExclusive, {}},
    {"export", 0, Arg::kRequired, Field::kIgnored, {}},
    {"export-file", 0, Arg::kRequired, Field::kIgnored, {}},
    {"extra", 0, Arg::kRequired, Field::kIgnored, {}},
    {"extra-node-info", 'B', Arg::kRequired, Field::kIgnored, {}},
    {"get-user-env", 0, Arg::kOptional, Field::kIgnored, {}},
    {"gid", 0, Arg::kRequired, Field::kIgnored, {}},
    {"gpu-bind", 0, Arg::kRequired, Field::kIgnored, {}},
    {"gpu-freq", 0, Arg::kRequired, Field::kIgnored, {}},
    {"gpus", 'G', Arg::kRequired, Field::kGpus, {}},
    {"gpus-per-node", 0, Arg::kRequired, Field::kGpusPerNode, {}},
    {"gpus-per-socket", 0, Arg::kRequired, Field::kIgnored, {}},
    {"gpus-per-task", 0, Arg::kRequired, Field::kGpusPerTask, {}},
    {"gres", 0, Arg::kRequired, Field::kGres, {}},
    {"gres-flags", 0, Arg::kRequired, Field::kIgnored, {}},
    {"help", 'h', Arg::kNone, Field::kIgnored, {}},
    {"hint", 0, Arg::kRequired, Field::kIgnored, {}},
    {"hold", 'H', Arg::kNone, Field::kIgnored, {}},
    {"ignore-pbs", 0, Arg::kNone, Field::kIgnored, {}},
    {"input", 'i', Arg::kRequired, Field::kIgnored, {}},
    {"job-name", 'J', Arg::kRequired, Field::kJobName, {}},
    {"kill-on-invalid-dep", 0, Arg::kRequired, Field::kIgnored, {}},
    {"licenses", 'L', Arg::kRequired, Field::kIgnored, {}},
    {"mail-type", 0, Arg::kRequired, Field::kIgnored, {}},
    {"mail-user", 0, Arg::kRequired, Field::kIgnored, {}},
    {"mcs-label", 0, Arg::kRequired, Field::kIgnored, {}},
    {"mem", 0, Arg::kRequired, Field::kMem, {}},
    {"mem-bind", 0, Arg::kRequired, Field::kIgnored, {}},
    {"mem-per-cpu", 0, Arg::kRequired, Field::kMemPerCpu, {}},
    {"mem-per-gpu", 0, Arg::kRequired, Field::kMemPerGpu, {}},
    {"mincpus", 0, Arg::kRequired, Field::kIgnored, {}},
    {"network", 0, Arg::kRequired, Field::kIgnored, {}},
    {"nice", 0, Arg::kOptional, Field::kIgnored, {}},
    {"no-kill", 'k', Arg::kOptional, Field::kIgnored, {}},
    {"no-requeue", 0, Arg::kNone, Field::kIgnored, {}},
    {"nodefile", 'F', Arg::kRequired, Field::kIgnored, {}},
    {"nodelist", 'w', Arg::kRequired, Field::kIgnored, {}},
    {"nodes", 'N', Arg::kRequired, Field::kNodes, {}},
    {"ntasks", 'n', Arg::kRequired, Field::kNtasks, {}},
    {"ntasks-per-core", 0, Arg::kRequired, Field::kIgnored, {}},
    {"ntasks-per-gpu", 0, Arg::kRequired, Field::kIgnored, {}},
    {"ntasks-per-node", 0, Arg::kRequired, Field::kNtasksPerNode, {}},
    {"tasks-per-node", 0, Arg::kRequired, Field::kNtasksPerNode, "ntasks-per-node"},
    {"ntasks-per-socket", 0, Arg::kRequired, Field::kIgnored, {}},
    {"open-mode", 0, Arg::kRequired, Field::kIgnored, {}},
    {"output", 'o', Arg::kRequired, Field::kIgnored, {}},
    {"overcommit", 'O', Arg::kNone, Field::kIgnored, {}},
    {"oversubscribe", 's', Arg::kNone, Field::kIgnored, {}},
    {"parsable", 0, Arg::kNone, Field::kIgnored, {}},
    {"partition", 'p', Arg::kRequired, Field::kPartition, {}},
    {"power", 0, Arg::kRequired, Field::kIgnored, {}},
    {"prefer", 0, Arg::kRequired, Field::kIgnored, {}},
    {"priority", 0, Arg::kRequired, Field::kIgnored, {}},
    {"profile", 0, Arg::kRequired, Field::kIgnored, {}},
    {"propagate", 0, Arg::kOptional, Field::kIgnored, {}},
    {"qos", 'q', Arg::kRequired, Field::kQos, {}},
    {"quiet", 'Q', Arg::kNone, Field::kIgnored, {}},
    {"reboot", 0, Arg::kNone, Field::kIgnored, {}},
    {"requeue", 0, Arg::kNone, Field::kIgnored, {}},
    {"reservation", 0, Arg::kRequired, Field::kIgnored, {}},
    {"segment", 0, Arg::kRequired, Field::kIgnored, {}},
    {"signal", 0, Arg::kRequired, Field::kIgnored, {}},
    {"sockets-per-node", 0, Arg::kRequired, Field::kIgnored, {}},
    {"spread-job", 0, Arg::kNone, Field::kIgnored, {}},
    {"stepmgr", 0, Arg::kNone, Field::kIgnored, {}},
    {"switches", 0, Arg::kRequired, Field::kIgnored, {}},
    {"test-only", 0, Arg::kNone, Field::kIgnored, {}},
    {"thread-spec", 0, Arg::kRequired, Field::kIgnored, {}},
    {"threads-per-core", 0, Arg::kRequired, Field::kIgnored, {}},
    {"time", 't', Arg::kRequired, Field::kTime, {}},
    {"time-min", 0, Arg::kRequired, Field::kIgnored, {}},
    {"tmp", 0, Arg::kRequired, Field::kIgnored, {}},
    {"tres-bind", 0, Arg::kRequired, Field::kIgnored, {}},
    {"tres-per-task", 0, Arg::kRequired, Field::kIgnored, {}},
    {"uid", 0, Arg::kRequired, Field::kIgnored, {}},
    {"usage", 0, Arg::kNone, Field::kIgnored, {}},
    {"use-min-nodes", 0, Arg::kNone, Field::kIgnored, {}},
    {"verbose", 'v', Arg::kNone, Field::kIgnored, {}},
    {"version", 'V', Arg::kNone, Field::kIgnored, {}},
    {"wait", 'W', Arg::kNone, Field::kIgnored, {}},
    {"wait-all-nodes", 0, Arg::kRequired, Field::kIgnored, {}},
    {"wckey", 0, Arg::kRequired, Field::kIgnored, {}},
    {"wrap", 0, Arg::kRequired, Field::kIgnored, {}},
};

const OptionSpec* FindShort(char c) {
  for (const auto& o : kOptions) {
    if (o.short_name == c) return &o;
  }
  return nullptr;
}

// getopt_long's rule: an exact name, else a prefix of exactly one option (aliases of one
// option count once). `*ambiguous` is set when several options start with `name`.
const OptionSpec* FindLong(std::string_view name, bool* ambiguous) {
  *ambiguous = false;
  const OptionSpec* found = nullptr;
  for (const auto& o : kOptions) {
    if (o.name == name) return &o;
    if (o.name.starts_with(name)) {
      if (found != nullptr && found->Canonical() != o.Canonical()) *ambiguous = true;
      found = &o;
    }
  }
  return *ambiguous ? nullptr : found;
}

// ---------------------------------------------------------------------------------------------
// Option values.

// sbatch's memory sizes: a whole number with an optional K, M, G or T (binary) and no
// fraction (sbatch refuses "1.5G"); no unit means MiB.
std::optional<int64_t> ParseSbatchMemory(std::string_view text) {
  text = Trim(text);
  // "4GB" is accepted as "4G".
  if (text.size() > 1 && (text.back() == 'B' || text.back() == 'b') &&
      std::isalpha(static_cast<unsigned char>(text[text.size() - 2]))) {
    text.remove_suffix(1);
  }
  // sbatch takes K/M/G/T (MiB without a suffix), binary; P is not one of its units.
  int64_t unit =
      text.empty() || text.back() == 'P' || text.back() == 'p' ? 0 : SizeSuffixBytes(text.back());
  if (unit != 0) {
    text.remove_suffix(1);
  } else {
    unit = kMiB;
  }
  auto v = ParseInt(text);
  if (!v || *v < 0 || *v > (int64_t{1} << 62) / unit) return std::nullopt;
  return *v * unit;
}

struct TimeLimit {
  bool unlimited = false;
  int64_t seconds = 0;
};

// sbatch's --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
// days-hours:minutes, days-hours:minutes:seconds, or UNLIMITED/INFINITE. SLURM keeps whole
// minutes, rounding seconds up, and a limit of zero means no limit.
std::optional<TimeLimit> ParseSbatchTime(std::string_view text) {
  text = Trim(text);
  TimeLimit t;
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "UNLIMITED" || upper == "INFINITE" || upper == "-1") {
    t.unlimited = true;
    return t;
  }
  // Any part past 2^40 (35,000 years of seconds) is not a limit; refused before the arithmetic
  // below, which it would overflow.
  constexpr int64_t kMaxPart = int64_t{1} << 40;
  int64_t days = 0;
  bool has_days = false;
  std::string_view rest = text;
  if (auto dash = rest.find('-'); dash != std::string_view::npos) {
    auto d = ParseInt(rest.substr(0, dash));
    if (!d || *d < 0 || *d > kMaxPart) return std::nullopt;
    days = *d;
    has_days = true;
    rest = rest.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  while (true) {
    auto colon = rest.find(':');
    auto v = ParseInt(rest.substr(0, colon));
    if (!v || *v < 0 || *v > kMaxPart || parts.size() == 3) return std::nullopt;
    parts.push_back(*v);
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  int64_t s = 0;
  if (has_days) {
    s = parts[0] * 3600 + (parts.size() > 1 ? parts[1] * 60 : 0) +
        (parts.size() > 2 ? parts[2] : 0);
  } else if (parts.size() == 1) {
    s = parts[0] * 60;
  } else if (parts.size() == 2) {
    s = parts[0] * 60 + parts[1];
  } else {
    s = parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  s += days * 86400;
  if (s > kMaxPart) return std::nullopt;
  int64_t minutes = (s + 59) / 60;
  if (minutes == 0) {
    t.unlimited = true;
  } else {
    t.seconds = minutes * 60;
  }
  return t;
}

// -N: "2", "2-4" (min-max) or a list of allowed sizes "2,4,8"; the minimum counts.
std::optional<int> ParseNodes(std::string_view text) {
  std::optional<int> min;
  text = Trim(text);
  while (true) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    auto dash = item.find('-');
    auto lo = ParseCount(item.substr(0, dash), 1);
    if (!lo) return std::nullopt;
    if (dash != std::string_view::npos) {
      auto hi = ParseCount(item.substr(dash + 1), 1);
      if (!hi || *hi < *lo) return std::nullopt;
    }
    if (!min || *lo < *min) min = lo;
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return min;
}

// A GPU count in an option: 0 to kMaxPlausibleGpus (a million; core/plausible.h).
std::optional<int> ParseGpuCount(std::string_view text) {
  auto n = ParseCount(text, 0);
  if (!n || *n > kMaxPlausibleGpus) return std::nullopt;
  return n;
}

void AddGpus(GresGpus& acc, int count, std::string_view type) {
  if (acc.count == 0 && acc.type.empty()) {
    acc.type = std::string(type);
  } else if (acc.type != type) {
    acc.type = "mixed";
  }
  // Items are each at most a million, but a list can repeat them.
  acc.count = static_cast<int>(
      std::min<int64_t>(int64_t{acc.count} + count, int64_t{std::numeric_limits<int>::max()}));
}

// --gpus, --gpus-per-node, --gpus-per-task: "[type:]N" items separated by commas.
std::optional<GresGpus> ParseGpuList(std::string_view text) {
  GresGpus out;
  text = Trim(text);
  while (true) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    auto colon = item.rfind(':');
    std::string_view type = colon == std::string_view::npos ? "" : item.substr(0, colon);
    if (type.starts_with("gpu:")) type.remove_prefix(4);  // "gpu:a100:2" also seen in the wild
    if (type == "gpu") type = "";
    auto n = ParseGpuCount(colon == std::string_view::npos ? item : item.substr(colon + 1));
    if (!n) return std::nullopt;
    AddGpus(out, *n, type);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return out;
}

// --gres: "gpu", "gpu:2", "gpu:a100:2", "gpu:a100:2,shard:1", "none"; only GPUs count.
// Returns nullopt when a GPU item is malformed; count 0 and no type when there is no GPU.
std::optional<GresGpus> ParseGres(std::string_view text) {
  GresGpus out;
  text = Trim(text);
  if (text == "none" || text == "(null)") return out;
  while (true) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (item.starts_with("gres/")) item.remove_prefix(5);
    if (auto paren = item.find('('); paren != std::string_view::npos) item = item.substr(0, paren);
    auto first = item.find(':');
    if (item.substr(0, first) == "gpu") {
      if (first == std::string_view::npos) {
        AddGpus(out, 1, "");
      } else {
        std::string_view rest = item.substr(first + 1);
        auto last = rest.rfind(':');
        std::string_view tail = last == std::string_view::npos ? rest : rest.substr(last + 1);
        if (auto n = ParseGpuCount(tail)) {
          AddGpus(out, *n, last == std::string_view::npos ? "" : rest.substr(0, last));
        } else if (last == std::string_view::npos && !rest.empty() &&
                   (std::isalpha(static_cast<unsigned char>(rest[0])) || rest[0] == '_')) {
          // A type starts with a letter: "gpu:-1" is a bad count, not a GPU of type "-1".
          AddGpus(out, 1, rest);  // "gpu:a100": one GPU of that type
        } else {
          return std::nullopt;
        }
      }
    }
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return out;
}

struct ArraySpec {
  int tasks = 0;
  std::optional<int> max_running;
};

// --array: "0-15", "1,3,5-7", "0-15:4" (step), any of them with "%N" (at most N at once).
std::optional<ArraySpec> ParseArray(std::string_view text) {
  ArraySpec out;
  text = Trim(text);
  if (auto pct = text.find('%'); pct != std::string_view::npos) {
    out.max_running = ParseCount(text.substr(pct + 1), 1);
    if (!out.max_running) return std::nullopt;
    text = text.substr(0, pct);
  }
  int64_t total = 0;
  while (true) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    int64_t step = 1;
    if (auto colon = item.find(':'); colon != std::string_view::npos) {
      auto s = ParseCount(item.substr(colon + 1), 1);
      if (!s) return std::nullopt;
      step = *s;
      item = item.substr(0, colon);
    }
    auto dash = item.find('-');
    auto lo = ParseInt(item.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : ParseInt(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo) return std::nullopt;
    total += (*hi - *lo) / step + 1;
    if (total > 100'000'000) return std::nullopt;
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  out.tasks = static_cast<int>(total);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Applying options.

// Where a memory option came from: sbatch lets one given on its command line replace the
// script's other memory options, and refuses two kinds from the same place.
struct MemoryOption {
  std::optional<int64_t> bytes;
  int line = 0;
  int order = 0;
  bool from_command_line = false;
  std::string written;  // "--mem-per-cpu" as the user wrote it
};

class OptionState {
 public:
  explicit OptionState(JobScript& script) : s_(script) {}

  // Reads one argv-like list: a directive line's words, or the command-line arguments.
  void ApplyArgs(const std::vector<std::string>& args, int line, bool from_command_line) {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& tok = args[i];
      if (tok.size() > 2 && tok.starts_with("--")) {
        std::string_view body = std::string_view(tok).substr(2);
        auto eq = body.find('=');
        std::string_view name = body.substr(0, eq);
        bool ambiguous = false;
        const OptionSpec* spec = FindLong(name, &ambiguous);
        std::string written = fmt::format("--{}", name);
        if (spec == nullptr) {
          Warn(line, ambiguous ? fmt::format("{}: ambiguous option (sbatch refuses it)", written)
                               : fmt::format("unknown option {} (sbatch refuses it)", written));
          // Its value, if it has one, is not a second mistake.
          if (eq == std::string_view::npos && i + 1 < args.size() &&
              !args[i + 1].starts_with('-')) {
            ++i;
          }
          continue;
        }
        std::optional<std::string> value;
        if (eq != std::string_view::npos) {
          value = std::string(body.substr(eq + 1));
          if (spec->arg == Arg::kNone) {
            Warn(line, fmt::format("{} takes no value, got {}", written, Quote(*value)));
            continue;
          }
        } else if (spec->arg == Arg::kRequired) {
          if (i + 1 >= args.size()) {
            Warn(line, fmt::format("{} needs a value", written));
            continue;
          }
          value = args[++i];
        }
        Apply(*spec, value.value_or(""), written, line, from_command_line);
      } else if (tok.size() > 1 && tok[0] == '-' && tok != "--") {
        // Short options, getopt style: "-c4", "-c 4", and flags grouped as "-Hv".
        for (size_t j = 1; j < tok.size(); ++j) {
          const OptionSpec* spec = FindShort(tok[j]);
          std::string written = fmt::format("-{}", tok[j]);
          if (spec == nullptr) {
            Warn(line, fmt::format("unknown option {} (sbatch refuses it)", written));
            break;
          }
          if (spec->arg == Arg::kRequired) {
            std::string value = tok.substr(j + 1);
            if (value.empty()) {
              if (i + 1 >= args.size()) {
                Warn(line, fmt::format("{} needs a value", written));
                break;
              }
              value = args[++i];
            }
            Apply(*spec, value, written, line, from_command_line);
            break;
          }
          Apply(*spec, "", written, line, from_command_line);
        }
      } else if (tok != "--") {
        Warn(line, fmt::format("{} is not an option (sbatch refuses it){}", Quote(tok),
                               FindLongHint(tok)));
      }
    }
  }

  // The totals and per-unit values into the script, once every option has been read.
  void Finish();

  void Warn(int line, std::string message) { s_.warnings.push_back({line, std::move(message)}); }

 private:
  // "mem=4G" was probably meant as "--mem=4G".
  static std::string FindLongHint(std::string_view tok) {
    auto eq = tok.find('=');
    for (const auto& o : kOptions) {
      if (o.name == tok.substr(0, eq)) return fmt::format("; did you mean --{}?", tok);
    }
    return "";
  }

  void Apply(const OptionSpec& spec, const std::string& value, const std::string& written, int line,
             bool from_command_line);
  void SetMemory(MemoryOption& opt, const std::string& value, const std::string& written, int line,
                 bool from_command_line);
  template <typename T>
  void SetOrWarn(std::optional<T>& field, std::optional<T> parsed, const std::string& written,
                 const std::string& value, const char* expected, int line) {
    if (parsed) {
      field = parsed;
    } else {
      Warn(line, fmt::format("{}: expected {}, got {}", written, expected, Quote(value)));
    }
  }

  JobScript& s_;
  std::optional<int> nodes_, ntasks_, ntasks_per_node_, cpus_per_task_, cpus_per_gpu_;
  MemoryOption mem_node_, mem_cpu_, mem_gpu_;
  std::optional<GresGpus> gpus_, gpus_per_node_, gpus_per_task_, gres_;
  int gpu_line_ = 0;  // the last GPU option's line, for warnings about the total
  int cpu_line_ = 0;  // the last node, task or CPU option's line, likewise
  std::optional<TimeLimit> time_;
  int order_ = 0;
};

void OptionState::Apply(const OptionSpec& spec, const std::string& value,
                        const std::string& written, int line, bool from_command_line) {
  if (!from_command_line) s_.directives.push_back({std::string(spec.Canonical()), value, line});
  ResourceRequest& r = s_.request;
  switch (spec.field) {
    case Field::kIgnored:
      break;
    case Field::kAccount:
      r.account = value;
      break;
    case Field::kPartition:
      r.partition = value;
      break;
    case Field::kQos:
      r.qos = value;
      break;
    case Field::kJobName:
      r.job_name = value;
      break;
    case Field::kConstraint:
      s_.constraint = value;
      break;
    case Field::kExclusive:
      s_.exclusive = true;
      break;
    case Field::kArray: {
      auto a = ParseArray(value);
      if (!a) {
        Warn(line, fmt::format("{}: expected task ids like 1-10, 1,3,5-7, 0-15:4 or 1-10%2, got {}",
                               written, Quote(value)));
        break;
      }
      s_.array_spec = std::string(Trim(value));
      s_.array_tasks = a->tasks;
      s_.array_max_running = a->max_running;
      break;
    }
    case Field::kNodes:
      cpu_line_ = line;
      SetOrWarn(nodes_, ParseNodes(value), written, value, "a node count like 2 or 2-4", line);
      break;
    case Field::kNtasks:
      cpu_line_ = line;
      SetOrWarn(ntasks_, ParseCount(value, 1), written, value, "a positive whole number", line);
      break;
    case Field::kNtasksPerNode:
      cpu_line_ = line;
      SetOrWarn(ntasks_per_node_, ParseCount(value, 1), written, value, "a positive whole number",
                line);
      break;
    case Field::kCpusPerTask:
      cpu_line_ = line;
      SetOrWarn(cpus_per_task_, ParseCount(value, 1), written, value, "a positive whole number",
                line);
      break;
    case Field::kCpusPerGpu:
      cpu_line_ = line;
      SetOrWarn(cpus_per_gpu_, ParseCount(value, 1), written, value, "a positive whole number",
                line);
      break;
    case Field::kGpus:
      gpu_line_ = line;
      SetOrWarn(gpus_, ParseGpuList(value), written, value, "a GPU count like 4 or a100:4", line);
      break;
    case Field::kGpusPerNode:
      gpu_line_ = line;
      SetOrWarn(gpus_per_node_, ParseGpuList(value), written, value, "a GPU count like 4 or a100:4",
                line);
      break;
    case Field::kGpusPerTask:
      gpu_line_ = line;
      SetOrWarn(gpus_per_task_, ParseGpuList(value), written, value, "a GPU count like 1 or a100:1",
                line);
      break;
    case Field::kGres:
      gpu_line_ = line;
      SetOrWarn(gres_, ParseGres(value), written, value, "resources like gpu:a100:2", line);
      break;
    case Field::kTime:
      SetOrWarn(time_, ParseSbatchTime(value), written, value,
                "a time like 90 (minutes), 1:30:00 or 1-00:00:00", line);
      break;
    case Field::kMem:
      SetMemory(mem_node_, value, written, line, from_command_line);
      break;
    case Field::kMemPerCpu:
      SetMemory(mem_cpu_, value, written, line, from_command_line);
      break;
    case Field::kMemPerGpu:
      SetMemory(mem_gpu_, value, written, line, from_command_line);
      break;
  }
}

void OptionState::SetMemory(MemoryOption& opt, const std::string& value, const std::string& written,
                            int line, bool from_command_line) {
  auto bytes = ParseSbatchMemory(value);
  if (!bytes) {
    Warn(line, fmt::format("{}: expected a size like 4G, 4000M or 4000 (MiB), got {}", written,
                           Quote(value)));
    return;
  }
  opt = {bytes, line, ++order_, from_command_line, written};
}

void OptionState::Finish() {
  ResourceRequest& r = s_.request;

  // Memory: one kind only. A kind given on the command line replaces the script's others.
  std::array<MemoryOption*, 3> mems = {&mem_node_, &mem_cpu_, &mem_gpu_};
  bool any_cli = std::any_of(mems.begin(), mems.end(), [](const MemoryOption* m) {
    return m->bytes && m->from_command_line;
  });
  if (any_cli) {
    for (MemoryOption* m : mems) {
      if (m->bytes && !m->from_command_line) *m = MemoryOption();
    }
  }
  MemoryOption* last = nullptr;
  int kinds = 0;
  for (MemoryOption* m : mems) {
    if (!m->bytes) continue;
    ++kinds;
    if (last == nullptr || m->order > last->order) last = m;
  }
  if (kinds > 1) {
    Warn(last->line,
         fmt::format("{}: --mem, --mem-per-cpu and --mem-per-gpu are mutually exclusive (sbatch "
                     "refuses the job); reading {} only",
                     last->written, last->written));
    for (MemoryOption* m : mems) {
      if (m != last) *m = MemoryOption();
    }
  }

  // Tasks and nodes. Without -n SLURM runs one task per node (or --ntasks-per-node of them).
  int nodes_lower_bound = nodes_.value_or(1);
  if (!nodes_ && ntasks_ && ntasks_per_node_) {
    nodes_lower_bound = (*ntasks_ + *ntasks_per_node_ - 1) / *ntasks_per_node_;
    r.nodes = nodes_lower_bound;
  } else if (nodes_) {
    r.nodes = nodes_;
  } else if (!ntasks_ || *ntasks_ == 1) {
    r.nodes = 1;  // one task fits on one node; else SLURM decides and the totals are a minimum
  }
  // In int64 (a billion tasks per node on a billion nodes), like every total below.
  const int64_t tasks =
      ntasks_ ? *ntasks_ : int64_t{ntasks_per_node_.value_or(1)} * nodes_lower_bound;

  // GPUs: --gpus is for the job; the per-node and per-task forms multiply.
  GresGpus gpus;    // none when no GPU option: the job asks for 0
  int64_t per = 1;  // what the per-unit count multiplies by
  if (gpus_) {
    gpus = *gpus_;
  } else if (gpus_per_node_) {
    gpus = *gpus_per_node_;
    per = nodes_lower_bound;
  } else if (gres_) {
    gpus = *gres_;
    per = nodes_lower_bound;
  } else if (gpus_per_task_) {
    gpus = *gpus_per_task_;
    per = tasks;
  }
  // In int64: a million GPUs per node on a million nodes would wrap an int.
  if (int64_t total = int64_t{gpus.count} * per; total > kMaxPlausibleGpus) {
    Warn(gpu_line_, fmt::format("{} GPUs in all ({} x {}) is more than any job can get (at most "
                                "1,000,000); reading it as no GPU request",
                                total, gpus.count, per));
    gpus = GresGpus();
  } else {
    gpus.count = static_cast<int>(total);
  }
  r.gpus = gpus.count;
  r.gpu_type = gpus.count > 0 ? gpus.type : "";

  // CPUs, in double; a total no job can get is warned about and read as no CPU request.
  double cpus = static_cast<double>(tasks);
  if (cpus_per_task_) {
    cpus = static_cast<double>(tasks) * *cpus_per_task_;
  } else if (cpus_per_gpu_ && gpus.count > 0) {
    cpus = static_cast<double>(*cpus_per_gpu_) * gpus.count;
  }
  if (cpus > kMaxPlausibleCpus) {
    Warn(cpu_line_, fmt::format("{:.0f} CPUs in all is more than any job can get (at most "
                                "100,000,000); reading it as no CPU request",
                                cpus));
  } else {
    r.cpus = cpus;
  }

  // Memory totals: the per-unit size times the units, checked in double before it is stored
  // (64 GiB per CPU on a billion CPUs would wrap an int64).
  auto total_memory = [&](const MemoryOption& m, double units) {
    const double total = static_cast<double>(*m.bytes) * units;
    if (total > kMaxPlausibleMemoryBytes) {
      Warn(m.line, fmt::format("{}: {:.3g} bytes in all is more than any job can get; reading "
                               "it as no memory request",
                               m.written, total));
      return;
    }
    r.memory_bytes = static_cast<int64_t>(total);
  };
  if (mem_node_.bytes) {
    r.memory_scope = MemoryScope::kPerNode;
    if (*mem_node_.bytes == 0) {
      s_.mem_whole_node = true;  // "all of each node's memory": unknown here, never 0 bytes
    } else {
      r.memory_per_unit_bytes = mem_node_.bytes;
      total_memory(mem_node_, nodes_lower_bound);
      s_.mem_per_node_bytes = mem_node_.bytes;
    }
  } else if (mem_cpu_.bytes) {
    r.memory_scope = MemoryScope::kPerCpu;
    r.memory_per_unit_bytes = mem_cpu_.bytes;
    if (r.cpus) total_memory(mem_cpu_, std::floor(*r.cpus));
    s_.mem_per_cpu_bytes = mem_cpu_.bytes;
  } else if (mem_gpu_.bytes) {
    r.memory_scope = MemoryScope::kPerGpu;
    r.memory_per_unit_bytes = mem_gpu_.bytes;
    s_.mem_per_gpu_bytes = mem_gpu_.bytes;
    if (gpus.count > 0) {
      total_memory(mem_gpu_, gpus.count);
    } else {
      Warn(mem_gpu_.line, fmt::format("{} without a GPU request: the job gets no memory from it",
                                      mem_gpu_.written));
    }
  }

  if (time_) {
    r.time_unlimited = time_->unlimited;
    if (!time_->unlimited) r.time_limit_s = time_->seconds;
  }

  s_.ntasks = ntasks_;
  s_.ntasks_per_node = ntasks_per_node_;
  s_.cpus_per_task = cpus_per_task_;
  s_.cpus_per_gpu = cpus_per_gpu_;
  if (gpus_per_node_) {
    s_.gpus_per_node = gpus_per_node_->count;
  } else if (gres_) {
    s_.gpus_per_node = gres_->count;
  }
  if (gpus_per_task_) s_.gpus_per_task = gpus_per_task_->count;
}

// A directive line's words as sbatch splits them: blanks separate, quotes group (and are
// removed), a backslash escapes, and an unquoted `#` starts a comment.
std::vector<std::string> SplitDirective(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == '#') {
      break;
    } else if (IsBlank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// ---------------------------------------------------------------------------------------------
// The body: a small shell lexer. It knows quoting, `$(…)`, redirections and the command
// separators, which is what finding commands needs; it expands nothing.

struct Token {
  enum class Kind { kWord, kRedirect, kSeparator };
  Kind kind = Kind::kWord;
  std::string text;           // a word with its quotes removed; the operator otherwise
  bool needs_target = false;  // a redirection whose file is the next word
  size_t begin = 0, end = 0;  // where it is in the line
};

// Reads `$(…)`, `${…}` or a backtick span starting at text[i]; returns the index past it.
size_t SkipSubstitution(std::string_view text, size_t i) {
  char open = text[i];
  if (open == '`') {
    auto close = text.find('`', i + 1);
    return close == std::string_view::npos ? text.size() : close + 1;
  }
  // text[i] == '$', text[i + 1] is '(' or '{'.
  char left = text[i + 1];
  char right = left == '(' ? ')' : '}';
  int depth = 0;
  char quote = 0;
  for (size_t j = i + 1; j < text.size(); ++j) {
    char c = text[j];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == left) {
      ++depth;
    } else if (c == right && --depth == 0) {
      return j + 1;
    }
  }
  return text.size();
}

std::vector<Token> Lex(std::string_view text) {
  std::vector<Token> out;
  size_t i = 0;
  auto is_operator = [](char c) {
    return c == ';' || c == '&' || c == '|' || c == '<' || c == '>';
  };
  while (i < text.size()) {
    char c = text[i];
    if (IsBlank(c)) {
      ++i;
      continue;
    }
    if (c == '#') break;  // a comment: `#` at the start of a word
    Token t;
    t.begin = i;
    if (c == ';' || c == '|' || (c == '&' && (i + 1 >= text.size() || text[i + 1] != '>'))) {
      t.kind = Token::Kind::kSeparator;
      size_t len =
          (i + 1 < text.size() && (text[i + 1] == c || (c == '|' && text[i + 1] == '&'))) ? 2 : 1;
      t.text = std::string(text.substr(i, len));
      i += len;
    } else if (c == '<' || c == '>' || c == '&') {
      t.kind = Token::Kind::kRedirect;
      size_t j = i;
      while (j < text.size() && (text[j] == '<' || text[j] == '>' || text[j] == '&') && j - i < 3) {
        ++j;
      }
      if (j < text.size() && text[j] == '-' && text.substr(i, j - i) == "<<") ++j;  // <<-
      // ">&2", "<&0", ">&-": the target is a descriptor, part of the operator.
      bool fd_target = text[j - 1] == '&' && j < text.size() &&
                       (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '-');
      if (fd_target) {
        while (j < text.size() &&
               (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '-')) {
          ++j;
        }
      }
      t.text = std::string(text.substr(i, j - i));
      t.needs_target = !fd_target;
      i = j;
    } else {
      // A word. Digits directly before `<` or `>` are a descriptor ("2>err.log").
      bool quoted = false;
      while (i < text.size()) {
        char d = text[i];
        if (IsBlank(d)) break;
        if (is_operator(d)) {
          bool all_digits =
              !t.text.empty() && !quoted && std::all_of(t.text.begin(), t.text.end(), [](char x) {
                return std::isdigit(static_cast<unsigned char>(x));
              });
          if ((d == '<' || d == '>') && all_digits) {
            // Re-read from the word's start as a redirection.
            size_t start = t.begin;
            t = Token();
            t.begin = start;
            t.kind = Token::Kind::kRedirect;
            size_t j = i;
            while (j < text.size() && (text[j] == '<' || text[j] == '>' || text[j] == '&') &&
                   j - i < 3) {
              ++j;
            }
            bool fd_target = text[j - 1] == '&' && j < text.size() &&
                             (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '-');
            if (fd_target) {
              while (j < text.size() &&
                     (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '-')) {
                ++j;
              }
            }
            t.text = std::string(text.substr(start, j - start));
            t.needs_target = !fd_target;
            i = j;
          }
          break;
        }
        if (d == '\\' && i + 1 < text.size()) {
          t.text += text[i + 1];
          i += 2;
        } else if (d == '\'') {
          auto close = text.find('\'', i + 1);
          if (close == std::string_view::npos) close = text.size();
          t.text += text.substr(i + 1, close - i - 1);
          i = std::min(close + 1, text.size());
          quoted = true;
        } else if (d == '"') {
          ++i;
          while (i < text.size() && text[i] != '"') {
            if (text[i] == '\\' && i + 1 < text.size() &&
                (text[i + 1] == '"' || text[i + 1] == '\\' || text[i + 1] == '$' ||
                 text[i + 1] == '`')) {
              ++i;
            }
            t.text += text[i++];
          }
          ++i;
          quoted = true;
        } else if ((d == '$' && i + 1 < text.size() &&
                    (text[i + 1] == '(' || text[i + 1] == '{')) ||
                   d == '`') {
          size_t j = SkipSubstitution(text, i);
          t.text += text.substr(i, j - i);
          i = j;
        } else {
          t.text += d;
          ++i;
        }
      }
      i = std::min(i, text.size());
    }
    t.end = i;
    out.push_back(std::move(t));
  }
  return out;
}

// Where a line's comment starts (an unquoted `#` at the start of a word), or npos.
size_t CommentStart(std::string_view text) {
  auto tokens = Lex(text);
  size_t end = tokens.empty() ? 0 : tokens.back().end;
  for (size_t i = end; i < text.size(); ++i) {
    if (text[i] == '#') return i;
  }
  return std::string_view::npos;
}

const std::set<std::string_view>& HousekeepingPrograms() {
  static const std::set<std::string_view> kSet = {
      ":",          ".",     "alias",    "awk",        "basename", "cat",    "cd",       "chmod",
      "conda",      "cp",    "curl",     "cut",        "date",     "df",     "dirname",  "du",
      "echo",       "env",   "eval",     "exit",       "expr",     "false",  "free",     "grep",
      "gunzip",     "gzip",  "hash",     "head",       "hostname", "id",     "let",      "ln",
      "ls",         "lscpu", "mamba",    "micromamba", "mkdir",    "mktemp", "mv",       "nproc",
      "nvidia-smi", "popd",  "printenv", "printf",     "pushd",    "pwd",    "readlink", "realpath",
      "return",     "rm",    "rsync",    "sacct",      "scontrol", "scp",    "sed",      "seff",
      "seq",        "set",   "shift",    "shopt",      "sinfo",    "sleep",  "sort",     "source",
      "squeue",     "sstat", "sync",     "tail",       "tar",      "tee",    "touch",    "tr",
      "trap",       "true",  "ulimit",   "umask",      "uname",    "uniq",   "unset",    "unzip",
      "wait",       "wc",    "wget",     "which",      "whoami",   "zip"};
  return kSet;
}

bool In(std::string_view word, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), word) != set.end();
}

// Peels launchers, wrappers and interpreters off a command's words (after its assignments)
// and fills launcher, wrappers, container_image, program and args.
class CommandReader {
 public:
  CommandReader(const std::vector<std::string>& words, JobScript::Command& cmd,
                std::map<std::string, std::string>& env)
      : w_(words), cmd_(cmd), env_(env) {}

  void Read() {
    while (i_ < w_.size()) {
      std::string_view word = w_[i_];
      std::string_view base = Basename(word);
      if (In(base, {"time", "nohup", "exec", "command", "builtin"})) {
        ++i_;
        while (i_ < w_.size() && w_[i_].starts_with('-')) ++i_;  // time -p, exec -a is rare
      } else if (base == "env" && i_ + 1 < w_.size()) {
        ++i_;
        while (i_ < w_.size()) {
          if (w_[i_] == "-u" || w_[i_] == "-C") {
            i_ += 2;
          } else if (w_[i_].starts_with('-')) {
            ++i_;
          } else if (IsAssignment(w_[i_])) {
            AddEnv(w_[i_++]);
          } else {
            break;
          }
        }
      } else if (In(base, {"numactl", "taskset", "stdbuf", "nice", "ionice", "timeout"})) {
        ReadUtilityWrapper(base);
      } else if (base == "srun") {
        Push("srun");
        SkipSrunOptions();
      } else if (base.starts_with("mpirun") || base.starts_with("mpiexec") ||
                 In(base, {"ibrun", "aprun", "jsrun"})) {
        Push(base.starts_with("mpirun")    ? "mpirun"
             : base.starts_with("mpiexec") ? "mpiexec"
                                           : std::string(base));
        SkipMpiOptions();
      } else if (base == "torchrun" || base == "deepspeed") {
        Push(std::string(base));
        if (SkipMlOptions()) return;
      } else if (base == "accelerate" && i_ + 1 < w_.size() && w_[i_ + 1] == "launch") {
        ++i_;
        Push("accelerate");
        if (SkipMlOptions()) return;
      } else if (base == "tune" && i_ + 1 < w_.size() && w_[i_ + 1] == "run") {
        // torchtune: `tune run [torchrun's options] RECIPE --config FILE [key=value …]`.
        ++i_;
        Push("tune");
        if (SkipMlOptions()) return;
      } else if ((base == "apptainer" || base == "singularity") && i_ + 1 < w_.size() &&
                 In(w_[i_ + 1], {"exec", "run"})) {
        bool run = w_[i_ + 1] == "run";
        i_ += 1;
        Push(std::string(base));
        SkipContainerOptions();
        if (i_ >= w_.size()) return;
        cmd_.container_image = w_[i_++];
        if (run) {  // the image's runscript runs, with these arguments
          SetProgram(cmd_.container_image);
          return;
        }
      } else if (In(base, {"conda", "mamba", "micromamba", "uv", "poetry", "pipenv"}) &&
                 i_ + 1 < w_.size() && w_[i_ + 1] == "run") {
        Push(std::string(base));
        ++i_;  // "run"
        while (i_ < w_.size() && w_[i_].starts_with('-')) {
          bool takes_value = In(w_[i_], {"-n", "--name", "-p", "--prefix", "--python", "--with",
                                         "--env-file", "--directory", "--project"});
          i_ += takes_value ? 2 : 1;
        }
        if (i_ < w_.size() && w_[i_].ends_with(".py")) {  // `uv run train.py`
          cmd_.wrappers.push_back("python");
          SetProgram(w_[i_]);
          return;
        }
      } else if (IsPythonInterpreter(base)) {
        Push("python");
        if (ReadPython()) return;
      } else {
        SetProgram(w_[i_]);
        return;
      }
    }
  }

 private:
  void Push(std::string name) {
    if (cmd_.launcher.empty() && name != "python" && name != "apptainer" && name != "singularity" &&
        !In(name, {"conda", "mamba", "micromamba", "uv", "poetry", "pipenv"})) {
      cmd_.launcher = name;
    }
    cmd_.wrappers.push_back(std::move(name));
    ++i_;
  }

  // The program is w_[i_]; everything after it is its arguments.
  void SetProgram(const std::string& program) {
    cmd_.program = program;
    cmd_.args.assign(w_.begin() + static_cast<std::ptrdiff_t>(std::min(i_ + 1, w_.size())),
                     w_.end());
    i_ = w_.size();
  }

  void AddEnv(std::string_view assignment) {
    auto eq = assignment.find('=');
    env_[std::string(assignment.substr(0, eq))] = std::string(assignment.substr(eq + 1));
  }

  void ReadUtilityWrapper(std::string_view base) {
    ++i_;
    // Options that take a value as the next word when not attached.
    auto takes_value = [&](std::string_view opt) {
      if (base == "numactl") return In(opt, {"-N", "-m", "-C", "-i", "-p", "-P"});
      if (base == "nice") return opt == "-n";
      if (base == "ionice") return In(opt, {"-c", "-n", "-p"});
      if (base == "timeout") return In(opt, {"-s", "-k"});
      return false;
    };
    while (i_ < w_.size() && w_[i_].starts_with('-')) {
      i_ += (takes_value(w_[i_]) && w_[i_].find('=') == std::string::npos) ? 2 : 1;
    }
    // taskset's CPU list and timeout's duration come before the command.
    if ((base == "taskset" || base == "timeout") && i_ < w_.size()) ++i_;
  }

  void SkipSrunOptions() {
    static constexpr std::string_view kShortWithValue = "ABbCcDdeGiJLMmNnopqrSTtWwx";
    while (i_ < w_.size() && w_[i_].starts_with('-') && w_[i_] != "-") {
      std::string_view o = w_[i_];
      if (o.starts_with("--")) {
        bool flag = o.find('=') != std::string_view::npos || In(o.substr(2), {"exclusive",
                                                                              "overlap",
                                                                              "label",
                                                                              "unbuffered",
                                                                              "pty",
                                                                              "verbose",
                                                                              "quiet",
                                                                              "exact",
                                                                              "whole",
                                                                              "kill-on-bad-exit",
                                                                              "no-kill",
                                                                              "multi-prog",
                                                                              "overcommit",
                                                                              "oversubscribe",
                                                                              "contiguous",
                                                                              "hold",
                                                                              "immediate",
                                                                              "preserve-env",
                                                                              "disable-status",
                                                                              "no-allocate",
                                                                              "test-only",
                                                                              "spread-job",
                                                                              "use-min-nodes",
                                                                              "help",
                                                                              "usage",
                                                                              "version",
                                                                              "reboot",
                                                                              "x11",
                                                                              "propagate",
                                                                              "nice",
                                                                              "bcast",
                                                                              "send-libs",
                                                                              "external-launcher",
                                                                              "compress",
                                                                              "get-user-env"});
        i_ += flag ? 1 : 2;
      } else {
        bool value = o.size() == 2 && kShortWithValue.find(o[1]) != std::string_view::npos;
        i_ += value ? 2 : 1;
      }
    }
  }

  void SkipMpiOptions() {
    while (i_ < w_.size() && w_[i_].starts_with('-') && w_[i_] != "-") {
      std::string o = w_[i_];
      while (o.starts_with('-')) o.erase(0, 1);
      bool inline_value = o.find('=') != std::string::npos;  // --opt=value: one word
      if (!inline_value && In(o, {"mca", "gmca", "genv", "env"})) {
        i_ += 3;  // name and value
      } else if (!inline_value && In(o, {"np",
                                         "n",
                                         "c",
                                         "N",
                                         "npernode",
                                         "npersocket",
                                         "ppn",
                                         "H",
                                         "host",
                                         "hosts",
                                         "hostfile",
                                         "machinefile",
                                         "f",
                                         "x",
                                         "wdir",
                                         "wd",
                                         "map-by",
                                         "bind-to",
                                         "rank-by",
                                         "prefix",
                                         "output-filename",
                                         "launcher",
                                         "bootstrap",
                                         "iface",
                                         "rf",
                                         "rankfile",
                                         "genvlist",
                                         "envlist",
                                         "cpus-per-proc",
                                         "cpus-per-rank",
                                         "tune",
                                         "am",
                                         "personality",
                                         "path",
                                         "configfile",
                                         "binding",
                                         "map",
                                         "depth",
                                         "d",
                                         "cc"})) {
        i_ += 2;
      } else {
        ++i_;
      }
    }
  }

  // torchrun, deepspeed and accelerate launch: long options, most with a value. Returns true
  // when the program was found (a module given with -m/--module).
  bool SkipMlOptions() {
    static constexpr std::array<std::string_view, 20> kFlags = {"standalone",
                                                                "no_python",
                                                                "no-python",
                                                                "run_path",
                                                                "run-path",
                                                                "multi_gpu",
                                                                "multi-gpu",
                                                                "cpu",
                                                                "tpu",
                                                                "use_deepspeed",
                                                                "use-deepspeed",
                                                                "use_fsdp",
                                                                "use-fsdp",
                                                                "use_megatron_lm",
                                                                "quiet",
                                                                "debug",
                                                                "no_local_rank",
                                                                "force_multi",
                                                                "bind_cores_to_rank",
                                                                "same_network"};
    while (i_ < w_.size() && w_[i_].starts_with('-') && w_[i_] != "-") {
      std::string_view o = w_[i_];
      if (o == "--") {  // the end of the launcher's options: the program comes next
        ++i_;
        return false;
      }
      if (o == "-m" || o == "--module") {
        ++i_;
        if (i_ < w_.size()) {
          std::string module = "-m " + w_[i_];
          SetProgram(module);
        }
        return true;
      }
      const size_t dashes = o.find_first_not_of('-');  // npos for a word of dashes ("---")
      std::string_view name = dashes == std::string_view::npos ? "" : o.substr(dashes);
      bool flag = o.find('=') != std::string_view::npos ||
                  std::find(kFlags.begin(), kFlags.end(), name) != kFlags.end() ||
                  i_ + 1 >= w_.size() || w_[i_ + 1].starts_with('-') || w_[i_ + 1].ends_with(".py");
      i_ += flag ? 1 : 2;
    }
    return false;
  }

  void SkipContainerOptions() {
    while (i_ < w_.size() && w_[i_].starts_with('-')) {
      std::string_view o = w_[i_];
      bool value = o.find('=') == std::string_view::npos &&
                   In(o, {"-B",         "--bind",     "--mount",    "--env",     "--env-file",
                          "-H",         "--home",     "--overlay",  "-o",        "--pwd",
                          "-W",         "--workdir",  "--security", "--network", "--network-args",
                          "--hostname", "--app",      "-S",         "--scratch", "--apply-cgroups",
                          "--dns",      "--add-caps", "--drop-caps"});
      i_ += value ? 2 : 1;
    }
  }

  // python [options] (script | -m module | -c code | -) [args]. Returns true when done.
  bool ReadPython() {
    while (i_ < w_.size() && w_[i_].starts_with('-') && w_[i_] != "-") {
      std::string_view o = w_[i_];
      if (o.starts_with("--")) {  // --version and the like
        ++i_;
        continue;
      }
      for (size_t j = 1; j < o.size(); ++j) {
        char c = o[j];
        if (c == 'W' || c == 'X') {
          if (j + 1 == o.size()) ++i_;  // the value is the next word
          break;
        }
        if (c == 'c') {
          cmd_.program = "-c";
          std::string code = j + 1 < o.size() ? std::string(o.substr(j + 1)) : "";
          size_t first = i_ + 1;
          if (code.empty() && first < w_.size()) code = w_[first++];
          cmd_.args = {code};
          cmd_.args.insert(cmd_.args.end(), w_.begin() + static_cast<std::ptrdiff_t>(first),
                           w_.end());
          i_ = w_.size();
          return true;
        }
        if (c == 'm') {
          std::string module = j + 1 < o.size() ? std::string(o.substr(j + 1)) : "";
          if (module.empty() && i_ + 1 < w_.size()) module = w_[++i_];
          if (module == "torch.distributed.run" || module == "torch.distributed.launch") {
            Push("torchrun");
            return SkipMlOptions();
          }
          cmd_.program = "-m " + module;
          cmd_.args.assign(w_.begin() + static_cast<std::ptrdiff_t>(std::min(i_ + 1, w_.size())),
                           w_.end());
          i_ = w_.size();
          return true;
        }
      }
      ++i_;
    }
    if (i_ < w_.size()) SetProgram(w_[i_]);
    return true;
  }

  const std::vector<std::string>& w_;
  JobScript::Command& cmd_;
  std::map<std::string, std::string>& env_;
  size_t i_ = 0;
};

class BodyReader {
 public:
  explicit BodyReader(JobScript& script) : s_(script) {}

  // One logical line of the body. Returns the heredoc delimiters it opens, in order.
  std::vector<std::string> ReadLine(std::string_view text, int line) {
    std::vector<std::string> heredocs;
    auto tokens = Lex(text);
    std::vector<std::string> words;
    size_t seg_begin = std::string_view::npos, seg_end = 0;
    auto flush = [&] {
      if (seg_begin != std::string_view::npos) {
        ReadCommand(words, Trim(text.substr(seg_begin, seg_end - seg_begin)), line);
      }
      words.clear();
      seg_begin = std::string_view::npos;
    };
    for (size_t i = 0; i < tokens.size(); ++i) {
      const Token& t = tokens[i];
      if (t.kind == Token::Kind::kSeparator) {
        flush();
        continue;
      }
      if (seg_begin == std::string_view::npos) seg_begin = t.begin;
      seg_end = t.end;
      if (t.kind == Token::Kind::kRedirect) {
        if (t.needs_target && i + 1 < tokens.size() && tokens[i + 1].kind == Token::Kind::kWord) {
          ++i;
          seg_end = tokens[i].end;
          if (t.text == "<<" || t.text == "<<-") heredocs.push_back(tokens[i].text);
        }
        continue;
      }
      words.push_back(t.text);
    }
    flush();
    return heredocs;
  }

 private:
  void ReadCommand(const std::vector<std::string>& all, std::string_view text, int line) {
    size_t i = 0;
    // Shell grammar around commands: `if cmd; then cmd; fi`, `( … )`, `{ …; }`, `! cmd`.
    while (i < all.size() &&
           In(all[i], {"if", "then", "elif", "else", "while", "until", "do", "!", "{", "("})) {
      ++i;
    }
    if (i < all.size() && all[i].ends_with(")") && all[i] != ")" && !all[i].ends_with("()") &&
        all[i].find('(') == std::string::npos) {
      ++i;  // a case pattern: "1)", "*)"
    }
    if (i >= all.size()) return;
    const std::string& first = all[i];
    if (In(first, {"fi", "done", "esac", "}", ")", "for", "case", "select", "function", "[[", "[",
                   "test", "local", "readonly", "declare", "typeset"}) ||
        first.ends_with("()")) {
      return;
    }
    while (i < all.size() && IsAssignment(all[i])) AddEnv(all[i++]);
    if (i >= all.size()) return;  // only assignments
    if (all[i] == "export") {
      for (++i; i < all.size(); ++i) {
        if (IsAssignment(all[i])) AddEnv(all[i]);
      }
      return;
    }
    if (all[i] == "module" || all[i] == "ml") {
      ReadModules(all, i);
      return;
    }
    std::vector<std::string> words(all.begin() + static_cast<std::ptrdiff_t>(i), all.end());
    JobScript::Command cmd;
    cmd.line = line;
    cmd.text = std::string(text);
    CommandReader(words, cmd, s_.env).Read();
    if (cmd.launcher.empty() &&
        std::find(cmd.wrappers.begin(), cmd.wrappers.end(), "python") != cmd.wrappers.end()) {
      cmd.launcher = "python";
    }
    cmd.housekeeping =
        cmd.wrappers.empty() && HousekeepingPrograms().count(Basename(cmd.program)) > 0;
    s_.commands.push_back(std::move(cmd));
  }

  void AddEnv(std::string_view assignment) {
    auto eq = assignment.find('=');
    std::string name(assignment.substr(0, eq));
    if (name.ends_with('+')) name.pop_back();
    s_.env[name] = std::string(assignment.substr(eq + 1));
  }

  // `module load a b`, `module add a`, `ml a b`, `ml load a`; `ml -a` unloads.
  void ReadModules(const std::vector<std::string>& words, size_t i) {
    bool ml = words[i] == "ml";
    ++i;
    while (i < words.size() && words[i].starts_with('-')) ++i;  // module --ignore-cache load
    if (i >= words.size()) return;
    if (In(words[i], {"load", "add", "try-load", "try-add"})) {
      ++i;
    } else if (!ml /* module unload, purge, use, list, … */ ||
               In(words[i], {"unload", "del",     "rm",       "purge",  "list",   "avail",
                             "av",     "spider",  "show",     "use",    "unuse",  "swap",
                             "switch", "save",    "restore",  "help",   "whatis", "keyword",
                             "reset",  "refresh", "describe", "disable"})) {
      return;
    }
    for (; i < words.size(); ++i) {
      if (!words[i].starts_with('-')) s_.modules.push_back(words[i]);
    }
  }

  JobScript& s_;
};

// A physical line: its text without the line break, and whether it ended in CRLF.
std::vector<std::string_view> SplitLines(std::string_view text, int* first_crlf_line) {
  std::vector<std::string_view> lines;
  *first_crlf_line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
      if (*first_crlf_line == 0) *first_crlf_line = static_cast<int>(lines.size()) + 1;
    }
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return lines;
}

bool EndsWithContinuation(std::string_view line) {
  size_t n = 0;
  while (n < line.size() && line[line.size() - 1 - n] == '\\') ++n;
  return n % 2 == 1;
}

}  // namespace

std::string ScriptWarning::ToString() const {
  if (line == 0) return fmt::format("command line: {}", message);
  return fmt::format("line {}: {}", line, message);
}

const JobScript::Command* JobScript::MainCommand() const {
  for (const auto& c : commands) {
    if (!c.launcher.empty() && c.launcher != "python") return &c;
  }
  for (const auto& c : commands) {
    if (c.launcher == "python") return &c;
  }
  for (const auto& c : commands) {
    if (!c.housekeeping) return &c;
  }
  return nullptr;
}

StatusOr<JobScript> ParseJobScript(std::string_view text,
                                   const std::vector<std::string>& command_line_args) {
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::BadInput(
        fmt::format("not a batch script: a NUL byte at offset {} means a binary file", nul));
  }
  JobScript s;
  OptionState options(s);
  BodyReader body(s);
  Fnv1a64 hash;

  if (text.starts_with("\xEF\xBB\xBF")) {
    text.remove_prefix(3);
    options.Warn(1,
                 "the file starts with a UTF-8 byte-order mark: sbatch will not see the "
                 "#! line; save it without one");
  }
  int first_crlf_line = 0;
  std::vector<std::string_view> lines = SplitLines(text, &first_crlf_line);
  if (first_crlf_line != 0) {
    options.Warn(first_crlf_line,
                 "DOS line breaks (\\r\\n): sbatch refuses the script; convert it with dos2unix");
  }
  if (lines.empty() || !lines[0].starts_with("#!")) {
    options.Warn(1,
                 "no #! line: sbatch requires the first line to name an interpreter, like "
                 "#!/bin/bash");
  } else {
    s.shebang = std::string(Trim(lines[0].substr(2)));
  }

  bool in_header = true;
  bool any_directive = false;
  bool heterogeneous = false;
  int first_command_line = 0;
  std::vector<std::string> heredocs;  // delimiters still to be seen, first one first
  for (size_t i = 0; i < lines.size(); ++i) {
    int line_no = static_cast<int>(i) + 1;
    std::string_view raw = lines[i];
    if (!heredocs.empty()) {
      // Heredoc text is data for a command, part of the program but never a directive.
      if (Trim(raw) == heredocs.front()) heredocs.erase(heredocs.begin());
      hash.Add(Normalize(raw));
      hash.Add("\n");
      continue;
    }
    // A logical line: `\` at the end joins the next line, for directives and commands alike.
    auto join = [&](std::string_view first) {
      std::string joined(first);
      while (EndsWithContinuation(joined) && i + 1 < lines.size()) {
        joined.pop_back();
        joined += lines[++i];
      }
      return joined;
    };
    if (raw.starts_with("#SBATCH")) {
      std::string directive = join(raw);
      if (!in_header) {
        options.Warn(line_no, fmt::format("#SBATCH after the first command (line {}) is ignored "
                                          "by sbatch; move it above",
                                          first_command_line));
        continue;
      }
      auto words = SplitDirective(std::string_view(directive).substr(7));
      if (words.empty()) continue;
      any_directive = true;
      if (words.size() == 1 && (words[0] == "hetjob" || words[0] == "packjob")) {
        if (!heterogeneous) {
          options.Warn(line_no,
                       "heterogeneous job: only the first component's resources are "
                       "read");
        }
        heterogeneous = true;
        continue;
      }
      if (heterogeneous) continue;
      options.ApplyArgs(words, line_no, /*from_command_line=*/false);
      continue;
    }
    std::string_view trimmed = Trim(raw);
    if (trimmed.empty()) continue;
    if (trimmed.front() == '#') {
      if (in_header && trimmed.starts_with("#SBATCH")) {
        options.Warn(line_no, "an indented #SBATCH is ignored by sbatch; start it in column 1");
      }
      continue;
    }
    std::string logical = join(raw);
    if (in_header) {
      in_header = false;
      first_command_line = line_no;
    }
    std::string_view code = logical;
    if (auto c = CommentStart(code); c != std::string_view::npos) code = code.substr(0, c);
    hash.Add(Normalize(code));
    hash.Add("\n");
    auto opened = body.ReadLine(code, line_no);
    heredocs.insert(heredocs.end(), opened.begin(), opened.end());
  }

  options.ApplyArgs(command_line_args, 0, /*from_command_line=*/true);
  options.Finish();

  if (!any_directive && s.commands.empty()) {
    return Status::BadInput("not a batch script: no #SBATCH directive and no command to run");
  }
  // Plain text ("hello world") reads as a command; sbatch refuses a file with no #! line, and
  // with no directive either nothing marks it as a job script.
  if (!any_directive && (lines.empty() || !lines[0].starts_with("#!"))) {
    return Status::BadInput(
        "not a batch script: no #! line and no #SBATCH directive (sbatch requires the first line "
        "to name an interpreter, like #!/bin/bash)");
  }
  s.body_hash = hash.Hex();
  return s;
}

StatusOr<JobScript> ParseJobScriptFile(const std::string& path,
                                       const std::vector<std::string>& command_line_args) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return Status::NotFound(fmt::format("{}: no such job script", path));
    }
    return Status::IoError(fmt::format("{}: cannot open the job script", path));
  }
  std::string text;
  char buf[64 * 1024];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxJobScriptBytes) {
      return Status::BadInput(
          fmt::format("{}: larger than {} bytes: not a batch script", path, kMaxJobScriptBytes));
    }
  }
  if (in.bad()) return Status::IoError(fmt::format("{}: read error", path));
  auto parsed = ParseJobScript(text, command_line_args);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  return parsed;
}

std::optional<GresGpus> ParseGresGpus(std::string_view text) { return ParseGres(text); }

}  // namespace rightsize
