//! Prompt templates, token counting and budget-fitted rendering.
//!
//! **Templates.** Each task has a system and a user template ([`Template`]), the iteration
//! agent an instruction template too; the built-in
//! ones live in `crates/distillery-label/templates/` (compiled in). [`Prompts::load`] with the
//! `templates` option replaces any of them with a file of the same name from that directory:
//!
//! | file | placeholders (required ones in bold) |
//! |---|---|
//! | `iteration_system.txt` | `{top_k}` |
//! | `iteration_instruction.txt` | `{top_k}` |
//! | `iteration_user.txt` | `{instruction}` (the rendered instruction), **`{question}`**, `{guidance}`, `{selected}`, **`{candidates}`**, `{top_k}` |
//! | `hanrag_router_system.txt` | — |
//! | `hanrag_router_user.txt` | **`{question}`** |
//! | `hanrag_refiner_system.txt` | — |
//! | `hanrag_refiner_user.txt` | **`{question}`**, **`{thought}`** |
//! | `hanrag_ending_system.txt` | — |
//! | `hanrag_ending_user.txt` | **`{question}`**, **`{thought}`** |
//! | `hanrag_decomposer_system.txt` | — |
//! | `hanrag_decomposer_user.txt` | **`{question}`** |
//! | `head_system.txt` | — |
//! | `head_user.txt` | **`{question}`**, `{guidance}`, **`{evidence}`** |
//!
//! Placeholders are filled in one pass (text inserted for one placeholder is never scanned
//! again, and any other `{...}` is left as written, so templates may hold JSON). Trailing
//! whitespace of a template is trimmed. An empty system template means the samples have no
//! system message (useful to reproduce a paper's single-prompt wording in the user turn). A
//! user template missing a required placeholder is an error.
//!
//! **The iteration instruction** is written once per sample: in the user turn's
//! `### Instruction` section (the HSEQ prompt layout), from `iteration_instruction.txt`. The
//! built-in system message only names the role and points at that section, so the prompt
//! does not carry the instruction twice (the instruction is about 185 tokens by the
//! character estimate, some 7% of a typical iteration prompt). A directory that replaces
//! `iteration_system.txt` or `iteration_user.txt` but has no `iteration_instruction.txt` keeps
//! the templates as they were before version 2, version hash included: the system message is
//! its `iteration_system.txt` or else the built-in instruction, and `{instruction}` is that
//! system text, so a user template written then without `{instruction}` still has the
//! instruction in the system message. A directory meant for the version 2 layout that
//! replaces either file therefore also needs an `iteration_instruction.txt` (a copy of the
//! built-in one will do). A user template without `{instruction}` next to an instruction file
//! shows no instruction anywhere: the instruction file is only rendered into `{instruction}`.
//!
//! Each task's templates have an id and a version, recorded in every sample:
//! `distillery:<task>` / [`BUILTIN_VERSION`] for the built-ins, `custom:<task>` and the first
//! 12 hex digits of SHA-1 over the system and user text (and the iteration instruction, except
//! for a directory written before version 2) when any of the task's files was replaced. Tasks
//! are `hseq_iteration`, `hanrag_router`, `hanrag_refiner`, `hanrag_ending`, `hseq_head`,
//! `hanrag_decomposer`.
//!
//! **Token counting.** [`TokenCounter`] counts with a Hugging Face `tokenizer.json`
//! (the `tokenizer` option, loaded with the `tokenizers` crate, no special tokens added), or,
//! without one, estimates ⌈chars / chars_per_token⌉ (Unicode scalar values; default 4 chars a
//! token, the usual rate of BPE tokenizers on English prose; a non-positive rate counts as 4).
//! Chat-template overhead is not counted.
//!
//! **Budget fitting** ([`Prompts::render_iteration`]). Candidate and selected lines read
//! `- [seg_id] snippet`, the snippet being the segment text with whitespace collapsed and cut
//! to `snippet_chars` at a word boundary with `…`. The prompt (system + user tokens) must fit
//! `max_tokens`. While it does not, in this order: (1) snippets are halved once (not below 32
//! chars); (2) candidate lines that are not targets are dropped from the end of the window,
//! one at a time; (3) snippets are halved again and again, down to 16 chars. Target segments
//! (the step's picks) and Selected-So-Far lines are never dropped, nor are the question or the
//! guidance shortened; a prompt that still does not fit is kept and flagged `over_budget`.

use foldhash::HashMap;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use distillery_core::id::sha1_hex;
use distillery_hseq::truncate_snippet;

use crate::LabelError;

/// Version of the built-in templates; bump when their wording changes. Version 2: the
/// iteration instruction moved out of the system message (see the module docs).
pub const BUILTIN_VERSION: &str = "2";

/// Snippet floor of fitting phase (1).
const FIRST_SHRINK_FLOOR: u32 = 32;
/// Snippet floor of fitting phase (3).
const MIN_SNIPPET: u32 = 16;

/// What an empty Selected-So-Far or Candidate-Window list renders as.
pub const EMPTY_LIST: &str = "(none)";

/// A task's system and user templates with their lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub id: String,
    pub version: String,
    pub system: String,
    /// What `{instruction}` renders from (empty for tasks without one).
    pub instruction: String,
    pub user: String,
}

/// All templates of the label stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompts {
    pub iteration: Template,
    pub router: Template,
    pub refiner: Template,
    pub ending: Template,
    /// The HSEQ-H head agent's answer prompt ([`crate::head`]).
    pub head: Template,
    /// HANRAG's decomposer `<Q, q1 … qn>` ([`crate::hanrag::compound_samples`]).
    pub decomposer: Template,
}

struct Spec {
    task: &'static str,
    stem: &'static str,
    system: &'static str,
    /// The built-in `{instruction}` template, for tasks that have one.
    instruction: Option<&'static str>,
    user: &'static str,
    required: &'static [&'static str],
}

const SPECS: [Spec; 6] = [
    Spec {
        task: "hseq_iteration",
        stem: "iteration",
        system: include_str!("../templates/iteration_system.txt"),
        instruction: Some(include_str!("../templates/iteration_instruction.txt")),
        user: include_str!("../templates/iteration_user.txt"),
        required: &["question", "candidates"],
    },
    Spec {
        task: "hanrag_router",
        stem: "hanrag_router",
        system: include_str!("../templates/hanrag_router_system.txt"),
        instruction: None,
        user: include_str!("../templates/hanrag_router_user.txt"),
        required: &["question"],
    },
    Spec {
        task: "hanrag_refiner",
        stem: "hanrag_refiner",
        system: include_str!("../templates/hanrag_refiner_system.txt"),
        instruction: None,
        user: include_str!("../templates/hanrag_refiner_user.txt"),
        required: &["question", "thought"],
    },
    Spec {
        task: "hanrag_ending",
        stem: "hanrag_ending",
        system: include_str!("../templates/hanrag_ending_system.txt"),
        instruction: None,
        user: include_str!("../templates/hanrag_ending_user.txt"),
        required: &["question", "thought"],
    },
    Spec {
        task: "hseq_head",
        stem: "head",
        system: include_str!("../templates/head_system.txt"),
        instruction: None,
        user: include_str!("../templates/head_user.txt"),
        required: &["question", "evidence"],
    },
    Spec {
        task: "hanrag_decomposer",
        stem: "hanrag_decomposer",
        system: include_str!("../templates/hanrag_decomposer_system.txt"),
        instruction: None,
        user: include_str!("../templates/hanrag_decomposer_user.txt"),
        required: &["question"],
    },
];

impl Prompts {
    /// The built-in templates.
    pub fn builtin() -> Prompts {
        Prompts::load(None).expect("built-in templates are valid")
    }

    /// The built-in templates, with those that `dir` has a file for replaced (file names in
    /// the module docs). A missing `dir` (the path) is an error; missing files are not.
    pub fn load(dir: Option<&str>) -> Result<Prompts, LabelError> {
        if let Some(d) = dir
            && !Path::new(d).is_dir()
        {
            return Err(LabelError::Template {
                path: d.to_string(),
                message: "template directory not found".into(),
            });
        }
        let mut out = Vec::with_capacity(SPECS.len());
        for spec in &SPECS {
            out.push(load_one(spec, dir)?);
        }
        let mut it = out.into_iter();
        let mut next = || it.next().expect("six templates");
        Ok(Prompts {
            iteration: next(),
            router: next(),
            refiner: next(),
            ending: next(),
            head: next(),
            decomposer: next(),
        })
    }

    /// Renders an iteration-agent prompt within the token budget (see the module docs).
    pub fn render_iteration(
        &self,
        input: &IterationInput<'_>,
        counter: &TokenCounter,
        snippet_chars: u32,
        max_tokens: u32,
    ) -> RenderedIteration {
        self.render_iteration_cached(input, counter, snippet_chars, max_tokens, &LineCache::new())
    }

    /// [`Prompts::render_iteration`] with the prompt lines taken from (and added to) `cache`:
    /// the steps of one trajectory show mostly the same segments, so a question's steps share
    /// one cache. The result is the same as without a cache.
    pub fn render_iteration_cached<'a>(
        &self,
        input: &IterationInput<'a>,
        counter: &TokenCounter,
        snippet_chars: u32,
        max_tokens: u32,
        cache: &LineCache<'a>,
    ) -> RenderedIteration {
        let top_k = input.top_k.to_string();
        let system = fill(&self.iteration.system, &[("top_k", &top_k)]);
        let instruction = fill(&self.iteration.instruction, &[("top_k", &top_k)]);
        let system_tokens = counter.count(&system);
        let mut shown: Vec<usize> = (0..input.window.len()).collect();
        let mut snippet = snippet_chars.max(1);
        let user_of = |selected: &str, candidates: &str| {
            fill(
                &self.iteration.user,
                &[
                    ("instruction", &instruction),
                    ("question", input.question),
                    ("guidance", input.guidance),
                    ("selected", selected),
                    ("candidates", candidates),
                    ("top_k", &top_k),
                ],
            )
        };
        // The prompt lines at one snippet length, formatted once per length.
        let format = |snippet: u32| -> (String, Vec<Rc<str>>) {
            let selected = join_lines(input.selected.iter().map(|s| cache.line(*s, snippet)));
            let window = input
                .window
                .iter()
                .map(|s| cache.line(*s, snippet))
                .collect();
            (selected, window)
        };
        let render = |shown: &[usize], (selected, window): &(String, Vec<Rc<str>>)| {
            let candidates = join_lines(shown.iter().map(|&i| &*window[i]));
            let user = user_of(selected, &candidates);
            let tokens = system_tokens.saturating_add(counter.count(&user));
            (user, tokens)
        };
        let done = |user: String, tokens: u32, shown: Vec<usize>, snippet: u32| RenderedIteration {
            system: system.clone(),
            user,
            prompt_tokens: tokens,
            shown,
            snippet_chars: snippet,
            over_budget: tokens > max_tokens,
        };
        let mut lines = format(snippet);
        let (mut user, mut tokens) = render(&shown, &lines);
        if tokens <= max_tokens {
            return done(user, tokens, shown, snippet);
        }
        // (1) One halving of the snippets.
        let first = (snippet / 2).max(FIRST_SHRINK_FLOOR);
        if first < snippet {
            snippet = first;
            lines = format(snippet);
            (user, tokens) = render(&shown, &lines);
            if tokens <= max_tokens {
                return done(user, tokens, shown, snippet);
            }
        }
        // (2) Drop trailing non-target candidates, one at a time. With the character estimate
        // the user turn's length is known without rendering: the template filled with no
        // candidates plus the candidate list's length once per `{candidates}` placeholder.
        let estimate = (!counter.has_tokenizer()).then(|| {
            let empty = user_of(&lines.0, "").chars().count();
            let per_list = user_of(&lines.0, "x").chars().count() - empty;
            let line_chars: Vec<usize> = lines.1.iter().map(|l| l.chars().count()).collect();
            (empty, per_list, line_chars)
        });
        while let Some(pos) = shown
            .iter()
            .rposition(|&i| !input.keep.get(i).copied().unwrap_or(false))
        {
            shown.remove(pos);
            if let Some((empty, per_list, line_chars)) = &estimate {
                let list = if shown.is_empty() {
                    EMPTY_LIST.chars().count()
                } else {
                    shown.iter().map(|&i| line_chars[i]).sum::<usize>() + shown.len() - 1
                };
                let estimated =
                    system_tokens.saturating_add(counter.count_chars(empty + per_list * list));
                if estimated > max_tokens && shown.iter().any(|&i| !input.keep[i]) {
                    continue;
                }
            }
            (user, tokens) = render(&shown, &lines);
            if tokens <= max_tokens {
                return done(user, tokens, shown, snippet);
            }
        }
        // (3) Halve the snippets down to the floor.
        while snippet > MIN_SNIPPET {
            snippet = (snippet / 2).max(MIN_SNIPPET);
            lines = format(snippet);
            (user, tokens) = render(&shown, &lines);
            if tokens <= max_tokens {
                break;
            }
        }
        done(user, tokens, shown, snippet)
    }

    /// Renders the head agent's prompt: `(system, user)`, the system `None` when its
    /// template is empty.
    pub fn render_head(
        &self,
        question: &str,
        guidance: &str,
        evidence: &str,
    ) -> (Option<String>, String) {
        let vars = [
            ("question", question),
            ("guidance", guidance),
            ("evidence", evidence),
        ];
        let system = fill(&self.head.system, &vars);
        let user = fill(&self.head.user, &vars);
        ((!system.is_empty()).then_some(system), user)
    }

    /// Renders a HANRAG task's messages: `(system, user)`, the system `None` when its template
    /// is empty.
    pub fn render_hanrag(
        template: &Template,
        question: &str,
        thought: &str,
    ) -> (Option<String>, String) {
        let vars = [("question", question), ("thought", thought)];
        let system = fill(&template.system, &vars);
        let user = fill(&template.user, &vars);
        ((!system.is_empty()).then_some(system), user)
    }
}

fn load_one(spec: &Spec, dir: Option<&str>) -> Result<Template, LabelError> {
    // Each file: its text and whether `dir` replaced it.
    let read = |suffix: &str, builtin: &str| -> Result<(String, bool), LabelError> {
        if let Some(d) = dir {
            let p = Path::new(d).join(format!("{}_{suffix}.txt", spec.stem));
            if p.exists() {
                return std::fs::read_to_string(&p)
                    .map(|s| (s.trim_end().to_string(), true))
                    .map_err(|e| LabelError::Template {
                        path: p.display().to_string(),
                        message: e.to_string(),
                    });
            }
        }
        Ok((builtin.trim_end().to_string(), false))
    };
    let (mut system, custom_system) = read("system", spec.system)?;
    let (user, custom_user) = read("user", spec.user)?;
    let (mut instruction, mut custom_instruction, mut legacy) = (String::new(), false, false);
    if let Some(builtin) = spec.instruction {
        (instruction, custom_instruction) = read("instruction", builtin)?;
        if !custom_instruction && (custom_system || custom_user) {
            // A directory written before version 2 (see the module docs): the system message
            // holds the instruction and `{instruction}` is the system text.
            if !custom_system {
                system = instruction.clone();
            }
            instruction = system.clone();
            legacy = true;
        }
    }
    let custom = custom_system || custom_user || custom_instruction;
    for r in spec.required {
        if !user.contains(&format!("{{{r}}}")) {
            return Err(LabelError::Template {
                path: format!("{}_user.txt", spec.stem),
                message: format!("the template lacks the placeholder {{{r}}}"),
            });
        }
    }
    let (id, version) = if custom {
        // Tasks without an instruction template, and directories written before there was
        // one, hash as they did then.
        let h = if spec.instruction.is_none() || legacy {
            sha1_hex(&format!("{system}\u{1f}{user}"))
        } else {
            sha1_hex(&format!("{system}\u{1f}{user}\u{1f}{instruction}"))
        };
        (format!("custom:{}", spec.task), h[..12].to_string())
    } else {
        (
            format!("distillery:{}", spec.task),
            BUILTIN_VERSION.to_string(),
        )
    };
    Ok(Template {
        id,
        version,
        system,
        instruction,
        user,
    })
}

/// Fills `{name}` placeholders in one pass; unknown `{...}` stay as written.
pub fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + vars.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let hit = after.find('}').and_then(|close| {
            let name = &after[..close];
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (close, *v))
        });
        match hit {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A segment as a prompt line shows it: its id and its full text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLine<'a> {
    pub id: &'a str,
    pub content: &'a str,
}

/// The inputs of one iteration prompt.
#[derive(Debug, Clone)]
pub struct IterationInput<'a> {
    pub question: &'a str,
    pub guidance: &'a str,
    pub top_k: u32,
    /// Selected-So-Far, in selection order (never dropped).
    pub selected: Vec<SegmentLine<'a>>,
    /// The candidate window, in stream order.
    pub window: Vec<SegmentLine<'a>>,
    /// Per window entry: true for a target segment (never dropped).
    pub keep: Vec<bool>,
}

/// A rendered iteration prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedIteration {
    pub system: String,
    pub user: String,
    /// System + user tokens.
    pub prompt_tokens: u32,
    /// Positions (into the input window) of the candidates shown, in order.
    pub shown: Vec<usize>,
    /// The snippet length used.
    pub snippet_chars: u32,
    /// True when even the smallest rendering exceeds the budget.
    pub over_budget: bool,
}

/// The display form of a segment's text: whitespace collapsed, cut to `budget` chars at a
/// word boundary with `…`.
pub fn snippet(content: &str, budget: u32) -> String {
    let mut out = String::new();
    push_snippet(&mut out, content, budget);
    out
}

/// The six chars `char::is_whitespace` accepts below 0x80, as a bit set over the byte.
fn is_ascii_ws(b: u8) -> bool {
    const WS: u64 = 1 << b'\t' | 1 << b'\n' | 1 << 0x0b | 1 << 0x0c | 1 << b'\r' | 1 << b' ';
    b <= b' ' && WS >> b & 1 == 1
}

/// A bound below which `b[..scan]` is flat text (no control char, no space at the start or
/// next to another space), found eight bytes at a time; the exact first irregular byte is
/// at or after it. The last byte of `b` is left to the byte loop (a space there is trailing).
fn flat_words(b: &[u8], scan: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let end = scan.min(b.len().saturating_sub(1));
    if b.first() == Some(&b' ') {
        return 0;
    }
    let mut i = 0;
    while i + 8 <= end {
        let x = u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"));
        // Exact per byte: the high bit of each byte that is a space.
        let v = x ^ (ONES * u64::from(b' '));
        let spaces = !(((v & LOW7) + LOW7) | v | LOW7);
        // Some byte below 0x20 (exact as an existence test).
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
        let double = spaces & (spaces >> 8) != 0 || (b[i] == b' ' && i > 0 && b[i - 1] == b' ');
        if control || double {
            break;
        }
        i += 8;
    }
    i
}

/// Appends [`snippet`]`(content, budget)` to `out`. ASCII text (most of it) is flattened
/// straight into `out` word by word and cut there, without the intermediate strings.
fn push_snippet(out: &mut String, content: &str, budget: u32) {
    // The cut depends only on the first `budget` characters and on whether there are more:
    // collapse no further than one character past the budget.
    let budget = budget as usize;
    if !content.is_ascii() {
        let mut flat = String::with_capacity(content.len().min(budget.saturating_mul(4) + 64));
        let mut chars = 0usize;
        for w in content.split_whitespace() {
            if chars > budget {
                break;
            }
            if !flat.is_empty() {
                flat.push(' ');
                chars += 1;
            }
            flat.push_str(w);
            chars += w.chars().count();
        }
        out.push_str(&truncate_snippet(&flat, budget).0);
        return;
    }
    // An ASCII char is one byte, so chars are bytes here.
    let start = out.len();
    let b = content.as_bytes();
    out.reserve(b.len().min(budget + 64));
    // Most text is already flat: words separated by single spaces. Its flat prefix (up to
    // the first whitespace that flattening would change) is copied in one go.
    let scan = b.len().min(budget + 2);
    let k = (flat_words(b, scan)..scan)
        .find(|&i| {
            let c = b[i];
            if c == b' ' {
                i == 0 || b[i - 1] == b' ' || i + 1 == b.len()
            } else {
                is_ascii_ws(c)
            }
        })
        .unwrap_or(scan);
    let mut i = if k >= budget + 2 {
        // The first budget + 1 chars are flat and a word follows them: the snippet is cut.
        out.push_str(&content[..=budget]);
        b.len()
    } else {
        // A space before the irregular whitespace is left to the word loop.
        let flat = if k > 0 && b[k - 1] == b' ' { k - 1 } else { k };
        out.push_str(&content[..flat]);
        k
    };
    while i < b.len() {
        if is_ascii_ws(b[i]) {
            i += 1;
            continue;
        }
        let flat = out.len() - start;
        if flat > budget {
            break;
        }
        let end = b[i..]
            .iter()
            .position(|&c| is_ascii_ws(c))
            .map_or(b.len(), |n| i + n);
        if flat > 0 {
            out.push(' ');
        }
        out.push_str(&content[i..end]);
        i = end;
    }
    // `truncate_snippet` on the flattened text (tested equal).
    let flat = out.len() - start;
    if flat <= budget {
        return;
    }
    if budget == 0 {
        out.truncate(start);
        return;
    }
    let keep = budget - 1;
    let prefix = &out.as_bytes()[start..start + keep];
    let cut = prefix
        .iter()
        .rposition(|&c| c == b' ')
        .filter(|&i| i * 2 >= keep)
        .unwrap_or(keep);
    let kept = prefix[..cut].trim_ascii_end().len();
    out.truncate(start + kept);
    out.push('…');
}

/// One prompt line: `- [id] snippet`.
fn line(s: SegmentLine<'_>, budget: u32) -> String {
    let mut out = String::with_capacity(s.id.len() + 6 + s.content.len().min(budget as usize + 8));
    out.push_str("- [");
    out.push_str(s.id);
    out.push_str("] ");
    push_snippet(&mut out, s.content, budget);
    out
}

/// Prompt lines already rendered, by segment id and snippet length. Segment ids identify a
/// segment within one question's S_h; a cache must not outlive the question it serves.
#[derive(Debug, Default)]
pub struct LineCache<'a> {
    lines: RefCell<HashMap<(&'a str, u32), Rc<str>>>,
}

impl<'a> LineCache<'a> {
    pub fn new() -> LineCache<'a> {
        LineCache::default()
    }

    /// The line of `s` at `budget`, rendered on first use.
    fn line(&self, s: SegmentLine<'a>, budget: u32) -> Rc<str> {
        self.lines
            .borrow_mut()
            .entry((s.id, budget))
            .or_insert_with(|| line(s, budget).into())
            .clone()
    }
}

/// Lines joined by newlines, or [`EMPTY_LIST`] when there are none.
fn join_lines<S: AsRef<str>>(lines: impl Iterator<Item = S>) -> String {
    let mut out = String::new();
    for l in lines {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(l.as_ref());
    }
    if out.is_empty() {
        EMPTY_LIST.to_string()
    } else {
        out
    }
}

/// Counts tokens with a Hugging Face tokenizer, or estimates them from characters.
pub struct TokenCounter {
    tokenizer: Option<Box<tokenizers::Tokenizer>>,
    chars_per_token: f64,
    name: String,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("name", &self.name)
            .field("chars_per_token", &self.chars_per_token)
            .finish()
    }
}

impl TokenCounter {
    /// A counter for `tokenizer_json` (a `tokenizer.json` path), else the character estimate
    /// at `chars_per_token`.
    pub fn new(
        tokenizer_json: Option<&str>,
        chars_per_token: f64,
    ) -> Result<TokenCounter, LabelError> {
        let cpt = if chars_per_token.is_finite() && chars_per_token > 0.0 {
            chars_per_token
        } else {
            4.0
        };
        let Some(path) = tokenizer_json else {
            return Ok(TokenCounter {
                tokenizer: None,
                chars_per_token: cpt,
                name: format!("chars/{cpt}"),
            });
        };
        let tok = tokenizers::Tokenizer::from_file(path).map_err(|e| LabelError::Tokenizer {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        Ok(TokenCounter {
            tokenizer: Some(Box::new(tok)),
            chars_per_token: cpt,
            name: format!("tokenizer:{path}"),
        })
    }

    /// The character-estimate counter.
    pub fn chars(chars_per_token: f64) -> TokenCounter {
        TokenCounter::new(None, chars_per_token).expect("no file to load")
    }

    /// True when a tokenizer file counts the tokens.
    pub fn has_tokenizer(&self) -> bool {
        self.tokenizer.is_some()
    }

    /// What counts: `tokenizer:<path>` or `chars/<rate>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Tokens of `text` (0 for an empty text). A text the tokenizer fails on is estimated.
    pub fn count(&self, text: &str) -> u32 {
        if text.is_empty() {
            return 0;
        }
        if let Some(t) = &self.tokenizer
            && let Ok(enc) = t.encode(text, false)
        {
            return u32::try_from(enc.len()).unwrap_or(u32::MAX);
        }
        self.count_chars(text.chars().count())
    }

    /// The character estimate for a text of `chars` characters (what [`TokenCounter::count`]
    /// returns without a tokenizer).
    pub fn count_chars(&self, chars: usize) -> u32 {
        (chars as f64 / self.chars_per_token).ceil() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<TokenCounter>();
        send_sync::<Prompts>();
    }

    #[test]
    fn fill_is_single_pass() {
        let out = fill("a {x} b {y} {z} {", &[("x", "{y}"), ("y", "Y")]);
        assert_eq!(out, "a {y} b Y {z} {");
    }

    #[test]
    fn builtins_have_the_markers() {
        let p = Prompts::builtin();
        for m in [
            "### Instruction",
            "### Question",
            "### Guidance",
            "### Selected-So-Far",
            "### Candidate-Window",
            "### Output (JSON)",
        ] {
            assert!(p.iteration.user.contains(m), "{m}");
        }
        assert_eq!(p.iteration.id, "distillery:hseq_iteration");
        assert_eq!(p.iteration.version, BUILTIN_VERSION);
    }

    #[test]
    fn char_estimate_rounds_up() {
        let c = TokenCounter::chars(4.0);
        assert_eq!(c.count(""), 0);
        assert_eq!(c.count("abcd"), 1);
        assert_eq!(c.count("abcde"), 2);
        assert_eq!(TokenCounter::chars(0.0).count("abcdefgh"), 2);
    }

    #[test]
    fn snippets_of_random_ascii_are_flattened_then_cut() {
        // Every offset of spaces, runs of spaces and control whitespace within and across
        // the eight-byte words of the fast path.
        let alphabet = b"abcdefgh  \t\n\x0b\x1c.";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 48) as usize;
            let text: String = (0..len)
                .map(|k| {
                    // Mostly letters and single spaces, so that whole words pass the fast path.
                    let r = x.rotate_left(k as u32 * 3) % 64;
                    char::from(
                        alphabet[if r < 40 {
                            r as usize % 8
                        } else {
                            (r as usize - 40) % 15
                        }],
                    )
                })
                .collect();
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            for budget in [0, 1, 5, 7, 8, 9, 15, 16, 17, 30, 60] {
                let want = truncate_snippet(&flat, budget as usize).0;
                assert_eq!(snippet(&text, budget), want, "{text:?} at {budget}");
            }
        }
    }

    #[test]
    fn snippets_cut_at_words() {
        assert_eq!(snippet("alpha  beta\ngamma", 100), "alpha beta gamma");
        assert_eq!(snippet("alpha beta gamma delta", 14), "alpha beta…");
        // The early stop gives what collapsing everything and cutting gives.
        // Non-ASCII and ASCII texts (the ASCII path, with every ASCII whitespace char and a
        // separator char that is not whitespace).
        for text in [
            "  Der  Große\tBär ist ein Sternbild\n des Nordhimmels, nahe dem Pol.  ",
            " The\x0bGreat\x0cBear\r\n is a\x1cconstellation\t of the northern sky. ",
            "a b c d e f g h i j k l m n o p q r s t u v w x y z",
            "Supercalifragilisticexpialidocious is  one long\tword   ",
            "",
            " \t ",
            "ab ",
            "word \n next  two   three four five six seven eight nine ten eleven twelve",
            "one two three four five six seven eight nine ten eleven twelve thirteen \n",
        ] {
            for budget in 0..80 {
                let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
                let want = truncate_snippet(&flat, budget as usize).0;
                assert_eq!(snippet(text, budget), want, "{text:?} at {budget}");
                // Appended after a prefix, as prompt lines are.
                let l = line(
                    SegmentLine {
                        id: "s 1",
                        content: text,
                    },
                    budget,
                );
                assert_eq!(l, format!("- [s 1] {want}"), "{text:?} at {budget}");
            }
        }
    }
}
