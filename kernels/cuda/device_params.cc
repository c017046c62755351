#include "device_params.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "flash_forward.h"
#include "varlen/core/dtype.h"

namespace varlen::cuda_kernels {

absl::Status CudaDeviceHealth() {
  if (cudaDeviceSynchronize() == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();  // clears an error that is not sticky
  return CudaStatus(cudaDeviceSynchronize(), "the device after the call");
}

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CudaDeviceUsable() {
  int count = 0;
  if (absl::Status s = CudaStatus(cudaGetDeviceCount(&count), "no CUDA device: cudaGetDeviceCount");
      !s.ok()) {
    return absl::UnavailableError(s.message());
  }
  if (count == 0) return absl::UnavailableError("no CUDA device: cudaGetDeviceCount found 0");
  int device = 0, major = 0, minor = 0;
  if (absl::Status s = CudaStatus(cudaGetDevice(&device), "cudaGetDevice"); !s.ok()) return s;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major < 8) {
    return absl::UnavailableError(absl::StrCat("CUDA device ", device, " has compute capability ",
                                               major, ".", minor,
                                               "; the kernels need 8.0 or newer"));
  }
  if (absl::Status s = CudaStatus(CheckKernelImage(), "this build has no kernel for the device");
      !s.ok()) {
    return absl::UnavailableError(s.message());
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> DeviceParams::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* device = nullptr;
  if (absl::Status s =
          CudaStatus(cudaMalloc(&device, bytes), absl::StrCat("cudaMalloc(", bytes, ")"));
      !s.ok()) {
    return s;
  }
  buffers_.emplace_back(device);
  return device;
}

absl::StatusOr<void*> DeviceParams::Copy(const void* host, size_t bytes) {
  if (host == nullptr || bytes == 0) return nullptr;
  absl::StatusOr<void*> device = Allocate(bytes);
  if (!device.ok()) return device.status();
  if (absl::Status s = CudaStatus(cudaMemcpy(*device, host, bytes, cudaMemcpyHostToDevice),
                                  "cudaMemcpy to device");
      !s.ok()) {
    return s;
  }
  return *device;
}

absl::StatusOr<DeviceParams> DeviceParams::Upload(const VarlenAttentionParams& host) {
  DeviceParams out;
  out.device_ = host;
  VarlenAttentionParams& d = out.device_;
  const size_t in = DTypeSize(host.input_dtype), o = DTypeSize(host.output_dtype);
  const size_t per_sequence = sizeof(int64_t) * static_cast<size_t>(host.batch);
  struct Transfer {
    const void* from;
    size_t bytes;
    const void** to;
  };
  const void* o_device = nullptr;
  const void* sinks = nullptr;
  const void* arrays[6] = {};
  for (const Transfer& u : std::initializer_list<Transfer>{
           {host.q, in * static_cast<size_t>(host.q_numel), &d.q},
           {host.k, in * static_cast<size_t>(host.k_numel), &d.k},
           {host.v, in * static_cast<size_t>(host.v_numel), &d.v},
           {host.o, o * static_cast<size_t>(host.o_numel), &o_device},
           {host.q_start, per_sequence, &arrays[0]},
           {host.k_start, per_sequence, &arrays[1]},
           {host.v_start, per_sequence, &arrays[2]},
           {host.o_start, per_sequence, &arrays[3]},
           {host.seqlen_q, per_sequence, &arrays[4]},
           {host.seqlen_k, per_sequence, &arrays[5]},
           {host.sinks,
            host.sinks == nullptr ? 0 : sizeof(float) * static_cast<size_t>(host.num_heads_q),
            &sinks}}) {
    absl::StatusOr<void*> copied = out.Copy(u.from, u.bytes);
    if (!copied.ok()) return copied.status();
    *u.to = *copied;
  }
  d.o = const_cast<void*>(o_device);
  d.q_start = static_cast<const int64_t*>(arrays[0]);
  d.k_start = static_cast<const int64_t*>(arrays[1]);
  d.v_start = static_cast<const int64_t*>(arrays[2]);
  d.o_start = static_cast<const int64_t*>(arrays[3]);
  d.seqlen_q = static_cast<const int64_t*>(arrays[4]);
  d.seqlen_k = static_cast<const int64_t*>(arrays[5]);
  d.sinks = static_cast<const float*>(sinks);
  return out;
}

absl::Status DeviceParams::DownloadOutput(const VarlenAttentionParams& host) const {
  if (host.o == nullptr || host.o_numel == 0) return absl::OkStatus();
  const size_t bytes = DTypeSize(host.output_dtype) * static_cast<size_t>(host.o_numel);
  return CudaStatus(cudaMemcpy(host.o, device_.o, bytes, cudaMemcpyDeviceToHost),
                    "cudaMemcpy of the output to the host");
}

}  // namespace varlen::cuda_kernels
