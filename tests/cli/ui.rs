//! `distillery run FILE --ui ADDR`: the embedded run serves the job list and the job's page
//! while it lasts.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use super::*;

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn a_local_run_serves_its_job_page_while_it_runs() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmp = tempfile::tempdir().unwrap();
    let set = format!("output={}", tmp.path().join("qs").display());
    let mut child = bin()
        .args(["run", "pipelines/quickstart.toml", "--set", &set])
        .args(["--ui", &format!("127.0.0.1:{port}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The list links to the job; its page names the pipeline.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut page = None;
    while page.is_none() && Instant::now() < deadline {
        if let Some(list) = get(port, "/").filter(|l| l.contains("href=\"/jobs/")) {
            let at = list.find("href=\"/jobs/").unwrap() + 6;
            let path = &list[at..at + list[at..].find('"').unwrap()];
            page = get(port, path).filter(|p| p.starts_with("HTTP/1.1 200"));
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("job page: http://127.0.0.1:{port}/")),
        "{err}"
    );
    let page = page.expect("the job page was not served while the run lasted");
    assert!(page.contains("pipeline <b>quickstart</b>"), "{page}");
    assert!(page.contains("id=\"stages\""), "{page}");
    // Gone with the run.
    assert!(get(port, "/").is_none());
}
