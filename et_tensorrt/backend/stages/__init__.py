"""The stages of ``EtTensorRTBackend.preprocess``, in order: one file each, each a ``run(job)`` that reads
and writes fields of one ``PartitionJob`` (job.py). A cache hit marks the job ``from_cache``; the stages
marked "no" below are then skipped. ``preprocess`` runs each inside ``et_tensorrt.progress.step`` (its time, and
on request its peak memory, shown and recorded per partition).

==============  ========  ==========================================  ============================================
stage           on a hit  reads                                       writes
==============  ========  ==========================================  ============================================
options         yes       compile_specs                               options, build, settings, device,
                                                                      exec_device, label, n_nodes;
                                                                      stats["partitions"]
to_aten         yes       edge_program                                recorded, aten_ep (on the host)
legalize_quant  yes       aten_ep, build.strict_quantization          aten_ep (quantization legalized),
                                                                      quantization
cast_precision  yes       aten_ep, build.precision                    aten_ep (in the engine's precision:
                                                                      backend/precision.py)
lift_state      yes       aten_ep                                     states, engine_ep (backend/state_lifting.py)
metadata        yes       build, settings, device, n_nodes,           metadata (toolchain, precision, ...)
                          quantization
cache_lookup    yes       aten_ep, engine_ep, recorded, states,       program, program_error, key, entry,
                          build, options                              from_cache, dynamic_dims, [export];
                                                                      a hit: engine (held in the entry's file),
                                                                      io_entries, state bindings, recipe,
                                                                      metadata, stats["cache_hits"]
to_onnx         no        engine_ep, states, build, dynamic_dims      export, state bindings, export_metadata,
                                                                      metadata
validate        no        aten_ep, engine_ep, export, states,         validation, metadata; a refusal: fallback,
                          build                                       stats["fallbacks"]
recipe          no        build.device_build, export, program,        recipe, recipe_map
                          aten_ep, settings, fallback
build           no        export, settings, key, program_error,       engine (streamed into a new cache entry,
                          validation, export_metadata, recipe         the recipe after it, or a temp file),
                                                                      io_entries, metadata; stats["built"] or a
                                                                      fallback
embed           yes       program, program_error, engine, export,     graph, weights, refit, recipe, metadata;
                          build.weights, build.named_data, recipe,    with named data: named, data_store
                          recipe_map
serialize       yes       everything above                            blob; the record_exports() maps
==============  ========  ==========================================  ============================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from et_tensorrt.backend.stages import (
    build,
    cache_lookup,
    cast_precision,
    embed,
    legalize_quant,
    lift_state,
    metadata,
    options,
    recipe,
    serialize,
    to_aten,
    to_onnx,
    validate,
)
from et_tensorrt.backend.stages.job import PartitionJob


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[PartitionJob], None]
    on_cache_hit: bool  # whether it runs for a job served from the build cache


STAGES: tuple[Stage, ...] = (
    Stage("options", options.run, on_cache_hit=True),
    Stage("to_aten", to_aten.run, on_cache_hit=True),
    Stage("legalize_quant", legalize_quant.run, on_cache_hit=True),
    Stage("cast_precision", cast_precision.run, on_cache_hit=True),
    Stage("lift_state", lift_state.run, on_cache_hit=True),
    Stage("metadata", metadata.run, on_cache_hit=True),
    Stage("cache_lookup", cache_lookup.run, on_cache_hit=True),
    Stage("to_onnx", to_onnx.run, on_cache_hit=False),
    Stage("validate", validate.run, on_cache_hit=False),
    Stage("recipe", recipe.run, on_cache_hit=False),
    Stage("build", build.run, on_cache_hit=False),
    Stage("embed", embed.run, on_cache_hit=True),
    Stage("serialize", serialize.run, on_cache_hit=True),
)
