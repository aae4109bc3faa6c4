"""kiln.Module: a kiln artifact loaded through libkiln_runtime.so's C API
(ctypes; no compiler, gRPC or protobuf needed), run on NumPy arrays.

The library is found at $KILN_RUNTIME (a path), else by the loader's usual
search (`libkiln_runtime.so` on LD_LIBRARY_PATH or installed)."""
import ctypes
import os

import numpy as np

from kiln.errors import KilnError

_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
           "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
           "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
           "bool": np.bool_}

_lib = None


def _library():
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("KILN_RUNTIME") or "libkiln_runtime.so"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise KilnError("UNAVAILABLE", f"cannot load the kiln runtime ({path}): {e}; set "
                                       "KILN_RUNTIME to libkiln_runtime.so's path") from None
    vp, cp, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64
    lib.kiln_module_load_on.argtypes = [cp, cp, ctypes.POINTER(vp), cp, ctypes.c_size_t]
    lib.kiln_module_load_on.restype = ctypes.c_int
    lib.kiln_module_load_trusted.argtypes = [cp, cp, cp, ctypes.POINTER(vp), cp,
                                             ctypes.c_size_t]
    lib.kiln_module_load_trusted.restype = ctypes.c_int
    lib.kiln_module_free.argtypes = [vp]
    for side in ("input", "output"):
        getattr(lib, f"kiln_module_num_{side}s").argtypes = [vp]
        getattr(lib, f"kiln_module_{side}_name").argtypes = [vp, ctypes.c_int]
        getattr(lib, f"kiln_module_{side}_name").restype = cp
        getattr(lib, f"kiln_module_{side}_dtype").argtypes = [vp, ctypes.c_int]
        getattr(lib, f"kiln_module_{side}_dtype").restype = cp
        getattr(lib, f"kiln_module_{side}_ndim").argtypes = [vp, ctypes.c_int]
        getattr(lib, f"kiln_module_{side}_shape").argtypes = [vp, ctypes.c_int,
                                                              ctypes.POINTER(i64), ctypes.c_int]
    lib.kiln_module_run.argtypes = [vp, ctypes.POINTER(vp), ctypes.POINTER(vp)]
    lib.kiln_module_run.restype = ctypes.c_int
    lib.kiln_module_last_error.argtypes = [vp]
    lib.kiln_module_last_error.restype = cp
    _lib = lib
    return lib


class Module:
    """A loaded artifact. `inputs` / `outputs`: [(name, shape, dtype)] in the
    model's order. `device`: where a GPU artifact runs ("opencl:N",
    "cuda:N"; None: the device its target names, else the first).
    `trust_key`: the tracker's public key (`kiln-tracker keys`), as a PEM
    file's path or its text (str or bytes); given, only an artifact it signed
    loads (KilnError UNAUTHENTICATED otherwise). The artifact's digests are
    checked either way (KilnError DATA_LOSS for an altered file)."""

    def __init__(self, path, device=None, trust_key=None):
        lib = _library()
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(4096)
        if not os.path.exists(path):
            raise KilnError("NOT_FOUND", f"no artifact at {path}")
        key = None
        if trust_key is not None:
            if isinstance(trust_key, str) and "-----BEGIN" not in trust_key:
                try:
                    with open(trust_key, "rb") as f:
                        trust_key = f.read()
                except OSError as e:
                    raise KilnError("NOT_FOUND", f"cannot read the trust key {trust_key}: "
                                                 f"{e.strerror}") from None
            key = trust_key.encode() if isinstance(trust_key, str) else bytes(trust_key)
            if not key:
                raise KilnError("INVALID_ARGUMENT", "the trust key is empty")
        rc = lib.kiln_module_load_trusted(path.encode(), device.encode() if device else None,
                                          key, ctypes.byref(handle), err, len(err))
        if rc != 0:
            # "DATA_LOSS: ...": the runtime's status code, then its message.
            text = err.value.decode(errors="replace")
            code, sep, message = text.partition(": ")
            if not (sep and code.isupper() and code.replace("_", "").isalpha()):
                code, message = "INVALID_ARGUMENT", text
            raise KilnError(code, message)
        self._lib = lib
        self._h = handle
        self.path = path
        self.inputs = [self._info("input", i) for i in range(lib.kiln_module_num_inputs(handle))]
        self.outputs = [self._info("output", i)
                        for i in range(lib.kiln_module_num_outputs(handle))]

    def _info(self, side, i):
        lib = self._lib
        name = getattr(lib, f"kiln_module_{side}_name")(self._h, i).decode()
        dtype = getattr(lib, f"kiln_module_{side}_dtype")(self._h, i).decode()
        ndim = getattr(lib, f"kiln_module_{side}_ndim")(self._h, i)
        dims = (ctypes.c_int64 * max(ndim, 1))()
        getattr(lib, f"kiln_module_{side}_shape")(self._h, i, dims, ndim)
        return name, tuple(dims[:ndim]), dtype

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.kiln_module_free(self._h)
            self._h = None

    def __repr__(self):
        fmt = lambda ts: ", ".join(f"{n}: {d}{list(s)}" for n, s, d in ts)  # noqa: E731
        return f"Module({self.path!r}, inputs [{fmt(self.inputs)}], outputs [{fmt(self.outputs)}])"

    def run(self, feeds):
        """Runs the model on `feeds` {input name: array}; returns {output
        name: array}. ValueError naming the input for a missing or unknown
        name, a wrong shape or dtype (float64 data is converted for a float32
        input, as kiln-run does; nothing else is converted)."""
        run, outputs = self.runner(feeds)
        run()
        return outputs

    def runner(self, feeds):
        """(run, outputs): run() runs the model on `feeds` (checked as run()
        checks them, once) into the arrays of `outputs` {output name: array},
        with nothing else done per call: for timing, and for serving loops
        that reuse their buffers. Each run reads the feeds' arrays anew (they
        are not copied when already contiguous and of the input's dtype).
        KilnError when a run fails."""
        unknown = set(feeds) - {n for n, _, _ in self.inputs}
        if unknown:
            raise ValueError(f"unknown input(s) {sorted(unknown)}; the model takes "
                             f"{[n for n, _, _ in self.inputs]}")
        arrays = []
        for name, shape, dtype in self.inputs:
            if name not in feeds:
                raise ValueError(f"input '{name}' ({dtype} {list(shape)}) is missing")
            a = np.asarray(feeds[name])
            want = np.dtype(_DTYPES[dtype])
            if a.dtype != want:
                if not (want == np.float32 and a.dtype == np.float64):
                    raise ValueError(f"input '{name}': expected {dtype}, given {a.dtype}")
                a = a.astype(np.float32)
            if tuple(a.shape) != shape:
                raise ValueError(f"input '{name}': expected shape {list(shape)}, "
                                 f"given {list(a.shape)}")
            arrays.append(np.ascontiguousarray(a))
        outs = [np.empty(shape, dtype=_DTYPES[dtype]) for _, shape, dtype in self.outputs]
        ins = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        ous = (ctypes.c_void_p * max(len(outs), 1))(*[o.ctypes.data for o in outs])
        lib, module = self._lib, self

        def run():
            if lib.kiln_module_run(module._h, ins, ous) != 0:
                raise KilnError("INTERNAL", lib.kiln_module_last_error(module._h).decode())

        # The arrays `ins` and `ous` point into live as long as run() does;
        # the closure holds the module, so its handle stays loaded.
        run.buffers = (arrays, outs)

        return run, {name: o for (name, _, _), o in zip(self.outputs, outs)}
