//! TLS between the coordinator and its workers and clients, with a certificate authority and
//! a server certificate for `localhost` / 127.0.0.1 made by the test (`rcgen`): a worker and
//! `submit` that trust the CA run a job; a client without the CA, with another CA or over
//! plain http is refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

use super::{bin, free_port, http_get};

/// A self-signed CA: its certificate's PEM and the issuer that signs with it.
fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// Writes `ca.pem`, `other-ca.pem` (a CA that signed nothing here), and `server.pem` /
/// `server.key` (for `localhost` and 127.0.0.1, signed by `ca.pem`) into `dir`.
fn write_certificates(dir: &Path) {
    let ca = ca("distillery test CA");
    let other = ca_pem_only("another CA");
    let key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, "localhost");
    let cert = p.signed_by(&key, &ca).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("other-ca.pem"), other).unwrap();
    std::fs::write(dir.join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

fn ca_pem_only(name: &str) -> String {
    ca(name).pem()
}

/// Runs a client command, killed after `secs` (a refused connection must not hang).
fn output_within(mut c: std::process::Command, secs: u64) -> Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("client still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// The coordinator and the worker, killed when the test ends.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn tls_with_a_real_certificate_runs_a_job_and_refuses_clients_without_the_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_certificates(dir);
    let token = dir.join("token");
    std::fs::write(&token, "tls-test-token-0123456789").unwrap();
    let log = |name: &str| std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let read_log =
        |name: &str| std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
    let (port, metrics_port) = (free_port(), free_port());
    let mut procs = Procs(Vec::new());

    let mut c = bin();
    c.arg("coordinator")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--token-file")
        .arg(&token)
        .arg("--tls-cert")
        .arg(dir.join("server.pem"))
        .arg("--tls-key")
        .arg(dir.join("server.key"))
        .args(["--heartbeat-ms", "100", "--backoff-ms", "100"])
        .stdout(Stdio::null())
        .stderr(log("coordinator"));
    procs.0.push(c.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http_get(metrics_port, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(
            Instant::now() < deadline,
            "coordinator not ready: {}",
            read_log("coordinator")
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let https = format!("https://localhost:{port}");
    let ca_pem: PathBuf = dir.join("ca.pem");
    let mut w = bin();
    w.arg("worker")
        .args(["--coordinator", &https, "--worker-id", "w1", "--slots", "1"])
        .args(["--parallelism", "1"])
        .arg("--token-file")
        .arg(&token)
        .arg("--tls-ca")
        .arg(&ca_pem)
        .stdout(Stdio::null())
        .stderr(log("w1"));
    procs.0.push(w.spawn().unwrap());

    // A small job: the quick start's questions through HSEQ.
    let repo = super::repo();
    let pipeline = dir.join("tls.toml");
    let out = dir.join("out");
    std::fs::write(
        &pipeline,
        format!(
            "version = 1\nname = \"tls\"\noutput = \"{}\"\n\n[[inputs]]\nname = \"hotpot\"\n\
             format = \"hotpotqa\"\npaths = [\"{}\"]\n\n[[stages]]\nkind = \"hseq\"\n",
            out.display(),
            repo.join("data/quickstart/hotpot.json").display()
        ),
    )
    .unwrap();
    let client = |url: &str, ca: Option<&Path>, args: &[&str]| {
        let mut c = bin();
        c.args(args)
            .args(["--coordinator", url])
            .arg("--token-file")
            .arg(&token);
        if let Some(ca) = ca {
            c.arg("--tls-ca").arg(ca);
        }
        c
    };
    let o = output_within(
        client(
            &https,
            Some(&ca_pem),
            &["submit", pipeline.to_str().unwrap(), "--wait"],
        ),
        180,
    );
    assert!(
        o.status.success(),
        "submit over TLS: {}\ncoordinator:\n{}\nworker:\n{}",
        String::from_utf8_lossy(&o.stderr),
        read_log("coordinator"),
        read_log("w1")
    );
    assert!(out.join("_manifest.json").is_file());
    assert!(
        read_log("w1").contains("task committed"),
        "{}",
        read_log("w1")
    );
    let o = output_within(client(&https, Some(&ca_pem), &["status"]), 60);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Refused: no CA, a CA that did not sign the certificate, plain http to the TLS port.
    let other = dir.join("other-ca.pem");
    for (url, ca, says) in [
        (https.as_str(), None, "TLS"),
        (https.as_str(), Some(other.as_path()), "UnknownIssuer"),
        (&format!("http://127.0.0.1:{port}") as &str, None, ""),
    ] {
        let o = output_within(client(url, ca, &["status"]), 60);
        eprintln!(
            "{url} with CA {ca:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            !o.status.success(),
            "{url} with CA {ca:?} was accepted: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert!(String::from_utf8_lossy(&o.stderr).contains(says));
    }
    // The coordinator still serves the trusted client afterwards.
    let o = output_within(client(&https, Some(&ca_pem), &["status"]), 60);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
