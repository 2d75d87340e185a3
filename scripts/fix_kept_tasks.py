"""Tasks kept aside for issue 69: 20 fix tasks and 10 generate prompts written before the
fix loop's choice among candidates was built or tuned, and run once at its end
(`bench_fix_live.py --kept`). Never tuned to: a change is judged on them, they are not
changed for it. Of the kinds the issue's hidden tasks held (a helper returning None for
some input, a name missing in an imported module, an off-by-one that runs, a near key, a
loop variable, a swallowed error) and others.
"""

from __future__ import annotations

from fix_live_tasks import FixTask, GenerateTask, _job

KEPT_FIX_TASKS: list[FixTask] = [
    FixTask(
        "grade-none",
        "other cell",
        _job(
            "def grade(score):\n    if score >= 60:\n        return 'pass'\n# %%\n"
            "scores = [72, 41, 90]\nprint([grade(s).upper() for s in scores])\n"
        ),
        (r"\['PASS', '\w+', 'PASS'\]",),
        "None for some input",
    ),
    FixTask(
        "area-math",
        "module",
        {
            "shapes.py": "def circle_area(r):\n    return round(math.pi * r * r, 2)\n",
            "job.py": "from shapes import circle_area\n\nprint(circle_area(2))\n",
        },
        (r"^12\.57$",),
        "missing import in a module",
    ),
    FixTask(
        "median-index",
        "other cell",
        _job(
            "def median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2 + 1]\n# %%\n"
            "print(median([7, 1, 5]))\nprint(median([3]))\n"
        ),
        (r"^5$", r"^3$"),
        "off-by-one",
    ),
    FixTask(
        "retries-key",
        "cell",
        _job(
            'config = {"retries": 4, "delay_s": 0.5}\n# %%\n'
            'print("waits", config["retry"] * config["delay_s"])\n'
        ),
        (r"^waits 2\.0$",),
        "near key",
    ),
    FixTask(
        "total-strings",
        "cell",
        _job('amounts = ["3", "4.5", "10"]\n# %%\ntotal = sum(amounts)\nprint("total", total)\n'),
        (r"^total 17\.5$",),
        "numeric strings",
    ),
    FixTask(
        "initials",
        "other cell",
        _job(
            "def initials(name):\n    return ''.join(part[0] for part in name.split(' '))\n# %%\n"
            'people = ["Ada Lovelace", "Alan  Turing"]\nprint([initials(p) for p in people])\n'
        ),
        (r"\['AL', 'AT'\]",),
        "empty part",
    ),
    FixTask(
        "mean-empty-name",
        "cell",
        _job(
            "temps = {'mon': 12, 'tue': 15, 'wed': 9}\n# %%\n"
            "mean = sum(temps.values()) / len(temp)\nprint('mean', mean)\n"
        ),
        (r"^mean 12\.0$",),
        "typo",
        "offline",
    ),
    FixTask(
        "counter-dict",
        "cell",
        _job(
            'words = "a b a c b a".split()\n# %%\ncounts = {}\nfor w in words:\n'
            "    counts[w] += 1\nprint(sorted(counts.items()))\n"
        ),
        (r"\[\('a', 3\), \('b', 2\), \('c', 1\)\]",),
        "missing key",
    ),
    FixTask(
        "percent-format",
        "cell",
        _job("done, total = 3, 8\n# %%\nprint('done: ' + done / total * 100 + '%')\n"),
        (r"^done: 37\.5%$",),
        "wrong type",
    ),
    FixTask(
        "chunks-range",
        "other cell",
        _job(
            "def chunks(xs, size):\n    return [xs[i:i + size] for i in range(0, len(xs), size)]\n"
            "# %%\ndef pairs_sum(xs):\n    return [a + b for a, b in chunks(xs, 2)]\n# %%\n"
            "print(pairs_sum([1, 2, 3, 4, 5]))\n"
        ),
        (r"\[3, 7, 5\]",),
        "unpacking a short chunk",
    ),
    FixTask(
        "parse-pairs",
        "other cell",
        _job(
            "def parse(line):\n    key, value = line.split('=')\n    return key, value\n# %%\n"
            "lines = ['a=1', 'url=http://x?y=2']\nprint(dict(parse(l) for l in lines))\n"
        ),
        (r"'url': 'http://x\?y=2'",),
        "split without maxsplit",
    ),
    FixTask(
        "module-key",
        "module",
        {
            "prices.py": "TABLE = {'apple': 0.5, 'pear': 0.75}\n\n"
            "def price(item):\n    return TABLE[item.lower()] * 100\n",
            "job.py": "from prices import price\n\nprint(int(price('Pear ')))\n",
        },
        (r"^75$",),
        "whitespace in a key",
    ),
    FixTask(
        "append-none",
        "cell",
        _job("names = ['b', 'a']\n# %%\nnames = names.append('c')\nprint(sorted(names))\n"),
        (r"\['a', 'b', 'c'\]",),
        "None from a method",
    ),
    FixTask(
        "avg-zero",
        "other cell",
        _job(
            "def average(xs):\n    return sum(xs) / len(xs)\n# %%\n"
            "groups = {'x': [2, 4], 'y': []}\n"
            "print({k: average(v) for k, v in groups.items()})\n"
        ),
        (r"\{'x': 3\.0, 'y': 0(\.0)?\}",),
        "empty input",
    ),
    FixTask(
        "date-compare",
        "cell",
        _job(
            "from datetime import date\nrows = [('2024-03-01', 5), ('2024-01-15', 7)]\n# %%\n"
            "recent = [n for d, n in rows if d > date(2024, 2, 1)]\nprint('recent', recent)\n"
        ),
        (r"^recent \[5\]$",),
        "str compared with a date",
    ),
    FixTask(
        "attr-missing",
        "other cell",
        _job(
            "class Account:\n    def __init__(self, owner):\n        self.owner = owner\n"
            "    def deposit(self, amount):\n        self.balance += amount\n"
            "        return self.balance\n# %%\n"
            "acct = Account('kim')\nprint(acct.deposit(10))\n"
        ),
        (r"^10$",),
        "attribute never set",
    ),
    FixTask(
        "loop-var",
        "other cell",
        _job(
            "def badge(points):\n    if points > 100:\n        return 'gold'\n"
            "    elif points > 50:\n        return 'silver'\n# %%\n"
            "print([badge(p).title() for p in [120, 70, 10]])\n"
        ),
        (r"\['Gold', 'Silver', '\w+'\]",),
        "None for some input",
    ),
    FixTask(
        "len-generator",
        "cell",
        _job(
            "nums = [3, 8, 12, 5]\n# %%\nbig = (n for n in nums if n > 4)\nprint('big', len(big))\n"
        ),
        (r"^big 3$",),
        "generator given to len",
    ),
    FixTask(
        "json-number",
        "cell",
        _job(
            'import json\nraw = \'{"count": "12"}\'\n# %%\n'
            "data = json.loads(raw)\nprint('next', data['count'] + 1)\n"
        ),
        (r"^next 13$",),
        "numeric string",
    ),
    FixTask(
        "module-name-typo",
        "module",
        {
            "stats.py": "def spread(xs):\n    return max(xs) - min(x)\n",
            "job.py": "from stats import spread\n\nprint(spread([4, 9, 1]))\n",
        },
        (r"^8$",),
        "typo in a module",
        "offline",
    ),
]


KEPT_GENERATE_TASKS: list[GenerateTask] = [
    GenerateTask("cubes", "# ai: print the sum of the cubes of 1 to 5\n", (r"\b225\b",)),
    GenerateTask(
        "evens",
        "nums = [4, 7, 10, 13, 16]\n# %%\n# ai: print the even numbers in nums as a list\n",
        (r"\[4, 10, 16\]",),
    ),
    GenerateTask(
        "reverse-words",
        'text = "one two three"\n# %%\n# ai: print the words of text in reverse order, '
        "joined by spaces\n",
        (r"three two one",),
    ),
    GenerateTask(
        "primes",
        "# ai: print a list of the primes below 20\n",
        (r"\[2, 3, 5, 7, 11, 13, 17, 19\]",),
    ),
    GenerateTask(
        "max-key",
        "stock = {'apples': 5, 'pears': 12, 'plums': 3}\n# %%\n"
        "# ai: print the name of the fruit with the most stock\n",
        (r"\bpears\b",),
    ),
    GenerateTask("digits", "# ai: print the sum of the digits of 98765\n", (r"\b35\b",)),
    GenerateTask(
        "upper-count",
        'text = "Hello World From Runfix"\n# %%\n# ai: print how many uppercase letters text has\n',
        (r"\b4\b",),
    ),
    GenerateTask(
        "palindrome", '# ai: print whether the word "level" is a palindrome\n', (r"\bTrue\b",)
    ),
    GenerateTask(
        "average-len",
        'words = ["ab", "abcd", "abcdef"]\n# %%\n# ai: print the average length of words\n',
        (r"\b4(\.0)?\b",),
    ),
    GenerateTask(
        "squares-dict",
        "# ai: print a dict mapping 1 to 4 to their squares\n",
        (r"\{1: 1, 2: 4, 3: 9, 4: 16\}",),
    ),
]
