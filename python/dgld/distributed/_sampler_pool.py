"""A trainer's sampler processes (DGL's initialize(num_workers=N)): they run
DistDataLoader's collate_fn while the trainer trains.

Each one is started with multiprocessing's 'spawn' context (forking a
process that runs OpenMP and the client's threads is unsafe) and joins the
job as a sampler of this trainer (role 'sampler', group = the trainer's
rank), over its own connections. The trainer writes each process its tasks
on one pipe and reads results from another; messages are pickled with the
standard pickle (tensors by value), so only bytes cross. A DistGraph or a
DistTensor in a collate_fn pickles to a handle that reopens it over the
sampler process's own connection.

Batches go round-robin and come back in order. Every wait has a deadline; a
process that dies is an error naming it (and the batch it owed); an
exception in collate_fn arrives with the sampler process's traceback. The
processes stop with the trainer: at exit_client() and exit (orderly: they
leave the job), at once on Ctrl-C, and, when the trainer is killed, by the
parent-death signal and the end of their task pipe.
"""

import atexit
import ctypes
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import wait as _wait_any

import torch

from .._errors import Closed, DGLError, InvalidArgument, Timeout
from . import dist_context

_START_GRACE_S = 60.0  # importing torch and dgld in a fresh interpreter, on top of connect_timeout_s
_PICKLE = pickle.HIGHEST_PROTOCOL
_pool = None


def get_pool():
    """This trainer's sampler processes, started on first use with
    initialize()'s num_workers."""
    global _pool
    if _pool is None:
        n = dist_context.num_sampler_workers()
        if n <= 0:
            raise DGLError("no sampler processes: initialize(num_workers=0)")
        _pool = SamplerPool(n, dist_context.sampler_spec())
        dist_context.on_exit(stop_pool)
    return _pool


def _start_with_trainer():
    """Not under dgl-launch (DGL's tests, custom launchers), the servers are
    DGL's DistGraphServer: they count the sampler processes among the job's
    clients (num_clients) and stop once all have left, so the processes
    start as soon as the trainer has joined, as DGL's initialize() starts
    them, whatever loaders the script uses. dgl-launch's servers wait for
    none: there the first DistDataLoader with a collate_fn starts them."""
    if dist_context.num_sampler_workers() > 0 and not dist_context.launched_by_dgl_launch():
        get_pool()


dist_context.on_trainer_connect(_start_with_trainer)


def stop_pool():
    global _pool
    if _pool is not None:
        _pool.stop()
        _pool = None


def _exc_info():
    """The exception being handled, as plain values that cross a pipe."""
    etype, value, tb = sys.exc_info()
    return (etype.__module__, etype.__qualname__, str(value), "".join(traceback.format_exception(etype, value, tb)))


def _rebuild(info, where):
    """A worker's exception (from _exc_info) for the trainer to raise: the
    same class when it takes a message, else DGLError; the message names the
    process and holds its traceback."""
    module, name, message, tb = info
    text = f"{name} in {where}: {message}\n\nTraceback in the sampler process:\n{tb.rstrip()}"
    cls = getattr(sys.modules.get(module), name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            e = cls(text)
            if str(e) == text:
                return e
        except Exception:  # noqa: BLE001 - a class that wants other arguments
            pass
    return DGLError(text)


def _exit_description(code):
    if code is None:
        return "is not answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _Worker:
    """The trainer's side of one sampler process."""

    def __init__(self, index, process, tasks, results, trainer_rank):
        self.index = index
        self.process = process
        self.pid = process.pid
        self.tasks = tasks        # the trainer writes (through the feeder thread)
        self.results = results    # the trainer reads
        self.ready = False
        self.start_error = None
        self.pending = {}         # key -> "batch b of epoch e"
        self.name = f"sampler process {index} (pid {self.pid}) of trainer {trainer_rank}"
        self.outbox = queue.Queue()
        self.feeder = threading.Thread(target=self._feed, name=f"dgld-sampler-feed-{index}", daemon=True)
        self.feeder.start()

    def _feed(self):
        # Writes block while the process's pipe is full; only this thread waits.
        while True:
            data = self.outbox.get()
            if data is None:
                break
            try:
                self.tasks.send_bytes(data)
            except (OSError, ValueError):
                break  # the process is gone: its sentinel tells the trainer
        try:
            self.tasks.close()  # end of file: the process finishes its tasks and leaves
        except OSError:
            pass

    def send(self, message):
        self.outbox.put(pickle.dumps(message, protocol=_PICKLE))


class SamplerPool:
    """num_workers sampler processes of this trainer (see the module doc)."""

    def __init__(self, num_workers, spec):
        ctx = multiprocessing.get_context("spawn")
        self._rank = spec["trainer_rank"]
        self._workers = []
        self._results = {}        # key -> ("ok", batch) | ("err", info)
        self._abandoned = set()   # (loader id, epoch) whose results are dropped
        self._loaders = itertools.count()
        self._error = None
        self._stopped = False
        self._start_timeout_s = spec["options"]["connect_timeout_s"] + _START_GRACE_S
        self._start_deadline = time.monotonic() + self._start_timeout_s
        spec = dict(spec, trainer_pid=os.getpid(),
                    parent_death_signal=threading.current_thread() is threading.main_thread())
        # Each process seeds torch from the trainer's generator: torch.manual_seed
        # in the script makes the sampled batches repeatable.
        seed = int(torch.randint(0, 2**62, (1,)).item())
        atexit.register(self.stop)
        try:
            for i in range(num_workers):
                task_reader, task_writer = ctx.Pipe(duplex=False)
                result_reader, result_writer = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_worker_main, args=(i, spec, seed + i, task_reader, result_writer),
                                name=f"dgld-sampler-{i}", daemon=True)
                p.start()
                task_reader.close()
                result_writer.close()
                self._workers.append(_Worker(i, p, task_writer, result_reader, self._rank))
        except BaseException:
            self.stop(abort=True)
            raise

    @property
    def num_workers(self):
        return len(self._workers)

    # ------------------------------------------------------------ loaders

    def register(self, collate_fn):
        """Sends collate_fn to every process; returns the loader's id."""
        self._check()
        try:
            blob = pickle.dumps(collate_fn, protocol=_PICKLE)
        except Exception as e:  # noqa: BLE001 - any pickling failure means the same
            raise InvalidArgument(
                f"DistDataLoader: collate_fn must be picklable to run in the {self.num_workers} sampler "
                f"process(es) of initialize(num_workers={self.num_workers}): {type(e).__name__}: {e}. A lambda or "
                "a nested function is not; use a module-level function or a method of a module-level class "
                "(DistGraph and DistTensor attributes are fine)") from None
        lid = next(self._loaders)
        for w in self._workers:
            w.send(("set", lid, blob))
        return lid

    def unregister(self, lid):
        if self._stopped:
            return
        for w in self._workers:
            w.send(("del", lid))

    def submit(self, key, items, what):
        """Hands task `key` = (loader, epoch, seq) to process seq % n."""
        self._check()
        try:
            blob = pickle.dumps(items, protocol=_PICKLE)
        except Exception as e:  # noqa: BLE001
            raise InvalidArgument(f"DistDataLoader: the dataset's items must be picklable to go to the sampler "
                                  f"processes: {type(e).__name__}: {e}") from None
        w = self._workers[key[2] % len(self._workers)]
        w.pending[key] = what
        w.send(("call", key, blob))

    def abandon(self, lid, epoch):
        """Drops the results of an epoch that was left early (a new iter()
        or a break): those already here, and those still to come."""
        self._abandoned.add((lid, epoch))
        for key in [k for k in self._results if (k[0], k[1]) == (lid, epoch)]:
            del self._results[key]
        for w in self._workers:
            for key in [k for k in w.pending if (k[0], k[1]) == (lid, epoch)]:
                del w.pending[key]

    def get(self, key, timeout_s):
        """The batch of task `key`, waiting at most timeout_s for it (plus
        the start-up time while its process has not joined yet)."""
        w = self._workers[key[2] % len(self._workers)]
        deadline = time.monotonic() + timeout_s
        while key not in self._results:
            self._check()
            limit = deadline if w.ready else max(deadline, self._start_deadline)
            now = time.monotonic()
            if now >= limit:
                what = w.pending.get(key, "its batch")
                if w.ready:
                    err = Timeout(f"{w.name} did not return {what} within {timeout_s:g} s "
                                  "(DistDataLoader's batch_timeout_s); it is alive but not answering")
                else:
                    err = Timeout(f"{w.name} did not join the job within {self._start_timeout_s:g} s of "
                                  "starting (initialize's connect_timeout_s + 60 s)")
                self._fail(err)
            self._poll(min(limit - now, 1.0))
        status, value = self._results.pop(key)
        w.pending.pop(key, None)
        if status == "ok":
            return value
        raise _rebuild(value, f"{w.name} while making {key_description(key)}")

    # ------------------------------------------------------------ receiving

    def _poll(self, timeout):
        conns = {w.results: w for w in self._workers}
        sentinels = {w.process.sentinel: w for w in self._workers}
        ready = _wait_any(list(conns) + list(sentinels), timeout=max(timeout, 0.0))
        for r in ready:
            if r in conns:
                self._receive(conns[r])
        for r in ready:
            if r in sentinels:
                self._died(sentinels[r])

    def _receive(self, w):
        try:
            data = w.results.recv_bytes()
        except (EOFError, OSError):
            self._died(w)
            return
        try:
            message = pickle.loads(data)
        except Exception:  # noqa: BLE001 - e.g. a class the trainer cannot import
            info = _exc_info()
            self._fail(_rebuild(info, f"the trainer, unpickling a batch from {w.name}"))
        kind = message[0]
        if kind == "ready":
            w.ready = True
        elif kind == "start-error":
            w.start_error = message[1]
        elif kind in ("ok", "err"):
            key = message[1]
            if (key[0], key[1]) not in self._abandoned:
                self._results[key] = (kind, message[2])

    @staticmethod
    def _note_ready(w):
        """Reads what the process sent and nobody asked for yet (its 'ready'
        when the trainer never waited for a batch), without waiting."""
        try:
            while not w.ready and w.results.poll(0):
                if pickle.loads(w.results.recv_bytes())[0] == "ready":
                    w.ready = True
        except Exception:  # noqa: BLE001 - stopping goes on; the process's exit says the rest
            pass

    def _died(self, w):
        """A process's sentinel fired or its pipe ended: read what it sent
        before dying, then fail."""
        while True:
            try:
                if not w.results.poll(0):
                    break
                data = w.results.recv_bytes()
            except (EOFError, OSError):
                break
            try:
                message = pickle.loads(data)
            except Exception:  # noqa: BLE001 - the process is gone; what it said last does not matter
                continue
            if message[0] == "start-error":
                w.start_error = message[1]
        if w.start_error is not None:
            self._fail(_rebuild(w.start_error, f"{w.name}, joining the job"))
        w.process.join(1.0)
        owed = [w.pending[k] for k in sorted(w.pending)]
        doing = f" while making {owed[0]}" if owed else ""
        self._fail(Closed(f"{w.name} {_exit_description(w.process.exitcode)}{doing}; the DistDataLoader's "
                          "sampler processes are stopped (restart the script)"))

    # ------------------------------------------------------------ failure and stopping

    def _check(self):
        if self._error is not None:
            raise self._error
        if self._stopped:
            raise Closed("the sampler processes were stopped (exit_client was called)")

    def interrupt(self):
        """Ctrl-C: the processes are terminated now; later calls say why."""
        if self._error is None:
            self._error = Closed("the sampler processes were stopped by Ctrl-C (KeyboardInterrupt)")
        self.stop(abort=True)

    def _fail(self, error):
        """Stops every process and makes `error` the answer to every later call."""
        self._error = error
        self.stop(abort=True)
        raise error

    def stop(self, abort=False, timeout_s=5.0):
        """Stops the processes by PID: orderly (their task pipes end, they
        leave the job and exit) within timeout_s, or, for a process still
        joining, by the end of its start-up time (it joins, then leaves: the
        servers count it among the job's clients), then SIGTERM, then
        SIGKILL. With abort (Ctrl-C, a failure) SIGTERM at once."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        for w in self._workers:
            w.outbox.put(None)  # the feeder closes the task pipe after what is queued
            if not abort:
                self._note_ready(w)
            try:
                w.results.close()  # a process blocked sending a batch gets EPIPE instead of waiting
            except OSError:
                pass
        deadline = time.monotonic() + (0.0 if abort else timeout_s)
        for w in self._workers:
            # a process still joining has until the end of its start-up time
            until = deadline if abort or w.ready else max(deadline, self._start_deadline)
            w.process.join(max(0.0, until - time.monotonic()))
        for w in self._workers:
            if w.process.is_alive():
                w.process.terminate()
        for w in self._workers:
            w.process.join(2.0)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(2.0)


def key_description(key):
    return f"batch {key[2]} of epoch {key[1]}"


# ---------------------------------------------------------------- the sampler process

class _Unusable:
    """A collate_fn that could not be unpickled in the sampler process."""

    def __init__(self, info):
        self.info = info


def _set_parent_death_signal(parent_pid):
    """SIGTERM this process when the trainer dies (Linux prctl)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(0)  # the trainer died before the signal was set


def _read_tasks(conn, inbox):
    while True:
        try:
            inbox.put(pickle.loads(conn.recv_bytes()))
        except (EOFError, OSError):
            inbox.put(None)  # the trainer closed the pipe or is gone
            return


def _send_results(conn, outbox, gone):
    while True:
        data = outbox.get()
        if data is None:
            return
        try:
            conn.send_bytes(data)
        except (OSError, ValueError):
            gone.set()
            return


def _call(fn, key, blob):
    """Runs one task: the pickled ("ok", key, batch) or ("err", key, info)."""
    try:
        items = pickle.loads(blob)
        if isinstance(fn, _Unusable):
            module, name, message, tb = fn.info
            raise InvalidArgument(f"collate_fn could not be unpickled in the sampler process: {name}: {message} "
                                  "(a spawned process imports the script as a module: collate_fn's class must be "
                                  "defined at the top level of a file, not in `python -c` or under "
                                  "`if __name__ == '__main__'`)")
        if fn is None:
            raise InvalidArgument(f"no collate_fn for loader {key[0]} in the sampler process")
        batch = fn(items)
    except BaseException:  # noqa: BLE001 - every failure goes back to the trainer
        return pickle.dumps(("err", key, _exc_info()), protocol=_PICKLE)
    try:
        return pickle.dumps(("ok", key, batch), protocol=_PICKLE)
    except BaseException as e:  # noqa: BLE001
        try:
            raise InvalidArgument(f"collate_fn's result cannot be pickled to go back to the trainer: "
                                  f"{type(e).__name__}: {e}") from None
        except InvalidArgument:
            return pickle.dumps(("err", key, _exc_info()), protocol=_PICKLE)


def _worker_main(index, spec, seed, tasks, results):
    """A sampler process: joins the job, then runs the tasks its trainer
    sends until the task pipe ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the trainer stops us
    if spec["parent_death_signal"]:
        _set_parent_death_signal(spec["trainer_pid"])

    def send(message):
        results.send_bytes(pickle.dumps(message, protocol=_PICKLE))

    try:
        torch.set_num_threads(spec["options"]["num_worker_threads"])
        torch.manual_seed(seed)
        dist_context.join_as_sampler(spec)
    except BaseException:  # noqa: BLE001 - reported to the trainer
        send(("start-error", _exc_info()))
        return
    try:
        send(("ready", os.getpid()))
    except OSError:  # the trainer stopped the pool while this process was joining: leave at once
        dist_context.exit_client()
        return
    inbox, outbox, gone = queue.Queue(), queue.Queue(), threading.Event()
    threading.Thread(target=_read_tasks, args=(tasks, inbox), daemon=True).start()
    sender = threading.Thread(target=_send_results, args=(results, outbox, gone), daemon=True)
    sender.start()
    fns = {}
    try:
        while not gone.is_set():
            message = inbox.get()
            if message is None:
                break
            kind = message[0]
            if kind == "set":
                try:
                    fns[message[1]] = pickle.loads(message[2])
                except BaseException:  # noqa: BLE001 - reported with the loader's first batch
                    fns[message[1]] = _Unusable(_exc_info())
            elif kind == "del":
                fns.pop(message[1], None)
            elif kind == "call":
                outbox.put(_call(fns.get(message[1][0]), message[1], message[2]))
    finally:
        outbox.put(None)
        sender.join(10.0)
        dist_context.exit_client()
