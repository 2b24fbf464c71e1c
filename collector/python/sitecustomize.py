# Sightline's Python adapter, injected by `sightline run` (and for dormant jobs) by putting this
# directory first on PYTHONPATH; docs/adapter.md. Python imports `sitecustomize` once at startup:
# this one arms the adapter, then runs the sitecustomize it hides (the next one on sys.path), as
# Python would have without it. Nothing here may stop the job: an error turns the adapter off
# with one line on stderr.
import os as _os
import sys as _sys


def _sightline_arm():
    try:
        import sightline_adapter
        sightline_adapter.install()
    except Exception as e:  # noqa: BLE001 (never into the job)
        try:
            _sys.stderr.write(f"sightline: Python adapter off ({type(e).__name__}: {e}); the job runs on without it\n")
        except Exception:
            pass


def _sightline_chain():
    """Runs the next sitecustomize on sys.path (a venv's, the distribution's) in place of this one.
    Its own errors are reported by Python's site module, as they would be without Sightline."""
    import importlib.machinery
    import importlib.util
    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    _sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_sightline_arm()
_sightline_chain()
