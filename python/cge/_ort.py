# ONNX Runtime's Python API where it applies to cge: SessionOptions,
# RunOptions, GraphOptimizationLevel, ModelMetadata, OrtValue, IOBinding
# and the module-level provider queries, so that code written for
# `onnxruntime` runs with `import cge as ort`. docs/python.md has the table.
import ctypes
import enum
import threading
import warnings

import numpy as np

from ._session import Error, dtype_to_numpy, numpy_to_dtype, _type_name

CPU_PROVIDER = "CPUExecutionProvider"


class GraphOptimizationLevel(enum.IntEnum):
    """ORT's levels (same numbers); cge maps them onto its 0-3."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


_CGE_LEVEL = {0: 0, 1: 1, 2: 2, 99: 3}


def cge_opt_level(level):
    """cge's level (0-3) of an ORT GraphOptimizationLevel (or its number)."""
    try:
        return _CGE_LEVEL[int(level)]
    except (KeyError, TypeError, ValueError):
        raise Error("[session] graph_optimization_level %r is not one of "
                    "GraphOptimizationLevel's (ORT_DISABLE_ALL, ORT_ENABLE_BASIC, "
                    "ORT_ENABLE_EXTENDED, ORT_ENABLE_ALL)" % (level,), "session",
                    "CGE_ERR_INVALID_ARG") from None


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class SessionOptions:
    """ORT's SessionOptions. What cge uses: intra_op_num_threads (the CPU
    device's threads, 0: $CGE_NUM_THREADS or every core),
    graph_optimization_level (ORT_DISABLE_ALL/BASIC/EXTENDED/ALL -> cge
    0/1/2/3), enable_profiling and profile_file_prefix (end_profiling()
    writes a Chrome trace), optimized_model_filepath (the compiled plan is
    saved there as a .cgm, not as ONNX), add_free_dimension_override_by_name
    (cge's dim_values), register_custom_ops_library (cge.load_op_library),
    and cge's own ``precision`` ("fp32" or "bf16").
    The rest (inter_op_num_threads, execution_mode, log_*, memory arena
    switches, session config entries) is accepted and kept, not used.

    cge's distributed fields (docs/distributed.md), for processes started
    by mpirun: dist ("none" or "env": the communicator from mpirun's world),
    dist_tp (tensor-parallel degree, the world size; 0 or 1: none), dist_pp
    (pipeline stages, the world size; not with dist_tp), dist_micro_batches
    (with dist_pp: the batch, axis 0, split into this many parts in flight),
    dist_timeout_ms (bound of every collective, 0: 30 s), dist_world_size and
    dist_rank (nonzero world size: checked against the world)."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.enable_profiling = False
        self.profile_file_prefix = "cge_profile"
        self.optimized_model_filepath = ""
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self._config = {}
        self._free_dims = {}
        self._custom_op_libraries = []
        # cge's own: "fp32" (default) or "bf16" (Conv, MatMul, Gemm in bfloat16
        # with float32 accumulation; docs/python.md).
        self.precision = "fp32"
        self.dist = "none"
        self.dist_tp = 0
        self.dist_pp = 0
        self.dist_micro_batches = 0
        self.dist_timeout_ms = 0
        self.dist_world_size = 0
        self.dist_rank = 0

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        if key not in self._config:
            raise Error("[session] SessionOptions has no config entry '%s'" % key, "session",
                        "CGE_ERR_NOT_FOUND")
        return self._config[key]

    def add_free_dimension_override_by_name(self, dim_name, dim_value):
        """Fix the symbolic dimension `dim_name` (an ONNX dim_param) to `dim_value`."""
        self._free_dims[str(dim_name)] = int(dim_value)

    def register_custom_ops_library(self, library_path):
        from .builder import load_op_library
        load_op_library(library_path)
        self._custom_op_libraries.append(str(library_path))


class RunOptions:
    """ORT's RunOptions: log_severity_level, log_verbosity_level, logid and
    run config entries are accepted and kept, not used. ``terminate = True``
    (from any thread) stops the runs using these options that are in flight
    (they raise the [runtime] "run cancelled" error) and refuses new ones
    until it is set back to False, as in ONNX Runtime."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self._terminate = False
        self._runs = set()       # cancel tokens of the runs in flight with these options
        self._lock = threading.Lock()
        self.only_execute_path_to_fetches = False
        self._config = {}

    @property
    def terminate(self):
        return self._terminate

    @terminate.setter
    def terminate(self, value):
        from ._lib import lib
        with self._lock:
            self._terminate = bool(value)
            if self._terminate:
                for token in self._runs:
                    lib.cge_cancel_request(token)

    def _add_run(self, token):
        """Under the lock, so that terminate either refuses the run or reaches it."""
        with self._lock:
            if self._terminate:
                return False
            self._runs.add(token)
            return True

    def _remove_run(self, token):
        with self._lock:
            self._runs.discard(token)

    def add_run_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key):
        if key not in self._config:
            raise Error("[session] RunOptions has no config entry '%s'" % key, "session",
                        "CGE_ERR_NOT_FOUND")
        return self._config[key]


class ModelMetadata:
    """ORT's ModelMetadata: producer_name, graph_name, graph_description,
    domain, description, version, custom_metadata_map."""

    def __init__(self, producer_name="", graph_name="", graph_description="", domain="",
                 description="", version=0, custom_metadata_map=None):
        self.producer_name, self.graph_name = producer_name, graph_name
        self.graph_description, self.domain = graph_description, domain
        self.description, self.version = description, version
        self.custom_metadata_map = dict(custom_metadata_map or {})

    def __repr__(self):
        return ("ModelMetadata(producer_name=%r, graph_name=%r, domain=%r, version=%r)"
                % (self.producer_name, self.graph_name, self.domain, self.version))


def model_metadata(source):
    """Metadata of an ONNX model (a path or its bytes), read with the onnx
    package (without external data)."""
    import onnx
    if isinstance(source, (bytes, bytearray, memoryview)):
        m = onnx.load_from_string(bytes(source))
    else:
        m = onnx.load(source, load_external_data=False)
    return ModelMetadata(m.producer_name, m.graph.name, m.graph.doc_string, m.domain,
                         m.doc_string, int(m.model_version),
                         {p.key: p.value for p in m.metadata_props})


def _check_device(device_type, device_id=0):
    if str(device_type).lower() != "cpu":
        raise Error("[session] device '%s' is not available: cge's Python API runs on the CPU "
                    "only (CPUExecutionProvider)" % (device_type,), "session",
                    "CGE_ERR_INVALID_ARG")


def _numpy_type(element_type):
    """numpy dtype of ORT's element_type (a numpy type, dtype, or 'tensor(float)')."""
    if isinstance(element_type, str) and element_type.startswith("tensor("):
        for k in range(1, 17):
            if _type_name(k) == element_type:
                return dtype_to_numpy(k)
        raise Error("[session] unknown element type %r" % element_type, "session",
                    "CGE_ERR_DTYPE")
    return np.dtype(element_type)


class OrtValue:
    """ORT's OrtValue for CPU tensors: a numpy array (kept, not copied, as
    ORT's ortvalue_from_numpy)."""

    def __init__(self, array):
        self._array = array

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0):
        _check_device(device_type, device_id)
        return OrtValue(np.ascontiguousarray(numpy_obj))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0):
        _check_device(device_type, device_id)
        return OrtValue(np.empty(tuple(shape), dtype=_numpy_type(element_type)))

    def numpy(self):
        return self._array

    def shape(self):
        return list(self._array.shape)

    def data_type(self):
        return _type_name(numpy_to_dtype(self._array.dtype))

    def element_type(self):
        return self._array.dtype.type

    def device_name(self):
        return "cpu"

    def data_ptr(self):
        return self._array.ctypes.data

    def is_tensor(self):
        return True

    def has_value(self):
        return True

    def __repr__(self):
        return "OrtValue(%s %s)" % (self.data_type(), self.shape())


class IOBinding:
    """ORT's IOBinding. When every output is bound to a buffer (an OrtValue,
    or a buffer_ptr with its type and shape), the run is zero-copy: the
    kernels read the bound inputs and write the bound outputs in place
    (cge_run_options.bind_buffers), and a replay keeps its recording while
    the same buffers come back, so a decode loop that binds its caches once
    copies nothing per step. Outputs bound without a buffer are allocated per
    run (then the run copies, as a plain run does). Bound buffers must stay
    valid, and inputs unchanged, until the run ends."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}
        self._outputs = {}      # name -> None (allocate) or an OrtValue to fill
        self._results = []

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        _check_device(device_type, device_id)
        dt = _numpy_type(element_type)
        shape = tuple(int(d) for d in shape)
        n = int(np.prod(shape)) if shape else 1
        if n and not buffer_ptr:
            raise Error("[session] bind_input '%s': buffer_ptr is NULL" % name, "session",
                        "CGE_ERR_INVALID_ARG")
        if n:
            raw = (ctypes.c_uint8 * (n * dt.itemsize)).from_address(int(buffer_ptr))
            arr = np.frombuffer(raw, dtype=dt).reshape(shape)
        else:
            arr = np.empty(shape, dtype=dt)
        self._inputs[name] = arr

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue.numpy()

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None,
                    buffer_ptr=None):
        _check_device(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise Error("[session] bind_output '%s': a buffer_ptr needs element_type and shape"
                        % name, "session", "CGE_ERR_INVALID_ARG")
        dt = _numpy_type(element_type)
        shape = tuple(int(d) for d in shape)
        n = int(np.prod(shape)) if shape else 1
        raw = (ctypes.c_uint8 * (n * dt.itemsize)).from_address(int(buffer_ptr))
        self._outputs[name] = OrtValue(np.frombuffer(raw, dtype=dt).reshape(shape))

    def bind_ortvalue_output(self, name, ortvalue):
        self._outputs[name] = ortvalue

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._outputs = {}
        self._results = []

    def synchronize_inputs(self):
        pass

    def synchronize_outputs(self):
        pass

    def get_outputs(self):
        """The last run's outputs, as OrtValues, in binding order."""
        return list(self._results)

    def copy_outputs_to_cpu(self):
        """The last run's outputs as numpy arrays (copies)."""
        return [v.numpy().copy() for v in self._results]

    def _run(self, run_options):
        names = list(self._outputs)
        if names and all(self._outputs[n] is not None for n in names):
            dests = {n: self._outputs[n].numpy() for n in names}
            self._session._run_bound(self._inputs, dests, run_options)
            self._results = [self._outputs[n] for n in names]
            return
        arrays = self._session.run(names, self._inputs, run_options)
        results = []
        for name, arr in zip(names, arrays):
            dest = self._outputs[name]
            if dest is None:
                results.append(OrtValue(arr))
                continue
            d = dest.numpy()
            if d.dtype != arr.dtype or d.shape != arr.shape:
                raise Error("[session] output '%s' is %s %s; the buffer bound for it is %s %s"
                            % (name, arr.dtype, list(arr.shape), d.dtype, list(d.shape)),
                            "session", "CGE_ERR_SHAPE")
            d[...] = arr
            results.append(dest)
        self._results = results


def get_available_providers():
    return [CPU_PROVIDER]


def get_all_providers():
    return [CPU_PROVIDER]


def get_device():
    return "CPU"


def set_default_logger_severity(level):
    """Accepted; cge reports errors by exception and does not log."""


def set_seed(seed):
    """Accepted; cge's operators are deterministic apart from the random ones,
    which take their seed attribute."""


def check_providers(providers, provider_options=None):
    """The providers cge will use for a requested list: only CPU; others
    warn (as ORT does for a provider it was not built with) and are dropped."""
    if providers is None:
        return [CPU_PROVIDER]
    names = []
    for p in providers:
        name = p[0] if isinstance(p, (tuple, list)) else p
        if name == CPU_PROVIDER:
            names.append(name)
        else:
            warnings.warn("cge: provider %r is not available (cge's Python API has only "
                          "%s); using %s" % (name, CPU_PROVIDER, CPU_PROVIDER), RuntimeWarning,
                          stacklevel=3)
    return [CPU_PROVIDER]
