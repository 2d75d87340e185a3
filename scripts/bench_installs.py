"""How often `ModuleNotFoundError: No module named 'X'` leads runfix to the distribution that
really provides `import X`, and that nothing no data vouches for is installed unasked.

The imports: 251 names seen in notebooks and scripts, assembled by hand for this
benchmark — the data-science, ML, web, cloud and tooling imports that dominate
published notebooks and READMEs (numpy, pandas, matplotlib, sklearn, torch, …), the
16 names issue 22 found resolved wrongly, and well-known names whose distribution is
called something else (`cv2`, `PIL`, `yaml`, `bs4`, `jwt`, `serial`, …); then 259
more (issue 36: LLM tooling, databases, geo, science, web frameworks' plugins, …) and
87 more measured once, after the resolver's rules were set. Each expected
distribution is the one the project's own documentation tells you to `pip install`.
The lists are data in this file, so a change to the resolver is measured against the
same names.

Figures, for the resolver as it ships (the data alone: what this machine has
installed is left out, so the figure does not depend on the machine):
- right: the distribution proposed is the expected one (installed at once when
  vouched, else proposed in the question);
- vouched and right / vouched and wrong: installed without a question (the second
  must be 0 for names no data vouches for: those always ask);
- asked: offered as a question.

`--install N` then installs N of the vouched ones for real with pip in a scratch venv
(from the package index this machine reaches) and imports each.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from executor.distributions import canonical, provider_for

# import name → the distribution its project says to install
EXPECTED = {
    # issue 22: resolved wrongly before
    "websocket": "websocket-client", "dns": "dnspython", "bson": "pymongo",
    "kafka": "kafka-python", "nmap": "python-nmap", "haiku": "dm-haiku",
    "community": "python-louvain", "cairo": "pycairo", "snappy": "python-snappy",
    "faiss": "faiss-cpu", "OpenGL": "PyOpenGL", "google.cloud.storage": "google-cloud-storage",
    "mysql.connector": "mysql-connector-python", "azure.storage.blob": "azure-storage-blob",
    "pkg_resources": "setuptools", "speech_recognition": "SpeechRecognition",
    # other names whose distribution is called something else
    "sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "PyYAML",
    "bs4": "beautifulsoup4", "skimage": "scikit-image", "dateutil": "python-dateutil",
    "dotenv": "python-dotenv", "docx": "python-docx", "pptx": "python-pptx", "jwt": "PyJWT",
    "serial": "pyserial", "usb": "pyusb", "Crypto": "pycryptodome", "OpenSSL": "pyOpenSSL",
    "magic": "python-magic", "attr": "attrs", "google.protobuf": "protobuf",
    "fitz": "PyMuPDF", "gi": "PyGObject", "win32api": "pywin32", "zmq": "pyzmq",
    "MySQLdb": "mysqlclient", "psycopg2": "psycopg2", "Bio": "biopython",
    "telegram": "python-telegram-bot", "git": "GitPython", "slugify": "python-slugify",
    "multipart": "python-multipart", "jose": "python-jose", "umap": "umap-learn",
    "sentence_transformers": "sentence-transformers", "Levenshtein": "Levenshtein",
    "tensorflow_hub": "tensorflow-hub", "discord": "discord.py", "mpl_toolkits": "matplotlib",
    "lxml": "lxml", "markdown": "Markdown", "jinja2": "Jinja2", "flask_cors": "Flask-Cors",
    "flask_sqlalchemy": "Flask-SQLAlchemy", "google.cloud.bigquery": "google-cloud-bigquery",
    "googleapiclient": "google-api-python-client", "apiclient": "google-api-python-client",
    "nacl": "PyNaCl", "Xlib": "python-xlib", "wx": "wxPython", "pygments": "Pygments",
    "sqlalchemy": "SQLAlchemy", "pymysql": "PyMySQL", "odf": "odfpy", "socks": "PySocks",
    "ldap": "python-ldap", "yaml_include": "pyyaml-include", "docopt": "docopt",
    "pythonjsonlogger": "python-json-logger", "editdistance": "editdistance",
    "Cython": "Cython", "IPython": "ipython", "ipywidgets": "ipywidgets",
    "pydantic_settings": "pydantic-settings", "typing_extensions": "typing_extensions",
    "dns.resolver": "dnspython", "tflite_runtime": "tflite-runtime", "pyarrow": "pyarrow",
    "pyspark": "pyspark", "boto3": "boto3", "botocore": "botocore", "nltk": "nltk",
    # same name
    "numpy": "numpy", "pandas": "pandas", "matplotlib": "matplotlib", "seaborn": "seaborn",
    "scipy": "scipy", "statsmodels": "statsmodels", "plotly": "plotly", "bokeh": "bokeh",
    "altair": "altair", "torch": "torch", "torchvision": "torchvision",
    "torchaudio": "torchaudio", "tensorflow": "tensorflow", "keras": "keras",
    "jax": "jax", "flax": "flax", "optax": "optax", "transformers": "transformers",
    "datasets": "datasets", "tokenizers": "tokenizers", "accelerate": "accelerate",
    "xgboost": "xgboost", "lightgbm": "lightgbm", "catboost": "catboost",
    "requests": "requests", "httpx": "httpx", "aiohttp": "aiohttp", "flask": "Flask",
    "django": "Django", "fastapi": "fastapi", "uvicorn": "uvicorn", "starlette": "starlette",
    "pydantic": "pydantic", "click": "click", "typer": "typer", "rich": "rich",
    "tqdm": "tqdm", "joblib": "joblib", "dask": "dask", "numba": "numba", "sympy": "sympy",
    "networkx": "networkx", "gensim": "gensim", "spacy": "spacy", "openai": "openai",
    "anthropic": "anthropic", "langchain": "langchain", "tiktoken": "tiktoken",
    "streamlit": "streamlit", "gradio": "gradio", "dash": "dash", "pytest": "pytest",
    "hypothesis": "hypothesis", "black": "black", "mypy": "mypy", "redis": "redis",
    "pymongo": "pymongo", "psutil": "psutil", "paramiko": "paramiko",
    "cryptography": "cryptography", "bcrypt": "bcrypt", "arrow": "arrow",
    "pendulum": "pendulum", "pytz": "pytz", "tabulate": "tabulate", "openpyxl": "openpyxl",
    "xlrd": "xlrd", "xlsxwriter": "XlsxWriter", "h5py": "h5py", "tables": "tables",
    "netCDF4": "netCDF4", "xarray": "xarray", "geopandas": "geopandas", "shapely": "shapely",
    "folium": "folium", "pyproj": "pyproj", "rasterio": "rasterio", "fiona": "fiona",
    "imageio": "imageio", "librosa": "librosa", "soundfile": "soundfile",
    "pydub": "pydub", "moviepy": "moviepy", "pygame": "pygame", "selenium": "selenium",
    "scrapy": "Scrapy", "feedparser": "feedparser", "tweepy": "tweepy",
    "wordcloud": "wordcloud", "textblob": "textblob", "emoji": "emoji",
    "faker": "Faker", "polars": "polars", "duckdb": "duckdb", "sqlmodel": "sqlmodel",
    "alembic": "alembic", "celery": "celery", "kombu": "kombu", "gunicorn": "gunicorn",
    "websockets": "websockets", "grpc": "grpcio", "jsonschema": "jsonschema",
    "toml": "toml", "tomli": "tomli", "orjson": "orjson", "ujson": "ujson",
    "simplejson": "simplejson", "msgpack": "msgpack", "cachetools": "cachetools",
    "tenacity": "tenacity", "loguru": "loguru", "colorama": "colorama",
    "termcolor": "termcolor", "pyfiglet": "pyfiglet", "docker": "docker",
    "kubernetes": "kubernetes", "ray": "ray", "mlflow": "mlflow", "wandb": "wandb",
    "optuna": "optuna", "shap": "shap", "lime": "lime", "prophet": "prophet",
    "pmdarima": "pmdarima", "imblearn": "imbalanced-learn", "mlxtend": "mlxtend",
    "pycaret": "pycaret", "sktime": "sktime", "tsfresh": "tsfresh", "pywt": "PyWavelets",
    "cvxpy": "cvxpy", "pulp": "PuLP", "ortools": "ortools", "gym": "gym",
    "gymnasium": "gymnasium", "stable_baselines3": "stable-baselines3",
    "pytorch_lightning": "pytorch-lightning", "lightning": "lightning", "timm": "timm",
    "albumentations": "albumentations", "onnx": "onnx", "onnxruntime": "onnxruntime",
    "pyodbc": "pyodbc", "cx_Oracle": "cx_Oracle", "sqlparse": "sqlparse",
    "pdfplumber": "pdfplumber", "PyPDF2": "PyPDF2", "reportlab": "reportlab",
    "qrcode": "qrcode", "pyautogui": "PyAutoGUI", "pynput": "pynput", "keyboard": "keyboard",
    "schedule": "schedule", "apscheduler": "APScheduler", "holidays": "holidays",
    "unidecode": "Unidecode", "chardet": "chardet", "ftfy": "ftfy", "regex": "regex",
    "yfinance": "yfinance", "ccxt": "ccxt", "pandas_datareader": "pandas-datareader",
    "ta": "ta", "quandl": "Quandl", "sounddevice": "sounddevice", "pyaudio": "PyAudio",
}  # fmt: skip

# 259 more, assembled after the list above and before the download counts were used (the
# rules for variants and dotted imports were then set looking at both lists' misses)
OTHERS = {
    "google.generativeai": "google-generativeai", "google.genai": "google-genai",
    "google.auth": "google-auth", "google_auth_oauthlib": "google-auth-oauthlib",
    "google.oauth2": "google-auth", "firebase_admin": "firebase-admin",
    "azure.identity": "azure-identity", "azure.keyvault.secrets": "azure-keyvault-secrets",
    "ruamel.yaml": "ruamel.yaml", "osgeo": "GDAL", "dateparser": "dateparser",
    "markdown_it": "markdown-it-py", "jsonpath_ng": "jsonpath-ng", "rapidfuzz": "rapidfuzz",
    "fuzzywuzzy": "fuzzywuzzy", "thefuzz": "thefuzz", "sentencepiece": "sentencepiece",
    "pycrfsuite": "python-crfsuite", "cassandra": "cassandra-driver", "neo4j": "neo4j",
    "elasticsearch": "elasticsearch", "opensearchpy": "opensearch-py", "chromadb": "chromadb",
    "qdrant_client": "qdrant-client", "weaviate": "weaviate-client", "pymilvus": "pymilvus",
    "rq": "rq", "pika": "pika", "confluent_kafka": "confluent-kafka", "aiokafka": "aiokafka",
    "nats": "nats-py", "paho.mqtt": "paho-mqtt", "smbus2": "smbus2", "RPi.GPIO": "RPi.GPIO",
    "pyvisa": "PyVISA", "can": "python-can", "evdev": "evdev", "pyperclip": "pyperclip",
    "pyttsx3": "pyttsx3", "gtts": "gTTS", "whisper": "openai-whisper", "mediapipe": "mediapipe",
    "dlib": "dlib", "face_recognition": "face-recognition", "pytesseract": "pytesseract",
    "easyocr": "easyocr", "ultralytics": "ultralytics", "kornia": "kornia",
    "segmentation_models_pytorch": "segmentation-models-pytorch", "torchmetrics": "torchmetrics",
    "torch_geometric": "torch-geometric", "einops": "einops", "safetensors": "safetensors",
    "peft": "peft", "bitsandbytes": "bitsandbytes", "trl": "trl", "deepspeed": "deepspeed",
    "vllm": "vllm", "llama_cpp": "llama-cpp-python", "ollama": "ollama",
    "langchain_openai": "langchain-openai", "langchain_community": "langchain-community",
    "llama_index": "llama-index", "instructor": "instructor", "litellm": "litellm",
    "cohere": "cohere", "mistralai": "mistralai", "groq": "groq",
    "huggingface_hub": "huggingface-hub", "evaluate": "evaluate",
    "jupyter_client": "jupyter-client", "nbformat": "nbformat", "nbconvert": "nbconvert",
    "papermill": "papermill", "jupytext": "jupytext", "ipykernel": "ipykernel", "panel": "panel",
    "holoviews": "holoviews", "hvplot": "hvplot", "pyecharts": "pyecharts",
    "graphviz": "graphviz", "pydot": "pydot", "pyvis": "pyvis", "igraph": "igraph",
    "leidenalg": "leidenalg", "osmnx": "osmnx", "geopy": "geopy", "rtree": "Rtree", "h3": "h3",
    "contextily": "contextily", "cartopy": "Cartopy", "cftime": "cftime", "zarr": "zarr",
    "metpy": "MetPy", "astropy": "astropy", "skyfield": "skyfield", "pymc": "pymc",
    "arviz": "arviz", "emcee": "emcee", "lifelines": "lifelines", "linearmodels": "linearmodels",
    "arch": "arch", "tslearn": "tslearn", "pyod": "pyod", "hdbscan": "hdbscan",
    "kmodes": "kmodes", "category_encoders": "category-encoders", "featuretools": "featuretools",
    "feature_engine": "feature-engine", "scikitplot": "scikit-plot",
    "yellowbrick": "yellowbrick", "eli5": "eli5", "dtreeviz": "dtreeviz",
    "evidently": "evidently", "great_expectations": "great-expectations", "pandera": "pandera",
    "janitor": "pyjanitor", "modin": "modin", "ibis": "ibis-framework", "sqlglot": "sqlglot",
    "psycopg": "psycopg", "asyncpg": "asyncpg", "aiomysql": "aiomysql", "aiosqlite": "aiosqlite",
    "motor": "motor", "peewee": "peewee", "tortoise": "tortoise-orm",
    "snowflake.connector": "snowflake-connector-python",
    "databricks.sql": "databricks-sql-connector", "clickhouse_driver": "clickhouse-driver",
    "clickhouse_connect": "clickhouse-connect", "pyhive": "PyHive", "trino": "trino",
    "pymssql": "pymssql", "oracledb": "oracledb", "sqlite_utils": "sqlite-utils",
    "tinydb": "tinydb", "minio": "minio", "s3fs": "s3fs", "gcsfs": "gcsfs", "fsspec": "fsspec",
    "smart_open": "smart-open", "fabric": "fabric", "pexpect": "pexpect", "watchdog": "watchdog",
    "croniter": "croniter", "dramatiq": "dramatiq", "prefect": "prefect", "dagster": "dagster",
    "airflow": "apache-airflow", "luigi": "luigi", "kedro": "kedro", "hydra": "hydra-core",
    "omegaconf": "omegaconf", "absl": "absl-py", "fire": "fire", "rich_click": "rich-click",
    "questionary": "questionary", "prompt_toolkit": "prompt-toolkit", "textual": "textual",
    "alive_progress": "alive-progress", "humanize": "humanize", "babel": "Babel",
    "pycountry": "pycountry", "phonenumbers": "phonenumbers",
    "email_validator": "email-validator", "marshmallow": "marshmallow", "cerberus": "Cerberus",
    "attrs": "attrs", "cattrs": "cattrs", "msgspec": "msgspec", "fastavro": "fastavro",
    "grpc_tools": "grpcio-tools", "capnp": "pycapnp", "lz4": "lz4", "zstandard": "zstandard",
    "brotli": "Brotli", "xxhash": "xxhash", "sortedcontainers": "sortedcontainers",
    "more_itertools": "more-itertools", "toolz": "toolz", "wrapt": "wrapt",
    "diskcache": "diskcache", "filelock": "filelock", "cpuinfo": "py-cpuinfo",
    "platformdirs": "platformdirs", "decouple": "python-decouple", "keyring": "keyring",
    "passlib": "passlib", "argon2": "argon2-cffi", "authlib": "Authlib",
    "requests_oauthlib": "requests-oauthlib", "msal": "msal", "ldap3": "ldap3", "pyotp": "pyotp",
    "barcode": "python-barcode", "html2text": "html2text", "bleach": "bleach",
    "trafilatura": "trafilatura", "newspaper": "newspaper3k", "playwright": "playwright",
    "webdriver_manager": "webdriver-manager", "httplib2": "httplib2",
    "requests_toolbelt": "requests-toolbelt", "aiofiles": "aiofiles", "uvloop": "uvloop",
    "gevent": "gevent", "tornado": "tornado", "sanic": "sanic", "flask_login": "Flask-Login",
    "flask_wtf": "Flask-WTF", "socketio": "python-socketio",
    "rest_framework": "djangorestframework", "corsheaders": "django-cors-headers",
    "django_filters": "django-filter", "strawberry": "strawberry-graphql", "mako": "Mako",
    "weasyprint": "weasyprint", "fpdf": "fpdf2", "pypdf": "pypdf", "pdfminer": "pdfminer.six",
    "camelot": "camelot-py", "tabula": "tabula-py", "ebooklib": "EbookLib",
    "win32com": "pywin32", "PyQt5": "PyQt5", "PySide6": "PySide6", "kivy": "Kivy",
    "pyglet": "pyglet", "pyvista": "pyvista", "open3d": "open3d", "trimesh": "trimesh",
    "imagehash": "ImageHash", "av": "av", "ffmpeg": "ffmpeg-python", "mido": "mido",
    "langdetect": "langdetect", "inflect": "inflect", "spellchecker": "pyspellchecker",
    "vaderSentiment": "vaderSentiment", "pyparsing": "pyparsing", "lark": "lark",
    "antlr4": "antlr4-python3-runtime", "tree_sitter": "tree-sitter", "libcst": "libcst",
    "isort": "isort", "pytest_asyncio": "pytest-asyncio", "vcr": "vcrpy",
    "freezegun": "freezegun", "factory": "factory-boy", "sentry_sdk": "sentry-sdk",
    "prometheus_client": "prometheus-client", "jmespath": "jmespath", "deepdiff": "deepdiff",
    "xmltodict": "xmltodict", "tldextract": "tldextract", "whois": "python-whois",
    "scapy": "scapy", "netmiko": "netmiko",
}  # fmt: skip

# 87 more, assembled once those rules were set, and measured once
LATER = {
    "cairosvg": "CairoSVG", "svgwrite": "svgwrite", "nibabel": "nibabel", "pydicom": "pydicom",
    "SimpleITK": "SimpleITK", "monai": "monai", "nilearn": "nilearn", "mne": "mne",
    "rdkit": "rdkit", "pubchempy": "PubChemPy", "ase": "ase", "pymatgen": "pymatgen",
    "mdtraj": "mdtraj", "openmm": "openmm", "galois": "galois", "qiskit": "qiskit",
    "cirq": "cirq", "pennylane": "PennyLane", "casadi": "casadi", "pyomo": "pyomo",
    "gurobipy": "gurobipy", "mip": "mip", "simpy": "simpy", "mesa": "mesa",
    "networkit": "networkit", "findspark": "findspark", "koalas": "koalas", "petl": "petl",
    "tablib": "tablib", "agate": "agate", "csvkit": "csvkit", "frictionless": "frictionless",
    "jsonlines": "jsonlines", "ndjson": "ndjson", "simdjson": "pysimdjson",
    "rapidjson": "python-rapidjson", "hjson": "hjson", "json5": "json5", "tomlkit": "tomlkit",
    "configobj": "configobj", "yamale": "yamale", "jsonnet": "jsonnet", "pyhocon": "pyhocon",
    "dynaconf": "dynaconf", "colorlog": "colorlog", "coloredlogs": "coloredlogs",
    "blessings": "blessings", "asciimatics": "asciimatics", "npyscreen": "npyscreen",
    "urwid": "urwid", "pick": "pick", "prettytable": "prettytable", "texttable": "texttable",
    "terminaltables": "terminaltables", "art": "art", "cowsay": "cowsay", "pyjokes": "pyjokes",
    "wikipedia": "wikipedia", "wikipediaapi": "Wikipedia-API", "praw": "praw",
    "instaloader": "instaloader", "pytube": "pytube", "yt_dlp": "yt-dlp",
    "youtube_dl": "youtube-dl", "spotipy": "spotipy", "pylast": "pylast",
    "slack_sdk": "slack-sdk", "slack_bolt": "slack-bolt", "twilio": "twilio",
    "sendgrid": "sendgrid", "mailchimp3": "mailchimp3", "stripe": "stripe",
    "paypalrestsdk": "paypalrestsdk", "shopify": "ShopifyAPI", "woocommerce": "WooCommerce",
    "binance": "python-binance", "alpaca_trade_api": "alpaca-trade-api",
    "ib_insync": "ib_insync", "backtrader": "backtrader", "zipline": "zipline",
    "quantstats": "quantstats", "pyfolio": "pyfolio", "empyrical": "empyrical",
    "talib": "TA-Lib", "finta": "finta", "mplfinance": "mplfinance", "pandas_ta": "pandas-ta",
}  # fmt: skip

SMALL = [  # pure-Python wheels for the real install: quick, and no compiler or system library
    "websocket", "dns", "dateutil", "yaml", "bs4", "dotenv", "jwt", "serial", "git", "attr",
    "tabulate", "tqdm", "requests", "toml", "pytz", "simplejson", "markdown", "docopt",
    "colorama", "slugify", "cachetools", "termcolor", "emoji", "schedule",
]  # fmt: skip


def measure(expected_of: dict[str, str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"right": [], "vouched_right": [], "vouched_wrong": []}
    found.update(asked=[], wrong=[], none=[])
    for module, expected in expected_of.items():
        provider = provider_for(module, installed=False)
        if provider is None:
            found["none"].append(module)
            continue
        right = canonical(provider.distribution) == canonical(expected)
        found["right" if right else "wrong"].append(module)
        if provider.vouched:
            found["vouched_right" if right else "vouched_wrong"].append(module)
        else:
            found["asked"].append(module)
        if not right:
            print(f"  {module}: proposed {provider.distribution} ({provider.why}), not {expected}")
    return found


def install_for_real(count: int) -> tuple[int, int, float]:
    """pip install + import of `count` vouched, small distributions in a scratch venv."""
    chosen = [m for m in SMALL if (p := provider_for(m, installed=False)) and p.vouched][:count]
    ok = 0
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="runfix-bench-installs-") as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        for module in chosen:
            provider = provider_for(module, installed=False)
            assert provider is not None
            pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            done = subprocess.run([*pip, provider.distribution], capture_output=True, text=True)
            imported = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
            worked = done.returncode == 0 and imported.returncode == 0
            ok += worked
            why = "ok" if worked else "FAILED " + re.sub(r"\s+", " ", done.stderr)[-200:]
            print(f"  pip install {provider.distribution} → import {module}: {why}")
    return ok, len(chosen), time.perf_counter() - began


def report(title: str, names: dict[str, str]) -> None:
    total = len(names)
    print(f"{total} {title} (the data alone, nothing installed here counted):")
    found = measure(names)
    share = lambda key: f"{len(found[key])}/{total} ({100 * len(found[key]) / total:.1f} %)"  # noqa: E731
    print(f"right (installed, or proposed in the question): {share('right')}")
    print(f"installed without a question: right {share('vouched_right')}, "
          f"wrong {share('vouched_wrong')} {found['vouched_wrong']}")  # fmt: skip
    print(f"asked first: {share('asked')}; no answer at all: {found['none']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--install", type=int, default=20, metavar="N", help="0: none")
    args = parser.parse_args()
    for title, names in (
        ("real-world imports", EXPECTED),
        ("more imports", OTHERS),
        ("imports measured once", LATER),
    ):
        report(title, names)
    if args.install:
        ok, tried, seconds = install_for_real(args.install)
        print(f"real installs: {ok}/{tried} installed and imported ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
