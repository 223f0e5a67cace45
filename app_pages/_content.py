"""What the lab shows by default: the worked example, example texts, the Leakage lab's scenarios,
the teacher's lines for each page, and the map from each lesson to the frameworks a learner meets.

>>> [title for title, _ in LESSON_PLAN][:2]
['Why packing', 'Padded vs packed']
>>> sum(minutes for _, minutes in LESSON_PLAN)
60
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.data import byte_tokenizer
from packing_core.models import PRETRAINED

# TEACHING 1: eight samples at context 512.
WORKED_LENGTHS = (120, 90, 300, 40, 55, 30, 210, 65)
WORKED_CONTEXT = 512
# TEACHING 18: thirteen documents on which every packer of the step-through ends differently at context 512:
# next-fit 7 rows, bfd 6, ffd 5, and the LP's patterns 5, the proven fewest (tests/app/test_watch.py pins it).
WATCH_LENGTHS = (387, 198, 61, 38, 246, 407, 377, 78, 118, 79, 210, 51, 256)
WATCH_CONTEXT = 512
EXAMPLE_TEXTS = (
    "The cat sat on the mat.",
    "Rain is expected tomorrow in Oslo.",
    "Packing puts many documents in one row.",
    "Bees can see ultraviolet light.",
    "My printer says it is out of paper again.",
    "Water boils at 100 C at sea level.",
    "Reset the router, then try once more.",
    "Chess was played in India 1500 years ago.",
)


EXAMPLE_QA = (
    ("Q: 2+2? ", "A: 4."),
    ("Q: Capital of France? ", "A: Paris."),
    ("Q: Opposite of hot? ", "A: Cold."),
    ("Q: Sky colour? ", "A: Blue."),
    ("Q: Legs on a spider? ", "A: Eight."),
    ("Q: Largest planet? ", "A: Jupiter."),
)


@dataclass(frozen=True)
class RowDocuments:
    """Short byte-tokenised documents that fill one row (token id = UTF-8 byte, so readable)."""

    texts: tuple[str, ...]
    documents: tuple[tuple[int, ...], ...]
    prompt_lengths: tuple[int, ...]   # 0 for plain text


def row_documents(width: int, instruction: bool = False) -> RowDocuments:
    """Enough example documents to fill a row of ``width`` tokens (examples repeat when needed).

    >>> d = row_documents(32)
    >>> d.texts[:2], sum(map(len, d.documents)) >= 32
    (('The cat sat on the mat.', 'Rain is expected tomorrow in Oslo.'), True)
    """
    if width < 1:
        raise ValueError(f"width must be at least 1 token, got {width}")
    pool = EXAMPLE_QA if instruction else [(t, "") for t in EXAMPLE_TEXTS]
    per_cycle = sum(len((p + a).encode()) for p, a in pool)
    n = len(pool) * (-(-width // per_cycle))  # whole cycles until the row is full
    picked = [pool[i % len(pool)] for i in range(n)]
    # keep only what the row needs, plus one document that spills into the next row
    lens = np.cumsum([len((p + a).encode()) for p, a in picked])
    picked = picked[: int(np.searchsorted(lens, width, side="left")) + 1]
    texts = tuple(p + a for p, a in picked)
    docs = tuple(tuple(d) for d in byte_tokenizer(list(texts)))
    prompts = tuple(len(p.encode()) if a else 0 for p, a in picked)
    return RowDocuments(texts, docs, prompts)



# ---------------------------------------------------------------- the Leakage lab's scenarios
# name -> (what the learner reads, the settings it sets). The free grid stays under "Advanced".
# The tiny models' scenarios run the dense-mask kernel: packed and alone are then different computations
# (one masked row against one short call), whose last bits may differ (about 1e-6 in float32 on some CPUs,
# exactly 0 on others: the verdict's tolerance sentence says which), where `segments` matches exactly.
SCENARIOS = {
    "correct": ("Correct packing: mask on, positions reset",
                dict(mask="on", positions="reset", model="tiny-rope", attention="dense", use_cache=False,
                     causal="on")),
    "mask off": ("The mask forgotten: one causal triangle over the whole row",
                 dict(mask="off", positions="reset", model="tiny-rope", attention="dense", use_cache=False,
                      causal="on")),
    "continuous, RoPE": ("Positions not reset, on a RoPE model (mask on)",
                         dict(mask="on", positions="continuous", model="tiny-rope", attention="dense",
                              use_cache=False, causal="on")),
    "continuous, absolute": ("Positions not reset, on learned absolute positions (mask on)",
                             dict(mask="on", positions="continuous", model="tiny-abs", attention="dense",
                                  use_cache=False, causal="on")),
    "no causal flag": ("A varlen kernel without its causal flag (mask on, positions reset)",
                       dict(mask="on", positions="reset", model="tiny-rope", attention="dense", use_cache=False,
                            causal="off")),
    "sdpa with cache": ("transformers' own sdpa attention, use_cache left on (SmolLM2)",
                        dict(mask="on", positions="reset", model=PRETRAINED, attention="sdpa", use_cache=True,
                             causal="on")),
}
FREE = "advanced"   # the scenario name that leaves every switch to the learner


# ---------------------------------------------------------------- the pages, in lesson order
@dataclass(frozen=True)
class PageSpec:
    """One page of the lab: its file, its title and icon in the navigation, and its place in the
    60-minute lesson (minutes, one sentence to read out, one question to ask the class, and the
    steps the teacher walks through, one idea each).

    ``app.py`` routes to every entry, ``_layout.lesson`` draws its lines, ``_layout.steps`` its tabs, the page
    tests and ``benchmarks/page_speed.py`` walk the same list: a page is added here and nowhere else.
    """

    path: str       # relative to the repository root, e.g. "app_pages/why_packing.py"
    title: str
    icon: str
    minutes: int
    say: str
    ask: str
    steps: tuple[str, ...] = ()   # the page's tabs in order, named as the teacher says them; () for one screen

    @property
    def name(self) -> str:
        """The file's stem: ``why_packing``."""
        return self.path.rsplit("/", 1)[-1].removesuffix(".py")


# The order of a 60-minute lesson: waste, costs, correctness, leaks, bugs, your own setup, context parallelism,
# policy, speed.
PAGES = (
    PageSpec("app_pages/why_packing.py", "Why packing", ":material/lightbulb:", 8,
        "A batch is a rectangle, so every short sample drags a tail of padding through the whole model.",
        f"{len(WORKED_LENGTHS)} samples hold {sum(WORKED_LENGTHS)} tokens: how many slots does padding them to "
        f"{WORKED_CONTEXT} cost, and how many could we get away with?",
        ("Pad or pack?", "Where documents start", "A real dataset", "Schedule", "The trade-off")),
    PageSpec("app_pages/padded_vs_packed.py", "Padded vs packed", ":material/view_week:", 8,
        "Packing saves three different bills: the linear layers pay per slot, attention per square, and a dense mask "
        "pays for every cell it hides.",
        # "{name}" fields are filled by the page from its live numbers (lesson(__file__, name=value))
        "If attention shrinks {attention_ratio:.1f}-fold but the whole step only gets {step_ratio:.2f} times "
        "cheaper, where did the rest go?",
        ("Rows and pads", "Three bills", "Every strategy", "One outlier", "Batch order")),
    PageSpec("app_pages/watch_it_pack.py", "Watch it pack", ":material/play_circle:", 2,
        "A packer is one rule, applied one document at a time: next-fit looks only at the open row, ffd takes the "
        "first row with room, bfd the fullest row the document still fits, and the LP solver fills whole row "
        "patterns it chose in advance.",
        "Before each step: which row will this document go to? And which rule will need the fewest rows?"),
    PageSpec("app_pages/masks_and_labels.py", "Masks and labels", ":material/grid_on:", 9,
        "A packed row is correct only if every document computes as if it were alone, and trains only on its own "
        "next tokens.",
        "Which of these bugs would a count of loss positions catch, and which would it miss?",
        ("The mask", "Positions", "Targets and loss", "Break it, check it")),
    PageSpec("app_pages/leakage_lab.py", "Leakage lab", ":material/science:", 12,
        "A wrong mask never raises an error. Tensor checks catch some forms of it. Running a document alone and "
        "packed catches every form that makes it compute differently packed, on the call path you test; what both "
        "runs share, such as a missing causal flag, needs a second check: change a later token.",
        "Before you click: will document 1's logits change in this scenario?",
        ("Predict, then look", "Not only attention", "Train with the mask off", "Always a bug?")),
    PageSpec("app_pages/bug_zoo.py", "Bug zoo", ":material/bug_report:", 5,
        "The reproduced bugs were reported in real projects; the planted faults are classic mistakes shown in a "
        "small batch. Most train without an error (one crashes). Each is caught "
        "by a tensor check, by comparing a document alone with the same document packed, by the causality check, "
        "or by more than one.",
        "Which of these bugs would your own training setup catch today, and with which check?",
        ("Reproduced bugs", "Planted faults", "Loss weighting", "Accumulation and ranks")),
    PageSpec("app_pages/check_your_setup.py", "Check your setup", ":material/fact_check:", 4,
        "Your trainer makes every one of these choices somewhere, often without a word: find where transformers "
        "and TRL make them, then check one real batch for the attention implementation that will read it.",
        "Which attention implementation does your trainer use, and does it keep the documents of your batch "
        "apart or read each row as one long document?",
        ("In your framework", "Check a batch")),
    PageSpec("app_pages/context_parallel.py", "Context parallel", ":material/view_column:", 4,
        "Context parallelism cuts every document, not the row: each into 2·CP chunks, rank r taking chunks r and "
        "2·CP-1-r, each document padded to a multiple of 2·CP, and every rank carrying its padded and real offsets.",
        "Cut one long document over four ranks in order: which rank computes the most attention, and how would you "
        "even it out?", ("Predict, then cut", "The ring", "Balance")),
    PageSpec("app_pages/dataset_explorer.py", "Dataset explorer", ":material/bar_chart:", 5,
        "The right policy depends on the lengths: look at the histogram before choosing between bucketing and packing.",
        "For this dataset, would you bucket or pack on a first run, and what would make you change your mind?",
        ("The lengths", "Every strategy", "Recommendation", "Balance", "Cap and stream")),
    PageSpec("app_pages/benchmark.py", "Benchmark", ":material/speed:", 3,
        "A FLOP ratio is what the arithmetic alone predicts. Measured speed-ups usually fall short of it (small "
        "calls, memory traffic), but it is not a hard ceiling: a slow baseline can lose by more.",
        "Why does the dense-mask backend have a lower FLOP bound than the per-document one on the same rows?"),
)


def page(key: str) -> PageSpec:
    """The page whose title, file stem or path (``__file__`` works) is ``key``.

    >>> page("Bug zoo").minutes, page("app_pages/bug_zoo.py").title
    (5, 'Bug zoo')
    """
    stem = key.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
    for p in PAGES:
        if key in (p.title, p.path) or stem == p.name:
            return p
    raise KeyError(f"no page {key!r} in _content.PAGES: add a PageSpec there ({', '.join(p.name for p in PAGES)})")


# Views of PAGES for older readers: (title, minutes) in order, and title -> (say, ask).
LESSON_PLAN = tuple((p.title, p.minutes) for p in PAGES)
TEACHER = {p.title: (p.say, p.ask) for p in PAGES}


# ---------------------------------------------------------------- in your framework
# (lesson, what you meet in transformers or TRL), each checked in the library's source or docs;
# the Check your setup page lists them.
FRAMEWORK = (
    ("Packing without pads, boundaries as offsets",
     "transformers' `DataCollatorWithFlattening` joins a batch into one row of shape [1, total tokens], with "
     "`position_ids` restarting per example; `return_flash_attn_kwargs=True` also returns `cu_seq_lens_q/k`. "
     "Only FlashAttention runs it as a varlen kernel. sdpa, eager and flex turn the restarting `position_ids` "
     "into a block-diagonal mask (when there is no attention_mask and no cache): correct, but that row is the "
     "whole per-device batch, and sdpa and eager compute its full square."),
    ("Boundary targets",
     "The same collator puts `separator_id` (-100) as the first label of every example, so the last token of one "
     "example is never trained to predict the next one. TRL's collator does the same where `position_ids == 0`."),
    ("Positions act as the mask",
     "With no `attention_mask`, transformers finds the documents from `position_ids`. sdpa/eager build a "
     "block-diagonal mask from every step that is not +1. FlashAttention starts a document at every return to "
     "the minimum position, but only in one flattened row (`[1, T]`, the padding-free format): packed rows "
     "`[B>1, L]` need `cu_seq_lens` or sdpa/eager, or they leak under FlashAttention. Continuous positions "
     "there mean one long document: no isolation."),
    ("A library can drop the mask silently",
     "transformers' sdpa/eager/flex skip that detection when a 2D `attention_mask` is passed or a cache is in "
     "use. A model called with `use_cache` at its config default builds a cache, and its sdpa path then falls "
     "back to one causal triangle (FlashAttention drops an all-ones mask and ignores the cache here). TRL's "
     "SFTTrainer sets `use_cache=False` to avoid the gradient-checkpointing warning, "
     "and, padding-free, passes no attention mask and, since TRL 1.x, `cu_seq_lens_q/k` and `max_length_q/k`, "
     "which FlashAttention reads directly; sdpa/eager ignore them and find the documents from `position_ids`."),
    ("TRL's switches",
     "`SFTConfig(packing=True)` packs with `packing_strategy='bfd'` by default (best-fit decreasing, overflow "
     "truncated; `'bfd_split'` splits it, `'wrapped'` cuts mid-sequence), and bfd turns `padding_free` on. "
     "`padding_free=True` alone flattens each batch. TRL documents it as supported only with FlashAttention 2 or "
     "3 and does not check: sdpa/eager isolate the flattened documents too (TRL passes `use_cache=False` and no "
     "mask), at the price below."),
    ("Loss weighting under packing",
     "transformers' Trainer divides the summed loss by `num_items_in_batch`, the count of non-ignored labels over "
     "every accumulation step (and every device by default): a mean per token, so a long example weighs more than "
     "a short one, packed or not. A mean per row changes with the packing. A mean per example weighs every "
     "example equally whatever its length: that changes the objective, and not with the packing only if taken "
     "over the whole step (*Bug zoo*, step 4)."),
)


# ---------------------------------------------------------------- words before jargon
# term -> its meaning in plain words. Pages show it on hover (_lab.term) and the sidebar lists it (_layout.glossary).
GLOSSARY = {
    "slot": "One position of a row. A batch of R rows of width W has R x W slots, and the GPU computes every one.",
    "pad": "A slot that holds no real token, only there to make the batch a rectangle.",
    "utilisation": "Real tokens divided by slots: the share of the computed positions that hold data.",
    "bucketing": "Sorting samples into groups of similar length, then padding each batch only to its own longest "
                 "sample. No mask changes, but batches are no longer random draws.",
    "next-fit": "A packer that keeps the documents in order and starts a new row when the next one does not fit.",
    "ffd": "First-fit decreasing: a packer that takes the longest document first and puts each into the first "
           "row with room.",
    "bfd": "Best-fit decreasing: a packer that takes the longest document first and puts each into the fullest "
           "row it still fits in.",
    "concat-cut": "Concatenate every document into one stream and cut it into full rows: no pads, but documents "
                  "split at row edges.",
    "position_ids": "The position of each token inside its document (0, 1, 2, ...). Positional encodings read them.",
    "cu_seqlens": "Cumulative sequence lengths: where each document starts in the flattened batch, plus the total "
                  "at the end. Two documents of 3 and 2 tokens: [0, 3, 5].",
    "varlen": "A variable-length attention kernel: it takes the documents of a batch laid end to end plus their "
              "cu_seqlens, and computes one block per document, with no pads and no mask matrix: causal only if you "
              "ask for it (causal=True in flash-attn, window_size=(-1, 0) in torch's varlen_attn; both default to "
              "full attention).",
    "sdpa": "Scaled dot-product attention: torch.nn.functional.scaled_dot_product_attention, and transformers' "
            "attention implementation of that name. It takes a mask or a causal flag (or nested jagged tensors), "
            "not a cu_seqlens argument.",
    "FlashAttention": "A fused attention kernel (the flash-attn package); its varlen form reads cu_seqlens.",
    "FlexAttention": "torch's attention that takes the mask as a function and skips the tiles it fully hides.",
    "block-diagonal mask": "An attention mask with one causal triangle per document and nothing between them.",
    "full squares": "How the lab counts attention cells (the query-key pairs a kernel computes): n² for a row or "
                    "document of n tokens, even under a causal kernel, as torch's CPU kernel computes rows of up to "
                    "512 tokens. A GPU causal kernel skips the upper half and pays n(n + 1)/2, the causal halves "
                    "(10 cells instead of 16 for 4 tokens); a dense mask skips nothing. Σ len², padded rows and "
                    "dense masks are counted in full squares; FlexAttention by the tiles it really computes (on or "
                    "below the diagonal), on any device. The pages say what changes on a GPU.",
    "targets": "The token each position is trained to predict: the next token of the same document, or -100.",
    "loss mask": "Which positions count in the loss. A separate thing from the attention mask.",
    "EOS": "End-of-sequence token. Placed between documents, it tells the model that a new one starts.",
    "KV cache": "The keys and values kept from earlier tokens so generation need not recompute them. In "
                "transformers, use_cache=True builds one.",
    "PackedBatch": "The lab's packed batch: token ids, position ids, targets, loss mask and cu_seqlens of a plan's "
                   "rows, as tensors.",
    "finding": "A named result of a check, such as positions_do_not_restart: the rule it breaks, and where.",
}


# ---------------------------------------------------------------- the Leakage lab's explanations
# The mask, the positions and the cache, shown once the learner has predicted (its terms get a tooltip);
# {first} is the first tiny document's length.
LEAKAGE_WHY_TERMS = ('sdpa', 'KV cache')   # defined beside the text
LEAKAGE_WHY = (
    "**The mask.** With the mask off, document 1 reads document 0 and its logits move by whole "
    "units. Document 0 still matches: causality already hides everything after it.\n\n"
    "**The positions.** Continuous positions tell document 1 it starts where it happens to sit in the "
    "row (position {first} for the tiny models) instead of at 0. "
    "A model with learned absolute positions sees different inputs, so its logits change. "
    "With plain RoPE and a correct mask they do not: RoPE makes attention depend only on the "
    "distance between two tokens, and shifting every position of an isolated document by the same "
    "amount keeps every distance. Scaled RoPE that is a fixed function of the config (linear, YaRN, "
    "Llama 3) keeps that property. Dynamic NTK and LongRoPE do not: they choose their frequencies from the "
    "largest position in the batch once that passes the trained length (and dynamic NTK keeps the largest seen "
    "so far until a batch falls back under it). So the rule is "
    "model-specific: keep the positions your model expects. One practical reason to reset them anyway: "
    "transformers' padding-free path starts a document at every step that is not +1 (sdpa/eager) or every "
    "return to the minimum position (FlashAttention, one flattened row), so there continuous positions "
    "remove the mask as well.\n\n"
    "**A wrong mask never errors.** Every setting above runs without a warning. In training the loss "
    "still falls, and it can even look better when neighbouring documents are related (the experiment "
    "below); run alone, as at inference, the model is worse. Tensor checks catch some forms of the bug (an "
    "all-ones mask beside packed positions, cu_seqlens that mark whole rows). Packed against alone, with a "
    "tolerance fitted to the dtype (not bitwise equality, which is not guaranteed), catches every form that makes "
    "a document compute differently packed than alone, on the call path you test. It cannot see an error the alone "
    "run shares, such as a varlen kernel called without its causal flag: pair it with the causality check (change a later token; "
    "the earlier logits must not move), shown beside the verdict.\n\n"
    "**transformers' own attention and its cache.** With `sdpa` and no attention mask, "
    "transformers builds the block-diagonal mask itself from the position ids. Its sdpa/eager/flex paths skip "
    "that step when a KV cache is in use, and a model called with `use_cache` at its config default "
    "builds one: document 1 then reads document 0 with no warning. Turn the cache off and the same call is "
    "correct."
)
# A wrong mask never errors: the two training runs ({topics} topics of {tokens} tokens each).
LEAKAGE_TRAIN = (
    "Two training runs of the tiny model: same starting weights, same batches, same steps. "
    "The only difference is the mask. The documents are synthetic: each is on one of "
    "{topics} topics (its own {tokens} tokens) and starts with a BOS token. "
    "You choose how often a document sits next to one "
    "on the same topic. The model starts from random weights and is small, so both runs finish in "
    "under a minute on a CPU. Then both models are judged the same way: each document alone, as at "
    "inference, and each document with the previous one visible."
)
# Is reading across documents always a bug? The Leakage lab's third step.
LEAKAGE_DEBATE = (
    "Not always. Much pretraining concatenates documents with an end-of-text token between them and "
    "uses the plain causal mask on purpose: GPT-3 did so and relied on the separator token to tell "
    "the model that the context before it is unrelated ([Brown et al. 2020, appendix B]"
    "(https://arxiv.org/abs/2005.14165)). nanoGPT's data preparation and transformers' `run_clm.py` "
    "example both concatenate documents under the plain causal mask (nanoGPT with an end-of-text token; "
    "run_clm with whatever special tokens the tokenizer adds, and no separator of its own), and "
    "Megatron-LM's `--reset-attention-mask` and "
    "`--reset-position-ids` are off unless you ask for them.\n\n"
    "Where the mask matters most:\n"
    "- **Long context.** Llama 3 masks across documents and reports that this had little effect in "
    "standard pretraining but mattered in continued pretraining on very long sequences "
    "([Llama 3 report, section 3.2](https://arxiv.org/abs/2407.21783)). The longer the row, the more "
    "unrelated text a token can read.\n"
    "- **Instruction data.** Each answer should depend on its own prompt only. Hugging Face notes that "
    "packing without example boundaries gave cross-example attention that hurt quality and "
    "convergence ([packing with FlashAttention 2](https://huggingface.co/blog/packing-with-FA2)), and "
    "TRL's docs warn that packed sequences can influence one another.\n"
    "- **Measured in pretraining too.** Zhao et al. find that masking within documents removes "
    "distracting context and improves results ([arXiv 2402.13991](https://arxiv.org/abs/2402.13991)).\n\n"
    "This lab's tiny experiment is the clean case: documents that are unrelated by construction, "
    "judged alone. Decide for your data which case you are in, and measure it the same way."
)


# ---------------------------------------------------------------- the Leakage lab's two checks (TEACHING 28)
LEAKAGE_TWO_CHECKS = (
    "Isolation and causality are two properties, and need two checks. **Alone vs packed** compares each document "
    "with itself packed: it catches every difference between the two runs. **Causality** changes the tokens after "
    "a cut and asks whether any logit before the cut moved. A varlen kernel called without its causal flag "
    "(torch's `varlen_attn` defaults to `window_size=(-1, -1)`, flash-attn's `flash_attn_varlen_func` to "
    "`causal=False`: full attention inside each document) reads the future of every document, alone and packed "
    "alike: the first check calls it equivalent, the second sees it."
)
# The reason, under the two verdicts when only causality fails: {first} is the first position that moved, {cut} the cut.
LEAKAGE_TWO_CHECKS_REASON = (
    "**Why the first check is blind here.** Without the causal flag each document reads all of itself, in the "
    "packed row exactly as alone, so both runs compute the same wrong thing. Changing the tokens after position "
    "{cut} moved the logits at position {first}: a query read a key after it. In training, each position would "
    "be trained to predict a token it can already see."
)
# Not only attention (TEACHING 27), on the teaching model: {conv} tokens from the convolution, {n} in the document.
LEAKAGE_MIXERS = (
    "Attention is not the only layer that mixes tokens. **tiny-hybrid** is a teaching model (pure torch, random "
    "init, three layers): attention with a perfect block-diagonal mask, a short causal convolution of kernel 4 and "
    "a gated recurrence. Packed after the first document, the second one still differs from its alone run: the "
    "convolution reads the last 3 tokens of the previous document into its first {conv}, and the recurrent state "
    "carries the previous document into all {n}. Position resets and the attention mask reach neither: each "
    "needs its own boundary signal, in the form its kernel reads (`seq_idx` for causal-conv1d and Mamba-2's scan, "
    "`cu_seqlens` for flash-linear-attention's convolutions and recurrences; this teaching model's convolution "
    "reads `seq_idx` and its recurrence `cu_seqlens`), and a kernel that honours it."
)
LEAKAGE_MIXERS_REAL = (
    "The real families are measured from transformers' own classes (docs/checker-guide.md, *What each model family reads*; "
    "`python -m packing_core check --list-model-types`): with `position_ids` alone, Qwen3-Next's second document "
    "differs from its alone run by 6e-2 and LFM2's by 7e-4 on tiny models, while their attention layers isolate "
    "it. `check FILE --model-type qwen3_next` says so before you train."
)

