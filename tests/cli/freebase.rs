//! The Freebase reader's two paths write the same parts: a plain dump read line by line on
//! one thread, and the same lines gzipped, decompressed on one thread and parsed (and, for the
//! executor's sharding sink, grouped into batches) on the others.

use std::io::Write as _;

use super::same_rows_plain_and_gzipped;

/// About 5 MB of N-Triples (several of the parallel reader's 1 MiB chunks): entity edges,
/// names and aliases, literals in and out of the English filter, typed values, other IRIs,
/// escapes, a blank line, a comment, a bad line and a line of invalid UTF-8.
fn dump() -> Vec<u8> {
    let ns = "http://rdf.freebase.com/ns/";
    let mut nt = Vec::new();
    for i in 0..40_000u32 {
        let s = format!("<{ns}m.0s{}>", i / 7);
        let line = match i % 11 {
            0 => format!("{s}\t<{ns}type.object.name>\t\"Name {i} \\\"q\\\"\"@en\t."),
            1 => format!("{s}\t<{ns}common.topic.alias>\t\"Alias\\u00e9 {i}\"@en\t."),
            2 => format!("{s}\t<{ns}type.object.name>\t\"Nom {i}\"@fr\t."),
            3 => format!(
                "{s}\t<{ns}people.person.date_of_birth>\t\"19{:02}\"^^<http://www.w3.org/2001/XMLSchema#gYear>\t.",
                i % 100
            ),
            4 => format!("{s}\t<{ns}type.object.type>\t<{ns}people.person>\t."),
            5 => format!(
                "{s}\t<http://www.w3.org/2002/07/owl#sameAs>\t<http://dbpedia.org/resource/R{i}>\t."
            ),
            _ => format!(
                "{s}\t<{ns}rel.r{}>\t<{ns}m.0o{}>\t.",
                i % 13,
                (i * 31) % 5000
            ),
        };
        writeln!(nt, "{line}").unwrap();
        match i {
            1000 => writeln!(nt).unwrap(),
            2000 => writeln!(nt, "# a comment").unwrap(),
            3000 => writeln!(nt, "<{ns}m.0bad>\t<{ns}x.y>\tnot a term\t.").unwrap(),
            4000 => writeln!(nt, "<{ns}m.0u>\t<{ns}type.object.name>\t\"Z\u{fc}rich\"@en\t.").unwrap(),
            5000 => nt.extend_from_slice(b"<http://rdf.freebase.com/ns/m.0v>\t<http://rdf.freebase.com/ns/x.y>\t\"\xff\xfe\"\t.\n"),
            _ => {}
        }
    }
    nt
}

#[test]
fn a_gzipped_dump_read_in_parallel_writes_the_parts_of_the_plain_one() {
    same_rows_plain_and_gzipped(&dump(), "kg.nt", "freebase");
}
