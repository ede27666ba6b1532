"""Mails as a series: what `git format-patch --cover-letter --base`, `b4 am -o` or a mail
client's "save as mbox" writes. Mail is untrusted: headers are decoded (RFC 2047) and then
made safe for a terminal (textsafe), an input over MAX_BYTES is refused, a patch naming a path
outside the tree is refused (UserError: one line, exit 2), a binary patch is kept as a patch
that will not be applied (a row says so).

    load(source) -> MailSeries      source: an mbox file, a maildir, or "-" for stdin
"""
from __future__ import annotations

import email
import email.errors
import email.policy
import mailbox
import re
import sys
import tempfile
from dataclasses import dataclass, field
from email.header import decode_header
from pathlib import Path

from flagbench.errors import UserError
from flagbench.textsafe import term_text

MAX_BYTES = 32 * 2**20        # a series' mails, all of them; a kernel series is well under 1 MB
_REPLY = re.compile(r"^\s*(re|aw|sv|fwd?)\s*:", re.I)
_BRACKETS = re.compile(r"^\s*((?:\[[^\]]*\]\s*)+)")
_BASE = re.compile(r"^base-commit:\s*([0-9a-f]{40})\s*$", re.M)
_PATHS = re.compile(r"^(?:diff --git (\S+) (\S+)|(?:---|\+\+\+) (\S+)|(?:rename|copy) (?:from|to) (.+))$", re.M)
_BINARY = re.compile(r"^(?:GIT binary patch|Binary files .* differ)$", re.M)
_DIFF = re.compile(r"^(?:diff --git |--- \S|Index: )", re.M)


@dataclass
class Patch:
    subject: str                 # without its [PATCH ...] prefix, decoded and made safe
    author: str                  # From:, decoded and made safe
    version: int
    number: int | None           # k of k/n; None: no k/n in the prefix
    total: int | None
    message_id: str
    raw: bytes                   # the mail as it came: what git am reads
    body: str                    # its text (for paths, base-commit:)
    binary: bool = False

    @property
    def label(self) -> str:
        v = f"v{self.version} " if self.version > 1 else ""
        if self.number is None:
            return f"[PATCH {v}]".replace(" ]", "]")
        return f"[PATCH {v}{self.number}/{self.total}]"

    @property
    def author_name(self) -> str:
        name = self.author.split("<")[0].strip().strip('"')
        return name or self.author


@dataclass
class MailSeries:
    source: str                  # what the user named
    name: str                    # the cover letter's subject, or the first patch's
    version: int
    cover: Patch | None
    patches: list[Patch]         # in order
    base_commit: str | None      # from `base-commit:` (format-patch --base)
    notes: list[str] = field(default_factory=list)


def load(source: str, allow_cover: bool = False) -> MailSeries:
    """The series in SOURCE (see the module doc); UserError for what cannot be one."""
    mails = _messages(source)
    return series_of(source, mails, allow_cover)


def _messages(source: str) -> list[bytes]:
    if source == "-":
        if sys.stdin is None:
            raise UserError("stdin is closed: no mail to read")
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
        _check_size(len(data), "stdin")
        return split(data, "stdin")
    path = Path(source)
    if path.is_dir():
        if not (path / "cur").is_dir() and not (path / "new").is_dir():
            raise UserError(f"{source}: a directory that is not a maildir (no cur/ or new/)")
        files = [f for sub in ("new", "cur") if (path / sub).is_dir() for f in (path / sub).iterdir()]
        odd = next((f for f in files if f.is_symlink() or not f.is_file()), None)
        if odd is not None:
            raise UserError(f"{odd}: not a regular file: a maildir holds mails only")
        size = sum(f.stat().st_size for f in files)
        _check_size(size, source)
        box = mailbox.Maildir(path, factory=None, create=False)
        return [box.get_bytes(key) for key in sorted(box.keys())]
    try:
        size = path.stat().st_size
    except OSError as e:
        raise UserError(f"{source}: {e.strerror}") from None
    if not path.is_file():
        raise UserError(f"{source}: not a file, a maildir or -")
    _check_size(size, source)
    try:
        return split(path.read_bytes(), source)
    except OSError as e:
        raise UserError(f"{source}: {e.strerror}") from None


def _check_size(size: int, where: str) -> None:
    if size > MAX_BYTES:
        raise UserError(f"{where}: more than {MAX_BYTES // 2**20} MB of mail: not a patch series "
                        "flagbench will read")


def split(data: bytes, where: str) -> list[bytes]:
    """An mbox's mails (Python's mailbox reads it), or DATA as one mail when it does not start
    with an mbox "From " line (b4 pipes one message so)."""
    if b"\0" in data:
        raise UserError(f"{where}: binary data, not mail (a NUL byte)")
    if not data.strip():
        raise UserError(f"{where}: empty: no mail")
    if not data.startswith(b"From "):
        return [data]
    from flagbench.cache import cache_dir

    home = cache_dir() / "mail"    # mailbox reads a file: the copy is flagbench's, in its cache
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mbox-", dir=home) as tmp:
        path = Path(tmp) / "mbox"
        path.write_bytes(data)
        box = mailbox.mbox(path, factory=None, create=False)
        try:
            return [box.get_bytes(k) for k in box.keys()]
        finally:
            box.close()


def header(msg, name: str) -> str:
    """Header NAME decoded (RFC 2047, word by word: a word in an unknown charset read as UTF-8,
    bytes that are not replaced), unfolded, made safe for a terminal."""
    raw = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    if raw is None:
        return ""
    # 8-bit bytes in a header (a client that sent UTF-8 raw) come as surrogates: read them as UTF-8
    text = str(raw).encode("ascii", "surrogateescape").decode("utf-8", "replace")
    try:
        words = decode_header(text)
    except (ValueError, email.errors.HeaderParseError):
        words = [(text, None)]
    out = []
    for word, charset in words:
        if isinstance(word, bytes):
            try:
                word = word.decode(charset or "ascii")
            except (LookupError, UnicodeError):
                word = word.decode("utf-8", errors="replace")
        out.append(word)
    return term_text(" ".join("".join(out).split()))


def body_text(msg) -> str:
    """The mail's text/plain parts, decoded by their charset (bytes that are not: replaced)."""
    parts = msg.walk() if msg.is_multipart() else [msg]
    out = []
    for part in parts:
        text = part.get_content_type() in ("text/plain", "text/x-patch", "text/x-diff")
        attached = (part.get_content_type() == "application/octet-stream"
                    and (part.get_filename() or "").endswith((".patch", ".diff")))
        if not (text or attached):
            continue
        payload = part.get_payload(decode=True)
        if payload is None:
            continue
        charset = part.get_content_charset() or "utf-8"
        try:
            out.append(payload.decode(charset, errors="replace"))
        except LookupError:
            out.append(payload.decode("utf-8", errors="replace"))
    return "\n".join(out)


def _prefix(subject: str) -> tuple[bool, int, int | None, int | None, str]:
    """(is a [PATCH], version, k, n, subject without the prefix)."""
    m = _BRACKETS.match(subject)
    if not m:
        return False, 1, None, None, subject.strip()
    words = re.findall(r"[^\s\[\],]+", m.group(1))
    is_patch = any(w.upper() in ("PATCH", "RFC", "PULL") for w in words)
    version, k, n = 1, None, None
    for w in words:
        if re.fullmatch(r"[vV]\d{1,4}", w):
            version = int(w[1:])
        elif re.fullmatch(r"\d{1,4}/\d{1,4}", w):
            k, n = (int(x) for x in w.split("/"))
    return is_patch, version, k, n, subject[m.end():].strip()


_LINK = re.compile(r"^(?:new file mode|new mode|deleted file mode|old mode|index \S+) (120000|160000)$", re.M)


def check_paths(p: Patch) -> None:
    """A path in a diff that is absolute, climbs out of the tree or names .git, or a symbolic
    link or submodule (what could point a build outside the tree): refused."""
    link = _LINK.search(p.body)
    if link:
        what = "a symbolic link" if link.group(1) == "120000" else "a submodule"
        raise UserError(f"{p.label} {p.subject[:60]}: {what} in the patch: refused (nothing applied)")
    for rel in paths(p):
        parts = rel.replace("\\", "/").split("/")
        if rel.startswith("/") or ".." in parts or any(x.lower() == ".git" for x in parts):
            raise UserError(f"{p.label} {p.subject[:60]}: the path {term_text(rel)[:80]} is outside the tree: "
                            "refused (nothing applied)")


def paths(p: Patch) -> list[str]:
    """The paths P's diff names (a/ and b/ taken off), as the diff spells them."""
    out = []
    for m in _PATHS.finditer(p.body):
        for path in (g for g in m.groups() if g):
            path = path.strip().strip('"')
            if path != "/dev/null":
                out.append(path[2:] if path[:2] in ("a/", "b/") and m.group(4) is None else path)
    return out


def series_of(source: str, mails: list[bytes], allow_cover: bool = False) -> MailSeries:
    """The patches of MAILS in order: replies and mails without a diff left out, duplicates of
    one [PATCH vN k/n] kept once, the latest version when several are mixed; notes say so.
    ALLOW_COVER: a cover letter alone is a series without patches (b4's per-series check)."""
    notes: list[str] = []
    covers: list[Patch] = []
    patches: list[Patch] = []
    base = None
    for i, raw in enumerate(mails, 1):
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
        subject = header(msg, "Subject")
        if msg.defects and not subject:
            notes.append(f"mail {i}: not a mail ({type(msg.defects[0]).__name__}): ignored")
            continue
        body = body_text(msg)
        is_patch, version, k, n, rest = _prefix(subject)
        diff = bool(_DIFF.search(body))
        p = Patch(rest or subject, header(msg, "From"), version, k, n, header(msg, "Message-ID"), raw, body,
                  bool(_BINARY.search(body)))
        found = _BASE.search(body)
        if _REPLY.match(subject):
            notes.append(f"mail {i}: a reply ({subject[:60]}): ignored")
        elif k == 0 and is_patch:
            covers.append(p)
            base = base or (found.group(1) if found else None)
        elif diff:
            check_paths(p)
            patches.append(p)
            base = base or (found.group(1) if found else None)
        else:
            notes.append(f"mail {i}: no patch in it ({subject[:60] or 'no subject'}): ignored")
    if not patches and len(covers) == 1 and allow_cover:
        c = covers[0]
        return MailSeries(source, c.subject, c.version, c, [], base, notes)
    if not patches:
        raise UserError(f"{source}: no patch in {len(mails)} mail{'s' * (len(mails) != 1)} "
                        "(what `git format-patch` writes, or an mbox of it)")
    version = max(p.version for p in patches)
    older = [p for p in patches if p.version != version]
    if older:
        notes.append(f"{len(older)} patch(es) of other versions than v{version} ignored")
        patches = [p for p in patches if p.version == version]
    ordered, seen = [], set()
    for p in patches:
        key = (p.number, p.subject) if p.number is None else p.number
        if key in seen:
            notes.append(f"a duplicate of {p.label} ignored")
            continue
        seen.add(key)
        ordered.append(p)
    numbers = [p.number for p in ordered]
    if all(x is not None for x in numbers):
        if numbers != sorted(numbers):
            notes.append("mails out of order: taken in their [PATCH k/n] order")
        ordered.sort(key=lambda p: p.number)
        total = ordered[-1].total or len(ordered)
        missing = sorted(set(range(1, total + 1)) - set(numbers))
        if missing:
            notes.append(f"patch(es) {', '.join(map(str, missing))} of {total} missing from the mails")
    cover = next((c for c in covers if c.version == version), None)
    return MailSeries(source, cover.subject if cover else ordered[0].subject, version, cover, ordered, base, notes)
