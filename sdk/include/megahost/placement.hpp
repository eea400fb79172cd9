// Where memory lives (MH_Tensor.device and device_id), for every side: the
// host and the plugins place the tensors they build with it, and a kernels
// or comm component refuses a tensor that is not on its device (abi.h,
// MH_Tensor) with the one check below, so they all word it alike.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>

#include <cstdint>
#include <string>

namespace mh {

struct Placement {
  int32_t device = MH_DEVICE_CPU;  // MH_DeviceType
  int32_t device_id = 0;           // the CUDA device's ordinal, 0 on the CPU

  bool operator==(const Placement&) const = default;
};

inline Placement placement_of(const MH_Tensor& t) { return {t.device, t.device_id}; }

// Stamps `where` on a tensor.
inline MH_Tensor placed(MH_Tensor t, Placement where) {
  t.device = where.device;
  t.device_id = where.device_id;
  return t;
}

// "cpu", "cuda:1"; "cpu:1" for an ordinal the CPU never has, "device type
// 7" for a value that is not an MH_DeviceType.
inline std::string placement_name(Placement p) {
  const std::string id = std::to_string(p.device_id);
  if (p.device == MH_DEVICE_CPU) return p.device_id == 0 ? "cpu" : "cpu:" + id;
  if (p.device == MH_DEVICE_CUDA) return "cuda:" + id;
  return "device type " + std::to_string(p.device) + ":" + id;
}

// Throws MH_INVALID_ARGUMENT unless tensor `t` (`what`: "gemm: a") lies on
// `own`, the device of the component `who` ("this kernels component"). A
// tensor without data (an optional one left out) is not checked: it holds
// nothing to read.
inline void require_on_device(const std::string& what, const MH_Tensor& t, Placement own, const char* who) {
  if (t.data == nullptr || placement_of(t) == own) return;
  throw Error(MH_INVALID_ARGUMENT, what + " is on " + placement_name(placement_of(t)) + ", but " + who +
                                       " works on " + placement_name(own) +
                                       " (MH_Tensor.device, device_id): copy it there first");
}

// The same for argument `name` of op `op`, building the message only for a
// refusal: this runs for every tensor of every op.
inline void require_on_device(const char* op, const char* name, const MH_Tensor& t, Placement own, const char* who) {
  if (t.data == nullptr || placement_of(t) == own) return;
  require_on_device(std::string(op) + ": " + name, t, own, who);
}

}  // namespace mh
