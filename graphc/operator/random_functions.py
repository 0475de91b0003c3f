"""``N.random``: the methods of ``numpy.random.Generator``, drawn afresh on every run
from the graph's seedable generator (``graphc.compile(..., seed=...)``, ``g.seed``),
or at once from eager mode's (``E.random.seed``).

Every distribution is one kind, ``random_draw``, whose kernel calls the Generator
method of the same name (:mod:`graphc.engine.random_kernels`): the same seed gives
NumPy's own draws. Parameters may be Python numbers (attributes of the op), arrays
(constants) or graph values (inputs of the op); sizes are static. Arrays drawn from
(``choice(a)``, ``permutation(x)``, ``permuted(x)``) are indexed by drawn positions:
a gather. Float draws are float32 unless ``dtype=`` says float64 (graphc's creation
default); integer draws are int64, as NumPy's.

>>> import graphc.eager as E
>>> E.random.seed(0)
>>> E.random.gamma(2.0, size=(3,)).dtype, E.random.integers(0, 10, size=4).dtype
(dtype('float32'), dtype('int64'))
"""
from __future__ import annotations

import inspect
import math
import operator

import numpy as np

from ..shape.axes import normalize_axis
from ..type.errors import DTypeError, GraphcError, ShapeError

#: the dtypes NumPy's generator draws floats in
FLOAT_DRAWS = (np.dtype(np.float32), np.dtype(np.float64))
#: a trial draw that checks static parameters while building draws at most this many
TRIAL_SIZE = 1 << 16


class RandomArgumentError(GraphcError, ValueError):
    """A parameter NumPy's generator refuses (a negative scale, ``p`` above 1...)."""


#: distributions of scalar (broadcast) parameters: name -> (parameters with their
#: defaults, ``inspect.Parameter.empty`` for required ones; whether it draws integers)
_REQUIRED = inspect.Parameter.empty
DISTRIBUTIONS = {
    "random": ((), False),
    "standard_normal": ((), False),
    "standard_exponential": ((), False),
    "standard_cauchy": ((), False),
    "standard_gamma": ((("shape", _REQUIRED),), False),
    "exponential": ((("scale", 1.0),), False),
    "gamma": ((("shape", _REQUIRED), ("scale", 1.0)), False),
    "beta": ((("a", _REQUIRED), ("b", _REQUIRED)), False),
    "laplace": ((("loc", 0.0), ("scale", 1.0)), False),
    "logistic": ((("loc", 0.0), ("scale", 1.0)), False),
    "lognormal": ((("mean", 0.0), ("sigma", 1.0)), False),
    "gumbel": ((("loc", 0.0), ("scale", 1.0)), False),
    "rayleigh": ((("scale", 1.0),), False),
    "weibull": ((("a", _REQUIRED),), False),
    "pareto": ((("a", _REQUIRED),), False),
    "power": ((("a", _REQUIRED),), False),
    "chisquare": ((("df", _REQUIRED),), False),
    "noncentral_chisquare": ((("df", _REQUIRED), ("nonc", _REQUIRED)), False),
    "f": ((("dfnum", _REQUIRED), ("dfden", _REQUIRED)), False),
    "noncentral_f": ((("dfnum", _REQUIRED), ("dfden", _REQUIRED), ("nonc", _REQUIRED)), False),
    "standard_t": ((("df", _REQUIRED),), False),
    "triangular": ((("left", _REQUIRED), ("mode", _REQUIRED), ("right", _REQUIRED)), False),
    "vonmises": ((("mu", _REQUIRED), ("kappa", _REQUIRED)), False),
    "wald": ((("mean", _REQUIRED), ("scale", _REQUIRED)), False),
    "poisson": ((("lam", 1.0),), True),
    "binomial": ((("n", _REQUIRED), ("p", _REQUIRED)), True),
    "negative_binomial": ((("n", _REQUIRED), ("p", _REQUIRED)), True),
    "geometric": ((("p", _REQUIRED),), True),
    "hypergeometric": ((("ngood", _REQUIRED), ("nbad", _REQUIRED), ("nsample", _REQUIRED)),
                       True),
    "logseries": ((("p", _REQUIRED),), True),
    "zipf": ((("a", _REQUIRED),), True),
}


def _distribution(method, parameters, integer):
    """The ``N.random.<method>`` of a distribution of broadcast parameters."""
    names = [name for name, _ in parameters]

    def draw(self, *args, **kwargs):
        bound = draw.__signature__.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        values.pop("self")
        size, dtype = values.pop("size"), values.pop("dtype", None)
        return self._draw_method(method, {n: values[n] for n in names}, size,
                                 np.int64 if integer else dtype, integer=integer)

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    signature = [inspect.Parameter("self", kind)]
    signature += [inspect.Parameter(name, kind, default=default) for name, default in parameters]
    signature.append(inspect.Parameter("size", kind, default=None))
    if not integer:
        signature.append(inspect.Parameter("dtype", inspect.Parameter.KEYWORD_ONLY,
                                           default=None))
    draw.__signature__ = inspect.Signature(signature)
    draw.__name__ = draw.__qualname__ = method
    params = ", ".join(names)
    example = f"N.random.{method}({', '.join('1.0' for _ in names)}{', ' if names else ''}" \
              f"size=(3, 4))"
    dtype = "int64" if integer else "float32 unless dtype=float64"
    draw.__doc__ = (f"Draws of ``numpy.random.Generator.{method}({params}{', ' if names else ''}"
                    f"size)``, made afresh on every run ({dtype}). "
                    f"Parameters may be numbers, arrays or graph values.\n\n"
                    f"        Example: ``{example}``")
    return draw


class RandomFunctions:
    """``N.random``: draws made afresh on every run from the graph's seedable
    generator (``graphc.compile(..., seed=...)``), or at once in eager mode."""

    def __init__(self, namespace):
        self._ns = namespace

    # -- the three first kinds, kept for scalar parameters --------------------------
    def uniform(self, low=0.0, high=1.0, size=None, dtype=None):
        """Uniform draws in ``[low, high)``. Example: ``N.random.uniform(-1, 1, (3, 4))``"""
        if self._arrays(low, high):
            return self._draw_method("uniform", {"low": low, "high": high}, size, dtype)
        return self._draw("random_uniform", size, dtype, low=float(low), high=float(high))

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=None):
        """Normal draws. Example: ``N.random.normal(0.0, 0.01, (784, 10))``"""
        if self._arrays(loc, scale):
            return self._draw_method("normal", {"loc": loc, "scale": scale}, size, dtype)
        return self._draw("random_normal", size, dtype, loc=float(loc), scale=float(scale))

    def bernoulli(self, p=0.5, size=None, dtype=None):
        """1 with probability ``p``, else 0 (a dropout mask).
        Example: ``N.random.bernoulli(0.9, (100, 1024))``"""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"bernoulli: p must be in [0, 1], got {p}")
        return self._draw("random_bernoulli", size, dtype, p=float(p))

    def _draw(self, kind, size, dtype, **params):
        ns = self._ns
        dtype = ns._dtype(kind, dtype)
        if dtype.kind != "f":
            raise DTypeError(f"{kind}: random draws need a float dtype, got {dtype}")
        size = () if size is None else size
        return ns._op(kind, [], shape=ns._shape(kind, size), dtype=dtype, **params)

    def _arrays(self, *values) -> bool:
        return any(self._ns._is_value(v) or np.ndim(v) > 0 for v in values)

    # -- integers, choices and permutations --------------------------------------------
    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        """Integers in ``[low, high)`` (``[0, low)`` without ``high``; ``high``
        included with ``endpoint``), int64 unless ``dtype``.

        Example: ``N.random.integers(0, 10, size=(3, 4))``
        """
        opname = "random.integers"
        dtype = self._ns._dtype(opname, dtype)
        if dtype.kind not in "iub":
            raise DTypeError(f"{opname}: dtype must be an integer or bool dtype, got {dtype}")
        static, names, arrays = self._split({"low": low, "high": high})
        shape = self._batch_shape(opname, [a.shape for a in arrays], size)
        static.update(size=shape, dtype=dtype, endpoint=bool(endpoint))
        return self._emit("integers", static, names, arrays, shape, dtype)

    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        """Draws from ``a``'s elements along ``axis`` (from ``range(a)`` for a number),
        with or without replacement, with probabilities ``p``; ``size`` is static.

        Example: ``N.random.choice(x, size=8, replace=False)``
        """
        ns = self._ns
        if not ns._is_value(a) and np.ndim(a) == 0:
            population, array = operator.index(a), None
        else:
            array = ns._lift(a if ns._is_value(a) else np.asarray(a))
            if array.ndim == 0:
                raise RandomArgumentError("random.choice: a must be a positive integer or at "
                                          "least 1-dimensional")
            axis = normalize_axis("random.choice", axis, array.ndim)
            population = array.shape[axis]
        shape = () if size is None else ns._shape("random.choice", size)
        static, names, arrays = self._split({"p": p})
        static.update(a=population, size=shape, replace=bool(replace), shuffle=bool(shuffle))
        drawn = self._emit("choice", static, names, arrays, shape, np.dtype(np.int64))
        return drawn if array is None else ns.take(array, drawn, axis=axis)

    def permutation(self, x, axis=0):
        """A random ordering of ``range(x)`` for a number, else of ``x`` along ``axis``.

        Example: ``N.random.permutation(x)``
        """
        ns = self._ns
        if not ns._is_value(x) and np.ndim(x) == 0:
            n = operator.index(x)
            if n < 0:
                raise RandomArgumentError(f"random.permutation: negative length {n}")
            return self._emit("permutation", {"x": n}, [], [], (n,), np.dtype(np.int64))
        x = ns._lift(x if ns._is_value(x) else np.asarray(x))
        if x.ndim == 0:
            raise RandomArgumentError("random.permutation: x must be an integer or at least "
                                      "1-dimensional")
        axis = normalize_axis("random.permutation", axis, x.ndim)
        return ns.take(x, self.permutation(x.shape[axis]), axis=axis)

    def permuted(self, x, axis=None, out=None):
        """``x`` with the elements of each slice along ``axis`` shuffled independently
        (``None``: all elements of the flattened array). Example: ``N.random.permuted(x, 1)``"""
        ns = self._ns
        if out is not None:
            raise TypeError("random.permuted: out= is not supported: graph values are never "
                            "written in place")
        x = ns._lift(x if ns._is_value(x) else np.asarray(x))
        static = {} if axis is None else {"axis": normalize_axis("random.permuted", axis,
                                                                 x.ndim)}
        if x.size == 0:
            return x
        # the shuffles depend on the shape only: shuffling the flat positions of x
        # draws what shuffling x would, and one gather applies them
        numbers = ns._constant(np.arange(x.size, dtype=np.int64).reshape(x.shape))
        positions = self._emit("permuted", static, ["x"], [numbers], x.shape,
                               np.dtype(np.int64))
        return ns.getitem(ns.ravel(x), positions)

    # -- distributions of vectors ----------------------------------------------------------
    def _event_draw(self, name, params, size, dtype, batch_of, event, integer=False,
                    **options):
        opname = f"random.{name}"
        dtype = self._draw_dtype(opname, dtype, integer)
        static, names, arrays = self._split(params)
        static.update(options)
        shapes = dict(zip(names, (a.shape for a in arrays)))
        batch = self._batch_shape(opname, batch_of(shapes), size)
        static["size"] = None if size is None else batch
        return self._emit(name, static, names, arrays, batch + (event(shapes),), dtype)

    def dirichlet(self, alpha, size=None, *, dtype=None):
        """Draws from the Dirichlet distribution of the 1-D ``alpha``: shape
        ``size + (len(alpha),)``. Example: ``N.random.dirichlet([1.0, 2.0, 3.0], 5)``"""
        alpha = self._vector("random.dirichlet", "alpha", alpha)
        return self._event_draw("dirichlet", {"alpha": alpha}, size, dtype, lambda s: [],
                                lambda s: s["alpha"][-1])

    def multivariate_normal(self, mean, cov, size=None, check_valid="warn", tol=1e-8, *,
                            method="svd", dtype=None):
        """Draws from the normal distribution of the 1-D ``mean`` and the matrix
        ``cov``: shape ``size + (len(mean),)``.

        Example: ``N.random.multivariate_normal([0.0, 0.0], [[1.0, 0.5], [0.5, 1.0]], 100)``
        """
        mean = self._vector("random.multivariate_normal", "mean", mean)
        return self._event_draw("multivariate_normal", {"mean": mean, "cov": cov}, size,
                                dtype, lambda s: [], lambda s: s["mean"][-1],
                                check_valid=check_valid, tol=float(tol), method=method)

    def multinomial(self, n, pvals, size=None):
        """Counts of ``n`` trials over the outcomes of probabilities ``pvals`` (int64;
        shape ``size + (len(pvals),)``). Example: ``N.random.multinomial(20, [0.2, 0.8], 4)``"""
        pvals = self._vector("random.multinomial", "pvals", pvals)
        return self._event_draw("multinomial", {"n": n, "pvals": pvals}, size, None,
                                lambda s: [s.get("n", ()), s["pvals"][:-1]],
                                lambda s: s["pvals"][-1], integer=True)

    def multivariate_hypergeometric(self, colors, nsample, size=None, method="marginals"):
        """Counts of each colour in ``nsample`` draws without replacement from an urn
        holding ``colors[i]`` balls of colour ``i`` (int64; shape ``size +
        (len(colors),)``). Example: ``N.random.multivariate_hypergeometric([4, 2], 3)``"""
        colors = self._vector("random.multivariate_hypergeometric", "colors", colors,
                              np.int64)
        return self._event_draw("multivariate_hypergeometric", {"colors": colors}, size,
                                None, lambda s: [], lambda s: s["colors"][-1],
                                integer=True, nsample=operator.index(nsample),
                                method=method)

    def _vector(self, opname, name, value, dtype=None):
        """A parameter that holds one vector (at least), lifted; a number is refused."""
        ns = self._ns
        value = ns._lift(value if ns._is_value(value) else np.asarray(value, dtype))
        if value.ndim == 0:
            raise ShapeError(f"{opname}: {name} must be at least 1-dimensional, got a number")
        return value

    # -- every other distribution: one kind -------------------------------------------
    def _draw_dtype(self, opname, dtype, integer):
        ns = self._ns
        if integer:
            return np.dtype(np.int64) if dtype is None else ns._dtype(opname, dtype)
        dtype = ns._dtype(opname, dtype)
        if dtype not in FLOAT_DRAWS:
            raise DTypeError(f"{opname}: numpy.random draws float32 or float64, got {dtype}")
        return dtype

    def _split(self, params):
        """Number parameters (attributes) apart from arrays and graph values (inputs)."""
        ns, static, names, arrays = self._ns, {}, [], []
        for name, value in params.items():
            if ns._is_value(value) or np.ndim(value) > 0:
                arrays.append(ns._lift(value if ns._is_value(value) else np.asarray(value)))
                names.append(name)
            elif value is not None:
                static[name] = value.item() if isinstance(value, np.generic) else value
        return static, names, arrays

    def _draw_method(self, method, params, size, dtype, *, integer=False):
        """A ``random_draw`` of ``Generator.<method>(**params, size=size)``: its
        shape is ``size``, else the parameters' broadcast shape."""
        opname = f"random.{method}"
        dtype = self._draw_dtype(opname, dtype, integer)
        static, names, arrays = self._split(params)
        shape = self._batch_shape(opname, [a.shape for a in arrays], size)
        static["size"] = shape
        return self._emit(method, static, names, arrays, shape, dtype)

    def _emit(self, method, static, names, arrays, shape, dtype):
        if method not in DRAW_METHODS:
            raise RandomArgumentError(f"random_draw: {method!r} is not a distribution of "
                                      "numpy.random.Generator that graphc draws")
        self._trial(f"random.{method}", method, static, names, arrays)
        return self._ns._op("random_draw", arrays, method=method,
                            params=tuple(sorted(static.items())), array_params=tuple(names),
                            shape=tuple(shape), dtype=dtype)

    def _rebuild(self, parents, attrs):
        """The ``random_draw`` node a saved graph describes, built again (and checked)
        the way construction builds it. Example: ``NS.random._rebuild([], attrs)``"""
        return self._emit(attrs["method"], dict(attrs["params"]), list(attrs["array_params"]),
                          list(parents), attrs["shape"], attrs["dtype"])

    def _batch_shape(self, opname, shapes, size):
        try:
            broadcast = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ShapeError(f"{opname}: parameters of shapes {shapes} cannot be broadcast "
                             "together") from None
        if size is None:
            return broadcast
        size = self._ns._shape(opname, size)
        if not _fits(broadcast, size):
            raise ShapeError(f"{opname}: parameters of shapes {shapes} do not broadcast to "
                             f"size {size}")
        return size

    def _trial(self, opname, method, static, names, arrays):
        """Draw once while building where every parameter is known, so that NumPy's
        own checks (a negative scale, sampling more than a population without
        replacement) refuse bad parameters at the user's line."""
        known = [self._ns._known(a) for a in arrays]
        if any(k is None for k in known):
            return
        kwargs = dict(static)
        size = kwargs.get("size")
        if size is not None and math.prod(size) > TRIAL_SIZE and method != "choice":
            kwargs["size"] = None
        kwargs.update(zip(names, known))
        try:
            getattr(np.random.default_rng(0), method)(**kwargs)
        except (ValueError, TypeError, OverflowError) as exc:
            raise RandomArgumentError(f"{opname}: {exc}") from None


#: the Generator methods a ``random_draw`` may call
DRAW_METHODS = frozenset(DISTRIBUTIONS) | {
    "integers", "choice", "permutation", "permuted", "dirichlet", "multivariate_normal",
    "multinomial", "multivariate_hypergeometric", "normal", "uniform"}


def _fits(shape, size) -> bool:
    """Whether ``shape`` broadcasts to ``size`` (NumPy's rule for ``size=``)."""
    try:
        return np.broadcast_shapes(shape, size) == size
    except ValueError:
        return False


for _method, (_parameters, _integer) in DISTRIBUTIONS.items():
    setattr(RandomFunctions, _method, _distribution(_method, _parameters, _integer))
