"""Part four of the self-distillation prompts (:func:`part_four_prompts`): the benchmark suite's eight task forms
(:data:`FORMS_4`: chat, translation, summarization, qa, math, rag, code-edit, multi-turn) with contents of their own,
including the forms parts one and two lack: long structured documents to summarize, conversations written out in one
message and then rewritten, contexts with several facts and two-part questions. Long documents are built by
:mod:`specviz.training.prompts_part4_docs`.

Why: retraining on part three (forms the suite does not use) lifted those forms' held-out acceptance and left the
suite's level (docs/heads.md), so this part aims at the suite's forms. The suite's own prompts are never used
(tested: no suite prompt, and no suite sentence of eight words or more, appears in the first 2560)."""

from __future__ import annotations

import random
import re

from specviz.training.prompts_part3 import FORMS_3
from specviz.training.prompts_part4_docs import long_document, short_note

FORMS_4 = ("chat", "translation", "summarization", "qa", "math", "rag", "code-edit", "multi-turn")
FORM_BASE_4 = len(FORMS_3)  # a part-four prompt's stored form is FORM_BASE_4 + its index in FORMS_4
ALL_FORMS = FORMS_3 + FORMS_4  # every stored form index names one entry here

_N = ["two", "three", "four", "five"]
_SITUATIONS = [("start cycling to work", "safe"), ("look after a friend's dog for a week", "practical"),
               ("move into a shared flat", "friendly"), ("begin a night shift job", "healthy"),
               ("host my first board game evening", "fun"), ("learn to swim as an adult", "calm"),
               ("grow herbs on a windowsill", "simple"), ("teach my grandfather to use a tablet", "patient")]
_PLANS = [("a rainy Sunday at home with two children", "one craft and one game"),
          ("a cheap day out in a city I do not know", "one museum and one walk"),
          ("a picnic for six people", "food nobody has to cook"),
          ("a birthday surprise for my sister", "something she can keep"),
          ("a study afternoon before an exam", "short breaks every hour"),
          ("a quiet evening after a hard week", "no screens")]
_NOTES = [("my neighbours", "a street clean-up on Sunday morning"), ("my team", "a leaving lunch for Omar on Friday"),
          ("the parents in my son's class", "a bake sale for the school trip"),
          ("my flatmates", "a new cleaning rota"), ("my book club", "a change of meeting place"),
          ("my cousins", "a family walk on the first day of the holidays")]
_TONES = ["friendly", "short", "cheerful", "polite", "warm"]
_MEALS = [("lunch", "pasta", "tomatoes", "spinach"), ("dinner", "potatoes", "leeks", "cheese"),
          ("breakfast", "oats", "apples", "yoghurt"), ("dinner", "noodles", "carrots", "tofu"),
          ("lunch", "bread", "eggs", "peppers"), ("dinner", "lentils", "onions", "tinned tomatoes")]
_MINUTES = ["fifteen", "twenty", "twenty-five", "thirty"]
_PEOPLE = [("colleague", "nervous about a big presentation"), ("brother", "bored at his new job"),
           ("daughter", "finding maths hard this year"), ("friend", "training for her first 10 km race"),
           ("grandmother", "lonely since she moved"), ("neighbour", "starting a vegetable patch")]
_HABITS = ["keeping a small balcony garden alive in summer", "staying healthy on night shifts",
           "keeping a shared kitchen clean", "saving a little money each month", "sleeping well before an exam",
           "keeping a bike in good shape", "learning new words in a foreign language", "looking after a goldfish",
           "working from a small flat", "keeping in touch with old friends"]
_DESTINATIONS = ["a fishing village", "a busy capital", "a spa town", "a lake in the hills", "a ski resort",
                 "a university town", "a river valley", "a small island"]
_SEASONS = ["spring", "summer", "autumn", "winter"]
_KINDS = [("outdoor", "indoor"), ("active", "restful"), ("free", "paid"), ("morning", "evening")]
_CHAT = [
    lambda r: "I want to {}. Give me {} {} tips, one sentence per tip.".format(
        *(lambda s: (s[0], r.choice(_N), s[1]))(r.choice(_SITUATIONS))),
    lambda r: "Suggest a simple plan for {} with {}.".format(*r.choice(_PLANS)),
    lambda r: "Write a {} note to {} about {}.".format(r.choice(_TONES), *r.choice(_NOTES)),
    lambda r: "What quick {} could I make in {} minutes from {}, {} and {}?".format(
        *(lambda m: (m[0], r.choice(_MINUTES), *m[1:]))(r.choice(_MEALS))),
    lambda r: "My {} is {}. Give me {} simple ways to help.".format(*r.choice(_PEOPLE), r.choice(_N)),
    lambda r: "Name {} good habits for {}, one sentence per habit.".format(r.choice(_N), r.choice(
        _HABITS)),
    lambda r: "I'm going on a {}-day trip to {} in {}. Plan each day with one {} and one {} activity."
              .format(r.choice(["two", "three", "four"]), r.choice(_DESTINATIONS), r.choice(_SEASONS),
                            *r.choice(_KINDS)),
]

_LANGS = ["French", "Spanish", "German", "Italian", "Portuguese", "Dutch"]
_WHO = ["My uncle", "Our teacher", "The new neighbour", "My best friend", "The bus driver", "Her grandfather",
        "The youngest player", "My colleague"]
_DOES = ["walks the dog along the river", "bakes bread for the whole street", "repairs old radios",
         "plays chess in the park", "paints the fences blue", "reads the newspaper at the café",
         "waters the flowers on the balcony", "cycles to the market"]
_WHEN = ["every Saturday morning", "twice a week", "before breakfast", "on warm evenings", "when it stops raining",
         "during the school holidays"]
_SHOPS = ["The post office", "The pharmacy", "The swimming pool", "The town hall", "The flower shop",
          "The cinema", "The bookshop", "The cheese market"]
_TIMES = [("eight", "five"), ("ten", "seven"), ("nine", "four"), ("seven", "noon"), ("eleven", "ten at night")]
_EXCEPT = ["except on public holidays", "but not in August", "and on Sundays only in the morning",
           "except on the first Monday of the month"]
_FOREIGN = [  # (language, sentence) to put into English
    ("French", "Le train pour Lyon part à dix heures, mais il est souvent en retard le lundi."),
    ("Spanish", "Mi abuela cocina sopa de verduras todos los domingos para toda la familia."),
    ("German", "Die Kinder spielen nach der Schule im Garten, wenn das Wetter schön ist."),
    ("Italian", "Il negozio di biciclette apre alle nove e chiude all'ora di pranzo."),
    ("French", "Nous avons acheté des fraises au marché, et elles étaient très sucrées."),
    ("Spanish", "La biblioteca del barrio tiene una sala nueva para los estudiantes."),
    ("German", "Mein Bruder fährt jeden Morgen mit dem Fahrrad zur Arbeit."),
    ("Portuguese", "O museu fica perto do rio e a entrada é gratuita às quartas-feiras."),
]
_TRANSLATION = [
    lambda r: f"Translate into {r.choice(_LANGS)}: {r.choice(_WHO)} {r.choice(_DOES)} {r.choice(_WHEN)}.",
    lambda r: "Translate into {}: {} opens its doors at {} and shuts at {}, {}.".format(
        r.choice(_LANGS), r.choice(_SHOPS), *r.choice(_TIMES), r.choice(_EXCEPT)),
    lambda r: "Translate into {}: {} {}, so please {}.".format(r.choice(_LANGS), r.choice(_SHOPS), r.choice(
        ["is closed for repairs this week", "gets very busy at lunchtime", "has moved to the main square",
         "only takes cash today"]), r.choice(["come early", "check the notice first", "bring a friend",
                                               "call before you go"])),
    lambda r: "Translate into English: {1}".format(*r.choice(_FOREIGN)),
    lambda r: "Translate this {0} sentence into English and then into {2}: {1}".format(
        *r.choice(_FOREIGN), r.choice(_LANGS)),
]

_SUMMARY_ASK = [("two sentences", None), ("one sentence", "a busy manager"), ("three bullet points", None),
                ("one sentence", "someone who missed it")]


def _summary(r: random.Random) -> str:
    if r.random() < 0.5:  # a long, structured document (meeting record, manual section, council report)
        kind, text, ask = long_document(r)
        return f"Read this {kind}.\n\n{text}\n\n{ask}"
    kind, text = short_note(r)
    length, reader = r.choice(_SUMMARY_ASK)
    return f"Summarize this {kind} in {length}" + (f" for {reader}" if reader else "") + f".\n\n{text}"


_THINGS = ["a rainbow form after a storm", "bread rise in the oven", "ice float on water", "the sky look red at sunset",
           "cats purr", "a compass point north", "soap remove grease", "our ears pop on a plane", "onions make us cry",
           "the sea taste salty", "a bicycle stay upright", "leaves fall in autumn", "bees make honey",
           "metal feel colder than wood", "bread go stale", "a balloon rise when filled with helium",
           "some birds fly south in winter", "a kettle whistle", "our breath steam on cold days", "iron rust",
           "the Moon change shape during the month", "a mirror reflect light", "plants need sunlight",
           "popcorn pop", "a spoon look bent in a glass of water", "dogs pant on hot days"]
_DIFFERENCES = [("a virus", "a bacterium"), ("a lake", "a sea"), ("a star", "a planet"), ("baking", "roasting"),
                ("a fruit", "a vegetable"), ("an ocean current", "a tide"), ("a city", "a town"),
                ("speed", "acceleration"), ("a mammal", "a reptile")]
_WORKS = ["a thermometer", "a solar panel", "a microwave oven", "a lighthouse", "a dishwasher", "a lock and key",
          "a heat pump", "a bicycle pump", "a smoke alarm"]
_PROCESSES = ["a seed grows into a plant", "milk turns into cheese", "a river carves a valley", "a cut on the skin heals",
              "clouds form", "a caterpillar becomes a butterfly", "glass is made", "snow turns into ice on a road",
              "paper is recycled", "a volcano erupts", "sound travels through the air", "a battery stores energy"]
_HABITS_QA = ["wash fruit before eating it", "stretch after running", "turn off lights in empty rooms", "wear a helmet on a "
              "bike", "back up photos", "drink water on long flights", "store medicine away from heat",
              "check tyre pressure", "air a bedroom every day", "learn basic first aid"]
_LENGTHS = ["Answer in two sentences.", "Answer in three sentences.", "Give a short answer.",
            "Explain in simple words.", "Keep it under fifty words."]
_QA = [
    lambda r: f"Why does {r.choice(_THINGS)}? {r.choice(_LENGTHS)}",
    lambda r: "What is the difference between {} and {}? Give one example of each.".format(*r.choice(_DIFFERENCES)),
    lambda r: f"How does {r.choice(_WORKS)} work? {r.choice(_LENGTHS)}",
    lambda r: f"Explain how {r.choice(_PROCESSES)}. {r.choice(_LENGTHS)}",
    lambda r: f"Why is it a good idea to {r.choice(_HABITS_QA)}? {r.choice(_LENGTHS)}",
    lambda r: "What is the difference between {} and {}? {}".format(*r.choice(_DIFFERENCES), r.choice(_LENGTHS)),
    lambda r: "What does {} do in {}? {}".format(*r.choice(
        [("the lungs", "our bodies"), ("roots", "a plant"), ("a referee", "a football match"),
         ("the goalkeeper", "a hockey team"), ("a conductor", "an orchestra"), ("the kidneys", "our bodies")]),
        r.choice(_LENGTHS)),
]

_WORKERS = [("gardener", "plants", "rows"), ("baker", "rolls", "trays"), ("teacher", "pencils", "boxes"),
            ("farmer", "eggs", "cartons"), ("librarian", "books", "shelves"), ("cook", "pancakes", "plates")]
_STEPS = ["Show your steps.", "Explain your answer.", "Show your work.", "Explain briefly."]


def _math(r: random.Random) -> str:
    who, item, group = r.choice(_WORKERS)
    a, b, c = r.randint(3, 15), r.randint(2, 12), r.randint(11, 60)
    forms = [
        f"A {who} puts {a} {item} in each of {b} {group}. How many {item} is that in all? {r.choice(_STEPS)}",
        f"A {who} has {c} {item}, uses {a}, and then gets {b} more. How many are left? {r.choice(_STEPS)}",
        f"A garden is {a} metres long and {b} metres wide. What are its area and its perimeter? {r.choice(_STEPS)}",
        f"A bus travels at {c} kilometres per hour. How far does it go in {b} hours? {r.choice(_STEPS)}",
        f"A coat is priced at {c * 2} dollars, and the shop takes {r.choice([10, 20, 30, 50])} percent off. "
        f"What is the new price? {r.choice(_STEPS)}",
        f"What is the average of {a}, {b + 10}, {c} and {a + c}? {r.choice(_STEPS)}",
        f"{c} students go on a trip, and each minibus takes {a} students. How many minibuses are needed? "
        f"{r.choice(_STEPS)}",
    ]
    return r.choice(forms)


def _rag(r: random.Random) -> str:
    from specviz.training.prompts_part4_docs import facts_context

    context, question = facts_context(r)
    return f"Use only the context to answer the question.\n\nContext: {context}\n\nQuestion: {question}"


_FUNCS = [
    ("def sum_even(values):\n    total = 0\n    for value in values:\n        if value % 2 == 0:\n"
     "            total = total + value\n    return total", "total", "result"),
    ("def longest(names):\n    best = ''\n    for name in names:\n        if len(name) > len(best):\n"
     "            best = name\n    return best", "best", "winner"),
    ("def count_vowels(text):\n    count = 0\n    for letter in text.lower():\n        if letter in 'aeiou':\n"
     "            count += 1\n    return count", "count", "vowels"),
    ("def average(scores):\n    total = 0\n    for score in scores:\n        total += score\n"
     "    return total / len(scores)", "total", "score_sum"),
    ("def minutes_to_hours(minutes):\n    hours = minutes // 60\n    rest = minutes % 60\n"
     "    return hours, rest", "rest", "leftover"),
    ("def shout(words):\n    loud = []\n    for word in words:\n        loud.append(word.upper() + '!')\n"
     "    return loud", "loud", "shouted"),
    ("def in_range(number, low, high):\n    ok = low <= number <= high\n    return ok", "ok", "inside"),
    ("def repeat_line(line, times):\n    out = ''\n    for i in range(times):\n        out = out + line + '\\n'\n"
     "    return out", "out", "text"),
]
_MORE_FUNCS = [
    ("def positives(numbers):\n    kept = []\n    for number in numbers:\n        if number > 0:\n"
     "            kept.append(number)\n    return kept", "kept", "positive_numbers"),
    ("def celsius_to_fahrenheit(degrees):\n    result = degrees * 9 / 5 + 32\n    return result", "result",
     "fahrenheit"),
    ("def first_letters(words):\n    letters = ''\n    for word in words:\n        letters += word[0]\n"
     "    return letters", "letters", "initials"),
    ("def biggest_gap(numbers):\n    gap = 0\n    for i in range(1, len(numbers)):\n"
     "        gap = max(gap, numbers[i] - numbers[i - 1])\n    return gap", "gap", "widest"),
]
_FUNC_EDITS = [
    lambda old, new: f"Change the name of `{old}` to `{new}` everywhere in this Python function and show the full "
                     "function.",
    lambda old, new: "Write a docstring for this Python function; leave the rest as it is and show the full function.",
    lambda old, new: "Give this function type annotations for its arguments and its result, and print it in full.",
    lambda old, new: "Make this Python function print each step as it goes, then show the full function.",
    lambda old, new: "Make this Python function give 0 back for an empty input, then show the full function.",
    lambda old, new: "Put a short comment above each line of this Python function, then show the full function.",
    lambda old, new: f"Call `{old}` `{new}` instead and give the function a docstring; show the full function.",
]
_LISTS = [("ul", ["Tea", "Coffee", "Juice", "Water"]), ("ol", ["Wake up", "Stretch", "Shower", "Breakfast"]),
          ("ul", ["Paris", "Rome", "Vienna", "Prague", "Lisbon"]), ("ol", ["Mix", "Knead", "Rest", "Bake"]),
          ("ul", ["Hammer", "Saw", "Drill"]), ("ul", ["Maths", "History", "Art", "Music", "Biology"]),
          ("ol", ["Open the box", "Check the parts", "Read the guide"]), ("ul", ["Oak", "Birch", "Maple", "Pine"])]
_PARAMS = {"values": ("numbers", "items", "data"), "names": ("people", "labels", "entries"),
           "text": ("sentence", "message", "line"), "scores": ("marks", "results", "grades"),
           "minutes": ("duration", "total_minutes", "time"), "words": ("terms", "tokens", "parts"),
           "number": ("value", "n", "x"), "line": ("row", "phrase", "greeting"), "numbers": ("values", "readings", "amounts"),
           "degrees": ("celsius", "temp", "reading")}


def _code_edit(r: random.Random) -> str:
    if r.random() < 0.2:
        tag, items = r.choice(_LISTS)
        body = "\n".join(f"  <li>{item}</li>" for item in items)
        change = r.choice(["every item is in italics", "every item is a link to #", "the items are in reverse order",
                           "the list is numbered" if tag == "ul" else "the list has bullets instead of numbers"])
        return f"Change this HTML list so that {change}, and show the full list.\n\n<{tag}>\n{body}\n</{tag}>"
    code, old, new = r.choice(_FUNCS + _MORE_FUNCS)
    param = code[code.index("(") + 1:code.index(")")].split(",")[0]
    if param in _PARAMS and r.random() < 0.75:  # the same function with its first parameter named otherwise
        code = re.sub(rf"\b{param}\b", r.choice(_PARAMS[param]), code)
    return r.choice(_FUNC_EDITS)(old, new) + "\n\n" + code


def _multi_turn(r: random.Random) -> str:
    from specviz.training.prompts_part4_docs import conversation

    return "Here is our conversation so far.\n\n" + conversation(r)


_MAKERS_4 = {"chat": lambda r: r.choice(_CHAT)(r), "translation": lambda r: r.choice(_TRANSLATION)(r),
             "summarization": _summary, "qa": lambda r: r.choice(_QA)(r), "math": _math, "rag": _rag,
             "code-edit": _code_edit, "multi-turn": _multi_turn}


def part_four_prompts(count: int, seed: int = 0) -> list[tuple[int, str]]:
    """Part four of the distillation prompts: ``count`` prompts, all different, as (form, prompt) where form is
    ``FORM_BASE_4`` + the index into :data:`FORMS_4` (so one numbering, :data:`ALL_FORMS`, covers parts three and
    four). Forms take turns (prompt i has form i mod 8), so any prefix is balanced. Every prompt is one user message.
    Deterministic for a given (count, seed), and a larger count extends a smaller one."""
    rng = random.Random(seed * 1_000_003 + 4)
    out: list[tuple[int, str]] = []
    seen: set = set()
    while len(out) < count:
        form = len(out) % len(FORMS_4)
        for _ in range(1000):  # draw until new (each form's slot space is far larger than its share of a count)
            prompt = _MAKERS_4[FORMS_4[form]](rng)
            if prompt not in seen:
                break
        seen.add(prompt)
        out.append((FORM_BASE_4 + form, prompt))
    return out
