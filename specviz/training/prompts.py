"""Parts one and two of the self-distillation prompts (:func:`distill_prompts`): a fixed, seeded set of prompts we
wrote from templates and slots (everyday chat, explanation, summarization, translation, code, math, rewriting,
grounded questions); see :mod:`specviz.training.distill` for the recipe they feed."""

from __future__ import annotations

import random
import re

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
