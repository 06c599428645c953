"""The drivers: what generates with a program the exporters made (as ExecuTorch's extension/llm/runner). They import
the shared modules of ``et_tensorrt.llm`` (``constants``, ``sampling``, ``media``), never ``export/``. The public names
are ``et_tensorrt.llm``'s."""
