/* The GPU code as bytes of this binary; scripts/build-gpu-bench.sh gives the paths.
   GB_FATBIN: kernels.cu compiled by nvcc -fatbin (SASS for each architecture plus PTX), in the
   section where CUDA tools look for fatbins. GB_COMPAT_PTX_75/80: the compatibility PTX for
   drivers older than the toolkit, as NUL-terminated text (what cuModuleLoadData takes). */
  .section .nv_fatbin, "a"
  .balign 16
  .globl gpu_bench_fatbin
gpu_bench_fatbin:
  .incbin GB_FATBIN

  .section .rodata
  .globl gpu_bench_compat_ptx_75
gpu_bench_compat_ptx_75:
  .incbin GB_COMPAT_PTX_75
  .byte 0
  .globl gpu_bench_compat_ptx_80
gpu_bench_compat_ptx_80:
  .incbin GB_COMPAT_PTX_80
  .byte 0
  .section .note.GNU-stack, "", @progbits
