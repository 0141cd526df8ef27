"""A stand-in for torch tensors in CPU tests of argument packing and TMA descriptors."""

import types


class FakeTorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"

    def __eq__(self, other):  # torch's dtypes are singletons: equal names, equal dtypes
        return isinstance(other, FakeTorchDtype) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class FakeTorch:
    """Enough of a torch tensor: ``data_ptr()``, ``device``, ``is_cuda``, ``get_device()``,
    ``dtype``, ``shape`` and ``stride()``."""

    def __init__(self, ptr=0x7F0000000000, *, shape=(4,), strides=(1,), dtype="float16", device_type="cuda",
                 index=0):
        self._ptr = ptr
        self.shape, self._strides = tuple(shape), tuple(strides)
        self.device = types.SimpleNamespace(type=device_type, index=index)
        self.is_cuda = device_type == "cuda"
        self.dtype = FakeTorchDtype(dtype)

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return self.device.index if self.is_cuda else -1

    def stride(self):
        return self._strides
