// `rightsize gendocs` (hidden): man pages and shell completion generated from the CLI11 command
// tree itself, so the installed documentation cannot drift from the flags the binary accepts.
// The build runs it (`--man DIR`, `--completion bash|zsh`) and the packages install the output.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/units.h"

namespace rightsize::cli {

namespace {

struct DocsFlags {
  std::string man_dir;
  std::string completion;
};

// A command in the tree: its words from the top ("rightsize", "ingest", "sacct") and its App.
struct Node {
  std::vector<std::string> words;
  const CLI::App* app = nullptr;
};

std::string Join(const std::vector<std::string>& words, const std::string& sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

// The visible subcommands (a command in the empty group is hidden, as in --help).
std::vector<const CLI::App*> Visible(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) { return !sub->get_group().empty(); });
}

// Visible options, named ones first; help, help-all and hidden ones left out.
std::vector<const CLI::Option*> Options(const CLI::App& app) {
  return app.get_options([&](const CLI::Option* o) {
    return !o->get_group().empty() && o != app.get_help_ptr() && o != app.get_help_all_ptr();
  });
}

void Walk(const CLI::App& app, std::vector<std::string> words, std::vector<Node>* out) {
  out->push_back({words, &app});
  for (const CLI::App* sub : Visible(app)) {
    auto next = words;
    next.push_back(sub->get_name());
    Walk(*sub, next, out);
  }
}

bool TakesValue(const CLI::Option& o) { return o.get_expected_min() > 0; }

// roff: a backslash is \e, a line may not start with '.' or '\'', a '-' in a name is \-.
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (line_start && (c == '.' || c == '\'')) {
      out += "\\&";
      out += c;
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}
std::string RoffName(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

std::string OptionSynopsis(const CLI::Option& o) {
  if (!o.nonpositional()) return "\\fI" + o.get_name(true) + "\\fR";
  std::vector<std::string> names;
  for (const auto& s : o.get_snames()) names.push_back("\\fB\\-" + s + "\\fR");
  for (const auto& l : o.get_lnames()) names.push_back("\\fB" + RoffName("--" + l) + "\\fR");
  std::string out = Join(names, ", ");
  if (TakesValue(o)) {
    std::string type = o.get_type_name();
    out += " \\fI" + Roff(type.empty() ? "VALUE" : type) + "\\fR";
  }
  return out;
}

void RoffOptions(const CLI::App& app, std::string* out) {
  for (const CLI::Option* o : Options(app)) {
    *out += ".TP\n" + OptionSynopsis(*o) + "\n" + Roff(o->get_description());
    if (o->get_required()) *out += " (required)";
    *out += "\n";
  }
}

std::string ManHeader(const std::string& name, const std::string& summary) {
  return fmt::format(".TH {} 1 \"\" \"rightsize {}\" \"rightsize manual\"\n.SH NAME\n{} \\- {}\n",
                     name, RIGHTSIZE_VERSION, RoffName(name), Roff(summary));
}

// The first line of a description: the NAME line's summary.
std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

const char* kExitStatus = ".SH EXIT STATUS\n0 ok, 1 usage error, 2 bad input, 3 internal error.\n";

// rightsize.1: the program, its global options and its commands; rightsize-CMD.1: one command
// with all its subcommands (e.g. rightsize-ingest.1 holds ingest sacct, swf, ...).
Status WriteManPages(const CLI::App& root, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError(fmt::format("--man {}: {}", Quote(dir), ec.message()));
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    std::string path = dir + "/" + name + ".1";
    std::ofstream f(path, std::ios::binary);
    f << text;
    f.close();
    if (!f) return Status::IoError(fmt::format("cannot write {}", Quote(path)));
    return Status::Ok();
  };
  std::string top = ManHeader("rightsize", FirstLine(root.get_description()));
  top += ".SH SYNOPSIS\n\\fBrightsize\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]\n";
  top += ".SH DESCRIPTION\n" + Roff(root.get_description()) + "\n.SH OPTIONS\n";
  RoffOptions(root, &top);
  top += ".SH COMMANDS\n";
  std::string see_also;
  for (const CLI::App* cmd : Visible(root)) {
    std::string page = "rightsize-" + cmd->get_name();
    top += ".TP\n\\fB" + RoffName(cmd->get_name()) + "\\fR\n" + Roff(cmd->get_description()) +
           " See \\fB" + RoffName(page) + "\\fR(1).\n";
    see_also += (see_also.empty() ? "" : ",\n") + ("\\fB" + RoffName(page) + "\\fR(1)");
  }
  top += kExitStatus;
  top +=
      ".SH FILES\nThe store: \\fB\\-\\-db\\fR, else \\fB$RIGHTSIZE_DB\\fR, else "
      "\\fI~/.local/share/rightsize/rightsize.db\\fR.\n";
  top += ".SH SEE ALSO\n" + see_also + "\n";
  RS_RETURN_IF_ERROR(write("rightsize", top));

  for (const CLI::App* cmd : Visible(root)) {
    std::vector<Node> nodes;
    Walk(*cmd, {"rightsize", cmd->get_name()}, &nodes);
    std::string name = "rightsize-" + cmd->get_name();
    std::string page = ManHeader(name, FirstLine(cmd->get_description()));
    page += ".SH SYNOPSIS\n";
    for (const Node& n : nodes) {
      page += ".nf\n\\fB" + RoffName(Join(n.words, " ")) + "\\fR [\\fIOPTIONS\\fR]";
      if (!Visible(*n.app).empty()) page += " \\fISUBCOMMAND\\fR";
      for (const CLI::Option* o : Options(*n.app)) {
        if (!o->nonpositional()) page += " " + OptionSynopsis(*o);
      }
      page += "\n.fi\n";
    }
    page += ".SH DESCRIPTION\n" + Roff(cmd->get_description()) + "\n";
    if (!cmd->get_footer().empty()) page += ".PP\n" + Roff(cmd->get_footer()) + "\n";
    if (!Options(*cmd).empty()) {
      page += ".SH OPTIONS\n";
      RoffOptions(*cmd, &page);
    }
    for (size_t i = 1; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      page += ".SH " + Roff(Join({n.words.begin() + 1, n.words.end()}, " ")) + "\n" +
              Roff(n.app->get_description()) + "\n";
      if (!n.app->get_footer().empty()) page += ".PP\n" + Roff(n.app->get_footer()) + "\n";
      RoffOptions(*n.app, &page);
    }
    page += ".SH GLOBAL OPTIONS\n";
    RoffOptions(root, &page);
    page += kExitStatus;
    page += ".SH SEE ALSO\n\\fBrightsize\\fR(1)\n";
    RS_RETURN_IF_ERROR(write(name, page));
  }
  return Status::Ok();
}

// Shell words never need quoting here: command and option names are [a-z0-9-].
std::vector<std::string> OptionNames(const CLI::App& app, bool with_value) {
  std::vector<std::string> out;
  for (const CLI::Option* o : Options(app)) {
    if (!o->nonpositional() || TakesValue(*o) != with_value) continue;
    for (const auto& s : o->get_snames()) out.push_back("-" + s);
    for (const auto& l : o->get_lnames()) out.push_back("--" + l);
  }
  return out;
}
std::vector<std::string> Words(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* sub : Visible(app)) out.push_back(sub->get_name());
  for (bool v : {false, true}) {
    for (auto& o : OptionNames(app, v)) out.push_back(o);
  }
  out.emplace_back("--help");
  return out;
}

// The command path so far: each word that names a subcommand of the current path extends it.
// Completion offers the path's subcommands and options; after an option that takes a value it
// offers files (the shell's default), which is what most of them name.
std::string BashCompletion(const std::vector<Node>& nodes) {
  std::string subs, values, words;
  for (const Node& n : nodes) {
    std::string path = Join(n.words, " ");
    for (const CLI::App* sub : Visible(*n.app)) {
      subs += fmt::format("      \"{} {}\") cmdpath=\"{} {}\" ;;\n", path, sub->get_name(), path,
                          sub->get_name());
    }
    auto with_value = OptionNames(*n.app, true);
    if (!with_value.empty()) {
      std::vector<std::string> keys;
      for (const auto& o : with_value) keys.push_back(fmt::format("\"{}:{}\"", path, o));
      values += "    " + Join(keys, "|") + ") return ;;\n";
    }
    words += fmt::format("    \"{}\") opts=\"{}\" ;;\n", path, Join(Words(*n.app), " "));
  }
  return fmt::format(
      "# bash completion for rightsize, generated by `rightsize gendocs --completion bash` from\n"
      "# the command definitions of rightsize {}.\n"
      "_rightsize() {{\n"
      "  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}\n"
      "  local cmdpath=rightsize opts i\n"
      "  COMPREPLY=()\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    case \"$cmdpath ${{COMP_WORDS[i]}}\" in\n{}"
      "    esac\n"
      "  done\n"
      "  case \"$cmdpath:$prev\" in\n{}"
      "  esac\n"
      "  case \"$cmdpath\" in\n{}"
      "  esac\n"
      "  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
      "}}\n"
      "complete -o default -F _rightsize rightsize\n",
      RIGHTSIZE_VERSION, subs, values, words);
}

// zsh: the same walk, with each word's description (zsh's _describe shows them).
std::string ZshQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "'";
}
std::string ZshItem(const std::string& word, const std::string& description) {
  std::string d = FirstLine(description);
  if (d.size() > 100) d = d.substr(0, 97) + "...";
  std::string escaped;
  for (char c : word) escaped += c == ':' ? std::string("\\:") : std::string(1, c);
  return ZshQuote(escaped + ":" + d);
}

std::string ZshCompletion(const std::vector<Node>& nodes) {
  std::string subs, values, words;
  for (const Node& n : nodes) {
    std::string path = Join(n.words, " ");
    for (const CLI::App* sub : Visible(*n.app)) {
      subs += fmt::format("      (\"{} {}\") cmdpath=\"{} {}\" ;;\n", path, sub->get_name(), path,
                          sub->get_name());
    }
    auto with_value = OptionNames(*n.app, true);
    if (!with_value.empty()) {
      std::vector<std::string> keys;
      for (const auto& o : with_value) keys.push_back(fmt::format("\"{}:{}\"", path, o));
      values += "    (" + Join(keys, "|") + ") _files; return ;;\n";
    }
    std::vector<std::string> items;
    for (const CLI::App* sub : Visible(*n.app)) {
      items.push_back(ZshItem(sub->get_name(), sub->get_description()));
    }
    for (const CLI::Option* o : Options(*n.app)) {
      if (!o->nonpositional()) continue;
      for (const auto& s : o->get_snames()) items.push_back(ZshItem("-" + s, o->get_description()));
      for (const auto& l : o->get_lnames()) {
        items.push_back(ZshItem("--" + l, o->get_description()));
      }
    }
    items.push_back(ZshItem("--help", "Print this help message and exit"));
    words +=
        fmt::format("    (\"{}\") items=(\n      {}\n    ) ;;\n", path, Join(items, "\n      "));
  }
  return fmt::format(
      "#compdef rightsize\n"
      "# zsh completion for rightsize, generated by `rightsize gendocs --completion zsh` from the\n"
      "# command definitions of rightsize {}.\n"
      "_rightsize() {{\n"
      "  local cmdpath=rightsize i\n"
      "  local -a items\n"
      "  for ((i = 2; i < CURRENT; i++)); do\n"
      "    case \"$cmdpath ${{words[i]}}\" in\n{}"
      "    esac\n"
      "  done\n"
      "  case \"$cmdpath:${{words[CURRENT-1]}}\" in\n{}"
      "  esac\n"
      "  case \"$cmdpath\" in\n{}"
      "  esac\n"
      "  _describe -t words 'rightsize' items\n"
      "}}\n"
      "_rightsize \"$@\"\n",
      RIGHTSIZE_VERSION, subs, values, words);
}

}  // namespace

void AddDocsCommand(CLI::App& app, Action* action) {
  auto f = std::make_shared<DocsFlags>();
  // Hidden (empty group): for the build and the packages, not for people.
  CLI::App* cmd = app.add_subcommand(
      "gendocs", "Write man pages (--man DIR) or print shell completion (--completion bash|zsh)");
  cmd->group("");
  cmd->add_option("--man", f->man_dir, "Folder to write rightsize.1 and rightsize-CMD.1 into");
  cmd->add_option("--completion", f->completion, "Print the completion script for this shell")
      ->check(CLI::IsMember({"bash", "zsh"}));
  const CLI::App* root = &app;
  cmd->callback([f, action, root] {
    *action = [f, root]() -> int {
      if (f->man_dir.empty() == f->completion.empty()) {
        fmt::print(stderr, "rightsize gendocs: give one of --man DIR or --completion bash|zsh\n");
        return kExitUsage;
      }
      if (!f->man_dir.empty()) {
        Status st = WriteManPages(*root, f->man_dir);
        if (!st.ok()) {
          fmt::print(stderr, "rightsize gendocs: {}\n", st.message());
          return kExitBadInput;
        }
        return kExitOk;
      }
      std::vector<Node> nodes;
      Walk(*root, {"rightsize"}, &nodes);
      std::string text = f->completion == "bash" ? BashCompletion(nodes) : ZshCompletion(nodes);
      std::fwrite(text.data(), 1, text.size(), stdout);
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli
