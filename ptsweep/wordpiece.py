"""The deterministic BERT-style WordPiece trainer (the fallback tokenizer of :mod:`ptsweep.data`, step 3)."""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Iterable

from tokenizers import Tokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _bert_tokenizer_shell(model) -> Tokenizer:
    """A BERT-style lowercase pipeline around ``model`` (as bert-base-uncased: BertNormalizer, BertPreTokenizer)."""
    from tokenizers import decoders, normalizers, pre_tokenizers

    tok = Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None, clean_text=True,
                                                handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def train_wordpiece(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A BERT-style lowercase WordPiece (as bert-base-uncased), trained deterministically: same texts and vocab_size
    -> byte-identical tokenizer.json in any process (``tokenizers``' own trainer breaks ties by a per-process random
    seed). Vocabulary = special tokens, characters (by (-count, char)), ``##`` characters, then the merges in order."""
    from tokenizers import models

    words = _count_words(texts)
    vocab = _alphabet(words)
    _merge_pairs(words, vocab, vocab_size)
    return _bert_tokenizer_shell(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##",
                                                  max_input_chars_per_word=100))


def _count_words(texts: Iterable[str]) -> Counter:
    """Word counts after BERT's normaliser and pre-tokeniser (the Rust ones: deterministic)."""
    from tokenizers import models

    shell = _bert_tokenizer_shell(models.WordPiece(vocab={t: i for i, t in enumerate(SPECIAL_TOKENS)},
                                                   unk_token="[UNK]"))
    norm, pre = shell.normalizer, shell.pre_tokenizer
    words: Counter = Counter()
    for text in texts:
        words.update(w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text)))
    return words


def _alphabet(words: Counter) -> dict[str, int]:
    """Special tokens, then characters by (-count, char), then ``##`` continuation characters in the same order."""
    vocab: dict[str, int] = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    chars: Counter = Counter()
    for w, n in words.items():
        for c in w:
            chars[c] += n
    for c, _ in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0])):
        vocab.setdefault(c, len(vocab))
    for c in sorted({c for w in words for c in w[1:]}, key=lambda c: (-chars[c], c)):
        vocab.setdefault("##" + c, len(vocab))
    return vocab


def _merge_pairs(words: Counter, vocab: dict[str, int], vocab_size: int) -> None:
    """WordPiece training's BPE merges, added to ``vocab`` in order until it holds ``vocab_size`` tokens: the most
    frequent adjacent pair first, ties broken by the pair's strings (a heap with lazy deletion of stale counts)."""
    types = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))  # fixed order of the word types
    seqs = [[w[0], *("##" + c for c in w[1:])] for w, _ in types]
    freq = [n for _, n in types]
    pairs: Counter = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for i, sq in enumerate(seqs):
        for a, b in zip(sq, sq[1:]):
            pairs[(a, b)] += freq[i]
            where.setdefault((a, b), set()).add(i)
    heap = [(-n, a, b) for (a, b), n in pairs.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        n, a, b = heapq.heappop(heap)
        if pairs.get((a, b), 0) != -n or n == 0:
            continue  # stale heap entry
        new = a + (b[2:] if b.startswith("##") else b)  # a merged token drops the right part's ##
        vocab.setdefault(new, len(vocab))
        touched = _merge_in_words((a, b), new, sorted(where.pop((a, b), ())), seqs, freq, where)
        pairs.pop((a, b), None)
        for p, d in sorted(touched.items()):
            if d:
                pairs[p] = pairs.get(p, 0) + d
                if pairs[p] > 0:
                    heapq.heappush(heap, (-pairs[p], p[0], p[1]))
                else:
                    pairs.pop(p, None)


def _merge_in_words(pair: tuple[str, str], new: str, word_ids: list[int], seqs: list[list[str]], freq: list[int],
                    where: dict[tuple[str, str], set[int]]) -> Counter:
    """Replace ``pair`` by ``new`` in the words ``word_ids`` (in place); returns the change of each neighbouring
    pair's count and records the words that now hold the new pairs in ``where``."""
    a, b = pair
    touched: Counter = Counter()
    for i in word_ids:
        sq, f = seqs[i], freq[i]
        j = 0
        while j < len(sq) - 1:
            if sq[j] == a and sq[j + 1] == b:
                if j > 0:
                    touched[(sq[j - 1], a)] -= f
                    touched[(sq[j - 1], new)] += f
                    where.setdefault((sq[j - 1], new), set()).add(i)
                if j + 2 < len(sq):
                    touched[(b, sq[j + 2])] -= f
                    touched[(new, sq[j + 2])] += f
                    where.setdefault((new, sq[j + 2]), set()).add(i)
                sq[j:j + 2] = [new]
            j += 1
    return touched
