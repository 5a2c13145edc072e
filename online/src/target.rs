//! `kafka://BROKERS/TOPIC`: where transactions are published and read.

use crate::OnlineError;

/// A parsed `kafka://host:port[,host:port...]/TOPIC`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnlineTarget {
    /// Bootstrap servers, `host:port[,host:port...]`.
    pub brokers: String,
    /// The topic of transactions.
    pub topic: String,
}

impl OnlineTarget {
    /// Parses `kafka://BROKERS/TOPIC`.
    ///
    /// # Errors
    /// [`OnlineError::BadTarget`] for another scheme, no broker or no topic.
    pub fn parse(text: &str) -> Result<OnlineTarget, OnlineError> {
        let bad = |m: &str| OnlineError::BadTarget { text: text.to_string(), message: m.to_string() };
        let rest = text.strip_prefix("kafka://").ok_or_else(|| bad("use kafka://BROKER:PORT/TOPIC"))?;
        let (brokers, topic) =
            rest.split_once('/').ok_or_else(|| bad("no topic (kafka://BROKER:PORT/TOPIC)"))?;
        if brokers.is_empty() {
            return Err(bad("no broker"));
        }
        let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if topic.is_empty() || topic.len() > 200 || !topic.chars().all(legal) {
            return Err(bad("the topic must be 1 to 200 of the characters a-z A-Z 0-9 . _ -"));
        }
        Ok(OnlineTarget { brokers: brokers.to_string(), topic: topic.to_string() })
    }

    /// The topic verdicts go to unless another is named: `TOPIC.results`.
    pub fn default_results_topic(&self) -> String {
        format!("{}.results", self.topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_bad_ones_say_why() {
        let t = OnlineTarget::parse("kafka://a:9092,b:9092/txns").unwrap();
        assert_eq!((t.brokers.as_str(), t.topic.as_str()), ("a:9092,b:9092", "txns"));
        assert_eq!(t.default_results_topic(), "txns.results");
        for (text, why) in [
            ("http://a/t", "kafka://"),
            ("kafka://a:9092", "no topic"),
            ("kafka:///t", "no broker"),
            ("kafka://a/t t", "characters"),
        ] {
            let e = OnlineTarget::parse(text).unwrap_err().to_string();
            assert!(e.contains(why) && e.starts_with(text), "{text}: {e}");
        }
    }
}
