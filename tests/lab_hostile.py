"""A hostile class for tests/test_lab.py: submissions that attack the grader, their classmates,
the project and the leaderboard, each as a student with a shell on the server would write it.

Each cheat computes with the `slow` example, twice per call, so when its attack fails (it must)
it is ranked behind every honest submission: a cheat ranked ahead of one has won something.
Each prints what it could see and do to its log (stderr) after the word HOSTILE, for the tests.
{SUBS}, {OUT} and {ROOT} are replaced by the host's paths (a student may know them).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOW = (ROOT / "labs" / "examples" / "slow" / "lenet.py").read_text()
CORRECT = (ROOT / "labs" / "examples" / "correct" / "lenet.py").read_text()
TWICE = """

class Cheat(SlowLeNet):
    def predict(self, images):
        super().predict(images)
        return super().predict(images)
"""
REPORT = """
import os as _os
import sys as _sys


def report(*words):
    print("HOSTILE", *words, file=_sys.stderr, flush=True)


def pipes():
    \"\"\"This process's pipe ends beyond stdin/stdout/stderr: the worker's reply pipe among them.\"\"\"
    found = []
    for fd in sorted(int(f) for f in _os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and _os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                found.append(fd)
        except OSError:
            pass
    return found
"""


def cheat(attack: str) -> str:
    """The slow example, the attack run at import, and a class that computes twice per call."""
    return SLOW + "\n\n" + REPORT + attack + TWICE


ASSASSIN = """
import os, signal
hit = []
for pid in set(range(1, 65536)) - {os.getpid()}:  # every pid of the host, most not visible here
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
            hit.append(pid)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGSTOP)  # everything this user may signal
except OSError:
    pass
report("assassin hit", sorted(set(hit)))
"""

SPY = """
import os, socket
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
report("spy pids", pids)
status = open("/proc/self/status").read()
for key in ("Uid:", "Gid:", "Groups:", "CapEff:", "CapPrm:", "NoNewPrivs:"):
    report("spy", [line for line in status.splitlines() if line.startswith(key)][0])
seen = []
for path in ("{SUBS}", "{OUT}", "{ROOT}/lenet_numpy/model.py", "{ROOT}/reports", "{ROOT}/tests",
             "{ROOT}/data/mnist", "/etc/shadow"):
    try:
        seen.append((path, os.listdir(path) if os.path.isdir(path) else len(open(path, "rb").read(64))))
    except OSError as exc:
        pass
report("spy seen", seen)
try:
    socket.create_connection(("127.0.0.1", int("{PORT}")), timeout=2).close()
    report("spy net reached the grader's port")
except OSError as exc:
    report("spy net refused", exc.errno)
"""

VANDAL = """
import os, shutil
done = []
for path in ("{SUBS}/correct/lenet.py", "{ROOT}/lenet_numpy/model.py", "{ROOT}/harness/base.py",
             "{ROOT}/harness/lab/box/worker.py", "{OUT}/results/correct/row.json", "{OUT}/results/ghost/row.json",
             "{OUT}/LEADERBOARD.md"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write("import time; time.sleep(0.01)  # vandal\\n")
        done.append(path)
    except OSError:
        pass
try:
    shutil.copytree("/lab", "/tmp/lenet-loot-{TAG}")  # "/tmp" is private: nothing reaches the host's
    shutil.copytree("{SUBS}", "/tmp/lenet-loot-{TAG}/class")
    done.append("copied the class")
except OSError:
    pass
report("vandal did", done or "nothing")
"""

FORKBOMB = """
import os, time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3600)
        os._exit(0)
    children += 1
    if children > 5000:
        break
report("forkbomb children", children)
"""

THREADBOMB = """
import threading, time
threading.stack_size(64 << 10)  # small stacks: the pids limit, not memory, stops it
threads = 0
while threads < 5000:
    try:
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    except RuntimeError:
        break
    threads += 1
report("threadbomb threads", threads)
"""

DAEMON = """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:  # detached, burning a core while the others are timed
            pass
    os._exit(0)
os.wait()
report("daemon started")
"""

SPAMMER = """
chunk = "spam " * 200_000 + "\\n"  # 1 MB
for _ in range(1024):  # 1 GiB
    print(chunk, end="")
report("spammer finished")
"""

HELPER = """
import os, time
_real = time.perf_counter_ns
time.perf_counter_ns = lambda: _real() // 50  # the worker's clock: calls look 50x faster
"""
HELPER_CLASS = """

class Helper(SlowLeNet):
    \"\"\"predict runs in a helper process: the worker itself hardly uses CPU.\"\"\"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        import multiprocessing
        self.jobs, theirs = multiprocessing.Pipe()
        self.proc = multiprocessing.get_context("fork").Process(target=self.serve, args=(theirs,), daemon=True)
        self.proc.start()

    def serve(self, conn):
        while True:
            images = conn.recv()
            conn.send(SlowLeNet.predict(self, images))

    def predict(self, images):
        self.jobs.send(images)
        self.jobs.recv()
        self.jobs.send(images)
        return self.jobs.recv()
"""

FORGER = """
import os
for fd in pipes():  # a forged load reply, ahead of the worker's own
    os.write(fd, b'{"ok": true, "class": "forged", "import_ns": 1, "load_ns": 1}\\n')
    report("forger wrote to fd", fd)
"""

GARBAGE = """
import os
for fd in pipes():
    os.write(fd, b"[1, 2, 3]\\n" + bytes(range(256)))
"""

FLOOD = """
import os
for fd in pipes():
    for _ in range(100):
        os.write(fd, b"x" * 4096)  # no newline, ever
"""

ODD_FILES = ("ghost.py -> /nonexistent", "passwd -> /etc/passwd", "sibling -> ../correct", "pipe (fifo)")

SUBMISSIONS = {
    "assassin": cheat(ASSASSIN),
    "spy": cheat(SPY),
    "vandal": cheat(VANDAL),
    "forkbomb": cheat(FORKBOMB),
    "threadbomb": cheat(THREADBOMB),
    "daemon": CORRECT + "\n\n" + REPORT + DAEMON,
    "spammer": cheat(SPAMMER),
    "helper": SLOW + "\n\n" + HELPER + HELPER_CLASS,
    "forger": cheat(FORGER),
    "garbage": cheat(GARBAGE),
    "flood": cheat(FLOOD),
    "importer": "from lenet_onednn.model import OnednnLeNet\n\n\nclass Mine(OnednnLeNet):\n    pass\n",
    "alias": CORRECT + "\n\nModel = CorrectLeNet  # a second name for the one class\n",
    "oddfiles": CORRECT,
}
# threadbomb: the pids limit stops it at 62 threads, whose malloc arenas then fill the address space
EXPECTED = {"assassin": "ok", "spy": "ok", "vandal": "ok", "forkbomb": "ok", "threadbomb": "out-of-memory",
            "daemon": "timing-inconsistent", "spammer": "crashed", "helper": "timing-inconsistent",
            "forger": "crashed", "garbage": "crashed", "flood": "crashed", "importer": "import-error",
            "alias": "ok", "oddfiles": "ok"}
CHEATS = {"assassin", "spy", "vandal", "forkbomb"}  # ok, but must rank behind the honest
# The honest submissions written with the correct example's im2col (about 1.5x numpy). A cheat that
# gained nothing computes at twice the slow example's 30x; one that won (answers read, not computed;
# the references slowed) would rank ahead of these. Not against `slow` itself: a 10 ms reference
# window in a 0.5 s round makes ratios that far apart swing 3x on a loaded machine.
HONEST = {"correct", "alias", "oddfiles"}


def write(folder: Path, subs: Path, out: Path, port: int, tag: str) -> None:
    """The hostile class into `folder`, one sub-folder each; oddfiles gets its odd entries."""
    import os
    import socket

    for name, text in SUBMISSIONS.items():
        (folder / name).mkdir()
        text = (text.replace("{SUBS}", str(subs)).replace("{OUT}", str(out)).replace("{ROOT}", str(ROOT))
                .replace("{PORT}", str(port)).replace("{TAG}", tag))
        (folder / name / "lenet.py").write_text(text)
    odd = folder / "oddfiles"
    (odd / "ghost.py").symlink_to("/nonexistent/ghost.py")
    (odd / "passwd").symlink_to("/etc/passwd")
    (odd / "sibling").symlink_to("../correct", target_is_directory=True)
    os.mkfifo(odd / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(odd / "socket"))
    server.close()


# --- the second ring: the host's disk, notes left in the kernel, a shaved clock, injected text,
# odd names, a crowded folder, a module shadowed, and what the sandbox shows of the host ----------
# Graded by tests/test_lab_ring2.py under RING2_LAB's limits (disk_mb = 64, files = 8000).

DISKFILL = """
import os
written = {}
for place in ("/tmp", "/lab/submission", "/dev/shm"):
    total = 0
    for i in range(128):  # 1 GiB in 8 MB files (one file may not pass the output limit)
        try:
            with open(f"{place}/fill{i}", "wb") as f:
                for _ in range(8):
                    f.write(b"x" * (1 << 20))
                    total += 1 << 20
        except OSError:
            break
    written[place] = total >> 20
report("diskfill MB", written)
"""

INODES = """
import os
made = 0
try:
    os.mkdir("/tmp/many")
    for i in range(300_000):
        open(f"/tmp/many/{i}", "w").close()
        made += 1
except OSError as exc:
    report("inodes stopped by", exc.strerror)
report("inodes made", made)
"""

NESTED = """
import os
depth = 0
try:
    os.chdir("/lab/submission")
    for _ in range(5000):
        os.mkdir("d")
        os.chdir("d")
        depth += 1
except OSError as exc:
    report("nested stopped by", exc.strerror)
os.chdir("/lab/submission")
report("nested depth", depth)
"""

NOTES = """
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x1E7E7  # SysV IPC key
found, left = [], []
serial = libc.syscall(250 if os.uname().machine == "x86_64" else 219, 10, -4, b"user", b"lenet-note", 0)  # KEYCTL_SEARCH
if serial > 0:
    found.append("a key in the user keyring")
if libc.shmget(KEY, 0, 0) >= 0:
    found.append("a SysV shared memory segment")
if libc.msgget(KEY, 0) >= 0:
    found.append("a SysV message queue")
probe = socket.socket(socket.AF_UNIX)
try:
    probe.connect("\\0lenet-note")
    found.append("an abstract socket")
except OSError:
    pass
key = libc.syscall(248 if os.uname().machine == "x86_64" else 217, b"user", b"lenet-note", b"hello", 5, -4)
left.append("key" if key > 0 else f"key refused ({os.strerror(ctypes.get_errno())})")
left += ["shm"] * (libc.shmget(KEY, 4096, 0o1666) >= 0) + ["msg"] * (libc.msgget(KEY, 0o1666) >= 0)
HOLD = socket.socket(socket.AF_UNIX)
HOLD.bind("\\0lenet-note")
HOLD.listen()
left.append("socket")
report("notes found", found)
report("notes left", left)
"""

SHAVER = """
import time
_real = time.perf_counter_ns
_start = _real()
time.perf_counter_ns = lambda: _start + int((_real() - _start) * 0.45)  # every call looks 0.45x as long
"""

INJECTED = ("\\x1b[2J\\x1b[31mowned\\x07\\n# Injected heading\\n| a | b |\\n"
            "<img src=x onerror=alert(1)>\\n=HYPERLINK('http://x')")
INJECTOR = f"""
import sys
print("{INJECTED}", file=sys.stderr)
print("```\\n# after a fence", file=sys.stderr)
raise RuntimeError("{INJECTED}")
"""

SNOOP = """
status = open("/proc/self/status").read()
for key in ("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"):
    report("snoop", [line for line in status.splitlines() if line.startswith(key)][0])
cmdline = open("/proc/1/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
mountinfo = open("/proc/self/mountinfo").read()
report("snoop cmdline", cmdline)
report("snoop scratch in cmdline", "lenet-lab-" in cmdline, "in mountinfo", "lenet-lab-" in mountinfo)
"""

HELPED = CORRECT.replace("from harness.base import LeNet", "from harness.base import LeNet\nfrom zz_helper import SCALE")
NON_UTF8 = b"caf\xe9"  # a folder name that is not UTF-8
LONG_NAME = "n" * 254  # the longest name most filesystems allow is 255 bytes
CROWD = 300  # data files whose names sort before lenet.py

RING2 = {
    "diskfill": cheat(DISKFILL),
    "inodes": cheat(INODES),
    "nested": cheat(NESTED),
    "notes": cheat(NOTES),
    "notes2": cheat(NOTES),
    "shaver": CORRECT + "\n\n" + SHAVER + "\n\nclass Shaved(CorrectLeNet):\n    pass\n",
    "injector": INJECTOR,
    "snoop": cheat(SNOOP),
    "crowded": HELPED,
    "sofile": CORRECT,
    "package": CORRECT,
    "locbomb": CORRECT,
    "correct": CORRECT,
    "alias": CORRECT + "\n\nModel = CorrectLeNet  # a second name for the one class\n",
    LONG_NAME: CORRECT,
}
RING2_EXPECTED = {name: "ok" for name in RING2} | {"injector": "import-error", "sofile": "import-error",
                                                   "package": "import-error", NON_UTF8.decode(errors="surrogateescape"): "ok"}
RING2_CHEATS = {"diskfill", "inodes", "nested", "notes", "notes2", "snoop"}
RING2_HONEST = {"correct", "alias", "crowded", "locbomb", LONG_NAME, NON_UTF8.decode(errors="surrogateescape")}


def write_ring2(folder: Path) -> None:
    """The second hostile class into `folder`: one sub-folder each, with their extra files."""
    import os

    for name, text in RING2.items():
        (folder / name).mkdir()
        (folder / name / "lenet.py").write_text(text)
    os.mkdir(os.fsencode(folder) + b"/" + NON_UTF8)
    (Path(os.fsdecode(os.fsencode(folder) + b"/" + NON_UTF8)) / "lenet.py").write_text(CORRECT)
    for i in range(CROWD):
        (folder / "crowded" / f"a{i:03d}.dat").write_bytes(b"\0" * 100)
    (folder / "crowded" / "zz_helper.py").write_text("SCALE = 1.0\n")
    (folder / "sofile" / "lenet.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF not really")
    (folder / "package" / "lenet").mkdir()
    (folder / "package" / "lenet" / "__init__.py").write_text("raise SystemExit('the package ran')\n")
    (folder / "locbomb" / "big.py").write_text("x = 1\n" * 700_000)  # 4 MB of code lines
