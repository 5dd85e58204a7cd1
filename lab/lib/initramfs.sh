# shellcheck shell=bash
# The guest's initramfs: a static busybox, lab/guest/init, and the modules the init loads before
# it can reach the host's root file system, with their dependencies in load order.
#
# One image per kernel, in the kernel's cache entry, named after a hash of what went into it: a
# change to the init or to the module lists builds a new image; nothing is rebuilt otherwise. Old
# images are left alone (another clone of the project may still use them); they are small.

# Loaded first, and only with --iommu virtio: the devices behind a virtio-iommu (the 9p shares
# too) wait for it before they can be used.
readonly EARLY_MODULES="virtio_iommu"
# What the root file system needs: 9p over virtio and overlay.
readonly ROOT_MODULES="virtio_pci 9pnet_virtio 9p overlay"
# The devices under test and VFIO. Everything else the command needs is loaded inside the guest
# by modprobe from the bind-mounted /lib/modules.
readonly DEVICE_MODULES="nvme e1000e vfio_pci vfio_iommu_type1"
# The server machine's igb (x86_64 only), and its virtual functions' driver, which the init loads
# once it has enabled and named the VFs.
readonly SERVER_MODULES="igb"
readonly VF_MODULES="igbvf"

# module_files KERNEL_DIR VERSION NAME...: the module files (relative to KERNEL_DIR) that NAMEs
# need, dependencies first, each once. Built-in modules produce nothing.
module_files() {
  local dir=$1 version=$2 name
  shift 2
  for name in "$@"; do
    modprobe -d "$dir" -S "$version" --show-depends "$name" ||
      die_env "kernel $version in $dir has no module $name"
  done | awk -v dir="$dir/" '$1 == "insmod" { f = $2; sub("^" dir, "", f); if (!seen[f]++) print f }'
}

# initramfs_key BUSYBOX LIST...
initramfs_key() {
  local busybox=$1
  shift
  { cat "$LAB_DIR/guest/init"; printf '%s\n' "$@"; sha256sum <"$busybox"; } | sha256sum | cut -c1-16
}

# build_initramfs_locked OUT KERNEL_DIR BUSYBOX EARLY ROOT DEVICES SERVER VFS (under the series'
# lock): the lists are newline-separated module files relative to KERNEL_DIR.
build_initramfs_locked() {
  local out=$1 dir=$2 busybox=$3 early=$4 root=$5 devices=$6 server=$7 vfs=$8 tree f base list
  [ -f "$out" ] && return 0
  tree=$(mktemp -d "${out%/*}/.initramfs.XXXXXX")
  mkdir -p "$tree"/{bin,dev,proc,sys,host,ovl,newroot,modules}
  cp "$busybox" "$tree/bin/busybox"
  cp "$LAB_DIR/guest/init" "$tree/init"
  chmod 755 "$tree/init" "$tree/bin/busybox"
  for f in $early $root $devices $server $vfs; do
    base=${f##*/}
    case $base in
      *.ko.xz) xz -dc "$dir/$f" >"$tree/modules/${base%.xz}";;
      *.ko.zst) zstd -qdc "$dir/$f" >"$tree/modules/${base%.zst}";;
      *.ko.gz) gzip -dc "$dir/$f" >"$tree/modules/${base%.gz}";;
      *) cp "$dir/$f" "$tree/modules/$base";;
    esac
  done
  for list in early root devices server vfs; do
    for f in ${!list}; do base=${f##*/}; echo "${base%.ko*}.ko"; done >"$tree/modules/$list"
  done
  # Uncompressed: the kernel unpacks it faster under TCG than it would inflate a gzip.
  (cd "$tree" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$tree.cpio" ||
    die_env "cpio failed building $out"
  mv "$tree.cpio" "$out"
  rm -rf "$tree"
}

# ensure_initramfs SERIES [BUSYBOX]: prints the path of the kernel's initramfs, building it if
# needed. BUSYBOX (a static one for the guest's architecture) defaults to the host's.
ensure_initramfs() {
  local series=$1 busybox=${2:-} dir version early root devices server="" vfs="" key out
  dir=$(kernel_dir "$series")
  version=$(kernel_version "$series")
  [ -n "$busybox" ] || busybox=$(static_busybox)
  early=""
  # shellcheck disable=SC2086 # the lists are words
  {
    kernel_has_virtio_iommu "$series" && early=$(module_files "$dir" "$version" $EARLY_MODULES)
    root=$(module_files "$dir" "$version" $ROOT_MODULES)
    devices=$(module_files "$dir" "$version" $DEVICE_MODULES)
    if [ "$LAB_ARCH" = x86_64 ]; then
      server=$(module_files "$dir" "$version" $SERVER_MODULES)
      vfs=$(module_files "$dir" "$version" $VF_MODULES)
    fi
  }
  key=$(initramfs_key "$busybox" "$early" "$root" "$devices" "$server" "$vfs")
  out=$dir/initramfs-$key.cpio
  if [ ! -f "$out" ]; then
    require_tool cpio cpio
    require_tool xz xz-utils
    require_tool zstd zstd
    with_lock "$series" build_initramfs_locked "$out" "$dir" "$busybox" "$early" "$root" "$devices" "$server" "$vfs"
  fi
  echo "$out"
}
