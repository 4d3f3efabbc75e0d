"""Next-byte distributions of a token-level LM, by marginalising over the tokenisations of the byte string.

A causal LM over byte-level BPE tokens defines a distribution over byte strings: the probability that a text
starts with bytes x is the prefix probability

    P(x) = sum over covers t of P(t),   a cover being a token sequence t_1..t_n whose first n - 1 tokens spell a
                                        proper prefix of x and whose bytes start with x,

and the next-byte distribution is p(b | x) = P(x b) / sum_b' P(x b'), over all 256 bytes (special tokens are no
bytes; their mass is left out). This is the exact byte-level view of Vieira et al. 2024 ("From language models
over tokens to language models over characters") and Phan et al. 2024 ("Exact byte-level probabilities from
tokenized language models"). Grouping covers by the last token boundary j inside x,

    P(x b) = sum_j sum_{h spells x[:j]} P(h) * M_h(x[j:] b),   M_h(s) = sum of P(v | h) over tokens v starting with s,

where h runs over the *aligned* hypotheses at j (token sequences spelling exactly x[:j]). They are expanded left
to right along the known bytes; each is one LM step whose key/value entries are shared with its ancestors in one
cache per text, the hypotheses forming a tree (tree attention, a 4-D mask). M_h of every prefix comes from one
cumulative sum over the vocabulary sorted by bytes, where the tokens sharing a prefix are one contiguous range.

Two settings bound the work, both exact when off (`beam` 0 and `prune_ratio` 0): at most `beam` aligned hypotheses
per byte position, and none but the most probable whose probability is below `prune_ratio` times the prefix
probability at that position. The context is conditioned on its canonical tokenisation except the last
`context_backoff_tokens` tokens, whose bytes are marginalised with the window (the prompt-boundary problem: the
context may end inside a token or inside a UTF-8 character).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import torch

from oversmooth.core.logs import get_logger
from oversmooth.models.bytelm import ByteLMOutput
from oversmooth.models.model import VOCAB_SIZE

log = get_logger("tokenmarginal")

GROUPED_ATTENTION = "oversmooth_grouped_sdpa"


PLAIN_TEXT_BYTES = (9, 10, 13, *range(32, 127))  # tab, newlines, printable ASCII


class TokenModelError(ValueError):
    """A token-level model that cannot serve as a byte-level ground truth; the message names it."""


@dataclass(frozen=True)
class MarginalSettings:
    """The approximations of the marginalisation; `beam=0, prune_ratio=0` sums over every tokenisation.

    Measured on SmolLM2-135M, 100 positions of SOTU text after 512 context bytes, against beam 64, prune_ratio
    1e-12 and 4 backed-off tokens (3,882 LM steps): these defaults take 116 LM steps, with a total variation
    distance of at most 3.5e-5 (mean 3.9e-6) per position, as beam 4 does (118 steps): the pruning decides, and a
    narrower beam pads the texts of a batch to fewer hypotheses (1.37x faster for 8 texts); beam 8 with prune_ratio
    1e-6 takes 253 steps, at most 4.4e-6 (mean 6.7e-7); beam 1 with prune_ratio 1e-2 takes 102 steps, at most 1.5e-2
    (mean 1.6e-4).
    """

    beam: int = 2
    prune_ratio: float = 1e-4
    context_backoff_tokens: int = 2
    batch_size: int = 8


def gpt2_byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes-to-unicode table: the byte behind each character that byte-level BPE writes."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {char: byte for byte, char in bytes_to_unicode().items()}


class TokenVocabulary:
    """The byte strings of a byte-level BPE vocabulary, indexed for the two questions the search asks:
    which tokens spell the bytes ahead, and how much mass the tokens starting with a prefix hold, per next byte."""

    def __init__(self, token_bytes: Sequence[bytes | None]):
        self.token_bytes = list(token_bytes)
        self.size = len(self.token_bytes)
        byte_ids = [i for i, t in enumerate(self.token_bytes) if t]
        self.order = np.array(sorted(byte_ids, key=lambda i: self.token_bytes[i]), dtype=np.int64)
        self.sorted_bytes = [self.token_bytes[i] for i in self.order]
        self.token_of = {self.token_bytes[i]: i for i in byte_ids}
        self.max_len = max(len(self.token_bytes[i]) for i in byte_ids)
        self._ranges: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}

    @classmethod
    def from_tokenizer(cls, tokenizer, name: str) -> TokenVocabulary:
        """The vocabulary of a `transformers` byte-level BPE tokenizer; special tokens spell no bytes."""
        decoder = gpt2_byte_decoder()
        special = set(tokenizer.all_special_ids) | {i for i in getattr(tokenizer, "added_tokens_decoder", {})}
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        token_bytes: list[bytes | None] = []
        for i, piece in enumerate(pieces):
            if i in special or piece is None:
                token_bytes.append(None)
                continue
            if any(ch not in decoder for ch in piece):
                raise TokenModelError(
                    f"ground truth {name!r}: the tokenizer is not byte-level BPE (token {i} {piece!r} is not written "
                    "in GPT-2's byte alphabet); byte marginalisation needs every token to be a byte string"
                )
            token_bytes.append(bytes(decoder[ch] for ch in piece))
        vocab = cls(token_bytes)
        missing = [b for b in range(VOCAB_SIZE) if bytes([b]) not in vocab.token_of]
        if any(b in missing for b in PLAIN_TEXT_BYTES):
            raise TokenModelError(
                f"ground truth {name!r}: the tokenizer is not byte-level BPE: it has no single-byte token for plain-text "
                f"byte(s) {[b for b in missing if b in PLAIN_TEXT_BYTES][:8]}, so not every text can be tokenised"
            )
        if missing:  # e.g. SmolLM2: bytes that never occur in UTF-8 text, and a few control characters
            log.info("%s: bytes %s have no token: the model gives them probability 0", name, missing)
        return vocab

    @cached_property
    def prefixes(self) -> frozenset[bytes]:
        """Every proper or full prefix of a token's bytes (the empty one included)."""
        return frozenset(t[:n] for t in self.token_of for n in range(len(t) + 1))

    def spelled(self, text: bytes, start: int) -> list[tuple[int, int]]:
        """(token id, length) of every token that spells `text[start:start + length]`."""
        found = []
        for end in range(start + 1, min(len(text), start + self.max_len) + 1):
            piece = text[start:end]
            if piece not in self.prefixes:
                break
            token = self.token_of.get(piece)
            if token is not None:
                found.append((token, end - start))
        return found

    def next_byte_ranges(self, prefix: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """For the tokens that start with `prefix` and are longer: (next bytes, lo, hi) such that those with next
        byte b are `order[lo:hi]`. None when no token extends `prefix`."""
        if prefix not in self._ranges:
            self._ranges[prefix] = self._compute_ranges(prefix)
        return self._ranges[prefix]

    def _compute_ranges(self, prefix: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        if prefix not in self.prefixes:
            return None
        n = len(prefix)
        lo = bisect.bisect_left(self.sorted_bytes, prefix)
        hi = bisect.bisect_left(self.sorted_bytes, prefix + b"\xff" * (self.max_len + 1))
        if lo < hi and self.sorted_bytes[lo] == prefix:
            lo += 1  # the token equal to the prefix does not extend it
        if lo >= hi:
            return None
        nexts = np.frombuffer(b"".join(t[n : n + 1] for t in self.sorted_bytes[lo:hi]), dtype=np.uint8)
        change = np.flatnonzero(np.diff(nexts.astype(np.int16))) + 1
        starts = np.concatenate([[0], change])
        ends = np.concatenate([change, [hi - lo]])
        return nexts[starts].astype(np.int64), lo + starts, lo + ends


@dataclass
class _Hypothesis:
    """An aligned hypothesis: the tokens after the fixed prefix spell the search text up to `end`."""

    parent: int  # cache slot of the parent (-1: the fixed prefix)
    token: int
    end: int
    logp: float
    depth: int  # its position id
    slot: int = -1  # its cache slot, once evaluated
    cumulative: np.ndarray | None = None  # once evaluated: cumulative next-token probabilities in byte order
    probs: np.ndarray | None = None  # once evaluated: next-token probabilities by token id
    hidden: np.ndarray | None = None  # once evaluated: the LM's final hidden state (the input of its head)


class _TextSearch:
    """The search of one text: its bytes so far (after the fixed prefix), the hypotheses waiting at each position,
    the evaluated ones whose last token may still cover bytes ahead (`live`), and the log prefix masses
    A[i, b] = log P(text[:i] b) of every position so far."""

    def __init__(self, prefix_tokens: list[int]):
        self.text = bytearray()
        self.prefix_tokens = prefix_tokens
        self.prefix_slots = np.arange(len(prefix_tokens))
        self.pending: dict[int, list[_Hypothesis]] = {}
        self.live: list[_Hypothesis] = []
        self.log_mass: list[np.ndarray] = []
        self.hidden: list[np.ndarray] = []  # per position: the final hidden state of its most probable live hypothesis
        self.lineage: dict[int, np.ndarray] = {}  # cache slot of an evaluated hypothesis -> the slots it attends to

    def prefix_log_prob(self, end: int) -> float:
        """log P(text[:end]) as a prefix, complete once the masses up to `end - 1` are."""
        return 0.0 if end == 0 else float(self.log_mass[end - 1][self.text[end - 1]])


class _Session:
    """Searches of several texts that share one batched key/value cache, advanced byte by byte in lockstep."""

    def __init__(self, lm: TokenMarginalByteLM, prefixes: list[list[int]]):
        self.lm = lm
        self.searches = [_TextSearch(prefix) for prefix in prefixes]
        self.cache, self.slots, logprobs, hidden = lm._prefill(self.searches)
        for row, search in enumerate(self.searches):
            root = _Hypothesis(parent=-1, token=-1, end=0, logp=0.0, depth=len(search.prefix_tokens) - 1)
            lm._admit(search, root, logprobs[row], hidden[row])

    def advance(self) -> None:
        """Complete the prefix masses at every text's current end: evaluate the hypotheses ending there."""
        batch = [self.lm._survivors(search) for search in self.searches]
        if any(batch):
            self.cache, self.slots, logprobs, hidden = self.lm._evaluate(self.searches, batch, self.cache, self.slots)
            for search, hyps, rows, states in zip(self.searches, batch, logprobs, hidden):
                for hyp, row, state in zip(hyps, rows, states):
                    self.lm._admit(search, hyp, row, state)
        for search in self.searches:
            if len(search.log_mass) == len(search.text):  # a text that has ended has its masses already
                search.log_mass.append(self.lm._prefix_masses(search))

    def append(self, row: int, byte: int) -> None:
        """Extend one text by a byte: hypotheses whose last token spells up to it get their children."""
        self.lm._extend(self.searches[row], byte)

    def next_byte_logprobs(self) -> np.ndarray:
        """(texts, 256): the next-byte log-probabilities at every text's current end."""
        return _normalised([search.log_mass[-1] for search in self.searches])


class TokenMarginalByteLM:
    """A token-level causal LM as a byte-level LM: `next_byte_outputs` as every `ByteLM` of the pipeline."""

    def __init__(self, name: str, model, tokenizer, settings: MarginalSettings = MarginalSettings(), block_size: int | None = None):
        self.name, self.model, self.tokenizer, self.settings = name, model, tokenizer, settings
        self.vocab = TokenVocabulary.from_tokenizer(tokenizer, name)
        use_grouped_attention(model)
        self.max_tokens = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
        # bytes: a text of this many bytes never needs more tokens than the model's window (one byte per token)
        self.block_size = block_size or self.max_tokens - 1
        self.bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        self.special_ids = torch.tensor([i for i, t in enumerate(self.vocab.token_bytes) if t is None], dtype=torch.long)
        self.first_bytes = {t[0] for t in self.vocab.token_of}
        self.steps = 0  # LM evaluations of hypotheses, for the log and the benchmark

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------------------------------
    # The ByteLM interface

    @torch.no_grad()
    def next_byte_logprobs(self, x: torch.Tensor, outputs_from: Sequence[int] | None = None) -> torch.Tensor:
        return self.next_byte_outputs(x, outputs_from).logprobs

    @torch.no_grad()
    def next_byte_outputs(self, x: torch.Tensor, outputs_from: Sequence[int] | None = None) -> ByteLMOutput:
        """For bytes x (B, T): at t >= outputs_from[row] (default 0), log p(x[t + 1] | x[: t + 1]) over 256 bytes,
        and as `pre` and `post` the final hidden state of the most probable aligned hypothesis that covers the
        position (the LM's own head input); earlier positions are NaN."""
        rows = x.detach().cpu().to(torch.uint8).numpy()
        starts = [0] * len(rows) if outputs_from is None else list(outputs_from)
        out = np.full((len(rows), rows.shape[1], VOCAB_SIZE), np.nan, dtype=np.float32)
        hidden = np.full((len(rows), rows.shape[1], self.model.config.hidden_size), np.nan, dtype=np.float32)
        for first in range(0, len(rows), self.settings.batch_size):
            chunk = range(first, min(first + self.settings.batch_size, len(rows)))
            session, offsets = self.read([rows[i].tobytes() for i in chunk], [starts[i] for i in chunk])
            for i, search, offset in zip(chunk, session.searches, offsets):
                positions = slice(starts[i] + 1 - offset, rows.shape[1] + 1 - offset)
                out[i, starts[i] :] = _normalised(search.log_mass[positions])
                hidden[i, starts[i] :] = np.stack(search.hidden[positions])
        state = torch.from_numpy(hidden)
        return ByteLMOutput(torch.from_numpy(out), state, state)

    # ------------------------------------------------------------------------------------------
    # Teacher forcing and sampling

    @torch.no_grad()
    def marginal_logprobs(self, texts: Sequence[bytes], firsts: Sequence[int]) -> list[np.ndarray]:
        """For each text, log p(text[t + 1] | text[: t + 1]) for t = first .. len(text) - 1: (len - first, 256)."""
        session, offsets = self.read(texts, firsts)
        # output t predicts text[t + 1] from text[: t + 1] = fixed prefix + search text[: t + 1 - offset]
        return [
            _normalised(search.log_mass[first + 1 - offset : len(text) + 1 - offset])
            for search, offset, text, first in zip(session.searches, offsets, texts, firsts)
        ]

    def read(self, texts: Sequence[bytes], firsts: Sequence[int]) -> tuple[_Session, list[int]]:
        """A session that has read every text to its end (teacher forcing), the prefix masses of each position from
        `first + 1` on complete; also how many bytes of each text the fixed prefix spells."""
        prefixes, rests, offsets = [], [], []
        for text, first in zip(texts, firsts):
            if not 0 <= first < len(text):
                raise ValueError(f"{self.name}: outputs from byte {first} of a {len(text)}-byte text")
            self._check_spellable(text)
            prefix, spelled = self.split_context(text, first)
            if len(prefix) + len(text) - spelled > self.max_tokens:
                raise TokenModelError(
                    f"ground truth {self.name!r}: a text of {len(text)} bytes may need up to "
                    f"{len(prefix) + len(text) - spelled} tokens, more than the model's window of {self.max_tokens} "
                    "(max_position_embeddings); shorten eval.context_bytes or eval.window"
                )
            prefixes.append(prefix)
            rests.append(text[spelled:])
            offsets.append(spelled)
        session = _Session(self, prefixes)
        for position in range(max(map(len, rests)) + 1):
            session.advance()
            for row, rest in enumerate(rests):
                if position < len(rest):
                    session.append(row, rest[position])
        return session, offsets

    @torch.no_grad()
    def canonical_nats(self, texts: Sequence[bytes]) -> float:
        """The token-level figure the marginal is compared with, summed over texts: -log p(tokens | BOS) of each
        text's own tokenisation (`own_tokens`) plus log p(its first byte | BOS), i.e. the nats of bytes 1.. when
        the token LM reads them tokenised its own way. The marginal sums every tokenisation, so it gives at most
        this (up to its pruning)."""
        if not self.bos:
            return float("nan")
        first = self.vocab.next_byte_ranges(b"")
        total = 0.0
        for text in texts:
            ids = self.own_tokens(text)
            tokens = torch.tensor([self.bos + ids], device=self.device)
            logprobs = torch.log_softmax(self.model(input_ids=tokens).logits[0].double(), dim=-1).cpu()
            total -= float(logprobs[torch.arange(len(ids)), ids].sum())
            _, cumulative = self._token_probs(logprobs[0])
            nexts, lo, hi = first
            per_byte = cumulative[hi] - cumulative[lo]
            total += float(np.log(per_byte[np.flatnonzero(nexts == text[0])[0]] / per_byte.sum()))
        return total

    def own_tokens(self, text: bytes) -> list[int]:
        """The tokenizer's tokenisation of a text; the bytes of a UTF-8 character cut at either end (or of a text
        that is no UTF-8) as single-byte tokens."""
        start = 0
        while start < len(text) and start < 3 and text[start] & 0xC0 == 0x80:  # continuation bytes: a cut character
            start += 1
        for end in range(len(text), max(start, len(text) - 3) - 1, -1):
            try:
                middle = text[start:end].decode("utf-8")
            except UnicodeDecodeError:
                continue
            ids = self.tokenizer(middle, add_special_tokens=False).input_ids if middle else []
            return self._byte_tokens(text[:start]) + ids + self._byte_tokens(text[end:])
        return self._byte_tokens(text)

    def _byte_tokens(self, text: bytes) -> list[int]:
        return [self.vocab.token_of[bytes([b])] for b in text]

    def split_context(self, text: bytes, first: int) -> tuple[list[int], int]:
        """The fixed token prefix (BOS and the canonical tokens of `text[:first + 1]` but the last
        `context_backoff_tokens`) and how many bytes it spells."""
        context = text[: first + 1]
        decoded = context.decode("utf-8", errors="ignore")
        canonical_bytes = decoded.encode("utf-8")
        if not context.startswith(canonical_bytes):  # a broken character inside: fall back to marginalising it all
            return list(self.bos), 0
        ids = self.tokenizer(decoded, add_special_tokens=False).input_ids if decoded else []
        keep = ids[: max(0, len(ids) - self.settings.context_backoff_tokens)]
        spelled = b"".join(self.vocab.token_bytes[i] or b"" for i in keep)
        if not canonical_bytes.startswith(spelled) or any(self.vocab.token_bytes[i] is None for i in keep):
            raise TokenModelError(
                f"ground truth {self.name!r}: the tokenizer does not spell the text it encodes back byte for byte "
                "(a normaliser?); byte marginalisation needs tokens that are the text's bytes"
            )
        prefix = list(self.bos) + keep
        if not prefix:
            raise TokenModelError(f"ground truth {self.name!r}: the tokenizer has no BOS token and the context is empty")
        return prefix, len(spelled)

    def _check_spellable(self, text: bytes) -> None:
        """Every byte of the text must start some token, else the text has probability 0 under the model."""
        unspellable = set(text) - self.first_bytes
        if unspellable:
            byte = min(unspellable)
            raise TokenModelError(
                f"ground truth {self.name!r}: byte {byte} (at offset {text.index(bytes([byte]))} of a text) starts no "
                "token of its vocabulary, so the text has probability 0 under the model"
            )

    # ------------------------------------------------------------------------------------------
    # One text's search

    def _survivors(self, search: _TextSearch) -> list[_Hypothesis]:
        """The aligned hypotheses ending at the text's end that the beam and the pruning threshold keep (at least the
        most probable one, so that some hypothesis always covers the bytes ahead)."""
        position = len(search.text)
        hyps = search.pending.pop(position, [])
        if not hyps:
            return []
        hyps.sort(key=lambda h: -h.logp)
        if self.settings.prune_ratio > 0:  # the most probable one always stays: the search never runs dry
            floor = search.prefix_log_prob(position) + np.log(self.settings.prune_ratio)
            hyps = hyps[:1] + [h for h in hyps[1:] if h.logp >= floor]
        return hyps[: self.settings.beam] if self.settings.beam > 0 else hyps

    def _admit(self, search: _TextSearch, hyp: _Hypothesis, logprobs: torch.Tensor, hidden: torch.Tensor) -> None:
        """Keep an evaluated hypothesis's next-token distribution while its last token may cover bytes ahead."""
        hyp.hidden = hidden.float().cpu().numpy()
        hyp.probs, hyp.cumulative = self._token_probs(logprobs)
        search.live.append(hyp)

    def _token_probs(self, logprobs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Next-token probabilities by token id (special tokens 0), and their cumulative sum in byte order, from which
        the mass of the tokens sharing a prefix is one difference (`TokenVocabulary.next_byte_ranges`)."""
        logprobs = logprobs.double()
        logprobs[self.special_ids] = -torch.inf
        probs = logprobs.exp().numpy()
        return probs, np.concatenate([[0.0], np.cumsum(probs[self.vocab.order])])

    def _prefix_masses(self, search: _TextSearch) -> np.ndarray:
        """A[i, b] = log P(text[:i] b) at the text's end i: every live hypothesis's tokens that start with the
        bytes after it and go on with b. Hypotheses no token covers any more leave the live set."""
        masses = np.full(VOCAB_SIZE, -np.inf)
        kept = []
        for hyp in search.live:
            ranges = self.vocab.next_byte_ranges(bytes(search.text[hyp.end :]))
            if ranges is None:
                continue
            nexts, lo, hi = ranges
            with np.errstate(divide="ignore"):
                contribution = hyp.logp + np.log(np.maximum(hyp.cumulative[hi] - hyp.cumulative[lo], 0.0))
            masses[nexts] = np.logaddexp(masses[nexts], contribution)
            kept.append(hyp)
        search.live = kept
        search.hidden.append(max(kept, key=lambda h: h.logp).hidden)
        return masses

    def _extend(self, search: _TextSearch, byte: int) -> None:
        """Append a byte; a live hypothesis whose next token spells exactly the bytes up to it has a child there."""
        search.text.append(byte)
        end = len(search.text)
        for hyp in search.live:
            token = self.vocab.token_of.get(bytes(search.text[hyp.end :]))
            if token is not None and hyp.probs[token] > 0:
                child = _Hypothesis(hyp.slot, token, end, hyp.logp + float(np.log(hyp.probs[token])), hyp.depth + 1)
                search.pending.setdefault(end, []).append(child)

    # ------------------------------------------------------------------------------------------
    # The LM: one cache per text, hypotheses attending to their ancestors (tree attention)

    def _prefill(self, searches: list[_TextSearch]):
        """Run every text's fixed prefix; its last position gives the root's next-token distribution (on the CPU,
        where the search runs; the cache stays on the model's device)."""
        width = max(len(s.prefix_tokens) for s in searches)
        ids = torch.zeros((len(searches), width), dtype=torch.long)
        allowed = torch.zeros((len(searches), width, width), dtype=torch.bool)
        positions = torch.zeros((len(searches), width), dtype=torch.long)
        causal = torch.tril(torch.ones(width, width, dtype=torch.bool))
        for row, search in enumerate(searches):
            n = len(search.prefix_tokens)
            ids[row, :n] = torch.tensor(search.prefix_tokens)
            allowed[row, :n, :n] = causal[:n, :n]
            allowed[row, n:, 0] = True  # padding attends somewhere, and is never attended to
            positions[row, :n] = torch.arange(n)
        last = torch.zeros((len(searches), width), dtype=torch.bool)
        last[torch.arange(len(searches)), [len(s.prefix_tokens) - 1 for s in searches]] = True
        out, logprobs, hidden = self._run(ids, allowed, positions, growing_cache(), last)
        return out.past_key_values, width, logprobs, hidden

    def _evaluate(self, searches, batch: list[list[_Hypothesis]], cache, slot_count: int):
        """One LM step for the hypotheses of every text at this position, appended to the texts' caches."""
        width = max(len(hyps) for hyps in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        positions = torch.zeros((len(batch), width), dtype=torch.long)
        allowed = torch.zeros((len(batch), width, slot_count + width), dtype=torch.bool)
        real = torch.zeros((len(batch), width), dtype=torch.bool)
        for row, hyps in enumerate(batch):
            search = searches[row]
            for j, hyp in enumerate(hyps):
                hyp.slot = slot_count + j
                lineage = search.prefix_slots if hyp.parent < 0 else search.lineage[hyp.parent]
                search.lineage[hyp.slot] = np.append(lineage, hyp.slot)
                ids[row, j] = hyp.token
                positions[row, j] = hyp.depth
                allowed[row, j, search.lineage[hyp.slot]] = True
            allowed[row, len(hyps) :, 0] = True  # padding
            real[row, : len(hyps)] = True
        self.steps += sum(len(h) for h in batch)
        out, logprobs, hidden = self._run(ids, allowed, positions, cache, real)
        counts = [len(hyps) for hyps in batch]
        return out.past_key_values, slot_count + width, logprobs.split(counts), hidden.split(counts)

    def _run(self, ids: torch.Tensor, allowed: torch.Tensor, positions: torch.Tensor, cache, wanted: torch.Tensor):
        """One forward pass; `allowed` (texts, queries, keys) becomes an additive mask in the model's dtype. Returns
        the output, and the next-token log-probabilities and final hidden states of the `wanted` (texts, queries)
        positions in row-major order, on the CPU (the head runs on those alone: half the slots are padding)."""
        device, dtype = self.device, self.model.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        out = self.model(
            input_ids=ids.to(device), attention_mask=mask[:, None].to(device), position_ids=positions.to(device),
            past_key_values=cache, use_cache=True, output_hidden_states=True, logits_to_keep=wanted.to(device),
        )
        logprobs = torch.log_softmax(out.logits.float(), dim=-1)
        return out, logprobs.cpu(), out.hidden_states[-1][wanted.to(device)].cpu()


def growing_cache():
    """A key/value cache whose layers keep their entries in buffers that double when full (`_growing_layer`)."""
    from transformers.cache_utils import Cache

    return Cache(layer_class_to_replicate=_growing_layer())


@lru_cache(maxsize=1)
def _growing_layer() -> type:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """transformers' `DynamicLayer` (a cache layer that grows as entries are appended) with its entries in a
        buffer that doubles when full: an append copies the new entries only, where `torch.cat` copied the whole
        cache, per layer and step (a seventh of the search's time at 500 positions)."""

        buffers: tuple[torch.Tensor, torch.Tensor] | None = None

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            length, added = self.get_seq_length(), key_states.shape[-2]
            if self.buffers is None or length + added > self.buffers[0].shape[-2]:
                capacity = max(2 * (length + added), 256)
                self.buffers = (_grown(self.keys, key_states, capacity), _grown(self.values, value_states, capacity))
            for buffer, states in zip(self.buffers, (key_states, value_states)):
                buffer[..., length : length + added, :] = states
            self.keys, self.values = (buffer[..., : length + added, :] for buffer in self.buffers)
            return self.keys, self.values

    return GrowingLayer


def _grown(entries: torch.Tensor, like: torch.Tensor, capacity: int) -> torch.Tensor:
    """A buffer shaped as `like` but `capacity` long on the sequence axis, starting with `entries` (maybe none)."""
    buffer = like.new_empty((*like.shape[:-2], capacity, like.shape[-1]))
    if entries.numel():
        buffer[..., : entries.shape[-2], :] = entries
    return buffer


def grouped_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """SDPA for grouped-query attention under a 4-D mask without copying the key/value cache per query head.

    transformers' `sdpa` repeats every key/value head for its query heads when a mask is given on CPU (`repeat_kv`),
    a copy of the whole cache per layer and step that cost a third of the search's time. Here each key/value head's
    query heads are stacked along the query axis instead, and the mask with them. Anything else (no grouping, a
    sliding window, soft-capping) goes to transformers' own `sdpa`.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    batch, heads, length, dim = query.shape
    groups, keys = key.shape[1], key.shape[2]
    if heads == groups or attention_mask is None or kwargs.get("sliding_window") or kwargs.get("softcap"):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    repeat = heads // groups
    query = query.reshape(batch, groups, repeat * length, dim)  # head g * repeat + r reads key/value head g
    mask = attention_mask[:, :, None, :, -keys:].expand(batch, 1, repeat, length, keys).reshape(batch, 1, -1, keys)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(batch, heads, length, dim).transpose(1, 2).contiguous(), None


def use_grouped_attention(model) -> None:
    """Run a model that uses transformers' `sdpa` with `grouped_sdpa` (same outputs, no per-head cache copies)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        AttentionInterface.register(GROUPED_ATTENTION, grouped_sdpa)
        AttentionMaskInterface.register(GROUPED_ATTENTION, sdpa_mask)
        model.set_attn_implementation(GROUPED_ATTENTION)


def _normalised(masses: list[np.ndarray]) -> np.ndarray:
    """Log prefix masses (positions, 256) as next-byte log-probabilities, float32."""
    masses = np.stack(masses)
    with np.errstate(invalid="ignore"):
        return (masses - np.logaddexp.reduce(masses, axis=1, keepdims=True)).astype(np.float32)


class MarginalStepper:
    """Sampling byte by byte from a token-level LM (the `Stepper` of `oversmooth.generation.sampling`): the search
    reads the prompt, then goes on one drawn byte at a time, its hypotheses and their key/value entries kept."""

    def __init__(self, lm: TokenMarginalByteLM):
        self.lm, self.block_size = lm, lm.block_size
        self.session: _Session | None = None
        self.length = 0

    @torch.no_grad()
    def start(self, window: torch.Tensor) -> torch.Tensor:
        texts = [row.tobytes() for row in window.to(torch.uint8).cpu().numpy()]
        self.session, _ = self.lm.read(texts, [len(t) - 1 for t in texts])
        self.length = window.size(1)
        return torch.from_numpy(self.session.next_byte_logprobs()).float()

    @torch.no_grad()
    def step(self, byte: torch.Tensor) -> torch.Tensor:
        for row, value in enumerate(byte.tolist()):
            self.session.append(row, value)
        self.session.advance()
        self.length += 1
        return torch.from_numpy(self.session.next_byte_logprobs()).float()

    def cached(self) -> int:
        return self.length


def bytes_starting_no_token(vocab: TokenVocabulary) -> list[int]:
    """The bytes no token of `vocab` starts with: a text holding one has probability 0 under the model."""
    return sorted(set(range(VOCAB_SIZE)) - {t[0] for t in vocab.token_of})


def check_spelled_text(name: str, vocab: TokenVocabulary, skipped: Sequence[int], key: str = "eval.unspellable_bytes") -> None:
    """A token-level ground truth must spell every text the pipeline shows it: every byte it cannot spell must be
    among those the prompts and held-out windows skip (`skipped`, config `key`)."""
    missing = sorted(set(bytes_starting_no_token(vocab)) - set(skipped))
    if missing:
        raise TokenModelError(
            f"ground truth {name!r} cannot spell bytes {missing} (no token starts with them), which the prompts and "
            f"held-out windows do not skip: add them to config `{key}`"
        )


def unspellable_bytes(name: str, path: str | os.PathLike) -> list[int]:
    """The bytes a local byte-level BPE model cannot spell (SmolLM2: 21 of them, control characters and bytes that
    never occur in UTF-8 text); its tokenizer alone is read."""
    from transformers import AutoTokenizer

    if not Path(path).is_dir():
        raise FileNotFoundError(f"ground truth {name!r}: no model folder at {os.fspath(path)!r} (config `ground_truths[].path`)")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return bytes_starting_no_token(TokenVocabulary.from_tokenizer(tokenizer, name))


def load_token_byte_lm(
    name: str,
    path: str | os.PathLike,
    settings: MarginalSettings = MarginalSettings(),
    *,
    dtype: str = "float32",
    device: str | torch.device = "cpu",
) -> TokenMarginalByteLM:
    """A local `transformers` causal LM over byte-level BPE tokens, as a byte-level LM (never from a hub)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not Path(path).is_dir():
        raise FileNotFoundError(f"ground truth {name!r}: no model folder at {os.fspath(path)!r} (config `ground_truths[].path`)")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=getattr(torch, dtype))
    return TokenMarginalByteLM(name, model.to(device).eval(), tokenizer, settings)
