//! Pages loaded in a real headless browser (Debian's `chromium`): a screenshot kept under
//! `target/test-artefacts/`, and the DOM the browser rendered. Used by the cluster and CLI
//! test binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser, or `None` (with a message) where it is not installed; CI installs it.
pub fn chromium() -> Option<String> {
    for name in ["chromium", "chromium-browser"] {
        if Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(name.to_string());
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but `chromium` is not installed (.ci/run installs it)"
    );
    eprintln!("skipping: `chromium` is not installed (apt-get install chromium)");
    None
}

/// Where a test keeps a screenshot: `target/test-artefacts/<name>` of the repository.
pub fn artefact(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/test-artefacts")
        .join(name)
}

/// Loads `url` in headless chromium: a screenshot into `shot`, and the DOM it rendered.
pub fn browse(browser: &str, url: &str, shot: &Path) -> String {
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1500,1000",
    ];
    let o = Command::new(browser)
        .args(common)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        o.status.success() && shot.exists(),
        "chromium screenshot of {url}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(browser)
        .args(common)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}
