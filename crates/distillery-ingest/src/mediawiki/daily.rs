//! Wikimedia's daily adds-changes folders (`other/incr/<wiki>/<date>/`) as an input.
//!
//! A folder holds `maxrevid.txt` (the highest revision id it covers, one number),
//! `status.txt` (`done` once the day's files are written; anything else while they are being
//! written or after a failure), the md5 sums of its files (`md5sums`, or `<wiki>-<date>-md5sums.txt`
//! as the dumps server names it: `<hex digest>  <file name>` lines),
//! `<wiki>-<date>-stubs-meta-hist-incr.xml.gz` and `<wiki>-<date>-pages-meta-hist-incr.xml.bz2`:
//! every revision made since the previous day's `maxrevid`, one `<page>` with its new
//! revisions, which the `mediawiki` reader reads like any export (the newest revision of each
//! page).
//!
//! [`open`] checks a folder before anything is planned from it: a folder still being written
//! (or failed) is refused with what its `status.txt` says, so a night never applies half a day;
//! a missing or unreadable `maxrevid.txt` and a pages file whose MD5 is not the one listed
//! (a partial download) are refused too, each naming the file. A file's sum is computed once
//! per process for a given size (and modification time, on local disk): planning and the
//! stage that applies the day both open the folder. A folder is read through an [`Opener`]:
//! a local directory, or an object-store prefix (`s3://dumps/incr/enwiki/20261201`), whose
//! pages file is then read like any URL input (its MD5 checked first, reading it once).

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use md5::{Digest, Md5};

use crate::input::Opener;

/// The file of a folder that holds the day's revisions.
const PAGES_SUFFIX: &str = "-pages-meta-hist-incr.xml.bz2";

/// A checked daily folder.
#[derive(Debug, Clone, PartialEq)]
pub struct DailyFolder {
    /// The folder (a path or a URL).
    pub dir: String,
    /// The wiki's database name (`enwiki`), from the pages file's name.
    pub wiki: String,
    /// The day (`YYYYMMDD`), from the pages file's name.
    pub date: String,
    /// The highest revision id the day covers (`maxrevid.txt`).
    pub max_rev_id: i64,
    /// The `pages-meta-hist-incr.xml.bz2` file (a path or a URL), whose MD5 matched its
    /// listed sum.
    pub pages: String,
}

impl DailyFolder {
    /// The pages file's name.
    pub fn pages_name(&self) -> &str {
        self.pages.rsplit('/').next().unwrap_or(&self.pages)
    }
}

/// Whether `dir` looks like a daily folder (it has a `maxrevid.txt` or a `status.txt`), so
/// that a directory or prefix given as a `mediawiki` input is read as one.
pub fn is_daily_folder(fs: &dyn Opener, dir: &str) -> bool {
    ["maxrevid.txt", "status.txt"]
        .iter()
        .any(|n| fs.exists(&fs.join(dir, n)))
}

/// Checks a daily folder: finished, its `maxrevid.txt` a number, its pages file present and,
/// with `verify`, matching its MD5 sum (which reads the whole file; without it, only its
/// listing). The error names the folder and the file at fault.
pub fn open(fs: &dyn Opener, dir: &str, verify: bool) -> Result<DailyFolder, String> {
    let show = dir.trim_end_matches('/');
    let read = |name: &str| {
        let mut s = String::new();
        fs.open(&fs.join(dir, name))
            .and_then(|mut r| r.read_to_string(&mut s))
            .map(|_| s)
            .map_err(|e| format!("daily folder {show}: cannot read {name}: {e}"))
    };
    let status = read("status.txt")?;
    let status = status.trim();
    if !status.starts_with("done") {
        return Err(format!(
            "daily folder {show} is not finished: status.txt says `{status}` (a day is read \
             once its status is `done`; wait for it, or leave the day out)"
        ));
    }
    let max = read("maxrevid.txt")?;
    let max_rev_id: i64 = max.trim().parse().map_err(|_| {
        format!(
            "daily folder {show}: maxrevid.txt holds `{}`, not a revision id",
            max.trim().chars().take(40).collect::<String>()
        )
    })?;
    let names = fs
        .list(dir)
        .map_err(|e| format!("daily folder {show}: cannot list it: {e}"))?;
    let pages: Vec<&String> = names.iter().filter(|n| n.ends_with(PAGES_SUFFIX)).collect();
    let [pages_name] = pages.as_slice() else {
        return Err(format!(
            "daily folder {show}: expected one *{PAGES_SUFFIX} file, found {}",
            if pages.is_empty() {
                "none".to_string()
            } else {
                pages
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
    };
    let stem = &pages_name[..pages_name.len() - PAGES_SUFFIX.len()];
    let (wiki, date) = stem.rsplit_once('-').unwrap_or((stem, ""));
    let sums_name = names
        .iter()
        .find(|n| *n == "md5sums" || n.ends_with("md5sums.txt"))
        .ok_or_else(|| {
            format!("daily folder {show}: no md5sums file (`md5sums` or `*-md5sums.txt`)")
        })?;
    let sums = read(sums_name)?;
    let listed = listed_sum(&sums, pages_name).ok_or_else(|| {
        format!("daily folder {show}: {sums_name} lists no MD5 sum for {pages_name}")
    })?;
    let pages = fs.join(dir, pages_name);
    let got = if verify {
        md5_once(fs, &pages)?
    } else {
        listed.clone()
    };
    if !got.eq_ignore_ascii_case(&listed) {
        return Err(format!(
            "daily folder {show}: the MD5 of {pages_name} is {got}, {sums_name} says {listed} \
             (a partial or damaged download?)"
        ));
    }
    Ok(DailyFolder {
        dir: show.to_string(),
        wiki: wiki.to_string(),
        date: date.to_string(),
        max_rev_id,
        pages,
    })
}

/// The sum an md5sums file lists for `name` (`<hex>  <name>`, or `<hex> *<name>` for a
/// binary-mode line).
fn listed_sum(sums: &str, name: &str) -> Option<String> {
    sums.lines().find_map(|l| {
        let (hex, file) = l.trim().split_once(char::is_whitespace)?;
        let file = file.trim_start().trim_start_matches('*');
        (file == name && hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| hex.to_string())
    })
}

/// Sums already computed in this process, by location, size and (local files) modification
/// time.
type Sums = HashMap<(String, u64, Option<SystemTime>), String>;

/// [`md5_of`], remembered while the file keeps its size (and modification time).
fn md5_once(fs: &dyn Opener, location: &str) -> Result<String, String> {
    static SUMS: OnceLock<Mutex<Sums>> = OnceLock::new();
    let size = fs
        .size(location)
        .map_err(|e| format!("cannot read {location}: {e}"))?;
    let modified = (!location.contains("://"))
        .then(|| std::fs::metadata(location).ok()?.modified().ok())
        .flatten();
    let key = (location.to_string(), size, modified);
    let sums = SUMS.get_or_init(Default::default);
    if let Some(s) = sums.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(s.clone());
    }
    let sum = md5_of(fs, location)?;
    sums.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, sum.clone());
    Ok(sum)
}

fn md5_of(fs: &dyn Opener, location: &str) -> Result<String, String> {
    let fail = |e: std::io::Error| format!("cannot read {location}: {e}");
    let mut f = fs.open(location).map_err(fail)?;
    let mut h = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(fail)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::LocalFs;

    fn folder(status: &str, maxrevid: &str, sum: Option<&str>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let name = "testwiki-20240102-pages-meta-hist-incr.xml.bz2";
        std::fs::write(d.path().join(name), b"not really bz2").unwrap();
        std::fs::write(d.path().join("status.txt"), status).unwrap();
        std::fs::write(d.path().join("maxrevid.txt"), maxrevid).unwrap();
        let real = md5_of(&LocalFs, d.path().join(name).to_str().unwrap()).unwrap();
        std::fs::write(
            d.path().join("testwiki-20240102-md5sums.txt"),
            format!(
                "{}  {name}\n0123456789abcdef0123456789abcdef  testwiki-20240102-stubs-meta-hist-incr.xml.gz\n",
                sum.unwrap_or(&real)
            ),
        )
        .unwrap();
        d
    }

    fn at(d: &tempfile::TempDir) -> String {
        d.path().to_str().unwrap().to_string()
    }

    fn check(d: &tempfile::TempDir) -> Result<DailyFolder, String> {
        open(&LocalFs, &at(d), true)
    }

    #[test]
    fn a_finished_folder_is_read_as_its_pages_file() {
        let d = folder("done:all\n", "12345", None);
        assert!(is_daily_folder(&LocalFs, &at(&d)));
        let f = check(&d).unwrap();
        assert_eq!((f.wiki.as_str(), f.date.as_str()), ("testwiki", "20240102"));
        assert_eq!(f.max_rev_id, 12345);
        assert!(
            f.pages
                .ends_with("testwiki-20240102-pages-meta-hist-incr.xml.bz2")
        );
        // The MD5 of a known text.
        let t = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(t.path(), b"abc").unwrap();
        assert_eq!(
            md5_of(&LocalFs, t.path().to_str().unwrap()).unwrap(),
            "900150983cd24fb0d6963f7d28e17f72"
        );
    }

    #[test]
    fn unfinished_damaged_or_unlabelled_folders_are_refused_by_name() {
        let e = check(&folder("in-progress", "1", None)).unwrap_err();
        assert!(
            e.contains("not finished") && e.contains("in-progress"),
            "{e}"
        );
        let e = check(&folder("done", "twelve", None)).unwrap_err();
        assert!(e.contains("maxrevid.txt holds `twelve`"), "{e}");
        let wrong = "ffffffffffffffffffffffffffffffff";
        let e = check(&folder("done", "1", Some(wrong))).unwrap_err();
        assert!(e.contains("MD5") && e.contains(wrong), "{e}");
        let d = folder("done", "1", None);
        std::fs::remove_file(d.path().join("testwiki-20240102-md5sums.txt")).unwrap();
        assert!(check(&d).unwrap_err().contains("no md5sums"));
        let d = folder("done", "1", None);
        std::fs::remove_file(d.path().join("status.txt")).unwrap();
        assert!(check(&d).unwrap_err().contains("status.txt"));
        assert_eq!(listed_sum("x  y", "y"), None, "not a digest");
    }
}
