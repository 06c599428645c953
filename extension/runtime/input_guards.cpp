#include "input_guards.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "../aten_util/torch_view.h"
#include "argument_names.h"
#include "delegate_handle.h"

namespace et_tensorrt {
namespace {

using executorch::runtime::EValue;
using executorch::runtime::Span;

int64_t size_of(const DimGuard& g, Span<EValue*> args) {
  const EValue& v = *args[g.argument];
  return g.dim < 0 ? v.toInt() : v.toTensor().size(g.dim);
}

// "dim 1 of input 0 ('input_ids')", "input 2 (a size)"
std::string where(const DimGuard& g, Span<EValue*> args) {
  const std::string who = argument_label(args[g.argument], g.argument);
  return g.dim < 0 ? who + " (a size)" : "dim " + std::to_string(g.dim) + " of " + who;
}

std::string affine(const DimGuard& g, const std::string& of) {
  std::string s = g.scale == 1 ? of : std::to_string(g.scale) + " x " + of;
  if (g.offset != 0) s += (g.offset > 0 ? " + " : " - ") + std::to_string(g.offset < 0 ? -g.offset : g.offset);
  return s;
}

void check_dims(const DelegateBlob& blob, Span<EValue*> args) {
  const DimGuard* first = nullptr;  // the entry that fixes the current symbol
  int64_t symbol = 0;
  for (const DimGuard& g : blob.dim_guards) {
    const int64_t size = size_of(g, args);
    if (first == nullptr || first->symbol != g.symbol) {
      first = &g;
      if ((size - g.offset) % g.scale != 0) {
        throw PlacementRejected(where(g, args) + " is " + std::to_string(size) +
                                ", which the exported program takes as " + affine(g, "an integer") +
                                " (torch.export's guard on it)");
      }
      symbol = (size - g.offset) / g.scale;
      continue;
    }
    const int64_t expected = g.scale * symbol + g.offset;
    if (size == expected) continue;
    const std::string given = where(*first, args) + " is " + std::to_string(size_of(*first, args));
    const bool plain = g.scale == first->scale && g.offset == first->offset;
    throw PlacementRejected(
        where(g, args) + " is " + std::to_string(size) +
        (plain ? " but " + given + ": the exported program takes them equal"
               : " but the exported program takes it to be " + std::to_string(expected) + " where " + given) +
        " (torch.export recorded both as one dim); pass inputs whose sizes agree");
  }
}

void check_indices(const DelegateBlob& blob, Span<EValue*> args) {
  for (const IndexGuard& g : blob.index_guards) {
    const at::Tensor values = torch_view(args[g.argument]->toTensor());
    if (values.numel() == 0) continue;
    // two numbers per call (from the device when the values are there)
    const at::Tensor flat = values.reshape(-1);
    const auto [low, high] = at::aminmax(flat);
    const int64_t lo = low.item<int64_t>(), hi = high.item<int64_t>();
    if (lo >= 0 && hi < g.bound) continue;
    const int64_t bad = lo < 0 ? lo : hi;
    const int64_t at = (flat == bad).nonzero().view(-1)[0].item<int64_t>();
    throw PlacementRejected(argument_label(args[g.argument], g.argument) + " holds " + std::to_string(bad) +
                            " (element " + std::to_string(at) + "), outside 0.." + std::to_string(g.bound - 1) +
                            ": the program looks its values up in a table of " + std::to_string(g.bound) +
                            " rows (a token id past the vocabulary?)");
  }
}

}  // namespace

void check_input_guards(const DelegateBlob& blob, Span<EValue*> args) {
  if (!blob.dim_guards.empty()) check_dims(blob, args);
  if (!blob.index_guards.empty()) check_indices(blob, args);
}

}  // namespace et_tensorrt
