"""AA-LCR's two prompts, as NeMo-Skills (NVIDIA-NeMo/Skills at 8b18f39) builds them; AA-LCR has no
code repository of its own, and NeMo-Skills' is the implementation the other harnesses cite.

QUESTION: nemo_skills/dataset/aalcr/prepare.py's prompt_template, and DOCUMENT its construct_prompt's
wrapping of each released document (numbered from 1, joined by a blank line). NeMo-Skills sends the
filled prompt as the one user turn (prompt config generic/default: user "{question}", no system).

JUDGE: nemo_skills/prompt/config/judge/aalcr.yaml's user turn (the "equality checker" of AA-LCR's
dataset card), a str.format template; NeMo-Skills fills {question} with the prepared entry's
"question" field, which prepare.py has replaced by the whole filled QUESTION prompt (documents
included), {expected_answer} with the released answer and {generation} with the model's output.
benchmarks/aa_lcr_parity.py compares both with the reference's, byte for byte.
"""

QUESTION = """BEGIN INPUT DOCUMENTS

{documents_text}

END INPUT DOCUMENTS

Answer the following question using the input documents provided above.

START QUESTION

{question}

END QUESTION
"""

DOCUMENT = "BEGIN DOCUMENT {n}:\n{doc}\nEND DOCUMENT {n}"

JUDGE = (
    "Assess whether the following CANDIDATE ANSWER is CORRECT or INCORRECT. For the CANDIDATE ANSWER to be "
    "correct, it must be consistent with the OFFICIAL ANSWER.\n"
    "\n"
    "The question, for reference only: {question}\n"
    "The OFFICIAL ANSWER: {expected_answer}\n"
    "CANDIDATE ANSWER TO ASSESS: {generation}\n"
    "\n"
    "Reply only with CORRECT or INCORRECT."
)

SOURCE = "NVIDIA-NeMo/Skills@8b18f39 nemo_skills/dataset/aalcr/prepare.py, prompt/config/judge/aalcr.yaml"


def question_prompt(documents: list[str], question: str) -> str:
    """The prompt the model reads: every document of the set, then the question."""
    documents_text = "\n\n".join(DOCUMENT.format(n=i + 1, doc=doc) for i, doc in enumerate(documents))
    return QUESTION.format(documents_text=documents_text, question=question)


def judge_prompt(question_text: str, expected_answer: str, generation: str) -> str:
    """The judge's user turn; `question_text` is what NeMo-Skills puts there: the whole question prompt."""
    return JUDGE.format(question=question_text, expected_answer=expected_answer, generation=generation)
