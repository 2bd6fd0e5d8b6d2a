//! Wikimedia's daily adds-changes folders, written for the CLI and cluster tests.

use std::path::Path;

/// Writes a daily adds-changes folder as Wikimedia lays it out: `xml` bz2-compressed into
/// `<wiki>-<date>-pages-meta-hist-incr.xml.bz2`, its `md5sums`, `maxrevid.txt` and a done
/// `status.txt`.
pub fn daily_folder(dir: &Path, wiki: &str, date: &str, xml: &str, max_rev_id: i64) {
    use md5::Digest;
    use std::io::Write;
    std::fs::create_dir_all(dir).unwrap();
    let name = format!("{wiki}-{date}-pages-meta-hist-incr.xml.bz2");
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    bz.write_all(xml.as_bytes()).unwrap();
    let data = bz.finish().unwrap();
    let sum: String = md5::Md5::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(dir.join(&name), &data).unwrap();
    std::fs::write(dir.join("md5sums"), format!("{sum}  {name}\n")).unwrap();
    std::fs::write(dir.join("maxrevid.txt"), max_rev_id.to_string()).unwrap();
    std::fs::write(dir.join("status.txt"), "done:all").unwrap();
}
