//! Block arithmetic, compiled for AVX-512 (64-bit multiplies) or AVX2 when the CPU has them.
//!
//! Also the per-slot scatter that adds a block's values (or [`ONES`], to count rows) into
//! the accumulators' partial sums.

use crate::column::BLOCK;
use crate::expr::ArithOp;

use super::block::Operand;

/// A block of ones, for counting rows per slot with [`scatter`].
pub(super) static ONES: [i64; BLOCK] = [1; BLOCK];

#[inline(always)]
fn arith_impl(op: ArithOp, a: &mut [i64], b: &Operand) {
    match (op, b) {
        (ArithOp::Add, Operand::Scalar(y)) => a.iter_mut().for_each(|x| *x = x.wrapping_add(*y)),
        (ArithOp::Sub, Operand::Scalar(y)) => a.iter_mut().for_each(|x| *x = x.wrapping_sub(*y)),
        (ArithOp::Mul, Operand::Scalar(y)) => a.iter_mut().for_each(|x| *x = x.wrapping_mul(*y)),
        (_, Operand::RevSub(y)) => a.iter_mut().for_each(|x| *x = y.wrapping_sub(*x)),
        (ArithOp::Add, Operand::Vector(v)) => a
            .iter_mut()
            .zip(v)
            .for_each(|(x, &y)| *x = x.wrapping_add(y)),
        (ArithOp::Sub, Operand::Vector(v)) => a
            .iter_mut()
            .zip(v)
            .for_each(|(x, &y)| *x = x.wrapping_sub(y)),
        (ArithOp::Mod, Operand::Scalar(y)) => {
            // The divisor is a nonzero literal (`fast_expr`).
            if *y != 0 {
                a.iter_mut().for_each(|x| *x = x.wrapping_rem(*y));
            }
        }
        (ArithOp::Mod, Operand::Vector(v)) => a
            .iter_mut()
            .zip(v)
            .for_each(|(x, &y)| *x = if y == 0 { 0 } else { x.wrapping_rem(y) }),
        (_, Operand::Vector(v)) => a
            .iter_mut()
            .zip(v)
            .for_each(|(x, &y)| *x = x.wrapping_mul(y)),
        (ArithOp::Div, Operand::Scalar(_)) => {}
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn arith_avx512(op: ArithOp, a: &mut [i64], b: &Operand) {
    arith_impl(op, a, b);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn arith_avx2(op: ArithOp, a: &mut [i64], b: &Operand) {
    arith_impl(op, a, b);
}

/// `a = a op b`, wrapping (callers proved that nothing overflows).
pub(super) fn arith(op: ArithOp, a: &mut [i64], b: &Operand) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512dq") {
            // SAFETY: the CPU supports AVX-512F/DQ (checked just above).
            return unsafe { arith_avx512(op, a, b) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { arith_avx2(op, a, b) };
        }
    }
    arith_impl(op, a, b);
}

#[inline(always)]
fn scatter_impl(part: &mut [i64], stride: usize, x: &[i64], slots: &[u32]) {
    // Four interleaved copies of the partial sums, so neighbouring rows of the same group
    // do not wait on each other's store.
    let mut xs = x.chunks_exact(4);
    let mut ss = slots.chunks_exact(4);
    for (v, s) in (&mut xs).zip(&mut ss) {
        part[s[0] as usize] += v[0];
        part[stride + s[1] as usize] += v[1];
        part[2 * stride + s[2] as usize] += v[2];
        part[3 * stride + s[3] as usize] += v[3];
    }
    for (v, s) in xs.remainder().iter().zip(ss.remainder()) {
        part[*s as usize] += v;
    }
}

/// `part[k * stride + slots[j]] += x[j]` with `k = j % 4`; `part` has `4 * stride` entries
/// and every slot is below `stride`, or `stride` is 0 (one copy: every slot indexes
/// `part`).
pub(super) fn scatter(part: &mut [i64], stride: usize, x: &[i64], slots: &[u32]) {
    scatter_impl(part, stride, x, slots);
}
