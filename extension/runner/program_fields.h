// Field indices in ExecuTorch's schema/program.fbs (declaration order; the schema gives no explicit ids), for the
// runner's bounds-checked reads of a program's flatbuffer (format/flatbuffer_view.h).
#pragma once

namespace et_tensorrt::program_fields {

constexpr int kProgramExecutionPlan = 1;
constexpr int kPlanName = 0;
constexpr int kPlanContainerMeta = 1;
constexpr int kPlanDelegates = 7;
constexpr int kContainerInputs = 0;  // ContainerMetadata.encoded_inp_str
constexpr int kDelegateId = 0;
constexpr int kDelegateProcessed = 1;
constexpr int kDelegateCompileSpecs = 2;
constexpr int kCompileSpecKey = 0;
constexpr int kCompileSpecValue = 1;

}  // namespace et_tensorrt::program_fields
