"""The tasks of `bench_fix_live.py`: 46 fix tasks and 15 generate tasks, written for it.

A fix task is a small folder (`job.py`, sometimes a module beside it) whose file raises,
and the output the fixed file prints when run from the top (every line of `expect`, a
regular expression, must be found); a fix that deletes the failing line or silences it
does not print that. `where` says where the bug is: in the cell that ran (`cell`), in
another cell's function that it called (`other cell`), or in a module file of the folder
(`module`). A generate task is a file with a prompt comment and what the whole file must
print once the prompt's body is written.

`needs` splits them: "offline" tasks are misspellings Python itself would name (a model is not
needed: runfix tries Python's suggestion first), "model" tasks need understanding. The 16
`fresh` ones were written for issue 45 before any change to the fix loop was made, of the kinds
that issue lists (a forgotten `return` whose `None` surfaces elsewhere, numeric strings summed,
a dict changed while iterated, an off-by-one in another cell's helper, a generator given to
`len`, an attribute never set, `split` without `maxsplit`, a module's wrong key, a `str`
compared with a `date`, …), and are never tuned to: a change is kept for what it does on them,
they are not changed for a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FixTask:
    name: str
    where: str
    """cell | other cell | module"""
    files: dict[str, str]
    expect: tuple[str, ...]
    kind: str = ""
    """typo, wrong type, pandas key, off-by-one, wrong API…"""
    needs: str = "model"
    """model | offline: whether Python's own suggestion (or a column the kernel has) names the
    fix, so runfix may fix it with no model asked, or only a model can."""
    fresh: bool = False
    """Written for issue 45 before any change to the fix loop, and never tuned to."""


@dataclass(frozen=True)
class GenerateTask:
    name: str
    source: str
    expect: tuple[str, ...]
    needs: tuple[str, ...] = field(default_factory=tuple)


def _job(text: str) -> dict[str, str]:
    return {"job.py": text}


FIX_TASKS: list[FixTask] = [
    # -- the bug is in another cell's function: the cell that ran only called it ------------
    FixTask(
        "average-typo",
        "other cell",
        _job(
            "sales = [12.5, 8.0, 19.25]\n# %%\ndef average(values):\n"
            "    return sum(values) / len(value)\n# %%\nprint(round(average(sales), 2))\n"
        ),
        (r"^13\.25$",),
        "typo",
        "offline",
    ),
    FixTask(
        "price-key",
        "other cell",
        _job(
            'cart = [{"price": 2.5, "quantity": 4}, {"price": 8.0, "quantity": 4}]\n# %%\n'
            "def total_price(items):\n"
            '    return sum(item["price"] * item["qty"] for item in items)\n'
            "# %%\nprint(total_price(cart))\n"
        ),
        (r"^42\.0$",),
        "dict key",
    ),
    FixTask(
        "label-str",
        "other cell",
        _job('def label(n):\n    return "item " + n\n# %%\nprint(label(5))\n'),
        (r"^item 5$",),
        "wrong type",
    ),
    FixTask(
        "last-item",
        "other cell",
        _job(
            "def last_item(xs):\n    return xs[len(xs)]\n# %%\n"
            'letters = ["a", "b", "c"]\nprint(last_item(letters))\n'
        ),
        (r"^c$",),
        "off-by-one",
    ),
    FixTask(
        "word-count",
        "other cell",
        _job(
            "def word_count(text):\n    return len(text.spilt())\n# %%\n"
            'print(word_count("the quick fox"))\n'
        ),
        (r"^3$",),
        "wrong API",
        "offline",
    ),
    FixTask(
        "scale-typo",
        "other cell",
        _job(
            "def scale(values, factor):\n    return [v * factor for v in value]\n# %%\n"
            "print(scale([1, 2, 3], 2))\n"
        ),
        (r"^\[2, 4, 6\]$",),
        "typo",
        "offline",
    ),
    FixTask(
        "first-word",
        "other cell",
        _job(
            "def first_word(sentence):\n    return sentence.split()[1]\n# %%\n"
            'print(first_word("hello"))\n'
        ),
        (r"^hello$",),
        "off-by-one",
    ),
    FixTask(
        "counter-attribute",
        "other cell",
        _job(
            "class Counter:\n    def __init__(self):\n        self.n = 0\n\n"
            "    def add(self):\n        self.count += 1\n# %%\n"
            "c = Counter()\nc.add()\nc.add()\nprint(c.n)\n"
        ),
        (r"^2$",),
        "typo",
        "offline",
    ),
    FixTask(
        "mean-length",
        "other cell",
        _job(
            "def mean_length(words):\n"
            "    return sum(len(w) for w in words) / len(word)\n# %%\n"
            'print(mean_length(["ab", "cdef", "ghijkl"]))\n'
        ),
        (r"^4\.0$",),
        "typo",
        "offline",
    ),
    FixTask(
        "join-sorted",
        "other cell",
        _job(
            'def join_names(names):\n    return ", ".join(names.sort())\n# %%\n'
            'print(join_names(["cy", "ann", "bob"]))\n'
        ),
        (r"^ann, bob, cy$",),
        "wrong API",
    ),
    # -- the bug is in a module file of the folder ----------------------------------------
    FixTask(
        "module-mean",
        "module",
        {
            "stats_util.py": '"""Helpers."""\n\n\ndef mean(values):\n    total = 0\n'
            "    for v in values:\n        total += v\n    return total / len(valuse)\n",
            "job.py": "from stats_util import mean\n# %%\nprint(mean([1, 2, 3]))\n",
        },
        (r"^2\.0$",),
        "typo",
        "offline",
    ),
    FixTask(
        "module-area",
        "module",
        {
            "shapes.py": "def area(width, height):\n    return width * hieght\n",
            "job.py": "import shapes\n# %%\nprint(shapes.area(3, 4))\n",
        },
        (r"^12$",),
        "typo",
        "offline",
    ),
    FixTask(
        "module-shout",
        "module",
        {
            "textutil.py": 'def shout(s):\n    return s.uppper() + "!"\n',
            "job.py": 'from textutil import shout\n# %%\nprint(shout("hi"))\n',
        },
        (r"^HI!$",),
        "wrong API",
        "offline",
    ),
    # -- the bug is in the cell that ran ------------------------------------------------------
    FixTask(
        "math-sqroot",
        "cell",
        _job('import math\n# %%\nside = math.sqroot(16)\nprint("side", side)\n'),
        (r"^side 4\.0$",),
        "wrong API",
        "offline",
    ),
    FixTask(
        "sum-typo",
        "cell",
        _job("items = [1, 2, 3]\n# %%\nprint(sum(itmes))\n"),
        (r"^6$",),
        "typo",
        "offline",
    ),
    FixTask(
        "concat-int",
        "cell",
        _job('count = 5\n# %%\nprint("Total: " + count)\n'),
        (r"^Total: 5$",),
        "wrong type",
    ),
    FixTask(
        "pandas-column-case",
        "cell",
        _job(
            "import pandas as pd\n"
            'df = pd.DataFrame({"city": ["Paris", "Rome", "Paris"], "sales": [10, 20, 30]})\n'
            '# %%\nprint(df["Sales"].sum())\n'
        ),
        (r"^60$",),
        "pandas key",
        "offline",
    ),
    FixTask(
        "pandas-column-typo",
        "cell",
        _job(
            "import pandas as pd\n"
            'df = pd.DataFrame({"city": ["Paris", "Rome", "Paris"], "sales": [10, 20, 30]})\n'
            '# %%\nprint(df.loc[df["city"] == "Paris", "sale"].sum())\n'
        ),
        (r"^40$",),
        "pandas key",
        "offline",
    ),
    FixTask(
        "range-past-end",
        "cell",
        _job("xs = [1, 2, 3]\n# %%\nfor i in range(len(xs) + 1):\n    print(xs[i])\n"),
        (r"^1$", r"^2$", r"^3$"),
        "off-by-one",
    ),
    FixTask(
        "has-key",
        "cell",
        _job('d = {"a": 1}\n# %%\nif d.has_key("a"):\n    print("yes")\n'),
        (r"^yes$",),
        "wrong API",
    ),
    FixTask(
        "list-push",
        "cell",
        _job("nums = [3, 1, 2]\n# %%\nnums.push(4)\nprint(nums)\n"),
        (r"^\[3, 1, 2, 4\]$",),
        "wrong API",
    ),
    FixTask(
        "length-attribute",
        "cell",
        _job('s = "a,b,c"\n# %%\nparts = s.split(",")\nprint(parts.length)\n'),
        (r"^3$",),
        "wrong API",
    ),
    FixTask(
        "str-plus-int",
        "cell",
        _job('count = "7"\n# %%\ntotal = count + 3\nprint(total)\n'),
        (r"^10$",),
        "wrong type",
    ),
    FixTask(
        "json-attribute",
        "cell",
        _job("import json\n# %%\ndata = json.loads('{\"a\": 1}')\nprint(data.a)\n"),
        (r"^1$",),
        "wrong API",
    ),
    FixTask(
        "sort-typo",
        "cell",
        _job('words = ["b", "a"]\n# %%\nwords.srot()\nprint(words)\n'),
        (r"^\['a', 'b'\]$",),
        "typo",
        "offline",
    ),
    FixTask(
        "counter-most-common",
        "cell",
        _job(
            'from collections import Counter\nc = Counter("banana")\n# %%\nprint(c.mostcommon(1))\n'
        ),
        (r"^\[\('a', 3\)\]$",),
        "typo",
        "offline",
    ),
    FixTask(
        "max-extra-arg",
        "cell",
        _job("values = [4, 8, 15]\n# %%\nprint(max(values, 0))\n"),
        (r"^15$",),
        "wrong type",
    ),
    FixTask(
        "capitalise",
        "cell",
        _job('name = "ada"\n# %%\nprint(name.capitalise())\n'),
        (r"^Ada$",),
        "typo",
        "offline",
    ),
    FixTask(
        "floor-str",
        "cell",
        _job('import math\n# %%\nprint(math.floor("3.7"))\n'),
        (r"^3$",),
        "wrong type",
    ),
    FixTask(
        "dict-items-typo",
        "cell",
        _job(
            'scores = {"ann": 3, "bob": 5}\n# %%\nfor name, score in scores.itmes():\n'
            "    print(name, score)\n"
        ),
        (r"^ann 3$", r"^bob 5$"),
        "typo",
        "offline",
    ),
    # -- fresh (issue 45): written before any change to the fix loop, never tuned to -------
    FixTask(
        "forgot-return",
        "other cell",
        _job(
            "def normalise(xs):\n    total = sum(xs)\n    [x / total for x in xs]\n# %%\n"
            "weights = normalise([1, 1, 2])\n"
            "print(sorted(range(3), key=lambda i: weights[i]))\n"
        ),
        (r"^\[0, 1, 2\]$",),
        "missing return",
        fresh=True,
    ),
    FixTask(
        "sort-returns-none",
        "other cell",
        _job(
            "def top_two(scores):\n    ranked = scores.sort(reverse=True)\n"
            "    return ranked[:2]\n# %%\nprint(top_two([3, 9, 4]))\n"
        ),
        (r"^\[9, 4\]$",),
        "missing return",
        fresh=True,
    ),
    FixTask(
        "sum-numeric-strings",
        "cell",
        _job(
            'stock = {"apples": "12", "pears": "7"}\n# %%\n'
            "total = sum(stock.values())\nprint(total)\n"
        ),
        (r"^19$",),
        "wrong type",
        fresh=True,
    ),
    FixTask(
        "mean-of-strings",
        "other cell",
        _job(
            "def mean(xs):\n    return sum(xs) / len(xs)\n# %%\n"
            'readings = ["3", "4", "5"]\nprint(mean(readings))\n'
        ),
        (r"^4\.0$",),
        "wrong type",
        fresh=True,
    ),
    FixTask(
        "dict-shrinks-while-iterated",
        "cell",
        _job(
            'ages = {"ann": 31, "bob": 17, "cy": 45}\n# %%\nfor name in ages:\n'
            "    if ages[name] < 18:\n        del ages[name]\nprint(sorted(ages))\n"
        ),
        (r"^\['ann', 'cy'\]$",),
        "mutation while iterating",
        fresh=True,
    ),
    FixTask(
        "pairs-past-end",
        "other cell",
        _job(
            "def pairs(xs):\n    return [(xs[i], xs[i + 1]) for i in range(len(xs))]\n# %%\n"
            "print(pairs([1, 2, 3]))\n"
        ),
        (r"^\[\(1, 2\), \(2, 3\)\]$",),
        "off-by-one",
        fresh=True,
    ),
    FixTask(
        "last-n-past-end",
        "other cell",
        _job(
            "def last_n(xs, n):\n    return [xs[len(xs) - i] for i in range(n)]\n# %%\n"
            "print(last_n([1, 2, 3, 4], 2))\n"
        ),
        (r"^\[4, 3\]$",),
        "off-by-one",
        fresh=True,
    ),
    FixTask(
        "len-of-generator",
        "other cell",
        _job(
            "def evens(n):\n    return (i for i in range(n) if i % 2 == 0)\n# %%\n"
            "print(len(evens(10)))\n"
        ),
        (r"^5$",),
        "wrong type",
        fresh=True,
    ),
    FixTask(
        "total-never-set",
        "other cell",
        _job(
            "class Basket:\n    def __init__(self):\n        self.items = []\n\n"
            "    def add(self, price):\n        self.items.append(price)\n"
            "        self.total += price\n# %%\nb = Basket()\nb.add(3)\nb.add(4)\nprint(b.total)\n"
        ),
        (r"^7$",),
        "attribute never set",
        fresh=True,
    ),
    FixTask(
        "split-too-many",
        "cell",
        _job(
            'setting = "url=http://example.test/?page=2"\n# %%\n'
            'key, value = setting.split("=")\nprint(key, value)\n'
        ),
        (r"^url http://example\.test/\?page=2$",),
        "wrong API",
        fresh=True,
    ),
    FixTask(
        "module-wrong-key",
        "module",
        {
            "config.py": 'SETTINGS = {"timeout": 30, "retries": 3}\n\n\ndef doubled_timeout():\n'
            '    return SETTINGS["time_out"] * 2\n',
            "job.py": "import config\n# %%\nprint(config.doubled_timeout())\n",
        },
        (r"^60$",),
        "dict key",
        fresh=True,
    ),
    FixTask(
        "date-vs-str",
        "cell",
        _job(
            'from datetime import date\ndeadline = "2024-03-01"\n# %%\n'
            "print(date(2024, 2, 1) < deadline)\n"
        ),
        (r"^True$",),
        "wrong type",
        fresh=True,
    ),
    FixTask(
        "median-float-index",
        "other cell",
        _job(
            "def median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) / 2]\n# %%\n"
            "print(median([5, 1, 3]))\n"
        ),
        (r"^3$",),
        "wrong type",
        fresh=True,
    ),
    FixTask(
        "unpack-dict",
        "cell",
        _job('counts = {"a": 2, "b": 5}\n# %%\nfor key, value in counts:\n    print(key, value)\n'),
        (r"^a 2$", r"^b 5$"),
        "wrong API",
        fresh=True,
    ),
    FixTask(
        "json-str-times-float",
        "cell",
        _job(
            'import json\nrow = json.loads(\'{"qty": "3", "price": 2.5}\')\n# %%\n'
            'print(row["qty"] * row["price"])\n'
        ),
        (r"^7\.5$",),
        "wrong type",
        fresh=True,
    ),
    FixTask(
        "describe-age",
        "other cell",
        _job(
            'def describe(name, age):\n    return name + " is " + age + " years old"\n# %%\n'
            'print(describe("Ada", 36))\n'
        ),
        (r"^Ada is 36 years old$",),
        "wrong type",
        fresh=True,
    ),
]


GENERATE_TASKS: list[GenerateTask] = [
    GenerateTask("sum-squares", "# ai: print the sum of the squares of 1 to 10\n", (r"\b385\b",)),
    GenerateTask(
        "sort-desc",
        "nums = [5, 3, 9, 1]\n# %%\n# ai: print nums sorted in descending order\n",
        (r"\[9, 5, 3, 1\]",),
    ),
    GenerateTask(
        "vowels", '# ai: print the number of vowels in the word "education"\n', (r"\b5\b",)
    ),
    GenerateTask(
        "longest",
        'words = ["apple", "kiwi", "banana"]\n# %%\n# ai: print the longest word in words\n',
        (r"\bbanana\b",),
    ),
    GenerateTask("factorial", "# ai: print the factorial of 6\n", (r"\b720\b",)),
    GenerateTask(
        "count-the",
        'text = "the cat and the hat"\n# %%\n'
        '# ai: print how many times the word "the" occurs in text\n',
        (r"\b2\b",),
    ),
    GenerateTask(
        "fibonacci",
        "# ai: print a list of the first 8 Fibonacci numbers, starting 0, 1\n",
        (r"\[0, 1, 1, 2, 3, 5, 8, 13\]",),
    ),
    GenerateTask(
        "most-expensive",
        'prices = {"tea": 3, "coffee": 5, "juice": 4}\n# %%\n'
        "# ai: print the name of the most expensive item in prices\n",
        (r"\bcoffee\b",),
    ),
    GenerateTask("reverse", '# ai: print the string "hello world" reversed\n', (r"dlrow olleh",)),
    GenerateTask(
        "pandas-total",
        "import pandas as pd\n"
        'df = pd.DataFrame({"city": ["Paris", "Rome", "Paris"], "sales": [10, 20, 30]})\n'
        "# %%\n# ai: print the total sales for Paris in df\n",
        (r"\b40\b",),
    ),
    GenerateTask("prime", "# ai: print whether 97 is a prime number (True or False)\n", (r"True",)),
    GenerateTask(
        "fahrenheit",
        "temps_c = [0, 100]\n# %%\n# ai: print temps_c converted to Fahrenheit, as a list\n",
        (r"\b32(\.0)?\b", r"\b212(\.0)?\b"),
    ),
    GenerateTask(
        "multiples",
        "# ai: print a list of the numbers from 1 to 20 that are divisible by 7\n",
        (r"\[7, 14\]",),
    ),
    GenerateTask(
        "join-sorted",
        'names = ["bob", "ann", "cy"]\n# %%\n'
        "# ai: print the names joined by commas, in alphabetical order\n",
        (r"ann,\s*bob,\s*cy",),
    ),
    GenerateTask("average", "# ai: print the average of 4, 8 and 15\n", (r"\b9(\.0)?\b",)),
]
