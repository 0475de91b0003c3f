"""Generated CPU kernels: compile :mod:`.numba_codegen`'s source with Numba, keep it
on disk, and bind it to a node's arrays.

Numba (the JIT PyTensor uses as its default backend) is imported only here, and
only when a graph asks for generated kernels; without it :func:`available` says
why and the engine keeps its NumPy kernels. Each distinct source (kernel
description, dtypes, rank, single-element inputs) is written once to the cache
directory as a module and imported, and Numba caches its machine code beside it,
so a kernel is compiled once per machine, not once per graph or process: a warm
start loads it in milliseconds. The directory is ``$GRAPHC_CACHE_DIR`` or
``~/.cache/graphc`` (``$XDG_CACHE_HOME/graphc``), under ``kernels/``.

>>> import numpy as np
>>> from graphc.type import Op
>>> x, out = np.arange(4.0), np.empty(4)
>>> run = generated_kernel(Op.make("multiply"), [x, np.array(2.0)], out, parallel=False)
>>> run(); out
array([0., 2., 4., 6.])
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys
import tempfile
import threading
from functools import partial

import numpy as np

from . import numba_codegen as codegen

_lock = threading.RLock()
_modules: dict = {}          # source key -> imported module
_numba = None                # the module, once imported
_problem = None              # why generated kernels are unavailable, once known
_threads = None              # the thread-safe threading layer, or "" for none


def available() -> str | None:
    """``None`` when generated kernels can be built here, else the reason."""
    global _numba, _problem
    with _lock:
        if _numba is None and _problem is None:
            if "OMP_WAIT_POLICY" not in os.environ:    # before OpenMP starts; a policy
                for name, value in wait_policy().items():   # the user chose is kept
                    os.environ.setdefault(name, value)
            try:
                import numba
                _numba = numba
            except ImportError as e:   # pragma: no cover - numba is a dependency
                _problem = f"Numba is not installed ({e}); pip install numba"
        return _problem


#: OpenMP spin iterations a waiting thread makes before it sleeps when the team
#: computes the GEMMs too (a few hundred microseconds here: the next kernel of a run
#: finds it awake, and BLAS's own pool, idle during runs, still gets the core soon
#: after one)
SPIN_COUNT = 100_000


def wait_policy() -> dict:
    """How OpenMP's waiting threads wait, as the environment variables to set.

    When the GEMMs run on the generated kernels' threads (:mod:`.numba_gemm`), the
    team is the only pool working during a run: its threads spin a while between
    kernels instead of sleeping (a kernel's launch then costs ~2 us, not the ~45 us
    of waking a sleeping thread on a VM). Otherwise BLAS's threads run every GEMM, and
    a spinning OpenMP thread would take their core: then they wait passively.

    >>> wait_policy()["OMP_WAIT_POLICY"] in ("ACTIVE", "PASSIVE")
    True
    """
    from .numba_gemm import blas_symbols
    if isinstance(blas_symbols(), str):
        return {"OMP_WAIT_POLICY": "PASSIVE"}
    return {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": str(SPIN_COUNT)}


def threading_layer() -> str:
    """The Numba threading layer parallel kernels run on: a thread-safe one (TBB or
    OpenMP), since several graphs may run at once from different threads; ``""``
    when neither loads, and then every generated kernel runs on one thread."""
    global _threads
    with _lock:
        if _threads is None:
            _threads = ""
            for layer, module in (("tbb", "tbbpool"), ("omp", "omppool")):
                try:
                    importlib.import_module(f"numba.np.ufunc.{module}")
                except (ImportError, OSError):
                    continue
                _numba.config.THREADING_LAYER = layer
                _threads = layer
                break
        return _threads


def initialise() -> str | None:
    """Pay generated kernels' fixed cost now: import Numba (:func:`available`), pick
    the threading layer (:func:`threading_layer`) and start Numba's runtime, whose
    first LLVM compilation touches most of LLVM's code. A process pays this once,
    whatever its graphs (measured RSS: importing llvmlite and Numba ~55 MiB, the
    runtime ~30 MiB, both mostly shared library pages; oneDNN, where the GEMMs use it
    (:mod:`.gemm_libraries`), ~50 MiB, 31 of them its relocations); the first graph
    compiled otherwise pays it. Returns what :func:`available` returns.

    Example: ``numba_kernels.initialise()`` before a benchmark's baseline RSS.
    """
    problem = available()
    if problem is None:
        threading_layer()
        from .gemm_libraries import chosen
        chosen()            # loads oneDNN's library where the GEMM blocks will call it
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target
        from numba.core.runtime import rtsys
        with _lock, global_compiler_lock:
            rtsys.initialize(cpu_target.target_context)
    return problem


def load_compiled(function, types) -> None:
    """Make the ``cache=True`` Numba dispatcher ``function`` ready for arguments of
    Numba ``types`` (a tuple): its machine code loaded from Numba's disk cache when
    the cache has it, else compiled (and cached) by ``function.compile(types)``.

    Numba's own cache load first "refreshes" its compiler, importing every
    implementation module and installing their registries: about 30 MiB of RSS and
    0.3 s in a fresh process, of which loading machine code needs none. This loads
    the cached code with only Numba's runtime (NRT, which the code links against)
    initialised; a real compilation later refreshes as usual. Where Numba's
    internals differ from those this knows, the public path serves.

    Example: ``load_compiled(module.serial, tuple(numba.typeof(a) for a in args))``
    """
    with _lock:
        if _fast_load(function, tuple(types)):
            return
        function.compile(tuple(types))


def _fast_load(function, types) -> bool:
    """Whether ``function`` has ``types`` now, loaded from the cache without a refresh."""
    try:
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.runtime import rtsys
        if types in function.overloads:
            return True
        cache, context = function._cache, function.targetctx
        load = cache._load_overload
    except (ImportError, AttributeError):     # pragma: no cover - another Numba
        return False
    with global_compiler_lock:
        try:
            rtsys.initialize(context)
            compiled = load(types, context)
        except Exception:                     # unreadable cache: the public path decides
            return False
        if compiled is None:
            return False
        # what Dispatcher.compile does with a cache hit
        function._cache_hits[types] += 1
        if not compiled.objectmode:
            context.insert_user_function(compiled.entry_point, compiled.fndesc,
                                         [compiled.library])
        function.add_overload(compiled)
        return True


def cache_dir() -> str:
    """Where generated kernel modules and their machine code are kept."""
    root = os.environ.get("GRAPHC_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".cache")
        root = os.path.join(base, "graphc")
    return os.path.join(root, "kernels")


def _load(source: str):
    """The imported module of ``source``, written to the cache directory first."""
    key = codegen.source_key(source)
    with _lock:
        module = _modules.get(key)
        if module is not None:
            return module
        directory = cache_dir()
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"k{key}.py")
        if not _same_text(path, source):
            # written whole, then renamed: a concurrent process never reads half a file
            fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        name = f"graphc_kernels.k{key}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module      # Numba's cache finds the module by name
        spec.loader.exec_module(module)
        _modules[key] = module
        return module


def _same_text(path: str, text: str) -> bool:
    try:
        with open(path) as f:
            return f.read() == text
    except OSError:
        return False


def element_strides(array, out_shape):
    """``array``'s strides in elements when broadcast to ``out_shape`` (0 along a
    broadcast dimension); ``None`` for a single element.

    >>> element_strides(np.empty((3, 1)), (2, 3, 4)), element_strides(np.empty(()), (3,))
    ((0, 1, 0), None)
    """
    if array.size == 1:
        return None
    view = np.broadcast_to(array, out_shape)
    return tuple(s // array.itemsize for s in view.strides)


def geometry(in_strides, out_shape):
    """``(shape, strides)``: the output's shape after dropping sizes of 1 and merging
    every pair of neighbouring dimensions that all operands (the contiguous output
    and the inputs of element strides ``in_strides``, ``None`` for single elements)
    step over in one stride, and each input's strides on that shape.

    >>> geometry([(48, 16, 4, 1), (0, 1, 0, 0)], (8, 3, 4, 4))
    ((8, 3, 16), [(48, 16, 1), (0, 1, 0)])
    >>> geometry([(48, 16, 4, 1), None], (8, 3, 4, 4))
    ((384,), [(1,), None])
    """
    dims = [d for d in range(len(out_shape)) if out_shape[d] != 1]
    shape = [out_shape[d] for d in dims]
    walks = [[math.prod(out_shape[d + 1:]) for d in dims]]      # the output first
    walks += [[s[d] for d in dims] for s in in_strides if s is not None]
    j = len(shape) - 1
    while j > 0:   # merge dimension j into j - 1 where every operand steps over j exactly
        if all(w[j - 1] == w[j] * shape[j] for w in walks):
            shape[j - 1] *= shape[j]
            for w in walks:
                w[j - 1] = w[j]
                del w[j]
            del shape[j]
        j -= 1
    if not shape:
        shape, walks = [1], [[0] for _ in walks]
    merged = iter(walks[1:])
    return tuple(shape), [None if s is None else tuple(next(merged)) for s in in_strides]


def _argument(array, shape, strides):
    """``array`` seen with ``shape`` and element ``strides`` (a view: the kernel reads
    whatever it holds when it runs), read-only, so every graph passes the same types."""
    if strides is None:
        view = array.reshape(1)
    else:
        view = np.lib.stride_tricks.as_strided(
            array, shape, tuple(s * array.itemsize for s in strides), writeable=False)
        if view.flags.c_contiguous:
            view = view.reshape(shape)
    view = view.view()
    view.flags.writeable = False
    return view


def _flat_base(array, shape, strides):
    """The memory a view of ``shape`` and (non-negative) element ``strides`` from
    ``array``'s first element spans, as one read-only contiguous run."""
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    view = np.lib.stride_tricks.as_strided(array, (span,), (array.itemsize,), writeable=False)
    view = view.view()
    view.flags.writeable = False
    return view


def same_memory(a, b) -> bool:
    """Whether arrays ``a`` and ``b`` are views of the same elements in the same layout
    (a kernel computing in place).

    >>> x = np.empty((2, 3)); same_memory(x, x.view()), same_memory(x, x.T), same_memory(x, x[1:])
    (True, False, False)
    """
    return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def generated_kernel(op, ins, out, parallel: bool):
    """A callable computing elementwise ``op`` (a fused program or one op) from the
    arrays ``ins`` into the contiguous ``out``, as one generated loop (on every core
    when ``parallel``); ``None`` when the generator cannot (a kind or dtype it does
    not cover, or Numba missing)."""
    if available() is not None or not out.flags.c_contiguous or out.size == 0:
        return None
    in_strides = [element_strides(a, out.shape) for a in ins]
    scalars = tuple(k for k, s in enumerate(in_strides) if s is None)
    shape, strides = geometry(in_strides, out.shape)
    rows = tuple(k for k, s in enumerate(strides) if s is not None and s[-1] == 0)
    args = [out.reshape(shape)] + [_argument(a, shape, s) for a, s in zip(ins, strides)]
    # strided views (slices, transposes) are read through a flat base (codegen)
    flat = [k for k, s in enumerate(strides) if s is not None and k not in rows
            and not args[1 + k].flags.c_contiguous and min(s) >= 0]
    for k in flat:
        args[1 + k] = _flat_base(ins[k], shape, strides[k])
    aliased = tuple(k for k in range(len(ins)) if k not in flat and k not in scalars
                    and same_memory(args[1 + k], args[0]))
    try:
        source = codegen.kernel_source(op, [a.dtype for a in ins], out.dtype, len(shape),
                                       scalars, rows, [(k, strides[k][-1] == 1) for k in flat],
                                       aliased)
    except NotImplementedError:
        return None
    module = _load(source)
    function = module.parallel if parallel and threading_layer() else module.serial
    args += [tuple(strides[k]) for k in flat]
    load_compiled(function, tuple(_numba.typeof(a) for a in args))
    return partial(function, *args)


# -- reductions ------------------------------------------------------------------------------
def abd_shape(shape, axis):
    """``(A, B, D)``: ``shape`` seen as the reduced dimensions before the kept ones,
    the kept ones, and the reduced ones after them; ``None`` when the kept dimensions
    are not one contiguous run (or nothing is kept).

    >>> abd_shape((8, 64, 7, 7), (0, 2, 3)), abd_shape((32, 10), (1,)), abd_shape((5, 6), (0,))
    ((8, 64, 49), (1, 32, 10), (5, 6, 1))
    """
    reduced = set(range(len(shape)) if axis is None else axis)
    kept = [d for d in range(len(shape)) if d not in reduced]
    if not kept or kept != list(range(kept[0], kept[-1] + 1)):
        return None
    first, last = kept[0], kept[-1] + 1
    return (math.prod(shape[:first]), math.prod(shape[first:last]), math.prod(shape[last:]))


#: the shortest contiguous run of reduced cells (``D``) a generated reduction walks
#: when there are several outer rows (``A > 1``); shorter runs stay on NumPy
REDUCE_MIN_RUN = 16

#: reduction kind -> (function of numba_reduce, its last argument, the dtype kinds it
#: takes); ``"count"``: the number of cells reduced (a mean divides by it)
_REDUCTIONS = {"sum": ("sum_abd", 1.0, "f"), "mean": ("sum_abd", "count", "f")}


def krl_shape(shape, axis):
    """``(K, R, L)``: ``shape`` seen as kept dimensions, one contiguous run of reduced
    ones, and kept ones after them (both kept runs non-empty); ``None`` otherwise.

    >>> krl_shape((768, 768, 3), (1,)), krl_shape((2, 8, 5, 5), (1,)), krl_shape((4, 5), (0,))
    ((768, 768, 3), (2, 8, 25), None)
    """
    reduced = sorted(set(range(len(shape)) if axis is None else axis))
    if not reduced or reduced != list(range(reduced[0], reduced[-1] + 1)) \
            or reduced[0] == 0 or reduced[-1] == len(shape) - 1:
        return None
    first, last = reduced[0], reduced[-1] + 1
    return (math.prod(shape[:first]), math.prod(shape[first:last]), math.prod(shape[last:]))


def _middle_sum_kernel(op, x, out):
    """:func:`.numba_reduce.sum_krl` for a sum or mean over a middle run of
    dimensions, else ``None``. Even one outer group (a channels-last global average
    pool, ``(1, H, W, C)`` over ``(1, 2)``) runs it: the same rows added in the same
    order as NumPy's call, without its overhead (1x14x14x96: 8.8 -> 3.9 us; 1x56x56x64:
    68 -> 18 us)."""
    krl = krl_shape(x.shape, op["axis"])
    if (op.kind not in ("sum", "mean") or krl is None or krl[1] < 1
            or x.dtype.kind != "f" or out.dtype != x.dtype):
        return None
    from . import numba_reduce
    divisor = np.array([krl[1] if op.kind == "mean" else 1], out.dtype)
    args = [x.reshape(krl), out.reshape(krl[0], krl[2]), divisor]
    load_compiled(numba_reduce.sum_krl, tuple(_numba.typeof(a) for a in args))
    return partial(numba_reduce.sum_krl, *args)


def reduction_kernel(op, ins, out, ctx, parallel):
    """The generated kernel of a ``sum`` or ``mean`` keeping one contiguous
    run of dimensions (:func:`abd_shape`), one thread per kept group, when it may use
    every core and the input is large; or of a sum or mean over a middle run
    (:func:`krl_shape`) whenever it may use every core. Else NumPy's call serves."""
    from .strategy import PARALLEL_MIN
    x = ins[0]
    name, last, dtypes = _REDUCTIONS[op.kind]
    abd = abd_shape(x.shape, op["axis"])
    if (parallel and available() is None and threading_layer() and abd is None
            and x.flags.c_contiguous and out.flags.c_contiguous):
        return _middle_sum_kernel(op, x, out)
    if (not parallel or available() is not None or not threading_layer()
            or x.size < PARALLEL_MIN or abd is None or abd[1] < 2
            # short inner runs under several outer rows (a column mean: D = 1) walk
            # memory by strides per kept element; NumPy adds whole rows at once
            # (covariance's 4096 x 256 mean over rows: 6 ms generated, 0.2 ms NumPy)
            or abd[2] < REDUCE_MIN_RUN and abd[0] > 1
            or x.dtype.kind not in dtypes or not x.flags.c_contiguous
            or not out.flags.c_contiguous):
        return None
    from . import numba_reduce
    function = getattr(numba_reduce, name)
    args = [x.reshape(abd), out.reshape(abd[1]),
            float(abd[0] * abd[2]) if last == "count" else last]
    load_compiled(function, tuple(_numba.typeof(a) for a in args))
    return partial(function, *args)


#: the most elements a fused reduction whose program calls the C library element by
#: element (``exp``, ``log``...) runs generated: below, NumPy's per-call overhead
#: costs more than its vectorised maths saves (a softmax of 100 x 10: 3 us generated,
#: 7 us NumPy; of 256 x 1000: 0.64 ms generated, 0.22 ms NumPy, on two cores)
SCALAR_CALLS_MAX = 1 << 10


def fused_reduce_kernel(op, ins, out, ctx, parallel):
    """The generated kernel of a ``fused_reduce`` node (:mod:`.fused_reduce`): one loop
    per output element accumulating the program over its reduced cells in memory
    order (:func:`.numba_codegen.reduce_kernel_source`), the output elements split
    across threads when the program's value is large and ``parallel``; ``None`` (its
    NumPy kernel runs) when the generator does not cover it, or the program calls the
    C library element by element (``exp``: NumPy's vectorised calls on a block in
    cache win) on more than :data:`SCALAR_CALLS_MAX` elements."""
    from .fused_reduce import kernel_view, program_op, reduce_geometry, reduced_axes
    from .fused_reduce import reduced_count
    from .strategy import PARALLEL_MIN
    full = tuple(op["full"])
    if available() is not None or not out.flags.c_contiguous or math.prod(full) == 0:
        return None
    program, dtypes = program_op(op), [a.dtype for a in ins]
    try:
        names = [f"a{k}" for k in range(len(ins))]
        lines = codegen.program_lines(codegen.DIALECT, program, names,
                                      [d.name for d in dtypes], np.dtype(op["dtype"]).name)
        if math.prod(full) > SCALAR_CALLS_MAX and not codegen.vectorises(lines):
            return None
    except (NotImplementedError, KeyError):
        return None
    shape, roles, spans = reduce_geometry([a.shape for a in ins], full, reduced_axes(op))
    views = [kernel_view(a, shape, s) for a, s in zip(ins, spans)]
    if any(v is None for v in views):
        return None
    try:
        source = codegen.reduce_kernel_source(program, dtypes, op["dtype"], op["reduce"],
                                              roles, spans)
    except NotImplementedError:
        return None
    module = _load(source)
    split = parallel and math.prod(full) >= PARALLEL_MIN and bool(threading_layer())
    function = module.parallel if split else module.serial
    kept = tuple(n for n, r in zip(shape, roles) if r == "k")
    args = [out.reshape(kept or (1,)), tuple(n for n, r in zip(shape, roles) if r == "r"),
            float(reduced_count(op))]
    for v in views:   # read-only, so every graph passes the same types
        v = v.view()
        v.flags.writeable = False
        args.append(v)
    load_compiled(function, tuple(_numba.typeof(a) for a in args))
    return partial(function, *args)
