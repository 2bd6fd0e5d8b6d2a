//! Target trajectories from weak positives (HSEQ paper 000, appendix 9.2).
//!
//! [`synthesize`] turns a positive pool P (from a [`crate::positives::Method`]) into the
//! target action sequence the iteration agent is trained on. The agent sees the candidate
//! stream (non-root segments of S_h in the stream order ρ, capped at `max_segments`, less
//! the sentences that repeat their paragraph: [`crate::sft::candidate_stream`]) through
//! a window of W candidates; at each step it selects up to k segment ids from the window and
//! says whether the evidence selected so far is sufficient.
//!
//! **Window and Refresh rule.** A cursor points into the stream (initially its start).
//! - The window of a step is the first W candidates at or after the cursor that are not yet
//!   selected, in stream order.
//! - The step picks up to k unselected positives *that are in the window*, in the positives'
//!   priority order (the method's order: exact matches before substring matches before
//!   lexical ones, ...), so every pick is visible in the prompt.
//! - *Refresh*: after a full step (k picks) the cursor stays where it is: the picked segments
//!   move to Selected-So-Far and the window refills with the next unselected candidates, so
//!   positives left in the window (a window may hold more than k) are shown again.
//! - *Slide*: after a step with fewer than k picks (none included) the window held no further
//!   positive, and the cursor moves past the window's last candidate; a step without picks
//!   has an empty target selection with sufficiency false, which teaches the agent to pass
//!   over irrelevant windows.
//!
//! The rule depends only on the number of picks, so an inference loop can apply it to the
//! agent's own actions without knowing the positives.
//!
//! **Sufficiency and stopping.** Only positives inside the candidate stream can be picked
//! ([`crate::sft::reachable_positives`] first puts the nearest ancestor in the stream in
//! place of a positive outside it, where there is one); the others still count. Sufficiency
//! becomes true once the picked positives number at least ⌈u·|P|⌉ (at least one), P every
//! distinct positive given, so with u = 1 a positive that can never be shown keeps the
//! trajectory insufficient rather than ending it sufficient without that evidence. The
//! trajectory stops at the first sufficient step, after T_max steps, or when the window comes
//! up empty (the stream is exhausted).
//!
//! **Weights.** A step whose picks are all lexical (Jaccard fallback) positives gets
//! `lexical_weight`, any other step with picks 1.0. An empty-selection step gets
//! `lexical_weight` when every positive of the pool is lexical (the "nothing here" label is
//! then as uncertain as the pool), else 1.0.
//!
//! Degenerate inputs — no candidates, or no positive in the stream — give an empty trajectory
//! (no steps, not sufficient): such a question yields no iteration samples.

use crate::options::LabelOptions;

use crate::positives::Positives;

/// Values of a size preset (HSEQ 9.2/9.3): k, the candidate cap and the token budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub top_k: u32,
    pub max_segments: u32,
    pub max_tokens: u32,
}

impl Preset {
    /// The preset's defaults: `small` (k=2, 48, 3072), `medium` (k=4, 48, 3072), `large`
    /// (k=5, 32, 2048); an unknown name is treated as `small`.
    pub fn named(name: &str) -> Preset {
        match name {
            "medium" => Preset {
                top_k: 4,
                max_segments: 48,
                max_tokens: 3072,
            },
            "large" => Preset {
                top_k: 5,
                max_segments: 32,
                max_tokens: 2048,
            },
            _ => Preset {
                top_k: 2,
                max_segments: 48,
                max_tokens: 3072,
            },
        }
    }

    /// The options' preset with the `top_k` / `max_segments` / `max_tokens` overrides applied.
    pub fn from_options(o: &LabelOptions) -> Preset {
        let p = Preset::named(&o.preset);
        Preset {
            top_k: o.top_k.unwrap_or(p.top_k),
            max_segments: o.max_segments.unwrap_or(p.max_segments),
            max_tokens: o.max_tokens.unwrap_or(p.max_tokens),
        }
    }
}

/// Parameters of trajectory synthesis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrajectoryParams {
    /// Picks per step (k).
    pub k: u32,
    /// Window size W.
    pub window: u32,
    /// Sufficiency threshold u: share of the positive pool to select.
    pub sufficiency: f64,
    /// Step cap T_max.
    pub max_steps: u32,
    /// Weight of a step whose picks are all lexical.
    pub lexical_weight: f64,
}

impl TrajectoryParams {
    /// From the label options, the preset resolved ([`Preset::from_options`]).
    pub fn from_options(o: &LabelOptions) -> TrajectoryParams {
        let preset = Preset::from_options(o);
        TrajectoryParams {
            k: preset.top_k,
            window: o.window.unwrap_or(preset.max_segments),
            sufficiency: o.sufficiency,
            max_steps: o.max_steps,
            lexical_weight: o.lexical_weight,
        }
    }
}

/// One step of a target trajectory; all indices point into S_h.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The candidate window shown, in stream order.
    pub window: Vec<usize>,
    /// Segments selected by earlier steps, in selection order.
    pub selected_before: Vec<usize>,
    /// The target selection (a subset of `window`, priority order; may be empty).
    pub picks: Vec<usize>,
    /// The target sufficiency flag.
    pub sufficient: bool,
    /// Loss weight of the step.
    pub weight: f64,
}

/// A synthesized target trajectory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trajectory {
    pub steps: Vec<Step>,
    /// Whether the last step reached sufficiency.
    pub sufficient: bool,
    /// The step (1-based) that reached sufficiency, 0 when none did.
    pub sufficient_at: u32,
}

impl Trajectory {
    /// All picks, in selection order.
    pub fn selected(&self) -> Vec<usize> {
        self.steps
            .iter()
            .flat_map(|s| s.picks.iter().copied())
            .collect()
    }
}

/// Synthesizes the target trajectory (see the module docs for the window rule).
///
/// `stream` holds the candidate indices into S_h (of length `sh_len`) in stream order,
/// already capped; `positives` indexes S_h too, in priority order.
pub fn synthesize(
    sh_len: usize,
    stream: &[usize],
    positives: &Positives,
    params: &TrajectoryParams,
) -> Trajectory {
    let w = params.window.max(1) as usize;
    let k = params.k.max(1) as usize;
    // Position of each candidate in the stream (first occurrence).
    let mut pos = vec![usize::MAX; sh_len];
    let mut stream_clean: Vec<usize> = Vec::with_capacity(stream.len());
    for &i in stream {
        if i < sh_len && pos[i] == usize::MAX {
            pos[i] = stream_clean.len();
            stream_clean.push(i);
        }
    }
    // The pool: positives inside the stream, deduplicated, in priority order; `total` counts
    // the distinct positives inside it or not.
    let mut in_pool = vec![false; sh_len];
    let mut pool: Vec<(usize, bool)> = Vec::new();
    let mut outside: Vec<usize> = Vec::new();
    for p in &positives.items {
        if p.index >= sh_len || in_pool[p.index] {
            continue;
        }
        if pos[p.index] != usize::MAX {
            in_pool[p.index] = true;
            pool.push((p.index, p.lexical));
        } else if !outside.contains(&p.index) {
            outside.push(p.index);
        }
    }
    let total = pool.len() + outside.len();
    if stream_clean.is_empty() || pool.is_empty() || params.max_steps == 0 {
        return Trajectory::default();
    }
    let u = if params.sufficiency.is_finite() {
        params.sufficiency.clamp(0.0, 1.0)
    } else {
        1.0
    };
    let need = ((u * total as f64).ceil() as usize).clamp(1, total);
    let all_lexical = pool.iter().all(|&(_, lex)| lex);

    let mut selected = vec![false; sh_len];
    let mut order: Vec<usize> = Vec::new();
    let mut cursor = 0usize;
    let mut traj = Trajectory::default();
    while traj.steps.len() < params.max_steps as usize {
        let window: Vec<usize> = stream_clean[cursor.min(stream_clean.len())..]
            .iter()
            .copied()
            .filter(|&i| !selected[i])
            .take(w)
            .collect();
        if window.is_empty() {
            break;
        }
        let picks: Vec<(usize, bool)> = pool
            .iter()
            .copied()
            .filter(|&(i, _)| !selected[i] && window.contains(&i))
            .take(k)
            .collect();
        let weight = if picks.is_empty() {
            if all_lexical {
                params.lexical_weight
            } else {
                1.0
            }
        } else if picks.iter().all(|&(_, lex)| lex) {
            params.lexical_weight
        } else {
            1.0
        };
        let selected_before = order.clone();
        for &(i, _) in &picks {
            selected[i] = true;
            order.push(i);
        }
        if picks.len() < k {
            let last = *window.last().expect("window is not empty");
            cursor = pos[last] + 1;
        }
        let sufficient = order.len() >= need;
        traj.steps.push(Step {
            window,
            selected_before,
            picks: picks.iter().map(|&(i, _)| i).collect(),
            sufficient,
            weight,
        });
        if sufficient {
            traj.sufficient = true;
            traj.sufficient_at = traj.steps.len() as u32;
            break;
        }
    }
    traj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::positives::Positive;

    fn pos(items: &[(usize, bool)]) -> Positives {
        Positives {
            items: items
                .iter()
                .map(|&(index, lexical)| Positive {
                    index,
                    reason: if lexical { "lexical" } else { "exact" }.into(),
                    score: 1.0,
                    lexical,
                })
                .collect(),
            candidates: 0,
            low_confidence: false,
            teacher: None,
        }
    }

    fn params(k: u32, window: u32, u: f64, t: u32) -> TrajectoryParams {
        TrajectoryParams {
            k,
            window,
            sufficiency: u,
            max_steps: t,
            lexical_weight: 0.5,
        }
    }

    #[test]
    fn refresh_keeps_cursor_and_slide_moves_it() {
        let stream: Vec<usize> = (0..10).collect();
        let p = pos(&[(1, false), (2, false), (3, false), (8, false)]);
        let t = synthesize(10, &stream, &p, &params(2, 4, 1.0, 10));
        assert_eq!(t.steps.len(), 3);
        assert_eq!(t.steps[0].window, [0, 1, 2, 3]);
        assert_eq!(t.steps[0].picks, [1, 2]);
        // Refresh after a full step: the cursor stays, the window refills.
        assert_eq!(t.steps[1].window, [0, 3, 4, 5]);
        assert_eq!(t.steps[1].picks, [3]);
        assert_eq!(t.steps[1].selected_before, [1, 2]);
        // Slide after a partial step.
        assert_eq!(t.steps[2].window, [6, 7, 8, 9]);
        assert_eq!(t.steps[2].picks, [8]);
        assert!(t.sufficient);
        assert_eq!(t.sufficient_at, 3);
        assert_eq!(t.selected(), [1, 2, 3, 8]);
    }

    #[test]
    fn degenerate_inputs_give_empty_trajectories() {
        let stream: Vec<usize> = (0..5).collect();
        assert!(
            synthesize(5, &stream, &pos(&[]), &params(2, 4, 1.0, 4))
                .steps
                .is_empty()
        );
        assert!(
            synthesize(5, &[], &pos(&[(1, false)]), &params(2, 4, 1.0, 4))
                .steps
                .is_empty()
        );
        // A positive outside the stream does not count.
        let t = synthesize(5, &[0, 1], &pos(&[(4, false)]), &params(2, 4, 1.0, 4));
        assert!(t.steps.is_empty());
    }
}
