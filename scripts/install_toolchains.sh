#!/usr/bin/env bash
# Installs the cross toolchains and emulators of the targets in targets/ (Debian 12 packages; run as root).
# Skips apt entirely when every tool is already there. Usage: bash scripts/install_toolchains.sh
set -euo pipefail
# tool -> Debian package(s)
declare -A PKG=(
  [aarch64-linux-gnu-gcc]="gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
  [arm-none-eabi-gcc]="gcc-arm-none-eabi libnewlib-arm-none-eabi"
  [riscv64-linux-gnu-gcc]="gcc-riscv64-linux-gnu libc6-dev-riscv64-cross"
  [riscv64-unknown-elf-gcc]="gcc-riscv64-unknown-elf"
  [clang]="clang"  # riscv64-rvv: RVV intrinsics (GCC 12 has none), with the riscv64-linux-gnu sysroot
  [qemu-aarch64]="qemu-user"
  [clang-14]="clang-14"  # hexagon-hvx: clang-14 + lld-14, llvm-objdump-14 / llvm-size-14 (llvm-14), qemu-hexagon
  [ld.lld-14]="lld-14"
  [llvm-objdump-14]="llvm-14"
  [qemu-hexagon]="qemu-user"
  [qemu-system-arm]="qemu-system-arm"
  [make]="make"
)
need=()
for tool in "${!PKG[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || need+=(${PKG[$tool]})
done
# the static C libraries for x86-avx2 (-static) and the AArch64 / RISC-V Linux harnesses
[ -e /usr/aarch64-linux-gnu/lib/libc.a ] || need+=(libc6-dev-arm64-cross)
[ -e /usr/riscv64-linux-gnu/lib/libc.a ] || need+=(libc6-dev-riscv64-cross)
if [ ${#need[@]} -eq 0 ]; then
  echo "install_toolchains: all tools present"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
for i in 1 2 3; do apt-get update -qq && break; sleep 5; done
apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 $(printf '%s\n' "${need[@]}" | sort -u)
