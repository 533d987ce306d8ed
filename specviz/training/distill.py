"""Self-distillation data for trained drafters: the target's own generations and its features.

Recipe (``python -m specviz train eagle|medusa`` runs it when the data is missing):
1. Prompts: :func:`distill_prompts` builds a fixed, seeded set of prompts we wrote (everyday chat, explanation,
   summarization, translation, code and code editing, math, rewriting, grounded questions). None of them is in
   the benchmark suite (``../shared/prompts`` / ``assets/prompts.jsonl``, now part of ``assets/suite.jsonl``), so the benchmark measures held-out
   prompts; part two's task forms follow the suite's categories, though, and a few of its instruction lines are
   worded as suite prompts' first lines (docs/heads.md lists them).
2. Generation (:func:`generate_corpus`): the target answers each prompt with its chat template (at most 192 new
   tokens) in batches of 32, one shard file per batch: the first 1280 prompts sampled (temperature 0.7, top-p
   0.95: varied replies to a smaller template set), the next 1280 greedily (all different prompts; the replies a
   greedy run sees, as the benchmark's are). The target's own outputs are the data, so a head learns the
   target's habits rather than another model's.
3. Features (:func:`extract_features`): one target forward over each full sequence (prompt + reply) gives, per
   position t, the last hidden feature f_t (after the final norm: ``logits_t = lm_head(f_t)``, stored as
   float16) and the target's greedy next token ``argmax logits_t`` (the label the heads are trained to match,
   because greedy verification accepts exactly that token).

Part three (``CorpusSettings(prompt_set="part3")``, :func:`part_three_prompts`): forms of request beyond the
suite's task forms (everyday requests, open questions, stories, dialogues, instructions with constraints,
multi-turn follow-ups written as real chat turns, descriptions, letters), all greedy, each shard recording every
sequence's form so that training can hold whole forms out. It is stored as token ids only: the EAGLE-3 recipe
recomputes the features by a prefill at training time (:func:`prefill_corpus`, kept in memory for the run).

Every step writes one file per shard and skips shards already on disk, so an interrupted run resumes where it
stopped. Shards live in ``<cache>/distill/`` (part three: ``<cache>/distill-part3/``; see
:func:`specviz.models.cache_dir`).
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch
from safetensors.torch import load_file, save_file

Progress = Callable[[str], None]

_TOPICS = [
    "photosynthesis", "the water cycle", "compound interest", "volcanoes", "the immune system", "black holes",
    "recycling plastic", "the French Revolution", "machine learning", "honey bees", "electric cars",
    "the printing press", "sleep", "coffee", "the Moon's phases", "rainbows", "vaccines", "the stock market",
    "coral reefs", "the Roman Empire", "solar panels", "earthquakes", "the human heart", "bread baking",
    "climate change", "the internet", "chess", "public libraries", "wind turbines", "the Olympic Games",
    "octopuses", "glaciers", "inflation", "the piano", "antibiotics", "deserts", "airplanes", "tea",
    "the Great Wall of China", "bicycles", "composting", "time zones", "DNA", "lightning", "the metric system",
    "rain forests", "museums", "penguins", "nuclear fusion", "mountains",
]
_CHAT = [
    "Give me three tips for staying focused while studying at home.",
    "What should I pack for a weekend camping trip?",
    "How can I make my mornings less stressful?",
    "Suggest a healthy breakfast I can make in ten minutes.",
    "I want to start running. How should I begin?",
    "What are some good ways to save money on groceries?",
    "How do I politely decline an invitation to a party?",
    "Recommend a few hobbies for someone who likes being outdoors.",
    "How can I keep a houseplant alive in a dark apartment?",
    "What is a good way to learn a new language as an adult?",
    "Help me plan a birthday dinner for four friends.",
    "How do I prepare for a job interview?",
    "What are some fun things to do on a rainy day?",
    "How can I get better at remembering names?",
    "Write a short, friendly message inviting my neighbours to a picnic.",
    "What should I consider before adopting a dog?",
]
_EXPLAIN = [
    "Explain {t} to a ten-year-old.",
    "What is {t}? Answer in a short paragraph.",
    "Give three interesting facts about {t}.",
    "Why does {t} matter? Explain briefly.",
    "Write a short paragraph about the history of {t}.",
    "What are the main advantages and disadvantages of {t}?",
    "Describe {t} in simple words.",
]
_SENTENCES = [
    "The city council voted on Tuesday to extend the opening hours of the central park.",
    "A local bakery has started donating its unsold bread to a nearby shelter every evening.",
    "Scientists observed a rare bird species nesting in the valley for the first time in forty years.",
    "The new bus line connects the university with the train station in under fifteen minutes.",
    "Heavy rain caused the river to rise, but the flood barriers held through the night.",
    "Students at the school built a small weather station and share their data online.",
    "The museum reopened after two years of renovation with a new wing for modern art.",
    "Farmers in the region report that the apple harvest is larger than last year.",
    "A volunteer group cleaned more than two tonnes of rubbish from the beach on Sunday.",
    "The library introduced a programme that lends tools as well as books.",
    "Engineers finished testing the bridge, which will open to cyclists next month.",
    "The town's football team won the regional final after a penalty shoot-out.",
]
_LANGS = ["French", "Spanish", "German", "Italian", "Portuguese"]
_CODE = [
    "Write a Python function that returns the largest number in a list.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a Python function that counts the vowels in a sentence.",
    "Write a Python function that reverses the words in a sentence.",
    "Write a Python function that returns the factorial of n.",
    "Write a Python function that removes duplicates from a list while keeping the order.",
    "Write a Python function that converts Celsius to Fahrenheit.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write a Python function that merges two sorted lists into one sorted list.",
    "Write a Python class for a simple bank account with deposit and withdraw methods.",
    "Write a JavaScript function that capitalizes the first letter of each word.",
    "Write a SQL query that returns the ten most recent orders from an orders table.",
    "Explain what a Python list comprehension is, with an example.",
    "Write a Python function that reads a text file and counts its lines.",
    "What is the difference between a list and a tuple in Python?",
    "Write a Python function that checks whether a number is prime.",
]
_REWRITE = [
    "Rewrite this sentence to sound more formal: {s}",
    "Turn this sentence into a question: {s}",
    "Summarize in a few words: {s}",
    "Write a headline for this news item: {s}",
]


def _math_prompt(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 40), rng.randint(2, 30), rng.randint(2, 9)
    forms = [
        f"A shop sells pencils for {c} dollars each. How much do {a} pencils cost? Show your steps.",
        f"Tom has {a} apples and gives away {min(a - 1, b)}. How many apples does he have left?",
        f"What is {a} times {b}? Explain how you calculated it.",
        f"A train travels {a * 10} kilometres in {c} hours. What is its average speed?",
        f"Solve for x: {c}x + {a} = {a + c * b}.",
        f"A rectangle is {a} cm long and {b} cm wide. What are its area and perimeter?",
        f"If a recipe needs {c} eggs for {b} people, how many eggs are needed for {b * 3} people?",
    ]
    return rng.choice(forms)


# Part two of the prompt set (prompts 1280 onwards): new kinds of task the first part lacks (editing code,
# answering from a context, longer reports to summarize, constrained everyday requests), built from slots so that
# every prompt is different: these prompts are answered greedily, and a repeated prompt would repeat its reply.
_TOPICS_2 = [
    "tides", "the seasons", "rust on iron", "snow", "bread rising", "soap", "fog", "echoes", "magnets", "fireflies",
    "jet lag", "static electricity", "ice floating on water", "the ozone layer", "bird migration", "yawning",
    "sourdough", "hiccups", "the northern lights", "thunder", "cats purring", "salt on icy roads", "hot air balloons",
    "the blue sky", "sunburn", "camels", "fossils", "the Dead Sea", "batteries", "microwaves", "GPS", "bar codes",
    "credit scores", "sand dunes", "whales singing", "autumn leaves", "goosebumps", "dew", "eclipses", "wind",
]
_ASK = [
    "Tell me about {t}. Answer in {n} sentences.",
    "How would you explain {t} to a friend? Keep it to {n} sentences.",
    "What is the most surprising fact about {t}? Give a short answer.",
    "Explain {t} in {n} sentences for a curious adult.",
    "What is one common misunderstanding about {t}? Explain briefly.",
    "What is the difference between {t} and {u}? Give one example of each.",
]
_NAMES = ["Maple Street", "Riverside", "Oak Hill", "Lakeview", "Pine Valley", "Stonebridge", "Elm Park",
          "Westfield", "Hillcrest", "Brookside", "Cedar Bay", "Northgate"]
_PLACES = [("swimming pool", "lanes", "swim"), ("community hall", "rooms", "book"), ("bike shop", "bikes", "rent"),
           ("tennis club", "courts", "play"), ("art studio", "easels", "paint"), ("bakery", "ovens", "bake"),
           ("library", "study desks", "study"), ("farm market", "stalls", "shop"), ("music school", "practice rooms", "rehearse"),
           ("climbing gym", "walls", "climb")]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_SNIPPETS = [
    "def mean(numbers):\n    s = 0\n    for n in numbers:\n        s += n\n    return s / len(numbers)",
    "def greet(name):\n    msg = 'Hello, ' + name + '!'\n    return msg",
    "def count_evens(items):\n    c = 0\n    for x in items:\n        if x % 2 == 0:\n            c += 1\n    return c",
    "def longest_word(text):\n    best = ''\n    for w in text.split():\n        if len(w) > len(best):\n            best = w\n    return best",
    "def squares(n):\n    out = []\n    for i in range(n):\n        out.append(i * i)\n    return out",
    "def is_sorted(xs):\n    for i in range(len(xs) - 1):\n        if xs[i] > xs[i + 1]:\n            return False\n    return True",
    "def total_price(prices, tax):\n    t = sum(prices)\n    return t + t * tax",
    "def initials(full_name):\n    parts = full_name.split()\n    return ''.join(p[0].upper() for p in parts)",
    "def clamp(value, low, high):\n    if value < low:\n        return low\n    if value > high:\n        return high\n    return value",
    "def word_lengths(sentence):\n    result = {}\n    for word in sentence.split():\n        result[word] = len(word)\n    return result",
    "def last_item(seq):\n    return seq[len(seq)]",
    "def add_tax(amount):\n    rate = 0.2\n    return amount * rate",
    "def first_upper(words):\n    res = []\n    for w in words:\n        res.append(w.capitalize())\n    return res",
    "def days_to_hours(days):\n    hours = days * 24\n    return hours",
]
_EDITS = [
    "Rename the variable `{v}` to a clearer name in this Python function and return the whole function.",
    "Add a docstring to this Python function and return the whole function unchanged otherwise.",
    "Add type hints to this Python function and return the whole function.",
    "Rewrite this Python function to be shorter without changing what it does.",
    "Add a comment above each line of this Python function that explains it.",
    "Explain what this Python function does in two sentences.",
    "Is there a bug in this Python function? If so, fix it and return the corrected function.",
    "Write two example calls of this Python function and show what each returns.",
]
_CHAT_2 = [
    "I have {n} free hours on a {d}. Suggest a plan that includes something {a}.",
    "Give me {n} ideas for a {a} weekend with friends. One sentence each.",
    "What are {n} simple ways to {g}? Keep each to one sentence.",
    "Write a short, polite message to a colleague asking to move our meeting to {d}.",
    "I am planning a {n}-day trip to {p} in {s}. Suggest a simple plan for each day.",
    "What should I bring to {p} in {s}? Give a short list.",
    "Help me write a friendly note thanking my neighbour for {f}.",
    "My friend is feeling stressed about {w}. What could I say to support them?",
]
_GOALS = ["drink more water", "sleep better", "cook more at home", "read more books", "spend less time on my phone",
          "keep my desk tidy", "walk more every day", "learn to cook rice well", "save energy at home",
          "make new friends in a new city", "get better at public speaking", "keep a journal"]
_TRIPS = ["a mountain village", "a big city", "a lake cabin", "an island", "a wine region", "a national park",
          "a quiet beach town", "a historic old town"]
_SEASONS = ["spring", "summer", "autumn", "winter"]
_ACTIVE = ["relaxing", "active", "creative", "cheap", "outdoor", "cosy", "social", "quiet"]
_FAVOURS = ["watering my plants", "feeding my cat", "lending me a ladder", "collecting my parcels",
            "helping me move a sofa", "sharing vegetables from their garden"]
_WORRIES = ["an exam", "a new job", "moving house", "a job interview", "a driving test", "a presentation at work"]
_SENTENCES_2 = [
    "The shop on the corner closes early on Saturdays, so please come before noon.",
    "My brother is learning to play the guitar and practises every evening.",
    "We are going to visit our grandparents next weekend if the weather is good.",
    "The meeting has been moved to Thursday afternoon because the manager is travelling.",
    "Could you tell me where the nearest pharmacy is, please?",
    "The children planted tomatoes in the school garden and water them every morning.",
    "I forgot my umbrella at home, and now it is raining heavily.",
    "The new restaurant near the station serves fresh fish and homemade bread.",
    "Please turn off the lights when you leave the office.",
    "The train was delayed by twenty minutes because of a signal problem.",
    "Our team finished the project a week before the deadline.",
    "She reads a chapter of her book every night before she goes to sleep.",
    "The concert starts at eight, but the doors open an hour earlier.",
    "It is important to drink enough water when the weather is hot.",
    "The museum is free for students on the first Sunday of every month.",
    "He bought a second-hand bicycle and rides it to work every day.",
]
_LANGS_2 = ["French", "Spanish", "German", "Italian", "Portuguese", "Dutch"]
_REPORT_ASK = [
    "Summarize the following report in two sentences.",
    "Summarize this note for a busy manager in one sentence.",
    "Summarize the text below as three short bullet points.",
    "Give a one-sentence summary of this update.",
]


def _report(rng: random.Random) -> str:
    """A short made-up report: a place, an event with numbers, a concern, and what happens next."""
    name, (place, units, verb) = rng.choice(_NAMES), rng.choice(_PLACES)
    n, cost, day = rng.randint(3, 40), rng.randint(2, 90) * 100, rng.choice(_DAYS)
    month = rng.choice(["March", "April", "May", "June", "September", "October", "November"])
    lines = [
        f"The {name} {place} held a meeting on {day} to plan its next season.",
        f"The board approved a budget of {cost} to add {n} new {units} and repair the old ones.",
        f"Some members worried that the work would close the {place} for too long, "
        f"so the board agreed to keep half of the {units} open during the work.",
        f"Volunteers offered to help on weekends, which should lower the cost by about a tenth.",
        f"The work will start in {month} and should be finished within {rng.randint(2, 8)} weeks.",
    ]
    keep = sorted(rng.sample(range(1, 5), rng.randint(2, 3)))
    return " ".join([lines[0]] + [lines[i] for i in keep])


def _context_question(rng: random.Random) -> str:
    """A grounded question: made-up facts about a place, and a question one of them answers."""
    name, (place, units, verb) = rng.choice(_NAMES), rng.choice(_PLACES)
    n, price = rng.randint(4, 30), rng.randint(3, 25)
    opens, closes = rng.randint(6, 10), rng.randint(17, 22)
    day = rng.choice(_DAYS)
    facts = [
        f"The {name} {place} has {n} {units}.",
        f"It costs {price} to {verb} there for one day, and members pay half.",
        f"It opens at {opens}:00 and closes at {closes}:00, except on {day}s, when it is closed.",
        f"Children under twelve must come with an adult.",
        f"There is free parking for {rng.randint(10, 60)} cars behind the building.",
    ]
    questions = [
        f"How many {units} does the {place} have?",
        f"How much does a member pay to {verb} there for one day?",
        f"Can I visit the {place} on a {day}?",
        f"How many hours a day is the {place} open?",
        f"Can a ten-year-old go there alone?",
    ]
    order = list(range(5))
    rng.shuffle(order)
    ask = rng.randrange(5)
    return ("Use only the context to answer the question.\n\nContext: " + " ".join(facts[i] for i in order)
            + f"\n\nQuestion: {questions[ask]}")


def _math_prompt_2(rng: random.Random) -> str:
    a, b, c = rng.randint(3, 60), rng.randint(2, 12), rng.randint(2, 9)
    forms = [
        f"A farmer collects {a} eggs every day. How many eggs does she collect in {b} days? Show your steps.",
        f"A ticket costs {c} dollars. How much do {a} tickets cost, and how much change is left from {a * c + b * 5} "
        f"dollars?",
        f"A garden is {a} metres long and {b} metres wide. What is its area and what is its perimeter? Explain briefly.",
        f"There are {a * b} chairs in a hall, in {b} equal rows. How many chairs are in each row?",
        f"A car uses {c} litres of fuel per 100 km. How much fuel does it need for {a * 10} km?",
        f"Anna saves {c * 5} dollars a week. How many weeks does she need to save {c * 5 * b} dollars?",
        f"What is {a}% of {b * 50}? Show how you worked it out.",
    ]
    return rng.choice(forms)


def _a_variable(code: str) -> str:
    """The first assigned name in a snippet, else its first parameter."""
    found = re.search(r"^\s+(\w+) = ", code, re.MULTILINE) or re.search(r"\((\w+)", code)
    return found.group(1)


def _part_two(rng: random.Random) -> str:
    makers = [
        lambda: rng.choice(_ASK).format(t=rng.choice(_TOPICS_2), u=rng.choice(_TOPICS_2), n=rng.randint(2, 4)),
        lambda: rng.choice(_ASK).format(t=rng.choice(_TOPICS), u=rng.choice(_TOPICS_2), n=rng.randint(2, 4)),
        lambda: rng.choice(_CHAT_2).format(n=rng.randint(2, 5), d=rng.choice(_DAYS), a=rng.choice(_ACTIVE),
                                           g=rng.choice(_GOALS), p=rng.choice(_TRIPS), s=rng.choice(_SEASONS),
                                           f=rng.choice(_FAVOURS), w=rng.choice(_WORRIES)),
        lambda: f"{rng.choice(_REPORT_ASK)}\n\n{_report(rng)}",
        lambda: f"Translate into {rng.choice(_LANGS_2)}: {rng.choice(_SENTENCES_2 + _SENTENCES)}",
        lambda: (lambda code: rng.choice(_EDITS).format(v=_a_variable(code)) + "\n\n" + code)(rng.choice(_SNIPPETS)),
        lambda: _math_prompt_2(rng),
        lambda: _context_question(rng),
    ]
    return rng.choice(makers)()


PART_ONE = 1280  # prompts drawn from the first template set (the original recipe); later ones come from part two


def distill_prompts(count: int = 2560, seed: int = 0) -> list[str]:
    """The fixed self-distillation prompt set: ``count`` prompts drawn with ``seed`` from the templates above.

    Part one (the first :data:`PART_ONE` prompts): a quarter explanations, the rest split among chat,
    summarization, translation, code, math, rewriting and grounded questions; prompts repeat (they are sampled,
    so replies differ). Part two (prompts from :data:`PART_ONE` on): questions, constrained everyday requests,
    made-up reports to summarize, context questions, translation, editing and explaining short Python functions,
    and arithmetic, all different from each other and from part one (they are answered greedily). Deterministic
    for a given (count, seed), and a larger count extends a smaller one.
    """
    rng = random.Random(seed)
    makers = [
        lambda: rng.choice(_EXPLAIN).format(t=rng.choice(_TOPICS)),
        lambda: rng.choice(_EXPLAIN).format(t=rng.choice(_TOPICS)),
        lambda: rng.choice(_CHAT),
        lambda: "Summarize the following in one or two sentences:\n" + " ".join(rng.sample(_SENTENCES, 4)),
        lambda: f"Translate into {rng.choice(_LANGS)}: {rng.choice(_SENTENCES)}",
        lambda: rng.choice(_CODE),
        lambda: _math_prompt(rng),
        lambda: rng.choice(_REWRITE).format(s=rng.choice(_SENTENCES)),
        lambda: ("Read the notes and answer the question.\nNotes: " + " ".join(rng.sample(_SENTENCES, 3))
                 + "\nQuestion: What happened, according to the notes?"),
    ]
    prompts = [rng.choice(makers)() for _ in range(min(count, PART_ONE))]
    seen = set(prompts)
    rng2 = random.Random(seed * 1_000_003 + 2)
    while len(prompts) < count:
        for _ in range(1000):  # draw until a prompt is new (the slot space is far larger than any default count)
            prompt = _part_two(rng2)
            if prompt not in seen:
                break
        seen.add(prompt)
        prompts.append(prompt)
    return prompts


# Part three (issue 19): forms of request that neither earlier part nor the benchmark suites use, so that a head
# learns how the target answers in general rather than in the suite's task forms. Every prompt is built from slots
# (all different; answered greedily), and each belongs to one of :data:`FORMS_3`, stored with its reply, so that
# training can leave whole forms out and measure the head on forms it never saw.
FORMS_3 = ("everyday", "open", "story", "dialogue", "constrained", "followup", "describe", "letter")
_STAINS = ["red wine", "coffee", "grass", "ink", "candle wax", "tomato sauce", "mud", "chocolate"]
_FABRICS = [("cotton", "shirt"), ("wool", "jumper"), ("linen", "tablecloth"), ("denim", "jacket"),
            ("silk", "scarf"), ("polyester", "sports top")]
_PANTRY = ["eggs", "rice", "spinach", "chickpeas", "potatoes", "onions", "cheese", "lentils", "carrots", "pasta",
           "tinned tuna", "mushrooms", "peppers", "yoghurt", "bread", "beans"]
_APPLIANCES = [("washing machine", "start a spin"), ("fridge", "close the door"), ("kettle", "boil water"),
               ("vacuum cleaner", "switch it on"), ("dishwasher", "open the door"), ("oven", "heat it up"),
               ("printer", "print a page"), ("bicycle", "change gear")]
_CHORES = ["wash my bed sheets", "clean the bathroom", "defrost the freezer", "water a cactus", "change a toothbrush",
           "descale the kettle", "clean the windows", "replace a kitchen sponge", "vacuum the stairs", "oil a bike chain"]
_EVENTS = ["a dinner party", "a video call with my boss", "my train leaves", "guests arrive", "a first date",
           "the school run", "a doctor's appointment", "a long flight"]
_FOODS = ["fresh herbs", "bananas", "cooked rice", "a loaf of bread", "avocados", "berries", "leftover soup",
          "hard cheese", "lettuce", "onions"]
_CHOICES = [("a tablet", "a laptop", "studying at university"), ("a cat", "a dog", "a small flat"),
            ("the train", "driving", "a trip of 300 km"), ("running", "swimming", "getting fitter"),
            ("renting", "buying", "a first home"), ("a paper diary", "a phone app", "planning my week"),
            ("a gas stove", "an induction hob", "a small kitchen"), ("e-books", "paper books", "a long holiday")]
_EVERYDAY = [
    lambda r: "How do I get {} out of a {} {}?".format(r.choice(_STAINS), *r.choice(_FABRICS)),
    lambda r: "What is a quick dinner I can cook with {}, {} and {}?".format(*r.sample(_PANTRY, 3)),
    lambda r: "My {} makes a strange noise when I {}. What could be wrong?".format(*r.choice(_APPLIANCES)),
    lambda r: f"How often should I {r.choice(_CHORES)}, and why?",
    lambda r: f"I have {r.choice([10, 15, 20, 30, 45])} minutes before {r.choice(_EVENTS)}. How should I use them?",
    lambda r: f"What is the best way to keep {r.choice(_FOODS)} fresh for longer?",
    lambda r: "Should I choose {} or {} for {}? Help me decide.".format(*r.choice(_CHOICES)),
]
_HOBBIES = ["gardening", "watching old films", "solving puzzles", "hiking in the rain", "collecting stamps",
            "baking bread", "bird watching", "playing board games", "knitting", "learning magic tricks"]
_WHAT_IFS = ["nobody needed to sleep", "every city banned cars", "humans could breathe under water",
             "the internet stopped for a week", "everyone spoke the same language", "money had never been invented",
             "we could remember every dream", "it rained every afternoon", "schools had no exams",
             "the Moon were twice as close"]
_DILEMMAS = [("save money", "travel while young"), ("live in the city", "live in the countryside"),
             ("read the book first", "watch the film first"), ("work from home", "work in an office"),
             ("learn one instrument well", "try many instruments"), ("plan a holiday", "travel without a plan")]
_ROLES = ["teacher", "neighbour", "team captain", "friend", "doctor", "referee", "tour guide", "shop owner",
          "grandparent", "mentor"]
_FUTURES = ["public transport", "libraries", "farming", "shopping", "holidays", "cooking at home", "letters",
            "hospitals", "football", "newspapers"]
_OPEN = [
    lambda r: f"Why do so many people enjoy {r.choice(_HOBBIES)}?",
    lambda r: f"What would daily life be like if {r.choice(_WHAT_IFS)}?",
    lambda r: "Is it wiser to {} or to {}? Give a reason for each side.".format(*r.choice(_DILEMMAS)),
    lambda r: f"What makes someone a good {r.choice(_ROLES)}?",
    lambda r: f"How might {r.choice(_FUTURES)} change in the next twenty years?",
    lambda r: f"Which is harder to learn, {r.choice(_HOBBIES)} or {r.choice(_HOBBIES)}? Why?",
]
_HEROES = ["a shy lighthouse keeper", "a clumsy robot", "a retired pirate", "a girl with a key collection",
           "an old taxi driver", "a lost penguin", "a baker without a sense of smell", "a very small dragon",
           "a postman on his last day", "a cat with big dreams"]
_PLOTS = ["finds a map under the floor", "has to cross a frozen lake", "makes friends with a stranger",
          "loses something important", "wins a prize by mistake", "has to keep a secret for a week",
          "wakes up in another century", "tries to fix a broken clock"]
_ANIMALS = ["a fox", "an owl", "a tortoise", "a hedgehog", "a goat", "a crow", "a whale", "a squirrel", "a bear",
            "a rabbit"]
_SETTINGS = ["a snowy forest", "a busy harbour", "a night train", "an empty theatre", "a desert market",
             "a mountain hut", "a flooded village", "a space station"]
_VALUES = ["patience", "honesty", "sharing", "courage", "listening", "kindness to strangers", "hard work"]
_STORY = [
    lambda r: f"Write a short story about {r.choice(_HEROES)} who {r.choice(_PLOTS)}.",
    lambda r: "Tell a bedtime story about {} and {} in {}.".format(*r.sample(_ANIMALS, 2), r.choice(_SETTINGS)),
    lambda r: f"Write a fable about {r.choice(_VALUES)} with {r.choice(_ANIMALS)} as the main character.",
    lambda r: f"Write the first paragraph of a mystery that takes place in {r.choice(_SETTINGS)}.",
    lambda r: f"Write a short poem about {r.choice(_HEROES)} in {r.choice(_SETTINGS)}.",
]
_PAIRS = [("a chef", "a food critic"), ("a pilot", "a nervous passenger"), ("a librarian", "a student"),
          ("a gardener", "a child"), ("a detective", "a witness"), ("a coach", "a young player"),
          ("two astronauts", None), ("a grandmother", "her grandson"), ("a shopkeeper", "a tourist"),
          ("a nurse", "a patient")]
_TALKS = ["the weather", "a missing umbrella", "what to cook tonight", "a strange noise at night",
          "a surprise party", "learning to swim", "a broken window", "a long journey", "saving energy",
          "a new neighbour"]
_PLANS = ["a picnic", "a trip to the coast", "a board-game night", "a charity run", "a garden makeover",
          "a visit to a museum"]
_DIALOGUE = [
    lambda r: (lambda a, b: f"Write a short dialogue between {a} and {b} about {r.choice(_TALKS)}." if b else
               f"Write a short dialogue between {a} about {r.choice(_TALKS)}.")(*r.choice(_PAIRS)),
    lambda r: f"Write a conversation in which two friends plan {r.choice(_PLANS)}.",
    lambda r: "Write a short scene in which {} explains {} to {}.".format(
        r.choice(_PAIRS)[0], r.choice(_TALKS), r.choice(["a child", "a visitor", "a colleague", "a robot"])),
    lambda r: "Write a phone call between a customer and a {} about {}.".format(
        r.choice(["bakery", "bike shop", "hotel", "bank", "plumber", "cinema"]), r.choice(_TALKS)),
]
_LISTS = ["fruits that grow on trees", "board games for families", "rivers in Europe", "kitchen tools", "winter sports",
          "things to pack for a beach day", "jobs that involve animals", "musical instruments", "indoor plants",
          "ways to say thank you"]
_NOUNS = ["a bicycle", "a library", "a thunderstorm", "a birthday party", "a volcano", "a market", "a lighthouse",
          "a train station", "a piano", "an orchard"]
_CONSTRAINED = [
    lambda r: f"List exactly {r.randint(3, 7)} {r.choice(_LISTS)}. Number them and add no explanations.",
    lambda r: f"Describe {r.choice(_NOUNS)} in no more than {r.choice([20, 30, 40, 50])} words.",
    lambda r: f"Name {r.randint(3, 5)} {r.choice(_LISTS)}, each starting with the letter {r.choice('BCDMPST')}.",
    lambda r: f"Explain {r.choice(_TALKS + _FUTURES)} using short sentences of at most eight words each.",
    lambda r: f"Write {r.randint(3, 5)} tips for {r.choice(_HOBBIES)} as a bulleted list, then one summary line.",
    lambda r: f"Make a table with two columns, item and reason, for {r.randint(3, 5)} {r.choice(_LISTS)}.",
    lambda r: f"In exactly two sentences, say why {r.choice(_NOUNS)} can be exciting.",
]
_EARLIER = [
    ("Give me three ideas for a rainy Sunday.", "1. Bake a simple cake.\n2. Build a blanket fort and read.\n"
     "3. Start a jigsaw puzzle with the family."),
    ("What should I plant on a sunny balcony?", "Tomatoes, basil and strawberries all love sun and grow well in pots."),
    ("How do I boil an egg?", "Put the egg in boiling water for about eight minutes, then cool it in cold water."),
    ("Suggest a name for my new goldfish.", "How about Bubbles, Captain or Goldie?"),
    ("What is a good stretch after running?", "Stand on one leg, hold the other foot behind you and keep it for "
     "twenty seconds. Then switch legs."),
    ("Recommend a board game for four people.", "Try Ticket to Ride: it is easy to learn and a game takes about an hour."),
    ("How can I keep my keys from getting lost?", "Keep a small bowl by the door and always drop your keys there."),
    ("Write a one-line slogan for a bakery.", "Fresh from our oven to your table, every morning."),
    ("What can I do to fall asleep faster?", "Keep the room cool and dark, and put your phone away an hour before bed."),
    ("Plan a short walk in a city park.", "Start at the gate, follow the lake path, stop at the cafe, and return "
     "through the rose garden."),
]
_FOLLOWUPS = [
    "Make that shorter.", "Can you give me {n} more?", "Why would that work?", "Explain that to a child.",
    "What if I only had {n} minutes?", "Say it again in a more cheerful tone.", "Which one would you pick, and why?",
    "Turn that into a numbered list of {n} steps.", "What is a common mistake here?",
]


def _followup(r: random.Random) -> tuple[tuple[str, str], ...]:
    """A multi-turn prompt: an earlier question and answer, then a follow-up (chat messages, role and text)."""
    question, answer = r.choice(_EARLIER)
    follow = r.choice(_FOLLOWUPS).format(n=r.randint(2, 5))
    return (("user", question), ("assistant", answer), ("user", follow))


_PLACES_3 = ["a fishing village", "a night market", "a mountain lake", "an old library", "a school playground",
             "a busy airport", "a vineyard", "a city rooftop"]
_TIMES = ["dawn", "noon", "dusk", "midnight", "the first snow", "a summer storm"]
_OBJECTS = ["an abacus", "a compass", "a sundial", "a loom", "a barometer", "a typewriter", "a kaleidoscope",
            "a metronome", "a rolling pin", "an hourglass"]
_JOBS = ["beekeeper", "lighthouse keeper", "zookeeper", "bus driver", "florist", "carpenter", "museum guard",
         "ferry captain", "chef", "librarian"]
_DESCRIBE = [
    lambda r: f"Describe {r.choice(_PLACES_3)} at {r.choice(_TIMES)} to someone who has never been there.",
    lambda r: f"What does {r.choice(_OBJECTS)} look like, and what is it used for?",
    lambda r: "Compare {} and {} in a few sentences.".format(*r.sample(_OBJECTS + _NOUNS, 2)),
    lambda r: f"How does a {r.choice(_JOBS)} spend a typical day?",
    lambda r: f"Describe the smell and sound of {r.choice(_PLACES_3)}.",
]
_LETTER = [
    lambda r: "Write an email to my landlord about {}.".format(r.choice(
        ["a leaking tap", "a broken heater", "noisy pipes", "a damp wall", "a lost key", "a late repair"])),
    lambda r: "Write a short apology to a friend for {}.".format(r.choice(
        ["missing their birthday", "being late again", "forgetting to call", "breaking a borrowed mug",
         "cancelling our plans"])),
    lambda r: f"Write a thank-you card for my {r.choice(_ROLES)}, who helped me with {r.choice(_HOBBIES)}.",
    lambda r: "Write a message to my team announcing {}.".format(r.choice(
        ["a new colleague", "an office move", "a holiday party", "a finished project", "new working hours"])),
    lambda r: "Write a polite but firm complaint to a {} about {}.".format(
        r.choice(["phone company", "airline", "furniture shop", "gym", "delivery service"]),
        r.choice(["a double charge", "a late delivery", "a rude reply", "a cancelled booking", "a broken item"])),
    lambda r: f"Write the opening paragraph of a job application for a position as a {r.choice(_JOBS)}.",
]
_MAKERS_3 = {"everyday": _EVERYDAY, "open": _OPEN, "story": _STORY, "dialogue": _DIALOGUE,
             "constrained": _CONSTRAINED, "followup": [_followup], "describe": _DESCRIBE, "letter": _LETTER}


def part_three_prompts(count: int, seed: int = 0) -> list[tuple[int, str | tuple[tuple[str, str], ...]]]:
    """Part three of the distillation prompts: ``count`` prompts, all different, as (form index into
    :data:`FORMS_3`, prompt). Forms take turns (prompt i has form i mod 8), so any prefix is balanced; a prompt is
    a string (one user message) or, for "followup", chat turns ((role, text), ...) ending with the user's.
    Deterministic for a given (count, seed), and a larger count extends a smaller one."""
    rng = random.Random(seed * 1_000_003 + 3)
    out: list[tuple[int, str | tuple[tuple[str, str], ...]]] = []
    seen: set = set()
    while len(out) < count:
        form = len(out) % len(FORMS_3)
        makers = _MAKERS_3[FORMS_3[form]]
        for _ in range(1000):  # draw until new (each form's slot space is far larger than its share of a count)
            prompt = rng.choice(makers)(rng)
            if prompt not in seen:
                break
        seen.add(prompt)
        out.append((form, prompt))
    return out


@dataclass(frozen=True)
class CorpusSettings:
    """How :func:`generate_corpus` samples (defaults are the shipped heads' recipe)."""

    num_prompts: int = 2560
    batch_size: int = 32
    max_new_tokens: int = 192
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    sampled_prompts: int = PART_ONE  # prompts before this index are sampled (temperature, top-p), later ones greedy
    prompt_set: str = "default"  # "default": parts one and two (the shipped heads); "part3": part three, all greedy

    def __post_init__(self) -> None:
        if self.prompt_set not in PROMPT_SETS:
            raise ValueError(f"unknown prompt set {self.prompt_set!r}; choose one of {', '.join(PROMPT_SETS)}")


PROMPT_SETS = ("default", "part3")


def corpus_prompts(settings: CorpusSettings) -> list[tuple[int, str | tuple[tuple[str, str], ...]]]:
    """The (form, prompt) pairs ``settings`` asks for: parts one and two (form -1: not recorded) or part three
    (form = index into :data:`FORMS_3`)."""
    if settings.prompt_set == "part3":
        return part_three_prompts(settings.num_prompts, settings.seed)
    return [(-1, p) for p in distill_prompts(settings.num_prompts, settings.seed)]


def encode_turns(tokenizer, prompt: str | tuple[tuple[str, str], ...]) -> list[int]:
    """Token ids of a prompt with the chat template: a string is one user message
    (:func:`specviz.models.encode_prompt`); chat turns ((role, text), ...) are written as those messages, followed
    by the assistant's generation prompt. Raises ValueError for empty turns."""
    from specviz import models

    if isinstance(prompt, str):
        return models.encode_prompt(tokenizer, prompt)
    return models.encode_turns(tokenizer, list(prompt))


def data_dir(prompt_set: str = "default") -> Path:
    """Where the distillation shards of a prompt set are kept (``<specviz cache>/distill``; part three's in
    ``<specviz cache>/distill-part3``, as its shard numbers restart at 0)."""
    from specviz.models import cache_dir

    return cache_dir() / ("distill" if prompt_set == "default" else f"distill-{prompt_set}")


def _shard_path(folder: Path, index: int, kind: str) -> Path:
    return folder / f"{kind}-{index:04d}.safetensors"


def _save(tensors: dict, path: Path) -> None:
    """Write a shard atomically (a temporary file renamed into place), so an interrupted run leaves no half shard."""
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp))
    tmp.replace(path)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


@torch.inference_mode()
def generate_corpus(target, folder: Path, settings: CorpusSettings = CorpusSettings(),
                    progress: Progress | None = None, prompts: list | None = None) -> list[Path]:
    """Generate the target's replies to the prompts of ``settings`` (:func:`corpus_prompts`), one
    ``ids-NNNN.safetensors`` shard per batch of ``settings.batch_size``.

    Each shard holds ``ids`` (int32, all sequences laid end to end: prompt then reply, cut after the first EOS),
    ``offsets`` (int64, N+1 sequence boundaries) and ``prompt_lens`` (int32, N); part three's also ``forms``
    (int32, N: index into :data:`FORMS_3`). Token ids only: features come from a prefill (:func:`extract_features`
    or :func:`prefill_corpus`). Existing shards are kept (resume). Returns the shard paths in order.

    ``prompts`` replaces the set's prompts with given (form, prompt) pairs (held-out evaluation sets, say; they
    are answered greedily, and their forms are stored).
    """
    folder.mkdir(parents=True, exist_ok=True)
    given = prompts is not None
    prompts = prompts if given else corpus_prompts(settings)
    paths = []
    batches = range(0, len(prompts), settings.batch_size)
    for shard, start in enumerate(batches):
        path = _shard_path(folder, shard, "ids")
        paths.append(path)
        if path.exists():
            continue
        t0 = time.perf_counter()
        torch.manual_seed(settings.seed * 100003 + shard)
        sampled = not given and settings.prompt_set == "default" and start < settings.sampled_prompts
        group = prompts[start:start + settings.batch_size]
        tensors = _generate_shard(target, [p for _, p in group], settings, sampled)
        if given or settings.prompt_set != "default":
            tensors["forms"] = torch.tensor([f for f, _ in group], dtype=torch.int32)
        _save(tensors, path)
        new = int(tensors["offsets"][-1]) - int(tensors["prompt_lens"].sum())
        _say(progress, f"shard {shard + 1}/{len(batches)}: {new} new tokens in {time.perf_counter() - t0:.0f} s")
    return paths


def _generate_shard(target, prompts: list, settings: CorpusSettings, sampled: bool) -> dict[str, torch.Tensor]:
    """One batch of replies (left-padded batched generation; sampled with temperature / top-p, or greedy) as the
    shard tensors ids / offsets / prompt_lens."""
    tok = target.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else target.eos_token_ids[0]
    eos = set(target.eos_token_ids)
    encoded = [encode_turns(tok, p) for p in prompts]
    width = max(len(e) for e in encoded)
    input_ids = torch.full((len(encoded), width), pad, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, ids in enumerate(encoded):  # left padding, as batched generation needs
        input_ids[row, width - len(ids):] = torch.tensor(ids)
        mask[row, width - len(ids):] = 1
    if sampled:
        how = dict(do_sample=True, temperature=settings.temperature, top_p=settings.top_p, top_k=0)
    else:  # greedy: the replies the benchmark's greedy runs see
        how = dict(do_sample=False)
    out = target.model.generate(
        input_ids=input_ids.to(target.device), attention_mask=mask.to(target.device), **how,
        max_new_tokens=settings.max_new_tokens, pad_token_id=pad,
    )
    seqs, prompt_lens = [], []
    for row, ids in enumerate(encoded):
        reply = []
        for token in out[row, width:].tolist():
            reply.append(token)
            if token in eos:
                break
        seqs.append(ids + reply)
        prompt_lens.append(len(ids))
    offsets = [0]
    for s in seqs:
        offsets.append(offsets[-1] + len(s))
    return {
        "ids": torch.tensor([t for s in seqs for t in s], dtype=torch.int32),
        "offsets": torch.tensor(offsets, dtype=torch.int64),
        "prompt_lens": torch.tensor(prompt_lens, dtype=torch.int32),
    }


@torch.inference_mode()
def extract_features(target, folder: Path, progress: Progress | None = None, batch_size: int = 8) -> list[Path]:
    """For every ``ids`` shard, write ``feats-NNNN.safetensors``: ``features`` (P, H) float16, the target's final
    normed hidden state at every position, and ``top1`` (P,) int32, the target's greedy next token there.

    Sequences run one batch at a time, right-padded with an attention mask. Existing shards are kept (resume).
    """
    paths = []
    ids_paths = sorted(folder.glob("ids-*.safetensors"))
    for n, ids_path in enumerate(ids_paths):
        path = ids_path.with_name(ids_path.name.replace("ids-", "feats-"))
        paths.append(path)
        if path.exists():
            continue
        t0 = time.perf_counter()
        data = load_file(str(ids_path))
        ids, offsets = data["ids"].long(), data["offsets"].tolist()
        seqs = [ids[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
        feats, top1, _ = _prefill(target, seqs, batch_size)
        _save({"features": torch.cat(feats), "top1": torch.cat(top1)}, path)
        _say(progress, f"features {n + 1}/{len(ids_paths)}: {offsets[-1]} positions in {time.perf_counter() - t0:.0f} s")
    return paths


@torch.inference_mode()
def _prefill(target, seqs: list[torch.Tensor], batch_size: int, layers: tuple[int, ...] = ()
             ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """One target forward per batch of sequences (right-padded, attention mask): per sequence of length n, the
    final features (n, H) float16, the greedy next tokens (n,) int32 and, when ``layers`` lists hidden-state
    indices (0 = embeddings, i = output of layer i), their concatenation (n, len(layers) * H) float16."""
    feats, top1, fused = [], [], []
    for start in range(0, len(seqs), batch_size):
        group = seqs[start:start + batch_size]
        width = max(len(s) for s in group)
        batch = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for row, s in enumerate(group):
            batch[row, :len(s)] = s
            mask[row, :len(s)] = 1
        out = target.model(input_ids=batch.to(target.device), attention_mask=mask.to(target.device),
                           output_hidden_states=True, use_cache=False)
        hidden = out.hidden_states[-1]
        best = out.logits.argmax(dim=-1)
        stacked = torch.cat([out.hidden_states[i] for i in layers], dim=-1) if layers else None
        for row, s in enumerate(group):
            feats.append(hidden[row, :len(s)].to(torch.float16).cpu())
            top1.append(best[row, :len(s)].to(torch.int32).cpu())
            if stacked is not None:
                fused.append(stacked[row, :len(s)].to(torch.float16).cpu())
    return feats, top1, fused


def prefill_corpus(target, folder: Path, layers: tuple[int, ...] = (), forms: tuple[int, ...] | None = None,
                   progress: Progress | None = None, batch_size: int = 8) -> Corpus:
    """A :class:`Corpus` from the ``ids`` shards of ``folder`` alone: features recomputed by a prefill and kept in
    memory for the run (no feature files), optionally only the sequences whose form is in ``forms`` (part three),
    with the hidden states ``layers`` (for EAGLE-3 heads, :func:`specviz.drafters.networks.fusion_layers`) in
    ``Corpus.layer_features``. Cost: one forward over every kept token (about 2 minutes per 30 k positions for
    SmolLM2-135M on 2 CPU threads).

    Raises:
        FileNotFoundError: no ``ids`` shard in ``folder``, or no sequence of the forms asked for.
    """
    seqs, prompt_lens, kinds = [], [], []
    for ids_path in sorted(folder.glob("ids-*.safetensors")):
        d = load_file(str(ids_path))
        ids, bounds = d["ids"].long(), d["offsets"].tolist()
        shard_forms = d["forms"].tolist() if "forms" in d else [-1] * (len(bounds) - 1)
        for i, form in enumerate(shard_forms):
            if forms is None or form in forms:
                seqs.append(ids[bounds[i]:bounds[i + 1]])
                prompt_lens.append(int(d["prompt_lens"][i]))
                kinds.append(form)
    if not seqs:
        raise FileNotFoundError(f"no distillation sequences{' of those forms' if forms else ''} in {folder}; "
                                f"make them with `python -m specviz train`")
    t0 = time.perf_counter()
    feats, top1, fused = _prefill(target, seqs, batch_size, layers)
    offsets = torch.tensor([0] + [len(s) for s in seqs]).cumsum(0)
    _say(progress, f"prefill: {int(offsets[-1])} positions of {len(seqs)} sequences in {time.perf_counter() - t0:.0f} s")
    return Corpus(torch.cat(seqs), torch.cat(feats), torch.cat(top1).long(), offsets, torch.tensor(prompt_lens),
                  torch.cat(fused) if fused else None, torch.tensor(kinds), tuple(layers))


@dataclass
class Corpus:
    """The distillation data in memory, sequences laid end to end.

    Attributes:
        ids: (P,) int64 token ids.
        features: (P, H) float16 target features f_t.
        top1: (P,) int64 target greedy next token after position t.
        offsets: (N+1,) int64 sequence boundaries.
        prompt_lens: (N,) int64 prompt length of each sequence (the reply follows).
        layer_features: (P, 3H) float16 hidden states of the layers an EAGLE-3 head fuses, side by side, or None.
        forms: (N,) int64 part-three form of each sequence (index into :data:`FORMS_3`; -1 = not recorded), or None.
        layers: the hidden-state indices in ``layer_features`` (empty without them).
    """

    ids: torch.Tensor
    features: torch.Tensor
    top1: torch.Tensor
    offsets: torch.Tensor
    prompt_lens: torch.Tensor
    layer_features: torch.Tensor | None = None
    forms: torch.Tensor | None = None
    layers: tuple[int, ...] = ()

    @property
    def num_positions(self) -> int:
        return int(self.ids.numel())

    def sequences(self) -> Iterator[tuple[int, int]]:
        """(start, end) of each sequence."""
        bounds = self.offsets.tolist()
        for i in range(len(bounds) - 1):
            yield bounds[i], bounds[i + 1]


def load_corpus(folder: Path) -> Corpus:
    """Read every (ids, feats) shard pair in ``folder`` into one :class:`Corpus`.

    Raises:
        FileNotFoundError: if there is no complete shard pair.
    """
    ids, feats, top1, offsets, prompt_lens = [], [], [], [torch.zeros(1, dtype=torch.int64)], []
    base = 0
    for ids_path in sorted(folder.glob("ids-*.safetensors")):
        feats_path = ids_path.with_name(ids_path.name.replace("ids-", "feats-"))
        if not feats_path.exists():
            continue
        d, f = load_file(str(ids_path)), load_file(str(feats_path))
        ids.append(d["ids"].long())
        feats.append(f["features"])
        top1.append(f["top1"].long())
        offsets.append(d["offsets"][1:] + base)
        prompt_lens.append(d["prompt_lens"].long())
        base += int(d["offsets"][-1])
    if not ids:
        raise FileNotFoundError(f"no distillation data in {folder}; run `python -m specviz train` to make it")
    return Corpus(torch.cat(ids), torch.cat(feats), torch.cat(top1), torch.cat(offsets), torch.cat(prompt_lens))
