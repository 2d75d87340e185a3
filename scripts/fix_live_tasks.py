"""The tasks of `bench_fix_live.py`: 30 fix tasks and 15 generate tasks, written for it.

A fix task is a small folder (`job.py`, sometimes a module beside it) whose file raises,
and the output the fixed file prints when run from the top (every line of `expect`, a
regular expression, must be found); a fix that deletes the failing line or silences it
does not print that. `where` says where the bug is: in the cell that ran (`cell`), in
another cell's function that it called (`other cell`), or in a module file of the folder
(`module`). A generate task is a file with a prompt comment and what the whole file must
print once the prompt's body is written.
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
    ),
    # -- the bug is in the cell that ran ------------------------------------------------------
    FixTask(
        "math-sqroot",
        "cell",
        _job('import math\n# %%\nside = math.sqroot(16)\nprint("side", side)\n'),
        (r"^side 4\.0$",),
        "wrong API",
    ),
    FixTask(
        "sum-typo",
        "cell",
        _job("items = [1, 2, 3]\n# %%\nprint(sum(itmes))\n"),
        (r"^6$",),
        "typo",
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
    ),
    FixTask(
        "counter-most-common",
        "cell",
        _job(
            'from collections import Counter\nc = Counter("banana")\n# %%\nprint(c.mostcommon(1))\n'
        ),
        (r"^\[\('a', 3\)\]$",),
        "typo",
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
