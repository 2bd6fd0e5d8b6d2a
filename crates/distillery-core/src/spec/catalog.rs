//! What the executor's stage registry tells the pipeline checks ([`StageCatalog`]), and the
//! view of the pipeline a stage's option check gets ([`StageCheck`]).

use serde::de::DeserializeOwned;

use super::collect::Collector;
use super::locate::{PathSeg, key};
use super::{InputSpec, LlmSpec, StageOptions};

/// What the executor's stage registry tells the pipeline checks: the stage kinds this build
/// knows, which of them call the `[llm]` server, and each kind's option checks. The registry
/// lives in `distillery-exec` (one line per stage module), so adding a stage changes nothing
/// here.
pub trait StageCatalog {
    /// Every stage kind, in registry order.
    fn kinds(&self) -> Vec<&'static str>;
    /// Whether a stage of `kind` calls the `[llm]` server.
    fn uses_llm(&self, kind: &str) -> bool;
    /// Deserializes and checks the options of one stage of `kind` (a kind [`Self::kinds`]
    /// lists), reporting every problem through `cx`; `None` when they do not deserialize.
    fn check(&self, kind: &str, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions>;
}

/// The view of the pipeline a stage's option check gets, and where it reports problems
/// (at the stage's `options` keys, with their lines).
pub struct StageCheck<'c, 'l> {
    pub(super) c: &'c mut Collector<'l>,
    pub(super) index: usize,
    pub(super) options: toml::Value,
    /// Every input of the pipeline that parsed.
    pub inputs: &'c [InputSpec],
    /// The inputs this stage reads.
    pub stage_inputs: Vec<&'c InputSpec>,
    /// The `[llm]` section, when it parsed.
    pub llm: Option<&'c LlmSpec>,
    /// Every `[[stages]]` table of the file as written, for checks that relate two stages.
    pub stages: &'c [toml::Value],
}

impl StageCheck<'_, '_> {
    /// Index of the stage in `stages`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The `kind` of the stage named `name` (its `name`, else its kind) listed before this
    /// one, as written; `None` when no earlier stage has that name.
    pub fn earlier_kind(&self, name: &str) -> Option<&str> {
        fn kind_of(v: &toml::Value) -> Option<&str> {
            v.get("kind").and_then(toml::Value::as_str)
        }
        self.stages[..self.index.min(self.stages.len())]
            .iter()
            .find(|v| {
                v.get("name")
                    .and_then(toml::Value::as_str)
                    .or_else(|| kind_of(v))
                    == Some(name)
            })
            .and_then(|v| kind_of(v))
    }

    /// The stage's options as `T`, every bad key reported at its line.
    pub fn options<T: DeserializeOwned>(&mut self) -> Option<T> {
        let base = [key("stages"), PathSeg::Index(self.index), key("options")];
        self.c.de(&base, self.options.clone())
    }

    /// [`StageCheck::options`] for an options type that flattens option groups, whose
    /// unknown-field errors serde reports without the fields it expected: `known` (the
    /// options' names) are named instead.
    pub fn options_of<T: DeserializeOwned>(&mut self, known: &[String]) -> Option<T> {
        let from = self.c.errors_len();
        let o = self.options::<T>();
        self.c.name_expected(from, known);
        o
    }

    /// Reports a problem of the option `option` of this stage (`""`: the options table).
    pub fn error(&mut self, option: &str, message: impl Into<String>) {
        self.error_in(self.index, option, message);
    }

    /// Reports a problem of the option `option` of stage `index` (`""`: that stage itself).
    pub fn error_in(&mut self, index: usize, option: &str, message: impl Into<String>) {
        let mut path = vec![key("stages"), PathSeg::Index(index)];
        if !option.is_empty() {
            path.push(key("options"));
            path.push(key(option));
        }
        self.c.push(path, message);
    }
}
