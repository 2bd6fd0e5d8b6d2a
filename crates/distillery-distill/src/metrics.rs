//! Answer metrics: exact match and token F1 after SQuAD-style normalisation (the label
//! crate's [`normalize_answer`]: case, punctuation, articles, spacing, number forms).

use std::collections::HashMap;

use distillery_label::normalize::normalize_answer;

/// Token F1 of a prediction against one gold answer.
pub fn f1(prediction: &str, gold: &str) -> f64 {
    let p = normalize_answer(prediction);
    let g = normalize_answer(gold);
    let pt: Vec<&str> = p.split_whitespace().collect();
    let gt: Vec<&str> = g.split_whitespace().collect();
    if pt.is_empty() || gt.is_empty() {
        return f64::from(u8::from(pt == gt));
    }
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for t in &gt {
        *counts.entry(t).or_default() += 1;
    }
    let mut same = 0;
    for t in &pt {
        if let Some(c) = counts.get_mut(t)
            && *c > 0
        {
            *c -= 1;
            same += 1;
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / pt.len() as f64;
    let recall = same as f64 / gt.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Exact match after normalisation.
pub fn exact(prediction: &str, gold: &str) -> bool {
    normalize_answer(prediction) == normalize_answer(gold)
}

/// The best F1 over the gold answers (0 without any).
pub fn best_f1(prediction: &str, golds: &[String]) -> f64 {
    golds.iter().map(|g| f1(prediction, g)).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squad_style_scores() {
        assert!(exact("The Beatles!", "beatles"));
        assert_eq!(f1("the capital of Austria", "Austria"), 0.5);
        assert_eq!(f1("Vienna", "Salzburg"), 0.0);
        assert_eq!(
            best_f1("Vienna", &["Salzburg".into(), "vienna".into()]),
            1.0
        );
        assert_eq!(best_f1("x", &[]), 0.0);
    }
}
