"""A new user's trial measured the cards' definitions (.card-def, 12.5 px) at rgb(156, 163, 175) on white: 2.5:1,
where WCAG AA asks 4.5:1 for text. The grey of reading text is the theme's --body-text-color-subdued (card
definitions, labels, notes, Gradio's info text); assets/style.css sets it to a colour with at least 4.5:1 on the
white cards and the page's own background, and leaves dark mode the theme's neutral-400, which has it on the dark
cards. The ratios are computed here from the stylesheet and the theme's own values."""

from __future__ import annotations

import re
from pathlib import Path

import gradio as gr
import pytest

from app import theme

CSS = re.sub(r"/\*.*?\*/", "", (Path(__file__).resolve().parents[1] / "assets" / "style.css").read_text(
    encoding="utf-8"), flags=re.S)  # the rules, without their comments
AA_TEXT = 4.5


def _rgb(colour: str) -> tuple[int, int, int]:
    """"#4b5563" or "#fff" or "white" as (r, g, b), 0..255."""
    colour = {"white": "#ffffff", "black": "#000000"}.get(colour, colour).lstrip("#")
    if len(colour) == 3:
        colour = "".join(c * 2 for c in colour)
    return int(colour[0:2], 16), int(colour[2:4], 16), int(colour[4:6], 16)


def contrast(fore: str, back: str) -> float:
    """The WCAG 2 contrast ratio of two sRGB colours, 1..21."""
    def luminance(colour: str) -> float:
        parts = [c / 255 for c in _rgb(colour)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in parts]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    high, low = sorted((luminance(fore), luminance(back)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _theme_value(t: gr.themes.Base, name: str) -> str:
    """A theme variable's colour, following its "*other_name" references (a dark variable's to their dark values,
    as Gradio does)."""
    value = getattr(t, name)
    while value.startswith("*"):
        ref = value[1:]
        value = getattr(t, f"{ref}_dark", None) if name.endswith("_dark") and hasattr(t, f"{ref}_dark") else None
        value = value or getattr(t, ref)
    return value


def test_the_contrast_ratio_follows_wcag():
    assert contrast("#000", "#fff") == pytest.approx(21.0)
    assert contrast("#9ca3af", "#ffffff") == pytest.approx(2.54, abs=0.01)  # the trial's 2.5:1
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)  # the lightest grey AA passes on white


def test_grey_reading_text_has_aa_contrast_on_its_backgrounds_in_light_mode():
    (value,) = re.findall(r"html:root\s*\{\s*--body-text-color-subdued:\s*(#[0-9a-fA-F]{3,6});\s*\}", CSS)
    t = theme()
    assert _theme_value(t, "body_text_color_subdued") == "#9ca3af"  # what the override replaces
    for back in ("block_background_fill", "body_background_fill", "background_fill_secondary"):
        assert contrast(value, _theme_value(t, back)) >= AA_TEXT, (back, contrast(value, _theme_value(t, back)))
    assert round(contrast(value, "#ffffff"), 1) == 7.6
    assert re.search(r"\.card-def \{[^}]*color: var\(--body-text-color-subdued\)", CSS)


def test_dark_mode_keeps_the_themes_grey_with_aa_contrast():
    t = theme()
    grey = _theme_value(t, "body_text_color_subdued_dark")
    assert grey == "#9ca3af" and "--body-text-color-subdued" not in "".join(re.findall(r"\.dark[^{]*\{[^}]*\}", CSS))
    for back in ("block_background_fill_dark", "body_background_fill_dark"):
        assert contrast(grey, _theme_value(t, back)) >= AA_TEXT, back


def test_no_rule_sets_reading_text_in_the_low_contrast_grey():
    literal = re.findall(r"(?<![-\w])color:\s*(#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3})\b", CSS)
    assert literal and all(c.lower() not in ("#9ca3af", "#d1d5db") for c in literal), literal
