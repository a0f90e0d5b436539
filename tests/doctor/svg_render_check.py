# SPDX-License-Identifier: MIT
"""svg_render_check.py FILE.svg [OUT.png]: the doctor's --plot rendered by librsvg (rsvg-convert), and
every text's real box measured on the rendering, not estimated: each <text> is rendered alone at the
picture's size and its inked pixels bound it. Checks: every box inside the picture; no two boxes
overlap; no box crosses a lane's edge (a lane is a rect filled #fafafa: a text lies wholly inside
one or wholly outside all). Writes the whole picture as OUT.png when given (to look at).
Exit 0 when all hold; otherwise the offending texts on stderr, exit 1. Needs rsvg-convert and
PIL (python3-pil)."""
import copy
import io
import subprocess
import sys
import xml.etree.ElementTree as ET

from PIL import Image

NS = "{http://www.w3.org/2000/svg}"
ET.register_namespace("", NS[1:-1])


def render(root):
    p = subprocess.run(["rsvg-convert", "-f", "png"], input=ET.tostring(root), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, check=True)
    return Image.open(io.BytesIO(p.stdout)).convert("L")


def boxes(path):
    """[(text, (x0, y0, x1, y1))] of every <text> as rendered, and the lanes' rects, and the size"""
    root = ET.parse(path).getroot()
    _, _, vw, vh = (float(v) for v in root.get("viewBox").split())
    lanes = [(float(r.get("x")), float(r.get("y")), float(r.get("x")) + float(r.get("width")),
              float(r.get("y")) + float(r.get("height")))
             for r in root.iter(NS + "rect") if r.get("fill") == "#fafafa"]
    out = []
    for t in list(root.iter(NS + "text")):
        alone = ET.Element(root.tag, root.attrib)
        ET.SubElement(alone, NS + "rect", {"width": "100%", "height": "100%", "fill": "white"})
        tt = copy.deepcopy(t)
        tt.set("fill", "black")
        alone.append(tt)
        bb = render(alone).point(lambda v: 255 if v < 200 else 0).getbbox()
        if bb:
            out.append(("".join(t.itertext()), bb))
    return out, lanes, (vw, vh), root


def check(path, png=None):
    bx, lanes, (vw, vh), root = boxes(path)
    bad = []
    for txt, (x0, y0, x1, y1) in bx:
        if x0 < 0 or y0 < 0 or x1 > vw or y1 > vh:
            bad.append("outside the picture: %r %s" % (txt[:50], (x0, y0, x1, y1)))
        for lx0, ly0, lx1, ly1 in lanes:
            inter = x0 < lx1 and x1 > lx0 and y0 < ly1 and y1 > ly0
            inside = x0 >= lx0 and x1 <= lx1 and y0 >= ly0 and y1 <= ly1
            if inter and not inside:
                bad.append("crosses a lane's edge: %r %s, lane %s" % (txt[:50], (x0, y0, x1, y1),
                                                                    (lx0, ly0, lx1, ly1)))
    for i in range(len(bx)):
        for j in range(i + 1, len(bx)):
            (ta, a), (tb, b) = bx[i], bx[j]
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                bad.append("overlap: %r %s and %r %s" % (ta[:40], a, tb[:40], b))
    if png:
        render(root).save(png)
    return bad, bx


if __name__ == "__main__":
    bad, bx = check(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    for b in bad:
        print(b, file=sys.stderr)
    print("%d texts measured, %d problems" % (len(bx), len(bad)))
    sys.exit(1 if bad else 0)
