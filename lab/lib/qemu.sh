# shellcheck shell=bash
# The guest machine: QEMU's command line; following the files the guest writes.

# iommu_device_args IOMMU: the QEMU device for the emulated IOMMU.
iommu_device_args() {
  case $1 in
    # caching-mode=off: with it on, every map costs an extra IOTLB flush and the guest driver
    # forces strict mode, so flush counts would be twice what hardware shows. VFIO in the guest
    # works without it. Interrupt remapping needs the split irqchip.
    intel) echo "-device intel-iommu,intremap=on,caching-mode=off";;
    amd) echo "-device amd-iommu";;
    virtio) echo "-device virtio-iommu-pci,addr=03.0";;
    # QEMU 7.2 has no pluggable SMMUv3 device: the virt machine builds it in (machine_args).
    smmuv3 | none) ;;
  esac
}

# iommu_cmdline IOMMU: what the guest kernel needs on its command line for that IOMMU.
iommu_cmdline() {
  case $1 in
    intel) echo "intel_iommu=on";; # Debian does not enable VT-d translation by default
    *) ;;                          # AMD-Vi and virtio-iommu are on when present
  esac
}

# accel_args ICOUNT: how QEMU runs the guest's code. Multi-threaded TCG (a host thread per CPU)
# unless ICOUNT (a shift) asks for a clock that counts instructions, which needs one thread.
accel_args() {
  if [ -n "$1" ]; then
    echo "-accel tcg,thread=single -icount shift=$1,align=off,sleep=on"
  else
    echo "-accel tcg,thread=multi"
  fi
}

# machine_args IOMMU: the machine and CPU of this architecture, one argument per line.
machine_args() {
  case $LAB_ARCH in
    arm64)
      # The virt machine with GICv3; SMMUv3 in front of its whole PCIe root complex when asked.
      # pauth-impdef=on: Debian's arm64 kernels sign return addresses, and TCG's emulation of
      # the architected algorithm (QARMA) makes the whole guest several times slower than this
      # one (docs/measurements.md, "Figures the code's choices rest on").
      local machine=virt,gic-version=3
      [ "$1" = smmuv3 ] && machine+=,iommu=smmuv3
      printf '%s\n' -cpu max,pauth-impdef=on -machine "$machine"
      ;;
    *) printf '%s\n' -cpu max -machine q35,kernel-irqchip=split;;
  esac
}

# qemu_args RUN_DIR KERNEL INITRD CMDLINE IOMMU SMP MEM [ICOUNT [ROOT [KERNEL_DIR]]]: one argument
# per line. ROOT is the directory the guest gets as its root file system (default /, the host's);
# KERNEL_DIR, when given, is shared read-only (mount tag labkernel): the kernel's modules for a
# guest whose root is not the host's.
qemu_args() {
  local run=$1 kernel=$2 initrd=$3 cmdline=$4 iommu=$5 smp=$6 mem=$7 icount=${8:-} a
  local guest_root=${9:-/} kernel_share=${10:-}
  # A path inside a QEMU option list escapes its commas by doubling them. (The run directory's
  # name, from mktemp, has none.)
  local project=${PROJECT_DIR//,/,,}
  local args=() extra=() nvme0=nvme,serial=iommutoplab,drive=nvme0,addr=04.0
  [ "$LAB_MACHINE" = server ] && nvme0+=,max_ioqpairs=$SERVER_IOQPAIRS
  for a in $(accel_args "$icount"); do args+=("$a"); done
  for a in $(machine_args "$iommu"); do args+=("$a"); done
  # shellcheck disable=SC2054 # the commas are QEMU's option syntax
  args+=(
    -smp "$smp" -m "$mem"
    -nodefaults -no-reboot -display none -no-user-config
    -kernel "$kernel" -initrd "$initrd" -append "$cmdline"
    # The kernel console (ttyS0; ttyAMA0 on arm64) goes to a file, never to the command's stdout.
    -serial "file:$run/console.log"
  )
  if [ "$LAB_MACHINE" = server ]; then
    mapfile -t extra < <(server_qemu_firmware_args)
    args+=("${extra[@]}")
  fi
  # The IOMMU comes before the devices it translates for. The PCI addresses are fixed, the same
  # with every IOMMU: NVMe 00:04.0, NICs 00:05.0 and 00:06.0, the 9p shares 00:08.0-00:0a.0;
  # virtio-iommu sits at 00:03.0 and QEMU's AMD-Vi function takes the first free slot, 00:01.0.
  # The server machine adds its second NVMe at 00:07.0 and the igb at 00:0c.0 (lib/server.sh).
  for a in $(iommu_device_args "$iommu"); do args+=("$a"); done
  # shellcheck disable=SC2054
  args+=(
    # The host's root, read-only (the guest puts a tmpfs overlay on it); the project, writable;
    # the run directory (command in, output and status out). multidevs=remap: / spans several
    # file systems, whose inode numbers would otherwise collide in the guest.
    -fsdev "local,id=hostroot,path=${guest_root//,/,,},security_model=none,readonly=on,multidevs=remap"
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot,addr=08.0
    -fsdev "local,id=project,path=$project,security_model=none,multidevs=remap"
    -device virtio-9p-pci,fsdev=project,mount_tag=project,addr=09.0
    -fsdev "local,id=labio,path=$run/io,security_model=none"
    -device virtio-9p-pci,fsdev=labio,mount_tag=labio,addr=0a.0
    # Scratch NVMe: a fresh sparse image per run; tests may write to it.
    -drive "file=$run/nvme.img,if=none,id=nvme0,format=raw"
    -device "$nvme0"
    # Two NICs on one hub and nothing else: they reach each other only. romfile= skips iPXE.
    -netdev hubport,id=net0,hubid=0 -device e1000e,netdev=net0,romfile=,mac=52:54:00:12:34:56,addr=05.0
    -netdev hubport,id=net1,hubid=0 -device e1000e,netdev=net1,romfile=,mac=52:54:00:12:34:57,addr=06.0
  )
  if [ "$LAB_MACHINE" = server ]; then
    mapfile -t extra < <(server_device_args "$run")
    args+=("${extra[@]}")
  fi
  if [ -n "$kernel_share" ]; then
    # shellcheck disable=SC2054
    args+=(
      -fsdev "local,id=labkernel,path=${kernel_share//,/,,},security_model=none,readonly=on"
      -device virtio-9p-pci,fsdev=labkernel,mount_tag=labkernel,addr=0b.0
    )
  fi
  printf '%s\n' "${args[@]}"
}

# follow FILE PID: copies FILE as it grows, from its first byte, until PID has exited (then
# once more, to the end).
follow() {
  tail -c +1 -s 0.2 --pid="$2" -f "$1" 2>/dev/null
}
