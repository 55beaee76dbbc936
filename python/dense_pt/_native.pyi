# Hand-written stubs for the native module built from rust/py (keep in sync with rust/py/src).
__version__: str

def _raise_core_error(kind: str, message: str) -> None: ...
