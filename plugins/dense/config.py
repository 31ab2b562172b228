"""How each published dense retriever was run: data of the method, on every field of which the
published numbers depend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

ALL_TASKS = "*"  # instruction key meaning "every task"
PLACEHOLDER = "{text}"  # stands for a query's or document's own text where a configuration's inputs are shown


@dataclass(frozen=True)
class DenseConfig:
    """One published dense retriever. Instructions are keyed by the upstream code's dataset keys
    (``TaskSpec.key``) and prepended exactly as given, spaces and newlines included."""

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
    special_tokens: str = ""                   # "": as the loaded tokenizer adds them; "tokenizer.json": exactly
                                               # as the checkpoint's tokenizer.json post-processor adds them (what
                                               # transformers 4.x applied to a Qwen2 fast tokenizer, whatever
                                               # add_eos_token its tokenizer_config.json says)
    cast_module: bool = False                  # the whole module cast to ``dtype``, buffers too (FlagEmbedding's
                                               # model.half(): RoPE's inv_freq in fp16), not only the weights
    truncate_text: bool = False                # Diver: the text cut to the limit in tokens without special tokens,
                                               # decoded back to text and tokenized again with them (its
                                               # truncate_text before vLLM): special tokens do not count
    training_overlap: tuple[dict[str, str], ...] = ()  # training data overlapping a task's source (reported notes)
    drop_identical_ids: bool = True            # the option's default: BEIR, R2MED's evaluator, dropped a document
                                               # whose id is the query's; FlagEmbedding's evaluator kept it
    published: str = ""                        # the published row this reproduces (a leaderboard row's name)
    evaluated_by: str = "R2MED"                # whose published run (or code) the configuration follows
    reference: str = ""                        # model card or paper
    notes: str = ""                            # quirks of the published run worth knowing

    def query_instruction(self, key: str | None) -> str:
        return _lookup(self.query_instructions, key)

    def doc_instruction(self, key: str | None) -> str:
        return _lookup(self.doc_instructions, key)

    def generated_instruction(self, key: str | None) -> str:
        """A rewriter's generated document (GAR) is encoded as a query, with the query instruction
        only where the published wrapper gave it one."""
        return self.query_instruction(key) if self.instruct_generated_docs else ""

    def inputs(self, key: str | None) -> dict[str, str]:
        """The text a task's query, document and generated document become before tokenization,
        ``{text}`` standing for their own text."""
        parts = {"query": self.query_instruction(key), "document": self.doc_instruction(key),
                 "generated": self.generated_instruction(key)}
        if self.backend in ("openai", "voyage"):
            from .api import published_input

            return {kind: published_input(instruction + PLACEHOLDER, None, None) for kind, instruction in parts.items()}
        return {kind: instruction + PLACEHOLDER for kind, instruction in parts.items()}

    def input_notes(self) -> list[str]:
        """How the inputs shown by :meth:`inputs` reach the model."""
        how = {
            "transformers": "the instruction is prepended to the text",
            "instructor": "the instruction is the sentence-transformers prompt: prepended, left out of the mean pooling",
            "nvembed": "the instruction is the model's instruction= argument: prepended, left out of the pooling",
            "gritlm": "the instruction is gritlm's instruction= argument: prepended, left out of the mean pooling",
        }
        if self.backend in ("openai", "voyage"):
            return [f"each text is cut to {self.doc_max_length} tokens, then newlines become spaces and the text is "
                    "JSON-quoted (the quotes are sent too)"]
        notes = [how[self.backend],
                 f"queries are cut to {self.query_max_length} tokens, documents to {self.doc_max_length} "
                 "(the instruction counts)"]
        if self.truncate_text:
            notes.append("the cut is made on the text: its tokens without special tokens, decoded back to text, "
                         "then tokenized again with them (special tokens do not count)")
        if self.append_eos:
            notes.append("cut to the limit minus one token, then the tokenizer's EOS appended")
        elif self.special_tokens == "tokenizer.json":
            notes.append("special tokens exactly as the checkpoint's tokenizer.json adds them (its post-processor)")
        elif self.backend == "transformers":
            notes.append("special tokens as the tokenizer adds them")
        if self.doc_as_pair:
            notes.append("documents are tokenized as the pair ('', text)")
        notes.append("generated: a rewriter's generated document, encoded as a query "
                     + ("with the query instruction" if self.instruct_generated_docs else "without instruction"))
        return notes


def _lookup(table: Mapping[str, str], key: str | None) -> str:
    if key is not None and key in table:
        return table[key]
    return table.get(ALL_TASKS, "")
