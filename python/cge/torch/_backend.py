# A torch.compile backend ("cge") for PyTorch >= 2, where TorchDynamo hands
# backends an FX graph and example inputs. PyTorch 1.13 has no torch.compile:
# there the registration does nothing.
import torch


def backend(gm, example_inputs):
    """torch.compile backend: compile the Dynamo graph with cge (graph breaks
    inside it run in PyTorch)."""
    from ._compile import compile as cge_compile
    return cge_compile(gm, tuple(example_inputs), fullgraph=False)


def has_torch_compile():
    return hasattr(torch, "compile") and int(torch.__version__.split(".")[0]) >= 2


def register_backend():
    """Register "cge" with TorchDynamo, where it exists; True if registered."""
    if not has_torch_compile():
        return False
    try:
        from torch._dynamo import register_backend as reg
    except ImportError:  # pragma: no cover - depends on the PyTorch version
        return False
    try:
        reg(name="cge")(backend)
    except Exception:  # pragma: no cover - already registered (module reloaded)
        pass
    return True
