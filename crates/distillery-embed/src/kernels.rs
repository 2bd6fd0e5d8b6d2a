//! Which matrix-product kernels candle's CPU backend runs on this machine.
//!
//! candle's CPU matmul calls the `gemm` crate, which picks its microkernels once, at run time,
//! from the CPU's features: on x86-64 the AVX-512 ones when the CPU has `avx512f` and `gemm`
//! was built with its `x86-v4` feature, else the AVX2 ones when it has `fma`, else scalar code;
//! NEON on aarch64. The workspace turns `x86-v4` on (`gemm` in the root Cargo.toml), and
//! `tests/kernels.rs` fails when the `gemm` that candle links lacks it, so [`cpu_kernels`]
//! names the kernels `gemm` picks. The same binary thus runs AVX-512 kernels on a CPU that has
//! them and AVX2 ones on one that does not: no build per processor.

/// The kernel family candle's CPU matrix products run on this machine: `avx512f`, `avx2+fma`,
/// `neon` or `scalar`.
pub fn cpu_kernels() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            "avx512f"
        } else if std::arch::is_x86_feature_detected!("fma") {
            "avx2+fma"
        } else {
            "scalar"
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            "neon"
        } else {
            "scalar"
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        "scalar"
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_one_of_the_families() {
        assert!(["avx512f", "avx2+fma", "neon", "scalar"].contains(&super::cpu_kernels()));
    }
}
