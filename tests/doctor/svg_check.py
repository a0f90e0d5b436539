# SPDX-License-Identifier: MIT
"""svg_check.py FILE MAXBYTES: the doctor's --plot is well-formed XML, at most MAXBYTES, and every
<text> lies inside the viewBox (its width estimated at 0.6 em a character, its anchor honoured)."""
import sys
import xml.etree.ElementTree as ET

path, limit = sys.argv[1], int(sys.argv[2])
data = open(path, "rb").read()
assert len(data) <= limit, "svg of %d bytes > %d" % (len(data), limit)
root = ET.fromstring(data)
_, _, vw, vh = (float(v) for v in root.get("viewBox").split())
bad = []
for t in root.iter("{http://www.w3.org/2000/svg}text"):
    txt = "".join(t.itertext())
    x, y, fs = float(t.get("x")), float(t.get("y")), float(t.get("font-size", "12"))
    w = 0.6 * fs * len(txt)
    a = t.get("text-anchor", "start")
    x0 = x - w if a == "end" else x - w / 2 if a == "middle" else x
    if x0 < 0 or x0 + w > vw or y < 0 or y > vh:
        bad.append("%r at x %.0f..%.0f (width %g)" % (txt[:60], x0, x0 + w, vw))
assert not bad, "text outside the viewBox: " + "; ".join(bad)
