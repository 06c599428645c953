"""pytest plugin: let torchvision's pure-Python models import when its C++ ops cannot load.

Why: the only torchvision wheel matching torch 2.13.0 here (0.28.0) is a CUDA build; its `_C.so`
needs libtorch_cuda and does not load beside torch 2.13.0+cpu. torchvision then still imports
`_meta_registrations`, which registers fake kernels for `torchvision::nms`, `roi_align`, ... and
fails with "operator torchvision::nms does not exist". The model suite's classification models
never call those ops, so declaring their schemas (no kernels) is enough for `import torchvision`.
A call to one of them fails loudly ("no kernel"), it never returns a wrong value.

Load it before the suite's test modules are collected:
    PYTHONPATH=scripts/suite_plugins python -m pytest ... -p torchvision_op_schemas
(`scripts/backend_suite.sh models` does this when torchvision's own ops do not load.)
"""

import torch

# Schemas as torchvision 0.28 declares them (torchvision/csrc/ops/*.cpp).
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width,"
    " int sampling_ratio, bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size,"
    " SymInt channels, SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels,"
    " SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels,"
    " SymInt height, SymInt width) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point,"
    " float rois_scale, int rois_zero_point, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias,"
    " SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h,"
    " SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask,"
    " Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w,"
    " SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask)"
    " -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
)

_library = None  # kept alive: dropping a Library removes its definitions


def _torchvision_ops_load() -> bool:
    import importlib.util
    import os

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return True  # nothing to patch; the suite reports the missing module itself
    lib = os.path.join(list(spec.submodule_search_locations)[0], "_C.so")
    try:
        torch.ops.load_library(lib)
    except (OSError, RuntimeError):
        return False
    try:  # a library that loads without registering its ops (a stub, another build) counts as not loading
        torch.ops.torchvision.nms.default  # noqa: B018 - the lookup raises when the op is not registered
        return True
    except (AttributeError, RuntimeError):
        return False


def _declare_schemas() -> None:
    global _library
    if _library is not None or _torchvision_ops_load():
        return
    _library = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        _library.define(schema)


_declare_schemas()
