/* The GPU code (kernels.cu compiled by nvcc -fatbin) as bytes of this binary, in the section
   where CUDA tools look for fatbins. GB_FATBIN is its path, given by scripts/build-gpu-bench.sh. */
  .section .nv_fatbin, "a"
  .balign 16
  .globl gpu_bench_fatbin
gpu_bench_fatbin:
  .incbin GB_FATBIN
  .section .note.GNU-stack, "", @progbits
