#include "device_translation.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <string>

#include "errors.h"

namespace et_tensorrt {
namespace {

c10::DeviceIndex current_cuda_index() {
  if (c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index();
  }
  return 0;
}

}  // namespace

EtDevice torch_to_executorch_device(c10::Device device) {
  switch (device.type()) {
    case c10::DeviceType::CPU:
      return EtDevice(EtDeviceType::CPU, 0);
    case c10::DeviceType::CUDA:
      return EtDevice(EtDeviceType::CUDA, device.has_index() ? device.index() : current_cuda_index());
    default:
      throw UnsupportedDeviceError(
          "device " + device.str() +
          " is not modelled by the ExecuTorch runtime (only cpu and cuda); move the tensor with "
          ".to('cpu') or .to('cuda') first");
  }
}

c10::Device executorch_to_torch_device(EtDevice device) {
  switch (device.type()) {
    case EtDeviceType::CPU:
      return c10::Device(c10::DeviceType::CPU);
    case EtDeviceType::CUDA:
      return c10::Device(c10::DeviceType::CUDA, device.index());
  }
  throw UnsupportedDeviceError("ExecuTorch device type " + std::to_string(static_cast<int>(device.type())) +
                               " has no torch equivalent");
}

}  // namespace et_tensorrt
