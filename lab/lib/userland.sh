# shellcheck shell=bash
# The arm64 guest's userland. The x86 guest runs the host's own binaries; an arm64 guest cannot,
# so it gets a root file system of its own, built once from Debian's arm64 packages (the packages
# below and everything they depend on, unpacked with dpkg-deb -x: no maintainer scripts run, no
# emulator is needed) into $CACHE_DIR/arm64/userland-KEY/, which QEMU shares read-only with the
# guest in place of the host's root. dash is /bin/sh; busybox-static gives the small tools, fio
# and netperf the workloads, iproute2 network namespaces.
#
# KEY is a hash of the suite, the package list and this file's layout version: changing the list
# builds a new root; nothing is rebuilt otherwise. The entry holds root/ (what the guest sees as
# /), packages (the list unpacked) and, last, ready. Built in a temporary directory and renamed
# into place under the lock 'userland', like a kernel entry.

readonly USERLAND_SUITE=bookworm
readonly USERLAND_PACKAGES="dash busybox-static fio netperf iproute2"
readonly USERLAND_LAYOUT=2

userland_key() {
  printf '%s\n' "$USERLAND_SUITE" "$USERLAND_PACKAGES" "$USERLAND_LAYOUT" | sha256sum | cut -c1-16
}
userland_dir() { echo "$(arch_cache_dir)/userland-$(userland_key)"; }

# What the packages depend on only for their maintainer scripts or helper scripts (fio's are
# Python; iproute2 asks debconf; dash registers itself with dpkg): nothing that unpacking needs
# or a workload runs, and with them perl and python would come too.
readonly USERLAND_SKIP="debconf dpkg init-system-helpers python3"

# userland_packages: the packages and, recursively, what they depend on (Depends and
# Pre-Depends, every alternative; virtual packages, shown as <name>, are provided by a real one
# in the list), minus USERLAND_SKIP and what only they would bring.
userland_packages() {
  local want=$USERLAND_PACKAGES seen=" " p
  while [ -n "$want" ]; do
    for p in $want; do seen+="$p "; done
    # shellcheck disable=SC2086 # the list is words
    want=$(APT_TOOL=apt-cache suite_apt "$USERLAND_SUITE" depends --no-recommends --no-suggests \
      --no-conflicts --no-breaks --no-replaces --no-enhances $want 2>/dev/null |
      awk -v seen="$seen" -v skip=" $USERLAND_SKIP " '
        $1 ~ /^[|]?(Pre)?Depends:$/ && $2 !~ /^</ {
          p = $2; sub(":.*", "", p)
          if (index(seen, " " p " ") == 0 && index(skip, " " p " ") == 0) print p
        }' | sort -u)
  done
  # shellcheck disable=SC2086 # the list is words
  printf '%s\n' $seen | sort -u
}

# busybox_applets: the applets of the busybox the root gets, named by the host's static busybox
# (the same Debian package, built from the same configuration for every architecture): the arm64
# binary cannot run here to list its own.
busybox_applets() {
  "$(static_busybox)" --list-full
}

# Runs under the lock 'userland'.
build_userland_locked() {
  local final=$1 tmp pkgs deb applet name d taken
  [ -f "$final/ready" ] && return 0
  rm -rf "${final%/*}/.userland".*
  tmp=$(mktemp -d "${final%/*}/.userland.XXXXXX")
  userland_tmp=$tmp
  trap 'rm -rf "$userland_tmp"' EXIT # in with_lock's subshell: cleans up a failed build
  [ -f "$(arch_cache_dir)/apt/$USERLAND_SUITE/updated" ] || suite_update "$USERLAND_SUITE"
  pkgs=$(userland_packages)
  if ! echo "$pkgs" | grep -qx fio; then
    suite_update "$USERLAND_SUITE"
    pkgs=$(userland_packages)
  fi
  echo "$pkgs" | grep -qx busybox-static || die_env "$USERLAND_SUITE has no arm64 busybox-static"
  say "downloading the arm64 userland ($(echo "$pkgs" | wc -l) packages: $USERLAND_PACKAGES and their libraries; first run only)"
  mkdir -p "$tmp/debs"
  # shellcheck disable=SC2086 # the list is words
  (cd "$tmp/debs" && suite_apt "$USERLAND_SUITE" download $pkgs) >"$tmp/apt.log" 2>&1 ||
    die_env "downloading the arm64 userland failed: $(grep -v '^ *$' "$tmp/apt.log" | tail -n1)"
  mkdir -p "$tmp/root"
  for deb in "$tmp"/debs/*.deb; do
    dpkg-deb -x "$deb" "$tmp/root" || die_env "dpkg-deb could not unpack $deb"
  done
  # What the init mounts on, and what a command expects to find.
  mkdir -p "$tmp"/root/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,run,tmp,root,etc,lib/modules,boot}
  chmod 1777 "$tmp/root/tmp"
  [ -x "$tmp/root/bin/busybox" ] || die_env "busybox-static left no /bin/busybox in the arm64 userland"
  # /bin/sh is dash, not busybox's ash: Debian builds busybox-static as a "standalone shell",
  # whose commands run busybox's applets before anything in PATH (its ip, which cannot make
  # network namespaces, instead of iproute2's).
  [ -x "$tmp/root/bin/dash" ] || die_env "dash left no /bin/dash in the arm64 userland"
  ln -sf dash "$tmp/root/bin/sh"
  # One link per applet where no package put a program of that name in any directory of PATH.
  for applet in $(busybox_applets); do
    name=${applet##*/} taken=0
    for d in bin sbin usr/bin usr/sbin; do
      if [ -e "$tmp/root/$d/$name" ] || [ -L "$tmp/root/$d/$name" ]; then taken=1; fi
    done
    [ "$taken" = 1 ] || ln -s /bin/busybox "$tmp/root/$applet"
  done
  echo "root:x:0:0:root:/root:/bin/sh" >"$tmp/root/etc/passwd"
  echo "root:x:0:" >"$tmp/root/etc/group"
  mkdir "$tmp/entry"
  mv "$tmp/root" "$tmp/entry/root"
  echo "$pkgs" >"$tmp/entry/packages"
  touch "$tmp/entry/ready"
  rm -rf "$final"
  mv "$tmp/entry" "$final"
  rm -rf "$tmp"
  say "arm64 userland cached in $final ($(du -sh "$final" | cut -f1))"
}

# ensure_userland: prints the arm64 userland's root directory, building it if missing.
ensure_userland() {
  local dir
  dir=$(userland_dir)
  if [ ! -f "$dir/ready" ]; then
    require_cache_dir
    require_tool apt-get apt
    require_tool dpkg-deb dpkg
    with_lock userland build_userland_locked "$dir" >&2
  fi
  echo "$dir/root"
}
