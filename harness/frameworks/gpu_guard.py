"""The one "no GPU here" refusal of every framework's set-up (TensorFlow, JAX, PyTorch, CuPy):
Unavailable naming the framework, what it sees and the install that fixes it."""

from harness.errors import Unavailable


def require_gpu(seen: bool, framework: str, fix: str, aside: str = "") -> None:
    """Unavailable("<framework> sees no GPU<aside>; on a GPU server <fix>") unless `seen`."""
    if not seen:
        raise Unavailable(f"{framework} sees no GPU{aside}; on a GPU server {fix}")
