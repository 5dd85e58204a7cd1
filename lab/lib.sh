# shellcheck shell=bash
# Callers set: here (the lab/ directory), cache (the kernel cache), and die().
# shellcheck disable=SC2154
# Shared by lab/run and lab/fetch: the kernel cache and the initramfs.

lab_root() { [ "$(id -u)" = 0 ] || die "needs root (apt-get download, QEMU's 9p export of /): run with sudo"; }

# The image package linux-image-amd64 depends on, per kernel series.
kernel_package() {
  case $1 in
    6.1) apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.1\./{print $2; exit}';;
    6.12) apt-cache depends -t bookworm-backports linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.12\./{print $2; exit}';;
  esac
}

# Populates $cache/kernels/$1 (vmlinuz, config, modules) once; prints its directory.
fetch_kernel() {
  local series=$1 dir
  dir="$cache/kernels/$1"
  if [ -f "$dir/ready" ]; then echo "$dir"; return; fi
  mkdir -p "$cache/kernels"
  exec 9>"$cache/.lock-$series"
  flock 9
  if [ ! -f "$dir/ready" ]; then
    local pkg tmp
    pkg=$(kernel_package "$series")
    if [ -z "$pkg" ]; then
      apt-get update -qq >/dev/null 2>&1 || true
      pkg=$(kernel_package "$series")
    fi
    [ -n "$pkg" ] || die "cannot resolve the Debian package for kernel $series (is bookworm-backports configured? run scripts/install-deps)"
    tmp=$(mktemp -d "$cache/.fetch-$series.XXXXXX")
    echo "lab: downloading $pkg (first run only)" >&2
    (cd "$tmp" && apt-get download -q "$pkg" >/dev/null 2>&1) || { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
    dpkg-deb -x "$tmp"/*.deb "$tmp/root" || { rm -rf "$tmp"; die "extracting $pkg failed"; }
    local ver
    ver=$(ls "$tmp/root/lib/modules")
    depmod -b "$tmp/root" "$ver"
    mkdir -p "$tmp/kernel"
    mv "$tmp/root/boot" "$tmp/kernel/boot"
    mkdir -p "$tmp/kernel/lib"
    mv "$tmp/root/lib/modules" "$tmp/kernel/lib/modules"
    echo "$ver" >"$tmp/kernel/version"
    rm -rf "$dir"
    mv "$tmp/kernel" "$dir"
    rm -rf "$tmp"
    touch "$dir/ready"
  fi
  flock -u 9
  echo "$dir"
}

# Modules the guest loads, in dependency order (modprobe resolves them from modules.dep).
guest_modules() {
  local dir=$1 ver=$2 top m
  top="virtio_pci 9pnet_virtio 9p overlay nvme e1000e vfio_pci vfio_iommu_type1"
  for m in virtio_iommu $top; do
    modprobe -d "$dir" -S "$ver" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}'
  done | awk '!seen[$0]++'
}

# Builds (once per kernel) the initramfs: busybox, the modules, and lab/init.
build_initramfs() {
  local dir=$1 ver tree out
  out="$dir/initramfs.cpio.gz"
  [ "$out" -nt "$here/init" ] && [ -f "$out" ] && { echo "$out"; return; }
  command -v busybox >/dev/null || die "busybox not found: apt-get install busybox-static (or scripts/install-deps)"
  ver=$(cat "$dir/version")
  tree=$(mktemp -d)
  mkdir -p "$tree"/{bin,dev,proc,sys,modules,newroot,host}
  cp "$(command -v busybox)" "$tree/bin/busybox"
  local m n=0
  : >"$tree/modules/order"
  while read -r m; do
    n=$((n + 1))
    local base; base=$(basename "$m")
    case $base in
      *.ko.xz) xz -dc "$m" >"$tree/modules/${base%.xz}"; base=${base%.xz};;
      *.ko.zst) zstd -qdc "$m" >"$tree/modules/${base%.zst}"; base=${base%.zst};;
      *) cp "$m" "$tree/modules/$base";;
    esac
    echo "$base" >>"$tree/modules/order"
  done < <(guest_modules "$dir" "$ver")
  [ "$n" -ge 8 ] || { rm -rf "$tree"; die "found only $n guest modules for kernel $ver in $dir: delete $dir and retry"; }
  cp "$here/init" "$tree/init"
  chmod +x "$tree/init"
  (cd "$tree" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$tree"
  echo "$out"
}
