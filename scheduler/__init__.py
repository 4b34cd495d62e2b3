from .runtime import _proc_start  # noqa: F401 (first: the hook's deadline falls back to when floorgate's code began)
