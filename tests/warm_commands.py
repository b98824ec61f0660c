"""Warm starts for the console scripts the tests run (``fairseq-train``, ``fairseq-joint-predict-labels``, ...).

A process that runs one of them spends most of a tiny test's time importing torch and fairseq (3-5 s of CPU each
time on 2 cores). Here a server process per pytest worker does that import once and forks a child for each command:
the child takes the caller's stdin/stdout/stderr (passed over a Unix socket), working directory, environment and
argv, replays what the import printed, and runs the console script as ``python SCRIPT ARGS`` would
(``runpy.run_path`` as ``__main__``, its ``SystemExit`` status, an uncaught exception through ``sys.excepthook``,
``atexit`` handlers). The caller runs a small client (``python -S warm_commands.py client SCRIPT ARGS``) that waits
for the child's exit status and exits with it, so ``subprocess.run``'s capture, timeout and return code behave as
for the program itself; a client killed on timeout takes its child with it.

Two servers, by what the script imports first, so that a child starts from the state a fresh process reaches
after its own first import:

* ``fairseq``: fairseq's CLIs (``from fairseq_cli.train import cli_main``): ``import fairseq``; the plugin is then
  imported by ``--user-dir`` inside the child, as in a fresh process;
* ``fairseq_joint``: the plugin's commands (``from fairseq_joint.cli....``): ``import fairseq_joint``.

A Python file run by this interpreter (``python SCRIPT ARGS``: a study, a benchmark) goes to the server of its first
top-level import of fairseq or the plugin. Anything else (bash, ``python -m``/``-c``, an environment with
``FAIRSEQ_JOINT_*`` variables, read when the plugin is imported, or another ``PYTHONPATH``) runs cold, as does
everything when ``FAIRSEQ_JOINT_TESTS_COLD=1``. This module imports only the standard library (the client must
start fast).
"""

import atexit
import json
import os
import re
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

#: environment variables that change what an import does: a command given any of these runs cold
IMPORT_TIME_PREFIXES = ("FAIRSEQ_JOINT_", "PYTHON")
#: a script's first top-level import of fairseq (fairseq_cli) or of the plugin
FIRST_IMPORT = re.compile(r"^(?:from|import) (fairseq_joint|fairseq_cli|fairseq)\b", re.MULTILINE)
MAX_MESSAGE = 1 << 20


# ---------------------------------------------------------------------------------------------- in the tests
class WarmServers:
    """The servers of this pytest process, started at first use, stopped at exit."""

    def __init__(self):
        self.dir: Optional[str] = None
        self.servers: Dict[str, subprocess.Popen] = {}
        self.failed: Dict[str, str] = {}

    @staticmethod
    def preload_of(script: str, console: bool) -> Optional[str]:
        """The server a script can run in, by the first top-level import of fairseq or of the plugin in it (a
        console script of this environment: its one import line), or None."""
        try:
            with open(script, encoding="utf-8") as f:
                text = f.read(100000)
        except (OSError, UnicodeDecodeError):
            return None
        if console and not text.startswith(f"#!{sys.executable}"):
            return None
        match = FIRST_IMPORT.search(text)
        if match is None:
            return None
        return "fairseq_joint" if match.group(1) == "fairseq_joint" else "fairseq"

    def socket_of(self, preload: str) -> Optional[str]:
        """The socket of the ``preload`` server, started if needed; None if it cannot start."""
        if preload in self.failed:
            return None
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="fj-warm-")
            atexit.register(self.stop)
        path = os.path.join(self.dir, preload)
        if preload not in self.servers:
            env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
            log = open(path + ".log", "wb")
            self.servers[preload] = subprocess.Popen([sys.executable, __file__, "serve", path, preload],
                                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
            deadline = time.time() + 120
            while not os.path.exists(path):
                if self.servers[preload].poll() is not None or time.time() > deadline:
                    self.failed[preload] = open(path + ".log", encoding="utf-8", errors="replace").read()[-2000:]
                    return None
                time.sleep(0.05)
        return path

    def command(self, argv: List[str], env: Dict[str, str]) -> List[str]:
        """``argv`` (a program and its arguments) as the tests should run it: through a warm server's client when
        the program is a console script of this environment, or this interpreter running a Python file, that imports
        fairseq or the plugin; else unchanged. ``env``: the variables the test sets for it."""
        if os.environ.get("FAIRSEQ_JOINT_TESTS_COLD") == "1" or not argv:
            return argv
        if any(k.startswith(IMPORT_TIME_PREFIXES) and os.environ.get(k) != v for k, v in env.items()):
            return argv
        if argv[0] == sys.executable:  # python SCRIPT ARGS (not python -m / -c / other flags)
            script = argv[1:] and argv[1].endswith(".py") and argv[1]
            preload, command = script and self.preload_of(script, console=False), argv[1:]
        else:
            preload, command = self.preload_of(argv[0], console=True), argv
        path = preload and self.socket_of(preload)
        return [sys.executable, "-S", __file__, "client", path, *command] if path else argv

    def stop(self):
        for server in self.servers.values():
            server.kill()
            server.wait()


# ---------------------------------------------------------------------------------------------- the client
def client(path: str, argv: List[str]) -> int:
    """Ask the server at ``path`` to run ``argv`` with this process's stdin/stdout/stderr; its exit status."""
    env = dict(os.environ)
    message = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": env}).encode()
    if len(message) > MAX_MESSAGE:
        raise SystemExit(f"warm_commands: a {len(message)}-byte command is too long to send")
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.connect(path)
        socket.send_fds(sock, [message], [0, 1, 2])
        reply = sock.recv(4)
    if len(reply) != 4:
        print("warm_commands: the server ended without the command's exit status", file=sys.stderr)
        return 70
    code = struct.unpack("!i", reply)[0]
    return 128 - code if code < 0 else code  # a signal, as a shell reports it


# ---------------------------------------------------------------------------------------------- the server
def serve(path: str, preload: str) -> None:
    """Import ``preload`` (recording what the import prints), then fork a child per connection."""
    import importlib

    records = []
    for fd in (1, 2):
        records.append((fd, os.dup(fd), tempfile.TemporaryFile()))
        os.dup2(records[-1][2].fileno(), fd)
    try:
        importlib.import_module(preload)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        printed = {}
        for fd, saved, f in records:
            os.dup2(saved, fd)
            os.close(saved)
            f.seek(0)
            printed[fd] = f.read()
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # the socket appears when it accepts
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: Dict[int, socket.socket] = {}
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=0.02):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 3)
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    run_child(json.loads(message), fds, printed)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            else:  # the client closed its end (killed on a timeout): so ends its command
                try:
                    os.kill(key.data, 9)
                except ProcessLookupError:
                    pass
                selector.unregister(key.fileobj)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = children.pop(pid)
            try:
                conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
            except OSError:
                pass
            try:
                selector.unregister(conn)
            except (KeyError, ValueError):
                pass
            conn.close()


def run_child(command: dict, fds: List[int], printed: Dict[int, bytes]) -> None:
    """In the forked child: become the command (streams, directory, environment, argv) and run it; never returns."""
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    code = 1
    try:
        os.chdir(command["cwd"])
        os.environ.clear()
        os.environ.update(command["env"])
        if "torch" in sys.modules:  # the OpenMP threads a fresh process would start with
            threads = os.environ.get("OMP_NUM_THREADS", "")
            sys.modules["torch"].set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0
                                                 else os.cpu_count())
        for fd, data in printed.items():
            if data:
                os.write(fd, data)
        sys.argv = list(command["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as python sets it for a script
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF if isinstance(code, int) else 1)


if __name__ == "__main__":
    if sys.argv[1] == "client":
        sys.exit(client(sys.argv[2], sys.argv[3:]))
    serve(sys.argv[2], sys.argv[3])
