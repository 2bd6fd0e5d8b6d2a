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

mod triples;
pub use triples::TriplesBuilder;

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
                TableKind::Subgraphs => trace::<SubgraphEdge>("subgraphs"),
                TableKind::Literals => trace::<Triple>("literals"),
                TableKind::Changes => trace::<Change>("changes"),
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

/// A string column of one field of each record, its buffer sized up front.
fn string_column<T>(items: &[&T], f: &dyn Fn(&T) -> &str) -> arrow_array::ArrayRef {
    let bytes = items.iter().map(|t| f(t).len()).sum();
    let mut b = arrow_array::builder::StringBuilder::with_capacity(items.len(), bytes);
    for t in items {
        b.append_value(f(t));
    }
    Arc::new(b.finish())
}

/// [`string_column`] of an optional field: nulls where it is `None`.
fn optional_string_column<T>(
    items: &[&T],
    f: &dyn Fn(&T) -> Option<&str>,
) -> arrow_array::ArrayRef {
    let bytes = items.iter().map(|t| f(t).map_or(0, str::len)).sum();
    let mut b = arrow_array::builder::StringBuilder::with_capacity(items.len(), bytes);
    for t in items {
        b.append_option(f(t));
    }
    Arc::new(b.finish())
}

/// [`to_batch`] for the `triples` table, built by [`TriplesBuilder`]: a KG dump is billions
/// of rows of short strings, where generic serialization spends more per row than the line
/// parser does. `table` is `triples` or `literals` (the same columns). Tested equal to
/// [`to_batch`].
pub fn triples_batch(table: TableKind, items: &[&Triple]) -> Result<RecordBatch, SchemaError> {
    let mut b = TriplesBuilder::for_items(table, items);
    for t in items {
        b.push(t);
    }
    b.finish()
}

/// [`to_batch`] for the `entities` table, built column by column: a KG dump gives an entity
/// row per name and alias (a fifth of Freebase's literal lines), where generic serialization
/// cost a third as much as the line parser. Tested equal to [`to_batch`].
pub fn entities_batch(table: TableKind, items: &[&Entity]) -> Result<RecordBatch, SchemaError> {
    use arrow_array::ArrayRef;
    use arrow_array::builder::{ListBuilder, StringBuilder};
    use arrow_schema::DataType;

    let schema = schema_of(table);
    let err = |message: String| SchemaError {
        table: table.name().to_string(),
        message,
    };
    let n = items.len();
    let text = |f: &dyn Fn(&Entity) -> &str| string_column(items, f);
    let opt = |f: &dyn Fn(&Entity) -> Option<&str>| optional_string_column(items, f);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        columns.push(match field.name().as_str() {
            "id" => text(&|e| &e.id),
            "dataset" => text(&|e| &e.dataset),
            "source" => text(&|e| &e.source),
            "key" => text(&|e| &e.key),
            "lang" => opt(&|e| e.lang.as_deref()),
            "label" => opt(&|e| e.label.as_deref()),
            "description" => opt(&|e| e.description.as_deref()),
            "wikipedia" => opt(&|e| e.wikipedia.as_deref()),
            "aliases" => {
                let DataType::List(item) = field.data_type() else {
                    return Err(err(format!("`aliases` is not a list: {field:?}")));
                };
                let count = items.iter().map(|e| e.aliases.len()).sum();
                let bytes = items.iter().flat_map(|e| &e.aliases).map(String::len).sum();
                let mut b =
                    ListBuilder::with_capacity(StringBuilder::with_capacity(count, bytes), n)
                        .with_field(item.clone());
                for e in items {
                    for a in &e.aliases {
                        b.values().append_value(a);
                    }
                    b.append(true);
                }
                Arc::new(b.finish())
            }
            other => return Err(err(format!("no builder for column `{other}`"))),
        });
    }
    RecordBatch::try_new(schema, columns).map_err(|e| err(e.to_string()))
}

/// One row of the `subgraphs` table, borrowed ([`SubgraphEdge`] owns its strings).
#[derive(Debug, Clone, Copy)]
pub struct SubgraphRef<'a> {
    pub id: &'a str,
    pub question_id: &'a str,
    pub subject: &'a str,
    pub relation: &'a str,
    pub object: &'a str,
    pub object_kind: &'a str,
    pub hop: u32,
    pub subject_name: Option<&'a str>,
    pub object_name: Option<&'a str>,
    pub triple_id: &'a str,
    pub source: &'a str,
}

impl SubgraphRef<'_> {
    /// The row as a record.
    pub fn to_owned(&self) -> SubgraphEdge {
        SubgraphEdge {
            id: self.id.into(),
            question_id: self.question_id.into(),
            subject: self.subject.into(),
            relation: self.relation.into(),
            object: self.object.into(),
            object_kind: self.object_kind.into(),
            hop: self.hop,
            subject_name: self.subject_name.map(Into::into),
            object_name: self.object_name.map(Into::into),
            triple_id: self.triple_id.into(),
            source: self.source.into(),
        }
    }
}

impl SubgraphEdge {
    /// The row, borrowed.
    pub fn as_ref(&self) -> SubgraphRef<'_> {
        SubgraphRef {
            id: &self.id,
            question_id: &self.question_id,
            subject: &self.subject,
            relation: &self.relation,
            object: &self.object,
            object_kind: &self.object_kind,
            hop: self.hop,
            subject_name: self.subject_name.as_deref(),
            object_name: self.object_name.as_deref(),
            triple_id: &self.triple_id,
            source: &self.source,
        }
    }
}

/// The `subgraphs` table built column by column from borrowed rows: a subgraph stage writes
/// millions of rows, and generic serialization of owned records was several times slower.
/// Tested equal to [`to_batch`].
#[derive(Default)]
pub struct SubgraphsBuilder {
    text: [arrow_array::builder::StringBuilder; 10],
    hop: arrow_array::builder::UInt32Builder,
}

impl SubgraphsBuilder {
    /// Appends one row.
    pub fn push(&mut self, r: SubgraphRef<'_>) {
        let [
            id,
            question_id,
            subject,
            relation,
            object,
            kind,
            sn,
            on,
            triple_id,
            source,
        ] = &mut self.text;
        id.append_value(r.id);
        question_id.append_value(r.question_id);
        subject.append_value(r.subject);
        relation.append_value(r.relation);
        object.append_value(r.object);
        kind.append_value(r.object_kind);
        sn.append_option(r.subject_name);
        on.append_option(r.object_name);
        triple_id.append_value(r.triple_id);
        source.append_value(r.source);
        self.hop.append_value(r.hop);
    }

    /// Rows appended since the last [`SubgraphsBuilder::finish`].
    pub fn len(&self) -> usize {
        use arrow_array::builder::ArrayBuilder;
        self.hop.len()
    }

    /// Whether no row was appended since the last [`SubgraphsBuilder::finish`].
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows appended as one batch (the builder starts again empty).
    pub fn finish(&mut self) -> Result<RecordBatch, SchemaError> {
        use arrow_array::ArrayRef;
        let table = TableKind::Subgraphs;
        let schema = schema_of(table);
        let err = |message: String| SchemaError {
            table: table.name().to_string(),
            message,
        };
        let names = [
            "id",
            "question_id",
            "subject",
            "relation",
            "object",
            "object_kind",
            "subject_name",
            "object_name",
            "triple_id",
            "source",
        ];
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let name = field.name().as_str();
            columns.push(match names.iter().position(|n| *n == name) {
                Some(i) => Arc::new(self.text[i].finish()),
                None if name == "hop" => Arc::new(self.hop.finish()),
                None => return Err(err(format!("no builder for column `{name}`"))),
            });
        }
        RecordBatch::try_new(schema, columns).map_err(|e| err(e.to_string()))
    }
}

/// [`to_batch`] for the `subgraphs` table, through [`SubgraphsBuilder`].
pub fn subgraphs_batch(items: &[SubgraphEdge]) -> Result<RecordBatch, SchemaError> {
    let mut b = SubgraphsBuilder::default();
    for e in items {
        b.push(e.as_ref());
    }
    b.finish()
}

/// [`to_batch`] for the `sft` table, built column by column with every buffer allocated once
/// at its final size. SFT samples carry whole prompts (kilobytes each) and are the bulk of
/// what the label stage writes: generic serialization grows each string buffer by doubling,
/// copying and faulting in fresh memory at every step. Tested equal to [`to_batch`].
pub fn sft_batch(items: &[SftSample]) -> Result<RecordBatch, SchemaError> {
    use arrow_array::ArrayRef;
    use arrow_array::builder::{
        ArrayBuilder, BooleanBuilder, Float64Builder, ListBuilder, StringBuilder, StructBuilder,
        UInt32Builder,
    };
    use arrow_schema::DataType;

    let schema = schema_of(TableKind::Sft);
    let err = |message: String| SchemaError {
        table: TableKind::Sft.name().to_string(),
        message,
    };
    let item_field = |name: &str| -> Result<FieldRef, SchemaError> {
        match schema.field_with_name(name).map(|f| f.data_type()) {
            Ok(DataType::List(item)) => Ok(item.clone()),
            other => Err(err(format!("`{name}` is not a list: {other:?}"))),
        }
    };
    let strings = |f: &dyn Fn(&SftSample) -> &str| -> ArrayRef {
        let bytes = items.iter().map(|s| f(s).len()).sum();
        let mut b = StringBuilder::with_capacity(items.len(), bytes);
        for s in items {
            b.append_value(f(s));
        }
        Arc::new(b.finish())
    };
    let u32s = |f: &dyn Fn(&SftSample) -> Option<u32>| -> ArrayRef {
        let mut b = UInt32Builder::with_capacity(items.len());
        for s in items {
            b.append_option(f(s));
        }
        Arc::new(b.finish())
    };

    let message = item_field("messages")?;
    let DataType::Struct(message_fields) = message.data_type() else {
        return Err(err(format!(
            "`messages` items are not structs: {message:?}"
        )));
    };
    let all = || items.iter().flat_map(|s| &s.messages);
    let n = all().count();
    let role_bytes = all().map(|m| m.role.len()).sum();
    let content_bytes = all().map(|m| m.content.len()).sum();
    let parts: Vec<Box<dyn ArrayBuilder>> = vec![
        Box::new(StringBuilder::with_capacity(n, role_bytes)),
        Box::new(StringBuilder::with_capacity(n, content_bytes)),
    ];
    let mut messages = ListBuilder::with_capacity(
        StructBuilder::new(message_fields.clone(), parts),
        items.len(),
    )
    .with_field(message.clone());
    let lists = |f: &dyn Fn(&SftSample) -> &[String],
                 name: &str|
     -> Result<ListBuilder<StringBuilder>, SchemaError> {
        let n = items.iter().map(|s| f(s).len()).sum();
        let bytes = items.iter().flat_map(f).map(String::len).sum();
        Ok(
            ListBuilder::with_capacity(StringBuilder::with_capacity(n, bytes), items.len())
                .with_field(item_field(name)?),
        )
    };
    let mut segment_ids = lists(&|s| &s.segment_ids, "segment_ids")?;
    let mut cache_entries = lists(&|s| &s.cache_entries, "cache_entries")?;
    let mut revisions = lists(&|s| &s.revisions, "revisions")?;
    let mut teacher = StringBuilder::with_capacity(
        items.len(),
        items
            .iter()
            .filter_map(|s| s.teacher.as_ref())
            .map(String::len)
            .sum(),
    );
    let mut weight = Float64Builder::with_capacity(items.len());
    let mut sufficient = BooleanBuilder::with_capacity(items.len());
    for s in items {
        let values = messages.values();
        for m in &s.messages {
            for (i, text) in [&m.role, &m.content].into_iter().enumerate() {
                values
                    .field_builder::<StringBuilder>(i)
                    .expect("string fields")
                    .append_value(text);
            }
            values.append(true);
        }
        messages.append(true);
        for (b, v) in [
            (&mut segment_ids, &s.segment_ids),
            (&mut cache_entries, &s.cache_entries),
            (&mut revisions, &s.revisions),
        ] {
            for x in v {
                b.values().append_value(x);
            }
            b.append(true);
        }
        teacher.append_option(s.teacher.as_deref());
        weight.append_value(s.weight);
        sufficient.append_option(s.sufficient);
    }

    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        columns.push(match f.name().as_str() {
            "id" => strings(&|s| &s.id),
            "task" => strings(&|s| &s.task),
            "messages" => Arc::new(messages.finish()),
            "weight" => Arc::new(weight.finish()),
            "split" => strings(&|s| &s.split),
            "dataset" => strings(&|s| &s.dataset),
            "question_id" => strings(&|s| &s.question_id),
            "segment_ids" => Arc::new(segment_ids.finish()),
            "method" => strings(&|s| &s.method),
            "params" => strings(&|s| &s.params),
            "template_id" => strings(&|s| &s.template_id),
            "template_version" => strings(&|s| &s.template_version),
            "pipeline_hash" => strings(&|s| &s.pipeline_hash),
            "step" => u32s(&|s| s.step),
            "steps" => u32s(&|s| s.steps),
            "sufficient" => Arc::new(sufficient.finish()),
            "prompt_tokens" => u32s(&|s| Some(s.prompt_tokens)),
            "target_tokens" => u32s(&|s| Some(s.target_tokens)),
            "teacher" => Arc::new(teacher.finish()),
            "cache_entries" => Arc::new(cache_entries.finish()),
            "revisions" => Arc::new(revisions.finish()),
            other => return Err(err(format!("no column builder for `{other}`"))),
        });
    }
    RecordBatch::try_new(schema, columns).map_err(|e| err(e.to_string()))
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

/// Converts a homogeneous slice of [`Record`]s (all of kind `t`), or of references to them,
/// into a batch.
pub fn records_to_batch<R: std::borrow::Borrow<Record>>(
    t: TableKind,
    records: &[R],
) -> Result<RecordBatch, SchemaError> {
    macro_rules! conv {
        ($variant:ident) => {
            conv!($variant, to_batch)
        };
        ($variant:ident, $build:ident) => {{
            let items: Vec<_> = records
                .iter()
                .filter_map(|r| match r.borrow() {
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
            $build(t, &items)
        }};
    }
    match t {
        TableKind::Documents => conv!(Document),
        TableKind::Tables => conv!(Table),
        TableKind::Triples => conv!(Triple, triples_batch),
        TableKind::Literals => conv!(Literal, triples_batch),
        TableKind::Entities => conv!(Entity, entities_batch),
        TableKind::Questions => conv!(Question),
        TableKind::Segments => conv!(Segment),
        TableKind::Labels => conv!(Label),
        TableKind::Sft => conv!(Sft),
        TableKind::Quarantine => conv!(Quarantine),
        TableKind::Subgraphs => conv!(Subgraph),
        TableKind::Changes => conv!(Change),
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
        TableKind::Literals => from_batch::<Triple>(t, batch)?
            .into_iter()
            .map(Record::Literal)
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
        TableKind::Subgraphs => from_batch::<SubgraphEdge>(t, batch)?
            .into_iter()
            .map(Record::Subgraph)
            .collect(),
        TableKind::Changes => from_batch::<Change>(t, batch)?
            .into_iter()
            .map(Record::Change)
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

    /// A table's column builder gives the batch serialization gives, for 0 to 40 rows made by
    /// `make`, and the batch reads back into the same records.
    fn same_as_serialization<T>(
        kind: TableKind,
        make: impl Fn(usize) -> T,
        build: impl Fn(&[T]) -> Result<RecordBatch, SchemaError>,
    ) where
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        for rows in [0, 1, 2, 7, 40] {
            let items: Vec<T> = (0..rows).map(&make).collect();
            let built = build(&items).unwrap();
            assert_eq!(built, to_batch(kind, &items).unwrap(), "{rows} rows");
            let back: Vec<T> = from_batch(kind, &built).unwrap();
            assert_eq!(back, items);
        }
    }

    /// A triple with every column set or empty in turn.
    fn triple(n: usize) -> Triple {
        Triple {
            id: format!("{n:032x}"),
            dataset: "freebase".into(),
            source: "x.nt".into(),
            subject: format!("m.{n}"),
            predicate: "film.film.directed_by".into(),
            object: "é\"x\"".repeat(n % 3),
            object_kind: ["entity", "literal", "iri"][n % 3].into(),
            lang: n.is_multiple_of(2).then(|| "en".into()),
            datatype: (n % 5 == 1).then(|| "xsd:date".into()),
            subject_name: n.is_multiple_of(3).then(|| format!("Name {n}")),
            object_name: None,
            time: (n % 7 == 2).then(|| "+2001".into()),
            document_id: (n % 4 == 3).then(|| format!("d{n}")),
            sentence: (n % 4 == 3).then_some(n as u32),
            start: n.is_multiple_of(6).then_some(1),
            end: n.is_multiple_of(6).then_some(9),
            line: (n % 2 == 1).then_some(n as u64 * 11),
            teacher: (n % 4 == 3).then(|| "m@r".into()),
            cache_entry: (n % 4 == 3).then(|| format!("{n:040x}")),
        }
    }

    #[test]
    fn triples_batches_are_what_serialization_builds() {
        same_as_serialization(TableKind::Triples, triple, |items| {
            triples_batch(TableKind::Triples, &items.iter().collect::<Vec<_>>())
        });
    }

    #[test]
    fn a_reused_triples_builder_makes_each_batch_afresh() {
        // Each batch after the first starts with the last one's capacity: a smaller, a
        // larger and an empty batch come out as serialization makes them.
        let mut b = TriplesBuilder::new(TableKind::Literals);
        let mut next = 0;
        for rows in [40, 3, 90, 0, 7] {
            let items: Vec<Triple> = (next..next + rows).map(triple).collect();
            next += rows;
            for t in &items {
                b.push(t);
            }
            assert_eq!(b.len(), rows);
            let built = b.finish().unwrap();
            assert!(b.is_empty());
            assert_eq!(
                built,
                to_batch(TableKind::Literals, &items).unwrap(),
                "{rows} rows"
            );
        }
    }

    #[test]
    fn entities_batches_are_what_serialization_builds() {
        let entity = |n: usize| Entity {
            id: format!("{n:032x}"),
            dataset: "freebase".into(),
            source: "x.nt".into(),
            key: format!("m.{n}"),
            lang: n.is_multiple_of(2).then(|| "en".into()),
            label: (n % 3 != 1).then(|| "é\"x\"".repeat(n % 4)),
            description: (n % 5 == 1).then(|| format!("d{n}")),
            aliases: (0..n % 4).map(|k| format!("a{k}\t{n}")).collect(),
            wikipedia: (n % 7 == 2).then(|| format!("W {n}")),
        };
        same_as_serialization(TableKind::Entities, entity, |items| {
            entities_batch(TableKind::Entities, &items.iter().collect::<Vec<_>>())
        });
    }

    #[test]
    fn subgraphs_batches_are_what_serialization_builds() {
        let edge = |n: usize| SubgraphEdge {
            id: format!("{n:032x}"),
            question_id: format!("q{}", n / 3),
            subject: format!("m.{n}"),
            relation: "film.film.directed_by".into(),
            object: "é\"x\"".repeat(n % 3),
            object_kind: ["entity", "literal"][n % 2].into(),
            hop: n as u32 % 4,
            subject_name: n.is_multiple_of(3).then(|| format!("Name {n}")),
            object_name: (n % 5 == 1).then(|| "O".into()),
            triple_id: format!("{n:040x}"),
            source: "freebase".into(),
        };
        same_as_serialization(TableKind::Subgraphs, edge, subgraphs_batch);
    }

    #[test]
    fn sft_batches_are_what_serialization_builds() {
        let sample = |n: usize| SftSample {
            id: format!("s{n}"),
            task: "hseq_iteration".into(),
            messages: (0..n % 4)
                .map(|k| Message {
                    role: ["system", "user", "assistant"][k % 3].into(),
                    content: "é\n\"x\" ".repeat(n * k),
                })
                .collect(),
            weight: n as f64 / 3.0,
            split: "train".into(),
            dataset: "hotpotqa".into(),
            question_id: format!("q{}", n / 2),
            segment_ids: (0..n % 3).map(|k| format!("seg{k}")).collect(),
            method: "hseq-paper".into(),
            params: format!("{{\"n\": {n}}}"),
            template_id: "t".into(),
            template_version: "1".into(),
            pipeline_hash: "h".into(),
            step: n.is_multiple_of(2).then_some(n as u32),
            steps: (!n.is_multiple_of(3)).then_some(3),
            sufficient: [None, Some(true), Some(false)][n % 3],
            prompt_tokens: n as u32 * 7,
            target_tokens: 5,
            teacher: (n % 3 == 1).then(|| format!("model@r{n}")),
            cache_entries: (0..n % 4).map(|k| format!("{k:040x}")).collect(),
            revisions: (0..n % 3).map(|k| format!("enwiki#{k}@{n}")).collect(),
        };
        same_as_serialization(TableKind::Sft, sample, sft_batch);
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
