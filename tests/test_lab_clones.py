"""`lab collect clones/` on hostile clones, built with real git (harness/lab/term/intake/clones.py): a clone's
own config (gpg.program through an `[include]`, core.fsmonitor, core.pager, hooks, filters,
helpers) never runs, a `gitdir:` file, a linked clone or .git, alternates, a commondir or a link
inside .git never pull in a classmate's files, a link or a submodule in a commit is left out and
named; each refused student is a manifest row with the reason and no folder, and the others
are still collected. The
plain collection (the date, a link left out) is tests/test_lab_term.py's."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.lab.term.intake import clones, collect

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SECRET = b"ann's own answer, not to be copied\n"
DATE = "2026-12-03T09:30:00+00:00"


def run_git(repo: Path, *args: str, data: bytes | None = None) -> str:
    """git in a test's own repository (the tests' clones are built with the user's config ignored)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@uni", "GIT_COMMITTER_NAME": "s",
           "GIT_COMMITTER_EMAIL": "s@uni", "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE}
    done = subprocess.run(["git", *args], cwd=repo, env=env, input=data, capture_output=True, check=True)
    return done.stdout.decode().strip()


def clone(folder: Path, files: dict[str, bytes]) -> Path:
    """A git repository at `folder` whose one commit holds `files`."""
    folder.mkdir(parents=True)
    run_git(folder, "init", "-q")
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    run_git(folder, "add", "-A")
    run_git(folder, "commit", "-q", "-m", "lab")
    return folder


def class_of(tmp_path: Path) -> Path:
    """clones/ with ann (whose files a cheat wants) and ben (a plain clone), both to be collected."""
    clone(tmp_path / "clones" / "ann", {"lenet.py": SECRET})
    clone(tmp_path / "clones" / "ben", {"lenet.py": b"ben's\n"})
    return tmp_path / "clones"


def collected(tmp_path: Path, folder: Path) -> tuple[dict[str, dict], list[str]]:
    """collect's manifest {folder: row} of the collected and its report lines; ann and ben always
    collected whole; each refused clone a manifest row (status refused, the reason) and no folder."""
    said: list[str] = []
    subs = collect.collect(folder, tmp_path / "subs", report=said.append)
    manifest = collect.read_manifest(tmp_path / "subs" / collect.MANIFEST)
    assert (tmp_path / "subs" / "ann" / "lenet.py").read_bytes() == SECRET
    assert (tmp_path / "subs" / "ben" / "lenet.py").read_bytes() == b"ben's\n"
    assert manifest["ben"]["submitted_at"] == DATE
    refused = {s.folder for s in collect.refused(subs)}
    for name in refused:
        assert manifest[name]["status"] == "refused" and manifest[name]["note"] == text_of(said, name)
        assert not os.path.lexists(tmp_path / "subs" / name)
    if refused:
        assert f"nothing of theirs written: {', '.join(sorted(refused))} " in said[-1], said[-1]
    return {k: v for k, v in manifest.items() if k not in refused}, said


def text_of(said: list[str], name: str) -> str:
    """The reason collect reported for refusing `name`'s clone."""
    return next(line for line in said if line.startswith(f"{name}: REFUSED: ")).split(": REFUSED: ", 1)[1]


def foreign(tmp_path: Path, but: str = "ann") -> list[Path]:
    """Collected files, outside `but`'s folder, that hold ann's answer."""
    return [p for p in (tmp_path / "subs").rglob("*")
            if p.is_file() and p.parent.name != but and SECRET in p.read_bytes()]


def test_a_clones_own_config_hooks_and_helpers_never_run(tmp_path):
    folder = class_of(tmp_path)
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat >/dev/null\n')
    evil.chmod(0o755)
    (tmp_path / "hooks").mkdir()
    for hook in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc"):
        shutil.copy(evil, tmp_path / "hooks" / hook)
    outside = tmp_path / "outside.cfg"  # a file outside the clone, followed by git's `[include]`
    outside.write_text(f"[gpg]\n\tprogram = {evil}\n[log]\n\tshowSignature = true\n")
    eve = clone(folder / "eve", {"lenet.py": b"eve's\n", ".gitattributes": b"* diff=evil filter=evil\n"})
    # a signed commit (its gpgsig header), so that showing it verifies the signature by gpg.program
    tree = run_git(eve, "rev-parse", "HEAD^{tree}")
    signed = (f"tree {tree}\nauthor s <s@uni> 1764754200 +0000\ncommitter s <s@uni> 1764754200 +0000\n"
              "gpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\nlab\n")
    run_git(eve, "update-ref", "HEAD", run_git(eve, "hash-object", "-t", "commit", "-w", "--stdin",
                                                 data=signed.encode()))
    with open(eve / ".git" / "config", "a") as config:
        config.write(f"[include]\n\tpath = {outside}\n[core]\n\tfsmonitor = {evil}\n\tpager = {evil}\n"
                     f"\thooksPath = {tmp_path / 'hooks'}\n\tsshCommand = {evil}\n\taskPass = {evil}\n"
                     f'[credential]\n\thelper = "!{evil}"\n[diff "evil"]\n\ttextconv = {evil}\n'
                     f'[filter "evil"]\n\tclean = {evil}\n\tsmudge = {evil}\n[alias]\n\tlg = "!{evil}"\n')
    # the old reading (git -c safe.directory=* -C clone log) ran the student's program: the fixture bites
    subprocess.run(["git", "-c", "safe.directory=*", "-C", str(eve), "log", "-1", "--format=%cI"],
                   capture_output=True, check=True)
    assert marker.exists()
    marker.unlink()
    manifest, _ = collected(tmp_path, folder)
    assert not marker.exists()
    assert (tmp_path / "subs" / "eve" / "lenet.py").read_bytes() == b"eve's\n"
    assert manifest["eve"]["submitted_at"] == "2025-12-03T09:30:00+00:00"  # the crafted commit's own date


def test_a_gitdir_file_or_a_linked_git_is_refused(tmp_path):
    folder = class_of(tmp_path)
    for name, target in (("mal", "../ann/.git"), ("abs", str(folder / "ann" / ".git"))):
        (folder / name).mkdir()
        (folder / name / ".git").write_text(f"gitdir: {target}\n")
    (folder / "lnk").mkdir()
    (folder / "lnk" / ".git").symlink_to(folder / "ann" / ".git")
    manifest, said = collected(tmp_path, folder)
    assert sorted(manifest) == ["ann", "ben"] and foreign(tmp_path) == []
    for name in ("mal", "abs", "lnk"):
        assert any(line.startswith(f"{name}: REFUSED: ") and "gitdir:" in line for line in said), said


def test_a_linked_clone_is_not_followed(tmp_path):
    folder = class_of(tmp_path)
    (folder / "copycat").symlink_to(folder / "ann")
    clone(tmp_path / "elsewhere" / "zed", {"lenet.py": SECRET})
    (folder / "zed").symlink_to(tmp_path / "elsewhere" / "zed")
    manifest, said = collected(tmp_path, folder)
    assert sorted(manifest) == ["ann", "ben"] and foreign(tmp_path) == []
    assert any(line.startswith("copycat: REFUSED: a link, not followed") for line in said), said
    assert any(line.startswith("zed: REFUSED: a link, not followed") for line in said), said


@pytest.mark.parametrize("pointer", ["objects/info/alternates", "objects/info/http-alternates", "commondir"])
def test_a_pointer_to_a_classmates_repository_is_refused(tmp_path, pointer):
    folder = class_of(tmp_path)
    mal = clone(folder / "mal", {"lenet.py": b"mine\n"})
    ann_commit = run_git(folder / "ann", "rev-parse", "HEAD")
    (mal / ".git" / pointer).write_text(f"{folder / 'ann' / '.git' / ('' if pointer == 'commondir' else 'objects')}\n")
    if pointer.endswith("/alternates"):  # mal's HEAD names ann's commit, found only through the pointer
        run_git(mal, "update-ref", "--no-deref", "HEAD", ann_commit)
    manifest, said = collected(tmp_path, folder)
    assert sorted(manifest) == ["ann", "ben"] and foreign(tmp_path) == []
    assert any(line.startswith(f"mal: REFUSED: {mal}/.git/{pointer}: ") for line in said), said


def test_a_link_a_pipe_or_a_deep_nest_inside_git_is_refused(tmp_path):
    folder = class_of(tmp_path)
    mal = clone(folder / "mal", {"lenet.py": b"mine\n"})
    shutil.rmtree(mal / ".git" / "objects")
    (mal / ".git" / "objects").symlink_to(folder / "ann" / ".git" / "objects")
    run_git(mal, "update-ref", "--no-deref", "HEAD", run_git(folder / "ann", "rev-parse", "HEAD"))
    pipe = clone(folder / "pipe", {"lenet.py": b"mine\n"})
    os.mkfifo(pipe / ".git" / "refs" / "heads" / "fifo")  # opened, a pipe would block the reader
    deep = clone(folder / "deep", {"lenet.py": b"mine\n"})
    (deep / ".git" / "refs" / "/".join(["a"] * 40)).mkdir(parents=True)  # a descriptor a level: bounded
    manifest, said = collected(tmp_path, folder)
    assert sorted(manifest) == ["ann", "ben"] and foreign(tmp_path) == []
    assert any(f"{mal}/.git/objects: a link inside .git, not followed" in line for line in said), said
    assert any(f"{pipe}/.git/refs/heads/fifo: neither a file nor a folder" in line for line in said), said
    assert any(line.startswith("deep: REFUSED: ") and "nested deeper than 16" in line for line in said), said


def test_links_and_submodules_in_a_commit_are_left_out_and_named(tmp_path):
    folder = class_of(tmp_path)
    cat = folder / "cat"
    cat.mkdir()
    (cat / "peek.py").symlink_to("../ann/lenet.py")
    (cat / "run.sh").write_bytes(b"#!/bin/sh\n")
    (cat / "run.sh").chmod(0o755)
    run_git(cat, "init", "-q")
    run_git(cat, "add", "peek.py", "run.sh")
    run_git(cat, "update-index", "--add", "--cacheinfo", f"160000,{run_git(folder / 'ann', 'rev-parse', 'HEAD')},lib")
    run_git(cat, "commit", "-q", "-m", "lab")
    manifest, said = collected(tmp_path, folder)
    assert sorted(p.name for p in (tmp_path / "subs" / "cat").iterdir()) == ["run.sh"] and foreign(tmp_path) == []
    assert manifest["cat"]["note"] == "left out of the commit: lib: a submodule; peek.py: a link"
    assert "left out: cat/peek.py: a link" in said and "left out: cat/lib: a submodule" in said


def test_a_crafted_tree_leading_outside_is_refused(tmp_path):
    folder = class_of(tmp_path)
    mal = clone(folder / "mal", {"lenet.py": b"mine\n"})
    blob = run_git(mal, "hash-object", "-w", "--stdin", data=b"planted\n")
    inner = run_git(mal, "mktree", data=f"100644 blob {blob}\tlenet.py\n".encode())
    top = run_git(mal, "mktree", data=f"040000 tree {inner}\t..\n100644 blob {blob}\tlenet.py\n".encode())
    run_git(mal, "update-ref", "HEAD", run_git(mal, "commit-tree", top, "-m", "crafted"))
    manifest, said = collected(tmp_path, folder)
    assert sorted(manifest) == ["ann", "ben"] and not (tmp_path / "subs" / "lenet.py").exists()
    assert any(line.startswith("mal: REFUSED: ") and "'../lenet.py'" in line for line in said), said


def test_packed_and_shallow_clones_are_read_and_the_copy_is_capped(tmp_path):
    source = clone(tmp_path / "source", {"lenet.py": b"v1\n"})
    (source / "lenet.py").write_bytes(b"v2\n")
    run_git(source, "commit", "-q", "-a", "-m", "v2")
    folder = tmp_path / "clones"
    run_git(tmp_path, "clone", "-q", "--depth", "1", f"file://{source}", str(folder / "shallow"))
    run_git(tmp_path, "clone", "-q", str(source), str(folder / "packed"))
    run_git(folder / "packed", "gc", "-q")
    clone(folder / "big", {"data.bin": os.urandom(300_000)})
    subs, skipped = clones.read_git(folder, max_bytes=200_000)
    assert {s.student_id: (s.files, s.submitted_at) for s in subs if not s.refused} == {
        "packed": ({"lenet.py": b"v2\n"}, DATE), "shallow": ({"lenet.py": b"v2\n"}, DATE)}
    [big] = [s for s in subs if s.refused]
    assert big.folder == "big" and big.refused.startswith(f"{folder / 'big'}/.git: holds more than") and not big.files
