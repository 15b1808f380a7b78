"""Issue 23's speed workloads in plain torch.nn (no torchvision), layer for layer as
bench/keras_nets.py builds them in Keras, for bench/compare.sh:

  mobilenetv2  keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10):
               Conv 3x3/2 32 -> 17 inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1
               project, BN after each, ReLU6 after the first two, Add when stride 1 and the
               width stays) -> Conv 1x1 1280 -> global average pool -> Dense(10) softmax;
               no biases before BN; BN eps 1e-3, momentum 0.999 (Keras's)
  xception     keras.io's "Image classification from scratch" make_model without augmentation:
               Rescaling(1/255), Conv 3x3/2 128, then per width 256/512/728 two
               SeparableConv2D (depthwise 3x3 without bias + pointwise 1x1 with bias) with BN
               and ReLU, MaxPool 3/2 "same", and a 1x1/2 residual conv added; SeparableConv 1024,
               BN, ReLU, global average pool, Dropout(0.25), Dense(10) logits; BN eps 1e-3,
               momentum 0.99 (Keras's default)
Keras's "same" padding with stride 2 on an even size pads one row/column at the bottom/right
only; that is written out with F.pad (max pooling pads with -inf), so every tensor has Keras's
shape. Parameter counts include BN's moving mean and variance, as Keras's "Total params".

Batch 32 of synthetic 96x96x3 inputs in [-1, 1) and 10 classes, Adam(1e-3, eps 1e-7 as
Keras), sparse categorical cross-entropy (on the softmax's probabilities for MobileNetV2, from
logits for the Xception, as the Keras models are compiled). --bf16 1: torch.autocast(bfloat16).
ms_per_step is the median of per-step times after --warmup steps. One key=value line;
--steps 0 prints the parameter count only.

    ../shared/bench/tuned.sh python3 bench/torch_nets.py mobilenetv2 --threads 2 [--bf16 1]

Uses ../shared/bench/common.py (thread setup, report).
"""
import os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'bench'))
model_name = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith('-') else ''
import torch, torch.nn as nn, torch.nn.functional as F
from common import parse, setup, report

a = parse(batch=32, size=96, classes=10, steps=10, warmup=2, bf16=0)
if model_name not in ('mobilenetv2', 'xception'):
    sys.exit('usage: torch_nets.py mobilenetv2|xception [--bf16 1] [--steps N] [--warmup N] [--threads N]')
info = setup(a)
S, C, B = a.size, a.classes, a.batch


def same_pad(size, k, s):
    """Keras/TF "same" padding (before, after) for one spatial dimension."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class Pad(nn.Module):
    """Asymmetric padding as Keras's ZeroPadding2D / "same" does."""
    def __init__(self, size, k, s, value=0.0):
        super().__init__()
        lo, hi = same_pad(size, k, s)
        self.p, self.value = (lo, hi, lo, hi), value

    def forward(self, x):
        return F.pad(x, self.p, value=self.value)


class Clamp6(nn.Module):
    """ReLU6 as clamp: Debian's torch 1.13 has no bf16 CPU backward for hardtanh (nn.ReLU6)
    ("hardshrink_backward_cpu not implemented for 'BFloat16'"); used only there."""
    def forward(self, x):
        return torch.clamp(x, 0.0, 6.0)


ReLU6 = Clamp6 if a.bf16 and int(torch.__version__.split('.')[0]) < 2 else nn.ReLU6


def bn(c, momentum):
    return nn.BatchNorm2d(c, eps=1e-3, momentum=1 - momentum)


def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class InvertedResidual(nn.Module):
    def __init__(self, cin, filters, stride, expansion, size, block_id):
        super().__init__()
        cout = make_divisible(filters)
        hid = cin * expansion
        layers = []
        if block_id:
            layers += [nn.Conv2d(cin, hid, 1, bias=False), bn(hid, 0.999), ReLU6()]
        if stride == 2:
            # keras.applications' correct_pad: even sizes pad (0, 1), odd sizes (1, 1)
            lo = 1 - (1 - size % 2)
            layers += [nn.ZeroPad2d((lo, 1, lo, 1)), nn.Conv2d(hid, hid, 3, 2, 0, groups=hid, bias=False)]
        else:
            layers += [nn.Conv2d(hid, hid, 3, 1, 1, groups=hid, bias=False)]
        layers += [bn(hid, 0.999), ReLU6(), nn.Conv2d(hid, cout, 1, bias=False), bn(cout, 0.999)]
        self.body = nn.Sequential(*layers)
        self.residual = cin == cout and stride == 1
        self.cout = cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        size = S
        stem = [Pad(size, 3, 2), nn.Conv2d(3, 32, 3, 2, 0, bias=False), bn(32, 0.999), ReLU6()]
        size = -(-size // 2)
        blocks, cin = [], 32
        cfg = [(16, 1, 1, 1)] + [(24, 2, 6, 2), (32, 2, 6, 3), (64, 2, 6, 4), (96, 1, 6, 3),
                                 (160, 2, 6, 3), (320, 1, 6, 1)]
        bid = 0
        for filters, stride, exp, n in cfg:
            for i in range(n):
                s = stride if i == 0 else 1
                blk = InvertedResidual(cin, filters, s, exp, size, bid)
                blocks.append(blk)
                cin, bid = blk.cout, bid + 1
                if s == 2:
                    size = -(-size // 2)
        head = [nn.Conv2d(cin, 1280, 1, bias=False), bn(1280, 0.999), ReLU6()]
        self.features = nn.Sequential(*stem, *blocks, *head)
        self.fc = nn.Linear(1280, C)

    def forward(self, x):
        x = self.features(x).mean((2, 3))
        return torch.softmax(self.fc(x), dim=1)


def sep_conv(cin, cout):
    return [nn.Conv2d(cin, cin, 3, 1, 1, groups=cin, bias=False), nn.Conv2d(cin, cout, 1, bias=True)]


class XceptionBlock(nn.Module):
    def __init__(self, cin, size, width):
        super().__init__()
        self.body = nn.Sequential(
            nn.ReLU(), *sep_conv(cin, width), bn(width, 0.99),
            nn.ReLU(), *sep_conv(width, width), bn(width, 0.99),
            Pad(size, 3, 2, float('-inf')), nn.MaxPool2d(3, 2))
        self.residual = nn.Conv2d(cin, width, 1, 2)

    def forward(self, x):
        return self.body(x) + self.residual(x)


class Xception(nn.Module):
    def __init__(self):
        super().__init__()
        size = S
        layers = [Pad(size, 3, 2), nn.Conv2d(3, 128, 3, 2, 0), bn(128, 0.99), nn.ReLU()]
        size, cin = -(-size // 2), 128
        for width in (256, 512, 728):
            layers.append(XceptionBlock(cin, size, width))
            size, cin = -(-size // 2), width
        layers += [*sep_conv(cin, 1024), bn(1024, 0.99), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(1024, C)

    def forward(self, x):
        x = self.features(x * (1.0 / 255)).mean((2, 3))
        return self.fc(self.drop(x))


model = MobileNetV2() if model_name == 'mobilenetv2' else Xception()
params = sum(p.numel() for p in model.parameters()) + \
    sum(b.numel() for n, b in model.named_buffers() if n.endswith(('running_mean', 'running_var')))
if a.steps == 0:  # --steps 0: the parameter count only (tests/test_bench_nets.sh)
    report(framework='torch' + torch.__version__.split('+')[0], workload=model_name, params=params)
    sys.exit(0)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
g = torch.Generator().manual_seed(1)
x = torch.rand(2 * B, 3, S, S, generator=g) * 2 - 1
y = torch.randint(0, C, (2 * B,), generator=g)
probs = model_name == 'mobilenetv2'
model.train()


def step(i):
    j = (i % 2) * B
    xb, yb = x[j:j + B], y[j:j + B]
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=bool(a.bf16)):
        out = model(xb)
    out = out.float()
    # Keras's sparse CE on probabilities clips them to [eps, 1 - eps] and takes the log
    loss = F.nll_loss(torch.log(out.clamp(1e-7, 1 - 1e-7)), yb) if probs else F.cross_entropy(out, yb)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss)


times, loss = [], float('nan')
for i in range(a.warmup + a.steps):
    t = time.perf_counter()
    loss = step(i)
    times.append(time.perf_counter() - t)
per = sorted(times[a.warmup:])
n = len(per)
med = per[n // 2] if n % 2 else (per[n // 2 - 1] + per[n // 2]) / 2
report(framework='torch' + torch.__version__.split('+')[0], workload=model_name + ('_bf16' if a.bf16 else ''),
       params=params, **info, batch=B, steps=a.steps, warmup=a.warmup, ms_per_step=1e3 * med,
       mean_ms_per_step=1e3 * sum(per) / n, samples_per_s=1e3 * B / (1e3 * med), loss=loss)
