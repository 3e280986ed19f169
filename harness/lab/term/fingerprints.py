"""A submission's code as one document, and its winnowed fingerprints (copydetect's method, with a
stable hash), for `lab similarity` (harness.lab.term.similarity reads the folders and compares).

    Code                            the code files in one text, where each starts, what the caps left out
    document(chosen, capped) -> Code   the files (name, code) in name order, each after "# file: NAME"
    Prints                          a document's fingerprints, as copydetect.compare_files reads them
    fingerprint(code, boilerplate) -> Prints   normalised tokens, K-grams hashed, winnowed, the
                                    starter's fingerprints removed; stable_kgrams(text, k) the hashes
    line_ranges(code, slices) -> "file:first-last ..."   matched stretches as lines of each file
"""

import dataclasses
import hashlib
from typing import Any

K, WINDOW = 25, 6  # copydetect's defaults: 25-character k-grams, a match of 30 is always seen


@dataclasses.dataclass(frozen=True)
class Code:
    text: str  # every code file, each after a "# file: NAME" line
    starts: tuple[tuple[int, str], ...]  # (line where the file starts, its name)
    capped: tuple[str, ...] = ()  # the code files the caps left out (names through text.clean)


def document(chosen: list[tuple[str, str]], capped: tuple[str, ...] = ()) -> Code:
    """The code files (name, code) in name order, each after a "# file: NAME" line."""
    parts, starts, line = [], [], 1
    for name, code in sorted(chosen):
        starts.append((line, name))
        parts.append(f"# file: {name}\n{code.rstrip()}\n")
        line += parts[-1].count("\n")
    return Code("".join(parts), tuple(starts), capped)


@dataclasses.dataclass(frozen=True)
class Prints:
    """A document's winnowed fingerprints: the attributes copydetect.compare_files reads of its own
    CodeFingerprint, made here with a stable hash (copydetect hashes k-grams with Python's hash(),
    which changes with every process: scores would move from run to run)."""

    filtered_code: str
    offsets: object  # (M, 2) array: characters removed by filtering, for mapping back to the text
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    k: int
    token_coverage: float


def stable_kgrams(text: str, k: int) -> Any:  # an int64 array, one hash per k-gram
    import numpy as np

    return np.array([int.from_bytes(hashlib.blake2b(text[i:i + k].encode(), digest_size=8).digest(), "little",
                                    signed=True) for i in range(len(text) - k + 1)], dtype=np.int64)


def fingerprint(code: Code, boilerplate: set[int]) -> Prints:
    """Tokens with names, strings and comments normalised (copydetect's Python filter; a .cu file
    reads close enough to it), 25-grams hashed, winnowed, the starter's fingerprints removed."""
    import numpy as np
    from copydetect import utils

    filtered, offsets = utils.filter_code(code.text, "code.py")
    grams = stable_kgrams(filtered, K)
    hashes, idx = utils.winnow(grams, WINDOW, remove_duplicates=False) if len(grams) else (grams, grams)
    where: dict[int, list[int]] = {}
    for value, at in zip(np.asarray(hashes).tolist(), np.asarray(idx).tolist(), strict=True):
        if value not in boilerplate:
            where.setdefault(value, []).append(at)
    coverage = float(utils.get_token_coverage(where, K, len(filtered)))
    return Prints(filtered, offsets, set(where), where, K, coverage)


def line_ranges(code: Code, slices: object) -> str:
    """Character slices of the document -> "file:first-last" per matched stretch (touching
    stretches of one file merged)."""
    import numpy as np

    found: list[list] = []  # [file, first, last], lines counted in that file
    for start, end in sorted(np.asarray(slices, dtype=np.int64).T.tolist()):
        first, last = code.text.count("\n", 0, start) + 1, code.text.count("\n", 0, max(end - 1, start)) + 1
        file_start, name = max(((s, n) for s, n in code.starts if s <= first), default=(0, "?"))
        first, last = first - file_start, last - file_start
        if found and found[-1][0] == name and first <= found[-1][2] + 1:
            found[-1][2] = max(found[-1][2], last)
        else:
            found.append([name, first, last])
    return " ".join(f"{name}:{first}-{last}" for name, first, last in found)
