"""Stand-ins for torch tensors, CuPy/Numba (``__cuda_array_interface__``) and DLPack arrays in
CPU tests of argument typing and packing, TMA descriptors and the launch path."""

import types

from gluonkit.runtime import args as rt_args


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


class FakeCAI:
    """A device array known only through ``__cuda_array_interface__`` (like a Numba array)."""

    def __init__(self, ptr, typestr="<f4", shape=(4,)):
        self.__cuda_array_interface__ = {"data": (ptr, False), "typestr": typestr,
                                         "shape": shape, "version": 3}


class FakeCuPy(FakeCAI):
    """CuPy-like: CAI plus ``__dlpack_device__`` (which is what tells us its device)."""

    def __init__(self, ptr, device_id):
        super().__init__(ptr)
        self.device_id = device_id

    def __dlpack_device__(self):
        return (rt_args.DLPACK_CUDA, self.device_id)


class DLPackOnly:
    """Wraps a numpy array but exposes only the DLPack protocol, claiming ``device``."""

    def __init__(self, array, device=(rt_args.DLPACK_CUDA, 0)):
        self.array = array
        self.device = device

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.device
