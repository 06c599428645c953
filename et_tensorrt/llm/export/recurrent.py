"""Causal LMs whose state is not (only) a KV cache: HF transformers' Mamba and Mamba2 (conv and SSM states), the
hybrids of attention and SSM layers (Bamba, FalconH1, Jamba, NemotronH, GraniteMoeHybrid, Zamba2), of attention
and short convolutions (LFM2) and of attention and gated delta nets (Qwen3-Next, Qwen3.5, Qwen3.5-MoE), exported
with every state a buffer the delegate owns, as a KV cache is.

transformers keeps these states in its cache's linear-attention layers (``LinearAttentionLayer``: a conv state and a
recurrent state per layer) and an attention layer's keys and values in a ``StaticLayer``. :class:`RecurrentModule`
holds one such ``StaticCache``, its tensors made once (a forward of two tokens, then zeroed) and registered as
buffers, so ``torch.export`` lifts them and ExecuTorch hands each to the delegate (``tag_mutated_buffer``); the model
updates them in place:

* a conv state keeps the last ``kernel`` inputs of its causal convolution (``causal_conv1d_forward``);
* a recurrent state is the SSM's (``mamba_scan_forward``: Mamba's per channel and state; ``mamba2_scan_forward``:
  Mamba2's per head), computed for any number of tokens from the state the previous call left (state_scans.py):
  transformers' own torch paths choose in Python between one token and several (and Mamba's several-token scan
  starts from zeros), which one export of a dynamic length cannot follow;
* a gated delta net's recurrent state (``torch_chunk_gated_delta_rule`` and ``torch_recurrent_gated_delta_rule``:
  partition/delta_rule.py's chunked rule for both). The layer's own forward chooses between them in Python
  (one token and a state: the recurrent one); the cache reports no state to it, so it always calls the chunked
  one, which reads the state of the layer that asked (``get_recurrent_state``) from the cache itself, and the
  layer's ``update_recurrent_state`` writes it back in place. While the module runs, these functions of
  the model's own modeling file are replaced by ones that read and write the cache's buffers (the hook transformers
  leaves for them: they are the functions its ``kernelize`` replaces);
* keys and values are written at the call's positions (``cache_position``), as in
  ``TorchExportableModuleWithStaticCache``, but without its per-layer ``cumulative_length`` counters: the positions
  are the input, so the KV writes are the delegate's checked in-place cache updates and no counter is copied back.

``forward(input_ids, cache_position)`` is ExecuTorch's LLM signature (TextLLMRunner passes the start position; a
method of several tokens their positions). A call at position 0 starts a new sequence: the conv and SSM states read
as zeros, as the attention mask hides the KV rows a previous sequence left, so ``TextLLMRunner.reset()`` (which only
sets its position back to 0) and ``Runner.reset()`` (which reloads the states) both start over.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading

import torch
import torch.nn.functional as F

from ...partition import delta_rule
from . import state_scans

# max_seq_len of a model without max_position_embeddings (pure Mamba): the longest sequence TextLLMRunner runs
DEFAULT_LENGTH = 2048
# transformers' cache layer types (cache_utils.get_layer_types_and_kwargs) that hold a conv or recurrent state
RECURRENT_LAYER_TYPES = ("linear_attention", "conv", "hybrid", "hybrid_sliding")


def recurrent_layer_types(model) -> list[str]:
    """The recurrent cache layer types of a HF causal LM's layers (empty for a KV-cache-only model)."""
    config = getattr(model, "config", None)
    if config is None:
        return []
    from transformers.cache_utils import get_layer_types_and_kwargs

    try:
        types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    except (AttributeError, TypeError, ValueError):
        return []
    return [t for t in types if t in RECURRENT_LAYER_TYPES]


def _functions(model) -> dict[str, dict]:
    """The modeling modules of ``model`` (their globals) that define a function replaced here, by function name."""
    found: dict[str, dict] = {}
    for module in model.modules():
        namespace = vars(sys.modules[type(module).__module__])
        for name in _REPLACEMENTS:
            if callable(namespace.get(name)):
                found.setdefault(name, {})[id(namespace)] = namespace
    return found


def unsupported_reason(model) -> str:
    """Why :class:`RecurrentModule` cannot export ``model`` ("" when it can): a recurrent layer whose state is kept
    by other functions than the ones replaced here (a gated delta rule, an xLSTM cell, ...)."""
    types = sorted(set(recurrent_layer_types(model)))
    found = _functions(model)
    scans = {"mamba_scan_forward", "mamba2_scan_forward", *_DELTA_RULES} & set(found)
    others = _other_recurrences(model)
    if "causal_conv1d_forward" in found and (scans or set(types) <= {"conv"}) and not others:
        return ""
    return (
        f"its recurrent layers ({', '.join(types)}{': ' + ', '.join(others) if others else ''}) keep their state with "
        "other functions than transformers' causal_conv1d_forward, mamba_scan_forward, mamba2_scan_forward and "
        "torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule (Mamba, Mamba2, their attention hybrids, "
        "LFM2's short convolutions and the gated delta nets of Qwen3-Next and Qwen3.5 are taken)"
    )


_STATE_ACCESS = {"get_conv_state", "update_conv_state", "get_recurrent_state", "update_recurrent_state"}
# what a layer computing its recurrence with a delta rule replaced here may do with the cache itself
_DELTA_RULE_ACCESS = {"get_recurrent_state", "update_recurrent_state"}


def _other_recurrences(model) -> list[str]:
    """The model's layers that read or write a cache's conv or recurrent state in their own ``forward``, other
    than through the functions replaced here (a delta rule's layer reading and writing its recurrent state around
    one is taken: see :meth:`_ExportCache.get_recurrent_state`), so an export would keep their own state code."""
    found = set()
    for module in model.modules():
        code = getattr(inspect.unwrap(type(module).forward), "__code__", None)
        if code is None:
            continue
        names = set(code.co_names)
        if _STATE_ACCESS & names and not (_DELTA_RULES & names and _STATE_ACCESS & names <= _DELTA_RULE_ACCESS):
            found.add(type(module).__name__)
    return sorted(found)


class _ExportCache:
    """Mixed into transformers' ``StaticCache``: keys and values written at the call's positions (the input), its
    length the call's start, and the call's start for the conv and SSM states (zeros at position 0).

    Once :class:`RecurrentModule` registered the layers' tensors, :meth:`state` reads them as its buffers: a
    non-strict export substitutes a module's buffers on the module, so a state reached through the cache's own
    references would be traced as a constant and its update lost."""

    positions: torch.Tensor | None = None
    owner: torch.nn.Module | None = None

    def state(self, kind: str, layer_idx: int, index: int = 0) -> torch.Tensor:
        return getattr(self.owner, _buffer_name(kind, layer_idx, index))

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        layer = self.layers[layer_idx]
        if self.owner is None:
            if not layer.is_initialized:
                layer.lazy_initialization(key_states, value_states)
            keys, values = layer.keys, layer.values
        else:
            keys, values = self.state("key", layer_idx), self.state("value", layer_idx)
        keys.index_copy_(2, self.positions, key_states)
        values.index_copy_(2, self.positions, value_states)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0):
        return self.positions[0]

    recurrent_layer: int | None = None  # the layer that last asked for its recurrent state

    def get_recurrent_state(self, layer_idx: int, state_idx: int = 0):
        """None once the states are buffers: a gated delta net's forward then calls its chunked rule (the one
        replaced here, for any number of tokens) rather than branch on one token, and that rule reads this
        layer's state itself."""
        if self.owner is None:
            return super().get_recurrent_state(layer_idx, state_idx)
        self.recurrent_layer = layer_idx
        return None

    def update_recurrent_state(self, recurrent_states, layer_idx: int, state_idx: int = 0, **kwargs):
        if self.owner is None:
            return super().update_recurrent_state(recurrent_states, layer_idx, state_idx, **kwargs)
        state = self.state("recurrent", layer_idx, state_idx)
        state.copy_(recurrent_states.to(state.dtype))
        return state

    def fresh(self, state: torch.Tensor) -> torch.Tensor:
        """``state`` as this call reads it: zeros when the call starts a sequence (position 0)."""
        return torch.where(self.positions[0] > 0, state, state.new_zeros(()))


def _buffer_name(kind: str, layer_idx: int, index: int = 0) -> str:
    return f"{kind}_cache_{layer_idx}" if kind in ("key", "value") else f"{kind}_state_{layer_idx}_{index}"


def _cache(config, length: int):
    from transformers import StaticCache
    from transformers.cache_utils import DummyLayer, StaticLayer, StaticSlidingWindowLayer

    cache = type("RecurrentExportCache", (_ExportCache, StaticCache), {})(config=config, max_cache_len=length)
    for i, layer in enumerate(cache.layers):
        # as TorchExportableModuleWithStaticCache: a window's rolling writes are control flow an export cannot hold
        if type(layer) is StaticSlidingWindowLayer:
            cache.layers[i] = StaticLayer(length)
        elif isinstance(layer, DummyLayer):
            cache.layers[i] = StaticLayer(0)
    return cache


class RecurrentModule(torch.nn.Module):
    """A HF causal LM with conv / SSM states (and attention KV caches of ``length`` positions), its states buffers
    updated in place: ``forward(input_ids [1, S], cache_position [S]) -> logits [1, S, vocab]``."""

    def __init__(self, model, length: int):
        super().__init__()
        self.model = model.eval()
        config = model.config.get_text_config(decoder=True)
        self.cache = _cache(config, length)
        self._takes_positions = "position_ids" in inspect.signature(model.forward).parameters
        with torch.no_grad():  # transformers makes each layer's tensors at its first update: make them now
            self._run(torch.zeros((1, 2), dtype=torch.long), torch.arange(2), replaced=False)
        self.states = {}
        for i, layer in enumerate(self.cache.layers):
            for j, conv in getattr(layer, "conv_states", {}).items():
                self._register(_buffer_name("conv", i, j), conv)
            for j, recurrent in getattr(layer, "recurrent_states", {}).items():
                self._register(_buffer_name("recurrent", i, j), recurrent)
            if getattr(layer, "keys", None) is not None and layer.keys.numel():  # not a KV-sharing consumer
                self._register(_buffer_name("key", i), layer.keys)
                self._register(_buffer_name("value", i), layer.values)
        self.cache.owner = self

    def _register(self, name: str, tensor) -> None:
        if tensor is None:
            return
        tensor.zero_()
        self.register_buffer(name, tensor, persistent=False)
        self.states[name] = tensor

    def _run(self, input_ids, cache_position, replaced: bool = True):
        self.cache.positions = cache_position
        extra = {"position_ids": cache_position.unsqueeze(0)} if self._takes_positions else {}
        with _replaced(self.model, self.cache) if replaced else contextlib.nullcontext():
            out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, **extra)
        return out.logits

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        return self._run(input_ids, cache_position)

    def state_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.states.values())


class RecurrentStateExport:
    """``self(n, dynamic)``: :class:`RecurrentModule` of ``model`` (``self.module``) exported from ``n`` example
    tokens at position 0, their number dynamic (1 .. length - 1) or not; ``HFStaticCacheExport``'s counterpart."""

    def __init__(self, model, length: int):
        self.module = RecurrentModule(model, length)
        self._seq = torch.export.Dim("seq", min=1, max=length - 1)

    def __call__(self, n: int, dynamic: bool):
        ids, positions = torch.ones((1, n), dtype=torch.long), torch.arange(n)
        shapes = {"input_ids": {1: self._seq}, "cache_position": {0: self._seq}} if dynamic else None
        with torch.no_grad():
            return torch.export.export(
                self.module, (), {"input_ids": ids, "cache_position": positions}, dynamic_shapes=shapes, strict=False
            )


# ------------------------------------------------------------------ the state functions, for any number of tokens


def _conv_forward(conv1d, hidden_states, cache, layer_idx, activation=None, state_idx=0, **kwargs):
    """transformers' ``causal_conv1d_forward`` (``hidden_states [B, C, S]``), from the state the last call left: the
    state's last ``kernel`` inputs, then these ``S``; the state keeps the last ``kernel`` of them."""
    from transformers.activations import ACT2FN

    state = cache.state("conv", layer_idx, state_idx)
    tokens = hidden_states.shape[-1]
    full = torch.cat([cache.fresh(state), hidden_states.to(state.dtype)], dim=-1)
    kept = torch.arange(state.shape[-1], device=full.device) + (full.shape[-1] - state.shape[-1])
    state.copy_(full.index_select(-1, kept))  # a gather in the state's shape: written in place (runtime/state.py)
    out = F.conv1d(full.to(conv1d.weight.dtype), conv1d.weight, conv1d.bias, groups=hidden_states.shape[1])
    out = out[..., out.shape[-1] - tokens :]
    if activation is not None:
        out = ACT2FN[activation](out)
    return out.to(hidden_states.dtype)


def _mamba_scan(module, hidden_states, time_step, B, C, gate, cache, **kwargs):
    """transformers' ``mamba_scan_forward`` (Mamba, FalconMamba, Jamba): ``hidden_states``, ``time_step``, ``gate``
    ``[B, D, S]``, ``B``, ``C`` ``[B, S, N]``; the state ``[B, D, N]`` (per channel and state: ``exp(dt A)``)."""
    state = cache.state("recurrent", module.layer_idx)
    A = -torch.exp(module.A_log.float())  # [D, N]
    dt = time_step.float()
    if module.dt_proj.bias is not None:
        dt = dt + module.dt_proj.bias.float()[:, None]
    dt = F.softplus(dt).transpose(1, 2)  # [B, S, D]
    x = hidden_states.float().transpose(1, 2)  # [B, S, D]
    log_decay = dt[..., None] * A  # [B, S, D, N]
    inputs = (dt * x)[..., None] * B.float()[:, :, None, :]
    h, last = state_scans.diagonal_scan(log_decay, inputs, cache.fresh(state).float())
    state.copy_(last.to(state.dtype))
    y = (h * C.float()[:, :, None, :]).sum(-1) + x * module.D.float()  # [B, S, D]
    y = y.transpose(1, 2) * F.silu(gate.float())
    return y.to(hidden_states.dtype)


def _mamba2_scan(module, hidden_states, B, C, dt, cache, **kwargs):
    """transformers' ``mamba2_scan_forward`` (Mamba2, Bamba, FalconH1, NemotronH, GraniteMoeHybrid, Zamba2):
    ``hidden_states [B, S, H * P]``, ``B``, ``C`` ``[B, S, G * N]``, ``dt [B, S, H]``; the state ``[B, H, P, N]``."""
    state = cache.state("recurrent", module.layer_idx)
    batch, tokens, _ = hidden_states.shape
    heads, head_dim, size, groups = module.num_heads, module.head_dim, module.ssm_state_size, module.n_groups
    low, high = getattr(module, "time_step_limit", (0.0, float("inf")))
    dt = F.softplus(dt.float() + module.dt_bias.float())
    if (low, high) != (0.0, float("inf")):
        dt = dt.clamp(min=low, max=high)
    x = hidden_states.float().reshape(batch, tokens, heads, head_dim)
    B = B.float().reshape(batch, tokens, groups, size).repeat_interleave(heads // groups, dim=2)
    C = C.float().reshape(batch, tokens, groups, size).repeat_interleave(heads // groups, dim=2)
    A = -torch.exp(module.A_log.float())  # [H]
    y, last = state_scans.head_scan(x * dt[..., None], dt * A, B, C, cache.fresh(state).float(), module.chunk_size)
    state.copy_(last.to(state.dtype))
    y = y + x * module.D.float()[:, None]
    return y.reshape(batch, tokens, heads * head_dim).to(hidden_states.dtype)


def _delta_rule(cache, query, key, value, g, beta, initial_state=None, use_qk_l2norm_in_kernel=False, **kwargs):
    """transformers' ``torch_chunk_gated_delta_rule`` and ``torch_recurrent_gated_delta_rule`` (``query``, ``key``
    ``[B, S, Hk, Dk]``, ``value [B, S, Hv, Dv]``, ``g`` (log decay), ``beta`` ``[B, S, Hv]``), from the recurrent
    state of the layer that asked for it (``initial_state`` is None: see ``get_recurrent_state``)."""
    dtype = query.dtype
    heads = value.shape[2]
    if key.shape[2] != heads:  # each query/key head serves heads // key heads consecutive value heads
        query, key = (t.repeat_interleave(heads // key.shape[2], dim=2) for t in (query, key))
    query, key, value, beta, g = (t.transpose(1, 2).float() for t in (query, key, value, beta, g))
    if use_qk_l2norm_in_kernel:
        query, key = (t * torch.rsqrt((t * t).sum(-1, keepdim=True) + 1e-6) for t in (query, key))
    query = query / (query.shape[-1] ** 0.5)
    state = cache.state("recurrent", cache.recurrent_layer)
    start = cache.fresh(state).float() if initial_state is None else initial_state.float()
    out, last = delta_rule.gated_delta_rule(query, key, value, g, beta, start)
    return out.transpose(1, 2).to(dtype), last


_REPLACEMENTS = {
    "causal_conv1d_forward": _conv_forward,
    "mamba_scan_forward": _mamba_scan,
    "mamba2_scan_forward": _mamba2_scan,
    "torch_chunk_gated_delta_rule": _delta_rule,
    "torch_recurrent_gated_delta_rule": _delta_rule,
}
_DELTA_RULES = {"torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule"}  # given the cache (a partial)
_LOCK = threading.Lock()  # one replacement at a time: the functions are module globals


@contextlib.contextmanager
def _replaced(model, cache):
    """The model's modeling modules run this file's state functions while the block lasts (a delta rule bound to
    ``cache``: transformers passes it none)."""
    with _LOCK:
        saved = []
        try:
            for name, namespaces in _functions(model).items():
                for namespace in namespaces.values():
                    saved.append((namespace, name, namespace[name]))
                    replacement = _REPLACEMENTS[name]
                    namespace[name] = functools.partial(replacement, cache) if name in _DELTA_RULES else replacement
            yield
        finally:
            for namespace, name, original in reversed(saved):
                namespace[name] = original
