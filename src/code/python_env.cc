#include "code/python_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string_view>
#include <vector>

#include "code/analyzer.h"
#include "core/units.h"

namespace rightsize::code {
namespace {

namespace fs = std::filesystem;

const char* EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The folders of a PATH-like list; empty entries are skipped.
std::vector<std::string> SplitPath(const std::string& list) {
  std::vector<std::string> out;
  for (std::string_view dir : Split(list, ":")) {
    if (!dir.empty()) out.emplace_back(dir);
  }
  return out;
}

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The first line of a file, at most 256 bytes ("" when unreadable).
std::string FirstLine(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string line(256, '\0');
  in.read(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<size_t>(in.gcount()));
  return line.substr(0, line.find('\n'));
}

// `name` as the shell would find it on `path`; "" when it is on none of its folders.
std::string OnPath(const std::string& name, const std::string& path) {
  for (const std::string& dir : SplitPath(path)) {
    fs::path p = fs::path(dir) / name;
    if (IsFile(p)) return p.string();
  }
  return "";
}

// `__version__ = '1.13.0a0'` in torch/version.py: the version and its line.
std::optional<std::pair<std::string, int>> ReadVersionFile(const fs::path& p) {
  std::error_code ec;
  if (fs::file_size(p, ec) > (1 << 20) || ec) return std::nullopt;  // not torch's version.py
  std::ifstream in(p);
  std::string line;
  for (int n = 1; n <= 200 && std::getline(in, line); ++n) {
    if (!line.starts_with("__version__")) continue;
    size_t q = line.find_first_of("'\"");
    if (q == std::string::npos) return std::nullopt;
    size_t end = line.find(line[q], q + 1);
    if (end == std::string::npos) return std::nullopt;
    return std::make_pair(line.substr(q + 1, end - q - 1), n);
  }
  return std::nullopt;
}

// The folders under `dir` whose names start with `prefix`, sorted ("" errors: none).
std::vector<std::string> Children(const fs::path& dir, std::string_view prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.starts_with(prefix)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The folders the interpreter at `interp` (as found: a virtualenv's bin/python is a link to
// its base Python) imports site packages from, in the order site.py searches them: PYTHONPATH,
// the user's site-packages (not in a virtualenv without the system's), a virtualenv's, then
// the base Python's (Debian's dist-packages, python.org's and conda's site-packages, lib64 on
// Red Hat).
std::vector<fs::path> SiteFolders(const fs::path& interp, const JobEnvironment& env) {
  std::vector<fs::path> front, out;
  for (const std::string& d : SplitPath(env.pythonpath)) front.emplace_back(d);
  std::error_code ec;
  fs::path venv = interp.parent_path().parent_path();
  bool in_venv = IsFile(venv / "pyvenv.cfg");
  bool system_site = true;
  if (in_venv) {
    std::ifstream cfg(venv / "pyvenv.cfg");
    std::string line;
    system_site = false;
    while (std::getline(cfg, line)) {
      std::vector<std::string_view> kv = Split(line, "=");
      if (kv.size() == 2 && Trim(kv[0]) == "include-system-site-packages") {
        system_site = EqualsIgnoreCase(Trim(kv[1]), "true");
      }
    }
    for (const std::string& lib : Children(venv / "lib", "python")) {
      out.push_back(venv / "lib" / lib / "site-packages");
    }
  }
  auto joined = [&] {
    front.insert(front.end(), out.begin(), out.end());
    return front;
  };
  if (!system_site) return joined();
  fs::path real = fs::canonical(interp, ec);
  if (ec) return joined();
  fs::path prefix = real.parent_path().parent_path();
  // The X.Y of the interpreter: from its name (python3.11), else every lib/pythonX.Y it has.
  std::vector<std::string> versions;
  std::string name = real.filename().string();
  if (name.size() > 6 && name.find('.') != std::string::npos) versions.push_back(name.substr(6));
  if (versions.empty()) {
    for (const std::string& lib : Children(prefix / "lib", "python3.")) {
      versions.push_back(lib.substr(6));
    }
  }
  for (const std::string& v : versions) {
    if (!env.home.empty()) {
      front.push_back(fs::path(env.home) / ".local/lib" / ("python" + v) / "site-packages");
    }
  }
  for (const std::string& v : versions) {
    out.push_back(prefix / "local/lib" / ("python" + v) / "dist-packages");  // Debian, pip
  }
  out.push_back(prefix / "lib/python3/dist-packages");  // Debian's packages
  for (const std::string& v : versions) {
    for (const char* lib : {"lib", "lib64", "local/lib"}) {
      out.push_back(prefix / lib / ("python" + v) / "site-packages");
    }
    out.push_back(prefix / "lib" / ("python" + v) / "dist-packages");
  }
  return joined();
}

// `word` with a leading ~ and $HOME (${HOME}) expanded from env.home; "" when it holds another
// variable, which the job's shell would expand from an environment not read here.
std::string Expanded(std::string word, const JobEnvironment& env) {
  for (const char* home : {"${HOME}", "$HOME"}) {
    if (word.starts_with(home) && !env.home.empty()) word = env.home + word.substr(strlen(home));
  }
  if (word.starts_with("~/") && !env.home.empty()) word = env.home + word.substr(1);
  return word.find_first_of("$~`") == std::string::npos ? word : "";
}

// The words of `cmd` before its program: the launchers, wrappers and interpreter.
std::vector<std::string> WordsBeforeProgram(const JobScript::Command& cmd) {
  std::vector<std::string> words = internal::ShellWords(cmd.text);
  for (size_t i = 0; i < words.size(); ++i) {
    if (!cmd.program.empty() && words[i].ends_with(cmd.program)) {
      words.resize(i);
      break;
    }
  }
  return words;
}

// Tools that choose the Python (or the whole environment) a command runs in by a logic not
// followed here.
bool ChoosesEnvironment(const std::string& word) {
  static const std::set<std::string, std::less<>> kTools = {
      "conda",  "mamba",   "micromamba", "uv",          "poetry",       "pipenv", "pixi",
      "spack",  "pyenv",   "module",     "ml",          "nix-shell",    "docker", "podman",
      "enroot", "shifter", "apptainer",  "singularity", "charliecloud", "ch-run"};
  return kTools.count(fs::path(word).filename().string()) != 0;
}

// Why the job's Python cannot be told from this shell's environment, if it cannot: the job does
// not get it (--export=NONE), or the script or the command changes it.
std::optional<std::string> Unfollowed(const JobScript& script, const JobScript::Command& cmd) {
  for (const auto& d : script.directives) {
    if (d.name == "export" && d.value != "ALL" && !d.value.starts_with("ALL,")) {
      return fmt::format(
          "#SBATCH --export={} (line {}): the job does not get this shell's "
          "environment",
          d.value, d.line);
    }
  }
  if (!script.modules.empty()) {
    return fmt::format("the script loads modules ({}): its Python is theirs",
                       fmt::join(script.modules, ", "));
  }
  if (!cmd.container_image.empty()) {
    return fmt::format("the program runs in the container {}", cmd.container_image);
  }
  for (const char* name : {"PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONHOME", "PYTHONPATH",
                           "PYTHONUSERBASE", "PYTHONNOUSERSITE"}) {
    if (script.env.count(name) != 0) return fmt::format("the script sets {}", name);
  }
  for (const JobScript::Command& c : script.commands) {
    if (&c == &cmd) break;
    std::vector<std::string> w = internal::ShellWords(c.text);
    if (!w.empty() && ChoosesEnvironment(w[0])) {
      return fmt::format("line {} runs {}, which chooses the environment", c.line, w[0]);
    }
  }
  for (const std::string& w : WordsBeforeProgram(cmd)) {
    if (ChoosesEnvironment(w)) return fmt::format("the program runs through {}", w);
    if (w.starts_with("--container")) return fmt::format("the program runs in a container ({})", w);
  }
  return std::nullopt;
}

}  // namespace

JobEnvironment JobEnvironment::OfThisProcess() {
  JobEnvironment env;
  env.path = EnvOr("PATH");
  env.home = EnvOr("HOME");
  env.pythonpath = EnvOr("PYTHONPATH");
  return env;
}

std::optional<bool> VersionAtLeast(std::string_view version, int major, int minor, int patch) {
  std::array<int, 3> have{};
  size_t i = 0;
  for (int& part : have) {
    size_t start = i;
    while (i < version.size() && std::isdigit(static_cast<unsigned char>(version[i])) &&
           i - start < 6) {
      part = part * 10 + (version[i++] - '0');
    }
    if (i == start) {
      if (&part == have.data()) return std::nullopt;  // not a version
      break;
    }
    if (i >= version.size() || version[i] != '.') break;
    ++i;
  }
  return have >= std::array<int, 3>{major, minor, patch};
}

std::optional<TorchInstall> FindTorch(const JobScript& script, const JobScript::Command& cmd,
                                      const std::string& code_dir, const JobEnvironment& env,
                                      std::string* why) {
  auto fail = [why](std::string reason) -> std::optional<TorchInstall> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (!env.Readable()) return fail("the job's environment is not known here");
  TorchInstall out;
  fs::path interp;
  if (!env.python.empty()) {
    interp = env.python;
    if (env.python.find('/') == std::string::npos) interp = OnPath(env.python, env.path);
    out.found_as = "--python";
  } else {
    if (auto reason = Unfollowed(script, cmd)) return fail(*reason);
    // A virtualenv activated by an earlier command of the script.
    fs::path venv;
    std::string venv_line;
    for (const JobScript::Command& c : script.commands) {
      if (&c == &cmd) break;
      std::vector<std::string> w = internal::ShellWords(c.text);
      if (w.empty() || (w[0] != "source" && w[0] != ".")) continue;
      std::string file = w.size() >= 2 ? Expanded(w[1], env) : "";
      if (file.empty()) {
        return fail(fmt::format("line {} sources {}, a path not expanded here", c.line,
                                w.size() >= 2 ? w[1] : "nothing"));
      }
      fs::path f = fs::path(file).is_relative() ? fs::path(code_dir) / file : fs::path(file);
      fs::path dir = f.parent_path().parent_path();
      if (!f.string().ends_with("/bin/activate") || w.size() > 2 || !IsFile(dir / "pyvenv.cfg")) {
        return fail(
            fmt::format("line {} sources {}, which is not a virtualenv's activate", c.line, w[1]));
      }
      venv = dir;
      venv_line = fmt::format("{}", c.line);
    }
    // The interpreter the command names before its program, else the one a launcher's console
    // script starts with.
    std::vector<std::string> words = WordsBeforeProgram(cmd);
    std::string word;
    for (const std::string& w : words) {
      if (IsPythonInterpreter(fs::path(w).filename().string())) {
        word = w;
        break;
      }
    }
    for (size_t i = 0; i < words.size() && word.empty(); ++i) {
      std::string name = fs::path(words[i]).filename().string();
      if (name != "torchrun" && name != "accelerate" && name != "deepspeed" && name != "tune") {
        continue;
      }
      std::string launcher;
      if (words[i].find('/') != std::string::npos) {
        launcher =
            fs::path(words[i]).is_relative() ? (fs::path(code_dir) / words[i]).string() : words[i];
      } else if (!venv.empty() && IsFile(venv / "bin" / name)) {
        launcher = (venv / "bin" / name).string();
      } else {
        launcher = OnPath(name, env.path);
      }
      if (launcher.empty() || !IsFile(launcher)) {
        return fail(fmt::format("{} is not on PATH", name));
      }
      std::string shebang = FirstLine(launcher);
      std::vector<std::string> sw = shebang.starts_with("#!")
                                        ? internal::ShellWords(shebang.substr(2))
                                        : std::vector<std::string>{};
      if (sw.size() >= 2 && fs::path(sw[0]).filename() == "env") sw.erase(sw.begin());
      if (sw.empty() || !IsPythonInterpreter(fs::path(sw[0]).filename().string())) {
        return fail(fmt::format("{} does not start with a Python of its own", launcher));
      }
      word = sw[0];
    }
    if (word.empty()) return fail("the command names no Python interpreter");
    if (word.find('/') != std::string::npos) {
      interp = fs::path(word).is_relative() ? fs::path(code_dir) / word : fs::path(word);
      out.found_as = word;
    } else if (!venv.empty() && IsFile(venv / "bin" / word)) {
      interp = venv / "bin" / word;
      out.found_as = fmt::format("{} of the virtualenv activated at line {}", word, venv_line);
    } else {
      std::string found = OnPath(word, env.path);
      if (found.empty()) return fail(fmt::format("{} is not on PATH", word));
      interp = found;
      out.found_as = fmt::format("{} on PATH", word);
    }
  }
  if (interp.empty() || !IsFile(interp)) {
    return fail(fmt::format("{} does not exist", interp.empty() ? env.python : interp.string()));
  }
  std::error_code ec;
  fs::path real = fs::canonical(interp, ec);
  if (ec || !IsPythonInterpreter(real.filename().string())) {
    return fail(fmt::format("{} is not a Python interpreter", interp.string()));
  }
  // A shim (pyenv's, a wrapper script) chooses its Python when it runs.
  if (FirstLine(interp).starts_with("#!")) {
    return fail(
        fmt::format("{} is a script that chooses the Python when it runs", interp.string()));
  }
  out.interpreter = interp.string();
  for (const fs::path& dir : SiteFolders(interp, env)) {
    fs::path file = dir / "torch" / "version.py";
    if (!IsFile(file)) continue;
    auto version = ReadVersionFile(file);
    if (!version) return fail(fmt::format("{} holds no __version__", file.string()));
    out.version = version->first;
    out.line = version->second;
    out.file = file.string();
    return out;
  }
  return fail(fmt::format("{} imports no torch", out.interpreter));
}

}  // namespace rightsize::code
