"""Sightline's Python adapter (docs/adapter.md): framework facts the GPU cannot show (each
training batch's real and padded tokens, packing and its boundaries, tokens the loss ignores,
DataLoader waits), written as the `sightline.batch` annotations and ranges a hand-annotated job
writes. `sightline run` injects it through PYTHONPATH (sitecustomize.py beside this package); it
starts once the job imports torch, never synchronises the GPU inside a step and never raises into
the job: the first error turns it off with one line on stderr."""
import os
import sys

from ._guard import disable, guarded

__all__ = ["install"]


def _wanted():
    return os.environ.get("SIGHTLINE_PYTHON_ADAPTER", "1") != "0" and bool(os.environ.get("SIGHTLINE_OUTPUT"))


def _start_with_torch():
    import numpy  # noqa: F401  (the counts are read with it; transformers needs it anyway)
    from . import _hooks
    _hooks.start()


_start_with_torch = guarded(_start_with_torch, timed=False)


class _TorchWatcher:
    """A meta-path finder that only watches: when `torch` is imported it lets the other finders
    find it, and runs the adapter's start once torch's own import has finished."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            del loader.exec_module  # the loader as it was
            original(module)        # torch's import: its errors are the job's
            _start_with_torch()

        loader.exec_module = exec_module
        return spec

    def find_module(self, name, path=None):  # the pre-3.4 protocol: nothing to find
        return None


def install():
    """Arms the adapter (from sitecustomize): starts at once if torch is already imported, else
    when it is."""
    if not _wanted():
        return
    try:
        if "torch" in sys.modules:
            _start_with_torch()
        else:
            sys.meta_path.insert(0, _TorchWatcher())
    except Exception as e:
        disable(e)
