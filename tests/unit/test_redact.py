"""The one secret rule (`executor/redact.py`, issue 58): what is hidden from everything that
goes to a model, by name, by value and by source, and put back in what comes back."""

from __future__ import annotations

import pytest

from executor.redact import Hider, env_secrets, hide_value, secret_env_name, secret_name

STRIPE = "sk_live_51H8xYzAbCdEfGhIjKlMn"
GITHUB = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
ENVIRON = {
    "STRIPE_KEY": STRIPE,
    "GITHUB_TOKEN": GITHUB,
    "DB_PASSWORD": "hunter22",
    "PWD": "/work/project",
    "HOME": "/root",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "LANG": "C.UTF-8",
}

# The request of issue 58's S1: a cell's secrets in "Variables in the kernel", as sent.
VARIABLES = f"""\
Variables in the kernel:
api_key: str len=28 = '{STRIPE}'
github_token: str len=40 = '{GITHUB}'
password: str len=8 = 'hunter22'
db_url: str len=44 = 'postgresql://admin:hunter22@db.example.com/app'
headers: dict len=1 = {{'Authorization': 'Bearer abcdef1234567890'}}
count: int = 3
"""


@pytest.mark.parametrize(
    "name",
    ["api_key", "github_token", "password", "Authorization", "Cookie", "X-Api-Key", "apiKey",
     "accessToken", "client_secret", "db_passwd", "AWS_SECRET_ACCESS_KEY", "sessionid"],
)  # fmt: skip
def test_a_name_that_says_it_is_a_secret_is_one(name: str) -> None:
    assert secret_name(name)
    assert secret_env_name(name)


@pytest.mark.parametrize(
    "name", ["tokenizer", "tokens", "max_tokens", "author", "key", "sort_key", "keys", "count"]
)
def test_a_word_that_only_looks_like_one_is_not(name: str) -> None:
    assert not secret_name(name)


def test_an_environment_variable_named_as_a_key_holds_a_secret_but_a_path_does_not() -> None:
    found = env_secrets(ENVIRON)
    assert set(found.values()) == {"STRIPE_KEY", "GITHUB_TOKEN", "DB_PASSWORD"}
    assert env_secrets({"SSN": "123-45-6789"}, ["ssn"]) == {"123-45-6789": "SSN"}


def test_every_secret_of_the_request_is_hidden_and_its_name_still_said() -> None:
    hider = Hider(ENVIRON)
    sent = hider.hide(VARIABLES)
    for secret in (STRIPE, GITHUB, "hunter22", "abcdef1234567890"):
        assert secret not in sent
    assert "api_key: str len=28 = '<hidden: STRIPE_KEY's value>'" in sent
    assert "'postgresql://admin:<hidden: DB_PASSWORD's value>@db.example.com/app'" in sent
    assert "'Authorization': 'Bearer <hidden: a Bearer credential>'" in sent
    assert "count: int = 3" in sent
    assert hider.hidden  # said in the request's record, without the values
    assert all(STRIPE not in why for why in hider.hidden)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("key = 'sk-proj-abcdefghijklmnopqrstuv'", "sk-proj-abcdefghijklmnopqrstuv"),
        ("aws = 'AKIAABCDEFGHIJKLMNOP'", "AKIAABCDEFGHIJKLMNOP"),
        ("url = 'https://user:s3cr3tpass@example.com/x'", "s3cr3tpass"),
        ("url = 'https://ghs_abcdefghijklmnopqrstu@github.com/o/r'", "ghs_abcdefghijklmnopqrstu"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----", "MIIabc"),
        ("jwt eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4", "SflKxwRJSMeKKF2QT4"),
        ("requests.get(u, headers={'X-Api-Key': 'zzyzx-123-abc'})", "zzyzx-123-abc"),
        ("Values in test_header (line 3): password = 'opensesame'", "opensesame"),
        ("Cookie: sessionid=abc123def456", "sessionid=abc123def456"),
    ],
)
def test_key_shapes_url_passwords_and_secret_keys_are_hidden_anywhere(
    text: str, secret: str
) -> None:
    assert secret not in Hider({}).hide(text)


def test_a_name_read_from_a_secret_environment_variable_is_hidden_whatever_it_is_called() -> None:
    code = 'value = os.environ["GITHUB_TOKEN"]\nbare = getenv("DB_PASS")\nother = "ok"\n'
    hider = Hider({})
    held = "\nVariables in the kernel:\nvalue: str = 'gho-abc'\nother: str = 'ok'\n"
    sent = hider.hide(code + held)
    assert "value: str = <hidden: value's value>" in sent and "gho-abc" not in sent
    assert "other: str = 'ok'" in sent
    assert 'os.environ["GITHUB_TOKEN"]' in sent  # the code that reads it is shown as it is


def test_what_the_answer_repeats_is_put_back_and_nothing_else_is_changed() -> None:
    hider = Hider(ENVIRON)
    line = f'stripe.api_key = "{STRIPE}"\nprint(totl)\n'
    sent = hider.hide(line)
    assert STRIPE not in sent
    answer = sent.replace("totl", "total")
    assert hider.unhide(answer) == f'stripe.api_key = "{STRIPE}"\nprint(total)\n'
    assert hider.unhide("<hidden: something else>") == "<hidden: something else>"


def test_the_kernel_says_a_value_hidden_by_its_name_or_by_what_it_holds() -> None:
    secrets = env_secrets(ENVIRON)
    assert hide_value("api_key", repr(STRIPE), secrets) == "<hidden: its name says it is a secret>"
    said = hide_value("headers", repr({"Authorization": "Bearer tok-123456789"}), secrets)
    assert said is not None and "tok-123456789" not in said and "Authorization" in said
    assert hide_value("copy", repr("x" + STRIPE), secrets) == "'x<hidden: STRIPE_KEY's value>'"
    assert hide_value("ssn", "'123-45-6789'", secrets, ["ssn"]) is not None
    assert hide_value("count", "3", secrets) is None


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("'https://api.example.com/v1?api_key=abc123def456&page=2'", "page=2"),
        ("'https://maps.example.com/api?key=AIzaNotAShape123&q=x'", "q=x"),
        ("'https://cdn.example.com/f.png?sig=ZZZ999yyy&w=3'", "w=3"),
        ("'https://example.com/?token=t0k3n-value'", "example.com"),
        ("conn = 'Server=db;Database=app;User Id=sa;Password=Hunter2!xyz;'", "Database=app"),
        ("dsn = 'host=db user=app pwd=s3cr3tpw'", "user=app"),
        ("cfg = {'user': 'bob', 'pass': 'letmein99'}", "'bob'"),
        ("cfg = {'user': 'bob', 'pw': 'letmein99'}", "'bob'"),
        ("passwords = ['letmein99', 'hunter2-xyz']", "passwords = ["),
        ("secrets = ('letmein99', 'hunter2-xyz')", "secrets = ("),
    ],
)
def test_the_spellings_round_7_found_are_hidden(text: str, kept: str) -> None:
    """Issue 68, 5: a URL's query parameters, `pass`/`pw` keys, a connection string's
    `Password=`/`Pwd=`, the strings of a list or tuple under a secret's name."""
    said = Hider({}).hide(text)
    for secret in ("abc123def456", "AIzaNotAShape123", "ZZZ999yyy", "t0k3n-value",
                   "Hunter2!xyz", "s3cr3tpw", "letmein99", "hunter2-xyz"):  # fmt: skip
        assert secret not in said, said
    assert "<hidden: " in said and kept in said


def test_a_plain_list_and_query_stay_as_they_are() -> None:
    text = "names = ['ann', 'bob']\nurl = 'https://example.com/?page=2&sort=name'\n"
    assert Hider({}).hide(text) == text
