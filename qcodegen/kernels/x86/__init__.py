"""The x86-64 kernel family (runtime/x86/): the choice (choice.py, one for both instruction-set levels) and the
weight layouts (layouts.py). Targets name a level: `kernels = "x86.avx2"` (avx2.py) or `kernels = "x86.vnni"`
(vnni.py: AVX-VNNI and AVX-512 VNNI, whose instructions the kernels' header picks from the compiler's flags)."""
