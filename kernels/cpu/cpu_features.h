// What the CPU and the OS support, from cpuid and xgetbv, read once.
#pragma once

namespace baton::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512bf16 = false;
  bool avx512vnni = false;
  // Reported only: Linux also wants arch_prctl(ARCH_REQ_XCOMP_PERM) before AMX use, and
  // no kernel uses AMX yet.
  bool amx_tile = false;
  bool amx_bf16 = false;
};

const CpuFeatures& GetCpuFeatures();

}  // namespace baton::cpu
