//! A small seeded random source and the key distributions.
//!
//! The generator carries its own PRNG (SplitMix64) so that a seed gives the same bytes
//! on every platform and every future build: no dependency can change the stream.

use crate::Distribution;

/// SplitMix64: tiny, fast and good enough for workload shapes (not for cryptography).
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`), by multiply-shift (bias below 2^-32 for our sizes).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// A uniform float in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

/// Picks keys in `0..n` by a [`Distribution`].
#[derive(Clone, Debug)]
pub(crate) enum KeyChooser {
    Uniform { n: usize },
    Zipfian(Zipfian),
    Hotspot { n: usize, hot: usize },
}

impl KeyChooser {
    pub(crate) fn new(distribution: Distribution, n: usize) -> Self {
        match distribution {
            Distribution::Uniform => KeyChooser::Uniform { n },
            Distribution::Zipfian => KeyChooser::Zipfian(Zipfian::new(n, 0.99)),
            Distribution::Hotspot => KeyChooser::Hotspot { n, hot: (n / 10).max(1) },
        }
    }

    pub(crate) fn pick(&self, rng: &mut Rng) -> usize {
        match self {
            KeyChooser::Uniform { n } => rng.below(*n),
            KeyChooser::Zipfian(z) => z.pick(rng),
            KeyChooser::Hotspot { n, hot } => {
                if *hot == *n || rng.chance(0.8) {
                    rng.below(*hot)
                } else {
                    hot + rng.below(n - hot)
                }
            }
        }
    }
}

/// Zipfian with exponent `theta`: key `k` has probability proportional to `1/(k+1)^theta`.
/// Picks by binary search in the cumulative distribution: O(n) set-up and memory, O(log n)
/// per pick, exact (no approximation).
#[derive(Clone, Debug)]
pub(crate) struct Zipfian {
    /// `cdf[k]`: the probability of a key `<= k`, scaled to `u64`.
    cdf: Vec<u64>,
}

impl Zipfian {
    fn new(n: usize, theta: f64) -> Self {
        let weights: Vec<f64> = (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<u64> = weights
            .iter()
            .map(|w| {
                acc += w;
                ((acc / total) * u64::MAX as f64) as u64
            })
            .collect();
        if let Some(last) = cdf.last_mut() {
            *last = u64::MAX;
        }
        Zipfian { cdf }
    }

    fn pick(&self, rng: &mut Rng) -> usize {
        let u = rng.next_u64();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b, mut c) = (Rng::new(7), Rng::new(7), Rng::new(8));
        let xs: Vec<u64> = (0..10).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..10).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..10).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn distributions_stay_in_range_and_have_their_shape() {
        let mut rng = Rng::new(1);
        for d in [Distribution::Uniform, Distribution::Zipfian, Distribution::Hotspot] {
            let chooser = KeyChooser::new(d, 100);
            let mut counts = [0usize; 100];
            for _ in 0..20_000 {
                counts[chooser.pick(&mut rng)] += 1;
            }
            let first_ten: usize = counts[..10].iter().sum();
            match d {
                Distribution::Uniform => assert!((1_400..2_600).contains(&first_ten), "{first_ten}"),
                Distribution::Hotspot => assert!((15_000..17_000).contains(&first_ten), "{first_ten}"),
                Distribution::Zipfian => {
                    assert!(first_ten > 9_000, "{first_ten}");
                    assert!(counts[0] > counts[50] * 10);
                }
            }
        }
        let one = KeyChooser::new(Distribution::Zipfian, 1);
        assert_eq!(one.pick(&mut rng), 0);
    }
}
