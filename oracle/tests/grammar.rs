//! A random generator of rows and SQL predicates for the differential tests.
//!
//! Rows have the columns of [`COLUMNS`]; predicates are well-typed PostgreSQL boolean
//! expressions over them (with a small share of deliberately ill-typed ones, which both
//! sides must reject) covering every construct the interpreter implements.

use isocert_history::Scalar;
use rand::Rng;

/// The differential table's columns and their PostgreSQL types (`id` is the primary key).
pub(crate) const COLUMNS: [(&str, &str); 7] = [
    ("id", "bigint"),
    ("i", "bigint"),
    ("j", "bigint"),
    ("f", "double precision"),
    ("s", "text"),
    ("u", "text"),
    ("b", "boolean"),
];

const TEXTS: [&str; 14] = ["", "a", "A", "ab", "aB", "b", "abc", "a%c", "a_c", "x\\y", " a", "é", "Éa", "10"];
const PATTERNS: [&str; 14] =
    ["a%", "%b%", "_", "a_c", "%", "", "A%", "a\\%c", "a\\_c", "%c", "_b%", "é%", "x\\\\y", "1%"];

/// A random row: `id` plus the other columns, each NULL one time in five.
pub(crate) fn row<R: Rng>(rng: &mut R, id: i64) -> Vec<Scalar> {
    let mut out = vec![Scalar::Int(id)];
    for (name, _) in &COLUMNS[1..] {
        if rng.random_bool(0.2) {
            out.push(Scalar::Null);
            continue;
        }
        out.push(match *name {
            "i" | "j" => Scalar::Int(int_value(rng)),
            "f" => Scalar::Float(float_value(rng)),
            "s" | "u" => Scalar::Text(TEXTS[rng.random_range(0..TEXTS.len())].into()),
            _ => Scalar::Bool(rng.random_bool(0.5)),
        });
    }
    out
}

fn int_value<R: Rng>(rng: &mut R) -> i64 {
    match rng.random_range(0..20) {
        0 => i64::MAX,
        1 => i64::MIN,
        2 => 3_000_000_000,
        3 => -2_147_483_648,
        _ => rng.random_range(-6..=6),
    }
}

fn float_value<R: Rng>(rng: &mut R) -> f64 {
    const SPECIAL: [f64; 10] = [0.0, -0.0, 0.1, 1.5, -2.5, 3.0, 1e300, -1e-300, 0.30000000000000004, 2.0];
    match rng.random_range(0..30) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2..=12 => SPECIAL[rng.random_range(0..SPECIAL.len())],
        _ => f64::from(rng.random_range(-12i32..=12)) / 4.0,
    }
}

/// Generates predicates.
pub(crate) struct Grammar<'r, R: Rng> {
    /// The random source.
    pub(crate) rng: &'r mut R,
}

impl<R: Rng> Grammar<'_, R> {
    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.rng.random_range(0..options.len())]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    /// A boolean expression of at most `depth` levels.
    pub(crate) fn cond(&mut self, depth: u32) -> String {
        let leaf = depth == 0 || self.chance(0.35);
        if leaf {
            return self.atom(depth.saturating_sub(1));
        }
        let d = depth - 1;
        match self.rng.random_range(0..10) {
            0..=2 => format!("({} AND {})", self.cond(d), self.cond(d)),
            3..=5 => format!("({} OR {})", self.cond(d), self.cond(d)),
            6 => format!("NOT ({})", self.cond(d)),
            7 => {
                let k = self.pick(&[
                    "IS TRUE",
                    "IS NOT TRUE",
                    "IS FALSE",
                    "IS NOT FALSE",
                    "IS UNKNOWN",
                    "IS NOT UNKNOWN",
                ]);
                format!("({}) {k}", self.cond(d))
            }
            8 => format!("(CASE WHEN {} THEN {} ELSE {} END)", self.cond(d), self.cond(d), self.cond(d)),
            _ => format!("COALESCE({}, {})", self.cond(d), self.pick(&["true", "false", "NULL::boolean"])),
        }
    }

    fn atom(&mut self, depth: u32) -> String {
        let cmp = ["=", "<>", "!=", "<", "<=", ">", ">="];
        match self.rng.random_range(0..22) {
            0..=5 => {
                let op = self.pick(&cmp);
                format!("{} {op} {}", self.num(depth), self.num(depth))
            }
            6..=7 => {
                let op = self.pick(&cmp);
                format!("{} {op} {}", self.text(depth), self.text(depth))
            }
            8 => {
                let not = if self.chance(0.3) { "NOT " } else { "" };
                format!("{} {not}BETWEEN {} AND {}", self.num(depth), self.num(depth), self.num(depth))
            }
            9 => {
                let not = if self.chance(0.3) { "NOT " } else { "" };
                let n = self.rng.random_range(1..5);
                let items: Vec<String> = (0..n).map(|_| self.num_or_null(depth)).collect();
                format!("{} {not}IN ({})", self.num(depth), items.join(", "))
            }
            10 => {
                let not = if self.chance(0.3) { "NOT " } else { "" };
                let items: Vec<String> =
                    (0..self.rng.random_range(1..4)).map(|_| self.text_literal()).collect();
                format!("{} {not}IN ({})", self.text(depth), items.join(", "))
            }
            11 => {
                let col = self.pick(&["i", "j", "f", "s", "u", "b"]);
                let not = if self.chance(0.5) { "NOT " } else { "" };
                format!("{col} IS {not}NULL")
            }
            12..=13 => {
                let op = self.pick(&["LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"]);
                let pattern = self.pick(&PATTERNS).replace('\'', "''");
                let escape = match self.rng.random_range(0..6) {
                    0 => " ESCAPE ''",
                    1 => " ESCAPE '#'",
                    _ => "",
                };
                format!("{} {op} '{pattern}'{escape}", self.text(depth))
            }
            14 => {
                self.pick(&["b", "NOT b", "b = true", "b <> false", "b IS NOT DISTINCT FROM NULL"]).to_owned()
            }
            15 => {
                let not = if self.chance(0.5) { "NOT " } else { "" };
                format!("{} IS {not}DISTINCT FROM {}", self.num(depth), self.num_or_null(depth))
            }
            16 => self.ill_typed(),
            17 => format!(
                "'{}' = {}",
                self.pick(&["1", "2", " 3 ", "-1", "x", "2.5"]),
                self.pick(&["i", "j", "f"])
            ),
            18 => self.pick(&["true", "false", "NULL", "'t'", "'no'"]).to_owned(),
            _ => {
                let op = self.pick(&cmp);
                format!("{} {op} {}", self.num(depth), self.num_literal())
            }
        }
    }

    fn ill_typed(&mut self) -> String {
        self.pick(&[
            "s = 1",
            "i = 'abc'",
            "b + 1 = 2",
            "s + 1 > 0",
            "i LIKE 'a%'",
            "lower(i) = 'a'",
            "f % 2 = 0",
            "i AND b",
        ])
        .to_owned()
    }

    fn num_or_null(&mut self, depth: u32) -> String {
        if self.chance(0.15) {
            "NULL".to_owned()
        } else {
            self.num(depth)
        }
    }

    fn num_literal(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0 => self.pick(&["0.1", "2.5", "-1.25", "1e2", "0.30", "100.000"]).to_owned(),
            1 => self.pick(&["2147483647", "2147483648", "-2147483648", "9223372036854775807"]).to_owned(),
            2 => format!("{}::float8", self.pick(&["0.1", "1.5", "-3", "'NaN'", "'Infinity'"])),
            _ => self.rng.random_range(-6..=6).to_string(),
        }
    }

    /// A numeric expression.
    pub(crate) fn num(&mut self, depth: u32) -> String {
        if depth == 0 || self.chance(0.45) {
            return match self.rng.random_range(0..10) {
                0..=3 => self.pick(&["i", "j"]).to_owned(),
                4..=5 => "f".to_owned(),
                6 => format!("length({})", self.pick(&["s", "u"])),
                _ => self.num_literal(),
            };
        }
        let d = depth - 1;
        match self.rng.random_range(0..13) {
            0..=4 => {
                let op = self.pick(&["+", "-", "*", "/", "%"]);
                let (l, r) = (self.num(d), self.num(d));
                if op == "%"
                    && (l.contains('f') || r.contains('f') || l.contains("float8") || r.contains("float8"))
                {
                    return format!("({l} + {r})");
                }
                format!("({l} {op} {r})")
            }
            5 => format!("-({})", self.num(d)),
            6 => format!("abs({})", self.num(d)),
            7 => format!("(CASE WHEN {} THEN {} ELSE {} END)", self.cond(d), self.num(d), self.num(d)),
            8 => format!("COALESCE({}, {})", self.num(d), self.num(d)),
            9 => format!("NULLIF({}, {})", self.num(d), self.num(d)),
            10 => {
                let ty = self.pick(&["int", "bigint", "double precision", "numeric", "integer", "float8"]);
                if self.chance(0.5) {
                    format!("CAST({} AS {ty})", self.num(d))
                } else {
                    format!("({})::{ty}", self.num(d))
                }
            }
            11 => format!("CAST('{}' AS int)", self.pick(&["12", " 7 ", "-3", "1.5", "x", "99999999999"])),
            _ => format!("(CASE {} WHEN 1 THEN 10 WHEN 2 THEN 20 ELSE 0 END)", self.pick(&["i", "j"])),
        }
    }

    fn text_literal(&mut self) -> String {
        format!("'{}'", self.pick(&TEXTS).replace('\'', "''"))
    }

    /// A text expression.
    pub(crate) fn text(&mut self, depth: u32) -> String {
        if depth == 0 || self.chance(0.5) {
            return if self.chance(0.7) { self.pick(&["s", "u"]).to_owned() } else { self.text_literal() };
        }
        let d = depth - 1;
        match self.rng.random_range(0..6) {
            0 => format!("lower({})", self.text(d)),
            1 => format!("upper({})", self.text(d)),
            2 => format!("CAST({} AS text)", self.num(d)),
            3 => format!("COALESCE({}, {})", self.text(d), self.text(d)),
            4 => format!("(CASE WHEN {} THEN {} ELSE {} END)", self.cond(d), self.text(d), self.text(d)),
            _ => format!("({})::text", self.pick(&["b", "i", "f"])),
        }
    }
}
