# shellcheck shell=bash
# The lab kernels: stock Debian images, downloaded once into $CACHE_DIR/kernels/SERIES/.
#
# An entry holds boot/{vmlinuz,config,System.map}-VERSION, lib/modules/VERSION (with modules.dep
# from depmod), a file 'version', a file 'package' and, last, a file 'ready'. It is built in a
# temporary directory next to it and renamed into place under the series' lock, so a reader
# either finds a complete entry or none.

# shellcheck disable=SC2034 # lab/fetch's
readonly KERNEL_SERIES="5.10 6.1 6.12 6.12-rt 6.18 7.3"
# arm64: the same Debian series, built for arm64 (each has ARM_SMMU_V3 built in).
readonly ARM64_KERNEL_SERIES="6.1 6.12 7.3"

# kernel_series: the series this architecture offers.
kernel_series() {
  case $LAB_ARCH in
    arm64) echo "$ARM64_KERNEL_SERIES";;
    *) echo "$KERNEL_SERIES";;
  esac
}

kernel_dir() { echo "$(arch_cache_dir)/kernels/$1"; }
kernel_version() { cat "$(kernel_dir "$1")/version"; }
kernel_ready() { [ -f "$(kernel_dir "$1")/ready" ]; }

# is_kernel_series NAME: NAME is one of the lab's kernels.
is_kernel_series() {
  local s
  for s in $(kernel_series); do [ "$s" = "$1" ] && return 0; done
  return 1
}

# Debian's 6.1 is built without CONFIG_VIRTIO_IOMMU.
kernel_has_virtio_iommu() {
  grep -qE '^CONFIG_VIRTIO_IOMMU=[ym]' "$(kernel_dir "$1")/boot/config-$(kernel_version "$1")"
}

# Where each series comes from: the Debian suite, the archive (debian or debian-security) and the
# image flavour. Each suite gets an apt state of its own under the cache ($CACHE_DIR/apt/SUITE),
# so the host's apt sources are never changed to reach bullseye or trixie.
kernel_suite() {
  case $1 in
    5.10) echo bullseye-security;;
    6.1) echo bookworm;;
    6.12 | 6.12-rt) echo bookworm-backports;;
    6.18 | 7.3) echo trixie-backports;;
  esac
}
kernel_flavour() {
  local debian_arch=amd64
  [ "$LAB_ARCH" = arm64 ] && debian_arch=arm64
  case $1 in *-rt) echo "rt-$debian_arch";; *) echo "$debian_arch";; esac
}
kernel_upstream() { echo "${1%-rt}"; }

# The URI of the host's Debian archive (ARCHIVE=debian) or security archive (debian-security),
# read from its own apt sources: the lab never names a mirror itself.
host_archive_uri() {
  local archive=$1 f uri
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [ -f "$f" ] || continue
    uri=$(awk -v want="$archive" '
      function consider(u,   n, part) { sub("/+$", "", u); n = split(u, part, "/"); if (part[n] == want) { print u; exit } }
      /^URIs:/ { for (i = 2; i <= NF; i++) consider($i) }
      $1 == "deb" { consider($2 ~ /^\[/ ? $3 : $2) }
    ' "$f")
    if [ -n "$uri" ]; then echo "$uri"; return 0; fi
  done
}

suite_archive() { case $1 in *-security) echo debian-security;; *) echo debian;; esac; }

# suite_apt SUITE ARGS...: apt-get (or apt-cache, with APT_TOOL=apt-cache) on the suite's own
# state. For arm64 that state is the arm64 archive's (APT::Architecture): dpkg's own architecture
# list is never changed.
suite_apt() {
  local suite=$1 root foreign=()
  shift
  root=$(arch_cache_dir)/apt/$suite
  [ "$LAB_ARCH" = arm64 ] && foreign=(-o APT::Architecture=arm64 -o APT::Architectures=arm64)
  "${APT_TOOL:-apt-get}" -q "${foreign[@]}" \
    -o Dir::Etc::SourceList="$root/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
    -o Dir::State::Lists="$root/lists" -o Dir::Cache="$root/cache" \
    -o Dir::State::status=/dev/null -o APT::Sandbox::User=root "$@"
}

# suite_update SUITE: writes the suite's sources.list (from the host's archive URI) and refreshes
# its package lists. apt checks the Release signatures with the host's Debian keyring.
suite_update() {
  local suite=$1 root archive uri components=main
  root=$(arch_cache_dir)/apt/$suite
  # The arm64 guest's userland comes from these lists too, and netperf is in non-free.
  [ "$LAB_ARCH" = arm64 ] && components="main non-free"
  archive=$(suite_archive "$suite")
  uri=$(host_archive_uri "$archive")
  if [ -z "$uri" ] && [ "$archive" = debian-security ]; then
    uri=$(host_archive_uri debian)
    uri=${uri%/debian}/debian-security
  fi
  [ -n "$uri" ] || die_env "found no apt source for the $archive archive in /etc/apt to fetch $suite from: add one to /etc/apt/sources.list.d/"
  mkdir -p "$root/lists/partial" "$root/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite $components" >"$root/sources.list"
  say "refreshing the package lists of $suite"
  suite_apt "$suite" update >"$root/update.log" 2>&1 ||
    die_env "apt-get update for $suite failed: $(grep -iE 'err|fail|sign' "$root/update.log" | tail -n1)"
  touch "$root/updated"
}

# kernel_package_lookup SERIES: the newest image package of the series in its suite, e.g.
# linux-image-5.10.0-46-amd64 or linux-image-7.3.4+deb13-amd64 (not -unsigned, -dbg, cloud).
kernel_package_lookup() {
  local series=$1 suite upstream flavour
  suite=$(kernel_suite "$series")
  upstream=$(kernel_upstream "$series")
  flavour=$(kernel_flavour "$series")
  APT_TOOL=apt-cache suite_apt "$suite" pkgnames linux-image- 2>/dev/null |
    grep -E "^linux-image-${upstream//./\\.}[.-][0-9][0-9.]*(-[0-9]+|\+deb[0-9]+)?-${flavour}\$" |
    sort -V | tail -n1
}

kernel_package() {
  local series=$1 suite pkg
  suite=$(kernel_suite "$series")
  [ -f "$(arch_cache_dir)/apt/$suite/updated" ] || suite_update "$suite"
  pkg=$(kernel_package_lookup "$series")
  if [ -z "$pkg" ]; then
    suite_update "$suite"
    pkg=$(kernel_package_lookup "$series")
  fi
  [ -n "$pkg" ] || die_env "$suite has no $(kernel_flavour "$series") image of Linux $(kernel_upstream "$series")"
  echo "$pkg"
}

# kernel_parts SERIES IMAGE_PACKAGE: the packages that hold the image and its modules. Since 7.x,
# Debian splits the kernel into linux-binary-VERSION and linux-modules-VERSION, on which the
# linux-image package depends; before, the image package holds both.
kernel_parts() {
  local suite parts
  suite=$(kernel_suite "$1")
  parts=$(APT_TOOL=apt-cache suite_apt "$suite" depends "$2" 2>/dev/null |
    awk -v ver="${2#linux-image-}" '$1 == "Depends:" && ($2 == "linux-binary-" ver || $2 == "linux-modules-" ver || $2 == "linux-base-" ver) { print $2 }' | sort -u)
  if [ -n "$parts" ]; then echo "$parts"; else echo "$2"; fi
}

# download_kernel SERIES DIR: downloads the series' packages into DIR; a failed download is
# retried once after refreshing the lists (a point release removes the old image from mirrors).
download_kernel() {
  local series=$1 dir=$2 suite pkg part attempt
  suite=$(kernel_suite "$series")
  for attempt in 1 2; do
    [ "$attempt" = 1 ] || suite_update "$suite"
    pkg=$(kernel_package "$series")
    say "downloading $pkg from $suite for kernel $series (first run only)"
    rm -f "$dir"/*.deb
    for part in $(kernel_parts "$series" "$pkg"); do
      (cd "$dir" && suite_apt "$suite" download "$part") >"$dir/apt.log" 2>&1 || continue 2
    done
    echo "$pkg" >"$dir/package"
    return 0
  done
  die_env "downloading $pkg failed: $(grep -v '^ *$' "$dir/apt.log" | tail -n1)"
}

# unpack_kernel ROOT OUT DEB...: the packages' boot/ and lib/modules/ into OUT, with modules.dep.
unpack_kernel() {
  local root=$1 out=$2 deb mods version
  shift 2
  for deb in "$@"; do
    dpkg-deb -x "$deb" "$root" || die_env "dpkg-deb could not unpack $deb"
  done
  mods=$root/lib/modules
  [ -d "$mods" ] || mods=$root/usr/lib/modules
  version=$(find "$mods" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | head -n1)
  [ -n "$version" ] || die_env "$* hold no kernel modules"
  # The split packages keep the image, config and System.map beside the modules.
  mkdir -p "$root/boot"
  for f in vmlinuz config System.map; do
    if [ ! -f "$root/boot/$f-$version" ] && [ -f "$mods/$version/$f" ]; then
      mv "$mods/$version/$f" "$root/boot/$f-$version"
    fi
  done
  [ -f "$root/boot/vmlinuz-$version" ] || die_env "$* hold no kernel image"
  mkdir -p "$out/lib/modules"
  mv "$root/boot" "$out/boot"
  mv "$mods/$version" "$out/lib/modules/$version"
  depmod -b "$out" "$version" || die_env "depmod failed for kernel $version"
  echo "$version" >"$out/version"
}

# Runs under the series' lock.
fetch_kernel_locked() {
  local series=$1 final tmp debs
  final=$(kernel_dir "$series")
  [ -f "$final/ready" ] && return 0 # fetched by another run while we waited for the lock
  rm -rf "${final%/*}/.fetch-$series".* # left by an interrupted fetch (we hold the lock)
  tmp=$(mktemp -d "${final%/*}/.fetch-$series.XXXXXX")
  fetch_tmp=$tmp
  trap 'rm -rf "$fetch_tmp"' EXIT # in with_lock's subshell: cleans up a failed fetch
  download_kernel "$series" "$tmp"
  debs=("$tmp"/*.deb)
  [ -f "${debs[0]}" ] || die_env "apt-get download left no .deb for kernel $series in $tmp"
  unpack_kernel "$tmp/root" "$tmp/entry" "${debs[@]}"
  mv "$tmp/package" "$tmp/entry/package"
  touch "$tmp/entry/ready"
  rm -rf "$final"
  mv "$tmp/entry" "$final"
  rm -rf "$tmp"
  say "kernel $series ($(cat "$final/version")) cached in $final"
}

# ensure_kernel SERIES: the kernel in the cache, downloaded if missing.
ensure_kernel() {
  kernel_ready "$1" && return 0
  require_cache_dir
  require_tool apt-get apt
  require_tool dpkg-deb dpkg
  require_tool depmod kmod
  with_lock "$1" fetch_kernel_locked "$1"
}

# The image QEMU boots. A bzImage makes the guest inflate its own kernel first, which under TCG
# takes 1-2 s (zstd, 6.12) to 5-6 s (xz, 6.1) of every boot. Debian's kernels have CONFIG_PVH,
# so QEMU can load the uncompressed ELF vmlinux directly (PVH entry point). The bzImage stays the
# fallback if the extraction fails. A side effect of the PVH entry: no KASLR (the decompressor
# does that), so kernel addresses are the same on every boot.
ensure_boot_image() {
  local series=$1 dir version out
  dir=$(kernel_dir "$series")
  version=$(kernel_version "$series")
  # Debian's arm64 vmlinuz is already an uncompressed Image that QEMU boots directly.
  if [ "$LAB_ARCH" = arm64 ]; then
    echo "$dir/boot/vmlinuz-$version"
    return 0
  fi
  out=$dir/boot/vmlinux-$version
  if [ ! -f "$out" ] && [ ! -f "$out.failed" ]; then
    with_lock "$series" extract_vmlinux_locked "$dir/boot/vmlinuz-$version" "$out"
  fi
  if [ -f "$out" ]; then echo "$out"; else echo "$dir/boot/vmlinuz-$version"; fi
}

# le32 FILE OFFSET: the little-endian 32-bit word at OFFSET.
le32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }

# extract_vmlinux_locked BZIMAGE OUT: the compressed payload is located by the boot protocol's
# setup header (payload_offset at 0x248 and payload_length at 0x24c, from the start of the
# protected-mode code); its last 4 bytes are the uncompressed size, not part of the stream.
extract_vmlinux_locked() {
  local bz=$1 out=$2 sects start len tmp
  [ -f "$out" ] && return 0
  tmp=$out.tmp.$$
  sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$bz" | tr -d ' ')
  [ "${sects:-0}" = 0 ] && sects=4
  start=$(($((sects + 1)) * 512 + $(le32 "$bz" $((0x248)))))
  len=$(($(le32 "$bz" $((0x24c))) - 4))
  if dd if="$bz" bs=64K iflag=skip_bytes,count_bytes skip="$start" count="$len" status=none |
    decompress_payload >"$tmp" 2>/dev/null &&
    [ "$(head -c 4 "$tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
    mv "$tmp" "$out"
  else
    rm -f "$tmp"
    : >"$out.failed"
    say "could not extract an ELF vmlinux from $bz; booting the bzImage (slower)"
  fi
}

# decompress_payload: stdin to stdout, by the stream's magic number.
decompress_payload() {
  local tmp magic rc=0
  tmp=$(mktemp)
  cat >"$tmp"
  magic=$(head -c 6 "$tmp" | od -An -tx1 | tr -d ' \n')
  case $magic in
    28b52ffd*) zstd -qdc "$tmp" || rc=$?;;
    fd377a585a00) xz -qdc "$tmp" || rc=$?;;
    1f8b*) gzip -dc "$tmp" || rc=$?;;
    *) rc=1;;
  esac
  rm -f "$tmp"
  return "$rc"
}
