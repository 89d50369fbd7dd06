"""The runtime helper every target's modules share (`symgrad.runtime_module` writes it into
each runtime module): an op's inputs checked, where the op is entered, against the shapes its
declaration gives. Only an array's static shape is read and compared, as Python ints, so the
check adds no operation to a `torch.compile` or `jax.jit` graph, and reads what TensorFlow
knows of a shape while it builds one."""


def _check_shapes(op, /, **declared):
    """Raise ValueError, naming the op, the input and its declared shape, unless each input
    has the shape declared: `declared[name]` is (the input, then per axis a dim's name, one
    size wherever it appears, an int, or None, not checked), a leading `...` standing for any
    number of batch axes. An input without a shape (a Python number, a list) is not checked."""
    seen = {}  # dim -> its size
    for name, (x, *axes) in declared.items():
        shape = getattr(x, "shape", None)
        batched = bool(axes) and axes[0] is ...
        try:
            extra = len(shape) - len(axes) + batched  # the leading batch axes
        except (TypeError, ValueError):  # no shape; a TensorFlow graph's of unknown rank
            continue
        if extra < 0 or (extra and not batched):
            _refuse(op, name, shape, axes)
        for dim, size in zip(axes[batched:], shape[extra:]):
            if dim is None or size is None:  # not checked; a TensorFlow graph's unknown size
                continue
            known = seen.setdefault(dim, size) if dim.__class__ is str else dim
            if size != known and known is not None:
                _refuse(op, name, shape, axes, declared if dim.__class__ is str else None, dim)


def _refuse(op, name, shape, axes, declared=None, dim=None):
    """The ValueError of `_check_shapes`: input `name` of shape `shape` is not declared
    `axes`; where the dim `dim` was read first from another input of `declared`, which."""
    written = ", ".join("..." if a is ... else "?" if a is None else str(a) for a in axes)
    comma = "," if len(axes) == 1 else ""
    raise ValueError(f"{op}: input {name} has shape {tuple(shape)}, but is declared ({written}{comma}){_sized(declared, dim)}")


def _sized(declared, dim):
    """", and K is 4 (a's axis 1)": where the dim `dim` got its size, the first input of
    `declared` (None: none) giving it one; "" where none does."""
    for other, (x, *its) in (declared or {}).items():
        batched = its[:1] == [...]
        where = [k for k, a in enumerate(its[batched:]) if a == dim]
        try:
            axis = len(x.shape) - len(its) + batched + where[0]
        except (AttributeError, IndexError, TypeError, ValueError):  # no shape, or no such dim
            continue
        if x.shape[axis] is not None:
            return f", and {dim} is {x.shape[axis]} ({other}'s axis {axis})"
    return ""
