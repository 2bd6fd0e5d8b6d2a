//! Tests of the mediawiki readers.
