//===- kda-opt.cpp - mlir-opt with the kda dialect and passes -------------===//
//
// Like mlir-opt: every upstream dialect, extension and pass, plus the kda
// dialect and kda's passes and pipelines (tools/Registration.h).
//
// `--help` lists kda's passes and pipelines with their options, and the
// general options one uses with them: upstream's full help is over 1,200
// lines of passes and LLVM options, with kda's buried inside. That full help
// is `--help-upstream` (as IREE's and Triton's tools keep theirs behind a
// flag); `--help-hidden` and `--help-list` are upstream's as ever.
//
//===----------------------------------------------------------------------===//

#include "tools/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

int optMain(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kda::registerEverything(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kda optimizer driver\n", registry));
}

/// Upstream's --help text, from a child process (it prints and exits while
/// parsing the command line, before anything could filter it).
bool upstreamHelp(const char *argv0, std::string &text) {
  int fds[2];
  if (pipe(fds) != 0)
    return false;
  pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    char help[] = "--help";
    char *args[] = {const_cast<char *>(argv0), help, nullptr};
    _exit(optMain(2, args));
  }
  close(fds[1]);
  char buf[65536];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 && !text.empty();
}

/// The option a help line describes ("--name" or "--name=<type>"), if the
/// line starts one at `indent` spaces.
llvm::StringRef optionAt(llvm::StringRef line, size_t indent) {
  if (line.size() <= indent + 2 || line.take_front(indent).find_first_not_of(
                                       ' ') != llvm::StringRef::npos)
    return {};
  llvm::StringRef rest = line.drop_front(indent);
  if (!rest.starts_with("-"))
    return {};
  return rest.drop_while([](char c) { return c == '-'; })
      .take_until([](char c) { return c == ' ' || c == '='; });
}

/// kda's part of upstream's help: overview and usage, the kda passes and
/// pipelines with their options, and the general options used with them.
int printKdaHelp(const char *argv0) {
  std::string text;
  if (!upstreamHelp(argv0, text)) {
    llvm::errs() << "kda-opt: could not produce the help text; "
                    "--help-upstream prints upstream's\n";
    return 1;
  }
  static const llvm::StringSet<> general = {
      "o", "pass-pipeline", "split-input-file", "verify-diagnostics",
      "allow-unregistered-dialect", "load-pass-plugin",
      "load-dialect-plugin", "show-dialects", "mlir-disable-threading",
      "mlir-print-ir-before", "mlir-print-ir-after", "mlir-print-ir-after-all",
      "mlir-print-ir-module-scope", "mlir-print-debuginfo", "mlir-timing",
      "mlir-pass-statistics", "version"};
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(text).split(lines, '\n');
  std::string generalText, passes, pipelines;
  enum { None, General, Passes, Pipelines } section = None;
  bool keep = false; // inside a kept entry (its nested option lines follow)
  size_t upstream = 0;
  for (llvm::StringRef line : lines) {
    ++upstream;
    llvm::StringRef t = line.trim();
    if (t == "General options:") {
      section = General;
      continue;
    }
    if (t == "Passes:") {
      section = Passes;
      continue;
    }
    if (t == "Pass Pipelines:") {
      section = Pipelines;
      continue;
    }
    if (!line.empty() && line.front() != ' ' && line.ends_with(":")) {
      section = None; // another category (Generic Options:, ...)
      continue;
    }
    // The pass lists sit inside the general options: an option at the
    // top level ends them.
    if ((section == Passes || section == Pipelines) &&
        !optionAt(line, 2).empty())
      section = General;
    if (section == General) {
      if (llvm::StringRef name = optionAt(line, 2); !name.empty()) {
        keep = general.contains(name);
        if (keep)
          generalText += (line + "\n").str();
        continue;
      }
      if (keep && line.starts_with("    "))
        generalText += (line + "\n").str();
      continue;
    }
    if (section == Passes || section == Pipelines) {
      std::string &out = section == Passes ? passes : pipelines;
      if (llvm::StringRef name = optionAt(line, 6); !name.empty()) {
        keep = name.starts_with("kda-");
        if (keep)
          out += (line.drop_front(4) + "\n").str();
        continue;
      }
      if (keep && line.starts_with("        "))
        out += (line.drop_front(4) + "\n").str();
    }
  }
  llvm::outs() << "OVERVIEW: kda optimizer driver: mlir-opt with the kda "
                  "dialect, passes and pipelines\n\n"
               << "USAGE: kda-opt [options] <input file>\n\n"
               << "kda pipelines (--NAME=\"OPTIONS\", or in --pass-pipeline):\n\n"
               << pipelines << "\nkda passes:\n\n"
               << passes << "\nGeneral options:\n\n"
               << generalText
               << "  --help-upstream                                         "
                  "               - every upstream pass and LLVM option ("
               << upstream << " lines)\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  bool help = false, upstream = false;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a(argv[i]);
    if (a == "--help" || a == "-help")
      help = true;
    if (a == "--help-upstream" || a == "-help-upstream")
      upstream = true;
  }
  if (upstream) {
    std::vector<char *> args(argv, argv + argc);
    static char helpArg[] = "--help";
    for (char *&a : args)
      if (llvm::StringRef(a) == "--help-upstream" ||
          llvm::StringRef(a) == "-help-upstream")
        a = helpArg;
    return optMain(static_cast<int>(args.size()), args.data());
  }
  if (help)
    return printKdaHelp(argv[0]);
  return optMain(argc, argv);
}
