# Per-file instruction sets for the CPU kernels (included by kernels/CMakeLists.txt). Only
# the <kernel>_<isa>.cc files get -m flags; their dispatchers check cpuid before calling them.
# -ffp-contract=off on the matmul files: a kernel's arithmetic is exactly the fused multiply-adds
# it spells out, so results cannot change with what the compiler chooses to contract.
set(_baton_isa_dir ${CMAKE_CURRENT_SOURCE_DIR}/cpu)
set(_baton_avx2 -mavx2 -mfma -mf16c)
set(_baton_avx512 ${_baton_avx2} -mavx512f -mavx512bw -mavx512vl -mavx512dq)
set_source_files_properties(${_baton_isa_dir}/matmul.cc ${_baton_isa_dir}/quant_blocks.cc
                            PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
set_source_files_properties(${_baton_isa_dir}/matmul_avx2.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx2};-ffp-contract=off")
set_source_files_properties(${_baton_isa_dir}/matmul_avx512.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx512};-ffp-contract=off")
set_source_files_properties(${_baton_isa_dir}/matmul_avx512bf16.cc
                            PROPERTIES COMPILE_OPTIONS
                                       "${_baton_avx512};-mavx512bf16;-ffp-contract=off")
# The AVX-512 attention kernel: fused multiply-adds are written out, so no contraction.
# GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_ps in the reductions).
set_source_files_properties(
  ${_baton_isa_dir}/attention_avx512.cc
  PROPERTIES COMPILE_OPTIONS
             "${_baton_avx512};-ffp-contract=off;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
# The AVX2 attention kernel, on the same terms.
set_source_files_properties(${_baton_isa_dir}/attention_avx2.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx2};-ffp-contract=off")
# Elementwise ops (SwiGlu's exp) with AVX-512 and AVX2, on the same terms as attention.
set_source_files_properties(${_baton_isa_dir}/ops_avx512.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx512};-ffp-contract=off")
set_source_files_properties(${_baton_isa_dir}/ops_avx2.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx2};-ffp-contract=off")
# Row dequantization of the quantized weight types: plain C++ block loops, vectorized at -O3
# (at -O2 GCC 12 leaves them scalar); no contraction, so the values equal the reference's.
set_source_files_properties(${_baton_isa_dir}/quant_dequant_avx2.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx2};-O3;-ffp-contract=off")
set_source_files_properties(${_baton_isa_dir}/quant_dequant_avx512.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx512};-O3;-ffp-contract=off")
# The int8 products of K-quant weights (quant_dot.h): the fused multiply-adds are written
# out, so no contraction.
set_source_files_properties(${_baton_isa_dir}/quant_dot_avx2.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx2};-ffp-contract=off")
# GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_* in conversions and inserts).
set_source_files_properties(
  ${_baton_isa_dir}/quant_dot_avx512.cc
  PROPERTIES
    COMPILE_OPTIONS
    "${_baton_avx512};-ffp-contract=off;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized;-Wno-uninitialized>"
)
set_source_files_properties(${_baton_isa_dir}/quant_dot.cc PROPERTIES COMPILE_OPTIONS
                                                           -ffp-contract=off)
# Activations to int8 blocks with AVX2: element by element as the plain loops, no contraction.
set_source_files_properties(${_baton_isa_dir}/quant_activations_avx2.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx2};-ffp-contract=off")
# The tiled int8 product of prefill with AVX2 alone, on the same terms.
set_source_files_properties(${_baton_isa_dir}/quant_tile_avx2.cc
                            PROPERTIES COMPILE_OPTIONS "${_baton_avx2};-ffp-contract=off")
# The tiled int8 product of prefill (vpdpbusd, vpdpwssd): AVX-512 VNNI, on the same terms.
set_source_files_properties(
  ${_baton_isa_dir}/quant_tile_avx512vnni.cc
  PROPERTIES
    COMPILE_OPTIONS
    "${_baton_avx512};-mavx512vnni;-ffp-contract=off;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized;-Wno-uninitialized>"
)
