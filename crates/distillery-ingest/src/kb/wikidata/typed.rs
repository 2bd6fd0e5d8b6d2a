//! The entity read by serde visitors that build only what is kept: the id; the label,
//! description, aliases and `<lang>wiki` sitelink of each configured language; per statement
//! the `mainsnak`'s `snaktype`, `property` and `datavalue` and the `P585` and `P580`
//! qualifiers. Strings without escapes are borrowed from the line. The other languages,
//! sitelinks, qualifiers, references and statement fields go through [`Skip`], which checks them
//! as a `Value` parse would (it reads them with `deserialize_any`: UTF-8, escapes and lone
//! surrogates, number range, nesting depth) and keeps nothing; fields the entity struct of the
//! `Value` reader ignores are skipped the same way it skips them (`IgnoredAny`).
//!
//! The reader gives up ([`records`] is `None`) on anything it would have to judge: a JSON
//! error, a key given twice where it reads one, a type other than the usual one, a value that
//! does not make an object. Such an entity is read again by [`super::value`], which reports it
//! in its own words; an entity this reader takes gets the records the `Value` reader gives it.

use std::borrow::Cow;
use std::fmt;

use distillery_core::Record;
use distillery_core::spec::WikidataOptions;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use super::{Object, entity_row, literal, site_of, triple};

/// The records of one entity, or `None` where the [`super::value`] reader must read it.
pub(super) fn records(
    source: &str,
    opts: &WikidataOptions,
    bytes: &[u8],
    line: Option<u64>,
) -> Option<Vec<Record>> {
    let langs = &opts.languages;
    let sites: Vec<String> = langs.iter().map(|l| site_of(l)).collect();
    // The line checked as UTF-8 at once, not string by string: serde_json reads a `&str`
    // without checking its strings again. A line that is not UTF-8 is left to the `Value`
    // reader (which refuses it, unless the bad bytes are in a field it skips).
    let text = std::str::from_utf8(bytes).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = EntityFields {
        langs,
        sites: &sites,
        id: None,
        labels: None,
        descriptions: None,
        aliases: None,
        sitelinks: None,
        claims: None,
        statements: None,
    };
    let raw = EntriesSeed(fields).deserialize(&mut de).ok()?;
    de.end().ok()?;
    let id = raw.id.filter(|id| !id.is_empty())?;
    let labels = raw.labels.unwrap_or_default();
    let descriptions = raw.descriptions.unwrap_or_default();
    let aliases = raw.aliases.unwrap_or_default();
    let sitelinks = raw.sitelinks.unwrap_or_default();
    let owned = |v: Option<&Option<Cow<'_, str>>>| v.and_then(|v| v.as_deref()).map(str::to_string);
    let mut out = Vec::new();
    for (i, lang) in langs.iter().enumerate() {
        let aliases = aliases
            .get(i)
            .and_then(Option::as_ref)
            .map(|a| a.iter().map(|v| v.0.to_string()).collect())
            .unwrap_or_default();
        let wikipedia = || {
            sitelinks
                .get(i)
                .and_then(Option::as_ref)
                .map(|t| t.0.to_string())
        };
        out.extend(entity_row(
            source,
            &id,
            lang,
            owned(labels.get(i)),
            owned(descriptions.get(i)),
            aliases,
            wikipedia,
        ));
    }
    let subject_name = owned(labels.first());
    let claims = match (raw.claims, raw.statements) {
        (Some(Claims(Some(c))), _) | (_, Some(Claims(Some(c)))) => c,
        _ => Vec::new(),
    };
    // A property given twice: the `Value` reader keeps the first place and the last list.
    let mut props: Vec<&str> = claims.iter().map(|(p, _)| &**p).collect();
    props.sort_unstable();
    if props.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    for (prop, statements) in &claims {
        for st in statements {
            let snak = st.mainsnak.as_ref()?;
            if snak.snaktype.as_deref() != Some("value") {
                continue;
            }
            let predicate = snak.property.as_deref().unwrap_or(prop);
            let Some(obj) = object_of(snak.datavalue.as_ref(), langs)? else {
                continue;
            };
            let time = qualifier_time(st).map(str::to_string);
            out.push(triple(
                source,
                &id,
                predicate,
                obj,
                &subject_name,
                time,
                line,
            ));
        }
    }
    Some(out)
}

/// The object of a value snak's `datavalue`: `Some(None)` for text in another language, `None`
/// where the `Value` reader would find the value bad (it writes that statement's excerpt).
fn object_of(dv: Option<&DataValue<'_>>, langs: &[String]) -> Option<Option<Object>> {
    let dv = dv?;
    let obj = match (dv.ty.as_deref()?, dv.value.as_ref()?) {
        ("wikibase-entityid", DvValue::Obj(v)) => {
            let key = match &v.id {
                Some(id) => id.to_string(),
                None => {
                    let prefix = match v.entity_type.as_deref() {
                        Some("item") | None => "Q",
                        Some("property") => "P",
                        Some("lexeme") => "L",
                        Some(_) => return None,
                    };
                    format!("{prefix}{}", v.numeric_id?)
                }
            };
            Object {
                value: key,
                kind: "entity",
                lang: None,
                datatype: None,
            }
        }
        ("string", DvValue::Str(s)) => literal(s.to_string()),
        ("monolingualtext", DvValue::Obj(v)) => {
            let lang = v.language.as_deref()?;
            if !langs.iter().any(|l| l == lang) {
                return Some(None);
            }
            Object {
                lang: Some(lang.to_string()),
                ..literal(v.text.as_deref()?.to_string())
            }
        }
        ("quantity", DvValue::Obj(v)) => {
            let amount = v.amount.as_deref()?;
            let value = match v.unit.as_deref() {
                None | Some("1") => amount.to_string(),
                Some(unit) => format!("{amount} {}", unit.rsplit('/').next().unwrap_or(unit)),
            };
            Object {
                datatype: Some("quantity"),
                ..literal(value)
            }
        }
        ("time", DvValue::Obj(v)) => Object {
            datatype: Some("time"),
            ..literal(v.time.as_deref()?.to_string())
        },
        ("globecoordinate", DvValue::Obj(v)) => literal(format!(
            "{},{}",
            v.latitude.as_ref()?,
            v.longitude.as_ref()?
        )),
        _ => return None,
    };
    Some(Some(obj))
}

/// The time of a `P585` (point in time) or else `P580` (start time) qualifier.
fn qualifier_time<'s>(st: &'s Statement<'_>) -> Option<&'s str> {
    [&st.p585, &st.p580].into_iter().find_map(|snaks| {
        snaks.iter().flatten().find_map(|snak| {
            if snak.snaktype.as_deref()? != "value" {
                return None;
            }
            let dv = snak.datavalue.as_ref()?;
            if dv.ty.as_deref()? != "time" {
                return None;
            }
            match dv.value.as_ref()? {
                DvValue::Obj(v) => v.time.as_deref(),
                DvValue::Str(_) => None,
            }
        })
    })
}

/// A `claims` or `statements` field: `{property: [statement]}` in the order of the JSON, or
/// `None` for the `[]` old dumps write for an empty map.
#[derive(Default)]
struct Claims<'a>(Option<Vec<(Cow<'a, str>, Vec<Statement<'a>>)>>);

#[derive(Default)]
struct Statement<'a> {
    mainsnak: Option<Snak<'a>>,
    /// Whether `qualifiers` was read (a second one is left to the `Value` reader).
    qualifiers: Option<()>,
    /// The qualifier lists of `P585` and `P580`, the only ones read.
    p585: Option<Vec<Snak<'a>>>,
    p580: Option<Vec<Snak<'a>>>,
}

#[derive(Default)]
struct Snak<'a> {
    snaktype: Option<Cow<'a, str>>,
    property: Option<Cow<'a, str>>,
    datavalue: Option<DataValue<'a>>,
}

#[derive(Default)]
struct DataValue<'a> {
    ty: Option<Cow<'a, str>>,
    value: Option<DvValue<'a>>,
}

/// A datavalue's `value`: a string (`string` values) or an object, of which the fields any
/// value type reads are kept.
enum DvValue<'a> {
    Str(Cow<'a, str>),
    Obj(DvObject<'a>),
}

#[derive(Default)]
struct DvObject<'a> {
    id: Option<Cow<'a, str>>,
    entity_type: Option<Cow<'a, str>>,
    numeric_id: Option<u64>,
    text: Option<Cow<'a, str>>,
    language: Option<Cow<'a, str>>,
    amount: Option<Cow<'a, str>>,
    unit: Option<Cow<'a, str>>,
    time: Option<Cow<'a, str>>,
    latitude: Option<Number>,
    longitude: Option<Number>,
}

/// The error that sends an entity to the `Value` reader.
fn unusual<E: de::Error>() -> E {
    E::custom("left to the Value reader")
}

/// Sets a field read once; a second time is left to the `Value` reader (it keeps the last).
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    match slot {
        Some(_) => Err(unusual()),
        None => {
            *slot = Some(value);
            Ok(())
        }
    }
}

/// A JSON string, borrowed from the line when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// Any JSON value, checked as a `Value` parse checks it (read with `deserialize_any`, strings
/// unescaped and validated, numbers parsed) and dropped.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        // A key through `IgnoredAny` is still unescaped and validated (serde_json reads map
        // keys with `deserialize_any`).
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Skip)
    }
}

/// A map read entry by entry (or the `[]` old dumps write for an empty one).
trait Entries<'de> {
    /// Called when the value is a map (not `[]`), before its first entry.
    fn start_map(&mut self) {}
    /// Reads the value of `key` from `map`.
    fn entry<A: MapAccess<'de>>(&mut self, key: Cow<'de, str>, map: &mut A)
    -> Result<(), A::Error>;
}

/// Reads a map (or `[]`) into the `Entries` it holds.
struct EntriesSeed<T>(T);

impl<'de, T: Entries<'de>> DeserializeSeed<'de> for EntriesSeed<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Entries<'de>> Visitor<'de> for EntriesSeed<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map, or [] for an empty one")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<T, A::Error> {
        self.0.start_map();
        while let Some(Text(key)) = map.next_key()? {
            self.0.entry(key, &mut map)?;
        }
        Ok(self.0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        match seq.next_element::<Skip>()? {
            None => Ok(self.0),
            Some(_) => Err(unusual()),
        }
    }
}

/// Reads the next value of `map` as an `Entries` starting from its default.
fn entries<'de, T: Entries<'de> + Default, A: MapAccess<'de>>(map: &mut A) -> Result<T, A::Error> {
    map.next_value_seed(EntriesSeed(T::default()))
}

/// The top-level object.
struct EntityFields<'k, 'a> {
    langs: &'k [String],
    sites: &'k [String],
    id: Option<Cow<'a, str>>,
    labels: Option<Vec<Option<Cow<'a, str>>>>,
    descriptions: Option<Vec<Option<Cow<'a, str>>>>,
    aliases: Option<Vec<Option<Vec<LangValue<'a>>>>>,
    sitelinks: Option<Vec<Option<SiteTitle<'a>>>>,
    claims: Option<Claims<'a>>,
    statements: Option<Claims<'a>>,
}

impl<'de> Entries<'de> for EntityFields<'_, 'de> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        let langs = self.langs;
        let per_lang = |map: &mut A| {
            let v: PerKey<'_, LangValue<'de>> =
                map.next_value_seed(EntriesSeed(PerKey::new(langs, false)))?;
            Ok::<_, A::Error>(v.out.into_iter().map(|v| v.map(|v| v.0)).collect())
        };
        match &*key {
            "id" => once(&mut self.id, map.next_value::<Text>()?.0),
            "labels" => once(&mut self.labels, per_lang(map)?),
            "descriptions" => once(&mut self.descriptions, per_lang(map)?),
            "aliases" => {
                let v = map.next_value_seed(EntriesSeed(PerKey::new(langs, false)))?;
                once(&mut self.aliases, v.out)
            }
            "sitelinks" => {
                let v = map.next_value_seed(EntriesSeed(PerKey::new(self.sites, true)))?;
                once(&mut self.sitelinks, v.out)
            }
            "claims" => once(&mut self.claims, entries(map)?),
            "statements" => once(&mut self.statements, entries(map)?),
            // As the `Value` reader's entity struct skips the fields it does not name.
            _ => map.next_value::<IgnoredAny>().map(drop),
        }
    }
}

/// A map keyed by language (or site): the values of the configured keys read as `T`, in the
/// order of `keys`; the others skipped, or with `all` read as `T` too (and dropped).
struct PerKey<'k, T> {
    keys: &'k [String],
    all: bool,
    out: Vec<Option<T>>,
}

impl<'k, T> PerKey<'k, T> {
    fn new(keys: &'k [String], all: bool) -> Self {
        PerKey {
            keys,
            all,
            out: keys.iter().map(|_| None).collect(),
        }
    }
}

impl<'de, T: Deserialize<'de> + Clone> Entries<'de> for PerKey<'_, T> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        let Some(first) = self.keys.iter().position(|k| **k == *key) else {
            if self.all {
                map.next_value::<T>()?;
            } else {
                map.next_value::<Skip>()?;
            }
            return Ok(());
        };
        let value: T = map.next_value()?;
        for (k, slot) in self.keys.iter().zip(&mut self.out).skip(first) {
            if **k == *key {
                once(slot, value.clone())?;
            }
        }
        Ok(())
    }
}

/// `{"language": .., "value": ..}`: the value.
#[derive(Clone)]
struct LangValue<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for LangValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = EntriesSeed(StringField::new("value")).deserialize(d)?;
        f.value.map(LangValue).ok_or_else(unusual)
    }
}

/// `{"site": .., "title": .., "badges": ..}`: the title.
#[derive(Clone)]
struct SiteTitle<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for SiteTitle<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = EntriesSeed(StringField::new("title")).deserialize(d)?;
        f.value.map(SiteTitle).ok_or_else(unusual)
    }
}

/// One string field of an object, the others skipped.
struct StringField<'a> {
    name: &'static str,
    value: Option<Cow<'a, str>>,
}

impl StringField<'_> {
    fn new(name: &'static str) -> Self {
        StringField { name, value: None }
    }
}

impl<'de> Entries<'de> for StringField<'de> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        if key == self.name {
            once(&mut self.value, map.next_value::<Text>()?.0)
        } else {
            map.next_value::<Skip>().map(drop)
        }
    }
}

impl<'de> Entries<'de> for Claims<'de> {
    fn start_map(&mut self) {
        self.0 = Some(Vec::new());
    }
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        let statements: Vec<Statement<'de>> = map.next_value()?;
        if let Some(m) = &mut self.0 {
            m.push((key, statements));
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Statement<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EntriesSeed(Statement::default()).deserialize(d)
    }
}

impl<'de> Entries<'de> for Statement<'de> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match &*key {
            "mainsnak" => once(&mut self.mainsnak, entries(map)?),
            "qualifiers" => {
                let q: Qualifiers = entries(map)?;
                once(&mut self.qualifiers, ())?;
                self.p585 = q.p585;
                self.p580 = q.p580;
                Ok(())
            }
            _ => map.next_value::<Skip>().map(drop),
        }
    }
}

/// A statement's `qualifiers`: the `P585` and `P580` lists.
#[derive(Default)]
struct Qualifiers<'a> {
    p585: Option<Vec<Snak<'a>>>,
    p580: Option<Vec<Snak<'a>>>,
}

impl<'de> Entries<'de> for Qualifiers<'de> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match &*key {
            "P585" => once(&mut self.p585, map.next_value()?),
            "P580" => once(&mut self.p580, map.next_value()?),
            _ => map.next_value::<Skip>().map(drop),
        }
    }
}

impl<'de> Deserialize<'de> for Snak<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EntriesSeed(Snak::default()).deserialize(d)
    }
}

impl<'de> Entries<'de> for Snak<'de> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match &*key {
            "snaktype" => once(&mut self.snaktype, map.next_value::<Text>()?.0),
            "property" => once(&mut self.property, map.next_value::<Text>()?.0),
            "datavalue" => once(&mut self.datavalue, entries(map)?),
            _ => map.next_value::<Skip>().map(drop),
        }
    }
}

impl<'de> Entries<'de> for DataValue<'de> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match &*key {
            "type" => once(&mut self.ty, map.next_value::<Text>()?.0),
            "value" => once(&mut self.value, map.next_value()?),
            _ => map.next_value::<Skip>().map(drop),
        }
    }
}

impl<'de> Deserialize<'de> for DvValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DvValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an object")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<DvValue<'de>, E> {
                Ok(DvValue::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<DvValue<'de>, E> {
                Ok(DvValue::Str(Cow::Owned(v.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<DvValue<'de>, A::Error> {
                EntriesSeed(DvObject::default())
                    .visit_map(map)
                    .map(DvValue::Obj)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Entries<'de> for DvObject<'de> {
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        let text = |map: &mut A| map.next_value::<Text>().map(|t| t.0);
        match &*key {
            "id" => once(&mut self.id, text(map)?),
            "entity-type" => once(&mut self.entity_type, text(map)?),
            "numeric-id" => once(&mut self.numeric_id, map.next_value()?),
            "text" => once(&mut self.text, text(map)?),
            "language" => once(&mut self.language, text(map)?),
            "amount" => once(&mut self.amount, text(map)?),
            "unit" => once(&mut self.unit, text(map)?),
            "time" => once(&mut self.time, text(map)?),
            "latitude" => once(&mut self.latitude, map.next_value()?),
            "longitude" => once(&mut self.longitude, map.next_value()?),
            _ => map.next_value::<Skip>().map(drop),
        }
    }
}
