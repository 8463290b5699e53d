#include "kernels/cpu/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace baton::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)

bool Bit(uint32_t reg, int bit) { return ((reg >> bit) & 1u) != 0; }

// XCR0 says which register states the OS saves on a context switch; a CPU feature is
// usable only if its state is among them. Inline asm, because the _xgetbv intrinsic
// needs -mxsave on this file.
uint64_t ReadXcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(1, 0, eax, ebx, ecx, edx);
  const bool osxsave = Bit(ecx, 27);
  const bool fma = Bit(ecx, 12);
  const bool f16c = Bit(ecx, 29);
  const bool avx = Bit(ecx, 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;          // SSE and AVX state
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;        // plus opmask, ZMM0-15 high, ZMM16-31
  const bool amx_state = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  if (!ymm_state) return f;
  f.fma = fma;
  f.f16c = f16c;

  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const uint32_t max_subleaf7 = eax;
  f.avx2 = Bit(ebx, 5);
  if (zmm_state) {
    f.avx512f = Bit(ebx, 16);
    f.avx512dq = Bit(ebx, 17);
    f.avx512bw = Bit(ebx, 30);
    f.avx512vl = Bit(ebx, 31);
    f.avx512vnni = Bit(ecx, 11);
  }
  if (amx_state) {
    f.amx_bf16 = Bit(edx, 22);
    f.amx_tile = Bit(edx, 24);
  }
  if (max_subleaf7 >= 1 && zmm_state) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    f.avx512bf16 = Bit(eax, 5);
  }
  return f;
}

#else

CpuFeatures Detect() { return CpuFeatures{}; }

#endif

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace baton::cpu
