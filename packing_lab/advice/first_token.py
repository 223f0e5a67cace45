"""What the first position of each packed document trains on: EOS between documents only, a BOS at each start,
or the chat template's header at each start.

With positions reset and a block-diagonal mask, a document's first position sees only its own token. Which token
that is decides what the position learns, and the lab's batches mask each document's last target (a document
trains exactly as it would alone). The tokens here come from a real tokenizer (SmolLM2's on the pages); with
UTF-8 bytes as tokens and made-up BOS and EOS ids the rules read the same:

>>> ids = {"<s>": 1, "</s>": 2}
>>> tok = ByteTokens(ids)
>>> starts = {s.convention: s for s in document_starts(tok, ["ab", "cd"])}
>>> eos, bos = starts["EOS between documents"], starts["BOS at each start"]
>>> eos.first_holds, eos.first_predicts, eos.opening_trained
('c', 'd', False)
>>> bos.first_holds, bos.first_predicts, bos.opening_trained, bos.added_per_document
('<s>', 'c', True, 1)
"""
from __future__ import annotations

from dataclasses import dataclass

CONVENTIONS = ("EOS between documents", "BOS at each start", "chat template at each start")


@dataclass(frozen=True)
class DocumentStart:
    """One convention on the second document of a packed row: its first position, and what it is trained on."""

    convention: str
    first_holds: str            # the token at the document's first position: all that position sees
    first_predicts: str         # its target
    opening: str                # the document's first word (its first content token)
    opening_trained: bool       # is some position of the document trained to predict that first word?
    added_per_document: int     # special or template tokens added at each document start
    inference_starts: str       # what the model sees first at inference with this convention
    distinct_first_targets: int  # over all the documents: distinct targets of position 0
    documents: int

    @property
    def sentence(self) -> str:
        """What the document's first position learns under this convention, in words."""
        if self.convention == CONVENTIONS[0]:
            return (f"Position 0 holds the first word itself ({self.first_holds!r}), sees nothing else and learns to "
                    f"predict {self.first_predicts!r} from it; no position predicts {self.opening!r}, so how documents "
                    "open is never trained. At inference the model starts from the prompt's first word, as here.")
        if self.convention == CONVENTIONS[1]:
            return (f"Position 0 holds {self.first_holds!r} in every document, the same input each time, and is "
                    f"trained on {self.distinct_first_targets} different first words over {self.documents} documents: "
                    "it can only learn how often each opening occurs. Every first word is a target. At inference the "
                    f"prompt must start with {self.first_holds!r} too, or the model meets a start it never trained on.")
        return (f"Position 0 holds {self.first_holds!r} and always predicts {self.first_predicts!r}: "
                f"{self.added_per_document} tokens of the same header come before every document, trained only if the "
                "prompt is in the loss (a target no one needs) and paid in slots either way. At inference the template "
                "writes the same header, so training and inference start alike.")

    def to_dict(self) -> dict:
        return {**self.__dict__, "sentence": self.sentence}


@dataclass(frozen=True)
class ByteTokens:
    """UTF-8 bytes as tokens, with the special tokens named in ``special`` (a stand-in for a real tokenizer)."""

    special: dict

    def encode(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):
            name = next((s for s in self.special if text.startswith(s, i)), None)
            out.append(self.special[name] + 256 if name else text[i].encode()[0])
            i += len(name) if name else 1
        return out

    def token(self, i: int) -> str:
        names = {v + 256: k for k, v in self.special.items()}
        return names.get(i, chr(i))

    @property
    def bos(self) -> str:
        return min(self.special, key=lambda name: self.special[name])

    @property
    def eos(self) -> str:
        return max(self.special, key=lambda name: self.special[name])

    def chat(self, text: str) -> str:
        return f"{self.bos}user\n{text}{self.eos}\n"


class HFTokens:
    """A Hugging Face tokenizer (the lab's ``HFTokenizer``) in the shape :func:`document_starts` reads."""

    def __init__(self, tokenizer):
        self.tokenizer, self.hf = tokenizer, tokenizer.hf
        self.bos, self.eos = self.hf.bos_token, self.hf.eos_token

    def encode(self, text: str) -> list[int]:
        return self.hf(text, add_special_tokens=False)["input_ids"]

    def token(self, i: int) -> str:
        return self.hf.decode([i])

    def chat(self, text: str) -> str:
        return self.tokenizer.apply_chat_template([{"role": "user", "content": text}])


def _content_at(doc: list[int], content: list[int]) -> int:
    """Where ``content`` begins inside ``doc`` (the template's tokens come before it)."""
    n = min(len(content), 3)
    return next(i for i in range(len(doc) - n + 1) if doc[i:i + n] == content[:n])


def _start(convention: str, tok, texts: list[str]) -> DocumentStart:
    plain = [tok.encode(t) for t in texts]
    if convention == CONVENTIONS[0]:
        docs, inference = [p + tok.encode(tok.eos) for p in plain], "the prompt's first word"
    elif convention == CONVENTIONS[1]:
        docs, inference = [tok.encode(tok.bos) + p + tok.encode(tok.eos) for p in plain], tok.bos
    else:
        docs, inference = [tok.encode(tok.chat(t)) for t in texts], "the template's header"
    doc, content = docs[1], plain[1]
    k = _content_at(doc, content)            # the tokens added before the document's first word
    # positions reset, the mask on, each document's last target masked: position j of a document predicts
    # its token j + 1, so the first word (token k) is a target exactly when something comes before it
    return DocumentStart(convention, tok.token(doc[0]), tok.token(doc[1]), tok.token(content[0]), k > 0, k,
                         inference, len({d[1] for d in docs if len(d) > 1}), len(docs))


def document_starts(tokenizer, texts) -> tuple[DocumentStart, ...]:
    """Each convention on ``texts`` packed in one row (see the module doc); ``tokenizer`` is the lab's
    ``HFTokenizer`` or a :class:`ByteTokens`."""
    texts = [t for t in texts if t]
    if len(texts) < 2:
        from packing_core._validate import InputError
        raise InputError(f"document_starts needs two texts or more, got {len(texts)}")
    tok = tokenizer if isinstance(tokenizer, ByteTokens) else HFTokens(tokenizer)
    return tuple(_start(c, tok, texts) for c in CONVENTIONS)


def document_starts_here(texts) -> tuple[tuple[DocumentStart, ...], str]:
    """:func:`document_starts` with SmolLM2's tokenizer when it is installed here, else UTF-8 bytes; and its name."""
    from packing_core.models import load_tokenizer, pretrained_status

    if pretrained_status()[0]:
        return document_starts(load_tokenizer("auto"), texts), "SmolLM2's tokenizer"
    return (document_starts(ByteTokens({"<s>": 1, "</s>": 2}), texts),
            "UTF-8 bytes (SmolLM2's tokenizer is not installed here)")
