"""Helpers shared by several test modules (no test module imports another)."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

CHAT_TOPICS = ("the tides", "a prime number", "photosynthesis", "a haiku", "the Roman calendar", "binary search")


def write_your_data(folder: Path) -> dict[str, Path]:
    """A new user's three corpora: chat JSONL, prompt/completion Parquet, and a folder of text shards.

    Seeded by construction (no randomness), small enough for a browser test with the real tokenizer.
    """
    folder.mkdir(parents=True, exist_ok=True)
    chats = folder / "chats.jsonl"
    with open(chats, "w", encoding="utf-8") as f:
        for i in range(48):
            topic = CHAT_TOPICS[i % len(CHAT_TOPICS)]
            turns = [{"role": "user", "content": f"Explain {topic} in {1 + i % 4} sentences."},
                     {"role": "assistant", "content": " ".join([f"Here is point {k} about {topic}." for k in range(1 + i % 9)])}]
            if i % 3 == 0:
                turns = [{"role": "system", "content": "Be brief."}, *turns,
                         {"role": "user", "content": "And one more?"}, {"role": "assistant", "content": "One more: yes."}]
            f.write(json.dumps({"messages": turns}) + "\n")
    pairs = folder / "pairs.parquet"
    pq.write_table(pa.table({
        "prompt": [f"Question {i}: how many legs do {i % 7 + 1} spiders have? " + "Think. " * (i % 11) for i in range(120)],
        "completion": [f"{8 * (i % 7 + 1)} legs." + " Each spider has eight." * (i % 5) for i in range(120)],
    }), pairs)
    shards = folder / "shards"
    shards.mkdir(exist_ok=True)
    for k in range(3):
        pq.write_table(pa.table({"text": [f"Shard {k}, document {i}. " + "Packing fills rows. " * ((7 * i + k) % 40)
                                          for i in range(150)]}), shards / f"part-{k}.parquet")
    return {"chats": chats, "pairs": pairs, "shards": shards}
