//! Tests of the qa readers.
