"""Generates benchmark inputs from the real shared samples (never committed):

  wiki  OUT.xml[.bz2] TARGET_MB   the shared MediaWiki sample's pages repeated (titles made
                                  unique) until the uncompressed XML reaches TARGET_MB
  nt    OUT.nt.gz LINES           the shared Freebase head's lines rewritten onto m. subjects
                                  (so the English filter keeps them) repeated to LINES lines
  multistream OUT.xml.bz2 TARGET_MB   the wiki pages as a multistream dump (100 pages a bz2
                                  stream, header and footer streams of their own) with its
                                  OUT-index.txt (`offset:page id:title`), as Wikipedia ships
"""
import bz2
import gzip
import re
import sys

SHARED = "../shared/data"


def wiki(out: str, target_mb: int) -> None:
    with bz2.open(f"{SHARED}/wikipedia_xml/enwiki-table-markup.xml.bz2", "rt", encoding="utf-8") as f:
        xml = f.read()
    head = xml[: xml.index("<page>")]
    pages = re.findall(r"<page>.*?</page>", xml, flags=re.S)
    opener = bz2.open if out.endswith(".bz2") else open
    target = target_mb * 1024 * 1024
    written = 0
    with opener(out, "wt", encoding="utf-8") as w:
        w.write(head)
        i = 0
        while written < target:
            for p in pages:
                q = re.sub(r"<title>(.*?)</title>", lambda m: f"<title>{m.group(1)} {i}</title>", p, count=1)
                q = re.sub(r"<id>(\d+)</id>", lambda m: f"<id>{int(m.group(1)) * 1000 + i}</id>", q, count=1)
                w.write("  " + q + "\n")
                written += len(q) + 3
            i += 1
        w.write("</mediawiki>\n")


def multistream(out: str, target_mb: int) -> None:
    with bz2.open(f"{SHARED}/wikipedia_xml/enwiki-table-markup.xml.bz2", "rt", encoding="utf-8") as f:
        xml = f.read()
    head = xml[: xml.index("<page>")]
    pages = re.findall(r"<page>.*?</page>", xml, flags=re.S)
    index_path = out.replace("multistream.xml.bz2", "multistream-index.txt")
    if index_path == out:
        index_path = out + "-index.txt"
    target = target_mb * 1024 * 1024
    written = 0
    with open(out, "wb") as w, open(index_path, "w", encoding="utf-8") as idx:
        w.write(bz2.compress(head.encode()))
        i = 0
        batch, titles = [], []
        while written < target:
            for p in pages:
                q = re.sub(r"<title>(.*?)</title>", lambda m: f"<title>{m.group(1)} {i}</title>", p, count=1)
                q = re.sub(r"<id>(\d+)</id>", lambda m: f"<id>{int(m.group(1)) * 1000 + i}</id>", q, count=1)
                batch.append("  " + q + "\n")
                titles.append(re.search(r"<title>(.*?)</title>", q).group(1))
                written += len(q) + 3
                if len(batch) == 100:
                    offset = w.tell()
                    w.write(bz2.compress("".join(batch).encode()))
                    idx.writelines(f"{offset}:{n}:{t}\n" for n, t in enumerate(titles))
                    batch, titles = [], []
            i += 1
        if batch:
            offset = w.tell()
            w.write(bz2.compress("".join(batch).encode()))
            idx.writelines(f"{offset}:{n}:{t}\n" for n, t in enumerate(titles))
        w.write(bz2.compress(b"</mediawiki>\n"))


def nt(out: str, lines: int) -> None:
    with open(f"{SHARED}/freebase/freebase-rdf-latest.head10k.nt", encoding="utf-8") as f:
        src = [l for l in f if l.strip()]
    ns = "<http://rdf.freebase.com/ns/"
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=6) as w:
        n = 0
        i = 0
        while n < lines:
            for l in src:
                s, rest = l.split("\t", 1)
                w.write(f"{ns}m.0b{i:x}{abs(hash(s)) % 100000:x}>\t{rest}")
                n += 1
                if n >= lines:
                    break
            i += 1


if __name__ == "__main__":
    kind, out, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    {"wiki": wiki, "nt": nt, "multistream": multistream}[kind](out, size)
