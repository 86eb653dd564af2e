#!/usr/bin/env python3
"""Export models brrr was not tuned on (torchvision CNNs, Swin-T, DistilBERT, a T5 encoder, a
small Whisper encoder), random seeded weights, batch 1, TorchScript exporter, opset 17, to
OUT/<name>/model.onnx with test_data_set_0 (PyTorch's fp32 output). They check coverage and
speed beyond the model suite (export.py): `brrr run --check` on each, and
`scripts/cpu_vs_ort.py OUT/*/model.onnx`.

Needs torch, torchvision, transformers, onnx (the model suite's venv):
    /work/venv-models/bin/python scripts/models/export_heldout.py --out /work/heldout [names...]
"""
import argparse
import os

CNNS = ["mobilenet_v2", "efficientnet_b0", "densenet121", "convnext_tiny", "regnet_y_400mf",
        "shufflenet_v2_x1_0", "swin_t", "mnasnet0_5", "googlenet", "inception_v3"]
TRANSFORMERS = ["distilbert", "t5_encoder", "whisper_enc"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("names", nargs="*", help=f"default: all of {CNNS + TRANSFORMERS}")
    a = ap.parse_args()
    import torch
    from onnx import numpy_helper
    want = set(a.names or CNNS + TRANSFORMERS)

    def save(name, model, inputs, input_names):
        d = os.path.join(a.out, name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        model.eval()
        with torch.no_grad():
            ref = model(*inputs)
        if hasattr(ref, "keys"):
            ref = list(ref.values())[0]
        if isinstance(ref, (tuple, list)):
            ref = ref[0]
        torch.onnx.export(model, tuple(inputs), os.path.join(d, "model.onnx"),
                          input_names=input_names, output_names=["out"], opset_version=17,
                          dynamo=False)
        for i, x in enumerate(inputs):
            with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x.numpy(), input_names[i]).SerializeToString())
        with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(ref.numpy(), "out").SerializeToString())
        print(name, "ok", tuple(ref.shape), flush=True)

    torch.manual_seed(0)
    import torchvision.models as tvm
    for n in CNNS:
        if n not in want:
            continue
        kw = {"aux_logits": False, "init_weights": True} if n in ("googlenet", "inception_v3") else {}
        side = 299 if n == "inception_v3" else 224
        save(n, getattr(tvm, n)(weights=None, **kw), [torch.randn(1, 3, side, side)], ["input"])
    import transformers as tf
    ids = torch.randint(0, 1000, (1, 64))
    if "distilbert" in want:
        save("distilbert", tf.DistilBertModel(tf.DistilBertConfig()), [ids], ["input_ids"])
    if "t5_encoder" in want:
        c = tf.T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8)
        save("t5_encoder", tf.T5EncoderModel(c), [ids], ["input_ids"])
    if "whisper_enc" in want:
        c = tf.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                             decoder_layers=1)
        save("whisper_enc", tf.WhisperModel(c).encoder, [torch.randn(1, 80, 3000)],
             ["input_features"])


if __name__ == "__main__":
    main()
