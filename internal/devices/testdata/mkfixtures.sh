#!/usr/bin/env bash
# Regenerates testdata/sysfs/<machine>: recorded sysfs/proc trees for the
# hardware classes of the guard table, written from public PCI ids (no real
# machine was read). Run from this directory: ./mkfixtures.sh
set -euo pipefail
cd "$(dirname "$0")"
rm -rf sysfs

# cpu MACHINE MODEL CORES THREADS_PER_CORE MEM_KB "FLAGS"
cpu() {
	local m=$1 model=$2 cores=$3 tpc=$4 mem=$5 flags=$6 p=0
	mkdir -p "sysfs/$m/proc"
	: >"sysfs/$m/proc/cpuinfo"
	for ((t = 0; t < tpc; t++)); do
		for ((c = 0; c < cores; c++)); do
			printf 'processor\t: %d\nvendor_id\t: x\nmodel name\t: %s\nphysical id\t: 0\ncore id\t\t: %d\nflags\t\t: %s\n\n' \
				"$p" "$model" "$c" "$flags" >>"sysfs/$m/proc/cpuinfo"
			p=$((p + 1))
		done
	done
	printf 'MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n' "$mem" $((mem / 2)) $((mem * 3 / 4)) >"sysfs/$m/proc/meminfo"
}

# pci MACHINE ADDR CLASS VENDOR DEVICE REV DRIVER BOOT_VGA [VRAM_BYTES]
pci() {
	local d="sysfs/$1/sys/bus/pci/devices/$2"
	mkdir -p "$d"
	echo "$3" >"$d/class"; echo "$4" >"$d/vendor"; echo "$5" >"$d/device"; echo "$6" >"$d/revision"
	[ "$7" = - ] || ln -s "../../../bus/pci/drivers/$7" "$d/driver"
	[ "$8" = - ] || echo "$8" >"$d/boot_vga"
	[ -z "${9:-}" ] || echo "$9" >"$d/mem_info_vram_total"
}

X86="fpu sse sse2 ssse3 sse4_1 sse4_2 fma f16c avx avx2"
G=$((1024 * 1024))

cpu raptorlake-uhd770-rtx4090 "13th Gen Intel(R) Core(TM) i9-13900K" 24 1 $((64 * G)) "$X86 avx_vnni"
pci raptorlake-uhd770-rtx4090 0000:00:00.0 0x060000 0x8086 0xa700 0x01 - -
pci raptorlake-uhd770-rtx4090 0000:00:02.0 0x030000 0x8086 0xa780 0x04 i915 0
pci raptorlake-uhd770-rtx4090 0000:01:00.0 0x030000 0x10de 0x2684 0xa1 nvidia 1
pci raptorlake-uhd770-rtx4090 0000:01:00.1 0x040300 0x10de 0x22ba 0xa1 snd_hda_intel -

cpu tigerlake-irisxe "11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz" 4 2 $((16 * G)) "$X86 avx512f avx512dq avx512bw avx512vl avx512_vnni"
pci tigerlake-irisxe 0000:00:02.0 0x030000 0x8086 0x9a49 0x01 i915 1

cpu meteorlake-arc "Intel(R) Core(TM) Ultra 7 155H" 16 1 $((32 * G)) "$X86 avx_vnni"
pci meteorlake-arc 0000:00:02.0 0x030000 0x8086 0x7d55 0x08 xe 1

cpu lunarlake-arc140v "Intel(R) Core(TM) Ultra 7 258V" 8 1 $((32 * G)) "$X86 avx_vnni"
pci lunarlake-arc140v 0000:00:02.0 0x030000 0x8086 0x64a0 0x04 xe 1

cpu phoenix-780m "AMD Ryzen 7 7840U w/ Radeon  780M Graphics" 8 2 $((32 * G)) "$X86 avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16"
pci phoenix-780m 0000:c4:00.0 0x030000 0x1002 0x15bf 0xc1 amdgpu 1 $((512 * G))

cpu strixpoint-890m "AMD Ryzen AI 9 HX 370 w/ Radeon 890M" 12 2 $((32 * G)) "$X86 avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16 avx_vnni"
pci strixpoint-890m 0000:c5:00.0 0x030000 0x1002 0x150e 0xc1 amdgpu 1 $((512 * G))

cpu strixhalo-8060s "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S" 16 2 $((128 * G)) "$X86 avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16 avx_vnni"
pci strixhalo-8060s 0000:c5:00.0 0x030000 0x1002 0x1586 0xc1 amdgpu 1 $((64 * G * 1024))

cpu rtx3090-780m "AMD Ryzen 7 8700G w/ Radeon 780M Graphics" 8 2 $((64 * G)) "$X86 avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16"
pci rtx3090-780m 0000:01:00.0 0x030000 0x10de 0x2204 0xa1 nvidia 1
pci rtx3090-780m 0000:0e:00.0 0x030000 0x1002 0x15bf 0xc5 amdgpu 0 $((512 * G))

# A cloud VM: virtio devices only, no GPU (like the machine the tests run on).
cpu vm-nogpu "Intel(R) Xeon(R) Processor" 2 1 $((24 * G)) "$X86 avx512f amx_tile amx_int8 amx_bf16"
pci vm-nogpu 0000:00:00.0 0x060000 0x8086 0x0d57 0x00 - -
pci vm-nogpu 0000:00:03.0 0x020000 0x1af4 0x1041 0x01 virtio-pci -

# An Ampere Altra arm64 server with an unknown (non-table) AMD dGPU.
mkdir -p sysfs/arm64-unknown-dgpu/proc
for i in 0 1 2 3; do printf 'processor\t: %d\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\n\n' $i >>sysfs/arm64-unknown-dgpu/proc/cpuinfo; done
printf 'MemTotal:       8388608 kB\nMemAvailable:   4194304 kB\n' >sysfs/arm64-unknown-dgpu/proc/meminfo
pci arm64-unknown-dgpu 0000:03:00.0 0x030000 0x1002 0x744c 0xc8 amdgpu 1 $((24 * G * 1024))
mkdir -p sysfs/arm64-unknown-dgpu/usr/share/misc
printf '# minimal pci.ids excerpt\n1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]\n' >sysfs/arm64-unknown-dgpu/usr/share/misc/pci.ids

# The recorded NVIDIA H200 machine (a 16-core Xeon, one thread per core;
# values from `aegis devices --json` and nvidia-smi on that machine). The
# H200 is a 3D controller (class 0x0302), not a VGA one.
H200F="fpu sse sse2 ssse3 sse4_1 sse4_2 fma f16c avx avx2 avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg avx512_vpopcntdq avx512_fp16 avx_vnni amx_bf16 amx_tile amx_int8"
cpu h200 "Intel(R) Xeon(R) Processor" 16 1 $((128887 * 1024)) "$H200F"
printf 'MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n' $((128887 * 1024)) $((128351 * 1024)) $((128351 * 1024)) >sysfs/h200/proc/meminfo
pci h200 0000:00:00.0 0x060000 0x8086 0x1237 0x02 - -
pci h200 0000:00:06.0 0x030200 0x10de 0x2335 0xa1 nvidia 0
