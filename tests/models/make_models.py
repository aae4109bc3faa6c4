#!/usr/bin/env python3
"""Model zoo for kiln's model tests: whole networks with seeded random weights.

Every model is written with onnx.helper (no downloads, no torch) the way some
exporter writes it: torchvision-style CNNs, transformer layers, models at old
opsets with old-style attributes, legacy PyTorch shape subgraphs, dynamo-style
graphs, Keras/TF-style NHWC graphs. Each builder returns a Case: the model and
a feed for each input. The builders live by family in cnn_models.py,
transformer_models.py, exporter_models.py, sequence_models.py and
quantized_models.py (graph_builder.py is their graph builder); this file
names them all (MODELS) and holds the quantized variants of the float ones.

Usage: tests/models/make_models.py OUT_DIR [NAME ...]
  writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.inputs.npz (default: all models);
       tests/models/make_models.py --list   prints the model names.
"""
import os
import sys

import numpy as np
import onnx

from cnn_models import (densenet_blocks, inception_blocks, mobilenet_v2, mobilenet_v3_style,
                        pool_edges, resnet18, resnet50, resnext_groups, squeezenet, stn_style,
                        unet_decoder, unet_style, yolo_style)
from exporter_models import (dropout_opset6, dynamo_functions, dynamo_style, heads_flatten_reshape,
                             identity_dropout, int_numerics, keras_nhwc, legacy_pytorch,
                             legacy_upsample_bilinear, norms_1d, odd_outputs, opset6, opset9,
                             opset11, opset13)
from graph_builder import Case
from quantized_models import output_step, qdq_int8, qoperator_ops, quantize
from sequence_models import (gru_sequence, log_mel_style, lstm_sequence, ngram_classifier,
                             scripted_control_flow)
from transformer_models import bert_layer, gpt2_block, llama_style, matmul_broadcast, vit_style


# ---------------------------------------------------------------- int8


def resnet18_int8():
    """ResNet-18 statically quantized (QDQ): integer convolutions
    (compiler/ops/conv_int8.cc) from the dequantized activations and
    weights. Within 2 output steps of onnxruntime (its own runs with and
    without graph optimizations differ by up to 2 on ResNet-50)."""
    f = resnet18()
    m = quantize(f, dynamic=False)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=2.01 * output_step(m))


def mobilenet_v2_int8():
    """MobileNetV2 statically quantized (QDQ): depthwise layers, so every
    quantize/dequantize pair is computed in float in the epilogue before it.
    Within 8 output steps (onnxruntime's own two runs differ by 6)."""
    f = mobilenet_v2()
    m = quantize(f, dynamic=False)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=8.01 * output_step(m))


def resnet18_int8_qop():
    """ResNet-18 statically quantized in onnxruntime's operator form
    (QLinearConv, com.microsoft QLinearAdd, QLinearGlobalAveragePool and
    QGemm): the same integer kernels as the QDQ form. Within 2 output steps,
    as resnet18_int8."""
    f = resnet18()
    m = quantize(f, dynamic=False, qoperator=True)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=2.01 * output_step(m))


def mobilenet_v2_int8_qop():
    """MobileNetV2 statically quantized in the operator form (QLinearConv
    depthwise and pointwise, QLinearAdd, QLinearGlobalAveragePool, QGemm).
    Within 8 output steps, as mobilenet_v2_int8."""
    f = mobilenet_v2()
    m = quantize(f, dynamic=False, qoperator=True)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=8.01 * output_step(m))


def bert_layer_int8():
    """The BERT-base layer dynamically quantized: its weight MatMuls are
    integer matmuls (compiler/ops/matmul_int8.cc), exact; the float parts
    around them move the dynamically quantized inputs by a step at times."""
    f = bert_layer()
    return Case(quantize(f, dynamic=True), f.feeds, rtol=0, atol=3e-3)


def bert_layer_qdq():
    """The BERT-base layer statically quantized (QDQ, what quantize_static
    writes for a transformer: its projections as QDQ Gemms, GELU's erf
    between quantize/dequantize pairs): integer matmuls of the bytes, the
    rest in float round trips. Within 2 output steps of onnxruntime (a
    requantization folded into one multiply while GELU read the value before
    it once put it 10 steps off)."""
    f = bert_layer()
    m = quantize(f, dynamic=False)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=2.01 * output_step(m))


def bert_layer_qop():
    """The BERT-base layer statically quantized in the operator form (QGemm
    projections, QLinearMatMul attention, QLinearAdd, QLinearMul,
    QLinearSoftmax, 8-bit Reshape/Transpose between them)."""
    f = bert_layer()
    return Case(quantize(f, dynamic=False, qoperator=True), f.feeds, rtol=0, atol=1e-2)


MODELS = {f.__name__: f for f in [
    resnet50, resnet18, mobilenet_v2, squeezenet, densenet_blocks, inception_blocks, bert_layer,
    gpt2_block, opset6, opset9, opset11, opset13, legacy_pytorch, dynamo_style,
    dynamo_functions, keras_nhwc, heads_flatten_reshape, identity_dropout, dropout_opset6,
    yolo_style, unet_style, vit_style, mobilenet_v3_style, resnext_groups, pool_edges, norms_1d,
    odd_outputs, legacy_upsample_bilinear, llama_style, matmul_broadcast, int_numerics,
    unet_decoder, qdq_int8, qoperator_ops, resnet18_int8, resnet18_int8_qop, mobilenet_v2_int8, mobilenet_v2_int8_qop, bert_layer_int8, bert_layer_qdq, bert_layer_qop,
    lstm_sequence, gru_sequence, scripted_control_flow, stn_style, log_mel_style,
    ngram_classifier]}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--list":
        print(";".join(MODELS))
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        case = MODELS[name]()
        onnx.save(case.model, os.path.join(out, name + ".onnx"))
        np.savez(os.path.join(out, name + ".inputs.npz"), **case.feeds)
        print(os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
