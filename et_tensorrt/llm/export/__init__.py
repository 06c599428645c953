"""The exporters: one per model family, each making the methods and constant methods ExecuTorch's runners read (as
ExecuTorch's extension/llm/export). They import the shared modules of ``et_tensorrt.llm`` (``constants``,
``sampling``, ``media``), never ``runner/``. The public names are ``et_tensorrt.llm``'s."""
