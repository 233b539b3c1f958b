#include "code/python_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "code/analyzer.h"

namespace rightsize::code {
namespace {

namespace fs = std::filesystem;

const char* EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// "python", "python3", "python3.11": a word that names an interpreter.
bool IsPythonName(std::string_view name) {
  if (!name.starts_with("python")) return false;
  name.remove_prefix(6);
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
}

std::vector<std::string> SplitPath(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
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

// The folders the interpreter at `interp` (as found: a virtualenv's bin/python is a link to
// its base Python) imports site packages from, in the order it searches them.
std::vector<fs::path> SiteFolders(const fs::path& interp, const JobEnvironment& env) {
  std::vector<fs::path> out;
  for (const std::string& d : SplitPath(env.pythonpath)) out.emplace_back(d);
  std::error_code ec;
  fs::path venv = interp.parent_path().parent_path();
  bool in_venv = IsFile(venv / "pyvenv.cfg");
  bool system_site = true;
  if (in_venv) {
    std::ifstream cfg(venv / "pyvenv.cfg");
    std::string line;
    system_site = false;
    while (std::getline(cfg, line)) {
      if (line.starts_with("include-system-site-packages")) {
        system_site = line.find("true") != std::string::npos;
      }
    }
    for (const auto& entry : fs::directory_iterator(venv / "lib", ec)) {
      if (entry.path().filename().string().starts_with("python")) {
        out.push_back(entry.path() / "site-packages");
      }
    }
  }
  if (!system_site) return out;
  fs::path real = fs::canonical(interp, ec);
  if (ec) return out;
  fs::path prefix = real.parent_path().parent_path();
  // The X.Y of the interpreter: from its name (python3.11), else every lib/pythonX.Y it has.
  std::vector<std::string> versions;
  std::string name = real.filename().string();
  if (name.size() > 6 && name.find('.') != std::string::npos) versions.push_back(name.substr(6));
  if (versions.empty()) {
    for (const auto& entry : fs::directory_iterator(prefix / "lib", ec)) {
      std::string d = entry.path().filename().string();
      if (d.starts_with("python3.")) versions.push_back(d.substr(6));
    }
    std::sort(versions.begin(), versions.end());
  }
  for (const std::string& v : versions) {
    if (!in_venv && !env.home.empty()) {
      out.push_back(fs::path(env.home) / ".local/lib" / ("python" + v) / "site-packages");
    }
    out.push_back(prefix / "local/lib" / ("python" + v) / "dist-packages");  // Debian, pip
  }
  out.push_back(prefix / "lib/python3/dist-packages");  // Debian's packages
  for (const std::string& v : versions) {
    out.push_back(prefix / "lib" / ("python" + v) / "site-packages");
    out.push_back(prefix / "lib" / ("python" + v) / "dist-packages");
  }
  return out;
}

}  // namespace

JobEnvironment JobEnvironment::OfThisProcess() {
  JobEnvironment env;
  env.path = EnvOr("PATH");
  env.home = EnvOr("HOME");
  env.pythonpath = EnvOr("PYTHONPATH");
  return env;
}

int TorchInstall::Major() const {
  int major = 0;
  for (char c : version) {
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    major = major * 10 + (c - '0');
  }
  return major;
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
    out.found_as = "--python";
  } else {
    if (!script.modules.empty()) {
      return fail(fmt::format("the script loads modules ({}): its Python is theirs",
                              fmt::join(script.modules, ", ")));
    }
    if (!cmd.container_image.empty()) {
      return fail(fmt::format("the program runs in the container {}", cmd.container_image));
    }
    for (const char* name : {"PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONHOME"}) {
      if (script.env.count(name) != 0) return fail(fmt::format("the script sets {}", name));
    }
    // A virtualenv activated by an earlier command of the script; conda and the like choose
    // their Python by a logic not followed here.
    fs::path venv;
    std::string venv_line;
    for (const JobScript::Command& c : script.commands) {
      if (c.line >= cmd.line) break;
      std::vector<std::string> w = internal::ShellWords(c.text);
      if (w.empty()) continue;
      if ((w[0] == "source" || w[0] == ".") && w.size() >= 2 && w[1].ends_with("/bin/activate")) {
        venv = fs::path(w[1]).parent_path().parent_path();
        if (venv.is_relative()) venv = fs::path(code_dir) / venv;
        venv_line = fmt::format("{}", c.line);
      } else if (w[0] == "conda" || w[0] == "mamba" || w[0] == "micromamba" || w[0] == "spack" ||
                 w[0] == "pyenv" || (w[0] == "source" && w.size() >= 2 && w[1] == "activate")) {
        return fail(fmt::format("the script's line {} chooses the Python ({})", c.line, w[0]));
      }
    }
    // The interpreter the command names, else the one a launcher's own script starts with.
    std::string word;
    std::vector<std::string> words = internal::ShellWords(cmd.text);
    for (const std::string& w : words) {
      if (IsPythonName(fs::path(w).filename().string())) {
        word = w;
        break;
      }
    }
    if (word.empty() && !cmd.launcher.empty()) {
      for (const std::string& w : words) {
        if (fs::path(w).filename() != cmd.launcher) continue;
        std::string launcher = w.find('/') != std::string::npos ? w : OnPath(w, env.path);
        if (!venv.empty() && w.find('/') == std::string::npos && IsFile(venv / "bin" / w)) {
          launcher = (venv / "bin" / w).string();
        }
        std::string shebang = launcher.empty() ? "" : FirstLine(launcher);
        if (shebang.starts_with("#!")) {
          std::vector<std::string> sw = internal::ShellWords(shebang.substr(2));
          if (!sw.empty() && fs::path(sw[0]).filename() == "env" && sw.size() >= 2) {
            word = sw[1];
          } else if (!sw.empty()) {
            word = sw[0];
          }
        }
        break;
      }
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
  if (!IsFile(interp)) return fail(fmt::format("{} does not exist", interp.string()));
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
