// expf, a vector at a time, with glibc's bits: the float32 emulation (and
// cpu_flash) call it for every probability, where a scalar expf was a
// quarter of the smoke tier's time.
//
// The arithmetic is the one glibc's x86-64 expf runs on CPUs with FMA (the
// variant its dispatcher picks wherever the vector paths here run): in
// double, x / ln2 scaled by 32 rounded to an integer k by adding 1.5 * 2^52
// (fused), r = x * 32 / ln2 - k (fused), 2^(r / 32) by a cubic in r, times
// 2^(k / 32) from a table of 32 powers of two and the exponent bits, then
// rounded to float. Inputs whose magnitude reaches 80 (and NaN, infinities)
// take the scalar expf, except those below -0x1.9fe368p6, whose result is
// +0. The tests compare every path with std::exp bit for bit over a sweep of
// all floats.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "vector_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace varlen {
namespace internal {
namespace {

void ShiftedExpFloatBaseline(float* x, int64_t n, float shift) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

#if defined(__x86_64__)
// 2^(i / 32), correctly rounded, less i / 32 in the exponent field: adding
// k << 47 to entry k % 32 gives 2^(k / 32) for any integer k in range.
const std::array<int64_t, 32>& PowerTable() {
  static const std::array<int64_t, 32> table = [] {
    std::array<int64_t, 32> t{};
    for (int i = 0; i < 32; ++i) {
      const double power = static_cast<double>(std::exp2l(static_cast<long double>(i) / 32));
      std::memcpy(&t[i], &power, sizeof power);
      t[i] -= static_cast<int64_t>(i) << 47;
    }
    return t;
  }();
  return table;
}

constexpr double kInvLn2Scaled = 0x1.71547652b82fep+5;  // 32 / ln 2
constexpr double kShifter = 0x1.8p52;
// The cubic of 2^(r / 32), highest power first.
constexpr double kCubic = 0x1.c6af84b912394p-20;
constexpr double kQuadratic = 0x1.ebfce50fac4f3p-13;
constexpr double kLinear = 0x1.62e42ff0c52d6p-6;
// Below it expf is +0 (its true value is under half the least subnormal).
constexpr float kZeroBelow = -0x1.9fe368p6f;
// Inputs whose bits >> 20 (sign cleared) exceed it take the scalar expf.
constexpr int kLargestTop = 0x42a;

// The lanes of `special` (a bit each) from the scalar function, over what
// the vector path stored.
inline void ScalarLanes(float* out, const float* in, unsigned special, int lanes) {
  for (int lane = 0; lane < lanes; ++lane) {
    if (special >> lane & 1u) out[lane] = in[lane] < kZeroBelow ? 0.0f : std::exp(in[lane]);
  }
}

[[gnu::target("avx2,fma")]] void ShiftedExpFloatAvx2(float* x, int64_t n, float shift) {
  const int64_t* table = PowerTable().data();
  const __m256d inv_ln2 = _mm256_set1_pd(kInvLn2Scaled), shifter = _mm256_set1_pd(kShifter);
  const __m256d cubic = _mm256_set1_pd(kCubic), quadratic = _mm256_set1_pd(kQuadratic);
  const __m256d linear = _mm256_set1_pd(kLinear), one = _mm256_set1_pd(1.0);
  const __m128 shifts = _mm_set1_ps(shift);
  // The last vector masked: rows are short, and a scalar tail was most of
  // a short row's time.
  for (int64_t i = 0; i < n; i += 4) {
    const __m128i active = _mm_cmpgt_epi32(
        _mm_set1_epi32(static_cast<int>(std::min<int64_t>(4, n - i))), _mm_setr_epi32(0, 1, 2, 3));
    const __m128 xf = _mm_sub_ps(_mm_maskload_ps(x + i, active), shifts);
    const __m128i top =
        _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(xf), 20), _mm_set1_epi32(0x7ff));
    const unsigned special = static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(
        _mm_and_si128(active, _mm_cmpgt_epi32(top, _mm_set1_epi32(kLargestTop))))));
    const __m256d xd = _mm256_cvtps_pd(xf);
    __m256d kd = _mm256_fmadd_pd(inv_ln2, xd, shifter);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shifter);
    const __m256d r = _mm256_fmsub_pd(inv_ln2, xd, kd);
    const __m256i entry = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(table),
                                                 _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64(ki, 47)));
    const __m256d z = _mm256_fmadd_pd(cubic, r, quadratic);
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, linear, one);
    y = _mm256_mul_pd(_mm256_fmadd_pd(z, r2, y), s);
    _mm_maskstore_ps(x + i, active, _mm256_cvtpd_ps(y));
    if (special != 0) {
      alignas(16) float in[4];
      _mm_store_ps(in, xf);
      ScalarLanes(x + i, in, special, 4);
    }
  }
}

// GCC 12 takes the undefined vectors inside its AVX-512 intrinsics for
// uninitialized values.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
[[gnu::target("avx512f,avx512vl,avx512dq,avx2,fma")]] void ShiftedExpFloatAvx512(float* x,
                                                                                 int64_t n,
                                                                                 float shift) {
  const int64_t* table = PowerTable().data();
  const __m512d inv_ln2 = _mm512_set1_pd(kInvLn2Scaled), shifter = _mm512_set1_pd(kShifter);
  const __m512d cubic = _mm512_set1_pd(kCubic), quadratic = _mm512_set1_pd(kQuadratic);
  const __m512d linear = _mm512_set1_pd(kLinear), one = _mm512_set1_pd(1.0);
  const __m256 shifts = _mm256_set1_ps(shift);
  const __m512i table_0 = _mm512_loadu_si512(table), table_8 = _mm512_loadu_si512(table + 8);
  const __m512i table_16 = _mm512_loadu_si512(table + 16);
  const __m512i table_24 = _mm512_loadu_si512(table + 24);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 active = static_cast<__mmask8>((1u << std::min<int64_t>(8, n - i)) - 1);
    const __m256 xf = _mm256_sub_ps(_mm256_maskz_loadu_ps(active, x + i), shifts);
    const __m256i top =
        _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(xf), 20), _mm256_set1_epi32(0x7ff));
    const unsigned special =
        _mm256_mask_cmpgt_epi32_mask(active, top, _mm256_set1_epi32(kLargestTop));
    const __m512d xd = _mm512_cvtps_pd(xf);
    __m512d kd = _mm512_fmadd_pd(inv_ln2, xd, shifter);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shifter);
    const __m512d r = _mm512_fmsub_pd(inv_ln2, xd, kd);
    // The table in four registers: a gather waits on eight loads.
    const __m512i entry =
        _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)),
                                _mm512_permutex2var_epi64(table_0, ki, table_8),
                                _mm512_permutex2var_epi64(table_16, ki, table_24));
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(cubic, r, quadratic);
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, linear, one);
    y = _mm512_mul_pd(_mm512_fmadd_pd(z, r2, y), s);
    _mm256_mask_storeu_ps(x + i, active, _mm512_cvtpd_ps(y));
    if (special != 0) {
      alignas(32) float in[8];
      _mm256_store_ps(in, xf);
      ScalarLanes(x + i, in, special, 8);
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

FloatExpFn PickShiftedExpFloat(OracleIsa isa) {
  if (isa == OracleIsa::kBest) {
    isa = OracleIsaRuns(OracleIsa::kAvx512) ? OracleIsa::kAvx512
          : OracleIsaRuns(OracleIsa::kAvx2) ? OracleIsa::kAvx2
                                            : OracleIsa::kBaseline;
  }
  switch (isa) {
#if defined(__x86_64__)
    case OracleIsa::kAvx512:
      return &ShiftedExpFloatAvx512;
    case OracleIsa::kAvx2:
      return &ShiftedExpFloatAvx2;
#endif
    default:
      return &ShiftedExpFloatBaseline;
  }
}

}  // namespace internal

void ShiftedExpFloat(float* x, int64_t n, float shift, OracleIsa isa) {
  if (isa == OracleIsa::kBest) {
    static const internal::FloatExpFn best = internal::PickShiftedExpFloat(OracleIsa::kBest);
    return best(x, n, shift);
  }
  internal::PickShiftedExpFloat(isa)(x, n, shift);
}

}  // namespace varlen
