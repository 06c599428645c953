"""The engine-building layer (docs/architecture.md, "Layers"): from a partition's aten program to a TensorRT engine,
used by both the ahead-of-time backend (``et_tensorrt.backend``) and the build on the device
(``et_tensorrt.runtime.device_build``).

The aten program (``edge_to_aten``, ``op_rewrites``, ``quant_legalization`` with ``quant_ops``, ``kv_cache_op``,
``size_inputs``), its ONNX export (``onnx_export``, ``profiles``) with the weights outside the protobuf
(``onnx_weights``), the one TensorRT builder (``engine_builder``), the engine from a blob's RECIPE
(``recipe_build``), the build and engine cache (``build_cache``) and the data held as file regions or named data
(``held_data``, ``named_data``). It imports the format layer and the op tables below it, never ``backend``,
``runtime``, ``partition`` (but for its op tables) or ``cli``.
"""
