//! Online checking on a real Kafka broker (`isocert_testsupport::kafka`: the broker of
//! `ISOCERT_TEST_KAFKA`, or a private tansu; SKIPPED visibly when neither is there).

mod protocol;
mod support;
mod verdicts;
mod watermarks;
