"""Bundled examples (shipped in the package, nothing to download). ``python -m et_tensorrt demo`` runs
:mod:`et_tensorrt.examples.host_branch`."""
