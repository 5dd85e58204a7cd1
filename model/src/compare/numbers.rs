//! The numbers behind a finding or a threshold, for machines: A, B, the change, the change in
//! percent, the noise band in percent, and whether the change is beyond it (`compare --json`).

use super::noise::{NoiseSource, Significance};
use serde::Serialize;

/// A value in A and B and what the noise says about its change; `None` where not known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Numbers {
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// `b - a`, in the unit of A and B; `None` when either side is unknown.
    pub change: Option<f64>,
    /// `(b - a) / |a|` in percent; `None` when A is zero or either side is unknown.
    pub delta_pct: Option<f64>,
    /// The change noise alone could explain, ± percent; `None` when not measurable.
    pub noise_pct: Option<f64>,
    pub beyond_noise: Option<bool>,
    /// What the noise was measured over: `repeats` (runs) or `intervals`; `None` when not
    /// measurable.
    pub noise_source: Option<NoiseSource>,
}

impl Numbers {
    /// A and B with their noise judgement, if one was made.
    pub fn of(a: Option<f64>, b: Option<f64>, significance: Option<Significance>) -> Numbers {
        Numbers {
            a,
            b,
            change: a.zip(b).map(|(a, b)| b - a),
            delta_pct: a
                .zip(b)
                .filter(|(a, _)| *a != 0.0)
                .map(|(a, b)| (b - a) / a.abs() * 100.0),
            noise_pct: significance.map(|s| s.band * 100.0),
            beyond_noise: significance.map(|s| s.beyond_noise),
            noise_source: significance.map(|s| s.source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_and_noise_are_in_percent() {
        let significance = Significance {
            change: -0.1,
            band: 0.05,
            beyond_noise: true,
            samples: (5, 5),
            source: NoiseSource::Repeats,
        };
        let numbers = Numbers::of(Some(1000.0), Some(900.0), Some(significance));
        assert_eq!(numbers.change, Some(-100.0));
        assert_eq!(numbers.delta_pct, Some(-10.0));
        assert_eq!(numbers.noise_pct, Some(5.0));
        assert_eq!(numbers.beyond_noise, Some(true));
        assert_eq!(numbers.noise_source, Some(NoiseSource::Repeats));
        let unknown = Numbers::of(Some(0.0), Some(3.0), None);
        assert_eq!(unknown.change, Some(3.0));
        assert_eq!((unknown.delta_pct, unknown.noise_pct), (None, None));
        assert_eq!(Numbers::of(None, Some(3.0), None).change, None);
        assert_eq!(unknown.beyond_noise, None);
    }
}
