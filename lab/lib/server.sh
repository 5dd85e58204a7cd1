# shellcheck shell=bash
# The server machine (lab/run --machine server): 8 vCPUs, two NVMe controllers with 8 I/O queue
# pairs each, an igb NIC whose SR-IOV virtual functions the guest enables, and the default
# machine's e1000e pair. See docs/lab.md, "The server machine".
#
# Its emulator is QEMU 10 (igb's SR-IOV, nvme's max_ioqpairs), which bookworm has only in
# bookworm-backports, where installing it would replace the 7.2 every other guest runs on. So
# the lab fetches it like a kernel: the packages are downloaded with apt-get download through
# the suite's own apt state (lib/kernel.sh) and unpacked with dpkg-deb -x into
# $CACHE_DIR/qemu/SERIES/root/, and only the server machine runs that binary, its firmware and
# option ROMs given by -L (it loads no module: those of the host's 7.2 stay unused). The
# libraries it links are bookworm's own (a backport is built against them; every one of them is
# a dependency of bookworm's qemu-system-x86 7.2, which the lab needs anyway): the fetch checks
# with ldd that none is missing.
#
# The entry holds root/ (the unpacked packages), version, packages and, last, ready; it is
# built in a temporary directory and renamed into place under the lock 'qemu-SERIES'.

readonly SERVER_QEMU_SUITE=bookworm-backports
readonly SERVER_QEMU_SERIES=10
readonly SERVER_QEMU_PACKAGES="qemu-system-x86 qemu-system-data seabios"

# The machine's shape (lab/run's defaults for it). Every vCPU is a host thread under
# multi-threaded TCG.
# shellcheck disable=SC2034 # lab/run's
readonly SERVER_SMP=8
# shellcheck disable=SC2034
readonly SERVER_MEM=2048
# The most memory the server machine takes: q35 keeps RAM below 4 GiB up to 2815 MiB. Above,
# SeaBIOS moves the 64-bit BARs above 4 GiB and the guest puts the VFs' there too, where QEMU
# 10.0 cannot reach them (server_device_args).
# shellcheck disable=SC2034
readonly SERVER_MAX_MEM=2815
readonly SERVER_IOQPAIRS=8
# igb's SR-IOV: QEMU's 82576 has at most 7 VFs. Two are what a VF-to-VF workload needs; four
# show that each VF is a PCI function and an IOMMU group of its own.
# shellcheck disable=SC2034 # lab/run's
readonly SERVER_VFS=4
# shellcheck disable=SC2034
readonly SERVER_MAX_VFS=7
# The igb PF's slot. QEMU puts VF N at devfn PF + 0x80 + 2N (its 82576's SR-IOV offset and
# stride): PF 00:0c.0 gives VFs 00:1c.0, 1c.2, 1c.4, 1c.6, 1d.0, 1d.2, 1d.4.
readonly SERVER_IGB_ADDR=0c.0
readonly SERVER_NVME1_ADDR=07.0

server_qemu_dir() { echo "$CACHE_DIR/qemu/$SERVER_QEMU_SERIES"; }
server_qemu_ready() { [ -f "$(server_qemu_dir)/ready" ]; }

# server_qemu_binary: the server machine's emulator: IOMMUTOP_QEMU_SERVER, or the cached one.
server_qemu_binary() {
  if [ -n "${IOMMUTOP_QEMU_SERVER:-}" ]; then
    echo "$IOMMUTOP_QEMU_SERVER"
  else
    echo "$(server_qemu_dir)/root/usr/bin/qemu-system-x86_64"
  fi
}

# server_qemu_firmware_args: -L for the cached QEMU's option ROMs (pvh.bin, linuxboot_dma.bin:
# QEMU 10's, not the host 7.2's, which QEMU would find otherwise) and SeaBIOS (10 needs 1.16.3;
# bookworm's is 1.16.2), one argument a line.
server_qemu_firmware_args() {
  [ -z "${IOMMUTOP_QEMU_SERVER:-}" ] || return 0
  local root
  root=$(server_qemu_dir)/root
  printf '%s\n' -L "$root/usr/share/qemu" -L "$root/usr/share/seabios"
}

# server_qemu_candidate: the version of qemu-system-x86 the suite offers.
server_qemu_candidate() {
  APT_TOOL=apt-cache suite_apt "$SERVER_QEMU_SUITE" policy qemu-system-x86 2>/dev/null |
    awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'
}

# The upstream major version of a Debian version: 1:10.0.2+ds-2+deb13u1~bpo12+1 -> 10.
debian_upstream_major() {
  local v=${1#*:}
  echo "${v%%.*}"
}

# Runs under the lock 'qemu-SERIES'.
fetch_server_qemu_locked() {
  local final tmp version attempt deb missing
  final=$(server_qemu_dir)
  [ -f "$final/ready" ] && return 0
  mkdir -p "${final%/*}"
  rm -rf "${final%/*}/.fetch-$SERVER_QEMU_SERIES".*
  tmp=$(mktemp -d "${final%/*}/.fetch-$SERVER_QEMU_SERIES.XXXXXX")
  qemu_fetch_tmp=$tmp
  trap 'rm -rf "$qemu_fetch_tmp"' EXIT # in with_lock's subshell: cleans up a failed fetch
  mkdir "$tmp/debs"
  # A failed download is retried once after refreshing the lists (a newer backport removes the
  # old one from the mirrors).
  for attempt in 1 2; do
    if [ "$attempt" = 2 ] || [ ! -f "$(arch_cache_dir)/apt/$SERVER_QEMU_SUITE/updated" ]; then
      suite_update "$SERVER_QEMU_SUITE"
    fi
    version=$(server_qemu_candidate)
    [ -n "$version" ] || continue
    [ "$(debian_upstream_major "$version")" = "$SERVER_QEMU_SERIES" ] ||
      die_env "$SERVER_QEMU_SUITE offers qemu-system-x86 $version, not QEMU $SERVER_QEMU_SERIES, which the server machine is made for: change SERVER_QEMU_SERIES in lab/lib/server.sh after checking the machine boots on it"
    say "downloading QEMU $version ($SERVER_QEMU_PACKAGES) from $SERVER_QEMU_SUITE for the server machine (first run only)"
    rm -f "$tmp"/debs/*.deb
    if (cd "$tmp/debs" && suite_apt "$SERVER_QEMU_SUITE" download \
      "qemu-system-x86=$version" "qemu-system-data=$version" seabios) >"$tmp/apt.log" 2>&1; then
      break
    fi
    version=""
  done
  [ -n "$version" ] ||
    die_env "downloading QEMU $SERVER_QEMU_SERIES from $SERVER_QEMU_SUITE failed: $(grep -v '^ *$' "$tmp/apt.log" 2>/dev/null | tail -n1)"
  for deb in "$tmp"/debs/*.deb; do
    dpkg-deb -x "$deb" "$tmp/root" || die_env "dpkg-deb could not unpack $deb"
  done
  [ -x "$tmp/root/usr/bin/qemu-system-x86_64" ] || die_env "qemu-system-x86 $version left no qemu-system-x86_64"
  missing=$(ldd "$tmp/root/usr/bin/qemu-system-x86_64" 2>&1 | awk '/not found/ { print $1 }' | sort -u | tr '\n' ' ')
  [ -z "$missing" ] ||
    die_env "QEMU $version needs libraries this host lacks (${missing% }): run scripts/install-deps (bookworm's qemu-system-x86 brings them all)"
  "$tmp/root/usr/bin/qemu-system-x86_64" -version >/dev/null 2>"$tmp/version.err" ||
    die_env "the unpacked QEMU $version does not start: $(head -n1 "$tmp/version.err")"
  mkdir "$tmp/entry"
  mv "$tmp/root" "$tmp/entry/root"
  echo "$version" >"$tmp/entry/version"
  (cd "$tmp/debs" && ls) >"$tmp/entry/packages"
  touch "$tmp/entry/ready"
  rm -rf "$final"
  mv "$tmp/entry" "$final"
  rm -rf "$tmp"
  say "QEMU $version cached in $final ($(du -sh "$final" | cut -f1))"
}

# ensure_server_qemu: the server machine's QEMU in the cache, downloaded if missing; nothing when
# IOMMUTOP_QEMU_SERVER names one.
ensure_server_qemu() {
  [ -z "${IOMMUTOP_QEMU_SERVER:-}" ] || return 0
  server_qemu_ready && return 0
  require_cache_dir
  require_tool apt-get apt
  require_tool dpkg-deb dpkg
  require_tool ldd libc-bin
  with_lock "qemu-$SERVER_QEMU_SERIES" fetch_server_qemu_locked
}

# server_device_args RUN_DIR: the server machine's devices beyond the default machine's (whose
# first NVMe it shares, at 00:04.0, with 8 I/O queue pairs: lib/qemu.sh), one argument a line.
server_device_args() {
  local run=$1
  # shellcheck disable=SC2054 # the commas are QEMU's option syntax
  local args=(
    # No 64-bit PCI window: QEMU 10.0 gives igb's VFs 32-bit BARs although the PF's SR-IOV
    # capability says 64-bit, and maps a VF's BAR at the low 32 bits of its address, so a VF
    # the guest places above 4 GiB (in the window QEMU's ACPI offers by default) reads zeros
    # and igbvf gives up ("PF still in reset state"). Without the window, and with RAM below
    # 4 GiB (SERVER_MAX_MEM), every BAR is placed below 4 GiB.
    -global q35-pcihost.pci-hole64-size=0
    # The second NVMe, a scratch image of its own.
    -drive "file=$run/nvme1.img,if=none,id=nvme1,format=raw"
    -device "nvme,serial=iommutoplab1,drive=nvme1,addr=$SERVER_NVME1_ADDR,max_ioqpairs=$SERVER_IOQPAIRS"
    # The igb PF on a hub of its own: its VFs reach each other through the NIC's own switch
    # (the PF driver turns VMDq loopback on with SR-IOV), nothing else reaches them.
    -netdev hubport,id=net2,hubid=1
    -device "igb,netdev=net2,romfile=,mac=52:54:00:12:34:58,addr=$SERVER_IGB_ADDR"
  )
  printf '%s\n' "${args[@]}"
}

# server_cmdline VFS: the server machine's kernel arguments. iommutop.machine and iommutop.vfs
# tell the init to load igb and enable VFS virtual functions. nvme_core.multipath=N: QEMU 10's
# NVMe controllers say they belong to a multi-controller subsystem (CMIC), and Linux then makes
# /dev/nvmeXnY a multipath node (bio-based, no blk-mq queues) over a hidden path nvmeXcXnY; the
# default machine's QEMU 7.2 does not, and a single-port drive is what a server has: without
# multipath each namespace is the controller's own blk-mq disk, as on the default machine.
# maxcpus=1: the guest sets its devices up on one CPU, and the init brings the others online
# before the command: QEMU 10.0's multi-threaded TCG aborted or lost an interrupt's end when the
# guest changed the memory map (PCI BARs, SR-IOV) with other vCPUs running (docs/lab.md).
server_cmdline() {
  echo "iommutop.machine=server iommutop.vfs=$1 nvme_core.multipath=N maxcpus=1"
}
