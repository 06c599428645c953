"""``prepare``: build every engine of a ``.pte`` for this machine's GPU ahead of its first load, like ``trtexec``:
each partition whose own engine does not run here gets one built from its RECIPE with the TensorRT installed
here (et_tensorrt.runtime.device_build), stored in the engine cache (a later load takes it from there without
building), and with ``-o`` also written into a copy of the program whose blobs carry it. One line per engine.

A program lowered with ``named_data`` keeps its weights (and engines) as ExecuTorch named data: its recipes
rebuild their initializers from there, the .pte's own or, with ``--data``, its .ptd's (a view of the mapped
file). With ``-o`` the new engine goes into the blob; the weights stay named data, so the prepared .pte still
runs with the same .ptd."""

from __future__ import annotations

import torch

from .cache import size_text
from .common import EXIT_ERROR, EXIT_OK, CliError


def _write(path: str, pte, replaced: dict[int, bytes]) -> None:
    """The program (``pte``, the file as deserialized; changed here) with the delegate payloads at ``replaced``
    (backend_delegate_data index -> bytes) swapped in."""
    from executorch.exir._serialize._program import serialize_pte_binary

    from ..atomic_file import replacing

    for index, payload in replaced.items():
        pte.program.backend_delegate_data[index].data = payload
    with replacing(path) as (f,):
        serialize_pte_binary(pte).write_to_file(f)


def _gpu(device):
    from ..runtime import device_build

    if not torch.cuda.is_available():
        raise CliError(
            "prepare builds for this machine's GPU, and torch sees no CUDA device here: run it on the GPU machine "
            "that will run the program"
        )
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise CliError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device_build.this_gpu(torch.device(str(device)))


def _with_named_weights(blob, named: dict, pte: str, data_path: str | None):
    """``blob`` with its WEIGHTS as views (no copy), the named ones out of the program's named data; CliError naming
    the missing .ptd when a named weight is in neither the .pte nor the given .ptd."""
    from ..embedded_program.loader import weight_views
    from ..errors import ProgramRefusedError
    from ..format.blob import NAMED_WEIGHT

    missing = [n.key for n in blob.named if n.target == NAMED_WEIGHT and n.key not in named]
    if missing:
        where = f"neither {pte} nor {data_path} holds" if data_path else f"{pte} does not hold"
        raise CliError(
            f"the program keeps its weights as ExecuTorch named data, which {where} ({len(missing)} key(s), e.g. "
            f"{missing[0]}): give its .ptd with --data (the file `et-tensorrt lower --named-data ptd` wrote)"
        )
    try:  # each named weight checked against its CRC-32 before an engine is built from it
        blob.weight_views = weight_views(blob, named)
    except ProgramRefusedError as e:
        raise CliError(f"{e} ({pte}" + (f" with {data_path})" if data_path else ")")) from e
    return blob


def _engine_bytes(blob) -> int:
    return len(blob.engine) if blob.engine is not None else blob.named_engine.nbytes


def cmd_prepare(args) -> int:
    from ..format.blob import read_blob
    from ..inspection import _delegate_bytes, _delegates_of, _deserialize_pte, named_data, read_file
    from ..runtime import device_build

    data = read_file(args.pte)
    gpu = _gpu(args.device)
    pte = _deserialize_pte(data, args.pte)  # read once: the delegates, the named data, and the -o copy
    del data
    delegates = _delegates_of(pte.program)
    if not delegates:
        raise CliError(f"{args.pte} has no et_tensorrt delegate: nothing to prepare")
    named = None  # the program's named data, read once a blob needs it
    print(f"{args.pte}: {len(delegates)} engine(s) for {gpu.name} ({gpu.sm})")
    replaced, failed = {}, 0
    for i, (method, delegate) in enumerate(delegates, 1):
        label = f"engine {i}/{len(delegates)} ({method})"
        payload = _delegate_bytes(pte.program, delegate)
        blob = read_blob(payload, copy=False)
        why = device_build.aot_fit(blob, gpu)
        if not why:
            print(f"  {label}: its own engine runs here ({size_text(_engine_bytes(blob))}); nothing to build")
            continue
        if blob.named:
            named = named if named is not None else named_data(pte, args.data)
            blob = _with_named_weights(blob, named, args.pte, args.data)
        with device_build.policy("auto"):
            made = device_build.engine_for(blob, gpu, why, label)
        if isinstance(made, str):
            failed += 1
            print(f"  {label}: not prepared: {made}")
            continue
        print(f"  {label}: {made.origin}, {size_text(len(made.data))}")
        if args.output:
            replaced[delegate.processed.index] = device_build.prepared_blob(payload, made)
    if args.output:
        _write(args.output, pte, replaced)
        print(f"wrote {args.output}: {len(replaced)} blob(s) now carry the engine for {gpu.sm}")
        if args.data:
            print(f"  its weights stay in {args.data}: run it with --data {args.data}")
    print(f"{len(delegates) - failed} of {len(delegates)} engine(s) ready for this GPU")
    return EXIT_ERROR if failed else EXIT_OK
