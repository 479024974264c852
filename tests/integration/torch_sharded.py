"""Training through a custom-gradient layer under torch's sharded engines, on the CPU with gloo in
two processes, against the same training on one device (run by test_torch_sharded.py).

    python tests/integration/torch_sharded.py fsdp1|fsdp2

The layer's f reads its module's weights without receiving them (as a model's layers do), so
grad_fn gets them in `variables=`. Under FSDP1 (use_orig_params=True) those weights are views of
one flat parameter during the forward, which customgrad once missed: the flat parameter got no
gradient and no error. Each rank trains on its half of every batch; FSDP averages the gradients,
so the weights must equal one device's on the whole batch, also through `ClipNorm`, which clips
the gradient by the norm one device would see (`across_replicas=True`: each rank's own norm
gave weights off by 0.01). Prints the largest difference.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "torch")

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import customgrad

STEPS, BATCH, LR = 3, 8, 0.1
# the norm of the gradient at ClipNorm on a whole batch is 0.4-0.8: every step clips it
MAX_NORM, ACROSS_REPLICAS = 0.1, True


class CustomLinear(torch.nn.Module):
    """A linear layer whose gradient is grad_fn's (the analytic one, with its weights received
    in `variables=`, in the module's parameter order)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin = torch.nn.Linear(n_in, n_out)

    def forward(self, x):
        lin = self.lin

        @customgrad.custom_gradient
        def linear(x):
            def grad(dy, variables=None):
                weight, _ = variables
                return dy @ weight, [dy.T @ x, dy.sum(0)]

            return x @ lin.weight.T + lin.bias, grad

        return linear(x)


class ClipNorm(torch.nn.Module):
    """Clips the gradient of its input to the norm one device would see on the whole batch."""

    def forward(self, x):
        return customgrad.ops.clip_gradient_norm(x, MAX_NORM, across_replicas=ACROSS_REPLICAS)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(CustomLinear(4, 6), torch.nn.Tanh(), ClipNorm(), CustomLinear(6, 1))


def data():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, 4, generator=g), torch.randn(BATCH, 1, generator=g))
            for _ in range(STEPS)]


def train(net, batches, rank=0, world=1):
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    share = BATCH // world
    for x, y in batches:
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()


def worker(rank, world, engine, port, reference):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        net = model()
        if engine == "fsdp1":
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            net = FSDP(net, use_orig_params=True, device_id=torch.device("cpu"))
            train(net, data(), rank, world)
            with FSDP.summon_full_params(net):
                weights = [p.detach().clone() for p in net.parameters()]
        else:
            from torch.distributed.fsdp import fully_shard

            for layer in net:
                if isinstance(layer, CustomLinear):
                    fully_shard(layer)
            fully_shard(net)
            train(net, data(), rank, world)
            weights = [p.full_tensor().detach().clone() for p in net.parameters()]
        matches = True
        if rank == 0:
            diff = max(float((w - r).abs().max()) for w, r in zip(weights, reference))
            start = [p.detach() for p in model().parameters()]
            moved = min(float((w - s).abs().max()) for w, s in zip(weights, start))
            print(f"{engine}: max weight difference to one device {diff:.3g}; "
                  f"smallest change of a weight {moved:.3g}", flush=True)
            matches = diff < 1e-5 and moved > 1e-4
        # Both ranks tear gloo down together: a rank that destroyed its process group while the
        # other still worked was once aborted in the teardown ("terminate called without an
        # active exception") after a correct run, under a loaded CI machine.
        dist.barrier()
        if not matches:
            sys.exit(1)
    finally:
        dist.destroy_process_group()


def main():
    engine = sys.argv[1]
    single = model()
    train(single, data())
    reference = [p.detach().clone() for p in single.parameters()]
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(2, engine, port, reference), nprocs=2, join=True)


if __name__ == "__main__":
    main()
