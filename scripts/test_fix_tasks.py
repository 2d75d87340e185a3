"""The tasks of `scripts/bench_test_fix.py`: each a small module of a project (`app/NAME.py`)
with one seeded bug, and its test file (`tests/test_NAME.py`) with one test the bug fails
and at least three that pass with it and touch the same module — so a "fix" that hard-codes
the failing case, or breaks the rest of the module, shows. Written for this bench: no task
was tuned to runfix's prompts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TestTask:
    name: str
    module: str
    tests: str
    failing: str
    """The test the bug fails (the others pass with it)."""


TASKS = [
    TestTask(
        "stats",
        """\
def total(xs):
    return sum(xs)


def mean(xs):
    return total(xs) / (len(xs) + 1)


def spread(xs):
    return max(xs) - min(xs)


def median(xs):
    ordered = sorted(xs)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
""",
        """\
from app.stats import mean, median, spread, total


def test_mean():
    assert mean([2, 4, 6]) == 4


def test_total():
    assert total([1, 2, 3]) == 6


def test_spread():
    assert spread([3, 9, 4]) == 6


def test_median():
    assert median([5, 1, 3]) == 3
    assert median([4, 1, 3, 2]) == 2.5
""",
        "test_mean",
    ),
    TestTask(
        "text",
        """\
import re


def slugify(title):
    words = re.findall(r"[A-Za-z0-9]+", title)
    return "-".join(words)


def word_count(text):
    return len(text.split())


def initials(name):
    return "".join(part[0].upper() for part in name.split())


def truncate(text, width):
    return text if len(text) <= width else text[: width - 1] + "…"
""",
        """\
from app.text import initials, slugify, truncate, word_count


def test_slugify():
    assert slugify("Hello, World 2024!") == "hello-world-2024"


def test_word_count():
    assert word_count("the quick  brown fox") == 4


def test_initials():
    assert initials("ada lovelace") == "AL"


def test_truncate():
    assert truncate("abcdef", 4) == "abc…"
    assert truncate("abc", 4) == "abc"
""",
        "test_slugify",
    ),
    TestTask(
        "durations",
        """\
def to_minutes(text):
    hours, minutes = text.split(":")
    return int(hours) * 100 + int(minutes)


def format_minutes(total):
    return f"{total // 60}:{total % 60:02d}"


def is_valid(text):
    parts = text.split(":")
    return len(parts) == 2 and all(p.isdigit() for p in parts) and int(parts[1]) < 60
""",
        """\
from app.durations import format_minutes, is_valid, to_minutes


def test_to_minutes():
    assert to_minutes("1:30") == 90
    assert to_minutes("0:45") == 45


def test_format_minutes():
    assert format_minutes(135) == "2:15"


def test_is_valid():
    assert is_valid("3:05")
    assert not is_valid("3:75")


def test_format_minutes_pads():
    assert format_minutes(61) == "1:01"
""",
        "test_to_minutes",
    ),
    TestTask(
        "inventory",
        """\
def restock(stock, name, count):
    stock[name] = count
    return stock


def remove(stock, name, count):
    if stock.get(name, 0) < count:
        raise ValueError(f"only {stock.get(name, 0)} {name} left")
    stock[name] -= count
    return stock


def total_items(stock):
    return sum(stock.values())


def in_stock(stock, name):
    return stock.get(name, 0) > 0
""",
        """\
import pytest

from app.inventory import in_stock, remove, restock, total_items


def test_restock_adds_to_what_is_there():
    assert restock({"tea": 2}, "tea", 3) == {"tea": 5}


def test_restock_a_new_item():
    assert restock({}, "cake", 4) == {"cake": 4}


def test_remove():
    assert remove({"tea": 5}, "tea", 2) == {"tea": 3}
    with pytest.raises(ValueError):
        remove({"tea": 1}, "tea", 2)


def test_totals():
    assert total_items({"tea": 2, "cake": 3}) == 5
    assert in_stock({"tea": 1}, "tea") and not in_stock({}, "tea")
""",
        "test_restock_adds_to_what_is_there",
    ),
    TestTask(
        "pricing",
        """\
def apply_discount(price, percent):
    return round(price * percent / 100, 2)


def with_tax(price, rate=0.2):
    return round(price * (1 + rate), 2)


def bulk_price(unit, count):
    if count >= 10:
        return round(unit * count * 0.9, 2)
    return round(unit * count, 2)


def cheapest(prices):
    return min(prices, key=prices.get)
""",
        """\
from app.pricing import apply_discount, bulk_price, cheapest, with_tax


def test_apply_discount():
    assert apply_discount(80.0, 25) == 60.0
    assert apply_discount(10.0, 0) == 10.0


def test_with_tax():
    assert with_tax(10.0) == 12.0


def test_bulk_price():
    assert bulk_price(2.0, 10) == 18.0
    assert bulk_price(2.0, 3) == 6.0


def test_cheapest():
    assert cheapest({"tea": 3.5, "cake": 4.2, "water": 1.0}) == "water"
""",
        "test_apply_discount",
    ),
    TestTask(
        "grades",
        """\
def letter(score):
    if score > 90:
        return "A"
    if score > 80:
        return "B"
    if score > 70:
        return "C"
    return "F"


def average(scores):
    return sum(scores) / len(scores)


def passed(score):
    return score >= 50


def top(scores):
    return max(scores)
""",
        """\
from app.grades import average, letter, passed, top


def test_letter_boundaries():
    assert letter(90) == "A"
    assert letter(80) == "B"
    assert letter(70) == "C"


def test_letter():
    assert letter(95) == "A"
    assert letter(10) == "F"


def test_average():
    assert average([80, 90]) == 85


def test_passed_and_top():
    assert passed(50) and not passed(49)
    assert top([3, 9, 4]) == 9
""",
        "test_letter_boundaries",
    ),
    TestTask(
        "query",
        """\
def parse_pairs(text):
    pairs = {}
    for part in text.split(","):
        key, value = part.split("=")
        pairs[key] = value
    return pairs


def to_query(pairs):
    return ";".join(f"{k}={v}" for k, v in pairs.items())


def keys(text):
    return [part.split("=")[0] for part in text.split(";") if part]


def count_pairs(text):
    return len([part for part in text.split(";") if part])
""",
        """\
from app.query import count_pairs, keys, parse_pairs, to_query


def test_parse_pairs():
    assert parse_pairs("a=1;b=2") == {"a": "1", "b": "2"}


def test_to_query():
    assert to_query({"a": "1", "b": "2"}) == "a=1;b=2"


def test_keys():
    assert keys("a=1;b=2;") == ["a", "b"]


def test_count_pairs():
    assert count_pairs("x=1;y=2;z=3") == 3
""",
        "test_parse_pairs",
    ),
    TestTask(
        "chunks",
        """\
def chunk(items, size):
    return [items[i : i + size] for i in range(0, len(items) - size, size)]


def flatten(groups):
    return [item for group in groups for item in group]


def dedupe(items):
    seen = set()
    return [x for x in items if not (x in seen or seen.add(x))]


def last(items, default=None):
    return items[-1] if items else default
""",
        """\
from app.chunks import chunk, dedupe, flatten, last


def test_chunk_keeps_the_remainder():
    assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_flatten():
    assert flatten([[1, 2], [3]]) == [1, 2, 3]


def test_dedupe():
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_last():
    assert last([1, 2]) == 2 and last([], 0) == 0
""",
        "test_chunk_keeps_the_remainder",
    ),
    TestTask(
        "matrix",
        """\
def transpose(rows):
    return [list(row) for row in rows]


def identity(n):
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]


def trace(rows):
    return sum(rows[i][i] for i in range(len(rows)))


def shape(rows):
    return (len(rows), len(rows[0]) if rows else 0)
""",
        """\
from app.matrix import identity, shape, trace, transpose


def test_transpose():
    assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]


def test_identity():
    assert identity(2) == [[1, 0], [0, 1]]


def test_trace():
    assert trace([[1, 2], [3, 4]]) == 5


def test_shape():
    assert shape([[1, 2, 3], [4, 5, 6]]) == (2, 3)
""",
        "test_transpose",
    ),
    TestTask(
        "temperature",
        """\
def c_to_f(c):
    return c * 9 / 5 - 32


def f_to_c(f):
    return (f - 32) * 5 / 9


def is_freezing(c):
    return c <= 0


def average(readings):
    return round(sum(readings) / len(readings), 1)
""",
        """\
from app.temperature import average, c_to_f, f_to_c, is_freezing


def test_c_to_f():
    assert c_to_f(100) == 212
    assert c_to_f(0) == 32


def test_f_to_c():
    assert f_to_c(212) == 100


def test_is_freezing():
    assert is_freezing(0) and not is_freezing(1)


def test_average():
    assert average([20, 21, 22.5]) == 21.2
""",
        "test_c_to_f",
    ),
    TestTask(
        "palindromes",
        """\
def clean(text):
    return "".join(ch for ch in text if ch.isalnum())


def is_palindrome(text):
    letters = clean(text)
    return letters == letters[::-1]


def reverse_words(text):
    return " ".join(reversed(text.split()))


def vowels(text):
    return sum(1 for ch in text.lower() if ch in "aeiou")
""",
        """\
from app.palindromes import clean, is_palindrome, reverse_words, vowels


def test_is_palindrome_ignores_case():
    assert is_palindrome("Never odd or even")


def test_is_palindrome():
    assert is_palindrome("racecar") and not is_palindrome("tea")


def test_reverse_words():
    assert reverse_words("one two three") == "three two one"


def test_vowels_and_clean():
    assert vowels("Banana") == 3
    assert clean("a b,c!") == "abc"
""",
        "test_is_palindrome_ignores_case",
    ),
    TestTask(
        "bank",
        """\
def deposit(balance, amount):
    if amount <= 0:
        raise ValueError("a deposit is positive")
    return balance + amount


def withdraw(balance, amount):
    return balance - amount


def interest(balance, rate):
    return round(balance * rate, 2)


def can_withdraw(balance, amount):
    return 0 < amount <= balance
""",
        """\
import pytest

from app.bank import can_withdraw, deposit, interest, withdraw


def test_withdraw_more_than_the_balance_is_refused():
    with pytest.raises(ValueError):
        withdraw(10, 20)


def test_withdraw():
    assert withdraw(10, 4) == 6


def test_deposit():
    assert deposit(10, 5) == 15
    with pytest.raises(ValueError):
        deposit(10, -1)


def test_interest_and_can_withdraw():
    assert interest(100, 0.05) == 5.0
    assert can_withdraw(10, 10) and not can_withdraw(10, 11)
""",
        "test_withdraw_more_than_the_balance_is_refused",
    ),
    TestTask(
        "cart",
        """\
def add_item(cart, name, price, quantity=1):
    cart.append({"name": name, "price": price, "quantity": quantity})
    return cart


def total(cart):
    return round(sum(item["price"] for item in cart), 2)


def count(cart):
    return sum(item["quantity"] for item in cart)


def remove_item(cart, name):
    return [item for item in cart if item["name"] != name]
""",
        """\
from app.cart import add_item, count, remove_item, total


def test_total_counts_quantities():
    cart = add_item([], "tea", 3.5, 2)
    add_item(cart, "cake", 4.0)
    assert total(cart) == 11.0


def test_count():
    assert count(add_item([], "tea", 3.5, 3)) == 3


def test_remove_item():
    cart = add_item(add_item([], "tea", 1.0), "cake", 2.0)
    assert [i["name"] for i in remove_item(cart, "tea")] == ["cake"]


def test_total_of_single_items():
    assert total(add_item([], "tea", 3.5)) == 3.5
""",
        "test_total_counts_quantities",
    ),
    TestTask(
        "fizzbuzz",
        """\
def is_fizz(n):
    return n % 3 == 0


def is_buzz(n):
    return n % 5 == 0


def say(n):
    if is_fizz(n):
        return "Fizz"
    if is_buzz(n):
        return "Buzz"
    if is_fizz(n) and is_buzz(n):
        return "FizzBuzz"
    return str(n)


def sequence(n):
    return [say(i) for i in range(1, n + 1)]
""",
        """\
from app.fizzbuzz import is_buzz, is_fizz, say, sequence


def test_say_fifteen():
    assert say(15) == "FizzBuzz"


def test_say():
    assert say(3) == "Fizz" and say(5) == "Buzz" and say(7) == "7"


def test_checks():
    assert is_fizz(9) and is_buzz(10) and not is_buzz(9)


def test_sequence():
    assert sequence(5) == ["1", "2", "Fizz", "4", "Buzz"]
""",
        "test_say_fifteen",
    ),
    TestTask(
        "primes",
        """\
def is_prime(n):
    if n == 2:
        return True
    return all(n % d for d in range(2, int(n**0.5) + 1))


def primes_below(limit):
    return [n for n in range(2, limit) if is_prime(n)]


def next_prime(n):
    candidate = n + 1
    while not is_prime(candidate):
        candidate += 1
    return candidate


def count_primes(limit):
    return len(primes_below(limit))
""",
        """\
from app.primes import count_primes, is_prime, next_prime, primes_below


def test_one_and_zero_are_not_prime():
    assert not is_prime(1)
    assert not is_prime(0)


def test_primes_below():
    assert primes_below(12) == [2, 3, 5, 7, 11]


def test_next_prime():
    assert next_prime(7) == 11


def test_count_primes():
    assert count_primes(20) == 8
""",
        "test_one_and_zero_are_not_prime",
    ),
    TestTask(
        "rows",
        """\
def parse_row(line):
    return line.split(",")


def join_row(values):
    return ",".join(str(v) for v in values)


def column(rows, index):
    return [row[index] for row in rows]


def header(lines):
    return lines[0].split(",") if lines else []
""",
        """\
from app.rows import column, header, join_row, parse_row


def test_parse_row_strips_spaces():
    assert parse_row("a, b ,c") == ["a", "b", "c"]


def test_join_row():
    assert join_row([1, "x", 2.5]) == "1,x,2.5"


def test_column():
    assert column([["a", "b"], ["c", "d"]], 1) == ["b", "d"]


def test_header():
    assert header(["x,y", "1,2"]) == ["x", "y"] and header([]) == []
""",
        "test_parse_row_strips_spaces",
    ),
    TestTask(
        "shapes",
        """\
import math


def rect_area(width, height):
    return 2 * (width + height)


def rect_perimeter(width, height):
    return 2 * (width + height)


def circle_area(radius):
    return round(math.pi * radius**2, 2)


def square_area(side):
    return side * side
""",
        """\
from app.shapes import circle_area, rect_area, rect_perimeter, square_area


def test_rect_area():
    assert rect_area(3, 4) == 12


def test_rect_perimeter():
    assert rect_perimeter(3, 4) == 14


def test_circle_area():
    assert circle_area(1) == 3.14


def test_square_area():
    assert square_area(5) == 25
""",
        "test_rect_area",
    ),
    TestTask(
        "ranking",
        """\
def rank(scores):
    return [name for name, _ in sorted(scores.items(), key=lambda item: item[1])]


def best(scores):
    return max(scores, key=scores.get)


def worst(scores):
    return min(scores, key=scores.get)


def above(scores, limit):
    return sorted(name for name, score in scores.items() if score > limit)
""",
        """\
from app.ranking import above, best, rank, worst

SCORES = {"ada": 90, "bob": 70, "cy": 80}


def test_rank_highest_first():
    assert rank(SCORES) == ["ada", "cy", "bob"]


def test_best():
    assert best(SCORES) == "ada"


def test_worst():
    assert worst(SCORES) == "bob"


def test_above():
    assert above(SCORES, 75) == ["ada", "cy"]
""",
        "test_rank_highest_first",
    ),
    TestTask(
        "settings",
        """\
def get(config, dotted, default=None):
    node = config
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node or default


def set_value(config, dotted, value):
    *path, last = dotted.split(".")
    node = config
    for key in path:
        node = node.setdefault(key, {})
    node[last] = value
    return config


def keys(config, prefix=""):
    out = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        out += keys(value, name + ".") if isinstance(value, dict) else [name]
    return out
""",
        """\
from app.settings import get, keys, set_value


def test_get_keeps_a_zero():
    assert get({"a": {"b": 0}}, "a.b", 5) == 0


def test_get():
    assert get({"a": {"b": 2}}, "a.b") == 2
    assert get({"a": {}}, "a.c", "none") == "none"


def test_set_value():
    assert set_value({}, "a.b", 1) == {"a": {"b": 1}}


def test_keys():
    assert keys({"a": {"b": 1, "c": 2}, "d": 3}) == ["a.b", "a.c", "d"]
""",
        "test_get_keeps_a_zero",
    ),
    TestTask(
        "words",
        """\
from collections import Counter


def frequency(words):
    return dict(Counter(words))


def most_common(words):
    counts = Counter(words)
    return min(counts, key=counts.get)


def unique(words):
    return sorted(set(words))


def longest(words):
    return max(words, key=len)
""",
        """\
from app.words import frequency, longest, most_common, unique

WORDS = ["tea", "cake", "tea", "jam", "tea", "cake"]


def test_most_common():
    assert most_common(WORDS) == "tea"


def test_frequency():
    assert frequency(WORDS) == {"tea": 3, "cake": 2, "jam": 1}


def test_unique():
    assert unique(WORDS) == ["cake", "jam", "tea"]


def test_longest():
    assert longest(WORDS) == "cake"
""",
        "test_most_common",
    ),
    TestTask(
        "clock",
        """\
def to_hms(seconds):
    hours = seconds // 3600
    minutes = seconds // 60
    secs = seconds % 60
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def to_seconds(text):
    hours, minutes, secs = (int(part) for part in text.split(":"))
    return hours * 3600 + minutes * 60 + secs


def pad(n):
    return f"{n:02d}"


def is_valid(text):
    parts = text.split(":")
    return len(parts) == 3 and all(p.isdigit() and len(p) == 2 for p in parts)
""",
        """\
from app.clock import is_valid, pad, to_hms, to_seconds


def test_to_hms():
    assert to_hms(3661) == "01:01:01"


def test_to_hms_under_a_minute():
    assert to_hms(42) == "00:00:42"


def test_to_seconds():
    assert to_seconds("01:01:01") == 3661


def test_pad_and_is_valid():
    assert pad(5) == "05" and is_valid("01:02:03") and not is_valid("1:2:3")
""",
        "test_to_hms",
    ),
    TestTask(
        "people",
        """\
PEOPLE = {"ada": {"age": 36, "city": "London"}, "alan": {"age": 41, "city": "Wilmslow"}}


def age_of(people, name):
    return people[name]["Age"]


def city_of(people, name):
    return people[name]["city"]


def names(people):
    return sorted(people)


def older_than(people, years):
    return sorted(name for name, p in people.items() if p["age"] > years)
""",
        """\
from app.people import PEOPLE, age_of, city_of, names, older_than


def test_age_of():
    assert age_of(PEOPLE, "ada") == 36


def test_city_of():
    assert city_of(PEOPLE, "alan") == "Wilmslow"


def test_names():
    assert names(PEOPLE) == ["ada", "alan"]


def test_older_than():
    assert older_than(PEOPLE, 40) == ["alan"]
""",
        "test_age_of",
    ),
    TestTask(
        "averages",
        """\
def average_value(values):
    return sum(values.values()) / len(values)


def highest(values):
    return max(values.values())


def scaled(values, factor):
    return {k: v * factor for k, v in values.items()}


def total(values):
    return sum(values.values())
""",
        """\
from app.averages import average_value, highest, scaled, total


def test_average_of_nothing_is_zero():
    assert average_value({}) == 0


def test_average_value():
    assert average_value({"a": 2, "b": 4}) == 3


def test_highest_and_total():
    assert highest({"a": 2, "b": 4}) == 4 and total({"a": 2, "b": 4}) == 6


def test_scaled():
    assert scaled({"a": 2}, 3) == {"a": 6}
""",
        "test_average_of_nothing_is_zero",
    ),
]
