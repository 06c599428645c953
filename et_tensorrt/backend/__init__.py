"""The AOT side of the delegate: ``EtTensorRTBackend.preprocess`` and the blob format."""

from et_tensorrt.backend.preprocess import EtTensorRTBackend

__all__ = ["EtTensorRTBackend"]
