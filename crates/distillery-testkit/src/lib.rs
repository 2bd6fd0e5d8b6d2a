//! Dev-only helpers shared by Distillery's test binaries and examples, each a module named
//! for what it does. Never a normal dependency: the crates whose tests or examples use it
//! (`distillery-cli` for the `cli` and `cluster` test binaries, `distillery-llm` for its
//! `llm` test binary and the `bench_client` and `pace_bench` examples) list it under
//! `[dev-dependencies]`, and it is not published. It depends on no distillery crate, so
//! every crate may dev-depend on it without a cycle; a helper that needs a crate's private
//! items stays in that crate's test binary.
//!
//! - [`fault_server`]: a loopback OpenAI-compatible server with scripted faults, a stand-in
//!   teacher's responder or a proxy in front of a real vLLM.
//! - [`stand_in`]: the deterministic stand-in teacher of the triple extraction prompts,
//!   answering through the fault server.
//! - [`pace_stand_in`]: a server with a known, scheduled capacity, for the adaptive pace.
//! - [`incr`]: Wikimedia's daily adds-changes folders.
//! - [`browser`]: pages loaded in headless chromium, screenshots kept.
//! - [`files`]: the files under an output directory.
//!
//! Why each dependency is here:
//!
//! - `tokio` (with `net`): the fault server's and the pace stand-in's listeners, tasks and
//!   timers;
//! - `serde_json`: the request and answer bodies of both servers and the stand-in teacher;
//! - `axum` (`tokio`, `http1`, `json`): the pace stand-in's HTTP server;
//! - `bzip2` and `md-5`: a daily folder's compressed dump and its `md5sums`.

pub mod browser;
pub mod fault_server;
pub mod files;
pub mod incr;
pub mod pace_stand_in;
pub mod stand_in;
