# shellcheck shell=bash
# The lab kernels: stock Debian images, downloaded once into $CACHE_DIR/kernels/SERIES/.
#
# An entry holds boot/{vmlinuz,config,System.map}-VERSION, lib/modules/VERSION (with modules.dep
# from depmod), a file 'version', a file 'package' and, last, a file 'ready'. It is built in a
# temporary directory next to it and renamed into place under the series' lock, so a reader
# either finds a complete entry or none.

# shellcheck disable=SC2034 # lab/fetch's
readonly KERNEL_SERIES="6.1 6.12"

kernel_dir() { echo "$CACHE_DIR/kernels/$1"; }
kernel_version() { cat "$(kernel_dir "$1")/version"; }
kernel_ready() { [ -f "$(kernel_dir "$1")/ready" ]; }

# Debian's 6.1 is built without CONFIG_VIRTIO_IOMMU.
kernel_has_virtio_iommu() {
  grep -qE '^CONFIG_VIRTIO_IOMMU=[ym]' "$(kernel_dir "$1")/boot/config-$(kernel_version "$1")"
}

# The versioned image package that linux-image-amd64 depends on: bookworm for 6.1,
# bookworm-backports for 6.12. Prints nothing if apt does not know it.
kernel_package_lookup() {
  local series=$1 target=()
  [ "$series" = 6.12 ] && target=(-t bookworm-backports)
  apt-cache depends "${target[@]}" linux-image-amd64 2>/dev/null |
    awk -v re="^linux-image-${series//./\\.}[.-]" '$1 == "Depends:" && $2 ~ re { print $2; exit }'
}

kernel_package() {
  local pkg
  pkg=$(kernel_package_lookup "$1")
  if [ -z "$pkg" ]; then
    apt_update
    pkg=$(kernel_package_lookup "$1")
  fi
  [ -n "$pkg" ] ||
    die_env "apt knows no linux-image-amd64 for kernel $1 (6.1 comes from bookworm, 6.12 from bookworm-backports): run scripts/install-deps"
  echo "$pkg"
}

apt_update() {
  say "refreshing the apt package lists"
  apt-get update -qq >/dev/null 2>&1 || say "apt-get update failed; trying with the lists we have"
}

# apt_download PACKAGE DIR LOG: the .deb into DIR. apt drops privileges to _apt, which cannot
# write into our root-owned temporary directory: download as root.
apt_download() {
  (cd "$2" && apt-get download -q -o APT::Sandbox::User=root "$1") >"$3" 2>&1
}

# download_kernel SERIES DIR: downloads the package into DIR; prints the .deb's path. Retries
# once after refreshing the package lists (a point release removes the old image from mirrors).
download_kernel() {
  local series=$1 dir=$2 pkg deb
  pkg=$(kernel_package "$series")
  say "downloading $pkg for kernel $series (first run only)"
  if ! apt_download "$pkg" "$dir" "$dir/apt.log"; then
    apt_update
    pkg=$(kernel_package "$series")
    apt_download "$pkg" "$dir" "$dir/apt.log" ||
      die_env "downloading $pkg failed: $(grep -v '^ *$' "$dir/apt.log" | tail -n1)"
  fi
  deb=$(find "$dir" -maxdepth 1 -name "${pkg}_*.deb" | head -n1)
  [ -n "$deb" ] || die_env "apt-get download $pkg left no .deb in $dir"
  echo "$pkg" >"$dir/package"
  echo "$deb"
}

# unpack_kernel DEB ROOT OUT: the image package's boot/ and lib/modules/ into OUT, with modules.dep.
unpack_kernel() {
  local deb=$1 root=$2 out=$3 mods version
  dpkg-deb -x "$deb" "$root" || die_env "dpkg-deb could not unpack $deb"
  mods=$root/lib/modules
  [ -d "$mods" ] || mods=$root/usr/lib/modules
  version=$(find "$mods" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | head -n1)
  if [ -z "$version" ] || [ ! -f "$root/boot/vmlinuz-$version" ]; then
    die_env "$deb holds no kernel image and modules"
  fi
  mkdir -p "$out/lib/modules"
  mv "$root/boot" "$out/boot"
  mv "$mods/$version" "$out/lib/modules/$version"
  depmod -b "$out" "$version" || die_env "depmod failed for kernel $version"
  echo "$version" >"$out/version"
}

# Runs under the series' lock.
fetch_kernel_locked() {
  local series=$1 final tmp deb
  final=$(kernel_dir "$series")
  [ -f "$final/ready" ] && return 0 # fetched by another run while we waited for the lock
  rm -rf "$CACHE_DIR/kernels/.fetch-$series".* # left by an interrupted fetch (we hold the lock)
  tmp=$(mktemp -d "$CACHE_DIR/kernels/.fetch-$series.XXXXXX")
  fetch_tmp=$tmp
  trap 'rm -rf "$fetch_tmp"' EXIT # in with_lock's subshell: cleans up a failed fetch
  deb=$(download_kernel "$series" "$tmp")
  unpack_kernel "$deb" "$tmp/root" "$tmp/entry"
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
