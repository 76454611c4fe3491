//! Order statistics over repeated measurements.

/// The `p`-th percentile (0..=100) of `v`, nearest rank; `None` if `v` is
/// empty. NaNs are ignored.
pub fn percentile(v: &[f64], p: f64) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let i = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    Some(s[i.min(s.len() - 1)])
}

/// Median of `v` (`None` if empty).
pub fn median(v: &[f64]) -> Option<f64> {
    percentile(v, 50.0)
}

/// Relative spread of `v`: (max − min) / median, the noise figure quoted
/// beside medians.
pub fn spread(v: &[f64]) -> Option<f64> {
    let m = median(v)?;
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m != 0.0).then(|| (hi - lo) / m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(median(&v), Some(3.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(5.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
        assert_eq!(spread(&[1.0, 2.0, 3.0]), Some(1.0));
    }
}
