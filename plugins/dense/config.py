"""How each published dense retriever was run: model, pooling, normalisation, lengths, instructions.

This is data of the method: the published numbers depend on every field. ``models.py`` holds one
``DenseConfig`` per leaderboard model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

ALL_TASKS = "*"  # instruction key meaning "every task"


@dataclass(frozen=True)
class DenseConfig:
    """One published dense retriever.

    Instructions are keyed by the upstream code's internal dataset keys (``TaskSpec.key``:
    "Stack-Biology", "PMC-Treat", "PMCPatients", ...) or ``ALL_TASKS``; the text is prepended to
    the query (document) exactly as given, including spaces and newlines.
    """

    name: str                                  # retriever id as the original code names it
    hf_model: str                              # the query encoder's hub id (the only encoder for most)
    backend: str                               # "transformers", "instructor", "nvembed", "gritlm", "openai", "voyage"
    pooling: str                               # "mean", "cls", "last", "last-bmr" or "model" (the model's own)
    normalize: bool                            # L2-normalise embeddings before scoring
    query_max_length: int                      # tokens (for APIs: the published truncation)
    doc_max_length: int
    dtype: str                                 # "fp32", "fp16" or "bf16", as published
    batch_size: int
    query_instructions: Mapping[str, str] = field(default_factory=dict)
    doc_instructions: Mapping[str, str] = field(default_factory=dict)
    hf_doc_model: str | None = None            # a separate document encoder (MedCPT's article encoder)
    revision: str | None = None                # pinned hub commit, when the published run's is known
    aliases: tuple[str, ...] = ()
    append_eos: bool = False                   # BMRetriever: truncate to max-1 tokens, then append EOS
    autocast: bool = False                     # fp32 weights, forward under torch autocast in ``dtype`` (GPU)
    padding_side: str = ""                     # "": the tokenizer's default side, as published (BMRetriever's
                                               # recipe pads left when its tokenizer has no pad token);
                                               # "left" / "right": force one
    doc_as_pair: bool = False                  # MedCPT: documents tokenized as the pair ("", text)
    instruct_generated_docs: bool = False      # GAR: generated documents get the query instruction too
    published: str = ""                        # the leaderboard row this reproduces
    reference: str = ""                        # model card or paper
    notes: str = ""                            # quirks of the published run worth knowing

    def query_instruction(self, key: str | None) -> str:
        return _lookup(self.query_instructions, key)

    def doc_instruction(self, key: str | None) -> str:
        return _lookup(self.doc_instructions, key)


def _lookup(table: Mapping[str, str], key: str | None) -> str:
    if key is not None and key in table:
        return table[key]
    return table.get(ALL_TASKS, "")
