//! QA dataset readers into the one question schema, with their contexts as documents/tables.

mod common;
pub mod cwq;
pub mod hotpotqa;
pub mod hybridqa;
pub mod metaqa;
pub mod musique;
pub mod simpleqa;
pub mod tatqa;
pub mod twowiki;
