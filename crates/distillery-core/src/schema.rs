//! Arrow schemas of the output tables and conversions between records and `RecordBatch`es.
//!
//! Schemas are traced from the record types with `serde_arrow`, so the Rust type is the one
//! definition of each table: `Vec<T>` becomes `List<T>`, nested structs become `Struct`s,
//! `Option<T>` a nullable column. Strings are `Utf8` and lists `List` (not the large variants)
//! so pyarrow, pandas and DataFusion read them without casts.

use std::sync::{Arc, OnceLock};

use arrow_array::RecordBatch;
use arrow_schema::{FieldRef, Schema, SchemaRef};
use serde::{Serialize, de::DeserializeOwned};
use serde_arrow::schema::{SchemaLike, TracingOptions};

use crate::record::*;

/// Schema tracing or conversion failed. Always a bug or a schema mismatch: fatal.
#[derive(Debug, thiserror::Error)]
#[error("arrow conversion of {table}: {message}")]
pub struct SchemaError {
    pub table: String,
    pub message: String,
}

fn options() -> TracingOptions {
    TracingOptions::default()
        .strings_as_large_utf8(false)
        .sequence_as_large_list(false)
        .allow_null_fields(true)
}

fn trace<T: DeserializeOwned>(name: &str) -> Vec<FieldRef> {
    Vec::<FieldRef>::from_type::<T>(options())
        .unwrap_or_else(|e| panic!("schema of {name} cannot be traced: {e}"))
}

struct Schemas {
    fields: Vec<(TableKind, Vec<FieldRef>, SchemaRef)>,
}

fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(|| {
        let mut fields = Vec::new();
        for t in TableKind::ALL {
            let f = match t {
                TableKind::Documents => trace::<Document>("documents"),
                TableKind::Tables => trace::<Table>("tables"),
                TableKind::Triples => trace::<Triple>("triples"),
                TableKind::Entities => trace::<Entity>("entities"),
                TableKind::Questions => trace::<Question>("questions"),
                TableKind::Segments => trace::<Segment>("segments"),
                TableKind::Labels => trace::<LabelRecord>("labels"),
                TableKind::Sft => trace::<SftSample>("sft"),
                TableKind::Quarantine => trace::<QuarantineRecord>("quarantine"),
            };
            let schema = Arc::new(Schema::new(f.clone()));
            fields.push((t, f, schema));
        }
        Schemas { fields }
    })
}

fn entry(t: TableKind) -> &'static (TableKind, Vec<FieldRef>, SchemaRef) {
    schemas()
        .fields
        .iter()
        .find(|(k, _, _)| *k == t)
        .expect("every table kind has a schema")
}

/// The Arrow schema of a table.
pub fn schema_of(t: TableKind) -> SchemaRef {
    entry(t).2.clone()
}

/// A short, stable hash of a table's schema (field names, types, nullability), recorded in
/// manifests so a reader can tell two outputs with different layouts apart.
pub fn schema_hash(t: TableKind) -> String {
    let s = schema_of(t);
    let text = format!("{:?}", s.fields());
    crate::id::sha1_hex(&text)[..16].to_string()
}

/// Converts records of one table into a `RecordBatch`.
pub fn to_batch<T: Serialize>(t: TableKind, items: &[T]) -> Result<RecordBatch, SchemaError> {
    serde_arrow::to_record_batch(&entry(t).1, &items).map_err(|e| SchemaError {
        table: t.name().to_string(),
        message: e.to_string(),
    })
}

/// Converts a `RecordBatch` of one table back into records.
pub fn from_batch<T: DeserializeOwned>(
    t: TableKind,
    batch: &RecordBatch,
) -> Result<Vec<T>, SchemaError> {
    serde_arrow::from_record_batch(batch).map_err(|e| SchemaError {
        table: t.name().to_string(),
        message: e.to_string(),
    })
}

/// Converts a homogeneous slice of [`Record`]s (all of kind `t`) into a batch.
pub fn records_to_batch(t: TableKind, records: &[Record]) -> Result<RecordBatch, SchemaError> {
    macro_rules! conv {
        ($variant:ident) => {{
            let items: Vec<_> = records
                .iter()
                .filter_map(|r| match r {
                    Record::$variant(x) => Some(x),
                    _ => None,
                })
                .collect();
            if items.len() != records.len() {
                return Err(SchemaError {
                    table: t.name().to_string(),
                    message: "records of another table mixed into the batch".into(),
                });
            }
            to_batch(t, &items)
        }};
    }
    match t {
        TableKind::Documents => conv!(Document),
        TableKind::Tables => conv!(Table),
        TableKind::Triples => conv!(Triple),
        TableKind::Entities => conv!(Entity),
        TableKind::Questions => conv!(Question),
        TableKind::Segments => conv!(Segment),
        TableKind::Labels => conv!(Label),
        TableKind::Sft => conv!(Sft),
        TableKind::Quarantine => conv!(Quarantine),
    }
}

/// Converts a batch of table `t` into [`Record`]s.
pub fn batch_to_records(t: TableKind, batch: &RecordBatch) -> Result<Vec<Record>, SchemaError> {
    Ok(match t {
        TableKind::Documents => from_batch::<Document>(t, batch)?
            .into_iter()
            .map(Record::Document)
            .collect(),
        TableKind::Tables => from_batch::<Table>(t, batch)?
            .into_iter()
            .map(Record::Table)
            .collect(),
        TableKind::Triples => from_batch::<Triple>(t, batch)?
            .into_iter()
            .map(Record::Triple)
            .collect(),
        TableKind::Entities => from_batch::<Entity>(t, batch)?
            .into_iter()
            .map(Record::Entity)
            .collect(),
        TableKind::Questions => from_batch::<Question>(t, batch)?
            .into_iter()
            .map(Record::Question)
            .collect(),
        TableKind::Segments => from_batch::<Segment>(t, batch)?
            .into_iter()
            .map(Record::Segment)
            .collect(),
        TableKind::Labels => from_batch::<LabelRecord>(t, batch)?
            .into_iter()
            .map(Record::Label)
            .collect(),
        TableKind::Sft => from_batch::<SftSample>(t, batch)?
            .into_iter()
            .map(Record::Sft)
            .collect(),
        TableKind::Quarantine => from_batch::<QuarantineRecord>(t, batch)?
            .into_iter()
            .map(Record::Quarantine)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::DataType;

    #[test]
    fn documents_round_trip_through_arrow() {
        let d = Document {
            id: "x".into(),
            dataset: "mediawiki".into(),
            title: "T".into(),
            text: "Hello world.".into(),
            sentences: vec![Sentence {
                start: 0,
                end: 12,
                paragraph: 0,
            }],
            redirect: Some("Other".into()),
            ..Default::default()
        };
        let b = to_batch(TableKind::Documents, std::slice::from_ref(&d)).unwrap();
        assert_eq!(b.num_rows(), 1);
        let back: Vec<Document> = from_batch(TableKind::Documents, &b).unwrap();
        assert_eq!(back, vec![d]);
    }

    #[test]
    fn schemas_use_plain_utf8_and_lists() {
        for t in TableKind::ALL {
            let s = schema_of(t);
            let id = s.field_with_name("id").unwrap();
            assert_eq!(id.data_type(), &DataType::Utf8, "{t}");
            assert!(!id.is_nullable(), "{t}");
        }
        let s = schema_of(TableKind::Tables);
        assert!(matches!(
            s.field_with_name("rows").unwrap().data_type(),
            DataType::List(_)
        ));
        assert_eq!(schema_hash(TableKind::Segments).len(), 16);
    }
}
