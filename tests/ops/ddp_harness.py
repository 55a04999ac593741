"""The two-process DistributedDataParallel harness shared by the DDP tests.

A test module defines ``WORLD``, ``make_model()``, ``data() -> (xs, ys)`` (leading dims: step,
batch) and ``train(model, xs, ys, offset)``, where ``offset`` is the index of the first sample of
the shard. :func:`train_ddp` trains one shard per rank under DDP (gloo, CPU, loopback) and returns
every rank's parameters; :func:`assert_same_parameters` compares them with one process trained on
the full batch.
"""

from __future__ import annotations

import importlib
import multiprocessing.forkserver
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

HERE = str(Path(__file__).resolve().parent)


#: What a rank imports before it trains: torch, DDP (whose constructor imports torch._dynamo)
#: and the harness. Spawned, each rank imported them itself (3.5 CPU-s a rank, issue 21).
PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo", "ddp_harness")


def train_ddp(module_name: str, world: int, out_dir: Path) -> list[dict[str, torch.Tensor]]:
    """Start ``world`` ranks that each train their shard; return their state dicts.

    The ranks are separate processes, as with ``spawn``, forked from a fork server (started
    here, single-threaded) that imported :data:`PRELOAD` and the test module once; the server
    is stopped and reaped before this returns. Forking the test process itself would copy
    pytest-xdist's threads and whatever locks they hold.
    """
    if HERE not in sys.path:  # the fork server imports the test module by name from here
        sys.path.insert(0, HERE)
    server = multiprocessing.forkserver._forkserver
    if server._forkserver_pid is not None:  # preloads apply to a server started after this
        server._stop()
    server.set_forkserver_preload([*PRELOAD, module_name])
    try:
        mp.start_processes(_rank, args=(module_name, _free_port(), world, str(out_dir)),
                           nprocs=world, join=True, start_method="forkserver")
    finally:
        server._stop()
    return [torch.load(Path(out_dir) / f"rank{rank}.pt") for rank in range(world)]


def assert_same_parameters(states: list[dict[str, torch.Tensor]],
                           want: dict[str, torch.Tensor]) -> None:
    for rank, got in enumerate(states):
        assert got.keys() == want.keys()
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-11,
                                       msg=f"rank {rank}: {name}")


def _rank(rank: int, module_name: str, port: int, world: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        module = importlib.import_module(module_name)
        model = DistributedDataParallel(module.make_model())
        xs, ys = module.data()
        half = xs.shape[1] // world
        rows = slice(rank * half, (rank + 1) * half)
        module.train(model, xs[:, rows], ys[:, rows], offset=rank * half)
        torch.save(model.module.state_dict(), Path(out_dir) / f"rank{rank}.pt")
        # leave together: a rank tearing gloo down while its peer still talks to it aborts
        # ("terminate called without an active exception", about 1 run in 5 here)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
