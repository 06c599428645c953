"""Third-party noise that et_tensorrt's own imports and calls trigger, held back only while they run.

- Importing ExecuTorch's ``exir`` (``lower``, ``explain``, ``BuildOptions`` and the partitioner need it) imports
  torchao, which logs "Failed to load ....so" for each CUDA extension it cannot load and has torch's pytree log
  that registering an Enum is deprecated.
- Lowering has torch's pytree warn that ``isinstance(treespec, LeafSpec)`` is deprecated (a FutureWarning, as
  ExecuTorch copies programs), and torch's ONNX exporter log "torchvision is not installed" per torchvision op.
- Exporting a model (``et_tensorrt.llm``'s and ``seq2seq``'s exporters) has torch's dynamo warn about side effects
  HF transformers' forward has (output capturing, hub kernels), and ExecuTorch's llama warn that
  ``torch._check_is_size`` is deprecated.
- ExecuTorch's partitioner logs on the root logger (``logging.debug``), which configures logging for the whole
  process (``logging.basicConfig``) when the caller has not.

Each is named here by its logger or its message and category, and held back only while an et_tensorrt import
or call runs (``quiet_dependencies``): the caller's own warnings and log records, and these libraries' records
outside our calls, still show. (The command line quiets more: it owns the terminal, see ``cli/common.py``.)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import warnings

NOISY_LOGGERS = ("torchao", "torch.utils._pytree", "torch.onnx._internal.exporter._registration")
NOISY_WARNINGS = (
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
    (UserWarning, r"While compiling, we found certain side effects happened"),
    (FutureWarning, r"_check_is_size will be removed"),
)

_lock = threading.Lock()
_depth = 0  # calls of ours running, on any thread: the filters go in at the first and out after the last
_saved_levels: dict[str, int] = {}
_filters: list = []


class _AsIfUnconfigured(logging.Handler):
    """On the root logger while we run, when the caller configured no handler there: a record reaching it is
    handled as logging does without any handler (``logging.lastResort``), and no root-level call configures
    logging behind the caller's back."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = logging.getLogger(record.name)
        while logger is not logging.root:
            if logger.handlers or not logger.propagate:
                return  # a handler of the caller's took it
            logger = logger.parent
        if logging.lastResort is not None and record.levelno >= logging.lastResort.level:
            logging.lastResort.handle(record)


_root_stand_in = _AsIfUnconfigured()


def _filters_mutated() -> None:
    mutated = getattr(warnings, "_filters_mutated", None)  # drops the per-module "already warned" caches
    if mutated is not None:
        mutated()


def _enter() -> None:
    global _depth
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        for name in NOISY_LOGGERS:
            logger = logging.getLogger(name)
            _saved_levels[name] = logger.level
            logger.setLevel(logging.ERROR)
        for category, message in NOISY_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
            _filters.append(warnings.filters[0])
        if not logging.root.handlers:
            logging.root.addHandler(_root_stand_in)


def _exit() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth:
            return
        for name, level in _saved_levels.items():
            logger = logging.getLogger(name)
            if logger.level == logging.ERROR:  # unless the caller set a level meanwhile
                logger.setLevel(level)
        _saved_levels.clear()
        warnings.filters[:] = [f for f in warnings.filters if not any(f is ours for ours in _filters)]
        _filters.clear()
        _filters_mutated()
        logging.root.removeHandler(_root_stand_in)


@contextlib.contextmanager
def quiet_dependencies():
    """Holds back the noise above while the block runs (re-entrant; the outermost block on any thread ends it)."""
    _enter()
    try:
        yield
    finally:
        _exit()


def quiet(function):
    """A public function of ours (an exporter) whose calls run inside ``quiet_dependencies``."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        with quiet_dependencies():
            return function(*args, **kwargs)

    return call


class QuietCall:
    """``function`` called inside ``quiet_dependencies``; its attributes (``lower.last_report``) stay its own."""

    def __init__(self, function):
        object.__setattr__(self, "_function", function)
        for name in functools.WRAPPER_ASSIGNMENTS:  # help(), inspect.signature() see the function
            with contextlib.suppress(AttributeError):
                object.__setattr__(self, name, getattr(function, name))
        object.__setattr__(self, "__wrapped__", function)

    def __call__(self, *args, **kwargs):
        with quiet_dependencies():
            return self._function(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._function, name)

    def __setattr__(self, name, value):
        setattr(self._function, name, value)

    def __repr__(self) -> str:
        return repr(self._function)
