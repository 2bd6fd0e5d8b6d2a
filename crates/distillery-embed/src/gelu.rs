//! Exact (erf) GELU on the CPU in straight-line code the compiler vectorises, in place, for
//! the CPU's widest vector unit (through `pulp`, as [`crate::fused`]).
//!
//! candle's `gelu_erf` calls a scalar `erf` per element, which took about a fifth of a
//! one-thread MiniLM pass (docs/benchmarks.md). This one uses the rational approximation of
//! erf that Eigen (and through it TensorFlow and XLA) evaluates for f32: an odd polynomial over
//! an even one on the input clamped to [-4, 4], within a few units in the last place of f32's
//! erf. On other devices the op is candle's own `gelu_erf`.

use candle_core::{CpuStorage, InplaceOp1, Layout, Result, Tensor};
use pulp::{Arch, Simd, WithSimd};

/// erf(x) for f32, Eigen's `generic_fast_erf_float`.
#[inline(always)]
fn erf(x: f32) -> f32 {
    // Plain products and sums: `mul_add` is a library call on a CPU baseline without FMA.
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_600_2e-3;
    p = x2 * p + -1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    x * p / q
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

struct GeluErf;

impl InplaceOp1 for GeluErf {
    fn name(&self) -> &'static str {
        "gelu-erf-vectorised"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        match (storage, layout.contiguous_offsets()) {
            (CpuStorage::F32(v), Some((a, b))) => {
                Arch::new().dispatch(GeluAll(&mut v[a..b]));
                Ok(())
            }
            (CpuStorage::F32(_), None) => candle_core::bail!("gelu-erf-vectorised: strided"),
            (other, _) => Err(candle_core::Error::UnsupportedDTypeForOp(
                candle_core::backend::BackendStorage::dtype(other),
                "gelu-erf-vectorised",
            )),
        }
    }
}

/// GELU over a slice, compiled by `pulp` for the CPU's widest vector unit (see
/// [`crate::fused`]).
struct GeluAll<'a>(&'a mut [f32]);

impl WithSimd for GeluAll<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        for x in self.0.iter_mut() {
            *x = gelu(*x);
        }
    }
}

/// `x · Φ(x)` element-wise: [`GeluErf`] in `x`'s own storage on the CPU for a contiguous f32
/// tensor (a product's output, not shared), candle's `gelu_erf` otherwise.
pub fn gelu_erf(x: Tensor) -> Result<Tensor> {
    if x.device().is_cpu() && x.dtype() == candle_core::DType::F32 && x.is_contiguous() {
        x.inplace_op1(&GeluErf)?;
        Ok(x)
    } else {
        x.gelu_erf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn matches_candles_exact_gelu_to_f32_precision() {
        let xs: Vec<f32> = (-120_000..=120_000).map(|i| i as f32 * 1e-4).collect();
        let t = Tensor::new(xs.as_slice(), &Device::Cpu).unwrap();
        let ours = gelu_erf(t.copy().unwrap())
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let theirs = t.gelu_erf().unwrap().to_vec1::<f32>().unwrap();
        let worst = ours
            .iter()
            .zip(&theirs)
            .zip(&xs)
            .map(|((a, b), x)| (a - b).abs() / x.abs().max(1.0))
            .fold(0f32, f32::max);
        assert!(worst < 5e-7, "largest relative difference {worst}");
        assert_eq!(gelu(0.0), 0.0);
        assert!((gelu(10.0) - 10.0).abs() < 1e-5);
        assert!(gelu(-10.0).abs() < 1e-5);
    }
}
