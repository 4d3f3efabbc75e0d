"""Rank and expressivity (thesis ch. 7, Godey et al. 2024), built on the spectral measures of `spectra`.

- `truncated_head`: the best rank-r approximation of a head's output matrix (Eckart–Young), the thesis §7.1
  "SVD-imposed bottleneck"; `svd_checkpoint` writes it as a model like any other.
- `representations`, `rank_table`: effective ranks of a model's representations (thesis §7.2; Table 7.3 is built
  from them by `reporting.rank_report`).
- `ngram_counts`, `ngram_rank_rows`: the rank of the data's n-gram log-probability matrix.
- `layer_anisotropy`: anisotropy of each layer's representations.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import torch

from oversmooth.core.io import read_parquet
from oversmooth.core.spectra import (
    anisotropy,
    effective_rank,
    energy_rank,
    singular_values,
    threshold_rank,
)
from oversmooth.extraction.logit_tables import list_to_numpy
from oversmooth.models.checkpoints import load_model, load_torch, save_torch


def truncated_svd(weight: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(U, S, V^T) of `weight`'s SVD in float64, cut to the top `rank` singular values."""
    if not 1 <= rank <= min(weight.shape):
        raise ValueError(f"rank {rank} must lie in 1..{min(weight.shape)} for a {tuple(weight.shape)} matrix")
    u, s, vh = torch.linalg.svd(weight.detach().double(), full_matrices=False)
    return u[:, :rank], s[:rank], vh[:rank]


def truncated_head(weight: torch.Tensor, rank: int) -> torch.Tensor:
    """The best rank-`rank` approximation of `weight` (truncated SVD, in float64), in `weight`'s dtype."""
    u, s, vh = truncated_svd(weight, rank)
    return ((u * s) @ vh).to(weight.dtype)


HEAD_WEIGHT = "head.out.weight"


def svd_checkpoint(source: str | os.PathLike, rank: int, out: str | os.PathLike, name: str) -> dict:
    """Write `source`'s checkpoint as model `name`, its output matrix replaced by the rank-`rank` truncation;
    return what was done (ranks, share of Σσ² kept), which the checkpoint also records under `svd`."""
    payload = load_torch(source)
    weight = payload["model"][HEAD_WEIGHT]
    if rank > min(weight.shape):
        raise ValueError(f"svd.ranks: {rank} exceeds the rank {min(weight.shape)} of {source}'s {tuple(weight.shape)} head")
    s = singular_values(weight)
    record = {
        "source": str(source),
        "rank": rank,
        "source_shape": list(weight.shape),
        "source_numerical_rank": int(np.linalg.matrix_rank(weight.double().numpy())),
        "energy_kept": float((s[:rank] ** 2).sum() / (s**2).sum()),
    }
    payload["model"][HEAD_WEIGHT] = truncated_head(weight, rank)
    payload["svd"] = record
    payload["name"] = name
    save_torch(payload, out)
    return record


REPRESENTATIONS = ("logits", "probabilities", "post_bottleneck", "pre_bottleneck")


def representations(hidden_path: str | os.PathLike, checkpoint: str | os.PathLike, positions: int) -> dict[str, np.ndarray]:
    """The four representations of Table 7.3 at the first `positions` rows of the hidden-state companion: the
    pre-bottleneck states, the post-bottleneck states (the output matrix's input), logits = post · Wᵀ and
    probabilities = softmax(logits), each (positions × dim) in float64."""
    table = read_parquet(hidden_path).sort_by([("prompt_id", "ascending"), ("position", "ascending")])
    if table.num_rows < positions:
        raise ValueError(f"{hidden_path}: {table.num_rows} hidden-state rows, rank.positions asks for {positions}")
    table = table.slice(0, positions)
    pre = list_to_numpy(table.column("pre")).astype(np.float64)
    post = list_to_numpy(table.column("post")).astype(np.float64)
    weight = load_model(checkpoint).output_matrix().detach().double().numpy()
    logits = post @ weight.T
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return {
        "logits": logits,
        "probabilities": shifted / shifted.sum(axis=1, keepdims=True),
        "post_bottleneck": post,
        "pre_bottleneck": pre,
    }


def rank_table(matrices: dict[str, np.ndarray], threshold: float) -> list[dict]:
    """Effective rank, threshold rank and shape of each representation matrix."""
    rows = []
    for name in REPRESENTATIONS:
        s = singular_values(matrices[name])
        rows.append({
            "representation": name,
            "effective_rank": effective_rank(s),
            "threshold_rank": threshold_rank(s, threshold),
            "positions": matrices[name].shape[0],
            "dim": matrices[name].shape[1],
        })
    return rows


# ----------------------------------------------------------------------------------------------
# The rank of the data's contextual distribution (Godey et al. 2024): an n-gram log-probability matrix

NGRAM_CHUNK = 1 << 24  # bytes per pass step: bounds memory on thesis-scale shards


def _context_codes(chunk: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Each (order-1)-byte context of `chunk` as one integer (big-endian bytes), and the byte that follows it."""
    width = order - 1
    n = len(chunk) - width
    codes = np.zeros(max(n, 0), dtype=np.uint64)
    for j in range(width):
        codes = (codes << np.uint64(8)) | chunk[j : j + n].astype(np.uint64)
    return codes, chunk[width : width + n]


def _chunks(data: np.ndarray, order: int):
    """Overlapping chunks so that every n-gram of `data` lies in exactly one."""
    for start in range(0, max(len(data) - order + 1, 0), NGRAM_CHUNK):
        yield np.asarray(data[start : start + NGRAM_CHUNK + order - 1])


def ngram_counts(data: np.ndarray, order: int, n_contexts: int) -> tuple[np.ndarray, np.ndarray]:
    """The `n_contexts` most frequent (order-1)-byte contexts of `data` (ties to the smaller code) and their
    (n_contexts × 256) next-byte counts. Two passes over `data` in chunks."""
    if order < 2:
        raise ValueError(f"an n-gram needs n >= 2, got {order}")
    uniques, totals = np.empty(0, np.uint64), np.empty(0, np.int64)
    for chunk in _chunks(data, order):
        codes, _ = _context_codes(chunk, order)
        u, c = np.unique(codes, return_counts=True)
        merged, inverse = np.unique(np.concatenate([uniques, u]), return_inverse=True)
        totals = np.bincount(inverse, weights=np.concatenate([totals, c]), minlength=len(merged)).astype(np.int64)
        uniques = merged
    keep = np.lexsort((uniques, -totals))[:n_contexts]
    contexts = np.sort(uniques[keep])
    counts = np.zeros((len(contexts), 256), dtype=np.int64)
    for chunk in _chunks(data, order):
        codes, following = _context_codes(chunk, order)
        rows = np.searchsorted(contexts, codes)
        hit = (rows < len(contexts)) & (contexts[np.minimum(rows, len(contexts) - 1)] == codes)
        counts += np.bincount(rows[hit] * 256 + following[hit], minlength=counts.size).reshape(counts.shape)
    return contexts, counts


def ngram_logprobs(counts: np.ndarray, alpha: float) -> np.ndarray:
    """log P(next byte | context) with add-alpha smoothing, one row per context."""
    counts = np.asarray(counts, np.float64)
    return np.log(counts + alpha) - np.log(counts.sum(axis=1, keepdims=True) + 256 * alpha)


def ngram_rank_rows(data: np.ndarray, max_order: int, n_contexts: int, alpha: float, threshold: float,
                    shares: list[float]) -> list[dict]:
    """For n = 2 .. max_order: the spectrum of the n-gram log-probability matrix (contexts × next byte), each
    row centred: log-probabilities are defined up to a constant per row, which a softmax head gets for free."""
    rows = []
    for order in range(2, max_order + 1):
        contexts, counts = ngram_counts(data, order, n_contexts)
        logprobs = ngram_logprobs(counts, alpha)
        # softmax ignores a constant added to a row, so a head needs only the row-centred matrix (Yang et al. 2017)
        s = singular_values(logprobs - logprobs.mean(axis=1, keepdims=True))
        row = {
            "n": order,
            "contexts": len(contexts),
            "context_coverage": float(counts.sum() / max(len(data) - order + 1, 1)),
            "effective_rank": effective_rank(s),
            "threshold_rank": threshold_rank(s, threshold),
        }
        row.update({f"energy_rank_{share:g}": energy_rank(s, share) for share in shares})
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------
# Anisotropy of a model's representations, layer by layer (Godey et al. 2024)


@torch.no_grad()
def layer_anisotropy(checkpoint: str | os.PathLike, prompts: pa.Table, n_vectors: int, seed: int) -> list[dict]:
    """Mean pairwise cosine similarity of each representation of a trained model (embeddings, every block,
    pre- and post-bottleneck) over `n_vectors` window positions of the evaluation prompts, chosen with `seed`.
    Each prompt is read as its context followed by its window, cut to the model's block."""
    model = load_model(checkpoint)
    block = model.config.block_size
    states: dict[str, list[np.ndarray]] = {}
    for context, window in zip(prompts.column("context").to_pylist(), prompts.column("window").to_pylist()):
        text = (context + window)[-block:]
        first = len(text) - len(window) if len(window) < len(text) else 0
        idx = torch.tensor(list(text), dtype=torch.long)[None]
        for name, value in model.layer_states(idx):
            states.setdefault(name, []).append(value[0, first:].double().numpy())
    rows = []
    rng = np.random.default_rng(seed)
    total = sum(len(v) for v in next(iter(states.values())))
    chosen = np.sort(rng.choice(total, size=min(n_vectors, total), replace=False))
    for depth, (name, parts) in enumerate(states.items()):
        vectors = np.concatenate(parts)[chosen]
        rows.append({"layer": depth, "representation": name, "anisotropy": anisotropy(vectors),
                     "vectors": len(vectors), "dim": vectors.shape[1]})
    return rows
