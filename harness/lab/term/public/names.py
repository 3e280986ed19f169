"""Whether a pseudonym names a student, in any form the LMS gives a name or a student might
disguise one. The public page must not say who is who; a pseudonym is checked against every name and
id the LMS gave (the manifest's names, ids and folder names) and every folder graded.

How the LMS writes names (read from their source):
- Canvas names a submission's files by the student's sortable name ("Last, First"), lowercased, with
  every character that is not a word character removed (instructure/canvas-lms lib/content_zipper.rb:
  get_user_name, sanitize_user_name, sanitize_file_name): "Quill-Feather Zyx, Wanda" becomes
  `quillfeatherzyxwanda`. The first name is only the end of one run-together word, the last name
  its start, so a classmate's first name would pass a check for whole words.
- Moodle names a folder by the full name, "First Last" (`Zoë O'Brien_501_assignsubmission_file_`);
  `lab collect` folds it into `zoe-obrien-501` and keeps the real name in the manifest.

A name is read in every form: its words (3+ characters) apart, run together in its order and in
reverse ("Last, First" and "First Last"), the start and the end of each word (a run-together word's
first and last names), and any SUBSTRING characters of it; an id (a word with a digit) wherever it
is, in digits or look-alikes. Look-alike characters fold to one (fold: 1 l I |, 0 o, 5 s, 3 e, 4 a,
7 t, 8 b, rn m, vv w; Cyrillic and Greek letters that look Latin; accents and full-width forms by
NFKC, NFKD and casefold).

    fold(text) -> str; squash(text) -> str; words(name) -> [(word, is a number)];
    forms(name) -> (forms, numbers)
    named(alias, names) -> the name it contains, or None
"""

import re
import unicodedata

WORD = 3  # a name's word this long or longer may not be an alias's word, nor its start or end
SUBSTRING = 5  # characters of a name that may not appear anywhere in an alias (4 would refuse
# common English: "ight" of wright in "Night Owl")
SEPARATORS = re.compile(r"[\s,;_.\-]+")
LOOK_ALIKE = str.maketrans({
    "1": "l", "i": "l", "|": "l", "0": "o", "5": "s", "3": "e", "4": "a", "7": "t", "8": "b",
    # Cyrillic and Greek letters drawn as Latin ones (after casefold: lower case)
    "а": "a", "в": "b", "е": "e", "ё": "e", "і": "l", "ї": "l", "ј": "j", "к": "k", "м": "m", "н": "h",
    "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "һ": "h", "ԁ": "d", "ӏ": "l",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "l", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x",
    # letters NFKD does not take apart
    "ø": "o", "ł": "l", "đ": "d", "ð": "d", "ı": "l", "æ": "ae", "œ": "oe", "þ": "th",
})
PAIRS = (("rn", "m"), ("vv", "w"))  # two letters that read as one


def fold(text: str) -> str:
    """`text` with look-alikes made one: full-width and compatibility forms (NFKC), case (casefold),
    accents (NFKD, combining marks dropped), LOOK_ALIKE, then PAIRS."""
    out = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    out = "".join(c for c in out if not unicodedata.combining(c)).translate(LOOK_ALIKE)
    for pair, one in PAIRS:
        out = out.replace(pair, one)
    return out


def words(name: str) -> list[tuple[str, bool]]:
    """(word, is a number) of a name, each folded and squashed to [a-z0-9] ("O'Brien": obrien). A word
    with a digit is a number (an id: 4417, s2093847); names are letters."""
    found = [(squash(raw), any(c.isdigit() for c in raw)) for raw in SEPARATORS.split(name)]
    return [(word, number) for word, number in found if word]


def squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", fold(text))


def forms(name: str) -> tuple[set[str], set[str]]:
    """(the name's forms, its numbers): its words and their parts (3+ characters), and its words
    run together in order, in reverse and with "Last, First" turned round; the numbers (ids) apart."""
    found = words(name)
    texts = [word for word, number in found if not number]
    parts = [p for raw in SEPARATORS.split(fold(name)) for p in re.split(r"[^a-z0-9]+", raw)]
    runs = {"".join(texts), "".join(texts[::-1])}
    if "," in name:  # "Last, First" -> "firstlast"
        last, _, first = name.partition(",")
        runs.add("".join(w for w, number in words(first) + words(last) if not number))
    numbers = {word for word, number in found if number}
    return {f for f in set(texts) | set(parts) | runs if len(f) >= WORD} - numbers, numbers


def named(alias: str, names: list[str]) -> str | None:
    """The first of `names` that `alias` contains in any form (see the module's docstring), or None.
    An id is refused where the alias holds it (in digits or look-alikes); a name also where an alias
    word is a name word's start or end, or SUBSTRING characters of the name are in the alias."""
    alias_words = {word for word, _ in words(alias)}  # and its letters apart from its digits: Hal9000
    alias_words |= {squash(piece) for piece in re.findall(r"[^\W\d_]+|\d+", alias)}
    squashed = "".join(word for word, _ in words(alias))
    for name in names:
        texts, numbers = forms(name)
        for form in texts | numbers:
            if form in alias_words or form == squashed or (len(form) >= 4 and form in squashed):
                return name
        for form in texts:
            if any(len(w) >= WORD and (form.startswith(w) or form.endswith(w)) for w in alias_words):
                return name
            if any(form[i:i + SUBSTRING] in squashed for i in range(len(form) - SUBSTRING + 1)):
                return name
    return None
