"""scripts/house.py (`make house`): each of the house's measures read from small fake trees, one that
should count and one that should not, so each can fail; and the script on this checkout, exit 0."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SPEC = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
house = importlib.util.module_from_spec(SPEC)
sys.modules["house"] = house  # dataclasses look their module up by name
SPEC.loader.exec_module(house)


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"harness/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def modules(tmp_path: Path, files: dict[str, str]) -> dict:
    return house.read_modules(tree(tmp_path, files))


# --- the grader's class depth ------------------------------------------------------------------------

def test_the_graders_depth_follows_its_bases_through_the_imports(tmp_path):
    found = house.grader_depth(modules(tmp_path, {
        "harness/lab/judge/grade.py": "from harness.lab.judge.phases.b import B\n\nclass Grader(B):\n    pass\n",
        "harness/lab/judge/phases/b.py": "from harness.lab.judge.phases import a\n\nclass B(a.A):\n    pass\n",
        "harness/lab/judge/phases/a.py": "import threading\n\nclass A(threading.Thread):\n    pass\n"}))
    assert found.value == 3 and found.where == ["Grader <- B <- A"]  # a base outside the harness: not counted


@pytest.mark.parametrize("text, depth", [
    ("class Grader:\n    pass\n", 1),
    ("class Base:\n    pass\n\nclass Grader(Base):\n    pass\n", 2),  # the deepest class of the module
    ("def grade(lab):\n    return lab\n", 0),  # the grader as functions
])
def test_a_flat_grader_is_shallow(tmp_path, text, depth):
    assert house.grader_depth(modules(tmp_path, {"harness/lab/judge/grade.py": text})).value == depth


# --- places asking a lab's kind ---------------------------------------------------------------------

def forms(places):
    return [(Path(path).name, line, form) for path, line, form in places]


def test_each_form_of_asking_a_labs_kind_is_counted(tmp_path):
    code = ("def f(lab, request, tables):\n"
            "    if lab.task == 'training':\n"  # 2: compare
            "        pass\n"
            "    training = request.get('task') in ('training', 'kernels')\n"  # 4: compare
            "    late = training and lab.late\n"  # 5: a boolean read; late is derived
            "    x = 1 if not late else 2\n"  # 6: a derived boolean read
            "    y = tables['lab']['task'] != 'inference'\n"  # 7: compare (y is a derived boolean, unread)
            "    return lab.kernels\n"  # 8: a kind's flag
            "\n"
            "def trains(lab):\n"
            "    return lab.task == 'training'\n"  # 11: compare; trains is a derived boolean
            "\n"
            "def g(lab, kind):\n"
            "    if trains(lab) or isinstance(kind, Training):\n"  # 14: a derived boolean; an isinstance
            "        return 1\n")
    found = house.kind_places(modules(tmp_path, {
        "harness/lab/term/kit.py": code,
        "harness/lab/kinds.py": "class Training:\n    def gate(self, lab):\n        return lab.task == 'training'\n"}),
        kinds=("harness/lab/kinds.py",))
    assert forms(found) == [("kit.py", 2, "compare"), ("kit.py", 4, "compare"), ("kit.py", 5, "boolean"),
                            ("kit.py", 6, "boolean"), ("kit.py", 7, "compare"), ("kit.py", 8, "boolean"),
                            ("kit.py", 11, "compare"), ("kit.py", 14, "boolean"), ("kit.py", 14, "isinstance")]


def test_what_is_not_a_labs_kind_is_not_counted(tmp_path):
    code = ("def f(row, mode, lab, task):\n"
            "    if row['kind'] == 'cell' or mode == 'inference':\n"  # a row's kind, a study's mode
            "        return LABS[lab.task]\n"  # a lookup by kind: what a kinds module offers
            "    training = mode == 'train'\n"
            "    return training and task.name\n")
    assert house.kind_places(modules(tmp_path, {"harness/report/x.py": code})) == []


def test_the_kinds_modules_may_ask_and_without_them_everywhere_counts(tmp_path):
    files = {"harness/lab/kinds/training.py": "def f(lab):\n    return lab.task == 'training'\n"}
    assert house.kind_places(modules(tmp_path, files), kinds=("harness/lab/kinds",)) == []
    assert forms(house.kind_places(modules(tmp_path, files), kinds=())) == [("training.py", 2, "compare")]


# --- rooms --------------------------------------------------------------------------------------

def test_a_room_of_one_or_two_modules_is_counted_a_wing_is_not_a_room(tmp_path):
    root = tree(tmp_path, {"harness/lab/__init__.py": "", "harness/lab/text.py": "",
                           "harness/lab/term/__init__.py": "", "harness/lab/term/a.py": "",
                           "harness/lab/term/b.py": "", "harness/lab/term/c.py": "",
                           "harness/lab/term/staff/__init__.py": "", "harness/lab/term/staff/one.py": "",
                           "harness/lab/term/staff/two.py": "", "harness/lab/term/templates/page.j2": ""})
    assert house.small_rooms(root) == [("lab/term/staff", 2)]
    (root / "harness/lab/term/staff/three.py").write_text("")
    assert house.small_rooms(root) == []


# --- forwarders ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, forwards", [
    ("def cmd_lab_kit(args):\n    '''Doc.'''\n    from harness.lab import commands\n\n"
     "    return commands.lab_kit(str(args.lab), args.out, log)\n", True),
    ("def read_rows(run_dir, strict=False):\n    return rows.read_run(run_dir, strict)\n", True),
    ("class A:\n    def f(self, *args, **kwargs):\n        return self.g(*args, **kwargs)\n", True),
    ("def hold(run_dir):\n    return runfolder.Writer(run_dir)\n", True),
    ("def f(a, b):\n    return g(a)\n", False),  # b is not passed on: not only forwarding
    ("STUDY = 'explain'\n\ndef write(rows, out):\n    return plumbing.write(rows, out, STUDY)\n", False),
    ("def write(rows, out):\n    return plumbing.write(rows, out, 'cpu')\n", False),  # a literal bound
    ("class A:\n    def f(self, x):\n        return g(self.lab, x)\n", False),  # the object's own state
    ("def seed():\n    return secrets.randbits()\n", False),  # no parameter to pass on
    ("def f(a):\n    return g(a + 1)\n", False),  # it computes
    ("def f(a):\n    return g(h(a))\n", False),  # two calls
    ("def f(a):\n    x = a\n    return g(x)\n", False),
    ("import functools\n\n@functools.cache\ndef f(a):\n    return g(a)\n", False),  # a cache is more
    ("def f(a):\n    return g(a)()\n", False),
])
def test_a_function_that_only_forwards(tmp_path, text, forwards):
    found = house.forwarders(modules(tmp_path, {"harness/x.py": text}))
    assert bool(found) == forwards, found


# --- the registry entry ---------------------------------------------------------------------------

REGISTRY = '''
class Shown:
    colour: str = ""

class ImplSpec:
    name: str
    hooks: tuple = ()
    shown: Shown = Shown()

class Other:
    not_counted: int = 0

REGISTRY = {s.name: s for s in (
    ImplSpec("c", hooks=(("probe", "lenet_c.a:p"), ("split", "lenet_c.a:s"), ("stages", "lenet_c.a:t"))),
    ImplSpec("keras", hooks=(("build", "lenet_keras.m:b"),)),
)}
'''


def test_the_registry_entry_its_hooks_and_those_asked_by_a_constant_name(tmp_path):
    root = tree(tmp_path, {"harness/registry.py": REGISTRY,
                           "harness/explain/c.py": "LEVEL = 'c'\n\ndef f():\n    return registry.hook(LEVEL, 'split')()\n",
                           "harness/machine/doctor.py": "def f(level):\n    registry.hook('c', 'probe')\n"
                                                        "    return [registry.hook(n, 'probe') for n in registry.with_hook('probe')]\n",
                           "harness/data/train.py": "def f():\n    return registry.hook('keras', 'build')()\n",
                           "harness/explain/stages.py": "from harness.explain.c import LEVEL\n\nSTAGES, N = 'stages', 2\n\n"
                                                        "def f():\n    return registry.hook(LEVEL, STAGES)()\n",
                           "lenet_onnx/export.py": "def f():\n    return registry.hook('keras', 'build')()\n"})
    found = {m.name: m for m in house.measures(root)}
    assert found["registry entry fields"].where == ["Shown.colour", "ImplSpec.name", "ImplSpec.hooks"]
    assert found["registry hooks"].value == 4
    # split: only c.py asks it, naming the level; stages: by constants, one imported, one a tuple's;
    # probe: doctor asks every level that has it; build: a level asks it (through the registry)
    assert found["hooks a harness module asks by the level's name"].where == ["c:split", "c:stages"]


# --- process-global state, the test cache, words ---------------------------------------------------

def test_a_module_level_container_a_function_fills_is_counted(tmp_path):
    files = {"harness/a.py": "CACHE: dict = {}\nSEEN = set()\nNAMES = ['x']\nLAST: list = [None] * 2\n\n"
                             "def f(k):\n    CACHE[k] = 1\n    SEEN.add(k)\n    LAST[:] = [k, k]\n    return NAMES\n"}
    assert house.filled_containers(modules(tmp_path, files)) == [
        ("harness/a.py", 1, "CACHE"), ("harness/a.py", 2, "SEEN"), ("harness/a.py", 4, "LAST")]


def test_the_pickled_test_cache_and_the_words_definitions(tmp_path):
    root = tree(tmp_path, {"tests/conftest.py": "import pickle\npickle.dumps({})\n",
                           "harness/measure/floor.py": "def floor():\n    pass\n",
                           "harness/lab/term/marks/__init__.py": "LEVEL = 'c'\n"})
    assert house.pickled_caches(root) == 1
    words = house.word_definitions(root, house.read_modules(root))
    assert words["floor"] == ["harness/measure/floor.py", "harness/measure/floor.py:1: floor"]
    assert words["marks"] == ["harness/lab/term/marks"] and len(words["LEVEL"]) == 1 and words["claim"] == []


# --- the script ---------------------------------------------------------------------------------

def test_the_script_prints_a_line_per_measure_and_exits_0():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "house.py"), "--where"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    lines = [line for line in done.stdout.splitlines() if not line.startswith("    ")]
    assert [line.split(":")[0] for line in lines] == [m.name for m in house.measures(ROOT)]
    assert all("(target: " in line for line in lines)
