#include "named_data.h"

#include <stdexcept>
#include <string>

#include <executorch/runtime/core/freeable_buffer.h>

namespace et_tensorrt {
namespace {

constexpr const char* kHint =
    "; the program keeps its delegate data outside the .pte: load its .ptd with it (Runner(pte, data_path=...), "
    "et-tensorrt run --data, TextLLMRunner(model, tokenizer, data_path), Runtime.load_program(pte, data_path=...))";

std::shared_ptr<const executorch::runtime::FreeableBuffer> read(const NamedDataEntry& e,
                                                                const executorch::runtime::NamedDataMap* map) {
  const std::string what = e.target == NamedTarget::Engine ? "engine" : "weight " + std::to_string(e.index);
  if (map == nullptr) {
    throw std::runtime_error("the delegate's " + what + " is ExecuTorch named data '" + e.key +
                             "', and the program was loaded without named data" + kHint);
  }
  auto data = map->get_data(e.key);
  if (!data.ok()) {
    throw std::runtime_error("the delegate's " + what + " is ExecuTorch named data '" + e.key +
                             "', which the program's data does not hold (error " +
                             std::to_string(static_cast<int>(data.error())) + ")" + kHint);
  }
  auto held = std::make_shared<executorch::runtime::FreeableBuffer>(std::move(*data));
  if (held->size() != e.nbytes) {
    throw std::runtime_error("named data '" + e.key + "' holds " + std::to_string(held->size()) +
                             " bytes; the delegate's " + what + " is " + std::to_string(e.nbytes) +
                             " (the .ptd is not the one this program was lowered with)");
  }
  return held;
}

}  // namespace

NamedData resolve_named_data(const DelegateBlob& blob, const executorch::runtime::NamedDataMap* map) {
  NamedData out;
  out.weights.assign(blob.weight_entries.size(), nullptr);
  out.owners.assign(blob.weight_entries.size(), nullptr);
  for (const NamedDataEntry& e : blob.named_entries) {
    auto held = read(e, map);
    const auto* bytes = static_cast<const uint8_t*>(held->data());
    if (e.target == NamedTarget::Engine) {
      out.engine = ByteSpan{bytes, static_cast<size_t>(held->size()), true};
      out.engine_owner = held;
    } else {
      out.weights[e.index] = bytes;
      out.owners[e.index] = held;
    }
  }
  return out;
}

}  // namespace et_tensorrt
