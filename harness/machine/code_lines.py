"""Lines of code of a source file, as pygount counts them: what the report's bill counts for each
level and a lab's leaderboard for each submission and reference.

    analyze(path, group) -> pygount.SourceAnalysis   its code_count and documentation_count
    package_files(package, root)                     the files a level's count (and its source hash)
                                                     come from (harness.machine.provenance)
"""

from pathlib import Path
from typing import Any

from harness.machine import provenance


def analyze(path: Path, group: str) -> Any:  # a pygount.SourceAnalysis
    import pygount

    return pygount.SourceAnalysis.from_file(str(path), group)


package_files = provenance.package_files
