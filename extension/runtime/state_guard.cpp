#include "state_guard.h"

#include <set>
#include <string>
#include <tuple>

#include "../aten_util/torch_view.h"
#include "argument_names.h"
#include "delegate_handle.h"

namespace et_tensorrt {

void check_write_positions(const DelegateBlob& blob, executorch::runtime::Span<executorch::runtime::EValue*> args) {
  std::set<std::tuple<int32_t, int, int64_t>> checked;  // K and V of a layer share their positions
  for (const StateEntry& state : blob.states) {
    if (state.position_input < 0 || state.sizes.size() < 2) continue;
    const int64_t capacity = state.sizes[state.sizes.size() - 2];  // the sequence axis (-2)
    const executorch::aten::Tensor& held = args[state.position_input]->toTensor();
    int64_t length = state.length_value;
    if (state.position_kind == PositionKind::Start && state.length_input >= 0) {
      length = args[state.length_input]->toTensor().size(state.length_dim);
    }
    if (!checked.emplace(state.position_input, static_cast<int>(state.position_kind), length).second) continue;
    const at::Tensor positions = torch_view(held).to(at::kCPU, at::kLong).contiguous().view({-1});
    const std::string what = argument_label(args[state.position_input], state.position_input);
    if (positions.numel() == 0)
      throw PlacementRejected(what + ": no write position for the state '" + state.name + "'");
    const int64_t* p = positions.data_ptr<int64_t>();
    const int64_t first = p[0];
    if (state.position_kind == PositionKind::Positions) {
      length = positions.numel();
      for (int64_t i = 1; i < length; ++i) {
        if (p[i] != first + i) {
          throw PlacementRejected(what + ": write positions must be consecutive (" + std::to_string(p[i - 1]) +
                                  " is followed by " + std::to_string(p[i]) + ") for the state '" + state.name + "'");
        }
      }
    }
    if (first < 0 || length < 0 || first > capacity - length) {
      throw PlacementRejected(what + ": writing " + std::to_string(length) + " position(s) from " +
                              std::to_string(first) + " leaves the state '" + state.name + "', which holds " +
                              std::to_string(capacity) + " (0.." + std::to_string(capacity - 1) +
                              "); start a new sequence at position 0, or lower with a longer cache");
    }
  }
}

}  // namespace et_tensorrt
