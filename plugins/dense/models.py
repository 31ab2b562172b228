"""The published dense retrievers of the R2MED leaderboard, each as the original code ran it.

Sources (R2MED/R2MED on GitHub):

* ``src/instrcution.py`` (sic): the instruction tables ``inst_q``, ``inst_d``, ``e5_q``, ``bmr_q``,
  ``grit``, ``nv``, ``query_instruction``, ``doc_instruction``.
* ``src/utils.py``: the wrappers ``FlagDRESModel``, ``InstructorModel``, ``BiEncoderModel``,
  ``HighScaleModel``, ``GritModel``, ``NVEmbedModel``, ``RetrievalOPENAI`` (pooling, normalisation,
  padding, EOS, dtype, API truncation).
* ``src/eval_bench.py`` @45cbac5: ``model_path_dict`` and the per-model constructor calls, looping
  over the internal dataset keys (``src/eval_retrieval.py::init_model`` @62b7074 makes the same
  calls). Both override the query (and, for Instructor, document) instruction before each task.

The instruction tables are keyed by the internal dataset keys (``TaskSpec.key``): the released
``eval_retrieval.py`` indexes them with the hub names, which raises KeyError, so these tables
reproduce the intended mapping.

Two more configurations follow the ReasonEmbed authors' evaluation (arXiv 2510.08252, run through
FlagEmbedding): ``reason-embed`` and ``qwen3-embedding-8b``; four more follow AQ-MedAI/Diver's own
code: ``diver-retriever-4b``, ``-4b-1020``, ``-1b7`` and ``-0b6``. Plain data: importing this module
loads no model library.
"""

from __future__ import annotations

from .config import ALL_TASKS, DenseConfig

__all__ = [
    "BGE_Q",
    "BMR_D",
    "BMR_Q",
    "DENSE_MODELS",
    "DIVER_D",
    "DIVER_Q",
    "E5_Q",
    "GRIT_D",
    "GRIT_Q",
    "INST_D",
    "INST_Q",
    "NV_D",
    "NV_Q",
    "REASON_EMBED_Q",
]

# ---------------------------------------------------------------------------------------------
# Instruction tables, copied character for character from R2MED/R2MED src/instrcution.py
# (commit 45cbac5; key order as there). e5, sfr and nvembed share the one E5_Q dict, as upstream.
# ---------------------------------------------------------------------------------------------

# src/instrcution.py: inst_q  (query_instruction["inst-l"] and ["inst-xl"])
INST_Q = {
    "Stack-Biology": "Represent the Biology post for retrieving relevant paragraphs: ",
    "Stack-Medical": "Represent the Medical Science post for retrieving relevant paragraphs: ",
    "Stack-Bioinformatics": "Represent the Bioinformatics post for retrieving relevant paragraphs: ",
    "MedXpertQA-Exam": "Represent the Medical Exam for retrieving relevant paragraphs that help answer the exam: ",
    "MedQA-Diag": "Represent the Medical Exam for retrieving relevant paragraphs that help answer the exam: ",
    "PMC-Treat": "Represent the Clinical Case for retrieving relevant paragraphs that help answer the case: ",
    "PMCPatients": "Represent the Clinical Case for retrieving similar cases that help diagnose the case: ",
    "IIYiPatients-EN": "Represent the Clinical Case for retrieving similar cases that help diagnose the case: ",
}

# src/instrcution.py: inst_d  (doc_instruction["inst-l"] and ["inst-xl"])
INST_D = {
    "Stack-Biology": "Represent the Biology paragraph for retrieval: ",
    "Stack-Medical": "Represent the Medical Science paragraph for retrieval: ",
    "Stack-Bioinformatics": "Represent the Bioinformatics paragraph for retrieval: ",
    "MedXpertQA-Exam": "Represent the Medical paragraph for retrieval: ",
    "MedQA-Diag": "Represent the Medical paragraph for retrieval: ",
    "PMC-Treat": "Represent the Medical paragraph for retrieval: ",
    "PMCPatients": "Represent the Clinical Case for retrieval: ",
    "IIYiPatients-EN": "Represent the Clinical Case for retrieval: ",
}

# src/instrcution.py: e5_q  (query_instruction["e5"] and ["sfr"]; also "nv", see NV_Q)
E5_Q = {
    "Stack-Biology": "Instruct: Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
    "Stack-Medical": "Instruct: Given a Medical Science post, retrieve relevant passages that help answer the post\nQuery: ",
    "Stack-Bioinformatics": "Instruct: Given a Bioinformatics post, retrieve relevant passages that help answer the post\nQuery: ",
    "MedXpertQA-Exam": "Instruct: Given a Medical Exam, retrieve relevant passages that help answer the exam\nQuery: ",
    "MedQA-Diag": "Instruct: Given a Medical Exam, retrieve relevant passages that help answer the exam\nQuery: ",
    "PMC-Treat": "Instruct: Given a Clinical Case, retrieve relevant passages that help answer the case\nQuery: ",
    "PMCPatients": "Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: ",
    "IIYiPatients-EN": "Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: ",
}

# src/instrcution.py: bmr_q = {k: v.removeprefix("Instruct: ") for k, v in e5_q.items()}
# (query_instruction["bmr-410m"|"bmr-2b"|"bmr-7b"]); its extra "BEIR_NFCorpus" entry is not R2MED.
BMR_Q = {k: v.removeprefix("Instruct: ") for k, v in E5_Q.items()}

# src/instrcution.py: grit  (query_instruction["grit"]); GritLM's "<|user|>\n...\n<|embed|>\n" template
# around the e5 wording without "Instruct: " and "\nQuery: ".
GRIT_Q = {
    "Stack-Biology": "<|user|>\nGiven a Biology post, retrieve relevant passages that help answer the post\n<|embed|>\n",
    "Stack-Medical": "<|user|>\nGiven a Medical Science post, retrieve relevant passages that help answer the post\n<|embed|>\n",
    "Stack-Bioinformatics": "<|user|>\nGiven a Bioinformatics post, retrieve relevant passages that help answer the post\n<|embed|>\n",
    "MedXpertQA-Exam": "<|user|>\nGiven a Medical Exam, retrieve relevant passages that help answer the exam\n<|embed|>\n",
    "MedQA-Diag": "<|user|>\nGiven a Medical Exam, retrieve relevant passages that help answer the exam\n<|embed|>\n",
    "PMC-Treat": "<|user|>\nGiven a Clinical Case, retrieve relevant passages that help answer the case\n<|embed|>\n",
    "PMCPatients": "<|user|>\nGiven a Clinical Case, retrieve similar cases that help diagnose the case\n<|embed|>\n",
    "IIYiPatients-EN": "<|user|>\nGiven a Clinical Case, retrieve similar cases that help diagnose the case\n<|embed|>\n",
}

# src/instrcution.py: nv = e5_q  (the same object; query_instruction["nv"])
NV_Q = E5_Q

# src/instrcution.py: query_instruction["bge"], one string for every task
BGE_Q = "Represent this sentence for searching relevant passages: "

# src/instrcution.py: doc_instruction["bmr-410m"|"bmr-2b"|"bmr-7b"], ["grit"], ["nv"]
BMR_D = "Represent this passage\npassage: "
GRIT_D = "<|embed|>\n"
NV_D = ""

# ReasonEmbed's R2MED instructions: VectorSpaceLab/agentic-search @ b2f2e40,
# ReasonEmbed/evaluation_r2med/code/prompts.py (``R2MEDInstructions``, keyed there by the hub names;
# here by the internal keys, Biology = Stack-Biology, ...), character for character, each ending
# with a period. runner.py sets the dataset's instruction as FlagEmbedding's
# query_instruction_for_retrieval (--use_special_instructions True) and the scripts pass
# --query_instruction_format_for_retrieval 'Instruct: {}\nQuery: {}' (FlagEmbedding turns the
# two characters backslash-n into a newline), so a query becomes "Instruct: {instruction}\nQuery: {query}".
_REASON_EMBED_INSTRUCTIONS = {
    "Stack-Biology": "Given a Biology post, retrieve relevant passages that help answer the post.",
    "Stack-Medical": "Given a Medical Science post, retrieve relevant passages that help answer the post.",
    "Stack-Bioinformatics": "Given a Bioinformatics post, retrieve relevant passages that help answer the post.",
    "MedXpertQA-Exam": "Given a Medical Exam, retrieve relevant passages that help answer the exam.",
    "MedQA-Diag": "Given a Medical Exam, retrieve relevant passages that help answer the exam.",
    "PMC-Treat": "Given a Clinical Case, retrieve relevant passages that help answer the case.",
    "PMCPatients": "Given a Clinical Case, retrieve similar cases that help diagnose the case.",
    "IIYiPatients-EN": "Given a Clinical Case, retrieve similar cases that help diagnose the case.",
}
REASON_EMBED_Q = {k: f"Instruct: {v}\nQuery: " for k, v in _REASON_EMBED_INSTRUCTIONS.items()}

# Common to every published dense run (src/eval_bench.py::retrieval_by_dense): BEIR
# DenseRetrievalExactSearch, cos_sim scoring, top-100, documents whose id equals the query id are
# dropped. The original sets CUDA_VISIBLE_DEVICES=0,1,2,3; wrappers that move the model to one
# device (FlagDRES, Instructor, BiEncoder) then wrap it in DataParallel and multiply batch_size by
# the GPU count (4); HighScale, GritLM and NV-Embed use device_map="auto" and keep batch_size.
_DP_NOTE = (
    "batch_size is the constructor value; with the original's 4 visible GPUs DataParallel multiplied "
    "it by 4. "
)

# ---------------------------------------------------------------------------------------------
# One config per leaderboard model, in the order of the original model_path_dict.
# Constructor arguments: src/eval_bench.py (model_path_dict + per-model branch) = init_model in
# src/eval_retrieval.py; wrapper behaviour: src/utils.py.
# ---------------------------------------------------------------------------------------------

_CONFIGS = (
    DenseConfig(
        name="contriever",
        hf_model="facebook/contriever-msmarco",
        backend="transformers",
        pooling="mean",
        normalize=False,
        query_max_length=512,
        doc_max_length=512,
        dtype="fp32",
        batch_size=512,
        published="Contriever",
        reference="https://huggingface.co/facebook/contriever-msmarco",
        notes=(
            "FlagDRESModel(pooling_method='mean', normalize_embeddings=False), defaults max_length=512, "
            "batch_size=512; no instructions. Scored with cosine although the model's native score is "
            "the dot product. " + _DP_NOTE
        ),
    ),
    DenseConfig(
        name="medcpt",
        hf_model="ncbi/MedCPT-Query-Encoder",
        hf_doc_model="ncbi/MedCPT-Article-Encoder",
        backend="transformers",
        pooling="cls",
        normalize=False,
        query_max_length=512,
        doc_max_length=512,
        dtype="fp32",
        batch_size=512,
        doc_as_pair=True,
        published="MedCPT",
        reference="https://huggingface.co/ncbi/MedCPT-Query-Encoder",
        notes=(
            "BiEncoderModel: CLS (last_hidden_state[:, 0]), never normalised, max_length=512 for both "
            "sides (MedCPT's own card uses 64 for queries), documents tokenized as the pair "
            "('', text) with truncation='longest_first'; no instructions. BUG in the original: "
            "init_model passes model_path_dict['medcpt'][1] (the Article encoder) as BOTH the query "
            "and the document encoder, and the repo's results/ files (avg 7.87) come from that; the "
            "retriever follows it by default (option article_queries=true), article_queries=false "
            "encodes queries with the Query encoder (hf_model). The leaderboard's 9.02 differs on 7 "
            "of 8 datasets; which encoder it used is not known. Cosine scoring although MedCPT's "
            "native score is the dot product. "
            + _DP_NOTE
        ),
    ),
    DenseConfig(
        name="inst-l",
        hf_model="hkunlp/instructor-large",
        backend="instructor",
        pooling="model",
        normalize=True,
        query_max_length=512,
        doc_max_length=512,
        dtype="fp32",
        batch_size=64,
        query_instructions=INST_Q,
        doc_instructions=INST_D,
        instruct_generated_docs=True,
        published="InstructOR-L",
        reference="https://huggingface.co/hkunlp/instructor-large",
        notes=(
            "InstructorModel: SentenceTransformer(model) with set_pooling_include_prompt(False), "
            "encode(texts, prompt=instruction, normalize_embeddings=True). The ST pipeline is "
            "T5 encoder -> mean Pooling over the non-prompt tokens -> Dense -> Normalize. "
            "max_seq_length is left at the model's default (the max_length line is commented out); "
            "512 is the instructor family's sentence_bert_config value, and the prompt counts "
            "against it. The wrapper calls self.model.module.encode, which only exists under "
            "DataParallel (>1 GPU). GAR: generated documents get the query instruction. " + _DP_NOTE
        ),
    ),
    DenseConfig(
        name="inst-xl",
        hf_model="hkunlp/instructor-xl",
        backend="instructor",
        pooling="model",
        normalize=True,
        query_max_length=512,
        doc_max_length=512,
        dtype="fp32",
        batch_size=32,
        query_instructions=INST_Q,
        doc_instructions=INST_D,
        instruct_generated_docs=True,
        published="InstructOR-XL",
        reference="https://huggingface.co/hkunlp/instructor-xl",
        notes=(
            "As inst-l (batch_size=32 instead of 64): SentenceTransformer, prompt excluded from the "
            "mean pooling, then Dense -> Normalize; model-default max_seq_length (512 assumed); "
            "self.model.module.encode needs DataParallel. " + _DP_NOTE
        ),
    ),
    DenseConfig(
        name="bmr-410m",
        hf_model="BMRetriever/BMRetriever-410M",
        backend="transformers",
        pooling="last-bmr",
        normalize=False,
        query_max_length=512,
        doc_max_length=512,
        dtype="fp16",
        batch_size=32,
        query_instructions=BMR_Q,
        doc_instructions={ALL_TASKS: BMR_D},
        append_eos=True,
        autocast=True,
        published="BMRETRIEVER-410M",
        reference="https://huggingface.co/BMRetriever/BMRetriever-410M",
        notes=(
            "FlagDRESModel(encode_mode='BMR', pooling_method='last-bmr', max_length=512, batch_size=32): "
            "tokenize without padding truncated to max_length-1, append eos_token_id, tokenizer.pad, "
            "pool the last non-pad position (masked_fill then last index); the BMR branch never "
            "normalises. pad_token=eos and padding_side='left' are set only when the tokenizer has no "
            "pad token; the pooling handles either side. Weights load in fp32 and the forward runs "
            "under torch.cuda.amp.autocast() (fp16). " + _DP_NOTE
        ),
    ),
    DenseConfig(
        name="bmr-2b",
        hf_model="BMRetriever/BMRetriever-2B",
        backend="transformers",
        pooling="last-bmr",
        normalize=False,
        query_max_length=1024,
        doc_max_length=1024,
        dtype="fp16",
        batch_size=32,
        query_instructions=BMR_Q,
        doc_instructions={ALL_TASKS: BMR_D},
        append_eos=True,
        autocast=True,
        published="BMRetriever-2B",
        reference="https://huggingface.co/BMRetriever/BMRetriever-2B",
        notes=(
            "As bmr-410m with max_length=1024 (FlagDRESModel, batch_size=32): truncate to max-1, "
            "append EOS, 'last-bmr' pooling, no normalisation, fp32 weights under fp16 autocast. "
            "pad=eos/left padding only if the tokenizer lacks a pad token (Gemma's has one). "
            + _DP_NOTE
        ),
    ),
    DenseConfig(
        name="bmr-7b",
        hf_model="BMRetriever/BMRetriever-7B",
        backend="transformers",
        pooling="last-bmr",
        normalize=False,
        query_max_length=2048,
        doc_max_length=2048,
        dtype="fp16",
        batch_size=64,
        query_instructions=BMR_Q,
        doc_instructions={ALL_TASKS: BMR_D},
        append_eos=True,
        autocast=True,
        published="BMRetriever-7B",
        reference="https://huggingface.co/BMRetriever/BMRetriever-7B",
        notes=(
            "HighScaleModel(encode_mode='BMR', pooling_method='last-bmr', max_length=2048, "
            "batch_size=64), AutoModel.from_pretrained(device_map='auto') without torch_dtype (fp32 "
            "weights) and the forward under torch.cuda.amp.autocast() (fp16); truncate to max-1, "
            "append EOS, no normalisation; pad=eos/left padding only if the tokenizer lacks a pad token."
        ),
    ),
    DenseConfig(
        name="bge",
        hf_model="BAAI/bge-large-en-v1.5",
        backend="transformers",
        pooling="cls",
        normalize=True,
        query_max_length=512,
        doc_max_length=512,
        dtype="fp32",
        batch_size=512,
        query_instructions={ALL_TASKS: BGE_Q},
        published="BGE-Large-en-v1.5",
        reference="https://huggingface.co/BAAI/bge-large-en-v1.5",
        notes=(
            "FlagDRESModel(query_instruction_for_retrieval=query_instruction['bge'], "
            "pooling_method='cls', max_length=512), normalize_embeddings default True, batch_size "
            "default 512. bge is not in the per-task override list, so the one instruction serves "
            "every task; documents get none (instrcution.py's per-task 'Represent this Biology post "
            "...' strings belong to query_instruction_bright and are unused). GAR: generated "
            "documents are encoded without the instruction. " + _DP_NOTE
        ),
    ),
    DenseConfig(
        name="e5",
        hf_model="intfloat/e5-mistral-7b-instruct",
        backend="transformers",
        pooling="last",
        normalize=True,
        query_max_length=2048,
        doc_max_length=2048,
        dtype="fp32",
        batch_size=32,
        query_instructions=E5_Q,
        published="E5-mistral-7b-instruct",
        reference="https://huggingface.co/intfloat/e5-mistral-7b-instruct",
        notes=(
            "HighScaleModel(pooling_method='last', max_length=2048, batch_size=32), encode_mode 'Base': "
            "one tokenizer call with padding=True, truncation to 2048, no EOS appended (the model "
            "card appends one; the original does not), padding side left to the tokenizer's default "
            "('last' pooling detects left or right padding), normalised. "
            "AutoModel.from_pretrained(device_map='auto') without torch_dtype: fp32. Documents get no "
            "instruction; GAR generated documents get none either."
        ),
    ),
    DenseConfig(
        name="grit",
        hf_model="GritLM/GritLM-7B",
        backend="gritlm",
        pooling="model",
        normalize=True,
        query_max_length=512,
        doc_max_length=2048,
        dtype="bf16",
        batch_size=64,
        query_instructions=GRIT_Q,
        doc_instructions={ALL_TASKS: GRIT_D},
        instruct_generated_docs=True,
        published="GritLM-7B",
        reference="https://huggingface.co/GritLM/GritLM-7B",
        notes=(
            "GritModel: GritLM(path, torch_dtype='auto', mode='embedding', device_map='auto') -> the "
            "checkpoint's bfloat16; model.encode(texts, instruction=..., batch_size=64, max_length=...) "
            "with the GritModel defaults query_max_length=512 / doc_max_length=2048. The gritlm "
            "package does the rest: right padding, bidirectional attention, mean pooling over the "
            "non-instruction tokens (instruction + text are tokenized together, so the instruction "
            "counts against max_length), normalized=True, embed_eos=''. GAR: generated documents get "
            "the query instruction."
        ),
    ),
    DenseConfig(
        name="sfr",
        hf_model="Salesforce/SFR-Embedding-Mistral",
        backend="transformers",
        pooling="last",
        normalize=True,
        query_max_length=2048,
        doc_max_length=2048,
        dtype="fp32",
        batch_size=32,
        query_instructions=E5_Q,
        published="SFR-Embedding-Mistral",
        reference="https://huggingface.co/Salesforce/SFR-Embedding-Mistral",
        notes=(
            "Same branch as e5 (HighScaleModel, 'last' pooling, max_length=2048, batch_size=32, no EOS "
            "appended, normalised, fp32 weights via device_map='auto' without torch_dtype) and the "
            "same e5_q instructions (query_instruction['sfr'] is e5_q)."
        ),
    ),
    DenseConfig(
        name="nvembed",
        aliases=("nv",),
        hf_model="nvidia/NV-Embed-v2",
        backend="nvembed",
        pooling="model",
        normalize=True,
        query_max_length=4096,
        doc_max_length=4096,
        dtype="fp16",
        batch_size=16,
        query_instructions=NV_Q,
        doc_instructions={ALL_TASKS: NV_D},
        instruct_generated_docs=True,
        published="NV-Embed-v2",
        reference="https://huggingface.co/nvidia/NV-Embed-v2",
        notes=(
            "The original's id is 'nv' (cache dir doc_embs/nv/, results/.../nv/). NVEmbedModel: "
            "AutoModel.from_pretrained(trust_remote_code=True, torch_dtype=float16, device_map='auto'); "
            "model.encode(texts, instruction=..., max_length=4096) per batch of 16, then "
            "torch.nn.functional.normalize. The model's remote code pools (latent attention, then "
            "mean over the non-instruction tokens). Query instructions are e5_q itself (nv = e5_q), "
            "documents get instruction=''. No EOS is appended to the inputs (the model card's "
            "add_eos step is not done). GAR: generated documents get the query instruction."
        ),
    ),
    DenseConfig(
        name="openai",
        hf_model="text-embedding-3-large",
        backend="openai",
        pooling="model",
        normalize=True,
        query_max_length=6000,
        doc_max_length=6000,
        dtype="fp32",
        batch_size=64,
        published="Text-embedding-3-large",
        reference="https://platform.openai.com/docs/guides/embeddings",
        notes=(
            "RetrievalOPENAI(batch_size=64): no instructions; each text is cut to 6000 cl100k_base "
            "tokens (tiktoken), then sent as json.dumps(text.replace('\\n', ' ')) (quoted, escaped); "
            "on an API error every JSON text is re-cut with cl100k to 5500, 5000, ... tokens (at most "
            "4 retries). Default dimensions (3072); the API returns unit-length vectors (the code "
            "does not normalise). Query and document embeddings are cached; GAR reuses the cached "
            "plain-query embeddings and encodes the generated document without instruction. "
            "dtype does not apply (API)."
        ),
    ),
    DenseConfig(
        name="voyage",
        hf_model="voyage-3",
        backend="voyage",
        pooling="model",
        normalize=True,
        query_max_length=16000,
        doc_max_length=16000,
        dtype="fp32",
        batch_size=64,
        published="Voyage-3",
        reference="https://docs.voyageai.com/docs/embeddings",
        notes=(
            "RetrievalOPENAI(batch_size=64) voyage branch: no instructions; each text is cut to 16000 "
            "tokens of the voyage-3 tokenizer (AutoTokenizer './voyageai/voyage-3', i.e. the hub repo "
            "voyageai/voyage-3), then sent as json.dumps(text.replace('\\n', ' ')) with "
            "input_type='query' / 'document'; on an API error the JSON texts are re-cut with the same "
            "tokenizer to 5500, 5000, ... tokens (at most 4 retries). The API returns unit-length 1024-d vectors. Query and document "
            "embeddings are cached. dtype does not apply (API)."
        ),
    ),
)


# ---------------------------------------------------------------------------------------------
# The ReasonEmbed authors' evaluation (arXiv 2510.08252, Table 3): agentic-search @ b2f2e40,
# ReasonEmbed/evaluation_r2med/ (scripts/ours/eval_reason_embed_qwen3_8b.sh,
# scripts/baselines/eval_qwen3_embedding_8b.sh: the same arguments but the model; code/runner.py,
# searcher.py, prompts.py), through FlagEmbedding @ f7cee83 (FlagAutoModel 'decoder-only-base' =
# inference/embedder/decoder_only/base.py::BaseLLMEmbedder; abc/evaluation/ for data, search and
# metrics).
# ---------------------------------------------------------------------------------------------

_FLAG_EMBEDDING_NOTE = (
    "Evaluated with FlagEmbedding's decoder-only embedder (--embedder_model_class decoder-only-base "
    "--pooling_method last_token): AutoTokenizer/AutoModel.from_pretrained without a dtype, then "
    "model.half() on GPU (use_fp16 default True; every floating tensor, RoPE's inv_freq buffer "
    "included, hence cast_module); each text tokenized alone with tokenizer(text, truncation=True, "
    "max_length=512) -- FlagEmbedding appends no EOS itself, the tokenizer's post-processor decides "
    "-- then padded per batch of up to 256 (sorted by token length; the tokenizer's padding side), "
    "last non-padding token pooled (left padding detected as here), L2-normalised in fp16. Queries "
    "'Instruct: {instruction}\\nQuery: {query}' with prompts.py's instruction per dataset; documents "
    "their raw text, no instruction, no title (query_max_length = passage_max_length = 512). Search: "
    "faiss inner product (a GPU index storing fp16, which holds these fp16 vectors exactly), top "
    "2000, ignore_identical_ids False (hence drop_identical_ids=false); the harness keeps the top 100, "
    "which leaves nDCG@10 as it is, and scores cosine over the vectors re-normalised in fp32 "
    "(float-level ties only). Metrics by pytrec_eval over the whole qrels, as here. Data: the hub's "
    "R2MED/<dataset> configs without a revision (October 2025, after Medical-Sciences' 2025-06-05 "
    "update). Not pinned by the authors: the weights' hub revision. When FlagEmbedding reads back the "
    "corpus.jsonl it saved (a later run sharing --dataset_dir), it strips each document's leading and "
    "trailing whitespace; a first run embeds the text as loaded, as here."
)
# FlagEmbedding's evaluation as the ReasonEmbed authors ran it, for both models (_FLAG_EMBEDDING_NOTE)
_FLAG_EMBEDDING_SETUP = dict(
    backend="transformers", pooling="last", normalize=True, query_max_length=512, doc_max_length=512,
    dtype="fp16", batch_size=256, query_instructions=REASON_EMBED_Q, special_tokens="tokenizer.json",
    cast_module=True, drop_identical_ids=False, evaluated_by="the ReasonEmbed authors",
)

_CONFIGS += (
    DenseConfig(
        name="reason-embed",
        hf_model="hanhainebula/reason-embed-qwen3-8b-0928",
        **_FLAG_EMBEDDING_SETUP,
        published="BGE-Reasoner-Embed-0928",
        reference="https://huggingface.co/hanhainebula/reason-embed-qwen3-8b-0928",
        notes=(
            "ReasonEmbed-Qwen3-8B (Redapter, RI-InfoNCE), fine-tuned from Qwen/Qwen3-8B; not "
            "BAAI/bge-reasoner-embed-qwen3-8b-0923 (= reason-embed-basic-qwen3-8b-0928, 42.36). "
            "scripts/ours/eval_reason_embed_qwen3_8b.sh. " + _FLAG_EMBEDDING_NOTE + " EOS: FlagEmbedding's "
            "fine-tuning runner loads the tokenizer with add_eos_token=True and saves it with the "
            "checkpoint, but for a Qwen2 fast tokenizer transformers 4.x (>=4.44.2, FlagEmbedding's floor; "
            "checked in 4.56.2 and 4.57.6) ignores that flag: special tokens come from tokenizer.json's "
            "post-processor alone (Qwen3-8B's: ByteLevel, no EOS), and tokenizer_config.json merely "
            "records add_eos_token. The evaluation therefore fed whatever the shipped tokenizer.json "
            "adds, and special_tokens='tokenizer.json' does exactly that, whatever the installed "
            "transformers makes of add_eos_token (5.24, tested here, ignores it too when tokenizer.json exists). "
            "Not verified: the shipped tokenizer.json itself (no hub access here) -- if it is Qwen3-8B's, "
            "no EOS; ReasonEmbed's training code is unreleased, so whether training saw an EOS is not known."
        ),
    ),
    DenseConfig(
        name="qwen3-embedding-8b",
        hf_model="Qwen/Qwen3-Embedding-8B",
        **_FLAG_EMBEDDING_SETUP,
        published="Qwen3-Embedding-8B",
        reference="https://huggingface.co/Qwen/Qwen3-Embedding-8B",
        notes=(
            "The ReasonEmbed paper's cross-check of its pipeline (Table 3, 34.22): "
            "scripts/baselines/eval_qwen3_embedding_8b.sh, the same arguments as reason-embed's. "
            + _FLAG_EMBEDDING_NOTE + " EOS: Qwen3-Embedding's tokenizer.json post-processor appends "
            "<|endoftext|> (a TemplateProcessing added after release: QwenLM/Qwen3-Embedding#54, "
            "llama.cpp#14252/#14314), so every input ends with it; the text is cut to 511 tokens to "
            "leave it room. The instruction format is the model card's own ('Instruct: ...\\nQuery:')."
        ),
    ),
)

# ---------------------------------------------------------------------------------------------
# Diver-Retriever as AQ-MedAI/Diver's Retriever/ runs it (@ 95b111b: retrievers.py's
# Qwen3EmbeddingModel and retrieval_qwen3_ft_diver, run.py; the R2MED figure, 42.9 for the 4B, is
# the GroupRank paper's, arXiv 2511.11653, Table 2).
# ---------------------------------------------------------------------------------------------

# retrievers.py, Qwen3EmbeddingModel.embed_queries / embed_docs: one wording for every task (run.py's
# per-task instructions reach retrieval_qwen3_ft_diver, which never reads them), no space after the colons
DIVER_Q = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
DIVER_D = "Represent this text:"

_DIVER_NOTE = (
    "retrievers.py, Qwen3EmbeddingModel: vLLM LLM(model, task='embed') with the default dtype ('auto': the "
    "checkpoint's bfloat16), so the model's own pooling (last token, normalised, from its sentence-transformers "
    "config); queries 'Instruct: Given a web search query, retrieve relevant passages that answer the "
    "query\\nQuery:{query}' for every task, documents 'Represent this text:{doc}' (the model card and "
    "config_sentence_transformers.json leave documents bare: the code is followed); each text, instruction "
    "included, cut by truncate_text to 16384 tokens without special tokens and decoded back, then tokenized by "
    "vLLM with the special tokens the checkpoint's tokenizer.json adds. Scored by cosine (sklearn), top 1000; "
    "only BRIGHT's excluded_ids are dropped, never a document sharing the query's id. vLLM schedules its own "
    "batches (the harness's 8 is its own choice); its kernels are not reproduced bit for bit. The code loads "
    "'../models/Diver-Retriever-4B' whatever the size: the other sizes are that code with their weights. "
    "Retriever/ runs BRIGHT only; how the GroupRank paper ran it on R2MED is not published (original queries)."
)
# The model cards' training sets include truehealth/medqa (MedQA), the source of MedQA-Diag.
DIVER_OVERLAP = ({"task": "MedQA-Diag", "dataset": "truehealth/medqa",
                  "source": "the model card's training sets, as embeddings-benchmark/mteb PR #5039 records them",
                  "status": "reported, not independently confirmed"},)
_DIVER_SETUP = dict(
    backend="transformers", pooling="last", normalize=True, query_max_length=16384, doc_max_length=16384,
    dtype="bf16", batch_size=8, query_instructions={ALL_TASKS: DIVER_Q}, doc_instructions={ALL_TASKS: DIVER_D},
    special_tokens="tokenizer.json", truncate_text=True, drop_identical_ids=False,
    evaluated_by="AQ-MedAI/Diver's Retriever/ code", training_overlap=DIVER_OVERLAP,
)

_CONFIGS += (
    DenseConfig(name="diver-retriever-4b", hf_model="AQ-MedAI/Diver-Retriever-4B", **_DIVER_SETUP,
                published="Diver-Retriever-4B", reference="https://huggingface.co/AQ-MedAI/Diver-Retriever-4B",
                notes="Fine-tuned from Qwen/Qwen3-Embedding-4B; the GroupRank paper's first stage (42.9). " + _DIVER_NOTE),
    DenseConfig(name="diver-retriever-4b-1020", hf_model="AQ-MedAI/Diver-Retriever-4B-1020", **_DIVER_SETUP,
                reference="https://huggingface.co/AQ-MedAI/Diver-Retriever-4B-1020",
                notes="The 4B's October 2025 release; no published R2MED figure. " + _DIVER_NOTE),
    DenseConfig(name="diver-retriever-1b7", hf_model="AQ-MedAI/Diver-Retriever-1.7B", **_DIVER_SETUP,
                reference="https://huggingface.co/AQ-MedAI/Diver-Retriever-1.7B",
                notes="Named 1b7 (a dot would split -o NAME.KEY=); no published R2MED figure. " + _DIVER_NOTE),
    DenseConfig(name="diver-retriever-0b6", hf_model="AQ-MedAI/Diver-Retriever-0.6B", **_DIVER_SETUP,
                reference="https://huggingface.co/AQ-MedAI/Diver-Retriever-0.6B",
                notes="Fine-tuned from Qwen/Qwen3-Embedding-0.6B; no published R2MED figure. " + _DIVER_NOTE),
)

DENSE_MODELS: dict[str, DenseConfig] = {c.name: c for c in _CONFIGS}
