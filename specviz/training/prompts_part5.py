"""Part five of the self-distillation prompts (:func:`part_five_prompts`): long structured documents of 2.4-3.4 k
characters with varied tasks after them (:data:`FORMS_5`' five ``doc-`` forms, 10 prompts in 16), and smaller shares
of the suite's weakest other forms: rag over a medium context, short-answer qa, multi-sentence translation into and
out of English, and chat. Documents are built by :mod:`specviz.training.prompts_part5_docs`.

Why: the shipped EAGLE head, teacher-forced on the target's greedy replies to the suite, accepts the fewest tokens
on translation (0.26 of a k=4 chain), rag (0.52), qa (0.60) and summarization (0.65), against 0.98-1.89 elsewhere;
part four's long documents (0.7-1.4 k characters) are shorter than the suite's (2.8-3.2 k). The suite's own prompts
are never used (tested: no suite prompt, and no suite sentence of eight words or more, appears in the first 2560)."""

from __future__ import annotations

import random

from specviz.training.prompts_part4 import ALL_FORMS as ALL_FORMS_4
from specviz.training.prompts_part5_docs import document_sections, long_document

FORMS_5 = ("doc-summary", "doc-question", "doc-list", "doc-rewrite", "doc-changes", "rag-medium", "qa-short",
           "translation-passage", "chat-request")
FORM_BASE_5 = len(ALL_FORMS_4)  # a part-five prompt's stored form is FORM_BASE_5 + its index in FORMS_5
ALL_FORMS = ALL_FORMS_4 + FORMS_5  # every stored form index names one entry here (parts three, four, five)
DOC_FORMS = FORMS_5[:5]  # the forms whose prompts hold a long document
# one turn of 16 prompts: 10 long documents (62.5 %), 2 rag, 2 translation, 1 qa, 1 chat
_CYCLE = ("doc-summary", "translation-passage", "doc-question", "rag-medium", "doc-list", "doc-summary", "qa-short",
          "doc-rewrite", "doc-question", "translation-passage", "doc-changes", "doc-summary", "rag-medium", "doc-list",
          "doc-question", "chat-request")

_LENGTHS = ["in one sentence", "in two sentences", "in three sentences", "in four sentences", "in five sentences",
            "in three bullet points", "in five bullet points", "in about sixty words", "in no more than 100 words",
            "in one short paragraph", "in six short lines"]
_READERS = ["someone in a hurry", "a ten-year-old", "a person who reads English as a second language",
            "a colleague abroad", "a reader who only has a minute"]


def _frame(r: random.Random, kind: str, text: str, ask: str) -> str:
    """The document and its task: mostly the task after the document (as the suite's are), one in ten before it (the
    target then often copies the document out: shard 0's check)."""
    article = "an" if kind[0] in "aeiou" else "a"
    way = r.random()
    if way < 0.7:
        return f"Read this {kind}.\n\n{text}\n\n{ask}"
    if way < 0.8:
        return f"{ask}\n\n{text}"
    return f"Below is {article} {kind}.\n\n---\n{text}\n---\n\n{ask}"


def _doc_summary(r: random.Random) -> str:
    doc = long_document(r)
    reader = r.choice(doc.audiences + tuple(_READERS))
    ask = r.choice([
        f"Summarize this {doc.kind} {r.choice(_LENGTHS)} for {reader}.",
        f"Give {reader} the gist of this {doc.kind} {r.choice(_LENGTHS)}.",
        f"Write a title and then a summary {r.choice(_LENGTHS)} of this {doc.kind}.",
        f"What are the {r.choice(['three', 'four', 'five'])} main points of this {doc.kind}? One line each.",
        f"Sum up the {doc.kind} {r.choice(_LENGTHS)}, leaving out anything {reader} would not need.",
        f"Write a short summary of the {doc.kind} that {reader} could read aloud in under a minute.",
    ])
    return _frame(r, doc.kind, doc.text, ask)


def _doc_question(r: random.Random) -> str:
    doc = long_document(r)
    first, second = r.sample(doc.questions, 2)
    question = first if r.random() < 0.5 else f"{first} Also: {second[0].lower()}{second[1:]}"
    way = r.random()
    if way < 0.4:
        return (f"Use only the {doc.kind} below to answer the question.\n\n{doc.text}\n\nQuestion: {question}")
    if way < 0.7:
        return _frame(r, doc.kind, doc.text, f"Answer from this {doc.kind} alone, in {r.choice(['one', 'two', 'three'])} "
                                             f"sentences: {question}")
    return _frame(r, doc.kind, doc.text, f"{question} Quote the words of the {doc.kind} that give the answer, and "
                                         f"say so if it does not tell.")


def _doc_list(r: random.Random) -> str:
    doc = long_document(r)
    ask = r.choice([
        f"List every date or day named in this {doc.kind}, each with what happens then.",
        f"List every task in this {doc.kind} that someone has to do, with who does it if it says.",
        f"Make a list of the numbers in this {doc.kind} (sums, times, counts) and what each one is about.",
        f"List the section titles of this {doc.kind}, each with one sentence saying what it covers.",
        f"Which people are named in this {doc.kind}? List them with their role or task.",
        f"List the decisions and rules in this {doc.kind} as short bullet points, most important first.",
        f"Turn this {doc.kind} into a checklist of at most {r.choice(['five', 'six', 'eight'])} items.",
    ])
    return _frame(r, doc.kind, doc.text, ask)


def _doc_rewrite(r: random.Random) -> str:
    doc = long_document(r)
    title = r.choice(doc.titles)
    how = r.choice(["in plain words a child could follow", "as a short list of bullet points", "at half its length",
                    f"as a friendly message to {r.choice(doc.audiences)}", "in a more formal tone",
                    "as one sentence", "as a question and its answer", "without any numbers"])
    ask = r.choice([f"Rewrite the part titled \"{title}\" {how}.",
                    f"Take the section \"{title}\" from this {doc.kind} and write it again {how}.",
                    f"Rewrite the section about \"{title}\" {how}, and keep every fact in it."])
    return _frame(r, doc.kind, doc.text, ask)


def _doc_changes(r: random.Random) -> str:
    doc = long_document(r)
    reader = r.choice(doc.audiences)
    ask = r.choice([
        f"What changes for {reader} because of this {doc.kind}? Answer {r.choice(_LENGTHS)}.",
        f"Write a short email to {reader} with the three points of this {doc.kind} that matter most to them.",
        f"Which points in this {doc.kind} need someone to act soon? Say who should do what.",
        f"What is new or different in this {doc.kind}, compared with how things were before? Answer briefly.",
        f"Is there anything in this {doc.kind} that {reader} should worry about? Explain in two sentences.",
        f"Pick the one point of this {doc.kind} that {reader} is most likely to ask about, and explain it simply.",
    ])
    return _frame(r, doc.kind, doc.text, ask)


def _rag(r: random.Random) -> str:
    context, question = document_sections(r, r.randint(2, 4))
    way = r.random()
    if way < 0.5:
        return f"Use only the context to answer the question.\n\nContext: {context}\n\nQuestion: {question}"
    if way < 0.75:
        return f"Answer using only the text below. If it does not say, reply that it is not stated.\n\n{context}" \
               f"\n\nQuestion: {question}"
    return f"Here are some notes.\n\n{context}\n\nBased on these notes only: {question} Answer in one sentence."


_TOPICS = ["a glacier moves", "salt melts ice on roads", "a fridge makes a humming noise", "hair turns grey",
           "the tide goes in and out", "wet sand is firmer than dry sand", "a candle flame points upwards",
           "yawning spreads from person to person", "tea cools faster in a wide cup", "cheese has holes in it",
           "fog forms in valleys at night", "a boomerang comes back", "wool keeps sheep warm when wet",
           "phones get warm when charging", "some trees keep their leaves in winter", "a drum makes a sound",
           "dough needs to rest", "cold air sinks", "stars twinkle", "a magnet picks up paper clips",
           "the desert gets cold at night", "bread rises faster in a warm kitchen", "a river bends", "owls hunt at night"]
_FACTS = [("a lighthouse keeper", "do"), ("a pharmacist", "do"), ("a dam", "do for a town"),
          ("a compost heap", "do for a garden"), ("a tree's bark", "do for the tree"), ("a bridge's arch", "do"),
          ("a fuse", "do in a plug"), ("a seatbelt", "do in a crash"), ("saliva", "do when we eat"),
          ("a beaver's dam", "do for a river"), ("a ship's anchor", "do"), ("a spam filter", "do")]
_GROUPS = [["a river", "a canal", "a stream", "a lake", "a pond", "a reservoir"],
           ["a hill", "a mountain", "a cliff", "a valley", "a plateau"], ["a storm", "a shower", "a breeze", "a gale"],
           ["a shop", "a market", "a supermarket", "a kiosk"], ["a bus", "a tram", "a train", "a coach"],
           ["a flu", "a cold", "an allergy"], ["a loan", "a gift", "a grant"], ["a poem", "a song", "a story"]]
_LIMITS = ["Answer in at most twenty words.", "Answer in at most forty words.", "Reply in one sentence.",
           "Use no more than three sentences.", "Give two short reasons.", "Answer in one line.",
           "Keep the answer under thirty words.", "Answer in two short sentences a child would follow."]


def _qa(r: random.Random) -> str:
    limit = r.choice(_LIMITS)
    way = r.randrange(4)
    if way == 0:
        return f"Explain why {r.choice(_TOPICS)}. {limit}"
    if way == 1:
        thing, verb = r.choice(_FACTS)
        return f"What does {thing} {verb}? {limit}"
    if way == 2:
        a, b = r.sample(r.choice(_GROUPS), 2)
        return f"How is {a} different from {b}? {limit}"
    return f"In simple words, what happens when {r.choice(_TOPICS)}? {limit}"


_ENGLISH = [  # sentences with slots, joined into passages to put into another language
    "The {place} opens at {hour} on weekdays and stays open until late on {day}s.",
    "My {rel} lives near the {place}, so we often meet there after work.",
    "Last {day} it rained all morning, but the afternoon was warm and bright.",
    "Please leave your {thing} at the front desk before you go in.",
    "We are planning a small party for my {rel}'s birthday next {day}.",
    "The bus to the {place} was late again, so I walked the last part of the way.",
    "If you have any questions, you can call us between {hour} and noon.",
    "The children planted tomatoes in the school garden and water them every {day}.",
    "Our neighbours lent us a ladder to fix the {thing}.",
    "Tickets for the concert at the {place} are sold out, but there is a waiting list.",
    "I forgot my {thing} at the {place}, and a kind woman brought it back to me.",
    "On {day}s the market square is full of stalls selling fruit, cheese and flowers.",
]
_SLOTS = {"place": ["library", "station", "swimming pool", "town hall", "post office", "old theatre", "market"],
          "hour": ["eight", "nine", "half past seven", "ten"], "day": ["Monday", "Wednesday", "Friday", "Saturday"],
          "rel": ["aunt", "cousin", "brother", "grandmother", "best friend"],
          "thing": ["umbrella", "bicycle", "bag", "coat", "keys", "fence"]}
_FOREIGN = {  # sentences we wrote in each language, joined into passages to put into English
    "French": ["Ma voisine arrose ses fleurs tous les soirs.", "Le musée est fermé le mardi.",
               "Nous avons pris le train de huit heures pour aller à la mer.", "Il fait froid, alors mets ton manteau.",
               "Les enfants jouent au football dans la cour après l'école.", "Le boulanger ouvre à sept heures.",
               "J'ai oublié mon parapluie chez mon frère.", "Le concert commence à vingt heures trente."],
    "Spanish": ["Mi hermano trabaja en una tienda de bicicletas.", "El autobús pasa cada veinte minutos.",
                "Los domingos comemos en casa de mis abuelos.", "La piscina está cerrada por obras esta semana.",
                "Compré naranjas y pan en el mercado.", "Hace mucho calor, así que vamos a la playa.",
                "La profesora explicó la lección dos veces.", "El tren llegó con diez minutos de retraso."],
    "German": ["Meine Schwester spielt jeden Abend Klavier.", "Die Bibliothek ist am Samstag nur vormittags offen.",
               "Wir fahren im Sommer an einen See in den Bergen.", "Der Kaffee ist heute besonders gut.",
               "Am Montag kommt der Techniker, um die Heizung zu reparieren.", "Die Kinder bauen einen Schneemann.",
               "Ich habe meinen Schlüssel im Büro vergessen.", "Das Restaurant an der Ecke ist immer voll."],
    "Italian": ["Il mercato del giovedì è pieno di frutta fresca.", "Mio nonno legge il giornale ogni mattina.",
                "La scuola finisce alle tredici.", "Abbiamo visto un bel film al cinema ieri sera.",
                "Il treno per Roma parte dal binario quattro.", "D'estate mangiamo spesso in giardino."],
}
_LANGS_OUT = ["French", "Spanish", "German", "Italian", "Portuguese", "Dutch"]


def _english_passage(r: random.Random, count: int) -> str:
    return " ".join(s.format(**{k: r.choice(v) for k, v in _SLOTS.items()}) for s in r.sample(_ENGLISH, count))


def _translation(r: random.Random) -> str:
    if r.random() < 0.5:
        lang, passage = r.choice(_LANGS_OUT), _english_passage(r, r.randint(2, 4))
        return r.choice([f"Translate this passage into {lang}:\n\n{passage}",
                         f"Translate into {lang}, keeping the sentences in the same order: {passage}",
                         f"Please put this short text into {lang}.\n\n{passage}"])
    lang = r.choice(list(_FOREIGN))
    passage = " ".join(r.sample(_FOREIGN[lang], r.randint(2, 4)))
    return r.choice([f"Translate this {lang} passage into English:\n\n{passage}",
                     f"Translate into English: {passage}",
                     f"What does this {lang} text say? Give an English translation.\n\n{passage}"])


_CHAT_NEEDS = [("a rainy weekend with a toddler", "activities"), ("my first week at a new job", "tips"),
               ("a family dinner on a small budget", "ideas"), ("a long train journey", "ways to pass the time"),
               ("moving house with a cat", "tips"), ("a garden party for ten people", "dishes"),
               ("a slow Sunday morning", "ideas"), ("studying with a noisy flatmate", "tips"),
               ("a walk with friends who are not very fit", "routes to look for"),
               ("a school bake sale", "easy bakes"), ("keeping a diary", "prompts to start with"),
               ("a first camping trip", "things to pack"), ("an evening with grandparents", "games"),
               ("a picnic in the rain", "ideas"), ("a quiet lunch break at work", "ways to relax"),
               ("a child who will not eat vegetables", "tricks"), ("a friend's housewarming", "small gifts"),
               ("learning to cook", "first dishes"), ("a cycle ride with children", "safety tips"),
               ("a cold flat in winter", "ways to keep warm"), ("starting to run", "beginner tips")]


def _chat(r: random.Random) -> str:
    need, what = r.choice(_CHAT_NEEDS)
    n = r.choice(["three", "four", "five"])
    return r.choice([f"Give me {n} {what} for {need}.", f"I need {n} {what} for {need}. Keep each one short.",
                     f"What are {n} good {what} for {need}? One sentence each, please.",
                     f"Could you suggest {n} {what} for {need}, with a word on why each works?"])


_MAKERS_5 = {"doc-summary": _doc_summary, "doc-question": _doc_question, "doc-list": _doc_list,
             "doc-rewrite": _doc_rewrite, "doc-changes": _doc_changes, "rag-medium": _rag, "qa-short": _qa,
             "translation-passage": _translation, "chat-request": _chat}


def part_five_prompts(count: int, seed: int = 0) -> list[tuple[int, str]]:
    """Part five of the distillation prompts: ``count`` prompts, all different, as (form, prompt) where form is
    ``FORM_BASE_5`` + the index into :data:`FORMS_5` (one numbering, :data:`ALL_FORMS`, covers parts three to five).
    Forms follow a fixed turn of 16 (10 long-document prompts, 2 rag, 2 translation, 1 qa, 1 chat), so every
    prefix of 16 is balanced. Every prompt is one user message. Deterministic for a given (count, seed), and a
    larger count extends a smaller one."""
    rng = random.Random(seed * 1_000_003 + 5)
    out: list[tuple[int, str]] = []
    seen: set = set()
    while len(out) < count:
        name = _CYCLE[len(out) % len(_CYCLE)]
        for _ in range(1000):  # draw until new (each form's slot space is far larger than its share of a count)
            prompt = _MAKERS_5[name](rng)
            if prompt not in seen:
                break
        seen.add(prompt)
        out.append((FORM_BASE_5 + FORMS_5.index(name), prompt))
    return out
