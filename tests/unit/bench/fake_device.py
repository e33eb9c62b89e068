"""A second device on a CPU-only machine, for tests: `FakeDevice`, a torch function mode.

Tensors "on the fake device" are ordinary CPU tensors carrying a label; everything else is on
the CPU. The mode keeps CUDA's rules for them:

- `.to(FAKE)` / `.cuda()`, `module.to(FAKE)` and factories given `device=FAKE` make labelled
  tensors (copies, as a real move does); `.to("cpu")` / `.cpu()` unlabelled ones; `x.device`
  answers FAKE for a labelled tensor, so code that reads a model's device and creates tensors
  there is followed; the result of an op with a labelled input is labelled (gradients of
  labelled parameters included, and deep copies of labelled tensors).
- An op that mixes a labelled tensor with an unlabelled one of one or more dimensions raises
  `DeviceMismatch`, as CUDA raises "Expected all tensors to be on the same device"; unlabelled
  0-dim tensors (CPU scalars) mix freely, as on CUDA, and so does a cross-device `copy_`.

Inside autograd's backward nothing is checked (the engine creates the incoming gradients, on
the right device on a real GPU); that is the only blind spot, and the losses, the critic's
values and every input of a plugin are computed outside it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

FAKE = torch.device("cuda", 0)
_LABEL = "_on_fake_device"


class DeviceMismatch(RuntimeError):
    """An op mixed tensors of the fake device and the CPU."""


def on_fake(tensor: Any) -> bool:
    """Whether `tensor` is labelled as living on the fake device."""
    return isinstance(tensor, torch.Tensor) and tensor.__dict__.get(_LABEL, False)


def _label(out: Any, value: bool) -> None:
    for leaf in tree_flatten(out)[0]:
        if isinstance(leaf, torch.Tensor):
            leaf.__dict__[_LABEL] = value


def _is_fake(value: Any) -> bool:
    if isinstance(value, str) and value.startswith("cuda"):
        value = torch.device(value)
    return isinstance(value, torch.device) and value.type == FAKE.type


def _is_cpu(value: Any) -> bool:
    return (isinstance(value, str) and value == "cpu") or (
        isinstance(value, torch.device) and value.type == "cpu"
    )


class FakeDevice(TorchFunctionMode):
    """The torch function mode of the module docstring; `with FakeDevice(): ...`."""

    def __enter__(self):
        self._deepcopy = nn.Parameter.__deepcopy__

        def labelled_deepcopy(param, memo):  # a deep copy of a parameter stays on its device
            result = self._deepcopy(param, memo)
            if on_fake(param):
                _label(result, True)
            return result

        nn.Parameter.__deepcopy__ = labelled_deepcopy
        return super().__enter__()

    def __exit__(self, *exc):
        nn.Parameter.__deepcopy__ = self._deepcopy
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        # (property accessors are fresh method-wrappers at every access: compared with ==)
        if func == torch.Tensor.device.__get__:
            return FAKE if on_fake(args[0]) else func(*args)
        if func == torch.Tensor.is_cuda.__get__:
            return on_fake(args[0])
        if func == torch.Tensor.data.__set__:  # `param.data = moved`: the parameter moved
            func(*args)
            _label(args[0], on_fake(args[1]))
            return None
        if func is torch._C._nn._parse_to:  # `module.to(FAKE)` parses its target: keep it
            return func(*args, **kwargs)
        if func == torch.Tensor.grad.__get__:
            grad = func(*args)
            if grad is not None and on_fake(args[0]):
                _label(grad, True)
            return grad
        to_fake, to_cpu, args, kwargs = _device_arguments(func, args, kwargs)
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        labelled = any(on_fake(t) for t in tensors)
        if labelled and not to_fake and not to_cpu and torch._C._current_graph_task_id() == -1:
            _check_mix(func, args, tensors)
        if (to_fake or to_cpu) and func in (torch.Tensor.to, torch.Tensor.cuda):
            kwargs["copy"] = True  # a move makes a new tensor; the original stays where it was
        out = func(*args, **kwargs)
        if to_cpu and out is args[0]:  # `.cpu()` of a labelled tensor: a copy, as from a GPU
            out = out.clone()
        if to_fake or to_cpu or labelled:
            _label(out, to_fake or (labelled and not to_cpu))
        return out


def _device_arguments(func, args: tuple, kwargs: dict) -> tuple[bool, bool, tuple, dict]:
    """(moves to the fake device, moves to the CPU, args and kwargs with the fake device as cpu)."""
    if func is torch.Tensor.cuda:
        return True, False, args[:1], {}
    if func is torch.Tensor.cpu:
        return False, True, args, kwargs
    to_fake = to_cpu = False
    new_args = []
    for a in args:
        if _is_fake(a):
            to_fake, a = True, torch.device("cpu")
        elif func is torch.Tensor.to and _is_cpu(a):
            to_cpu = True
        elif func is torch.Tensor.to and isinstance(a, torch.Tensor) and a is not args[0]:
            to_fake, to_cpu = on_fake(a), not on_fake(a)  # .to(other): other's device
        new_args.append(a)
    if "device" in kwargs:
        if _is_fake(kwargs["device"]):
            to_fake, kwargs["device"] = True, torch.device("cpu")
        elif func is torch.Tensor.to and _is_cpu(kwargs["device"]):
            to_cpu = True
    return to_fake, to_cpu, tuple(new_args), kwargs


def _check_mix(func, args: tuple, tensors: list[torch.Tensor]) -> None:
    """Raise when a labelled tensor meets an unlabelled one of one or more dimensions."""
    if func in (torch.Tensor.copy_, torch._has_compatible_shallow_copy_type):  # cross-device: allowed
        return
    if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):
        # CUDA takes CPU index tensors; a value written must be on the device (or a scalar)
        tensors = [args[0]] + ([args[2]] if func is torch.Tensor.__setitem__ and len(args) > 2 else [])
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
    strays = [t for t in tensors if not on_fake(t) and t.dim() > 0]
    if strays and any(on_fake(t) for t in tensors):
        shapes = ", ".join(str(tuple(t.shape)) for t in strays)
        raise DeviceMismatch(
            f"{getattr(func, '__name__', func)}: CPU tensor(s) {shapes} meet tensors on {FAKE}"
        )
