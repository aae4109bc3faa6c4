"""Convolutional networks of the model tests: torchvision-style CNNs (ResNet,
MobileNet, SqueezeNet, DenseNet and Inception blocks, ResNeXt groups) and
detection/segmentation-style graphs (YOLO, U-Net, a spatial transformer),
seeded random weights (make_models.py lists them all).
"""
from onnx import helper

from graph_builder import I64_MAX, Case, G, fin, fout, image


def resnet50():
    """torchvision ResNet-50 (v1.5: stride on the 3x3), BN kept, opset 13."""
    g = G(50)
    x = g.conv("data", 3, 64, 7, stride=2, pad=3, bias=False)
    x = g.relu(g.bn(x, 64))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            y = g.relu(g.bn(g.conv(x, cin, width, 1, bias=False), width))
            y = g.relu(g.bn(g.conv(y, width, width, 3, stride=stride, bias=False), width))
            y = g.bn(g.conv(y, width, width * 4, 1, bias=False), width * 4, gamma=0.3)
            if b == 0:
                x = g.bn(g.conv(x, cin, width * 4, 1, stride=stride, bias=False), width * 4)
            x = g.relu(g.op("Add", [y, x]))
            cin = width * 4
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    out = g.op("Gemm", [x, g.weight(1000, 2048), g.vec(1000)], alpha=1.0, beta=1.0, transB=1)
    g.nodes[-1].output[0] = "logits"
    m = g.model([fin("data", [1, 3, 224, 224])], [fout("logits")], 13)
    return Case(m, {"data": image(1, 1, 3, 224, 224)})


def resnet18():
    """torchvision ResNet-18 (BasicBlock: two 3x3 convs, 1x1 stride-2
    downsample), BN kept, opset 13: the network scripts/demo tunes."""
    g = G(18)
    x = g.conv("data", 3, 64, 7, stride=2, pad=3, bias=False)
    x = g.relu(g.bn(x, 64))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, width in enumerate([64, 128, 256, 512]):
        for b in range(2):
            stride = 2 if (b == 0 and stage > 0) else 1
            y = g.relu(g.bn(g.conv(x, cin, width, 3, stride=stride, bias=False), width))
            y = g.bn(g.conv(y, width, width, 3, bias=False), width, gamma=0.3)
            if stride != 1 or cin != width:
                x = g.bn(g.conv(x, cin, width, 1, stride=stride, bias=False), width)
            x = g.relu(g.op("Add", [y, x]))
            cin = width
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    g.op("Gemm", [x, g.weight(1000, 512), g.vec(1000)], alpha=1.0, beta=1.0, transB=1)
    g.nodes[-1].output[0] = "logits"
    m = g.model([fin("data", [1, 3, 224, 224])], [fout("logits")], 13)
    return Case(m, {"data": image(18, 1, 3, 224, 224)})


def mobilenet_v2():
    """torchvision MobileNetV2: depthwise convs, ReLU6 as Clip with min/max
    inputs (opset 11+), residual adds, GlobalAveragePool, Flatten, Gemm."""
    g = G(2)
    lo, hi = g.f32(0.0, "min"), g.f32(6.0, "max")

    def cbr(x, cin, cout, k, stride=1, group=1, act=True):
        y = g.bn(g.conv(x, cin, cout, k, stride=stride, group=group, bias=False), cout)
        return g.op("Clip", [y, lo, hi]) if act else y

    x = cbr("input", 3, 32, 3, stride=2)
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x if t == 1 else cbr(x, cin, hidden, 1)
            y = cbr(y, hidden, hidden, 3, stride=stride, group=hidden)
            y = cbr(y, hidden, c, 1, act=False)
            x = g.op("Add", [x, y]) if (stride == 1 and cin == c) else y
            cin = c
    x = cbr(x, cin, 1280, 1)
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.weight(1000, 1280), g.vec(1000)], transB=1)
    g.nodes[-1].output[0] = "output"
    m = g.model([fin("input", [1, 3, 224, 224])], [fout("output")], 13)
    return Case(m, {"input": image(2, 1, 3, 224, 224)})


def squeezenet():
    """SqueezeNet 1.1 as torchvision exports it at opset 10: MaxPool with
    ceil_mode, Fire modules (Concat of 1x1 and 3x3 expands), Dropout,
    classifier conv, GlobalAveragePool, Flatten."""
    g = G(3)
    x = g.relu(g.conv("data", 3, 64, 3, stride=2, pad=0))

    def pool(x):
        return g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    def fire(x, cin, s, e):
        sq = g.relu(g.conv(x, cin, s, 1))
        return g.op("Concat", [g.relu(g.conv(sq, s, e, 1)), g.relu(g.conv(sq, s, e, 3))],
                    axis=1)

    x = pool(x)
    x = fire(x, 64, 16, 64)
    x = fire(x, 128, 16, 64)
    x = pool(x)
    x = fire(x, 128, 32, 128)
    x = fire(x, 256, 32, 128)
    x = pool(x)
    x = fire(x, 256, 48, 192)
    x = fire(x, 384, 48, 192)
    x = fire(x, 384, 64, 256)
    x = fire(x, 512, 64, 256)
    x = g.op("Dropout", [x], ratio=0.5)
    x = g.relu(g.conv(x, 512, 1000, 1))
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x])
    g.nodes[-1].output[0] = "prob"
    m = g.model([fin("data", [1, 3, 224, 224])], [fout("prob")], 10)
    return Case(m, {"data": image(3, 1, 3, 224, 224)})


def densenet_blocks():
    """DenseNet-style: BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 layers whose outputs
    are concatenated onto their input; transitions with AveragePool."""
    g = G(4)
    k = 16
    x = g.conv("x", 3, 32, 7, stride=2, pad=3, bias=False)
    x = g.relu(g.bn(x, 32))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 32
    for block in range(3):
        for _ in range(4):
            y = g.conv(g.relu(g.bn(x, c)), c, 4 * k, 1, bias=False)
            y = g.conv(g.relu(g.bn(y, 4 * k)), 4 * k, k, 3, bias=False)
            x = g.op("Concat", [x, y], axis=1)
            c += k
        if block < 2:
            x = g.conv(g.relu(g.bn(x, c)), c, c // 2, 1, bias=False)
            c //= 2
            x = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.relu(g.bn(x, c))
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.weight(100, c), g.vec(100)], transB=1)
    g.nodes[-1].output[0] = "y"
    m = g.model([fin("x", [1, 3, 128, 128])], [fout("y")], 11)
    return Case(m, {"x": image(4, 1, 3, 128, 128)})


def inception_blocks():
    """Inception-style: parallel 1x1, 1x1->3x3, 1x1->3x3->3x3 and pool->1x1
    branches concatenated; Inception-v3 factorized 1x7/7x1 convolutions with
    asymmetric kernels; AveragePool with count_include_pad=0; a reduction
    block with stride-2 branches and a MaxPool branch."""
    g = G(5)

    def cbr(x, cin, cout, k, stride=1, pad=None):
        return g.relu(g.bn(g.conv(x, cin, cout, k, stride=stride, pad=pad, bias=False), cout))

    x = cbr("img", 3, 32, 3, stride=2, pad=0)
    x = cbr(x, 32, 64, 3)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    c = 64

    def block_a(x, c):
        b1 = cbr(x, c, 32, 1)
        b2 = cbr(cbr(x, c, 24, 1), 24, 32, 3)
        b3 = cbr(cbr(cbr(x, c, 16, 1), 16, 24, 3), 24, 24, 3)
        b4 = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                  count_include_pad=0)
        b4 = cbr(b4, c, 16, 1)
        return g.op("Concat", [b1, b2, b3, b4], axis=1), 32 + 32 + 24 + 16

    x, c = block_a(x, c)
    x, c = block_a(x, c)
    # reduction
    r1 = cbr(x, c, 64, 3, stride=2, pad=0)
    r2 = cbr(cbr(cbr(x, c, 32, 1), 32, 48, 3), 48, 48, 3, stride=2, pad=0)
    r3 = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    x = g.op("Concat", [r1, r2, r3], axis=1)
    c = 64 + 48 + c
    # factorized 7x7 (Inception-v3 "B" block)
    b1 = cbr(x, c, 48, 1)
    b2 = cbr(cbr(cbr(x, c, 32, 1), 32, 32, (1, 7), pad=[0, 3, 0, 3]), 32, 48, (7, 1),
             pad=[3, 0, 3, 0])
    b3 = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b3 = cbr(b3, c, 32, 1)
    x = g.op("Concat", [b1, b2, b3], axis=1)
    c = 48 + 48 + 32
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x])
    x = g.op("Gemm", [x, g.weight(10, c), g.vec(10)], transB=1)
    x = g.op("Softmax", [x], axis=1)
    g.nodes[-1].output[0] = "probs"
    m = g.model([fin("img", [1, 3, 75, 75])], [fout("probs")], 12)
    return Case(m, {"img": image(5, 1, 3, 75, 75)})


def unet_decoder():
    """A UNet/FCN decoder as PyTorch writes ConvTranspose2d (opset 17):
    stride-2 transposed convolutions with output_padding and groups, a skip
    Concat, GroupNormalization-free BN+ReLU, and a 1x1 head."""
    g = G(91)
    x = g.relu(g.conv("x", 4, 16, 3, stride=2))  # 16x16 -> 8x8
    w1 = g.weight(16, 8, 3, 3)
    u1 = g.op("ConvTranspose", [x, w1, g.vec(8)], kernel_shape=[3, 3], strides=[2, 2],
              pads=[1, 1, 1, 1], output_padding=[1, 1])  # 8 -> 16
    cat = g.op("Concat", [g.relu(u1), "x"], axis=1)  # 12 channels
    w2 = g.weight(12, 3, 4, 4)
    u2 = g.op("ConvTranspose", [cat, w2], kernel_shape=[4, 4], strides=[2, 2],
              pads=[1, 1, 1, 1], group=3)  # 16 -> 32, 9 channels
    head = g.conv(g.relu(g.bn(u2, 9)), 9, 2, 1)
    g.op("Identity", [head])
    g.nodes[-1].output[0] = "y"
    m = g.model([fin("x", [1, 4, 16, 16])], [fout("y")], 17)
    return Case(m, {"x": image(91, 1, 4, 16, 16)})


def yolo_style():
    """YOLOv5-style (opset 12): Focus slicing x[..., ::2, ::2] with INT64_MAX
    ends, SiLU as x*Sigmoid(x), LeakyRelu, MaxPool SPP branches, nearest
    Resize with scales, Concat of skip connections, a detection head
    Reshape [B, 3, 9, H, W] -> Transpose -> Sigmoid; batch 2."""
    g = G(70)
    x = "images"
    parts = []
    for h0, w0 in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        parts.append(g.op("Slice", [x, g.i64([h0, w0]), g.i64([I64_MAX, I64_MAX]),
                                    g.i64([2, 3]), g.i64([2, 2])]))
    x = g.op("Concat", parts, axis=1)  # [2,12,16,16]

    def cs(x, cin, cout, k, stride=1):
        y = g.bn(g.conv(x, cin, cout, k, stride=stride, bias=False), cout)
        return g.op("Mul", [y, g.op("Sigmoid", [y])])

    x = cs(x, 12, 16, 3)
    c1 = cs(x, 16, 32, 3, stride=2)  # [2,32,8,8]
    c2 = g.op("LeakyRelu", [g.conv(c1, 32, 32, 3, stride=2)], alpha=0.1)  # [2,32,4,4]
    # SPP: parallel max pools, concatenated
    pools = [g.op("MaxPool", [c2], kernel_shape=[k, k], strides=[1, 1], pads=[k // 2] * 4)
             for k in (5, 9, 13)]
    spp = cs(g.op("Concat", [c2] + pools, axis=1), 128, 32, 1)
    up = g.op("Resize", [spp, g.f32([]), g.f32([1, 1, 2, 2])], mode="nearest")
    p3 = cs(g.op("Concat", [up, c1], axis=1), 64, 32, 3)

    def head(x, cin, hw):
        y = g.conv(x, cin, 27, 1)
        y = g.op("Reshape", [y, g.i64([2, 3, 9, hw, hw])])
        return g.op("Sigmoid", [g.op("Transpose", [y], perm=[0, 1, 3, 4, 2])])

    g.op("Identity", [head(p3, 32, 8)])
    g.nodes[-1].output[0] = "p3"
    g.op("Identity", [head(spp, 32, 4)])
    g.nodes[-1].output[0] = "p4"
    m = g.model([fin("images", [2, 3, 32, 32])], [fout("p3"), fout("p4")], 12)
    return Case(m, {"images": image(70, 2, 3, 32, 32)})


def unet_style():
    """UNet-style segmentation (opset 11): encoder with MaxPool, decoder with
    Resize bilinear align_corners=True (PyTorch's Upsample(align_corners=True))
    and Resize with sizes taken from the skip tensor's Shape, skip Concats,
    per-pixel Softmax over classes (axis=1 at opset 13 form via Transpose)."""
    g = G(71)

    def cbr(x, cin, cout):
        return g.relu(g.bn(g.conv(x, cin, cout, 3, bias=False), cout))

    e1 = cbr("x", 3, 8)  # 24x24
    e2 = cbr(g.op("MaxPool", [e1], kernel_shape=[2, 2], strides=[2, 2]), 8, 16)  # 12
    e3 = cbr(g.op("MaxPool", [e2], kernel_shape=[2, 2], strides=[2, 2]), 16, 32)  # 6
    u2 = g.op("Resize", [e3, g.f32([]), g.f32([1, 1, 2, 2])], mode="linear",
              coordinate_transformation_mode="align_corners")
    d2 = cbr(g.op("Concat", [u2, e2], axis=1), 48, 16)
    # F.interpolate(d2, size=e1.shape[2:]): sizes = d2's N, C and e1's H, W
    sizes = g.op("Concat", [g.op("Slice", [g.op("Shape", [d2]), g.i64([0]), g.i64([2])]),
                            g.op("Slice", [g.op("Shape", [e1]), g.i64([2]), g.i64([4])])],
                 axis=0)
    u1 = g.op("Resize", [d2, g.f32([]), g.f32([]), sizes], mode="linear",
              coordinate_transformation_mode="pytorch_half_pixel")
    d1 = cbr(g.op("Concat", [u1, e1], axis=1), 24, 8)
    logits = g.conv(d1, 8, 5, 1)
    # Softmax over channels, written the opset-11 way: move C last first.
    t = g.op("Transpose", [logits], perm=[0, 2, 3, 1])
    p = g.op("Softmax", [t], axis=3)
    g.op("Transpose", [p], perm=[0, 3, 1, 2])
    g.nodes[-1].output[0] = "mask"
    m = g.model([fin("x", [1, 3, 24, 24])], [fout("mask")], 11)
    return Case(m, {"x": image(71, 1, 3, 24, 24)})


def mobilenet_v3_style():
    """MobileNetV3 blocks (opset 14): HardSwish and HardSigmoid operators,
    squeeze-excitation (GlobalAveragePool -> 1x1 convs -> HardSigmoid -> Mul
    broadcast over H, W), and the older decomposed hard-swish
    x * Clip(x + 3, 0, 6) / 6; EfficientNet's Swish as x * Sigmoid(x)."""
    g = G(73)

    def se(x, c):
        s = g.op("GlobalAveragePool", [x])
        s = g.relu(g.conv(s, c, c // 4, 1))
        s = g.op("HardSigmoid", [g.conv(s, c // 4, c, 1)], alpha=1 / 6, beta=0.5)
        return g.op("Mul", [x, s])

    x = g.bn(g.conv("x", 3, 16, 3, stride=2, bias=False), 16)
    x = g.op("HardSwish", [x])
    y = g.relu(g.bn(g.conv(x, 16, 16, 3, group=16, bias=False), 16))
    x = g.op("Add", [x, g.bn(g.conv(se(y, 16), 16, 16, 1, bias=False), 16)])
    y = g.bn(g.conv(x, 16, 64, 1, bias=False), 64)
    y = g.op("Div", [g.op("Mul", [y, g.op("Clip", [g.op("Add", [y, g.f32(3.0)]), g.f32(0.0),
                                                   g.f32(6.0)])]), g.f32(6.0)])
    y = g.bn(g.conv(y, 64, 64, 5, stride=2, group=64, bias=False), 64)
    y = g.op("Mul", [y, g.op("Sigmoid", [y])])
    y = se(y, 64)
    y = g.bn(g.conv(y, 64, 24, 1, bias=False), 24)
    y = g.op("HardSwish", [y])
    y = g.op("ReduceMean", [y], axes=[2, 3], keepdims=1)
    g.op("Flatten", [y])
    g.nodes[-1].output[0] = "features"
    m = g.model([fin("x", [1, 3, 40, 40])], [fout("features")], 14)
    return Case(m, {"x": image(73, 1, 3, 40, 40)})


def resnext_groups():
    """ResNeXt-style grouped convolutions (groups=8, not depthwise), a dilated
    3x3 conv (DeepLab), Conv auto_pad SAME_LOWER, Gemm with transA and a
    [M, 1] C broadcast; batch 3."""
    g = G(74)
    x = g.relu(g.bn(g.conv("x", 3, 32, 3, bias=False), 32))
    y = g.relu(g.bn(g.conv(x, 32, 64, 1, bias=False), 64))
    y = g.relu(g.bn(g.conv(y, 64, 64, 3, group=8, bias=False), 64))
    y = g.bn(g.conv(y, 64, 32, 1, bias=False), 32, gamma=0.5)
    x = g.relu(g.op("Add", [x, y]))
    x = g.relu(g.conv(x, 32, 32, 3, dilation=2))  # pads 2
    x = g.op("Conv", [x, g.weight(16, 32, 4, 4), g.vec(16)], kernel_shape=[4, 4],
             strides=[2, 2], auto_pad="SAME_LOWER")  # [3,16,6,6]
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Reshape", [x, g.i64([3, 16])])
    xt = g.op("Transpose", [x], perm=[1, 0])  # [16, 3]
    g.op("Gemm", [xt, g.weight(16, 7), g.f32(g.rng.uniform(-1, 1, (3, 1)))],
         transA=1, alpha=0.7, beta=0.3)
    g.nodes[-1].output[0] = "out"
    m = g.model([fin("x", [3, 3, 12, 12])], [fout("out")], 13)
    return Case(m, {"x": image(74, 3, 3, 12, 12)})


def pool_edges():
    """Pooling window edges: MaxPool and AveragePool with ceil_mode and pads
    (count_include_pad 0 and 1), strides larger than kernels, dilated MaxPool,
    1-D pooling and GlobalMaxPool."""
    g = G(75)
    x = "x"  # [2, 3, 11, 13]
    outs = {
        "mp_ceil": g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                        ceil_mode=1),
        "ap_ceil_excl": g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2],
                             pads=[1, 0, 1, 1], ceil_mode=1, count_include_pad=0),
        "ap_ceil_incl": g.op("AveragePool", [x], kernel_shape=[3, 2], strides=[2, 3],
                             pads=[1, 1, 0, 1], ceil_mode=1, count_include_pad=1),
        "mp_stride": g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[3, 3]),
        "mp_dil": g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[1, 1],
                       dilations=[2, 2]),
        "gmp": g.op("GlobalMaxPool", [x]),
        "mp1d": g.op("MaxPool", [g.op("Reshape", [x, g.i64([2, 3, -1])])], kernel_shape=[4],
                     strides=[3], pads=[1, 2]),
    }
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("x", [2, 3, 11, 13])], [fout(n) for n in outs], 12)
    return Case(m, {"x": image(75, 2, 3, 11, 13)})


def stn_style():
    """A spatial transformer (opset 20): a localization net (conv, pool,
    Gemm) predicts theta, AffineGrid makes the sampling grid of a constant
    size, GridSample resamples the input bilinearly with zero padding and
    bicubically with reflection."""
    g = G(98)
    x = "x"  # [2, 3, 12, 16]
    loc = g.relu(g.conv(x, 3, 8, 3, stride=2))
    loc = g.op("GlobalAveragePool", [loc])
    loc = g.op("Flatten", [loc])
    # theta near the identity: a small learned offset.
    theta = g.op("Add", [g.op("Gemm", [loc, g.weight(6, 8, scale=0.2)], transB=1),
                         g.f32([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])])
    theta = g.op("Reshape", [theta, g.i64([2, 2, 3])])
    grid = g.op("AffineGrid", [theta, g.i64([2, 3, 10, 14])], align_corners=0)
    outs = {"bilinear": g.op("GridSample", [x, grid], mode="linear", padding_mode="zeros"),
            "cubic": g.op("GridSample", [x, grid], mode="cubic", padding_mode="reflection",
                          align_corners=1)}
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("x", [2, 3, 12, 16])], [fout(n) for n in outs], 20)
    return Case(m, {"x": image(99, 2, 3, 12, 16)})
