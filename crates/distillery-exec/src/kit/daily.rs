//! The daily folders a `mediawiki` input names (adds-changes dumps): found, checked and
//! opened, for planning and for the `corpus` stage.

use crate::store::{StoreOpener, is_url};

/// A path of an input and the daily folders it names (`None`: not a daily folder).
pub type DailyPath = (
    String,
    Option<Vec<distillery_ingest::mediawiki::daily::DailyFolder>>,
);

/// Each of a `mediawiki` input's paths with the daily folders it names, checked (`None`: not
/// a daily folder, a file or URL read as it is), and the problems of the folders refused. A
/// folder is a local directory, a glob of them, or an object-store prefix (`s3://…/20261201`,
/// read through [`StoreOpener`]); `verify` checks each pages file's MD5 (reading it).
pub fn daily_days(paths: &[String], verify: bool) -> (Vec<DailyPath>, Vec<String>) {
    if !paths.iter().any(|p| is_url(p) && !p.starts_with("file://")) {
        return daily_days_with(&distillery_ingest::LocalFs, paths, verify);
    }
    // object_store needs a runtime of its own: this may be called inside one.
    let paths = paths.to_vec();
    std::thread::spawn(move || {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
        {
            Ok(rt) => daily_days_with(&StoreOpener::new(rt.handle().clone()), &paths, verify),
            Err(e) => (Vec::new(), vec![format!("reading daily folders: {e}")]),
        }
    })
    .join()
    .unwrap_or_else(|_| (Vec::new(), vec!["reading daily folders panicked".into()]))
}

fn daily_days_with(
    fs: &dyn distillery_ingest::Opener,
    paths: &[String],
    verify: bool,
) -> (Vec<DailyPath>, Vec<String>) {
    use distillery_ingest::mediawiki::daily;
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    for p in paths {
        let local = p.strip_prefix("file://").unwrap_or(p);
        let dirs: Vec<String> = if is_url(p) && !p.starts_with("file://") {
            let dir = p.trim_end_matches('/');
            if daily::is_daily_folder(fs, dir) {
                vec![dir.to_string()]
            } else {
                Vec::new()
            }
        } else if local.contains(['*', '?', '[']) {
            let mut d: Vec<String> = glob::glob(local)
                .map(|g| {
                    g.filter_map(Result::ok)
                        .map(|d| d.to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            d.retain(|d| std::path::Path::new(d).is_dir() && daily::is_daily_folder(fs, d));
            d.sort();
            d
        } else if std::path::Path::new(local).is_dir() && daily::is_daily_folder(fs, local) {
            vec![local.to_string()]
        } else {
            Vec::new()
        };
        if dirs.is_empty() {
            out.push((p.clone(), None));
            continue;
        }
        let mut days = Vec::new();
        for d in dirs {
            match daily::open(fs, &d, verify) {
                Ok(f) => days.push(f),
                Err(e) => errors.push(e),
            }
        }
        out.push((p.clone(), Some(days)));
    }
    (out, errors)
}
