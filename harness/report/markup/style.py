"""What the report and its figures (harness.figures.style) share: the ladder's order, the Keras
backends' names, the cells a study drew."""

import pandas as pd

from harness import registry

# The ladder's implementations, bottom rung first, and the NumPy reference beside it (last): each
# spec's `order`.
IMPL_ORDER = registry.levels()
# the high-level API's levels -> their backend, from the row name ("Keras on JAX" -> "JAX")
BACKEND_OF = {name: registry.display(name).split(" on ")[-1] for name in registry.on_rung("high-level API")}


def ok_cells(frame: pd.DataFrame, study: str, **equal: object) -> pd.DataFrame:
    """The ok cells of a study, of those whose columns equal the values given (device="gpu", ...)."""
    if frame.empty:
        return frame
    mask = (frame["study"] == study) & (frame["status"] == "ok")
    for column, value in equal.items():
        mask &= frame[column] == value
    return frame[mask]
