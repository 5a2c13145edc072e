//! Seeded randomness for isocert: one generator and one set of key distributions, used by
//! the history generator (`isocert gen`), the test client (`isocert run`) and the tests.
//!
//! - [`SeededRng`] is PCG (rand_pcg's `Pcg64Mcg`), documented as portable and reproducible:
//!   the same seed gives the same stream on every platform and build, so a seed printed by a
//!   run replays it. Measured with callgrind on `isocert gen --chronos --distribution uniform
//!   --txns 20000 --out /dev/null`: 311.2 M instructions with PCG, 321.6 M with ChaCha8, and
//!   293.4 M with the generator's former hand-written SplitMix64 (the 6% is the price of one
//!   unbiased, shared implementation).
//! - [`KeyChooser`] picks keys in `0..n` by a [`Distribution`]. Zipfian is exact: up to
//!   [`ZIPF_TABLE_KEYS`] keys by binary search in a table of cumulative probabilities (8 bytes
//!   per key), beyond by [`rand_distr::Zipf`]'s rejection sampler (no table). The table is kept
//!   because the sampler's `powf` per draw doubled `isocert gen --chronos --txns 20000`'s
//!   instructions (657 M vs 332 M, callgrind).

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution as _, Zipf};

pub use rand;

/// The seeded random source every isocert component uses.
pub type SeededRng = rand_pcg::Pcg64Mcg;

/// A [`SeededRng`] from a seed.
pub fn seeded(seed: u64) -> SeededRng {
    SeededRng::seed_from_u64(seed)
}

/// Up to this many keys, zipfian picks by a table of cumulative probabilities.
pub const ZIPF_TABLE_KEYS: u64 = 1 << 20;

/// The zipfian exponent (YCSB's default).
pub const ZIPF_EXPONENT: f64 = 0.99;
/// Under [`Distribution::Hotspot`], the share of accesses that go to the hot keys.
pub const HOT_ACCESS: f64 = 0.8;
/// Under [`Distribution::Hotspot`], the share of the keys that are hot (at least one key).
pub const HOT_KEYS: f64 = 0.1;

/// How operations pick the key (object) they touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Distribution {
    /// Every key equally likely.
    #[default]
    Uniform,
    /// Zipfian with exponent 0.99: key `k` has probability proportional to `1/(k+1)^0.99`,
    /// so key 0 is the hottest.
    Zipfian,
    /// YCSB's hotspot: 80% of the accesses go to the first 10% of the keys (the hot set, at
    /// least one key), the other 20% uniformly to the remaining keys (the cold set).
    Hotspot,
}

impl Distribution {
    /// Every distribution, in the order `--help` lists them.
    pub const ALL: [Distribution; 3] = [Distribution::Uniform, Distribution::Zipfian, Distribution::Hotspot];

    /// The command-line spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian => "zipfian",
            Distribution::Hotspot => "hotspot",
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A distribution name that is not one of [`Distribution::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownDistribution(pub String);

impl fmt::Display for UnknownDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown distribution {:?}: use uniform, zipfian or hotspot", self.0)
    }
}

impl std::error::Error for UnknownDistribution {}

impl FromStr for Distribution {
    type Err = UnknownDistribution;

    fn from_str(s: &str) -> Result<Self, UnknownDistribution> {
        match s {
            "uniform" => Ok(Distribution::Uniform),
            "zipfian" | "zipf" => Ok(Distribution::Zipfian),
            "hotspot" => Ok(Distribution::Hotspot),
            _ => Err(UnknownDistribution(s.to_string())),
        }
    }
}

/// Picks keys in `0..n` by a [`Distribution`].
#[derive(Clone, Debug)]
pub struct KeyChooser {
    n: u64,
    shape: Shape,
}

#[derive(Clone, Debug)]
enum Shape {
    Uniform,
    /// `cdf[k]`: the probability of a key `<= k`, scaled to `u64`.
    ZipfianTable {
        cdf: Vec<u64>,
    },
    ZipfianSampler(Zipf<f64>),
    Hotspot {
        hot: u64,
    },
}

impl KeyChooser {
    /// A chooser over `0..n` (`n` of 0 is taken as 1).
    pub fn new(distribution: Distribution, n: u64) -> Self {
        let n = n.max(1);
        let shape = match distribution {
            Distribution::Uniform => Shape::Uniform,
            Distribution::Zipfian if n <= ZIPF_TABLE_KEYS => Shape::ZipfianTable { cdf: zipf_cdf(n) },
            Distribution::Zipfian => Shape::ZipfianSampler(
                Zipf::new(n as f64, ZIPF_EXPONENT).expect("n >= 1 and a positive exponent"),
            ),
            Distribution::Hotspot => Shape::Hotspot { hot: ((n as f64 * HOT_KEYS) as u64).clamp(1, n) },
        };
        KeyChooser { n, shape }
    }

    /// The number of keys.
    pub fn keys(&self) -> u64 {
        self.n
    }

    /// One key in `0..n`.
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match &self.shape {
            Shape::Uniform => rng.random_range(0..self.n),
            Shape::ZipfianTable { cdf } => {
                let u = rng.next_u64();
                (cdf.partition_point(|&c| c < u) as u64).min(self.n - 1)
            }
            // Zipf samples ranks 1..=n as floats.
            Shape::ZipfianSampler(zipf) => (zipf.sample(rng) as u64).clamp(1, self.n) - 1,
            Shape::Hotspot { hot } => {
                if *hot == self.n || rng.random_bool(HOT_ACCESS) {
                    rng.random_range(0..*hot)
                } else {
                    rng.random_range(*hot..self.n)
                }
            }
        }
    }
}

/// The cumulative zipfian probabilities of keys `0..n`, scaled to `u64` (the last is `u64::MAX`).
fn zipf_cdf(n: u64) -> Vec<u64> {
    let total: f64 = (1..=n).map(|rank| 1.0 / (rank as f64).powf(ZIPF_EXPONENT)).sum();
    let mut acc = 0.0;
    let mut cdf: Vec<u64> = (1..=n)
        .map(|rank| {
            acc += 1.0 / (rank as f64).powf(ZIPF_EXPONENT);
            ((acc / total) * u64::MAX as f64) as u64
        })
        .collect();
    if let Some(last) = cdf.last_mut() {
        *last = u64::MAX;
    }
    cdf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(d: Distribution, n: u64, picks: u32) -> Vec<u32> {
        let chooser = KeyChooser::new(d, n);
        let mut rng = seeded(7);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..picks {
            counts[chooser.pick(&mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn uniform_is_flat() {
        let c = counts(Distribution::Uniform, 100, 20_000);
        assert!(c.iter().all(|&c| (100..=300).contains(&c)), "{c:?}");
    }

    #[test]
    fn zipfian_matches_its_exact_probabilities() {
        let n = 50;
        let picks = 200_000;
        let c = counts(Distribution::Zipfian, n, picks);
        let total: f64 = (1..=n).map(|k| 1.0 / (k as f64).powf(ZIPF_EXPONENT)).sum();
        for (k, &seen) in c.iter().enumerate() {
            let expected = f64::from(picks) / ((k + 1) as f64).powf(ZIPF_EXPONENT) / total;
            let sd = expected.sqrt();
            assert!((f64::from(seen) - expected).abs() < 5.0 * sd + 5.0, "key {k}: {seen} vs {expected:.0}");
        }
    }

    #[test]
    fn the_zipfian_sampler_beyond_the_table_agrees_with_the_table() {
        let n = 50;
        let table = KeyChooser::new(Distribution::Zipfian, n);
        let sampler =
            KeyChooser { n, shape: Shape::ZipfianSampler(Zipf::new(n as f64, ZIPF_EXPONENT).unwrap()) };
        let mut rng = seeded(3);
        let (mut a, mut b) = (vec![0f64; n as usize], vec![0f64; n as usize]);
        for _ in 0..200_000 {
            a[table.pick(&mut rng) as usize] += 1.0;
            b[sampler.pick(&mut rng) as usize] += 1.0;
        }
        for k in 0..n as usize {
            assert!((a[k] - b[k]).abs() < 6.0 * a[k].max(b[k]).sqrt() + 5.0, "key {k}: {} vs {}", a[k], b[k]);
        }
    }

    #[test]
    fn hotspot_sends_eighty_percent_to_the_hot_tenth_and_the_rest_to_the_cold_keys() {
        let c = counts(Distribution::Hotspot, 100, 20_000);
        let hot: u32 = c[..10].iter().sum();
        assert!((15_600..=16_400).contains(&hot), "{hot}");
        assert!(c[10..].iter().all(|&c| c > 0), "every cold key is reached");
    }

    #[test]
    fn one_key_is_always_key_zero() {
        for d in Distribution::ALL {
            assert_eq!(counts(d, 1, 100), vec![100], "{d}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_keys() {
        for d in Distribution::ALL {
            assert_eq!(counts(d, 1000, 5_000), counts(d, 1000, 5_000));
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for d in Distribution::ALL {
            assert_eq!(d.as_str().parse::<Distribution>(), Ok(d));
        }
        let e = "gauss".parse::<Distribution>().unwrap_err();
        assert_eq!(e.to_string(), "unknown distribution \"gauss\": use uniform, zipfian or hotspot");
    }
}
