"""tests/gpu/torch_collectives.py: PyTorch's NCCL (torch.distributed) through
railnet. Two processes, one per GPU (or both on one GPU as two "nodes" with
their own NCCL_HOSTID when there is only one), every collective x {fp32, bf16}
x 4 B..256 MiB checked against a host reference on every rank. Rank 0 prints
TAP; the environment (NCCL_NET_PLUGIN, LD_LIBRARY_PATH ...) comes from the
calling script."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"]
# RAILNET_TORCH_COLLS=a,b runs a subset (debugging one collective)
if os.environ.get("RAILNET_TORCH_COLLS"):
    COLLS = [c for c in COLLS if c in os.environ["RAILNET_TORCH_COLLS"].split(",")]
TYPES = [torch.float32, torch.bfloat16]


def values(rank, n, offset=0):
    # small integers in [-8, 8]: exact in bf16, sums exact too
    i = torch.arange(offset, offset + n, dtype=torch.int64)
    return ((i * 7 + rank * 3) % 17 - 8)


def run_one(coll, dtype, nbytes, rank, world, dev):
    es = torch.tensor([], dtype=dtype).element_size()
    count = max(nbytes // es, world)
    count -= count % world
    chunk = count // world
    mine = values(rank, count).to(dtype).to(dev)
    if coll == "all_reduce":
        out = mine.clone()
        dist.all_reduce(out)
        exp = sum(values(r, count) for r in range(world))
    elif coll == "all_gather":
        out = torch.empty(count, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, mine[:chunk].contiguous())
        exp = torch.cat([values(r, chunk) for r in range(world)])
    elif coll == "reduce_scatter":
        out = torch.empty(chunk, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, mine)
        exp = sum(values(r, chunk, rank * chunk) for r in range(world))
    elif coll == "broadcast":
        out = mine.clone()
        dist.broadcast(out, src=0)
        exp = values(0, count)
    elif coll == "all_to_all":
        out = torch.empty(count, dtype=dtype, device=dev)
        dist.all_to_all_single(out, mine)
        exp = torch.cat([values(p, chunk, rank * chunk) for p in range(world)])
    else:  # send_recv: rank 0 sends to everyone else
        if rank == 0:
            for p in range(1, world):
                dist.send(mine, dst=p)
            return None
        out = torch.empty(count, dtype=dtype, device=dev)
        dist.recv(out, src=0)
        exp = values(0, count)
    torch.cuda.synchronize(dev)
    got = out.float().cpu()
    exp = exp.float()
    if not torch.equal(got, exp):
        bad = (got != exp).nonzero()[0].item()
        return f"{coll} {dtype} {nbytes} B: element {bad}: expected {exp[bad].item()}, got {got[bad].item()}"
    return None


def worker(rank, world, init_file, max_bytes, ngpu):
    if ngpu < world:
        os.environ["NCCL_HOSTID"] = f"railnet-node-{rank}"
    dev = torch.device("cuda", rank % ngpu)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, device_id=dev)
    num = 0
    failed = 0
    if rank == 0:
        print(f"1..{len(COLLS) * len(TYPES)}", flush=True)
    for coll in COLLS:
        for dtype in TYPES:
            why = None
            nbytes = 4
            while nbytes <= max_bytes and why is None:
                why = run_one(coll, dtype, nbytes, rank, world, dev)
                nbytes *= 4
            # every rank's verdict reaches rank 0 so that its TAP line covers all ranks
            flag = torch.tensor([0 if why is None else 1], device=dev)
            dist.all_reduce(flag)
            num += 1
            name = f"torch_{coll}_{str(dtype).replace('torch.', '')}_4B_to_{max_bytes}B"
            if why:
                print(f"rank {rank}: {why}", file=sys.stderr, flush=True)
            if rank == 0:
                ok = flag.item() == 0
                print(f"{'' if ok else 'not '}ok {num} - {name}{'' if ok else ' # see rank logs'}",
                      flush=True)
            failed += flag.item() != 0
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


def main():
    world = 2
    max_bytes = int(os.environ.get("RAILNET_TORCH_MAX_BYTES", 256 << 20))
    ngpu = torch.cuda.device_count()
    if ngpu == 0:
        print("1..1\nok 1 - torch_collectives # SKIP no CUDA GPU on this machine")
        return 0
    init_file = os.path.join(os.environ.get("RAILNET_GPU_LOGDIR", "/tmp"), f"torch_init.{os.getpid()}")
    if os.path.exists(init_file):
        os.unlink(init_file)
    ctx = mp.spawn(worker, args=(world, init_file, max_bytes, ngpu), nprocs=world, join=False)
    ok = ctx.join()
    while not ok:
        ok = ctx.join()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a rank failed: the TAP stream already shows what
        print(f"# torch job failed: {e}", file=sys.stderr)
        sys.exit(1)
