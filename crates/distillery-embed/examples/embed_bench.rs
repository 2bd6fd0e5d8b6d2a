//! Embedding throughput of [`distillery_embed::Embedder`] alone, for `scripts/bench-index.sh`
//! and GPU checks against sentence-transformers on the same card.
//!
//! `embed_bench MODEL DEVICE TEXTS.json BATCH [OUT.f32]`: embeds the JSON list of texts in
//! batches of BATCH, shortest first as the index stage orders them (sentence-transformers
//! orders by length too), after one warm-up batch, and prints `SECONDS TEXTS`. OUT gets the
//! unit vectors in the input's order as little-endian f32, for comparing with another
//! implementation. `EMBED_PER_PASS=N` runs N texts per forward pass instead of what
//! `Embedder::embed` picks.

use std::io::Write;
use std::time::Instant;

/// The `distillery` binary's allocator, so the figures are the index stage's (jemalloc with
/// the workspace's `thp:always`: candle's matrix products ask for zeroed blocks).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, device, texts, batch, rest @ ..] = args.as_slice() else {
        return Err("usage: embed_bench MODEL DEVICE TEXTS.json BATCH [OUT.f32]".into());
    };
    let batch: usize = batch.parse()?;
    let texts: Vec<String> = serde_json::from_slice(&std::fs::read(texts)?)?;
    eprintln!("cpu matrix kernels: {}", distillery_embed::cpu_kernels());
    let e = distillery_embed::Embedder::load_on(model, device)?;
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let sorted: Vec<&str> = order.iter().map(|&i| texts[i].as_str()).collect();
    e.embed(&sorted[..batch.min(sorted.len())])?;
    let t = Instant::now();
    let mut vectors = Vec::with_capacity(texts.len());
    let per_pass: Option<usize> = std::env::var("EMBED_PER_PASS")
        .ok()
        .map(|n| n.parse())
        .transpose()?;
    for chunk in sorted.chunks(batch.max(1)) {
        vectors.extend(match per_pass {
            Some(n) => e.embed_in(chunk, n)?,
            None => e.embed(chunk)?,
        });
    }
    println!("{:.3} {}", t.elapsed().as_secs_f64(), texts.len());
    if let Some(out) = rest.first() {
        let mut by_input = vec![Vec::new(); texts.len()];
        for (v, &i) in vectors.into_iter().zip(&order) {
            by_input[i] = v;
        }
        let mut f = std::io::BufWriter::new(std::fs::File::create(out)?);
        for x in by_input.iter().flatten() {
            f.write_all(&x.to_le_bytes())?;
        }
        f.flush()?;
    }
    Ok(())
}
