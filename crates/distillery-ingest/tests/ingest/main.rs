//! Integration tests of the readers: one binary, one module per area. Tests that read the
//! real upstream samples in `../shared/data` skip with a message when it is absent.

mod common;
mod kb;
mod limits;
mod mediawiki;
mod qa;
mod ranges;
mod ranges_mediawiki;
