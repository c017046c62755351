// The case the kernel tests run: triton_attn's correct call (int32
// cu_seqlens on the device, no max_seqlen) for sequences of `lengths`
// tokens. Its kernel takes any dtype and head size, so the tests reach every
// geometry (FlashAttention's entry refuses most of them).

#ifndef VARLEN_TESTS_SUPPORT_KERNEL_CASES_H_
#define VARLEN_TESTS_SUPPORT_KERNEL_CASES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "varlen/cases/case.h"

namespace varlen::test {

inline Case KernelCase(std::vector<int64_t> lengths, int64_t heads, int64_t kv_heads, int64_t dim,
                       int64_t dim_v, DType dtype, uint64_t seed) {
  Case c;
  c.name = "kernel";
  c.source = "test";
  c.geometry.seq_lens = std::move(lengths);
  c.geometry.num_heads = heads;
  c.geometry.num_kv_heads = kv_heads;
  c.geometry.head_dim = dim;
  c.geometry.head_dim_v = dim_v;
  c.geometry.dtype = dtype;
  c.data.seed = seed;
  std::vector<int64_t> offsets = {0};
  for (int64_t n : c.geometry.seq_lens) offsets.push_back(offsets.back() + n);
  c.call.profile = Profile::kTritonAttn;
  c.call.cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  return c;
}

}  // namespace varlen::test

#endif  // VARLEN_TESTS_SUPPORT_KERNEL_CASES_H_
