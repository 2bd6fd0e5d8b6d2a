//! Integration tests of the readers: one binary, one module per area. Tests that read the
//! real upstream samples in `../shared/data` skip with a message when it is absent.

mod common;
mod history;
mod kb;
mod limits;
mod log;
mod mediawiki;
mod qa;
mod ranges;
mod ranges_blocks;
mod ranges_mediawiki;
