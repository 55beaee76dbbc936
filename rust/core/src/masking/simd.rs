//! Run-time choice of the instruction set for the maskers' hot loops. The loops are plain Rust
//! written to auto-vectorise; each dispatching function compiles one body several times (baseline,
//! AVX2, AVX-512) and picks the widest the CPU has; what the compiler does not vectorise has
//! explicit kernels in `avx2.rs`. Integer ops and IEEE float ops without contraction (Rust never
//! fuses a * b + c): every level gives the same bits, which `tests::simd_levels_agree` checks by
//! forcing each lower level (and the Python tests through `DENSE_PT_SIMD=baseline`).
use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Baseline = 1,
    Avx2 = 2,
    Avx512 = 3,
}

/// 0 = not detected yet; otherwise a `Level`.
static DETECTED: AtomicU8 = AtomicU8::new(0);
/// A cap set by `force_level` (tests, benchmarks); 0 = none.
static CAP: AtomicU8 = AtomicU8::new(0);

/// The CPU's level, capped by the environment variable `DENSE_PT_SIMD` (`baseline`, `avx2`,
/// `avx512`) when set.
fn detect() -> Level {
    let cpu = detect_cpu();
    match std::env::var("DENSE_PT_SIMD").as_deref() {
        Ok("baseline") => Level::Baseline,
        Ok("avx2") => cpu.min(Level::Avx2),
        _ => cpu,
    }
}

fn detect_cpu() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("popcnt")
            && std::arch::is_x86_feature_detected!("lzcnt")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            return Level::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("popcnt")
            && std::arch::is_x86_feature_detected!("lzcnt")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            return Level::Avx2;
        }
    }
    Level::Baseline
}

fn from_u8(v: u8) -> Level {
    match v {
        3 => Level::Avx512,
        2 => Level::Avx2,
        _ => Level::Baseline,
    }
}

/// The level the hot loops run at: the CPU's, lowered by `force_level`.
#[inline]
pub fn level() -> Level {
    let mut d = DETECTED.load(Ordering::Relaxed);
    if d == 0 {
        d = detect() as u8;
        DETECTED.store(d, Ordering::Relaxed);
    }
    let cap = CAP.load(Ordering::Relaxed);
    from_u8(if cap != 0 { d.min(cap) } else { d })
}

/// Cap the level (None lifts the cap): for tests that compare the levels bit for bit, and for
/// benchmarks. Process-wide.
pub fn force_level(cap: Option<Level>) {
    CAP.store(cap.map_or(0, |l| l as u8), Ordering::Relaxed);
}

/// Define `$name` dispatching to one `#[inline(always)]` body compiled per level.
macro_rules! multiversion {
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident $(<$($lt:lifetime),*>)? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)?
        => $body:ident
    ) => {
        $(#[$meta])*
        $vis fn $name $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt,f16c")]
                unsafe fn avx2 $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? { $body($($arg),*) }
                #[target_feature(
                    enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,bmi1,bmi2,popcnt,lzcnt,f16c"
                )]
                unsafe fn avx512 $(<$($lt),*>)? ($($arg: $ty),*) $(-> $ret)? { $body($($arg),*) }
                match $crate::masking::simd::level() {
                    // SAFETY: the level says the CPU has these features.
                    $crate::masking::simd::Level::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: the level says the CPU has these features.
                    $crate::masking::simd::Level::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::masking::simd::Level::Baseline => {}
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use multiversion;
