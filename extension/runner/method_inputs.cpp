#include "method_inputs.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../format/flatbuffer_view.h"
#include "program_fields.h"

namespace py = pybind11;

namespace et_tensorrt {

using namespace program_fields;

std::string method_input_spec(const uint8_t* data, size_t size, const std::string& method) {
  const Flatbuffer fb(data, size);
  const auto program = fb.root();
  const auto plans = program ? fb.deref_field(*program, kProgramExecutionPlan) : std::nullopt;
  const auto n = plans ? fb.length(*plans) : std::nullopt;
  for (uint32_t p = 0; n && p < *n; ++p) {
    const auto plan = fb.follow(*plans + 4 + 4 * static_cast<size_t>(p));
    const auto name = plan ? fb.deref_field(*plan, kPlanName) : std::nullopt;
    if (!name || fb.string(*name) != method) continue;
    const auto meta = fb.deref_field(*plan, kPlanContainerMeta);
    const auto spec = meta ? fb.deref_field(*meta, kContainerInputs) : std::nullopt;
    const auto text = spec ? fb.string(*spec) : std::nullopt;
    return text ? *text : "";
  }
  return "";
}

std::vector<std::string> method_input_names(const std::string& spec) {
  if (spec.empty() || !Py_IsInitialized()) return {};
  py::gil_scoped_acquire gil;
  try {
    return py::module_::import("et_tensorrt.runtime.input_names")
        .attr("input_names")(spec)
        .cast<std::vector<std::string>>();
  } catch (const py::error_already_set&) {
    return {};
  }
}

}  // namespace et_tensorrt
