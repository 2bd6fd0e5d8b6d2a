//! Integration tests of the labelling crate: one binary, one module per area.

mod common;
mod positives;
mod samples;
