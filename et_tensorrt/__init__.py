"""et_tensorrt: an ExecuTorch delegate for TensorRT that is honest about where every tensor lives."""
