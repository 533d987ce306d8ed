"""The longer pieces of part four's prompts (:mod:`specviz.training.prompts_part4`), built from slots: long structured
documents (:func:`long_document`: a meeting record, a manual section, a council report, each 700-1,400 characters),
short notes (:func:`short_note`), contexts of several facts with a two-part question (:func:`facts_context`) and
conversations written out in one message, ending with a request to change the assistant's last answer
(:func:`conversation`). Every function takes a seeded ``random.Random`` and returns text only."""

from __future__ import annotations

import random

_FIRST = ["Alice", "Bruno", "Chen", "Dora", "Emeka", "Fatima", "Gustav", "Hana", "Ivan", "Jonas", "Kemi", "Lucia",
          "Mateo", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Samir", "Tove", "Umar", "Vera", "Wen", "Yusuf"]
_LAST = ["Adler", "Banerjee", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Hughes", "Ibrahim", "Jansen",
         "Kowalski", "Lopez", "Moreau", "Nakamura", "Olsen", "Petrov", "Quinn", "Rossi", "Santos", "Tanaka"]
_TOWNS = ["Ashford", "Bellmoor", "Carrow", "Dunmere", "Eastwick", "Fallowby", "Glenholt", "Harwell", "Ivybridge",
          "Kestrel Bay", "Larkhill", "Marsden"]
_GROUPS = [("Sports Club", "committee"), ("Community Choir", "planning group"), ("Primary School", "parents' council"),
           ("Allotment Society", "committee"), ("Youth Theatre", "board"), ("Repair Café", "volunteer team"),
           ("Swimming Club", "committee"), ("Food Bank", "volunteer committee")]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "September", "October", "November"]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]


def _person(r: random.Random) -> str:
    return f"{r.choice(_FIRST)} {r.choice(_LAST)}"


def _items(r: random.Random, count: int, people: list[str]) -> list[str]:
    """``count`` agenda items, all on different subjects, numbered from 2."""
    return [_item(r, n + 2, people, pick) for n, pick in enumerate(r.sample(range(7), count))]


def _item(r: random.Random, n: int, people: list[str], pick: int) -> str:
    who, other = r.sample(people, 2)
    money = r.choice([150, 240, 300, 450, 600, 800, 1200])
    day = f"{r.choice(_WEEKDAYS)} {r.randint(1, 28)} {r.choice(_MONTHS)}"
    items = [
        ("Money", f"{who} reported {money * 3} in the account after the last event. The group agreed to spend up to "
                  f"{money} on new equipment. {other} will collect three quotes before buying anything."),
        ("Volunteers", f"Only {r.randint(4, 9)} people signed up for the next event, fewer than needed. {who} will "
                       f"put a notice in the newsletter, and {other} will ask the local college for helpers."),
        ("The building", f"The heating in the main room broke twice last month. {who} has called the owner, who "
                         f"promised a repair before {day}. Until then meetings move to the small room."),
        ("The summer event", f"The event will take place on {day}. {who} will book the hall and {other} will make "
                             f"the posters. Tickets will cost {r.choice([3, 5, 8])} for adults and nothing for "
                             f"children."),
        ("Website", f"{who} said the website still shows last year's dates. {other} offered to update it by the end "
                    f"of the month and to add a page with photos."),
        ("Safety", f"A first-aid kit was found to be missing plasters and gloves. {who} will refill it, and everyone "
                   f"agreed that {other} will check it every three months."),
        ("New members", f"{r.randint(3, 12)} new members joined since the last meeting. {who} will send each of "
                        f"them a welcome letter, and the group will hold an open evening on {day}."),
    ]
    title, text = items[pick]
    return f"{n}. {title}\n{text}"


def _meeting_record(r: random.Random) -> tuple[str, str, str]:
    town, (group, body) = r.choice(_TOWNS), r.choice(_GROUPS)
    people = [_person(r) for _ in range(r.randint(5, 7))]
    day = f"{r.choice(_WEEKDAYS)} {r.randint(1, 28)} {r.choice(_MONTHS)}"
    head = (f"Meeting record: {town} {group}, {body}\nDate: {day}, 19:00 to 20:{r.choice(['15', '30', '45'])}\n"
            f"Place: {r.choice(['the clubhouse', 'the school library', 'room 2 of the town hall', 'the café upstairs'])}"
            f"\nPresent: {people[0]} (chair), " + ", ".join(people[1:]) + f"\nAbsent: {_person(r)} (sent apologies)")
    parts = [head, f"1. Opening\n{people[0]} opened the meeting and the notes of the last meeting were agreed."]
    parts += _items(r, r.randint(3, 5), people)
    parts.append(f"{len(parts)}. Date of the next meeting\nThe group meets again on {r.choice(_WEEKDAYS)} "
                 f"{r.randint(1, 28)} {r.choice(_MONTHS)} at 19:00. {people[0]} closed the meeting.")
    ask = r.choice(["Sum up this meeting record in five bullet points, with each decision and the person responsible.",
                    "Summarize this meeting record in three sentences for a member who was absent.",
                    "List every task agreed in this meeting and the person who will do it."])
    return "meeting record", "\n\n".join(parts), ask


_PRODUCTS = [("Toaster", "TS-4"), ("Desk Fan", "DF-12"), ("Coffee Grinder", "CG-2"), ("Room Heater", "RH-30"),
             ("Hand Blender", "HB-7"), ("Reading Lamp", "RL-5"), ("Rice Cooker", "RC-10"), ("Air Purifier", "AP-9")]
_BRANDS = ["Northwind", "Clearpath", "Homewell", "Sunbeam Works", "Oakline", "Bluestone"]


def _manual_section(r: random.Random) -> tuple[str, str, str]:
    (product, model), brand = r.choice(_PRODUCTS), r.choice(_BRANDS)
    minutes, years = r.choice([5, 10, 20, 30]), r.choice([1, 2, 3])
    subsections = [
        ("Before you clean it", f"Always switch the {product.lower()} off and pull out the plug. Wait at least "
                                f"{minutes} minutes so that every part has cooled down. Never put the main unit in "
                                "water or in a dishwasher."),
        ("Cleaning the outer case", "Wipe the case with a soft, damp cloth and dry it at once. Do not use rough "
                                 "sponges, because they scratch the surface. Stubborn marks come off with a little "
                                 "washing-up liquid."),
        ("Parts you can remove", f"The {r.choice(['tray', 'cover', 'filter', 'bowl'])} comes off by pressing the "
                                 "release button. Wash it in warm, soapy water, rinse it and let it dry completely "
                                 "before you put it back."),
        ("Storing it", f"Keep the {product.lower()} in a dry place. Wind the cable loosely around the base; a tight "
                       "cable can break inside over time."),
        ("Lights and sounds", f"A green light means the {product.lower()} is ready. A blinking orange light means "
                              f"it is too hot and will restart by itself after about {minutes} minutes. Three short "
                              "beeps mean a part is not fitted correctly."),
        ("Guarantee", f"Your {product.lower()} has a {years}-year guarantee from the date of purchase. Keep your "
                      "receipt and do not open the case yourself, or the guarantee ends."),
    ]
    chosen, number = r.sample(subsections, r.randint(4, 6)), r.randint(3, 7)
    text = f"{brand} {model} {product}\nSection {number}: Cleaning and care\n\n" + "\n\n".join(
        f"{number}.{n + 1} {title}\n{body}" for n, (title, body) in enumerate(chosen))
    ask = r.choice([f"Explain this section in four sentences to a new owner of the {product.lower()}.", "Summarize this section as a short checklist of things to do.",
                    "Which three warnings in this section matter most? Answer briefly."])
    return "section of a product manual", text, ask


def _council_report(r: random.Random) -> tuple[str, str, str]:
    town = r.choice(_TOWNS)
    cost, weeks = r.choice([12000, 25000, 40000, 65000]), r.randint(3, 10)
    street, park = r.choice(["Mill Lane", "Station Road", "High Street", "Church Walk"]), r.choice(
        ["Riverside Park", "the Common", "Victoria Gardens", "the old quarry park"])
    sections = [
        ("Introduction", f"This report tells residents of {town} what the council did in the last three months and "
                         f"what it plans next. Council meetings take place on the first {r.choice(_WEEKDAYS)} of every "
                         "month."),
        ("Roads", f"Repairs on {street} cost {cost} and took {weeks} weeks. Two more streets will be repaired in "
                  "the autumn, and drivers will see signs a week before work starts."),
        ("Parks", f"New benches and a water fountain were put in {park}. The playground will close for two weeks "
                  "in the summer while the ground under the swings is replaced."),
        ("Summer festival", f"The festival will run for {r.choice(['two', 'three'])} days in {r.choice(_MONTHS)}. "
                            "Local groups can apply for a free stall until the end of next month."),
        ("Waste and recycling", "Food waste will be collected every week from the spring. Each household will "
                                "receive a small bin and a leaflet explaining what can go in it."),
        ("What happens next", f"The council's next open meeting is on {r.choice(_WEEKDAYS)} {r.randint(1, 28)} "
                       f"{r.choice(_MONTHS)} at 19:00. Residents who wish to speak must tell the town clerk two days "
                       "before."),
    ]
    kept = [sections[0]] + r.sample(sections[1:-1], r.randint(3, 4)) + [sections[-1]]
    text = f"{town} Town Council: quarterly report\n\n" + "\n\n".join(f"{title}\n{body}" for title, body in kept)
    ask = r.choice(["Give the town's residents a four-sentence summary of this report.",
                    "Summarize this report as five short bullet points.",
                    "What will change for residents in the coming months? Answer in three sentences."])
    return "council report", text, ask


def long_document(r: random.Random) -> tuple[str, str, str]:
    """A long structured document: (what it is, its text, what to do with it)."""
    return r.choice([_meeting_record, _manual_section, _council_report])(r)


def short_note(r: random.Random) -> tuple[str, str]:
    """A note of four to six sentences: (what it is, its text)."""
    who, room, day = _person(r), r.choice(["room 3", "the basement", "the second floor", "the main hall"]), r.choice(
        _WEEKDAYS)
    thing = r.choice([("printer", "out of toner"), ("lift", "stuck between floors"), ("coffee machine", "leaking"),
                      ("wifi router", "dropping the connection"), ("front door lock", "jamming")])
    notes = [
        ("email", f"Hello everyone, the {thing[0]} in {room} has been {thing[1]} since {day}. A technician will come "
                  f"on {r.choice(_WEEKDAYS)} morning. Until then please use the one on the ground floor. Sorry for "
                  f"the trouble. Best wishes, {who}"),
        ("note", f"The {thing[0]} in {room} was {thing[1]} three times this week. Each time, someone had to call the "
                 f"caretaker. {who} checked it and found that a part is worn out. A new part costs about "
                 f"{r.choice([40, 80, 150])} and can arrive by {day}. {who} suggests ordering it today."),
        ("report", f"{r.choice(_TOWNS)} library counted {r.randint(200, 900)} visitors last month, "
                   f"{r.randint(5, 30)} percent more than the month before. Most came on {day}s. The reading "
                   f"group has grown to {r.randint(12, 40)} members and now meets in {room}. {who}, the librarian, "
                   "would like two more volunteers for the busy days."),
    ]
    return r.choice(notes)


def facts_context(r: random.Random) -> tuple[str, str]:
    """A context of four to six facts about one place and a question on two of them: (context, question)."""
    place = r.choice(["The Hillside swimming pool", "The Northgate ferry", "The Elm Street museum",
                      "The Brookfield campsite", "The city bike scheme", "The Westbury climbing wall"])
    open_, close = r.choice([("7:30", "20:30"), ("9:00", "18:00"), ("10:00", "17:30"), ("6:30", "22:00")])
    price, extra = r.randint(3, 15), r.randint(1, 5)
    facts = [
        (f"{place} is open from {open_} to {close} on weekdays.", "What are the weekday opening hours"),
        (f"A ticket costs {price} for adults and {max(1, price - extra)} for children.",
         "how much does a child's ticket cost"),
        (f"Groups of more than {r.randint(6, 12)} people must book a week ahead.", "when must large groups book"),
        (f"Lost items are kept at the {r.choice(['front desk', 'ticket office', 'kiosk'])} for "
         f"{r.randint(7, 30)} days.", "where are lost items kept"),
        (f"Dogs are {r.choice(['welcome on a lead', 'not allowed', 'allowed only in the garden'])}.",
         "are dogs allowed"),
        (f"On {r.choice(_WEEKDAYS)}s it closes {extra} hours early for cleaning.", "which day does it close early"),
    ]
    chosen = r.sample(facts, r.randint(4, 6))
    first, second = r.sample(chosen, 2)
    question = first[1][0].upper() + first[1][1:] + ", and " + second[1][0].lower() + second[1][1:] + "?"
    return " ".join(f[0] for f in chosen), question


_POEMS = [("the moon", "The moon climbs slow and white,\nIt keeps the fields in light,\nThe owls fly out to see,\n"
                       "And shadows fall from every tree."),
          ("a city morning", "The buses hum, the shutters rise,\nThe baker wipes the sleep from his eyes,\n"
                             "A pigeon hops along the square,\nAnd coffee drifts through morning air."),
          ("the rain", "The rain taps on the glass all day,\nIt washes dust and heat away,\nThe gutters sing,"
                       " the puddles grow,\nAnd every flower drinks below."),
          ("a cat", "My cat sleeps in the sun,\nShe wakes when day is done,\nShe stretches, yawns and purrs,\n"
                    "And the whole warm house is hers."),
          ("the wind", "The wind runs down the hill,\nIt never keeps quite still,\nIt pulls the washing high,\n"
                       "And chases clouds across the sky."),
          ("a kitchen", "The kettle starts to sing,\nThe toaster gives a ring,\nThe butter melts on bread,\n"
                        "And breakfast waits for sleepy heads.")]
_REWRITES = ["a mountain", "the desert", "a snowy night", "a busy harbour", "a garden in spring", "a train journey",
             "a school playground", "the sea at night", "a forest in autumn", "a football match"]
_POEM_ASKS = ["Keep the same four-line shape.", "Keep the rhymes.", "Keep it to four lines."]
_DISHES = [("a tomato soup for four", ["1 kg of tomatoes", "2 onions", "1 litre of stock", "2 cloves of garlic",
                                         "olive oil"]),
           ("a vegetable curry for six", ["3 potatoes", "1 cauliflower", "1 tin of coconut milk", "curry paste",
                                          "rice"]),
           ("pizza for a party", ["flour", "yeast", "tomato sauce", "mozzarella", "basil"]),
           ("a picnic for two", ["a baguette", "cheese", "grapes", "2 apples", "a bottle of water"]),
           ("a roast chicken dinner", ["1 chicken", "1 kg of potatoes", "carrots", "gravy", "fresh thyme"])]
_EXTRAS = ["a green salad", "a chocolate cake", "fresh lemonade", "garlic bread", "a fruit salad", "pancakes"]
_CODE = [("rectangle_area", "def rectangle_area(width, height):\n    return width * height",
          ["also returns the perimeter", "checks that both sides are positive"]),
         ("to_minutes", "def to_minutes(hours):\n    return hours * 60",
          ["also accepts a number of extra minutes", "rounds the result to a whole number"]),
         ("greeting", "def greeting(name):\n    return 'Hello, ' + name",
          ["greets in French when asked to", "adds an exclamation mark"]),
         ("is_even", "def is_even(number):\n    return number % 2 == 0",
          ["also works for a list of numbers", "prints a message for negative numbers"]),
         ("average", "def average(values):\n    return sum(values) / len(values)",
          ["returns 0 for an empty list", "also returns the largest value"]),
         ("count_a", "def count_a(text):\n    return text.count('a')",
          ["counts any letter given as a second argument", "ignores upper and lower case"])]
_GOALS = [("get fit for a 5 km run in a month", ["Run twice a week for twenty minutes.", "Add one longer run each "
                                                 "weekend.", "Rest a day after every run."]),
          ("learn fifty new Spanish words", ["Learn five words every morning.", "Write each word on a card.",
                                             "Test yourself every Sunday."]),
          ("tidy my garage in one weekend", ["Sort everything into keep, give away and throw away.",
                                             "Put shelves on the back wall.", "Label every box."]),
          ("read more books this year", ["Read ten pages before bed.", "Carry a book in your bag.",
                                         "Join a book club."])]
_SAYINGS = [  # (English, French, Spanish)
    ("Good evening, is this table free?", "Bonsoir, cette table est-elle libre ?", "Buenas noches, ¿está libre esta mesa?"),
    ("Where is the nearest bakery?", "Où est la boulangerie la plus proche ?", "¿Dónde está la panadería más cercana?"),
    ("I would like a ticket to the coast.", "Je voudrais un billet pour la côte.", "Quisiera un billete para la costa."),
    ("What time does the last bus leave?", "À quelle heure part le dernier bus ?",
     "¿A qué hora sale el último autobús?"),
    ("My name is Lena and I live in Berlin.", "Je m'appelle Lena et j'habite à Berlin.",
     "Me llamo Lena y vivo en Berlín."),
    ("I work at a small hospital.", "Je travaille dans un petit hôpital.", "Trabajo en un hospital pequeño."),
    ("Thank you for the lovely dinner.", "Merci pour ce délicieux dîner.", "Gracias por la cena tan rica."),
    ("See you next week at the market.", "À la semaine prochaine au marché.", "Nos vemos la semana que viene en el mercado."),
]


def conversation(r: random.Random) -> str:
    """A conversation so far: a user's request, the assistant's answer and a second request to change that answer
    (a poem's subject, a list, a function, an email, a plan), as one text of ``User:``/``Assistant:`` lines."""
    kind = r.randrange(6)
    if kind == 0:
        subject, poem = r.choice(_POEMS)
        turns = [f"Write me a little poem about {subject}.", poem, f"Please change your poem so it describes "
                 f"{r.choice([w for w in _REWRITES if w != subject])} instead. {r.choice(_POEM_ASKS)}"]
    elif kind == 1:
        dish, items = r.choice(_DISHES)
        turns = [f"What should I buy to make {dish}?", "Here is your shopping list:\n" + "\n".join(f"- {i}" for i in items),
                 f"I am making {r.choice(_EXTRAS)} too. Put its ingredients on the list and show the whole list "
                 f"{r.choice(['again', 'in one go', 'sorted by shop aisle'])}."]
    elif kind == 2:
        name, body, changes = r.choice(_CODE)
        turns = [f"Please write a Python function named {name}.", body,
                 f"Change the function so it {r.choice(changes)}, and show the whole function "
                 f"{r.choice(['again', 'with a docstring'])}."]
    elif kind == 5:
        column, lang = r.choice([(1, "French"), (2, "Spanish")])
        first, second = r.sample(_SAYINGS, 2)
        turns = [f"How would you say this in {lang}: {first[0]}", first[column], f"And this one: {second[0]}",
                 second[column], r.choice(["Now list both translations, each beside its English sentence.", "Write both translations again as one short dialogue.",
                           "Which words in the two translations are the hardest for a beginner? Explain briefly."])]
    elif kind == 3:
        to, issue = r.choice([("Ms Patel", "the window in my bedroom does not close"),
                              ("Mr Olsen", "the shower has no hot water"), ("Mrs Lopez", "the oven door is broken")])
        me = r.choice(_FIRST)
        turns = [f"Help me write an email to my landlord: {issue}.",
                 f"Dear {to},\n{issue[0].upper() + issue[1:]}. Please send someone to repair it.\nBest regards,\n{me}",
                 f"Make the email more polite and say that I am at home on {r.choice(_WEEKDAYS)} afternoon."]
    else:
        goal, steps = r.choice(_GOALS)
        turns = [f"Can you give me a plan in three steps to {goal}?", "\n".join(f"{i + 1}. {s}" for i, s in enumerate(steps)),
                 f"Thanks. Step {r.randint(1, 3)} is too hard for me. Change it and write the whole plan again."]
    lines = [("User: " if i % 2 == 0 else "Assistant: ") + text for i, text in enumerate(turns)]
    return "\n".join(f"{line}\n" if i % 2 else line for i, line in enumerate(lines[:-1])) + "\n" + lines[-1]
