"""HELMET's prompt strings, byte for byte from princeton-nlp/HELMET at 4526dfb (data.py).

Each HELMET prompt is `user_template + joiner + system_template`; here the user part is the
sample's input and "joiner + system template" its answer prefix, so --no-answer-prefix / --chat
send the user part alone, as HELMET's chat runs do.
"""

from __future__ import annotations

# data.load_json_kv (from lost-in-the-middle's kv_retrieval prompt)
JSON_KV_USER = "{context}\n\nExtract the value corresponding to the specified key in the JSON object below.\n\n{demos}Key: {question}"
JSON_KV_SYSTEM = "Corresponding value:"
JSON_KV_DEMO = "Key: {key}\nCorresponding value:{value}"

# data.load_ruler: niah_mv / niah_mq and the other niah tasks
RULER_NIAH_MULTI_SYSTEM = "The special magic {type_needle_v} for {query} mentioned in the provided text are"
RULER_NIAH_SYSTEM = "The special magic {type_needle_v} for {query} mentioned in the provided text is"

# data.load_qa (RAG: NQ, TriviaQA, HotpotQA, PopQA)
QA_USER = (
    "Use the given documents to write a concise and short answer to the question. Write your answer in the "
    "following format:\nAnswer: [answer]\n\n{demos}{context}\n\nQuestion: {question}"
)
QA_SYSTEM = "Answer:"
QA_DEMO = "{documents}\n\nQuestion: {question}\nAnswer: {answer}"
QA_PASSAGE = "Document (Title: {title}): {text}"

# data.load_msmarco_rerank ("relelvant" is the reference's spelling)
RERANK_USER = (
    "You are provided with a list of documents, each indicated by their ID. Rank each document based on their "
    "relevance to the question in descending order from most relelvant to least relevant texts. Include all "
    "documents in the rankings. Write your answer using the unique IDs, with the following format:\nRanking: "
    "ID3 > ID1 > ID2\n\n{demos}{context}\n\nQuery: {question}"
)
RERANK_SYSTEM = "Ranking:"
RERANK_PASSAGE_TITLE = "[ID: {id}] Document (Title: {title}): {text}"
RERANK_PASSAGE = "[ID: {id}] Document: {text}"

# data.load_alce (instruction, demo and document formats come from HELMET's prompts/*.json)
ALCE_USER = "{demo_text}{instruction}\n\nQuestion: {question}\n\n{context}"
ALCE_SYSTEM = "Answer:"

# data.load_narrativeqa / load_multi_lexsum / load_infbench
NARRATIVEQA_USER = (
    "You are given a story, which can be either a novel or a movie script, and a question. Answer the question "
    "as concisely as you can, using a single phrase if possible.\n\n{demo}{context}\n\nQuestion: {question}"
)
NARRATIVEQA_SYSTEM = "Answer:"
MULTI_LEXSUM_USER = (
    "You are given the legal documents in a civil rights lawsuit, and you are tasked to summarize the case. "
    "Write a concise summary of one paragraph (200 to 250 words). The summary should contain a short "
    "description of the background, the parties involved, and the outcomes of the case.\n\n{demo}Legal "
    "documents:\n{context}\n\nNow please summarize the case."
)
MULTI_LEXSUM_SYSTEM = "Summary:"
TRUNCATION_POSTFIX = " ... [the rest of the text is omitted]"  # data.truncate_llama2

# data.load_ruler's user templates (from RULER's constants.py): niah_mv / niah_mq, the other niah tasks
RULER_NIAH_MULTI_USER = (
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. I will "
    "quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic {type_needle_v} "
    "for {query} mentioned in the provided text?"
)
RULER_NIAH_USER = (
    "A special magic {type_needle_v} is hidden within the following text. Make sure to memorize it. I will quiz "
    "you about the {type_needle_v} afterwards.\n{context}\nWhat is the special magic {type_needle_v} for {query} "
    "mentioned in the provided text?"
)
