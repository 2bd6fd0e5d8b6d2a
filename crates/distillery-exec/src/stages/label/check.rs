//! The `label` stage's entry in the registry: its options ([`LabelOptions`], in
//! `distillery-label`, whose labeller reads them), their checks, its outputs and tasks.

use distillery_core::TableKind;
use distillery_core::spec::{Format, StageCheck, StageSpec};
use distillery_label::{LABEL_METHODS, LABEL_PRESETS, LabelOptions};

use super::{DATASET_INFO, LABEL_REPORT, TRAIN_JSONL, VALIDATION_JSONL};
use crate::contract::{Declared, MergeCx, Partitioning, RunCx, SideFile, Stage, StageFuture};

/// The `label` stage.
pub struct Label;

impl Stage for Label {
    type Options = LabelOptions;

    fn kind(&self) -> &'static str {
        "label"
    }

    fn check(&self, o: &mut LabelOptions, cx: &mut StageCheck<'_, '_>) {
        check_options(cx, o);
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn outputs(&self, _o: &LabelOptions, _stage: &StageSpec) -> Declared {
        Declared {
            tables: vec![TableKind::Labels, TableKind::Sft],
            files: [TRAIN_JSONL, VALIDATION_JSONL, DATASET_INFO, LABEL_REPORT]
                .map(String::from)
                .to_vec(),
        }
    }

    /// The `decontaminate` files, each pattern resolved on its own (its format is the
    /// pattern's entry in `decontaminate_formats`).
    fn resolve(&self, o: &LabelOptions, stage: &StageSpec) -> Result<Vec<SideFile>, Vec<String>> {
        crate::kit::decontam::resolve(stage, &o.split)
    }

    fn run<'a>(&'a self, o: &'a LabelOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(super::run_stage(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a LabelOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(super::merge_stage(
            cx.pipeline,
            cx.stage,
            cx.out,
            cx.dir,
            cx.shards,
        ))
    }
}

fn check_options(cx: &mut StageCheck<'_, '_>, o: &LabelOptions) {
    if o.head_supporting_ids && !o.head {
        cx.error(
            "head_supporting_ids",
            "`head_supporting_ids` shapes the head samples: set `head = true` too",
        );
    }
    for m in &o.methods {
        if !LABEL_METHODS.contains(&m.as_str()) {
            cx.error(
                "methods",
                format!(
                    "unknown method `{m}`, expected one of {}",
                    LABEL_METHODS.join(", ")
                ),
            );
        }
    }
    for (i, m) in o.methods.iter().enumerate() {
        if o.methods[..i].contains(m) {
            cx.error("methods", format!("method `{m}` is listed twice"));
        }
    }
    if o.methods.is_empty() {
        cx.error("methods", "`methods` names no method");
    }
    if o.kb.is_none()
        && let Some(i) = cx.stage_inputs.iter().find(|i| i.format == Format::MetaQa)
    {
        let message = format!(
            "input `{}` is MetaQA, whose questions are labelled from the k-hop subgraph of \
             their topic entity: set `kb` to the name of its knowledge base input \
             (metaqa-kb, freebase, wikidata or fb15k) or of a subgraph stage",
            i.name
        );
        cx.error("kb", message);
    }
    if o.verify && cx.llm.is_none() {
        cx.error(
            "verify",
            "`verify` asks the teacher to confirm each positive: add an `[llm]` section",
        );
    }
    if let Some(m) = &o.sft_method
        && !o.methods.contains(m)
    {
        cx.error("sft_method", format!("`{m}` is not one of `methods`"));
    }
    if !LABEL_PRESETS.contains(&o.preset.as_str()) {
        cx.error(
            "preset",
            format!(
                "unknown preset `{}`, expected small, medium or large",
                o.preset
            ),
        );
    }
    if !(o.sufficiency > 0.0 && o.sufficiency <= 1.0) {
        cx.error("sufficiency", "`sufficiency` must be in (0, 1]");
    }
    if o.window == Some(0) || o.max_steps == 0 {
        cx.error("window", "`window` and `max_steps` must be at least 1");
    }
    if o.chars_per_token <= 0.0 {
        cx.error("chars_per_token", "`chars_per_token` must be positive");
    }
    if o.context_memory_bytes == 0 {
        cx.error(
            "context_memory_bytes",
            "`context_memory_bytes` must be at least 1",
        );
    }
    crate::kit::decontam::check(cx, &o.split);
    if let Some(name) = &o.plans {
        let earlier = cx.earlier_kind(name) == Some("planner");
        if !earlier {
            let message = format!("`{name}` names no planner stage listed before this one");
            cx.error("plans", message);
        }
    }
    if let Some(kb) = &o.kb {
        match cx.inputs.iter().find(|i| &i.name == kb) {
            None if cx.earlier_kind(kb) == Some("subgraph") => {}
            None => cx.error(
                "kb",
                format!("`{kb}` names no input and no subgraph stage listed before this one"),
            ),
            Some(i) if i.format.is_qa() || i.format == Format::MediaWiki => {
                let message = format!("`{kb}` is a {} input, not a knowledge base", i.format);
                cx.error("kb", message)
            }
            _ => {}
        }
    }
}
