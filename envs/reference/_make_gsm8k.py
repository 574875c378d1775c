"""Generate the synthetic GSM8K-style word problems bundled in datasets/gsm8k_synthetic.jsonl.

The problems are the project's own: templated multi-step stories with random names, items and
numbers, whose answers are computed here, so the `gsm8k` environment runs offline and its
answers are known to be right. Same seed -> byte-identical file.

    python -m envs.reference._make_gsm8k --seed 0 --n 200 --out datasets/gsm8k_synthetic.jsonl

Each row: `id`, `question`, `answer` (worked reasoning ending in "#### N", as GSM8K writes it).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from envs.reference._data import generator_main

NAMES = [
    "Amara",
    "Bilal",
    "Chen",
    "Dalia",
    "Emeka",
    "Farah",
    "Goran",
    "Hana",
    "Ines",
    "Jonas",
    "Kemal",
    "Lucia",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sanjay",
    "Tomoko",
    "Uma",
    "Viktor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zofia",
    "Arjun",
    "Beatriz",
    "Dmitri",
    "Leila",
]
SNACKS = ["muffins", "cookies", "dumplings", "tarts", "pretzels", "brownies", "scones", "samosas"]
GOODS = [
    ("notebook", "notebooks"),
    ("pen", "pens"),
    ("mug", "mugs"),
    ("candle", "candles"),
    ("scarf", "scarves"),
    ("plant pot", "plant pots"),
    ("puzzle", "puzzles"),
    ("lamp", "lamps"),
]
FRUITS = ["apples", "plums", "oranges", "pears", "peaches", "lemons"]
PLANTS = ["tomato plants", "sunflowers", "lettuce heads", "pepper plants", "tulips", "basil plants"]

# A template draws its numbers from `rng` and returns (question, reasoning lines, answer).
Problem = tuple[str, list[str], int]


def shopping(rng: random.Random, name: str) -> Problem:
    (_one_a, many_a), (_one_b, many_b) = rng.sample(GOODS, 2)
    count_a, price_a = rng.randint(2, 6), rng.randint(2, 9)
    count_b, price_b = rng.randint(2, 5), rng.randint(3, 15)
    spent = count_a * price_a + count_b * price_b
    bill = next(b for b in (20, 50, 100, 200) if b > spent)
    question = (
        f"{name} buys {count_a} {many_a} for ${price_a} each and {count_b} {many_b} for "
        f"${price_b} each. {name} pays with a ${bill} bill. How much change, in dollars, "
        f"does {name} get back?"
    )
    steps = [
        f"The {many_a} cost {count_a} * {price_a} = {count_a * price_a} dollars.",
        f"The {many_b} cost {count_b} * {price_b} = {count_b * price_b} dollars.",
        f"Altogether {name} spends {count_a * price_a} + {count_b * price_b} = {spent} dollars.",
        f"The change is {bill} - {spent} = {bill - spent} dollars.",
    ]
    return question, steps, bill - spent


def savings(rng: random.Random, name: str) -> Problem:
    weekly, weeks = rng.randint(5, 40), rng.randint(3, 12)
    gift = rng.randint(1, 10) * 5
    saved = weekly * weeks + gift
    spend = rng.randint(1, saved // 10) * 5 if saved >= 10 else 0
    question = (
        f"{name} saves ${weekly} every week for {weeks} weeks. A relative then gives "
        f"{name} ${gift}. {name} spends ${spend} on a concert ticket. How many dollars "
        f"does {name} have left?"
    )
    steps = [
        f"Weekly savings add up to {weekly} * {weeks} = {weekly * weeks} dollars.",
        f"With the gift that is {weekly * weeks} + {gift} = {saved} dollars.",
        f"After the ticket {name} has {saved} - {spend} = {saved - spend} dollars.",
    ]
    return question, steps, saved - spend


def baking(rng: random.Random, name: str) -> Problem:
    snack = rng.choice(SNACKS)
    trays, per_tray = rng.randint(2, 6), rng.randint(6, 16)
    total = trays * per_tray
    friends = rng.randint(2, 5)
    each = rng.randint(1, max(1, (total - 1) // friends // 2))
    eaten = rng.randint(1, 3)
    left = total - friends * each - eaten
    question = (
        f"{name} bakes {trays} trays of {snack} with {per_tray} {snack} on each tray. "
        f"{name} gives {each} {snack} to each of {friends} friends and eats {eaten}. "
        f"How many {snack} are left?"
    )
    steps = [
        f"{name} bakes {trays} * {per_tray} = {total} {snack}.",
        f"The friends get {friends} * {each} = {friends * each} {snack}.",
        f"Left over: {total} - {friends * each} - {eaten} = {left} {snack}.",
    ]
    return question, steps, left


def reading(rng: random.Random, name: str) -> Problem:
    per_day, days = rng.randint(8, 30), rng.randint(2, 6)
    read = per_day * days + 2 * per_day
    pages = read + rng.randint(10, 150)
    question = (
        f"A book has {pages} pages. {name} reads {per_day} pages a day for {days} days, "
        f"then reads twice as many pages on the next day. How many pages are left to read?"
    )
    steps = [
        f"In {days} days {name} reads {per_day} * {days} = {per_day * days} pages.",
        f"The next day {name} reads 2 * {per_day} = {2 * per_day} pages.",
        f"So far {per_day * days} + {2 * per_day} = {read} pages are read.",
        f"Pages left: {pages} - {read} = {pages - read}.",
    ]
    return question, steps, pages - read


def garden(rng: random.Random, name: str) -> Problem:
    plant = rng.choice(PLANTS)
    rows, per_row = rng.randint(3, 9), rng.randint(4, 12) * 3
    total = rows * per_row
    lost = total // 3
    extra = rng.randint(2, 20)
    question = (
        f"{name} plants {rows} rows of {plant} with {per_row} in each row. A third of them "
        f"are eaten by rabbits, and then {name} plants {extra} more. How many {plant} does "
        f"{name} have now?"
    )
    steps = [
        f"{name} plants {rows} * {per_row} = {total} {plant}.",
        f"Rabbits eat {total} / 3 = {lost}, leaving {total} - {lost} = {total - lost}.",
        f"After planting more: {total - lost} + {extra} = {total - lost + extra}.",
    ]
    return question, steps, total - lost + extra


def travel(rng: random.Random, name: str) -> Problem:
    speed_a, hours_a = rng.randint(4, 12) * 5, rng.randint(1, 4)
    speed_b, hours_b = rng.randint(4, 12) * 5, rng.randint(1, 3)
    first, second = speed_a * hours_a, speed_b * hours_b
    question = (
        f"{name} drives at {speed_a} km per hour for {hours_a} hours, then at {speed_b} km "
        f"per hour for {hours_b} hours. How many kilometres does {name} drive in total?"
    )
    steps = [
        f"The first part is {speed_a} * {hours_a} = {first} km.",
        f"The second part is {speed_b} * {hours_b} = {second} km.",
        f"In total {first} + {second} = {first + second} km.",
    ]
    return question, steps, first + second


def wages(rng: random.Random, name: str) -> Problem:
    rate, hours, days = rng.randint(12, 30), rng.randint(3, 8), rng.randint(2, 6)
    bonus = rng.randint(1, 8) * 10
    pay = rate * hours * days
    question = (
        f"{name} earns ${rate} an hour and works {hours} hours a day for {days} days. "
        f"At the end {name} also gets a ${bonus} bonus. How many dollars does {name} earn?"
    )
    steps = [
        f"Each day {name} earns {rate} * {hours} = {rate * hours} dollars.",
        f"Over {days} days that is {rate * hours} * {days} = {pay} dollars.",
        f"With the bonus: {pay} + {bonus} = {pay + bonus} dollars.",
    ]
    return question, steps, pay + bonus


def ages(rng: random.Random, name: str) -> Problem:
    other = rng.choice([n for n in NAMES if n != name])
    age, gap, years = rng.randint(6, 40), rng.randint(2, 15), rng.randint(2, 10)
    question = (
        f"{name} is {age} years old. {other} is {gap} years older than {name}. What will "
        f"the sum of their ages be in {years} years?"
    )
    steps = [
        f"{other} is {age} + {gap} = {age + gap} years old.",
        f"In {years} years {name} will be {age + years} and {other} will be {age + gap + years}.",
        f"The sum is {age + years} + {age + gap + years} = {2 * age + gap + 2 * years}.",
    ]
    return question, steps, 2 * age + gap + 2 * years


def sharing(rng: random.Random, name: str) -> Problem:
    fruit = rng.choice(FRUITS)
    people = rng.randint(2, 6)
    each = rng.randint(2, 9)
    eaten = rng.randint(1, 6)
    total = people * each + eaten
    # Pick bags/per-bag so that bags * per_bag == total when possible; otherwise add loose fruit.
    per_bag = rng.choice([d for d in range(3, 13) if total // d >= 1])
    bags, loose = divmod(total, per_bag)
    loose_text = f", plus {loose} extra" if loose else ""
    question = (
        f"{name} buys {bags} bags of {fruit} with {per_bag} in each bag{loose_text}. "
        f"{name} eats {eaten} and shares the rest equally among {people} people. How many "
        f"{fruit} does each person get?"
    )
    steps = [
        f"{name} has {bags} * {per_bag}" + (f" + {loose}" if loose else "") + f" = {total} {fruit}.",
        f"After eating {eaten} there are {total} - {eaten} = {total - eaten}.",
        f"Each person gets {total - eaten} / {people} = {each}.",
    ]
    return question, steps, each


def discount(rng: random.Random, name: str) -> Problem:
    one, many = rng.choice(GOODS)
    price = rng.randint(2, 20) * 10
    percent = rng.choice([10, 20, 25, 50])
    count = rng.randint(2, 5)
    off = price * percent // 100
    question = (
        f"A {one} costs ${price}. The shop takes {percent}% off the price, and {name} buys "
        f"{count} {many}. How many dollars does {name} pay?"
    )
    steps = [
        f"The discount is {percent}% of {price} = {off} dollars.",
        f"Each {one} costs {price} - {off} = {price - off} dollars.",
        f"{count} {many} cost {count} * {price - off} = {count * (price - off)} dollars.",
    ]
    return question, steps, count * (price - off)


TEMPLATES: list[Callable[[random.Random, str], Problem]] = [
    shopping,
    savings,
    baking,
    reading,
    garden,
    travel,
    wages,
    ages,
    sharing,
    discount,
]


def generate(n: int, seed: int = 0) -> list[dict[str, str]]:
    """`n` distinct problems, cycling through the templates in a seeded order."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    attempts = 0
    while len(rows) < n:
        attempts += 1
        if attempts > 50 * n + 100:
            raise RuntimeError(f"could not draw {n} distinct problems (got {len(rows)})")
        template = TEMPLATES[len(rows) % len(TEMPLATES)]
        question, steps, answer = template(rng, rng.choice(NAMES))
        if question in seen or answer < 0:
            continue
        seen.add(question)
        rows.append(
            {
                "id": f"synth-{len(rows):04d}",
                "question": question,
                "answer": "\n".join(steps) + f"\n#### {answer}",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    generator_main(
        generate,
        description=__doc__.splitlines()[0],
        default_n=200,
        default_out="datasets/gsm8k_synthetic.jsonl",
        noun="problems",
        argv=argv,
    )


if __name__ == "__main__":
    main()
