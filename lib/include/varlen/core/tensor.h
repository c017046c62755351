// File: varlen/core/tensor.h
// -----------------------------------------------------------------------------
//
// Tensor is a small reference-counted n-d array with a dtype, a device tag,
// a shape and element strides, modelled on torch.Tensor as far as the
// contract needs it. Copying a Tensor shares its storage (like Python
// references); views (Reshape, Slice) share it too.
//
// Two ways of reading elements, on purpose:
//   * ToHostInts()/ToHostDoubles() model a host read (.tolist(), .item()):
//     on a "cuda" tensor they record a host sync in the device ledger.
//   * data<T>()/IntAt()/DoubleAt() are device-side access for kernels and for
//     operations that run on the tensor's own device. They record nothing.
//
// A shape-only tensor (ShapeOnly) has no storage. It lets resolution run on
// geometries far too large to allocate (the int32 overflow rules need
// millions of tokens) while q.shape and q.numel() stay exact.

#ifndef VARLEN_CORE_TENSOR_H_
#define VARLEN_CORE_TENSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "varlen/core/dtype.h"

namespace varlen {

using Shape = std::vector<int64_t>;

// Product of the dimensions; 1 for a 0-d shape.
int64_t ShapeNumel(const Shape& shape);
// "[2, 3, 4]"
std::string ShapeToString(const Shape& shape);

class Tensor {
 public:
  // An undefined tensor (no dtype, no shape); defined() is false.
  Tensor() = default;

  // A contiguous tensor of `shape`, zero-filled.
  static Tensor Zeros(DType dtype, Device device, Shape shape);
  // A contiguous tensor without storage; any access to elements is a bug.
  static Tensor ShapeOnly(DType dtype, Device device, Shape shape);
  // A tensor holding `values`, 1-d unless `shape` is given ({} is 0-d).
  // Values are stored as the dtype stores them: int32 keeps the low 32 bits.
  static Tensor FromInts(absl::Span<const int64_t> values, DType dtype, Device device,
                         std::optional<Shape> shape = std::nullopt);
  // Like FromInts for floating dtypes (rounded once to the dtype).
  static Tensor FromDoubles(absl::Span<const double> values, DType dtype, Device device,
                            std::optional<Shape> shape = std::nullopt);

  bool defined() const { return defined_; }
  bool has_storage() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const { return shape_[d < 0 ? d + dim() : d]; }
  int64_t numel() const { return ShapeNumel(shape_); }
  int64_t storage_offset() const { return offset_; }  // in elements, as torch counts it
  bool is_contiguous() const;
  // True when both tensors view the same storage at the same offset.
  bool SharesStorageWith(const Tensor& other) const;

  // t.reshape(shape): a view when the tensor is contiguous, else a view of a
  // contiguous copy (as torch copies). One entry may be -1.
  // REQUIRES: the sizes agree.
  Tensor Reshape(Shape shape) const;
  // t.contiguous(): this tensor when it already is, else a dense copy.
  Tensor Contiguous() const;
  // Elements [begin, end) as a view: of a 1-d tensor (its stride kept), or
  // of a contiguous one, flattened.
  Tensor Slice(int64_t begin, int64_t end) const;
  // torch.as_strided: a view of the same storage with any shape and strides,
  // starting `offset` elements after this tensor's first element (how
  // `qkv.split(...)` column views of one projection output are made).
  // REQUIRES: every element of the view lies inside the storage.
  Tensor AsStrided(Shape shape, Shape strides, int64_t offset) const;
  // Elements addressable from this tensor's first element to the end of its
  // storage: what a kernel handed this pointer may touch. numel() for a
  // tensor that owns its storage; more for a view into a wider buffer; 0
  // for an empty view whose offset lies past the end of an empty storage
  // (the k and v columns of a fused projection of no tokens).
  int64_t extent() const { return storage_elements_ > offset_ ? storage_elements_ - offset_ : 0; }

  // Device-side element access (no ledger entry): element `i` of the storage
  // counted from this tensor's first element, which is the logical
  // (row-major) index for a contiguous tensor. REQUIRES: has_storage() and
  // 0 <= i < extent().
  // The first element's address, whatever T (bytes included).
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(storage_->bytes.get() + offset_ * DTypeSize(dtype_));
  }
  template <typename T>
  T* mutable_data() const {
    return reinterpret_cast<T*>(storage_->bytes.get() + offset_ * DTypeSize(dtype_));
  }
  int64_t IntAt(int64_t i) const;                   // integer or bool dtypes
  double DoubleAt(int64_t i) const;                 // any dtype, converted to double
  // The storage element (counted as above) that holds row-major element `i`:
  // `i` itself for a contiguous tensor; the strides' sum for a view such as
  // `cu[::2]`. The *Logical reads are what torch's own operations see.
  int64_t StorageIndex(int64_t i) const;
  int64_t IntAtLogical(int64_t i) const { return IntAt(StorageIndex(i)); }
  double DoubleAtLogical(int64_t i) const { return DoubleAt(StorageIndex(i)); }
  void SetIntAt(int64_t i, int64_t value) const;    // wraps to the dtype
  void SetDoubleAt(int64_t i, double value) const;  // rounds to the dtype

  // Host reads: every element, in row-major order. On a cuda tensor each
  // call records one host sync, labelled `what`.
  std::vector<int64_t> ToHostInts(absl::string_view what) const;
  std::vector<double> ToHostDoubles(absl::string_view what) const;

  // "tensor([0, 480, 1200], dtype=int32, device=cuda)"; long tensors are
  // elided in the middle. Does not record a host sync: it is for reports.
  std::string DebugString() const;

 private:
  struct Storage {
    std::unique_ptr<unsigned char[]> bytes;
  };

  bool defined_ = false;
  DType dtype_ = DType::kFloat32;
  Device device_ = Device::kCpu;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;            // in elements
  int64_t storage_elements_ = 0;  // elements in the whole storage
  std::shared_ptr<Storage> storage_;
};

// Contiguous row-major strides of `shape`.
Shape ContiguousStrides(const Shape& shape);

// A 4-d [b, s, h, d] tensor viewed as packed [b*s, h, d]
// (rearrange "b s ... -> (b s) ..."); any other tensor unchanged.
// REQUIRES: CanFlattenBatch(t).
Tensor FlattenBatch(const Tensor& t);
// True when FlattenBatch(t) is a view: t is contiguous, or its batch items
// follow one another at its token stride (one item, or strided column views
// of one [b*s, width] buffer).
bool CanFlattenBatch(const Tensor& t);

}  // namespace varlen

#endif  // VARLEN_CORE_TENSOR_H_
