"""Inputs of scripts/bench-nightly.sh (generated, never committed).

  gen WORK PAGES NIGHTS   WORK/base.xml.bz2: a snapshot of PAGES pages built from the shared wiki
                          sample's pages (titles and ids made unique); then for each night
                          a daily adds-changes folder in Wikimedia's layout
                          (WORK/incr/enwiki/DATE/: single-stream bz2 history pages, md5sums,
                          maxrevid.txt, status.txt), its logging dump
                          (WORK/logs/enwiki-DATE-pages-logging.xml) and the snapshot of that
                          day (WORK/snapshot-DATE.xml.bz2) for the full build. A night revises 1%
                          of the pages (2-3 revisions each), adds 0.1%, deletes 0.1% (through
                          the log) and moves 0.05% (the old title becomes a redirect page).
  gen-wd WORK ITEMS NIGHTS
                          The same for Wikidata: WORK/wd-base.xml.bz2, a snapshot of ITEMS
                          `wikibase-item` pages (entity JSON of today's layout, built from the
                          shared sample's 35 entities with new ids and English labels), and per
                          night WORK/incr/wikidatawiki/DATE/, WORK/logs/wikidatawiki-DATE-
                          pages-logging.xml and WORK/wd-snapshot-DATE.xml.bz2: 1% of the items
                          revised twice (a label and a claim changed), 0.1% added, 0.1% deleted.
"""
import json
import bz2
import hashlib
import html
import os
import random
import re
import sys

SHARED = "../shared/data"
HEAD = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">\n'
        "<siteinfo><sitename>Wikipedia</sitename><dbname>enwiki</dbname>"
        '<namespaces><namespace key="0" case="first-letter" /></namespaces></siteinfo>\n')


def esc(s):
    return html.escape(s, quote=False)


def page_xml(pid, title, revs, redirect=None, model=("wikitext", "text/x-wiki")):
    out = [f"<page><title>{esc(title)}</title><ns>0</ns><id>{pid}</id>"]
    if redirect:
        out.append(f'<redirect title="{esc(redirect)}" />')
    for rev, ts, text in revs:
        sha = hashlib.sha1(text.encode()).hexdigest()
        out.append(
            f"<revision><id>{rev}</id><timestamp>{ts}</timestamp><contributor><username>u</username>"
            f"<id>1</id></contributor><model>{model[0]}</model><format>{model[1]}</format>"
            f'<text bytes="{len(text.encode())}" xml:space="preserve">{esc(text)}</text>'
            f"<sha1>{sha}</sha1></revision>")
    out.append("</page>\n")
    return "".join(out)


def write_day(work, wiki, date, body, max_rev):
    """A daily folder in Wikimedia's layout holding the history pages `body`."""
    d = f"{work}/incr/{wiki}/{date}"
    os.makedirs(d, exist_ok=True)
    name = f"{wiki}-{date}-pages-meta-hist-incr.xml.bz2"
    data = bz2.compress(body.encode(), 9)
    open(f"{d}/{name}", "wb").write(data)
    open(f"{d}/md5sums", "w").write(f"{hashlib.md5(data).hexdigest()}  {name}\n")
    open(f"{d}/maxrevid.txt", "w").write(str(max_rev))
    open(f"{d}/status.txt", "w").write("done:all")


def write_log(work, wiki, date, k, titles):
    """The day's logging dump: one deletion per title."""
    os.makedirs(f"{work}/logs", exist_ok=True)
    with open(f"{work}/logs/{wiki}-{date}-pages-logging.xml", "w", encoding="utf-8") as f:
        f.write('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">\n')
        for i, title in enumerate(titles):
            f.write(f"<logitem><id>{k * 100000 + i}</id><timestamp>{stamp(date, 80000)}</timestamp>"
                    "<contributor><username>admin</username><id>2</id></contributor>"
                    f"<type>delete</type><action>delete</action><logtitle>{esc(title)}</logtitle>"
                    '<params xml:space="preserve" /></logitem>\n')
        f.write("</mediawiki>\n")


def stamp(date, sec):
    return f"{date[:4]}-{date[4:6]}-{date[6:]}T{sec // 3600:02}:{sec // 60 % 60:02}:{sec % 60:02}Z"


def gen(work, n, nights):
    with bz2.open(f"{SHARED}/wikipedia_xml/enwiki-table-markup.xml.bz2", "rt", encoding="utf-8") as f:
        xml = f.read()
    real = []
    for p in re.findall(r"<page>.*?</page>", xml, flags=re.S):
        t = re.search(r"<text[^>]*>(.*?)</text>", p, flags=re.S)
        ns = re.search(r"<ns>(\d+)</ns>", p)
        if t and ns and ns.group(1) == "0" and "#REDIRECT" not in t.group(1)[:20].upper():
            real.append((html.unescape(re.search(r"<title>(.*?)</title>", p).group(1)),
                         html.unescape(t.group(1))))
    rnd = random.Random(7)
    # page id -> [title, rev, timestamp, text, redirect]
    pages = {}
    rev = 1
    for i in range(n):
        title, text = real[i % len(real)]
        pages[i + 1] = [f"{title} {i // len(real)}", rev, stamp("20261130", 60), text, None]
        rev += 1
    next_id = n + 1

    def snapshot(path):
        with bz2.open(path, "wt", encoding="utf-8") as f:
            f.write(HEAD)
            for pid in sorted(pages):
                t, r, ts, text, red = pages[pid]
                f.write(page_xml(pid, t, [(r, ts, text)], red))
            f.write("</mediawiki>\n")

    snapshot(f"{work}/base.xml.bz2")
    for k in range(nights):
        date = f"202612{k + 1:02}"
        live = sorted(p for p in pages if pages[p][4] is None)
        touched = {}
        sec = 3600
        for pid in rnd.sample(live, max(1, n // 100)):
            for j in range(rnd.choice([2, 3])):
                sec += 1
                t = pages[pid]
                t[1], t[2] = rev, stamp(date, sec)
                t[3] = f"Edited on {date}, revision {j}. " + t[3]
                touched.setdefault(pid, []).append((rev, t[2], t[3]))
                rev += 1
        for _ in range(max(1, n // 2000)):  # moves
            pid = rnd.choice([p for p in live if p not in touched])
            sec += 1
            t = pages[pid]
            old = t[0]
            t[0], t[1], t[2] = f"{old} (moved {date})", rev, stamp(date, sec)
            touched[pid] = [(rev, t[2], t[3])]
            rev += 1
            pages[next_id] = [old, rev, stamp(date, sec), f"#REDIRECT [[{t[0]}]]", t[0]]
            touched[next_id] = [(rev, stamp(date, sec), pages[next_id][3])]
            rev += 1
            next_id += 1
        for _ in range(max(1, n // 1000)):  # new pages
            title, text = rnd.choice(real)
            sec += 1
            pages[next_id] = [f"{title} (new {date} {next_id})", rev, stamp(date, sec), text, None]
            touched[next_id] = [(rev, stamp(date, sec), text)]
            rev += 1
            next_id += 1
        gone = rnd.sample([p for p in live if p not in touched], max(1, n // 1000))
        body = HEAD + "".join(
            page_xml(pid, pages[pid][0], touched[pid], pages[pid][4]) for pid in sorted(touched)
        ) + "</mediawiki>\n"
        write_day(work, "enwiki", date, body, rev - 1)
        write_log(work, "enwiki", date, k, [pages[pid][0] for pid in gone])
        for pid in gone:
            del pages[pid]
        snapshot(f"{work}/snapshot-{date}.xml.bz2")
        print(f"{date}: {len(touched)} pages touched, {len(gone)} deleted, {len(pages)} pages")


WD_HEAD = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">\n'
           "<siteinfo><sitename>Wikidata</sitename><dbname>wikidatawiki</dbname>"
           '<namespaces><namespace key="0" case="first-letter" /></namespaces></siteinfo>\n')
ITEM = ("wikibase-item", "application/json")


def gen_wd(work, n, nights):
    with open(f"{SHARED}/wikidata/entities.first35.json", encoding="utf-8") as f:
        real = [json.loads(l.rstrip().rstrip(",")) for l in f if l.startswith("{")]
    rnd = random.Random(11)

    def item(q, k, version):
        e = real[k % len(real)]
        label = (e.get("labels", {}).get("en") or {"value": e["id"]})["value"]
        claims = dict(list(e.get("claims", {}).items())[:25])
        if version:  # a revision: another label, one claim dropped
            label = f"{label} (rev {version})"
            claims = dict(list(claims.items())[version % 2:])
        return json.dumps({
            "type": "item", "id": f"Q{q}",
            "labels": {"en": {"language": "en", "value": f"{label} {q}"}},
            "descriptions": {}, "aliases": {"en": [{"language": "en", "value": f"item {q}"}]},
            "claims": claims, "sitelinks": {},
        }, separators=(",", ":"))

    # item number -> [rev, timestamp, template, version]
    items = {q: [q, stamp("20261130", 60), q, 0] for q in range(1, n + 1)}
    rev = n + 1

    def snapshot(path):
        with bz2.open(path, "wt", encoding="utf-8") as f:
            f.write(WD_HEAD)
            for q in sorted(items):
                r, ts, k, v = items[q]
                f.write(page_xml(q + 1000000, f"Q{q}", [(r, ts, item(q, k, v))], model=ITEM))
            f.write("</mediawiki>\n")

    snapshot(f"{work}/wd-base.xml.bz2")
    for k in range(nights):
        date = f"202612{k + 1:02}"
        touched = {}
        sec = 3600
        for q in rnd.sample(sorted(items), max(1, n // 100)):
            for _ in range(2):
                sec += 1
                t = items[q]
                t[0], t[1], t[3] = rev, stamp(date, sec), t[3] + 1
                touched.setdefault(q, []).append((rev, t[1], item(q, t[2], t[3])))
                rev += 1
        for _ in range(max(1, n // 1000)):
            q = max(items) + 1
            sec += 1
            items[q] = [rev, stamp(date, sec), rnd.randrange(len(real)), 0]
            touched[q] = [(rev, items[q][1], item(q, items[q][2], 0))]
            rev += 1
        gone = rnd.sample([q for q in sorted(items) if q not in touched], max(1, n // 1000))
        body = WD_HEAD + "".join(
            page_xml(q + 1000000, f"Q{q}", touched[q], model=ITEM) for q in sorted(touched)
        ) + "</mediawiki>\n"
        write_day(work, "wikidatawiki", date, body, rev - 1)
        write_log(work, "wikidatawiki", date, k, [f"Q{q}" for q in gone])
        for q in gone:
            del items[q]
        snapshot(f"{work}/wd-snapshot-{date}.xml.bz2")
        print(f"{date}: {len(touched)} items touched, {len(gone)} deleted, {len(items)} items")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 5 and sys.argv[1] == "gen-wd":
        gen_wd(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
