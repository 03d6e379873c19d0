"""One training step of the project's CNN and MLP in PyTorch on the same GPU.

The reference for issue 8's training-step comparison: the same layers and
shapes as worker/src/model.cc (BuildModel), fp32 with TF32 off, deterministic
algorithms on, SGD with momentum 0.9 and weight decay (the job default).
Reports the median milliseconds of one step (forward, loss, backward,
optimizer), eager and replayed from a captured CUDA graph, per batch size.

  python3 bench/cuda/torch_step_bench.py [--batches 16,64,128,512] [--steps 200]
"""
import argparse
import json
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
import torch  # noqa: E402
from torch import nn  # noqa: E402

from torch_models_bench import graphed, time_ms  # noqa: E402  (the same graph capture, timing)


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 8, 5), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 5), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 10))


def mlp():
    return nn.Sequential(
        nn.AvgPool2d(2), nn.Flatten(), nn.Linear(196, 128), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(128, 10))


def median_step_ms(model, batch, steps, graph):
    dev = torch.device("cuda")
    model = model.to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(20):  # warm-up: kernels chosen, allocator and momentum buffers settled
        step()
    torch.cuda.synchronize()
    run = graphed(torch, step) if graph else step
    return time_ms(torch, run, dev, steps, 7)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="16,64,128,512")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(1)
    header = (f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, fp32, TF32 off, "
              f"deterministic algorithms on")
    if not args.json:
        print(header)
        print(f"{'model':5} {'batch':>5} {'eager ms':>9} {'graph ms':>9} {'graph samples/s':>16}")
    for name, make in (("cnn", cnn), ("mlp", mlp)):
        for b in (int(v) for v in args.batches.split(",")):
            eager = median_step_ms(make(), b, args.steps, graph=False)
            graphed = median_step_ms(make(), b, args.steps, graph=True)
            if args.json:
                print(json.dumps({"bench": "torch_step", "torch": header, "model": name,
                                  "batch": b, "eager_ms": eager, "graph_ms": graphed}))
            else:
                print(f"{name:5} {b:5d} {eager:9.3f} {graphed:9.3f} {b / graphed * 1e3:16.0f}")


if __name__ == "__main__":
    main()
