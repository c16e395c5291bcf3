#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf (fuzz/corpus/gguf/): small GGUF files,
each a few hundred bytes, covering every metadata value type, nested arrays,
versions 2 and 3, a custom alignment, tensors of several types, and the
tokenizer metadata of a SentencePiece ("llama") and a byte-level BPE ("gpt2")
vocabulary. Real model files are megabytes; libFuzzer mutates small inputs far
faster. Run it again after changing it: python3 fuzz/gguf_seeds.py
"""
import os
import struct

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        elem, items = v
        return struct.pack("<IQ", elem, len(items)) + b"".join(value(elem, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kv, tensors=(), version=3, alignment=32):
    """kv: [(key, type, value)]; tensors: [(name, ne, ggml_type, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, t, v in kv:
        out += s(key) + struct.pack("<I", t) + value(t, v)
    offset, blobs = 0, b""
    for name, ne, gtype, data in tensors:
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", gtype, offset)
        pad = (-len(data)) % alignment
        blobs += data + b"\0" * pad
        offset += len(data) + pad
    out += b"\0" * ((-len(out)) % alignment)
    return out + blobs


F32_T, F16_T, Q8_0_T = 0, 1, 8
SPM_TOKENS = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(0x20, 0x30)] + \
             ["\u2581", "\u2581Hello", "\u2581world", "H", "e", "l", "o", "w", "r", "d", "!", "1", "2"]
BPE_TOKENS = ["H", "e", "l", "o", "\u0120", "w", "r", "d", "!", "He", "ll", "Hell", "Hello",
              "\u0120w", "or", "\u0120wor", "\u0120world", "<|endoftext|>"]
BPE_MERGES = ["H e", "l l", "He ll", "Hell o", "\u0120 w", "o r", "\u0120w or", "\u0120wor ld"]


def spm_kv(extra=()):
    n = len(SPM_TOKENS)
    kv = [("general.architecture", STR, "llama"),
          ("tokenizer.ggml.model", STR, "llama"),
          ("tokenizer.ggml.tokens", ARR, (STR, SPM_TOKENS)),
          ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(n)])),
          ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3] + [6] * 16 + [1] * (n - 19))),
          ("tokenizer.ggml.bos_token_id", U32, 1),
          ("tokenizer.ggml.eos_token_id", U32, 2)]
    return kv + list(extra)


def bpe_kv(pre="gpt-2", extra=()):
    kv = [("general.architecture", STR, "gpt2"),
          ("tokenizer.ggml.model", STR, "gpt2"),
          ("tokenizer.ggml.pre", STR, pre),
          ("tokenizer.ggml.tokens", ARR, (STR, BPE_TOKENS)),
          ("tokenizer.ggml.token_type", ARR, (I32, [1] * (len(BPE_TOKENS) - 1) + [3])),
          ("tokenizer.ggml.merges", ARR, (STR, BPE_MERGES)),
          ("tokenizer.ggml.eos_token_id", U32, len(BPE_TOKENS) - 1)]
    return kv + list(extra)


def seeds():
    yield "empty_v3", gguf([])
    yield "empty_v2", gguf([], version=2)
    yield "scalars", gguf([("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 700), ("i16", I16, -700),
                           ("u32", U32, 70000), ("i32", I32, -70000), ("f32", F32, 1.5),
                           ("bool", BOOL, True), ("u64", U64, 2**40), ("i64", I64, -2**40),
                           ("f64", F64, 2.25), ("str", STR, "h\u00e9llo")])
    yield "arrays", gguf([("a.u8", ARR, (U8, [1, 2, 3])), ("a.f32", ARR, (F32, [0.5, -1.0])),
                          ("a.str", ARR, (STR, ["x", "", "yz"])), ("a.empty", ARR, (I64, [])),
                          ("a.nested", ARR, (ARR, [(I32, [1, 2]), (STR, ["a"])]))])
    yield "alignment_64", gguf([("general.alignment", U32, 64)],
                               [("w", [4], F32_T, struct.pack("<4f", 1, 2, 3, 4))], alignment=64)
    yield "tensors_f32_f16", gguf([("general.architecture", STR, "llama")],
                                  [("a.weight", [4, 2], F32_T, struct.pack("<8f", *range(8))),
                                   ("b.weight", [8], F16_T, struct.pack("<8e", *range(8)))])
    yield "tensor_q8_0", gguf([], [("q", [32], Q8_0_T, struct.pack("<e", 0.5) + bytes(range(32)))])
    yield "tensors_v2", gguf([("k", STR, "v")], [("t", [2, 2], F32_T, struct.pack("<4f", 1, 2, 3, 4))],
                             version=2)
    yield "llama_config", gguf([("general.architecture", STR, "llama"),
                                ("llama.context_length", U32, 128), ("llama.embedding_length", U32, 64),
                                ("llama.block_count", U32, 2), ("llama.rope.freq_base", F32, 10000.0),
                                ("llama.attention.head_count", U32, 4)])
    yield "spm_vocab", gguf(spm_kv())
    yield "spm_vocab_no_space_prefix", gguf(spm_kv([("tokenizer.ggml.add_space_prefix", BOOL, False),
                                                    ("tokenizer.ggml.add_eos_token", BOOL, True)]))
    yield "bpe_vocab_gpt2", gguf(bpe_kv())
    yield "bpe_vocab_llama3", gguf(bpe_kv("llama-bpe", [("tokenizer.ggml.bos_token_id", U32, 0)]))
    yield "bpe_vocab_qwen2", gguf(bpe_kv("qwen2"))
    yield "chat_template", gguf(spm_kv([("tokenizer.chat_template", STR,
                                         "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}")]))


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
