//! Options of the `hseq` stage, here because the linearizers read them (the label stage's
//! question sequences use them too).

use serde::{Deserialize, Serialize};

fn yes() -> bool {
    true
}

/// `hseq` stage options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HseqOptions {
    /// Also emit one `table_cell` segment per cell (rows alone already make tables
    /// reversible). Default false.
    #[serde(default)]
    pub cells: bool,
    /// Also emit `section` segments for documents with headings. Default true.
    #[serde(default = "yes")]
    pub sections: bool,
    /// Decode every source back from its segments during the run and count round trips in
    /// the summary. Default true.
    #[serde(default = "yes")]
    pub verify: bool,
}

impl Default for HseqOptions {
    fn default() -> Self {
        HseqOptions {
            cells: false,
            sections: true,
            verify: true,
        }
    }
}
