"""Runs of a device program replayed as CUDA graphs (``compile(..., capture=True)``).

Every value of a compiled graph lives in memory planned once, so the kernels of a
run read and write the same addresses on every run: the launches can be recorded
once into a CUDA graph and replayed with one call, which removes the launch gaps
that dominate small batches. Inputs are still copied into their planned buffers
before the replay, outputs copied out after it.

A run executes a list of steps (only those whose inputs changed, split where the
commit phase starts), so each distinct list is replayed as one unit: the first time a list
runs it runs plainly (compiling its kernels, growing the memory pool), the second
time it is captured, and from then on it is replayed. CuPy refuses cuBLAS calls
while a stream captures, so a matrix product is captured as the same call made
through a cuBLAS handle of graphc's own (:class:`GemmStep`, :mod:`.cuda_blas`);
where that fails, and for the other library calls and host checks
(:class:`LibraryCall`), those steps are launched as they are between the graphs
that capture the steps around them. Memory a kernel allocates
while it is captured (a library's temporaries) is held for as long as the graph
is (``held_bytes``), since the graph replays writes to those addresses. A list of
steps that cannot be captured (a kernel that synchronises with the host) runs
plainly from then on, with one ``RuntimeWarning`` naming the error.

>>> calls = []
>>> def capture(kernels):    # a stand-in recorder: records, runs nothing, replays in Python
...     return (lambda: [k() for k in kernels]), 0
>>> run = GraphReplay(lambda indices, kernels, around=None, interrupts=None:
...                   [k() for k in kernels], capture)
>>> for _ in range(3):
...     run([0], [lambda: calls.append("step")])
>>> len(calls), run.graphs, run.replays
(3, 1, 2)
"""
from __future__ import annotations

import itertools
import warnings
from contextlib import nullcontext


class GraphReplay:
    """A runner (``runner(indices, kernels, around, interrupts)``, see
    :mod:`.schedules`) whose repeated step lists are captured by ``capture(kernels)``
    (returning ``(launch, held_bytes)``) and replayed."""

    workers = 1

    def __init__(self, runner, capture):
        self._runner, self._capture = runner, capture
        self._seen: set = set()
        self._launches: dict = {}       # step indices -> launch(), or None: runs plainly
        self.held_bytes = 0             # allocated during captures, held by the graphs
        self.replays = 0
        self.pieces = 0                 # captured graphs and library calls a replay launches

    @property
    def graphs(self) -> int:
        """How many step lists are captured."""
        return sum(launch is not None for launch in self._launches.values())

    def __call__(self, indices, kernels, around=None, interrupts=None) -> None:
        key = tuple(indices)
        if not key:
            return
        launch = self._launches.get(key, False)
        if launch is False and key in self._seen:
            launch = self._launches[key] = self._record(kernels, around)
        if not launch:
            self._seen.add(key)
            self._runner(indices, kernels, around, interrupts)
            return
        if interrupts is not None and interrupts.raised is not None:
            interrupts.check()
        with around() if around is not None else nullcontext():
            launch()
        self.replays += 1

    def _record(self, kernels, around):
        """One launch for ``kernels``: each run of steps between library calls
        captured as a graph, the library calls (``library`` set) launched as they are."""
        errors = []
        # first with the products captured through graphc's own cuBLAS handle; where
        # that fails, with them launched between the graphs; else the steps run plainly
        for split_products in (False, True):
            try:
                pieces, held = self._pieces(kernels, around, split_products)
                break
            except Exception as error:
                errors.append(f"{type(error).__name__}: {error}")
        else:
            warnings.warn(f"compile(capture=True): {len(kernels)} steps could not be "
                          f"captured into CUDA graphs and run as separate launches "
                          f"({'; then '.join(errors)})", RuntimeWarning, stacklevel=4)
            return None
        if errors:
            warnings.warn(f"compile(capture=True): the matrix products run between the "
                          f"captured graphs ({errors[0]})", RuntimeWarning, stacklevel=4)
        self.held_bytes += held
        self.pieces += len(pieces)

        def launch_all():
            for piece in pieces:
                piece()
        return launch_all

    def _pieces(self, kernels, around, split_products):
        """``(pieces, held bytes)``: each run of capturable steps captured as one graph
        (its products too, unless ``split_products``), the other steps as they are."""
        pieces, held = [], 0
        with around() if around is not None else nullcontext():
            for apart, group in itertools.groupby(kernels, _between_graphs(split_products)):
                group = list(group)
                if apart:
                    pieces.extend(group)
                else:
                    launch, nbytes = self._capture(group)
                    pieces.append(launch)
                    held += nbytes
        return pieces, held


def _between_graphs(split_products: bool):
    def launched_apart(kernel) -> bool:
        return is_library_call(kernel) or (split_products and isinstance(kernel, GemmStep))
    return launched_apart


class ScopedCall:
    """A step's call run within ``scope`` (a context factory: TF32), or as it is."""

    def __init__(self, call, scope=None):
        self.call, self.scope = call, scope

    def __call__(self):
        if self.scope is None:
            self.call()
        else:
            with self.scope():
                self.call()


class GemmStep(ScopedCall):
    """A matrix product that a CUDA graph can hold: run plainly it is CuPy's call
    (``call``, within ``scope``: TF32), captured it is the same product made through
    graphc's own cuBLAS handle (``plan``: :func:`.cuda_blas.gemm_plan`), which CuPy's
    refusal of cuBLAS under capture does not reach."""

    library = False

    def __init__(self, call, plan, dtype, scope=None, tf32: bool = False):
        super().__init__(call, scope)
        self.plan, self.dtype, self.tf32 = plan, dtype, tf32

    def captured(self, handle):
        """The product made through ``handle`` (a :class:`.cuda_blas.CublasHandle`)."""
        return lambda: handle.gemm(self.plan, self.dtype)


class LibraryCall(ScopedCall):
    """A step calling a library that cannot be captured into a CUDA graph (CuPy
    refuses cuBLAS calls while a stream captures): :class:`GraphReplay` launches it
    between the captured graphs. ``scope``: a context it runs in (TF32), or None."""

    library = True


def is_library_call(kernel) -> bool:
    """Whether a step must be launched outside the captured graphs."""
    return getattr(kernel, "library", False)


def cupy_capture(cupy):
    """``capture(kernels) -> (launch, held_bytes)`` on CuPy: the kernels are recorded
    on a stream of their own (a blocking one, so it stays ordered with the copies CuPy
    makes on the default stream) in relaxed mode, with every allocation made during
    the capture taken from CuPy's pool and kept with the graph."""
    made = {}        # the stream, made on the first capture, and the cuBLAS handles on it

    def handle(tf32: bool):
        if tf32 not in made:
            from .cuda_blas import CublasHandle
            made[tf32] = CublasHandle(cupy, made["stream"], tf32)
        return made[tf32]

    def capture(kernels):
        if "stream" not in made:
            made["stream"] = cupy.cuda.Stream()
        stream = made["stream"]
        pool = cupy.get_default_memory_pool()
        mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
        held = []

        def keep(size):
            memory = pool.malloc(size)
            held.append(memory)
            return memory

        for kernel in kernels:      # handles and their workspaces made before capturing
            if hasattr(kernel, "captured"):
                handle(kernel.tf32)
        with stream, cupy.cuda.using_allocator(keep):
            if mode is None:
                stream.begin_capture()
            else:
                stream.begin_capture(mode)
            try:
                for kernel in kernels:
                    captured = getattr(kernel, "captured", None)
                    (kernel if captured is None else captured(handle(kernel.tf32)))()
            finally:
                graph = stream.end_capture()
        held_bytes = sum(m.mem.size for m in held)

        def launch():
            graph.launch(stream)
            launch.held = held          # the graph's temporaries live as long as it does
        return launch, held_bytes
    return capture
