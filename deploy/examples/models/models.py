"""The example PyTorch models that EasyScale's ONNX graph runtime trains.

Each image model takes float32 [B, C, S, S] images, values in [0, 1)
(the MNIST digits by default: in_channels C=1, image_size S=28), and gives
logits [B, 10]; `encoder` classifies sequences of int64 token ids [B, T].
Every model has a width knob so that CI can run a narrow variant:

  cnn          the worker's built-in "cnn" (worker/src/model.cc): conv5-bn-relu-
               maxpool twice, flatten, dropout, linear-relu-linear. `width` is the
               first conv's channels (8, as built in); the second has 2*width, the
               hidden layer 8*width.
  resnet18     CIFAR-style ResNet-18: 3x3 stride-1 stem, no max-pool, four stages
               of two torchvision BasicBlocks. `width` is the stem's channels (64
               as torchvision's); stages have 1, 2, 4, 8 times that.
  mobilenetv2  torchvision's MobileNetV2 with a 1-channel stride-1 stem and the
               second stage at stride 1 (28 -> 28 -> 14 -> 7 -> 4). `width` is
               torchvision's width_mult.
  resnet50     torchvision's ImageNet ResNet-50 (7x7 stride-2 stem, max-pool,
               Bottleneck blocks [3, 4, 6, 3]) for 224x224 inputs. `width` is
               torchvision's width_per_group (64).
  mobilenetv2_imagenet
               torchvision's MobileNetV2 unchanged (stride-2 stem, 224 -> 7),
               the stem taking in_channels. `width` is width_mult.
  encoder      a small BERT-like encoder: token embedding plus a learned position
               parameter, pre-LayerNorm blocks of multi-head self-attention (plain
               Linear/reshape/transpose/matmul/softmax) and a GELU MLP, mean
               pooling, a linear classifier. `width` is d_model.

The graphs they export in training mode use only the ops in SUPPORTED_OPS, the
ones the worker's C++ runtime implements; check_ops() says which others a
graph uses. Shapes are static apart from the batch: reshapes use literal
sizes, and positions are a parameter (no torch.arange, which would export
Range/Expand).
"""

import math

import torch
from torch import nn
from torchvision.models.mobilenetv2 import MobileNetV2
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
from torchvision.ops.misc import Conv2dNormActivation

MODELS = ("cnn", "resnet18", "mobilenetv2", "encoder", "resnet50", "mobilenetv2_imagenet")

# The ONNX ops (default domain) that the worker's graph runtime implements.
SUPPORTED_OPS = frozenset("""
    Conv BatchNormalization Relu Clip MaxPool AveragePool GlobalAveragePool Gemm MatMul
    Add Sub Mul Div Pow Sqrt Erf Tanh Sigmoid Softmax LogSoftmax LayerNormalization
    ReduceMean Gather Dropout Flatten Reshape Transpose Split Concat Slice Identity Shape
    Cast Unsqueeze Squeeze Constant SoftmaxCrossEntropyLoss
""".split())

# Each model's width when none is given: the full-size model.
DEFAULT_WIDTH = {"cnn": 8, "resnet18": 64, "mobilenetv2": 1.0, "encoder": 64, "resnet50": 64,
                 "mobilenetv2_imagenet": 1.0}


class Cnn(nn.Sequential):
    """The worker's built-in "cnn" for 1x28x28 inputs (see worker/src/model.cc)."""

    def __init__(self, width=8, in_channels=1, num_classes=10, dropout=0.25, image_size=28):
        c1, c2, hidden = width, 2 * width, 8 * width
        side = ((image_size - 4) // 2 - 4) // 2  # 28 -> 24 -> 12 -> 8 -> 4
        if side < 1:
            raise ValueError(f"image size {image_size} is below 16")
        super().__init__(
            nn.Conv2d(in_channels, c1, 5), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),  # 12x12
            nn.Conv2d(c1, c2, 5), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),  # 4x4
            nn.Flatten(), nn.Dropout(dropout),
            nn.Linear(c2 * side * side, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


class ResNet18(nn.Module):
    """CIFAR-style ResNet-18 with torchvision's blocks, names and initialization."""

    def __init__(self, width=64, in_channels=1, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.inplanes = width
        self.layer1 = self._make_layer(width, 1)      # 28x28
        self.layer2 = self._make_layer(2 * width, 2)  # 14x14
        self.layer3 = self._make_layer(4 * width, 2)  # 7x7
        self.layer4 = self._make_layer(8 * width, 2)  # 4x4
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))   # exports as GlobalAveragePool
        self.fc = nn.Linear(8 * width, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))
        blocks = [BasicBlock(self.inplanes, planes, stride, downsample), BasicBlock(planes, planes)]
        self.inplanes = planes
        return nn.Sequential(*blocks)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def mobilenet_v2(width_mult=1.0, in_channels=1, num_classes=10, dropout=0.2):
    """torchvision's MobileNetV2 for 28x28: stride-1 stem, second stage stride 1."""
    setting = [  # t (expansion), c (channels), n (blocks), s (first block's stride)
        [1, 16, 1, 1],
        [6, 24, 2, 1],  # torchvision: stride 2
        [6, 32, 3, 2],
        [6, 64, 4, 2],
        [6, 96, 3, 1],
        [6, 160, 3, 2],
        [6, 320, 1, 1],
    ]
    model = MobileNetV2(num_classes=num_classes, width_mult=width_mult,
                        inverted_residual_setting=setting, dropout=dropout)
    replace_stem(model, in_channels, stride=1)
    return model


def replace_stem(model, in_channels, stride):
    """A MobileNetV2's first conv-BN-ReLU6 anew, taking in_channels at `stride`."""
    stem = model.features[0]
    model.features[0] = Conv2dNormActivation(
        in_channels, stem[0].out_channels, stride=stride, norm_layer=nn.BatchNorm2d,
        activation_layer=nn.ReLU6)
    nn.init.kaiming_normal_(model.features[0][0].weight, mode="fan_out")


def resnet50(width_per_group=64, in_channels=3, num_classes=10):
    """torchvision's ResNet-50; a stem of in_channels when that is not 3."""
    model = ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes,
                   width_per_group=width_per_group)
    if in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model


def mobilenet_v2_imagenet(width_mult=1.0, in_channels=3, num_classes=10, dropout=0.2):
    """torchvision's MobileNetV2 (stride-2 stem); a stem of in_channels when that is not 3."""
    model = MobileNetV2(num_classes=num_classes, width_mult=width_mult, dropout=dropout)
    if in_channels != 3:
        replace_stem(model, in_channels, stride=2)
    return model


class SelfAttention(nn.Module):
    """Multi-head self-attention from Linear, reshape, transpose, matmul, softmax."""

    def __init__(self, d_model, heads, seq_len, dropout):
        super().__init__()
        assert d_model % heads == 0, "d_model must be a multiple of heads"
        self.heads, self.head_dim, self.seq_len = heads, d_model // heads, seq_len
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.scale = 1.0 / math.sqrt(self.head_dim)

    def split_heads(self, x):  # [B, T, D] -> [B, H, T, Dh], literal sizes but the batch
        return x.reshape(-1, self.seq_len, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scale
        probs = self.dropout(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).transpose(1, 2)
        return self.out(ctx.reshape(-1, self.seq_len, self.heads * self.head_dim))


class EncoderBlock(nn.Module):
    """A pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model, heads, seq_len, dropout, ffn_mult=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, heads, seq_len, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn_mult * d_model)
        self.gelu = nn.GELU()  # exact erf form: Div, Erf, Add, Mul
        self.fc2 = nn.Linear(ffn_mult * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.dropout(self.attn(self.ln1(x)))
        return x + self.dropout(self.fc2(self.gelu(self.fc1(self.ln2(x)))))


class Encoder(nn.Module):
    """A small BERT-like sequence classifier over int64 token ids [B, T]."""

    def __init__(self, vocab=1000, seq_len=32, d_model=64, heads=4, layers=2, num_classes=10,
                 dropout=0.1):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, d_model)  # Gather
        self.position_embedding = nn.Parameter(torch.empty(1, seq_len, d_model))  # Add
        self.embedding_norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.Sequential(
            *[EncoderBlock(d_model, heads, seq_len, dropout) for _ in range(layers)])
        self.final_norm = nn.LayerNorm(d_model)
        self.classifier = nn.Linear(d_model, num_classes)
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.position_embedding, std=0.02)

    def forward(self, ids):
        x = self.token_embedding(ids) + self.position_embedding
        x = self.blocks(self.dropout(self.embedding_norm(x)))
        return self.classifier(self.final_norm(x).mean(dim=1))  # ReduceMean over tokens


def build(model, width=None, dropout=None, seq_len=32, vocab=1000, heads=4, layers=2,
          num_classes=10, in_channels=1, image_size=28):
    """The example `model` with freshly initialized weights (seed torch first).

    dropout=None keeps each model's own rate (cnn 0.25, mobilenetv2 0.2,
    encoder 0.1; resnet18 and resnet50 have none); 0 builds it without
    dropout. in_channels and image_size (C and S of the [B, C, S, S] input)
    matter to the image models only; of those only cnn's layers depend on S.
    """
    width = DEFAULT_WIDTH[model] if width is None else width
    if model == "cnn":
        return Cnn(int(width), in_channels, num_classes,
                   dropout=0.25 if dropout is None else dropout, image_size=image_size)
    if model == "resnet18":
        return ResNet18(int(width), in_channels, num_classes)
    if model == "resnet50":
        return resnet50(int(width), in_channels, num_classes)
    if model == "mobilenetv2":
        return mobilenet_v2(float(width), in_channels, num_classes,
                            dropout=0.2 if dropout is None else dropout)
    if model == "mobilenetv2_imagenet":
        return mobilenet_v2_imagenet(float(width), in_channels, num_classes,
                                     dropout=0.2 if dropout is None else dropout)
    if model == "encoder":
        return Encoder(vocab, seq_len, int(width), heads, layers, num_classes,
                       dropout=0.1 if dropout is None else dropout)
    raise ValueError(f"unknown model {model!r} (want one of {', '.join(MODELS)})")


def example_input(model, batch, seq_len=32, vocab=1000, generator=None, in_channels=1,
                  image_size=28):
    """A random input batch of the model's shape and dtype."""
    if model == "encoder":
        return torch.randint(0, vocab, (batch, seq_len), dtype=torch.int64, generator=generator)
    return torch.rand(batch, in_channels, image_size, image_size, generator=generator)


def op_histogram(onnx_model):
    """{op_type: count} of an onnx.ModelProto's graph, sorted by op name."""
    counts = {}
    for node in onnx_model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items()))


def check_ops(onnx_model):
    """Raise ValueError naming the nodes whose ops the worker does not implement."""
    bad = [f"{n.name or '?'} ({n.op_type})" for n in onnx_model.graph.node
           if n.domain not in ("", "ai.onnx") or n.op_type not in SUPPORTED_OPS]
    if bad:
        raise ValueError(f"{len(bad)} node(s) use ops the worker's runtime lacks: "
                         + ", ".join(bad[:20]) + (" ..." if len(bad) > 20 else ""))
