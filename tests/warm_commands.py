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

A Python file or module run by this interpreter (``python SCRIPT ARGS``, ``python -m MODULE ARGS``: a study, a
benchmark, a command) goes to the server of its first top-level import of fairseq or the plugin. A bash script (a
recipe) runs as it is, with a folder of stand-ins for the warm console scripts first on its PATH (when this
environment's bin is on it), so the commands it starts by name start warm; the commands a warm child starts with
``subprocess`` are routed the same way (a study's fairseq-train). Anything else (``python -c``, other programs, an
environment whose ``FAIRSEQ_JOINT_*`` or ``PYTHON*`` variables, read at import, differ from the servers') runs
cold, as does everything when ``FAIRSEQ_JOINT_TESTS_COLD=1``. This module imports only the standard library (the
client must start fast).
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
from typing import Dict, List, Optional, Tuple

#: environment variables that change what an import does (PYTHONPATH, PYTHONHASHSEED, the plugin's switches): a
#: command whose environment differs from the servers' in any of these runs cold
IMPORT_TIME_PREFIXES = ("FAIRSEQ_JOINT_", "PYTHON")
#: a script's first top-level import of fairseq (fairseq_cli) or of the plugin
FIRST_IMPORT = re.compile(r"^(?:from|import) (fairseq_joint|fairseq_cli|fairseq)\b", re.MULTILINE)
MAX_MESSAGE = 1 << 20


# ---------------------------------------------------------------------------------------------- routing
def preload_of(script: str, console: bool) -> Optional[str]:
    """The server a script can run in, by the first top-level import of fairseq or of the plugin in it (a console
    script of this environment: its one import line), or None."""
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


class Router:
    """Which commands go to which server (``sockets``: preload -> socket path), and the directory ``shims`` of
    console-script stand-ins put first on a bash script's PATH (so the commands it runs by name start warm too).
    ``base_env``: the environment the servers imported in; a command whose import-time variables differ runs cold."""

    def __init__(self, sockets: Dict[str, str], shims: str, base_env: Dict[str, str]):
        self.sockets, self.shims, self.base_env = sockets, shims, base_env

    def route(self, argv: List[str], env: Dict[str, str]) -> Tuple[List[str], Dict[str, str]]:
        """``(argv, env)`` as the command should run: through a server's client, with the shims on a bash script's
        PATH, or unchanged. ``env``: the command's whole environment."""
        changed = {k for k in set(env) | set(self.base_env) if env.get(k) != self.base_env.get(k)}
        if not argv or any(k.startswith(IMPORT_TIME_PREFIXES) and k != "PYTHON" for k in changed):
            return argv, env
        program, module = argv[0], None
        if os.path.basename(program) == "bash":
            path = env.get("PATH", "")
            if str(BIN) in path.split(os.pathsep) and not path.startswith(self.shims):
                return argv, dict(env, PATH=self.shims + os.pathsep + path)
            return argv, env
        if program == sys.executable:  # python SCRIPT / python -m MODULE (not -c or other flags)
            if argv[1:2] == ["-m"] and len(argv) > 2:
                module, command = argv[2], argv[3:]
                preload = {"fairseq_joint": "fairseq_joint", "fairseq_cli": "fairseq"}.get(module.split(".")[0])
            else:
                script = argv[1] if len(argv) > 1 and argv[1].endswith(".py") else None
                preload, command = script and preload_of(script, console=False), argv[1:]
        else:
            preload, command = preload_of(program, console=True), argv
        path = preload and self.sockets.get(preload)
        if not path:
            return argv, env
        return [sys.executable, "-S", __file__, "client", path, *(["-m", module] if module else []), *command], env


BIN = os.path.dirname(sys.executable)


# ---------------------------------------------------------------------------------------------- in the tests
class WarmServers:
    """The servers of this pytest process (both started at the first warm command), stopped at exit."""

    def __init__(self):
        self.router: Optional[Router] = None
        self.servers: List[subprocess.Popen] = []
        self.failed = False

    def start(self) -> Optional[Router]:
        """Start both servers and write the shims; None if a server cannot start (everything then runs cold)."""
        if self.router is not None or self.failed:
            return self.router
        folder = tempfile.mkdtemp(prefix="fj-warm-")
        atexit.register(self.stop)
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        sockets = {preload: os.path.join(folder, preload) for preload in ("fairseq", "fairseq_joint")}
        shims = os.path.join(folder, "bin")
        os.mkdir(shims)
        for preload, path in sockets.items():
            log = open(path + ".log", "wb")
            self.servers.append(subprocess.Popen([sys.executable, __file__, "serve", path, preload, shims],
                                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env))
        deadline = time.time() + 180
        while not all(os.path.exists(p) for p in sockets.values()):
            if any(s.poll() is not None for s in self.servers) or time.time() > deadline:
                self.failed = True
                self.stop()
                return None
            time.sleep(0.05)
        for name in sorted(os.listdir(BIN)):
            preload = preload_of(os.path.join(BIN, name), console=True)
            if preload:
                shim = os.path.join(shims, name)
                with open(shim, "w") as f:
                    f.write(f'#!/bin/sh\nexec "{sys.executable}" -S "{__file__}" client "{sockets[preload]}" '
                            f'"{os.path.join(BIN, name)}" "$@"\n')
                os.chmod(shim, 0o755)
        self.router = Router(sockets, shims, dict(os.environ))
        return self.router

    def command(self, argv: List[str], env: Dict[str, str]) -> Tuple[List[str], Dict[str, str]]:
        """``(argv, env)`` as the tests should run a command (``env``: its whole environment): a console script of
        this environment, or this interpreter running a Python file or ``-m`` module, that imports fairseq or the
        plugin goes through a server's client; a bash script gets the shims first on its PATH."""
        if os.environ.get("FAIRSEQ_JOINT_TESTS_COLD") == "1":
            return argv, env
        router = self.start()
        return router.route(argv, env) if router else (argv, env)

    def stop(self):
        for server in self.servers:
            server.kill()
            server.wait()
        self.servers = []


# ---------------------------------------------------------------------------------------------- the client
def client(path: str, argv: List[str]) -> int:
    """Ask the server at ``path`` to run ``argv`` (``SCRIPT ARGS`` or ``-m MODULE ARGS``) with this process's
    stdin/stdout/stderr, directory and environment; its exit status."""
    module = None
    if argv[:1] == ["-m"]:
        module, argv = argv[1], argv[2:]
    message = json.dumps({"argv": argv, "module": module, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
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
def serve(path: str, preload: str, shims: str) -> None:
    """Import ``preload`` (recording what the import prints), then fork a child per connection."""
    import importlib

    folder = os.path.dirname(path)
    router = Router({p: os.path.join(folder, p) for p in ("fairseq", "fairseq_joint")}, shims, dict(os.environ))

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
                    run_child(json.loads(message), fds, printed, router)
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


def run_child(command: dict, fds: List[int], printed: Dict[int, bytes], router: Router) -> None:
    """In the forked child: become the command (streams, directory, environment, argv) and run it, the commands it
    starts routed as the tests' are (:func:`route_subprocesses`); never returns."""
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
        route_subprocesses(router)
        try:
            if command.get("module"):
                sys.argv = [command["module"], *command["argv"]]
                sys.path[0] = os.getcwd()  # as python -m sets it
                runpy.run_module(command["module"], run_name="__main__", alter_sys=True)
            else:
                sys.argv = list(command["argv"])
                sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as python sets it for a script
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


def route_subprocesses(router: Router) -> None:
    """Make ``subprocess.Popen`` (and so ``subprocess.run``) in this child route the commands it starts as the tests
    route theirs: a study's fairseq-train, a recipe's bash script."""
    original = subprocess.Popen.__init__

    def __init__(self, args, *rest, **kwargs):
        if isinstance(args, (list, tuple)) and not kwargs.get("shell"):
            env = kwargs.get("env")
            argv, new_env = router.route([os.fspath(a) for a in args], dict(os.environ if env is None else env))
            if argv != list(args) or (env is not None and new_env != env) or (env is None and new_env != os.environ):
                args, kwargs["env"] = argv, new_env
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = __init__


if __name__ == "__main__":
    if sys.argv[1] == "client":
        sys.exit(client(sys.argv[2], sys.argv[3:]))
    serve(sys.argv[2], sys.argv[3], sys.argv[4])
