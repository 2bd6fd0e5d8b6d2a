//! The option groups several stages flatten into their options (defined in
//! `distillery_core::spec`, beside the pipeline checks, so the label crate's options can
//! flatten them too).

pub use distillery_core::spec::{QuestionCap, SftSplit};
