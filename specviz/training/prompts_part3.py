"""Part three of the self-distillation prompts (:func:`part_three_prompts`): forms of request beyond the suite's
task forms (everyday requests, open questions, stories, dialogues, constrained instructions, follow-ups, descriptions,
letters), each prompt tagged with its form (:data:`FORMS_3`)."""

from __future__ import annotations

import random

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
