//! The Arrow schemas of the build's work files and of the index's Parquet files.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

pub(super) fn spool_schema() -> SchemaRef {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    Arc::new(Schema::new(vec![
        s("subject", false),
        s("relation", false),
        s("object", false),
        s("object_kind", false),
        s("subject_name", true),
        s("object_name", true),
        s("source", false),
    ]))
}

pub(super) fn subject_ids_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("subject", DataType::UInt32, false),
        Field::new("relation", DataType::Utf8, false),
        Field::new("object", DataType::Utf8, false),
        Field::new("object_kind", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
    ]))
}

pub(super) fn ends_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("edge", DataType::Boolean, false),
        Field::new("alias", DataType::Utf8, true),
    ]))
}

/// A node's aliases: a list of strings, empty when it has none.
fn aliases_field() -> Field {
    Field::new(
        "aliases",
        DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
        false,
    )
}

pub(super) fn sorted_nodes_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        aliases_field(),
    ]))
}

pub(super) fn edges_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("subject", DataType::UInt32, false),
        Field::new("relation", DataType::Utf8, false),
        Field::new("object", DataType::UInt32, false),
        Field::new("source", DataType::Utf8, false),
    ]))
}

pub(super) fn nodes_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::UInt32, false),
        Field::new("key", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, false),
        Field::new("out_start", DataType::UInt64, false),
        Field::new("out_end", DataType::UInt64, false),
        Field::new("in_start", DataType::UInt64, false),
        Field::new("in_end", DataType::UInt64, false),
        Field::new("cvt", DataType::Boolean, false),
        aliases_field(),
    ]))
}
