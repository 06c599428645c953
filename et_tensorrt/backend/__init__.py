"""The AOT side of the delegate: ``EtTensorRTBackend.preprocess`` and the blob format.

``EtTensorRTBackend`` is imported on first use: the runtime reads helpers of this package (the safe loader's
op list, edge_to_aten's view forms) and must not pull in ``executorch.exir`` with them.
"""

__all__ = ["EtTensorRTBackend"]


def __getattr__(name: str):
    if name == "EtTensorRTBackend":
        from et_tensorrt.backend.preprocess import EtTensorRTBackend

        return EtTensorRTBackend
    raise AttributeError(f"module 'et_tensorrt.backend' has no attribute {name!r}")
