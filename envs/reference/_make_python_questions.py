"""Generate the computational questions bundled in datasets/python_questions.jsonl.

Each question is hard to do in one's head but easy with a few lines of Python, which is the
point of the `python` environment. Every row carries the reference `code` the oracle policy
runs and the `answer`; the generator runs the code and checks it against an independent
computation (a formula or a different algorithm) before writing, so the answers are verified.
Same seed -> byte-identical file.

    python -m envs.reference._make_python_questions --seed 0 --n 30 --out datasets/python_questions.jsonl
"""

from __future__ import annotations

import contextlib
import io
import math
import random
from collections.abc import Callable

from envs.reference._data import generator_main

# A family draws its parameters from `rng` and returns (question, code, independent answer).
Question = tuple[str, str, int]


def _sieve(limit: int) -> list[int]:
    flags = bytearray([1]) * (limit + 1)
    flags[0:2] = b"\x00\x00"
    for p in range(2, math.isqrt(limit) + 1):
        if flags[p]:
            flags[p * p :: p] = bytearray(len(flags[p * p :: p]))
    return [i for i, f in enumerate(flags) if f]


def sum_of_primes(rng: random.Random) -> Question:
    n = rng.randrange(100, 2001, 50)
    code = (
        f"primes = []\ncandidate = 2\nwhile len(primes) < {n}:\n"
        "    if all(candidate % p for p in primes if p * p <= candidate):\n"
        "        primes.append(candidate)\n    candidate += 1\nprint(sum(primes))\n"
    )
    return f"What is the sum of the first {n} prime numbers?", code, sum(_sieve(20000)[:n])


def divisor_count(rng: random.Random) -> Question:
    exponents = {p: rng.randint(0, e) for p, e in [(2, 6), (3, 4), (5, 3), (7, 2), (11, 2), (13, 1), (17, 1)]}
    number = math.prod(p**e for p, e in exponents.items())
    code = (
        f"from math import isqrt\nn = {number}\ncount = 0\nfor d in range(1, isqrt(n) + 1):\n"
        "    if n % d == 0:\n        count += 1 if d * d == n else 2\nprint(count)\n"
    )
    return (
        f"How many positive divisors does {number} have?",
        code,
        math.prod(e + 1 for e in exponents.values()),
    )


def digit_sum_of_power(rng: random.Random) -> Question:
    base, exponent = rng.choice([2, 3, 7]), rng.randrange(100, 1001)
    code = f"print(sum(int(digit) for digit in str({base} ** {exponent})))\n"
    value, total = base**exponent, 0
    while value:
        value, digit = divmod(value, 10)
        total += digit
    return f"What is the sum of the decimal digits of {base}^{exponent}?", code, total


def prime_count(rng: random.Random) -> Question:
    limit = rng.randrange(10_000, 200_001, 1000)
    code = (
        f"limit = {limit}\nis_prime = [True] * limit\nis_prime[0] = is_prime[1] = False\n"
        "for i in range(2, int(limit ** 0.5) + 1):\n    if is_prime[i]:\n"
        "        for j in range(i * i, limit, i):\n            is_prime[j] = False\nprint(sum(is_prime))\n"
    )
    return f"How many prime numbers are less than {limit}?", code, len(_sieve(limit - 1))


def multiples(rng: random.Random) -> Question:
    a, b = rng.sample([3, 4, 6, 7, 9, 11, 13, 15], 2)
    n = rng.randrange(10_000, 1_000_001, 500)
    code = f"print(sum(1 for k in range(1, {n} + 1) if k % {a} == 0 or k % {b} == 0))\n"
    answer = n // a + n // b - n // math.lcm(a, b)
    return f"How many integers from 1 to {n} inclusive are divisible by {a} or by {b}?", code, answer


def fibonacci_mod(rng: random.Random) -> Question:
    n, modulus = rng.randrange(500, 5001), rng.choice([1_000_007, 998_244_353, 1_000_000_007])
    code = f"a, b = 0, 1\nfor _ in range({n}):\n    a, b = b, a + b\nprint(a % {modulus})\n"

    def fib_pair(k: int) -> tuple[int, int]:  # fast doubling: (F(k), F(k+1)) mod modulus
        if k == 0:
            return 0, 1
        f, g = fib_pair(k // 2)
        c, d = f * (2 * g - f) % modulus, (f * f + g * g) % modulus
        return (d, (c + d) % modulus) if k % 2 else (c, d)

    question = f"Let F(0) = 0, F(1) = 1 and F(n) = F(n-1) + F(n-2). What is F({n}) modulo {modulus}?"
    return question, code, fib_pair(n)[0]


def collatz_steps(rng: random.Random) -> Question:
    start = rng.randrange(1_000, 1_000_000)
    code = (
        f"n, steps = {start}, 0\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
        "    steps += 1\nprint(steps)\n"
    )
    steps = _collatz_reference(start)
    question = (
        f"Starting from {start}, repeatedly halve the number if it is even, or replace it "
        f"with 3n + 1 if it is odd. How many steps does it take to reach 1?"
    )
    return question, code, steps


def _collatz_reference(start: int) -> int:
    """Collatz steps with the odd step and the halving that must follow it taken together."""
    value, steps = start, 0
    while value != 1:
        if value % 2:
            value, steps = (3 * value + 1) // 2, steps + 2
        else:
            value, steps = value // 2, steps + 1
    return steps


def binomial(rng: random.Random) -> Question:
    n = rng.randint(30, 70)
    k = rng.randint(5, n // 2)
    code = f"result = 1\nfor i in range({k}):\n    result = result * ({n} - i) // (i + 1)\nprint(result)\n"
    return f"In how many ways can {k} items be chosen from {n} distinct items?", code, math.comb(n, k)


def power_last_digits(rng: random.Random) -> Question:
    base, exponent = rng.randint(3, 99), rng.randint(1000, 100_000)
    code = f"print(pow({base}, {exponent}, 10 ** 6))\n"
    answer, square, e = 1, base, exponent  # square-and-multiply by hand
    while e:
        if e & 1:
            answer = answer * square % 10**6
        square, e = square * square % 10**6, e >> 1
    question = (
        f"What number do the last six digits of {base}^{exponent} form? "
        f"(Give it as an integer without leading zeros.)"
    )
    return question, code, answer


def palindromes(rng: random.Random) -> Question:
    low = rng.randrange(1_000, 50_000)
    high = low + rng.randrange(10_000, 500_000)
    code = f"print(sum(1 for k in range({low}, {high} + 1) if str(k) == str(k)[::-1]))\n"

    def palindromes_upto(limit: int) -> int:  # count by construction from the first half
        count = 0
        for length in range(1, len(str(limit)) + 1):
            half = (length + 1) // 2
            for first in range(10 ** (half - 1), 10**half):
                text = str(first)
                full = int(text + text[: length // 2][::-1])
                count += full <= limit
        return count

    question = f"How many integers between {low} and {high} inclusive read the same forwards and backwards?"
    return question, code, palindromes_upto(high) - palindromes_upto(low - 1)


FAMILIES: list[Callable[[random.Random], Question]] = [
    sum_of_primes,
    divisor_count,
    digit_sum_of_power,
    prime_count,
    multiples,
    fibonacci_mod,
    collatz_steps,
    binomial,
    power_last_digits,
    palindromes,
]


def run_reference_code(code: str) -> str:
    """Run a row's code in this process and return what it printed (used to verify rows)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, "<reference>", "exec"), {"__name__": "__main__"})
    return buffer.getvalue().strip()


def generate(n: int = 30, seed: int = 0) -> list[dict[str, object]]:
    """`n` distinct verified questions, cycling through the families."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    seen: set[str] = set()
    while len(rows) < n:
        question, code, answer = FAMILIES[len(rows) % len(FAMILIES)](rng)
        if question in seen:
            continue
        printed = run_reference_code(code)
        if printed != str(answer):
            raise AssertionError(f"reference code for {question!r} printed {printed}, expected {answer}")
        seen.add(question)
        rows.append({"id": f"py-{len(rows):03d}", "question": question, "answer": str(answer), "code": code})
    return rows


def main(argv: list[str] | None = None) -> None:
    generator_main(
        generate,
        description=__doc__.splitlines()[0],
        default_n=30,
        default_out="datasets/python_questions.jsonl",
        noun="questions",
        argv=argv,
    )


if __name__ == "__main__":
    main()
