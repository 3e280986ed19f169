"""`lab collect clones/`: a folder of students' git clones, read as data, never as code
(docs/staff.md, "Collect"): no clone's own git configuration runs, no link leads out.

git always reads the repository's own .git/config, and `git -c` cannot switch off what it says
(an `[include] path=` is followed, gpg.program, core.fsmonitor, core.pager, core.hooksPath, filters,
credential helpers and core.sshCommand are commands it may run). So git never sees a clone: we copy
HEAD, packed-refs, shallow, refs/ and objects/ (links not followed, special files refused, the bytes
counted against a cap) into a fresh bare repository of ours with a config we wrote, and run git
there with a scrubbed environment. What git reads, from its documentation (github:git/git):

    Documentation/git.adoc,           GIT_DIR names the repository (no discovery from the cwd);
      "ENVIRONMENT VARIABLES"         GIT_CONFIG_GLOBAL=/dev/null and GIT_CONFIG_SYSTEM=/dev/null
                                      (GIT_CONFIG_NOSYSTEM) skip the TA's own files;
                                      GIT_NO_REPLACE_OBJECTS, GIT_NO_LAZY_FETCH, GIT_TERMINAL_PROMPT
    Documentation/config.adoc,        include.path and includeIf.*.path are followed wherever a
      "Includes"                      config file names them
    Documentation/git-config.adoc     GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / GIT_CONFIG_PARAMETERS add
                                      settings: the environment is built from nothing, not inherited
    Documentation/gitrepository-      $GIT_DIR/config, hooks/, info/ (grafts, attributes),
      layout.adoc                     commondir (another repository's common dir) and
                                      objects/info/alternates (another object store): never copied;
                                      commondir and alternates are refused (a classmate's objects)
    Documentation/config/safe.adoc    safe.directory is git's owner check; the copy is ours, so it
                                      is not needed (the old `-c safe.directory=*` is gone)

Refused, that student's hand-in alone (a refused Submission: a manifest row with the reason, no
folder; the others are collected): a clone
that is a link, a .git that is not a folder of the clone (a `gitdir:` file, a link), a commondir,
objects/info/alternates or http-alternates, a link or a special file inside .git, a .git past the
cap, a commit git cannot read, a path with `..`, files past the student's cap. Of the last commit's
tree only regular files (modes 100644, 100755) are taken; links (120000) and submodules (160000,
gitlinks) are left out and named in the manifest's note.

    read_git(folder, max_bytes) -> ([Submission], [left out]); read_clone(clone, max_bytes)
    tree(clone, repo) (the commit's regular files), blobs(clone, repo, wanted) (their bytes),
    copy_git(clone, repo, cap), lexists(folder_fd, name), copy_tree(src_fd, dest, room, where),
    copy_file(...), git(repo, *args)
"""

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from harness.errors import HarnessError
from harness.lab.judge.files import MAX_LISTED
from harness.lab.term.intake.handin import MAX_BYTES, MAX_STUDENT_BYTES, Submission

TAKEN = ("100644", "100755")  # regular files; the rest are left out and named
KINDS = {"120000": "a link", "160000": "a submodule"}
COPIED = ("HEAD", "packed-refs", "shallow", "refs", "objects")  # all git needs to read a commit
REFUSED = {"commondir": "a linked worktree's pointer to another repository",
           "objects/info/alternates": "borrows another repository's objects (a classmate's?)",
           "objects/info/http-alternates": "borrows another repository's objects"}
OWN_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
MAX_DEPTH = 16  # folders inside .git (git's own: refs/heads/a/b, objects/pack; deeper is crafted)
BLOCK = 4096  # a copied file costs at least a block of the cap (a million tiny files is a bomb too)
CHUNK = 1 << 20
FLAGS = ("--no-pager", "--no-replace-objects", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
         "-c", "protocol.allow=never", "-c", "core.pager=cat", "-c", "log.showSignature=false")
TIMEOUT = 120
MAX_NAMED = 20  # entries left out of a commit named in the note (then a count)
FIX = "left out; collect it by hand after checking it"


def read_git(folder: Path, max_bytes: int = MAX_BYTES) -> tuple[list[Submission], list[str]]:
    """(one submission per clone in `folder` (its last commit's files and committer date; a refused
    clone a refused Submission, with the reason), the entries left out and why: links and submodules
    in a commit, folders that are not clones). One student's bad clone never stops the others';
    git missing, or the clones past the cap together, stops the whole intake."""
    if shutil.which("git") is None:
        raise HarnessError("git is not installed (apt install git); the clones cannot be read")
    found, skipped, room = [], [], max_bytes
    for clone in sorted(p for p in Path(folder).iterdir() if not p.name.startswith(".")):
        if not clone.is_symlink() and not clone.is_dir():
            continue
        if not clone.is_symlink() and not os.path.lexists(clone / ".git"):
            skipped.append(f"{clone.name}: not a git clone (no .git)")
            continue
        try:
            if clone.is_symlink():
                raise HarnessError(f"a link, not followed (each clone must be a folder of {folder} "
                                   f"itself); {FIX}")
            sub, left = read_clone(clone, max_bytes)
        except HarnessError as exc:
            refused = Submission(clone.name, clone.name, "git")
            refused.refuse(str(exc))
            found.append(refused)
            continue
        size = sum(len(data) for data in sub.files.values())
        if size > room:
            raise HarnessError(f"{clone}: the clones' files pass the cap of {max_bytes >> 20} MiB; "
                               "nothing was written: collect the class in parts")
        room -= size
        skipped.extend(f"{clone.name}/{line}" for line in left)
        found.append(sub)
    return found, skipped


def read_clone(clone: Path, max_bytes: int) -> tuple[Submission, list[str]]:
    """(the clone's last commit as a submission, its tree entries left out), read from our own
    copy of its objects; a HarnessError says why the clone is refused."""
    with tempfile.TemporaryDirectory(prefix="lab-clone-") as tmp:
        repo = Path(tmp) / "repo.git"
        copy_git(clone, repo, max_bytes)
        sub = Submission(clone.name, clone.name, "git")
        sub.submitted_at = git(repo, "log", "-1", "--no-walk", "--no-show-signature", "--format=%cI",
                               "HEAD").decode().strip()
        wanted, left = tree(clone, repo)
        sub.files = blobs(clone, repo, wanted)
    if len(left) > MAX_NAMED:
        left[MAX_NAMED:] = [f"... and {len(left) - MAX_NAMED} more"]
    if left:
        sub.note = "left out of the commit: " + "; ".join(left)
    return sub, left


def tree(clone: Path, repo: Path) -> tuple[dict[str, str], list[str]]:
    """({path: blob id} of the regular files in HEAD's tree, the entries left out and why); a
    HarnessError for a crafted tree (a path with `..`, a file under a file) or one past the caps.
    `ls-tree -r -z --long` writes `<mode> SP <type> SP <oid> SP <size, padded> TAB <path> NUL`, the
    size `-` for what is not a blob (Documentation/git-ls-tree.adoc, "Output Format")."""
    wanted, left, total = {}, [], 0
    for line in git(repo, "ls-tree", "-r", "-z", "--long", "HEAD").split(b"\0"):
        if not line:
            continue
        meta, _, raw = line.partition(b"\t")
        mode, kind, obj, size = (meta.decode(errors="replace").split() + ["", "", "", ""])[:4]
        try:
            path = raw.decode()
        except UnicodeDecodeError:
            left.append(f"{raw.decode(errors='replace')}: a name that is not UTF-8")
            continue
        if mode not in TAKEN or kind != "blob" or not size.isdigit():
            left.append(f"{path}: {KINDS.get(mode, f'not a regular file (mode {mode} {kind})')}")
        elif path.startswith("/") or {"", ".", ".."} & set(path.split("/")):
            raise HarnessError(f"{clone}: the commit holds a path {path!r} that leads outside its "
                               f"folder (a crafted tree); {FIX}")
        else:
            wanted[path], total = obj, total + int(size)
    if total > MAX_STUDENT_BYTES or len(wanted) > MAX_LISTED:
        raise HarnessError(f"{clone}: the commit holds {len(wanted)} files, {total >> 20} MiB, past the "
                           f"cap of {MAX_LISTED} files, {MAX_STUDENT_BYTES >> 20} MiB a student; {FIX}")
    folders = {str(parent) for path in wanted for parent in PurePosixPath(path).parents}
    clash = sorted(folders & set(wanted))
    if clash:
        raise HarnessError(f"{clone}: the commit holds a file {clash[0]!r} and files under it "
                           f"(a crafted tree); {FIX}")
    return wanted, left


def blobs(clone: Path, repo: Path, wanted: dict[str, str]) -> dict[str, bytes]:
    """{path: bytes} of the blobs in `wanted`, by one `git cat-file --batch=FORMAT`
    (Documentation/git-cat-file.adoc, "BATCH OUTPUT": `<oid> SP <type> SP <size> LF <contents> LF`,
    or `<object> SP missing LF`; the format is named, as the page warns the default may change)."""
    asked = "".join(f"{obj}\n" for obj in wanted.values()).encode()
    out = git(repo, "cat-file", "--batch=%(objectname) %(objecttype) %(objectsize)", stdin=asked)
    found, at = {}, 0
    for path, obj in wanted.items():
        end = out.find(b"\n", at)
        head = out[at:end].split()
        if end < 0 or len(head) != 3 or head[:2] != [obj.encode(), b"blob"]:
            raise HarnessError(f"{clone}: {path}: git could not read its file ({out[at:end][:80]!r}); {FIX}")
        at = end + 1 + int(head[2])
        found[path] = out[end + 1:at]
        at += 1
    return found


def copy_git(clone: Path, repo: Path, cap: int) -> None:
    """Our bare repository at `repo` holding copies of the clone's HEAD, refs and objects (at most
    `cap` bytes); a HarnessError for a clone that is a link, a .git that is not the clone's own
    folder, a pointer to another repository, a link or a special file inside .git."""
    try:
        top = os.open(clone, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise HarnessError(f"{clone}: not a folder that can be read ({exc.strerror}); "
                           f"a link is not followed; {FIX}") from None
    try:
        dot = os.open(".git", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
    except OSError:
        raise HarnessError(f"{clone}/.git: not a folder of the clone (a `gitdir:` file or a link, to "
                           "another repository: a classmate's?); only a clone's own .git is read; "
                           f"{FIX}") from None
    finally:
        os.close(top)
    try:
        for name, why in REFUSED.items():
            if lexists(dot, name):
                raise HarnessError(f"{clone}/.git/{name}: {why}; only a clone's own objects are read; {FIX}")
        repo.mkdir()
        (repo / "config").write_bytes(OWN_CONFIG)
        try:
            left = copy_tree(dot, repo, cap, clone / ".git", only=COPIED)
        except OSError as exc:
            raise HarnessError(f"{clone}/.git: cannot be read ({exc}); {FIX}") from None
        if left < 0:
            raise HarnessError(f"{clone}/.git: holds more than {cap >> 20} MiB (the cap); {FIX}")
        for needed in ("refs", "objects"):
            (repo / needed).mkdir(exist_ok=True)
    finally:
        os.close(dot)


def lexists(folder: int, name: str) -> bool:
    """Whether `name` (under the open folder) exists, itself, not what a link at its end names."""
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return False
    return True


def copy_tree(src: int, dest: Path, room: int, where: Path, only: tuple[str, ...] | None = None,
              depth: int = 0) -> int:
    """Copy the open folder `src` into `dest` (only the names in `only`, when given); returns the
    room left of the cap, negative once past it. Each entry is opened by name under its folder's
    descriptor with O_NOFOLLOW: a link, or a folder swapped for one, is never followed."""
    if depth > MAX_DEPTH:
        raise HarnessError(f"{where}: folders nested deeper than {MAX_DEPTH} inside .git; {FIX}")
    dest.mkdir(exist_ok=True)
    for name in sorted(os.listdir(src)):
        if only is not None and name not in only:
            continue
        info = os.stat(name, dir_fd=src, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise HarnessError(f"{where / name}: a link inside .git, not followed; {FIX}")
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            raise HarnessError(f"{where / name}: neither a file nor a folder (a pipe? a device?); {FIX}")
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src)
        try:
            if (os.fstat(fd).st_ino, os.fstat(fd).st_mode) != (info.st_ino, info.st_mode):
                raise HarnessError(f"{where / name}: changed while it was read; {FIX}")
            if stat.S_ISDIR(info.st_mode):
                room = copy_tree(fd, dest / name, room - BLOCK, where / name, depth=depth + 1)
            else:
                room = copy_file(fd, dest / name, room)
        finally:
            os.close(fd)
        if room < 0:
            return room
    return room


def copy_file(fd: int, dest: Path, room: int) -> int:
    """Copy the open file into `dest`, counting its bytes as they come (its size is not trusted);
    returns the room left, negative once past it (the copy then stops)."""
    room -= BLOCK
    with open(dest, "xb") as out:
        while room >= 0:
            data = os.read(fd, CHUNK)
            if not data:
                break
            out.write(data)
            room -= len(data)
    return room


def git(repo: Path, *args: str, stdin: bytes = b"") -> bytes:
    """A git command's output in our own repository `repo`, with an environment built from nothing
    (no GIT_* of the caller's, no system or global config, no pager, no prompt, no lazy fetch)."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(repo.parent),
           "XDG_CONFIG_HOME": str(repo.parent), "LC_ALL": "C", "GIT_DIR": str(repo),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_SYSTEM": os.devnull, "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_NO_REPLACE_OBJECTS": "1", "GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0",
           "GIT_ATTR_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat"}
    try:
        done = subprocess.run(["git", *FLAGS, *args], cwd=repo, env=env, capture_output=True,
                              timeout=TIMEOUT, input=stdin)
    except FileNotFoundError:
        raise HarnessError("git is not installed (apt install git); the clones cannot be read") from None
    except subprocess.TimeoutExpired:
        raise HarnessError(f"git {args[0]} ran past {TIMEOUT} s (a damaged repository?); {FIX}") from None
    if done.returncode != 0:
        raise HarnessError(f"git {' '.join(args)} failed: "
                           f"{done.stderr.decode(errors='replace').strip()[:300]}; {FIX}")
    return done.stdout
