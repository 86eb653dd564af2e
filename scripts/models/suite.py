"""The model suite: five real architectures built in code with random, seeded weights.

Nothing is downloaded: transformers models are built from configs written here, torchvision models
with weights=None. export.py turns them into ONNX; cpu_vs_ort.py and gpu_bench.py rebuild the same
modules (same seed, same config) to time PyTorch on the same weights brrr runs.

Each spec says how to build the module (full size or --small), what its inputs are at a given
batch, and the ONNX names of its inputs and outputs. The modules are wrapped so that forward takes
exactly the model's inputs and returns a plain tensor: both exporters then see the same signature.
"""
import torch

SEQ = 128  # BERT, GPT-2 and Llama prefill length
IMAGE = 224
SEED = 0


class TextModel(torch.nn.Module):
    """A transformers model called with input_ids only, returning one tensor (no cache, no dict)."""

    def __init__(self, inner, output):
        super().__init__()
        self.inner = inner
        self.output = output

    def forward(self, input_ids):
        # An all-ones attention mask, as a tokenizer gives for one unpadded sequence. Without
        # one, transformers looks for packed sequences in the position ids with torch.diff,
        # which the TorchScript exporter cannot export.
        kw = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), return_dict=True)
        if self.output == "logits":
            kw["use_cache"] = False
        return getattr(self.inner(**kw), self.output)


def _config(cfg, attn):
    """attn: None for transformers' default attention (SDPA), or "eager" (plain MatMul, Softmax,
    MatMul: the same weights and the same math)."""
    if attn:
        cfg._attn_implementation = attn
    return cfg


def _bert(small, attn=None):
    from transformers import BertConfig, BertModel
    kw = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=512) if small else {}
    cfg = _config(BertConfig(**kw), attn)  # BertConfig() is bert-base-uncased: 12 x 768, 12 heads, vocab 30522
    return TextModel(BertModel(cfg, add_pooling_layer=False), "last_hidden_state"), cfg.vocab_size


def _gpt2(small, attn=None):
    from transformers import GPT2Config, GPT2LMHeadModel
    kw = dict(n_embd=128, n_layer=2, n_head=2) if small else {}
    cfg = _config(GPT2Config(**kw), attn)  # GPT2Config() is gpt2 small: 12 x 768, 12 heads, vocab 50257
    return TextModel(GPT2LMHeadModel(cfg), "logits"), cfg.vocab_size


def _llama(small, layers=None, attn=None):
    from transformers import LlamaConfig, LlamaForCausalLM
    # Llama-3.2-1B's shape: RMSNorm, rotary embeddings (llama3 scaling), SiLU-gated MLP,
    # grouped-query attention (32 query heads, 8 kv heads), tied embeddings.
    kw = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
              num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
              max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
              rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
              tie_word_embeddings=True, hidden_act="silu")
    if small:
        kw.update(hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=1024)
    if layers:
        kw["num_hidden_layers"] = layers
    cfg = _config(LlamaConfig(**kw), attn)
    return TextModel(LlamaForCausalLM(cfg), "logits"), cfg.vocab_size


def _resnet50(small):
    import torchvision
    if small:  # a ResNet with one bottleneck block per stage and a 10-class head
        from torchvision.models.resnet import Bottleneck, ResNet
        return ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10), None
    return torchvision.models.resnet50(weights=None), None


def _vit_b_16(small):
    import torchvision
    if small:
        from torchvision.models.vision_transformer import VisionTransformer
        m = VisionTransformer(image_size=IMAGE, patch_size=16, num_layers=2, num_heads=2,
                              hidden_dim=128, mlp_dim=512, num_classes=10)
    else:
        m = torchvision.models.vit_b_16(weights=None)
    # torchvision initializes the classifier head to zeros, so every output would be 0 and a
    # check against it would prove nothing: random head weights instead.
    torch.nn.init.normal_(m.heads.head.weight, std=0.02)
    torch.nn.init.normal_(m.heads.head.bias, std=0.02)
    return m, None


class Spec:
    def __init__(self, name, build, kind, output):
        self.name, self._build, self.kind, self.output = name, build, kind, output

    @property
    def input_name(self):
        return "input_ids" if self.kind == "text" else "pixel_values"

    def input_shape(self, batch):
        return [batch, SEQ] if self.kind == "text" else [batch, 3, IMAGE, IMAGE]

    def build(self, small=False, **kw):
        """The module in fp32 eval mode, and the vocabulary size (None for image models). The
        seed is set here, so the same spec and size always give the same weights."""
        torch.manual_seed(SEED)
        model, vocab = self._build(small, **kw)
        return model.eval(), vocab

    def inputs(self, batch, vocab, seed=1):
        """Seeded inputs: token ids uniform over the vocabulary, or standard-normal pixels."""
        g = torch.Generator().manual_seed(seed)
        shape = self.input_shape(batch)
        if self.kind == "text":
            return torch.randint(0, vocab, shape, generator=g, dtype=torch.int64)
        return torch.randn(shape, generator=g)


SPECS = {
    "bert_base": Spec("bert_base", _bert, "text", "last_hidden_state"),
    "gpt2": Spec("gpt2", _gpt2, "text", "logits"),
    "resnet50": Spec("resnet50", _resnet50, "image", "logits"),
    "vit_b_16": Spec("vit_b_16", _vit_b_16, "image", "logits"),
    "llama_1b": Spec("llama_1b", _llama, "text", "logits"),
}

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# The large batch of each model (issue 16): timed, and checked with --large-batch exports.
BIG_BATCH = {"bert_base": 32, "gpt2": 16, "resnet50": 64, "vit_b_16": 32, "llama_1b": 8}
EXPORTERS = ["torchscript", "dynamo"]


def model_dir_name(model, dtype, exporter):
    return f"{model}_{dtype}_{exporter}"
