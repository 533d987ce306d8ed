"""The long documents of part five's prompts (:mod:`specviz.training.prompts_part5`), built from slots: meeting
minutes, product manual sections, yearly reports, newsletters, workplace policies and maintenance logs, each
2,300-3,100 characters (:func:`long_document`), so that a prompt with its task is 2.4-3.4 k characters, as the
suite's long summarization and rag prompts are. A document is a heading and sections; every section carries a
question its own text answers, so tasks can ask about the document without asking what it does not say.
Every function takes a seeded ``random.Random`` and returns text only."""

from __future__ import annotations

import random
from dataclasses import dataclass

_FIRST = ["Agnes", "Bilal", "Carmen", "Dmitri", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jakub", "Keiko", "Leon",
          "Marta", "Nikos", "Olga", "Pablo", "Rania", "Stefan", "Thea", "Ugo", "Valerie", "Wim", "Ximena", "Zoltan"]
_LAST = ["Abbott", "Brennan", "Castillo", "Dahl", "Eklund", "Ferreira", "Grant", "Haddad", "Ito", "Jovanovic",
         "Keller", "Lindqvist", "Mensah", "Novak", "Okafor", "Pereira", "Ramos", "Schultz", "Varga", "Whitfield"]
_PLACES = ["Alderton", "Beckford", "Cloverdale", "Drayton Mill", "Elmstead", "Foxley", "Greystone", "Hollins Cross",
           "Kingsmere", "Longridge", "Mapleton", "Northcote", "Oakhurst", "Pennard", "Redwick", "Stonebury"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_LOW, _HIGH = 2300, 3100  # a document's characters: at least _LOW (by its sections' sizes, tested), at most _HIGH
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

_ROOMS = ["the hall", "the back room of the library", "the pavilion", "a member’s kitchen", "the community centre"]
_RAFFLE_FOR = ["a new boat", "fruit trees", "a projector", "new chess sets"]
_PLANS = ["open on Sunday mornings", "add a second minibus", "train more volunteers", "redecorate the waiting room"]
_TIPS = ["saving rainwater for the garden", "sharing lifts to matches",
         "swapping books instead of buying them", "turning heating down by one degree"]
_OPEN_HOURS = ["9:30 to 14:00", "10:30 to 16:00", "11:00 to 15:30"]
_POLICY_ON = ["working time and leave", "hours, leave and expenses", "everyday working rules"]


@dataclass(frozen=True)
class Document:
    """A long document: ``kind`` (what it is, e.g. "set of meeting minutes"), ``text`` (heading and sections),
    ``titles`` (its section titles, in order), ``questions`` (one per section, answered by that section) and
    ``audiences`` (readers a task may write for)."""

    kind: str
    text: str
    titles: tuple[str, ...]
    questions: tuple[str, ...]
    audiences: tuple[str, ...]


class _Slots:
    """Fresh slot values for one document: people, dates, sums."""

    def __init__(self, r: random.Random, people: int = 8):
        self.r = r
        self.people = [f"{a} {b}" for a, b in zip(r.sample(_FIRST, people), r.sample(_LAST, people))]
        self.place = r.choice(_PLACES)

    def who(self) -> str:
        return self.r.choice(self.people)

    def date(self) -> str:
        return f"{self.r.choice(_DAYS)} {self.r.randint(1, 28)} {self.r.choice(_MONTHS)}"

    def money(self, low: int = 2, high: int = 90, step: int = 50) -> int:
        return self.r.randint(low, high) * step


def _assemble(r: random.Random, head: str, first: list, middle: list, last: list, numbered: str,
              extras: tuple[str, ...] = (), chapter: int = 1) -> tuple[str, list]:
    """The heading, then ``first`` sections, as many of ``middle`` (in a random order) as bring the text to a
    length drawn in [_LOW + 100, _HIGH - 200], then ``last`` ones; sections are (title, body, question). Most middle
    sections get one sentence of ``extras`` added (each used once). ``numbered``: "" (titles alone), "1." (1. Title)
    or "n.1" (section chapter.n Title). Returns (text, chosen sections); the text is at most ``_HIGH`` characters (a middle
    section that would pass it is skipped)."""
    spare = r.sample(extras, len(extras))
    middle = [(t, f"{b} {spare.pop()}" if spare and r.random() < 0.8 else b, q) for t, b, q in middle]
    aim, chosen = r.randint(_LOW + 100, _HIGH - 200), list(first)
    size = len(head) + sum(len(t) + len(b) + 8 for t, b, _ in first + last)
    for section in r.sample(middle, len(middle)):
        extra = len(section[0]) + len(section[1]) + 8
        if size + extra <= _HIGH:
            chosen.append(section)
            size += extra
        if size >= aim:
            break
    chosen += last
    labels = {"": lambda n: "", "1.": lambda n: f"{n}. ", "n.1": lambda n: f"{chapter}.{n} "}[numbered]
    text = head + "\n\n" + "\n\n".join(f"{labels(n + 1)}{t}\n{b}" for n, (t, b, _) in enumerate(chosen))
    return text, chosen


def _minutes(r: random.Random) -> tuple:
    s = _Slots(r)
    group = r.choice(["Tenants' Association", "Rowing Club", "Community Orchard", "Friends of the Museum",
                      "Cycling Club", "Chess Club", "Parent Teacher Group", "Village Hall Trust", "Walking Group",
                      "Amateur Orchestra", "Beekeepers' Society", "Hockey Club"])
    chair, clerk, a, b, c, d = s.people[:6]
    head = (f"Minutes of the {s.place} {group} committee\nHeld on {s.date()} at "
            f"{r.choice(['18:30', '19:00', '19:30', '20:00'])} in {r.choice(_ROOMS)}\n"
            f"Attending: {chair} (chair), {clerk} (minutes), " + ", ".join(s.people[2:7]) +
            f"\nApologies: {s.people[7]}")
    s.people = s.people[:7]  # the sections name only those present
    first = [("Welcome and last minutes", f"{chair} welcomed everyone, including {d}, who joined this year. The "
              f"minutes of the previous meeting were read and accepted with one correction: the hire fee was "
              f"{s.money(1, 9, 10)}, not {s.money(10, 19, 10)}.", "Which correction was made to the previous minutes?")]
    fund, spend = s.money(20, 80, 100), s.money(3, 15, 50)
    middle = [
        ("Treasurer's report", f"{a} said the account holds {fund} after the spring collection. Costs since the "
         f"last meeting were {spend}, mostly for {r.choice(['insurance', 'printing', 'new locks', 'hall hire'])}. "
         f"The committee agreed to keep at least {fund // 4} aside for repairs.", "How much money is in the account?"),
        ("Repairs", f"The {r.choice(['roof of the shed', 'main gate', 'boat ramp', 'kitchen tap', 'fire door'])} "
         f"needs fixing before winter. {b} obtained two quotes, {spend * 2} and {spend * 3}. The committee chose the "
         f"cheaper one, and {b} will book the work for the week of {s.date()}.", "Which repair quote was chosen?"),
        ("Open day", f"The open day is fixed for {s.date()} from {r.choice(_OPEN_HOURS)}. {c} will design a poster, {a} "
         f"will run the tea stall and {d} will ask the local paper to mention it. Entry will be free.",
         "When is the open day, and who runs the tea stall?"),
        ("Membership", f"There are {r.randint(40, 180)} paying members, {r.randint(3, 20)} more than last year. "
         f"The yearly fee stays at {r.randint(10, 40)}. {clerk} will send reminders to members who have not paid "
         "by the end of the month.", "Will the yearly fee change?"),
        ("Complaints", f"A neighbour wrote about noise after {r.choice(['21:00', '22:00', '22:30'])}. {chair} will "
         "reply with an apology, and the committee agreed that late events will end half an hour earlier from now "
         "on.", "What was the complaint about, and what was agreed?"),
        ("Equipment", f"{c} listed what is worn out: {r.choice(['two tables', 'six chairs', 'the kettle', 'a ladder'])}"
         f" and {r.choice(['the first-aid box', 'a fire blanket', 'the noticeboard', 'three torches'])}. Up to "
         f"{spend} may be spent on replacements; {c} will buy them and keep the receipts.",
         "How much may be spent on new equipment?"),
        ("Safety", f"The yearly safety check found that one extinguisher is out of date. {b} will replace it by "
         f"{s.date()}. Members were reminded that the back exit must never be blocked.", "What did the safety check find?"),
        ("Newsletter", f"{d} offered to edit the newsletter from next issue, taking over from {a}. It will come out "
         f"every {r.choice(['two months', 'quarter', 'month'])}, by email and on paper for those without email.",
         "Who will edit the newsletter from now on?"),
        ("Working with the school", f"The head teacher of {s.place} school asked whether pupils could visit in "
         f"{r.choice(_MONTHS)}. The committee agreed; {c} will plan a one-hour visit for about "
         f"{r.randint(15, 30)} children.", "What did the school ask for?"),
        ("Fundraising", f"The raffle raised {s.money(4, 30, 25)}. {a} proposed a second one at the open day, and "
         f"{b} will ask local shops for prizes. The money will go towards {r.choice(_RAFFLE_FOR)}.",
         "How much did the raffle raise?"),
    ]
    last = [("Any other business and next meeting", f"No other business was raised. The next meeting is on "
             f"{s.date()} at the same time. {chair} closed the meeting at {r.choice(['20:40', '21:05', '21:15'])}.",
             "When is the next meeting?")]
    extras = (f"{s.who()} asked for this to be checked again at the next meeting.", "Nobody disagreed.",
              f"{s.who()} will report back in writing within two weeks.", "The vote was unanimous.",
              f"{s.who()} thanked everyone who had helped with it.", "This item took longer than planned.")
    text, chosen = _assemble(r, head, first, middle, last, "1.", extras)
    return "set of meeting minutes", text, chosen, ("a member who missed the meeting", "the new treasurer",
                                                    "the committee's chair", "the members' newsletter")


def _manual(r: random.Random) -> tuple:
    brand = r.choice(["Tidewell", "Larchmont", "Brightforge", "Quillon", "Vantor", "Hearthley", "Corvida"])
    product, code = r.choice([("Bread Maker", "BM"), ("Robot Vacuum", "RV"), ("Sewing Machine", "SM"),
                              ("Dishwasher", "DW"), ("Garden Pump", "GP"), ("Camping Stove", "CS"),
                              ("Dehumidifier", "DH"), ("Slow Cooker", "SC"), ("Label Printer", "LP")])
    thing, minutes, hours = product.lower(), r.choice([10, 15, 20, 30, 45]), r.choice([2, 4, 6, 8])
    chapter = r.randint(2, 9)
    head = (f"{brand} {code}-{r.randint(2, 90)} {product}: owner's manual\nChapter {chapter}: "
            f"{r.choice(['Everyday use and care', 'Using, cleaning and fixing small faults', 'Care, faults and service'])}")
    part = r.choice(["filter", "tray", "lid seal", "brush", "water tank", "drip pan"])
    middle = [
        ("Setting it up", f"Place the {thing} on a flat, firm surface with at least {r.randint(5, 20)} cm of space "
         "on every side. Do not put it near a cooker, a sink or direct sunlight.", "How much space does it need around it?"),
        ("The first time you use it", f"Run it once empty for {minutes} minutes. A faint smell is normal during "
         "this first run and goes away by itself. Open a window if it bothers you.", "What should you do the first time?"),
        ("The control panel", f"Press POWER to start. The arrows change the setting, and holding both arrows for "
         f"{r.choice([3, 5])} seconds locks the buttons, which is useful if children are around.",
         "How do you lock the buttons?"),
        ("Cleaning", f"Unplug the {thing} and let it cool for {minutes} minutes. Wipe the outside with a damp cloth. "
         f"Take out the {part} and wash it in warm water with a drop of washing-up liquid, then dry it fully.",
         f"How should the {part} be cleaned?"),
        ("Regular care", f"Every {hours} weeks, check the {part} for cracks and the cable for damage. Replace a "
         f"damaged {part} with an original spare; other parts may not fit tightly.", f"How often should the {part} be checked?"),
        ("Lights and codes", f"A steady blue light means ready. A flashing amber light means the {part} is missing "
         f"or loose. Code E{r.randint(1, 9)} means it got too hot: switch off and wait {minutes} minutes.",
         "What does a flashing amber light mean?"),
        ("If it does not start", "Check that the plug is in and the socket works with another device. Check that "
         f"the {part} clicks into place. If it still does not start, call the service line.", "What should you check if it does not start?"),
        ("If it is noisy", f"Some humming is normal. A rattle usually means the {part} is not seated. Loud grinding "
         "means a worn part: stop using it and contact the service line.", "What does a loud grinding noise mean?"),
        ("Storing it", f"Empty and dry every part before storing. Keep it in its box in a dry room above "
         f"{r.choice([5, 10])} degrees, with the cable loosely coiled.", "How should it be stored?"),
        ("Safety", f"Keep children away while it runs. Never pull the plug by the cable. Never use the {thing} with "
         "wet hands or if the case is cracked.", "Name one safety rule."),
        ("Service and spare parts", f"Spare parts can be ordered from your dealer for {r.choice([5, 7, 10])} years "
         "after the model was last sold. Give the model number on the label under the base.",
         "For how long are spare parts available?"),
        ("Guarantee", f"The guarantee lasts {r.choice(['one year', 'two years', 'three years'])} from the date on "
         "your receipt. It does not cover damage from falls, misuse or repairs by others.", "How long is the guarantee?"),
        ("Disposal", f"Do not put the {thing} in household waste at the end of its life. Take it to a recycling "
         "point for electrical goods; many shops take old machines back.", "How should it be disposed of?"),
    ]
    extras = ("Read this part before you call for help.", f"Never open the case of the {thing} yourself.",
              "The quick guide in the box shows the same steps with pictures.",
              f"Our service line can talk you through it on weekdays from 8:00 to {r.choice([17, 18, 20])}:00.",
              "Using other brands' parts can cause faults.", f"Keep the {thing} unplugged while you do this.")
    text, chosen = _assemble(r, head, [], middle, [], "n.1", extras, chapter)
    return f"chapter of a {thing} manual", text, chosen, ("a new owner", "an older relative who has never used one",
                                                         "a shop assistant", "a child helping at home")


def _report(r: random.Random) -> tuple:
    s = _Slots(r)
    body = r.choice(["Parish Council", "Library Service", "Leisure Centre", "Community Bus Service", "Health Centre",
                     "Water Board", "Secondary School", "Housing Cooperative"])
    year = r.randint(2019, 2030)
    head = f"{s.place} {body}: yearly report {year}\nPrepared by {s.who()}, {r.choice(['secretary', 'manager', 'clerk'])}"
    users, change, budget = r.randint(900, 9000), r.randint(3, 25), s.money(200, 900, 100)
    first = [("Summary of the year", f"This report covers April {year - 1} to March {year}. The {body.lower()} "
              f"served about {users} people, {change} percent more than the year before, and finished the year within "
              "its budget.", "How many people were served?")]
    middle = [
        ("Money", f"The budget was {budget}. Staff cost just over half of it, buildings about a fifth, and the rest "
         f"went on supplies. A surplus of {s.money(5, 40, 100)} was carried into next year.", "What was the budget?"),
        ("Staff", f"There are {r.randint(6, 40)} staff and {r.randint(10, 60)} volunteers. {s.who()} retired after "
         f"{r.randint(12, 30)} years, and {s.who()} joined in {r.choice(_MONTHS)} as deputy.", "Who retired this year?"),
        ("Building work", f"The {r.choice(['roof', 'heating', 'car park', 'entrance ramp', 'windows'])} was renewed "
         f"over {r.randint(3, 12)} weeks in the summer. Services moved to {r.choice(['the school', 'a temporary cabin', 'the church hall'])} "
         "during the work, and nobody was turned away.", "What building work was done?"),
        ("What people told us", f"A survey drew {r.randint(120, 700)} replies. Most people liked the staff; the main "
         f"wish was longer opening on {r.choice(_DAYS)}s, which will be tried from {r.choice(_MONTHS)}.",
         "What did people wish for in the survey?"),
        ("Complaints", f"We received {r.randint(4, 30)} complaints, half about waiting times. All were answered "
         f"within {r.choice([5, 10, 14])} days, and a new booking system should shorten waits.",
         "What were most complaints about?"),
        ("Environment", f"Energy use fell by {r.randint(5, 20)} percent after new lighting was fitted. Paper forms "
         "were replaced by online ones where people wanted them, and a bike rack was added.", "How much did energy use fall?"),
        ("Events", f"{r.randint(8, 40)} events took place, including a {r.choice(['summer fair', 'open week', 'history talk', 'health day'])} "
         f"that drew about {r.randint(100, 600)} visitors on {s.date()}.", "Which event drew the most visitors?"),
        ("Working with others", f"We worked with {s.place} {r.choice(['college', 'food bank', 'youth club', 'sports club'])} "
         f"on a shared project, run by {s.who()}, that will continue next year.", "Which partner did it work with?"),
        ("Risks", f"The main risk is the cost of {r.choice(['energy', 'repairs', 'insurance', 'staff cover'])}, which "
         f"rose by {r.randint(8, 30)} percent. A reserve has been set aside to meet it.", "What is the main risk?"),
        ("Plans for next year", f"Next year we plan to {r.choice(_PLANS)} "
         f"and to hold a public meeting on {s.date()} to hear ideas.", "What is planned for next year?"),
    ]
    middle += [
        ("Opening hours", f"Opening hours stayed the same, except on {r.choice(_DAYS)}s in winter, when we closed at "
         f"{r.choice(['16:00', '17:00'])} to save heating. Public holidays followed the usual pattern.",
         "When did it close early in winter?"),
        ("Accidents and safety", f"{r.randint(0, 6)} minor accidents were recorded, none serious. All staff renewed "
         f"their fire training in {r.choice(_MONTHS)}, and a new defibrillator was fitted by the entrance.",
         "How many accidents were recorded?"),
        ("Thanks", f"Our thanks go to the volunteers, who gave about {r.randint(2, 9)},{r.randint(100, 999)} hours "
         f"between them, and to {s.who()}, who led the survey work.", "How many hours did volunteers give?"),
    ]
    extras = ("Figures are rounded to the nearest whole number.", "The board discussed this at length in autumn.",
              f"{s.who()} can give more detail on request.", "This is in line with the plan set two years ago.",
              "We will report on progress in next year's report.", "It is too early to say whether this will last.",
              "Similar services nearby saw the same pattern.")
    last = [("Contact", f"Questions about this report go to {s.who()} by email or by phone on weekday mornings. "
             "Copies are available at the front desk.", "Who answers questions about the report?")]
    text, chosen = _assemble(r, head, first, middle, last, "", extras)
    return "yearly report", text, chosen, ("local residents", "a new board member", "the local newspaper",
                                           "a volunteer", "a school class")


def _newsletter(r: random.Random) -> tuple:
    s = _Slots(r)
    source = r.choice(["Residents' Newsletter", "School Newsletter", "Sports Club News", "Garden Society Bulletin",
                       "Street Association News"])
    month = r.randrange(12)
    head = f"{s.place} {source}, {_MONTHS[month]} issue\nEdited by {s.who()}"
    season = ["winter", "spring", "summer", "autumn", "winter"][(month + 1) // 3]
    first = [("Hello from the editor", f"Welcome to the {season} issue. "
              f"Thanks to everyone who sent news; please keep it coming to {s.who()} by the 20th of the month.",
              "By when should news be sent?")]
    middle = [
        ("Dates for the diary", f"Quiz night: {s.date()}, 19:30. Litter pick: {s.date()}, 10:00. Coffee morning: "
         f"{s.date()}, 10:30. All are welcome and none cost anything.", "When is the quiz night?"),
        ("Road works", f"{r.choice(['Mill Street', 'Chapel Road', 'Orchard Way', 'Bridge Lane'])} will be closed for "
         f"{r.randint(2, 6)} weeks from {s.date()} while pipes are replaced. Buses will stop on the main road instead.",
         "Which road will be closed, and for how long?"),
        ("A warm welcome", f"{s.who()} has joined as {r.choice(['caretaker', 'coach', 'secretary', 'school nurse'])}. "
         "You will find them in the office most mornings; do say hello.", "Who has just joined?"),
        ("Thank you", f"Our {r.choice(['book sale', 'bake sale', 'sponsored walk', 'car wash'])} raised "
         f"{s.money(4, 40, 25)}. Special thanks to {s.who()}, who organised it, and to everyone who baked, sold or bought.",
         "How much did the sale raise?"),
        ("Lost and found", f"A {r.choice(['blue umbrella', 'set of keys', 'child’s red coat', 'pair of glasses'])} was "
         f"found after the last event. It is waiting with {s.who()} until the end of the month.",
         "What was found, and who has it?"),
        ("Volunteers needed", f"We need {r.randint(3, 10)} helpers for {r.choice(['the summer fair', 'the garden rota', 'match days', 'the reading club'])}. "
         "Even one hour helps. Reply to this newsletter to sign up.", "How many helpers are needed?"),
        ("Results", f"Our {r.choice(['under-12s', 'quiz team', 'choir', 'first team'])} came {r.choice(['first', 'second', 'third'])} "
         f"out of {r.randint(6, 16)} in the {r.choice(_MONTHS)} competition. Well done to all!", "How did the team do?"),
        ("Reminder about bins", f"Bins are now emptied on {r.choice(_DAYS)}s. Please put them out the night before and "
         "bring them in the same day.", "On which day are bins emptied?"),
        ("Tip of the month", f"{s.who()} suggests {r.choice(_TIPS)}. "
         "Send us your own tips for the next issue.", "What is this month's tip?"),
        ("From the treasurer", f"Subscriptions of {r.randint(5, 30)} are due by {s.date()}. You can pay online or in "
         "cash at any event; receipts are given on request.", "When are subscriptions due?"),
    ]
    middle += [
        ("Club room", f"The club room has been repainted {r.choice(['pale green', 'white', 'light blue'])} by "
         f"{r.randint(4, 12)} volunteers over two weekends. The old sofa has gone; new chairs arrive on {s.date()}.",
         "Who repainted the club room?"),
        ("Health walk", f"A gentle health walk now leaves the {r.choice(['library', 'church', 'station', 'park gate'])} "
         f"every {r.choice(_DAYS)} at 10:00. It takes about an hour, and {s.who()} leads it.", "When does the health walk leave?"),
        ("Parking", "Please do not park on the grass verge by the entrance; the mower cannot get past and the "
         f"ground is soft. The car park on {r.choice(['Mill Street', 'Chapel Road', 'Park Lane'])} is free after 18:00.",
         "Where should people not park?"),
        ("Swap shelf", "The swap shelf by the door now holds books, puzzles and seeds. Take one, leave one; please "
         "keep it tidy and take back anything that has not moved in a month.", "How does the swap shelf work?"),
        ("Meet the committee", f"{s.who()} chairs the committee this year, {s.who()} keeps the accounts and "
         f"{s.who()} looks after the website. They meet on the first {r.choice(_DAYS)} of each month.",
         "Who keeps the accounts?"),
    ]
    extras = ("Everyone is welcome, members or not.", f"Ask {s.who()} if you have any questions.",
              "Photos will be on the noticeboard soon.", "Please tell your neighbours too.",
              "Children must come with an adult.", "We will send a reminder a few days before.",
              "Thank you for your patience.")
    last = [("Next issue", f"The next newsletter comes out on {s.date()}. Items of up to 150 words are welcome.",
             "When does the next issue come out?")]
    text, chosen = _assemble(r, head, first, middle, last, "", extras)
    return "newsletter", text, chosen, ("a family new to the area", "a busy parent", "an older neighbour",
                                        "someone who never reads newsletters")


def _policy(r: random.Random) -> tuple:
    s = _Slots(r)
    firm = r.choice(["Greenleaf Nurseries", "Harbour Print Shop", "Pinewood Dental Practice", "Sunrise Cleaning Co.",
                     "Corner Bookshop", "Valley Vets", "Riverside Café", "Northline Couriers"])
    days, notice, start = r.choice([20, 22, 25, 28]), r.choice([2, 3, 4]), r.choice(["7:30", "8:00", "8:30", "9:00"])
    head = (f"{firm}: staff policy on {r.choice(_POLICY_ON)}\n"
            f"In force from {s.date()}; replaces the version of last year")
    middle = [
        ("Working hours", f"Normal hours are {start} to {r.choice(['16:00', '16:30', '17:00', '17:30'])}, with a "
         f"{r.choice([30, 45, 60])}-minute lunch break. Part-time hours are agreed with your manager.",
         "What are the normal working hours?"),
        ("Holidays", f"Full-time staff have {days} days of paid holiday a year plus public holidays. Ask at least "
         f"{notice} weeks ahead through the staff calendar; {s.who()} approves requests.", "How many days of holiday do full-time staff get?"),
        ("Being ill", f"If you are ill, phone {s.who()} before {start}. A doctor's note is needed after "
         f"{r.choice([3, 5, 7])} days off in a row.", "When is a doctor's note needed?"),
        ("Working from home", f"Office staff may work from home up to {r.choice(['one day', 'two days'])} a week. "
         "Tell your team the day before and be reachable by phone during normal hours.", "How often may office staff work from home?"),
        ("Expenses", f"Travel for work is paid at {r.choice([25, 30, 35, 40])} cents per kilometre. Hand in receipts "
         "by the last Friday of the month to be paid with that month's wages.", "How is travel for work paid?"),
        ("Training", f"Everyone may spend {r.choice([2, 3, 5])} paid days a year on training. New staff complete "
         "a first-aid course in their first three months.", "How many training days are there?"),
        ("Uniform and equipment", f"The firm provides {r.choice(['two shirts', 'work boots', 'an apron', 'a fleece'])} "
         "each year. Lost or broken equipment must be reported the same day.", "What does the firm provide each year?"),
        ("Phones and computers", "Work computers are for work. Short personal calls are fine during breaks. Never "
         "share your password, not even with a colleague.", "Can you share your password with a colleague?"),
        ("Raising a concern", f"Speak first to your manager. If that does not help, write to {s.who()}, who will "
         f"reply within {r.choice([5, 10])} working days.", "Who do you write to if a concern is not solved?"),
        ("Pay", "Wages are paid on the 28th of each month, or the working day before. Each payslip arrives by email; "
         f"ask {s.who()} if something on it looks wrong.", "When are wages paid?"),
        ("Leaving the firm", f"Give {r.choice(['two weeks', 'one month', 'four weeks'])} of notice in writing. "
         "Return keys and equipment on your last day.", "How much notice must you give?"),
    ]
    middle += [
        ("Breaks and rest", f"Staff who work more than six hours take a break of at least {r.choice([20, 30])} "
         "minutes. There must be eleven hours between the end of one shift and the start of the next.",
         "How long is the break after six hours?"),
        ("Overtime", f"Overtime must be agreed in advance with {s.who()}. It is paid at the "
         "usual hourly pay plus half, or taken as time off within two months.", "How is overtime paid?"),
        ("Lost property and keys", "Keys are signed out at the front desk and returned the same day. Lost keys "
         "must be reported at once, because the locks may need changing.", "What must be done if a key is lost?"),
        ("Parental leave", f"Parents may take up to {r.choice([10, 12, 16])} weeks of unpaid leave per child, in "
         "blocks of at least one week. Give two months' notice where you can.", "How much parental leave is allowed?"),
    ]
    extras = ("Your manager can explain how this works in practice.", "This rule applies to all staff.",
              f"Write to {s.who()} if your case is unusual.", "This part has not changed since last year.",
              "This part is new in this version.", "Part-time staff have the same rights in proportion.",
              "Any change to this will be announced a month ahead.")
    text, chosen = _assemble(r, head, [], middle, [], "1.", extras)
    return "staff policy", text, chosen, ("a new employee", "a part-time worker", "a manager", "a summer student")


_LOG_EVENTS = [
    ("boiler pressure low", "topped up and tested", "Why was the boiler checked?"),
    ("lift stopped on floor {n}", "engineer reset it; door sensor to be replaced", "What happened to the lift?"),
    ("leak under the sink in flat {n}", "washer replaced", "Where was the leak?"),
    ("lights out in the stairwell", "{n} bulbs replaced", "What was done about the stairwell lights?"),
    ("front door not closing", "hinge oiled and closer adjusted", "What was wrong with the front door?"),
    ("fire alarm test", "all {n} alarms sounded; one battery changed", "What did the fire alarm test show?"),
    ("bins overflowing after the holiday", "extra collection booked", "What was done about the bins?"),
    ("window cracked in the laundry room", "taped; glazier booked for {d}", "When is the glazier coming?"),
    ("heating off in flats {n} and {m}", "valve freed; heating back the same evening", "Which flats had no heating?"),
    ("smell of gas reported by a tenant", "checked by the gas company: a loose cooker pipe in flat {n}",
     "What caused the smell of gas?"),
    ("car park gate stuck open", "motor reset; gate works again", "What was done about the car park gate?"),
    ("mould in the bike store", "cleaned and a vent fitted", "Where was the mould found?"),
    ("roof gutter blocked by leaves", "cleared from a ladder by two staff", "Why was the gutter cleared?"),
    ("water meter reading", "reading {n}{m}4 taken and sent in", "What was the water meter reading?"),
]


def _log(r: random.Random) -> tuple:
    s = _Slots(r)
    building = r.choice(["Harbour View flats", "Elm Court", "the Old Mill apartments", "Kingfisher House",
                         "Meadow Terrace", "the Station Road block"])
    month, day = r.randrange(12), r.randint(1, 5)
    head = (f"Maintenance log: {building}, {s.place}\nKept by {s.who()}, caretaker\nPeriod: {_MONTHS[month]} to "
            f"{_MONTHS[(month + 2) % 12]}; entries in date order")
    entries = []
    notes = ["", "", " Tenants told by note.", " Cost: {c}.", " Check again next week.", " Reported to the owner.",
             " Parts ordered.", " Photo taken for the file."]
    for problem, action, question in r.sample(_LOG_EVENTS, len(_LOG_EVENTS)) * 2:
        day += r.randint(1, 4)
        if day > 28:
            month, day = (month + 1) % 12, day - 27
        fill = {"n": r.randint(2, 9), "m": r.randint(10, 19), "d": s.date(), "c": s.money(1, 30, 10)}
        when = f"{day} {_MONTHS[month]}, {r.randint(7, 18):02d}:{r.choice(['00', '15', '30', '45'])}"
        entries.append((when, f"Problem: {problem.format(**fill)}. Done: {action.format(**fill)}."
                              f"{r.choice(notes).format(**fill)} Signed: {s.who()}.", question))
    size, kept = len(head), []  # entries keep their date order, so they are not shuffled by _assemble
    aim = r.randint(2400, 2800)
    for entry in entries:
        if size >= aim:
            break
        kept.append(entry)
        size += len(entry[0]) + len(entry[1]) + 3
    text = head + "\n\n" + "\n\n".join(f"{t}\n{b}" for t, b, _ in kept)
    return "maintenance log", text, kept, ("the building's owner", "a new caretaker", "the tenants",
                                           "the insurance company")


_KINDS = (_minutes, _manual, _report, _newsletter, _policy, _log)


def long_document(r: random.Random) -> Document:
    """A long structured document of one of six kinds (minutes, manual chapter, yearly report, newsletter, staff
    policy, maintenance log), 2,300-3,100 characters."""
    kind, text, chosen, audiences = r.choice(_KINDS)(r)
    return Document(kind, text, tuple(t for t, _, _ in chosen), tuple(q for _, _, q in chosen), audiences)


def document_sections(r: random.Random, count: int) -> tuple[str, str]:
    """``count`` sections of one document (a medium context, about 300-1,300 characters) and a question one of them
    answers: (context, question)."""
    kind, text, chosen, _ = r.choice(_KINDS)(r)
    picked = r.sample(chosen, min(count, len(chosen)))
    return "\n\n".join(f"{t}\n{b}" for t, b, _ in picked), r.choice(picked)[2]
