//! The entity read into `serde_json::Value`s: every language, statement, qualifier and
//! reference built and dropped. It is the reader of the entities the typed reader
//! ([`super::typed`]) leaves to it: malformed JSON (its error message is serde_json's, as a
//! `Value` parse reports it), statements that cannot be read (`bad_value`, whose excerpt is the
//! mainsnak written back from its `Value`) and shapes the typed reader does not take (old
//! layouts, repeated keys, unusual types); and the reference the typed reader is tested
//! against.

use distillery_core::Record;
use distillery_core::spec::WikidataOptions;
use serde::Deserialize;
use serde_json::Value;

use super::{EntityProblem, Object, entity_row, literal, triple};

/// The parts of an entity that are read; everything else is skipped unparsed. Fields are
/// `Value`s because old dumps write empty maps as `[]`.
#[derive(Debug, Deserialize)]
struct RawEntity {
    #[serde(default)]
    id: Value,
    #[serde(default)]
    labels: Value,
    #[serde(default)]
    descriptions: Value,
    #[serde(default)]
    aliases: Value,
    #[serde(default)]
    claims: Value,
    /// MediaInfo entities (Commons) name their claims `statements`.
    #[serde(default)]
    statements: Value,
    /// `{site: {site, title, badges}}`: the `<lang>wiki` titles become [`Entity::wikipedia`].
    /// Old dumps write an empty map as `[]`.
    #[serde(default, deserialize_with = "sitelinks")]
    sitelinks: std::collections::HashMap<String, SiteTitle>,
}

#[derive(Debug, Deserialize)]
struct SiteTitle {
    title: String,
}

/// A sitelinks map, or the `[]` old dumps write for an empty one.
fn sitelinks<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<std::collections::HashMap<String, SiteTitle>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Links {
        Map(std::collections::HashMap<String, SiteTitle>),
        Empty([(); 0]),
    }
    Ok(match Links::deserialize(d)? {
        Links::Map(m) => m,
        Links::Empty(_) => Default::default(),
    })
}

/// [`super::entity_records`] of an entity read into `Value`s.
pub(super) fn records(
    source: &str,
    opts: &WikidataOptions,
    bytes: &[u8],
    line: Option<u64>,
) -> Result<(Vec<Record>, Option<EntityProblem>), EntityProblem> {
    let problem = |reason, detail: String| EntityProblem {
        reason,
        detail,
        excerpt: Vec::new(),
    };
    let raw: RawEntity =
        serde_json::from_slice(bytes).map_err(|e| problem("bad_json", e.to_string()))?;
    let Some(id) = raw.id.as_str().filter(|s| !s.is_empty()) else {
        return Err(problem("missing_field", "entity without an \"id\"".into()));
    };
    let mut out = Vec::new();
    for lang in &opts.languages {
        let label = lang_value(&raw.labels, lang);
        let description = lang_value(&raw.descriptions, lang);
        let aliases: Vec<String> = raw
            .aliases
            .get(lang)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.get("value").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let wikipedia = || {
            raw.sitelinks
                .get(&super::site_of(lang))
                .map(|l| l.title.clone())
        };
        out.extend(entity_row(
            source,
            id,
            lang,
            label,
            description,
            aliases,
            wikipedia,
        ));
    }
    let subject_name = opts
        .languages
        .first()
        .and_then(|l| lang_value(&raw.labels, l));
    let claims = if raw.claims.is_object() {
        &raw.claims
    } else {
        &raw.statements
    };
    let mut bad: Vec<String> = Vec::new();
    let mut bad_excerpt: Vec<u8> = Vec::new();
    for (prop, statements) in claims.as_object().into_iter().flatten() {
        for st in statements.as_array().into_iter().flatten() {
            let Some(snak) = st.get("mainsnak") else {
                bad.push(format!("{prop}: statement without mainsnak"));
                continue;
            };
            if snak.get("snaktype").and_then(Value::as_str) != Some("value") {
                continue;
            }
            let predicate = snak.get("property").and_then(Value::as_str).unwrap_or(prop);
            let obj = match object_of(snak.get("datavalue"), &opts.languages) {
                Ok(Some(o)) => o,
                Ok(None) => continue,
                Err(msg) => {
                    if bad.is_empty() {
                        bad_excerpt = serde_json::to_vec(snak).unwrap_or_default();
                    }
                    bad.push(format!("{predicate}: {msg}"));
                    continue;
                }
            };
            let time = qualifier_time(st);
            out.push(triple(
                source,
                id,
                predicate,
                obj,
                &subject_name,
                time,
                line,
            ));
        }
    }
    let bad = (!bad.is_empty()).then(|| EntityProblem {
        reason: "bad_value",
        detail: format!("{id}: {}", bad.join("; ")),
        excerpt: bad_excerpt,
    });
    Ok((out, bad))
}

/// `map[lang].value` of a labels/descriptions map.
fn lang_value(map: &Value, lang: &str) -> Option<String> {
    map.get(lang)?.get("value")?.as_str().map(str::to_string)
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("value without a string \"{key}\""))
}

fn number_field(v: &Value, key: &str) -> Result<String, String> {
    match v.get(key) {
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(format!("value without a number \"{key}\"")),
    }
}

/// The object of a value snak's `datavalue`; `Ok(None)` for text in another language.
fn object_of(dv: Option<&Value>, langs: &[String]) -> Result<Option<Object>, String> {
    let dv = dv.ok_or("value snak without datavalue")?;
    let ty = dv
        .get("type")
        .and_then(Value::as_str)
        .ok_or("datavalue without a type")?;
    let v = dv.get("value").ok_or("datavalue without a value")?;
    let obj = match ty {
        "wikibase-entityid" => {
            let key = match v.get("id").and_then(Value::as_str) {
                Some(id) => id.to_string(),
                None => {
                    let n = v
                        .get("numeric-id")
                        .and_then(Value::as_u64)
                        .ok_or("entity id without \"id\" or \"numeric-id\"")?;
                    let prefix = match v.get("entity-type").and_then(Value::as_str) {
                        Some("item") | None => "Q",
                        Some("property") => "P",
                        Some("lexeme") => "L",
                        Some(other) => return Err(format!("entity type {other} without \"id\"")),
                    };
                    format!("{prefix}{n}")
                }
            };
            Object {
                value: key,
                kind: "entity",
                lang: None,
                datatype: None,
            }
        }
        "string" => literal(
            v.as_str()
                .ok_or("string value is not a string")?
                .to_string(),
        ),
        "monolingualtext" => {
            let lang = str_field(v, "language")?;
            if !langs.iter().any(|l| l == lang) {
                return Ok(None);
            }
            Object {
                lang: Some(lang.to_string()),
                ..literal(str_field(v, "text")?.to_string())
            }
        }
        "quantity" => {
            let amount = str_field(v, "amount")?;
            let value = match v.get("unit").and_then(Value::as_str) {
                None | Some("1") => amount.to_string(),
                Some(unit) => format!("{amount} {}", unit.rsplit('/').next().unwrap_or(unit)),
            };
            Object {
                datatype: Some("quantity"),
                ..literal(value)
            }
        }
        "time" => Object {
            datatype: Some("time"),
            ..literal(str_field(v, "time")?.to_string())
        },
        "globecoordinate" => {
            let lat = number_field(v, "latitude")?;
            let lon = number_field(v, "longitude")?;
            literal(format!("{lat},{lon}"))
        }
        other => return Err(format!("unsupported datavalue type {other}")),
    };
    Ok(Some(obj))
}

/// The time of a `P585` (point in time) or else `P580` (start time) qualifier.
fn qualifier_time(statement: &Value) -> Option<String> {
    let q = statement.get("qualifiers")?;
    ["P585", "P580"].iter().find_map(|p| {
        q.get(p)?.as_array()?.iter().find_map(|snak| {
            if snak.get("snaktype")?.as_str()? != "value" {
                return None;
            }
            let dv = snak.get("datavalue")?;
            if dv.get("type")?.as_str()? != "time" {
                return None;
            }
            dv.get("value")?.get("time")?.as_str().map(str::to_string)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn langs(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn objects_of_each_value_type() {
        let en = langs(&["en"]);
        let o = |v: Value| object_of(Some(&v), &en).unwrap().unwrap();
        let e = o(
            json!({"type":"wikibase-entityid","value":{"entity-type":"item","numeric-id":5,"id":"Q5"}}),
        );
        assert_eq!((e.value.as_str(), e.kind), ("Q5", "entity"));
        let e = o(
            json!({"type":"wikibase-entityid","value":{"entity-type":"property","numeric-id":31}}),
        );
        assert_eq!(e.value, "P31");
        assert_eq!(
            o(json!({"type":"string","value":"abc"})),
            literal("abc".into())
        );
        let m = o(json!({"type":"monolingualtext","value":{"text":"Hi","language":"en"}}));
        assert_eq!((m.value.as_str(), m.lang.as_deref()), ("Hi", Some("en")));
        assert_eq!(
            object_of(
                Some(&json!({"type":"monolingualtext","value":{"text":"Salut","language":"fr"}})),
                &en
            ),
            Ok(None)
        );
        let q = o(
            json!({"type":"quantity","value":{"amount":"+5","unit":"http://www.wikidata.org/entity/Q11573"}}),
        );
        assert_eq!(
            (q.value.as_str(), q.datatype),
            ("+5 Q11573", Some("quantity"))
        );
        let q = o(json!({"type":"quantity","value":{"amount":"+42","unit":"1"}}));
        assert_eq!(q.value, "+42");
        let t = o(json!({"type":"time","value":{"time":"+1952-03-11T00:00:00Z","precision":11}}));
        assert_eq!(
            (t.value.as_str(), t.datatype),
            ("+1952-03-11T00:00:00Z", Some("time"))
        );
        let g = o(
            json!({"type":"globecoordinate","value":{"latitude":55.953,"longitude":-3.189,"precision":0.001}}),
        );
        assert_eq!(g.value, "55.953,-3.189");
        assert!(object_of(Some(&json!({"type":"musical-thing","value":1})), &en).is_err());
        assert!(object_of(Some(&json!({"type":"quantity","value":{}})), &en).is_err());
        assert!(object_of(None, &en).is_err());
    }

    #[test]
    fn qualifier_times_prefer_point_in_time() {
        let t =
            |s: &str| json!({"snaktype":"value","datavalue":{"type":"time","value":{"time":s}}});
        let st = json!({"qualifiers":{"P580":[t("+2000")],"P585":[t("+2001")]}});
        assert_eq!(qualifier_time(&st).as_deref(), Some("+2001"));
        let st = json!({"qualifiers":{"P580":[t("+2000")]}});
        assert_eq!(qualifier_time(&st).as_deref(), Some("+2000"));
        assert_eq!(qualifier_time(&json!({})), None);
    }
}
