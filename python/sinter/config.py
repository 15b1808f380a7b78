"""tf.config over sinter's device registry (sinter/device.h): the CPU, split into logical
devices on request, and GPUs where the build has CUDA and the machine a driver."""
import collections
import ctypes as C
import types

from . import _lib

_lib_ = _lib.lib
PhysicalDevice = collections.namedtuple("PhysicalDevice", "name device_type")
LogicalDevice = collections.namedtuple("LogicalDevice", "name device_type")
_KINDS = {0: "CPU", 1: "GPU"}
_configured = {}


class LogicalDeviceConfiguration:
    def __init__(self, memory_limit=None, experimental_priority=None,
                 experimental_device_ordinal=None):
        self.memory_limit = memory_limit

    def __repr__(self):
        return f"LogicalDeviceConfiguration(memory_limit={self.memory_limit})"


def _devices():
    out = []
    for i in range(_lib_.sn_device_count()):
        info = _lib.DeviceInfo()
        _lib.check(_lib_.sn_device_get(i, C.byref(info)), "devices")
        out.append(info)
    return out


def list_logical_devices(device_type=None):
    devs = []
    for d in _devices():
        kind = _KINDS.get(d.kind, "CPU")
        if device_type is None or device_type.upper() == kind:
            devs.append(LogicalDevice(f"/device:{kind}:{d.index}", kind))
    return devs


def list_physical_devices(device_type=None):
    """One CPU (all its cores), and each GPU."""
    out = []
    if device_type is None or device_type.upper() == "CPU":
        out.append(PhysicalDevice("/physical_device:CPU:0", "CPU"))
    if device_type is None or device_type.upper() == "GPU":
        gpus = sorted({d.index for d in _devices() if d.kind == 1})
        out += [PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in gpus]
    return out


def set_logical_device_configuration(device, logical_devices):
    """Splits the CPU into len(logical_devices) logical devices (sn_device_configure_cpu);
    call it before the devices are used, as in TensorFlow."""
    if device.device_type != "CPU":
        raise NotImplementedError("set_logical_device_configuration: sinter splits the CPU "
                                  "only")
    if any(c.memory_limit for c in logical_devices):
        raise NotImplementedError("LogicalDeviceConfiguration(memory_limit=...): CPU devices "
                                  "share host memory in sinter")
    _lib.check(_lib_.sn_device_configure_cpu(len(logical_devices)),
               "set_logical_device_configuration")
    _configured[device.name] = list(logical_devices)


def get_logical_device_configuration(device):
    return _configured.get(device.name)


def get_visible_devices(device_type=None):
    return list_physical_devices(device_type)


threading = types.SimpleNamespace(
    set_intra_op_parallelism_threads=lambda n: _lib_.sn_set_num_threads(int(n)) if n else None,
    get_intra_op_parallelism_threads=lambda: _lib_.sn_num_threads(),
    set_inter_op_parallelism_threads=lambda n: None,
    get_inter_op_parallelism_threads=lambda: 1)

experimental = types.SimpleNamespace(
    list_physical_devices=list_physical_devices,
    list_logical_devices=list_logical_devices,
    set_virtual_device_configuration=set_logical_device_configuration,
    VirtualDeviceConfiguration=LogicalDeviceConfiguration)
