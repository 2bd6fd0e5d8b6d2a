//! The Wikidata reader's two paths write the same parts: a plain dump read line by line on one
//! thread, and the same dump gzipped, decompressed on one thread and parsed on the others, its
//! records grouped into batches per shard on the parser threads for the executor's sink.

use std::io::Write as _;

use super::{same_rows_plain_and_gzipped, sql_json};

/// One statement of `property` with a main snak of `datatype` holding `value` (JSON).
fn claim(id: u32, n: u32, property: &str, datatype: &str, value: &str) -> String {
    let (snak, data) = match value {
        "somevalue" => ("somevalue", String::new()),
        _ => ("value", format!(r#","datavalue":{value}"#)),
    };
    format!(
        r#"{{"mainsnak":{{"snaktype":"{snak}","property":"{property}"{data},"datatype":"{datatype}"}},"type":"statement","id":"Q{id}${n}","rank":"normal"}}"#
    )
}

/// An item in the dump's layout (one line): labels, descriptions and aliases in two
/// languages, item, Freebase id, time, quantity and unknown-value claims, and an enwiki
/// sitelink on most items.
fn item(i: u32) -> String {
    let item_ref = |q: u32| {
        format!(
            r#"{{"value":{{"entity-type":"item","numeric-id":{q},"id":"Q{q}"}},"type":"wikibase-entityid"}}"#
        )
    };
    let claims = [
        (
            "P31",
            vec![claim(i, 1, "P31", "wikibase-item", &item_ref(5 + i % 3))],
        ),
        (
            "P646",
            vec![claim(
                i,
                2,
                "P646",
                "external-id",
                &format!(r#"{{"value":"/m/0w{i}","type":"string"}}"#),
            )],
        ),
        (
            "P569",
            vec![claim(
                i,
                3,
                "P569",
                "time",
                &format!(
                    r#"{{"value":{{"time":"+19{:02}-01-0{}T00:00:00Z","timezone":0,"before":0,"after":0,"precision":11,"calendarmodel":"http://www.wikidata.org/entity/Q1985727"}},"type":"time"}}"#,
                    i % 100,
                    1 + i % 9
                ),
            )],
        ),
        (
            "P1082",
            vec![claim(
                i,
                4,
                "P1082",
                "quantity",
                &format!(
                    r#"{{"value":{{"amount":"+{}","unit":"1"}},"type":"quantity"}}"#,
                    i * 17
                ),
            )],
        ),
        (
            "P47",
            vec![
                claim(i, 5, "P47", "wikibase-item", &item_ref((i * 31) % 9000 + 1)),
                claim(i, 6, "P47", "wikibase-item", "somevalue"),
            ],
        ),
    ];
    let claims: Vec<String> = claims
        .iter()
        .map(|(p, c)| format!(r#""{p}":[{}]"#, c.join(",")))
        .collect();
    let sitelinks = if i.is_multiple_of(5) {
        String::new()
    } else {
        format!(r#""enwiki":{{"site":"enwiki","title":"Page \"{i}\" é","badges":[]}}"#)
    };
    format!(
        concat!(
            r#"{{"type":"item","id":"Q{i}","#,
            r#""labels":{{"en":{{"language":"en","value":"Item {i}"}},"fr":{{"language":"fr","value":"Objet {i}"}}}},"#,
            r#""descriptions":{{"en":{{"language":"en","value":"thing number {i}"}}}},"#,
            r#""aliases":{{"en":[{{"language":"en","value":"I{i}"}},{{"language":"en","value":"Thing {i}"}}]}},"#,
            r#""claims":{{{claims}}},"sitelinks":{{{sitelinks}}}}}"#
        ),
        i = i,
        claims = claims.join(","),
        sitelinks = sitelinks
    )
}

/// About 5 MB in the dump's layout (`[`, one entity per line ending in `,`, `]`), several of
/// the parallel reader's 1 MiB chunks, with a line of bad JSON and one of invalid UTF-8.
fn dump() -> Vec<u8> {
    let mut out = b"[\n".to_vec();
    let n = 4_500u32;
    for i in 1..=n {
        let sep = if i == n { "" } else { "," };
        writeln!(out, "{}{sep}", item(i)).unwrap();
        match i {
            1_000 => writeln!(out, r#"{{"type":"item","id":"Q0","labels":{{"#).unwrap(),
            3_000 => out.extend_from_slice(
                b"{\"type\":\"item\",\"id\":\"Q1\",\"labels\":{\"en\":{\"language\":\"en\",\"value\":\"\xff\"}}},\n",
            ),
            _ => {}
        }
    }
    out.extend_from_slice(b"]\n");
    out
}

#[test]
fn a_gzipped_wikidata_dump_read_in_parallel_writes_the_parts_of_the_plain_one() {
    let (_tmp, out) = same_rows_plain_and_gzipped(&dump(), "wd.json", "wikidata");
    // Four items in five link an English page; the titles keep their quotes and accents.
    let pages = sql_json(
        &out,
        "SELECT source, count(*) AS n FROM entities WHERE wikipedia LIKE 'Page \"%\" é' \
         GROUP BY source ORDER BY source",
    );
    assert_eq!(
        pages.iter().map(|r| r["n"].as_i64()).collect::<Vec<_>>(),
        [Some(3_600), Some(3_600)],
        "{pages:?}"
    );
}
