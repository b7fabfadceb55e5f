"""Drawn icons for the scenes (the pip-portable stand-in for real drawings: Debian's tuxpaint stamps are not
installed here). Every object kind has its own shape and colour; a hazard element also carries a state
mark in its cell corner: in the element's warning colour when ``active``, grey when ``inert`` (hazard
removed). So the hazard's presence is visible only as the state of a particular object, as in a photo where
the burner is lit or not.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from .taxonomy import HAZARDS, NEUTRAL_OBJECTS

SHAPES = ("rect", "ellipse", "triangle", "diamond", "cross", "ring", "hbar", "vbar", "ltri", "house", "plus_small")
BODY_COLOURS = ((70, 110, 200), (60, 160, 90), (150, 90, 40), (120, 60, 160), (40, 150, 160), (200, 170, 60),
                (110, 110, 50), (170, 80, 120))
MARK_COLOURS = ((255, 60, 0), (255, 200, 0), (0, 230, 255), (255, 0, 200), (0, 255, 90), (255, 255, 255),
                (190, 0, 0))
INERT_MARK = (128, 128, 128)
KINDS = (*HAZARDS, *NEUTRAL_OBJECTS)


def style(kind: str) -> tuple[str, tuple, tuple | None]:
    """(shape, body colour, active-mark colour or None) of an object kind; distinct for every kind."""
    i = KINDS.index(kind)
    shape = SHAPES[i % len(SHAPES)]
    body = BODY_COLOURS[(i // len(SHAPES) + 3 * i) % len(BODY_COLOURS)]
    mark = MARK_COLOURS[HAZARDS.index(kind) % len(MARK_COLOURS)] if kind in HAZARDS else None
    return shape, body, mark


def _draw_shape(d: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int], colour) -> None:
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    if shape == "rect":
        d.rectangle(box, fill=colour)
    elif shape == "ellipse":
        d.ellipse(box, fill=colour)
    elif shape == "triangle":
        d.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=colour)
    elif shape == "diamond":
        d.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=colour)
    elif shape == "cross":
        d.line([(x0, y0), (x1, y1)], fill=colour, width=3)
        d.line([(x0, y1), (x1, y0)], fill=colour, width=3)
    elif shape == "ring":
        d.ellipse(box, outline=colour, width=2)
    elif shape == "hbar":
        d.rectangle((x0, cy - 2, x1, cy + 2), fill=colour)
    elif shape == "vbar":
        d.rectangle((cx - 2, y0, cx + 2, y1), fill=colour)
    elif shape == "ltri":
        d.polygon([(x0, y0), (x1, cy), (x0, y1)], fill=colour)
    elif shape == "house":
        d.polygon([(cx, y0), (x1, cy), (x1, y1), (x0, y1), (x0, cy)], fill=colour)
    else:  # plus_small
        d.rectangle((cx - 1, y0, cx + 1, y1), fill=colour)
        d.rectangle((x0, cy - 1, x1, cy + 1), fill=colour)


def render(objects: list[tuple[str, int, str]], grid: int, cell: int, rng: np.random.Generator,
           contrast_min: float = 1.0) -> np.ndarray:
    """A scene as uint8 CHW: ``objects`` are (kind, cell index, state in {active, inert, neutral}).

    Icons are jittered by a pixel and the image gets mild noise, so that no two renders are identical. With
    ``contrast_min`` < 1 an active hazard's visibility varies: its mark is the inert grey moved a share
    ``v ~ U(contrast_min, 1)`` of the way to its warning colour (a barely lit burner, a hairline crack: the
    subtle hazards of real photos), so perception is imperfect for every model; at 1 every mark is fully salient.
    """
    size = grid * cell
    img = Image.new("RGB", (size, size), (228, 222, 210))
    d = ImageDraw.Draw(img)
    for kind, pos, state in objects:
        r, c = divmod(int(pos), grid)
        jx, jy = (int(v) for v in rng.integers(-1, 2, size=2))
        x0, y0 = c * cell + 4 + jx, r * cell + 5 + jy
        shape, body, mark = style(kind)
        _draw_shape(d, shape, (x0, y0, x0 + cell - 7, y0 + cell - 7), body)
        if state != "neutral":
            colour = mark if state == "active" else INERT_MARK
            if state == "active" and contrast_min < 1.0:
                v = float(rng.uniform(contrast_min, 1.0))
                colour = tuple(int(round(g + v * (m - g))) for g, m in zip(INERT_MARK, mark))
            d.rectangle((c * cell + 1, r * cell + 1, c * cell + 4, r * cell + 4), fill=colour)
    arr = np.asarray(img, dtype=np.int16)
    arr = arr + rng.integers(-8, 9, size=arr.shape)
    return np.clip(arr, 0, 255).astype(np.uint8).transpose(2, 0, 1)
