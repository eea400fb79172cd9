#include "dry_kernels.hpp"

#include "alloc_size.hpp"

#include <atomic>
#include <cstring>

namespace mh::kernels {
namespace {

// Fake device addresses come from [2^62, 2^63): non-canonical on x86-64 and
// outside any user mapping elsewhere, so a stray dereference faults at once
// instead of reading something. One counter for the whole process keeps the
// addresses of different instances (ranks) distinct too.
constexpr uint64_t kFirstAddress = uint64_t{1} << 62;
constexpr uint64_t kEndAddress = uint64_t{1} << 63;
std::atomic<uint64_t> next_address{kFirstAddress};

MH_DType parse_dtype(const std::string& name) {
  if (name == "bf16") return MH_BF16;
  if (name == "f16") return MH_F16;
  return MH_F32;
}

}  // namespace

DryKernels::DryKernels(const CreateContext& ctx)
    : compute_(parse_dtype(ctx.options.get_string("dtype"))),
      peak_flops_(ctx.options.get_double("peak_gflops") * 1e9) {}

void DryKernels::device_info(MH_DeviceInfo& out) const {
  out.device_type = MH_DEVICE_CPU;
  out.threads = 1;
  out.name = "dry: allocates nothing, computes nothing";
  out.peak_flops = peak_flops_;
  out.memory_bytes = 0;
  out.compute_dtype = compute_;
  out.dry = 1;
}

void* DryKernels::alloc(uint64_t bytes) {
  const uint64_t size = alloc_size(bytes);
  const uint64_t address = size <= kEndAddress - kFirstAddress ? next_address.fetch_add(size) : kEndAddress;
  require(address >= kFirstAddress && address <= kEndAddress - size,
          "alloc: the dry run's fake address range is used up after " + std::to_string(address - kFirstAddress) +
              " bytes",
          MH_RESOURCE_EXHAUSTED);
  return reinterpret_cast<void*>(address);
}

// Reads from the device see zeros, so that a dry run's host-side logic (a
// loss, a norm) meets finite numbers.
void DryKernels::copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind) {
  check_copy(dst, src, bytes, kind);
  if (kind == MH_DEVICE_TO_HOST && bytes > 0) std::memset(dst, 0, bytes);
}

}  // namespace mh::kernels
