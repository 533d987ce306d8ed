"""Part six of the self-distillation prompts, in two stages: texts the target writes itself, then tasks over them.

Stage one (``prompt_set="part6-docs"``, :func:`part_six_doc_prompts`): requests to write something short (an email,
a notice, a poem, a plan, a list, a news report, a Python function...) about made-up people, places and things,
answered by sampling (temperature / top-p), so no two texts share a template. Stage two (``prompt_set="part6"``,
:func:`part_six_task_prompts`): one task per stage-one text, in the suite's frames: a follow-up turn that edits the
text ("Here is our conversation so far." with the request and the target's own reply), a summary, a question
answered from the text alone ("Use only the context..."), a translation of its first sentences, or a rewrite.
Prompt ``i`` of stage two is built from text ``i`` of stage one, so shard ``n`` of part six needs shard ``n`` of
part six's documents.

Why: the shipped EAGLE head does not copy. On the suite's reply positions that two-token prompt lookup predicts it
is right 54 % of the time, the same as elsewhere; on held-out replies to the training's own templated documents,
75-78 %. Templated documents are learned by heart; texts the target sampled itself cannot be, so a head trained on
tasks over them has to read the context to predict the reply (docs/heads.md, "where the suite loses").
"""

from __future__ import annotations

import random
import re

from specviz.training.prompts_part5 import ALL_FORMS as ALL_FORMS_5
from specviz.training.prompts_part5 import _LANGS_OUT as _LANGS  # the same six languages as part five

DOC_FORMS_6 = ("write-email", "write-notice", "write-poem", "write-list", "write-plan", "write-report",
               "write-function", "write-story", "write-description", "write-recipe", "write-minutes", "write-guide")
TASK_FORMS_6 = ("followup-written", "followup-turns", "text-summary", "text-question", "text-translation",
                "text-rewrite")
FORMS_6 = DOC_FORMS_6 + TASK_FORMS_6
FORM_BASE_6 = len(ALL_FORMS_5)  # a part-six prompt's stored form is FORM_BASE_6 + its index in FORMS_6
ALL_FORMS = ALL_FORMS_5 + FORMS_6  # every stored form index names one entry here (parts three to six)

_START = ["Bel", "Cor", "Dun", "Fen", "Gal", "Hol", "Ister", "Jun", "Kel", "Lor", "Mar", "Nor", "Ost", "Pel",
          "Quen", "Ros", "Sel", "Tam", "Ul", "Vel", "Wyn", "Yar", "Zan", "Brin", "Cal", "Drey", "Elm", "Farr"]
_END_PLACE = ["brook", "ford", "wick", "haven", "mere", "stead", "combe", "dale", "holt", "bury", "ton", "moor"]
_END_NAME = ["a", "o", "en", "is", "ara", "ik", "ette", "an", "ie", "or", "ina", "us"]
_SURNAME = ["ley", "ridge", "worth", "ston", "field", "man", "cott", "by", "well", "ard"]
_TOPICS = ["the new opening hours", "a change to the bin collection days", "a lost cat called {pet}",
           "the repair of the footbridge", "a charity run next month", "the price of the monthly pass",
           "a visit from the school inspector", "the winter concert", "a leak in the roof of the hall",
           "the new recycling rules", "a book swap in the library", "the car park being closed for a week",
           "a cooking class for beginners", "the results of the spring survey", "a trip to the coast",
           "the plan to plant forty trees", "a noise complaint", "the new menu in the canteen"]
_THINGS = ["a lighthouse", "an old bicycle", "the first snow", "a quiet harbour", "a lost glove", "a kettle",
           "a night train", "a market at dawn", "a kite", "an empty classroom", "a garden shed", "a paper boat"]
_PRODUCTS = ["rechargeable desk lamp", "folding bicycle", "water filter jug", "pocket weather radio",
             "slow cooker", "garden kneeler", "travel kettle", "wooden puzzle box", "rain jacket for children"]
_FUNCTIONS = ["counts the vowels in a string", "returns the largest of three numbers", "reverses the words in a "
              "sentence", "checks whether a year is a leap year", "turns a list of prices into their total with "
              "tax", "removes duplicates from a list while keeping the order", "converts Celsius to Fahrenheit",
              "finds the longest word in a sentence", "counts how often each letter appears", "returns the average "
              "of a list of marks, or None for an empty list", "splits a full name into first and last name"]
_DISHES = ["a lentil soup", "a potato salad", "pancakes with apples", "a vegetable curry", "oat biscuits",
           "a tomato pasta bake", "a rice pudding", "a bean stew", "a cheese omelette", "a fruit crumble"]
_GOALS = ["learning to swim as an adult", "saving for a new bicycle", "tidying a very full garage",
          "getting ready for a job interview", "reading more books", "training for a five-kilometre run",
          "learning fifty words of Italian", "planning a surprise party", "moving to a new flat"]
_ORGS = ["{town} Rowing Club", "{town} Primary School parents' group", "{town} Allotment Society",
         "{town} Library Friends", "{town} Youth Choir", "{street} Street Residents' Group", "{town} Chess Club",
         "{town} Community Kitchen"]


def _name(r: random.Random) -> str:
    return r.choice(_START) + r.choice(_END_NAME)


def _person(r: random.Random) -> str:
    return f"{_name(r)} {r.choice(_START)}{r.choice(_SURNAME)}"


def _town(r: random.Random) -> str:
    return r.choice(_START) + r.choice(_END_PLACE)


def _slots(r: random.Random) -> dict[str, str]:
    """The made-up names and topics one stage-one request is written around (stage two asks about them)."""
    town = _town(r)
    return {"person": _person(r), "other": _person(r), "town": town, "street": r.choice(_START) + "wood",
            "org": r.choice(_ORGS).format(town=town, street=r.choice(_START) + "wood"),
            "topic": r.choice(_TOPICS).format(pet=_name(r)), "thing": r.choice(_THINGS),
            "product": r.choice(_PRODUCTS), "brand": _town(r).capitalize(), "function": r.choice(_FUNCTIONS),
            "dish": r.choice(_DISHES), "goal": r.choice(_GOALS)}


_REQUESTS = {  # stage one: form -> (the thing written, its requests); {slots} filled by _slots
    "write-email": ("email", ["Write a short email to {person} about {topic}. Sign it {other}.",
                              "Write an email from {other} to {person} asking for help with {topic}."]),
    "write-notice": ("notice", ["Write a notice for the members of the {org} about {topic}.",
                                "Write a short notice to put up in {town} about {topic}."]),
    "write-poem": ("poem", ["Write a short poem about {thing} in {town}.", "Write a poem of eight lines about "
                            "{thing}.", "Write a four-line poem for {person} about {thing}."]),
    "write-list": ("list", ["Write a shopping list for {dish} for six people.", "Make a packing list for "
                            "{person}'s weekend trip to {town}.", "List what the {org} needs for {topic}."]),
    "write-plan": ("plan", ["Give {person} a five-step plan for {goal}.", "Write a weekly plan for {goal}, "
                            "one line per day, for {person} in {town}."]),
    "write-report": ("report", ["Write a short news report about {topic} in the town of {town}. Quote {person}.",
                                "Write a short report for the {org} about {topic}."]),
    "write-function": ("function", ["Write a Python function that {function}.", "Write a Python function that "
                                    "{function}, with a short example of calling it.", "For the {org}'s website, "
                                    "write a Python function that {function}."]),
    "write-story": ("story", ["Write a short story about {person} and {thing}.", "Tell a six-sentence story set in "
                              "{town} about {thing}."]),
    "write-description": ("description", ["Write a product description for the {brand} {product}.",
                                          "Describe the {brand} {product} for an online shop, with its main "
                                          "features."]),
    "write-recipe": ("recipe", ["Write {person}'s simple recipe for {dish}, with ingredients and steps.",
                                "How do I make {dish} for the {org}? Give the ingredients and the steps."]),
    "write-minutes": ("meeting notes", ["Write the notes of a meeting of the {org} about {topic}. {person} "
                                        "chaired it.", "Write short minutes of a meeting where the {org} decided "
                                        "what to do about {topic}."]),
    "write-guide": ("guide", ["Write a short guide for visitors to {town}, mentioning {thing}.",
                              "Write a short guide for new members of the {org}."]),
}


def part_six_doc_prompts(count: int, seed: int = 0) -> list[tuple[int, str]]:
    """Stage one of part six: ``count`` requests to write something, as (form, prompt) with form =
    ``FORM_BASE_6`` + the index into :data:`FORMS_6`; forms take turns (12), names are made up. Deterministic for a
    given (count, seed), and a larger count extends a smaller one."""
    return [(FORM_BASE_6 + FORMS_6.index(form), prompt) for form, prompt, _ in _doc_requests(count, seed)]


def _doc_requests(count: int, seed: int) -> list[tuple[str, str, dict[str, str]]]:
    """(form, prompt, slots) of the first ``count`` stage-one requests."""
    rng = random.Random(seed * 1_000_003 + 6)
    out, seen = [], set()
    for i in range(count):
        form = DOC_FORMS_6[i % len(DOC_FORMS_6)]
        for _ in range(1000):  # draw until new (each form's slot space is far larger than its share of a count)
            slots = _slots(rng)
            prompt = rng.choice(_REQUESTS[form][1]).format(**slots)
            if prompt not in seen:
                break
        seen.add(prompt)
        out.append((form, prompt, slots))
    return out


_EDITS = ["Make it shorter, and keep the main points.", "Rewrite it in a more formal tone.",
          "Now rewrite it so that a ten-year-old could follow it.", "Change the name {person} to {new} everywhere "
          "and show the whole text again.", "Put it as a numbered list.", "Add one more sentence at the end about "
          "{thing}, and show the whole text again.", "Give it a title and show the whole text again with the title "
          "at the top.", "Make it friendlier, but keep everything it says.", "Move {town} to {new_town} and write "
          "it again.", "Cut it to half its length.", "Fix any mistakes in it and show the corrected version."]
_CODE_EDITS = ["Add a docstring and show the whole function again.", "Rename the function to {fname} and show it "
               "again.", "Add type hints to the function and show the whole function again.", "Add a check that "
               "raises ValueError for bad input, and show the whole function again.", "Write two tests for it."]
_LENGTHS = ["in one sentence", "in two sentences", "in three sentences", "in three bullet points",
            "in about forty words", "for someone in a hurry, in one line"]


def _sentences(text: str) -> list[str]:
    """The text's sentences (split after . ! ? and at line ends), empty pieces dropped."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 3]


def _task(r: random.Random, form: str, request: str, kind: str, text: str, slots: dict[str, str]):
    """One stage-two prompt of ``form`` over the target's ``text`` (its reply to ``request``): a string, or chat
    turns ((role, text), ...) for ``followup-turns``."""
    code = kind == "function"
    fill = dict(slots, new=_person(r), new_town=_town(r), fname=r.choice(["helper", "compute", "run", "solve"]) +
                "_" + r.choice(["value", "items", "text", "result"]))
    edit = r.choice(_CODE_EDITS if code else _EDITS).format(**fill)
    if form == "followup-written":
        return f"Here is our conversation so far.\n\nUser: {request}\nAssistant: {text}\n\nUser: {edit}"
    if form == "followup-turns":
        return (("user", request), ("assistant", text), ("user", edit))
    if form == "text-summary":
        return r.choice([f"Summarize the following {kind} {r.choice(_LENGTHS)}.\n\n{text}",
                         f"Read this {kind}.\n\n{text}\n\nSummarize it {r.choice(_LENGTHS)}."])
    if form == "text-question":
        questions = [f"Who is named in the {kind}, and what do they do?", f"What is the main point of the {kind}?",
                     f"What does the {kind} ask the reader to do?", f"Which places does the {kind} name?",
                     f"What is the first thing the {kind} says?"]
        if slots["topic"] in request:
            questions.append(f"What does the {kind} say about {slots['topic']}?")
        question = r.choice(questions)
        return f"Use only the context to answer the question.\n\nContext: {text}\n\nQuestion: {question}"
    if form == "text-translation":
        part = " ".join(_sentences(text)[:r.randint(1, 3)]) or text
        return f"Translate into {r.choice(_LANGS)}: {part}"
    how = r.choice(["as three bullet points", "in plain words", "as a short message to " + slots["other"],
                    "in the past tense", "from the point of view of " + slots["person"]])
    return f"Rewrite this {kind} {how}.\n\n{text}"


# one turn of 10 stage-two tasks: follow-ups (the suite's largest form) 4, summary 2, question 2, translation 1,
# rewrite 1; code is only followed up, as its other tasks read oddly
_CYCLE = ("followup-written", "text-summary", "followup-turns", "text-question", "followup-written",
          "text-translation", "text-summary", "followup-written", "text-question", "text-rewrite")


def part_six_task_prompts(texts: list[str], seed: int = 0) -> list[tuple[int, str | tuple[tuple[str, str], ...]]]:
    """Stage two of part six: one task per stage-one text, as (form, prompt). ``texts[i]`` is the target's reply
    to stage-one prompt ``i`` (of the same ``seed``), decoded without special tokens. Forms follow a turn of 10
    (four follow-ups, two summaries, two questions, a translation, a rewrite); a Python function is always followed
    up. Deterministic for given (texts, seed); a longer list extends a shorter one. An empty text gets a follow-up
    over nothing, so indices stay aligned."""
    requests = _doc_requests(len(texts), seed)
    out = []
    for i, (text, (doc_form, request, slots)) in enumerate(zip(texts, requests)):
        r = random.Random((seed * 1_000_003 + 66) * 100_003 + i)
        kind = _REQUESTS[doc_form][0]
        form = _CYCLE[i % len(_CYCLE)]
        if kind == "function" and not form.startswith("followup"):
            form = "followup-written"
        out.append((FORM_BASE_6 + FORMS_6.index(form), _task(r, form, request, kind, text.strip(), slots)))
    return out
