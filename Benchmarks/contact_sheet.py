#!/usr/bin/env python3
"""The README's picture of the filter chain: one photo through each operation family,
rendered by `tessera render` with one recipe per tile, labelled, in a grid.

usage: Benchmarks/contact_sheet.py [PHOTO] [OUT.png]
(default: examples/images/mei_Canon_EOS_1000D.jpg -> docs/images/operations.jpg)
"""
import json
import os
import subprocess
import sys
import tempfile

from PIL import Image, ImageDraw, ImageFont

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TILE = 240
MARK = os.path.join(ROOT, "examples", "recipes", "mark.png")

# (label, operations) — each a recipe on the same photo, output a TILE-sized box.
SQUARE = {"op": "resize", "width": TILE, "height": TILE, "mode": "fill"}
FIT = {"op": "resize", "width": TILE, "height": TILE, "mode": "fit"}
CELLS = [
    ("original (fit)", [FIT]),
    ("fill, centre", [SQUARE]),
    ("fill, attention", [dict(SQUARE, gravity="attention")]),
    ("fill, north", [dict(SQUARE, gravity="north")]),
    ("crop 16:9 attention", [{"op": "crop", "aspect": "16:9", "gravity": "attention"}, FIT]),
    ("crop 0.3,0.3 0.4x0.4", [{"op": "crop", "x": 0.3, "y": 0.3, "width": 0.4, "height": 0.4, "units": "fractions"}, FIT]),
    ("sharpen sigma 1, amount 2", [FIT, {"op": "sharpen", "sigma": 1, "amount": 2}]),
    ("blur sigma 3", [FIT, {"op": "blur", "sigma": 3}]),
    ("exposure +1", [FIT, {"op": "adjust", "exposure": 1}]),
    ("contrast 1.5", [FIT, {"op": "adjust", "contrast": 1.5}]),
    ("grayscale", [FIT, {"op": "adjust", "grayscale": True}]),
    ("sepia + vignette", [FIT, {"op": "adjust", "sepia": 0.8, "vignette": 0.6}]),
    ("tint #3080ff", [FIT, {"op": "adjust", "tint": "#3080ff", "tintAmount": 0.7}]),
    ("pad (blur fill)", [FIT, {"op": "pad", "width": TILE, "height": TILE, "fill": "blur"}]),
    ("pad margins", [{"op": "resize", "width": TILE - 40, "height": TILE - 40, "mode": "fit"},
                     {"op": "pad", "width": TILE, "height": TILE, "background": "#20242c"}]),
    ("overlay", [FIT, {"op": "overlay", "path": MARK, "width": 0.45, "margin": 8, "opacity": 0.85}]),
]


def main():
    photo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "examples", "images", "mei_Canon_EOS_1000D.jpg")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "images", "operations.jpg")
    tessera = os.environ.get("TESSERA", os.path.join(ROOT, ".build", "release", "tessera"))
    cols = 4
    rows = (len(CELLS) + cols - 1) // cols
    label_h = 22
    sheet = Image.new("RGB", (cols * (TILE + 8) + 8, rows * (TILE + label_h + 8) + 8), (245, 245, 245))
    draw = ImageDraw.Draw(sheet)
    try:
        font = ImageFont.load_default(size=14)
    except TypeError:
        font = ImageFont.load_default()
    with tempfile.TemporaryDirectory() as work:
        for i, (label, ops) in enumerate(CELLS):
            recipe = os.path.join(work, f"r{i}.json")
            with open(recipe, "w") as f:
                json.dump({"format": "tessera.recipe", "version": 2, "name": f"c{i}", "operations": ops,
                           "output": {"format": "png"}}, f)
            subprocess.run([tessera, "render", photo, "-r", recipe, "-o", os.path.join(work, f"o{i}")],
                           check=True, stdout=subprocess.DEVNULL)
            tile = Image.open(os.path.join(work, f"o{i}", os.listdir(os.path.join(work, f"o{i}"))[0])).convert("RGB")
            x = 8 + (i % cols) * (TILE + 8)
            y = 8 + (i // cols) * (TILE + label_h + 8)
            sheet.paste(tile, (x + (TILE - tile.width) // 2, y + (TILE - tile.height) // 2))
            draw.text((x + 2, y + TILE + 4), label, fill=(30, 30, 30), font=font)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    sheet.save(out, quality=85, optimize=True)
    print(f"{out}: {len(CELLS)} operations on {os.path.basename(photo)}")


if __name__ == "__main__":
    main()
