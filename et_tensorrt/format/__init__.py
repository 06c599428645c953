"""The format layer (docs/architecture.md, "Layers"): the delegate blob and its sections as plain data, with their
writers and Python's view of the C++ reader: ``blob`` (header, IO table, WEIGHTS, NAMED_DATA, DIGESTS),
``state_table`` (STATE), ``refit_map`` (REFIT_MAP), ``recipe`` (RECIPE), ``input_guards`` (INPUT_GUARDS) and ``dtypes``
(the ScalarType codes).

It imports nothing of the layers above it (build, backend, runtime, partition, cli) and nothing of TensorRT or
ONNX: what the blob holds can be changed here without touching the builder.
"""
