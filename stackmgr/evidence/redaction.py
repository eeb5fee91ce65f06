"""What a result record may say of the secrets around a run: `stackmgr run` records environment variables, the
command line and what the accelerators' tools print into a link record the team pushes, so a credential among
them would leave with the results.

The rule (docs/SECURITY.md), for an environment variable recorded by `run` (the runtimes' prefixes, `[run] env`
of the shared config or of this machine's `stackmgr.local.toml`): its value is recorded as `<set>` when its name
looks secret (`secret_name`) or its value looks like a credential (`looks_secret`), unless this machine's own
config names it in `[run] env_by_value`; the shared config can add names to record, never a value. A command line
keeps its words, with what follows a secret-looking option (`--api-key X`, `--hf-token=X`), a secret-looking
assignment (`HF_TOKEN=X`, `?access_token=X`), an `Authorization:`/`Cookie:` header, a URL's password and a token of
a known shape written `<redacted>`."""

from __future__ import annotations

import re
from collections.abc import Collection

SET = "<set>"  # a secret variable's value as recorded: it was set, its value stays on this machine
HIDDEN = "<redacted>"  # a secret within a command line or a tool's output, as recorded

# A name looks secret when one of its words (split at anything but letters and digits, any case) holds one of
# these, or is one of SECRET_PARTS; words that only count tokens or name a tokenizer or an author do not count.
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "PWD", "CREDENTIAL", "AUTH",
                "COOKIE", "SESSION", "PRIVATE", "SIGNATURE", "JWT", "DSN", "WEBHOOK")  # fmt: skip
SECRET_PARTS = frozenset({"PASS", "PW", "PAT", "SIG", "SAS", "OTP", "TOTP", "PSK", "CSRF", "XSRF", "BEARER"})
HARMLESS_PARTS = frozenset({"TOKENS", "TOKENIZER", "TOKENIZERS", "TOKENIZATION", "TOKENIZE", "TOKENIZED",
                            "DETOKENIZE", "DETOKENIZER", "DETOKENIZATION", "AUTHOR", "AUTHORS"})  # fmt: skip
# Whole families of cloud and vault credentials: every variable of theirs is kept back.
SECRET_FAMILIES = ("AWS_", "AZURE_", "ARM_", "GOOGLE_", "GCP_", "GCLOUD_", "CLOUDSDK_", "VAULT_")
# Paths the shell and desktop set, never a credential, although their names say PWD or AUTH.
NOT_SECRET = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY"})
# Named for the reader: each is caught by the words above as well.
KNOWN_SECRETS = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "VLLM_API_KEY",
                           "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "WANDB_API_KEY", "NGC_API_KEY", "GITHUB_TOKEN",
                           "GH_TOKEN", "MYSQL_PWD", "PGPASSWORD", "SENTRY_DSN"})  # fmt: skip

_PART_SPLIT = re.compile(r"[^A-Z0-9]+")
# Credentials by their shape, whatever they are called: provider tokens, AWS and Google keys, JSON web tokens.
_SHAPES = (r"sk-[A-Za-z0-9_-]{10,}", r"hf_[A-Za-z0-9]{16,}", r"gh[pousr]_[A-Za-z0-9]{16,}",
           r"github_pat_[A-Za-z0-9_]{16,}", r"glpat-[A-Za-z0-9_-]{16,}", r"xox[abposr]-[A-Za-z0-9-]{10,}",
           r"(?:AKIA|ASIA)[A-Z0-9]{16}", r"AIza[A-Za-z0-9_-]{30,}", r"npm_[A-Za-z0-9]{30,}",
           r"pypi-[A-Za-z0-9_-]{30,}", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")  # fmt: skip
_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(_SHAPES) + r")")
_RANDOM = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+]{32,}={0,2}(?![A-Za-z0-9+/=])")  # base64 keys
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/:@]*:)([^\s/@]+)(?=@)")
_SCHEMES = (re.compile(r"\b((?i:bearer)\s+)([^\s\"',;<]+)"), re.compile(r"\b(Basic\s+)([A-Za-z0-9+/]{8,}={0,2})"))
_HEADER = re.compile(r"^(\s*([A-Za-z][A-Za-z0-9_-]*)\s*:\s*)(\S.*)$", re.M)
_ASSIGNED = re.compile(r"(?<![A-Za-z0-9_.-])(-{0,2}([A-Za-z_][A-Za-z0-9_.-]*)=)(\"[^\"]*\"|'[^']*'|[^\s&;,\"']+)")
_QUOTED = re.compile(r"([\"']([A-Za-z_][A-Za-z0-9_.-]*)[\"']\s*:\s*)(\"[^\"]*\"|'[^']*')")
_OPTION_WORD = re.compile(r"(?<!\S)(--?([A-Za-z][A-Za-z0-9_-]*)\s+)(\"[^\"]*\"|'[^']*'|[^\s\"'-]\S*)")
_OPTION = re.compile(r"--?([A-Za-z][A-Za-z0-9_-]*)")
_USER_OPTIONS = ("-u", "--user", "--proxy-user")  # curl's `-u NAME:PASSWORD`


def secret_name(name: str) -> bool:
    """Whether a variable, option or header called `name` looks like it holds a credential."""
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    if upper in KNOWN_SECRETS or upper.startswith(SECRET_FAMILIES):
        return True
    for part in _PART_SPLIT.split(upper):
        if part in HARMLESS_PARTS:
            continue
        if part in SECRET_PARTS or any(word in part for word in SECRET_WORDS):
            return True
    return False


def looks_secret(value: str) -> bool:
    """Whether `value` holds something shaped like a credential (see `mask_text`), whatever it is called."""
    return mask_text(value) != value


def recorded_value(name: str, value: str, by_value: Collection[str] = ()) -> str:
    """What a record may hold for environment variable `name` set to `value`: the value, or `<set>` when the name
    or the value looks secret; `by_value` (this machine's `[run] env_by_value`, never the shared config) lets
    a variable be recorded as it is."""
    if name in by_value:
        return value
    return SET if secret_name(name) or looks_secret(value) else value


def mask_text(text: str, hidden: list[str] | None = None) -> str:
    """`text` (a word of a command line, a tool's line, a variable's value) with every credential-looking part
    written `<redacted>`: a private key block, a URL's password, a `Bearer`/`Basic` credential, the value of a
    secret-looking header (`Authorization: …`), assignment (`api_key=…`, `"token": "…"`) or option
    (`--api-key …`), a provider token by its shape (`sk-…`, `hf_…`, `ghp_…`, `AKIA…`, JSON web tokens), and a
    base64 word of 32 characters or more that mixes upper case, lower case and digits. What was hidden is
    appended to `hidden`."""
    found = hidden if hidden is not None else []

    def whole(m: re.Match[str]) -> str:
        found.append(m.group(0))
        return HIDDEN

    def after(keep: str, value: str) -> str:
        found.append(value.strip("\"'"))
        return keep + HIDDEN

    def named(m: re.Match[str]) -> str:  # groups: what stays, the name, the value
        return after(m.group(1), m.group(3)) if secret_name(m.group(2)) else m.group(0)

    text = _PEM.sub(whole, text)
    text = _URL_PASSWORD.sub(lambda m: after(m.group(1), m.group(2)), text)
    text = _HEADER.sub(named, text)
    for scheme in _SCHEMES:
        text = scheme.sub(lambda m: after(m.group(1), m.group(2)), text)
    for pattern in (_ASSIGNED, _QUOTED, _OPTION_WORD):
        text = pattern.sub(named, text)
    text = _TOKEN.sub(whole, text)
    return _RANDOM.sub(lambda m: whole(m) if _mixed(m.group(0)) else m.group(0), text)


def command_line(argv: list[str], hidden: list[str] | None = None) -> list[str]:
    """`argv` as a record may hold it: each word through `mask_text`, and the word after a secret-looking option
    (`--api-key KEY`, `--hf-token T`; not one that starts with `-`, another option) or the password of curl's
    `-u NAME:PASSWORD` written `<redacted>`."""
    found = hidden if hidden is not None else []
    out: list[str] = []
    for i, word in enumerate(argv):
        before = argv[i - 1] if i else ""
        option = _OPTION.fullmatch(before)
        if option and secret_name(option.group(1)) and not word.startswith("-"):
            found.append(word)
            out.append(HIDDEN)
        elif before in _USER_OPTIONS and ":" in word:
            name, _, password = word.partition(":")
            found.append(password)
            out.append(f"{name}:{HIDDEN}")
        else:
            out.append(mask_text(word, found))
    return out


def _mixed(word: str) -> bool:
    return any(c.isupper() for c in word) and any(c.islower() for c in word) and any(c.isdigit() for c in word)
