"""all-MiniLM-L6-v2 in NumPy: the BERT encoder run from int8 weights with a float scale per column.

Six layers of 384 dimensions and 12 heads, as the model is published. The weights stay int8 in
memory (about 23 MB) and each matrix is turned to float32 only while it is multiplied, so a run
holds one matrix (at most 2.4 MB) besides its activations. A general inference runtime would cost
the bot about 40 MB of resident memory for this one small model, on instances of 512 MB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]

HEADS = 12
_EPSILON = 1e-12
_NEVER = np.float32(-3.4028234663852886e38)  # a masked key's score: softmax gives it 0


@dataclass(frozen=True)
class Linear:
    """y = x @ (weight * scale) + bias, with `weight` int8 (in, out) and `scale` float32 (1, out)."""

    weight: npt.NDArray[np.int8]
    scale: Floats
    bias: Floats

    def __call__(self, x: Floats) -> Floats:
        # (x @ q) * s equals x @ (q * s) for a per-column scale: the float32 copy is q's alone.
        y: Floats = np.matmul(x, self.weight.astype(np.float32))
        y *= self.scale
        y += self.bias
        return y


@dataclass(frozen=True)
class Norm:
    """Layer normalisation over the last axis."""

    weight: Floats
    bias: Floats

    def __call__(self, x: Floats) -> Floats:
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        variance = np.mean(centred * centred, axis=-1, keepdims=True)
        centred /= np.sqrt(variance + _EPSILON)
        centred *= self.weight
        centred += self.bias
        return centred


@dataclass(frozen=True)
class Layer:
    """One encoder layer: self-attention, then the feed-forward block, each with a residual and norm."""

    query: Linear
    key: Linear
    value: Linear
    output: Linear
    attention_norm: Norm
    intermediate: Linear
    down: Linear
    output_norm: Norm

    def __call__(self, x: Floats, masked: npt.NDArray[np.bool_]) -> Floats:
        batch, tokens, width = x.shape
        size = width // HEADS

        def heads(t: Floats) -> Floats:
            return t.reshape(batch, tokens, HEADS, size).transpose(0, 2, 1, 3)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = np.matmul(q, k.transpose(0, 1, 3, 2)) * np.float32(1 / math.sqrt(size))
        scores = np.where(masked[:, np.newaxis, np.newaxis, :], _NEVER, scores)
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        attention = scores
        mixed = np.matmul(attention, v).transpose(0, 2, 1, 3).reshape(batch, tokens, width)
        x = self.attention_norm(self.output(mixed) + x)
        hidden = self.intermediate(x)
        gate = _erf(hidden * np.float32(1 / math.sqrt(2)))  # GELU, exact: x * (1 + erf(x / sqrt 2)) / 2
        gate += 1
        gate *= 0.5
        hidden *= gate
        return self.output_norm(self.down(hidden) + x)


# Abramowitz and Stegun 7.1.26: erf(z) = 1 - t * P(t) * exp(-z^2), t = 1 / (1 + p z), z >= 0, with an
# absolute error under 1.5e-7 (float32 itself resolves 6e-8 near 1).
_ERF_P = np.float32(0.3275911)
_ERF_COEFFICIENTS = tuple(
    map(np.float32, (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))
)


def _erf(x: Floats) -> Floats:
    """The error function, elementwise (NumPy has none); works in place on fresh arrays."""
    z = np.abs(x)
    t = z * _ERF_P
    t += 1
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _ERF_COEFFICIENTS[0])
    for coefficient in _ERF_COEFFICIENTS[1:]:
        poly *= t
        poly += coefficient
    poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # now erfc(|x|)
    np.subtract(1, poly, out=poly)
    return np.copysign(poly, x, out=poly)


@dataclass(frozen=True)
class Encoder:
    """The whole model: token, position and segment embeddings, their norm, then the layers."""

    words: npt.NDArray[np.int8]  # (vocabulary, width), a float32 scale per row
    word_scale: Floats
    positions: npt.NDArray[np.int8]  # (max tokens, width), a float32 scale per row
    position_scale: Floats
    segment: Floats  # token type 0's row: every input here is one segment
    embedding_norm: Norm
    layers: tuple[Layer, ...]

    def __call__(self, ids: Ids, mask: Ids) -> Floats:
        """The last hidden state, (batch, tokens, width), of padded `ids` with their attention mask."""
        tokens = ids.shape[1]
        # Only the rows looked up are turned to float32, never the 30,522-row table.
        words = self.words[ids].astype(np.float32) * self.word_scale[ids]
        positions = self.positions[:tokens].astype(np.float32) * self.position_scale[:tokens]
        x = self.embedding_norm(words + positions + self.segment)
        masked = mask == 0
        for layer in self.layers:
            x = layer(x, masked)
        return x


def load_encoder(source: Path | IO[bytes]) -> Encoder:
    """Read the weights file (an uncompressed .npz written by .ci/minilm_weights.py)."""
    with np.load(source, allow_pickle=False) as found:
        arrays = {name: found[name] for name in found.files}

    def linear(stem: str) -> Linear:
        return Linear(arrays[f"{stem}.weight"], arrays[f"{stem}.scale"], arrays[f"{stem}.bias"])

    def norm(stem: str) -> Norm:
        return Norm(arrays[f"{stem}.weight"], arrays[f"{stem}.bias"])

    count = len({name.split(".")[0] for name in arrays if name.startswith("layer")})
    layers = tuple(
        Layer(
            query=linear(f"layer{n}.query"),
            key=linear(f"layer{n}.key"),
            value=linear(f"layer{n}.value"),
            output=linear(f"layer{n}.output"),
            attention_norm=norm(f"layer{n}.attention_norm"),
            intermediate=linear(f"layer{n}.intermediate"),
            down=linear(f"layer{n}.down"),
            output_norm=norm(f"layer{n}.output_norm"),
        )
        for n in range(count)
    )
    return Encoder(
        words=arrays["words.weight"],
        word_scale=arrays["words.scale"],
        positions=arrays["positions.weight"],
        position_scale=arrays["positions.scale"],
        segment=arrays["segment"],
        embedding_norm=norm("embedding_norm"),
        layers=layers,
    )


def limit_threads(threads: int) -> None:
    """Let NumPy's matrix library (OpenBLAS, as NumPy's wheels ship it) use at most `threads` cores.

    OpenBLAS sizes its pool by the CPUs it sees, which on a shared host can be more than the
    instance may use. Its setter is looked up among the libraries NumPy loaded; elsewhere (another
    BLAS) nothing changes.
    """
    import ctypes

    libs = Path(np.__file__).parent.parent / "numpy.libs"
    for path in sorted(libs.glob("libscipy_openblas*.so*")) if libs.is_dir() else []:
        library = ctypes.CDLL(str(path))
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(library, name, None)
            if setter is not None:
                setter(ctypes.c_int(max(1, threads)))
                return
