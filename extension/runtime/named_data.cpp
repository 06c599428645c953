#include "named_data.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <executorch/runtime/core/freeable_buffer.h>

#include "../format/checksum.h"

namespace et_tensorrt {
namespace {

struct Site {
  std::string method;
  int partition = 0, partitions = 0;
};

thread_local const Site* t_site = nullptr;
thread_local DataFiles* t_files = nullptr;

constexpr const char* kHint =
    "; the program keeps its delegate data outside the .pte: load its .ptd with it (Runner(pte, data_path=...), "
    "et-tensorrt run --data, TextLLMRunner(model, tokenizer, data_path), Runtime.load_program(pte, data_path=...))";

bool trusted() {
  const char* value = std::getenv(kTrustNamedDataEnv);
  return value != nullptr && std::string(value) == "1";
}

// "the engine of partition 1/2 of method 'forward'", "weight 'fc1.weight' of ...".
std::string what(const NamedDataEntry& e, const DelegateBlob& blob) {
  std::string out = e.target == NamedTarget::Engine ? "the engine" : "weight " + std::to_string(e.index);
  if (e.target == NamedTarget::Weight && e.index < blob.weight_entries.size()) {
    out = "weight '" + blob.weight_entries[e.index].name + "'";
  }
  if (t_site != nullptr && t_site->partition > 0) {
    out += " of partition " + std::to_string(t_site->partition);
    if (t_site->partitions > 0) out += "/" + std::to_string(t_site->partitions);
  }
  if (t_site != nullptr && !t_site->method.empty()) out += " of method '" + t_site->method + "'";
  return out;
}

// The .pte a Runner loads, its .ptd as et_tensorrt.save names it: "model.pte" -> "model.ptd".
std::string sibling_ptd(const std::string& program) {
  const size_t slash = program.find_last_of('/');
  const size_t dot = program.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_ext ? program.substr(0, dot) : program) + ".ptd";
}

// The file holding `key` and how to put it right, as "<file> is corrupt; copy the .ptd again or save the model
// again".
std::string corrupt(const std::string& key) {
  if (t_files != nullptr && !t_files->data.empty() && t_files->data_keys.count(key)) {
    return t_files->data + " is corrupt; copy the .ptd again or save the model again";
  }
  if (t_files != nullptr && !t_files->program.empty()) {
    return t_files->program + " is corrupt (its named data); copy the .pte again or save the model again";
  }
  return "the .ptd (or the .pte) holding it is corrupt; copy it again or save the model again";
}

[[noreturn]] void missing(const NamedDataEntry& e, const DelegateBlob& blob, bool has_map, int error) {
  const std::string head = what(e, blob) + " is ExecuTorch named data '" + e.key + "'";
  if (t_files != nullptr && !t_files->data.empty()) {
    throw std::runtime_error(head + ", which " + t_files->data +
                             " does not hold: that .ptd is not this program's "
                             "(another program's, or from another save of it); load the .ptd saved with " +
                             (t_files->program.empty() ? std::string("the program") : t_files->program));
  }
  if (t_files != nullptr && !t_files->program.empty()) {
    const std::string ptd = sibling_ptd(t_files->program);
    throw std::runtime_error(head + " kept outside " + t_files->program +
                             ", and no .ptd was given: load the program with its .ptd (et_tensorrt.save writes it "
                             "beside the .pte): Runner('" +
                             t_files->program + "', data_path='" + ptd + "'), et-tensorrt run " + t_files->program +
                             " --data " + ptd);
  }
  if (!has_map) throw std::runtime_error(head + ", and the program was loaded without named data" + kHint);
  throw std::runtime_error(head + ", which the program's data does not hold (error " + std::to_string(error) + ")" +
                           kHint);
}

std::shared_ptr<const executorch::runtime::FreeableBuffer> read(const NamedDataEntry& e, const DelegateBlob& blob,
                                                                const executorch::runtime::NamedDataMap* map) {
  if (map == nullptr) missing(e, blob, false, 0);
  auto data = map->get_data(e.key);
  if (!data.ok()) missing(e, blob, true, static_cast<int>(data.error()));
  auto held = std::make_shared<executorch::runtime::FreeableBuffer>(std::move(*data));
  if (held->size() != e.nbytes) {
    throw std::runtime_error("named data '" + e.key + "' (" + what(e, blob) + ") holds " +
                             std::to_string(held->size()) + " bytes, the blob records " + std::to_string(e.nbytes) +
                             ": " + corrupt(e.key));
  }
  return held;
}

// Before anything reads the bytes: a flipped bit in the .ptd is this error, not a changed output or a corrupt
// engine handed to TensorRT.
void check(const NamedDataEntry& e, const DelegateBlob& blob, const executorch::runtime::FreeableBuffer& held) {
  if (!e.has_crc32) return;  // NAMED_DATA layout 0: written before the CRC-32s were recorded
  const uint32_t actual = crc32_of(static_cast<const uint8_t*>(held.data()), held.size());
  if (actual != e.crc32) {
    throw std::runtime_error("named data '" + e.key + "' (" + what(e, blob) + ") fails its digest (crc32 " +
                             hex32(actual) + ", recorded " + hex32(e.crc32) + "): " + corrupt(e.key));
  }
}

}  // namespace

NamedData resolve_named_data(const DelegateBlob& blob, const executorch::runtime::NamedDataMap* map) {
  if (t_files != nullptr) {
    ++t_files->delegates;
    if (!blob.named_entries.empty()) ++t_files->named_delegates;
  }
  NamedData out;
  out.weights.assign(blob.weight_entries.size(), nullptr);
  out.owners.assign(blob.weight_entries.size(), nullptr);
  const bool checked = !trusted();
  for (const NamedDataEntry& e : blob.named_entries) {
    auto held = read(e, blob, map);
    if (checked) check(e, blob, *held);
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

int compile_spec_int(executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> specs, const char* key) {
  for (const auto& spec : specs) {
    if (spec.key == nullptr || std::strcmp(spec.key, key) != 0 || spec.value.buffer == nullptr) continue;
    const std::string text(static_cast<const char*>(spec.value.buffer), spec.value.nbytes);
    const bool number = !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
    return number ? std::stoi(text) : 0;
  }
  return 0;
}

InitSite::InitSite(const char* method, executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> specs) {
  static thread_local Site site;
  site = Site{method != nullptr ? method : "", compile_spec_int(specs, "et_tensorrt.partition_index"),
              compile_spec_int(specs, "et_tensorrt.partition_count")};
  t_site = &site;
}

InitSite::~InitSite() { t_site = nullptr; }

DataFilesScope::DataFilesScope(DataFiles& files) { t_files = &files; }

DataFilesScope::~DataFilesScope() { t_files = nullptr; }

}  // namespace et_tensorrt
