# The setup of one version of the screening policy (a readie checkpoint's `setup`): it runs once,
# when a worker builds the version, after `import numpy`; every call restored from the version
# reaches what it defines with `import readie_checkpoint`. make_catalogue.py fills in the path of
# this version's weights (and, for a demo of cold loads, a delay standing in for a large model).
import time

import numpy

WEIGHTS_FILE = "@WEIGHTS@"
LOAD_SECONDS = float("@LOAD_SECONDS@")

time.sleep(LOAD_SECONDS)
_weights = numpy.load(WEIGHTS_FILE)
VERSION = str(_weights["version"])
THRESHOLD = float(_weights["threshold"])
_w = _weights["w"]
_b = float(_weights["b"])
DIM = _w.shape[0]


def _features(text):
    """A hashed bag of words: the same text gives the same features on every worker."""
    x = numpy.zeros(DIM)
    for word in text.lower().split():
        h = 2166136261
        for byte in word.encode("utf-8"):
            h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
        x[h % DIM] += 1.0
    return x


def judge(text):
    """This version's verdict on `text`: the version that judged, a score in (0, 1), the verdict."""
    score = float(1.0 / (1.0 + numpy.exp(-(_features(text) @ _w + _b))))
    return {"version": VERSION, "score": round(score, 6), "verdict": "flag" if score >= THRESHOLD else "allow"}
