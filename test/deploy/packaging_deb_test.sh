#!/usr/bin/env bash
# The Debian packages, for real: `cpack -G DEB` in the build tree, `dpkg -i` of rightsize,
# rightsize-agent and rightsize-server into this system, then the files a user and an admin
# rely on (the binary in /usr/bin, the units in /lib/systemd/system naming it, the conffiles,
# the man pages, bash and zsh completion that complete subcommands), `dpkg -r` (conffiles stay)
# and `dpkg -P` (everything gone). Needs root (make test runs as root here and in CI). Holds a
# lock so two runs cannot install at once; purges what an interrupted run left first.
# Usage: packaging_deb_test.sh BUILD_DIR SRCDIR
set -euo pipefail
BUILD=$1
SRCDIR=$2
LINKED=${3:-static}  # how cmake/static_deps.cmake linked gRPC, SQLite and the rest
PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok: $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL: $*"; }
expect_eq() { if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi; }
finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
if [ "$(id -u)" -ne 0 ]; then
  echo "FAIL: packaging_deb_test installs the .deb packages with dpkg and needs root" \
    "(run make test as root, as CI does)"
  exit 1
fi
exec 9>/tmp/rightsize-packaging.lock
flock 9
PKGS=(rightsize-agent rightsize-server rightsize)
purge() { dpkg -P "${PKGS[@]}" >/dev/null 2>&1 || true; }
purge
WORK=$(mktemp -d /tmp/rightsize-deb-test.XXXXXX)
trap 'purge; rm -rf "$WORK"' EXIT

# The packages, into a folder of their own (CPack's own staging stays in the build tree).
if cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$WORK/debs" >"$WORK/cpack.log" 2>&1; then
  pass "cpack -G DEB"
else
  fail "cpack: $(tail -30 "$WORK/cpack.log")"
  finish
fi
version=$(sed -n 's/^project(rightsize VERSION \([0-9.]*\).*/\1/p' "$SRCDIR/CMakeLists.txt")
for p in rightsize rightsize-agent rightsize-server; do
  deb=$(ls "$WORK"/debs/"${p}"_*.deb 2>/dev/null | head -1 || true)
  if [ -n "$deb" ]; then pass "$p: $(basename "$deb")"; else fail "no $p package in $(ls "$WORK/debs")"; continue; fi
  expect_eq "$p version" "$(dpkg-deb -f "$deb" Version)" "$version"
done
cli_deb=$(ls "$WORK"/debs/rightsize_*.deb)
depends=$(dpkg-deb -f "$cli_deb" Depends)
if grep -q 'libc6' <<<"$depends" && grep -q 'libxgboost' <<<"$depends"; then
  pass "rightsize's Depends from shlibdeps: $depends"
else
  fail "rightsize's Depends lack the shared libraries: '$depends'"
fi
# gRPC, Abseil, protobuf, SQLite and the rest are linked in (cmake/static_deps.cmake, unless
# configured with RIGHTSIZE_STATIC_DEPS=OFF): the package does not pull them.
static_names='libgrpc|libabsl|libprotobuf|libsqlite3|libre2|libc-ares|libupb|libtree-sitter|libyaml-cpp|libsnappy'
if [ "$LINKED" != static ]; then
  if grep -q 'libsqlite3' <<<"$depends"; then
    pass "linked against the shared objects: SQLite's package is in Depends"
  else
    fail "linked against the shared objects, but SQLite's package is not in Depends: '$depends'"
  fi
elif grep -E -q "$static_names" <<<"$depends"; then
  fail "rightsize depends on a library it links statically: '$depends'"
else
  pass "rightsize does not depend on the libraries it links statically"
fi
expect_eq "rightsize-agent needs this rightsize" \
  "$(dpkg-deb -f "$WORK"/debs/rightsize-agent_*.deb Depends)" "rightsize (= $version)"

if dpkg -i "$WORK"/debs/*.deb >"$WORK/dpkg.log" 2>&1; then
  pass "dpkg -i of the three packages"
else
  fail "dpkg -i: $(cat "$WORK/dpkg.log")"
  finish
fi
for p in "${PKGS[@]}"; do
  expect_eq "$p installed" "$(dpkg-query -W -f='${Status}' "$p")" "install ok installed"
done
expect_eq "/usr/bin/rightsize --version" "$(/usr/bin/rightsize --version)" "rightsize $version"
for unit in rightsize-agent rightsize-serve rightsize-ingest; do
  f=/lib/systemd/system/$unit.service
  if [ -f "$f" ] && grep -q '^ExecStart=/usr/bin/rightsize ' "$f"; then
    pass "$f starts /usr/bin/rightsize"
  else
    fail "$f: $(grep ExecStart "$f" 2>&1)"
  fi
done
if command -v systemd-analyze >/dev/null && [ -d /run/systemd/system ]; then
  if systemd-analyze verify /lib/systemd/system/rightsize-*.service >"$WORK/verify" 2>&1; then
    pass "systemd-analyze verify"; else fail "systemd-analyze: $(cat "$WORK/verify")"; fi
fi
expect_eq "rightsize-agent's conffiles" \
  "$(dpkg-query -W -f='${Conffiles}' rightsize-agent | awk '{print $1}' | xargs)" \
  "/etc/default/rightsize-agent"
expect_eq "rightsize-server's conffiles" \
  "$(dpkg-query -W -f='${Conffiles}' rightsize-server | awk '{print $1}' | sort | xargs)" \
  "/etc/default/rightsize-serve /etc/rightsize/serve.json"
if python3 -c "import json; json.load(open('/etc/rightsize/serve.json'))"; then
  pass "/etc/rightsize/serve.json is JSON"
else
  fail "/etc/rightsize/serve.json is not JSON"
fi
expect_eq "the server's user" "$(id -un rightsize 2>/dev/null)" rightsize
expect_eq "its store folder" "$(stat -c %U /var/lib/rightsize 2>/dev/null)" rightsize
expect_eq "serve.json readable by the server only" "$(stat -c '%G %a' /etc/rightsize/serve.json)" \
  "rightsize 640"

# Man pages: one for the program, one per command, each rendering with man.
mandir=/usr/share/man/man1
if [ -f $mandir/rightsize.1.gz ] && [ -f $mandir/rightsize-report.1.gz ] &&
  [ -f $mandir/rightsize-ingest.1.gz ]; then
  pass "man pages: $(ls $mandir | grep -c '^rightsize') in $mandir"
else
  fail "man pages missing: $(ls $mandir | grep rightsize | xargs)"
fi
page=$(MANWIDTH=100 man -l $mandir/rightsize-ingest.1.gz 2>"$WORK/man.err" | col -b)
if grep -q 'rightsize ingest sacct' <<<"$page" && grep -q -- '--db' <<<"$page" &&
  [ ! -s "$WORK/man.err" ]; then
  pass "man rightsize-ingest renders, with ingest sacct and the global --db"
else
  fail "man rightsize-ingest: $(head -c 400 <<<"$page") $(cat "$WORK/man.err")"
fi
page=$(MANWIDTH=100 man -l $mandir/rightsize.1.gz 2>/dev/null | col -b)
for cmd in report predict diagnose agent serve; do
  grep -q "rightsize-$cmd(1)" <<<"$page" || fail "rightsize(1) does not list $cmd"
done
pass "rightsize(1) lists the commands"

# bash completion: what `rightsize ing<TAB>` and `rightsize report --fo<TAB>` offer.
bash_comp=/usr/share/bash-completion/completions/rightsize
complete_bash() {  # complete_bash WORD... : prints what the last word completes to
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _rightsize; echo "${COMPREPLY[*]}"' \
    _ "$bash_comp" "$@"
}
expect_eq "bash: rightsize ing<TAB>" "$(complete_bash rightsize ing)" "ingest"
expect_eq "bash: rightsize ingest sa<TAB>" "$(complete_bash rightsize ingest sa)" "sacct"
expect_eq "bash: rightsize --db x rep<TAB>" "$(complete_bash rightsize --db x rep)" "report"
if grep -qw -- "--format" <<<"$(complete_bash rightsize report --)"; then
  pass "bash: rightsize report --<TAB> offers --format"
else
  fail "bash: rightsize report --<TAB>: $(complete_bash rightsize report --)"
fi
zsh_comp=/usr/share/zsh/vendor-completions/_rightsize
if [ -f "$zsh_comp" ] && head -1 "$zsh_comp" | grep -q '^#compdef rightsize'; then
  pass "zsh completion in $zsh_comp"
else
  fail "no zsh completion at $zsh_comp"
fi
if command -v zsh >/dev/null; then
  if zsh -n "$zsh_comp" 2>"$WORK/zsh.err"; then pass "zsh parses it"; else fail "zsh -n: $(cat "$WORK/zsh.err")"; fi
  # _describe stubbed: the words the function would offer after `rightsize ingest`.
  offered=$(zsh -c 'source_words() { words=(rightsize ingest ""); CURRENT=3; }
    _describe() { print -l -- "${(@P)4}"; }; _files() { print FILES; }
    source_words; source "$1"' _ "$zsh_comp" 2>&1 | cut -d: -f1 | xargs)
  if grep -qw sacct <<<"$offered" && grep -qw prometheus <<<"$offered"; then
    pass "zsh: rightsize ingest <TAB> offers its subcommands"
  else
    fail "zsh offered: $offered"
  fi
else
  fail "zsh is not installed (scripts/install-deps.sh installs it)"
fi

# Remove: the files go, the conffiles stay until purge.
if dpkg -r "${PKGS[@]}" >"$WORK/dpkg.log" 2>&1; then pass "dpkg -r"; else fail "dpkg -r: $(cat "$WORK/dpkg.log")"; fi
gone=yes
for f in /usr/bin/rightsize /lib/systemd/system/rightsize-agent.service \
  /lib/systemd/system/rightsize-serve.service $mandir/rightsize.1.gz "$bash_comp" "$zsh_comp"; do
  [ -e "$f" ] && { gone=no; fail "$f left after dpkg -r"; }
done
expect_eq "dpkg -r removes the binary, units, man pages and completion" "$gone" yes
expect_eq "conffiles stay after dpkg -r" "$(ls /etc/rightsize/serve.json /etc/default/rightsize-agent 2>&1 | xargs)" \
  "/etc/default/rightsize-agent /etc/rightsize/serve.json"
if dpkg -P "${PKGS[@]}" >"$WORK/dpkg.log" 2>&1; then pass "dpkg -P"; else fail "dpkg -P: $(cat "$WORK/dpkg.log")"; fi
left=$(ls /etc/rightsize/serve.json /etc/default/rightsize-agent /etc/default/rightsize-serve \
  /var/spool/rightsize 2>/dev/null || true)
expect_eq "dpkg -P removes the conffiles and the spool" "$left" ""
for p in "${PKGS[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then fail "$p still known to dpkg"; fi
done
finish
