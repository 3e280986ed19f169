"""What a pip install of a level needs: the Requires-Dist closure of its own distributions (the
registry's `versions`), with each environment marker evaluated for this interpreter and platform
and no extras asked for, and each distribution's size on disk. A worker imports more than this
wherever a framework imports what happens to be installed (TensorFlow imports JAX, SciPy, pandas,
matplotlib when they are there): the bill counts what is required, and shows the rest apart.

    normal(name) -> str                          PEP 503's normal form: "Tensorflow_CPU" -> "tensorflow-cpu"
    closure(names) -> {"of", "closure", "missing"}   read from the installed metadata (the runner's)
"""

import importlib.metadata
import re
from collections.abc import Callable, Iterable

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def required_names(dist: importlib.metadata.Distribution, environment: dict[str, str]) -> list[str]:
    """The distributions `dist` requires here: its Requires-Dist whose marker holds for this
    interpreter and platform with no extra asked (`extra == "and-cuda"` is false)."""
    names = []
    for text in dist.requires or ():
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue  # metadata pip itself would refuse: nothing it would install
        if requirement.marker is None or requirement.marker.evaluate({**environment, "extra": ""}):
            names.append(requirement.name)
    return names


SizeOf = Callable[[str], tuple[str, int, int]]  # a distribution's (version, bytes on disk, files)


def closure(names: Iterable[str], sizes: SizeOf, also: Iterable[str] = ()) -> dict:
    """{"of": the installed ones among `names` (metadata's spelling), "closure": {name: {version,
    bytes, files}} for them and every distribution they require, transitively, "missing": what they
    require that is not installed here (sorted)}. `names` not installed are passed over: a level
    lists both spellings of a framework (tensorflow, tensorflow-cpu) and one of them is here.
    sizes: memory.distribution_size (a test's stand-in where it fabricates distributions).
    also: distributions the harness's own code in the worker needs besides the level's (h5py, which
    reads the weights), in the closure but never in "of"."""
    environment = {key: str(value) for key, value in default_environment().items()}
    found: dict[str, dict] = {}
    seen: set[str] = set()
    missing: set[str] = set()
    of: list[str] = []
    todo = [(name, True) for name in names] + [(name, False) for name in also]
    while todo:
        name, own = todo.pop(0)
        key = normal(name)
        if key in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            if not own:
                missing.add(key)
            continue
        seen.add(key)
        spelled = dist.metadata["Name"]
        if own:
            of.append(spelled)
        version, size, files = sizes(spelled)
        found[spelled] = {"version": version, "bytes": size, "files": files}
        todo += [(required, False) for required in required_names(dist, environment)]
    return {"of": of, "closure": dict(sorted(found.items())), "missing": sorted(missing)}
