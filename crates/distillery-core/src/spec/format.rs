//! The input formats the readers understand, by name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Input formats the readers understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Format {
    #[serde(rename = "mediawiki")]
    MediaWiki,
    #[serde(rename = "freebase")]
    Freebase,
    #[serde(rename = "wikidata")]
    Wikidata,
    #[serde(rename = "fb15k")]
    Fb15k,
    #[serde(rename = "metaqa-kb")]
    MetaQaKb,
    #[serde(rename = "hotpotqa")]
    HotpotQa,
    #[serde(rename = "musique")]
    Musique,
    #[serde(rename = "2wiki", alias = "2wikimultihopqa")]
    TwoWiki,
    #[serde(rename = "hybridqa")]
    HybridQa,
    #[serde(rename = "tatqa")]
    TatQa,
    #[serde(rename = "metaqa")]
    MetaQa,
    #[serde(rename = "cwq")]
    Cwq,
    #[serde(rename = "simpleqa")]
    SimpleQa,
    #[serde(rename = "webquestions")]
    WebQuestions,
    #[serde(rename = "webqsp")]
    WebQsp,
    #[serde(rename = "qald")]
    Qald,
    #[serde(rename = "hotpotadv")]
    HotpotAdv,
    #[serde(rename = "zeroshot-re")]
    ZeroShotRe,
    /// WikiOFGraph text-to-triples pairs.
    #[serde(rename = "wikiofgraph")]
    WikiOfGraph,
    #[serde(rename = "commonsenseqa")]
    CommonsenseQa,
    #[serde(rename = "nq-open")]
    NqOpen,
    /// Page deletions, restores and moves: a MediaWiki logging dump, or a list of deleted
    /// pages.
    #[serde(rename = "mediawiki-log")]
    MediaWikiLog,
}

impl Format {
    pub const ALL: [Format; 22] = [
        Format::MediaWiki,
        Format::Freebase,
        Format::Wikidata,
        Format::Fb15k,
        Format::MetaQaKb,
        Format::HotpotQa,
        Format::Musique,
        Format::TwoWiki,
        Format::HybridQa,
        Format::TatQa,
        Format::MetaQa,
        Format::Cwq,
        Format::SimpleQa,
        Format::WebQuestions,
        Format::WebQsp,
        Format::Qald,
        Format::HotpotAdv,
        Format::ZeroShotRe,
        Format::WikiOfGraph,
        Format::CommonsenseQa,
        Format::NqOpen,
        Format::MediaWikiLog,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::MediaWiki => "mediawiki",
            Format::Freebase => "freebase",
            Format::Wikidata => "wikidata",
            Format::Fb15k => "fb15k",
            Format::MetaQaKb => "metaqa-kb",
            Format::HotpotQa => "hotpotqa",
            Format::Musique => "musique",
            Format::TwoWiki => "2wiki",
            Format::HybridQa => "hybridqa",
            Format::TatQa => "tatqa",
            Format::MetaQa => "metaqa",
            Format::Cwq => "cwq",
            Format::SimpleQa => "simpleqa",
            Format::WebQuestions => "webquestions",
            Format::WebQsp => "webqsp",
            Format::Qald => "qald",
            Format::HotpotAdv => "hotpotadv",
            Format::ZeroShotRe => "zeroshot-re",
            Format::WikiOfGraph => "wikiofgraph",
            Format::CommonsenseQa => "commonsenseqa",
            Format::NqOpen => "nq-open",
            Format::MediaWikiLog => "mediawiki-log",
        }
    }

    /// The format of a name, or of an alias: `2wikimultihopqa` is `2wiki`.
    pub fn from_name(s: &str) -> Option<Format> {
        match s {
            "2wikimultihopqa" => Some(Format::TwoWiki),
            _ => Format::ALL.into_iter().find(|f| f.name() == s),
        }
    }

    /// Whether the format yields questions (a QA dataset) rather than a corpus or a KB.
    pub fn is_qa(self) -> bool {
        matches!(
            self,
            Format::HotpotQa
                | Format::Musique
                | Format::TwoWiki
                | Format::HybridQa
                | Format::TatQa
                | Format::MetaQa
                | Format::Cwq
                | Format::SimpleQa
                | Format::WebQuestions
                | Format::WebQsp
                | Format::Qald
                | Format::HotpotAdv
                | Format::ZeroShotRe
                | Format::CommonsenseQa
                | Format::NqOpen
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
