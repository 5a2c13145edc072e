//! Key choice: uniform, zipfian or hotspot access over `0..keys`.

use rand::Rng;

use crate::Distribution;

/// The zipfian exponent (YCSB's usual 0.99).
const ZIPF_EXPONENT: f64 = 0.99;
/// Share of hotspot accesses that go to the hot keys.
const HOT_ACCESS: f64 = 0.8;
/// Share of the keys that are hot.
const HOT_KEYS: f64 = 0.1;

/// Picks keys in `0..keys` with a fixed distribution; zipfian precomputes its CDF once.
#[derive(Clone, Debug)]
pub(crate) struct KeyChooser {
    keys: u32,
    distribution: Distribution,
    zipf_cdf: Vec<f64>,
}

impl KeyChooser {
    /// A chooser over `0..keys` (at least one key).
    pub(crate) fn new(keys: u32, distribution: Distribution) -> Self {
        let zipf_cdf = if distribution == Distribution::Zipfian {
            let mut acc = 0.0;
            let mut cdf: Vec<f64> = (1..=keys)
                .map(|rank| {
                    acc += 1.0 / f64::from(rank).powf(ZIPF_EXPONENT);
                    acc
                })
                .collect();
            for c in &mut cdf {
                *c /= acc;
            }
            cdf
        } else {
            Vec::new()
        };
        KeyChooser { keys: keys.max(1), distribution, zipf_cdf }
    }

    /// One key.
    pub(crate) fn pick<R: Rng>(&self, rng: &mut R) -> u32 {
        match self.distribution {
            Distribution::Uniform => rng.random_range(0..self.keys),
            Distribution::Zipfian => {
                let u: f64 = rng.random();
                (self.zipf_cdf.partition_point(|&c| c < u) as u32).min(self.keys - 1)
            }
            Distribution::Hotspot => {
                let hot = ((f64::from(self.keys) * HOT_KEYS) as u32).max(1);
                if rng.random_bool(HOT_ACCESS) {
                    rng.random_range(0..hot)
                } else {
                    rng.random_range(0..self.keys)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn counts(d: Distribution) -> Vec<u32> {
        let chooser = KeyChooser::new(100, d);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut counts = vec![0u32; 100];
        for _ in 0..20_000 {
            counts[chooser.pick(&mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn distributions_have_their_shape() {
        let uniform = counts(Distribution::Uniform);
        assert!(uniform.iter().all(|&c| (100..=300).contains(&c)), "{uniform:?}");
        let zipf = counts(Distribution::Zipfian);
        assert!(zipf[0] > 5 * zipf[50] && zipf[0] > zipf[1] && zipf.iter().all(|&c| c < 20_000));
        let hot = counts(Distribution::Hotspot);
        let hot_share: u32 = hot[..10].iter().sum();
        assert!((16_000..=18_000).contains(&hot_share), "{hot_share}");
    }
}
