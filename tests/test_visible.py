"""Invisible characters from the record are shown as escapes: the table covers every
control, format and separator character this Python knows, and ``visible`` writes each as
Python would, keeping what it is told to keep."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from lirun.visible import INVISIBLE, visible

HIDDEN = ("Cc", "Cf", "Zl", "Zp")


def test_the_table_covers_every_invisible_character_of_this_unicode() -> None:
    listed = {code for first, last in INVISIBLE for code in range(first, last + 1)}
    known = {
        code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) in HIDDEN
    }
    assert known <= listed, sorted(hex(c) for c in known - listed)
    # and nothing a person can see: a newer Unicode may only have assigned more of them
    assert all(unicodedata.category(chr(c)) in (*HIDDEN, "Cn") for c in listed)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, accents é and 漢字", "plain text, accents é and 漢字"),
        ("report\u202eexe.txt", "report\\u202eexe.txt"),  # right-to-left override
        ("\u202a\u202b\u202c\u202d\u202e", "\\u202a\\u202b\\u202c\\u202d\\u202e"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),  # isolates
        ("a\u200bb\u200cc\u200dd\u200ee\u200ff", "a\\u200bb\\u200cc\\u200dd\\u200ee\\u200ff"),
        ("\ufeffbom", "\\ufeffbom"),
        ("soft\u00adhyphen", "soft\\xadhyphen"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("\x00\x07\x1b[31m\x7f\x85\x9b", "\\x00\\x07\\x1b[31m\\x7f\\x85\\x9b"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("a\tb\nc\rd", "a\\x09b\\x0ac\\x0dd"),
    ],
)
def test_invisible_characters_become_escapes(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_what_is_kept_stays_and_names_win() -> None:
    assert visible("a\n\tb\u202e", keep="\n\t") == "a\n\tb\\u202e"
    assert visible("a\\b\n", names={"\\": "\\\\", "\n": "\\n"}) == "a\\\\b\\n"
