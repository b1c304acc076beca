"""Tensors during tracing: an FX node plus a fake-tensor example value."""

from __future__ import annotations

import builtins
import operator
from typing import Any, Sequence

import torch
import torch.fx

from framejit.contracts import GuardKind, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.sources import AttrSource
from framejit.variables.constant import ConstantVariable, ObjectVariable
from framejit.variables.containers import BoundMethod
from framejit.variables import wrapper_subclass
from framejit.variables.symbolic import has_symbolic, plain_number
from framejit.variables.wrapper_subclass import is_wrapper_subclass_type

# Attributes whose value only depends on guarded metadata (or the fake's autograd state).
_META_ATTRS = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "requires_grad",
        "is_cuda",
        "is_cpu",
        "layout",
        "is_sparse",
        "is_quantized",
        "is_meta",
        "is_mkldnn",
        "is_complex_dtype",
        "is_nested",
        "itemsize",
        "nbytes",
    }
)
# Methods whose result depends only on guarded metadata: folded into constants (torch_special's pure queries too).
META_METHODS = frozenset(
    {
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "stride",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "element_size",
        "get_device",
        "is_signed",
        "storage_offset",
        "__len__",
        "is_inference",
    }
)
# Attributes that are tensors computed from the tensor: graph ops.
_SCALED_PRODUCTS = frozenset({"addcdiv", "addcdiv_", "addcmul", "addcmul_"})
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})
# Reading data out of a tensor needs its value: a data-dependent graph break.
_DATA_METHODS = frozenset(
    {
        "item",
        "tolist",
        "__bool__",
        "__int__",
        "__float__",
        "__index__",
        "data_ptr",
        "__array__",
        "nonzero_static_check",
    }
)


def _plain(value: Any) -> Any:
    """Sizes as Python ints: a dim that was symbolic and is now known (specialised) is a SymInt of a number,
    which must not reach Python code as a constant."""
    if isinstance(value, (tuple, list)):
        return type(value)(plain_number(v) for v in value)
    return plain_number(value)


class TensorVariable(Variable):
    def __init__(
        self, node: torch.fx.Node, example: torch.Tensor, source: Any = None, py_type: type = torch.Tensor
    ) -> None:
        self.node = node
        self.example = example
        self.source = source
        self.py_type = py_type

    def python_type(self) -> type:
        return self.py_type

    def set_requires_grad(self, tx: Tracer, value: Variable) -> None:
        """t.requires_grad = False for a tensor the graph computes: an in-place op of the graph, whose result later
        ops use. On a graph input it would change the caller's tensor, which the graph must not do; and a graph
        cannot make a leaf that requires grad (AOTAutograd drops the flag: its outputs would not require grad), so
        `= True` runs as Python and the rest of the frame takes the leaf as an input."""
        flag = value.as_python_constant() if value.is_python_constant() else None
        if self.node.op == "placeholder" or not isinstance(flag, bool):
            unsupported(
                "setting requires_grad on a tensor from outside the graph (or to a value known only at run time)",
                BreakCode.SIDE_EFFECT,
            )
        if flag:
            unsupported(
                "making a tensor the graph computes a leaf that requires grad (compiled graphs cannot hand "
                "out new leaves)",
                BreakCode.SIDE_EFFECT,
            )
        try:
            self.example.requires_grad_(flag)  # what eager refuses (a non-leaf set to False) is refused here
        except RuntimeError as e:
            unsupported(f"setting requires_grad raised {e}", BreakCode.OP_ERROR)
        node = tx.output.create_node(tx, "call_method", "requires_grad_", (self.node, flag), {})
        node.meta["example_value"] = self.example
        self.node = node

    def as_node_arg(self) -> Any:
        return self.node

    def as_fake(self) -> Any:
        return self.example

    def truth(self, tx: Tracer) -> bool:
        unsupported(
            "generic_jump TensorVariable(): branching on the value of a tensor (data-dependent control flow)",
            BreakCode.TENSOR_BRANCH,
        )

    def unpack(self, tx: Tracer) -> list[Variable]:
        if self.example.dim() == 0:
            unsupported("iteration over a 0-d tensor", BreakCode.ITER)
        # as Tensor.__iter__: the rows are unbind's views (autograd forbids writing in place into those)
        return tx.output.call_graph_op(tx, "call_method", "unbind", [self, ConstantVariable(0)], {}).unpack(tx)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if is_wrapper_subclass_type(self.py_type):  # its own attributes first (DTensor's placements, to_local)
            own = wrapper_subclass.getattr_of(tx, self, name)
            if own is not None:
                return own
        if name in _META_ATTRS:
            value = getattr(self.example, name)
            if has_symbolic(value):  # a dynamic size: its value comes from the graph
                return tx.output.call_graph_op(tx, "call_method", "size", [self], {})
            return ConstantVariable(_plain(torch.Size(value) if name == "shape" else value))
        if name in _TENSOR_ATTRS:
            return tx.output.call_graph_op(tx, "call_function", builtins.getattr, [self, ConstantVariable(name)], {})
        if name == "grad":
            return self._grad(tx)
        if name == "is_leaf":
            return ConstantVariable(self._is_leaf(tx))
        if name == "__class__":  # its type (guarded with the tensor), not a method: callable() is true of classes
            return ObjectVariable(self.python_type(), AttrSource(self.source, name) if self.source else None)
        if callable(getattr(torch.Tensor, name, None)):
            return BoundMethod(self, name)
        if not hasattr(torch.Tensor, name):
            unsupported(f"'Tensor' object has no attribute {name!r}", BreakCode.MISSING_ATTR)
        unsupported(f"tensor attribute {name!r}", BreakCode.TENSOR_ATTR)

    def _grad(self, tx: Tracer) -> Variable:
        """A graph input's .grad is read from the real tensor, as another input (None guarded as None): no backward
        runs inside a graph to change it. A tensor the graph makes has no .grad the graph could know."""
        if self.node.op != "placeholder" or self.source is None:
            unsupported("reading .grad of a tensor the graph computes", BreakCode.TENSOR_ATTR)
        real = next(i.value for i in tx.output.inputs if i.node is self.node)
        return tx.wrap(real.grad, AttrSource(self.source, "grad"))

    def _is_leaf(self, tx: Tracer) -> bool:
        """A graph input's is the real tensor's, guarded (a later call may pass one an op computed); a value the
        graph computes has its fake's (autograd records the trace's ops on fakes as on real tensors)."""
        if self.node.op != "placeholder" or self.source is None:
            return self.example.is_leaf
        real = next(i.value for i in tx.output.inputs if i.node is self.node)
        tx.output.guards.add(AttrSource(self.source, "is_leaf"), GuardKind.EQUALS, real.is_leaf)
        return real.is_leaf

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if is_wrapper_subclass_type(self.py_type):
            own = wrapper_subclass.call_method_of(tx, self, name, args, kwargs)
            if own is not None:
                return own
        if name == "item" and not args and not kwargs and tx.output.shapes.env.allow_scalar_outputs:
            return tx.output.call_graph_op(tx, "call_method", name, [self], {})  # an unbacked symbol (fullgraph)
        if name == "numpy" and not args and set(kwargs) <= {"force"}:
            from framejit.variables.numpy_arrays import tensor_to_array

            force = kwargs.get("force", ConstantVariable(False))
            if not force.is_python_constant():
                unsupported("Tensor.numpy(force=...) with a force known only at run time", BreakCode.NUMPY)
            return tensor_to_array(tx, self, bool(force.as_python_constant()))
        if name in _DATA_METHODS:
            unsupported(f"Tensor.{name}() reads the tensor's data (data-dependent)", BreakCode.DATA_DEPENDENT)
        if name in META_METHODS:
            consts = [a.as_python_constant() for a in args]
            kw = {k: v.as_python_constant() for k, v in kwargs.items()}
            value = getattr(self.example, name)(*consts, **kw)
            if has_symbolic(value):
                return tx.output.call_graph_op(tx, "call_method", name, [self, *args], kwargs)
            return tx.wrap_constant(_plain(value))
        if name == "type" and not args and not kwargs:
            return ConstantVariable(self.example.type())
        if name == "requires_grad_" and len(args) + len(kwargs) <= 1:
            flag = args[0] if args else kwargs.get("requires_grad", ConstantVariable(True))
            if flag.is_python_constant() and flag.as_python_constant() is True and self.example.requires_grad:
                return self  # already so (a hook making an embedding's output require grad): nothing changes
        if name == "requires_grad_" and self.node.op != "placeholder" and len(args) + len(kwargs) <= 1:
            # on a tensor the graph makes: as `t.requires_grad = flag`; it returns t
            self.set_requires_grad(tx, args[0] if args else kwargs.get("requires_grad", ConstantVariable(True)))
            return self
        value = kwargs.get("value")
        if name in _SCALED_PRODUCTS and isinstance(value, TensorVariable) and len(args) == 2 and len(kwargs) == 1:
            # the scale as a 0-d tensor (an optimizer's step size under compile): its Scalar would be read as a
            # Python number; the same sum, in tensor ops
            combine = torch.div if name.startswith("addcdiv") else torch.mul
            product = tx.output.call_graph_op(tx, "call_function", combine, list(args), {})
            scaled = tx.output.call_graph_op(tx, "call_function", torch.mul, [product, value], {})
            total = "add_" if name.endswith("_") else "add"
            return tx.output.call_graph_op(tx, "call_method", total, [self, scaled], {})
        if name in ("__getitem__", "__setitem__"):
            from framejit.variables.operators import call_operator

            return call_operator(tx, getattr(operator, name.strip("_")), [self, *args])
        return tx.output.call_graph_op(tx, "call_method", name, [self, *args], kwargs)

    def __repr__(self) -> str:
        return f"TensorVariable({self.node.name}: {tuple(self.example.shape)} {self.example.dtype})"
