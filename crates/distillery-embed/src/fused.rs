//! The encoder's element-wise steps on the CPU, fused and in place, compiled for the widest
//! vector unit the CPU has.
//!
//! candle runs each element-wise step of a layer as an op of its own that allocates its
//! output: the bias after each matrix product, the residual, the padding mask before the
//! softmax; and its softmax calls a scalar `expf` per score. On the CPU, for f32, this module
//! does instead, in the product's own output:
//! - [`add_bias`]: the bias, and the residual when there is one, in one pass;
//! - [`softmax_last_dim`]: the padding mask and the softmax in one pass over each row, with an
//!   exp that vectorises (Cephes' `expf`: range reduction by ln 2, a degree-5 polynomial;
//!   within 2 ulp of the libm exp on the range a softmax uses).
//!
//! Each kernel is plain scalar code handed to `pulp`'s dispatch, which compiles it once per
//! instruction set (AVX-512, AVX2 with FMA, the baseline) and runs the one this CPU has (the
//! same choice `gemm` makes for the products). On other devices and dtypes the functions run
//! candle's own ops.

use candle_core::{CpuStorage, InplaceOp1, InplaceOp2, Layout, Result, Tensor, bail};
use pulp::{Arch, Simd, WithSimd};

/// `y + bias (+ residual)`, in `y`'s storage when it is a CPU f32 tensor of its own (a
/// product's output); `bias` is `[n]` for `y`'s last dimension `n`, `residual` `y`'s shape.
pub fn add_bias(y: Tensor, bias: &Tensor, residual: Option<&Tensor>) -> Result<Tensor> {
    let cpu = y.device().is_cpu() && y.dtype() == candle_core::DType::F32;
    if !cpu || !y.is_contiguous() {
        let y = y.broadcast_add(bias)?;
        return match residual {
            Some(r) => y + r,
            None => Ok(y),
        };
    }
    match residual {
        Some(r) => {
            let r = r.contiguous()?;
            y.inplace_op3(bias, &r, &BiasResidual)?;
        }
        None => y.inplace_op2(bias, &Bias)?,
    }
    Ok(y)
}

/// The softmax over the last dimension of `scores` (`[batch, heads, rows, n]`), after adding
/// `mask` (`[batch, 1, 1, n]`: 0 for a token, a large negative number for padding) when given;
/// in `scores`' storage when it is a CPU f32 tensor of its own (a product's output).
pub fn softmax_last_dim(scores: Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let cpu = scores.device().is_cpu() && scores.dtype() == candle_core::DType::F32;
    if !cpu || !scores.is_contiguous() {
        let s = match mask {
            Some(m) => scores.broadcast_add(m)?,
            None => scores,
        };
        return candle_nn::ops::softmax_last_dim(&s);
    }
    match mask {
        Some(m) => {
            let m = m.contiguous()?;
            scores.inplace_op2(&m, &MaskedSoftmax)?;
        }
        None => scores.inplace_op1(&MaskedSoftmax)?,
    }
    Ok(scores)
}

/// The f32 slice of a contiguous CPU storage, from its layout's offset.
fn slice<'a>(s: &'a CpuStorage, l: &Layout, op: &'static str) -> Result<&'a [f32]> {
    match (s, l.contiguous_offsets()) {
        (CpuStorage::F32(v), Some((a, b))) => Ok(&v[a..b]),
        (CpuStorage::F32(_), None) => bail!("{op}: a strided input"),
        (other, _) => Err(candle_core::Error::UnsupportedDTypeForOp(
            candle_core::backend::BackendStorage::dtype(other),
            op,
        )),
    }
}

/// The mutable f32 slice of a contiguous CPU storage, from its layout's offset.
fn slice_mut<'a>(s: &'a mut CpuStorage, l: &Layout, op: &'static str) -> Result<&'a mut [f32]> {
    match (s, l.contiguous_offsets()) {
        (CpuStorage::F32(v), Some((a, b))) => Ok(&mut v[a..b]),
        (CpuStorage::F32(_), None) => bail!("{op}: a strided output"),
        (other, _) => Err(candle_core::Error::UnsupportedDTypeForOp(
            candle_core::backend::BackendStorage::dtype(other),
            op,
        )),
    }
}

struct Bias;

impl InplaceOp2 for Bias {
    fn name(&self) -> &'static str {
        "bias-in-place"
    }

    fn cpu_fwd(&self, y: &mut CpuStorage, yl: &Layout, b: &CpuStorage, bl: &Layout) -> Result<()> {
        let bias = slice(b, bl, self.name())?;
        let y = slice_mut(y, yl, self.name())?;
        if bias.is_empty() || !y.len().is_multiple_of(bias.len()) {
            bail!("bias-in-place: {} values, bias of {}", y.len(), bias.len());
        }
        Arch::new().dispatch(AddRows {
            y,
            bias,
            residual: None,
        });
        Ok(())
    }
}

struct BiasResidual;

impl candle_core::InplaceOp3 for BiasResidual {
    fn name(&self) -> &'static str {
        "bias-residual-in-place"
    }

    fn cpu_fwd(
        &self,
        y: &mut CpuStorage,
        yl: &Layout,
        b: &CpuStorage,
        bl: &Layout,
        r: &CpuStorage,
        rl: &Layout,
    ) -> Result<()> {
        let bias = slice(b, bl, self.name())?;
        let residual = slice(r, rl, self.name())?;
        let y = slice_mut(y, yl, self.name())?;
        if bias.is_empty() || !y.len().is_multiple_of(bias.len()) || residual.len() != y.len() {
            bail!(
                "bias-residual-in-place: {} values, bias of {}, residual of {}",
                y.len(),
                bias.len(),
                residual.len()
            );
        }
        Arch::new().dispatch(AddRows {
            y,
            bias,
            residual: Some(residual),
        });
        Ok(())
    }
}

/// Each row of `y` (rows of `bias.len()`) gets `bias` and its row of `residual` added.
struct AddRows<'a> {
    y: &'a mut [f32],
    bias: &'a [f32],
    residual: Option<&'a [f32]>,
}

impl WithSimd for AddRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let n = self.bias.len();
        match self.residual {
            Some(res) => {
                for (row, r) in self.y.chunks_exact_mut(n).zip(res.chunks_exact(n)) {
                    for ((y, b), r) in row.iter_mut().zip(self.bias).zip(r) {
                        *y = *y + *b + *r;
                    }
                }
            }
            None => {
                for row in self.y.chunks_exact_mut(n) {
                    for (y, b) in row.iter_mut().zip(self.bias) {
                        *y += *b;
                    }
                }
            }
        }
    }
}

struct MaskedSoftmax;

impl MaskedSoftmax {
    fn run(&self, s: &mut [f32], sl: &Layout, mask: Option<&[f32]>) -> Result<()> {
        let dims = sl.dims();
        let Some(&n) = dims.last() else {
            bail!("softmax: a scalar");
        };
        if n == 0 || !s.len().is_multiple_of(n) {
            bail!("softmax: {} values in rows of {n}", s.len());
        }
        // Rows of one sequence share its mask: `[batch, heads, rows, n]` has
        // `heads * rows` rows a sequence.
        let rows_per_mask = match mask {
            Some(m) => {
                if m.is_empty()
                    || !m.len().is_multiple_of(n)
                    || !(s.len() / n).is_multiple_of(m.len() / n)
                {
                    bail!(
                        "softmax: mask of {} for {} values in rows of {n}",
                        m.len(),
                        s.len()
                    );
                }
                s.len() / m.len()
            }
            None => s.len() / n,
        };
        Arch::new().dispatch(SoftmaxRows {
            s,
            n,
            mask,
            rows_per_mask,
        });
        Ok(())
    }
}

impl InplaceOp1 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "softmax-in-place"
    }

    fn cpu_fwd(&self, s: &mut CpuStorage, sl: &Layout) -> Result<()> {
        let s = slice_mut(s, sl, "softmax-in-place")?;
        self.run(s, sl, None)
    }
}

impl InplaceOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "masked-softmax-in-place"
    }

    fn cpu_fwd(&self, s: &mut CpuStorage, sl: &Layout, m: &CpuStorage, ml: &Layout) -> Result<()> {
        let mask = slice(m, ml, "masked-softmax-in-place")?;
        let s = slice_mut(s, sl, "masked-softmax-in-place")?;
        self.run(s, sl, Some(mask))
    }
}

struct SoftmaxRows<'a> {
    s: &'a mut [f32],
    n: usize,
    mask: Option<&'a [f32]>,
    rows_per_mask: usize,
}

/// Lanes of the row reductions: independent partial maxima and sums, so the compiler may
/// keep them in one vector register (a single running sum would fix the order of the adds).
const LANES: usize = 16;

impl WithSimd for SoftmaxRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let n = self.n;
        for (i, row) in self.s.chunks_exact_mut(n).enumerate() {
            if let Some(m) = self.mask {
                let k = i / self.rows_per_mask;
                for (x, m) in row.iter_mut().zip(&m[k * n..(k + 1) * n]) {
                    *x += *m;
                }
            }
            softmax_row(row);
        }
    }
}

/// One row's softmax, in place.
#[inline(always)]
fn softmax_row(row: &mut [f32]) {
    let mut top = [f32::NEG_INFINITY; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (t, x) in top.iter_mut().zip(c) {
            *t = t.max(*x);
        }
    }
    let max = chunks.remainder().iter().fold(
        top.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        |a, x| a.max(*x),
    );
    let mut sums = [0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (s, x) in sums.iter_mut().zip(c.iter_mut()) {
            *x = exp(*x - max);
            *s += *x;
        }
    }
    let mut sum: f32 = sums.iter().sum();
    for x in chunks.into_remainder() {
        *x = exp(*x - max);
        sum += *x;
    }
    let inv = 1.0 / sum;
    for x in row.iter_mut() {
        *x *= inv;
    }
}

/// `e^x` for the arguments of a softmax (`x ≤ 0`; any `x ≤ 88`), in straight-line code the
/// compiler vectorises: `x = k·ln 2 + r` with `|r| ≤ ln 2 / 2`, Cephes' polynomial for `e^r`,
/// and `2^k` put together from its exponent bits. Below -87.3 (where f32's `e^x` is
/// subnormal) it gives 0.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, the first exact in few bits, so `k·ln2_hi` is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5·2^23 rounds to an integer, which then sits in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let xc = x.clamp(-87.3, 88.0);
    let kr = xc * LOG2E + ROUND;
    let k = kr - ROUND;
    let r = xc - k * LN2_HI - k * LN2_LO;
    let mut p = 1.987_569_2e-4_f32;
    p = p * r + 1.398_2e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    // The rounded integer, from the low bits of `kr`, as the exponent of 2^k.
    let k_bits = (kr.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let two_k = f32::from_bits((k_bits.wrapping_add(127) as u32) << 23);
    if x < -87.3 { 0.0 } else { er * two_k }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn exp_is_within_two_ulp_of_libm_on_a_softmax_range() {
        let mut worst = 0u32;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let (a, b) = (exp(x), x.exp());
            worst = worst.max(a.to_bits().abs_diff(b.to_bits()));
            x += 1e-3;
        }
        assert!(worst <= 2, "{worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(-f32::MAX), 0.0);
        assert!((exp(10.0) - 10f32.exp()).abs() / 10f32.exp() < 1e-6);
    }

    /// Scores of two sequences of 2 heads with rows of 21 (not a multiple of the lanes), the
    /// second sequence padded after 13 tokens.
    fn scores_and_mask() -> (Tensor, Tensor) {
        let d = Device::Cpu;
        let n = 21;
        let s: Vec<f32> = (0..2 * 2 * 3 * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let m: Vec<f32> = (0..2 * n)
            .map(|i| if i >= n + 13 { -f32::MAX } else { 0.0 })
            .collect();
        (
            Tensor::from_vec(s, (2, 2, 3, n), &d).unwrap(),
            Tensor::from_vec(m, (2, 1, 1, n), &d).unwrap(),
        )
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(&b)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
    }

    #[test]
    fn masked_softmax_matches_candles_ops() {
        let (s, m) = scores_and_mask();
        let theirs = candle_nn::ops::softmax_last_dim(&s.broadcast_add(&m).unwrap()).unwrap();
        let ours = softmax_last_dim(s.copy().unwrap(), Some(&m)).unwrap();
        assert!(
            max_diff(&ours, &theirs) < 1e-6,
            "{}",
            max_diff(&ours, &theirs)
        );
        // Padding gets nothing; every row sums to 1.
        let rows = ours.flatten_to(2).unwrap().to_vec2::<f32>().unwrap();
        for (i, r) in rows.iter().enumerate() {
            assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            if i >= rows.len() / 2 {
                assert!(r[13..].iter().all(|x| *x == 0.0), "row {i}: {r:?}");
            }
        }
        let plain = softmax_last_dim(s.copy().unwrap(), None).unwrap();
        let theirs = candle_nn::ops::softmax_last_dim(&s).unwrap();
        assert!(max_diff(&plain, &theirs) < 1e-6);
    }

    /// The masked softmax of `s` (rows of 21) and `s` plus `bias` and itself, both run on
    /// `simd`'s build of the kernels.
    fn on<S: Simd>(simd: S, s: &[f32], m: &[f32], bias: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (mut a, mut b) = (s.to_vec(), s.to_vec());
        let rows_per_mask = a.len() / m.len();
        simd.vectorize(SoftmaxRows {
            s: &mut a,
            n: 21,
            mask: Some(m),
            rows_per_mask,
        });
        simd.vectorize(AddRows {
            y: &mut b,
            bias,
            residual: Some(s),
        });
        (a, b)
    }

    /// Each instruction set's build of a kernel gives what the baseline's gives, on every
    /// set this CPU has (the dispatch picks only the widest).
    #[test]
    fn every_instruction_set_computes_the_same() {
        let (s, m) = scores_and_mask();
        let s = s.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let m = m.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let bias: Vec<f32> = (0..21).map(|i| i as f32 * 0.5 - 3.0).collect();
        let scalar = on(pulp::Scalar::new(), &s, &m, &bias);
        let mut sets = 0;
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(v3) = pulp::x86::V3::try_new() {
                assert_eq!(on(v3, &s, &m, &bias), scalar, "avx2");
                sets += 1;
            }
            if let Some(v4) = pulp::x86::V4::try_new() {
                assert_eq!(on(v4, &s, &m, &bias), scalar, "avx-512");
                sets += 1;
            }
        }
        eprintln!("{sets} vector instruction sets checked against the baseline's build");
    }

    #[test]
    fn bias_and_residual_match_candles_ops() {
        let d = Device::Cpu;
        let y =
            Tensor::from_vec((0..5 * 19).map(|i| i as f32 * 0.25).collect(), (5, 19), &d).unwrap();
        let b = Tensor::from_vec((0..19).map(|i| 1.0 - i as f32).collect(), 19, &d).unwrap();
        let r =
            Tensor::from_vec((0..5 * 19).map(|i| (i % 7) as f32).collect(), (5, 19), &d).unwrap();
        let theirs = (y.broadcast_add(&b).unwrap() + &r).unwrap();
        let ours = add_bias(y.copy().unwrap(), &b, Some(&r)).unwrap();
        assert_eq!(max_diff(&ours, &theirs), 0.0);
        let ours = add_bias(y.copy().unwrap(), &b, None).unwrap();
        assert_eq!(max_diff(&ours, &y.broadcast_add(&b).unwrap()), 0.0);
        // A bias that does not fit the rows is an error, not a wrong answer.
        let short = Tensor::from_vec(vec![1f32; 4], 4, &d).unwrap();
        assert!(add_bias(y.copy().unwrap(), &short, None).is_err());
    }
}
