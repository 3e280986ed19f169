"""What a pip install of a level needs: the Requires-Dist closure of its own distributions (the
registry's `versions`), with each environment marker evaluated for this interpreter and platform
and no extras asked for, and each distribution's size on disk. A worker imports more than this
wherever a framework imports what happens to be installed (TensorFlow imports JAX, SciPy, pandas,
matplotlib when they are there): the bill counts what is required, and shows the rest apart.

    normal(name) -> str                          PEP 503's normal form: "Tensorflow_CPU" -> "tensorflow-cpu"
    closure(names) -> {"of", "closure", "missing", "through_extras"}   from the installed metadata
    through_extras(names) -> [name]              what they reach with every extra asked (the GPU's bill)
    reached(start) -> iterator                   the Requires-Dist walk both take
"""

import importlib.metadata
import re
from collections.abc import Callable, Iterable, Iterator

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


Wanted = tuple[str, frozenset[str]]  # a distribution and the extras asked of it: jax-cuda13-plugin[with-cuda]


def required_names(dist: importlib.metadata.Distribution, environment: dict[str, str],
                   extras: Iterable[str] = ()) -> list[Wanted]:
    """The distributions `dist` requires here, each with the extras it asks of them: its
    Requires-Dist whose marker holds for this interpreter and platform, with none of its extras
    asked (`extra == "and-cuda"` is false) but `extras`, as pip reads `pip install dist[extras]`."""
    asked = ["", *extras]
    found = []
    for text in dist.requires or ():
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue  # metadata pip itself would refuse: nothing it would install
        marker = requirement.marker
        if marker is None or any(marker.evaluate({**environment, "extra": extra}) for extra in asked):
            found.append((requirement.name, frozenset(requirement.extras)))
    return found


def reached(start: Iterable[tuple[str, frozenset[str] | None, bool]]
            ) -> Iterator[tuple[str, importlib.metadata.Distribution | None, bool]]:
    """What a pip install of `start` brings, following Requires-Dist with markers evaluated here,
    breadth first. `start`: (a distribution, the extras asked of it (None: every extra it provides),
    a mark). Yields (its name as asked, its installed metadata or None where it is not installed,
    the mark where it is one of `start`, else False); each (distribution, extras asked) once."""
    environment = {key: str(value) for key, value in default_environment().items()}
    seen: set[Wanted] = set()
    todo = list(start)
    while todo:
        name, extras, mark = todo.pop(0)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            yield name, None, mark
            continue
        asked = frozenset(dist.metadata.get_all("Provides-Extra") or ()) if extras is None else extras
        if (normal(name), asked) in seen:
            continue
        seen.add((normal(name), asked))
        yield name, dist, mark
        todo += [(required, wanted, False) for required, wanted in required_names(dist, environment, asked)]


def through_extras(names: Iterable[str]) -> list[str]:
    """Every installed distribution a pip install of `names` with any of their own extras would
    bring (normal names, sorted; `jax[cuda13]`: the CUDA plugin and its libraries): for the GPU's
    bill, where a level is installed with its GPU extra; only what its worker loaded of it counts."""
    every = reached((name, None, True) for name in names)
    return sorted({normal(name) for name, dist, _own in every if dist})


SizeOf = Callable[[str], tuple[str, int, int]]  # a distribution's (version, bytes on disk, files)


def closure(names: Iterable[str], sizes: SizeOf, also: Iterable[str] = ()) -> dict:
    """{"of": the installed ones among `names` (metadata's spelling), "closure": {name: {version,
    bytes, files}} for them and every distribution they require, transitively, "missing": what they
    require that is not installed here (sorted), "through_extras": what their extras would add
    (through_extras(), less the closure)}. `names` not installed are passed over: a level
    lists both spellings of a framework (tensorflow, tensorflow-cpu) and one of them is here.
    sizes: memory.distribution_size (a test's stand-in where it fabricates distributions).
    also: distributions the harness's own code in the worker needs besides the level's (h5py, which
    reads the weights), in the closure but never in "of"."""
    found: dict[str, dict] = {}
    missing: set[str] = set()
    of: list[str] = []
    none: frozenset[str] = frozenset()  # no extra asked
    start = [(name, none, True) for name in names] + [(name, none, False) for name in also]
    for name, dist, own in reached(start):
        if dist is None:
            if not own:
                missing.add(normal(name))
            continue
        spelled = dist.metadata["Name"]
        if own:
            of.append(spelled)
        if spelled not in found:
            version, size, files = sizes(spelled)
            found[spelled] = {"version": version, "bytes": size, "files": files}
    wanted = {normal(name) for name in found}
    return {"of": of, "closure": dict(sorted(found.items())), "missing": sorted(missing),
            "through_extras": [name for name in through_extras(of) if name not in wanted]}
