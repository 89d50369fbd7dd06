"""symgrad: derive gradients of ops declared with SymPy, emit numpy and TensorFlow modules."""

from symgrad.declare import const_input, dims, elementwise, indices, op, stop_gradient, tensor

__version__ = "0.1.0"
__all__ = ["const_input", "dims", "elementwise", "indices", "op", "stop_gradient", "tensor", "__version__"]
