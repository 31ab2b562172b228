"""Search-o1's loop (``r2med_plugins.gar.search_o1``) against its reference, sunnynexus/Search-o1
at commit 6ced48f: the reference's own code, transcribed verbatim below (each block names its file
and lines; ``test_transcriptions_match_the_fetched_repository`` checks them against a fetched copy of
the repository when there is one, and skips otherwise), is run here with stand-ins for vLLM, the
tokenizer, Bing and the page fetcher, and every request the module sends, its output and its
trajectory are compared with what that code builds. Then the loop end to end through the CLI on
the sample task: results, trajectories, a rerun that sends nothing, and a run that fails in the
middle and resends no finished turn."""

from __future__ import annotations

import json
import re
import shutil
import string
import subprocess
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional, Tuple

import jinja2
import pytest
from conftest import SAMPLE, read_jsonl, read_ranking, tokenizer_with_template

from r2med_plugins.gar import search_o1
from r2med_tasks.llm import ChatClient
from r2med_tasks.llm.cache import GenerationCache, continue_cached
from r2med_tasks.components.searcher import Hit

COMMIT = "6ced48f"
MIRROR = Path(__file__).resolve().parents[2] / ".mirror" / "sunnynexus+Search-o1" / "repo"

# ================================================================================================
# The reference, verbatim (sunnynexus/Search-o1 @ 6ced48f, scripts/...). Do not reformat.
# ================================================================================================

# scripts/prompts.py L69-129 @ 6ced48f: get_webpage_to_reasonchain_instruction, get_singleqa_search_o1_instruction
PROMPTS_PY = r'''def get_webpage_to_reasonchain_instruction(prev_reasoning, search_query, document):
    return f"""**Task Instruction:**

You are tasked with reading and analyzing web pages based on the following inputs: **Previous Reasoning Steps**, **Current Search Query**, and **Searched Web Pages**. Your objective is to extract relevant and helpful information for **Current Search Query** from the **Searched Web Pages** and seamlessly integrate this information into the **Previous Reasoning Steps** to continue reasoning for the original question.

**Guidelines:**

1. **Analyze the Searched Web Pages:**
- Carefully review the content of each searched web page.
- Identify factual information that is relevant to the **Current Search Query** and can aid in the reasoning process for the original question.

2. **Extract Relevant Information:**
- Select the information from the Searched Web Pages that directly contributes to advancing the **Previous Reasoning Steps**.
- Ensure that the extracted information is accurate and relevant.

3. **Output Format:**
- **If the web pages provide helpful information for current search query:** Present the information beginning with `**Final Information**` as shown below.
**Final Information**

[Helpful information]

- **If the web pages do not provide any helpful information for current search query:** Output the following text.

**Final Information**

No helpful information found.

**Inputs:**
- **Previous Reasoning Steps:**  
{prev_reasoning}

- **Current Search Query:**  
{search_query}

- **Searched Web Pages:**  
{document}

Now you should analyze each web page and find helpful information based on the current search query "{search_query}" and previous reasoning steps.
"""


def get_singleqa_search_o1_instruction(MAX_SEARCH_LIMIT):
    return (
        "You are a reasoning assistant with the ability to perform web searches to help "
        "you answer the user's question accurately. You have special tools:\n\n"
        "- To perform a search: write <|begin_search_query|> your query here <|end_search_query|>.\n"
        "Then, the system will search and analyze relevant web pages, then provide you with helpful information in the format <|begin_search_result|> ...search results... <|end_search_result|>.\n\n"
        f"You can repeat the search process multiple times if necessary. The maximum number of search attempts is limited to {MAX_SEARCH_LIMIT}.\n\n"
        "Once you have all the information you need, continue your reasoning.\n\n"
        "Example:\n"
        "Question: \"Who got the first Nobel Prize in Physics?\"\n"
        "Assistant thinking steps:\n"
        "- I need to find out who was awarded the first Nobel Prize in Physics.\n\n"
        "Assistant:\n"
        "<|begin_search_query|>first Nobel Prize in Physics winner<|end_search_query|>\n\n"
        "(System returns processed information from relevant web pages)\n\n"
        "Assistant continues reasoning with the new information...\n\n"
        "Remember:\n"
        "- Use <|begin_search_query|> to request a web search and end with <|end_search_query|>.\n"
        "- When done searching, continue your reasoning.\n\n"
    )
'''

# scripts/prompts.py L357-370 @ 6ced48f: get_task_instruction_openqa
OPENQA_PY = r'''def get_task_instruction_openqa(question, model_name=None):
    if model_name == 'qwq':
        user_prompt = (
            'Please answer the following question. '
            'You should provide your final answer in the format \\boxed{YOUR_ANSWER}.\n\n'
            f'Question:\n{question}\n\n'
        )
    else:
        user_prompt = (
            'Please answer the following question. You should think step by step to solve it.\n\n'
            'Provide your final answer in the format \\boxed{YOUR_ANSWER}.\n\n'
            f'Question:\n{question}\n\n'
        )
    return user_prompt
'''

# scripts/evaluate.py L12-43 @ 6ced48f: extract_answer
EXTRACT_ANSWER_PY = r'''def extract_answer(output, mode='gen'):
    extracted_text = ''
    if mode == 'codegen':
        # Extract the code between ```python and ```
        pattern = r'```python\s*(.*?)\s*```'
        matches = re.findall(pattern, output, re.DOTALL | re.IGNORECASE)
        if matches:
            extracted_text = matches[-1].strip()  # Take the last match
    elif mode == 'infogen':
        # Extract content after **Final Information** or **Modified Reasoning Steps**
        pattern_info = "\n**Final Information**"
        pattern_step = "\n**Modified Reasoning Steps**"
        if pattern_info in output:
            extracted_text = output.split(pattern_info)[-1].replace("\n","").strip("```").strip()
        elif pattern_step in output:
            extracted_text = output.split(pattern_step)[-1].strip("```").strip()
        else:
            extracted_text = "No helpful information found."
    else:
        # Existing extraction logic for 'gen' and 'choose' modes
        pattern = r'\\boxed\{(.*)\}'
        matches = re.findall(pattern, output)
        if matches:
            extracted_text = matches[-1]  # Take the last match
            if mode in ['choose', 'qa']:
                # Handle 'choose' mode
                inner_pattern = r'\\text\{(.*)\}'
                inner_matches = re.findall(inner_pattern, extracted_text)
                if inner_matches:
                    extracted_text = inner_matches[-1]  # Take the last match
                extracted_text = extracted_text.strip("()")
    return extracted_text
'''

# scripts/bing_search.py L36-94 @ 6ced48f: remove_punctuation, f1_score, extract_snippet_with_context
SNIPPET_PY = r'''def remove_punctuation(text: str) -> str:
    """Remove punctuation from the text."""
    return text.translate(str.maketrans("", "", string.punctuation))

def f1_score(true_set: set, pred_set: set) -> float:
    """Calculate the F1 score between two sets of words."""
    intersection = len(true_set.intersection(pred_set))
    if not intersection:
        return 0.0
    precision = intersection / float(len(pred_set))
    recall = intersection / float(len(true_set))
    return 2 * (precision * recall) / (precision + recall)

def extract_snippet_with_context(full_text: str, snippet: str, context_chars: int = 2500) -> Tuple[bool, str]:
    """
    Extract the sentence that best matches the snippet and its context from the full text.

    Args:
        full_text (str): The full text extracted from the webpage.
        snippet (str): The snippet to match.
        context_chars (int): Number of characters to include before and after the snippet.

    Returns:
        Tuple[bool, str]: The first element indicates whether extraction was successful, the second element is the extracted context.
    """
    try:
        full_text = full_text[:50000]

        snippet = snippet.lower()
        snippet = remove_punctuation(snippet)
        snippet_words = set(snippet.split())

        best_sentence = None
        best_f1 = 0.2

        # sentences = re.split(r'(?<=[.!?]) +', full_text)  # Split sentences using regex, supporting ., !, ? endings
        sentences = sent_tokenize(full_text)  # Split sentences using nltk's sent_tokenize

        for sentence in sentences:
            key_sentence = sentence.lower()
            key_sentence = remove_punctuation(key_sentence)
            sentence_words = set(key_sentence.split())
            f1 = f1_score(snippet_words, sentence_words)
            if f1 > best_f1:
                best_f1 = f1
                best_sentence = sentence

        if best_sentence:
            para_start = full_text.find(best_sentence)
            para_end = para_start + len(best_sentence)
            start_index = max(0, para_start - context_chars)
            end_index = min(len(full_text), para_end + context_chars)
            context = full_text[start_index:end_index]
            return True, context
        else:
            # If no matching sentence is found, return the first context_chars*2 characters of the full text
            return False, full_text[:context_chars * 2]
    except Exception as e:
        return False, f"Failed to extract snippet context due to {str(e)}"
'''

# scripts/bing_search.py L256-282 @ 6ced48f: extract_relevant_info
RELEVANT_INFO_PY = r'''def extract_relevant_info(search_results):
    """
    Extract relevant information from Bing search results.

    Args:
        search_results (dict): JSON response from the Bing Web Search API.

    Returns:
        list: A list of dictionaries containing the extracted information.
    """
    useful_info = []
    
    if 'webPages' in search_results and 'value' in search_results['webPages']:
        for id, result in enumerate(search_results['webPages']['value']):
            info = {
                'id': id + 1,  # Increment id for easier subsequent operations
                'title': result.get('name', ''),
                'url': result.get('url', ''),
                'site_name': result.get('siteName', ''),
                'date': result.get('datePublished', '').split('T')[0],
                'snippet': result.get('snippet', ''),  # Remove HTML tags
                # Add context content to the information
                'context': ''  # Reserved field to be filled later
            }
            useful_info.append(info)
    
    return useful_info
'''

# scripts/run_search_o1.py L39-43 @ 6ced48f: the special tokens
TOKENS_PY = r'''# Define special tokens
BEGIN_SEARCH_QUERY = "<|begin_search_query|>"
END_SEARCH_QUERY = "<|end_search_query|>"
BEGIN_SEARCH_RESULT = "<|begin_search_result|>"
END_SEARCH_RESULT = "<|end_search_result|>"
'''

# scripts/run_search_o1.py L72-157 @ 6ced48f: the arguments' defaults (inside parse_args)
ARGS_PY = r'''    # Search and document retrieval configuration
    parser.add_argument(
        '--max_search_limit',
        type=int,
        default=10,
        help="Maximum number of searches per question."
    )

    parser.add_argument(
        '--max_turn',
        type=int,
        default=15,
        help="Maximum number of turns."
    )

    parser.add_argument(
        '--top_k',
        type=int,
        default=10,
        help="Maximum number of search documents to return."
    )

    parser.add_argument(
        '--max_doc_len',
        type=int,
        default=3000,
        help="Maximum length of each searched document."
    )

    parser.add_argument(
        '--use_jina',
        type=bool,
        default=True,
        help="Whether to use Jina API for document fetching."
    )

    parser.add_argument(
        '--jina_api_key',
        type=str,
        default='None',
        help="Your Jina API Key to Fetch URL Content."
    )

    # Model configuration
    parser.add_argument(
        '--model_path',
        type=str,
        required=True,
        help="Path to the pre-trained model."
    )

    # Sampling parameters
    parser.add_argument(
        '--temperature',
        type=float,
        default=0.7,
        help="Sampling temperature."
    )

    parser.add_argument(
        '--top_p',
        type=float,
        default=0.8,
        help="Top-p sampling parameter."
    )

    parser.add_argument(
        '--top_k_sampling',
        type=int,
        default=20,
        help="Top-k sampling parameter."
    )

    parser.add_argument(
        '--repetition_penalty',
        type=float,
        default=None,
        help="Repetition penalty. If not set, defaults based on the model."
    )

    parser.add_argument(
        '--max_tokens',
        type=int,
        default=32768,
        help="Maximum number of tokens to generate. If not set, defaults based on the model and dataset."
    )
'''

# scripts/run_search_o1.py L179-212 @ 6ced48f: the settings (inside main)
SETTINGS_PY = r'''    # Extract arguments
    dataset_name = args.dataset_name
    split = args.split
    subset_num = args.subset_num
    MAX_SEARCH_LIMIT = args.max_search_limit
    MAX_TURN = args.max_turn
    top_k = args.top_k
    max_doc_len = args.max_doc_len
    model_path = args.model_path
    temperature = args.temperature
    top_p = args.top_p
    top_k_sampling = args.top_k_sampling
    repetition_penalty = args.repetition_penalty
    max_tokens = args.max_tokens
    bing_subscription_key = args.bing_subscription_key
    bing_endpoint = args.bing_endpoint
    use_jina = args.use_jina
    jina_api_key = args.jina_api_key
    
    # Adjust parameters based on dataset
    if dataset_name in ['nq', 'triviaqa', 'hotpotqa', 'musique', 'bamboogle', '2wiki', 'medmcqa', 'pubhealth']:
        MAX_SEARCH_LIMIT = 5
        if dataset_name in ['hotpotqa', 'musique', 'bamboogle', '2wiki']:
            MAX_SEARCH_LIMIT = 10
            MAX_TURN = 15
        top_k = 10
        max_doc_len = 3000
    
    if args.jina_api_key == 'None':
        jina_api_key = None

    # Set default repetition_penalty if not provided
    if repetition_penalty is None:
        repetition_penalty = 1.05 if 'qwq' in model_path.lower() else 1.0
'''

# scripts/run_search_o1.py L285-417 @ 6ced48f: Reason-in-Documents, the prompts, max_tokens, generation, extract_between (inside main)
PREPARE_PY = r'''    # ---------------------- Batch Generation Function ----------------------
    def generate_webpage_to_reasonchain_batch(
        original_questions: List[str],
        prev_reasonings: List[str],
        search_queries: List[str],
        documents: List[str],
        dataset_name: str,
        batch_output_records: List[Dict],  # New parameter to collect outputs
        max_tokens: int = 32768,
        coherent: bool = False,
    ) -> List[str]:
        user_prompts = [
            get_webpage_to_reasonchain_instruction(r, sq, doc)
            for r, sq, doc in zip(prev_reasonings, search_queries, documents)
        ]

        prompts = [{"role": "user", "content": up} for up in user_prompts]
        prompts = [tokenizer.apply_chat_template([p], tokenize=False, add_generation_prompt=True) for p in prompts]

        output = llm.generate(
            prompts,
            sampling_params=SamplingParams(
                max_tokens=max_tokens,
                temperature=0.7,
                top_p=0.8,
                top_k=20,
                repetition_penalty=1.05,
            )
        )

        raw_outputs = [out.outputs[0].text for out in output]
        extracted_infos = [extract_answer(raw, mode='infogen') for raw in raw_outputs]

        for i, (p, r, e) in enumerate(zip(prompts, raw_outputs, extracted_infos)):
            batch_output_records.append({
                'prompt': p,
                'raw_output': r,
                'extracted_info': e
            })

        return extracted_infos

    # ---------------------- Preparation of Input Prompts ----------------------
    input_list = []
    for item in filtered_data:
        question = item['Question']

        if dataset_name in ['nq', 'triviaqa', 'hotpotqa', 'musique', 'bamboogle', '2wiki']:
            if dataset_name in ['nq', 'triviaqa']:
                instruction = get_singleqa_search_o1_instruction(MAX_SEARCH_LIMIT)
            elif dataset_name in ['hotpotqa', 'musique', 'bamboogle', '2wiki']:
                instruction = get_multiqa_search_o1_instruction(MAX_SEARCH_LIMIT)
            if 'qwq' in model_path.lower():
                user_prompt = get_task_instruction_openqa(question, model_name='qwq')
            else:
                user_prompt = get_task_instruction_openqa(question)

        elif dataset_name in ['math500', 'aime', 'amc']:
            instruction = get_math_search_o1_instruction(MAX_SEARCH_LIMIT)
            if 'qwq' in model_path.lower():
                user_prompt = get_task_instruction_math(question, model_name='qwq')
            else:
                user_prompt = get_task_instruction_math(question)

        elif dataset_name == 'gpqa':
            instruction = get_gpqa_search_o1_instruction(MAX_SEARCH_LIMIT)
            if 'qwq' in model_path.lower():
                user_prompt = get_task_instruction_multi_choice(question, model_name='qwq')
            elif 'llama' in model_path.lower():
                user_prompt = get_task_instruction_multi_choice(question, model_name='llama')
            else:
                user_prompt = get_task_instruction_multi_choice(question)

        elif dataset_name == 'livecode':
            instruction = get_code_search_o1_instruction(MAX_SEARCH_LIMIT)
            question_title = item.get('question_title', '')
            if 'qwq' in model_path.lower():
                user_prompt = get_task_instruction_code(question, question_title=question_title, model_name='qwq')
            else:
                user_prompt = get_task_instruction_code(question)
        else:
            user_prompt = ""  # Default to empty if dataset not matched

        prompt = [{"role": "user", "content": instruction + user_prompt}]
        prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        input_list.append(prompt)

    if subset_num != -1:
        input_list = input_list[:subset_num]
        filtered_data = filtered_data[:subset_num]

    # Initialize active sequences
    active_sequences = [{
        'item': item,
        'prompt': prompt,
        'output': '',
        'finished': False,
        'history': [],
        'search_count': 0,
        'executed_search_queries': set(),
    } for item, prompt in zip(filtered_data, input_list)]

    # ---------------------- Set Max Tokens ----------------------
    if 'qwq' in model_path.lower():
        if dataset_name in ['aime', 'amc', 'livecode']:
            max_tokens = 32768
        else:
            max_tokens = 20480
    else:
        max_tokens = 8192

    # ---------------------- Generation Function ----------------------
    def run_generation(sequences: List[Dict], max_tokens: int) -> List:
        prompts = [s['prompt'] for s in sequences]
        sampling_params = SamplingParams(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k_sampling,
            repetition_penalty=repetition_penalty,
            stop=[END_SEARCH_QUERY, tokenizer.eos_token],
            include_stop_str_in_output=True,
        )
        output_list = llm.generate(prompts, sampling_params=sampling_params)
        return output_list

    # Function to extract text between two tags
    def extract_between(text: str, start_tag: str, end_tag: str) -> Optional[str]:
        pattern = re.escape(start_tag) + r"(.*?)" + re.escape(end_tag)
        matches = re.findall(pattern, text, flags=re.DOTALL)
        if matches:
            return matches[-1].strip()
        return None
'''

# scripts/run_search_o1.py L488-685 @ 6ced48f: the main loop (inside main)
LOOP_PY = r'''    # ---------------------- Initialize Collection Structure ----------------------
    # Initialize a list to collect batch outputs
    batch_output_records = []

    start_time = time.time()
    turn = 0

    # Main loop until all sequences are finished or maximum turns reached
    while True:
        # Identify sequences that need generation
        sequences_needing_generation = [seq for seq in active_sequences if not seq['finished']]

        if sequences_needing_generation:
            turn += 1
            print(f'\n-------------- Turn {turn} --------------')
            print(f"We have {len(sequences_needing_generation)} sequences needing generation...")
            outputs = run_generation(sequences_needing_generation, max_tokens)
            print("Generation completed, processing outputs...")

            # Initialize batch variables
            batch_relevant_info = []
            batch_original_questions = []
            batch_prev_reasonings = []
            batch_search_queries = []
            batch_documents = []
            batch_sequences = []

            # Collect URLs to fetch across all sequences
            all_urls_to_fetch = set()
            url_snippets = {}
            url_sequence_map = {}  # Map URL to list of sequences needing it

            # Process each sequence and collect URLs
            for seq, out in zip(sequences_needing_generation, outputs):
                text = out.outputs[0].text
                seq['history'].append(text)
                # Append generated text to prompt and output
                seq['prompt'] += text
                seq['output'] += text

                # Extract search query
                search_query = extract_between(text, BEGIN_SEARCH_QUERY, END_SEARCH_QUERY)

                # If a search query is present and needs to be executed
                if search_query and seq['output'].rstrip().endswith(END_SEARCH_QUERY):
                    if seq['search_count'] < MAX_SEARCH_LIMIT and search_query not in seq['executed_search_queries']:
                        # Execute search, use cache if available
                        if search_query in search_cache:
                            results = search_cache[search_query]
                            print(f"Using cached search results for query: \"{search_query}\"")
                        else:
                            try:
                                results = bing_web_search(search_query, bing_subscription_key, bing_endpoint, market='en-US', language='en')
                                search_cache[search_query] = results
                                print(f"Executed and cached search for query: \"{search_query}\"")
                            except Exception as e:
                                print(f"Error during search query '{search_query}': {e}")
                                search_cache[search_query] = {}
                                results = {}

                        # Extract relevant information from Bing search results
                        relevant_info = extract_relevant_info(results)[:top_k]
                        seq['relevant_info'] = relevant_info

                        # Extract URLs and snippets
                        urls_to_fetch = [it['url'] for it in relevant_info]
                        snippets = {info['url']: info['snippet'] for info in relevant_info if 'snippet' in info}

                        # Filter URLs that are not cached
                        urls_to_fetch_filtered = [u for u in urls_to_fetch if u not in url_cache]
                        cached_urls = [u for u in urls_to_fetch if u in url_cache]

                        # Store info for all_urls_to_fetch and url_snippets
                        for url in urls_to_fetch_filtered:
                            all_urls_to_fetch.add(url)
                            url_snippets[url] = snippets.get(url, "")

                        all_reasoning_steps = seq['output']
                        all_reasoning_steps = all_reasoning_steps.replace('\n\n', '\n').split("\n")

                        truncated_prev_reasoning = ""
                        for i, step in enumerate(all_reasoning_steps):
                            truncated_prev_reasoning += f"Step {i + 1}: {step}\n\n"

                        prev_steps = truncated_prev_reasoning.split('\n\n')
                        if len(prev_steps) <= 5:
                            truncated_prev_reasoning = '\n\n'.join(prev_steps)
                        else:
                            truncated_prev_reasoning = ''
                            for i, step in enumerate(prev_steps):
                                if i == 0 or i >= len(prev_steps) - 4 or BEGIN_SEARCH_QUERY in step or BEGIN_SEARCH_RESULT in step:
                                    truncated_prev_reasoning += step + '\n\n'
                                else:
                                    if truncated_prev_reasoning[-len('\n\n...\n\n'):] != '\n\n...\n\n':
                                        truncated_prev_reasoning += '...\n\n'
                        truncated_prev_reasoning = truncated_prev_reasoning.strip('\n')

                        # Collect parameters for batch processing
                        batch_relevant_info.append(relevant_info)
                        batch_original_questions.append(seq['item']['Question'])
                        batch_prev_reasonings.append(truncated_prev_reasoning)
                        batch_search_queries.append(search_query)
                        batch_sequences.append(seq)

                        # Update search count and executed queries
                        seq['search_count'] += 1
                        seq['executed_search_queries'].add(search_query)

                    elif seq['search_count'] >= MAX_SEARCH_LIMIT:
                        limit_message = f"\n{BEGIN_SEARCH_RESULT}\nThe maximum search limit is exceeded. You are not allowed to search.\n{END_SEARCH_RESULT}\n"
                        seq['prompt'] += limit_message
                        seq['output'] += limit_message
                        seq['history'].append(limit_message)
                        print(f"Search limit reached for query: \"{search_query}\"")

                    elif search_query in seq['executed_search_queries']:
                        limit_message = f"\n{BEGIN_SEARCH_RESULT}\nYou have searched this query. Please refer to previous results.\n{END_SEARCH_RESULT}\n"
                        seq['prompt'] += limit_message
                        seq['output'] += limit_message
                        seq['history'].append(limit_message)
                        print(f"Repeated search for query: \"{search_query}\"")

                else:
                    # If no search query needs to be executed, mark the sequence as finished
                    seq['finished'] = True
                    print("Sequence marked as complete.")

            # Batch fetch all URLs at once to optimize speed
            if all_urls_to_fetch:
                print(f"Fetching {len(all_urls_to_fetch)} URLs...")
                try:
                    fetched_contents = fetch_page_content(
                        list(all_urls_to_fetch),
                        use_jina=use_jina,
                        jina_api_key=jina_api_key,
                        # snippets=url_snippets  # Do not pass snippets when updating url_cache directly
                    )
                    print(f"Fetched {len(fetched_contents)} URLs successfully.")
                except Exception as e:
                    print(f"Error during batch URL fetching: {e}")
                    fetched_contents = {url: f"Error fetching URL: {e}" for url in all_urls_to_fetch}
                # Update cache with fetched contents
                for url, content in fetched_contents.items():
                    url_cache[url] = content

            # After fetching, prepare formatted documents for batch processing
            for relevant_info in batch_relevant_info:
                formatted_documents = ""
                for i, doc_info in enumerate(relevant_info):
                    url = doc_info['url']
                    raw_context = url_cache.get(url, "")
                    doc_info['snippet'] = doc_info['snippet'].replace('<b>','').replace('</b>','')            
                    success, filtered_context = extract_snippet_with_context(raw_context, doc_info['snippet'], context_chars=max_doc_len)
                    if success:
                        context = filtered_context
                    else:
                        context = raw_context[:max_doc_len*2]

                    doc_info['context'] = context
                    formatted_documents += f"**Web Page {i + 1}:**\n"
                    formatted_documents += json.dumps(doc_info, ensure_ascii=False, indent=2) + "\n"
                    
                batch_documents.append(formatted_documents)

            # After fetching, prepare for batch processing if there are any
            if batch_sequences:
                print(f"Batch processing {len(batch_sequences)} sequences with generate_webpage_to_reasonchain_batch...")
                webpage_analyses = generate_webpage_to_reasonchain_batch(
                    original_questions=batch_original_questions,
                    prev_reasonings=batch_prev_reasonings,
                    search_queries=batch_search_queries,
                    documents=batch_documents,
                    dataset_name=dataset_name,
                    batch_output_records=batch_output_records,  # Pass the collection list
                    max_tokens=max_tokens,
                )
                print("Batch generation completed, assigning outputs to sequences...")

                for seq, analysis in zip(batch_sequences, webpage_analyses):
                    if isinstance(analysis, str):
                        append_text = f"\n\n{BEGIN_SEARCH_RESULT}{analysis}{END_SEARCH_RESULT}\n\n"
                        seq['prompt'] += append_text
                        seq['output'] += append_text
                        seq['history'].append(append_text)
                    else:
                        append_text = replace_recent_steps(seq['output'], analysis)
                        seq['prompt'] += append_text
                        seq['output'] += append_text
                        seq['history'].append(append_text)

        # Check if all sequences are finished
        unfinished = [seq for seq in active_sequences if not seq['finished']]
        if not unfinished:
            break
        else:
            if turn >= MAX_TURN:
                print(f"Maximum number of turns ({MAX_TURN}) reached, stopping.")
                break
'''

TRANSCRIBED = {  # constant: (file under scripts/, first line, last line) at COMMIT
    "PROMPTS_PY": ("prompts.py", 69, 129), "OPENQA_PY": ("prompts.py", 357, 370),
    "EXTRACT_ANSWER_PY": ("evaluate.py", 12, 43), "SNIPPET_PY": ("bing_search.py", 36, 94),
    "RELEVANT_INFO_PY": ("bing_search.py", 256, 282), "TOKENS_PY": ("run_search_o1.py", 39, 43),
    "ARGS_PY": ("run_search_o1.py", 72, 157), "SETTINGS_PY": ("run_search_o1.py", 179, 212),
    "PREPARE_PY": ("run_search_o1.py", 285, 417), "LOOP_PY": ("run_search_o1.py", 488, 685),
}

# ================================================================================================
# The reference, run: stand-ins for argparse, vLLM, the tokenizer, Bing and the page fetcher.
# ================================================================================================
END = "<|end_search_query|>"
EOS = "</s>"
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
# The fields of a web page R2MED's documents lack, as the reference's json.dumps(indent=2) writes them
ABSENT_FIELDS = re.compile(r'^  "(?:title|url|site_name|date|snippet)": .*,\n', re.M)
CORPUS = read_jsonl(SAMPLE / "corpus.jsonl")
QUERIES = read_jsonl(SAMPLE / "query.jsonl")
QWQ = "Qwen/QwQ-32B"


def render(messages) -> str:
    return jinja2.Template(TEMPLATE).render(messages=list(messages), add_generation_prompt=True)


def reference(**names) -> dict:
    """A namespace holding the reference's module-level code and ``names``."""
    ns = {"re": re, "json": json, "string": string, "time": time, "Optional": Optional, "List": List,
          "Dict": Dict, "Tuple": Tuple, "print": lambda *a, **k: None,
          "sent_tokenize": lambda text: re.split(r"(?<=[.!?]) +", text)}  # nltk's (the reference's comment's regex)
    for block in (PROMPTS_PY, OPENQA_PY, EXTRACT_ANSWER_PY, SNIPPET_PY, RELEVANT_INFO_PY, TOKENS_PY):
        exec(block, ns)
    ns.update(names)
    return ns


def lines_of(block: str, first: str, last: str) -> str:
    """The lines of ``block`` from the one holding ``first`` to the next holding ``last``, dedented."""
    lines = block.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if first in line)
    end = next(i for i in range(start, len(lines)) if last in lines[i])
    return textwrap.dedent("".join(lines[start:end + 1]))


class Parser:
    """argparse's stand-in: the defaults of the arguments added."""

    def __init__(self) -> None:
        self.defaults: dict = {}

    def add_argument(self, name, **kw) -> None:
        self.defaults[name.lstrip("-")] = kw.get("default")


class SamplingParams:
    def __init__(self, **kw) -> None:
        self.kw = kw


class Tokenizer:
    eos_token = EOS

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        assert tokenize is False and add_generation_prompt is True
        return render(messages)


class LLM:
    """vLLM's stand-in: the model writes ``script(prompt)``; the text ends at the first stop string
    (kept with include_stop_str_in_output). ``calls``: (prompt, sampling, text) of each."""

    def __init__(self, script) -> None:
        self.script, self.calls = script, []

    def generate(self, prompts, sampling_params):
        outputs = []
        for prompt in prompts:
            text, params = self.script(prompt), sampling_params.kw
            stops = [(text.find(s), s) for s in params.get("stop") or () if s in text]
            if stops:
                at, stop = min(stops)
                text = text[:at] + (stop if params.get("include_stop_str_in_output") else "")
            self.calls.append((prompt, params, text))
            outputs.append(SimpleNamespace(outputs=[SimpleNamespace(text=text)]))
        return outputs


def reference_settings(model: str) -> dict:
    """The reference's settings for an "nq" run (single-hop QA) of ``model``."""
    parser = Parser()
    exec(textwrap.dedent(ARGS_PY), {"parser": parser})
    args = SimpleNamespace(**{**parser.defaults, "dataset_name": "nq", "split": "test", "subset_num": -1,
                              "model_path": model, "bing_subscription_key": "unused", "bing_endpoint": "unused"})
    ns = reference(args=args)
    exec(textwrap.dedent(SETTINGS_PY), ns)
    return ns


def reference_prepared(model: str, question: str = "q", script=lambda prompt: "", **changes) -> dict:
    """The reference's settings (then ``changes``, as if edited there) and its prepared sequence."""
    ns = reference_settings(model)
    ns.update(changes)
    ns.update(tokenizer=Tokenizer(), llm=LLM(script), SamplingParams=SamplingParams,
              filtered_data=[{"Question": question}])
    exec(textwrap.dedent(PREPARE_PY), ns)
    return ns


def reference_run(question: str, model: str, script, find, **changes) -> tuple[dict, list]:
    """The reference's loop on one question; Bing finds ``find(query, 10)`` (their ids as URLs), each
    page's content is the document's text. Returns the sequence and the LLM's calls."""
    ns = reference_prepared(model, question, script, **changes)
    pages = {}

    def bing_web_search(query, subscription_key, endpoint, market='en-US', language='en'):
        hits = find(query, 10)
        pages.update((h.id, h.text) for h in hits)
        return {"webPages": {"value": [{"name": "", "url": h.id, "siteName": "", "datePublished": "", "snippet": ""}
                                       for h in hits]}}

    def fetch_page_content(urls, use_jina=False, jina_api_key=None, snippets=None):
        return {url: pages[url] for url in urls}

    ns.update(search_cache={}, url_cache={}, bing_web_search=bing_web_search, fetch_page_content=fetch_page_content)
    exec(textwrap.dedent(LOOP_PY), ns)
    return ns["active_sequences"][0], ns["llm"].calls


# ================================================================================================
# The text: prompts, messages, truncation, documents, extraction, settings.
# ================================================================================================
def test_prompts_and_messages_are_the_reference_text():
    ns = reference()
    for limit in (5, 2, 10):
        assert search_o1.get_singleqa_search_o1_instruction(limit) == ns["get_singleqa_search_o1_instruction"](limit)
    question = "Why {does} it hurt?\nIt is \\boxed in."
    for name in ("qwq", None):
        assert (search_o1.get_task_instruction_openqa(question, model_name=name)
                == ns["get_task_instruction_openqa"](question, model_name=name))
    args = ("Step 1: a\n\n...\n\nStep 9: b", 'a "query"', "**Web Page 1:**\n{}\n")
    assert (search_o1.get_webpage_to_reasonchain_instruction(*args)
            == ns["get_webpage_to_reasonchain_instruction"](*args))
    for name in ("BEGIN_SEARCH_QUERY", "END_SEARCH_QUERY", "BEGIN_SEARCH_RESULT", "END_SEARCH_RESULT"):
        assert getattr(search_o1, name) == ns[name]
    # the messages, each the reference's line run
    run = {}
    for marker, ours in (("The maximum search limit", search_o1.limit_message()),
                         ("You have searched this query", search_o1.repeated_message()),
                         ('append_text = f"', search_o1.search_result("Found it.")),
                         ('f"**Web Page', search_o1.web_page_header(0))):
        line = lines_of(LOOP_PY, marker, marker)
        names = reference(analysis="Found it.", i=0, formatted_documents="")
        exec(line, names)
        run[marker] = names.get("limit_message", names.get("append_text", names.get("formatted_documents")))
        assert run[marker] == ours
    # written out, as the reference writes them
    assert search_o1.limit_message() == ("\n<|begin_search_result|>\nThe maximum search limit is exceeded. You are not "
                                         "allowed to search.\n<|end_search_result|>\n")
    assert search_o1.repeated_message() == ("\n<|begin_search_result|>\nYou have searched this query. Please refer to "
                                            "previous results.\n<|end_search_result|>\n")
    assert search_o1.search_result("x") == "\n\n<|begin_search_result|>x<|end_search_result|>\n\n"
    # the run's identity covers every template
    for template in (ns["get_singleqa_search_o1_instruction"]("{MAX_SEARCH_LIMIT}"),
                     ns["get_task_instruction_openqa"]("{question}", model_name="qwq"),
                     ns["get_task_instruction_openqa"]("{question}"),
                     ns["get_webpage_to_reasonchain_instruction"]("{prev_reasoning}", "{search_query}", "{document}"),
                     *run.values()):
        assert template.replace("Found it.", "{analysis}").replace("Page 1:", "Page {i + 1}:") in search_o1.PROMPTS


@pytest.mark.parametrize("model", [QWQ, "qwq-32b", "Qwen/Qwen3-32B", "Qwen2.5-7B-Instruct"])
def test_prompt_defaults_and_sampling_are_the_reference_s(model):
    """The single-hop QA run ("nq") of the reference: its prompt, limits and both requests' sampling."""
    question = QUERIES[0]["text"]
    ns = reference_prepared(model, question)
    qwq = "qwq" in model.lower()
    assert ns["input_list"] == [render([{"role": "user", "content": search_o1.task_prompt(question, model, 5)}])]
    assert ("You should think step by step" in ns["input_list"][0]) is not qwq
    defaults = search_o1.defaults(model)
    assert {k: defaults[k] for k in ("max_turns", "search_limit", "docs")} == {
        "max_turns": ns["MAX_TURN"], "search_limit": ns["MAX_SEARCH_LIMIT"], "docs": ns["top_k"]}
    assert search_o1.MAX_DOC_LEN == ns["max_doc_len"] == 3000 and defaults["seed"] is None
    ns["run_generation"]([{"prompt": "p"}], ns["max_tokens"])
    ns["generate_webpage_to_reasonchain_batch"](["q"], ["r"], ["s"], ["d"], "nq", [], max_tokens=ns["max_tokens"])
    (_, loop, _), (_, step, _) = ns["llm"].calls
    ours = {k: defaults[k] for k in ("temperature", "top_p", "top_k", "repetition_penalty", "max_tokens")}
    assert loop == {**ours, "stop": [END, EOS], "include_stop_str_in_output": True}
    assert (ours["max_tokens"], ours["repetition_penalty"]) == ((20480, 1.05) if qwq else (8192, 1.0))
    # Reason-in-Documents: fixed sampling, the loop's max_tokens; the same as the loop's for QwQ only
    assert step == {**ours, "repetition_penalty": 1.05}


def test_previous_reasoning_is_truncated_as_the_reference_truncates():
    block = lines_of(LOOP_PY, "all_reasoning_steps = seq['output']", "truncated_prev_reasoning.strip(")
    outputs = ["", "one line", "a\n\nb\nc", "a\nb\n\n\nc\nd\ne", "\n".join(f"line {i}" for i in range(12)),
               "a\nb\n<|begin_search_query|>q<|end_search_query|>\nc\nd\ne\nf\ng",
               "x\n" * 6 + "\n\n<|begin_search_result|>info<|end_search_result|>\n\n" + "y\n" * 6 + END]
    for output in outputs:
        ns = reference(seq={"output": output})
        exec(block, ns)
        assert search_o1.truncate_reasoning(output) == ns["truncated_prev_reasoning"], output
    assert search_o1.truncate_reasoning(outputs[5]) == (
        "Step 1: a\n\n...\n\nStep 3: <|begin_search_query|>q<|end_search_query|>\n\n...\n\n"
        "Step 6: e\n\nStep 7: f\n\nStep 8: g")


def test_documents_are_formatted_as_the_reference_formats_web_pages():
    texts = [d["text"] for d in CORPUS[:3]] + ["Ünïcode \"quoted\"\nline. " * 600,  # one over 6000 characters
                                              "controls \x00\x1f\t\\ / \u2028 a lone \ud800 surrogate", ""]
    block = lines_of(LOOP_PY, "for relevant_info in batch_relevant_info:", "batch_documents.append(")
    pages = [{"id": i + 1, "title": "", "url": f"u{i}", "site_name": "", "date": "", "snippet": "", "context": ""}
             for i in range(len(texts))]  # extract_relevant_info's fields; R2MED's documents have none but the text
    ns = reference(batch_relevant_info=[pages], url_cache={f"u{i}": t for i, t in enumerate(texts)}, max_doc_len=3000,
                   batch_documents=[])
    exec(block, ns)
    ours = search_o1.format_documents(texts)
    assert ours == ABSENT_FIELDS.sub("", ns["batch_documents"][0])
    assert ours.startswith('**Web Page 1:**\n{\n  "id": 1,\n  "context": ' + json.dumps(texts[0]) + "\n}\n**Web Page 2:**")
    assert '"context": ' + json.dumps(texts[3][:6000], ensure_ascii=False) + "\n}\n" in ours  # 2 * max_doc_len


def test_extraction_is_the_reference_s():
    ns = reference()
    analyses = ["Thinking.\n</think>\n\n**Final Information**\n\nBeta-blockers lower mortality.\nIn HFrEF.",
                "**Final Information**\n\nearly\n**Final Information**\n```\nthe last one\n```",
                "**Final Information** at the very start, no newline before it",
                "\n**Modified Reasoning Steps**\nStep 3: changed\n", "nothing", ""]
    for text in analyses:
        assert search_o1.extract_info(text) == ns["extract_answer"](text, mode="infogen"), text
    assert [search_o1.extract_info(t) for t in analyses[:3]] == [
        "Beta-blockers lower mortality.In HFrEF.", "\nthe last one\n".replace("\n", ""),
        "No helpful information found."]
    ns = reference()
    exec(lines_of(PREPARE_PY, "def extract_between(", "return None"), ns)
    for text in ["a<|begin_search_query|> one <|end_search_query|>b<|begin_search_query|>\ntwo\n<|end_search_query|>",
                 "<|begin_search_query|>open", "<|begin_search_query|><|end_search_query|>", ""]:
        args = (text, search_o1.BEGIN_SEARCH_QUERY, END)
        assert search_o1.extract_between(*args) == ns["extract_between"](*args)


def test_transcriptions_match_the_fetched_repository():
    if not (MIRROR / "HEAD").exists():
        pytest.skip(f"sunnynexus/Search-o1 is not fetched at {MIRROR}")
    for name, (file, first, last) in TRANSCRIBED.items():
        shown = subprocess.run(["git", "-C", str(MIRROR), "show", f"{COMMIT}:scripts/{file}"], capture_output=True,
                               text=True)
        if shown.returncode != 0:
            pytest.skip(f"git cannot read {COMMIT}:scripts/{file} ({shown.stderr.strip()[:100]})")
        lines = shown.stdout.splitlines(keepends=True)[first - 1:last]
        assert globals()[name] == "".join(lines), f"{name} differs from scripts/{file} L{first}-{last}"


# ================================================================================================
# The loop against the fake server, in both modes, compared with the reference's run.
# ================================================================================================
SEARCHES = ["insulin deficiency weight loss", "ketone bodies acetone breath", "diabetic ketoacidosis"]
TURNS = [  # what the model writes in each generation (the n-th when its output holds n end tags)
    "Okay, so the question is about type 1 diabetes.\nWeight loss despite eating.\n\nAnd a fruity smell.\n"
    f"First, insulin.\nLet me search.\n\n<|begin_search_query|>{SEARCHES[0]}<|end_search_query|>\n\nnever returned",
    f"\n\nThat helps. Let me check again: <|begin_search_query|> {SEARCHES[0]} <|end_search_query|>",
    f"\n\nNow the breath.\n\n<|begin_search_query|>{SEARCHES[1]}<|end_search_query|>",
    f"\n\nOne more: <|begin_search_query|>{SEARCHES[2]}<|end_search_query|>",
    f"\n\nThe first again: <|begin_search_query|>{SEARCHES[0]}<|end_search_query|>",  # over the limit first (L596)
    "\n\nI have enough.\n</think>\n\nWithout insulin, cells cannot take up glucose: fat is burned into ketones, "
    "and acetone gives the breath its smell.",
]
_QUERY_IN_STEP = re.compile(r"- \*\*Current Search Query:\*\*  \n(.*)\n")


def analysis_of(query: str) -> str:
    return f"I read the pages about {query}.\n</think>\n\n**Final Information**\n\nPages on {query} say:\nsomething.\n"


def model(prompt: str) -> str:
    """The scripted model, given the rendered prompt: Reason-in-Documents, or the next generation."""
    if "**Task Instruction:**" in prompt:
        return analysis_of(_QUERY_IN_STEP.search(prompt).group(1))
    return TURNS[prompt.split("<|assistant|>", 1)[1].count(END)]


def find(query: str, k: int) -> list[Hit]:
    """A search of the sample corpus: most words shared with the query first, then corpus order."""
    words = set(re.findall(r"\w+", query.lower()))
    score = [len(words & set(re.findall(r"\w+", d["text"].lower()))) for d in CORPUS]
    order = sorted(range(len(CORPUS)), key=lambda i: (-score[i], i))[:k]
    return [Hit(CORPUS[i]["id"], CORPUS[i]["text"], float(score[i])) for i in order]


def serve(server, script) -> None:
    """``script(rendered prompt)`` answers: in chat mode the messages are rendered as completions' are."""
    server.serve(QWQ, QWQ)
    server.script = lambda context, partial: script(context if isinstance(context, str) else render(context) + partial)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A tiny tokenizer folder (the installed MiniLM's) whose chat template is TEMPLATE."""
    return tokenizer_with_template(tmp_path_factory.mktemp("tokenizer"), TEMPLATE)


def run_ours(server, template, cache_path, question, settings):
    """``search_o1.run`` as agent.py runs it: turns and chat requests cached, ``find`` the search."""
    defaults = search_o1.defaults(QWQ)
    client = ChatClient(QWQ, base_url=server.url, timeout=5.0, template=template,
                        **{k: defaults[k] for k in ("temperature", "top_p", "top_k", "repetition_penalty", "seed")})
    cache = GenerationCache(cache_path)
    searched = []

    def step_client(sampling):  # as agent.py: a step that samples its own way has a client of its own
        if not sampling:
            return client
        return ChatClient(QWQ, base_url=server.url, timeout=5.0, template=template, seed=defaults["seed"], **sampling)

    def search(text, k):
        searched.append((text, k))
        return find(text, k)

    resolved = {**{k: defaults[k] for k in ("max_turns", "search_limit", "docs", "max_tokens")}, **settings}
    result = search_o1.run(question, task_key="Stack-Medical", model=QWQ, settings=resolved,
                           turn=lambda t, sampling=None: continue_cached(step_client(sampling), cache, [t])[0],
                           search=search)
    return result, searched


SCENARIOS = {  # ours, the reference's edits, the searches expected, how it ends
    "limits": ({"search_limit": 2, "docs": 3}, {"MAX_SEARCH_LIMIT": 2, "top_k": 3},
               [SEARCHES[0], (SEARCHES[0], "repeated"), SEARCHES[1], (SEARCHES[2], "over the limit"),
                (SEARCHES[0], "over the limit")], "answer"),
    "turns": ({"max_turns": 3, "docs": 3}, {"MAX_TURN": 3, "top_k": 3},
              [SEARCHES[0], (SEARCHES[0], "repeated"), SEARCHES[1]], "max_turns"),
}


@pytest.mark.parametrize("mode", ["chat", "completions", "chat, stop not reported"])
def test_the_loop_sends_what_the_reference_builds(chat_server, tokenizer_dir, tmp_path, mode):
    """Two runs (a search limit reached; the turns running out), each compared with the reference's."""
    serve(chat_server, model)
    chat_server.stop_reasons = mode != "chat, stop not reported"
    template = tokenizer_dir if mode == "completions" else None
    for scenario in SCENARIOS:
        check_scenario(chat_server, template, tmp_path / f"{scenario}.jsonl", scenario)


def check_scenario(chat_server, template, cache_path, scenario):
    ours, edits, expected_searches, end = SCENARIOS[scenario]
    question = QUERIES[0]["text"]
    start = chat_server.count
    result, searched = run_ours(chat_server, template, cache_path, question, ours)
    sequence, calls = reference_run(question, QWQ, model, find, **edits)

    # every request: the reference's prompt (its pages without the fields R2MED lacks), its sampling
    sent = chat_server.requests[start:]
    assert len(sent) == len(calls)
    for request, (prompt, params, _) in zip(sent, calls):
        body, expected = request.body, ABSENT_FIELDS.sub("", prompt)
        if template is not None:
            assert request.path == "/v1/completions" and body["prompt"] == expected
        else:
            assert request.path == "/v1/chat/completions"
            continued = body.get("continue_final_message", False)
            messages = body["messages"][:-1] if continued else body["messages"]
            assert [m["role"] for m in body["messages"]] == ["user"] + ["assistant"] * continued
            assert render(messages) + (body["messages"][-1]["content"] if continued else "") == expected
        for name in ("temperature", "top_p", "top_k", "repetition_penalty", "max_tokens"):
            assert body[name] == params[name], name
        assert body.get("stop") == ([END] if params.get("stop") else None)  # the eos: the server's to stop at
    assert sum("**Task Instruction:**" in p for p, _, _ in calls) == len(searched) == 2
    assert ABSENT_FIELDS.search(calls[1][0]) and '"id": 3' in calls[1][0] and '"id": 4' not in calls[1][0]

    # the output, R2MED's query text, the trajectory
    assert result.output == sequence["output"]
    assert result.answer == (sequence["output"].split("</think>", 1)[1].strip() if end == "answer"
                             else sequence["output"])
    trajectory = result.trajectory
    assert [t["text"] for t in trajectory["turns"]] == [text.removesuffix(END) for _, p, text in calls if "stop" in p]
    assert [t["stop"] for t in trajectory["turns"]][:3] == [END if chat_server.stop_reasons else None] * 3
    expected = [{"query": s, "ids": [h.id for h in find(s, 3)], "info": f"Pages on {s} say:something."}
                if isinstance(s, str) else {"query": s[0], "message": s[1]} for s in expected_searches]
    assert [{k: v for k, v in s.items() if k in ("query", "ids", "info", "message")}
            for s in trajectory["searches"]] == expected
    assert searched == [(s, 3) for s in expected_searches if isinstance(s, str)]
    assert trajectory["end"] == end and len(trajectory["turns"]) == (6 if end == "answer" else 3)
    tokens = [t for t in trajectory["turns"]] + [s for s in trajectory["searches"] if "info" in s]
    assert trajectory["tokens"] == {"prompt": sum(t["prompt_tokens"] for t in tokens),
                                    "completion": sum(t["completion_tokens"] for t in tokens)}
    # the reference's messages, written out
    assert ("One more: <|begin_search_query|>diabetic ketoacidosis<|end_search_query|>\n<|begin_search_result|>\n"
            "The maximum search limit is exceeded. You are not allowed to search.\n<|end_search_result|>\n"
            in result.output) is (scenario == "limits")
    assert ("<|end_search_query|>\n<|begin_search_result|>\nYou have searched this query. Please refer to previous "
            "results.\n<|end_search_result|>\n\n\nNow the breath." in result.output)
    assert result.output.startswith(TURNS[0].split(END)[0] + END + "\n\n<|begin_search_result|>Pages on insulin")
    if end == "max_turns":  # the last generation's search still ran and its result is the output's end
        assert result.output.endswith(f"{END}\n\n<|begin_search_result|>Pages on {SEARCHES[1]} say:something."
                                      "<|end_search_result|>\n\n")

    # a second run is answered from the cache
    count = chat_server.count
    again, _ = run_ours(chat_server, template, cache_path, question, ours)
    assert again.output == result.output and chat_server.count == count


def test_an_empty_query_ends_the_loop_as_in_the_reference():
    """``extract_between`` gives "" for an empty query, which the reference takes for no search (L532)."""
    from r2med_tasks.llm.answers import Generation

    written = "Hmm.\n<|begin_search_query|>  <|end_search_query|>"
    sequence, calls = reference_run("q", QWQ, lambda prompt: written, find)
    sent = []

    def turn(request, sampling=None):
        sent.append(request)
        return Generation(written.removesuffix(END), 1, 1, "stop", QWQ, stop=END)

    result = search_o1.run("q", task_key="Stack-Medical", model=QWQ, settings=search_o1.defaults(QWQ), turn=turn,
                           search=None)
    assert result.output == sequence["output"] == written and result.answer == written
    assert len(sent) == len(calls) == 1 and result.trajectory["end"] == "answer" and result.trajectory["searches"] == []


# ================================================================================================
# End to end: the CLI on the sample task.
# ================================================================================================
def sample_model(prompt: str) -> str:
    """One search (the question's first four words), then an answer (its first twelve)."""
    if "**Task Instruction:**" in prompt:
        return f"Reading.\n</think>\n\n**Final Information**\n\nAbout {_QUERY_IN_STEP.search(prompt).group(1)}.\n"
    question = re.search(r"Question:\n(.*)\n\n<\|end\|>", prompt, re.S).group(1)
    if END not in prompt.split("<|assistant|>", 1)[1]:
        return f"Let me look.\n<|begin_search_query|>{' '.join(question.split()[:4])}<|end_search_query|>"
    return f"Done.\n</think>\n\n{answer_of(question)}"


def answer_of(question: str) -> str:
    return " ".join(question.split()[:12]) + " explained."


def run_search_o1(run_cli, tmp_path, server, *extra):
    return run_cli("run", "--plugin", "search-o1", "-o", f"llm={server.url}#{QWQ}", *extra, "--plugin", "bm25",
                   "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")


def test_cli_run_keeps_trajectories_and_a_rerun_sends_nothing(run_cli, evaluate, chat_server, tmp_path):
    serve(chat_server, sample_model)
    code, out, err = run_search_o1(run_cli, tmp_path, chat_server)
    assert code == 0, err
    assert chat_server.count == 3 * len(QUERIES)  # a generation, Reason-in-Documents, a generation each
    (folder,) = {Path(d) for d in json.loads(out)["results_dirs"]}
    assert (folder / "R2MEDSampleRetrieval.json").is_file()
    rows = read_jsonl(folder / "R2MEDSampleRetrieval.trajectories.jsonl")
    assert [r["query_id"] for r in rows] == [q["id"] for q in QUERIES]
    for row, query in zip(rows, QUERIES):
        assert row["query"] == query["text"] and row["answer"] == answer_of(query["text"])
        assert row["output"].endswith("</think>\n\n" + answer_of(query["text"])) and row["end"] == "answer"
        (search,) = row["searches"]
        assert search["query"] == " ".join(query["text"].split()[:4]) and len(search["ids"]) == 10
        assert search["info"] == f"About {search['query']}." and len(row["turns"]) == 2
    for request in chat_server.requests:
        body = request.body
        assert (body["model"], body["temperature"], body["top_p"], body["top_k"], body["repetition_penalty"],
                body["max_tokens"]) == (QWQ, 0.7, 0.8, 20, 1.05, 20480) and "seed" not in body
    # BM25 searched R2MED's query text: the answer alone
    expected = tmp_path / "expected"
    shutil.copytree(SAMPLE, expected / "sample")
    (expected / "sample" / "query.jsonl").write_text("".join(
        json.dumps({**q, "text": answer_of(q["text"])}) + "\n" for q in QUERIES))
    plain = evaluate("bm25", data_dir=expected / "sample", output="ref")
    (ref_folder,) = {Path(d) for d in plain.results_dirs}
    assert read_ranking(folder / "R2MEDSampleRetrieval.trec") == read_ranking(ref_folder / "R2MEDSampleRetrieval.trec")
    # a rerun sends nothing
    again = evaluate("search-o1", "bm25", llm=f"{chat_server.url}#{QWQ}", overwrite=True)
    assert again["sample"].ndcg_at_10 == json.loads(out)["tasks"][0]["ndcg_at_10"]
    assert chat_server.count == 3 * len(QUERIES)
    assert read_jsonl(folder / "R2MEDSampleRetrieval.trajectories.jsonl") == rows


@pytest.mark.parametrize("empty", [QUERIES[:1], QUERIES])
def test_trajectories_that_end_with_no_answer_are_counted(run_cli, chat_server, tmp_path, empty):
    """A query whose trajectory ends with nothing after its thinking has no usable answer (every turn
    of it counted unusable); when no query has one, the stage fails."""
    def model(prompt):
        question = re.search(r"Question:\n(.*)\n\n<\|end\|>", prompt, re.S)
        written = sample_model(prompt)
        if question and any(q["text"] == question.group(1) for q in empty) and "</think>" in written:
            return written.split("</think>")[0] + "</think>\n\n"
        return written

    serve(chat_server, model)
    code, out, err = run_search_o1(run_cli, tmp_path, chat_server)
    if len(empty) == len(QUERIES):
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert f"rewriter 'search-o1' (from r2med) could not use any of the {3 * len(QUERIES)} LLM answers" in err
        return
    assert code == 0, err
    assert "could not use 3 of 30 LLM answers, for 1 queries" in err
    assert json.loads(out)["tasks"][0]["llm_answers"] == {"rewriter": {"answers": 30, "unusable": 3}}


def test_cli_run_that_fails_midway_resends_no_finished_turn(run_cli, evaluate, chat_server, tmp_path):
    serve(chat_server, sample_model)
    chat_server.fail_after(11, "500")  # the server dies after 11 of the 30 answers
    code, _, err = run_search_o1(run_cli, tmp_path, chat_server)
    assert code == 2 and "failed" in err and "Traceback" not in err
    answered = [json.dumps(r.body, sort_keys=True) for r in chat_server.requests[:11]]
    sent = chat_server.count
    chat_server.recover()
    resumed = evaluate("search-o1", "bm25", llm=f"{chat_server.url}#{QWQ}")  # the same run, output and cache
    assert resumed["sample"].status == "computed"
    resent = [json.dumps(r.body, sort_keys=True) for r in chat_server.requests[sent:]]
    assert len(resent) == 3 * len(QUERIES) - 11 and not set(resent) & set(answered)
    assert len(set(resent) | set(answered)) == 3 * len(QUERIES)
