# shellcheck shell=bash
# Shared by lab/run and lab/fetch: messages, exit codes, checks, the cache directory and its locks.

# Exit codes (lab/run otherwise exits with COMMAND's own status). Some are used only by lab/run.
# shellcheck disable=SC2034
readonly EX_USAGE=2    # bad arguments
readonly EX_ENV=3      # missing tool, not root, cache not writable, download failed
readonly EX_KERNEL=123  # COMMAND finished, but the guest kernel reported trouble (an oops, BUG,
                        # WARNING, RCU stall, ...) while the guest ran (lib/console.sh)
readonly EX_TIMEOUT=124 # the guest did not finish within --timeout
readonly EX_GUEST=125  # QEMU or the guest failed before COMMAND finished

# shellcheck disable=SC2034 # PROJECT_DIR is lab/run's
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PROJECT_DIR=$(cd "$LAB_DIR/.." && pwd -P)
readonly LAB_DIR PROJECT_DIR

# Where kernels and initramfs images live: outside the repo so that every clone on the machine
# shares them. Made absolute because the guest reaches it through the host root by the same path.
lab_cache_dir() {
  local dir=${IOMMUTOP_LAB_CACHE:-/var/cache/iommutop-lab}
  case $dir in /*) ;; *) dir=$PWD/$dir;; esac
  echo "${dir%/}"
}
CACHE_DIR=$(lab_cache_dir)
readonly CACHE_DIR

# The guest's architecture: x86_64 (the default) or arm64. lab/run and lab/fetch set it from
# --arch before anything touches the cache; kernels, apt states and locks are kept apart by it.
LAB_ARCH=x86_64
# The machine: lab (the default: one NVMe, two e1000e) or server (x86_64 only: lib/server.sh).
# lab/run sets it from --machine.
LAB_MACHINE=lab

# arch_cache_dir: where this architecture's kernels and apt states live. x86_64 keeps the
# cache's top level (as before there was a second architecture); arm64 has its own directory.
arch_cache_dir() {
  case $LAB_ARCH in
    arm64) echo "$CACHE_DIR/arm64";;
    *) echo "$CACHE_DIR";;
  esac
}

# lock_name NAME: the cache lock of entry NAME for this architecture.
lock_name() {
  case $LAB_ARCH in
    arm64) echo "arm64-$1";;
    *) echo "$1";;
  esac
}

# qemu_binary: the emulator for this architecture and machine (the server's: lib/server.sh).
qemu_binary() {
  case $LAB_ARCH-$LAB_MACHINE in
    arm64-*) echo "${IOMMUTOP_QEMU_ARM64:-qemu-system-aarch64}";;
    *-server) server_qemu_binary;;
    *) echo "${IOMMUTOP_QEMU:-qemu-system-x86_64}";;
  esac
}

say() { echo "lab: $*" >&2; }
die_usage() { say "$*"; exit "$EX_USAGE"; }
die_env() { say "$*"; exit "$EX_ENV"; }

require_root() {
  [ "$(id -u)" = 0 ] || die_env "needs root (QEMU exports the host's root file system to the guest): run it with sudo"
}

# require_tool COMMAND PACKAGE
require_tool() {
  command -v "$1" >/dev/null 2>&1 ||
    die_env "$1 not found: run scripts/install-deps (or apt-get install $2)"
}

# The initramfs needs a busybox that runs without shared libraries.
static_busybox() {
  local bb
  for bb in /bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null)"; do
    [ -x "$bb" ] || continue
    if ! ldd "$bb" >/dev/null 2>&1; then echo "$bb"; return 0; fi
  done
  die_env "no static busybox found: run scripts/install-deps (or apt-get install busybox-static)"
}

require_cache_dir() {
  local kernels
  kernels=$(arch_cache_dir)/kernels
  if ! mkdir -p "$kernels" 2>/dev/null || [ ! -w "$kernels" ]; then
    die_env "cannot write the lab cache $CACHE_DIR: run as root or set IOMMUTOP_LAB_CACHE to a writable directory"
  fi
}

# with_lock NAME COMMAND...: runs COMMAND (in a subshell) holding an exclusive lock on the cache
# entry NAME (of this architecture), so that concurrent lab/run, lab/fetch and scripts/build-arm64
# invocations (cargo runs tests in parallel) never see or build half an entry. Call it plainly
# (not under if, || or &&) so that errexit stays in force inside COMMAND.
with_lock() {
  local name
  name=$(lock_name "$1")
  shift
  (
    exec 9>"$CACHE_DIR/.lock-$name" || die_env "cannot create the lock $CACHE_DIR/.lock-$name"
    flock -w 1800 9 || die_env "waited 30 min for the lock $CACHE_DIR/.lock-$name: is another lab/fetch, lab/run or scripts/build-arm64 stuck?"
    "$@"
  )
}

# q STRING: STRING quoted for a POSIX shell (single quotes; embedded ones as '\'').
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# in_range VALUE MIN MAX: VALUE is a whole number from MIN to MAX.
in_range() {
  case $1 in '' | *[!0-9]*) return 1;; esac
  [ "${#1}" -le 9 ] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]
}
