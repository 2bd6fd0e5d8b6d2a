"""A deterministic Wikidata-shaped JSON dump for scripts/bench-wikidata.sh.

    python3 scripts/bench/wikidata_gen.py OUT.json ENTITIES [SEED=7]

The layout of the real dump (`[`, one entity per line with a trailing comma, `]`), each entity
in today's shape (`type`, `id`, `labels`, `descriptions`, `aliases`, `claims`, `sitelinks`,
`lastrevid`), written as the dumps write it: compact, raw UTF-8, keys in Wikibase's order.
An entity, like a well-linked real item, has labels in 60-180 languages, descriptions in about
half of them, aliases in a few, 40 statements on average (25-55) over about 25 properties,
about a third with qualifiers (start/end time, point in time, "of") and most with one or two
references (stated in, reference URL, retrieved), and 10-60 sitelinks. Datavalue types follow
real proportions: mostly item ids, then external ids and strings, times, quantities,
monolingual text and coordinates. Prints the entity count and bytes written.
"""

import json
import random
import sys

LANGS = (
    "en de fr es it nl pl ru ja zh pt sv uk ca ar fa fi cs hu ko he id tr no da ro vi sr bg el "
    "eo et lt sk sl hr ms eu gl hy ka be kk uz az ta te ml bn hi ur mr gu kn pa si th lo my km "
    "mn ne sq mk bs lv is ga cy br oc an ast lb fy li af sw zu xh yo ig ha so am ti om rw mg ny "
    "sn st tn ts ve ss nr kg ln wo ff bm ee tw ak lg rn sg nso en-gb en-ca de-ch de-at fr-ca "
    "pt-br es-419 zh-hans zh-hant zh-cn zh-tw zh-hk yue wuu nan hak gan ja-hira ko-kp ckb ku "
    "ps sd ks ug tt ba cv sah os ce ab av kbd ady lez krc kum nog xal bxr tyv alt kjh crh gag "
    "tk ky tg la grc ang got non sco gd gv kw fo se smn sms sma smj vep vro liv ltg sgs szl csb "
    "hsb dsb rue lad yi ext mwl pms lij lmo vec fur sc co nap scn eml rgn frp wa pcd nrm vls "
    "zea nds stq frr bar ksh pfl pdc hrx rm gsw als"
).split()

WORDS = (
    "river city county band album film village species genus family school church station "
    "island mountain lake district province party company journal software protein gene "
    "painting novel song football club university museum bridge castle language battle"
).split()
SCRIPTS = {
    "ru": "Шотландия Москва река город деревня",
    "uk": "Шотландія Київ річка місто",
    "ja": "スコットランド 東京 川 都市",
    "zh": "苏格兰 北京 河流 城市",
    "ar": "اسكتلندا القاهرة نهر مدينة",
    "el": "Σκωτία Αθήνα ποταμός πόλη",
    "hi": "स्कॉटलैण्ड दिल्ली नदी शहर",
    "ko": "스코틀랜드 서울 강 도시",
    "he": "סקוטלנד ירושלים נהר עיר",
    "ka": "შოტლანდია თბილისი მდინარე",
}
ITEM_PROPS = ["P31", "P17", "P131", "P279", "P361", "P150", "P47", "P463", "P530", "P106",
              "P27", "P19", "P20", "P69", "P108", "P166", "P39", "P102", "P735", "P734",
              "P1343", "P361", "P527", "P910", "P1376", "P36", "P37", "P38", "P30", "P421"]
EXT_PROPS = ["P214", "P227", "P244", "P268", "P269", "P349", "P646", "P1417", "P2163",
             "P3417", "P4342", "P6366", "P7859", "P213", "P1566"]
STRING_PROPS = ["P395", "P474", "P300", "P281", "P373"]
TIME_PROPS = ["P569", "P570", "P571", "P576", "P577", "P580"]
QUANT_PROPS = ["P1082", "P2046", "P2044", "P1120", "P2048"]
MONO_PROPS = ["P1448", "P1705", "P1449"]
COORD_PROPS = ["P625"]


def text(r, lang):
    if lang.split("-")[0] in SCRIPTS:
        words = SCRIPTS[lang.split("-")[0]].split()
        return " ".join(r.choice(words) for _ in range(r.randint(1, 3)))
    w = [r.choice(WORDS) for _ in range(r.randint(1, 4))]
    if lang in ("fr", "es", "pt", "it", "ca"):
        w.append(r.choice(["é", "ñ", "ç", "à", "ô"]) + r.choice(WORDS))
    return " ".join(w).capitalize()


def guid(r, qid):
    h = "%032x" % r.getrandbits(128)
    return f"{qid}${h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def item(r, n=None):
    n = n if n is not None else r.randint(1, 120_000_000)
    return {"value": {"entity-type": "item", "numeric-id": n, "id": f"Q{n}"},
            "type": "wikibase-entityid"}


def time_value(r):
    y = r.randint(1000, 2024)
    prec = r.choice([9, 10, 11, 11, 11])
    date = f"+{y:04d}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T00:00:00Z" if prec == 11 \
        else f"+{y:04d}-00-00T00:00:00Z"
    return {"value": {"time": date, "timezone": 0, "before": 0, "after": 0, "precision": prec,
                      "calendarmodel": "http://www.wikidata.org/entity/Q1985727"},
            "type": "time"}


def snak(prop, datavalue, datatype):
    return {"snaktype": "value", "property": prop, "hash": None, "datavalue": datavalue,
            "datatype": datatype}


def hashed(r, s):
    s["hash"] = "%040x" % r.getrandbits(160)
    return s


def mainsnak(r, langs):
    k = r.random()
    if k < 0.55:
        p = r.choice(ITEM_PROPS)
        return snak(p, item(r), "wikibase-item")
    if k < 0.70:
        p = r.choice(EXT_PROPS)
        return snak(p, {"value": "%d" % r.randint(10000, 99999999), "type": "string"},
                    "external-id")
    if k < 0.75:
        p = r.choice(STRING_PROPS)
        return snak(p, {"value": text(r, "en"), "type": "string"}, "string")
    if k < 0.85:
        return snak(r.choice(TIME_PROPS), time_value(r), "time")
    if k < 0.92:
        unit = r.choice(["1", "http://www.wikidata.org/entity/Q712226",
                         "http://www.wikidata.org/entity/Q11573"])
        amount = "+%d" % r.randint(1, 10_000_000)
        v = {"amount": amount, "unit": unit}
        if r.random() < 0.5:
            v["upperBound"] = amount
            v["lowerBound"] = amount
        return snak(r.choice(QUANT_PROPS), {"value": v, "type": "quantity"}, "quantity")
    if k < 0.96:
        lang = r.choice(langs[:20])
        return snak(r.choice(MONO_PROPS),
                    {"value": {"text": text(r, lang), "language": lang},
                     "type": "monolingualtext"}, "monolingualtext")
    if k < 0.99:
        return snak("P625", {"value": {"latitude": round(r.uniform(-90, 90), 6),
                                       "longitude": round(r.uniform(-180, 180), 6),
                                       "altitude": None, "precision": 1e-06,
                                       "globe": "http://www.wikidata.org/entity/Q2"},
                             "type": "globecoordinate"}, "globe-coordinate")
    return {"snaktype": r.choice(["novalue", "somevalue"]), "property": r.choice(ITEM_PROPS),
            "hash": None, "datatype": "wikibase-item"}


def qualifiers(r):
    q, order = {}, []
    for _ in range(r.randint(1, 3)):
        p = r.choice(["P580", "P582", "P585", "P642", "P1545", "P459"])
        if p in q:
            continue
        if p in ("P580", "P582", "P585"):
            s = snak(p, time_value(r), "time")
        elif p == "P1545":
            s = snak(p, {"value": str(r.randint(1, 20)), "type": "string"}, "string")
        else:
            s = snak(p, item(r), "wikibase-item")
        q[p] = [hashed(r, s)]
        order.append(p)
    return q, order


def reference(r):
    snaks, order = {}, []
    if r.random() < 0.7:
        snaks["P248"] = [snak("P248", item(r), "wikibase-item")]
        order.append("P248")
    if r.random() < 0.5:
        url = f"https://www.example.org/{r.choice(WORDS)}/{r.randint(1, 10**9)}"
        snaks["P854"] = [snak("P854", {"value": url, "type": "string"}, "url")]
        order.append("P854")
    if not snaks or r.random() < 0.6:
        snaks["P813"] = [snak("P813", time_value(r), "time")]
        order.append("P813")
    for ss in snaks.values():
        for s in ss:
            del s["hash"]
    return {"hash": "%040x" % r.getrandbits(160), "snaks": snaks, "snaks-order": order}


def entity(r, n):
    qid = f"Q{n}"
    k = r.randint(60, 180)
    langs = ["en"] + r.sample(LANGS[1:], k - 1)
    labels = {l: {"language": l, "value": text(r, l)} for l in langs}
    descriptions = {l: {"language": l, "value": text(r, l) + " " + text(r, l).lower()}
                    for l in langs if r.random() < 0.5}
    aliases = {l: [{"language": l, "value": text(r, l)} for _ in range(r.randint(1, 3))]
               for l in langs[:12] if r.random() < 0.5}
    claims = {}
    for _ in range(r.randint(25, 55)):
        ms = hashed(r, mainsnak(r, langs))
        st = {"mainsnak": ms, "type": "statement"}
        if r.random() < 0.33:
            st["qualifiers"], st["qualifiers-order"] = qualifiers(r)
        st["id"] = guid(r, qid)
        st["rank"] = r.choice(["normal"] * 8 + ["preferred", "deprecated"])
        if r.random() < 0.8:
            st["references"] = [reference(r) for _ in range(r.choice([1, 1, 2]))]
        claims.setdefault(ms["property"], []).append(st)
    sites = r.sample(langs, min(len(langs), r.randint(10, 60)))
    sitelinks = {}
    for l in sites:
        site = l.replace("-", "_") + "wiki"
        sitelinks[site] = {"site": site, "title": text(r, l),
                           "badges": ["Q17437796"] if r.random() < 0.05 else []}
    return {"type": "item", "id": qid, "labels": labels, "descriptions": descriptions,
            "aliases": aliases, "claims": claims, "sitelinks": sitelinks,
            "lastrevid": r.randint(10**8, 2 * 10**9)}


def main():
    out, count = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    r = random.Random(seed)
    written = 0
    with open(out, "w", encoding="utf-8") as f:
        f.write("[\n")
        for i in range(count):
            line = json.dumps(entity(r, i + 1), ensure_ascii=False, separators=(",", ":"))
            f.write(line + (",\n" if i + 1 < count else "\n"))
            written += len(line.encode("utf-8")) + 2
        f.write("]\n")
    print(f"{count} entities, {written + 4} bytes")


if __name__ == "__main__":
    main()
