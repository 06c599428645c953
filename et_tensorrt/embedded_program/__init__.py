"""The partition's program embedded in a delegate blob, stored and loaded without pickle or eval.

``writer.serialize_program`` (lowering) turns an aten ExportedProgram into GRAPH (torch.export's JSON)
and WEIGHTS (raw tensors); ``loader.load_program`` (runtime) turns a blob's GRAPH + WEIGHTS, or a
version-1 blob's torch.export.save archive, back into an ExportedProgram after ``graph_check`` has
refused anything torch would evaluate, import or unpickle. docs/security.md lists every such route.
"""

from .loader import load_program
from .writer import serialize_program

__all__ = ["load_program", "serialize_program"]
