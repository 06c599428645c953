#include "argument_names.h"

namespace et_tensorrt {
namespace {
thread_local const ArgumentNames* t_names = nullptr;
}  // namespace

ArgumentNames::ArgumentNames(const ArgumentNamer& namer) : namer_(namer), previous_(t_names) { t_names = this; }

ArgumentNames::~ArgumentNames() { t_names = previous_; }

std::string argument_label(const executorch::runtime::EValue* value, size_t index, bool output) {
  const std::string own = std::string(output ? "output " : "input ") + std::to_string(index);
  if (t_names == nullptr || value == nullptr) return own;
  const std::string known = output ? "" : t_names->namer_.name(value);
  if (!known.empty() || output) return known.empty() ? own : known;
  return "the delegate's " + own + " (a value computed inside the method)";
}

}  // namespace et_tensorrt
