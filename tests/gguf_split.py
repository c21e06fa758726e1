#!/usr/bin/env python3
"""Splits a GGUF file as llama.cpp's gguf-split does (its --split-max-tensors
mode), for tests/test-split-gguf.sh; written from the format, not from
faultline's reader, so that it checks that reader.

    gguf_split.py [--split-max-tensors N] [--no-tensor-first-split] IN.gguf OUT_PREFIX

writes OUT_PREFIX-00001-of-0000K.gguf ...: the first holds every key of IN
plus split.no (u16), split.tensors.count (i32) and split.count (u16); the
others only those three keys; each holds its tensors' infos and data, at
offsets from its own data section, aligned to 32 bytes. (On
qwen3moe-tiny-Q8_0 the four files of --split-max-tensors 8 are byte for
byte those of llama.cpp's llama-gguf-split, 34af94c.)"""
import struct
import sys

ALIGN = 32
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
U16, I32, STRING, ARRAY = 2, 5, 8, 9


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def skip_value(self, t):
        if t in SIZES:
            self.pos += SIZES[t]
        elif t == STRING:
            self.string()
        elif t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            for _ in range(n):
                self.skip_value(et)
        else:
            raise ValueError("unknown value type %d" % t)


def gstr(b):
    return struct.pack("<Q", len(b)) + b


def read(path):
    data = open(path, "rb").read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError(path + ": not a GGUF file")
    r.pos = 4
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    kvs, align = [], ALIGN
    for _ in range(n_kv):
        start = r.pos
        key, t = r.string(), r.take("I")
        at = r.pos
        r.skip_value(t)
        if key == b"general.alignment":
            align = struct.unpack_from("<I", data, at)[0]
        kvs.append(data[start:r.pos])
    infos = []
    for _ in range(n_tensors):
        name, nd = r.string(), r.take("I")
        dims = [r.take("Q") for _ in range(nd)]
        infos.append([name, dims, r.take("I"), r.take("Q")])
    if align != ALIGN:  # the parts are written at 32 bytes
        raise ValueError(path + ": general.alignment %d is not 32" % align)
    base = (r.pos + align - 1) // align * align
    order = sorted(range(n_tensors), key=lambda i: infos[i][3])
    for k, i in enumerate(order):  # each tensor's bytes, its padding included
        end = infos[order[k + 1]][3] if k + 1 < len(order) else len(data) - base
        infos[i].append(data[base + infos[i][3]:base + end])
    return version, kvs, infos


def write(path, version, kvs, infos):
    head = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(infos), len(kvs)))
    for kv in kvs:
        head += kv
    off = 0
    for name, dims, t, _, blob in infos:
        head += gstr(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", t, off)
        off += (len(blob) + ALIGN - 1) // ALIGN * ALIGN
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(path, "wb") as f:
        f.write(head)
        for blob in (i[4] for i in infos):
            f.write(blob + b"\0" * ((-len(blob)) % ALIGN))


def main(argv):
    max_t, empty_first, args = 64, False, []
    it = iter(argv)
    for a in it:
        if a == "--split-max-tensors":
            max_t = int(next(it))
        elif a == "--no-tensor-first-split":
            empty_first = True
        else:
            args.append(a)
    src, prefix = args
    version, kvs, infos = read(src)
    groups = ([[]] if empty_first else []) + [infos[i:i + max_t] for i in range(0, len(infos), max_t)]
    n = len(groups)
    for no, group in enumerate(groups):
        split = [gstr(b"split.no") + struct.pack("<IH", U16, no),  # in gguf-split's order
                 gstr(b"split.tensors.count") + struct.pack("<Ii", I32, len(infos)),
                 gstr(b"split.count") + struct.pack("<IH", U16, n)]
        write("%s-%05d-of-%05d.gguf" % (prefix, no + 1, n), version,
              (kvs if no == 0 else []) + split, group)
    print(n)


if __name__ == "__main__":
    main(sys.argv[1:])
