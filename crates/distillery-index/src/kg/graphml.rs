//! The GraphML export of a KG index, streamed from the sorted node table and the edges by
//! subject: directed, node ids `n<id>` with `key`, `name`, `kind`, (CVT nodes) `cvt` and
//! (nodes with aliases) `aliases` data, a JSON array of strings, edges with
//! `relation` and `source` data, as `networkx.read_graphml` and igraph load it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use arrow::array::{Array, AsArray};

use super::write::{ids, is_cvt, reader, strings, tmp_path};
use crate::IndexError;

/// Escapes text for XML element content and attribute values. Characters XML 1.0 cannot
/// carry at all (control characters other than tab, newline and carriage return, U+FFFE,
/// U+FFFF) become U+FFFD; carriage returns are written as a character reference so that
/// parsers do not normalise them away.
pub(super) fn xml_escape(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    let mut plain = 0;
    for (i, c) in s.char_indices() {
        let rep: &str = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&apos;",
            '\r' => "&#13;",
            '\t' | '\n' => continue,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => "\u{FFFD}",
            _ => continue,
        };
        out.write_all(&s.as_bytes()[plain..i])?;
        out.write_all(rep.as_bytes())?;
        plain = i + c.len_utf8();
    }
    out.write_all(&s.as_bytes()[plain..])
}

const GRAPHML_HEAD: &[u8] = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\" \
xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
xsi:schemaLocation=\"http://graphml.graphdrawing.org/xmlns \
http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd\">\n\
  <key id=\"d0\" for=\"node\" attr.name=\"key\" attr.type=\"string\"/>\n\
  <key id=\"d1\" for=\"node\" attr.name=\"name\" attr.type=\"string\"/>\n\
  <key id=\"d2\" for=\"node\" attr.name=\"kind\" attr.type=\"string\"/>\n\
  <key id=\"d3\" for=\"edge\" attr.name=\"relation\" attr.type=\"string\"/>\n\
  <key id=\"d4\" for=\"edge\" attr.name=\"source\" attr.type=\"string\"/>\n\
  <key id=\"d5\" for=\"node\" attr.name=\"cvt\" attr.type=\"boolean\"/>\n\
  <key id=\"d6\" for=\"node\" attr.name=\"aliases\" attr.type=\"string\"/>\n\
  <graph id=\"G\" edgedefault=\"directed\">\n";

/// Streams the GraphML export: the nodes in id order, then the edges in subject order.
pub(super) fn write(path: &Path, nodes: &Path, by_subject: &Path) -> Result<(), IndexError> {
    let show = path.display().to_string();
    let tmp = tmp_path(path);
    let file = File::create(&tmp).map_err(|e| IndexError::io(tmp.display(), e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let io = |e| IndexError::io(tmp.display(), e);
    w.write_all(GRAPHML_HEAD).map_err(io)?;
    let mut id = 0u64;
    for b in reader(nodes, &[0, 1, 2, 3])? {
        let b = b.map_err(|e| IndexError::parquet(nodes.display(), e))?;
        let (keys, kinds, names) = (strings(&b, 0)?, strings(&b, 1)?, strings(&b, 2)?);
        let aliases = b
            .column(3)
            .as_list_opt::<i32>()
            .ok_or_else(|| IndexError::Invalid("kg build: aliases are not a list".into()))?;
        for r in 0..b.num_rows() {
            let mut row = || -> std::io::Result<()> {
                write!(w, "    <node id=\"n{id}\"><data key=\"d0\">")?;
                xml_escape(&mut w, keys.value(r))?;
                w.write_all(b"</data>")?;
                if names.is_valid(r) {
                    w.write_all(b"<data key=\"d1\">")?;
                    xml_escape(&mut w, names.value(r))?;
                    w.write_all(b"</data>")?;
                }
                write!(w, "<data key=\"d2\">{}</data>", kinds.value(r))?;
                if is_cvt(keys.value(r), kinds.value(r), names.is_valid(r)) {
                    w.write_all(b"<data key=\"d5\">true</data>")?;
                }
                let list = aliases.value(r);
                if let Some(list) = list.as_string_opt::<i32>().filter(|l| !l.is_empty()) {
                    let list: Vec<&str> = list.iter().flatten().collect();
                    let json = serde_json::to_string(&list).map_err(std::io::Error::other)?;
                    w.write_all(b"<data key=\"d6\">")?;
                    xml_escape(&mut w, &json)?;
                    w.write_all(b"</data>")?;
                }
                w.write_all(b"</node>\n")
            };
            row().map_err(io)?;
            id += 1;
        }
    }
    let mut e = 0u64;
    for b in reader(by_subject, &[0, 1, 2, 3])? {
        let b = b.map_err(|e| IndexError::parquet(by_subject.display(), e))?;
        let (subj, obj) = (ids(&b, 0)?.clone(), ids(&b, 2)?.clone());
        let (rel, src) = (strings(&b, 1)?, strings(&b, 3)?);
        for r in 0..b.num_rows() {
            let mut row = || -> std::io::Result<()> {
                write!(
                    w,
                    "    <edge id=\"e{e}\" source=\"n{}\" target=\"n{}\"><data key=\"d3\">",
                    subj.value(r),
                    obj.value(r)
                )?;
                xml_escape(&mut w, rel.value(r))?;
                w.write_all(b"</data><data key=\"d4\">")?;
                xml_escape(&mut w, src.value(r))?;
                w.write_all(b"</data></edge>\n")
            };
            row().map_err(io)?;
            e += 1;
        }
    }
    w.write_all(b"  </graph>\n</graphml>\n").map_err(io)?;
    w.flush().map_err(io)?;
    let file = w.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| IndexError::io(&show, e))
}
